/* test_cuda.c - two libraries: the training step's dispatcher and the GPU step
 * (libshardbench-gpu.so): benchmark code (shardbench's step, programs/shardbench/); and the CUDA feed's
 * normalize kernel (reader/cuda_feed.cu, libshardgpu.so, a library of the project), reached as a
 * run-time caller would, through its table (shr_feed_api_get).
 *
 * Always run: the dispatcher's fall-back (no GPU library: the CPU step under SB_DEVICE_AUTO,
 * ENODEV under SB_DEVICE_GPU), loading errors, and the GPU library's argument checks and
 * no-device answers where it is built. Run where a CUDA device is present, skipped with a
 * message otherwise: the device copy of a batch equals the host batch; no device buffer is
 * overwritten while a step reads it and no host buffer is needed after a run returns (checksums
 * of the device input taken at the start and at the end of every step, against the host's,
 * with slow steps and fast producers and the reverse, with synthetic batches and with a real
 * reader); the model's loss falls and matches the CPU step's; the normalize kernel equals a CPU
 * reference, on one block and on grids of many (batches of 224x224 and odd sizes, and one past
 * the largest grid, where the grid-stride loop wraps).
 *
 * SHARDC_REQUIRE_GPU=1 in the environment (or --require-gpu) turns "no usable device" from a
 * skip into a failure, for machines where a GPU must be found: the reason is printed either way.
 *
 * CUDA state does not survive fork, and check runs each test in a child: the parent never
 * touches CUDA (it probes for a device in a child of its own). */
#include "bench.h"
#include "cuda_feed.h"
#include "gpu_api.h"
#include "mksample.h"
#include "pinned.h"
#include "shardread.h"
#include "step.h"
#include "progs.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <dlfcn.h>
#include <ftw.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int g_gpu;                       /* a device is usable (probed in a child) */
static char g_gpu_why[1024];            /* sb_gpu_status() as the probe saw it */
static char g_exe_dir[1024];

/* ---- helpers ---- */

static void fill_random(uint8_t *p, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(mks_splitmix(&seed) >> 56);
}

/* This build's library called name (<exe dir>/../lib), or NULL when it was not built. */
static const char *built_lib(const char *name)
{
    static char path[1200];
    snprintf(path, sizeof path, "%s/../lib/%s", g_exe_dir, name);
    return file_exists(path) ? path : NULL;
}

/* The CUDA feed's table of this build's libshardgpu.so, opened and checked as a caller that
 * loads it at run time would (never closed); NULL when it was not built. */
static const shr_feed_api *feed_table(void)
{
    const char *path = built_lib("libshardgpu.so");
    if (!path)
        return NULL;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(lib != NULL, "dlopen %s: %s", path, dlerror());
    const shr_feed_api *(*get)(void) =
        (const shr_feed_api *(*)(void))dlsym(lib, SHR_FEED_API_SYMBOL);
    ck_assert_msg(get != NULL, "%s: no %s", path, SHR_FEED_API_SYMBOL);
    const shr_feed_api *t = get();
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(t->abi, SHR_FEED_ABI);
    ck_assert_uint_eq(t->norm_size, sizeof(shr_feed_norm));
    return t;
}

static sb_step_opts emulated_opts(double ms, sb_device dev)
{
    sb_step_opts o = {.kind = SB_STEP_EMULATED, .step_ms = ms, .device = dev};
    return o;
}

/* A batch over caller memory. */
static shr_batch batch_of(uint8_t *data, int64_t *labels, uint32_t n, uint32_t h, uint32_t w,
                          uint32_t c)
{
    return (shr_batch){.data = data, .labels = labels, .n = n, .height = h, .width = w,
                       .channels = c};
}

/* A GPU step with hooks: the table and the implementation handle. */
typedef struct {
    const sb_gpu_api *api;
    void *s;
} gpu_handle;

static gpu_handle gpu_create(const sb_step_opts *o, uint32_t flags, uint32_t slots)
{
    gpu_handle g = {sb_gpu_table(), NULL};
    ck_assert_ptr_nonnull(g.api);
    sb_gpu_config c = {flags, slots};
    int rc = g.api->step_create(&g.s, o, &c);
    ck_assert_msg(rc == 0, "gpu step_create: %s", shr_strerror(rc));
    return g;
}

/* ---- always: the dispatcher and the library's checks ---- */

START_TEST(test_fallback_without_gpu_lib)
{
    /* the library is looked for once per process: this works in check's default fork mode,
     * where each test is a fresh child */
    const char *fork_env = getenv("CK_FORK");
    if (fork_env && strcmp(fork_env, "no") == 0) {
        fprintf(stderr, "test_cuda: CK_FORK=no: fall-back test skipped\n");
        return;
    }
    ck_assert_int_eq(setenv("SHARDBENCH_GPU_LIB", "/nonexistent/libshardbench-gpu.so", 1), 0);
    ck_assert_int_eq(sb_step_gpu_available(), 0);
    ck_assert_ptr_null(sb_gpu_table());
    if (shr_cuda_available()) {
        ck_assert_msg(strstr(sb_gpu_status(), "/nonexistent/libshardbench-gpu.so") != NULL,
                      "status: %s", sb_gpu_status());
    } else {
        /* the reason the runtime gave comes along, not only the verdict */
        char why[512];
        shr_cuda_status(why, sizeof why);
        ck_assert_msg(strncmp(sb_gpu_status(), "no CUDA device: ", 16) == 0, "status: %s",
                      sb_gpu_status());
        ck_assert_str_eq(sb_gpu_status() + 16, why);
        ck_assert_msg(strlen(why) > 10, "no reason: %s", why);
    }

    /* AUTO: the CPU step, which works */
    sb_step_opts o = emulated_opts(0, SB_DEVICE_AUTO);
    sb_step *s = NULL;
    ck_assert_int_eq(sb_step_create(&s, &o), 0);
    ck_assert_ptr_nonnull(s);
    void *impl = (void *)1;
    ck_assert_ptr_null(sb_step_gpu(s, &impl));
    ck_assert_ptr_null(impl);
    uint8_t px[2 * 4 * 4 * 3];
    int64_t lab[2] = {0, 1};
    memset(px, 7, sizeof px);
    shr_batch b = batch_of(px, lab, 2, 4, 4, 3);
    ck_assert_int_eq(sb_step_run(s, &b), 0);
    sb_step_stats st;
    memset(&st, 0xff, sizeof st);
    ck_assert_int_eq(sb_step_sync(s, &st), 0);
    ck_assert_int_eq(st.on_gpu, 0);
    ck_assert_uint_eq(st.h2d_bytes, 0);
    ck_assert_str_eq(sb_step_last_error(s), "");
    sb_step_free(s);

    /* GPU: refused, nothing returned */
    o.device = SB_DEVICE_GPU;
    s = (sb_step *)1;
    ck_assert_int_eq(sb_step_create(&s, &o), ENODEV);
    ck_assert_ptr_null(s);

    /* CPU: as AUTO here */
    o.device = SB_DEVICE_CPU;
    ck_assert_int_eq(sb_step_create(&s, &o), 0);
    ck_assert_ptr_null(sb_step_gpu(s, NULL));
    sb_step_free(s);
}
END_TEST

