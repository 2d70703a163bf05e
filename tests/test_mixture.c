/* test_mixture.c - mixtures of datasets (reader/mixture.h, shr_open_mixture): the interleave's
 * tolerance in every window, the plan's counts and refusals, random access equal to walking,
 * ranks disjoint, exact resume on other world sizes, and real readers over two datasets of
 * different sizes and classes (streams, labels offset, threads never change a batch, geometry
 * refused naming the stream).
 *
 * Fixtures: two datasets built at run time by the shardc binaries of the same build directory. */
#include "mixture.h"
#include "reader.h"
#include "sampler.h"
#include "shardread.h"
#include "progs.h"
#include "testutil.h"

#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char g_a[1100];      /* 23 RGB samples 24x20, 3 classes */
static char g_b[1100];      /* 10 RGB samples 24x20, 2 classes */
static char g_gray[1100];   /* 10 one-channel samples 24x20 */
static char g_big[1100];    /* 10 RGB samples 32x32 */

static int build_fixtures(void)
{
    if (tu_progs_root() != 0)
        return -1;
    char cmd[8192];
    const struct {
        char *out;
        const char *name, *gen, *opts;
    } sets[] = {
        {g_a, "a", "--classes 3 --per-class 8", "--size 24x20"},
        {g_b, "b", "--classes 2 --per-class 5 --seed 7", "--size 24x20"},
        {g_gray, "gray", "--classes 2 --per-class 5 --seed 7", "--size 24x20 --gray"},
        {g_big, "big", "--classes 2 --per-class 5 --seed 7", "--size 32x32"},
    };
    for (size_t i = 0; i < sizeof sets / sizeof *sets; i++) {
        snprintf(sets[i].out, sizeof g_a, "%s/%s", g_root, sets[i].name);
        snprintf(cmd, sizeof cmd, "'%s/shardc-mksample' '%s/src-%s' %s --no-broken --quiet "
                 "--list '%s/list-%s' && head -n %d '%s/list-%s' > '%s/l-%s' && '%s/shardc' "
                 "build '%s/src-%s' --list '%s/l-%s' -o '%s' %s --shard-samples 7 -j 2 "
                 "--no-progress", g_bin, g_root, sets[i].name, sets[i].gen, g_root,
                 sets[i].name, i == 0 ? 23 : 10, g_root, sets[i].name, g_root, sets[i].name,
                 g_bin, g_root, sets[i].name, g_root, sets[i].name, sets[i].out, sets[i].opts);
        if (run_quiet(cmd) != 0) {
            fprintf(stderr, "test_mixture: failed: %s\n", cmd);
            return -1;
        }
    }
    return 0;
}

/* ---- the plan ---- */

static void make_plan(shr_mix_plan *p, uint32_t n, const uint64_t *sizes, const double *w,
                      uint64_t spe)
{
    double zero[8] = {0};
    uint64_t none[8] = {0};
    fmt_msg why = {{0}};
    ck_assert_msg(shr_mix_plan_make(p, n, sizes, w, zero, none, spe, &why) == 0, "%s",
                  why.text);
}

/* every window of every length up to maxw holds each stream within tol of its share */
static void check_windows(const shr_mix_plan *p, uint32_t maxw, double slack)
{
    uint64_t M = p->total;
    uint64_t *g = malloc(M * sizeof *g);
    uint32_t *st = malloc(M * sizeof *st);
    ck_assert_ptr_nonnull(g);
    shr_mix_plan_fill(p, SHR_ORDER_SEQUENTIAL, 0, 0, 0, (uint32_t)M, g);
    uint32_t active = 0;
    for (uint32_t s = 0; s < p->n; s++)
        active += p->per_epoch[s] > 0;
    uint64_t count[8] = {0};
    for (uint64_t j = 0; j < M; j++) {
        st[j] = shr_mix_plan_stream(p, g[j]);
        count[st[j]]++;
    }
    for (uint32_t s = 0; s < p->n; s++)
        ck_assert_uint_eq(count[s], p->per_epoch[s]);
    for (uint32_t w = 1; w <= maxw && w <= M; w++) {
        for (uint32_t s = 0; s < p->n; s++) {
            double share = (double)p->per_epoch[s] / (double)M;
            double tol = 1 + share * (active - 2) + slack;
            uint64_t c = 0;
            for (uint64_t j = 0; j < w; j++)
                c += st[j] == s;
            for (uint64_t a = 0;; a++) {
                ck_assert_msg(fabs((double)c - w * share) <= tol + 1e-9, "window %u at %" PRIu64
                              ": stream %u has %" PRIu64 ", share %.3f", w, a, s, c, w * share);
                if (a + w >= M)
                    break;
                c += (st[a + w] == s) - (st[a] == s);
            }
        }
    }
    free(g);
    free(st);
}

