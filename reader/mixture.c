/* mixture.c - several datasets read as one by proportion: the epoch plan (mixture.h, pure
 * functions the sampler calls), shr_open_mixture (each stream opened as shr_open opens a
 * dataset, the streams checked against each other), and the streams' facts.
 *
 * The reader itself is the single-dataset one: its samples are named by global index (stream
 * s's sample i is first_s + i), the workers look each one up in its own stream's dataset
 * (assemble.c), and the sampler lays each rank's batch over consecutive positions of the
 * interleave (sampler.h, "Mixtures"), so a batch's composition is a window of it.
 */
#include "mixture.h"

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "reader.h"
#include "sampler.h"

#define TAG_STREAM 0x5348524eu      /* the key of a stream's pass order (its own seed) */

typedef unsigned __int128 u128;

/* ---- the plan ---- */

int shr_mix_plan_make(shr_mix_plan *p, uint32_t n, const uint64_t *sizes, const double *weight,
                      const double *repeat, const uint64_t *choose, uint64_t samples_per_epoch,
                      fmt_msg *why)
{
    memset(p, 0, sizeof *p);
    if (n == 0 || n > SHR_MAX_STREAMS)
        return fmt_fail(why, SHR_EINVAL, "a mixture takes 1 to %u streams, not %" PRIu32,
                        SHR_MAX_STREAMS, n);
    uint32_t weighted = 0;
    for (uint32_t s = 0; s < n; s++) {
        if (!(weight[s] >= 0) || !isfinite(weight[s]))
            return fmt_fail(why, SHR_EINVAL, "stream %" PRIu32 ": weight must be a finite "
                            "number >= 0, not %g", s, weight[s]);
        if (!(repeat[s] >= 0) || !isfinite(repeat[s]) || repeat[s] > 1e9)
            return fmt_fail(why, SHR_EINVAL, "stream %" PRIu32 ": repeat must be in 0..1e9, "
                            "not %g", s, repeat[s]);
        if (weight[s] > 0 && (repeat[s] > 0 || choose[s]))
            return fmt_fail(why, SHR_EINVAL, "stream %" PRIu32 ": give weight, repeat or "
                            "choose, not two of them", s);
        if (repeat[s] > 0 && choose[s])
            return fmt_fail(why, SHR_EINVAL, "stream %" PRIu32 ": give repeat or choose, not "
                            "both", s);
        if (sizes[s] == 0)
            return fmt_fail(why, SHR_EINVAL, "stream %" PRIu32 " has no samples", s);
        weighted += weight[s] > 0;
    }
    if (weighted && weighted != n)
        return fmt_fail(why, SHR_EINVAL, "either every stream has a weight (shares of the "
                        "epoch) or none has (repeat or choose: counts per epoch): %" PRIu32
                        " of %" PRIu32 " have one", weighted, n);
    if (!weighted && samples_per_epoch)
        return fmt_fail(why, SHR_EINVAL, "samples_per_epoch needs weights: with repeat and "
                        "choose the counts per epoch are given");
    p->n = n;
    p->size = calloc(n, sizeof *p->size);
    p->per_epoch = calloc(n, sizeof *p->per_epoch);
    p->first = calloc(n + 1, sizeof *p->first);
    if (!p->size || !p->per_epoch || !p->first) {
        shr_mix_plan_free(p);
        return fmt_fail(why, ENOMEM, "out of memory");
    }
    uint64_t total = 0;
    for (uint32_t s = 0; s < n; s++) {
        p->size[s] = sizes[s];
        if (__builtin_add_overflow(p->first[s], sizes[s], &p->first[s + 1]) ||
            p->first[s + 1] > (uint64_t)INT64_MAX)
            goto too_many;
    }
    if (weighted) {
        /* largest remainders: floor of each exact share, then one more to the largest
         * fractions (the lower stream first on a tie) until they add up */
        uint64_t m = samples_per_epoch ? samples_per_epoch : p->first[n];
        if (m > ((uint64_t)1 << 53))
            goto too_many;
        double wsum = 0;
        for (uint32_t s = 0; s < n; s++)
            wsum += weight[s];
        double frac[SHR_MAX_STREAMS];
        for (uint32_t s = 0; s < n; s++) {
            double q = weight[s] / wsum * (double)m;
            p->per_epoch[s] = (uint64_t)floor(q);
            if (p->per_epoch[s] > m)
                p->per_epoch[s] = m;
            frac[s] = q - floor(q);
            total += p->per_epoch[s];
        }
        while (total < m) {
            uint32_t best = 0;
            for (uint32_t s = 1; s < n; s++)
                if (frac[s] > frac[best])
                    best = s;
            p->per_epoch[best]++;
            frac[best] = -1;
            total++;
        }
        while (total > m) {     /* rounding of the floors' sum: take from the largest */
            uint32_t best = 0;
            for (uint32_t s = 1; s < n; s++)
                if (p->per_epoch[s] > p->per_epoch[best])
                    best = s;
            p->per_epoch[best]--;
            total--;
        }
    } else {
        for (uint32_t s = 0; s < n; s++) {
            double r = repeat[s] > 0 ? repeat[s] : 1.0;
            double c = choose[s] ? (double)choose[s] : nearbyint(r * (double)sizes[s]);
            if (c > (double)((uint64_t)1 << 53))
                goto too_many;
            p->per_epoch[s] = (uint64_t)c;
            if (p->per_epoch[s] == 0)
                return shr_mix_plan_free(p), fmt_fail(why, SHR_EINVAL, "stream %" PRIu32
                                                      ": repeat %g of %" PRIu64 " samples is "
                                                      "none an epoch", s, r, sizes[s]);
            if (__builtin_add_overflow(total, p->per_epoch[s], &total))
                goto too_many;
        }
    }
    if (total == 0 || total > ((uint64_t)1 << 62)) {
        shr_mix_plan_free(p);
        return fmt_fail(why, SHR_EINVAL, "the mixture's epoch has %" PRIu64 " samples", total);
    }
    p->total = total;
    return 0;
too_many:
    shr_mix_plan_free(p);
    return fmt_fail(why, SHR_EINVAL, "the mixture has too many samples");
}

