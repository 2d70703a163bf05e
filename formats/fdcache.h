/* fdcache.h - file descriptors opened on demand, from a process-wide cache that keeps at most
 * FMT_FDCACHE_MAX of them open while nobody uses them, so that a reader holds a small fixed
 * number of descriptors whatever the number of shards it has open (a dataset of 100,000 shards
 * under `ulimit -n 256`).
 *
 * A fmt_fdfile stands for one file opened and validated once (the descriptor handed to
 * fmt_fdfile_new). fmt_fdfile_get pins its descriptor, reopening the path when the cache closed
 * it, and refuses a path that now names another file (device and inode differ from the first
 * open's: FMT_ECORRUPT), so a reopened descriptor always reads the file that was validated.
 * fmt_fdfile_put unpins it; an unpinned descriptor stays open until FMT_FDCACHE_MAX others are
 * (least recently used closed first). Pinned descriptors are never closed: use them, then put.
 *
 * Thread-safety: every call may be made from any thread (one mutex guards the cache); the
 * descriptor a get returns may be used without locks until the matching put.
 */
#ifndef FMT_FDCACHE_H
#define FMT_FDCACHE_H

#include <stddef.h>

/* Unpinned descriptors kept open at most, process-wide. */
#define FMT_FDCACHE_MAX 64

typedef struct fmt_fdfile fmt_fdfile;

/* Take over fd, open on path with oflags (O_CLOEXEC is added at a reopen): it joins the cache
 * unpinned and may be closed any time after. 0, ENOMEM or fstat's errno; fd is closed on
 * failure. */
int fmt_fdfile_new(fmt_fdfile **f, const char *path, int oflags, int fd);

/* Pin f's descriptor into *fd, reopening it if needed: 0, open's errno, FMT_ECORRUPT when path
 * now names another file. With `bounded`, EBUSY instead of a reopen while FMT_FDCACHE_MAX
 * descriptors are pinned (for callers that hold many at once and can do without). */
int fmt_fdfile_get(fmt_fdfile *f, int bounded, int *fd);
void fmt_fdfile_put(fmt_fdfile *f);

/* Close and free; f must not be pinned. Accepts NULL. */
void fmt_fdfile_free(fmt_fdfile *f);

/* Descriptors the cache holds open now (pinned or not): for tests. */
unsigned fmt_fdcache_open(void);

/* Whole-shard mappings, process-wide, shared by every backend that maps its shards (raw,
 * contiguous hdf5, lmdb): each mapping is one entry of the process's memory map, which the
 * kernel bounds (vm.max_map_count, 65530 by default); a quarter of it goes to shards, the rest
 * stays for everything else. fmt_map_reserve counts one more mapping and returns 1, or returns 0
 * (nothing counted) when the cap is reached: the shard is then read with pread instead.
 * fmt_map_unreserve gives a reserved one back. Thread-safe (atomics). */
int fmt_map_reserve(void);
void fmt_map_unreserve(void);

/* The cap fmt_map_reserve applies (a quarter of vm.max_map_count), and for tests, another one
 * (0: no shard is mapped from then on; shards mapped already stay so). */
size_t fmt_map_cap(void);
void fmt_map_cap_set(size_t cap);

#endif
