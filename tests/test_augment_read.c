/* test_augment_read.c - the reader's read-time augmentations (ColorJitter, RandomGrayscale,
 * RandomErasing) against torchvision 0.14 and Pillow, byte for byte:
 *   - Pillow's RGB -> HSV and HSV -> RGB on every one of the 2^24 inputs;
 *   - each functional op (F.adjust_brightness, adjust_contrast, adjust_saturation, adjust_hue,
 *     rgb_to_grayscale) on images of many sizes, odd ones included, RGB and L, over factors
 *     inside and outside [0, 1];
 *   - the draws: ColorJitter.get_params (its permutation and factors), RandomGrayscale and
 *     RandomErasing.get_params fed the reader's words in place of torch's generator;
 *   - whole samples from the reader (RandomResizedCrop + flip + ColorJitter + RandomGrayscale +
 *     RandomErasing) equal torchvision's pipeline on the stored image with the reported
 *     parameters; float outputs equal the uint8 ones converted, erased with the value;
 *   - the same batches at 1 and 4 threads and after resumption; EINVAL for bad options.
 * The reference runs in a python3 with torch, torchvision, numpy and Pillow (its script is
 * tests/ref/augment_check.py); without one those checks are skipped with a note.
 *
 * Fixtures are datasets built at run time by the shardc binaries of the same build directory. */
#include "affine.h"
#include "autoaugment.h"
#include "color.h"
#include "erase.h"
#include "hsv.h"
#include "shardread.h"
#include "simd.h"
#include "transform.h"

#define AUGTEST_NAME "test_augment_read"
#define AUGTEST_SEED 0x9e3779b97f4a7c15ULL
#define AUGTEST_SCRIPT "augment_check.py"
#include "augtest.h"

/* ---- fixtures and the recorded batches: tests/augtest.h ---- */

/* ---- Pillow's HSV conversions, every input ---- */