int shr_mix_plan_quasi(shr_mix_plan *p, const size_t *nshards, const uint64_t *const *counts,
                       uint32_t window)
{
    p->quasi = calloc(p->n, sizeof *p->quasi);
    if (!p->quasi)
        return ENOMEM;
    for (uint32_t s = 0; s < p->n; s++) {
        /* the stream's key is the epoch (stream_key): the sampler's own seed is not used */
        shr_sampler_cfg cfg = {.n = p->size[s], .order = SHR_ORDER_QUASI, .world = 1,
                               .batch_size = 1, .nshards = nshards[s],
                               .shard_counts = counts[s], .window = window};
        int rc = shr_sampler_create(&p->quasi[s], &cfg);
        if (rc)
            return rc;
    }
    return 0;
}

void shr_mix_plan_free(shr_mix_plan *p)
{
    for (uint32_t s = 0; p->quasi && s < p->n; s++)
        shr_sampler_free(p->quasi[s]);
    free(p->quasi);
    free(p->size);
    free(p->per_epoch);
    free(p->first);
    memset(p, 0, sizeof *p);
}

uint32_t shr_mix_plan_stream(const shr_mix_plan *p, uint64_t g)
{
    uint32_t lo = 0, hi = p->n - 1;     /* the last stream whose first is <= g */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo + 1) / 2;
        if (p->first[mid] <= g)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Items of stream t before item (s, k) in the interleave: keys (2l + 1) / (2 m_t) below
 * (2k + 1) / (2 m_s), or equal to it for a lower stream. */
static uint64_t before(const shr_mix_plan *p, uint32_t t, uint32_t s, uint64_t k)
{
    uint64_t mt = p->per_epoch[t], ms = p->per_epoch[s];
    if (t == s)
        return k;
    if (mt == 0)
        return 0;
    u128 q = (u128)(2 * k + 1) * mt;
    /* odd o = 2l + 1 with o ms < q (t > s) or o ms <= q (t < s): o <= x */
    u128 x = t < s ? q / ms : (q - 1) / ms;
    u128 c = (x + 1) / 2;
    return c < mt ? (uint64_t)c : mt;
}

