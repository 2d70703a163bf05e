/* remote_open.c - datasets at URLs (shardread.h "Datasets at URLs"): the URL resolved to its
 * directory in the local cache (remote/remote.h), then opened as any local dataset. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "assemble.h"
#include "reader.h"

/* url's cached directory (malloc'd into *dir), or the error with msg set */
static int resolve(const char *url, const char *cache, char **dir, fmt_msg *msg)
{
    rmt_options ro;
    memset(&ro, 0, sizeof ro);
    ro.cache = cache;
    fmt_msg why = {{0}};
    int rc = rmt_resolve(url, &ro, dir, NULL, &why);
    if (rc)
        fmt_fail(msg, rc, "cannot open dataset %s: %s", url, fmt_reason(&why, rc));
    return rc;
}

int shr_remote_resolve(const char *url, const char *cache, char *dir, size_t len, shr_msg *msg)
{
    if (!url || !dir)
        return fmt_fail(msg, SHR_EINVAL, "no URL or buffer given");
    char *d;
    int rc = resolve(url, cache, &d, msg);
    if (rc)
        return rc;
    if (strlen(d) >= len)
        rc = fmt_fail(msg, ERANGE, "%s: the cached path %s is longer than %zu bytes",
                      url, d, len);
    else
        memcpy(dir, d, strlen(d) + 1);
    free(d);
    return rc;
}

int shr_dataset_open_url(shr_dataset **out, const char *url, shr_access access, unsigned flags,
                         fmt_msg *msg)
{
    return shr_dataset_open_url_cache(out, url, NULL, access, flags, msg);
}

int shr_dataset_open_url_cache(shr_dataset **out, const char *url, const char *cache,
                               shr_access access, unsigned flags, fmt_msg *msg)
{
    char *dir;
    int rc = resolve(url, cache, &dir, msg);
    if (rc)
        return rc;
    rc = shr_dataset_open_flags(out, dir, access, flags, msg);
    free(dir);
    return rc;
}

/* ---- a single dataset at a URL read as its shards arrive (shardread.h "Datasets at URLs") ---- */

#define LAZY_AHEAD 8            /* prefetch_shards by default */

static size_t plan_batch(void *ctx, uint64_t b, size_t *out)
{
    shr_reader *r = ctx;
    uint64_t epoch, number;
    shr_stream_pos(r, b, &epoch, &number);
    uint32_t n = shr_sampler_batch(r->sampler, epoch, number, r->plan_idx);
    return shr_lazy_shards(r, r->plan_idx, n, out);
}

static uint64_t epoch_end(void *ctx, uint64_t b)
{
    return shr_stream_epoch_end(ctx, b);
}

static void unload_shard(void *ctx, size_t k)
{
    shr_reader *r = ctx;
    fmt_dataset_shard_unload(r->ds, k, 0, NULL);
}

size_t shr_lazy_shards(const shr_reader *r, const uint64_t *idx, uint32_t n, size_t *out)
{
    const fmt_manifest *m = fmt_dataset_manifest(r->ds);
    size_t got = 0;
    long last = -1;
    for (uint32_t i = 0; i < n; i++) {
        long s = fmt_manifest_find_shard(m, idx[i]);
        if (s < 0 || s == last)
            continue;
        last = s;
        size_t j = 0;
        while (j < got && out[j] != (size_t)s)
            j++;
        if (j == got)
            out[got++] = (size_t)s;
    }
    return got;
}