START_TEST(test_interleave_tolerance)
{
    shr_mix_plan p;
    /* two streams: floor or ceil in every window (+-1) */
    uint64_t s2[] = {700, 300};
    double w2[] = {0.7, 0.3};
    make_plan(&p, 2, s2, w2, 0);
    ck_assert_uint_eq(p.per_epoch[0], 700);
    ck_assert_uint_eq(p.per_epoch[1], 300);
    check_windows(&p, 200, 0);
    shr_mix_plan_free(&p);
    /* awkward shares, three and five streams: 1 + p (S - 2) */
    uint64_t s3[] = {1000, 37, 500};
    double w3[] = {0.61, 0.09, 0.3};
    make_plan(&p, 3, s3, w3, 997);
    check_windows(&p, 150, 0);
    shr_mix_plan_free(&p);
    uint64_t s5[] = {10, 20, 30, 40, 50};
    double w5[] = {0.5, 0.05, 0.05, 0.05, 0.35};
    make_plan(&p, 5, s5, w5, 1000);
    check_windows(&p, 120, 0);
    shr_mix_plan_free(&p);
}
END_TEST

START_TEST(test_plan_counts_and_refusals)
{
    shr_mix_plan p;
    fmt_msg why = {{0}};
    uint64_t sizes[] = {100, 30};
    double w[] = {1, 1}, zero[] = {0, 0}, rep[] = {2, 0};
    uint64_t none[] = {0, 0}, choose[] = {0, 7};
    /* largest remainders add up to samples_per_epoch */
    double w3[] = {1, 1, 1};
    uint64_t s3[] = {5, 5, 5};
    make_plan(&p, 3, s3, w3, 10);
    ck_assert_uint_eq(p.per_epoch[0] + p.per_epoch[1] + p.per_epoch[2], 10);
    ck_assert_uint_eq(p.per_epoch[0], 4);      /* the tie goes to the first */
    shr_mix_plan_free(&p);
    /* repeat and choose */
    ck_assert_int_eq(shr_mix_plan_make(&p, 2, sizes, zero, rep, choose, 0, &why), 0);
    ck_assert_uint_eq(p.per_epoch[0], 200);
    ck_assert_uint_eq(p.per_epoch[1], 7);
    ck_assert_uint_eq(p.total, 207);
    ck_assert_uint_eq(p.first[1], 100);
    shr_mix_plan_free(&p);
    /* refused, saying why */
    double half[] = {1, 0};
    ck_assert_int_eq(shr_mix_plan_make(&p, 2, sizes, half, zero, none, 0, &why), SHR_EINVAL);
    ck_assert_ptr_nonnull(strstr(why.text, "every stream has a weight"));
    ck_assert_int_eq(shr_mix_plan_make(&p, 2, sizes, zero, zero, none, 50, &why), SHR_EINVAL);
    ck_assert_ptr_nonnull(strstr(why.text, "samples_per_epoch needs weights"));
    double wr[] = {1, 1};
    ck_assert_int_eq(shr_mix_plan_make(&p, 2, sizes, wr, rep, none, 0, &why), SHR_EINVAL);
    ck_assert_ptr_nonnull(strstr(why.text, "stream 0: give weight, repeat or choose"));
    (void)w;
}
END_TEST

