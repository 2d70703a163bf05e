/* test_mix.c - MixUp and CutMix on the reader's batches (reader/mix.c) and RandomErasing's
 * value="random" noise (reader/erase_noise.c): the documented arithmetic on every delivered
 * value, given the batch record the reader reports, against the same batch read without mixing;
 * the soft labels; Beta(alpha, alpha) draws with the right mean and variance; the same batches at
 * 1 and 4 threads and after a resume; refused options. Datasets are built at run time by the
 * shardc binaries of the same build directory. */
#include <check.h>
#include <ftw.h>
#include <inttypes.h>
#include <libgen.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "erase_noise.h"
#include "mix.h"
#include "shardread.h"
#include "transform.h"

#include "progs.h"
#include "testutil.h"

static char g_ds[1100];

static int build_fixture(void)
{
    return tu_build_ds(g_ds, "--classes 4 --per-class 6 --min-side 30 --max-side 60", "--size 20x16 --shard-samples 7 -j 2");
}

/* one delivered batch, copied */
typedef struct {
    uint32_t n;
    void *data;
    int64_t labels[8];
    float soft[8 * 4];
    shr_mix_record mix;
    shr_params params[8];
} rec;

static void keep_rec(const shr_batch *b, size_t one, void *recs)
{
    rec *r = tu_vec_add(recs, sizeof *r);
    ck_assert_uint_le(b->n, 8);
    r->n = b->n;
    r->data = tu_memdup(b->data, one * b->n);
    memcpy(r->labels, b->labels, b->n * sizeof(int64_t));
    memcpy(r->params, b->params, b->n * sizeof(shr_params));
    r->mix = b->mix;
    if (b->soft_labels) {
        ck_assert_uint_eq(b->num_classes, 4);
        memcpy(r->soft, b->soft_labels, b->n * 4 * sizeof(float));
    } else {
        ck_assert_uint_eq(b->num_classes, 0);
    }
}

/* The batches of one epoch from a reader on g_ds with options o. */
static rec *record(const shr_options *o, size_t *nrec, size_t *one)
{
    tu_vec recs = {NULL, 0};
    *one = tu_reader_each(g_ds, o, 1, keep_rec, &recs);
    *nrec = recs.n;
    return recs.v;
}

static void free_recs(rec *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i].data);
    free(v);
}

static shr_options base(shr_dtype dt, shr_layout layout)
{
    shr_options o;
    shr_options_init(&o);
    o.batch_size = 7;           /* 24 samples: a short last batch of 3 */
    o.order = SHR_ORDER_RANDOM;
    o.seed = 11;
    o.dtype = dt;
    o.layout = layout;
    o.normalize = SHR_NORM_GIVEN;
    for (int c = 0; c < 4; c++) {
        o.mean[c] = 100.0f + 10 * c;
        o.std[c] = 57.0f + c;
    }
    o.flip = 1;
    o.threads = 2;
    return o;
}

static float half_to_float(uint16_t h)
{
    uint32_t e = (h >> 10) & 0x1f, f = h & 0x3ff;
    float v = e == 0 ? (float)f * 0x1p-24f : ldexpf((float)(f | 0x400), (int)e - 25);
    return h >> 15 ? -v : v;
}

static float value(const void *data, shr_dtype dt, size_t i)
{
    return dt == SHR_DTYPE_F32 ? ((const float *)data)[i] : half_to_float(((const uint16_t *)data)[i]);
}

/* the reference: torch's mul_ / add_ at the dtype, written out as the documentation says */
static float mixed(shr_dtype dt, float x, float xr, double lam)
{
    if (dt == SHR_DTYPE_F32) {
        volatile float a = x * (float)lam, b = xr * (float)(1.0 - lam);
        return a + b;
    }
    float l = (float)lam, r = (float)(1.0 - lam);     /* torch >= 2: float32 opmath */
    float a = half_to_float(shr_tf_half(x * l)), b = half_to_float(shr_tf_half(xr * r));
    return half_to_float(shr_tf_half(a + b));
}

