/* test_transform.c - the reader's read-time transforms: RandomResizedCrop draws (torchvision's
 * ranges and arithmetic), the output kernels (dtype, layout, normalisation, mirror; every code
 * path the same bytes), and through libshardread: float outputs equal the normalised uint8
 * output, parameters reported per sample, RandomResizedCrop pixels equal torchvision's
 * resized_crop of the reported box (checked by tests/ref/rrc_check.py with python3-torchvision),
 * determinism across threads and resumption, flat memory, and bad option combinations.
 *
 * Fixtures are datasets built at run time by the shardc binaries of the same build directory. */
#include "dataset.h"
#include "sampler.h"
#include "shardread.h"
#include "simd.h"
#include "transform.h"
#include "progs.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <libgen.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_rgb[1100];                /* RGB samples of many sizes (short side 40, max 64) */
static char g_gray[1100];               /* the same, one channel */
static char g_fixed[1100];              /* RGB samples all 24x20 */
#define N_SAMPLES 24

/* ---- fixtures ---- */

static int build_fixtures(void)
{
    const tu_set fixed = {g_fixed, sizeof g_fixed, "fixed", "--size 24x20 --shard-samples 7 -j 2"};
    return tu_progs_root() != 0 ? -1 : tu_build_read_sets(g_rgb, g_gray, &fixed, 1);
}

/* ---- a reference for the output kernels, written independently of them ---- */

static uint64_t g_rng = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static float ref_value(uint8_t v, float mean, float std)
{
    return ((float)v - mean) / std;
}

static uint16_t ref_half(float f)
{
    _Float16 h = (_Float16)f;
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}

/* Element (c, y, x) of a sample of o's geometry, dtype and layout, read back as float bits. */
static uint32_t elem_bits(const shr_tf_out *o, const void *p, uint32_t c, uint32_t y, uint32_t x)
{
    size_t e = o->layout == SHR_LAYOUT_NHWC
                   ? ((size_t)y * o->width + x) * o->channels + c
                   : ((size_t)c * o->height + y) * o->width + x;
    uint32_t u = 0;
    if (o->dtype == SHR_DTYPE_U8)
        u = ((const uint8_t *)p)[e];
    else if (o->dtype == SHR_DTYPE_F16)
        u = ((const uint16_t *)p)[e];
    else
        memcpy(&u, (const float *)p + e, 4);
    return u;
}

static uint32_t want_bits(const shr_tf_out *o, uint8_t v, uint32_t c)
{
    if (o->dtype == SHR_DTYPE_U8)
        return v;
    float f = ref_value(v, o->mean[c], o->std[c]);
    if (o->dtype == SHR_DTYPE_F16)
        return ref_half(f);
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* ---- unit tests ---- */

START_TEST(test_half)
{
    /* every 4099th float bit pattern (both signs), and the edges */
    for (uint64_t b = 0; b <= 0xffffffffu; b += 4099) {
        uint32_t u = (uint32_t)b;
        float f;
        memcpy(&f, &u, 4);
        if (isnan(f))
            continue;
        tu_check(shr_tf_half(f) == ref_half(f), "%a: %04x, want %04x", (double)f, shr_tf_half(f),
                 ref_half(f));
    }
    const float edge[] = {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 1e9f, -1e9f, INFINITY,
                          0x1p-24f, 0x1p-25f, 0x1.000002p-25f, 0x1.8p-24f, 0x1p-14f, 0x1.ffcp-15f,
                          0x1.ffep-15f, 2.5f / 255, -1.0f / 3};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++)
        ck_assert_msg(shr_tf_half(edge[i]) == ref_half(edge[i]), "%a", (double)edge[i]);
}
END_TEST

/* Every dtype, layout, mirror and normalisation, on widths around the vector sizes, against the
 * reference; for each path the CPU has. */
START_TEST(test_kernels)
{
    const uint32_t widths[] = {1, 5, 15, 16, 17, 31, 32, 33, 47, 48, 50, 65, 224};
    const uint32_t heights[] = {1, 3, 7};
    int paths = 0;
    for (shr_tf_path path = SHR_TF_PLAIN; path <= SHR_TF_AVX512; path++) {
        for (uint32_t ch = 1; ch <= 4; ch++)
            for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++)
                for (size_t hi = 0; hi < sizeof heights / sizeof heights[0]; hi++)
                    for (int combo = 0; combo < 3 * 2 * 2 * 2; combo++) {
                        uint32_t W = widths[wi], H = heights[hi];
                        shr_dtype dt = (shr_dtype)(combo % 3);
                        shr_layout lay = (shr_layout)(combo / 3 % 2);
                        int mirror = combo / 6 % 2, norm = combo / 12 % 2;
                        shr_tf_out o;
                        shr_tf_out_init(&o, dt, lay, W, H, ch);
                        if (shr_tf_out_set_path(&o, path) != 0)
                            continue;
                        paths |= 1 << path;
                        if (norm && dt != SHR_DTYPE_U8) {
                            const float m[4] = {123.675f, 116.28f, 103.53f, 7.25f};
                            const float s[4] = {58.395f, 57.12f, 57.375f, 0.3f};
                            memcpy(o.mean, m, sizeof m);
                            memcpy(o.std, s, sizeof s);
                        }
                        size_t stride = (size_t)W * ch + 13;    /* rows not packed */
                        uint8_t *src = malloc(stride * H);
                        size_t out = (size_t)W * H * ch * shr_tf_elem_size(dt);
                        uint8_t *dst = malloc(out + 64);
                        ck_assert(src && dst);
                        for (size_t i = 0; i < stride * H; i++)
                            src[i] = (uint8_t)rnd();
                        memset(dst, 0xa5, out + 64);
                        shr_tf_store(&o, src, stride, mirror, dst);
                        for (uint32_t y = 0; y < H; y++)
                            for (uint32_t x = 0; x < W; x++)
                                for (uint32_t c = 0; c < ch; c++) {
                                    uint32_t sx = mirror ? W - 1 - x : x;
                                    uint8_t v = src[y * stride + (size_t)sx * ch + c];
                                    tu_check(elem_bits(&o, dst, c, y, x) == want_bits(&o, v, c),
                                             "path %d %ux%ux%u dtype %d layout %d mirror %d norm "
                                             "%d: (%u, %u, %u) differs", path, W, H, ch, dt, lay,
                                             mirror, norm, c, y, x);
                                }
                        for (size_t i = out; i < out + 64; i++)
                            tu_check(dst[i] == 0xa5, "wrote past the sample");
                        free(src);
                        free(dst);
                    }
    }
    ck_assert(paths & 1);
    if (!(paths & 2))
        fprintf(stderr, "test_kernels: no AVX2 here: only the plain path was checked\n");
}
END_TEST

