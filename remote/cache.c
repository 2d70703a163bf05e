/* cache.c - rmt_resolve: a dataset URL as a local directory in the cache (remote.h).
 *
 * Layout: ROOT/<16 hex digits: XXH3-64 of the objects' base URL>/ holds the dataset as a local
 * build would (manifest.json, the shards in their folders, inputs.tsv, rejects.tsv), plus, next
 * to each shard, .NAME.lock (the flock that makes one process the downloader) and .NAME.part
 * (the download in progress, resumed by the next one after a crash). A shard gets its final name
 * only once checked; manifest.json is written last, so a reader that finds it finds every shard.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
} shard_job;

typedef struct {
    const rmt_config *c;
    const fmt_manifest *m;
    const fmt_backend *be;
    const char *dir;
    rmt_stats *st;
    int blocking;               /* wait for a lock another process holds */
    int keep_shared;            /* rmt_lazy, bounded: a downloaded shard keeps a shared lock */
} cache_ctx;

/* mkdir -p of the folder that holds path */
static int make_parents(const char *path)
{
    char *p = strdup(path);
    if (!p)
        return ENOMEM;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            int e = errno;
            free(p);
            return e;
        }
        *s = '/';
    }
    free(p);
    return 0;
}

/* path's file is shard k as the manifest describes it: its size, then (full) its whole-file pin,
 * then the backend's pre-check, header and index checks against the manifest entry, then (full)
 * every sample's hash */
static int check_shard(const cache_ctx *x, size_t k, const char *path, const char *sdir, int full,
                       fmt_msg *msg)
{
    const fmt_manifest_shard *ms = &x->m->shards[k];
    char data[PATH_MAX];        /* the file the manifest's size is of: a folder shard's data */
    if (x->be->data_file)
        snprintf(data, sizeof data, "%s/%s", path, x->be->data_file);
    else
        snprintf(data, sizeof data, "%s", path);
    struct stat st;
    if (stat(data, &st) != 0)
        return fmt_fail(msg, errno, "%s", strerror(errno));
    if ((uint64_t)st.st_size != ms->bytes)
        return fmt_fail(msg, FMT_ETRUNC, "%" PRIu64 " bytes, the manifest says %" PRIu64,
                        (uint64_t)st.st_size, ms->bytes);
    int rc;
    if (full && (ms->pins & FMT_PIN_FILE)) {
        uint64_t whole = 0;
        rc = fmt_hash_file(data, 0, 0, NULL, &whole, NULL);
        if (rc)
            return fmt_fail(msg, rc, "%s", fmt_strerror(rc));
        if (whole != ms->file_hash)
            return fmt_fail(msg, FMT_EHASH, "whole-file hash %016" PRIx64 " differs from the "
                            "manifest's %016" PRIx64, whole, ms->file_hash);
    }
    rc = fmt_shard_precheck(x->be, path, ms, msg);
    if (rc)
        return rc;
    void *s = NULL;
    rc = x->be->r_open(&s, sdir, path, FMT_ACCESS_PREAD, msg);
    if (rc)
        return rc;
    const fmt_shard_info *h = x->be->r_info(s);
    rc = fmt_shard_check_info(x->m, k, h, msg);
    for (uint64_t i = 0; !rc && full && i < h->samples; i++) {
        rc = x->be->r_check(s, i);
        if (rc)
            fmt_fail(msg, rc, "sample %" PRIu64 ": %s", ms->first + i,
                     rc == FMT_EHASH ? "hash mismatch" : fmt_strerror(rc));
    }
    x->be->r_close(s);
    return rc;
}

/* A folder shard (lmdb) at path: its data file, a lock file LMDB may have left, the folder. */
static void remove_folder(const char *path, const char *data_file)
{
    static const char *const lock_file = "lock.mdb";
    const char *files[] = {data_file, lock_file};
    for (size_t i = 0; i < 2; i++) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", path, files[i]);
        unlink(p);
    }
    rmdir(path);
}

/* the download in progress of sj: gone */
static void remove_part(const cache_ctx *x, const shard_job *sj)
{
    if (sj->data)
        remove_folder(sj->part, x->be->data_file);
    else
        unlink(sj->part);
}

static void unlock(shard_job *sj)
{
    if (sj->lockfd >= 0)
        close(sj->lockfd);          /* releases the flock */
    sj->lockfd = -1;
}

