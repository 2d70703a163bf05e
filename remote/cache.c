/* cache.c - rmt_resolve: a dataset URL as a local directory in the cache (remote.h), and the
 * cache folder's parts rmt_lazy (lazy.c) shares (cache.h).
 *
 * Layout: ROOT/<16 hex digits: XXH3-64 of the objects' base URL>/ holds the dataset as a local
 * build would (manifest.json, the shards in their folders, inputs.tsv, rejects.tsv), plus, next
 * to each shard, .NAME.lock (the flock that makes one process the downloader) and .NAME.part
 * (the download in progress, resumed by the next one after a crash). A shard gets its final name
 * only once checked; manifest.json is written last, so a reader that finds it finds every shard.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"

/* mkdir -p of the folder that holds path */
int rmt_make_parents(const char *path)
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
int rmt_shard_check(const rmt_cache_ctx *x, size_t k, const char *path, const char *sdir,
                    int full, fmt_msg *msg)
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
    /* (a per-image set's size is its index's and images' together: the open checks it) */
    if ((uint64_t)st.st_size != ms->bytes && !rmt_is_imageset(x->be))
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

void rmt_shard_remove(const char *path, const char *data_file)
{
    if (data_file)
        remove_folder(path, data_file);
    else
        unlink(path);
}

/* the download in progress of sj: gone */
static void remove_part(const rmt_cache_ctx *x, const rmt_shard_job *sj)
{
    if (sj->data)
        remove_folder(sj->part, x->be->data_file);
    else
        unlink(sj->part);
}