static uint64_t rank_of(const shr_mix_plan *p, uint32_t s, uint64_t k)
{
    uint64_t r = 0;
    for (uint32_t t = 0; t < p->n; t++)
        r += before(p, t, s, k);
    return r;
}

void shr_mix_plan_locate(const shr_mix_plan *p, uint64_t j, uint32_t *s, uint64_t *k,
                         uint64_t *c)
{
    for (uint32_t t = 0; t < p->n; t++) {
        uint64_t m = p->per_epoch[t];
        if (m == 0)
            continue;
        /* the first item of t at rank >= j; j is its rank if j belongs to t */
        uint64_t lo = 0, hi = m;
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo) / 2;
            if (rank_of(p, t, mid) < j)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < m && rank_of(p, t, lo) == j) {
            *s = t;
            *k = lo;
            for (uint32_t u = 0; u < p->n; u++)
                c[u] = before(p, u, t, lo);
            return;
        }
    }
    /* unreachable for j < total: every rank belongs to exactly one item */
    *s = 0;
    *k = 0;
    memset(c, 0, p->n * sizeof *c);
}

/* The stream whose next item (c[s]) comes first in the interleave. */
static uint32_t next_stream(const shr_mix_plan *p, const uint64_t *c)
{
    uint32_t best = UINT32_MAX;
    for (uint32_t s = 0; s < p->n; s++) {
        if (c[s] >= p->per_epoch[s])
            continue;
        /* (2 c_s + 1) / m_s < (2 c_b + 1) / m_b; strictly, so a tie keeps the lower stream */
        if (best == UINT32_MAX || (u128)(2 * c[s] + 1) * p->per_epoch[best] <
                                      (u128)(2 * c[best] + 1) * p->per_epoch[s])
            best = s;
    }
    return best;
}

static uint64_t stream_key(uint64_t seed, uint64_t epoch, uint32_t s, uint64_t pass)
{
    const uint64_t v[4] = {htole64(seed), htole64(epoch), htole64(s), htole64(pass)};
    return XXH3_64bits_withSeed(v, sizeof v, TAG_STREAM);
}

/* The global index of stream s's k-th item of epoch. */
static uint64_t item_index(const shr_mix_plan *p, shr_order order, uint64_t seed,
                           uint64_t epoch, uint32_t s, uint64_t k)
{
    uint64_t n = p->size[s], i;
    if (order == SHR_ORDER_RANDOM)
        i = shr_perm(stream_key(seed, epoch, s, k / n), n, k % n);
    else
        i = (uint64_t)(((u128)epoch * p->per_epoch[s] + k) % n);
    return p->first[s] + i;
}

/* Items k0 .. k0 + count - 1 of stream s in quasi order, into out: one walk of the stream's
 * windows per pass through it. */
static void quasi_items(const shr_mix_plan *p, uint64_t seed, uint64_t epoch, uint32_t s,
                        uint64_t k0, uint32_t count, uint64_t *out)
{
    uint64_t n = p->size[s];
    while (count) {
        uint64_t t = k0 % n;
        uint32_t run = n - t < count ? (uint32_t)(n - t) : count;
        shr_sampler_seq(p->quasi[s], stream_key(seed, epoch, s, k0 / n), t, run, out);
        for (uint32_t i = 0; i < run; i++)
            out[i] += p->first[s];
        k0 += run;
        out += run;
        count -= run;
    }
}

/* shr_mix_plan_fill in quasi order from the counts c0 before j0: each stream's items of the run
 * (consecutive ordinals) read together, then laid out in the interleave's order. */