/* the parts of shards the open needs before they arrive (fmt_dataset_open_lazy's source) */
int shr_lazy_open(shr_reader *r, const char *url)
{
    rmt_options ro;
    memset(&ro, 0, sizeof ro);
    ro.cache = r->o.cache;
    fmt_msg msg = {{0}};
    char *dir = NULL;
    uint8_t *man = NULL;
    size_t len = 0;
    int rc = rmt_lazy_open(&r->lazy, url, &ro, &dir, &man, &len, &msg);
    if (!rc) {
        fmt_lazy_source src = rmt_lazy_source(r->lazy);
        rc = fmt_dataset_open_lazy(&r->ds, dir, (const char *)man, len, (fmt_access)r->o.access,
                                   0, &src, &msg);
    }
    if (rc == FMT_EUNSUPPORTED && !r->o.cache_limit) {
        rmt_lazy_close(r->lazy);        /* read whole before the open instead (lmdb too) */
        r->lazy = NULL;
        rc = 1;
    } else if (rc) {
        fmt_fail(r->why, rc, "cannot open dataset %s: %s%s", url, fmt_reason(&msg, rc),
                 rc == FMT_EUNSUPPORTED ? " (needed by cache_limit)" : "");
    }
    free(dir);
    free(man);
    return rc;
}

/* Most distinct shards one batch of this rank touches (see sampler.h): the positions of a batch
 * span batch_size * world consecutive positions of the epoch's sequence (sequential), or of its
 * windows (quasi); random: any of them. */
static size_t plan_cap(const shr_reader *r)
{
    const fmt_manifest *m = fmt_dataset_manifest(r->ds);
    uint64_t b = r->o.batch_size, cap = b < m->nshards ? b : m->nshards, least = UINT64_MAX;
    for (size_t i = 0; i < m->nshards; i++)
        least = m->shards[i].samples < least ? m->shards[i].samples : least;
    if (r->o.order == SHR_ORDER_RANDOM || least == 0 || least == UINT64_MAX)
        return (size_t)(cap ? cap : 1);
    uint64_t span = b * r->o.world, est;
    if (r->o.order == SHR_ORDER_SEQUENTIAL)
        est = (span + least - 1) / least + 2;          /* +1 a straddle, +1 the wrap of padding */
    else {
        uint64_t w = r->o.quasi_window ? r->o.quasi_window : 1;
        est = ((span + w * least - 1) / (w * least) + 2) * w;
    }
    return (size_t)(est < cap ? est : cap);
}

int shr_lazy_start(shr_reader *r)
{
    const fmt_manifest *m = fmt_dataset_manifest(r->ds);
    size_t cap = plan_cap(r);
    if (!(r->plan_idx = calloc(r->o.batch_size, sizeof *r->plan_idx)))
        return fmt_fail(r->why, ENOMEM, "out of memory");
    /* what the workers hold at once: each its batch's shards, waiting ones included */
    size_t hold = (size_t)r->o.threads * cap, ahead = r->o.prefetch_shards ? r->o.prefetch_shards
                                                                           : LAZY_AHEAD;
    if (hold > m->nshards)
        hold = m->nshards;
    if (ahead > m->nshards)
        ahead = m->nshards;
    uint64_t limit = r->o.cache_limit;
    if (limit) {
        while (!r->o.prefetch_shards && ahead > 1 &&
               rmt_lazy_minimum(r->lazy, ahead > hold ? ahead : hold) > limit)
            ahead--;        /* the default window shrinks to the limit */
        size_t need = ahead > hold ? ahead : hold;
        uint64_t least = rmt_lazy_minimum(r->lazy, need);
        if (least > limit)
            return fmt_fail(r->why, SHR_EINVAL, "cache_limit %" PRIu64 " bytes is below "
                            "the %" PRIu64 " bytes this reader needs at once (%zu of its largest "
                            "shards: prefetch_shards %zu; %" PRIu32 " threads times %zu shards a "
                            "batch may touch)", limit, least, need, ahead, r->o.threads, cap);
    }
    uint64_t most = 0;
    for (size_t i = 0; i < m->nshards; i++)
        most = m->shards[i].samples > most ? m->shards[i].samples : most;
    uint64_t scan = (uint64_t)ahead * most / r->o.batch_size + 2;
    rmt_lazy_hooks h = {.plan = plan_batch, .unload = unload_shard, .epoch_end = epoch_end,
                        .ctx = r};
    fmt_msg msg = {{0}};
    int rc = rmt_lazy_start(r->lazy, &h, limit, (uint32_t)ahead, cap,
                            scan > (1u << 20) ? (1u << 20) : scan, &msg);
    if (rc)
        fmt_fail(r->why, rc, "%s", fmt_reason(&msg, rc));
    return rc;
}