/* random access (locate at any position) equals one walk from the start; choose draws distinct
 * samples, anew each epoch; repeat sees each sample once per pass */
START_TEST(test_random_access_and_draws)
{
    shr_mix_plan p;
    fmt_msg why = {{0}};
    uint64_t sizes[] = {50, 40};
    double zero[] = {0, 0}, rep[] = {2, 0};
    uint64_t choose[] = {0, 15};
    ck_assert_int_eq(shr_mix_plan_make(&p, 2, sizes, zero, rep, choose, 0, &why), 0);
    uint64_t all[115], one;
    shr_mix_plan_fill(&p, SHR_ORDER_RANDOM, 9, 3, 0, 115, all);
    for (uint32_t j = 0; j < 115; j++) {
        shr_mix_plan_fill(&p, SHR_ORDER_RANDOM, 9, 3, j, 1, &one);
        ck_assert_uint_eq(one, all[j]);
    }
    int seen[90] = {0};
    for (uint32_t j = 0; j < 115; j++)
        seen[all[j]]++;
    for (uint32_t i = 0; i < 50; i++)
        ck_assert_int_eq(seen[i], 2);
    uint32_t chosen = 0;
    for (uint32_t i = 50; i < 90; i++) {
        ck_assert_int_le(seen[i], 1);
        chosen += seen[i];
    }
    ck_assert_uint_eq(chosen, 15);
    uint64_t other[115];
    shr_mix_plan_fill(&p, SHR_ORDER_RANDOM, 9, 4, 0, 115, other);
    ck_assert_int_ne(memcmp(all, other, sizeof all), 0);
    shr_mix_plan_free(&p);
}
END_TEST

/* the sampler over a plan: ranks take disjoint blocks covering the epoch, each batch one window;
 * a state saved at any cut on any world resumes on another with nothing lost or repeated */
START_TEST(test_sampler_ranks_and_elastic)
{
    shr_mix_plan p;
    uint64_t sizes[] = {70, 31};
    double w[] = {70, 31};      /* each sample once an epoch */
    make_plan(&p, 2, sizes, w, 0);
    const uint32_t B = 4;
    for (uint32_t W = 1; W <= 3; W++) {
        int seen[101] = {0};
        for (uint32_t r = 0; r < W; r++) {
            shr_sampler_cfg cfg = {.n = p.total, .order = SHR_ORDER_RANDOM, .seed = 5, .rank = r,
                                   .world = W, .uneven = SHR_UNEVEN_DROP, .batch_size = B,
                                   .mix = &p};
            shr_sampler *s;
            ck_assert_int_eq(shr_sampler_create(&s, &cfg), 0);
            uint64_t idx[4];
            for (uint64_t b = 0; b < shr_sampler_batches(s); b++) {
                uint32_t n = shr_sampler_batch(s, 1, b, idx);
                uint32_t from_a = 0;
                for (uint32_t i = 0; i < n; i++) {
                    seen[idx[i]]++;
                    from_a += idx[i] < 70;
                }
                if (n == B)     /* 4 * 0.7 = 2.8: 2 or 3 */
                    ck_assert(from_a == 2 || from_a == 3);
            }
            shr_sampler_free(s);
        }
        uint32_t total = 0;
        for (int i = 0; i < 101; i++) {
            ck_assert_int_le(seen[i], 1);
            total += seen[i];
        }
        ck_assert_uint_eq(total, (101 / W) * W);
    }
    /* elastic: world 2 reads c batches, world 3 the rest; every sample once */
    for (uint64_t c = 0; c <= 13; c += 3) {
        int seen[101] = {0};
        uint64_t consumed = 0;
        for (uint32_t r = 0; r < 2; r++) {
            shr_sampler_cfg cfg = {.n = p.total, .order = SHR_ORDER_RANDOM, .seed = 5, .rank = r,
                                   .world = 2, .uneven = SHR_UNEVEN_DROP, .batch_size = B,
                                   .mix = &p};
            shr_sampler *s;
            ck_assert_int_eq(shr_sampler_create(&s, &cfg), 0);
            uint64_t idx[4];
            for (uint64_t b = 0; b < c && b < shr_sampler_batches(s); b++) {
                uint32_t n = shr_sampler_batch(s, 0, b, idx);
                for (uint32_t i = 0; i < n; i++)
                    seen[idx[i]]++;
            }
            consumed = shr_sampler_consumed(s, 0, c);
            shr_sampler_free(s);
        }
        for (uint32_t r = 0; r < 3; r++) {
            shr_sampler_cfg cfg = {.n = p.total, .order = SHR_ORDER_RANDOM, .seed = 5, .rank = r,
                                   .world = 3, .uneven = SHR_UNEVEN_PAD, .batch_size = B,
                                   .start_epoch = 0, .start = consumed, .mix = &p};
            shr_sampler *s;
            ck_assert_int_eq(shr_sampler_create(&s, &cfg), 0);
            uint64_t idx[4];
            for (uint64_t b = 0; b < shr_sampler_batches_in(s, 0); b++) {
                uint32_t n = shr_sampler_batch(s, 0, b, idx);
                for (uint32_t i = 0; i < n; i++)
                    seen[idx[i]]++;
            }
            shr_sampler_free(s);
        }
        /* pad: the positions past the end wrap to the epoch's start, at most 2 of them */
        uint32_t extra = 0;
        for (int i = 0; i < 101; i++) {
            ck_assert_int_ge(seen[i], 1);
            extra += (uint32_t)seen[i] - 1;
        }
        ck_assert_uint_le(extra, 2);
    }
    shr_mix_plan_free(&p);
}
END_TEST

