/* test_sampler.c - the sampler: the keyed permutation, every order, rank partition, batching,
 * quasi-random windows and determinism (any batch, any order, any thread). */
#include "sampler.h"
#include "tuskip.h"

#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* check records every passing ck_assert; loops over many values use this instead and only call
 * into check on a failure. */
#define EXPECT(cond, ...)                \
    do {                                 \
        if (!(cond))                     \
            ck_abort_msg(__VA_ARGS__);   \
    } while (0)

static shr_sampler_cfg cfg_make(uint64_t n, shr_order order, uint64_t seed, uint32_t rank,
                                uint32_t world, shr_uneven uneven, uint32_t batch_size,
                                int drop_last)
{
    return (shr_sampler_cfg){.n = n, .order = order, .seed = seed, .rank = rank, .world = world,
                             .uneven = uneven, .batch_size = batch_size, .drop_last = drop_last,
                             .window = 1};
}

static shr_sampler *sampler_new(const shr_sampler_cfg *c)
{
    shr_sampler *s = NULL;
    int rc = shr_sampler_create(&s, c);
    ck_assert_msg(rc == 0, "create failed: %d", rc);
    ck_assert_ptr_nonnull(s);
    return s;
}

/* All of a rank's samples of one epoch, batch after batch, into out (room for per_rank); checks
 * every batch but the last is full. Returns how many. */
static uint64_t rank_samples(const shr_sampler *s, uint64_t epoch, uint32_t batch_size,
                             uint64_t *out)
{
    uint64_t nb = shr_sampler_batches(s), total = 0;
    for (uint64_t b = 0; b < nb; b++) {
        uint32_t got = shr_sampler_batch(s, epoch, b, out + total);
        EXPECT(got >= 1 && got <= batch_size, "batch %llu has %u samples",
               (unsigned long long)b, got);
        EXPECT(got == batch_size || b + 1 == nb, "short batch %llu of %llu",
               (unsigned long long)b, (unsigned long long)nb);
        total += got;
    }
    return total;
}

/* The whole epoch sequence seq(0..n-1) of an order: the samples of the single rank of world 1. */
static void epoch_seq(const shr_sampler_cfg *base, uint64_t epoch, uint64_t *out)
{
    shr_sampler_cfg c = *base;
    c.rank = 0;
    c.world = 1;
    c.batch_size = 7;
    c.drop_last = 0;
    shr_sampler *s = sampler_new(&c);
    uint64_t got = rank_samples(s, epoch, 7, out);
    ck_assert_uint_eq(got, c.n);
    shr_sampler_free(s);
}

/* seq is a permutation of [0, n) */
static void assert_permutation(const uint64_t *seq, uint64_t n)
{
    unsigned char *seen = calloc(n ? n : 1, 1);
    ck_assert_ptr_nonnull(seen);
    for (uint64_t j = 0; j < n; j++) {
        EXPECT(seq[j] < n, "position %llu: %llu out of range", (unsigned long long)j,
               (unsigned long long)seq[j]);
        EXPECT(!seen[seq[j]], "%llu twice", (unsigned long long)seq[j]);
        seen[seq[j]] = 1;
    }
    free(seen);
}

/* A deterministic split of n samples into shards of uneven sizes, empty ones included. Returns
 * the shard count. */
static size_t make_shards(uint64_t n, uint64_t *counts, size_t max)
{
    static const uint64_t pattern[] = { 3, 0, 5, 1, 0, 0, 9, 2, 14, 4, 0, 7 };
    size_t k = 0;
    uint64_t left = n;
    while (left > 0 && k + 1 < max) {
        uint64_t c = pattern[k % (sizeof pattern / sizeof pattern[0])];
        counts[k] = c < left ? c : left;
        left -= counts[k++];
    }
    if (left > 0 || k == 0)
        counts[k++] = left;
    return k;
}

/* ---- shr_perm ---- */