/* The CHW RGB kernel checks below share their sweep: every path, widths around the AVX-512
 * kernel's blocks of 64 and the 16 of its stores, each combo (combo % 2 mirrors; off = combo /
 * off_div elements from a 64-byte line), 64 elements of guard before the sample and the rest of
 * `guard` after it, none of them written. set() gives o the combo's settings, check() compares
 * the sample. */
typedef struct {
    shr_dtype dt;
    int combos, off_div;
    size_t guard;
    void (*set)(shr_tf_out *o, int combo);
    void (*check)(const shr_tf_out *o, int path, int combo, int off, const uint8_t *src,
                  size_t stride, const void *dst);
} chw_sweep;

static void check_chw_sweep(const chw_sweep *k)
{
    const uint32_t widths[] = {1, 2, 15, 16, 17, 63, 64, 65, 79, 127, 128, 129, 191, 257, 601};
    const uint32_t H = 3;
    const size_t es = shr_tf_elem_size(k->dt);
    int paths = 0;
    for (shr_tf_path path = SHR_TF_PLAIN; path <= SHR_TF_AVX512; path++)
        for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++)
            for (int combo = 0; combo < k->combos; combo++) {
                uint32_t W = widths[wi];
                int mirror = combo % 2, off = combo / k->off_div;
                shr_tf_out o;
                shr_tf_out_init(&o, k->dt, SHR_LAYOUT_NCHW, W, H, 3);
                if (shr_tf_out_set_path(&o, path) != 0)
                    continue;
                paths |= 1 << path;
                if (k->set)
                    k->set(&o, combo);
                size_t stride = (size_t)W * 3 + 5;
                uint8_t *src = malloc(stride * H);
                size_t count = (size_t)W * H * 3, total = (count + k->guard) * es;
                uint8_t *buf = aligned_alloc(64, (total + 63) / 64 * 64);    /* whole lines */
                ck_assert(src && buf);
                for (size_t i = 0; i < stride * H; i++)
                    src[i] = (uint8_t)(i * 7 + i / 256);     /* every value per channel */
                memset(buf, 0xa5, total);
                uint8_t *dst = buf + (64 + (size_t)off) * es;
                shr_tf_store(&o, src, stride, mirror, dst);
                k->check(&o, path, combo, off, src, stride, dst);
                for (size_t i = 0; i < (64 + (size_t)off) * es; i++)
                    tu_check(buf[i] == 0xa5, "path %d width %u: wrote before the sample", path, W);
                for (size_t i = (64 + off + count) * es; i < total; i++)
                    tu_check(buf[i] == 0xa5, "path %d width %u: wrote past the sample", path, W);
                free(src);
                free(buf);
            }
    ck_assert(paths & 1);
#ifdef FMT_AVX512
    if (fmt_cpu() & FMT_CPU_AVX512)
        ck_assert_msg(paths & 4, "the CPU has AVX-512 but its path was not checked");
#endif
}

static const float g_chw_norms[2][2][3] = {{{0.0f, 0.0f, 0.0f}, {255.0f, 255.0f, 255.0f}},
                                           {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}}};

static void f32_chw_set(shr_tf_out *o, int combo)
{
    int n = combo / 2 % 2;
    o->unit = n ? 255.0f : 1.0f;
    memcpy(o->mean, g_chw_norms[n][0], sizeof g_chw_norms[n][0]);
    memcpy(o->std, g_chw_norms[n][1], sizeof g_chw_norms[n][1]);
}

static void f32_chw_check(const shr_tf_out *o, int path, int combo, int off, const uint8_t *src,
                          size_t stride, const void *out)
{
    const uint32_t W = o->width, H = o->height;
    const float *dst = out;
    int mirror = combo % 2, n = combo / 2 % 2;
    for (uint32_t c = 0; c < 3; c++)
        for (uint32_t y = 0; y < H; y++)
            for (uint32_t x = 0; x < W; x++) {
                uint8_t v = src[y * stride + (size_t)(mirror ? W - 1 - x : x) * 3 + c];
                float f = (float)v;
                if (n)
                    f = f / 255.0f;
                f = (f - g_chw_norms[n][0][c]) / g_chw_norms[n][1][c];
                float got = dst[((size_t)c * H + y) * W + x];
                tu_check(memcmp(&got, &f, 4) == 0,
                         "path %d width %u offset %d mirror %d norm %d: (%u, %u, %u) "
                         "of value %u is %a, not %a", path, W, off, mirror, n, c, y,
                         x, v, (double)got, (double)f);
            }
}

/* float32 CHW RGB, the multi-scale and RandomResizedCrop output: every byte value in every
 * channel, rows at every float offset from a 64-byte line, mirrored or not, with and without a
 * unit (ToTensor's 255) and a normalisation: each path's floats bit for bit those of ((x [/
 * unit]) - mean) / std in float32, nothing written outside the sample. */
START_TEST(test_kernels_f32_chw)
{
    const chw_sweep k = {SHR_DTYPE_F32, 2 * 2 * 16, 4, 144, f32_chw_set, f32_chw_check};
    check_chw_sweep(&k);
}
END_TEST

static void u8_chw_check(const shr_tf_out *o, int path, int combo, int off, const uint8_t *src,
                         size_t stride, const void *out)
{
    const uint32_t W = o->width, H = o->height;
    const uint8_t *dst = out;
    int mirror = combo % 2;
    for (uint32_t c = 0; c < 3; c++)
        for (uint32_t y = 0; y < H; y++)
            for (uint32_t x = 0; x < W; x++) {
                uint8_t v = src[y * stride + (size_t)(mirror ? W - 1 - x : x) * 3 + c];
                uint8_t got = dst[((size_t)c * H + y) * W + x];
                tu_check(got == v, "path %d width %u offset %d mirror %d: (%u, %u, %u) "
                         "is %u, not %u", path, W, off, mirror, c, y, x, got, v);
            }
}