/* Quasi order: each stream read shard by shard (window 1: a shard's samples together, in a
 * pass through the stream), every sample once a pass, and any run of positions equal to
 * walking the epoch; with repeat the second pass is another order. */
static void check_quasi(const shr_mix_plan *p, uint64_t epoch)
{
    uint64_t M = p->total, walk[64], got[8];
    ck_assert_uint_le(M, 64);
    shr_mix_plan_fill(p, SHR_ORDER_QUASI, 5, epoch, 0, (uint32_t)M, walk);
    for (uint32_t s = 0; s < p->n; s++) {
        uint64_t seen[32] = {0}, k = 0, shard = UINT64_MAX, done[8] = {0};
        for (uint64_t j = 0; j < M; j++) {
            if (shr_mix_plan_stream(p, walk[j]) != s)
                continue;
            uint64_t i = walk[j] - p->first[s], pass = k / p->size[s];
            seen[i]++;
            ck_assert_uint_eq(seen[i], pass + 1);       /* once a pass */
            if (k % p->size[s] == 0) {      /* a new pass */
                memset(done, 0, sizeof done);
                shard = UINT64_MAX;
            }
            if (i / 7 != shard) {                       /* a shard, once begun, is finished */
                ck_assert_uint_eq(done[i / 7], 0);
                if (shard != UINT64_MAX)
                    done[shard] = 1;
                shard = i / 7;
            }
            k++;
        }
        ck_assert_uint_eq(k, p->per_epoch[s]);
    }
    for (uint64_t j0 = 0; j0 < M; j0++)
        for (uint32_t c = 1; c <= 8 && j0 + c <= M; c++) {
            shr_mix_plan_fill(p, SHR_ORDER_QUASI, 5, epoch, j0, c, got);
            ck_assert_int_eq(memcmp(got, walk + j0, c * sizeof *got), 0);
        }
}