START_TEST(test_perm_bijection)
{
    static const uint64_t ns[] = { 0, 1, 2, 3, 5, 7, 8, 100, 1000, 4097, 100003 };
    static const uint64_t keys[] = { 0, 1, 42, 0xdeadbeefcafef00dULL, UINT64_MAX };
    unsigned char *hit = malloc(100003);
    ck_assert_ptr_nonnull(hit);
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
        uint64_t n = ns[a];
        for (size_t b = 0; b < sizeof keys / sizeof keys[0]; b++) {
            memset(hit, 0, 100003);
            uint64_t fixed = 0;
            for (uint64_t i = 0; i < n; i++) {
                uint64_t v = shr_perm(keys[b], n, i);
                EXPECT(v < n, "n %llu key %zu: perm(%llu) = %llu", (unsigned long long)n, b,
                       (unsigned long long)i, (unsigned long long)v);
                EXPECT(!hit[v], "n %llu key %zu: %llu hit twice", (unsigned long long)n, b,
                       (unsigned long long)v);
                hit[v] = 1;
                fixed += v == i;
            }
            /* a random permutation has about one fixed point; the identity has n */
            if (n >= 100)
                ck_assert_uint_lt(fixed, 10);
        }
    }
    /* outside [0, n): i itself */
    ck_assert_uint_eq(shr_perm(7, 0, 0), 0);
    ck_assert_uint_eq(shr_perm(7, 0, 5), 5);
    ck_assert_uint_eq(shr_perm(7, 1, 0), 0);
    ck_assert_uint_eq(shr_perm(7, 10, 12), 12);
    free(hit);
}
END_TEST

START_TEST(test_perm_keys)
{
    static const uint64_t ns[] = { 8, 100, 4097 };
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
        uint64_t n = ns[a];
        uint64_t *p = malloc(20 * n * sizeof *p);
        ck_assert_ptr_nonnull(p);
        for (uint64_t k = 0; k < 20; k++)
            for (uint64_t i = 0; i < n; i++)
                p[k * n + i] = shr_perm(k, n, i);
        for (uint64_t k = 0; k < 20; k++) {
            for (uint64_t i = 0; i < n; i++)    /* same key, same order */
                EXPECT(shr_perm(k, n, i) == p[k * n + i], "key %llu not repeatable",
                       (unsigned long long)k);
            for (uint64_t l = 0; l < k; l++)    /* consecutive keys: unrelated orders */
                EXPECT(memcmp(p + k * n, p + l * n, n * sizeof *p) != 0,
                       "n %llu: keys %llu and %llu give the same order", (unsigned long long)n,
                       (unsigned long long)k, (unsigned long long)l);
        }
        free(p);
    }
}
END_TEST

/* chi-square of counts against a uniform expectation */
static double chi2(const uint64_t *count, size_t cells, uint64_t total)
{
    double e = (double)total / (double)cells, x = 0;
    for (size_t c = 0; c < cells; c++)
        x += ((double)count[c] - e) * ((double)count[c] - e) / e;
    return x;
}

START_TEST(test_perm_uniform)
{
    /* n = 10 over 20000 keys: where element 0 goes, and what lands at position 0. 9 degrees of
     * freedom: 27.9 is the 0.1% critical value */
    uint64_t where[10] = { 0 }, what[10] = { 0 };
    for (uint64_t key = 0; key < 20000; key++) {
        what[shr_perm(key, 10, 0)]++;
        for (uint64_t i = 0; i < 10; i++)
            if (shr_perm(key, 10, i) == 0)
                where[i]++;
    }
    double x1 = chi2(where, 10, 20000), x2 = chi2(what, 10, 20000);
    ck_assert_msg(x1 < 27.9, "position of element 0 not uniform: chi2 %.1f", x1);
    ck_assert_msg(x2 < 27.9, "element at position 0 not uniform: chi2 %.1f", x2);

    /* whole permutations of small n, each as likely as the others: n = 3 over 12000 keys (5
     * degrees of freedom, 20.5 is the 0.1% critical value) and n = 5 over 24000 keys (119
     * degrees, 172) */
    static const struct {
        uint64_t n, keys;
        double limit;
    } small[] = { { 3, 12000, 20.5 }, { 5, 24000, 172 } };
    for (size_t a = 0; a < 2; a++) {
        uint64_t n = small[a].n, count[120] = { 0 }, cells = n == 3 ? 6 : 120;
        for (uint64_t key = 0; key < small[a].keys; key++) {
            /* the permutation's rank in lexicographic order (Lehmer code) */
            uint64_t p[5], rank = 0;
            for (uint64_t i = 0; i < n; i++)
                p[i] = shr_perm(key, n, i);
            for (uint64_t i = 0; i < n; i++) {
                uint64_t smaller = 0;
                for (uint64_t k = i + 1; k < n; k++)
                    smaller += p[k] < p[i];
                rank = rank * (n - i) + smaller;
            }
            count[rank]++;
        }
        double x = chi2(count, cells, small[a].keys);
        ck_assert_msg(x < small[a].limit, "permutations of %llu not uniform: chi2 %.1f",
                      (unsigned long long)n, x);
    }
}
END_TEST