static void check_batches(const rec *plain, const rec *mixv, size_t n, size_t one, shr_dtype dt,
                          shr_layout layout, int *seen)
{
    const uint32_t W = 20, H = 16, C = 3;
    size_t values = one / shr_tf_elem_size(dt);
    for (size_t k = 0; k < n; k++) {
        const rec *p = &plain[k], *m = &mixv[k];
        ck_assert_uint_eq(p->n, m->n);
        ck_assert_mem_eq(p->labels, m->labels, p->n * sizeof(int64_t));
        const shr_mix_record *x = &m->mix;
        ck_assert(x->op == SHR_MIX_MIXUP || x->op == SHR_MIX_CUTMIX);
        seen[x->op]++;
        ck_assert(x->lam_drawn >= 0 && x->lam_drawn <= 1);
        if (x->op == SHR_MIX_CUTMIX) {
            ck_assert(x->x1 <= x->x2 && x->x2 <= W && x->y1 <= x->y2 && x->y2 <= H);
            double lam = 1.0 - (double)((x->x2 - x->x1) * (x->y2 - x->y1)) / (double)(W * H);
            ck_assert(lam == x->lam);
        } else {
            ck_assert(x->lam == x->lam_drawn && x->x1 == 0 && x->x2 == 0);
        }
        for (uint32_t i = 0; i < p->n; i++) {
            uint32_t q = i ? i - 1 : p->n - 1;
            for (size_t v = 0; v < values; v++) {
                float a = value(p->data, dt, i * values + v);
                float b = value(p->data, dt, q * values + v);
                float got = value(m->data, dt, i * values + v);
                float want;
                if (x->op == SHR_MIX_MIXUP) {
                    want = mixed(dt, a, b, x->lam_drawn);
                } else {
                    size_t y, xx;
                    if (layout == SHR_LAYOUT_NHWC) {
                        y = v / (W * C);
                        xx = v / C % W;
                    } else {
                        y = v / W % H;
                        xx = v % W;
                    }
                    want = y >= x->y1 && y < x->y2 && xx >= x->x1 && xx < x->x2 ? b : a;
                }
                ck_assert_msg(memcmp(&got, &want, sizeof got) == 0,
                              "batch %zu sample %u value %zu: %.9g, want %.9g (op %d)", k, i, v,
                              (double)got, (double)want, (int)x->op);
            }
            /* soft labels */
            float l = (float)x->lam, r = (float)(1.0 - x->lam);
            for (int c = 0; c < 4; c++) {
                float want = (c == m->labels[i] ? l : 0.0f) + (c == m->labels[q] ? r : 0.0f);
                ck_assert_msg(m->soft[i * 4 + c] == want, "soft label %u,%d: %g, want %g", i, c,
                              (double)m->soft[i * 4 + c], (double)want);
            }
        }
    }
}

START_TEST(test_mix_arithmetic)
{
    const shr_dtype dts[2] = {SHR_DTYPE_F32, SHR_DTYPE_F16};
    for (int d = 0; d < 2; d++)
        for (int lay = 0; lay < 2; lay++) {
            shr_options o = base(dts[d], (shr_layout)lay);
            o.epoch = 3;
            size_t np, nm, one;
            rec *plain = record(&o, &np, &one);
            int seen[3] = {0, 0, 0};
            for (int which = 0; which < 3; which++) {
                shr_options om = o;
                om.mixup_alpha = which != 1 ? 0.4 : 0;
                om.cutmix_alpha = which != 0 ? 1.0 : 0;
                rec *m = record(&om, &nm, &one);
                ck_assert_uint_eq(np, nm);
                check_batches(plain, m, np, one, dts[d], (shr_layout)lay, seen);
                free_recs(m, nm);
            }
            ck_assert_int_ge(seen[SHR_MIX_MIXUP], np);
            ck_assert_int_ge(seen[SHR_MIX_CUTMIX], np);
            ck_assert_int_eq(seen[SHR_MIX_MIXUP] + seen[SHR_MIX_CUTMIX], 3 * np);
            free_recs(plain, np);
        }
}
END_TEST