/* shr_cuda_status: a reason, whatever the machine, copied and truncated as told. */
START_TEST(test_cuda_status)
{
    char why[512], small[8];
    int avail = shr_cuda_available();
    ck_assert_ptr_eq(shr_cuda_status(why, sizeof why), why);
    fprintf(stderr, "test_cuda: shr_cuda_status: %s\n", why);
    if (avail) {
        ck_assert_msg(strstr(why, "CUDA device(s) (libcudart.so") != NULL, "%s", why);
    } else {
        /* what failed: the runtime's loading, or its device count (with the versions) */
        ck_assert_msg(strncmp(why, "cannot load the CUDA runtime: ", 30) == 0 ||
                      strstr(why, "runtime ") != NULL, "%s", why);
        ck_assert_msg(strchr(why, ':') != NULL, "%s", why);
    }
    ck_assert_str_eq(shr_cuda_status(NULL, 10), "");
    ck_assert_str_eq(shr_cuda_status(why, 0), "");
    shr_cuda_status(small, sizeof small);
    ck_assert_uint_eq(strlen(small), sizeof small - 1);
    ck_assert_int_eq(strncmp(small, why, sizeof small - 1), 0);
}
END_TEST

START_TEST(test_dispatcher_errors)
{
    sb_step_opts o = emulated_opts(0, SB_DEVICE_CPU);
    sb_step *s = (sb_step *)1;
    ck_assert_int_eq(sb_step_create(NULL, &o), SHR_EINVAL);
    ck_assert_int_eq(sb_step_create(&s, NULL), SHR_EINVAL);
    ck_assert_ptr_null(s);
    o.device = (sb_device)7;
    s = (sb_step *)1;
    ck_assert_int_eq(sb_step_create(&s, &o), SHR_EINVAL);
    ck_assert_ptr_null(s);
    /* the implementation's own checks come through: a negative step time */
    o = emulated_opts(-1, SB_DEVICE_AUTO);
    ck_assert_int_eq(sb_step_create(&s, &o), SHR_EINVAL);
    ck_assert_ptr_null(s);
    ck_assert_int_eq(sb_step_run(NULL, NULL), SHR_EINVAL);
    ck_assert_int_eq(sb_step_sync(NULL, NULL), SHR_EINVAL);
    sb_step_free(NULL);
    ck_assert_ptr_null(sb_step_gpu(NULL, NULL));
}
END_TEST

START_TEST(test_gpu_open_errors)
{
    const sb_gpu_api *api = (const sb_gpu_api *)1;
    fmt_msg why = {""};
    ck_assert_int_eq(sb_gpu_open("/nonexistent/libshardbench-gpu.so", &api, &why), ENOENT);
    ck_assert_ptr_null(api);
    ck_assert_msg(strstr(why.text, "/nonexistent/libshardbench-gpu.so") != NULL, "why: %s",
                  why.text);
    /* a shared object without the table */
    ck_assert_int_eq(sb_gpu_open("libc.so.6", &api, &why), ENOEXEC);
    ck_assert_ptr_null(api);
    ck_assert_msg(strstr(why.text, SB_GPU_API_SYMBOL) != NULL, "why: %s", why.text);
    ck_assert_int_eq(sb_gpu_open("/nonexistent/x.so", &api, NULL), ENOENT);
}
END_TEST

/* The step library of this build, loaded directly, with or without a device. */
START_TEST(test_gpu_lib_checks)
{
    const char *path = built_lib("libshardbench-gpu.so");
    if (!path) {
        fprintf(stderr, "test_cuda: libshardbench-gpu.so not built (no nvcc): library checks "
                "skipped\n");
        return;
    }
    const sb_gpu_api *api = NULL;
    fmt_msg why = {""};
    ck_assert_msg(sb_gpu_open(path, &api, &why) == 0, "%s", why.text);
    ck_assert_uint_eq(api->abi, SB_GPU_ABI);
    ck_assert_uint_eq(api->opts_size, sizeof(sb_step_opts));
    int avail = api->available();
    if (!shr_cuda_available())
        ck_assert_int_eq(avail, 0);
    ck_assert_ptr_nonnull(api->status());
    ck_assert_msg(strlen(api->status()) > 10, "status: %s", api->status());
    if (!avail)         /* the failing call and the versions */
        ck_assert_msg(strstr(api->status(), "driver ") != NULL, "%s", api->status());
    double gp = -1, gq = -1;
    ck_assert_int_eq(api->h2d_baseline(0, 1, &gp, &gq, NULL), EINVAL);
    ck_assert_int_eq(api->h2d_baseline(16, 0, &gp, &gq, &why), EINVAL);
    ck_assert_str_eq(why.text, "");
    if (!avail) {
        ck_assert_int_eq(api->h2d_baseline(4096, 2, &gp, &gq, &why), ENODEV);
        ck_assert_str_eq(why.text, api->status());
    }

    /* options are checked before the device is looked at */
    sb_step_opts o = emulated_opts(NAN, SB_DEVICE_GPU);
    void *s = (void *)1;
    ck_assert_int_eq(api->step_create(&s, &o, NULL), SHR_EINVAL);
    ck_assert_ptr_null(s);
    o = emulated_opts(1, SB_DEVICE_GPU);
    sb_gpu_config c = {0, 1};      /* one slot cannot double-buffer */
    ck_assert_int_eq(api->step_create(&s, &o, &c), SHR_EINVAL);
    memset(&o, 0, sizeof o);
    o.kind = SB_STEP_MODEL;        /* classes 0 */
    ck_assert_int_eq(api->step_create(&s, &o, NULL), SHR_EINVAL);
    o.classes = 3;
    o.std[1] = -1;
    ck_assert_int_eq(api->step_create(&s, &o, NULL), SHR_EINVAL);
    if (!avail) {
        o = emulated_opts(1, SB_DEVICE_GPU);
        ck_assert_int_eq(api->step_create(&s, &o, NULL), ENODEV);
        ck_assert_ptr_null(s);
    }
}
END_TEST