/* uint8 CHW: every output kernel against the pixels themselves, byte for byte, every byte offset
 * of a 64-byte line, mirrored or not. */
START_TEST(test_kernels_u8_chw)
{
    const chw_sweep k = {SHR_DTYPE_U8, 2 * 64, 2, 192, NULL, u8_chw_check};
    check_chw_sweep(&k);
}
END_TEST

/* Which path an output kernel takes: AVX-512 where the CPU has it and fmt_simd_avx512() says
 * so, AVX2 without it, the plain path with the switch off (SHARDREAD_SIMD=0). */
START_TEST(test_kernel_path_switch)
{
    shr_tf_out o;
    unsigned cpu = fmt_cpu();
    fmt_simd_avx512_set(1);
    fmt_simd_set(1);
    shr_tf_out_init(&o, SHR_DTYPE_F32, SHR_LAYOUT_NCHW, 8, 8, 3);
    int avx2 = (cpu & FMT_CPU_AVX2) && (cpu & FMT_CPU_F16C);
#ifdef FMT_AVX512
    int avx512 = avx2 && (cpu & FMT_CPU_AVX512);
#else
    int avx512 = 0;
#endif
    ck_assert_int_eq(o.path, avx512 ? SHR_TF_AVX512 : avx2 ? SHR_TF_AVX2 : SHR_TF_PLAIN);
    fmt_simd_avx512_set(0);
    shr_tf_out_init(&o, SHR_DTYPE_F32, SHR_LAYOUT_NCHW, 8, 8, 3);
    ck_assert_int_eq(o.path, avx2 ? SHR_TF_AVX2 : SHR_TF_PLAIN);
    fmt_simd_avx512_set(1);
    fmt_simd_set(0);
    shr_tf_out_init(&o, SHR_DTYPE_F32, SHR_LAYOUT_NCHW, 8, 8, 3);
    ck_assert_int_eq(o.path, SHR_TF_PLAIN);
    fmt_simd_set(1);
    ck_assert_int_eq(shr_tf_out_set_path(&o, (shr_tf_path)3), -1);
    ck_assert_int_eq(o.path, SHR_TF_PLAIN);
}
END_TEST

/* The environment's switch is the programs' to apply (shr_simd_env_plain through the getter
 * they give, then shr_set_simd): the library itself reads no environment. */
static const char *g_env[3][2];
static char *env_stub(const char *name)
{
    for (int k = 0; k < 3; k++)
        if (g_env[k][0] && strcmp(g_env[k][0], name) == 0)
            return (char *)g_env[k][1];
    return NULL;
}

START_TEST(test_switch_not_from_environment)
{
    setenv("SHARDREAD_SIMD", "0", 1);
    setenv("SHARDC_TRANSFORM", "plain", 1);
    shr_tf_out o;
    shr_tf_out_init(&o, SHR_DTYPE_F32, SHR_LAYOUT_NCHW, 8, 8, 3);
    unsigned cpu = fmt_cpu();
    if ((cpu & FMT_CPU_AVX2) && (cpu & FMT_CPU_F16C))
        ck_assert_int_ne(o.path, SHR_TF_PLAIN);
    ck_assert_int_eq(shr_set_simd(1), fmt_simd());
    static const char *cases[][3][2] = {
        {{"SHARDREAD_SIMD", "0"}}, {{"SHARDC_RESAMPLE", "plain"}},
        {{"SHARDC_TRANSFORM", "plain"}}, {{"SHARDREAD_SIMD", "1"}, {"SHARDC_RESAMPLE", "avx2"}},
        {{"SHARDREAD_SIMD", ""}}, {{NULL, NULL}},
    };
    static const int plain[] = {1, 1, 1, 0, 0, 0};
    for (int k = 0; k < 6; k++) {
        memcpy(g_env, cases[k], sizeof g_env);
        ck_assert_msg(shr_simd_env_plain(env_stub) == plain[k], "case %d", k);
    }
    ck_assert_int_eq(shr_set_simd(0), 0);
    ck_assert_int_eq(fmt_simd(), 0);
    shr_set_simd(1);
    unsetenv("SHARDREAD_SIMD");
    unsetenv("SHARDC_TRANSFORM");
}
END_TEST

static shr_options rrc_options(uint64_t seed)
{
    shr_options o;
    shr_options_init(&o);
    o.seed = seed;
    o.rrc = 1;
    o.width = 32;
    o.height = 24;
    o.flip = 1;
    return o;
}

/* 20,000 draws over images of many sizes: every box inside its image, of torchvision's area and
 * aspect ranges (up to the rounding of each side), uniformly placed; flips about half. */
