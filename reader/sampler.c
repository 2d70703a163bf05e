/* sampler.c - batch membership as pure functions of (configuration, epoch, batch).
 *
 * No permutation is ever stored: shr_perm evaluates a keyed permutation of [0, n) one position at
 * a time, so a random order costs O(1) memory whatever the dataset size, and any batch of any
 * epoch can be computed on its own, by any thread, which is what exact resumption and a pool of
 * workers filling batches out of order need.
 *
 * shr_perm is a Feistel network over the bits that hold n - 1: a Feistel network is a bijection
 * whatever its round function, so the only question is how random the result looks. Values that
 * land at n or above are fed through again (cycle walking): the walk follows the cycle of the
 * network's permutation that started in [0, n), so it comes back to [0, n), and the restriction
 * is a bijection of [0, n). Averaged over i, a call makes domain / n passes. Measured choices:
 * - For an odd bit count the halves differ by one bit (an unbalanced network) rather than the
 *   domain growing to the next even bit count: the domain stays below 2n instead of 4n, which
 *   halves the worst case of the walk.
 * - 8 rounds of splitmix64's finalizer, not 6: over many keys, the joint distribution of three
 *   positions' images is measurably off uniform with 6 rounds on domains of 2^6 to 2^7 (chi-square
 *   30 standard deviations out at 60 million keys), and not with 8.
 * - At least 6 bits: on smaller domains the network reaches few permutations, far from evenly
 *   (n = 5: some orders 6 times likelier than others); walking a 64-value domain fixes that, and
 *   only datasets, windows or shard lists of under 64 pay for it.
 */
#include "sampler.h"

#include "mixture.h"

#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <xxhash.h>

#define PERM_ROUNDS 8
#define PERM_MIN_BITS 6
_Static_assert(PERM_ROUNDS % 2 == 0, "the Feistel halves must end where they started");
/* Quasi windows of up to this many shards have their table on the stack (16 bytes a shard), larger
 * ones on the heap for the length of a shr_sampler_batch call. */
#define QUASI_STACK 256
#define GOLDEN 0x9e3779b97f4a7c15ULL

/* Seeds of the hashes below: each use gets its own, so an augmentation salt can never reproduce
 * an order's key. */
enum {
    TAG_MIX = 0x5348524d,       /* shr_mix */
    TAG_EPOCH,                  /* perm_{seed,epoch}: random order, quasi shard order */
    TAG_WINDOW                  /* perm_{seed,epoch,w}: order within a quasi window */
};

struct shr_sampler {
    uint64_t n;
    shr_order order;
    uint64_t seed;
    uint32_t rank, world;
    uint32_t batch_size;
    uint64_t per_rank, batches;
    uint64_t start_epoch, start;        /* elastic resumption (sampler.h) */
    uint64_t start_per_rank, start_batches;
    uint64_t nshards, window;
    uint64_t *shard_start;      /* quasi: nshards + 1 prefix sums of the shard counts */
    const shr_mix_plan *mix;    /* a mixture's plan, or NULL */
};

/* splitmix64's finalizer: a bijection of 64-bit words with full avalanche. */
static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/* XXH3 of the four words in little-endian order, so every machine derives the same keys. */
static uint64_t hash4(uint64_t tag, uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    const uint64_t v[4] = { htole64(a), htole64(b), htole64(c), htole64(d) };
    return XXH3_64bits_withSeed(v, sizeof v, tag);
}

static uint64_t epoch_key(uint64_t seed, uint64_t epoch)
{
    return hash4(TAG_EPOCH, seed, epoch, 0, 0);
}

uint64_t shr_mix(uint64_t seed, uint64_t epoch, uint64_t index, uint64_t salt)
{
    return hash4(TAG_MIX, seed, epoch, index, salt);
}

