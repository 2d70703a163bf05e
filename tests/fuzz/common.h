/* common.h - helpers shared by the fuzz targets (tests/fuzz/fuzz_*.c).
 *
 * Every target defines LLVMFuzzerTestOneInput and is linked either with libFuzzer (make fuzz) or
 * with replay.c (make fuzz-replay), which feeds it files without libFuzzer. Targets whose parser
 * reads a path get a per-process scratch directory, shardc-fuzz-XXXXXX in $TMPDIR or /tmp:
 * created on first use, removed at exit and on a sanitizer report (a process libFuzzer kills for a
 * hang or for memory leaves it behind).
 */
#ifndef FZ_COMMON_H
#define FZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken invariant is a finding like a sanitizer report: print where and abort (libFuzzer
 * records the input as a crash). */
#define FZ_ASSERT(cond) \
    ((cond) ? (void)0 : fz_fail(__FILE__, __LINE__, #cond))

__attribute__((noreturn)) void fz_fail(const char *file, int line, const char *what);

/* The process's scratch directory (an absolute path). Aborts if it cannot be made: a target that
 * cannot write its input cannot test anything. */
const char *fz_dir(void);

/* fz_dir()/rel into buf (aborts if it does not fit). */
void fz_path(char *buf, size_t len, const char *rel);

/* Make fz_dir()/rel a directory if it is not one (aborts on failure). */
void fz_mkdir(const char *rel);

/* Write data to fz_dir()/rel, replacing the file; the path goes into buf. Aborts on failure. */
void fz_write(const char *rel, const void *data, size_t len, char *buf, size_t buflen);

/* Read every byte of a buffer, so that ASan sees an access past its end (the result is only
 * there to keep the reads from being optimised away). */
uint64_t fz_touch(const void *p, size_t len);

/* With FUZZ_TRACE set in the environment, print "what: reason" (or "what: ok") to stderr: to see
 * how far seeds and regression inputs get. */
void fz_trace(const char *what, int rc, const fmt_msg *msg);

/* Little-endian loads and stores, for targets that fix up checksums. */
uint32_t fz_get32(const uint8_t *p);
uint64_t fz_get64(const uint8_t *p);
void fz_put64(uint8_t *p, uint64_t v);

#endif

/* The image targets (fuzz_jpeg, fuzz_png, fuzz_bmp): byte 0 of the input chooses the decode
 * options, the rest is the file. Inputs whose file is not of type want are ignored, so that each
 * target stays on its own codec. See common.c for the option bits. */
void fz_image(fmt_image_type want, const uint8_t *data, size_t size);
#define FZ_IMAGE_MAX_PIXELS (4u << 20)

/* Open a shard through backend b (r_open with dir, path and access) and, if it opens, use every
 * sample: r_get (length must be height * width * channels, pixels and aux are read through when
 * handed out), r_read into a buffer of exactly that length, r_check; then the out-of-range index
 * and the optional calls. Returns r_open's result. */
int fz_backend(const fmt_backend *b, const char *dir, const char *path, fmt_access access);

/* fz_backend with a hook called for every sample after r_get, before r_read (after = 0) and
 * after r_check (after = 1): to put files in place that the sample's reads need. */
typedef void fz_sample_hook(const fmt_backend *b, void *shard, uint64_t i, const fmt_sample *smp,
                            int after);
int fz_backend_hook(const fmt_backend *b, const char *dir, const char *path, fmt_access access,
                    fz_sample_hook *hook);
