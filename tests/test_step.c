/* test_step.c - benchmark code, not the library: shardbench's training step (programs/shardbench/) on
 * the CPU (step_cpu.h) and through the dispatcher (step.h): the emulated step's duration, the
 * model's exact first steps on inputs that normalise to zero, learning on a real dataset,
 * determinism, the statistics, and rejected options and batches.
 *
 * The dataset is built at run time by the shardc binaries of the same build directory (found next
 * to this program: <exe>/../bin/, else $BUILD/bin). Speeds are never asserted. */
#include "shardread.h"
#include "step.h"
#include "step_cpu.h"
#include "progs.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DS_CLASSES 4
#define DS_PER_CLASS 16
#define DS_SAMPLES (DS_CLASSES * DS_PER_CLASS)
#define DS_BATCH 8

static char g_ds[1100];

/* ---- fixture ---- */

static int build_fixture(void)
{
    char args[128];
    snprintf(args, sizeof args, "--classes %d --per-class %d --seed 5", DS_CLASSES, DS_PER_CLASS);
    return tu_build_ds(g_ds, args, "--size 32x32 -j 2") != 0 ? -1 : 0;
}

/* ---- helpers ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static sb_step_opts model_opts(sb_model model, uint32_t classes)
{
    sb_step_opts o = {.kind = SB_STEP_MODEL, .model = model, .classes = classes, .seed = 11,
                      .device = SB_DEVICE_CPU};
    for (int c = 0; c < 3; c++) {
        o.mean[c] = 128;
        o.std[c] = 64;
    }
    return o;
}

/* A batch owned by the test: n samples of h x w x c, all zero, labels 0. */
typedef struct {
    shr_batch b;
    uint8_t *data;
    int64_t *labels, *indices;
} test_batch;

static void batch_make(test_batch *t, uint32_t n, uint32_t h, uint32_t w, uint32_t c)
{
    memset(t, 0, sizeof *t);
    t->data = calloc((size_t)n * h * w * c, 1);
    t->labels = calloc(n, sizeof *t->labels);
    t->indices = calloc(n, sizeof *t->indices);
    ck_assert(t->data && t->labels && t->indices);
    t->b = (shr_batch){.data = t->data, .labels = t->labels, .indices = t->indices,
                       .sources = t->indices, .n = n, .height = h, .width = w, .channels = c};
}

static void batch_free(test_batch *t)
{
    free(t->data);
    free(t->labels);
    free(t->indices);
}

/* Per-epoch mean losses and accuracy counters of `epochs` epochs of the fixture through the CPU
 * step (or the dispatcher), random order from a fixed seed. */
typedef struct {
    double loss[8];
    uint64_t correct[8], seen[8], batches[8];
} run_result;

static void train_fixture(const sb_step_opts *so_in, int dispatcher, uint32_t epochs,
                          run_result *res)
{
    ck_assert_uint_le(epochs, 8);
    memset(res, 0, sizeof *res);
    shr_options o;
    shr_options_init(&o);
    o.batch_size = DS_BATCH;
    o.order = SHR_ORDER_RANDOM;
    o.seed = 3;
    o.threads = 2;
    shr_reader *r = NULL;
    int rc = shr_open(&r, g_ds, &o, tu_fresh());
    ck_assert_msg(rc == 0, "shr_open: %s", tu_msg.text);
    shr_info info;
    shr_get_info(r, &info);
    ck_assert_uint_eq(info.classes, DS_CLASSES);
    sb_step_opts so = *so_in;
    so.classes = info.classes;
    for (int c = 0; c < 3; c++) {
        so.mean[c] = info.mean[c];
        so.std[c] = info.std[c];
    }
    void *cpu = NULL;
    sb_step *disp = NULL;
    rc = dispatcher ? sb_step_create(&disp, &so) : sb_cpu_step_create(&cpu, &so);
    ck_assert_int_eq(rc, 0);
    for (uint32_t e = 0; e < epochs; e++) {
        const shr_batch *b;
        while ((rc = shr_next(r, &b)) == 0) {
            int src = dispatcher ? sb_step_run(disp, b) : sb_cpu_step_run(cpu, b);
            ck_assert_int_eq(src, 0);
            shr_release(r, b);
        }
        ck_assert_int_eq(rc, SHR_EEND);
        sb_step_stats st;
        rc = dispatcher ? sb_step_sync(disp, &st) : sb_cpu_step_sync(cpu, &st);
        ck_assert_int_eq(rc, 0);
        ck_assert_int_eq(st.on_gpu, 0);
        ck_assert_uint_eq(st.h2d_bytes, 0);
        ck_assert(st.busy_s > 0);
        res->loss[e] = st.loss_sum / (double)st.loss_batches;
        res->correct[e] = st.correct;
        res->seen[e] = st.seen;
        res->batches[e] = st.loss_batches;
    }
    sb_step_free(disp);
    sb_cpu_step_free(cpu);
    shr_close(r);
}