START_TEST(test_hsv_all)
{
    char dir[1200], path[1300];
    make_dir(dir, sizeof dir, "hsv");
    if (!run_check("hsv", dir))
        return;
    size_t n = (size_t)1 << 24;
    snprintf(path, sizeof path, "%s/rgb2hsv.bin", dir);
    uint8_t *want = read_file(path, 3 * n);
    size_t bad = 0;
    for (size_t v = 0; v < n; v++) {
        uint8_t in[3] = {(uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v}, got[3];
        fmt_rgb2hsv(in, got);
        if (memcmp(got, want + 3 * v, 3) != 0 && bad++ == 0)
            ck_abort_msg("rgb2hsv(%u, %u, %u): %u %u %u, Pillow %u %u %u", in[0], in[1], in[2],
                         got[0], got[1], got[2], want[3 * v], want[3 * v + 1], want[3 * v + 2]);
    }
    free(want);
    snprintf(path, sizeof path, "%s/hsv2rgb.bin", dir);
    want = read_file(path, 3 * n);
    for (size_t v = 0; v < n; v++) {
        uint8_t in[3] = {(uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v}, got[3];
        fmt_hsv2rgb(in, got);
        if (memcmp(got, want + 3 * v, 3) != 0 && bad++ == 0)
            ck_abort_msg("hsv2rgb(%u, %u, %u): %u %u %u, Pillow %u %u %u", in[0], in[1], in[2],
                         got[0], got[1], got[2], want[3 * v], want[3 * v + 1], want[3 * v + 2]);
    }
    free(want);
}
END_TEST

/* ---- each op on images of many sizes ---- */

/* Pixels with structure (gradients, flat patches, greys) and noise. */
static void fill_image(uint8_t *p, uint32_t w, uint32_t h, uint32_t c, int kind)
{
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            for (uint32_t k = 0; k < c; k++) {
                uint8_t v;
                switch (kind) {
                case 0:
                    v = (uint8_t)rnd();
                    break;
                case 1:
                    v = (uint8_t)((x * 255 / (w > 1 ? w - 1 : 1) + k * 85 + y * 3) & 255);
                    break;
                case 2:                 /* greys with a little colour here and there */
                    v = (uint8_t)(y * 7 + x * 5);
                    if (k && (x + y) % 5 == 0)
                        v = (uint8_t)(v + rnd() % 9);
                    break;
                default:                /* dark and bright extremes */
                    v = rnd() % 2 ? (uint8_t)(rnd() % 8) : (uint8_t)(248 + rnd() % 8);
                    break;
                }
                p[((size_t)y * w + x) * c + k] = v;
            }
}

/* The HSV conversions' vector path (simd.h) against Pillow, every input too, and the hue at
 * every shift on every colour through both paths. */
START_TEST(test_hsv_paths)
{
    char dir[1200], path[1300];
    make_dir(dir, sizeof dir, "hsvpaths");
    size_t n = (size_t)1 << 24;
    uint8_t *all = malloc(3 * n), *a = malloc(3 * n), *b = malloc(3 * n);
    ck_assert(all && a && b);
    for (size_t v = 0; v < n; v++) {
        all[3 * v] = (uint8_t)(v >> 16);
        all[3 * v + 1] = (uint8_t)(v >> 8);
        all[3 * v + 2] = (uint8_t)v;
    }
    int vector = fmt_simd_set(1);
    if (!vector)
        fprintf(stderr, "test_augment_read: no AVX2 here: the vector paths are not tested\n");
    for (int to_rgb = 0; to_rgb < 2; to_rgb++) {
        fmt_simd_set(0);
        fmt_color_hsv_rows(all, a, n, to_rgb);
        fmt_simd_set(1);
        fmt_color_hsv_rows(all, b, n, to_rgb);
        /* one assertion per call: check's per-call bookkeeping would dominate 50M of them */
        if (memcmp(a, b, 3 * n) != 0) {
            size_t i = 0;
            while (a[i] == b[i])
                i++;
            ck_abort_msg("%s of %06zx: vector %u, plain %u", to_rgb ? "hsv2rgb" : "rgb2hsv",
                         i / 3, b[i], a[i]);
        }
    }
    if (run_check("hsv", dir)) {
        for (int to_rgb = 0; to_rgb < 2; to_rgb++) {
            snprintf(path, sizeof path, "%s/%s.bin", dir, to_rgb ? "hsv2rgb" : "rgb2hsv");
            uint8_t *want = read_file(path, 3 * n);
            fmt_color_hsv_rows(all, b, n, to_rgb);
            ck_assert_msg(memcmp(b, want, 3 * n) == 0, "vector %s differs from Pillow's",
                          to_rgb ? "hsv2rgb" : "rgb2hsv");
            free(want);
        }
    }
    /* each shift on its own 2^16 colours (all of them once over the 256 shifts), as rows of
     * 4093 pixels: every tail length */
    size_t block = 3 * ((size_t)1 << 16);
    for (int shift = 0; shift < 256; shift++) {
        double f = (shift < 128 ? shift : shift - 256) / 255.0 + (shift < 128 ? 1e-9 : -1e-9);
        const uint8_t *in = all + (size_t)((shift * 97) & 255) * block;
        memcpy(a, in, block);
        memcpy(b, in, block);
        fmt_simd_set(0);
        fmt_color_hue(a, 4093, 16, 3, 4093 * 3, f);
        fmt_color_hue(a + 4093 * 3 * 16, 65536 - 4093 * 16, 1, 3, 3 * 65536, f);
        fmt_simd_set(1);
        fmt_color_hue(b, 4093, 16, 3, 4093 * 3, f);
        fmt_color_hue(b + 4093 * 3 * 16, 65536 - 4093 * 16, 1, 3, 3 * 65536, f);
        ck_assert_msg(memcmp(a, b, block) == 0, "hue shift %d: the paths differ", shift);
    }
    fmt_simd_set(1);
    free(all);
    free(a);
    free(b);
}
END_TEST

/* Every vector kernel against its plain C path: each op, over its factor range and beyond,
 * on random and structured images of widths 1..40 and larger (odd ones, tails of every
 * length), RGB and grey, through a stride wider than the row. */
enum { P_BRIGHT, P_CONTRAST, P_SAT, P_HUE, P_GRAY, P_AA, P_WARP };

static void run_path_op(int kind, int arg, double f, uint8_t *px, uint32_t w, uint32_t h,
                        uint32_t c, size_t stride, uint8_t *src, uint8_t *scratch)
{
    const uint8_t fill[4] = {(uint8_t)arg, 200, 30, 0};
    switch (kind) {
    case P_BRIGHT:
        fmt_color_brightness(px, w, h, c, stride, (float)f);
        break;
    case P_CONTRAST:
        fmt_color_contrast(px, w, h, c, stride, (float)f);
        break;
    case P_SAT:
        fmt_color_saturation(px, w, h, c, stride, (float)f);
        break;
    case P_HUE:
        fmt_color_hue(px, w, h, c, stride, f);
        break;
    case P_GRAY:
        fmt_color_grayscale(px, w, h, c, stride);
        break;
    case P_AA:
        shr_aa_apply_op(arg, f, arg % 2 ? SHR_FILTER_BILINEAR : SHR_FILTER_NEAREST, fill, px, w,
                        h, c, stride, scratch);
        break;
    case P_WARP:                /* arg: 0 rotate, 1 affine; f the angle; both filters */
        for (int k = 0; k < 2; k++) {
            shr_filter fl = k ? SHR_FILTER_BILINEAR : SHR_FILTER_NEAREST;
            if (arg == 0)
                shr_affine_rotate(src, stride, px, stride, w, h, c, f, fl, fill);
            else
                shr_affine_apply(src, stride, px, stride, w, h, c, f, 3.0, -2.0, 0.93, f / 3,
                                 -f / 5, NULL, fl, fill);
            memcpy(src, px, stride * h);
        }
        break;
    default:
        break;
    }
}

START_TEST(test_paths_equal)
{
    if (!fmt_simd_set(1)) {
        fprintf(stderr, "test_augment_read: this CPU has no vector path: nothing to compare\n");
        return;
    }
    static const struct {
        int kind, arg;
        double f[8];
        int nf;
    } ops[] = {
        {P_BRIGHT, 0, {0.0, 0.3, 0.8, 0.999, 1.0, 1.2, 1.77, 400.0}, 8},
        {P_CONTRAST, 0, {0.0, 0.2, 0.8, 1.0, 1.05, 1.2, 2.3, 9.0}, 8},
        {P_SAT, 0, {0.0, 0.1, 0.8, 1.0, 1.19, 1.5, 3.0, 70.0}, 8},
        {P_HUE, 0, {-0.5, -0.3, -0.1, -0.001, 0.0, 0.0625, 0.2, 0.5}, 8},
        {P_GRAY, 0, {0.0}, 1},
        {P_AA, SHR_AA_SHEAR_X, {-0.99, -0.3, 0.0, 0.5}, 4},
        {P_AA, SHR_AA_SHEAR_Y, {-0.7, 0.2, 0.99}, 3},
        {P_AA, SHR_AA_TRANSLATE_X, {-32, -3, 7, 31}, 4},
        {P_AA, SHR_AA_TRANSLATE_Y, {-20, 0, 2, 32}, 4},
        {P_AA, SHR_AA_ROTATE, {-135, -17.3, 0, 45, 90, 180, 101.7}, 7},
        {P_AA, SHR_AA_BRIGHTNESS, {-0.99, -0.4, 0.0, 0.3, 0.99}, 5},
        {P_AA, SHR_AA_COLOR, {-0.99, -0.4, 0.3, 0.99}, 4},
        {P_AA, SHR_AA_CONTRAST, {-0.99, -0.4, 0.3, 0.99}, 4},
        {P_AA, SHR_AA_SHARPNESS, {-0.99, -0.5, -0.1, 0.0, 0.3, 0.99, 5.0}, 7},
        {P_AA, SHR_AA_POSTERIZE, {1, 2, 4, 8}, 4},
        {P_AA, SHR_AA_SOLARIZE, {0, 1, 127.5, 128, 255}, 5},
        {P_AA, SHR_AA_AUTOCONTRAST, {0}, 1},
        {P_AA, SHR_AA_EQUALIZE, {0}, 1},
        {P_WARP, 0, {-170.3, -17.3, 0.7, 33.0, 90.0}, 5},
        {P_WARP, 1, {-40.0, -10.5, 0.0, 12.25, 77.0}, 5},
    };
    const uint32_t widths[] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17,
                               18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34,
                               35, 36, 37, 38, 39, 40, 63, 64, 65, 127, 224, 333};
    const uint32_t heights[] = {1, 2, 3, 5, 8, 17, 40};
    size_t max = (size_t)(333 * 3 + 7) * 333;
    uint8_t *img = malloc(max), *a = malloc(max), *b = malloc(max), *sa = malloc(max);
    uint8_t *sb = malloc(max), *scr = malloc(max);
    ck_assert(img && a && b && sa && sb && scr);
    int n = 0;
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (int fi = 0; fi < ops[o].nf; fi++)
            for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++)
                for (uint32_t c = 1; c <= 3; c += 2) {
                    uint32_t w = widths[wi];
                    uint32_t h = w > 40 ? w - (uint32_t)(wi % 3) : heights[(wi + fi) % 7];
                    size_t row = (size_t)w * c, stride = row + (wi % 4) * 3 + 1;
                    int kind = (int)((wi + fi + o + c) % 4);
                    fill_image(img, w, h, c, kind);
                    memset(a, 0xa5, stride * h);
                    for (uint32_t y = 0; y < h; y++)
                        memcpy(a + y * stride, img + y * row, row);
                    memcpy(b, a, stride * h);
                    memcpy(sa, a, stride * h);
                    memcpy(sb, a, stride * h);
                    double f = ops[o].f[fi];
                    if (ops[o].kind != P_HUE)
                        f = (double)(float)f;
                    fmt_simd_set(0);
                    run_path_op(ops[o].kind, ops[o].arg, f, a, w, h, c, stride, sa, scr);
                    fmt_simd_set(1);
                    run_path_op(ops[o].kind, ops[o].arg, f, b, w, h, c, stride, sb, scr);
                    for (uint32_t y = 0; y < h; y++)
                        if (memcmp(a + y * stride, b + y * stride, row) != 0) {
                            size_t i = 0;
                            while (a[y * stride + i] == b[y * stride + i])
                                i++;
                            ck_abort_msg("op %zu (kind %d, arg %d) factor %g on %ux%ux%u: byte "
                                         "%zu of row %u: vector %u, plain %u", o, ops[o].kind,
                                         ops[o].arg, f, w, h, c, i, y, b[y * stride + i],
                                         a[y * stride + i]);
                        }
                    n++;
                }
    free(img);
    free(a);
    free(b);
    free(sa);
    free(sb);
    free(scr);
    fprintf(stderr, "test_augment_read: %d images equal through the vector and plain paths\n",
            n);
}
END_TEST