/* 64-bit sizes (32-bit halves, Feistel over all 64 bits): values stay below n and differ */
START_TEST(test_perm_large)
{
    static const uint64_t ns[] = { UINT64_MAX, (UINT64_C(1) << 62) + 1, (UINT64_C(1) << 32) + 1,
                                   UINT64_C(1) << 40 };
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
        uint64_t v[1000];
        for (uint64_t i = 0; i < 1000; i++) {
            uint64_t x = ns[a] - 1 - i * 7919;  /* from the top end down */
            v[i] = shr_perm(99, ns[a], x);
            ck_assert_uint_lt(v[i], ns[a]);
            ck_assert_uint_eq(v[i], shr_perm(99, ns[a], x));
        }
        for (int i = 0; i < 1000; i++)
            for (int j = 0; j < i; j++)
                EXPECT(v[i] != v[j], "collision at n %llu", (unsigned long long)ns[a]);
    }
}
END_TEST

/* ---- shr_mix ---- */

START_TEST(test_mix)
{
    uint64_t base = shr_mix(1, 2, 3, 4);
    ck_assert_uint_eq(base, shr_mix(1, 2, 3, 4));
    /* each argument matters, including swapped ones */
    ck_assert_uint_ne(base, shr_mix(0, 2, 3, 4));
    ck_assert_uint_ne(base, shr_mix(1, 3, 3, 4));
    ck_assert_uint_ne(base, shr_mix(1, 2, 4, 4));
    ck_assert_uint_ne(base, shr_mix(1, 2, 3, 5));
    ck_assert_uint_ne(shr_mix(1, 2, 3, 4), shr_mix(2, 1, 3, 4));
    ck_assert_uint_ne(shr_mix(0, 0, 3, 4), shr_mix(0, 0, 4, 3));

    /* every output bit is set about half the time over consecutive indices (20000 draws: 4.5
     * standard deviations is 318) */
    uint64_t ones[64] = { 0 };
    for (uint64_t i = 0; i < 20000; i++) {
        uint64_t h = shr_mix(7, 0, i, 0);
        for (int b = 0; b < 64; b++)
            ones[b] += h >> b & 1;
    }
    for (int b = 0; b < 64; b++)
        ck_assert_msg(ones[b] > 10000 - 318 && ones[b] < 10000 + 318, "bit %d set %llu times",
                      b, (unsigned long long)ones[b]);

    /* avalanche: flipping one input bit of any argument flips about half the output bits */
    for (int arg = 0; arg < 4; arg++) {
        uint64_t flipped = 0, trials = 0;
        for (uint64_t t = 0; t < 50; t++) {
            uint64_t in[4] = { t, t * 3 + 1, t * 5 + 2, t * 7 + 3 };
            uint64_t h0 = shr_mix(in[0], in[1], in[2], in[3]);
            for (int b = 0; b < 64; b++) {
                uint64_t m[4] = { in[0], in[1], in[2], in[3] };
                m[arg] ^= UINT64_C(1) << b;
                flipped += (uint64_t)__builtin_popcountll(h0 ^ shr_mix(m[0], m[1], m[2], m[3]));
                trials++;
            }
        }
        double mean = (double)flipped / (double)trials;
        ck_assert_msg(mean > 31 && mean < 33, "argument %d: %.2f bits flip on average", arg, mean);
    }
}
END_TEST

/* ---- orders at world 1 ---- */

START_TEST(test_sequential)
{
    static const uint64_t ns[] = { 1, 2, 10, 257, 1000 };
    static const uint32_t bss[] = { 1, 3, 256, 2000 };
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t b = 0; b < sizeof bss / sizeof bss[0]; b++)
            for (int unev = 0; unev < 2; unev++) {
                shr_sampler_cfg c = cfg_make(ns[a], SHR_ORDER_SEQUENTIAL, 5, 0, 1,
                                             (shr_uneven)unev, bss[b], 0);
                shr_sampler *s = sampler_new(&c);
                ck_assert_uint_eq(shr_sampler_per_rank(s), ns[a]);
                ck_assert_uint_eq(shr_sampler_batches(s), (ns[a] + bss[b] - 1) / bss[b]);
                uint64_t out[1000];
                ck_assert_uint_eq(rank_samples(s, 3, bss[b], out), ns[a]);
                for (uint64_t j = 0; j < ns[a]; j++)
                    EXPECT(out[j] == j, "sequential: position %llu holds %llu",
                           (unsigned long long)j, (unsigned long long)out[j]);
                shr_sampler_free(s);
            }
}
END_TEST

