/* imageset.h - the per-image set backends png0, bmp and jpeg (spec: formats/imageset.md).
 *
 * The backends themselves are the tables fmt_backend_png0, fmt_backend_bmp and fmt_backend_jpeg
 * declared in backend.h. The vtable's r_read and r_check return an error code only; the functions
 * below do the same work on a shard handle that one of these backends' r_open returned, and also
 * say which file failed and why, for messages such as verify's.
 *
 * Thread-safety: like r_read and r_check, callable from any number of threads on one open shard.
 */
#ifndef FMT_IMAGESET_H
#define FMT_IMAGESET_H

#include "backend.h"

/* The path of sample i's image file (dataset directory / folder / index.ext) into buf (len
 * bytes). Returns 0, FMT_EINVAL (i out of range), ENAMETOOLONG (buf too small). */
int fmt_imageset_sample_path(const void *s, uint64_t i, char *buf, size_t len);

/* Sample i's image file as an object of the dataset: its path relative to the shard's folder
 * (folder/index.ext) into rel (len bytes), its size and the XXH3-64 of its bytes (what a copy
 * fetched from a URL is checked against before it is used). Returns 0, FMT_EINVAL (i out of
 * range), ENAMETOOLONG (rel too small). */
int fmt_imageset_sample_object(const void *s, uint64_t i, char *rel, size_t len, uint64_t *size,
                               uint64_t *file_hash);

/* r_read with a message: on failure msg (may be NULL) says "PATH: reason". Errors: FMT_EINVAL
 * (i out of range), errno values of reading the file (ENOENT for a missing file), FMT_ETRUNC /
 * FMT_ECORRUPT when the file's size differs from the recorded one, the decoder's errors, and
 * FMT_ECORRUPT when the decoded size differs from the recorded shape. */
int fmt_imageset_read(const void *s, uint64_t i, void *dst, fmt_msg *msg);

/* r_check with a message: fmt_imageset_read's errors, plus FMT_EHASH when the file's bytes or the
 * decoded pixels do not hash to the recorded values. */
int fmt_imageset_check(const void *s, uint64_t i, fmt_msg *msg);

#endif