static void fill_quasi(const shr_mix_plan *p, uint64_t seed, uint64_t epoch, const uint64_t *c0,
                       uint32_t count, uint64_t *out)
{
    uint64_t c[SHR_MAX_STREAMS], at[SHR_MAX_STREAMS];
    uint32_t many[SHR_MAX_STREAMS] = {0};
    uint64_t *tmp = malloc((size_t)count * sizeof *tmp);
    memcpy(c, c0, p->n * sizeof *c);
    for (uint32_t i = 0; i < count; i++) {
        uint32_t s = next_stream(p, c);
        s = s == UINT32_MAX ? 0 : s;    /* past the epoch: not asked for */
        if (!tmp)       /* no memory for the runs: one item at a time, slower */
            quasi_items(p, seed, epoch, s, c[s], 1, out + i);
        many[s]++;
        c[s]++;
    }
    if (!tmp)
        return;
    uint64_t off = 0;
    for (uint32_t s = 0; s < p->n; s++) {
        at[s] = off;
        quasi_items(p, seed, epoch, s, c0[s], many[s], tmp + off);
        off += many[s];
    }
    memcpy(c, c0, p->n * sizeof *c);
    for (uint32_t i = 0; i < count; i++) {
        uint32_t s = next_stream(p, c);
        s = s == UINT32_MAX ? 0 : s;
        out[i] = tmp[at[s]++];
        c[s]++;
    }
    free(tmp);
}

void shr_mix_plan_fill(const shr_mix_plan *p, shr_order order, uint64_t seed, uint64_t epoch,
                       uint64_t j0, uint32_t count, uint64_t *out)
{
    if (count == 0)
        return;
    uint64_t c[SHR_MAX_STREAMS];
    uint32_t s;
    uint64_t k;
    shr_mix_plan_locate(p, j0, &s, &k, c);
    if (order == SHR_ORDER_QUASI && p->quasi) {
        fill_quasi(p, seed, epoch, c, count, out);
        return;
    }
    for (uint32_t i = 0; i < count; i++) {
        s = next_stream(p, c);
        if (s == UINT32_MAX)
            s = 0;      /* past the epoch: not asked for */
        out[i] = item_index(p, order, seed, epoch, s, c[s]);
        c[s]++;
    }
}

/* ---- the reader over the streams ---- */

void shr_mixture_free(shr_mixture *mx)
{
    if (!mx)
        return;
    for (uint32_t s = 0; mx->lazy && s < mx->plan.n; s++)
        rmt_lazy_close(mx->lazy[s]);
    for (uint32_t s = 1; mx->ds && s < mx->plan.n; s++)
        fmt_dataset_close(mx->ds[s]);
    for (uint32_t s = 0; mx->paths && s < mx->plan.n; s++)
        free(mx->paths[s]);
    for (uint32_t s = 0; mx->dirs && s < mx->plan.n; s++)
        free(mx->dirs[s]);
    free(mx->ds);
    free(mx->lazy);
    free(mx->paths);
    free(mx->dirs);
    free(mx->on_error);
    free(mx->label_offset);
    free(mx->classes);
    shr_mix_plan_free(&mx->plan);
    free(mx);
}

/* The one size every sample of ds has (manifest, else the index), or 0 x 0. */
static void stream_size(const fmt_dataset *ds, uint32_t *w, uint32_t *h)
{
    const fmt_manifest *m = fmt_dataset_manifest(ds);
    *w = m->sample_width;
    *h = m->sample_height;
    if (*w && *h)
        return;
    *w = *h = 0;
    for (uint64_t i = 0; i < m->samples; i++) {
        fmt_sample x;
        if (fmt_dataset_get(ds, i, &x) != 0)
            continue;
        if (!*w) {
            *w = x.width;
            *h = x.height;
        } else if (x.width != *w || x.height != *h) {
            *w = *h = 0;
            return;
        }
    }
}

/* what a dataset's targets carry besides boxes, for messages */
static const char *segm_kind(uint32_t ext)
{
    if (ext & FMT_TARGET_EXT_MAP)
        return "label maps";
    if ((ext & FMT_TARGET_EXT_MASKS) && (ext & FMT_TARGET_EXT_KEYPOINTS))
        return "instance masks and keypoints";
    if (ext & FMT_TARGET_EXT_MASKS)
        return "instance masks";
    if (ext & FMT_TARGET_EXT_KEYPOINTS)
        return "keypoints";
    return "boxes alone";
}