START_TEST(test_rrc_ranges)
{
    shr_options o = rrc_options(7);
    const uint32_t sizes[][2] = {{500, 375}, {375, 500}, {256, 341}, {512, 256}, {256, 256},
                                 {333, 500}, {640, 427}, {41, 57}, {3, 2}, {1, 1}};
    double sum_frac = 0, sum_lr = 0, sum_px = 0, sum_py = 0;
    long fallback = 0, flips = 0, placed = 0, nx = 0, ny = 0;
    const long n = 20000;
    for (long i = 0; i < n; i++) {
        uint32_t W = sizes[i % 10][0], H = sizes[i % 10][1];
        shr_params p;
        ck_assert_int_eq(shr_draw_params(&o, 3, (uint64_t)i, W, H, &p), 0);
        ck_assert_uint_eq(p.src_w, W);
        ck_assert_uint_eq(p.src_h, H);
        ck_assert(p.w >= 1 && p.h >= 1 && p.x + p.w <= W && p.y + p.h <= H);
        flips += p.flip;
        if (W < 40)
            continue;
        /* a side is round(sqrt(area * r)): within half a pixel of the exact side */
        double lo = (p.w - 0.5) * (p.h - 0.5) / ((double)W * H);
        double hi = (p.w + 0.5) * (p.h + 0.5) / ((double)W * H);
        double rlo = (p.w - 0.5) / (p.h + 0.5), rhi = (p.w + 0.5) / (p.h - 0.5);
        int in_range = hi >= 0.08 && lo <= 1.0 && rhi >= 3.0 / 4 && rlo <= 4.0 / 3;
        if (!in_range) {
            /* only the center-crop fallback may leave the ranges: then centered */
            ck_assert_uint_eq(p.x, (W - p.w) / 2);
            ck_assert_uint_eq(p.y, (H - p.h) / 2);
            fallback++;
            continue;
        }
        placed++;
        sum_frac += (double)p.w * p.h / ((double)W * H);
        sum_lr += log((double)p.w / p.h);
        if (p.w < W) {
            sum_px += (double)p.x / (W - p.w);
            nx++;
        }
        if (p.h < H) {
            sum_py += (double)p.y / (H - p.h);
            ny++;
        }
    }
    ck_assert_int_le(fallback, n / 100);
    /* accepted area fractions: uniform in [0.08, 1] less the tall or wide boxes that do not fit:
     * torchvision's own mean on these sizes is 0.43 (tests/ref/rrc_check.py compares the whole
     * distribution with torchvision's) */
    ck_assert_msg(sum_frac / placed > 0.38 && sum_frac / placed < 0.48, "mean area %f",
                  sum_frac / placed);
    ck_assert_msg(fabs(sum_lr / placed) < 0.02, "mean log-ratio %f", sum_lr / placed);
    ck_assert_msg(fabs(sum_px / nx - 0.5) < 0.02 && fabs(sum_py / ny - 0.5) < 0.02,
                  "offsets not uniform: %f %f", sum_px / nx, sum_py / ny);
    ck_assert_msg(labs(flips - n / 2) < n / 50, "%ld flips of %ld", flips, n);
}
END_TEST

START_TEST(test_rrc_determinism)
{
    shr_options o = rrc_options(11), o2 = rrc_options(12);
    long same_epoch = 0, other_epoch = 0, other_seed = 0;
    for (uint64_t i = 0; i < 2000; i++) {
        shr_params a, b, c, d;
        ck_assert_int_eq(shr_draw_params(&o, 5, i, 400, 300, &a), 0);
        ck_assert_int_eq(shr_draw_params(&o, 5, i, 400, 300, &b), 0);
        ck_assert_int_eq(shr_draw_params(&o, 6, i, 400, 300, &c), 0);
        ck_assert_int_eq(shr_draw_params(&o2, 5, i, 400, 300, &d), 0);
        same_epoch += memcmp(&a, &b, sizeof a) == 0;
        other_epoch += memcmp(&a, &c, sizeof a) == 0;
        other_seed += memcmp(&a, &d, sizeof a) == 0;
    }
    ck_assert_int_eq(same_epoch, 2000);
    ck_assert_int_le(other_epoch, 2);
    ck_assert_int_le(other_seed, 2);
}
END_TEST

/* Where no attempt fits (an image far wider than any ratio allows), torchvision's fallback: the
 * centered crop of the clamped ratio, round(H * max_ratio) wide. */
START_TEST(test_rrc_fallback)
{
    shr_options o = rrc_options(1);
    for (uint64_t i = 0; i < 100; i++) {
        shr_params p;
        ck_assert_int_eq(shr_draw_params(&o, 0, i, 1000, 10, &p), 0);
        ck_assert_uint_eq(p.w, 13);                 /* round(10 * 4/3) */
        ck_assert_uint_eq(p.h, 10);
        ck_assert_uint_eq(p.x, (1000 - 13) / 2);
        ck_assert_uint_eq(p.y, 0);
        ck_assert_int_eq(shr_draw_params(&o, 0, i, 10, 1000, &p), 0);
        ck_assert_uint_eq(p.w, 10);
        ck_assert_uint_eq(p.h, 13);                 /* round(10 / (3/4)) */
        ck_assert_uint_eq(p.y, (1000 - 13) / 2);
    }
    o.rrc_ratio[0] = o.rrc_ratio[1] = 1.0;          /* a square image, square boxes only */
    o.rrc_scale[0] = o.rrc_scale[1] = 1.0;
    shr_params p;
    ck_assert_int_eq(shr_draw_params(&o, 0, 0, 50, 50, &p), 0);
    ck_assert(p.x == 0 && p.y == 0 && p.w == 50 && p.h == 50);
}
END_TEST

/* ---- torchvision as the reference (tests/ref/rrc_check.py) ---- */

static const char *check_script(void)
{
    static char path[1200];
    snprintf(path, sizeof path, "tests/ref/rrc_check.py");
    if (file_exists(path))
        return path;
    snprintf(path, sizeof path, "%s/../../tests/ref/rrc_check.py", g_bin);
    return path;
}

/* Run rrc_check.py MODE DIR; false (with a note) where no python has torchvision. */
static int run_check(const char *mode, const char *dir)
{
    const char *py = tu_python("numpy, torch, torchvision, PIL");
    if (!py) {
        tu_skip("no python3 with torchvision and Pillow: the %s check against torchvision "
                "(set PYTHON)", mode);
        return 0;
    }
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' '%s' %s '%s' >&2", py, check_script(), mode, dir);
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s check failed (see above)", mode);
    return 1;
}

/* A new folder g_root/name (its path into dir) and its file `list` there, open for writing. */
static FILE *fresh_list(char *dir, size_t len, const char *name, const char *list)
{
    char path[1300];
    snprintf(dir, len, "%s/%s", g_root, name);
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    snprintf(path, sizeof path, "%s/%s", dir, list);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    return f;
}

/* Draws of several option sets on images of many sizes (and some that force the fallback),
 * with the words behind them: torchvision's get_params on the same words must give the same
 * boxes, and on torch's own generator the same distributions. */