typedef void (*op_fn)(uint8_t *, uint32_t, uint32_t, uint32_t, size_t, double);

static void op_brightness(uint8_t *p, uint32_t w, uint32_t h, uint32_t c, size_t s, double f)
{
    fmt_color_brightness(p, w, h, c, s, (float)f);
}

static void op_contrast(uint8_t *p, uint32_t w, uint32_t h, uint32_t c, size_t s, double f)
{
    fmt_color_contrast(p, w, h, c, s, (float)f);
}

static void op_saturation(uint8_t *p, uint32_t w, uint32_t h, uint32_t c, size_t s, double f)
{
    fmt_color_saturation(p, w, h, c, s, (float)f);
}

static void op_hue(uint8_t *p, uint32_t w, uint32_t h, uint32_t c, size_t s, double f)
{
    fmt_color_hue(p, w, h, c, s, f);
}

static void op_gray(uint8_t *p, uint32_t w, uint32_t h, uint32_t c, size_t s, double f)
{
    fmt_color_grayscale(p, w, h, c, s);
}

START_TEST(test_ops_pillow)
{
    char dir[1200];
    make_dir(dir, sizeof dir, "ops");
    const struct {
        const char *name;
        op_fn fn;
        double f[8];
        int nf;
    } ops[] = {
        {"brightness", op_brightness, {0.0, 0.3, 0.8, 0.999, 1.0, 1.2, 1.77, 4.5}, 8},
        {"contrast", op_contrast, {0.0, 0.2, 0.8, 1.0, 1.05, 1.2, 2.3, 9.0}, 8},
        {"saturation", op_saturation, {0.0, 0.1, 0.8, 1.0, 1.19, 1.5, 3.0, 7.0}, 8},
        {"hue", op_hue, {-0.5, -0.3, -0.1, -0.001, 0.0, 0.0625, 0.2, 0.5}, 8},
        {"gray", op_gray, {0.0}, 1},
    };
    const uint32_t sizes[][2] = {{1, 1}, {2, 3}, {7, 5}, {17, 13}, {64, 48}, {97, 255}, {224, 224}};
    /* factors as float32 values, as the reader draws them (hue: the float32 draw in double) */
    FILE *list = open_list(dir, "ops.tsv");
    int n = 0;
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (int fi = 0; fi < ops[o].nf; fi++)
            for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
                for (uint32_t c = 1; c <= 3; c += 2) {
                    uint32_t w = sizes[si][0], h = sizes[si][1];
                    size_t bytes = (size_t)w * h * c;
                    uint8_t *img = malloc(bytes);
                    fill_image(img, w, h, c, (int)((si + fi + o) % 4));
                    char in[1400], out[1400];
                    snprintf(in, sizeof in, "%s/in-%d.raw", dir, n);
                    snprintf(out, sizeof out, "%s/want-%d.raw", dir, n);
                    write_file(in, img, bytes);
                    fprintf(list, "%s %a %u %u %u %s %s\n", ops[o].name,
                            (double)(float)ops[o].f[fi], w, h, c, in, out);
                    free(img);
                    n++;
                }
    ck_assert_int_eq(fclose(list), 0);
    if (!run_check("ops", dir))
        return;
    g_rng = 0x9e3779b97f4a7c15ULL;      /* the same images again */
    n = 0;
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (int fi = 0; fi < ops[o].nf; fi++)
            for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
                for (uint32_t c = 1; c <= 3; c += 2) {
                    uint32_t w = sizes[si][0], h = sizes[si][1];
                    size_t bytes = (size_t)w * h * c;
                    char in[1400], out[1400];
                    snprintf(in, sizeof in, "%s/in-%d.raw", dir, n);
                    snprintf(out, sizeof out, "%s/want-%d.raw", dir, n);
                    uint8_t *img = read_file(in, bytes), *want = read_file(out, bytes);
                    /* through a stride wider than the row, to catch stride mistakes; the
                     * plain and the vector path (simd.h) */
                    size_t stride = (size_t)w * c + 5;
                    uint8_t *buf = calloc(stride * h, 1);
                    for (int vec = 0; vec < 2; vec++) {
                        fmt_simd_set(vec);
                        for (uint32_t y = 0; y < h; y++)
                            memcpy(buf + y * stride, img + (size_t)y * w * c, (size_t)w * c);
                        ops[o].fn(buf, w, h, c, stride, (double)(float)ops[o].f[fi]);
                        for (uint32_t y = 0; y < h; y++)
                            for (size_t i = 0; i < (size_t)w * c; i++)
                                tu_check(buf[y * stride + i] == want[(size_t)y * w * c + i],
                                         "%s(%g) on %ux%ux%u (%s path): byte %zu of row %u is "
                                         "%u, torchvision %u", ops[o].name, ops[o].f[fi], w, h,
                                         c, vec ? "vector" : "plain", i, y, buf[y * stride + i],
                                         want[(size_t)y * w * c + i]);
                    }
                    fmt_simd_set(1);
                    free(buf);
                    free(img);
                    free(want);
                    n++;
                }
    fprintf(stderr, "test_augment_read: %d op images equal torchvision's\n", n);
}
END_TEST

