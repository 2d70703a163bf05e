/* lazy.c - rmt_lazy: a dataset at a URL read as its shards arrive, through a bounded cache
 * (remote.h; the cache folder's layout, locks and checks are cache.c's).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"

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
 * so a shard another process reads is never removed from under it.
 *
 * A download whose transfer has ended is not checked on the download thread: it is queued for
 * the session's check thread, which checks it against the manifest (every sample's hash), fsyncs
 * it and renames it into place, then hands it to the readers; the download thread meanwhile
 * keeps its transfers going (a check and an fsync left the link idle). Until then the shard
 * stays Z_QUEUED, its exclusive lock and its .part (counted at its full size) held: it is never
 * evicted, never picked again, never seen by a reader. A resumed .part that fails its check is
 * truncated and given back to the download thread (`again`) to be fetched whole once; any other
 * failure makes the shard Z_FAILED with the message naming the object. */

enum { Z_ABSENT, Z_QUEUED, Z_PRESENT, Z_FAILED };

typedef struct {
    rmt_shard_job j;                /* paths; lockfd is the download's exclusive lock */
    int state;
    int shfd;                   /* Z_PRESENT: the shared flock held while this process has it */
    uint32_t refs;              /* readers holding it */
    int wanted;                 /* a reader waits for it */
    int starved;                /* wanted, and no room: other processes keep their shards */
    uint64_t last_use;          /* tick of its last release (0: never used here) */
    uint64_t inwin;             /* window generation that last included it */
    uint64_t kept;              /* eviction round in which another process kept it */
    double retry_at;            /* another process was downloading it: not before then */
    int needs_room;             /* its file was there but failed its check: room first */
    int deferred;               /* download thread only: its ended job was queued for a check */
    int again;                  /* Z_QUEUED: its check wants it fetched again, whole */
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
    uint64_t pokes;             /* work signalled (readers moved on): counted under mu */
    int settled;                /* every shard present (or failed for good): nothing is fetched
                                 * or evicted, so readers moving on no longer wake the download
                                 * thread (which still looks every 200 ms whether other
                                 * processes want room); a shard this process lets go of
                                 * unsettles it (let_go) */
    atomic_int aborted;         /* closing: the stream leaves its transfers */
    int deferred;               /* the last pick passed over a shard another process held */
    int kept_any;               /* the last make_room failed on shards other processes keep */
    uint64_t scan;              /* batches the window looks through at most */
    uint64_t active[Z_MAX_ACTIVE];
    uint32_t nactive;
    uint64_t next_batch;        /* one past the highest batch begun */
    void (*stage)(void *ctx, size_t k, int stage);      /* rmt_lazy_stage_hook's */
    void *stage_ctx;
    uint64_t vfetched;          /* shards the check thread has put into place */
    size_t *vq;                 /* the check thread's queue: a ring of nshards + 1 entries */
    size_t vhead, vlen;
    uint32_t nagain;            /* shards whose `again` is set */
    pthread_mutex_t mu;
    pthread_cond_t ready, work, vwork;
    pthread_t thread, vthread;
    int started, vstarted, stop;
};

/* The file at a shard's final path p whose size the manifest gives: p, or a folder shard's data
 * file in it (lmdb), into buf. (A download's is its job's data, else part: rmt_shard_paths.) */
static const char *data_of(const rmt_lazy *z, const char *p, char *buf, size_t len)
{
    if (!z->be->data_file)
        return p;
    snprintf(buf, len, "%s/%s", p, z->be->data_file);
    return buf;
}

/* the folder's bytes: each shard file, each .part at its shard's full size (under the space
 * lock, which a download's rename into place takes too: a rename between the two looks made a
 * shard count nothing, or twice) */