START_TEST(test_rrc_torchvision)
{
    char dir[1200], path[1300];
    FILE *f = fresh_list(dir, sizeof dir, "draws", "draws.tsv");
    const double sets[][5] = {
        {0.08, 1.0, 3.0 / 4, 4.0 / 3, 0.5}, {0.5, 0.9, 0.2, 5.0, 0.3}, {0.01, 0.05, 1.0, 1.0, 0.9},
        {0.9, 1.0, 0.1, 0.11, 0.5},
    };
    for (size_t k = 0; k < 4; k++) {
        shr_options o = rrc_options(100 + k);
        o.rrc_scale[0] = sets[k][0];
        o.rrc_scale[1] = sets[k][1];
        o.rrc_ratio[0] = sets[k][2];
        o.rrc_ratio[1] = sets[k][3];
        o.flip_p = sets[k][4];
        fprintf(f, "# %" PRIu64 " %.17g %.17g %.17g %.17g %.17g\n", o.seed, sets[k][0], sets[k][1],
                sets[k][2], sets[k][3], sets[k][4]);
        for (uint64_t i = 0; i < 5000; i++) {
            /* sizes like a --short-side 256 --max-side 512 dataset, and odd small ones */
            uint32_t W = 256 + (uint32_t)(rnd() % 257), H = 256 + (uint32_t)(rnd() % 257);
            if (i % 2)
                W = 256;
            else
                H = 256;
            if (i % 50 == 7) {
                W = 1 + (uint32_t)(rnd() % 9);
                H = 1 + (uint32_t)(rnd() % 700);
            }
            uint64_t epoch = i % 3;
            shr_params p;
            ck_assert_int_eq(shr_draw_params(&o, epoch, i, W, H, &p), 0);
            fprintf(f, "%u %u %" PRIu64 " %" PRIu64 " %u %u %u %u %u", W, H, epoch, i, p.x, p.y,
                    p.w, p.h, p.flip);
            for (uint32_t k2 = 0; k2 < 20; k2++)
                fprintf(f, " %016" PRIx64, shr_mix(o.seed, epoch, i, SHR_SALT_RRC + k2));
            fprintf(f, " %016" PRIx64 "\n", shr_mix(o.seed, epoch, i, SHR_SALT_FLIP));
        }
    }
    ck_assert_int_eq(fclose(f), 0);
    /* torch's float32 exp over the log-ratios a draw can meet, and its log over ratio bounds */
    snprintf(path, sizeof path, "%s/math.tsv", dir);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 100000; i++) {
        float x = (float)((double)(rnd() >> 11) * 0x1p-53 * 8.0 - 4.0);
        fprintf(f, "exp %a %a\n", (double)x, (double)shr_tf_torch_expf(x));
        float y = (float)exp((double)(rnd() >> 11) * 0x1p-53 * 12.0 - 6.0);
        fprintf(f, "log %a %a\n", (double)y, (double)shr_tf_torch_logf(y));
    }
    ck_assert_int_eq(fclose(f), 0);
    if (run_check("words", dir))
        run_check("dist", dir);
}
END_TEST

/* ---- through the reader ---- */

typedef struct {
    uint32_t n, bytes;
    int64_t idx[64];
    shr_params prm[64];
    uint8_t *data;
} rec;

typedef struct {
    const shr_options *o;
    rec *out;
    size_t cap, k;
} recording;

static void keep_rec(const shr_batch *b, size_t one, void *arg)
{
    recording *g = arg;
    ck_assert_uint_lt(g->k, g->cap);
    ck_assert_uint_le(b->n, 64);
    ck_assert_int_eq(b->dtype, g->o->dtype);
    ck_assert_int_eq(b->layout, g->o->layout);
    rec *r = &g->out[g->k++];
    r->n = b->n;
    r->bytes = (uint32_t)(one * b->n);
    memcpy(r->idx, b->indices, b->n * sizeof *b->indices);
    memcpy(r->prm, b->params, b->n * sizeof *b->params);
    r->data = tu_memdup(b->data, r->bytes);
}

/* Every batch of `epochs` epochs (ends of epoch dropped), copied. */
static rec *record(const char *dir, const shr_options *o, int epochs, size_t *count)
{
    shr_reader *r = tu_reader_open(dir, o);
    recording g = {o, NULL, (size_t)epochs * shr_batches_per_epoch(r), 0};
    g.out = calloc(g.cap, sizeof *g.out);
    ck_assert_ptr_nonnull(g.out);
    tu_reader_keep(r, o, epochs, keep_rec, &g);
    shr_close(r);
    *count = g.k;
    return g.out;
}

static void recs_free(rec *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i].data);
    free(v);
}

static void assert_same(const rec *a, size_t na, const rec *b, size_t nb)
{
    ck_assert_uint_eq(na, nb);
    for (size_t i = 0; i < na; i++) {
        ck_assert_uint_eq(a[i].n, b[i].n);
        ck_assert_mem_eq(a[i].idx, b[i].idx, a[i].n * sizeof a[i].idx[0]);
        ck_assert_mem_eq(a[i].prm, b[i].prm, a[i].n * sizeof a[i].prm[0]);
        ck_assert_uint_eq(a[i].bytes, b[i].bytes);
        ck_assert_msg(memcmp(a[i].data, b[i].data, a[i].bytes) == 0, "batch %zu differs", i);
    }
}

static void stored_size(fmt_dataset *d, uint64_t idx, uint32_t *w, uint32_t *h)
{
    fmt_sample s;
    ck_assert_int_eq(fmt_dataset_get(d, idx, &s), 0);
    *w = s.width;
    *h = s.height;
}

/* The parameters every batch reports are shr_draw_params's for its samples. */
static void check_params(const char *dir, const shr_options *o, const rec *v, size_t n, int epochs)
{
    fmt_dataset *d;
    ck_assert_int_eq(fmt_dataset_open(&d, dir, NULL), 0);
    size_t per_epoch = n / (size_t)epochs;
    int flipped = 0;
    for (size_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < v[i].n; j++) {
            uint32_t w, h;
            stored_size(d, (uint64_t)v[i].idx[j], &w, &h);
            shr_params p;
            ck_assert_int_eq(shr_draw_params(o, i / per_epoch, (uint64_t)v[i].idx[j], w, h, &p),
                             0);
            ck_assert_mem_eq(&p, &v[i].prm[j], sizeof p);
            flipped += p.flip;
        }
    ck_assert(!o->flip || flipped > 0);
    fmt_dataset_close(d);
}