START_TEST(test_quasi_order)
{
    uint64_t sizes[2] = {23, 10}, none[2] = {0, 0};
    uint64_t c0[] = {7, 7, 7, 2}, c1[] = {7, 3};
    const uint64_t *counts[2] = {c0, c1};
    size_t nshards[2] = {4, 2};
    double w[2] = {0, 0}, rep[2] = {1, 2};
    shr_mix_plan p;
    fmt_msg why = {{0}};
    ck_assert_int_eq(shr_mix_plan_make(&p, 2, sizes, w, rep, none, 0, &why), 0);
    ck_assert_int_eq(shr_mix_plan_quasi(&p, nshards, counts, 1), 0);
    ck_assert_uint_eq(p.per_epoch[1], 20);
    check_quasi(&p, 0);
    check_quasi(&p, 1);
    /* not the sequential order, and another one each epoch */
    uint64_t e0[33], e1[33], seq[33];
    shr_mix_plan_fill(&p, SHR_ORDER_QUASI, 5, 0, 0, 33, e0);
    shr_mix_plan_fill(&p, SHR_ORDER_QUASI, 5, 1, 0, 33, e1);
    shr_mix_plan_fill(&p, SHR_ORDER_SEQUENTIAL, 5, 0, 0, 33, seq);
    ck_assert_int_ne(memcmp(e0, e1, sizeof e0), 0);
    ck_assert_int_ne(memcmp(e0, seq, sizeof e0), 0);
    /* counts that do not add up to a stream's size are refused */
    shr_mix_plan_free(&p);
    ck_assert_int_eq(shr_mix_plan_make(&p, 2, sizes, w, rep, none, 0, &why), 0);
    c1[1] = 4;
    ck_assert_int_eq(shr_mix_plan_quasi(&p, nshards, counts, 1), SHR_EINVAL);
    shr_mix_plan_free(&p);
}
END_TEST

/* ---- readers over real datasets ---- */

typedef struct {
    uint32_t n;
    int64_t lab[8], idx[8], st[8];
    uint8_t px[8 * 24 * 20 * 3];
} rec;

static uint32_t read_epoch(shr_reader *r, rec *out, uint32_t max)
{
    const shr_batch *b;
    uint32_t k = 0;
    int rc;
    while ((rc = shr_next(r, &b)) == 0) {
        ck_assert_uint_lt(k, max);
        ck_assert_ptr_nonnull(b->streams);
        memset(&out[k], 0, sizeof out[k]);
        out[k].n = b->n;
        memcpy(out[k].lab, b->labels, b->n * sizeof *b->labels);
        memcpy(out[k].idx, b->indices, b->n * sizeof *b->indices);
        memcpy(out[k].st, b->streams, b->n * sizeof *b->streams);
        memcpy(out[k].px, b->data, (size_t)b->n * 24 * 20 * 3);
        k++;
        shr_release(r, b);
    }
    ck_assert_int_eq(rc, SHR_EEND);
    return k;
}

/* The two-stream reads' options: batches of 5 in random order, flipped, unpinned. */
static void two_stream_options(shr_options *o, uint64_t seed, uint32_t threads)
{
    shr_options_init(o);
    o->batch_size = 5;
    o->order = SHR_ORDER_RANDOM;
    o->seed = seed;
    o->flip = 1;
    o->pin = SHR_PIN_OFF;
    o->threads = threads;
}