uint64_t shr_perm(uint64_t key, uint64_t n, uint64_t i)
{
    if (n <= 1 || i >= n)
        return i;
    unsigned bits = 64 - (unsigned)__builtin_clzll(n - 1);
    if (bits < PERM_MIN_BITS)
        bits = PERM_MIN_BITS;
    /* halves of u and v bits; the rounds alternate which one they rewrite, and an even number
     * of rounds leaves them where they started */
    unsigned u = bits / 2, v = bits - u;
    const uint64_t mask[2] = { (UINT64_C(1) << u) - 1, (UINT64_C(1) << v) - 1 };
    uint64_t rk[PERM_ROUNDS];
    for (int r = 0; r < PERM_ROUNDS; r++)
        rk[r] = mix64(key + (uint64_t)(r + 1) * GOLDEN);
    uint64_t x = i;
    do {
        uint64_t hi = x >> v, lo = x & mask[1];
        for (int r = 0; r < PERM_ROUNDS; r++) {
            uint64_t t = hi ^ (mix64(lo ^ rk[r]) & mask[r & 1]);
            hi = lo;
            lo = t;
        }
        x = hi << v | lo;
    } while (x >= n);
    return x;
}

/* Positions per rank out of m left in an epoch. */
static uint64_t share(const shr_sampler_cfg *cfg, uint64_t m)
{
    if (cfg->uneven == SHR_UNEVEN_PAD)
        return m / cfg->world + (m % cfg->world != 0);
    return m / cfg->world;
}

static uint64_t batches_of(const shr_sampler_cfg *cfg, uint64_t per_rank)
{
    uint64_t b = per_rank / cfg->batch_size;
    if (!cfg->drop_last && per_rank % cfg->batch_size)
        b++;
    return b;
}

int shr_sampler_create(shr_sampler **s, const shr_sampler_cfg *cfg)
{
    int rc = 0;
    shr_sampler *p = NULL;
    if (s)
        *s = NULL;
    if (!s || !cfg || cfg->world == 0 || cfg->rank >= cfg->world || cfg->batch_size == 0 ||
        (unsigned)cfg->order > SHR_ORDER_QUASI || (unsigned)cfg->uneven > SHR_UNEVEN_DROP ||
        cfg->n > UINT64_MAX - cfg->world) {
        rc = SHR_EINVAL;
        goto leave;
    }
    p = calloc(1, sizeof *p);
    if (!p) {
        rc = ENOMEM;
        goto leave;
    }
    p->n = cfg->n;
    p->order = cfg->order;
    p->seed = cfg->seed;
    p->rank = cfg->rank;
    p->world = cfg->world;
    p->batch_size = cfg->batch_size;
    p->per_rank = share(cfg, cfg->n);
    p->batches = batches_of(cfg, p->per_rank);
    p->start_epoch = cfg->start_epoch;
    p->start = cfg->start < cfg->n ? cfg->start : cfg->n;
    p->start_per_rank = share(cfg, cfg->n - p->start);
    p->start_batches = batches_of(cfg, p->start_per_rank);
    if (cfg->mix) {
        if ((cfg->order == SHR_ORDER_QUASI && !cfg->mix->quasi) || cfg->n != cfg->mix->total) {
            rc = SHR_EINVAL;
            goto leave;
        }
        p->mix = cfg->mix;
    }

    if (cfg->order == SHR_ORDER_QUASI && !cfg->mix) {     /* a mixture's: its streams' */
        if (cfg->window == 0 || (cfg->nshards && !cfg->shard_counts)) {
            rc = SHR_EINVAL;
            goto leave;
        }
        if (cfg->nshards >= SIZE_MAX / (2 * sizeof *p->shard_start)) {   /* see quasi_cursor */
            rc = ENOMEM;
            goto leave;
        }
        p->nshards = cfg->nshards;
        p->window = cfg->window;
        p->shard_start = malloc((cfg->nshards + 1) * sizeof *p->shard_start);
        if (!p->shard_start) {
            rc = ENOMEM;
            goto leave;
        }
        uint64_t sum = 0;
        p->shard_start[0] = 0;
        for (size_t i = 0; i < cfg->nshards; i++) {
            if (cfg->shard_counts[i] > cfg->n - sum) {  /* also catches a sum that would wrap */
                rc = SHR_EINVAL;
                goto leave;
            }
            sum += cfg->shard_counts[i];
            p->shard_start[i + 1] = sum;
        }
        if (sum != cfg->n) {
            rc = SHR_EINVAL;
            goto leave;
        }
    }
    *s = p;
    p = NULL;
leave:
    shr_sampler_free(p);
    return rc;
}