/* ---- tests ---- */

START_TEST(test_emulated_duration)
{
    sb_step_opts o = {.kind = SB_STEP_EMULATED, .step_ms = 15};
    void *s = NULL;
    ck_assert_int_eq(sb_cpu_step_create(&s, &o), 0);
    ck_assert_ptr_nonnull(s);
    test_batch t;
    batch_make(&t, 2, 4, 4, 3);
    double total = 0;
    for (int i = 0; i < 3; i++) {
        double t0 = now_s();
        ck_assert_int_eq(sb_cpu_step_run(s, &t.b), 0);
        double dt = now_s() - t0;
        ck_assert_msg(dt >= 0.015, "an emulated 15 ms step took %.6f s", dt);
        total += dt;
    }
    sb_step_stats st;
    ck_assert_int_eq(sb_cpu_step_sync(s, &st), 0);
    ck_assert_msg(st.busy_s >= 0.045 && st.busy_s <= total, "busy %.6f, measured %.6f",
                  st.busy_s, total);
    ck_assert_int_eq(st.on_gpu, 0);
    ck_assert_uint_eq(st.loss_batches, 0);
    ck_assert_uint_eq(st.seen, 0);
    ck_assert_uint_eq(st.correct, 0);
    ck_assert(st.loss_sum == 0 && st.h2d_s == 0 && st.h2d_bytes == 0);
    /* sync resets */
    ck_assert_int_eq(sb_cpu_step_sync(s, &st), 0);
    ck_assert(st.busy_s == 0);
    /* a zero-length step is allowed (the pipeline without a step) */
    sb_cpu_step_free(s);
    o.step_ms = 0;
    ck_assert_int_eq(sb_cpu_step_create(&s, &o), 0);
    ck_assert_int_eq(sb_cpu_step_run(s, &t.b), 0);
    sb_cpu_step_free(s);
    batch_free(&t);
}
END_TEST

START_TEST(test_emulated_dispatcher)
{
    sb_step_opts o = {.kind = SB_STEP_EMULATED, .step_ms = 12, .device = SB_DEVICE_CPU};
    sb_step *s = NULL;
    ck_assert_int_eq(sb_step_create(&s, &o), 0);
    test_batch t;
    batch_make(&t, 3, 8, 8, 3);
    double t0 = now_s();
    ck_assert_int_eq(sb_step_run(s, &t.b), 0);
    ck_assert_int_eq(sb_step_run(s, &t.b), 0);
    sb_step_stats st;
    ck_assert_int_eq(sb_step_sync(s, &st), 0);
    double dt = now_s() - t0;
    ck_assert_msg(dt >= 0.024, "two emulated 12 ms steps took %.6f s", dt);
    ck_assert_int_eq(st.on_gpu, 0);
    ck_assert_msg(st.busy_s >= 0.024, "busy %.6f", st.busy_s);
    sb_step_free(s);
    batch_free(&t);
}
END_TEST

/* Pixels whose box average is exactly the mean normalise to x = 0, so the first logits are the
 * zero biases whatever the weights: loss ln K; one SGD step moves only the output biases, by
 * -lr (1/K - onehot), so the second loss is known exactly too. Checks the box average (2x2 boxes
 * of a checkerboard), the per-channel normalisation, the loss and the update, for both models. */