START_TEST(test_reader_two_streams)
{
    shr_stream st[2] = {{.path = g_a, .weight = 0.7, .on_error = SHR_STREAM_ON_ERROR_DEFAULT},
                        {.path = g_b, .weight = 0.3, .on_error = SHR_STREAM_ON_ERROR_DEFAULT}};
    shr_options o;
    two_stream_options(&o, 3, 1);
    shr_reader *r;
    ck_assert_msg(shr_open_mixture(&r, st, 2, 40, 1, &o, tu_fresh()) == 0, "%s", tu_msg.text);
    shr_info info;
    shr_get_info(r, &info);
    ck_assert_uint_eq(info.samples, 40);
    ck_assert_uint_eq(info.classes, 5);
    ck_assert_uint_eq(shr_stream_count(r), 2);
    shr_stream_info si;
    ck_assert_int_eq(shr_get_stream_info(r, 1, &si), 0);
    ck_assert_uint_eq(si.samples, 10);
    ck_assert_uint_eq(si.per_epoch, 12);
    ck_assert_int_eq(si.label_offset, 3);
    ck_assert_uint_eq(si.classes, 2);
    rec one[8], four[8];
    ck_assert_uint_eq(read_epoch(r, one, 8), 8);
    shr_close(r);
    uint32_t per[2] = {0, 0};
    for (int k = 0; k < 8; k++) {
        uint32_t b_here = 0;
        for (uint32_t i = 0; i < one[k].n; i++) {
            int64_t s = one[k].st[i];
            ck_assert(s == 0 || s == 1);
            per[s]++;
            b_here += s == 1;
            ck_assert_int_lt(one[k].idx[i], s ? 10 : 23);
            /* labels: stream 0's 0..2, stream 1's offset to 3..4 */
            if (s)
                ck_assert(one[k].lab[i] >= 3 && one[k].lab[i] <= 4);
            else
                ck_assert(one[k].lab[i] >= 0 && one[k].lab[i] <= 2);
        }
        ck_assert(b_here == 1 || b_here == 2);      /* 5 * 0.3 = 1.5 */
    }
    ck_assert_uint_eq(per[0], 28);
    ck_assert_uint_eq(per[1], 12);
    /* threads never change a batch */
    o.threads = 4;
    ck_assert_int_eq(shr_open_mixture(&r, st, 2, 40, 1, &o, tu_fresh()), 0);
    ck_assert_uint_eq(read_epoch(r, four, 8), 8);
    shr_close(r);
    ck_assert_int_eq(memcmp(one, four, sizeof one), 0);
    /* exact resume at every cut: cursor on the same world, consumed on world 1 again */
    for (uint64_t cut = 0; cut <= 8; cut += 3) {
        o.threads = 2;
        o.cursor = cut;
        ck_assert_int_eq(shr_open_mixture(&r, st, 2, 40, 1, &o, tu_fresh()), 0);
        rec rest[8];
        uint32_t k = read_epoch(r, rest, 8);
        ck_assert_uint_eq(k, 8 - cut);
        ck_assert_int_eq(memcmp(rest, one + cut, k * sizeof *rest), 0);
        shr_close(r);
    }
    o.cursor = 0;
}
END_TEST

START_TEST(test_reader_refusals)
{
    shr_options o;
    shr_options_init(&o);
    o.pin = SHR_PIN_OFF;
    o.batch_size = 4;
    shr_reader *r = NULL;
    shr_stream gray[2] = {{.path = g_a, .weight = 1, .on_error = -1},
                          {.path = g_gray, .weight = 1, .on_error = -1}};
    ck_assert_int_eq(shr_open_mixture(&r, gray, 2, 0, 0, &o, tu_fresh()), SHR_EINVAL);
    ck_assert_ptr_null(r);
    ck_assert_ptr_nonnull(strstr(tu_msg.text, "stream 1"));
    ck_assert_ptr_nonnull(strstr(tu_msg.text, "1 channel(s)"));
    shr_stream big[2] = {{.path = g_a, .weight = 1, .on_error = -1},
                         {.path = g_big, .weight = 1, .on_error = -1}};
    ck_assert_int_eq(shr_open_mixture(&r, big, 2, 0, 0, &o, tu_fresh()), SHR_ESHAPE);
    ck_assert_ptr_nonnull(strstr(tu_msg.text, "stream 1"));
    ck_assert_ptr_nonnull(strstr(tu_msg.text, "give width and height"));
    /* with an output size both go: stream 1 cropped to it, labels kept */
    o.width = 24;
    o.height = 20;
    ck_assert_msg(shr_open_mixture(&r, big, 2, 0, 0, &o, tu_fresh()) == 0, "%s", tu_msg.text);
    shr_info info;
    shr_get_info(r, &info);
    ck_assert_uint_eq(info.samples, 33);
    ck_assert_uint_eq(info.classes, 3);
    shr_close(r);
    shr_stream missing[2] = {{.path = g_a, .weight = 1, .on_error = -1},
                             {.path = "/nonexistent/ds", .weight = 1, .on_error = -1}};
    ck_assert_int_ne(shr_open_mixture(&r, missing, 2, 0, 0, &o, tu_fresh()), 0);
    ck_assert_ptr_nonnull(strstr(tu_msg.text, "stream 1: cannot open dataset "
                                 "/nonexistent/ds"));
    /* on_error and access, the mixture's and a stream's: the options table's names */
    shr_stream two[2] = {{.path = g_a, .weight = 1, .on_error = -1},
                         {.path = g_b, .weight = 1, .on_error = 5}};
    ck_assert_int_eq(shr_open_mixture(&r, two, 2, 0, 0, &o, tu_fresh()), SHR_EINVAL);
    char want[4200];
    snprintf(want, sizeof want, "stream 1 (%s): on_error must be one of fail, skip, substitute, "
             "not 5", g_b);
    ck_assert_str_eq(tu_msg.text, want);
    two[1].on_error = -1;
    o.on_error = (shr_on_error)3;
    ck_assert_int_eq(shr_open_mixture(&r, two, 2, 0, 0, &o, tu_fresh()), SHR_EINVAL);
    ck_assert_str_eq(tu_msg.text, "on_error must be one of fail, skip, substitute, "
                     "not 3");
    o.on_error = SHR_ON_ERROR_FAIL;
    o.access = (shr_access)3;
    ck_assert_int_eq(shr_open_mixture(&r, two, 2, 0, 0, &o, tu_fresh()), SHR_EINVAL);
    ck_assert_str_eq(tu_msg.text, "access must be one of mmap, pread, direct, not 3");
}
END_TEST