/* ---- the draws ---- */

static shr_options base_options(uint64_t seed)
{
    shr_options o;
    shr_options_init(&o);
    o.seed = seed;
    o.width = 32;
    o.height = 24;
    return o;
}

/* The ColorJitter ranges j: brightness, contrast, saturation and hue, each (min, max). */
static void set_jitter(shr_options *o, const double j[8])
{
    memcpy(o->jitter_brightness, j, sizeof o->jitter_brightness);
    memcpy(o->jitter_contrast, j + 2, sizeof o->jitter_contrast);
    memcpy(o->jitter_saturation, j + 4, sizeof o->jitter_saturation);
    memcpy(o->jitter_hue, j + 6, sizeof o->jitter_hue);
}

START_TEST(test_draws_torchvision)
{
    char dir[1200];
    FILE *f = open_case(dir, sizeof dir, "draws", "draws.tsv");
    const double jit[][8] = {
        {0.6, 1.4, 0.6, 1.4, 0.6, 1.4, -0.1, 0.1},          /* ColorJitter(0.4, 0.4, 0.4, 0.1) */
        {1.0, 1.0, 0.0, 3.0, 1.0, 1.0, -0.5, 0.5},          /* brightness and saturation off */
        {0.25, 0.25, 1.0, 1.0, 0.2, 0.9, 0.0, 0.0},         /* fixed brightness; hue off */
        {0.0, 2.0, 0.5, 0.5, 1.0, 1.0, 0.3, 0.3},
    };
    int n = 0;
    for (size_t k = 0; k < 4; k++) {
        shr_options o = base_options(300 + k);
        set_jitter(&o, jit[k]);
        uint32_t counts[4] = {0};
        for (uint64_t i = 0; i < 1500; i++) {
            shr_params p;
            ck_assert_int_eq(shr_draw_params(&o, i % 3, i, 50, 40, &p), 0);
            fprintf(f, "jitter");
            for (int j = 0; j < 8; j++)
                fprintf(f, " %.17g", jit[k][j]);
            fprintf(f, " %u %u %u %u %u %a %a %a %a", p.jitter_order[0], p.jitter_order[1],
                    p.jitter_order[2], p.jitter_order[3], p.jitter, (double)p.brightness,
                    (double)p.contrast, (double)p.saturation, (double)p.hue);
            put_words(f, o.seed, i % 3, i, SHR_SALT_JITTER, 4);
            counts[p.jitter_order[0]]++;
            n++;
        }
        /* the first op of the permutation is uniform over the four */
        for (int j = 0; j < 4; j++)
            ck_assert_msg(counts[j] > 300 && counts[j] < 450, "op %d first %u times of 1500", j,
                          counts[j]);
    }
    const double gray_p[] = {0.1, 0.5, 1.0};
    for (size_t k = 0; k < 3; k++) {
        shr_options o = base_options(400 + k);
        o.grayscale_p = gray_p[k];
        for (uint64_t i = 0; i < 500; i++) {
            shr_params p;
            ck_assert_int_eq(shr_draw_params(&o, 1, i, 50, 40, &p), 0);
            fprintf(f, "gray %.17g %u", gray_p[k], p.gray);
            put_words(f, o.seed, 1, i, SHR_SALT_GRAY, 1);
            n++;
        }
    }
    const double er[][5] = {
        {0.5, 0.02, 0.33, 0.3, 3.3}, {1.0, 0.3, 0.9, 0.1, 10.0}, {1.0, 0.0, 0.05, 1.0, 1.0},
    };
    const uint32_t dims[][2] = {{32, 24}, {224, 224}, {7, 5}, {1, 9}, {176, 176}};
    for (size_t k = 0; k < 3; k++)
        for (size_t d = 0; d < 5; d++) {
            shr_options o = base_options(500 + k);
            o.width = dims[d][0];
            o.height = dims[d][1];
            o.erase_p = er[k][0];
            o.erase_scale[0] = er[k][1];
            o.erase_scale[1] = er[k][2];
            o.erase_ratio[0] = er[k][3];
            o.erase_ratio[1] = er[k][4];
            for (uint64_t i = 0; i < 300; i++) {
                shr_params p;
                ck_assert_int_eq(shr_draw_params(&o, 2, i, 300, 200, &p), 0);
                if (p.erase) {
                    ck_assert_uint_le(p.erase_x + p.erase_w, o.width);
                    ck_assert_uint_le(p.erase_y + p.erase_h, o.height);
                }
                fprintf(f, "erase %.17g %.17g %.17g %.17g %.17g %u %u %u %u %u %u %u", er[k][0],
                        er[k][1], er[k][2], er[k][3], er[k][4], o.width, o.height, p.erase,
                        p.erase_x, p.erase_y, p.erase_w, p.erase_h);
                put_words(f, o.seed, 2, i, SHR_SALT_ERASE, 12);
                n++;
            }
        }
    ck_assert_int_eq(fclose(f), 0);
    run_check("draws", dir);
}
END_TEST