/* The CUDA feed's library of this build, through its table, with or without a device. */
START_TEST(test_feed_lib_checks)
{
    const shr_feed_api *api = feed_table();
    if (!api) {
        fprintf(stderr, "test_cuda: libshardgpu.so not built (no nvcc): feed checks skipped\n");
        return;
    }
    int avail = api->available();
    if (!shr_cuda_available())
        ck_assert_int_eq(avail, 0);
    ck_assert_msg(strlen(api->status()) > 10, "status: %s", api->status());
    if (!avail)         /* the failing call and the versions */
        ck_assert_msg(strstr(api->status(), "driver ") != NULL, "%s", api->status());

    uint8_t src[2 * 4 * 4 * 3] = {0};
    float dst[2 * 3 * 4 * 4];
    shr_feed_norm p;
    memset(&p, 0, sizeof p);
    p.n = 2;
    p.height = p.width = 4;
    p.channels = 3;
    p.out_width = 3;
    p.crop_x = 2;                   /* 2 + 3 > 4 */
    shr_msg why;
    ck_assert_int_eq(api->normalize_host(&p, src, dst, &why), EINVAL);
    ck_assert_str_eq(why.text, "the crop window leaves the source");
    p.crop_x = 1;
    p.out_height = 5;               /* taller than the source */
    ck_assert_int_eq(api->normalize_host(&p, src, dst, &why), EINVAL);
    ck_assert_str_eq(why.text, "the crop is larger than the source");
    ck_assert_uint_eq(api->out_bytes(&p), 0);
    p.out_height = 0;
    p.channels = 5;
    ck_assert_int_eq(api->normalize_host(&p, src, dst, &why), EINVAL);
    ck_assert_str_eq(why.text, "channels must be 1..4");
    p.channels = 3;
    p.std[2] = INFINITY;
    ck_assert_int_eq(api->normalize_host(&p, src, dst, NULL), EINVAL);
    p.std[2] = 0;
    ck_assert_int_eq(api->normalize_host(&p, NULL, dst, &why), EINVAL);
    ck_assert_str_eq(why.text, "no source or destination");
    ck_assert_uint_eq(api->out_bytes(&p), sizeof dst * 3 / 4);      /* 2 x 3 x 4 x 3 floats */

    snprintf(why.text, sizeof why.text, "untouched");
    if (!avail) {
        ck_assert_int_eq(api->normalize_host(&p, src, dst, &why), ENODEV);
        ck_assert_str_eq(why.text, api->status());
    } else {
        ck_assert_int_eq(api->normalize_host(&p, src, dst, &why), 0);
        ck_assert_str_eq(why.text, "untouched");
    }
}
END_TEST

START_TEST(test_checksum_reference)
{
    /* the value the device recomputes: (byte + 1) * ((i * 2654435761) mod 2^32 | 1), summed */
    const uint8_t a[3] = {0, 1, 255};
    uint64_t w1 = 2654435761u, w2 = (uint32_t)(2u * 2654435761u) | 1u;
    ck_assert_uint_eq(sb_gpu_checksum(a, 3), 1 + 2 * w1 + 256 * w2);
    const uint8_t b[3] = {1, 0, 255};
    ck_assert_uint_ne(sb_gpu_checksum(a, 3), sb_gpu_checksum(b, 3));
    ck_assert_uint_eq(sb_gpu_checksum(a, 0), 0);
}
END_TEST

/* ---- where a device is present ---- */

START_TEST(test_gpu_copy_equals_host)
{
    sb_step_opts o = emulated_opts(0, SB_DEVICE_GPU);
    sb_step *step = NULL;
    ck_assert_int_eq(sb_step_create(&step, &o), 0);
    void *impl = NULL;
    const sb_gpu_api *api = sb_step_gpu(step, &impl);
    ck_assert_ptr_nonnull(api);
    /* shapes that grow the device buffers, pinned and pageable memory */
    const uint32_t shapes[][4] = {{3, 17, 13, 3}, {5, 8, 8, 1}, {64, 64, 48, 3}, {1, 1, 1, 1}};
    uint64_t total = 0;
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        for (int pin = 0; pin < 2; pin++) {
            size_t bytes = (size_t)shapes[t][0] * shapes[t][1] * shapes[t][2] * shapes[t][3];
            void *host = NULL;
            int pinned = 0;
            ck_assert_int_eq(shr_host_alloc(bytes, &host, &pinned,
                                            pin ? SHR_PIN_AUTO : SHR_PIN_OFF, -1, NULL), 0);
            ck_assert_int_eq(pinned, pin);
            fill_random(host, bytes, t * 2 + (uint64_t)pin);
            shr_batch b = batch_of(host, NULL, shapes[t][0], shapes[t][1], shapes[t][2],
                                   shapes[t][3]);
            b.pinned = pinned;
            ck_assert_int_eq(sb_step_run(step, &b), 0);
            total += bytes;
            uint8_t *back = malloc(bytes + 16);
            ck_assert_ptr_nonnull(back);
            memset(back, 0xee, bytes + 16);
            size_t got = 0;
            ck_assert_int_eq(api->step_input(impl, back, bytes + 16, &got), 0);
            ck_assert_uint_eq(got, bytes);
            ck_assert_msg(memcmp(back, host, bytes) == 0, "shape %zu pinned %d: device copy "
                          "differs from the host batch", t, pin);
            ck_assert_uint_eq(back[bytes], 0xee);
            free(back);
            shr_host_free(host, pinned);
        }
    }
    sb_step_stats st;
    ck_assert_int_eq(sb_step_sync(step, &st), 0);
    ck_assert_int_eq(st.on_gpu, 1);
    ck_assert_uint_eq(st.h2d_bytes, total);
    ck_assert(st.h2d_s > 0);
    ck_assert_uint_eq(st.loss_batches, 0);
    ck_assert_int_eq(sb_step_sync(step, &st), 0);
    ck_assert_uint_eq(st.h2d_bytes, 0);         /* reset by the sync before */
    sb_step_free(step);
}
END_TEST