/* Natural sizes and multi-scale over streams of different sizes: the canvas is the largest of
 * every stream, each image delivered at its own size from its own stream; a canvas too small
 * for stream 1's images is refused naming the stream. */
START_TEST(test_reader_natural_and_multiscale)
{
    shr_stream st[2] = {{.path = g_a, .weight = 23, .on_error = -1},
                        {.path = g_big, .weight = 10, .on_error = -1}};
    shr_options o;
    shr_options_init(&o);
    o.pin = SHR_PIN_OFF;
    o.batch_size = 6;
    o.order = SHR_ORDER_RANDOM;
    o.flip = 1;
    o.scale = SHR_SCALE_NATURAL;
    shr_reader *r;
    ck_assert_msg(shr_open_mixture(&r, st, 2, 0, 0, &o, tu_fresh()) == 0, "%s", tu_msg.text);
    const shr_batch *b;
    uint32_t per[2] = {0, 0};
    int rc;
    while ((rc = shr_next(r, &b)) == 0) {
        ck_assert_uint_eq(b->width, 32);        /* stream 1's 32x32 over stream 0's 24x20 */
        ck_assert_uint_eq(b->height, 32);
        for (uint32_t i = 0; i < b->n; i++) {
            const shr_params *p = &b->params[i];
            per[b->streams[i]]++;
            ck_assert_uint_eq(p->image_w, b->streams[i] ? 32 : 24);
            ck_assert_uint_eq(p->image_h, b->streams[i] ? 32 : 20);
        }
        shr_release(r, b);
    }
    ck_assert_int_eq(rc, SHR_EEND);
    ck_assert_uint_eq(per[0], 23);
    ck_assert_uint_eq(per[1], 10);
    shr_close(r);
    /* multi-scale, shortest side 20 or 28, longest at most 28: the 28x28 canvas holds both;
     * a 28x24 one holds stream 0's largest (24x20 to 28x23) but not stream 1's (32x32 to
     * 28x28) */
    o.scale = SHR_SCALE_MULTI;
    o.scale_sizes[0] = 20;
    o.scale_sizes[1] = 28;
    o.scale_nsizes = 2;
    o.scale_max = 28;
    ck_assert_msg(shr_open_mixture(&r, st, 2, 0, 0, &o, tu_fresh()) == 0, "%s", tu_msg.text);
    shr_close(r);
    o.width = 28;
    o.height = 24;
    ck_assert_int_eq(shr_open_mixture(&r, st, 2, 0, 0, &o, tu_fresh()), SHR_EINVAL);
    ck_assert_msg(strstr(tu_msg.text, "stream 1 (") &&
                  strstr(tu_msg.text, "more than the 28x24 canvas"), "%s",
                  tu_msg.text);
}
END_TEST