/* every order covers the dataset once per epoch at world 1; random and quasi change with the epoch
 * and with the seed, and repeat for the same (seed, epoch) */
START_TEST(test_orders_cover)
{
    static const uint64_t ns[] = { 1, 2, 10, 1000, 1001 };
    uint64_t counts[400];
    for (int order = 0; order < 3; order++)
        for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
            uint64_t n = ns[a];
            shr_sampler_cfg c = cfg_make(n, (shr_order)order, 11, 0, 1, SHR_UNEVEN_PAD, 64, 0);
            c.nshards = make_shards(n, counts, 400);
            c.shard_counts = counts;
            c.window = 3;
            uint64_t *e0 = malloc(n * sizeof *e0), *e0b = malloc(n * sizeof *e0),
                     *e1 = malloc(n * sizeof *e0), *other = malloc(n * sizeof *e0);
            ck_assert(e0 && e0b && e1 && other);
            for (int unev = 0; unev < 2; unev++) {  /* at world 1 pad and drop are the same */
                c.uneven = (shr_uneven)unev;
                epoch_seq(&c, 0, unev ? e0b : e0);
            }
            ck_assert_mem_eq(e0, e0b, n * sizeof *e0);
            assert_permutation(e0, n);
            epoch_seq(&c, 0, e0b);                 /* a fresh sampler, same seed and epoch */
            ck_assert_mem_eq(e0, e0b, n * sizeof *e0);
            epoch_seq(&c, 1, e1);
            assert_permutation(e1, n);
            c.seed = 12;
            epoch_seq(&c, 0, other);
            assert_permutation(other, n);
            if (order != SHR_ORDER_SEQUENTIAL && n >= 10) {
                ck_assert_msg(memcmp(e0, e1, n * sizeof *e0) != 0, "order %d n %llu: epochs 0 "
                              "and 1 agree", order, (unsigned long long)n);
                ck_assert_msg(memcmp(e0, other, n * sizeof *e0) != 0, "order %d n %llu: seeds "
                              "11 and 12 agree", order, (unsigned long long)n);
                uint64_t in_place = 0;
                for (uint64_t j = 0; j < n; j++)
                    in_place += e0[j] == j;
                ck_assert_uint_lt(in_place, n / 2);
            }
            free(e0);
            free(e0b);
            free(e1);
            free(other);
        }
}
END_TEST

/* ---- ranks and batches ---- */

/* One combination: every rank's samples are exactly seq((r + k world) mod n), with the counts,
 * coverage and disjointness the header promises. */
static void check_ranks(shr_order order, uint64_t n, uint32_t world, shr_uneven uneven,
                        uint32_t bs, int drop_last)
{
    uint64_t counts[64];
    shr_sampler_cfg c = cfg_make(n, order, 77, 0, world, uneven, bs, drop_last);
    c.nshards = make_shards(n, counts, 64);
    c.shard_counts = counts;
    c.window = 2;
    uint64_t seq[128], got[128];
    unsigned seen[128] = { 0 };
    epoch_seq(&c, 4, seq);

    uint64_t per_rank = uneven == SHR_UNEVEN_PAD ? (n + world - 1) / world : n / world;
    uint64_t batches = drop_last ? per_rank / bs : (per_rank + bs - 1) / bs;
    uint64_t kept = drop_last ? batches * bs : per_rank;
    uint64_t total = 0;
    for (uint32_t r = 0; r < world; r++) {
        c.rank = r;
        shr_sampler *s = sampler_new(&c);
        EXPECT(shr_sampler_per_rank(s) == per_rank, "per_rank %llu, want %llu",
               (unsigned long long)shr_sampler_per_rank(s), (unsigned long long)per_rank);
        EXPECT(shr_sampler_batches(s) == batches, "batches %llu, want %llu",
               (unsigned long long)shr_sampler_batches(s), (unsigned long long)batches);
        uint64_t m = rank_samples(s, 4, bs, got);
        EXPECT(m == kept, "rank %u: %llu samples, want %llu", r, (unsigned long long)m,
               (unsigned long long)kept);
        for (uint64_t k = 0; k < m; k++) {
            uint64_t want = seq[(r + k * world) % n];
            EXPECT(got[k] == want, "order %d n %llu world %u rank %u: position %llu holds %llu, "
                   "want %llu", order, (unsigned long long)n, world, r, (unsigned long long)k,
                   (unsigned long long)got[k], (unsigned long long)want);
            seen[got[k]]++;
        }
        total += m;
        shr_sampler_free(s);
    }
    if (drop_last)
        return;
    /* together the ranks take the positions p < P = world * per_rank once each, at j = p mod n */
    uint64_t P = world * per_rank, distinct = 0, repeated = 0;
    EXPECT(total == P, "%llu samples in all, want %llu", (unsigned long long)total,
           (unsigned long long)P);
    for (uint64_t j = 0; j < n; j++) {
        unsigned want = (unsigned)(P / n + (j < P % n));
        EXPECT(seen[seq[j]] == want, "order %d n %llu world %u uneven %d: the sample at position "
               "%llu taken %u times, want %u", order, (unsigned long long)n, world, uneven,
               (unsigned long long)j, seen[seq[j]], want);
        distinct += seen[seq[j]] > 0;
        repeated += seen[seq[j]] > 1;
    }
    if (uneven == SHR_UNEVEN_DROP) {
        /* disjoint; only the epoch's last n % world positions are left out */
        EXPECT(repeated == 0 && distinct == n - n % world, "drop: %llu distinct, %llu repeated",
               (unsigned long long)distinct, (unsigned long long)repeated);
    } else {
        /* every sample, world * ceil(n / world) in all: repeats come only from wrapping to the
         * epoch's first positions */
        EXPECT(distinct == n && total == world * ((n + world - 1) / world),
               "pad: %llu distinct of %llu", (unsigned long long)distinct, (unsigned long long)n);
        if (world <= n)
            EXPECT(repeated == P - n, "pad: %llu repeated, want %llu",
                   (unsigned long long)repeated, (unsigned long long)(P - n));
    }
}