int shr_mixture_geometry(shr_reader *r, fmt_msg *m)
{
    shr_mixture *mx = r->mx;
    const fmt_manifest *m0 = fmt_dataset_manifest(mx->ds[0]);
    for (uint32_t s = 0; s < mx->plan.n; s++) {
        const fmt_manifest *ms = fmt_dataset_manifest(mx->ds[s]);
        if (ms->channels != r->channels)
            return fmt_fail(m, SHR_EINVAL, "stream %" PRIu32 " (%s) has %" PRIu32 " channel(s), "
                            "stream 0 (%s) %" PRIu32 ": one batch cannot hold both", s,
                            mx->paths[s], ms->channels, mx->paths[0], r->channels);
        if (ms->targets != m0->targets)
            return fmt_fail(m, SHR_EINVAL, "stream %" PRIu32 " (%s) is a %s dataset, stream 0 "
                            "(%s) a %s one: one batch cannot hold both", s, mx->paths[s],
                            ms->targets ? "detection" : "classification", mx->paths[0],
                            m0->targets ? "detection" : "classification");
        /* masks, keypoints and label maps travel in a mixture's batches as in one dataset's:
         * the streams must carry the same ones */
        uint32_t ext = ms->target_ext & SEGM_EXT, ext0 = m0->target_ext & SEGM_EXT;
        if (ms->targets && ext != ext0)
            return fmt_fail(m, SHR_EINVAL, "stream %" PRIu32 " (%s) carries %s, stream 0 (%s) "
                            "%s: one batch cannot hold both", s, mx->paths[s], segm_kind(ext),
                            mx->paths[0], segm_kind(ext0));
        if (ms->targets && (ext & FMT_TARGET_EXT_KEYPOINTS) &&
            ms->num_keypoints != m0->num_keypoints)
            return fmt_fail(m, SHR_EINVAL, "stream %" PRIu32 " (%s) has %" PRIu32 " keypoints "
                            "an instance, stream 0 (%s) %" PRIu32 ": one batch cannot hold both",
                            s, mx->paths[s], ms->num_keypoints, mx->paths[0],
                            m0->num_keypoints);
        if (ms->targets && (ext & FMT_TARGET_EXT_MAP) && ms->ignore_index != m0->ignore_index)
            return fmt_fail(m, SHR_EINVAL, "stream %" PRIu32 " (%s) pads its label maps with "
                            "%" PRIu32 ", stream 0 (%s) with %" PRIu32 ": give them one ignore "
                            "index", s, mx->paths[s], ms->ignore_index, mx->paths[0],
                            m0->ignore_index);
        uint32_t w, h;
        stream_size(mx->ds[s], &w, &h);
        if (!r->o.width && r->o.scale == SHR_SCALE_NONE && (w != r->width || h != r->height))
            return fmt_fail(m, SHR_ESHAPE, "stream %" PRIu32 " (%s): %s, stream 0 (%s) "
                            "%" PRIu32 "x%" PRIu32 ": give width and height to crop or pad "
                            "every stream to one size", s, mx->paths[s],
                            w ? "its samples are another size" : "its samples vary in size",
                            mx->paths[0], r->width, r->height);
        if (w != r->width || h != r->height)
            r->uniform = 0;
        uint64_t max = fmt_dataset_max_length(mx->ds[s]);
        if (max > SIZE_MAX / 2)
            return fmt_fail(m, FMT_ETOOBIG, "%s: a sample of %" PRIu64 " bytes is too large",
                            mx->paths[s], max);
        if (max > r->sample_max)
            r->sample_max = (size_t)max;
    }
    if (!r->uniform)
        r->src_w = r->src_h = 0;
    return 0;
}

void shr_mixture_largest(const shr_reader *r, uint32_t *w, uint32_t *h)
{
    for (uint32_t s = 1; r->mx && s < r->mx->plan.n; s++) {
        const fmt_dataset *ds = r->mx->ds[s];
        const fmt_manifest *m = fmt_dataset_manifest(ds);
        for (uint64_t i = 0; i < (m->sample_width ? 1 : m->samples); i++) {
            fmt_sample x;
            if (m->sample_width) {
                x.width = m->sample_width;
                x.height = m->sample_height;
            } else if (fmt_dataset_get(ds, i, &x) != 0) {
                continue;
            }
            *w = x.width > *w ? x.width : *w;
            *h = x.height > *h ? x.height : *h;
        }
    }
}