/* access DIRECT reads a mixture's batches with the batch engine, every stream's samples in one
 * set of requests: each worker has an engine, and the batches (pixels verified, mirrored,
 * labels offset, streams) are the mmap reader's. */
START_TEST(test_reader_direct_engine)
{
    shr_stream st[2] = {{.path = g_a, .weight = 0.6, .on_error = -1},
                        {.path = g_b, .weight = 0.4, .on_error = -1}};
    shr_options o;
    two_stream_options(&o, 8, 2);
    o.verify_samples = 1;
    rec want[8], got[8];
    shr_reader *r;
    ck_assert_int_eq(shr_open_mixture(&r, st, 2, 40, 1, &o, tu_fresh()), 0);
    ck_assert_uint_eq(read_epoch(r, want, 8), 8);
    shr_close(r);
    o.access = SHR_ACCESS_DIRECT;
    ck_assert_msg(shr_open_mixture(&r, st, 2, 40, 1, &o, tu_fresh()) == 0, "%s", tu_msg.text);
    ck_assert_uint_eq(r->direct_shards, 4 + 2);     /* 23 and 10 samples, 7 a shard */
    for (uint32_t i = 0; i < o.threads; i++)
        ck_assert_ptr_nonnull(r->workers[i].direct);
    ck_assert_uint_eq(read_epoch(r, got, 8), 8);
    shr_close(r);
    ck_assert_int_eq(memcmp(want, got, sizeof want), 0);
}
END_TEST

/* A tolerant open's note of the shards that did not open covers every stream, each shard after
 * its stream, with that stream's policy. */
START_TEST(test_reader_unavailable_every_stream)
{
    char cmd[2048], a[600], b[600];
    snprintf(a, sizeof a, "%s/a-broken", g_root);
    snprintf(b, sizeof b, "%s/b-broken", g_root);
    snprintf(cmd, sizeof cmd, "cd '%s' && rm -rf a-broken b-broken && cp -r a a-broken && "
             "cp -r b b-broken && truncate -s 64 a-broken/shard-00001.raw "
             "b-broken/shard-00000.raw", g_root);
    ck_assert_int_eq(run_quiet(cmd), 0);
    shr_stream st[2] = {{.path = a, .weight = 1, .on_error = SHR_ON_ERROR_SUBSTITUTE},
                        {.path = b, .weight = 1, .on_error = SHR_ON_ERROR_SKIP}};
    shr_options o;
    shr_options_init(&o);
    o.pin = SHR_PIN_OFF;
    o.batch_size = 4;
    shr_reader *r = NULL;
    ck_assert_msg(shr_open_mixture(&r, st, 2, 0, 0, &o, tu_fresh()) == 0, "%s", tu_msg.text);
    char want[2][1400];
    snprintf(want[0], sizeof want[0], "stream 0: %s/shard-00001.raw: cannot open (", a);
    snprintf(want[1], sizeof want[1], "stream 1: %s/shard-00000.raw: cannot open (", b);
    const char *note = shr_last_error(r);
    const char *at0 = strstr(note, want[0]), *at1 = strstr(note, want[1]);
    ck_assert_msg(at0 && at1 && at0 < at1, "%s", note);
    ck_assert_ptr_nonnull(strstr(at0, "its 7 samples are replaced; "));
    ck_assert_ptr_nonnull(strstr(at1, "its 7 samples are skipped"));
    shr_close(r);
}
END_TEST

static Suite *mixture_suite(void)
{
    return TU_SUITE("mixture", "core", 120, test_interleave_tolerance,
                    test_plan_counts_and_refusals, test_random_access_and_draws,
                    test_sampler_ranks_and_elastic, test_reader_two_streams, test_reader_refusals,
                    test_reader_unavailable_every_stream, test_reader_direct_engine,
                    test_reader_natural_and_multiscale, test_quasi_order);
}

int main(void)
{
    int rc = build_fixtures();
    return tu_run_fixtures(rc, mixture_suite());
}