static int on_start(rmt_job *j, void *ctx)
{
    cache_ctx *x = ctx;
    shard_job *sj = j->user;
    int rc = make_parents(sj->final);
    if (rc)
        return fmt_fail(&j->msg, rc, "cannot create the folder of %s: %s", sj->final,
                        strerror(rc));
    if (sj->data && (rc = make_parents(sj->data)) != 0)
        return fmt_fail(&j->msg, rc, "cannot create %s: %s", sj->part, strerror(rc));
    if (sj->lockfd >= 0)        /* rmt_lazy took it when it reserved room */
        goto locked;
    sj->lockfd = open(sj->lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (sj->lockfd < 0)
        return fmt_fail(&j->msg, errno, "cannot open %s: %s", sj->lockp, strerror(errno));
    while (flock(sj->lockfd, x->blocking ? LOCK_EX : LOCK_EX | LOCK_NB) != 0) {
        if (errno == EINTR)
            continue;
        int e = errno;
        unlock(sj);
        if (e == EWOULDBLOCK) {         /* another process downloads it: later */
            sj->busy = 1;
            return 1;
        }
        return fmt_fail(&j->msg, e, "cannot lock %s: %s", sj->lockp, strerror(e));
    }
locked:
    sj->busy = 0;
    fmt_msg why;
    if (check_shard(x, sj->k, sj->final, sj->sdir, 0, &why) == 0) {
        remove_part(x, sj);         /* a stale partial download beside the checked file */
        unlock(sj);
        x->st->cached++;
        return 1;
    }
    struct stat st;
    sj->resumed = stat(j->path, &st) == 0 && st.st_size > 0;
    return 0;
}

static int on_done(rmt_job *j, void *ctx)
{
    cache_ctx *x = ctx;
    shard_job *sj = j->user;
    if (j->rc) {
        unlock(sj);
        return j->rc;
    }
    fmt_msg why = {{0}};
    int rc = check_shard(x, sj->k, sj->part, sj->sdir, 1, &why);
    if (rc) {
        if (sj->resumed && sj->reruns == 0) {   /* a stale .part: fetch it whole once */
            sj->reruns++;
            sj->resumed = 0;
            return 1;
        }
        remove_part(x, sj);
        unlock(sj);
        return fmt_fail(&j->msg, rc == FMT_ETRUNC || rc == FMT_EHASH ? rc : FMT_ECORRUPT,
                        "%s/%s: the object fails its check against the manifest: %s",
                        x->c->url, j->name, fmt_reason(&why, rc));
    }
    int fd = open(j->path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    if (sj->data)               /* a damaged folder in the way (a file is renamed over) */
        remove_folder(sj->final, x->be->data_file);
    if (rename(sj->part, sj->final) != 0) {
        int e = errno;
        unlock(sj);
        return fmt_fail(&j->msg, e, "cannot rename %s: %s", sj->part, strerror(e));
    }
    (void)fmt_fsync_parent(sj->final);
    if (x->keep_shared && flock(sj->lockfd, LOCK_SH) == 0) {
        /* held from the rename on: no other process evicts it before this one uses it */
        sj->shared = sj->lockfd;
        sj->lockfd = -1;
    }
    unlock(sj);
    x->st->fetched++;
    return 0;
}

/* name's object into dir/name if it is not there (optional: a 404 is no error) */
static int fetch_small(const rmt_config *c, const char *dir, const char *name, int optional,
                       char **tmp_out, rmt_stats *st, fmt_msg *msg)
{
    char *tmp = NULL;
    if (asprintf(&tmp, "%s/.%s.%ld.part", dir, name, (long)getpid()) < 0)
        return ENOMEM;
    unlink(tmp);
    rmt_job j;
    memset(&j, 0, sizeof j);
    j.name = name;
    j.path = tmp;
    j.optional = optional;
    int rc = rmt_fetch(c, &j, 1, 1, 0, NULL, NULL, NULL, st, msg);
    if (!rc && j.rc == ENOENT) {
        unlink(tmp);
        free(tmp);
        *tmp_out = NULL;
        return 0;
    }
    if (rc) {
        unlink(tmp);
        free(tmp);
        return rc;
    }
    *tmp_out = tmp;
    return 0;
}

static int same_file(const char *a, const uint8_t *data, size_t len)
{
    uint8_t *b = NULL;
    size_t blen = 0;
    if (fmt_read_file(a, FMT_MANIFEST_MAX_BYTES, &b, &blen) != 0)
        return 0;
    int same = blen == len && memcmp(b, data, len) == 0;
    free(b);
    return same;
}

static char *cache_root(const char *given, fmt_msg *msg)
{
    const char *r = given && *given ? given : getenv(RMT_CACHE_ENV);
    char *out = NULL;
    if (r && *r)
        out = strdup(r);
    else if (getenv("HOME") && *getenv("HOME")) {
        if (asprintf(&out, "%s/.cache/shardread", getenv("HOME")) < 0)
            out = NULL;
    } else {
        fmt_fail(msg, FMT_EINVAL, "no cache directory: set %s or HOME, or give cache=",
                 RMT_CACHE_ENV);
        return NULL;
    }
    if (!out)
        fmt_fail(msg, ENOMEM, "out of memory");
    return out;
}

static int fetch_shards(cache_ctx *x, rmt_job *jobs, shard_job *sj, size_t n, unsigned parallel,
                        unsigned tries, fmt_msg *msg)
{
    int rc = rmt_fetch(x->c, jobs, n, parallel, tries, on_start, on_done, x, x->st, msg);
    for (size_t i = 0; i < n; i++)
        unlock(&sj[i]);
    return rc;
}

int rmt_resolve(const char *url, const rmt_options *o, char **out, rmt_stats *stp, fmt_msg *msg)
{
    rmt_options dflt;
    memset(&dflt, 0, sizeof dflt);
    if (!o)
        o = &dflt;
    rmt_stats stl;
    rmt_stats *st = stp ? stp : &stl;
    memset(st, 0, sizeof *st);
    *out = NULL;
    rmt_config c;
    int rc = rmt_config_load(&c, url, o->anonymous, msg);
    if (rc)
        return rc;
    char *root = cache_root(o->cache, msg), *dir = NULL, *mtmp = NULL, *mpath = NULL;
    uint8_t *mdata = NULL;
    size_t mlen = 0;
    fmt_manifest m;
    memset(&m, 0, sizeof m);
    rmt_job *jobs = NULL;
    shard_job *sj = NULL;
    if (!root) {
        rc = FMT_EINVAL;
        goto out;
    }
    if (asprintf(&dir, "%s/%016" PRIx64, root, fmt_hash64(c.base, strlen(c.base))) < 0 ||
        asprintf(&mpath, "%s/%s", dir, FMT_MANIFEST_NAME) < 0) {
        rc = fmt_fail(msg, ENOMEM, "out of memory");
        goto out;
    }
    rc = make_parents(mpath);
    if (rc) {
        fmt_fail(msg, rc, "cannot create the cache folder %s: %s", dir, strerror(rc));
        goto out;
    }
    rc = fetch_small(&c, dir, FMT_MANIFEST_NAME, 0, &mtmp, st, msg);
    if (rc)
        goto out;
    rc = fmt_read_file(mtmp, FMT_MANIFEST_MAX_BYTES, &mdata, &mlen);
    if (!rc)
        rc = fmt_manifest_parse((const char *)mdata, mlen, &m, msg);
    if (rc) {
        char why[sizeof msg->text];
        snprintf(why, sizeof why, "%s", fmt_reason(msg, rc));
        fmt_fail(msg, rc, "%s/%s: %s", c.url, FMT_MANIFEST_NAME, why);
        goto out;
    }
    const fmt_backend *be = fmt_backend_find(m.backend);
    if (!be || be->version < m.backend_version) {
        rc = fmt_fail(msg, FMT_EUNSUPPORTED, "%s/%s: backend '%s' version %u is not supported",
                      c.url, FMT_MANIFEST_NAME, m.backend, m.backend_version);
        goto out;
    }
    /* shards of one file, or (lmdb) a folder of one data file; not per-image sets (many files) */
    if (strcmp(m.backend, "raw") != 0 && strcmp(m.backend, "hdf5") != 0 &&
        strcmp(m.backend, "lmdb") != 0) {
        rc = fmt_fail(msg, FMT_EUNSUPPORTED, "%s: a dataset at a URL must have raw, hdf5 or "
                      "lmdb shards (this one is %s)", c.url, m.backend);
        goto out;
    }
    /* a changed dataset: its old manifest and files that go with it are no longer it */
    if (!same_file(mpath, mdata, mlen)) {
        unlink(mpath);
        static const char *const aux[] = {"inputs.tsv", "rejects.tsv"};
        for (size_t i = 0; i < 2; i++) {
            char *p = NULL;
            if (asprintf(&p, "%s/%s", dir, aux[i]) >= 0) {
                unlink(p);
                free(p);
            }
        }
    }
    st->shards = m.nshards;
    jobs = calloc(m.nshards + 1, sizeof *jobs);
    sj = calloc(m.nshards + 1, sizeof *sj);
    if (!jobs || !sj) {
        rc = fmt_fail(msg, ENOMEM, "out of memory");
        goto out;
    }
    for (size_t k = 0; k < m.nshards; k++) {
        const char *f = m.shards[k].file, *slash = strrchr(f, '/');
        int fl = slash ? (int)(slash - f + 1) : 0;
        sj[k].k = k;
        sj[k].lockfd = -1;
        sj[k].shared = -1;
        if (asprintf(&sj[k].final, "%s/%s", dir, f) < 0 ||
            asprintf(&sj[k].part, "%s/%.*s.%s.part", dir, fl, f, f + fl) < 0 ||
            asprintf(&sj[k].lockp, "%s/%.*s.%s.lock", dir, fl, f, f + fl) < 0 ||
            !(sj[k].sdir = fmt_manifest_shard_dir(dir, &m.shards[k])) ||
            (be->data_file && (asprintf(&sj[k].obj, "%s/%s", f, be->data_file) < 0 ||
                               asprintf(&sj[k].data, "%s/%s", sj[k].part, be->data_file) < 0))) {
            rc = fmt_fail(msg, ENOMEM, "out of memory");
            goto out;
        }
        jobs[k].name = sj[k].data ? sj[k].obj : f;
        jobs[k].path = sj[k].data ? sj[k].data : sj[k].part;
        jobs[k].size = m.shards[k].bytes;
        jobs[k].user = &sj[k];
    }
    cache_ctx x = {&c, &m, be, dir, st, 0, 0};
    c.progress = o->progress;
    c.progress_ctx = o->progress_ctx;
    rc = fetch_shards(&x, jobs, sj, m.nshards, o->parallel, o->tries, msg);
    if (rc)
        goto out;
    /* the shards other processes were downloading: wait for their lock, then use their file
     * (or fetch it, if they failed) */
    size_t nb = 0;
    for (size_t k = 0; k < m.nshards; k++)
        if (sj[k].busy) {
            jobs[nb] = jobs[k];
            jobs[nb].user = &sj[k];
            nb++;
        }
    if (nb) {
        x.blocking = 1;
        rc = fetch_shards(&x, jobs, sj, nb, o->parallel, o->tries, msg);
        if (rc)
            goto out;
    }
    /* the build's lists, for verify and the samples' provenance (not pinned by the manifest:
     * shardc verify checks them) */
    static const char *const aux[] = {"inputs.tsv", "rejects.tsv"};
    for (size_t i = 0; i < 2; i++) {
        char *p = NULL, *tmp = NULL;
        if (asprintf(&p, "%s/%s", dir, aux[i]) < 0) {
            rc = fmt_fail(msg, ENOMEM, "out of memory");
            goto out;
        }
        if (access(p, F_OK) != 0)
            rc = fetch_small(&c, dir, aux[i], 1, &tmp, st, msg);
        if (!rc && tmp && rename(tmp, p) != 0)
            rc = fmt_fail(msg, errno, "cannot rename %s: %s", tmp, strerror(errno));
        if (rc && tmp)
            unlink(tmp);
        free(tmp);
        free(p);
        if (rc)
            goto out;
    }
    if (rename(mtmp, mpath) != 0) {
        rc = fmt_fail(msg, errno, "cannot rename %s: %s", mtmp, strerror(errno));
        goto out;
    }
    (void)fmt_fsync_parent(mpath);
    free(mtmp);
    mtmp = NULL;
    *out = dir;
    dir = NULL;
out:
    if (mtmp)
        unlink(mtmp);
    free(mtmp);
    for (size_t k = 0; sj && k < m.nshards; k++) {
        unlock(&sj[k]);
        free(sj[k].final);
        free(sj[k].part);
        free(sj[k].lockp);
        free(sj[k].sdir);
        free(sj[k].obj);
        free(sj[k].data);
    }
    free(sj);
    free(jobs);
    fmt_manifest_free(&m);
    free(mdata);
    free(mpath);
    free(dir);
    free(root);
    rmt_config_free(&c);
    return rc;
}

/* ---- rmt_lazy: shards fetched while the dataset is read, into a bounded cache ----
 *
 * One thread per session downloads: first the shards readers wait for, then the next `ahead`
 * distinct shards of the readers' plan from the lowest batch in progress on. Before a download
 * it makes room: the folder's bytes (every shard file, and every .part counted at its full size:
 * a reservation, created under the folder's space lock, so that processes sharing the folder
 * never overshoot the limit together) plus the shard's must stay within the limit; it evicts
 * shards no reader of this process holds and the plan does not want soon, least recently used
 * first (those this process never used before all others). A shard this process has present is
 * held with a shared flock on its lock file; eviction takes the exclusive lock without waiting,
 * so a shard another process reads is never removed from under it. */

enum { Z_ABSENT, Z_QUEUED, Z_PRESENT, Z_FAILED };

typedef struct {
    shard_job j;                /* paths; lockfd is the download's exclusive lock */
    int state;
    int shfd;                   /* Z_PRESENT: the shared flock held while this process has it */
    uint32_t refs;              /* readers holding it */
    int wanted;                 /* a reader waits for it */
    int starved;                /* wanted, and no room: other processes keep their shards */
    uint64_t last_use;          /* tick of its last release (0: never used here) */
    uint64_t inwin;             /* window generation that last included it */
    uint64_t kept;              /* eviction round in which another process kept it */
    int needs_room;             /* its file was there but failed its check: room first */
    int rc;                     /* Z_FAILED */
    fmt_msg msg;
} zshard;

#define Z_MAX_ACTIVE 64

struct rmt_lazy {
    rmt_config c;
    fmt_manifest m;
    const fmt_backend *be;
    char *dir, *spacep, *wantp;
    uint64_t limit;
    uint32_t ahead;
    unsigned parallel, tries;
    rmt_lazy_hooks h;
    zshard *sh;
    size_t *plan;               /* plan scratch: plan_cap entries */
    size_t *win;                /* the window: ahead entries */
    rmt_job *jobs;
    rmt_stats st;
    uint64_t peak, evicted, gen, tick, rounds;
    uint64_t largest;           /* the largest shard's bytes */
    int kept_any;               /* the last make_room failed on shards other processes keep */
    uint64_t scan;              /* batches the window looks through at most */
    uint64_t active[Z_MAX_ACTIVE];
    uint32_t nactive;
    uint64_t next_batch;        /* one past the highest batch begun */
    pthread_mutex_t mu;
    pthread_cond_t ready, work;
    pthread_t thread;
    int started, stop;
};

/* the folder's bytes: each shard file, each .part at its shard's full size */
static uint64_t folder_bytes(const rmt_lazy *z)
{
    uint64_t sum = 0;
    struct stat st;
    for (size_t k = 0; k < z->m.nshards; k++) {
        if (stat(z->sh[k].j.final, &st) == 0)
            sum += (uint64_t)st.st_size;
        if (stat(z->sh[k].j.part, &st) == 0)
            sum += z->m.shards[k].bytes > (uint64_t)st.st_size ? z->m.shards[k].bytes
                                                               : (uint64_t)st.st_size;
    }
    return sum;
}

static int on_disk(const zshard *s)
{
    return access(s->j.final, F_OK) == 0 || access(s->j.part, F_OK) == 0;
}

/* This process no longer has shard k: unloaded, its shared lock dropped (the file stays). */
static void let_go(rmt_lazy *z, size_t k)
{
    zshard *s = &z->sh[k];
    if (s->state != Z_PRESENT)
        return;
    if (z->h.unload)
        z->h.unload(z->h.ctx, k);
    if (s->shfd >= 0)
        close(s->shfd);
    s->shfd = -1;
    s->state = Z_ABSENT;
}

/* Remove shard k from the folder unless another process uses it (or downloads it): 1 removed. */
static int evict_one(rmt_lazy *z, size_t k)
{
    zshard *s = &z->sh[k];
    let_go(z, k);
    int fd = open(s->j.lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return 0;
    int ok = flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (ok) {
        unlink(s->j.final);
        unlink(s->j.part);
        z->evicted++;
    }
    close(fd);
    return ok;
}

/* The folder's want file: its time is when a process last found no room because other processes
 * kept the shards it would evict. */
static void want_room(rmt_lazy *z)
{
    int fd = open(z->wantp, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
        (void)futimens(fd, NULL);
        close(fd);
    }
}

/* room was wanted in the last two seconds */
static int room_wanted(const rmt_lazy *z)
{
    struct stat st;
    struct timespec now;
    if (stat(z->wantp, &st) != 0 || clock_gettime(CLOCK_REALTIME, &now) != 0)
        return 0;
    return now.tv_sec - st.st_mtim.tv_sec <= 2;
}

/* Make room for need more bytes (over `used`): evict shards no reader holds or waits for, not
 * queued, least recently used first (those never used here first); window shards only when
 * may_win, and after all others. 1 when there is room. */
static int make_room(rmt_lazy *z, uint64_t *used, uint64_t need, int may_win)
{
    uint64_t round = ++z->rounds;       /* marks candidates another process keeps */
    int kept_any = 0;
    z->kept_any = 0;
    while (*used + need > z->limit) {
        size_t best = SIZE_MAX;
        uint64_t key = UINT64_MAX;
        for (size_t k = 0; k < z->m.nshards; k++) {
            zshard *s = &z->sh[k];
            if (s->state == Z_QUEUED || s->refs || s->wanted || s->kept == round ||
                (!may_win && s->inwin == z->gen) || !on_disk(s))
                continue;
            uint64_t kk = (s->inwin == z->gen ? UINT64_C(1) << 62 : 0) + s->last_use;
            if (kk < key) {
                key = kk;
                best = k;
            }
        }
        if (best == SIZE_MAX) {
            if (kept_any)           /* tell the processes that keep them (shed_idle) */
                want_room(z);
            z->kept_any = kept_any;
            return 0;
        }
        if (!evict_one(z, best)) {
            z->sh[best].kept = round;
            kept_any = 1;
        }
        *used = folder_bytes(z);
    }
    return 1;
}

/* The window: the next `ahead` distinct shards of the plan from the lowest batch in progress. */
static size_t window(rmt_lazy *z)
{
    z->gen++;
    uint64_t b = z->next_batch;
    for (uint32_t i = 0; i < z->nactive; i++)
        if (z->active[i] < b)
            b = z->active[i];
    size_t n = 0;
    for (uint64_t scanned = 0; n < z->ahead && scanned < z->scan; b++, scanned++) {
        size_t got = z->h.plan(z->h.ctx, b, z->plan);
        if (got == 0)
            break;
        for (size_t i = 0; i < got && n < z->ahead; i++) {
            zshard *s = &z->sh[z->plan[i]];
            if (s->inwin != z->gen) {
                s->inwin = z->gen;
                z->win[n++] = z->plan[i];
            }
        }
    }
    return n;
}

/* After a download round: shard k is in the folder and checked (job rc 0, not busy): hold it
 * with a shared lock, unless it went away meanwhile. */
static void take_present(rmt_lazy *z, size_t k)
{
    zshard *s = &z->sh[k];
    if (!z->limit) {            /* nothing evicts in an unbounded cache: no descriptor held */
        /* (a transfer abandoned when another failed has rc 0 too, and no file) */
        s->state = access(s->j.final, F_OK) == 0 ? Z_PRESENT : Z_ABSENT;
        return;
    }
    int fd = s->j.shared;       /* taken by lazy_start or on_done: the file stays */
    s->j.shared = -1;
    if (fd >= 0) {
        s->shfd = fd;
        s->state = Z_PRESENT;
        return;
    }
    fd = open(s->j.lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || flock(fd, LOCK_SH | LOCK_NB) != 0 || access(s->j.final, F_OK) != 0) {
        if (fd >= 0)
            close(fd);
        s->state = Z_ABSENT;
        return;
    }
    s->shfd = fd;
    s->state = Z_PRESENT;
}

/* wait for work, at most ns nanoseconds (other processes free room without telling us) */
static void zwait(rmt_lazy *z, long ns)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += ns;
    if (t.tv_nsec >= 1000000000) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&z->work, &z->mu, &t);
}

/* A bounded cache at its limit, where another process found no room: let go of the shards this
 * process has present but does not use (no reader holds or waits for one, and the window does not
 * want it), so that the other process may evict them. They stay in the folder, and are checked again
 * should this process want them. Readers of one cache each held every shard they had used, and
 * each waited for room the other's shards took. */
static void shed_idle(rmt_lazy *z)
{
    for (size_t k = 0; k < z->m.nshards; k++) {
        zshard *s = &z->sh[k];
        if (!s->refs && !s->wanted && s->inwin != z->gen)
            let_go(z, k);
    }
}

/* on_start of a bounded cache. A shard picked with room made (its exclusive lock taken) is
 * on_start's. One picked because its file was there is checked under a shared lock, which other
 * processes reading it hold too (an exclusive one would wait for all of them to let it go: two
 * readers of one cache each waited for a shard the other held); failing its check, it is left
 * for the next round, which makes room and downloads it. */
static int lazy_start(rmt_job *j, void *ctx)
{
    cache_ctx *x = ctx;
    shard_job *sj = j->user;
    if (sj->reserved)
        return on_start(j, ctx);
    int fd = open(sj->lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return fmt_fail(&j->msg, errno, "cannot open %s: %s", sj->lockp, strerror(errno));
    while (flock(fd, LOCK_SH | LOCK_NB) != 0) {
        if (errno == EINTR)
            continue;
        int e = errno;
        close(fd);
        if (e == EWOULDBLOCK) {     /* being downloaded or evicted by another process: later */
            sj->busy = 1;
            return 1;
        }
        return fmt_fail(&j->msg, e, "cannot lock %s: %s", sj->lockp, strerror(e));
    }
    sj->busy = 0;
    fmt_msg why;
    if (check_shard(x, sj->k, sj->final, sj->sdir, 0, &why) == 0) {
        sj->shared = fd;
        x->st->cached++;
        return 1;
    }
    close(fd);
    sj->noroom = 1;
    return 1;
}

static void *lazy_main(void *arg)
{
    rmt_lazy *z = arg;
    cache_ctx x = {&z->c, &z->m, z->be, z->dir, &z->st, 0, z->limit != 0};
    size_t *pick = calloc(z->parallel, sizeof *pick);
    pthread_mutex_lock(&z->mu);
    while (!z->stop && pick) {
        size_t nw = window(z), np = 0;
        /* the space lock: what this round reserves (its .part files) is seen by the others */
        int sfd = open(z->spacep, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (sfd >= 0)
            (void)flock(sfd, LOCK_EX);
        uint64_t used = z->limit ? folder_bytes(z) : 0;
        if (used > z->peak)
            z->peak = used;
        if (z->limit && used + z->largest > z->limit && room_wanted(z))
            shed_idle(z);
        /* readers waiting first, then the window in plan order; when no room can be made for a
         * shard a reader waits for, the window waits too (queuing its shards found in the folder
         * would hold them again, against the process that would evict them to make room) */
        int short_of_room = 0;
        for (int pass = 0; pass < 2 && np < z->parallel && !short_of_room; pass++) {
            size_t n = pass ? nw : z->m.nshards;
            for (size_t i = 0; i < n && np < z->parallel; i++) {
                size_t k = pass ? z->win[i] : i;
                zshard *s = &z->sh[k];
                if (s->state != Z_ABSENT || (!pass && !s->wanted))
                    continue;
                s->j.reserved = 0;
                if ((s->needs_room || access(s->j.final, F_OK) != 0) && z->limit) {
                    /* its lock first, so that no other process evicts the reservation (or
                     * downloads it too); busy: later */
                    int lfd = open(s->j.lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
                    if (lfd >= 0 && flock(lfd, LOCK_EX | LOCK_NB) != 0) {
                        close(lfd);
                        continue;
                    }
                    if (lfd < 0 || !make_room(z, &used, z->m.shards[k].bytes, !pass)) {
                        if (lfd >= 0)
                            close(lfd);
                        short_of_room = !pass;
                        if (!pass && z->kept_any && !s->starved) {
                            s->starved = 1;     /* a reader holding shards lets them go */
                            pthread_cond_broadcast(&z->ready);
                        }
                        break;
                    }
                    s->j.lockfd = lfd;
                    s->j.reserved = 1;
                    s->starved = 0;
                    int fd = open(s->j.part, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                    if (fd >= 0)
                        close(fd);  /* the reservation */
                    used = folder_bytes(z);
                }
                s->state = Z_QUEUED;
                pick[np++] = k;
            }
        }
        if (used > z->peak)
            z->peak = used;
        if (sfd >= 0)
            close(sfd);
        if (np == 0) {              /* nothing to do, or no room: until a reader moves on */
            zwait(z, 200000000);
            continue;
        }
        for (size_t i = 0; i < np; i++) {
            rmt_job *j = &z->jobs[i];
            memset(j, 0, sizeof *j);
            j->name = z->m.shards[pick[i]].file;
            j->path = z->sh[pick[i]].j.part;
            j->size = z->m.shards[pick[i]].bytes;
            j->user = &z->sh[pick[i]].j;
            z->sh[pick[i]].j.busy = 0;
            z->sh[pick[i]].j.noroom = 0;
        }
        pthread_mutex_unlock(&z->mu);
        fmt_msg msg = {{0}};
        (void)rmt_fetch(&z->c, z->jobs, np, z->parallel, z->tries,
                        z->limit ? lazy_start : on_start, on_done, &x, &z->st, &msg);
        for (size_t i = 0; i < np; i++)
            unlock(&z->sh[pick[i]].j);
        pthread_mutex_lock(&z->mu);
        size_t busy = 0;
        for (size_t i = 0; i < np; i++) {
            zshard *s = &z->sh[pick[i]];
            rmt_job *j = &z->jobs[i];
            busy += j->rc == 0 && s->j.busy;
            s->needs_room = s->j.noroom;
            if (s->j.noroom) {
                s->state = Z_ABSENT;
            } else if (j->rc == 0 && !s->j.busy) {
                take_present(z, pick[i]);
            } else if (j->rc == 0 || j->rc == ECANCELED) {
                s->state = Z_ABSENT;    /* another process has it, or abandoned: again */
            } else {
                s->state = Z_FAILED;
                s->rc = j->rc;
                s->msg = j->msg;
            }
            if (s->j.shared >= 0) {     /* a lock the round took and did not hand on */
                close(s->j.shared);
                s->j.shared = -1;
            }
            /* a reservation left by an abandoned or failed download */
            struct stat pst;
            if (s->state != Z_ABSENT && stat(s->j.part, &pst) == 0 && pst.st_size == 0)
                unlink(s->j.part);
        }
        used = z->limit ? folder_bytes(z) : 0;
        if (used > z->peak)
            z->peak = used;
        pthread_cond_broadcast(&z->ready);
        if (busy == np)             /* all of them downloaded by other processes: a pause */
            zwait(z, 50000000);
    }
    pthread_mutex_unlock(&z->mu);
    free(pick);
    return NULL;
}

int rmt_lazy_open(rmt_lazy **out, const char *url, const rmt_options *o, char **dir_out,
                  uint8_t **manifest, size_t *mlen, fmt_msg *msg)
{
    *out = NULL;
    rmt_lazy *z = calloc(1, sizeof *z);
    if (!z)
        return fmt_fail(msg, ENOMEM, "out of memory");
    pthread_mutex_init(&z->mu, NULL);
    pthread_cond_init(&z->ready, NULL);
    pthread_cond_init(&z->work, NULL);
    z->parallel = o->parallel ? o->parallel : 8;
    z->tries = o->tries;
    char *root = NULL, *mtmp = NULL, *mpath = NULL;
    uint8_t *mdata = NULL;
    size_t len = 0;
    int rc = rmt_config_load(&z->c, url, o->anonymous, msg);
    if (rc) {
        free(z);
        return rc;
    }
    if (!(root = cache_root(o->cache, msg))) {
        rc = FMT_EINVAL;
        goto out;
    }
    if (asprintf(&z->dir, "%s/%016" PRIx64, root, fmt_hash64(z->c.base, strlen(z->c.base))) < 0 ||
        asprintf(&mpath, "%s/%s", z->dir, FMT_MANIFEST_NAME) < 0 ||
        asprintf(&z->spacep, "%s/.space.lock", z->dir) < 0 ||
        asprintf(&z->wantp, "%s/.space.want", z->dir) < 0) {
        rc = fmt_fail(msg, ENOMEM, "out of memory");
        goto out;
    }
    rc = make_parents(mpath);
    if (rc) {
        fmt_fail(msg, rc, "cannot create the cache folder %s: %s", z->dir, strerror(rc));
        goto out;
    }
    rc = fetch_small(&z->c, z->dir, FMT_MANIFEST_NAME, 0, &mtmp, &z->st, msg);
    if (rc)
        goto out;
    rc = fmt_read_file(mtmp, FMT_MANIFEST_MAX_BYTES, &mdata, &len);
    if (!rc)
        rc = fmt_manifest_parse((const char *)mdata, len, &z->m, msg);
    if (rc) {
        char why[sizeof msg->text];
        snprintf(why, sizeof why, "%s", fmt_reason(msg, rc));
        fmt_fail(msg, rc, "%s/%s: %s", z->c.url, FMT_MANIFEST_NAME, why);
        goto out;
    }
    z->be = fmt_backend_find(z->m.backend);
    if (!z->be || z->be->version < z->m.backend_version) {
        rc = fmt_fail(msg, FMT_EUNSUPPORTED, "%s/%s: backend '%s' version %u is not supported",
                      z->c.url, FMT_MANIFEST_NAME, z->m.backend, z->m.backend_version);
        goto out;
    }
    if (strcmp(z->m.backend, "raw") != 0 && strcmp(z->m.backend, "hdf5") != 0) {
        rc = fmt_fail(msg, FMT_EUNSUPPORTED, "%s: shards read as they arrive must be raw or "
                      "hdf5 (this dataset's are %s)", z->c.url, z->m.backend);
        goto out;
    }
    /* the manifest in place now: a shard is used only after its own check against it */
    if (rename(mtmp, mpath) != 0) {
        rc = fmt_fail(msg, errno, "cannot rename %s: %s", mtmp, strerror(errno));
        goto out;
    }
    free(mtmp);
    mtmp = NULL;
    z->sh = calloc(z->m.nshards + 1, sizeof *z->sh);
    z->jobs = calloc(z->parallel, sizeof *z->jobs);
    if (!z->sh || !z->jobs) {
        rc = fmt_fail(msg, ENOMEM, "out of memory");
        goto out;
    }
    for (size_t k = 0; k < z->m.nshards; k++) {
        const char *f = z->m.shards[k].file, *slash = strrchr(f, '/');
        int fl = slash ? (int)(slash - f + 1) : 0;
        shard_job *sj = &z->sh[k].j;
        sj->k = k;
        sj->lockfd = -1;
        sj->shared = -1;
        z->sh[k].shfd = -1;
        if (asprintf(&sj->final, "%s/%s", z->dir, f) < 0 ||
            asprintf(&sj->part, "%s/%.*s.%s.part", z->dir, fl, f, f + fl) < 0 ||
            asprintf(&sj->lockp, "%s/%.*s.%s.lock", z->dir, fl, f, f + fl) < 0 ||
            !(sj->sdir = fmt_manifest_shard_dir(z->dir, &z->m.shards[k]))) {
            rc = fmt_fail(msg, ENOMEM, "out of memory");
            goto out;
        }
        if ((rc = make_parents(sj->final)) != 0) {
            fmt_fail(msg, rc, "cannot create the folder of %s: %s", sj->final, strerror(rc));
            goto out;
        }
    }
    z->st.shards = z->m.nshards;
    if (!(*dir_out = strdup(z->dir))) {
        rc = fmt_fail(msg, ENOMEM, "out of memory");
        goto out;
    }
    *manifest = mdata;
    *mlen = len;
    mdata = NULL;
    *out = z;
    z = NULL;
out:
    if (mtmp)
        unlink(mtmp);
    free(mtmp);
    free(mpath);
    free(root);
    free(mdata);
    rmt_lazy_close(z);
    return rc;
}

uint64_t rmt_lazy_minimum(const rmt_lazy *z, size_t shards)
{
    /* the `shards` largest shards */
    size_t n = z->m.nshards, take = shards < n ? shards : n;
    uint64_t *b = malloc((n ? n : 1) * sizeof *b), sum = 0;
    if (!b)
        return UINT64_MAX;
    for (size_t k = 0; k < n; k++)
        b[k] = z->m.shards[k].bytes;
    for (size_t i = 0; i < take; i++) {     /* partial selection: take is small */
        size_t best = i;
        for (size_t k = i + 1; k < n; k++)
            if (b[k] > b[best])
                best = k;
        uint64_t t = b[i];
        b[i] = b[best];
        b[best] = t;
        sum += b[i];
    }
    free(b);
    return sum;
}

int rmt_lazy_start(rmt_lazy *z, const rmt_lazy_hooks *h, uint64_t limit, uint32_t ahead,
                   size_t plan_cap, uint64_t scan, fmt_msg *msg)
{
    z->h = *h;
    z->limit = limit;
    z->largest = rmt_lazy_minimum(z, 1);
    z->ahead = ahead ? ahead : 1;
    if (z->ahead > z->m.nshards)
        z->ahead = z->m.nshards ? (uint32_t)z->m.nshards : 1;
    z->scan = scan ? scan : 1;
    if (!(z->plan = calloc(plan_cap ? plan_cap : 1, sizeof *z->plan)) ||
        !(z->win = calloc(z->ahead, sizeof *z->win)))
        return fmt_fail(msg, ENOMEM, "out of memory");
    int rc = pthread_create(&z->thread, NULL, lazy_main, z);
    if (rc)
        return fmt_fail(msg, rc, "cannot start the download thread: %s", strerror(rc));
    z->started = 1;
    return 0;
}

void rmt_lazy_begin(rmt_lazy *z, uint64_t batch)
{
    pthread_mutex_lock(&z->mu);
    if (z->nactive < Z_MAX_ACTIVE)
        z->active[z->nactive++] = batch;
    if (batch + 1 > z->next_batch)
        z->next_batch = batch + 1;
    pthread_cond_signal(&z->work);
    pthread_mutex_unlock(&z->mu);
}

void rmt_lazy_end(rmt_lazy *z, uint64_t batch)
{
    pthread_mutex_lock(&z->mu);
    for (uint32_t i = 0; i < z->nactive; i++)
        if (z->active[i] == batch) {
            z->active[i] = z->active[--z->nactive];
            break;
        }
    pthread_mutex_unlock(&z->mu);
}

int rmt_lazy_acquire(rmt_lazy *z, size_t k, int wait, fmt_msg *msg)
{
    if (k >= z->m.nshards)
        return FMT_EINVAL;
    zshard *s = &z->sh[k];
    pthread_mutex_lock(&z->mu);
    int rc = 0;
    for (;;) {
        if (s->state == Z_PRESENT) {
            s->refs++;
            s->wanted = 0;
            s->starved = 0;
            break;
        }
        if (s->state == Z_FAILED || z->stop) {
            rc = z->stop ? ECANCELED : s->rc;
            if (msg)
                *msg = s->msg;
            break;
        }
        if (wait == RMT_NOWAIT) {
            rc = EAGAIN;
            break;
        }
        if (wait == RMT_WAIT_UNLESS_STARVED && s->starved) {
            rc = EBUSY;
            break;
        }
        s->wanted = 1;
        pthread_cond_signal(&z->work);
        pthread_cond_wait(&z->ready, &z->mu);
    }
    pthread_mutex_unlock(&z->mu);
    return rc;
}

void rmt_lazy_release(rmt_lazy *z, size_t k)
{
    pthread_mutex_lock(&z->mu);
    if (k < z->m.nshards && z->sh[k].refs) {
        z->sh[k].refs--;
        z->sh[k].last_use = ++z->tick;
    }
    if (z->limit)               /* room may be made now */
        pthread_cond_signal(&z->work);
    pthread_mutex_unlock(&z->mu);
}

void rmt_lazy_yield(rmt_lazy *z, size_t k)
{
    pthread_mutex_lock(&z->mu);
    if (k < z->m.nshards && z->sh[k].refs) {
        zshard *s = &z->sh[k];
        s->refs--;
        s->last_use = ++z->tick;
        if (!s->refs && !s->wanted && z->limit)
            let_go(z, k);
    }
    pthread_cond_signal(&z->work);
    pthread_mutex_unlock(&z->mu);
}

void rmt_lazy_stats(rmt_lazy *z, rmt_stats *st, uint64_t *peak, uint64_t *evicted)
{
    pthread_mutex_lock(&z->mu);
    if (st)
        *st = z->st;
    if (peak)
        *peak = z->peak;
    if (evicted)
        *evicted = z->evicted;
    pthread_mutex_unlock(&z->mu);
}

const fmt_manifest *rmt_lazy_manifest(const rmt_lazy *z)
{
    return &z->m;
}

const char *rmt_lazy_dir(const rmt_lazy *z)
{
    return z->dir;
}

void rmt_lazy_cancel(rmt_lazy *z)
{
    if (!z)
        return;
    pthread_mutex_lock(&z->mu);
    z->stop = 1;
    pthread_cond_broadcast(&z->work);
    pthread_cond_broadcast(&z->ready);
    pthread_mutex_unlock(&z->mu);
}

void rmt_lazy_close(rmt_lazy *z)
{
    if (!z)
        return;
    if (z->started) {
        rmt_lazy_cancel(z);
        pthread_join(z->thread, NULL);
    }
    for (size_t k = 0; z->sh && k < z->m.nshards; k++) {
        zshard *s = &z->sh[k];
        if (s->shfd >= 0)
            close(s->shfd);
        if (s->j.shared >= 0)
            close(s->j.shared);
        unlock(&s->j);
        free(s->j.final);
        free(s->j.part);
        free(s->j.lockp);
        free(s->j.sdir);
    }
    free(z->sh);
    free(z->plan);
    free(z->win);
    free(z->jobs);
    free(z->dir);
    free(z->spacep);
    free(z->wantp);
    fmt_manifest_free(&z->m);
    rmt_config_free(&z->c);
    pthread_cond_destroy(&z->ready);
    pthread_cond_destroy(&z->work);
    pthread_mutex_destroy(&z->mu);
    free(z);
}