/* ---- whole samples through the reader ---- */

static shr_options jitter_options(uint64_t seed, uint32_t w, uint32_t h)
{
    static const double jitter[8] = {0.6, 1.4, 0.6, 1.4, 0.6, 1.4, -0.1, 0.1};
    shr_options o = reader_options(seed, w, h);
    set_jitter(&o, jitter);
    o.grayscale_p = 0.2;
    o.erase_p = 0.5;
    return o;
}

START_TEST(test_reader_pixels)
{
    char dir[1200];
    FILE *list = open_case(dir, sizeof dir, "pixels", "samples.tsv");
    const struct {
        const char *dir;
        uint32_t w, h;
        shr_filter f;
        double hue;
    } cases[] = {
        {g_rgb, 48, 36, SHR_FILTER_BILINEAR, 0.1},
        {g_rgb, 33, 17, SHR_FILTER_BICUBIC, 0.5},
        {g_rgb, 224, 224, SHR_FILTER_BILINEAR, 0.1},
        {g_rgb, 1, 1, SHR_FILTER_NEAREST, 0.3},
        {g_gray, 48, 36, SHR_FILTER_BILINEAR, 0.1},
        {g_gray, 17, 13, SHR_FILTER_LANCZOS, 0.1},
    };
    shr_dataset *ds[2];
    ck_assert_int_eq(shr_dataset_open(&ds[0], g_rgb, SHR_ACCESS_MMAP, tu_fresh()), 0);
    ck_assert_int_eq(shr_dataset_open(&ds[1], g_gray, SHR_ACCESS_MMAP, tu_fresh()), 0);
    int n = 0, seen[4] = {0};
    rec *all[sizeof cases / sizeof cases[0]];
    size_t nall[sizeof cases / sizeof cases[0]];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        shr_options o = jitter_options(60 + k, cases[k].w, cases[k].h);
        o.filter = cases[k].f;
        o.jitter_hue[0] = -cases[k].hue;
        o.jitter_hue[1] = cases[k].hue;
        o.access = (shr_access)(k % 3);
        size_t one;
        rec *v = record(cases[k].dir, &o, 2, &nall[k], &one);
        all[k] = v;
        shr_dataset *d = ds[cases[k].dir == g_gray];
        for (size_t i = 0; i < nall[k]; i++)
            for (uint32_t j = 0; j < v[i].n; j++) {
                shr_sample st;
                ck_assert_int_eq(shr_dataset_sample(d, (uint64_t)v[i].idx[j], &st, tu_fresh()), 0);
                uint8_t *px = malloc(st.bytes);
                ck_assert_int_eq(shr_dataset_read(d, (uint64_t)v[i].idx[j], px, st.bytes, NULL,
                                                  tu_fresh()),
                                 0);
                char stored[1400], out[1400];
                snprintf(stored, sizeof stored, "%s/stored-%zu-%zu-%u.raw", dir, k, i, j);
                snprintf(out, sizeof out, "%s/want-%zu-%zu-%u.raw", dir, k, i, j);
                write_file(stored, px, st.bytes);
                free(px);
                const shr_params *p = &v[i].params[j];
                fprintf(list, "%u %u %u %d %u %u %u %u %u %u %u %u %u %u %u %u %a %a %a %a %u "
                        "%u %u %u %u %u %s %s\n", st.width, st.height, st.channels,
                        (int)o.filter, o.width, o.height, p->x, p->y, p->w, p->h, p->flip,
                        p->jitter, p->jitter_order[0], p->jitter_order[1], p->jitter_order[2],
                        p->jitter_order[3], (double)p->brightness, (double)p->contrast,
                        (double)p->saturation, (double)p->hue, p->gray, p->erase, p->erase_x,
                        p->erase_y, p->erase_w, p->erase_h, stored, out);
                seen[0] += p->gray;
                seen[1] += p->erase;
                seen[2] += p->flip;
                seen[3] += p->jitter == 15;
                n++;
            }
    }
    ck_assert_int_eq(fclose(list), 0);
    ck_assert_msg(seen[0] > 0 && seen[1] > 0 && seen[2] > 0 && seen[3] > 0,
                  "every op should have run on some sample (%d %d %d %d)", seen[0], seen[1],
                  seen[2], seen[3]);
    if (run_check("reader", dir)) {
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            uint32_t ch = cases[k].dir == g_gray ? 1 : 3;
            size_t one = (size_t)cases[k].w * cases[k].h * ch;
            for (size_t i = 0; i < nall[k]; i++)
                for (uint32_t j = 0; j < all[k][i].n; j++) {
                    char out[1400];
                    snprintf(out, sizeof out, "%s/want-%zu-%zu-%u.raw", dir, k, i, j);
                    uint8_t *want = read_file(out, one);
                    const uint8_t *got = all[k][i].data + one * j;
                    for (size_t b = 0; b < one; b++)
                        tu_check(got[b] == want[b], "case %zu, batch %zu, sample %u (index %"
                                 PRId64 "): byte %zu is %u, torchvision %u", k, i, j,
                                 all[k][i].idx[j], b, got[b], want[b]);
                    free(want);
                }
        }
        fprintf(stderr, "test_augment_read: %d reader samples equal torchvision's\n", n);
    }
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        free_recs(all[k], nall[k]);
    shr_dataset_close(ds[0]);
    shr_dataset_close(ds[1]);
}
END_TEST