static uint64_t folder_bytes(const rmt_lazy *z)
{
    uint64_t sum = 0;
    struct stat st;
    char buf[PATH_MAX];
    for (size_t k = 0; k < z->m.nshards; k++) {
        const rmt_shard_job *j = &z->sh[k].j;
        if (stat(j->data ? j->data : j->part, &st) == 0)
            sum += z->m.shards[k].bytes > (uint64_t)st.st_size ? z->m.shards[k].bytes
                                                               : (uint64_t)st.st_size;
        if (stat(data_of(z, j->final, buf, sizeof buf), &st) == 0)
            sum += (uint64_t)st.st_size;
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
    z->settled = 0;
}

/* Remove shard k from the folder unless another process uses it (or downloads it): 1 removed. */
static int evict_one(rmt_lazy *z, size_t k)
{
    zshard *s = &z->sh[k];
    let_go(z, k);
    int fd = rmt_lock_file(s->j.lockp, LOCK_EX | LOCK_NB);
    if (fd < 0)
        return 0;
    rmt_shard_remove(s->j.final, z->be->data_file);
    rmt_shard_remove(s->j.part, z->be->data_file);
    z->evicted++;
    close(fd);
    return 1;
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

/* The window: the next `ahead` distinct shards of the plan from the lowest batch in progress;
 * those of the next epoch only when every shard of the rest of this one has arrived (hooks). */
static size_t window(rmt_lazy *z)
{
    z->gen++;
    uint64_t b = z->next_batch;
    for (uint32_t i = 0; i < z->nactive; i++)
        if (z->active[i] < b)
            b = z->active[i];
    uint64_t end = z->h.epoch_end ? z->h.epoch_end(z->h.ctx, b) : UINT64_MAX;
    size_t n = 0;
    for (uint64_t scanned = 0; n < z->ahead && scanned < z->scan; b++, scanned++) {
        if (b == end) {
            size_t i = 0;
            while (i < n && (z->sh[z->win[i]].state == Z_PRESENT ||
                             z->sh[z->win[i]].state == Z_FAILED))
                i++;
            if (i < n)
                break;
            end = z->h.epoch_end(z->h.ctx, b);
        }
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
        /* (on_done's lock went from exclusive to shared, which flock does not promise to do
         * atomically: an eviction in between would have removed the file) */
        int there = access(s->j.final, F_OK) == 0;
        if (!there)
            close(fd);
        s->shfd = there ? fd : -1;
        s->state = there ? Z_PRESENT : Z_ABSENT;
        return;
    }
    fd = rmt_lock_file(s->j.lockp, LOCK_SH | LOCK_NB);
    if (fd < 0 || access(s->j.final, F_OK) != 0) {
        if (fd >= 0)
            close(fd);
        s->state = Z_ABSENT;
        return;
    }
    s->shfd = fd;
    s->state = Z_PRESENT;
}

/* work for the download thread (z->mu held): counted, so that a stream under way when it came
 * is followed by another without a wait */
static void poke(rmt_lazy *z)
{
    z->pokes++;
    pthread_cond_signal(&z->work);
}

static double mono_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
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
 * process has present but does not use (no reader holds or waits for one, and the window does
 * not want it), so that the other process may evict them. They stay in the folder, and are
 * checked again should this process want them. Readers of one cache each held every shard they
 * had used, and each waited for room the other's shards took. */
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
    rmt_cache_ctx *x = ctx;
    rmt_shard_job *sj = j->user;
    if (sj->reserved)
        return rmt_shard_on_start(j, ctx);
    int fd = rmt_lock_file(sj->lockp, LOCK_SH | LOCK_NB);
    if (fd < 0 && errno == EWOULDBLOCK) {   /* being downloaded or evicted elsewhere: later */
        sj->busy = 1;
        return 1;
    }
    if (fd < 0)
        return fmt_fail(&j->msg, errno, "cannot lock %s: %s", sj->lockp, strerror(errno));
    sj->busy = 0;
    fmt_msg why;
    if (rmt_shard_check(x, sj->k, sj->final, sj->sdir, 0, &why) == 0) {
        sj->shared = fd;
        x->st->cached++;
        return 1;
    }
    close(fd);
    sj->noroom = 1;
    return 1;
}

/* The download thread's callbacks' context: the cache's (first: cache.c's callbacks take it)
 * and the session. */
typedef struct {
    rmt_cache_ctx x;
    rmt_lazy *z;
    uint64_t seen;              /* z->pokes at the last pick */
    rmt_stats st;               /* this thread's counts (z->st is their published copy) */
} lazy_ctx;

/* Shard sj is in the folder and checked: the readers' at once, not when its round ends (the
 * first batch waited for a round of 8 shards, a cached shard for the round's transfers). */
static void hand_over(lazy_ctx *lx, rmt_shard_job *sj)
{
    rmt_lazy *z = lx->z;
    pthread_mutex_lock(&z->mu);
    take_present(z, sj->k);
    pthread_cond_broadcast(&z->ready);
    pthread_mutex_unlock(&z->mu);
}

/* a shard found in the folder and checked is handed over as it is found */
static int lazy_on_start(rmt_job *j, void *ctx)
{
    lazy_ctx *lx = ctx;
    rmt_shard_job *sj = j->user;
    int rc = lx->z->limit ? lazy_start(j, ctx) : rmt_shard_on_start(j, ctx);
    if (rc == 1 && !sj->busy && !sj->noroom)
        hand_over(lx, sj);
    return rc;
}

/* a downloaded shard goes to the check thread as its transfer ends (its lock, its .part and its
 * state Z_QUEUED kept: the check thread publishes it); the stream's slot is free at once */
static int lazy_on_done(rmt_job *j, void *ctx)
{
    lazy_ctx *lx = ctx;
    rmt_lazy *z = lx->z;
    rmt_shard_job *sj = j->user;
    if (j->rc) {
        rmt_shard_unlock(sj);
        return j->rc;
    }
    z->sh[sj->k].deferred = 1;          /* (lazy_ended, on this thread, leaves it alone) */
    pthread_mutex_lock(&z->mu);
    z->vq[(z->vhead + z->vlen++) % (z->m.nshards + 1)] = sj->k;
    pthread_cond_signal(&z->vwork);
    pthread_mutex_unlock(&z->mu);
    if (z->stage)
        z->stage(z->stage_ctx, sj->k, RMT_STAGE_ARRIVED);
    return 0;
}

/* The check thread: each queued download checked fully against the manifest, fsynced and
 * renamed into place (rmt_shard_publish), then handed to the readers; a failure as the download
 * thread's failures are (Z_FAILED, the message naming the object), a stale resumed .part back to
 * the download thread, truncated, to be fetched whole. Until the session stops: the downloads
 * still queued then keep their lock, and rmt_lazy_close removes their .part. */
static void *verify_main(void *arg)
{
    rmt_lazy *z = arg;
    rmt_cache_ctx x = {&z->c, &z->m, z->be, z->dir, NULL, 0, z->limit != 0,
                       z->limit ? z->spacep : NULL};
    pthread_mutex_lock(&z->mu);
    for (;;) {
        while (!z->stop && !z->vlen)
            pthread_cond_wait(&z->vwork, &z->mu);
        if (z->stop)
            break;
        size_t k = z->vq[z->vhead];
        z->vhead = (z->vhead + 1) % (z->m.nshards + 1);
        z->vlen--;
        pthread_mutex_unlock(&z->mu);
        zshard *s = &z->sh[k];
        if (z->stage)
            z->stage(z->stage_ctx, k, RMT_STAGE_CHECK);
        fmt_msg msg = {{0}};
        int rc = rmt_shard_publish(&x, &s->j, s->j.obj ? s->j.obj : z->m.shards[k].file,
                                   s->j.data ? s->j.data : s->j.part, &msg);
        const char *part = s->j.data ? s->j.data : s->j.part;  /* (the file written) */
        if (rc == 1 && truncate(part, 0) != 0) {
            rc = fmt_fail(&msg, errno, "cannot truncate %s: %s", part, strerror(errno));
            rmt_shard_remove(s->j.part, z->be->data_file);
            rmt_shard_unlock(&s->j);
        }
        pthread_mutex_lock(&z->mu);
        if (rc == 0) {
            z->vfetched++;
            take_present(z, k);
        } else if (rc == 1) {
            s->again = 1;               /* Z_QUEUED still, its lock and reservation held */
            z->nagain++;
        } else {
            s->state = Z_FAILED;
            s->rc = rc;
            s->msg = msg;
        }
        poke(z);                        /* (again: its download; none: whether all are done) */
        pthread_cond_broadcast(&z->ready);
    }
    pthread_mutex_unlock(&z->mu);
    return NULL;
}

/* The next shards to download, at most max of them, into pick (z->mu held): readers waiting
 * first, then the window in plan order, room made for each (under the folder's space lock, so
 * that what this reserves, its .part files, is seen by the others). 0 when there is none now:
 * nothing to do, no room, or only shards another process was downloading a moment ago. */
static size_t pick_shards(rmt_lazy *z, size_t *pick, size_t max)
{
    size_t nw = window(z), np = 0;
    double t = mono_now();
    /* nothing absent that a reader waits for or the window wants: no pick, and no look at the
     * folder (its size is a stat of every shard's two names: per batch, on many shards, the
     * readers' cost) */
    int any = 0;
    for (size_t i = 0; i < nw && !any; i++)
        any = z->sh[z->win[i]].state == Z_ABSENT;
    for (size_t k = 0; k < z->m.nshards && !any; k++)
        any = z->sh[k].state == Z_ABSENT && z->sh[k].wanted;
    if (!any) {
        z->deferred = 0;
        if (z->limit && room_wanted(z))
            shed_idle(z);
        return 0;
    }
    int sfd = rmt_lock_file(z->spacep, LOCK_EX);
    uint64_t used = z->limit ? folder_bytes(z) : 0;
    if (used > z->peak)
        z->peak = used;
    /* (whatever this session's own room: processes sharing the folder may count it against
     * different limits, as a Loader and its fields' Dataset do) */
    if (z->limit && room_wanted(z))
        shed_idle(z);
    z->deferred = 0;
    /* when no room can be made for a shard a reader waits for, the window waits too (queuing
     * its shards found in the folder would hold them again, against the process that would
     * evict them to make room) */
    int short_of_room = 0;
    for (int pass = 0; pass < 2 && np < max && !short_of_room; pass++) {
        size_t n = pass ? nw : z->m.nshards;
        for (size_t i = 0; i < n && np < max; i++) {
            size_t k = pass ? z->win[i] : i;
            zshard *s = &z->sh[k];
            if (s->state != Z_ABSENT || (!pass && !s->wanted))
                continue;
            if (s->retry_at > t) {      /* another process was downloading it: a pause */
                z->deferred = 1;
                continue;
            }
            s->j.reserved = 0;
            if ((s->needs_room || access(s->j.final, F_OK) != 0) && z->limit) {
                /* its lock first, so that no other process evicts the reservation (or
                 * downloads it too); busy: later */
                int lfd = rmt_lock_file(s->j.lockp, LOCK_EX | LOCK_NB);
                if (lfd < 0 && errno == EWOULDBLOCK) {
                    s->retry_at = t + 0.05;
                    z->deferred = 1;
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
                    if (pass)
                        break;
                    continue;       /* another waited-for shard may be in the folder */
                }
                s->j.lockfd = lfd;
                s->j.reserved = 1;
                s->starved = 0;
                const char *res = s->j.data ? s->j.data : s->j.part;
                if (s->j.data)
                    (void)rmt_make_parents(res);
                int fd = open(res, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
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
    return np;
}

/* The stream's next job: a shard pick_shards gives, or none (stopping, or nothing now); for a
 * slot that stayed free, only when a reader has moved on since the last pick (a pick scans the
 * folder). */
static int lazy_more(rmt_job *j, int idle, void *ctx)
{
    lazy_ctx *lx = ctx;
    rmt_lazy *z = lx->z;
    size_t k;
    pthread_mutex_lock(&z->mu);
    int got = 0;
    if (!z->stop && z->nagain) {        /* a download its check sent back: first */
        for (k = 0; !z->sh[k].again; k++)
            ;
        z->sh[k].again = 0;
        z->nagain--;
        got = 1;
    } else if (!z->stop && (!idle || z->pokes != lx->seen || z->deferred)) {
        lx->seen = z->pokes;
        got = pick_shards(z, &k, 1) == 1;
    }
    if (got) {
        memset(j, 0, sizeof *j);
        j->name = z->sh[k].j.obj ? z->sh[k].j.obj : z->m.shards[k].file;
        j->path = z->sh[k].j.data ? z->sh[k].j.data : z->sh[k].j.part;
        j->size = z->m.shards[k].bytes;
        j->user = &z->sh[k].j;
        z->sh[k].j.busy = 0;
        z->sh[k].j.noroom = 0;
    }
    pthread_mutex_unlock(&z->mu);
    return got;
}

/* A job has ended: its shard's state from how (present, absent again, failed). */
static void lazy_ended(rmt_job *j, void *ctx)
{
    lazy_ctx *lx = ctx;
    rmt_lazy *z = lx->z;
    rmt_shard_job *sj = j->user;
    zshard *s = &z->sh[sj->k];
    pthread_mutex_lock(&z->mu);
    z->st = lx->st;
    if (s->deferred) {                  /* the check thread's now (verify_main) */
        s->deferred = 0;
        pthread_mutex_unlock(&z->mu);
        return;
    }
    s->needs_room = sj->noroom;
    if (sj->noroom) {
        s->state = Z_ABSENT;
    } else if (j->rc == 0 && !sj->busy) {
        if (s->state == Z_QUEUED)       /* (handed over as it arrived, mostly) */
            take_present(z, sj->k);
    } else if (j->rc == 0 || j->rc == ECANCELED) {
        s->state = Z_ABSENT;            /* another process has it, or abandoned: again */
        if (sj->busy)
            s->retry_at = mono_now() + 0.05;
    } else {
        s->state = Z_FAILED;
        s->rc = j->rc;
        s->msg = j->msg;
    }
    if (sj->shared >= 0) {              /* a lock the job took and did not hand on */
        close(sj->shared);
        sj->shared = -1;
    }
    /* a reservation left by an abandoned or failed download, removed while the exclusive lock
     * is still held (another process could reserve it again the moment it goes) */
    struct stat pst;
    if (s->state != Z_ABSENT && stat(sj->data ? sj->data : sj->part, &pst) == 0 &&
        pst.st_size == 0)
        rmt_shard_remove(sj->part, z->be->data_file);
    rmt_shard_unlock(sj);
    pthread_cond_broadcast(&z->ready);
    pthread_mutex_unlock(&z->mu);
}

/* The download thread: a stream of transfers on one set of connections, refilled as each
 * ends (a new shard can start the moment one finishes: rounds of 8 waited for their slowest);
 * between streams, a wait until a reader moves on (or another process frees room). */
static void *lazy_main(void *arg)
{
    rmt_lazy *z = arg;
    /* the counts this thread keeps (the fetch and the callbacks write them without the mutex),
     * published to z->st under it as jobs end */
    pthread_mutex_lock(&z->mu);
    lazy_ctx lx = {{&z->c, &z->m, z->be, z->dir, NULL, 0, z->limit != 0,
                    z->limit ? z->spacep : NULL}, z, 0, z->st};
    lx.x.st = &lx.st;
    while (!z->stop) {
        pthread_mutex_unlock(&z->mu);
        (void)rmt_fetch_stream(&z->c, z->jobs, z->parallel, z->parallel, z->tries,
                               lazy_on_start, lazy_on_done, lazy_ended, lazy_more, &lx, &lx.st,
                               &z->aborted);
        pthread_mutex_lock(&z->mu);
        z->st = lx.st;
        if (!z->settled) {
            size_t k = 0;
            while (k < z->m.nshards &&
                   (z->sh[k].state == Z_PRESENT || z->sh[k].state == Z_FAILED))
                k++;
            z->settled = k == z->m.nshards;
        }
        pthread_cond_broadcast(&z->ready);
        /* nothing new since the last pick saw the pokes: until a reader moves on */
        if (!z->stop && z->pokes == lx.seen)
            zwait(z, z->deferred ? 50000000 : 200000000);
    }
    pthread_mutex_unlock(&z->mu);
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
    pthread_cond_init(&z->vwork, NULL);
    z->parallel = o->parallel ? o->parallel : 8;
    z->tries = o->tries;
    char *mtmp = NULL, *mpath = NULL;
    uint8_t *mdata = NULL;
    size_t len = 0;
    int rc = rmt_config_load(&z->c, url, o->anonymous, msg);
    if (rc) {
        free(z);
        return rc;
    }
    rc = rmt_cache_manifest(&z->c, o->cache, &z->dir, &mtmp, &mdata, &len, &z->m, &z->be, &z->st,
                            msg);
    if (rc)
        goto out;
    if (asprintf(&mpath, "%s/%s", z->dir, FMT_MANIFEST_NAME) < 0 ||
        asprintf(&z->spacep, "%s/.space.lock", z->dir) < 0 ||
        asprintf(&z->wantp, "%s/.space.want", z->dir) < 0) {
        rc = fmt_fail(msg, ENOMEM, "out of memory");
        goto out;
    }
    if (strcmp(z->m.backend, "raw") != 0 && strcmp(z->m.backend, "hdf5") != 0 &&
        strcmp(z->m.backend, "lmdb") != 0) {
        rc = fmt_fail(msg, FMT_EUNSUPPORTED, "%s: shards read as they arrive must be raw, "
                      "hdf5 or lmdb (this dataset's are %s)", z->c.url, z->m.backend);
        goto out;
    }
    /* the manifest in place now: a shard is used only after its own check against it */
    if ((rc = rmt_cache_manifest_place(&mtmp, mpath, msg)) != 0)
        goto out;
    z->sh = calloc(z->m.nshards + 1, sizeof *z->sh);
    z->jobs = calloc(z->parallel, sizeof *z->jobs);
    if (!z->sh || !z->jobs) {
        rc = fmt_fail(msg, ENOMEM, "out of memory");
        goto out;
    }
    for (size_t k = 0; k < z->m.nshards; k++) {     /* (closed whole if a later one fails) */
        z->sh[k].j.lockfd = z->sh[k].j.shared = -1;
        z->sh[k].shfd = -1;
    }
    for (size_t k = 0; k < z->m.nshards; k++) {
        rmt_shard_job *sj = &z->sh[k].j;
        if ((rc = rmt_shard_paths(sj, z->dir, &z->m, k, z->be->data_file, msg)) != 0)
            goto out;
        if ((rc = rmt_make_parents(sj->final)) != 0) {
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
    rmt_temp_drop(&mtmp);
    free(mpath);
    free(mdata);
    rmt_lazy_close(z);
    return rc;
}

/* span's bytes from the shard's file in the folder: 1 when it is there, of the manifest's size,
 * and they could be read (any file with the final name was checked when it got it; the caller
 * checks the bytes against the manifest all the same: a file of an older dataset fails then) */
static int span_local(const rmt_lazy *z, fmt_span *sp)
{
    char buf[PATH_MAX];         /* (an lmdb shard's bytes are its data.mdb's) */
    int fd = open(data_of(z, z->sh[sp->shard].j.final, buf, sizeof buf), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
             (uint64_t)st.st_size == z->m.shards[sp->shard].bytes &&
             fmt_pread_exact(fd, sp->buf, (size_t)(sp->to - sp->from), sp->from) == 0;
    close(fd);
    return ok;
}

int rmt_lazy_spans(rmt_lazy *z, fmt_span *sp, size_t n, fmt_msg *msg)
{
    rmt_job *jobs = calloc(n ? n : 1, sizeof *jobs);
    if (!jobs)
        return fmt_fail(msg, ENOMEM, "out of memory");
    size_t nj = 0;
    for (size_t i = 0; i < n; i++) {
        sp[i].local = 0;
        if (sp[i].shard >= z->m.nshards || sp[i].to < sp[i].from ||
            sp[i].to > z->m.shards[sp[i].shard].bytes) {
            free(jobs);
            return fmt_fail(msg, FMT_EINVAL, "bytes %" PRIu64 "..%" PRIu64 " of no shard",
                            sp[i].from, sp[i].to);
        }
        if (sp[i].to == sp[i].from)
            continue;
        if (!sp[i].fresh && span_local(z, &sp[i])) {
            sp[i].local = 1;
            continue;
        }
        const rmt_shard_job *sj = &z->sh[sp[i].shard].j;
        jobs[nj].name = sj->obj ? sj->obj : z->m.shards[sp[i].shard].file;
        jobs[nj].from = sp[i].from;
        jobs[nj].size = sp[i].to;
        jobs[nj].buf = sp[i].buf;
        nj++;
    }
    int rc = nj ? rmt_fetch(&z->c, jobs, nj, z->parallel, z->tries, NULL, NULL, NULL, &z->st, msg)
                : 0;
    free(jobs);
    return rc;
}

static int by_bytes_down(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

uint64_t rmt_lazy_minimum(const rmt_lazy *z, size_t shards)
{
    /* the `shards` largest shards (all of them: the dataset's bytes) */
    size_t n = z->m.nshards, take = shards < n ? shards : n;
    uint64_t sum = 0;
    if (take == n) {
        for (size_t k = 0; k < n; k++)
            sum += z->m.shards[k].bytes;
        return sum;
    }
    uint64_t *b = malloc(n * sizeof *b);
    if (!b)
        return UINT64_MAX;
    for (size_t k = 0; k < n; k++)
        b[k] = z->m.shards[k].bytes;
    qsort(b, n, sizeof *b, by_bytes_down);
    for (size_t i = 0; i < take; i++)
        sum += b[i];
    free(b);
    return sum;
}

int rmt_lazy_start(rmt_lazy *z, const rmt_lazy_hooks *h, uint64_t limit, uint32_t ahead,
                   size_t plan_cap, uint64_t scan, fmt_msg *msg)
{
    z->h = *h;
    z->limit = limit;
    z->ahead = ahead ? ahead : 1;
    if (z->ahead > z->m.nshards)
        z->ahead = z->m.nshards ? (uint32_t)z->m.nshards : 1;
    z->scan = scan ? scan : 1;
    if (!(z->plan = calloc(plan_cap ? plan_cap : 1, sizeof *z->plan)) ||
        !(z->win = calloc(z->ahead, sizeof *z->win)) ||
        !(z->vq = calloc(z->m.nshards + 1, sizeof *z->vq)))
        return fmt_fail(msg, ENOMEM, "out of memory");
    int rc = pthread_create(&z->vthread, NULL, verify_main, z);
    if (rc)
        return fmt_fail(msg, rc, "cannot start the check thread: %s", strerror(rc));
    z->vstarted = 1;
    rc = pthread_create(&z->thread, NULL, lazy_main, z);
    if (rc)
        return fmt_fail(msg, rc, "cannot start the download thread: %s", strerror(rc));
    z->started = 1;
    return 0;
}

void rmt_lazy_stage_hook(rmt_lazy *z, void (*stage)(void *ctx, size_t k, int stage), void *ctx)
{
    z->stage = stage;
    z->stage_ctx = ctx;
}

void rmt_lazy_begin(rmt_lazy *z, uint64_t batch)
{
    pthread_mutex_lock(&z->mu);
    if (z->nactive < Z_MAX_ACTIVE)
        z->active[z->nactive++] = batch;
    if (batch + 1 > z->next_batch)
        z->next_batch = batch + 1;
    if (!z->settled)
        poke(z);
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
        if (!s->wanted) {       /* once: every wake-up poking again spun both threads */
            s->wanted = 1;
            poke(z);
        }
        pthread_cond_wait(&z->ready, &z->mu);
    }
    pthread_mutex_unlock(&z->mu);
    return rc;
}

/* A reader's hold of shard k ends; with go, the process lets go of it too when no reader holds
 * or waits for it (rmt_lazy_yield). */
static void give_back(rmt_lazy *z, size_t k, int go)
{
    pthread_mutex_lock(&z->mu);
    if (k < z->m.nshards && z->sh[k].refs) {
        zshard *s = &z->sh[k];
        s->refs--;
        s->last_use = ++z->tick;
        if (go && !s->refs && !s->wanted && z->limit)
            let_go(z, k);
    }
    if ((z->limit || go) && !z->settled)        /* room may be made now */
        poke(z);
    pthread_mutex_unlock(&z->mu);
}

void rmt_lazy_release(rmt_lazy *z, size_t k)
{
    give_back(z, k, 0);
}

void rmt_lazy_yield(rmt_lazy *z, size_t k)
{
    give_back(z, k, 1);
}

void rmt_lazy_stats(rmt_lazy *z, rmt_stats *st, uint64_t *peak, uint64_t *evicted)
{
    pthread_mutex_lock(&z->mu);
    if (st) {
        *st = z->st;
        st->fetched += z->vfetched;
    }
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

const char *rmt_lazy_url(const rmt_lazy *z)
{
    return z->c.url;
}

static int spans_of(void *z, fmt_span *sp, size_t n, fmt_msg *msg)
{
    return rmt_lazy_spans(z, sp, n, msg);
}

fmt_lazy_source rmt_lazy_source(rmt_lazy *z)
{
    return (fmt_lazy_source){spans_of, z, rmt_lazy_url(z)};
}

void rmt_lazy_cancel(rmt_lazy *z)
{
    if (!z)
        return;
    pthread_mutex_lock(&z->mu);
    z->stop = 1;
    atomic_store(&z->aborted, 1);   /* transfers under way are left (their .part resumes) */
    pthread_cond_broadcast(&z->work);
    pthread_cond_broadcast(&z->vwork);
    pthread_cond_broadcast(&z->ready);
    pthread_mutex_unlock(&z->mu);
}

void rmt_lazy_close(rmt_lazy *z)
{
    if (!z)
        return;
    if (z->started || z->vstarted)
        rmt_lazy_cancel(z);
    if (z->started)
        pthread_join(z->thread, NULL);
    /* the check under way ends first; the downloads still queued keep their lock and state
     * Z_QUEUED: their .part goes below */
    if (z->vstarted)
        pthread_join(z->vthread, NULL);
    for (size_t k = 0; z->sh && k < z->m.nshards; k++) {
        zshard *s = &z->sh[k];
        if (s->shfd >= 0)
            close(s->shfd);
        if (s->j.shared >= 0)
            close(s->j.shared);
        /* a download the close abandoned (or a reservation not yet started): its .part goes,
         * under the lock it still holds, so that a closed reader leaves the folder clean */
        if (s->state == Z_QUEUED && s->j.lockfd >= 0)
            rmt_shard_remove(s->j.part, z->be->data_file);
        rmt_shard_paths_free(&s->j);
    }
    free(z->sh);
    free(z->plan);
    free(z->win);
    free(z->vq);
    free(z->jobs);
    free(z->dir);
    free(z->spacep);
    free(z->wantp);
    fmt_manifest_free(&z->m);
    rmt_config_free(&z->c);
    pthread_cond_destroy(&z->ready);
    pthread_cond_destroy(&z->work);
    pthread_cond_destroy(&z->vwork);
    pthread_mutex_destroy(&z->mu);
    free(z);
}
