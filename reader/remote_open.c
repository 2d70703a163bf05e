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

/* ---- datasets at URLs read as their shards arrive (shardread.h "Datasets at URLs"): the
 * reader's one dataset, or each stream of a mixture at a URL, a session (rmt_lazy) each ---- */

#define LAZY_AHEAD 8            /* prefetch_shards by default, per dataset */

/* the distinct shards of part p among idx[0..n), in first-use order, into out (cap at most) */
static size_t part_shards(const shr_lazy_part *p, const uint64_t *idx, uint32_t n, size_t *out,
                          size_t cap)
{
    const fmt_manifest *m = fmt_dataset_manifest(p->ds);
    size_t got = 0;
    long last = -1;
    for (uint32_t i = 0; i < n && got < cap; i++) {
        if (idx[i] < p->first || idx[i] >= p->end)
            continue;           /* another stream's sample */
        long s = fmt_manifest_find_shard(m, idx[i] - p->first);
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

static size_t plan_batch(void *ctx, uint64_t b, size_t *out)
{
    shr_lazy_part *p = ctx;
    uint64_t epoch, number;
    shr_stream_pos(p->r, b, &epoch, &number);
    uint32_t n = shr_sampler_batch(p->r->sampler, epoch, number, p->plan_idx);
    return part_shards(p, p->plan_idx, n, out, p->cap);
}

static uint64_t epoch_end(void *ctx, uint64_t b)
{
    const shr_lazy_part *p = ctx;
    return shr_stream_epoch_end(p->r, b);
}

static void unload_shard(void *ctx, size_t k)
{
    const shr_lazy_part *p = ctx;
    fmt_dataset_shard_unload(p->ds, k, 0, NULL);
}

int shr_lazy_open_url(rmt_lazy **z, fmt_dataset **ds, const char *url, const char *cache,
                      shr_access access, uint64_t cache_limit, fmt_msg *msg)
{
    rmt_options ro;
    memset(&ro, 0, sizeof ro);
    ro.cache = cache;
    fmt_msg why = {{0}};
    char *dir = NULL;
    uint8_t *man = NULL;
    size_t len = 0;
    *z = NULL;
    int rc = rmt_lazy_open(z, url, &ro, &dir, &man, &len, &why);
    if (!rc) {
        fmt_lazy_source src = rmt_lazy_source(*z);
        rc = fmt_dataset_open_lazy(ds, dir, (const char *)man, len, (fmt_access)access, 0, &src,
                                   &why);
    }
    if (rc) {
        rmt_lazy_close(*z);
        *z = NULL;
    }
    if (rc == FMT_EUNSUPPORTED && !cache_limit)
        rc = 1;                 /* read whole before the open instead (lmdb too) */
    else if (rc)
        fmt_fail(msg, rc, "%s%s", fmt_reason(&why, rc),
                 rc == FMT_EUNSUPPORTED ? " (needed by cache_limit)" : "");
    free(dir);
    free(man);
    return rc;
}

int shr_lazy_open(shr_reader *r, const char *url)
{
    rmt_lazy *z;
    fmt_msg why = {{0}};
    int rc = shr_lazy_open_url(&z, &r->ds, url, r->o.cache, r->o.access, r->o.cache_limit, &why);
    if (rc == 0 && (rc = shr_lazy_add(r, z, r->ds, 0, r->o.on_error)) != 0) {
        rmt_lazy_close(z);
        fmt_fail(&why, rc, "out of memory");
    }
    if (rc != 0 && rc != 1)
        fmt_fail(r->why, rc, "cannot open dataset %s: %s", url, fmt_reason(&why, rc));
    return rc;
}

int shr_lazy_add(shr_reader *r, rmt_lazy *z, fmt_dataset *ds, uint64_t first,
                 shr_on_error on_error)
{
    shr_lazy_part *lz = realloc(r->lz, (r->nlz + 1) * sizeof *lz);
    if (!lz)
        return ENOMEM;
    r->lz = lz;
    lz[r->nlz++] = (shr_lazy_part){.z = z, .ds = ds, .first = first,
                                  .end = first + fmt_dataset_count(ds), .on_error = on_error,
                                  .r = r};
    return 0;
}

/* Most distinct shards of part p one batch of this rank touches (see sampler.h): the positions
 * of a batch span batch_size * world consecutive positions of the epoch's sequence (sequential),
 * or of its windows (quasi); random: any of them. A mixture's stream holds at most that many
 * of them, consecutive in its own pass (mixture.h), which may wrap once more within the batch. */
static size_t plan_cap(const shr_reader *r, const shr_lazy_part *p)
{
    const fmt_manifest *m = fmt_dataset_manifest(p->ds);
    uint64_t b = r->o.batch_size, cap = b < m->nshards ? b : m->nshards, least = UINT64_MAX;
    for (size_t i = 0; i < m->nshards; i++)
        least = m->shards[i].samples < least ? m->shards[i].samples : least;
    if (r->o.order == SHR_ORDER_RANDOM || least == 0 || least == UINT64_MAX)
        return (size_t)(cap ? cap : 1);
    uint64_t span = b * r->o.world, est, wrap = r->mx ? 3 : 2;
    if (r->o.order == SHR_ORDER_SEQUENTIAL)
        est = (span + least - 1) / least + wrap;    /* a straddle, the wrap of padding */
    else {
        uint64_t w = r->o.quasi_window ? r->o.quasi_window : 1;
        est = ((span + w * least - 1) / (w * least) + wrap) * w;
    }
    return (size_t)(est < cap ? est : cap);
}

/* The limit's share of each part: its minimum (its need[i] largest shards), and the rest of the
 * limit in proportion to the parts' sizes. 0, or SHR_EINVAL naming what the parts need at once
 * (ahead: the window, for the message). */
static int share_limit(shr_reader *r, const size_t *need, size_t ahead, uint64_t *limit)
{
    uint64_t least = 0, all = 0, bytes[SHR_MAX_STREAMS];
    for (uint32_t i = 0; i < r->nlz; i++) {
        limit[i] = rmt_lazy_minimum(r->lz[i].z, need[i]);
        least = limit[i] > UINT64_MAX - least ? UINT64_MAX : least + limit[i];
        all += bytes[i] = rmt_lazy_minimum(r->lz[i].z, SIZE_MAX);
    }
    if (least > r->o.cache_limit) {
        if (r->nlz == 1)
            return fmt_fail(r->why, SHR_EINVAL, "cache_limit %" PRIu64 " bytes is below the %"
                            PRIu64 " bytes this reader needs at once (%zu of its largest "
                            "shards: prefetch_shards %zu; %" PRIu32 " threads times %zu shards "
                            "a batch may touch)", r->o.cache_limit, least, need[0], ahead,
                            r->o.threads, r->lz[0].cap);
        return fmt_fail(r->why, SHR_EINVAL, "cache_limit %" PRIu64 " bytes is below the %"
                        PRIu64 " bytes this reader needs at once: for each of its %" PRIu32
                        " streams at URLs, its largest shards (prefetch_shards %zu, or %" PRIu32
                        " threads times the shards of it a batch may touch)", r->o.cache_limit,
                        least, r->nlz, ahead, r->o.threads);
    }
    unsigned __int128 rest = r->o.cache_limit - least;
    for (uint32_t i = 0; i < r->nlz; i++)
        limit[i] += all ? (uint64_t)(rest * bytes[i] / all) : 0;
    return 0;
}

int shr_lazy_start(shr_reader *r)
{
    size_t need[SHR_MAX_STREAMS], ahead[SHR_MAX_STREAMS];
    uint64_t limit[SHR_MAX_STREAMS];
    size_t first = r->o.prefetch_shards ? r->o.prefetch_shards : LAZY_AHEAD;
    for (uint32_t i = 0; i < r->nlz; i++) {
        shr_lazy_part *p = &r->lz[i];
        size_t n = fmt_dataset_manifest(p->ds)->nshards;
        p->cap = plan_cap(r, p);
        if (!(p->plan_idx = calloc(r->o.batch_size, sizeof *p->plan_idx)))
            return fmt_fail(r->why, ENOMEM, "out of memory");
        ahead[i] = first < n ? first : n;
    }
    /* what the workers hold at once: each its batch's shards, waiting ones included; and the
     * window ahead. The default window shrinks (every part's alike) to the limit. */
    for (;;) {
        uint64_t least = 0;
        int shrink = 0;
        for (uint32_t i = 0; i < r->nlz; i++) {
            size_t n = fmt_dataset_manifest(r->lz[i].ds)->nshards;
            size_t hold = (size_t)r->o.threads * r->lz[i].cap;
            hold = hold < n ? hold : n;
            need[i] = ahead[i] > hold ? ahead[i] : hold;
            least += r->o.cache_limit ? rmt_lazy_minimum(r->lz[i].z, need[i]) : 0;
            shrink |= ahead[i] > 1;
        }
        if (!r->o.cache_limit || r->o.prefetch_shards || least <= r->o.cache_limit || !shrink)
            break;
        for (uint32_t i = 0; i < r->nlz; i++)
            ahead[i] -= ahead[i] > 1;
    }
    if (r->o.cache_limit) {
        int rc = share_limit(r, need, r->nlz ? ahead[0] : 0, limit);
        if (rc)
            return rc;
    }
    for (uint32_t i = 0; i < r->nlz; i++) {
        shr_lazy_part *p = &r->lz[i];
        const fmt_manifest *m = fmt_dataset_manifest(p->ds);
        uint64_t most = 0;
        for (size_t k = 0; k < m->nshards; k++)
            most = m->shards[k].samples > most ? m->shards[k].samples : most;
        uint64_t scan = (uint64_t)ahead[i] * most / r->o.batch_size + 2;
        if (r->mx) {    /* the batches hold the stream's share of their samples */
            uint64_t share = r->mx->plan.per_epoch[shr_mix_plan_stream(&r->mx->plan,
                                                                         p->first)];
            scan = share ? scan * r->mx->plan.total / share + 2 : 2;
        }
        rmt_lazy_hooks h = {.plan = plan_batch, .unload = unload_shard, .epoch_end = epoch_end,
                            .ctx = p};
        fmt_msg msg = {{0}};
        int rc = rmt_lazy_start(p->z, &h, r->o.cache_limit ? limit[i] : 0, (uint32_t)ahead[i],
                                p->cap, scan > (1u << 20) ? (1u << 20) : scan, &msg);
        if (rc)
            return fmt_fail(r->why, rc, "%s", fmt_reason(&msg, rc));
    }
    return 0;
}

/* part and shard of global sample g, or -1 */
static long part_of(const shr_reader *r, uint64_t g, uint32_t *part)
{
    for (uint32_t i = 0; i < r->nlz; i++)
        if (g >= r->lz[i].first && g < r->lz[i].end) {
            *part = i;
            return fmt_manifest_find_shard(fmt_dataset_manifest(r->lz[i].ds),
                                           g - r->lz[i].first);
        }
    return -1;
}

static void yield_held(shr_worker *w)
{
    for (size_t j = 0; j < w->nheld; j++)
        rmt_lazy_yield(w->r->lz[w->held[j].part].z, w->held[j].shard);
    w->nheld = 0;
}

int shr_lazy_acquire(shr_worker *w, uint64_t k, uint32_t n, fmt_msg *msg)
{
    shr_reader *r = w->r;
    for (uint32_t i = 0; i < r->nlz; i++)
        rmt_lazy_begin(r->lz[i].z, k);
    w->nheld = 0;
    /* the batch's shards (after room for those held): part by part */
    shr_held *want = w->held + w->held_cap / 2;
    size_t got = 0, *scratch = (size_t *)(w->held + w->held_cap);     /* batch_size more */
    for (uint32_t i = 0; i < r->nlz; i++) {
        size_t m = part_shards(&r->lz[i], w->idx, n, scratch, n - got);
        for (size_t j = 0; j < m; j++)
            want[got + j] = (shr_held){.part = i, .shard = scratch[j]};
        got += m;
    }
    size_t taken = SIZE_MAX;    /* after a restart, the one of want[] already held */
    for (size_t i = 0; i < got; i++) {
        const shr_lazy_part *p = &r->lz[want[i].part];
        size_t s = want[i].shard;
        if (i == taken)
            continue;
        fmt_msg why = {{0}};
        /* waiting while holding shards is what a single reader's limit allows for (each part's
         * share of it holds every worker's shards of the part at once); but when other
         * processes keep the room it needs, the shards held go back and the wait starts
         * holding nothing (two readers of one cache, each holding what the other waited for,
         * waited forever), then the batch's shards are taken again from the first */
        int rc = rmt_lazy_acquire(p->z, s, w->nheld ? RMT_WAIT_UNLESS_STARVED : RMT_WAIT, &why);
        int again = 0;          /* the shards before this one were let go: take them again */
        if (rc == EBUSY) {
            yield_held(w);
            rc = rmt_lazy_acquire(p->z, s, RMT_WAIT, &why);
            again = 1;
        }
        int holding = rc == 0;
        if (holding) {
            w->held[w->nheld++] = want[i];
            rc = fmt_dataset_shard_load(p->ds, s, &why);
        }
        if (rc) {
            /* unavailable: on_error fails the batch, or skips or replaces its samples, which
             * then name the shard and why (fmt_dataset_sample_error) */
            if (p->on_error == SHR_ON_ERROR_FAIL) {
                shr_lazy_release(w, k);
                return fmt_fail(msg, rc, "%s", fmt_reason(&why, rc));
            }
            fmt_dataset_shard_unload(p->ds, s, rc, fmt_reason(&why, rc));
        }
        if (again) {
            taken = holding ? i : SIZE_MAX;
            i = (size_t)-1;     /* from the first again (a failed shard fails at once) */
        }
    }
    return 0;
}

int shr_lazy_hold(shr_worker *w, uint64_t idx)
{
    shr_reader *r = w->r;
    uint32_t part;
    long s = part_of(r, idx, &part);
    if (s < 0)
        return FMT_EINVAL;
    for (size_t i = 0; i < w->nheld; i++)
        if (w->held[i].part == part && w->held[i].shard == (size_t)s)
            return 0;
    if (w->nheld == w->held_cap)
        return EAGAIN;
    int rc = rmt_lazy_acquire(r->lz[part].z, (size_t)s, RMT_NOWAIT, NULL);
    if (rc)
        return rc;
    w->held[w->nheld++] = (shr_held){.part = part, .shard = (size_t)s};
    return fmt_dataset_shard_load(r->lz[part].ds, (size_t)s, NULL);
}

void shr_lazy_release(shr_worker *w, uint64_t k)
{
    const shr_reader *r = w->r;
    for (size_t i = 0; i < w->nheld; i++)
        rmt_lazy_release(r->lz[w->held[i].part].z, w->held[i].shard);
    w->nheld = 0;
    for (uint32_t i = 0; i < r->nlz; i++)
        rmt_lazy_end(r->lz[i].z, k);
}

void shr_lazy_cancel(shr_reader *r)
{
    for (uint32_t i = 0; i < r->nlz; i++)
        rmt_lazy_cancel(r->lz[i].z);
}

void shr_lazy_close(shr_reader *r)
{
    for (uint32_t i = 0; i < r->nlz; i++) {
        rmt_lazy_close(r->lz[i].z);     /* its thread unloads shards: stopped first */
        free(r->lz[i].plan_idx);
    }
    free(r->lz);
    r->lz = NULL;
    r->nlz = 0;
}

int shr_lazy_later(const shr_reader *r)
{
    for (uint32_t i = 0; i < r->nlz; i++)
        if (fmt_dataset_skeletons(r->lz[i].ds))
            return 1;
    return 0;
}

int shr_cache_stats(const shr_reader *r, shr_cache_info *info)
{
    if (!r || !info)
        return SHR_EINVAL;
    memset(info, 0, sizeof *info);
    for (uint32_t i = 0; i < r->nlz; i++) {
        rmt_stats st;
        uint64_t peak, evicted;
        rmt_lazy_stats(r->lz[i].z, &st, &peak, &evicted);
        info->peak_bytes += peak;
        info->evicted += evicted;
        info->fetched += st.fetched;
        info->cached += st.cached;
        info->bytes += st.bytes;
        info->retries += st.retries;
    }
    info->limit = r->nlz ? r->o.cache_limit : 0;
    info->dir = r->nlz == 1 && !r->mx ? rmt_lazy_dir(r->lz[0].z) : NULL;
    return 0;
}