/* float32 NCHW normalised and float16: the uint8 sample converted, the erased box holding the
 * value (in delivered units) */
START_TEST(test_float_erase)
{
    shr_options o = jitter_options(77, 40, 30);
    o.erase_p = 0.7;
    size_t nu, one_u;
    rec *u = record(g_rgb, &o, 1, &nu, &one_u);
    shr_options of = o;
    of.dtype = SHR_DTYPE_F32;
    of.layout = SHR_LAYOUT_NCHW;
    of.normalize = SHR_NORM_GIVEN;
    const float mean[3] = {123.675f, 116.28f, 103.53f}, std[3] = {58.395f, 57.12f, 57.375f};
    const float val[3] = {0.5f, -1.25f, 2.0f};
    for (int c = 0; c < 3; c++) {
        of.mean[c] = mean[c];
        of.std[c] = std[c];
        of.erase_value[c] = val[c];
    }
    size_t nf, one_f;
    rec *f = record(g_rgb, &of, 1, &nf, &one_f);
    ck_assert_uint_eq(nu, nf);
    int erased = 0;
    for (size_t i = 0; i < nu; i++)
        for (uint32_t j = 0; j < u[i].n; j++) {
            const shr_params *p = &u[i].params[j];
            ck_assert_mem_eq(p, &f[i].params[j], sizeof *p);
            const uint8_t *a = u[i].data + one_u * j;
            const float *b = (const float *)(f[i].data + one_f * j);
            erased += p->erase;
            for (uint32_t y = 0; y < o.height; y++)
                for (uint32_t x = 0; x < o.width; x++)
                    for (uint32_t c = 0; c < 3; c++) {
                        int in = p->erase && x >= p->erase_x && x < p->erase_x + p->erase_w &&
                                 y >= p->erase_y && y < p->erase_y + p->erase_h;
                        float want = in ? val[c] : ((float)a[((size_t)y * o.width + x) * 3 + c] -
                                                    mean[c]) / std[c];
                        float got = b[((size_t)c * o.height + y) * o.width + x];
                        if (!in)
                            ck_assert_uint_ne(a[((size_t)y * o.width + x) * 3 + c] + 1, 0);
                        ck_assert_msg(memcmp(&got, &want, 4) == 0, "(%u, %u, %u): %a, want %a",
                                      c, y, x, (double)got, (double)want);
                    }
        }
    ck_assert_int_gt(erased, 0);
    free_recs(u, nu);
    free_recs(f, nf);
}
END_TEST