/* Float and planar outputs are the uint8 NHWC output, converted by the documented formula:
 * crop/pad on samples of many sizes, with the flip, given and dataset statistics. */
START_TEST(test_dtype_layout)
{
    const char *dirs[] = {g_rgb, g_gray};
    for (int k = 0; k < 2; k++) {
        shr_options o = tu_rrc_options(5, 3, 48, 36);
        o.threads = 3;
        o.rrc = _i;
        size_t nu, nv;
        rec *u8 = record(dirs[k], &o, 2, &nu);
        check_params(dirs[k], &o, u8, nu, 2);
        uint32_t ch = k == 0 ? 3 : 1;
        shr_reader *r = tu_reader_open(dirs[k], &o);
        shr_info info;
        shr_get_info(r, &info);
        shr_close(r);
        for (int combo = 0; combo < 12; combo++) {
            shr_options f = o;
            f.dtype = (shr_dtype)(combo % 3);
            f.layout = (shr_layout)(combo / 3 % 2);
            f.normalize = f.dtype == SHR_DTYPE_U8 ? SHR_NORM_NONE
                          : combo / 6 ? SHR_NORM_DATASET : SHR_NORM_GIVEN;
            const float m[4] = {123.675f, 116.28f, 103.53f, 0};
            const float s[4] = {58.395f, 57.12f, 57.375f, 1};
            memcpy(f.mean, m, sizeof m);
            memcpy(f.std, s, sizeof s);
            f.access = (shr_access)(combo % 3);
            rec *v = record(dirs[k], &f, 2, &nv);
            ck_assert_uint_eq(nu, nv);
            shr_tf_out ref;
            shr_tf_out_init(&ref, f.dtype, f.layout, 48, 36, ch);
            for (uint32_t c = 0; c < ch && f.normalize != SHR_NORM_NONE; c++) {
                ref.mean[c] = f.normalize == SHR_NORM_GIVEN ? m[c] : (float)info.mean[c];
                ref.std[c] = f.normalize == SHR_NORM_GIVEN ? s[c] : (float)info.std[c];
            }
            size_t one = (size_t)48 * 36 * ch, esz = shr_tf_elem_size(f.dtype);
            for (size_t i = 0; i < nu; i++) {
                ck_assert_mem_eq(u8[i].prm, v[i].prm, u8[i].n * sizeof u8[i].prm[0]);
                ck_assert_uint_eq(v[i].bytes, u8[i].bytes * esz);
                for (uint32_t j = 0; j < u8[i].n; j++) {
                    const uint8_t *a = u8[i].data + j * one;
                    const uint8_t *b = v[i].data + j * one * esz;
                    for (uint32_t y = 0; y < 36; y++)
                        for (uint32_t x = 0; x < 48; x++)
                            for (uint32_t c = 0; c < ch; c++) {
                                uint8_t px = a[((size_t)y * 48 + x) * ch + c];
                                tu_check(elem_bits(&ref, b, c, y, x) == want_bits(&ref, px, c),
                                         "combo %d batch %zu sample %u (%u,%u,%u)", combo, i, j,
                                         c, y, x);
                            }
                }
            }
            recs_free(v, nv);
        }
        recs_free(u8, nu);
    }
}
END_TEST

/* RandomResizedCrop pixels against torchvision: every filter, up- and downscaling, RGB and gray,
 * both flips; the stored images, reported boxes and delivered pixels go to rrc_check.py. */
START_TEST(test_rrc_pixels)
{
    char dir[1200];
    FILE *list = fresh_list(dir, sizeof dir, "pixels", "samples.tsv");
    const struct {
        const char *dir;
        uint32_t w, h;
        shr_filter f;
        double s0, r0, r1;
    } cases[] = {
        {g_rgb, 48, 36, SHR_FILTER_BILINEAR, 0.08, 3.0 / 4, 4.0 / 3},
        {g_rgb, 20, 16, SHR_FILTER_BILINEAR, 0.3, 3.0 / 4, 4.0 / 3},
        {g_rgb, 33, 17, SHR_FILTER_BICUBIC, 0.08, 0.5, 2.0},
        {g_rgb, 25, 25, SHR_FILTER_LANCZOS, 0.08, 3.0 / 4, 4.0 / 3},
        {g_rgb, 31, 40, SHR_FILTER_NEAREST, 0.08, 3.0 / 4, 4.0 / 3},
        {g_rgb, 16, 16, SHR_FILTER_BOX, 0.5, 3.0 / 4, 4.0 / 3},
        {g_rgb, 19, 23, SHR_FILTER_HAMMING, 0.08, 3.0 / 4, 4.0 / 3},
        {g_gray, 48, 36, SHR_FILTER_BILINEAR, 0.08, 3.0 / 4, 4.0 / 3},
        {g_gray, 17, 13, SHR_FILTER_BICUBIC, 0.08, 3.0 / 4, 4.0 / 3},
    };
    fmt_dataset *ds[2];
    ck_assert_int_eq(fmt_dataset_open(&ds[0], g_rgb, NULL), 0);
    ck_assert_int_eq(fmt_dataset_open(&ds[1], g_gray, NULL), 0);
    int flips = 0, n = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        shr_options o = tu_rrc_options(5, 40 + k, cases[k].w, cases[k].h);
        o.filter = cases[k].f;
        o.rrc_scale[0] = cases[k].s0;
        o.rrc_ratio[0] = cases[k].r0;
        o.rrc_ratio[1] = cases[k].r1;
        o.access = (shr_access)(k % 3);
        size_t nr;
        rec *v = record(cases[k].dir, &o, 2, &nr);
        fmt_dataset *d = ds[cases[k].dir == g_gray];
        uint32_t ch = cases[k].dir == g_gray ? 1 : 3;
        for (size_t i = 0; i < nr; i++)
            for (uint32_t j = 0; j < v[i].n; j++) {
                fmt_sample st;
                ck_assert_int_eq(fmt_dataset_get(d, (uint64_t)v[i].idx[j], &st), 0);
                ck_assert_ptr_nonnull(st.pixels);
                char stored[1400], out[1400];
                snprintf(stored, sizeof stored, "%s/stored-%zu-%" PRId64 ".raw", dir,
                         k, v[i].idx[j]);
                snprintf(out, sizeof out, "%s/out-%zu-%zu-%u.raw", dir, k, i, j);
                FILE *f = fopen(stored, "wb");
                ck_assert_ptr_nonnull(f);
                ck_assert_uint_eq(fwrite(st.pixels, 1, st.length, f), st.length);
                ck_assert_int_eq(fclose(f), 0);
                size_t one = (size_t)o.width * o.height * ch;
                f = fopen(out, "wb");
                ck_assert_ptr_nonnull(f);
                ck_assert_uint_eq(fwrite(v[i].data + j * one, 1, one, f), one);
                ck_assert_int_eq(fclose(f), 0);
                const shr_params *p = &v[i].prm[j];
                ck_assert_uint_eq(p->src_w, st.width);
                ck_assert_uint_eq(p->src_h, st.height);
                fprintf(list, "%s %u %u %u %u %u %u %u %u %u %u %d %s\n", stored, st.width,
                        st.height, ch, p->x, p->y, p->w, p->h, p->flip, o.width, o.height,
                        (int)o.filter, out);
                flips += p->flip;
                n++;
            }
        check_params(cases[k].dir, &o, v, nr, 2);
        recs_free(v, nr);
    }
    fmt_dataset_close(ds[0]);
    fmt_dataset_close(ds[1]);
    ck_assert_int_eq(fclose(list), 0);
    ck_assert(flips > 10 && flips < n - 10);
    run_check("pixels", dir);
}
END_TEST