START_TEST(test_mix_determinism)
{
    shr_options o = base(SHR_DTYPE_F32, SHR_LAYOUT_NCHW);
    o.mixup_alpha = 0.2;
    o.cutmix_alpha = 1.0;
    o.threads = 1;
    o.epoch = 1;
    size_t n1, n4, nr, ne, one;
    rec *a = record(&o, &n1, &one);
    o.threads = 4;
    rec *b = record(&o, &n4, &one);
    ck_assert_uint_eq(n1, n4);
    for (size_t k = 0; k < n1; k++) {
        ck_assert_mem_eq(a[k].data, b[k].data, one * a[k].n);
        ck_assert_mem_eq(&a[k].mix, &b[k].mix, sizeof a[k].mix);
        ck_assert_mem_eq(a[k].soft, b[k].soft, a[k].n * 4 * sizeof(float));
    }
    o.cursor = 2;
    o.threads = 3;
    rec *r = record(&o, &nr, &one);
    ck_assert_uint_eq(nr, n1 - 2);
    for (size_t k = 0; k < nr; k++) {
        ck_assert_mem_eq(r[k].data, a[k + 2].data, one * r[k].n);
        ck_assert_mem_eq(&r[k].mix, &a[k + 2].mix, sizeof r[k].mix);
    }
    /* another epoch, other draws */
    o.cursor = 0;
    o.epoch = 2;
    rec *e = record(&o, &ne, &one);
    ck_assert_uint_eq(ne, n1);
    int differ = 0;
    for (size_t k = 0; k < ne; k++)
        differ += e[k].mix.lam_drawn != a[k].mix.lam_drawn;
    ck_assert_int_eq(differ, (int)ne);
    /* the ranks of a world draw apart: key number * world + rank */
    o.epoch = 1;
    o.world = 2;
    size_t n0, nw1;
    rec *r0 = record(&o, &n0, &one);
    o.rank = 1;
    rec *r1 = record(&o, &nw1, &one);
    ck_assert_uint_eq(n0, nw1);
    ck_assert_uint_ge(n0, 2);
    shr_mixer mx;
    shr_tf_out out;
    shr_tf_out_init(&out, o.dtype, o.layout, 20, 16, 3);
    shr_mix_init(&mx, &o, &out, 4);
    for (size_t k = 0; k < n0; k++) {
        ck_assert(r0[k].mix.lam_drawn != r1[k].mix.lam_drawn);
        shr_mix_record want;
        shr_mix_draw(&mx, o.seed, 1, k * 2 + 1, &want);
        ck_assert_mem_eq(&want, &r1[k].mix, sizeof want);
    }
    free_recs(r0, n0);
    free_recs(r1, nw1);
    free_recs(a, n1);
    free_recs(b, n4);
    free_recs(r, nr);
    free_recs(e, ne);
}
END_TEST

START_TEST(test_beta_draws)
{
    const double alphas[] = {0.05, 0.2, 1.0, 4.0};
    for (size_t a = 0; a < sizeof alphas / sizeof alphas[0]; a++) {
        double alpha = alphas[a], s = 0, s2 = 0;
        const int N = 20000;
        for (int k = 0; k < N; k++) {
            double x = shr_mix_beta(alpha, 7, (uint64_t)k / 100, (uint64_t)k % 100);
            ck_assert_msg(x >= 0 && x <= 1, "alpha %g: %g", alpha, x);
            s += x;
            s2 += x * x;
        }
        double mean = s / N, var = s2 / N - mean * mean;
        double want_var = 1.0 / (4.0 * (2.0 * alpha + 1.0));    /* Beta(a, a) */
        ck_assert_msg(fabs(mean - 0.5) < 0.01, "alpha %g: mean %g", alpha, mean);
        ck_assert_msg(fabs(var - want_var) < 0.05 * want_var, "alpha %g: variance %g, want %g",
                      alpha, var, want_var);
    }
}
END_TEST