/* Synthetic producers: `hosts` pinned buffers used in turn; each is scribbled over as soon as the
 * run that read it returns (what the reader does once a batch is released). Variant bit 0: slow
 * steps (5 ms) and a producer without pause, else instant steps and a producer pausing 3 ms;
 * bit 1: 3 device slots instead of 2. */
START_TEST(test_gpu_no_early_reuse)
{
    int slow_steps = _i & 1;
    uint32_t slots = _i & 2 ? 3 : 2;
    enum { RUNS = 24, HOSTS = 3, N = 32, H = 128, W = 128, C = 3 };
    const size_t bytes = (size_t)N * H * W * C;
    sb_step_opts o = emulated_opts(slow_steps ? 5.0 : 0.0, SB_DEVICE_GPU);
    gpu_handle g = gpu_create(&o, SB_GPU_CHECKSUMS, slots);
    uint8_t *host[HOSTS];
    int pinned[HOSTS];
    for (int i = 0; i < HOSTS; i++) {
        ck_assert_int_eq(shr_host_alloc(bytes, (void **)&host[i], &pinned[i], SHR_PIN_AUTO, -1,
                                        NULL), 0);
        ck_assert_int_eq(pinned[i], 1);
    }
    uint64_t want[RUNS];
    for (int r = 0; r < RUNS; r++) {
        uint8_t *p = host[r % HOSTS];
        fill_random(p, bytes, 1000 + (uint64_t)r);
        want[r] = sb_gpu_checksum(p, bytes);
        shr_batch b = batch_of(p, NULL, N, H, W, C);
        b.pinned = 1;
        ck_assert_int_eq(g.api->step_run(g.s, &b), 0);
        memset(p, r & 0xff, bytes);             /* released and refilled at once */
        if (!slow_steps)
            usleep(3000);
    }
    sb_step_stats st;
    ck_assert_int_eq(g.api->step_sync(g.s, &st), 0);
    uint64_t start[RUNS], end[RUNS];
    size_t count = 0;
    ck_assert_int_eq(g.api->step_checksums(g.s, start, end, RUNS, &count), 0);
    ck_assert_uint_eq(count, RUNS);
    for (int r = 0; r < RUNS; r++) {
        ck_assert_msg(start[r] == want[r], "run %d: the step started before its copy landed "
                      "or the host buffer was reused too early", r);
        ck_assert_msg(end[r] == want[r], "run %d: the device buffer was overwritten during "
                      "the step", r);
    }
    ck_assert_uint_eq(st.h2d_bytes, (uint64_t)RUNS * bytes);
    if (slow_steps)     /* every step spins at least its 5 ms of device time */
        ck_assert_msg(st.busy_s >= RUNS * 0.005 * 0.99, "busy %.4f s", st.busy_s);
    g.api->step_free(g.s);
    for (int i = 0; i < HOSTS; i++)
        shr_host_free(host[i], pinned[i]);
}
END_TEST

/* ---- the same through a real reader: batches released as soon as the step returns ---- */

/* 3 classes x 12 images of 40x32 built by this build's shardc in the test's g_dir (root). */
static void make_dataset(char *root, size_t root_len, char *ds, size_t ds_len)
{
    char bin[1200];
    snprintf(bin, sizeof bin, "%s/../bin", g_exe_dir);
    char probe[1300];
    snprintf(probe, sizeof probe, "%s/shardc", bin);
    ck_assert_msg(file_exists(probe), "%s not found", probe);
    snprintf(root, root_len, "%s", g_dir);
    snprintf(ds, ds_len, "%s/ds", root);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s/shardc-mksample' '%s/src' --classes 3 --per-class 12 "
             "--no-broken --quiet && '%s/shardc' build '%s/src' -o '%s' --size 40x32 "
             "--shard-samples 10 -j 2 --no-progress", bin, root, bin, root, ds);
    ck_assert_msg(run_quiet(cmd) == 0, "failed: %s", cmd);
}

/* The reader options both ring tests open with: batches of 8, three prefetched. */
static void ring_options(shr_options *ro, uint32_t threads)
{
    shr_options_init(ro);
    ro->batch_size = 8;
    ro->threads = threads;
    ro->prefetch = 3;
}

/* The reader's ring and shardbench's folder feed say whether their buffers are pinned: pinned
 * where a device is and pinning was asked for, never under SHR_PIN_OFF. */
