/* mixture.h - a reader over several datasets mixed by proportion (shr_open_mixture): the epoch's
 * plan as pure functions, and the streams' datasets.
 *
 * The plan. Stream s has n_s samples and contributes m_s of them to every epoch (by weight: the
 * largest-remainder shares of samples_per_epoch; or repeat * n_s, or choose). The epoch is one
 * global sequence of M = sum m_s positions; which stream position j belongs to is a fixed,
 * deterministic interleave: stream s's k-th item (k < m_s) has the key (k + 1/2) / m_s, and the
 * sequence is all items sorted by key (ties: the lower stream first). Any prefix of t positions
 * then holds c_s items of stream s with |c_s - t m_s / M| <= 1/2 + (m_s / M) (S - 2) / 2, S the
 * streams with m_s > 0 (each stream's count below a key threshold x is within 1/2 of x m_s);
 * so any window of w consecutive positions holds stream s within 1 + (m_s / M)(S - 2) of
 * w m_s / M: within +-1 for two streams. Position j is found without walking the epoch (a
 * binary search per stream, O(S^2 log M)), and the positions after it by a merge (O(S) each).
 *
 * The k-th item of stream s in epoch e is, in random order, sample perm(key(seed, e, s, k / n_s),
 * n_s, k % n_s) of the stream (a fresh permutation per pass through the stream, so `choose` draws
 * distinct samples and `repeat` sees each sample once per pass); in sequential order sample
 * (e m_s + k) % n_s (a stream read in part goes on where the last epoch stopped); in quasi
 * order sample seq_s(key(seed, e, s, k / n_s), k % n_s), seq_s the stream's own quasi order
 * over its shards (sampler.h) for that key as its epoch, so each stream is read window by
 * window of its shards as one dataset is. Samples are
 * named by their global index: stream s's sample i is first_s + i, first_s = sum of n_t, t < s.
 */
#ifndef SHR_MIXTURE_H
#define SHR_MIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "dataset.h"
#include "shardread.h"

#define SHR_MAX_STREAMS 256u

typedef struct shr_mix_plan {
    uint32_t n;                 /* streams */
    uint64_t *size;             /* n_s */
    uint64_t *per_epoch;        /* m_s */
    uint64_t *first;            /* n + 1 prefix sums of size: stream s's global indices */
    uint64_t total;             /* M, positions per epoch */
    struct shr_sampler **quasi; /* n: each stream's quasi order (shr_mix_plan_quasi), or NULL */
} shr_mix_plan;

/* The plan of n streams of sizes[s] samples: weight[s] > 0 for all (shares of samples_per_epoch,
 * default the sum of the sizes), or for none (then choose[s] > 0, else round(repeat[s] *
 * sizes[s]), repeat 0 meaning 1; samples_per_epoch must be 0). SHR_EINVAL with the reason in
 * why, or ENOMEM. */
int shr_mix_plan_make(shr_mix_plan *p, uint32_t n, const uint64_t *sizes, const double *weight,
                      const double *repeat, const uint64_t *choose, uint64_t samples_per_epoch,
                      fmt_msg *why);
void shr_mix_plan_free(shr_mix_plan *p);

/* Quasi order for the plan's streams: stream s has nshards[s] shards of counts[s][..] samples,
 * read `window` shards at a time. 0, SHR_EINVAL (counts that do not add up to the stream's
 * size) or ENOMEM. */
int shr_mix_plan_quasi(shr_mix_plan *p, const size_t *nshards, const uint64_t *const *counts,
                       uint32_t window);

/* The stream of global index g (< first[n]). */
uint32_t shr_mix_plan_stream(const shr_mix_plan *p, uint64_t g);

/* Stream and ordinal of position j (< total) of the interleave, and in c (n entries) the items
 * of each stream before j. */
void shr_mix_plan_locate(const shr_mix_plan *p, uint64_t j, uint32_t *s, uint64_t *k,
                         uint64_t *c);

/* The global indices of positions j0 .. j0 + count - 1 (all < total) of epoch's sequence. */
void shr_mix_plan_fill(const shr_mix_plan *p, shr_order order, uint64_t seed, uint64_t epoch,
                       uint64_t j0, uint32_t count, uint64_t *out);

/* The streams' datasets and per-stream settings, owned by the reader (reader.h: r->mx). */
typedef struct shr_mixture {
    shr_mix_plan plan;
    fmt_dataset **ds;           /* n; ds[0] is also the reader's r->ds, which closes it */
    struct rmt_lazy **lazy;     /* n: the session of a stream at a URL read as its shards
                                 * arrive (else NULL), until the reader takes it (r->lz) */
    char **paths;               /* n, copies */
    char **dirs;                /* n: where each manifest.json lies (shr_stream_info.dir) */
    shr_on_error *on_error;     /* n */
    int64_t *label_offset;      /* n: added to each label of the stream */
    uint32_t *classes;          /* n: each stream's class count */
    uint32_t all_classes;       /* the mixture's: sum (labels offset) or largest (kept) */
    int offset;                 /* labels offset */
} shr_mixture;

/* Close the sessions left and the datasets but ds[0], free everything. Accepts NULL. */
void shr_mixture_free(shr_mixture *mx);

#endif