START_TEST(test_erase_noise)
{
    double s = 0, s2 = 0;
    const int N = 100000;
    for (int j = 0; j < N; j++) {
        double v = shr_erase_noise_value(3, 1, 42, (uint64_t)j);
        s += v;
        s2 += v * v;
    }
    double mean = s / N, var = s2 / N - mean * mean;
    ck_assert_msg(fabs(mean) < 0.02 && fabs(var - 1) < 0.02, "mean %g variance %g", mean, var);
    /* through the reader: the box holds the noise of its sample, the rest is untouched */
    shr_options o = base(SHR_DTYPE_F32, SHR_LAYOUT_NCHW);
    o.erase_p = 1.0;
    o.erase_random = 1;
    size_t np, ne, one;
    shr_options op = o;
    op.erase_p = 0;
    op.erase_random = 0;
    rec *p = record(&op, &np, &one);
    rec *e = record(&o, &ne, &one);
    ck_assert_uint_eq(np, ne);
    shr_reader *r;
    ck_assert_int_eq(shr_open(&r, g_ds, &o, tu_fresh()), 0);
    const shr_batch *b;
    ck_assert_int_eq(shr_next(r, &b), 0);
    const uint32_t W = 20, H = 16;
    int boxes = 0;
    for (uint32_t i = 0; i < b->n; i++) {
        const shr_params *q = &b->params[i];
        const float *got = (const float *)b->data + (size_t)i * 3 * W * H;
        const float *plain = (const float *)p[0].data + (size_t)i * 3 * W * H;
        uint64_t j = 0;
        boxes += q->erase;
        for (uint32_t c = 0; c < 3; c++)
            for (uint32_t y = 0; y < H; y++)
                for (uint32_t x = 0; x < W; x++) {
                    int in = q->erase && y >= q->erase_y && y < q->erase_y + q->erase_h &&
                             x >= q->erase_x && x < q->erase_x + q->erase_w;
                    float v = got[(c * H + y) * W + x];
                    float want = in ? shr_erase_noise_value(o.seed, 0, (uint64_t)b->indices[i],
                                                            j++)
                                    : plain[(c * H + y) * W + x];
                    ck_assert(memcmp(&v, &want, sizeof v) == 0);
                }
    }
    ck_assert_int_gt(boxes, 0);
    ck_assert_mem_eq(e[0].data, b->data, one * b->n);
    shr_release(r, b);
    shr_close(r);
    free_recs(p, np);
    free_recs(e, ne);
}
END_TEST

START_TEST(test_refused)
{
    shr_reader *r;
    shr_options o = base(SHR_DTYPE_F32, SHR_LAYOUT_NHWC);
    const double bad[] = {-1, NAN, INFINITY};
    for (size_t i = 0; i < 3; i++) {
        o.mixup_alpha = bad[i];
        ck_assert_int_eq(shr_open(&r, g_ds, &o, tu_fresh()), SHR_EINVAL);
        ck_assert_ptr_nonnull(strstr(tu_msg.text, "mixup_alpha"));
        o.mixup_alpha = 0;
        o.cutmix_alpha = bad[i];
        ck_assert_int_eq(shr_open(&r, g_ds, &o, tu_fresh()), SHR_EINVAL);
        ck_assert_ptr_nonnull(strstr(tu_msg.text, "cutmix_alpha"));
        o.cutmix_alpha = 0;
    }
    o = base(SHR_DTYPE_U8, SHR_LAYOUT_NHWC);
    o.normalize = SHR_NORM_NONE;
    o.mixup_alpha = 1;
    ck_assert_int_eq(shr_open(&r, g_ds, &o, tu_fresh()), SHR_EINVAL);
    ck_assert_ptr_nonnull(strstr(tu_msg.text, "float dtype"));
    o.mixup_alpha = 0;
    o.erase_p = 0.5;
    o.erase_random = 1;
    ck_assert_int_eq(shr_open(&r, g_ds, &o, tu_fresh()), SHR_EINVAL);
    ck_assert_ptr_nonnull(strstr(tu_msg.text, "erase_random"));
    /* a label outside num_classes fails the batch that holds it, naming it */
    o = base(SHR_DTYPE_F32, SHR_LAYOUT_NHWC);
    o.mixup_alpha = 1;
    o.num_classes = 2;
    ck_assert_int_eq(shr_open(&r, g_ds, &o, tu_fresh()), 0);
    const shr_batch *b;
    ck_assert_int_eq(tu_reader_drain(r), SHR_EINVAL);
    ck_assert_ptr_nonnull(strstr(shr_last_error(r), "num_classes 2"));
    shr_close(r);
    /* more columns than the dataset's classes are fine */
    o.num_classes = 10;
    ck_assert_int_eq(shr_open(&r, g_ds, &o, tu_fresh()), 0);
    ck_assert_int_eq(shr_next(r, &b), 0);
    ck_assert_uint_eq(b->num_classes, 10);
    shr_release(r, b);
    shr_close(r);
    /* off by default: no soft labels */
    shr_options_init(&o);
    ck_assert(o.mixup_alpha == 0 && o.cutmix_alpha == 0 && o.num_classes == 0 &&
              !o.erase_random);
}
END_TEST

int main(void)
{
    int rc = build_fixture();
    Suite *s = TU_SUITE("mix", "mix", 600, test_mix_arithmetic, test_mix_determinism,
                        test_beta_draws, test_erase_noise, test_refused);
    return tu_run_fixtures(rc, s);
}