START_TEST(test_ring_memory)
{
    char root[1100], ds[1200], src[1200];
    make_dataset(root, sizeof root, ds, sizeof ds);
    snprintf(src, sizeof src, "%s/src", root);
    for (int pin = 0; pin < 2; pin++) {
        shr_options ro;
        ring_options(&ro, 1);
        ro.pin = pin ? SHR_PIN_AUTO : SHR_PIN_OFF;
        shr_reader *r = NULL;
        ck_assert_int_eq(shr_open(&r, ds, &ro, tu_fresh()), 0);
        shr_info info;
        shr_get_info(r, &info);
        ck_assert_int_eq(info.pinned, pin && shr_cuda_available());
        ck_assert_uint_ge(info.ring_bytes, 3 * info.batch_bytes);
        const shr_batch *b;
        ck_assert_int_eq(shr_next(r, &b), 0);
        ck_assert_int_eq(b->pinned, info.pinned);
        shr_release(r, b);
        shr_close(r);

        sb_feed f;
        ck_assert_int_eq(sb_feed_open(&f, src, 4, 1, 2, SHR_ORDER_SEQUENTIAL, 0, 16, 16, 3,
                                   pin ? SHR_PIN_AUTO : SHR_PIN_OFF), 0);
        ck_assert_int_eq(f.pinned, pin && shr_cuda_available());
        ck_assert_int_eq(f.slots[0].b.pinned, f.pinned);
        ck_assert_uint_ge(f.ring_bytes, 2 * 4 * 16 * 16 * 3);
        sb_feed_close(&f);
    }
}
END_TEST

START_TEST(test_gpu_reader_feed)
{
    char root[1100], ds[1200];
    make_dataset(root, sizeof root, ds, sizeof ds);
    for (int slow = 0; slow < 2; slow++) {
        shr_options ro;
        ring_options(&ro, 2);
        ro.order = SHR_ORDER_RANDOM;
        shr_reader *r = NULL;
        ck_assert_int_eq(shr_open(&r, ds, &ro, tu_fresh()), 0);
        shr_info info;
        shr_get_info(r, &info);
        ck_assert_int_eq(info.pinned, 1);
        sb_step_opts o = emulated_opts(slow ? 5.0 : 0.0, SB_DEVICE_GPU);
        gpu_handle g = gpu_create(&o, SB_GPU_CHECKSUMS, 2);
        enum { MAXRUNS = 64 };
        uint64_t want[MAXRUNS];
        size_t runs = 0;
        for (int epoch = 0; epoch < 2; epoch++) {
            const shr_batch *b;
            int rc;
            while ((rc = shr_next(r, &b)) == 0) {
                ck_assert_int_eq(b->pinned, 1);
                ck_assert_uint_lt(runs, MAXRUNS);
                want[runs++] = sb_gpu_checksum(b->data, (size_t)b->n * b->height * b->width *
                                                b->channels);
                ck_assert_int_eq(g.api->step_run(g.s, b), 0);
                shr_release(r, b);
                if (!slow)
                    usleep(2000);
            }
            ck_assert_int_eq(rc, SHR_EEND);
        }
        ck_assert_int_eq(g.api->step_sync(g.s, NULL), 0);
        uint64_t start[MAXRUNS], end[MAXRUNS];
        size_t count = 0;
        ck_assert_int_eq(g.api->step_checksums(g.s, start, end, MAXRUNS, &count), 0);
        ck_assert_uint_eq(count, runs);
        for (size_t i = 0; i < runs; i++) {
            ck_assert_msg(start[i] == want[i], "slow %d run %zu: start checksum differs", slow,
                          i);
            ck_assert_msg(end[i] == want[i], "slow %d run %zu: end checksum differs", slow, i);
        }
        g.api->step_free(g.s);
        shr_close(r);
    }
}
END_TEST

/* ---- the model ---- */

enum { MC = 4, MH = 12, MW = 12, MN = 48, MBATCHES = 6, MEPOCHS = 6 };

/* A generated dataset: class c is a bright blob in quadrant c on noise, plus a tint. */
static void make_images(uint8_t *px, int64_t *lab, size_t count, uint64_t seed)
{
    for (size_t i = 0; i < count; i++) {
        int c = (int)(mks_splitmix(&seed) % MC);
        lab[i] = c;
        uint8_t *img = px + i * MH * MW * 3;
        for (int y = 0; y < MH; y++)
            for (int x = 0; x < MW; x++) {
                int in = (y < MH / 2) == (c < 2) && (x < MW / 2) == (c % 2 == 0);
                for (int ch = 0; ch < 3; ch++) {
                    int v = (int)(mks_splitmix(&seed) % 96) + (in ? 120 : 20) +
                            (ch == c % 3 ? 20 : 0);
                    img[(y * MW + x) * 3 + ch] = (uint8_t)(v > 255 ? 255 : v);
                }
            }
    }
}

/* Mean loss and accuracy per epoch of a step over the generated batches. */
static void train(sb_device dev, sb_model model, const uint8_t *px, const int64_t *lab,
                  double *loss, double *acc)
{
    sb_step_opts o = {.kind = SB_STEP_MODEL, .model = model, .model_side = 6, .hidden = 32,
                      .classes = MC, .lr = 0.1f, .seed = 7};
    for (int c = 0; c < 3; c++) {
        o.mean[c] = 110;
        o.std[c] = 60;
    }
    o.device = dev;
    sb_step *s = NULL;
    ck_assert_int_eq(sb_step_create(&s, &o), 0);
    ck_assert_int_eq(sb_step_gpu(s, NULL) != NULL, dev == SB_DEVICE_GPU);
    for (int e = 0; e < MEPOCHS; e++) {
        for (int b = 0; b < MBATCHES; b++) {
            size_t first = (size_t)b * MN;
            shr_batch bt = batch_of((uint8_t *)px + first * MH * MW * 3, (int64_t *)lab + first,
                                    MN, MH, MW, 3);
            ck_assert_int_eq(sb_step_run(s, &bt), 0);
        }
        sb_step_stats st;
        ck_assert_int_eq(sb_step_sync(s, &st), 0);
        ck_assert_int_eq(st.on_gpu, dev == SB_DEVICE_GPU);
        ck_assert_uint_eq(st.loss_batches, MBATCHES);
        ck_assert_uint_eq(st.seen, MBATCHES * MN);
        loss[e] = st.loss_sum / (double)st.loss_batches;
        acc[e] = (double)st.correct / (double)st.seen;
    }
    sb_step_free(s);
}