int rmt_lock_file(const char *path, int op)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    while (flock(fd, op) != 0) {
        if (errno == EINTR)
            continue;
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

void rmt_shard_unlock(rmt_shard_job *sj)
{
    if (sj->lockfd >= 0)
        close(sj->lockfd);          /* releases the flock */
    sj->lockfd = -1;
}

int rmt_shard_on_start(rmt_job *j, void *ctx)
{
    rmt_cache_ctx *x = ctx;
    rmt_shard_job *sj = j->user;
    int rc = rmt_make_parents(sj->final);
    if (rc)
        return fmt_fail(&j->msg, rc, "cannot create the folder of %s: %s", sj->final,
                        strerror(rc));
    if (sj->data && (rc = rmt_make_parents(sj->data)) != 0)
        return fmt_fail(&j->msg, rc, "cannot create %s: %s", sj->part, strerror(rc));
    if (sj->lockfd >= 0)        /* rmt_lazy took it when it reserved room */
        goto locked;
    sj->lockfd = rmt_lock_file(sj->lockp, x->blocking ? LOCK_EX : LOCK_EX | LOCK_NB);
    if (sj->lockfd < 0 && errno == EWOULDBLOCK) {   /* another process downloads it: later */
        sj->busy = 1;
        return 1;
    }
    if (sj->lockfd < 0)
        return fmt_fail(&j->msg, errno, "cannot lock %s: %s", sj->lockp, strerror(errno));
locked:
    sj->busy = 0;
    fmt_msg why;
    if (rmt_shard_check(x, sj->k, sj->final, sj->sdir, 0, &why) == 0) {
        remove_part(x, sj);         /* a stale partial download beside the checked file */
        rmt_shard_unlock(sj);
        x->st->cached++;
        return 1;
    }
    struct stat st;
    sj->resumed = stat(j->path, &st) == 0 && st.st_size > 0;
    return 0;
}

void rmt_fsync_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

int rmt_shard_publish(const rmt_cache_ctx *x, rmt_shard_job *sj, const char *name,
                      const char *path, fmt_msg *msg)
{
    fmt_msg why = {{0}};
    int rc = rmt_shard_check(x, sj->k, sj->part, sj->sdir, 1, &why);
    if (rc) {
        if (sj->resumed && sj->reruns == 0) {   /* a stale .part: fetch it whole once */
            sj->reruns++;
            sj->resumed = 0;
            return 1;
        }
        remove_part(x, sj);
        rmt_shard_unlock(sj);
        return fmt_fail(msg, rc == FMT_ETRUNC || rc == FMT_EHASH ? rc : FMT_ECORRUPT,
                        "%s/%s: the object fails its check against the manifest: %s",
                        x->c->url, name, fmt_reason(&why, rc));
    }
    rmt_fsync_file(path);
    if (sj->data)               /* a damaged folder in the way (a file is renamed over) */
        remove_folder(sj->final, x->be->data_file);
    int sfd = x->spacep ? rmt_lock_file(x->spacep, LOCK_EX) : -1;
    int renamed = rename(sj->part, sj->final) == 0, e = errno;
    if (sfd >= 0)
        close(sfd);
    if (!renamed) {
        rmt_shard_unlock(sj);
        return fmt_fail(msg, e, "cannot rename %s: %s", sj->part, strerror(e));
    }
    (void)fmt_fsync_parent(sj->final);
    if (x->keep_shared && flock(sj->lockfd, LOCK_SH) == 0) {
        /* held from the rename on: no other process evicts it before this one uses it */
        sj->shared = sj->lockfd;
        sj->lockfd = -1;
    }
    rmt_shard_unlock(sj);
    return 0;
}

/* name's object into dir/name if it is not there (optional: a 404 is no error) */
int rmt_fetch_small(const rmt_config *c, const char *dir, const char *name, int optional,
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

int rmt_cache_root(const char *given, char **root, fmt_msg *msg)
{
    const char *home = getenv("HOME");      /* the user's home: not a setting of ours */
    *root = NULL;
    if (given && *given)
        *root = strdup(given);
    else if (home && *home) {
        if (asprintf(root, "%s/.cache/shardread", home) < 0)
            *root = NULL;
    } else {
        return fmt_fail(msg, FMT_EINVAL, "no cache directory: give one (cache=, $%s for the "
                        "programs and the Python package), or set HOME", RMT_CACHE_ENV);
    }
    return *root ? 0 : fmt_fail(msg, ENOMEM, "out of memory");
}

int rmt_shard_paths(rmt_shard_job *sj, const char *dir, const fmt_manifest *m, size_t k,
                    const char *data_file, fmt_msg *msg)
{
    const char *f = m->shards[k].file, *slash = strrchr(f, '/');
    int fl = slash ? (int)(slash - f + 1) : 0;
    sj->k = k;
    sj->lockfd = -1;
    sj->shared = -1;
    if (asprintf(&sj->final, "%s/%s", dir, f) < 0 ||
        asprintf(&sj->part, "%s/%.*s.%s.part", dir, fl, f, f + fl) < 0 ||
        asprintf(&sj->lockp, "%s/%.*s.%s.lock", dir, fl, f, f + fl) < 0 ||
        !(sj->sdir = fmt_manifest_shard_dir(dir, &m->shards[k])) ||
        (data_file && (asprintf(&sj->obj, "%s/%s", f, data_file) < 0 ||
                       asprintf(&sj->data, "%s/%s", sj->part, data_file) < 0)))
        return fmt_fail(msg, ENOMEM, "out of memory");
    return 0;
}

void rmt_shard_paths_free(rmt_shard_job *sj)
{
    rmt_shard_unlock(sj);
    free(sj->final);
    free(sj->part);
    free(sj->lockp);
    free(sj->sdir);
    free(sj->obj);
    free(sj->data);
}

/* The temporary files of the small objects (rmt_fetch_small: .NAME.PID.part) that processes no
 * longer running left in dir (a kill -9 while the manifest arrived): removed. A PID alive, or
 * not ours to signal, keeps its file. */
static void sweep_small_temps(const char *dir)
{
    static const char *const names[] = {FMT_MANIFEST_NAME, "inputs.tsv", "rejects.tsv"};
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            size_t nl = strlen(names[i]);
            const char *p = e->d_name;
            if (p[0] != '.' || strncmp(p + 1, names[i], nl) != 0 || p[1 + nl] != '.')
                continue;
            char *end = NULL;
            errno = 0;
            long pid = strtol(p + 2 + nl, &end, 10);
            if (errno || pid <= 0 || pid == (long)getpid() || strcmp(end, ".part") != 0 ||
                p[2 + nl] < '0' || p[2 + nl] > '9')
                continue;
            if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
                continue;
            char *path = NULL;
            if (asprintf(&path, "%s/%s", dir, p) >= 0)
                (void)unlink(path);
            free(path);
        }
    }
    closedir(d);
}