/* Same seed, same batches; 1 and 4 threads alike; resuming anywhere in an epoch gives the
 * batches that were left; another epoch draws other boxes. */
START_TEST(test_rrc_determinism_reader)
{
    shr_options o = tu_rrc_options(5, 77, 32, 32);
    o.dtype = SHR_DTYPE_F16;
    o.layout = SHR_LAYOUT_NCHW;
    o.normalize = SHR_NORM_DATASET;
    o.threads = 1;
    size_t n1, n4, n2;
    rec *one = record(g_rgb, &o, 3, &n1);
    o.threads = 4;
    rec *four = record(g_rgb, &o, 3, &n4);
    assert_same(one, n1, four, n4);
    o.threads = 2;
    o.prefetch = 2;
    rec *two = record(g_rgb, &o, 3, &n2);
    assert_same(one, n1, two, n2);
    recs_free(two, n2);
    /* resume at every cursor of epoch 1 */
    size_t per_epoch = n1 / 3;
    for (uint64_t cur = 0; cur <= per_epoch; cur++) {
        shr_options rs = o;
        rs.epoch = 1;
        rs.cursor = cur;
        shr_reader *r = tu_reader_open(g_rgb, &rs);
        const shr_batch *b;
        size_t k = per_epoch + cur;
        int rc;
        while ((rc = shr_next(r, &b)) == 0) {
            ck_assert_uint_lt(k, 2 * per_epoch);
            ck_assert_uint_eq(b->n, one[k].n);
            ck_assert_mem_eq(b->indices, one[k].idx, b->n * sizeof *b->indices);
            ck_assert_mem_eq(b->params, one[k].prm, b->n * sizeof *b->params);
            ck_assert_msg(memcmp(b->data, one[k].data, one[k].bytes) == 0,
                          "resumed at %" PRIu64 ": batch %zu differs", cur, k);
            shr_release(r, b);
            k++;
        }
        ck_assert_int_eq(rc, SHR_EEND);
        ck_assert_uint_eq(k, 2 * per_epoch);
        shr_close(r);
    }
    /* the epochs draw differently: few samples get the same box twice */
    fmt_dataset *d;
    ck_assert_int_eq(fmt_dataset_open(&d, g_rgb, NULL), 0);
    uint64_t n = fmt_dataset_manifest(d)->samples;
    fmt_dataset_close(d);
    shr_params *e0 = calloc(n, sizeof *e0), *e1 = calloc(n, sizeof *e1);
    for (size_t i = 0; i < 2 * per_epoch; i++)
        for (uint32_t j = 0; j < one[i].n; j++)
            (i < per_epoch ? e0 : e1)[one[i].idx[j]] = one[i].prm[j];
    int same = 0;
    for (uint64_t i = 0; i < n; i++)
        same += memcmp(&e0[i], &e1[i], sizeof e0[i]) == 0;
    ck_assert_int_le(same, 2);
    free(e0);
    free(e1);
    recs_free(one, n1);
    recs_free(four, n4);
}
END_TEST

/* RandomResizedCrop to float32 NCHW: over 48 epochs the heap and the anonymous memory stay
 * where the first WARM epochs left them (every access mode), as in test_reader's
 * test_memory_flat. Under ThreadSanitizer the first epochs' crops still reach shard pages no
 * crop read before, each mapping its shadow as it is first read (with the AVX-512 resampler's
 * wider loads, 1.2 MB more between epochs 2 and 8, then flat): there the window starts later. */
#ifdef __SANITIZE_THREAD__
#define WARM 8
#else
#define WARM 2
#endif
START_TEST(test_rrc_memory_flat)
{
    shr_options o = tu_rrc_options(3, 5, 40, 30);
    o.filter = _i == 1 ? SHR_FILTER_LANCZOS : SHR_FILTER_BILINEAR;
    o.dtype = SHR_DTYPE_F32;
    o.layout = SHR_LAYOUT_NCHW;
    o.normalize = SHR_NORM_DATASET;
    o.access = (shr_access)_i;
    shr_reader *r = tu_reader_open(g_rgb, &o);
    for (int e = 0; e < WARM; e++)
        ck_assert_int_eq(tu_reader_drain(r), SHR_EEND);
    (void)tu_rss_anon();                /* stdio's first-use allocations, outside the window */
    size_t heap1 = mallinfo2().uordblks, rss1 = tu_rss_anon();
    for (int e = WARM; e < WARM + 48; e++)
        ck_assert_int_eq(tu_reader_drain(r), SHR_EEND);
    size_t heap50 = mallinfo2().uordblks, rss50 = tu_rss_anon();
    ck_assert_uint_eq(shr_get_state(r).epoch, WARM + 48);
    shr_close(r);
    ck_assert_msg(heap50 <= heap1 + 1024, "heap grew from %zu to %zu bytes", heap1, heap50);
    ck_assert_msg(rss50 <= rss1 + (1u << 20), "anonymous RSS grew from %zu to %zu bytes", rss1,
                  rss50);
}
END_TEST