void shr_sampler_free(shr_sampler *s)
{
    if (!s)
        return;
    free(s->shard_start);
    free(s);
}

uint64_t shr_sampler_per_rank(const shr_sampler *s)
{
    return s->per_rank;
}

uint64_t shr_sampler_batches(const shr_sampler *s)
{
    return s->batches;
}

uint64_t shr_sampler_per_rank_in(const shr_sampler *s, uint64_t epoch)
{
    return epoch == s->start_epoch ? s->start_per_rank : s->per_rank;
}

uint64_t shr_sampler_batches_in(const shr_sampler *s, uint64_t epoch)
{
    return epoch == s->start_epoch ? s->start_batches : s->batches;
}

uint64_t shr_sampler_consumed(const shr_sampler *s, uint64_t epoch, uint64_t batches)
{
    uint64_t start = epoch == s->start_epoch ? s->start : 0;
    if (batches >= shr_sampler_batches_in(s, epoch))
        return s->n;
    uint64_t step;
    if (__builtin_mul_overflow(batches, (uint64_t)s->batch_size * s->world, &step) ||
        step >= s->n - start)
        return s->n;
    return start + step;
}

uint64_t shr_sampler_shard_at(const shr_sampler *s, uint64_t epoch, uint64_t q)
{
    if (s->order != SHR_ORDER_QUASI)
        return q;
    return shr_perm(epoch_key(s->seed, epoch), s->nshards, q);
}

/* Where a quasi lookup stands in the epoch: the window it last entered, and a table of that
 * window's shards. Lives in one shr_sampler_batch call, which is what keeps the sampler itself
 * read-only. A batch's positions increase (but for one wrap back to the start under
 * SHR_UNEVEN_PAD), so the walk through the windows is done about once per call. */
typedef struct {
    uint64_t epoch, key;        /* the epoch and its shard order's key */
    uint64_t w;                 /* window number */
    uint64_t q0, q1;            /* its shards: positions [q0, q1) of the shard order */
    uint64_t first, end;        /* its samples: positions [first, end) of the epoch sequence */
    uint64_t wkey;              /* key of the order within the window */
    /* room for a window (min(window, nshards) entries): shard ids at positions q0, q0 + 1, ...
     * and the window offset where each one's samples end; NULL when the memory was not there,
     * and lookups recompute them instead */
    uint64_t *ids, *ends;
} quasi_cursor;

static uint64_t shard_len(const shr_sampler *s, uint64_t shard)
{
    return s->shard_start[shard + 1] - s->shard_start[shard];
}

static void quasi_enter(const shr_sampler *s, quasi_cursor *c, uint64_t w, uint64_t q0,
                        uint64_t first)
{
    c->w = w;
    c->q0 = q0;
    c->q1 = s->nshards - q0 < s->window ? s->nshards : q0 + s->window;
    uint64_t m = 0;
    for (uint64_t q = q0; q < c->q1; q++) {
        uint64_t shard = shr_perm(c->key, s->nshards, q);
        m += shard_len(s, shard);
        if (c->ids) {
            c->ids[q - q0] = shard;
            c->ends[q - q0] = m;
        }
    }
    c->first = first;
    c->end = first + m;
    c->wkey = hash4(TAG_WINDOW, s->seed, c->epoch, w, 0);
}