START_TEST(test_model_exact_first_steps)
{
    const uint32_t K = 4, n = 3, side = 16, hw = 32;
    const float lr = 0.5f;
    sb_model model = _i ? SB_MODEL_MLP : SB_MODEL_SOFTMAX;
    sb_step_opts o = model_opts(model, K);
    o.lr = lr;
    o.model_side = side;
    o.hidden = 8;
    o.mean[0] = 50;
    o.mean[1] = 200;
    o.mean[2] = 20;
    o.std[0] = 3;
    o.std[1] = 0;       /* a constant channel: divided by 1 */
    o.std[2] = 7;
    void *s = NULL;
    ck_assert_int_eq(sb_cpu_step_create(&s, &o), 0);
    test_batch t;
    batch_make(&t, n, hw, hw, 3);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t y = 0; y < hw; y++)
            for (uint32_t x = 0; x < hw; x++) {
                uint8_t *p = t.data + (((size_t)i * hw + y) * hw + x) * 3;
                p[0] = (x + y) % 2 ? 47 : 53;
                p[1] = 200;
                p[2] = (x + y) % 2 ? 10 : 30;
            }
    /* labels all 0 */
    ck_assert_int_eq(sb_cpu_step_run(s, &t.b), 0);
    sb_step_stats st;
    ck_assert_int_eq(sb_cpu_step_sync(s, &st), 0);
    ck_assert_uint_eq(st.loss_batches, 1);
    ck_assert_uint_eq(st.seen, n);
    ck_assert_double_eq_tol(st.loss_sum, log((double)K), 1e-6);
    ck_assert_int_eq(sb_cpu_step_run(s, &t.b), 0);
    ck_assert_int_eq(sb_cpu_step_sync(s, &st), 0);
    double b0 = lr * (1.0 - 1.0 / K), bo = -lr / K;
    double want = log(exp(b0) + (K - 1) * exp(bo)) - b0;
    ck_assert_double_eq_tol(st.loss_sum, want, 1e-5);
    /* the prediction made before the update: class 0 now has the largest bias */
    ck_assert_uint_eq(st.correct, n);
    sb_cpu_step_free(s);

    /* a pixel off the mean moves the first loss away from ln K: the input is really read */
    ck_assert_int_eq(sb_cpu_step_create(&s, &o), 0);
    t.data[0] = 255;
    ck_assert_int_eq(sb_cpu_step_run(s, &t.b), 0);
    ck_assert_int_eq(sb_cpu_step_sync(s, &st), 0);
    ck_assert(fabs(st.loss_sum - log((double)K)) > 1e-6);
    sb_cpu_step_free(s);
    batch_free(&t);
}
END_TEST

/* The same on one channel, and on images smaller than the model's input (boxes of one pixel,
 * repeated). */
START_TEST(test_model_gray_and_upsampled)
{
    sb_step_opts o = model_opts(SB_MODEL_SOFTMAX, 3);
    o.mean[0] = 90;
    o.std[0] = 10;
    void *s = NULL;
    ck_assert_int_eq(sb_cpu_step_create(&s, &o), 0);
    test_batch t;
    batch_make(&t, 2, 5, 7, 1);
    memset(t.data, 90, 2 * 5 * 7);
    t.labels[0] = 2;
    t.labels[1] = 1;
    ck_assert_int_eq(sb_cpu_step_run(s, &t.b), 0);
    sb_step_stats st;
    ck_assert_int_eq(sb_cpu_step_sync(s, &st), 0);
    ck_assert_double_eq_tol(st.loss_sum, log(3.0), 1e-6);
    ck_assert_uint_eq(st.seen, 2);
    /* the geometry may change between batches, the channel count may not */
    test_batch u;
    batch_make(&u, 1, 40, 33, 1);
    memset(u.data, 90, 40 * 33);
    ck_assert_int_eq(sb_cpu_step_run(s, &u.b), 0);
    batch_free(&u);
    batch_make(&u, 1, 5, 7, 3);
    ck_assert_int_eq(sb_cpu_step_run(s, &u.b), SHR_EINVAL);
    batch_free(&u);
    sb_cpu_step_free(s);
    batch_free(&t);
}
END_TEST

