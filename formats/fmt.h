/* fmt.h - shared definitions of the formats library: error codes and messages.
 *
 * Error convention (as in LMDB): functions return int, 0 on success, a positive errno value for
 * system errors (ENOMEM, EIO, ENOSPC, ...) and one of the negative FMT_E* codes below for errors of
 * the library's own. fmt_strerror() names both. Where a function takes a fmt_msg *, it may also
 * write a more specific one-line reason there (e.g. libjpeg's "Premature end of JPEG file"); the
 * pointer may be NULL. The library never prints and never exits.
 *
 * The codes of every library of the project are listed here, in one range (-30900 .. -30587,
 * clear of LMDB's -30799 .. -30780), each with its name: this layer's (FMT_ERRORS), libshardread's
 * (SHR_ERRORS, declared again in the public shardread.h) and the compiler's (SHC_ERRORS and
 * SHC_MERGE_ERRORS, declared in build.h and merge.h). Each layer checks its enum against its
 * list, and fmt_strerror names them all: the project's one strerror (shr_strerror and
 * shc_strerror are its public names).
 */
#ifndef FMT_H
#define FMT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

/* X(code, value, name): the storage layer's codes */
#define FMT_ERRORS(X)                                                                              \
    X(FMT_EFORMAT, -30900, "unrecognised format")         /* unknown magic bytes */               \
    X(FMT_ECORRUPT, -30899, "corrupt data")               /* damaged or inconsistent */           \
    X(FMT_ETRUNC, -30898, "truncated data")               /* data ends early */                   \
    X(FMT_ETOOBIG, -30897, "exceeds size limit")          /* past a configured size limit */      \
    X(FMT_EUNSUPPORTED, -30896, "unsupported variant or not a regular file")                      \
    X(FMT_EINVAL, -30895, "invalid argument")             /* bad argument */                      \
    X(FMT_EHASH, -30894, "hash mismatch")                 /* content hash is not the recorded */  \
    X(FMT_EVERSION, -30893, "incompatible version")       /* written by an incompatible version */\
    X(FMT_ESTATE, -30892, "object in failed state")       /* only close/free is allowed */        \
    X(FMT_EEMPTY, -30891, "empty file")                   /* zero-length input */
/* libshardread's (shardread.h) */
#define SHR_ERRORS(X)                                                                              \
    X(SHR_EEND, -30700, "end of epoch")                                                           \
    X(SHR_EINVAL, -30699, "invalid argument")                                                     \
    X(SHR_ESHAPE, -30698, "samples vary in size and no output size was given")                    \
    X(SHR_ESTATE, -30697, "reader has failed")
/* the compiler's (compiler/build.h) */
#define SHC_ERRORS(X)                                                                              \
    X(SHC_EREJECTS, -30600, "inputs were rejected")                                               \
    X(SHC_EINPUT, -30599, "bad inputs or output directory")                                       \
    X(SHC_ESTOPPED, -30598, "the build was stopped")                                              \
    X(SHC_EEND, -30597, "no more inputs")
/* the compiler's merge (compiler/merge.h) */
#define SHC_MERGE_ERRORS(X)                                                                        \
    X(SHC_MERGE_ENOPARTS, -30590, "no parts to merge")                                            \
    X(SHC_MERGE_EMISSING, -30589, "parts missing or unfinished")                                  \
    X(SHC_MERGE_EMISMATCH, -30588, "a part disagrees with the others or is damaged")              \
    X(SHC_MERGE_EBUSY, -30587, "another merge or build is writing the output")

#define FMT_ERROR_ENUM(code, value, name) code = value,
enum { FMT_ERRORS(FMT_ERROR_ENUM) FMT_ELAST };
/* in a layer that declares its own enum: each code is the list's */
#define FMT_ERROR_CHECK(code, value, name) _Static_assert((int)(code) == (value), #code);

/* Optional detail for an error: a one-line, human-readable reason, no trailing newline. The
 * project's one message type: the public headers name the same struct (libshardread's shr_msg),
 * so a caller's buffer passes through every layer as it is. */
#ifndef SHARDC_MSG_DEFINED
#define SHARDC_MSG_DEFINED
struct shardc_msg {
    char text[512];
};
#endif
typedef struct shardc_msg fmt_msg;

/* An enum value's name from a table indexed by the value: names[v] where v is below the table's
 * length and has a name there, else other. */
static inline const char *fmt_name_in(const char *const *names, size_t n, uint64_t v,
                                      const char *other)
{
    return v < n && names[v] ? names[v] : other;
}
#define FMT_NAME_IN(names, v, other)                                                             \
    fmt_name_in((names), sizeof(names) / sizeof((names)[0]), (uint64_t)(v), (other))

/* Name of an error code: any listed above, or errno. Never NULL; static storage. */
const char *fmt_strerror(int rc);