static uint64_t quasi_seq(const shr_sampler *s, quasi_cursor *c, uint64_t j)
{
    if (j < c->first)
        quasi_enter(s, c, 0, 0, 0);
    while (j >= c->end) {
        assert(c->q1 < s->nshards);     /* the last window ends at n > j */
        quasi_enter(s, c, c->w + 1, c->q1, c->end);
    }
    uint64_t t = shr_perm(c->wkey, c->end - c->first, j - c->first);
    if (c->ids) {
        /* the first shard ending past t; empty shards end where the one before did, so they
         * are never chosen */
        uint64_t lo = 0, hi = c->q1 - c->q0 - 1;
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo) / 2;
            if (c->ends[mid] > t)
                hi = mid;
            else
                lo = mid + 1;
        }
        return s->shard_start[c->ids[lo]] + t - (lo ? c->ends[lo - 1] : 0);
    }
    for (uint64_t q = c->q0;; q++) {
        uint64_t shard = shr_perm(c->key, s->nshards, q);
        uint64_t len = shard_len(s, shard);
        if (t < len)
            return s->shard_start[shard] + t;
        t -= len;
    }
}

/* A quasi cursor at the start of epoch, its window table on the stack (room for QUASI_STACK
 * shards) or, for larger windows, in *heap (the caller frees it; NULL if the memory was not
 * there, which only costs speed). */
static void quasi_open(const shr_sampler *s, quasi_cursor *c, uint64_t epoch,
                       uint64_t *stack_table, uint64_t **heap)
{
    uint64_t room = s->window < s->nshards ? s->window : s->nshards;
    c->epoch = epoch;
    c->key = epoch_key(s->seed, epoch);
    *heap = NULL;
    if (room <= QUASI_STACK) {
        c->ids = stack_table;
    } else {
        *heap = malloc(2 * room * sizeof **heap);
        c->ids = *heap;
    }
    c->ends = c->ids ? c->ids + room : NULL;
    quasi_enter(s, c, 0, 0, 0);
}

void shr_sampler_seq(const shr_sampler *s, uint64_t epoch, uint64_t j0, uint32_t count,
                     uint64_t *out)
{
    if (s->order != SHR_ORDER_QUASI) {
        uint64_t key = epoch_key(s->seed, epoch);
        for (uint32_t i = 0; i < count; i++)
            out[i] = s->order == SHR_ORDER_RANDOM ? shr_perm(key, s->n, j0 + i) : j0 + i;
        return;
    }
    quasi_cursor qc;
    uint64_t stack_table[2 * QUASI_STACK], *heap_table;
    quasi_open(s, &qc, epoch, stack_table, &heap_table);
    for (uint32_t i = 0; i < count; i++)
        out[i] = quasi_seq(s, &qc, j0 + i);
    free(heap_table);
}

/* A mixture's batch (sampler.h, "Mixtures"): a block of consecutive positions, in at most two
 * runs (a padded last group wraps to the epoch's start). */
static uint32_t mix_batch(const shr_sampler *s, uint64_t epoch, uint64_t batch, uint64_t start,
                          uint64_t per_rank, uint32_t count, uint64_t *out)
{
    uint64_t group = (uint64_t)s->batch_size * s->world;
    uint64_t base = start + batch * group;
    uint64_t left = s->n - start;
    uint64_t len = (batch + 1) * group <= left ? s->batch_size : per_rank - batch * s->batch_size;
    uint64_t j0 = base + s->rank * len;
    uint32_t done = 0;
    while (done < count) {
        uint64_t j = (j0 + done) % s->n;
        uint64_t run = s->n - j < count - done ? s->n - j : count - done;
        shr_mix_plan_fill(s->mix, s->order, s->seed, epoch, j, (uint32_t)run, out + done);
        done += (uint32_t)run;
    }
    return count;
}

