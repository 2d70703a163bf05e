/* sampler.h - which dataset samples make up each batch of each epoch, for one rank.
 *
 * Pure functions of the configuration: no state changes after create, so any number of threads
 * may ask for any batch of any epoch at once, in any order, and get the same answer each time.
 * Memory is O(number of shards), never O(samples): random orders come from a keyed bijection on
 * [0, n) (a Feistel network with cycle walking), evaluated per position, not from a stored
 * permutation.
 *
 * Epoch sequence: the epoch's global order seq(j), j in [0, n):
 *   sequential  seq(j) = j
 *   random      seq(j) = perm_{seed,epoch}(j)
 *   quasi       shards are put in the order perm_{seed,epoch} over shard numbers and cut into
 *               windows of `window` shards; window w's samples come out in the order
 *               perm_{seed,epoch,w} over the window's sample count, before window w+1 starts.
 *               Position t of a window is sample t of its shards laid end to end in the epoch's
 *               shard order (empty shards take no positions).
 * Rank partition: rank r takes j = r, r + world, r + 2 world, ... ; with SHR_UNEVEN_PAD every rank
 * takes ceil(n / world) positions (j wraps around modulo n), with SHR_UNEVEN_DROP floor(n / world).
 * Elastic resumption: in epoch start_epoch the first `start` positions of the sequence were
 * consumed already (by any number of ranks); there rank r takes j = start + r, start + r + world,
 * ..., ceil((n - start) / world) positions with SHR_UNEVEN_PAD (past n, j wraps modulo n: the
 * declared padding), floor((n - start) / world) with SHR_UNEVEN_DROP. Since every rank's k-th
 * batch covers positions below start + (k + 1) * batch_size * world, the positions consumed when
 * every rank has taken c batches are exactly [0, start + c * batch_size * world) (capped at n),
 * whatever the world size: a state of (epoch, positions consumed) resumes on any world size
 * with no position repeated or lost but the padding.
 * Batches: consecutive runs of batch_size of the rank's positions; the last may be shorter, or is
 * dropped with drop_last. Every rank has the same number of batches.
 * Mixtures (cfg.mix, mixture.h): n is the plan's positions per epoch and seq(j) the global
 * index of position j of its interleave (in every order: quasi reads each stream in its own
 * quasi order, mixture.h). The
 * rank partition is by blocks, so that each batch is a window of consecutive positions: of the
 * m positions left, group g = [start + g B W, start + (g + 1) B W) gives rank r its positions
 * [start + g B W + r B, ... + B); a last, partial group of R < B W positions gives each rank L
 * = per_rank - g B of them (ceil or floor of R / W as above) at [.. + r L, .. + (r + 1) L),
 * wrapping modulo n past the end. The positions consumed after c batches of every rank are the
 * same as above, so elastic resumption holds as it does for one dataset.
 *
 * Cost: sequential O(1) and random O(1) per sample (a few tens of ns; datasets under 64 samples
 * a few hundred). Quasi: each shr_sampler_batch call also walks the epoch's shard order up to the
 * windows it needs, one permutation step per shard (O(nshards), some 30 ns a shard), and each
 * sample costs one permutation plus a binary search of its window's shards (a table of 16 bytes
 * a shard, held for the call: on the stack up to 256 shards a window, else on the heap, and if
 * that allocation fails the call still succeeds, scanning instead). So the "shards" given
 * to quasi should be shards, not single files: for datasets stored one file per sample, group the
 * files into blocks.
 */
#ifndef SHR_SAMPLER_H
#define SHR_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "shardread.h"

struct shr_mix_plan;

typedef struct {
    uint64_t n;                 /* samples in the dataset (0 is allowed: no batches) */
    shr_order order;
    uint64_t seed;
    uint32_t rank, world;
    shr_uneven uneven;
    uint32_t batch_size;
    int drop_last;
    /* SHR_ORDER_QUASI only (ignored by the other orders): */
    size_t nshards;             /* sample counts of the shards, in dataset order: shard s holds */
    const uint64_t *shard_counts;   /* the dataset indices after those of shards 0..s-1. Copied by
                                     * create; may be NULL when nshards is 0 (then n must be 0) */
    uint32_t window;            /* shards per window (>= 1) */
    uint64_t start_epoch, start;    /* positions [0, start) of epoch start_epoch were consumed
                                     * before (elastic resumption; start 0: none) */
    const struct shr_mix_plan *mix;     /* a mixture's plan (n its total), kept by the caller
                                         * for the sampler's life; NULL: one dataset */
} shr_sampler_cfg;

typedef struct shr_sampler shr_sampler;

/* Errors: SHR_EINVAL (NULL arguments, world 0, rank >= world, batch_size 0, an unknown order or
 * uneven mode, n + world past UINT64_MAX, quasi with window 0 or with counts not summing to n),
 * ENOMEM. On failure *s is NULL. */
int shr_sampler_create(shr_sampler **s, const shr_sampler_cfg *cfg);
void shr_sampler_free(shr_sampler *s);          /* accepts NULL */

uint64_t shr_sampler_per_rank(const shr_sampler *s);  /* positions per rank per epoch */
uint64_t shr_sampler_batches(const shr_sampler *s);   /* batches per rank per epoch */
/* The same for one epoch: start_epoch may have fewer (the others have the figures above). */
uint64_t shr_sampler_per_rank_in(const shr_sampler *s, uint64_t epoch);
uint64_t shr_sampler_batches_in(const shr_sampler *s, uint64_t epoch);
/* Positions of epoch's sequence consumed once every rank has taken `batches` batches of it
 * (at most n). */
uint64_t shr_sampler_consumed(const shr_sampler *s, uint64_t epoch, uint64_t batches);

/* The dataset indices of batch `batch` (< shr_sampler_batches_in(epoch)) of `epoch`, into out (room for
 * batch_size); returns how many (batch_size, or fewer for a last partial batch). A batch number
 * past the end returns 0 and writes nothing. */
uint32_t shr_sampler_batch(const shr_sampler *s, uint64_t epoch, uint64_t batch, uint64_t *out);

/* The epoch's sequence itself, seq(j) for j = j0 .. j0 + count - 1 (all < n), whatever the
 * ranks: a quasi order walks its windows once per call. What a mixture's streams are read in
 * (mixture.h). */
void shr_sampler_seq(const shr_sampler *s, uint64_t epoch, uint64_t j0, uint32_t count,
                     uint64_t *out);

/* SHR_ORDER_QUASI: the shard at position q (< nshards) of epoch's shard order; window w is
 * positions [w * window, (w + 1) * window). Lets a reader prefetch the next window's shards and
 * drop finished ones. Other orders (and q >= nshards): q. */
uint64_t shr_sampler_shard_at(const shr_sampler *s, uint64_t epoch, uint64_t q);

/* The keyed bijection itself: perm(key, n, i) for i < n is a permutation of [0, n), a different
 * one for each key. Returns i itself when i >= n. */
uint64_t shr_perm(uint64_t key, uint64_t n, uint64_t i);

/* shr_mix, the per-sample random bits of augmentation, is public: shardread.h. */

#endif