START_TEST(test_gpu_model_learns)
{
    sb_model model = _i ? SB_MODEL_MLP : SB_MODEL_SOFTMAX;
    size_t count = (size_t)MBATCHES * MN;
    uint8_t *px = malloc(count * MH * MW * 3);
    int64_t *lab = malloc(count * sizeof *lab);
    ck_assert(px && lab);
    make_images(px, lab, count, 99);
    double gl[MEPOCHS], ga[MEPOCHS], cl[MEPOCHS], ca[MEPOCHS];
    train(SB_DEVICE_GPU, model, px, lab, gl, ga);
    train(SB_DEVICE_CPU, model, px, lab, cl, ca);
    for (int e = 0; e < MEPOCHS; e++)
        fprintf(stderr, "test_cuda: %s epoch %d: gpu loss %.5f acc %.3f, cpu loss %.5f acc %.3f\n",
                _i ? "mlp" : "softmax", e, gl[e], ga[e], cl[e], ca[e]);
    ck_assert_msg(gl[MEPOCHS - 1] < 0.5 * gl[0], "loss did not fall: %.4f -> %.4f", gl[0],
                  gl[MEPOCHS - 1]);
    ck_assert_msg(ga[MEPOCHS - 1] > 0.9, "accuracy %.3f", ga[MEPOCHS - 1]);
    /* the same weights, batches and algorithm as the CPU step: only rounding differs */
    for (int e = 0; e < MEPOCHS; e++)
        ck_assert_msg(fabs(gl[e] - cl[e]) <= 5e-3 * fmax(1.0, cl[e]),
                      "epoch %d: gpu loss %.6f, cpu %.6f", e, gl[e], cl[e]);
    free(px);
    free(lab);
}
END_TEST

START_TEST(test_gpu_model_bad_batches)
{
    sb_step_opts o = {.kind = SB_STEP_MODEL, .classes = 3, .device = SB_DEVICE_GPU};
    sb_step *s = NULL;
    ck_assert_int_eq(sb_step_create(&s, &o), 0);
    uint8_t px[4 * 8 * 8 * 3];
    fill_random(px, sizeof px, 5);
    int64_t lab[4] = {0, 1, 2, 1};
    shr_batch b = batch_of(px, lab, 4, 8, 8, 3);
    ck_assert_int_eq(sb_step_run(s, &b), 0);
    lab[2] = 3;                                 /* outside [0, classes) */
    ck_assert_int_eq(sb_step_run(s, &b), SHR_EINVAL);
    lab[2] = -1;
    ck_assert_int_eq(sb_step_run(s, &b), SHR_EINVAL);
    lab[2] = 2;
    shr_batch g = batch_of(px, lab, 4, 8, 8, 1);  /* the channel count changed */
    ck_assert_int_eq(sb_step_run(s, &g), SHR_EINVAL);
    b.labels = NULL;
    ck_assert_int_eq(sb_step_run(s, &b), SHR_EINVAL);
    b.labels = lab;
    b.n = 0;
    ck_assert_int_eq(sb_step_run(s, &b), SHR_EINVAL);
    ck_assert_int_eq(sb_step_run(s, NULL), SHR_EINVAL);
    /* refused batches change nothing: the step goes on */
    b.n = 4;
    b.height = 4;                               /* other sizes are fine */
    ck_assert_int_eq(sb_step_run(s, &b), 0);
    sb_step_stats st;
    ck_assert_int_eq(sb_step_sync(s, &st), 0);
    ck_assert_uint_eq(st.loss_batches, 2);
    ck_assert_uint_eq(st.seen, 8);
    ck_assert(isfinite(st.loss_sum) && st.loss_sum > 0);
    ck_assert_str_eq(sb_step_last_error(s), "");
    sb_step_free(s);
}
END_TEST

/* ---- the normalize kernel ---- */

static float half_to_float(uint16_t h)
{
    uint32_t sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    float v;
    if (e == 0)
        v = ldexpf((float)m, -24);
    else if (e == 31)
        v = m ? NAN : INFINITY;
    else
        v = ldexpf((float)(m | 1024), (int)e - 25);
    return sign ? -v : v;
}

/* Loop: bit 0 float16, bit 1 per-sample crops and flips (else one crop for all, gray, std 0). */
START_TEST(test_gpu_normalize)
{
    int half = _i & 1, per_sample = _i & 2;
    enum { N = 5, H = 10, W = 9 };
    uint32_t c = per_sample ? 3 : 1;
    uint8_t src[N * H * W * 3];
    fill_random(src, sizeof src, 77 + (uint64_t)_i);
    shr_feed_norm p;
    memset(&p, 0, sizeof p);
    p.n = N;
    p.height = H;
    p.width = W;
    p.channels = c;
    p.out_height = 7;
    p.out_width = 5;
    p.crop_x = 3;
    p.crop_y = 2;
    p.dtype = half ? SHR_FEED_F16 : SHR_FEED_F32;
    const float mean[3] = {120.5f, 99.0f, 130.25f}, sd[3] = {57.0f, 0.0f, 3.5f};
    memcpy(p.mean, mean, sizeof mean);
    memcpy(p.std, sd, sizeof sd);
    uint32_t xy[N * 2] = {0, 0, 4, 3, 2, 1, 9, 9, 1, 2};   /* (9, 9) is clamped to (4, 3) */
    uint8_t flip[N] = {1, 0, 1, 1, 0};
    if (per_sample) {
        p.crop_xy = xy;
        p.flip = flip;
    } else {
        p.std[0] = 0;                                       /* divides by 1 */
    }
    size_t outn = (size_t)N * c * 7 * 5;
    const shr_feed_api *api = feed_table();
    ck_assert_ptr_nonnull(api);
    void *out = malloc(outn * 4);
    ck_assert_ptr_nonnull(out);
    shr_msg why = {{0}};
    int rc = api->normalize_host(&p, src, out, &why);
    ck_assert_msg(rc == 0, "normalize: %s (%s)", shr_strerror(rc), why.text);
    for (uint32_t i = 0; i < N; i++) {
        uint32_t cx = p.crop_x, cy = p.crop_y;
        if (per_sample) {
            cx = xy[2 * i] > W - 5 ? W - 5 : xy[2 * i];
            cy = xy[2 * i + 1] > H - 7 ? H - 7 : xy[2 * i + 1];
        }
        for (uint32_t ch = 0; ch < c; ch++)
            for (uint32_t y = 0; y < 7; y++)
                for (uint32_t x = 0; x < 5; x++) {
                    uint32_t sx = per_sample && flip[i] ? cx + 4 - x : cx + x;
                    float inv = p.std[ch] > 0 ? 1.0f / p.std[ch] : 1.0f;
                    float want = ((float)src[((i * H + cy + y) * W + sx) * c + ch] - p.mean[ch]) *
                                 inv;
                    size_t k = (((size_t)i * c + ch) * 7 + y) * 5 + x;
                    if (half) {
                        float got = half_to_float(((uint16_t *)out)[k]);
                        ck_assert_msg(fabsf(got - want) <= fabsf(want) * 0x1p-11f + 0x1p-24f,
                                      "sample %u c %u (%u,%u): %g vs %g", i, ch, x, y, got, want);
                    } else {
                        float got = ((float *)out)[k];
                        ck_assert_msg(got == want, "sample %u c %u (%u,%u): %g vs %g", i, ch, x,
                                      y, got, want);
                    }
                }
    }
    free(out);
}
END_TEST