/* the same batches at 1 and 4 threads, in every access mode, and after resumption */
START_TEST(test_determinism)
{
    shr_options o = jitter_options(91, 48, 36);
    o.threads = 1;
    size_t n1, one;
    rec *a = record(g_rgb, &o, 2, &n1, &one);
    for (int acc = 0; acc < 3; acc++) {
        shr_options o4 = o;
        o4.threads = 4;
        o4.access = (shr_access)acc;
        size_t n4;
        rec *b = record(g_rgb, &o4, 2, &n4, &one);
        ck_assert_uint_eq(n1, n4);
        for (size_t i = 0; i < n1; i++) {
            ck_assert_uint_eq(a[i].n, b[i].n);
            ck_assert_mem_eq(a[i].data, b[i].data, one * a[i].n);
            ck_assert_mem_eq(a[i].params, b[i].params, sizeof(shr_params) * a[i].n);
        }
        free_recs(b, n4);
    }
    /* resume at batch 2 of epoch 1 */
    shr_options orr = o;
    orr.epoch = 1;
    orr.cursor = 2;
    orr.threads = 3;
    size_t nr;
    rec *r = record(g_rgb, &orr, 1, &nr, &one);
    size_t per_epoch = n1 / 2;
    ck_assert_uint_eq(nr, per_epoch - 2);
    for (size_t i = 0; i < nr; i++)
        ck_assert_mem_eq(r[i].data, a[per_epoch + 2 + i].data, one * r[i].n);
    free_recs(r, nr);
    free_recs(a, n1);
}
END_TEST