int rmt_cache_manifest_place(char **mtmp, const char *mpath, fmt_msg *msg)
{
    if (rename(*mtmp, mpath) != 0)
        return fmt_fail(msg, errno, "cannot rename %s: %s", *mtmp, strerror(errno));
    free(*mtmp);
    *mtmp = NULL;
    return 0;
}

void rmt_temp_drop(char **tmp)
{
    if (*tmp)
        unlink(*tmp);
    free(*tmp);
    *tmp = NULL;
}

int rmt_cache_manifest(const rmt_config *c, const char *cache, char **dir, char **mtmp,
                       uint8_t **data, size_t *len, fmt_manifest *m, const fmt_backend **be,
                       rmt_stats *st, fmt_msg *msg)
{
    *dir = *mtmp = NULL;
    *data = NULL;
    *len = 0;
    *be = NULL;
    memset(m, 0, sizeof *m);
    char *root = NULL, *mpath = NULL;
    int rc = rmt_cache_root(cache, &root, msg);
    if (rc)
        return rc;
    if (asprintf(dir, "%s/%016" PRIx64, root, fmt_hash64(c->base, strlen(c->base))) < 0 ||
        asprintf(&mpath, "%s/%s", *dir, FMT_MANIFEST_NAME) < 0) {
        rc = fmt_fail(msg, ENOMEM, "out of memory");
        goto out;
    }
    rc = rmt_make_parents(mpath);
    if (rc) {
        fmt_fail(msg, rc, "cannot create the cache folder %s: %s", *dir, strerror(rc));
        goto out;
    }
    sweep_small_temps(*dir);
    rc = rmt_fetch_small(c, *dir, FMT_MANIFEST_NAME, 0, mtmp, st, msg);
    if (rc)
        goto out;
    rc = fmt_read_file(*mtmp, FMT_MANIFEST_MAX_BYTES, data, len);
    if (!rc)
        rc = fmt_manifest_parse((const char *)*data, *len, m, msg);
    if (rc) {
        char why[sizeof msg->text];
        snprintf(why, sizeof why, "%s", fmt_reason(msg, rc));
        fmt_fail(msg, rc, "%s/%s: %s", c->url, FMT_MANIFEST_NAME, why);
        goto out;
    }
    *be = fmt_backend_find(m->backend);
    if (!*be || (*be)->version < m->backend_version)
        rc = fmt_fail(msg, FMT_EUNSUPPORTED, "%s/%s: backend '%s' version %u is not supported",
                      c->url, FMT_MANIFEST_NAME, m->backend, m->backend_version);
out:
    if (rc) {
        rmt_temp_drop(mtmp);
        free(*dir);
        *dir = NULL;
        free(*data);
        *data = NULL;
        fmt_manifest_free(m);
        memset(m, 0, sizeof *m);
    }
    free(mpath);
    free(root);
    return rc;
}

/* ---- rmt_resolve's check thread: each download, as its transfer ends, is checked, fsynced and
 * renamed into place there (rmt_shard_publish), while the fetch keeps its other transfers
 * going; a failed check ends the fetch as a failed transfer does. ---- */

typedef struct {
    rmt_cache_ctx x;            /* first: rmt_shard_on_start takes the context as this */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    rmt_job **q;                /* downloads waiting for their check: a ring of n */
    size_t n, head, len;
    int closing;                /* no more will come */
    atomic_int failed;          /* a check failed: the fetch ends (rmt_fetch_until) */
    int rc;                     /* the first failure, its message */
    fmt_msg msg;
    rmt_job **again;            /* stale resumed .part files, truncated: to fetch whole */
    size_t nagain;
    uint64_t fetched;
} resolve_checks;