int shr_open_mixture(shr_reader **out, const shr_stream *streams, uint32_t n,
                     uint64_t samples_per_epoch, int offset_labels, const shr_options *opt,
                     shr_msg *msg)
{
    if (!out || !streams || n == 0 || n > SHR_MAX_STREAMS)
        return fmt_fail(msg, SHR_EINVAL, "a mixture takes a reader and 1 to %u "
                        "streams", SHR_MAX_STREAMS);
    *out = NULL;
    shr_options o;
    int rc = shr_options_full(opt, &o, msg);
    if (rc)
        return rc;
    if ((rc = shr_check_option_value("on_error", NULL, o.on_error, msg)) != 0 ||
        (rc = shr_check_option_value("access", NULL, o.access, msg)) != 0)
        return rc;
    shr_mixture *mx = calloc(1, sizeof *mx);
    uint64_t *sizes = calloc(n, sizeof *sizes), *choose = calloc(n, sizeof *choose);
    double *weight = calloc(n, sizeof *weight), *repeat = calloc(n, sizeof *repeat);
    if (mx) {
        mx->plan.n = n;     /* what shr_mixture_free walks until the plan is made */
        mx->ds = calloc(n, sizeof *mx->ds);
        mx->lazy = calloc(n, sizeof *mx->lazy);
        mx->paths = calloc(n, sizeof *mx->paths);
        mx->dirs = calloc(n, sizeof *mx->dirs);
        mx->on_error = calloc(n, sizeof *mx->on_error);
        mx->label_offset = calloc(n, sizeof *mx->label_offset);
        mx->classes = calloc(n, sizeof *mx->classes);
    }
    if (!mx || !sizes || !choose || !weight || !repeat || !mx->ds || !mx->lazy || !mx->paths ||
        !mx->dirs || !mx->on_error || !mx->label_offset || !mx->classes) {
        rc = fmt_fail(msg, ENOMEM, "out of memory");
        goto fail;
    }
    int64_t offset = 0;
    for (uint32_t s = 0; s < n; s++) {
        const shr_stream *st = &streams[s];
        if (!st->path) {
            rc = fmt_fail(msg, SHR_EINVAL, "stream %" PRIu32 " has no path", s);
            goto fail;
        }
        fmt_msg why;
        if (st->on_error != SHR_STREAM_ON_ERROR_DEFAULT &&
            shr_check_option_value("on_error", NULL, st->on_error, &why) != 0) {
            rc = fmt_fail(msg, SHR_EINVAL, "stream %" PRIu32 " (%s): %s", s, st->path,
                          why.text);
            goto fail;
        }
        mx->on_error[s] = st->on_error == SHR_STREAM_ON_ERROR_DEFAULT ? o.on_error
                                                                      : (shr_on_error)st->on_error;
        mx->paths[s] = strdup(st->path);
        if (!mx->paths[s]) {
            rc = fmt_fail(msg, ENOMEM, "out of memory");
            goto fail;
        }
        fmt_msg src = {{0}};
        /* the same open as a single dataset's, so a stream is whatever shr_open takes: at a
         * URL read as its shards arrive where it can be (else made whole first) */
        rc = rmt_is_url(st->path) ? shr_lazy_open_url(&mx->lazy[s], &mx->ds[s], st->path,
                                                      o.cache, o.access, o.cache_limit, &src)
                                  : 1;
        if (rc == 0 && !(mx->dirs[s] = strdup(rmt_lazy_dir(mx->lazy[s]))))
            rc = fmt_fail(&src, ENOMEM, "out of memory");
        if (rc == 1)
            rc = shr_open_source(&mx->ds[s], st->path, o.cache, o.access, mx->on_error[s],
                                 &mx->dirs[s], &src);
        if (rc) {
            fmt_fail(msg, rc, "stream %" PRIu32 ": cannot open dataset %s: %s", s,
                     st->path, fmt_reason(&src, rc));
            goto fail;
        }
        const fmt_manifest *m = fmt_dataset_manifest(mx->ds[s]);
        sizes[s] = m->samples;
        weight[s] = st->weight;
        repeat[s] = st->repeat;
        choose[s] = st->choose;
        mx->classes[s] = (uint32_t)m->nclasses;
        mx->label_offset[s] = offset_labels ? offset : 0;
        offset += (int64_t)m->nclasses;
        if (!offset_labels && mx->classes[s] > mx->all_classes)
            mx->all_classes = mx->classes[s];
    }
    if (offset_labels) {
        if (offset > UINT32_MAX) {
            rc = fmt_fail(msg, SHR_EINVAL, "the streams have %" PRId64 " classes in "
                          "all", offset);
            goto fail;
        }
        mx->all_classes = (uint32_t)offset;
        mx->offset = 1;
    }
    fmt_msg why = {{0}};
    rc = shr_mix_plan_make(&mx->plan, n, sizes, weight, repeat, choose, samples_per_epoch, &why);
    if (rc) {
        mx->plan.n = n;
        fmt_fail(msg, rc, "%s", why.text);
        goto fail;
    }
    if (o.order == SHR_ORDER_QUASI) {
        size_t nshards[SHR_MAX_STREAMS];
        const uint64_t *counts[SHR_MAX_STREAMS];
        uint64_t *all = NULL;
        size_t total = 0, at = 0;
        for (uint32_t s = 0; s < n; s++)
            total += (nshards[s] = fmt_dataset_manifest(mx->ds[s])->nshards);
        all = calloc(total ? total : 1, sizeof *all);
        rc = all ? 0 : ENOMEM;
        for (uint32_t s = 0; !rc && s < n; s++) {
            const fmt_manifest *m = fmt_dataset_manifest(mx->ds[s]);
            counts[s] = all + at;
            for (size_t i = 0; i < m->nshards; i++)
                all[at++] = m->shards[i].samples;
        }
        if (!rc)
            rc = shr_mix_plan_quasi(&mx->plan, nshards, counts,
                                    o.quasi_window ? o.quasi_window : 1);
        free(all);
        if (rc) {
            fmt_fail(msg, rc, "cannot plan the streams' quasi orders: %s",
                     shr_strerror(rc));
            goto fail;
        }
    }
    /* MixUp / CutMix soft labels over the mixture's classes */
    if ((o.mixup_alpha > 0 || o.cutmix_alpha > 0) && !o.num_classes)
        o.num_classes = mx->all_classes;
    free(sizes);
    free(choose);
    free(weight);
    free(repeat);
    return shr_open_with(out, mx->paths[0], &o, mx, msg);    /* owns mx from here */
fail:
    if (mx && mx->ds && mx->ds[0])
        fmt_dataset_close(mx->ds[0]);
    shr_mixture_free(mx);
    free(sizes);
    free(choose);
    free(weight);
    free(repeat);
    return rc;
}

int shr_mixture_lazy(shr_reader *r)
{
    shr_mixture *mx = r->mx;
    for (uint32_t s = 0; s < mx->plan.n; s++) {
        if (!mx->lazy[s])
            continue;
        if (shr_lazy_add(r, mx->lazy[s], mx->ds[s], mx->plan.first[s], mx->on_error[s]))
            return fmt_fail(r->why, ENOMEM, "out of memory");
        mx->lazy[s] = NULL;     /* the reader's */
    }
    return 0;
}

uint32_t shr_stream_count(const shr_reader *r)
{
    return r && r->mx ? r->mx->plan.n : 0;
}

int shr_get_stream_info(const shr_reader *r, uint32_t s, shr_stream_info *info)
{
    if (!r || !r->mx || !info || s >= r->mx->plan.n)
        return SHR_EINVAL;
    const shr_mixture *mx = r->mx;
    memset(info, 0, sizeof *info);
    info->path = mx->paths[s];
    info->samples = mx->plan.size[s];
    info->per_epoch = mx->plan.per_epoch[s];
    info->classes = mx->classes[s];
    info->label_offset = mx->label_offset[s];
    info->on_error = mx->on_error[s];
    info->dir = mx->dirs[s];
    return 0;
}