START_TEST(test_model_learns)
{
    sb_model model = _i ? SB_MODEL_MLP : SB_MODEL_SOFTMAX;
    sb_step_opts o = model_opts(model, 0);
    run_result r;
    train_fixture(&o, 0, 5, &r);
    for (int e = 0; e < 5; e++) {
        ck_assert_uint_eq(r.seen[e], DS_SAMPLES);
        ck_assert_uint_eq(r.batches[e], DS_SAMPLES / DS_BATCH);
        ck_assert_uint_le(r.correct[e], r.seen[e]);
        ck_assert(isfinite(r.loss[e]) && r.loss[e] > 0);
    }
    /* chance is ln 4 = 1.386; the classes differ in shape and colour, so the loss falls */
    ck_assert_msg(r.loss[4] < 0.7 * r.loss[0], "%s: loss %.4f -> %.4f over 5 epochs",
                  _i ? "mlp" : "softmax", r.loss[0], r.loss[4]);
    ck_assert_msg(r.loss[4] < 1.0, "final loss %.4f", r.loss[4]);
    ck_assert_uint_gt(r.correct[4], r.correct[0]);
    ck_assert_uint_gt(r.correct[4], DS_SAMPLES / 2);
}
END_TEST

/* Same seed, same batches: the same losses, bit for bit; the dispatcher's CPU path is this
 * implementation. Another seed starts from other weights. */
START_TEST(test_model_deterministic)
{
    sb_step_opts o = model_opts(SB_MODEL_MLP, 0);
    run_result a, b, c, d;
    train_fixture(&o, 0, 2, &a);
    train_fixture(&o, 0, 2, &b);
    train_fixture(&o, 1, 2, &c);
    for (int e = 0; e < 2; e++) {
        ck_assert(a.loss[e] == b.loss[e]);
        ck_assert_uint_eq(a.correct[e], b.correct[e]);
        ck_assert(a.loss[e] == c.loss[e]);
    }
    o.seed = 12;
    train_fixture(&o, 0, 2, &d);
    ck_assert(d.loss[0] != a.loss[0]);
}
END_TEST

START_TEST(test_bad_options)
{
    void *s = (void *)1;
    sb_step_opts o = {.kind = (sb_step_kind)7};
    ck_assert_int_eq(sb_cpu_step_create(&s, &o), SHR_EINVAL);
    ck_assert_ptr_null(s);
    ck_assert_int_eq(sb_cpu_step_create(&s, NULL), SHR_EINVAL);
    ck_assert_int_eq(sb_cpu_step_create(NULL, &o), SHR_EINVAL);
    o.kind = SB_STEP_EMULATED;
    const double bad_ms[] = {-1, NAN, INFINITY, 3600001};
    for (size_t i = 0; i < sizeof bad_ms / sizeof *bad_ms; i++) {
        o.step_ms = bad_ms[i];
        s = (void *)1;
        ck_assert_int_eq(sb_cpu_step_create(&s, &o), SHR_EINVAL);
        ck_assert_ptr_null(s);
    }
    sb_step_opts good = model_opts(SB_MODEL_SOFTMAX, 4);
    ck_assert_int_eq(sb_cpu_step_create(&s, &good), 0);
    sb_cpu_step_free(s);
    sb_step_opts bad[8];
    for (int i = 0; i < 8; i++)
        bad[i] = good;
    bad[0].model = (sb_model)5;
    bad[1].classes = 0;
    bad[2].lr = -0.1f;
    bad[3].lr = NAN;
    bad[4].std[1] = -2;
    bad[5].model_side = 513;
    bad[6].hidden = 70000;
    bad[7].mean[2] = INFINITY;
    for (int i = 0; i < 8; i++) {
        s = (void *)1;
        ck_assert_msg(sb_cpu_step_create(&s, &bad[i]) == SHR_EINVAL, "bad option set %d", i);
        ck_assert_ptr_null(s);
    }
    /* through the dispatcher too */
    sb_step *d = (sb_step *)1;
    ck_assert_int_ne(sb_step_create(&d, &bad[1]), 0);
    ck_assert_ptr_null(d);
    o.step_ms = -5;
    o.device = SB_DEVICE_CPU;
    d = (sb_step *)1;
    ck_assert_int_ne(sb_step_create(&d, &o), 0);
    ck_assert_ptr_null(d);
    sb_cpu_step_free(NULL);
    sb_step_free(NULL);
}
END_TEST