START_TEST(test_bad_options)
{
    shr_options o;
    shr_reader *r;
    const struct {
        int field;
        double lo, hi;
    } ranges[] = {
        {0, -0.1, 1.0}, {0, 1.5, 1.2}, {1, -1, 1}, {2, 0.5, INFINITY}, {3, -0.6, 0.1},
        {3, 0.1, 0.51}, {3, 0.2, 0.1}, {2, NAN, 1},
    };
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        o = jitter_options(1, 32, 24);
        double *f[] = {o.jitter_brightness, o.jitter_contrast, o.jitter_saturation,
                       o.jitter_hue};
        f[ranges[i].field][0] = ranges[i].lo;
        f[ranges[i].field][1] = ranges[i].hi;
        ck_assert_int_eq(shr_open(&r, g_rgb, &o, tu_fresh()), SHR_EINVAL);
        ck_assert_ptr_null(r);
        ck_assert_msg(strstr(tu_msg.text, "jitter") != NULL, "%s",
                      tu_msg.text);
        shr_params p;
        ck_assert_int_eq(shr_draw_params(&o, 0, 0, 10, 10, &p), SHR_EINVAL);
    }
    o = jitter_options(1, 32, 24);
    o.grayscale_p = 1.5;
    ck_assert_int_eq(shr_open(&r, g_rgb, &o, tu_fresh()), SHR_EINVAL);
    ck_assert_ptr_nonnull(strstr(tu_msg.text, "grayscale_p"));
    o = jitter_options(1, 32, 24);
    o.erase_p = -0.1;
    ck_assert_int_eq(shr_open(&r, g_rgb, &o, tu_fresh()), SHR_EINVAL);
    o = jitter_options(1, 32, 24);
    o.erase_scale[1] = 1.2;
    ck_assert_int_eq(shr_open(&r, g_rgb, &o, tu_fresh()), SHR_EINVAL);
    ck_assert_ptr_nonnull(strstr(tu_msg.text, "erase_scale"));
    o = jitter_options(1, 32, 24);
    o.erase_ratio[0] = 0;
    ck_assert_int_eq(shr_open(&r, g_rgb, &o, tu_fresh()), SHR_EINVAL);
    o = jitter_options(1, 32, 24);
    o.erase_value[1] = 0.5f;           /* not a byte, with uint8 output */
    ck_assert_int_eq(shr_open(&r, g_rgb, &o, tu_fresh()), SHR_EINVAL);
    ck_assert_ptr_nonnull(strstr(tu_msg.text, "erase_value"));
    o.dtype = SHR_DTYPE_F32;           /* fine as a float */
    ck_assert_int_eq(shr_open(&r, g_rgb, &o, tu_fresh()), 0);
    shr_close(r);
    /* the defaults change nothing: the same bytes as a reader without these fields set */
    shr_options_init(&o);
    ck_assert(o.jitter_brightness[0] == 1 && o.jitter_brightness[1] == 1 &&
              o.jitter_hue[0] == 0 && o.jitter_hue[1] == 0 && o.grayscale_p == 0 &&
              o.erase_p == 0);
}
END_TEST

static Suite *augment_suite(void)
{
    return TU_SUITE("augment_read", "augment_read", 600, test_hsv_all, test_hsv_paths,
                    test_paths_equal, test_ops_pillow, test_draws_torchvision, test_reader_pixels,
                    test_float_erase, test_determinism, test_bad_options);
}

int main(void)
{
    int rc = build_fixtures();
    return tu_run_fixtures(rc, augment_suite());
}