START_TEST(test_ranks)
{
    static const uint32_t worlds[] = { 1, 2, 3, 4, 7 };
    static const uint64_t ns[] = { 1, 10, 11, 100, 101 };
    static const uint32_t bss[] = { 1, 3, 8, 200 };
    for (int order = 0; order < 3; order++)
        for (size_t w = 0; w < sizeof worlds / sizeof worlds[0]; w++)
            for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
                for (int unev = 0; unev < 2; unev++)
                    for (size_t b = 0; b < sizeof bss / sizeof bss[0]; b++)
                        for (int drop = 0; drop < 2; drop++)
                            check_ranks((shr_order)order, ns[a], worlds[w], (shr_uneven)unev,
                                        bss[b], drop);
}
END_TEST

/* counts worked out by hand, so a formula shared by test and code cannot hide a mistake */
START_TEST(test_batch_counts)
{
    static const struct {
        uint64_t n;
        uint32_t world;
        shr_uneven uneven;
        uint32_t bs;
        int drop_last;
        uint64_t per_rank, batches;
        uint32_t last;          /* size of the last batch */
    } t[] = {
        { 10, 3, SHR_UNEVEN_PAD, 2, 0, 4, 2, 2 },
        { 10, 3, SHR_UNEVEN_DROP, 2, 0, 3, 2, 1 },
        { 10, 3, SHR_UNEVEN_DROP, 2, 1, 3, 1, 2 },
        { 10, 4, SHR_UNEVEN_PAD, 4, 1, 3, 0, 0 },
        { 10, 4, SHR_UNEVEN_PAD, 4, 0, 3, 1, 3 },
        { 5, 7, SHR_UNEVEN_DROP, 1, 0, 0, 0, 0 },
        { 5, 7, SHR_UNEVEN_PAD, 1, 0, 1, 1, 1 },
        { 1000, 8, SHR_UNEVEN_PAD, 32, 0, 125, 4, 29 },
        { 1000, 8, SHR_UNEVEN_PAD, 32, 1, 125, 3, 32 },
        { 0, 2, SHR_UNEVEN_PAD, 8, 0, 0, 0, 0 },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        shr_sampler_cfg c = cfg_make(t[i].n, SHR_ORDER_RANDOM, 1, t[i].world - 1, t[i].world,
                                     t[i].uneven, t[i].bs, t[i].drop_last);
        shr_sampler *s = sampler_new(&c);
        ck_assert_uint_eq(shr_sampler_per_rank(s), t[i].per_rank);
        ck_assert_uint_eq(shr_sampler_batches(s), t[i].batches);
        uint64_t out[64];
        if (t[i].batches) {
            ck_assert_uint_eq(shr_sampler_batch(s, 0, 0, out),
                              t[i].batches > 1 ? t[i].bs : t[i].last);
            ck_assert_uint_eq(shr_sampler_batch(s, 0, t[i].batches - 1, out), t[i].last);
        }
        /* past the end: nothing, out untouched */
        out[0] = 12345;
        ck_assert_uint_eq(shr_sampler_batch(s, 0, t[i].batches, out), 0);
        ck_assert_uint_eq(shr_sampler_batch(s, 0, UINT64_MAX, out), 0);
        ck_assert_uint_eq(out[0], 12345);
        shr_sampler_free(s);
    }
}
END_TEST