static void *checks_main(void *arg)
{
    resolve_checks *ck = arg;
    pthread_mutex_lock(&ck->mu);
    for (;;) {
        while (!ck->len && !ck->closing)
            pthread_cond_wait(&ck->cv, &ck->mu);
        if (!ck->len)
            break;
        rmt_job *j = ck->q[ck->head];
        ck->head = (ck->head + 1) % ck->n;
        ck->len--;
        pthread_mutex_unlock(&ck->mu);
        /* (the job is the fetch's no more: its name and path are read, its rc and msg are not
         * written, the fetch reads them) */
        rmt_shard_job *sj = j->user;
        fmt_msg msg = {{0}};
        int rc = rmt_shard_publish(&ck->x, sj, j->name, j->path, &msg);
        if (rc == 1 && truncate(j->path, 0) != 0) {
            rc = fmt_fail(&msg, errno, "cannot truncate %s: %s", j->path, strerror(errno));
            rmt_shard_unlock(sj);
        }
        pthread_mutex_lock(&ck->mu);
        if (rc == 0) {
            ck->fetched++;
        } else if (rc == 1) {
            ck->again[ck->nagain++] = j;
        } else if (!ck->rc) {
            ck->rc = rc;
            ck->msg = msg;
            atomic_store(&ck->failed, 1);
        }
    }
    pthread_mutex_unlock(&ck->mu);
    return NULL;
}

/* rmt_fetch's done for rmt_resolve: a download whose transfer ended goes to the check thread */
static int resolve_on_done(rmt_job *j, void *ctx)
{
    resolve_checks *ck = ctx;
    if (j->rc) {
        rmt_shard_unlock(j->user);
        return j->rc;
    }
    pthread_mutex_lock(&ck->mu);
    ck->q[(ck->head + ck->len++) % ck->n] = j;
    pthread_cond_signal(&ck->cv);
    pthread_mutex_unlock(&ck->mu);
    return 0;
}

/* one fetch of jobs with the check thread: 0, or the first failure (a transfer's, a check's) */
static int fetch_checked(resolve_checks *ck, rmt_job *jobs, size_t n, unsigned parallel,
                         unsigned tries, fmt_msg *msg)
{
    ck->head = ck->len = 0;
    ck->closing = 0;
    ck->nagain = 0;
    pthread_t t;
    int rc = pthread_create(&t, NULL, checks_main, ck);
    if (rc)
        return fmt_fail(msg, rc, "cannot start the check thread: %s", strerror(rc));
    rc = rmt_fetch_until(ck->x.c, jobs, n, parallel, tries, rmt_shard_on_start, resolve_on_done,
                         ck, ck->x.st, &ck->failed, msg);
    pthread_mutex_lock(&ck->mu);
    ck->closing = 1;
    pthread_cond_signal(&ck->cv);
    pthread_mutex_unlock(&ck->mu);
    pthread_join(t, NULL);
    if (!rc && ck->rc) {
        rc = ck->rc;
        *msg = ck->msg;
    }
    return rc;
}