/* printf into msg (if msg is not NULL); returns rc so callers can `return fmt_fail(msg, rc, ...)`. */
int fmt_fail(fmt_msg *msg, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The detail if one was written, else fmt_strerror(rc). */
const char *fmt_reason(const fmt_msg *msg, int rc);

/* 64-bit XXH3 hash of a byte range: the sample hash stored by every backend. */
uint64_t fmt_hash64(const void *data, size_t len);

/* Read a whole file into memory. *buf is malloc'd (caller frees), at most max_bytes long
 * (FMT_ETOOBIG beyond). Returns errno values for I/O errors. */
int fmt_read_file(const char *path, size_t max_bytes, uint8_t **buf, size_t *len);

/* fmt_read_file into a buffer the caller keeps and reuses: *buf (capacity *cap, both 0/NULL at
 * first) is replaced by a larger one when the file needs it, and stays the caller's to free
 * whatever is returned. Regular files only (a FIFO must not hang a worker). */
int fmt_read_file_into(const char *path, uint64_t max_bytes, uint8_t **buf, size_t *cap,
                       size_t *len);

/* Write a whole file and fsync it (no rename; the file is removed again on failure). */
int fmt_write_file_synced(const char *path, const void *data, size_t len);

/* Write a whole file atomically: PATH.tmp, fsync, rename to PATH, fsync the directory. */
int fmt_write_file_atomic(const char *path, const void *data, size_t len);

/* fsync the directory that holds path (so a rename in it is durable). */
int fmt_fsync_parent(const char *path);

/* ---- small helpers the backends share ---- */

/* Make room for `more` bytes after `used` in *buf (capacity *cap), doubling from 256. 0 or
 * ENOMEM (also when the sizes overflow); *buf and *cap are unchanged on failure. */
int fmt_grow(void **buf, size_t *cap, size_t used, size_t more);

/* malloc'd "dir/name" followed by suffix (which may be ""), or NULL without memory. */
char *fmt_path_join(const char *dir, const char *name, const char *suffix);

/* Read up to len bytes at off, retrying after signals and partial transfers; *got is what was
 * read (less than len only at end of file). 0 or the errno of a failed pread. */
int fmt_pread_full(int fd, void *buf, size_t len, uint64_t off, size_t *got);

/* fmt_pread_full that wants all len bytes: 0, an errno, or FMT_ETRUNC when the file ends first. */
int fmt_pread_exact(int fd, void *buf, size_t len, uint64_t off);

/* Open path read-only, and only if it is a regular file (a symbolic link to one is fine): it is
 * opened with O_NONBLOCK and its type taken from fstat of that descriptor, so a FIFO, a device
 * (/dev/zero) or a socket is refused before a byte is read and can neither hang nor feed the
 * caller endless data, and nothing can swap the file between the check and the read (O_NONBLOCK
 * is cleared again on the regular file). 0 and *fd (O_CLOEXEC), or -1 in *fd and: the errno of
 * open/fstat, EISDIR for a folder, FMT_EUNSUPPORTED for any other type; msg (may be NULL) gets
 * the reason without the path ("not a regular file (a FIFO)"). */
int fmt_open_file(const char *path, int *fd, fmt_msg *msg);

/* fmt_open_file as a stdio stream for reading: the stream, or NULL with the error in *rc and the
 * reason in msg. */
FILE *fmt_fopen_file(const char *path, int *rc, fmt_msg *msg);

/* Open path read-only (O_CLOEXEC) as a shard file: *fd and its fstat in *st on success. Errors:
 * errno of open/fstat, EISDIR or EINVAL ("not a regular file"), FMT_ETRUNC ("empty file"), with
 * the reason in msg. *fd is -1 on failure. */
int fmt_open_regular(const char *path, int *fd, struct stat *st, fmt_msg *msg);

/* Hash a file in one pass of pread(2), never mapping it. *pinned (may be NULL) receives the
 * XXH3-64 of every byte outside [skip_off, skip_off + skip_len) (skip_len 0: the whole file);
 * *whole (may be NULL) that of the whole file; when whole is NULL the skipped range is not even
 * read. *size (may be NULL) receives the file's size. Errors: errno values, FMT_ETRUNC if the
 * file shrinks while being read, ENOMEM. */
int fmt_hash_file(const char *path, uint64_t skip_off, uint64_t skip_len, uint64_t *pinned,
                  uint64_t *whole, uint64_t *size);

/* Bytes of the UTF-8 sequence at s (shortest form, no surrogates, <= U+10FFFF, as Python's
 * strict decoder takes them), 0 if it is not valid UTF-8 or runs past avail bytes. In a
 * NUL-terminated string any avail >= 4 will do: a NUL is never a continuation byte. */
int fmt_utf8_len(const unsigned char *s, size_t avail);

#endif