uint32_t shr_sampler_batch(const shr_sampler *s, uint64_t epoch, uint64_t batch, uint64_t *out)
{
    uint64_t per_rank = shr_sampler_per_rank_in(s, epoch);
    uint64_t start = epoch == s->start_epoch ? s->start : 0;
    if (batch >= shr_sampler_batches_in(s, epoch))
        return 0;
    uint64_t k0 = batch * s->batch_size;
    uint32_t count = per_rank - k0 < s->batch_size ? (uint32_t)(per_rank - k0) : s->batch_size;
    if (s->mix)
        return mix_batch(s, epoch, batch, start, per_rank, count, out);
    uint64_t key = epoch_key(s->seed, epoch);
    quasi_cursor qc;
    uint64_t stack_table[2 * QUASI_STACK], *heap_table = NULL;
    if (s->order == SHR_ORDER_QUASI)
        quasi_open(s, &qc, epoch, stack_table, &heap_table);
    for (uint32_t i = 0; i < count; i++) {
        /* below n + world by the check in create, so no overflow; past n only when padding */
        uint64_t j = start + s->rank + (k0 + i) * s->world;
        if (j >= s->n)
            j %= s->n;
        switch (s->order) {
        case SHR_ORDER_RANDOM:
            out[i] = shr_perm(key, s->n, j);
            break;
        case SHR_ORDER_QUASI:
            out[i] = quasi_seq(s, &qc, j);
            break;
        default:
            out[i] = j;
            break;
        }
    }
    free(heap_table);
    return count;
}

/* shardread.h: a rank's epoch laid end to end, batch by batch, as the reader's sampler gives it
 * (the concatenation does not depend on the batch size, so any chunk will do). */
#define EPOCH_ORDER_CHUNK 4096u

int shr_epoch_order(const shr_order_spec *s, uint64_t epoch, uint64_t *out, uint64_t *count,
                    shr_msg *msg)
{
    if (count)
        *count = 0;
    if (!s) {
        if (msg)
            snprintf(msg->text, sizeof msg->text, "no order given");
        return SHR_EINVAL;
    }
    uint32_t world = s->world ? s->world : 1;
    shr_sampler_cfg cfg = {.n = s->n, .order = s->order, .seed = s->seed, .rank = s->rank,
                           .world = world, .uneven = s->uneven,
                           .batch_size = EPOCH_ORDER_CHUNK,
                           .nshards = s->order == SHR_ORDER_QUASI ? s->nshards : 0,
                           .shard_counts = s->order == SHR_ORDER_QUASI ? s->shard_counts : NULL,
                           .window = s->window ? s->window : 1};
    const char *bad = NULL;
    if (s->rank >= world)
        bad = "rank must be below world";
    else if ((unsigned)s->order > SHR_ORDER_QUASI)
        bad = "unknown order";
    else if ((unsigned)s->uneven > SHR_UNEVEN_DROP)
        bad = "unknown uneven mode";
    else if (s->order == SHR_ORDER_QUASI && s->n && (!s->nshards || !s->shard_counts))
        bad = "a quasi order needs the shards' sample counts";
    if (bad) {
        if (msg)
            snprintf(msg->text, sizeof msg->text, "%s", bad);
        return SHR_EINVAL;
    }
    shr_sampler *sm = NULL;
    int rc = shr_sampler_create(&sm, &cfg);
    if (rc) {
        if (msg)
            snprintf(msg->text, sizeof msg->text, "%s",
                     rc == SHR_EINVAL ? "the shards' sample counts do not sum to n, or n is "
                     "too large" : "out of memory");
        return rc;
    }
    uint64_t at = 0;
    if (out)
        for (uint64_t b = 0; b < shr_sampler_batches(sm); b++)
            at += shr_sampler_batch(sm, epoch, b, out + at);
    else
        at = shr_sampler_per_rank(sm);
    shr_sampler_free(sm);
    if (count)
        *count = at;
    return 0;
}