/* ---- quasi-random windows ---- */

START_TEST(test_quasi_windows)
{
    static const uint64_t layout[] = { 0, 5, 0, 17, 1, 9, 0, 0, 30, 2, 11, 4, 8, 0, 23, 0 };
    const size_t ns = sizeof layout / sizeof layout[0];
    static const uint32_t windows[] = { 1, 2, 3, 5, 16, 20 };
    uint64_t start[sizeof layout / sizeof layout[0] + 1] = { 0 }, n = 0;
    for (size_t i = 0; i < ns; i++) {
        start[i] = n;
        n += layout[i];
    }
    start[ns] = n;
    uint64_t shard_of[110];
    ck_assert_uint_eq(n, 110);
    for (size_t i = 0; i < ns; i++)
        for (uint64_t x = start[i]; x < start[i + 1]; x++)
            shard_of[x] = i;

    int shuffled_within = 0;
    for (size_t wi = 0; wi < sizeof windows / sizeof windows[0]; wi++) {
        uint32_t win = windows[wi];
        shr_sampler_cfg c = cfg_make(n, SHR_ORDER_QUASI, 2024, 0, 1, SHR_UNEVEN_PAD, 16, 0);
        c.nshards = ns;
        c.shard_counts = layout;
        c.window = win;
        shr_sampler *s = sampler_new(&c);
        uint64_t order[4][sizeof layout / sizeof layout[0]];
        for (uint64_t epoch = 0; epoch < 4; epoch++) {
            uint64_t seq[110];
            epoch_seq(&c, epoch, seq);
            assert_permutation(seq, n);
            for (uint64_t q = 0; q < ns; q++)
                order[epoch][q] = shr_sampler_shard_at(s, epoch, q);
            assert_permutation(order[epoch], ns);
            /* window of each shard in this epoch, and each window's sample count */
            uint64_t win_of[sizeof layout / sizeof layout[0]], win_len[16] = { 0 };
            for (uint64_t q = 0; q < ns; q++) {
                win_of[order[epoch][q]] = q / win;
                win_len[q / win] += layout[order[epoch][q]];
            }
            /* the sequence runs through the windows in order, each one a contiguous stretch
             * exactly as long as its shards: with seq a permutation, that stretch is exactly
             * its shards' samples */
            uint64_t j = 0;
            for (uint64_t w = 0; w * win < ns; w++) {
                uint64_t first = j, inversions = 0;
                for (; j < first + win_len[w]; j++) {
                    EXPECT(win_of[shard_of[seq[j]]] == w, "window %u epoch %llu: position %llu "
                           "is from window %llu, want %llu", win, (unsigned long long)epoch,
                           (unsigned long long)j,
                           (unsigned long long)win_of[shard_of[seq[j]]], (unsigned long long)w);
                    inversions += j > first && seq[j] < seq[j - 1];
                }
                /* samples are shuffled inside windows, not read out in dataset order (a
                 * random order of 8 or more is sorted with odds below 1 in 40000) */
                if (win_len[w] >= 8)
                    EXPECT(inversions > 0, "window %u epoch %llu: window %llu in dataset order",
                           win, (unsigned long long)epoch, (unsigned long long)w);
                shuffled_within += win_len[w] >= 8;
            }
            ck_assert_uint_eq(j, n);
        }
        /* shard order changes with the epoch */
        for (int e = 1; e < 4; e++)
            ck_assert_msg(memcmp(order[0], order[e], sizeof order[0]) != 0,
                          "window %u: epochs 0 and %d share a shard order", win, e);
        /* other orders: the identity */
        shr_sampler_cfg r = c;
        r.order = SHR_ORDER_RANDOM;
        shr_sampler *rs = sampler_new(&r);
        ck_assert_uint_eq(shr_sampler_shard_at(rs, 1, 5), 5);
        shr_sampler_free(rs);
        shr_sampler_free(s);
    }
    ck_assert_int_gt(shuffled_within, 40);     /* that check ran on enough windows */
}
END_TEST

/* windows of one shard read each shard contiguously; one window as large as the dataset is a
 * full shuffle in which consecutive positions are rarely from the same shard; windows of more
 * shards than fit on the stack (300 of 400) still run one after the other */