static int fetch_shards(rmt_cache_ctx *x, rmt_job *jobs, rmt_shard_job *sj, size_t n,
                        unsigned parallel, unsigned tries, fmt_msg *msg)
{
    resolve_checks ck;
    memset(&ck, 0, sizeof ck);
    ck.x = *x;
    ck.n = n ? n : 1;
    int rc = 0;
    if (!(ck.q = calloc(ck.n, sizeof *ck.q)) || !(ck.again = calloc(ck.n, sizeof *ck.again))) {
        rc = fmt_fail(msg, ENOMEM, "out of memory");
        goto out;
    }
    pthread_mutex_init(&ck.mu, NULL);
    pthread_cond_init(&ck.cv, NULL);
    rc = fetch_checked(&ck, jobs, n, parallel, tries, msg);
    if (!rc && ck.nagain) {     /* stale partial downloads, once more whole (at most once) */
        size_t m = ck.nagain;
        rmt_job *redo = calloc(m, sizeof *redo);
        if (!redo) {
            rc = fmt_fail(msg, ENOMEM, "out of memory");
        } else {
            for (size_t i = 0; i < m; i++)
                redo[i] = *ck.again[i];
            rc = fetch_checked(&ck, redo, m, parallel, tries, msg);
            free(redo);
        }
    }
    x->st->fetched += ck.fetched;
    pthread_cond_destroy(&ck.cv);
    pthread_mutex_destroy(&ck.mu);
out:
    free(ck.q);
    free(ck.again);
    for (size_t i = 0; i < n; i++)
        rmt_shard_unlock(&sj[i]);
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
    char *dir = NULL, *mtmp = NULL, *mpath = NULL;
    uint8_t *mdata = NULL;
    size_t mlen = 0;
    fmt_manifest m;
    const fmt_backend *be = NULL;
    rmt_job *jobs = NULL;
    rmt_shard_job *sj = NULL;
    rc = rmt_cache_manifest(&c, o->cache, &dir, &mtmp, &mdata, &mlen, &m, &be, st, msg);
    if (rc) {
        rmt_config_free(&c);
        return rc;
    }
    if (asprintf(&mpath, "%s/%s", dir, FMT_MANIFEST_NAME) < 0) {
        rc = fmt_fail(msg, ENOMEM, "out of memory");
        goto out;
    }
    /* shards of one file, (lmdb) a folder of one data file, or (per-image sets) an index and
     * the image files it names (images.c) */
    if (strcmp(m.backend, "raw") != 0 && strcmp(m.backend, "hdf5") != 0 &&
        strcmp(m.backend, "lmdb") != 0 && !rmt_is_imageset(be)) {
        rc = fmt_fail(msg, FMT_EUNSUPPORTED, "%s: a dataset at a URL must have raw, hdf5, lmdb, "
                      "png0, bmp or jpeg shards (this one is %s)", c.url, m.backend);
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
    for (size_t k = 0; k < m.nshards; k++)
        sj[k].lockfd = sj[k].shared = -1;       /* (freed whole if a later one fails) */
    for (size_t k = 0; k < m.nshards; k++) {
        if ((rc = rmt_shard_paths(&sj[k], dir, &m, k, be->data_file, msg)) != 0)
            goto out;
        jobs[k].name = sj[k].data ? sj[k].obj : m.shards[k].file;
        jobs[k].path = sj[k].data ? sj[k].data : sj[k].part;
        jobs[k].size = m.shards[k].bytes;
        jobs[k].user = &sj[k];
    }
    rmt_cache_ctx x = {&c, &m, be, dir, st, 0, 0, NULL};
    c.progress = o->progress;
    c.progress_ctx = o->progress_ctx;
    if (rmt_is_imageset(be))
        rc = rmt_images_fetch(&x, sj, m.nshards, o->parallel, o->tries, msg);
    else
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
            rc = rmt_fetch_small(&c, dir, aux[i], 1, &tmp, st, msg);
        if (!rc && tmp && rename(tmp, p) != 0)
            rc = fmt_fail(msg, errno, "cannot rename %s: %s", tmp, strerror(errno));
        if (rc && tmp)
            unlink(tmp);
        free(tmp);
        free(p);
        if (rc)
            goto out;
    }
    if ((rc = rmt_cache_manifest_place(&mtmp, mpath, msg)) != 0)
        goto out;
    (void)fmt_fsync_parent(mpath);
    *out = dir;
    dir = NULL;
out:
    rmt_temp_drop(&mtmp);
    for (size_t k = 0; sj && k < m.nshards; k++)
        rmt_shard_paths_free(&sj[k]);
    free(sj);
    free(jobs);
    fmt_manifest_free(&m);
    free(mdata);
    free(mpath);
    free(dir);
    rmt_config_free(&c);
    return rc;
}