/* Options that cannot work together: SHR_EINVAL at open, with a reason, and from
 * shr_draw_params. */
START_TEST(test_bad_combinations)
{
    for (int k = 0; k < 17; k++) {
        shr_options o;
        shr_options_init(&o);
        o.batch_size = 4;
        o.width = 16;
        o.height = 16;
        o.rrc = 1;
        o.dtype = SHR_DTYPE_F32;
        switch (k) {
        case 0: o.width = o.height = 0; break;                      /* rrc without a size */
        case 1: o.random_crop = 1; break;
        case 2: o.rrc_scale[0] = 0; break;
        case 3: o.rrc_scale[0] = 0.5; o.rrc_scale[1] = 0.4; break;
        case 4: o.rrc_scale[1] = 1.5; break;
        case 5: o.rrc_ratio[0] = -1; break;
        case 6: o.rrc_ratio[0] = 2; o.rrc_ratio[1] = 1; break;
        case 7: o.rrc_ratio[1] = NAN; break;
        case 8: o.filter = (shr_filter)17; break;
        case 9: o.dtype = (shr_dtype)5; break;
        case 10: o.layout = (shr_layout)5; break;
        case 11: o.normalize = (shr_norm)5; break;
        case 12: o.dtype = SHR_DTYPE_U8; o.normalize = SHR_NORM_DATASET; break;
        case 13: o.normalize = SHR_NORM_GIVEN; o.std[1] = 0; break;
        case 14: o.normalize = SHR_NORM_GIVEN; o.mean[2] = INFINITY; break;
        case 15: o.flip = 1; o.flip_p = 1.5; break;
        case 16: o.flip_p = NAN; break;
        }
        shr_reader *r = (shr_reader *)&o;
        tu_msg.text[0] = '\0';
        ck_assert_msg(shr_open(&r, g_rgb, &o, tu_fresh()) == SHR_EINVAL, "case %d", k);
        ck_assert_ptr_null(r);
        ck_assert_msg(strlen(tu_msg.text) > 10, "case %d: no reason", k);
        shr_params p;
        ck_assert_msg(shr_draw_params(&o, 0, 0, 10, 10, &p) == SHR_EINVAL, "case %d", k);
    }
    /* the manifest's statistics must be usable for SHR_NORM_DATASET: a dataset whose stats were
     * lost (std 0) is refused, naming the dataset */
    char copy[1200], cmd[4096];
    snprintf(copy, sizeof copy, "%s/nostats", g_root);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", copy, g_fixed, copy);
    ck_assert_int_eq(run_quiet(cmd), 0);
    fmt_manifest m;
    ck_assert_int_eq(fmt_manifest_read(copy, &m, NULL), 0);
    m.std[1] = 0;
    ck_assert_int_eq(fmt_manifest_write(copy, &m), 0);
    fmt_manifest_free(&m);
    shr_options o;
    shr_options_init(&o);
    o.batch_size = 4;
    o.dtype = SHR_DTYPE_F16;
    o.normalize = SHR_NORM_DATASET;
    shr_reader *r = NULL;
    ck_assert_int_eq(shr_open(&r, copy, &o, tu_fresh()), SHR_EINVAL);
    ck_assert_ptr_nonnull(strstr(tu_msg.text, "nostats"));
    ck_assert_ptr_nonnull(strstr(tu_msg.text, "statistics"));
    o.normalize = SHR_NORM_GIVEN;               /* given statistics work on it */
    r = tu_reader_open(copy, &o);
    shr_close(r);
    ck_assert_int_eq(shr_draw_params(NULL, 0, 0, 1, 1, NULL), SHR_EINVAL);
}
END_TEST

/* The ring is sized for the dtype. */
START_TEST(test_ring_bytes)
{
    for (shr_dtype dt = SHR_DTYPE_U8; dt <= SHR_DTYPE_F16; dt++) {
        shr_options o;
        shr_options_init(&o);
        o.batch_size = 8;
        o.dtype = dt;
        o.prefetch = 3;
        shr_reader *r = tu_reader_open(g_fixed, &o);
        shr_info info;
        shr_get_info(r, &info);
        ck_assert_uint_eq(info.batch_bytes, (uint64_t)8 * 24 * 20 * 3 * shr_tf_elem_size(dt));
        ck_assert_uint_eq(info.ring_bytes,
                          3 * (info.batch_bytes + 8 * (3 * sizeof(int64_t) + sizeof(shr_params))));
        ck_assert_int_eq(info.dtype, dt);
        shr_close(r);
    }
}
END_TEST

static Suite *transform_suite(void)
{
    TCase *tc;
    Suite *s = tu_suite("transform", "transform", 300, &tc);
    TU_ADD_TESTS(tc, test_half, test_kernels, test_kernels_f32_chw, test_kernels_u8_chw,
                 test_kernel_path_switch, test_switch_not_from_environment, test_rrc_ranges,
                 test_rrc_determinism, test_rrc_fallback, test_rrc_torchvision);
    tcase_add_loop_test(tc, test_dtype_layout, 0, 2);
    TU_ADD_TESTS(tc, test_rrc_pixels, test_rrc_determinism_reader);
    tcase_add_loop_test(tc, test_rrc_memory_flat, 0, 3);
    TU_ADD_TESTS(tc, test_bad_combinations, test_ring_bytes);
    return s;
}

int main(void)
{
    int rc = build_fixtures();
    return tu_run_fixtures(rc, transform_suite());     /* 77: a check against torchvision skipped */
}