/* The kernel's definition (cuda_feed.h) on the CPU, against out: float32 bit for bit, float16
 * within half a unit in the last place. Returns the number of elements compared. */
static size_t check_normalized(const shr_feed_norm *p, const uint8_t *src, const void *out)
{
    uint32_t oh = p->out_height ? p->out_height : p->height;
    uint32_t ow = p->out_width ? p->out_width : p->width, c = p->channels;
    size_t k = 0;
    for (uint32_t i = 0; i < p->n; i++) {
        uint32_t cx = p->crop_x, cy = p->crop_y;
        if (p->crop_xy) {
            cx = p->crop_xy[2 * i] > p->width - ow ? p->width - ow : p->crop_xy[2 * i];
            cy = p->crop_xy[2 * i + 1] > p->height - oh ? p->height - oh : p->crop_xy[2 * i + 1];
        }
        int flip = p->flip && p->flip[i];
        for (uint32_t ch = 0; ch < c; ch++) {
            float inv = p->std[ch] > 0 ? 1.0f / p->std[ch] : 1.0f;
            for (uint32_t y = 0; y < oh; y++)
                for (uint32_t x = 0; x < ow; x++, k++) {
                    uint32_t sx = flip ? cx + ow - 1 - x : cx + x;
                    size_t at = (((size_t)i * p->height + cy + y) * p->width + sx) * c + ch;
                    float want = ((float)src[at] - p->mean[ch]) * inv;
                    if (p->dtype == SHR_FEED_F16) {
                        float got = half_to_float(((const uint16_t *)out)[k]);
                        if (!(fabsf(got - want) <= fabsf(want) * 0x1p-11f + 0x1p-24f))
                            ck_abort_msg("element %zu (sample %u c %u x %u y %u): %g vs %g", k,
                                         i, ch, x, y, got, want);
                    } else {
                        float got = ((const float *)out)[k];
                        if (got != want)
                            ck_abort_msg("element %zu (sample %u c %u x %u y %u): %g vs %g", k,
                                         i, ch, x, y, got, want);
                    }
                }
        }
    }
    return k;
}

/* Many blocks: 256 threads a block, so every case has hundreds at least; the last has more
 * elements than the largest grid (65535 x 8 blocks of 256) has threads, so threads wrap round
 * the grid-stride loop, and its indices pass 2^27. */
static const struct {
    uint32_t n, h, w, c, oh, ow;
    int per_sample, half;
} g_grids[] = {
    {64, 224, 224, 3, 0, 0, 0, 0},          /* a ResNet batch, no crop */
    {64, 227, 225, 3, 224, 224, 1, 1},      /* odd sources, random crops and flips, half */
    {64, 227, 225, 3, 224, 224, 1, 0},
    {7, 513, 1001, 1, 511, 997, 0, 0},      /* gray, odd, one crop for all */
    {9, 31, 17, 4, 29, 13, 1, 1},           /* 4 channels, a partial last block */
    {48, 1024, 1000, 3, 0, 0, 1, 1},        /* 147 M elements: past the largest grid */
};

START_TEST(test_gpu_normalize_grids)
{
    const shr_feed_api *api = feed_table();
    ck_assert_ptr_nonnull(api);
    shr_feed_norm p;
    memset(&p, 0, sizeof p);
    p.n = g_grids[_i].n;
    p.height = g_grids[_i].h;
    p.width = g_grids[_i].w;
    p.channels = g_grids[_i].c;
    p.out_height = g_grids[_i].oh;
    p.out_width = g_grids[_i].ow;
    p.dtype = g_grids[_i].half ? SHR_FEED_F16 : SHR_FEED_F32;
    const float mean[4] = {123.675f, 116.28f, 103.53f, 50.0f};
    const float sd[4] = {58.395f, 57.12f, 57.375f, 0.0f};
    memcpy(p.mean, mean, sizeof mean);
    memcpy(p.std, sd, sizeof sd);
    size_t in = (size_t)p.n * p.height * p.width * p.channels;
    uint8_t *src = malloc(in);
    uint32_t *xy = malloc((size_t)p.n * 2 * sizeof *xy);
    uint8_t *flip = malloc(p.n);
    ck_assert(src && xy && flip);
    fill_random(src, in, 500 + (uint64_t)_i);
    uint64_t seed = 900 + (uint64_t)_i;
    for (uint32_t i = 0; i < p.n; i++) {
        /* origins up to 8 past the last valid one: those are clamped */
        uint32_t ow = p.out_width ? p.out_width : p.width;
        uint32_t oh = p.out_height ? p.out_height : p.height;
        xy[2 * i] = (uint32_t)(mks_splitmix(&seed) % (p.width - ow + 9));
        xy[2 * i + 1] = (uint32_t)(mks_splitmix(&seed) % (p.height - oh + 9));
        flip[i] = (uint8_t)(mks_splitmix(&seed) & 1);
    }
    if (g_grids[_i].per_sample) {
        p.crop_xy = xy;
        p.flip = flip;
    } else if (p.out_width) {
        p.crop_x = (p.width - p.out_width) / 2 + 1;
        p.crop_y = (p.height - p.out_height) / 2;
    }
    uint64_t bytes = (uint64_t)p.n * p.channels * (p.out_height ? p.out_height : p.height) *
                     (p.out_width ? p.out_width : p.width) * (p.dtype == SHR_FEED_F16 ? 2 : 4);
    void *out = malloc(bytes);
    ck_assert_ptr_nonnull(out);
    shr_msg why = {{0}};
    int rc = api->normalize_host(&p, src, out, &why);
    ck_assert_msg(rc == 0, "normalize: %s (%s)", shr_strerror(rc), why.text);
    size_t k = check_normalized(&p, src, out);
    ck_assert_uint_eq(k * (p.dtype == SHR_FEED_F16 ? 2 : 4), bytes);
    fprintf(stderr, "test_cuda: normalize %ux%ux%ux%u -> %ux%u %s: %zu elements, %zu blocks of "
            "256, equal\n", p.n, p.height, p.width, p.channels, p.out_height ? p.out_height
            : p.height, p.out_width ? p.out_width : p.width, p.dtype == SHR_FEED_F16 ? "f16"
            : "f32", k, (k + 255) / 256);
    free(out);
    free(src);
    free(xy);
    free(flip);
}
END_TEST