START_TEST(test_quasi_extremes)
{
    uint64_t counts[400];
    for (int i = 0; i < 400; i++)
        counts[i] = 25;
    shr_sampler_cfg c = cfg_make(10000, SHR_ORDER_QUASI, 9, 0, 1, SHR_UNEVEN_PAD, 100, 0);
    c.nshards = 400;
    c.shard_counts = counts;
    uint64_t *seq = malloc(10000 * sizeof *seq);
    ck_assert_ptr_nonnull(seq);
    static const uint32_t windows[] = { 1, 400, 300 };
    for (int pass = 0; pass < 3; pass++) {
        c.window = windows[pass];
        epoch_seq(&c, 1, seq);
        assert_permutation(seq, 10000);
        uint64_t same = 0;
        for (int j = 1; j < 10000; j++)
            same += seq[j] / 25 == seq[j - 1] / 25;
        if (pass == 0) {
            ck_assert_uint_eq(same, 10000 - 400);   /* breaks only between shards */
            /* each window has its own key: equal-sized windows are not read in the same
             * pattern of offsets */
            uint64_t alike = 0;
            for (int w = 1; w < 400; w++) {
                int eq = 1;
                for (int t = 0; t < 25 && eq; t++)
                    eq = seq[w * 25 + t] % 25 == seq[(w - 1) * 25 + t] % 25;
                alike += eq;
            }
            ck_assert_uint_eq(alike, 0);
        } else {
            ck_assert_uint_lt(same, 100);           /* about 10000 / 400 expected */
        }
        if (pass == 2) {
            shr_sampler *s = sampler_new(&c);
            unsigned char first[400] = { 0 };
            for (uint64_t q = 0; q < 300; q++)
                first[shr_sampler_shard_at(s, 1, q)] = 1;
            for (int j = 0; j < 10000; j++)
                EXPECT(first[seq[j] / 25] == (j < 7500), "position %d from the wrong window", j);
            shr_sampler_free(s);
        }
    }
    free(seq);
}
END_TEST

/* the counts are copied: changing the caller's array afterwards changes nothing */
START_TEST(test_quasi_copies_counts)
{
    uint64_t counts[5] = { 4, 0, 6, 3, 7 };
    shr_sampler_cfg c = cfg_make(20, SHR_ORDER_QUASI, 3, 0, 1, SHR_UNEVEN_PAD, 20, 0);
    c.nshards = 5;
    c.shard_counts = counts;
    c.window = 2;
    shr_sampler *s = sampler_new(&c);
    uint64_t a[20], b[20];
    ck_assert_uint_eq(shr_sampler_batch(s, 0, 0, a), 20);
    counts[0] = 20;
    counts[2] = counts[3] = counts[4] = 0;
    ck_assert_uint_eq(shr_sampler_batch(s, 0, 0, b), 20);
    ck_assert_mem_eq(a, b, sizeof a);
    shr_sampler_free(s);
}
END_TEST

/* ---- determinism ---- */

typedef struct {
    const shr_sampler *s;
    uint64_t epochs, batches, bs;
    int backwards;
    uint64_t *out;              /* epochs * batches * bs, unused slots left as they are */
    uint32_t *lens;
} det_job;

static void *det_worker(void *arg)
{
    det_job *d = arg;
    for (uint64_t x = 0; x < d->epochs * d->batches; x++) {
        uint64_t y = d->backwards ? d->epochs * d->batches - 1 - x : x;
        d->lens[y] = shr_sampler_batch(d->s, y / d->batches, y % d->batches, d->out + y * d->bs);
    }
    return NULL;
}