int shr_lazy_acquire(shr_worker *w, uint64_t k, uint32_t n, fmt_msg *msg)
{
    shr_reader *r = w->r;
    rmt_lazy_begin(r->lazy, k);
    w->nheld = 0;
    size_t *want = w->held + w->held_cap / 2;       /* the batch's shards, then those held */
    size_t got = shr_lazy_shards(r, w->idx, n, want);   /* distinct */
    size_t taken = SIZE_MAX;    /* after a restart, the shard already held */
    for (size_t i = 0; i < got; i++) {
        size_t s = want[i];
        if (s == taken)
            continue;
        fmt_msg why = {{0}};
        /* waiting while holding shards is what a single reader's limit allows for; but when
         * other processes keep the room it needs, the shards held go back and the wait starts
         * holding nothing (two readers of one cache, each holding what the other waited for,
         * waited forever), then the batch's shards are taken again from the first */
        int rc = rmt_lazy_acquire(r->lazy, s, w->nheld ? RMT_WAIT_UNLESS_STARVED : RMT_WAIT,
                                  &why);
        int again = 0;          /* the shards before this one were let go: take them again */
        if (rc == EBUSY) {
            for (size_t j = 0; j < w->nheld; j++)
                rmt_lazy_yield(r->lazy, w->held[j]);
            w->nheld = 0;
            rc = rmt_lazy_acquire(r->lazy, s, RMT_WAIT, &why);
            again = 1;
        }
        int holding = rc == 0;
        if (holding) {
            w->held[w->nheld++] = s;
            rc = fmt_dataset_shard_load(r->ds, s, &why);
        }
        if (rc) {
            /* unavailable: on_error fails the batch, or skips or replaces its samples, which
             * then name the shard and why (fmt_dataset_sample_error) */
            if (r->o.on_error == SHR_ON_ERROR_FAIL) {
                shr_lazy_release(w, k);
                return fmt_fail(msg, rc, "%s", fmt_reason(&why, rc));
            }
            fmt_dataset_shard_unload(r->ds, s, rc, fmt_reason(&why, rc));
        }
        if (again) {
            i = (size_t)-1;     /* from the first again (a failed shard fails at once) */
            taken = holding ? s : SIZE_MAX;
        }
    }
    return 0;
}

int shr_lazy_hold(shr_worker *w, uint64_t idx)
{
    shr_reader *r = w->r;
    long s = fmt_manifest_find_shard(fmt_dataset_manifest(r->ds), idx);
    if (s < 0)
        return FMT_EINVAL;
    for (size_t i = 0; i < w->nheld; i++)
        if (w->held[i] == (size_t)s)
            return 0;
    if (w->nheld == w->held_cap)
        return EAGAIN;
    int rc = rmt_lazy_acquire(r->lazy, (size_t)s, RMT_NOWAIT, NULL);
    if (rc)
        return rc;
    w->held[w->nheld++] = (size_t)s;
    return fmt_dataset_shard_load(r->ds, (size_t)s, NULL);
}

void shr_lazy_release(shr_worker *w, uint64_t k)
{
    for (size_t i = 0; i < w->nheld; i++)
        rmt_lazy_release(w->r->lazy, w->held[i]);
    w->nheld = 0;
    rmt_lazy_end(w->r->lazy, k);
}

int shr_cache_stats(const shr_reader *r, shr_cache_info *info)
{
    if (!r || !info)
        return SHR_EINVAL;
    memset(info, 0, sizeof *info);
    if (!r->lazy)
        return 0;
    rmt_stats st;
    rmt_lazy_stats(r->lazy, &st, &info->peak_bytes, &info->evicted);
    info->fetched = st.fetched;
    info->cached = st.cached;
    info->bytes = st.bytes;
    info->retries = st.retries;
    info->limit = r->o.cache_limit;
    info->dir = rmt_lazy_dir(r->lazy);
    return 0;
}