/* The copy baseline of shardbench train: both kinds of memory are timed, on the device. */
START_TEST(test_gpu_h2d_baseline)
{
    const sb_gpu_api *api = sb_gpu_table();
    ck_assert_ptr_nonnull(api);
    double gp = 0, gq = 0;
    fmt_msg why = {""};
    int rc = api->h2d_baseline((size_t)32 << 20, 8, &gp, &gq, &why);
    ck_assert_msg(rc == 0, "h2d_baseline: %s (%s)", shr_strerror(rc), why.text);
    fprintf(stderr, "test_cuda: cudaMemcpyAsync of 32 MiB: %.2f GB/s pinned, %.2f GB/s pageable\n",
            gp, gq);
    ck_assert(gp > 0 && gq > 0 && isfinite(gp) && isfinite(gq));
}
END_TEST

/* Where no device is usable and one is required: fails, with the reason. */
START_TEST(test_gpu_required)
{
    ck_abort_msg("SHARDC_REQUIRE_GPU is set and no GPU test could run: %s", g_gpu_why);
}
END_TEST

/* ---- running ---- */

/* Whether a device is usable, asked in a child so that this process never initialises CUDA
 * (the tests' children could not use it after fork). */
static void probe_gpu(void)
{
    int fd[2];
    if (pipe(fd) != 0)
        return;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        int avail = sb_step_gpu_available();
        const char *why = sb_gpu_status();
        ssize_t w = write(fd[1], why, strlen(why));
        (void)w;
        _exit(avail ? 0 : 1);
    }
    close(fd[1]);
    ssize_t n = pid > 0 ? read(fd[0], g_gpu_why, sizeof g_gpu_why - 1) : -1;
    g_gpu_why[n > 0 ? n : 0] = '\0';
    close(fd[0]);
    int st = 0;
    if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0)
        g_gpu = 1;
}

static int g_require_gpu;               /* SHARDC_REQUIRE_GPU=1 or --require-gpu */

static Suite *cuda_suite(void)
{
    Suite *s = TU_TEMP_SUITE("cuda", "dispatch", 60, test_fallback_without_gpu_lib,
                             test_cuda_status, test_ring_memory, test_dispatcher_errors,
                             test_gpu_open_errors, test_gpu_lib_checks, test_feed_lib_checks,
                             test_checksum_reference);
    if (g_gpu) {
        TCase *gc = tcase_create("gpu");
        tu_temp_fixtures(gc);
        tcase_set_timeout(gc, 120);
        tcase_add_test(gc, test_gpu_copy_equals_host);
        tcase_add_loop_test(gc, test_gpu_no_early_reuse, 0, 4);
        tcase_add_test(gc, test_gpu_reader_feed);
        tcase_add_loop_test(gc, test_gpu_model_learns, 0, 2);
        tcase_add_test(gc, test_gpu_model_bad_batches);
        tcase_add_loop_test(gc, test_gpu_normalize, 0, 4);
        tcase_add_loop_test(gc, test_gpu_normalize_grids, 0,
                            (int)(sizeof g_grids / sizeof g_grids[0]));
        tcase_add_test(gc, test_gpu_h2d_baseline);
        suite_add_tcase(s, gc);
    } else if (g_require_gpu) {
        TCase *rc = tcase_create("gpu-required");
        tcase_add_test(rc, test_gpu_required);
        suite_add_tcase(s, rc);
    }
    return s;
}

/* GPU tests registered where a device is usable: keep in step with cuda_suite. */
#define GPU_TESTS (1 + 4 + 1 + 2 + 1 + 4 + (int)(sizeof g_grids / sizeof g_grids[0]) + 1)

int main(int argc, char **argv)
{
    char exe[1024];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    snprintf(g_exe_dir, sizeof g_exe_dir, "%s", n > 0 ? dirname(exe) : ".");
    const char *req = getenv("SHARDC_REQUIRE_GPU");
    g_require_gpu = req && *req && strcmp(req, "0") != 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--require-gpu") == 0) {
            g_require_gpu = 1;
        } else {
            fprintf(stderr, "usage: test_cuda [--require-gpu]\n");
            return 2;
        }
    }
    probe_gpu();
    if (g_gpu)
        fprintf(stderr, "test_cuda: %d GPU tests run with %s\n", GPU_TESTS, g_gpu_why);
    else if (g_require_gpu)
        fprintf(stderr, "test_cuda: FAIL: a GPU is required and none is usable: %s\n",
                g_gpu_why);
    else
        fprintf(stderr, "test_cuda: SKIPPED %d GPU tests: %s (SHARDC_REQUIRE_GPU=1 makes this "
                "a failure)\n", GPU_TESTS, g_gpu_why);
    return tu_run(cuda_suite());
}
