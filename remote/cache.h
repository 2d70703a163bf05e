/* cache.h - the cache folder's parts that rmt_resolve (cache.c) and rmt_lazy (lazy.c) share:
 * per-shard paths and locks, the check of a shard against its manifest entry, the download's
 * start callback and its publication once checked, and the dataset's folder with its manifest
 * fetched. Internal to remote/. */
#ifndef RMT_CACHE_H
#define RMT_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "manifest.h"
#include "remote.h"

typedef struct {
    size_t k;                   /* manifest shard */
    char *final, *part, *lockp, *sdir;
    char *obj, *data;           /* a folder shard (lmdb): its data file's object name and the
                                 * file downloaded into the .part folder; else NULL */
    int lockfd;
    int busy;                   /* another process held its lock */
    int resumed;                /* the download continued a .part found on disk */
    int reruns;
    int reserved;               /* rmt_lazy: room was made for its download */
    int noroom;                 /* rmt_lazy: it must be downloaded, but no room was made */
    int shared;                 /* rmt_lazy, bounded: the shared flock on the checked file that
                                 * the round hands to take_present (-1: none) */
} rmt_shard_job;

typedef struct {
    const rmt_config *c;
    const fmt_manifest *m;
    const fmt_backend *be;
    const char *dir;
    rmt_stats *st;
    int blocking;               /* wait for a lock another process holds */
    int keep_shared;            /* rmt_lazy, bounded: a downloaded shard keeps a shared lock */
    const char *spacep;         /* rmt_lazy, bounded: the folder's space lock, held for the
                                 * rename (the others count the folder under it) */
} rmt_cache_ctx;

/* mkdir -p of the folder that holds path: 0 or an errno */
int rmt_make_parents(const char *path);

/* sj's paths for shard k of m in dir: the final file, its .part and .lock, its folder; with
 * data_file (a folder backend: lmdb), the data file's object name and its download path. 0 or
 * ENOMEM (msg says so); rmt_shard_paths_free frees them (and accepts a zeroed job). */
int rmt_shard_paths(rmt_shard_job *sj, const char *dir, const fmt_manifest *m, size_t k,
                    const char *data_file, fmt_msg *msg);
void rmt_shard_paths_free(rmt_shard_job *sj);

/* path's file is shard k as the manifest describes it: its size, then (full) its whole-file pin,
 * then the backend's pre-check, header and index checks against the manifest entry, then (full)
 * every sample's hash */
int rmt_shard_check(const rmt_cache_ctx *x, size_t k, const char *path, const char *sdir,
                    int full, fmt_msg *msg);

/* The lock file at path (created if need be) locked with op (LOCK_SH or LOCK_EX, with LOCK_NB
 * not to wait), EINTR retried: its descriptor, which holds the lock until closed; or -1 with
 * errno set (EWOULDBLOCK: another process holds it). The shards' locks and the folder's space
 * lock are all taken this way. */
int rmt_lock_file(const char *path, int op);

/* the job's exclusive lock, if held, let go */
void rmt_shard_unlock(rmt_shard_job *sj);
/* A shard's file at path gone; a folder shard's (data_file not NULL: lmdb) with its files. */
void rmt_shard_remove(const char *path, const char *data_file);

/* path's data made durable (a failure is left to the rename that follows: best effort) */
void rmt_fsync_file(const char *path);

/* Shard sj's download, in sj->part (path: the file written, a folder shard's data file), under
 * its exclusive lock: checked fully against the manifest, fsynced and renamed into place (under
 * x->spacep, the space lock, when set); with x->keep_shared, its lock then goes from exclusive to
 * shared (sj->shared). 0; 1 when a resumed .part failed: to be fetched again whole, once
 * (truncated by the caller, the lock still held); else the error (msg names the object name),
 * its .part removed and its lock let go. Touches no counts: callable on any thread that owns
 * sj. */
int rmt_shard_publish(const rmt_cache_ctx *x, rmt_shard_job *sj, const char *name,
                      const char *path, fmt_msg *msg);

/* rmt_fetch's start callback for shards (ctx: an rmt_cache_ctx, each job's user: its
 * rmt_shard_job): takes the shard's lock and skips a shard already in the folder and checked.
 * A download that has ended goes to a check thread (rmt_resolve's, rmt_lazy's), which publishes
 * it with rmt_shard_publish. */
int rmt_shard_on_start(rmt_job *j, void *ctx);

/* name's object into dir/.name.PID.part (*tmp_out; NULL for an optional object that is not
 * there) */
int rmt_fetch_small(const rmt_config *c, const char *dir, const char *name, int optional,
                    char **tmp_out, rmt_stats *st, fmt_msg *msg);

/* The dataset's cache folder under cache (NULL: ~/.cache/shardread, rmt_cache_root), created
 * (*dir); its manifest fetched beside manifest.json (*mtmp, to be renamed or removed by the
 * caller), read (*data, *len), parsed (m) and its backend found (*be). On error nothing is left
 * to free and msg names the URL. */
int rmt_cache_manifest(const rmt_config *c, const char *cache, char **dir, char **mtmp,
                       uint8_t **data, size_t *len, fmt_manifest *m, const fmt_backend **be,
                       rmt_stats *st, fmt_msg *msg);

/* The manifest rmt_cache_manifest fetched into *mtmp renamed to mpath: 0 with *mtmp freed and
 * NULL, or the error in msg with *mtmp left for rmt_temp_drop. */
int rmt_cache_manifest_place(char **mtmp, const char *mpath, fmt_msg *msg);

/* A temporary file given up: *tmp (if any) removed, freed and NULL. */
void rmt_temp_drop(char **tmp);

/* images.c: per-image sets (png0, bmp, jpeg). rmt_is_imageset: be is one. rmt_images_fetch:
 * rmt_resolve's download of the n shards of sj (their paths set, no lock held): each shard not
 * complete in the folder fetched, index and image files, checked, its index renamed into place
 * last. 0, or the first error (msg names the object). */
int rmt_is_imageset(const fmt_backend *be);
int rmt_images_fetch(const rmt_cache_ctx *x, rmt_shard_job *sj, size_t n, unsigned parallel,
                     unsigned tries, fmt_msg *msg);

#endif