START_TEST(test_deterministic)
{
    uint64_t counts[60];
    for (int order = 1; order < 3; order++) {
        shr_sampler_cfg c = cfg_make(1000, (shr_order)order, 31337, 1, 3, SHR_UNEVEN_PAD, 16, 0);
        c.nshards = make_shards(1000, counts, 60);
        c.shard_counts = counts;
        c.window = 3;
        shr_sampler *s = sampler_new(&c);
        const uint64_t epochs = 3, nb = shr_sampler_batches(s), cells = epochs * nb * 16;
        ck_assert_uint_eq(nb, 21);   /* ceil(ceil(1000 / 3) / 16) */
        det_job job[4];
        for (int i = 0; i < 4; i++) {
            job[i] = (det_job){ s, epochs, nb, 16, i & 1, calloc(cells, sizeof(uint64_t)),
                                calloc(epochs * nb, sizeof(uint32_t)) };
            ck_assert(job[i].out && job[i].lens);
        }
        det_worker(&job[0]);                    /* reference: in order */
        det_worker(&job[1]);                    /* backwards */
        pthread_t th[2];
        for (int i = 0; i < 2; i++)             /* both directions at once */
            ck_assert_int_eq(pthread_create(&th[i], NULL, det_worker, &job[2 + i]), 0);
        for (int i = 0; i < 2; i++)
            ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        for (int i = 1; i < 4; i++) {
            ck_assert_mem_eq(job[i].lens, job[0].lens, epochs * nb * sizeof(uint32_t));
            ck_assert_mem_eq(job[i].out, job[0].out, cells * sizeof(uint64_t));
        }
        /* a fresh sampler resuming mid-epoch gives the same batch */
        shr_sampler *t = sampler_new(&c);
        uint64_t one[16];
        ck_assert_uint_eq(shr_sampler_batch(t, 2, 13, one), 16);
        ck_assert_mem_eq(one, job[0].out + (2 * nb + 13) * 16, sizeof one);
        shr_sampler_free(t);
        for (int i = 0; i < 4; i++) {
            free(job[i].out);
            free(job[i].lens);
        }
        shr_sampler_free(s);
    }
}
END_TEST

/* ---- configuration errors ---- */

START_TEST(test_create_errors)
{
    uint64_t counts[3] = { 4, 0, 6 };
    shr_sampler_cfg ok = cfg_make(10, SHR_ORDER_QUASI, 0, 0, 1, SHR_UNEVEN_PAD, 4, 0);
    ok.nshards = 3;
    ok.shard_counts = counts;
    ok.window = 2;
    shr_sampler *s = (shr_sampler *)&s;         /* must be reset to NULL on failure */
    ck_assert_int_eq(shr_sampler_create(&s, &ok), 0);
    shr_sampler_free(s);

    shr_sampler_cfg bad[14];
    for (int i = 0; i < 14; i++)
        bad[i] = ok;
    bad[0].world = 0;
    bad[1].rank = 1;
    bad[2].batch_size = 0;
    bad[3].window = 0;
    bad[4].n = 11;                              /* counts sum to 10 */
    bad[5].n = 9;
    bad[6].nshards = 0;                         /* quasi without shards */
    bad[7].shard_counts = NULL;
    bad[8].order = (shr_order)7;
    bad[9].uneven = (shr_uneven)5;
    bad[10].n = UINT64_MAX;                     /* positions would pass 2^64 */
    bad[10].order = SHR_ORDER_RANDOM;
    bad[10].world = 2;
    bad[11].rank = 5;
    bad[11].world = 3;
    uint64_t huge[2] = { UINT64_MAX, 11 };      /* the sum wraps around to 10 */
    bad[12].nshards = 2;
    bad[12].shard_counts = huge;
    bad[13].order = (shr_order)-1;
    for (int i = 0; i < 14; i++) {
        s = (shr_sampler *)&s;
        ck_assert_msg(shr_sampler_create(&s, &bad[i]) == SHR_EINVAL, "bad config %d accepted", i);
        ck_assert_ptr_null(s);
    }
    ck_assert_int_eq(shr_sampler_create(NULL, &ok), SHR_EINVAL);
    ck_assert_int_eq(shr_sampler_create(&s, NULL), SHR_EINVAL);
    ck_assert_ptr_null(s);

    /* the other orders ignore the shard fields; empty datasets are fine */
    shr_sampler_cfg seq = bad[6];
    seq.order = SHR_ORDER_SEQUENTIAL;
    seq.window = 0;
    ck_assert_int_eq(shr_sampler_create(&s, &seq), 0);
    shr_sampler_free(s);
    shr_sampler_cfg empty = ok;
    empty.n = 0;
    empty.nshards = 0;
    empty.shard_counts = NULL;
    ck_assert_int_eq(shr_sampler_create(&s, &empty), 0);
    ck_assert_uint_eq(shr_sampler_batches(s), 0);
    shr_sampler_free(s);
    shr_sampler_free(NULL);
}
END_TEST

int main(void)
{
    return tu_run_suite(TU_SUITE("sampler", "sampler", 120, test_perm_bijection, test_perm_keys,
                                 test_perm_uniform, test_perm_large, test_mix, test_sequential,
                                 test_orders_cover, test_ranks, test_batch_counts,
                                 test_quasi_windows, test_quasi_extremes, test_quasi_copies_counts,
                                 test_deterministic, test_create_errors));
}