/* Bad batches are refused and leave the model as it was: the run after them gives the loss a
 * step that never saw them gives. */
START_TEST(test_bad_batches)
{
    sb_step_opts o = model_opts(SB_MODEL_MLP, 3);
    o.hidden = 16;
    void *s = NULL, *ref = NULL;
    ck_assert_int_eq(sb_cpu_step_create(&s, &o), 0);
    ck_assert_int_eq(sb_cpu_step_create(&ref, &o), 0);
    test_batch t;
    batch_make(&t, 4, 16, 16, 3);
    for (size_t i = 0; i < 4u * 16 * 16 * 3; i++)
        t.data[i] = (uint8_t)(i * 37 % 251);
    t.labels[1] = 1;
    t.labels[2] = 2;
    ck_assert_int_eq(sb_cpu_step_run(s, &t.b), 0);
    ck_assert_int_eq(sb_cpu_step_run(ref, &t.b), 0);

    ck_assert_int_eq(sb_cpu_step_run(s, NULL), SHR_EINVAL);
    shr_batch b = t.b;
    b.n = 0;
    ck_assert_int_eq(sb_cpu_step_run(s, &b), SHR_EINVAL);
    b = t.b;
    b.data = NULL;
    ck_assert_int_eq(sb_cpu_step_run(s, &b), SHR_EINVAL);
    b = t.b;
    b.labels = NULL;
    ck_assert_int_eq(sb_cpu_step_run(s, &b), SHR_EINVAL);
    b = t.b;
    b.channels = 4;
    ck_assert_int_eq(sb_cpu_step_run(s, &b), SHR_EINVAL);
    b = t.b;
    b.width = 0;
    ck_assert_int_eq(sb_cpu_step_run(s, &b), SHR_EINVAL);
    t.labels[3] = 3;            /* classes is 3 */
    ck_assert_int_eq(sb_cpu_step_run(s, &t.b), SHR_EINVAL);
    t.labels[3] = -1;
    ck_assert_int_eq(sb_cpu_step_run(s, &t.b), SHR_EINVAL);
    t.labels[3] = 0;
    ck_assert_int_eq(sb_cpu_step_run(s, NULL), SHR_EINVAL);

    sb_step_stats a, r;
    ck_assert_int_eq(sb_cpu_step_sync(s, &a), 0);
    ck_assert_int_eq(sb_cpu_step_sync(ref, &r), 0);
    ck_assert_uint_eq(a.loss_batches, 1);
    ck_assert_uint_eq(a.seen, 4);
    ck_assert(a.loss_sum == r.loss_sum);
    ck_assert_int_eq(sb_cpu_step_run(s, &t.b), 0);
    ck_assert_int_eq(sb_cpu_step_run(ref, &t.b), 0);
    ck_assert_int_eq(sb_cpu_step_sync(s, &a), 0);
    ck_assert_int_eq(sb_cpu_step_sync(ref, &r), 0);
    ck_assert(a.loss_sum == r.loss_sum);
    ck_assert_uint_eq(a.correct, r.correct);
    /* and the stats of a NULL sync argument are just reset */
    ck_assert_int_eq(sb_cpu_step_sync(s, NULL), 0);
    sb_cpu_step_free(s);
    sb_cpu_step_free(ref);
    batch_free(&t);
}
END_TEST

static Suite *step_suite(void)
{
    TCase *tc;
    Suite *s = tu_suite("step", "step", 120, &tc);
    TU_ADD_TESTS(tc, test_emulated_duration, test_emulated_dispatcher);
    tcase_add_loop_test(tc, test_model_exact_first_steps, 0, 2);
    tcase_add_test(tc, test_model_gray_and_upsampled);
    tcase_add_loop_test(tc, test_model_learns, 0, 2);
    TU_ADD_TESTS(tc, test_model_deterministic, test_bad_options, test_bad_batches);
    return s;
}

int main(void)
{
    int rc = build_fixture();
    return tu_run_fixtures(rc, step_suite());
}
