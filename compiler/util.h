/* util.h - small helpers of the shardc CLI: number and size parsing, human-readable sizes, the
 * line reader of the list and label files. */
#ifndef SHC_UTIL_H
#define SHC_UTIL_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "shardc.h"   /* shc_parse_size, shc_parse_uint, shc_parse_wxh, shc_human_size */

/* One line of f into buf (cap bytes, NUL-terminated, the newline dropped): its length, -1 at
 * the end of the file, -2 when it does not fit (the rest of it is not read); *nul says whether
 * the bytes read hold a NUL byte (a file zero-filled by a crash). */
long shc_read_line(FILE *f, char *buf, size_t cap, int *nul);

/* Take an exclusive, non-blocking flock(2) on dir/name (created if absent) and write our pid
 * into it, so that one writer at a time works in dir. Returns 0 with *fd holding the lock (it
 * is released when *fd is closed or the process ends, however it ends); EWOULDBLOCK when
 * another process holds it, with *holder its pid as it wrote it (0 if unknown); else an errno
 * value. The file itself stays: removing it would let a third writer lock a fresh file while
 * the second still holds the old one. */
int shc_lock_dir(const char *dir, const char *name, int *fd, long *holder);

/* The lock file a build takes in the folder it writes (a whole dataset's OUT, or a part's). */
#define SHC_LOCK_NAME ".shardc.lock"

/* Make room for one more element of elem bytes in the array *v that holds n of *cap: when n
 * equals *cap, the capacity doubles (first, when it is 0). 0 or ENOMEM (also when the size
 * overflows); *v and *cap are unchanged on failure. */
int shc_grow_array(void *v, size_t *cap, size_t n, size_t elem, size_t first);

/* s and its terminating NUL into the XXH3 state st (an XXH3_state_t *): a name in a fingerprint. */
void shc_hash_str(void *st, const char *s);

/* A new XXH3-64 state (an XXH3_state_t *), reset and given tag (a fingerprint's kind and
 * version) with its NUL; NULL without memory. shc_hash_end: its digest, the state freed. */
void *shc_hash_begin(const char *tag);
uint64_t shc_hash_end(void *st);

/* Monotonic seconds. */
double shc_now(void);

#endif
