/* test_color_jitter.c - fmt_color_jitter (pixels/enhance.h), ColorJitter's four ops applied
 * together, against the reference: the ops one after the other (fmt_color_brightness and the
 * others) on the plain path. Each kernel path is checked: the plain one, AVX2 and AVX-512
 * (where the CPU has them): every order and subset of the ops, factors at their edges (0, 1,
 * either side of 1, large), images of odd widths (every tail length) with padded rows whose
 * padding must stay as it was; brightness and contrast on every byte value over many factors,
 * saturation on all 2^24 colours, the hue on all 2^24 colours over the 256 shifts, and the
 * HSV conversions of each path on every input. */
#include "enhance.h"
#include "simd.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

/* the kernel paths: 0 plain, 1 AVX2, 2 AVX-512; whether this CPU has it */
static int use_path(int path)
{
    fmt_simd_avx512_set(path == 2);
    int on = fmt_simd_set(path > 0);
    if (path == 0)
        return 1;
    return path == 1 ? on && !fmt_simd_avx512() : fmt_simd_avx512();
}

/* how many of the paths this build and CPU have: the plain one, AVX2 and AVX-512 */
static int paths_here(void)
{
    int n = 1;
#ifdef FMT_AVX2
    n += (fmt_cpu() & FMT_CPU_AVX2) != 0;
#endif
#ifdef FMT_AVX512
    n += (fmt_cpu() & FMT_CPU_AVX512) != 0;
#endif
    return n;
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (uint8_t)(x >> 23);
    }
}

typedef struct {
    float b, c, s;
    double hue;
} factors;

/* the reference: each op over the whole image in turn, plain path */
static void reference(uint8_t *px, uint32_t w, uint32_t h, uint32_t ch, size_t stride,
                      const uint8_t order[4], unsigned ops, const factors *f)
{
    use_path(0);
    for (int i = 0; i < 4; i++) {
        if (!(ops & (1u << order[i])))
            continue;
        switch (order[i]) {
        case 0:
            fmt_color_brightness(px, w, h, ch, stride, f->b);
            break;
        case 1:
            fmt_color_contrast(px, w, h, ch, stride, f->c);
            break;
        case 2:
            fmt_color_saturation(px, w, h, ch, stride, f->s);
            break;
        default:
            fmt_color_hue(px, w, h, ch, stride, f->hue);
            break;
        }
    }
}

/* the first byte where a and b differ, as "row y, byte x" */
static void assert_same(const uint8_t *want, const uint8_t *got, size_t n, size_t stride,
                        const char *what, int path)
{
    if (memcmp(want, got, n) == 0)
        return;
    size_t i = 0;
    while (want[i] == got[i])
        i++;
    ck_abort_msg("%s, path %d: row %zu byte %zu is %u, the reference gives %u", what, path,
                 i / stride, i % stride, got[i], want[i]);
}

static const factors g_factors[] = {
    {0.0f, 0.0f, 0.0f, -0.5},
    {1.0f, 1.0f, 1.0f, 0.0},
    {0.99999994f, 1.00000012f, 0.99999994f, 0.5},
    {1.00000012f, 0.99999994f, 1.00000012f, -0.001},
    {0.6f, 1.4f, 0.6f, 0.1},
    {1.37f, 0.71f, 1.93f, -0.1},
    {4.5f, 7.0f, 3.0f, 0.3},
    {0.05f, 0.2f, 12.0f, -0.3},
};

/* every order (the 24 permutations) and subset of the ops, each factor set, each path; odd
 * widths give every tail length of both vector widths, the wide ones more than one AVX-512
 * stretch of 32 blocks a row; channels 1 and 3 */
START_TEST(test_orders)
{
    static const uint32_t widths[] = {1, 5, 8, 15, 16, 17, 23, 33, 47, 100, 527, 1100};
    const uint32_t h = 3, pad = 5;
    uint8_t perm[24][4];
    int np = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 4; c++)
                if (a != b && a != c && b != c) {
                    perm[np][0] = (uint8_t)a, perm[np][1] = (uint8_t)b;
                    perm[np][2] = (uint8_t)c, perm[np][3] = (uint8_t)(6 - a - b - c);
                    np++;
                }
    ck_assert_int_eq(np, 24);
    size_t cap = (1100 * 3 + pad) * h;
    uint8_t *orig = malloc(cap), *want = malloc(cap), *got = malloc(cap);
    ck_assert(orig && want && got);
    int checked = 0;
    for (uint32_t ch = 1; ch <= 3; ch += 2)
        for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++) {
            uint32_t w = widths[wi];
            size_t stride = (size_t)w * ch + pad, n = stride * h;
            for (size_t fi = 0; fi < sizeof g_factors / sizeof *g_factors; fi++)
                for (int pi = 0; pi < np; pi++) {
                    /* every subset over the permutations, in turn (all 16 with each width) */
                    unsigned ops = (unsigned)(pi + 24 * (int)fi) % 16u;
                    if (pi == 0)
                        ops = 15;
                    fill(orig, n, (uint32_t)(w * 977 + fi * 31 + (size_t)pi));
                    memcpy(want, orig, n);
                    reference(want, w, h, ch, stride, perm[pi], ops, &g_factors[fi]);
                    for (int path = 0; path < 3; path++) {
                        if (!use_path(path))
                            continue;
                        memcpy(got, orig, n);
                        fmt_color_jitter(got, w, h, ch, stride, perm[pi], ops,
                                         g_factors[fi].b, g_factors[fi].c, g_factors[fi].s,
                                         g_factors[fi].hue);
                        assert_same(want, got, n, stride, "orders", path);
                        checked++;
                    }
                }
        }
    ck_assert_int_ge(checked, 2 * 12 * 8 * 24);
    /* the plain path alone compares the reference with itself: every vector path the CPU has
     * must have been compared too */
    ck_assert_int_eq(checked, 2 * 12 * 8 * 24 * paths_here());
    use_path(2);
    free(orig);
    free(want);
    free(got);
}
END_TEST

/* brightness and contrast: every byte value in every channel (a 256 x 3 image whose rows are
 * each value in R, G, B turns), over 400 factors from 0 to 8 and the edges */
START_TEST(test_every_byte)
{
    const uint32_t w = 256, h = 3;
    size_t stride = 3 * w, n = stride * h;
    uint8_t orig[3 * 256 * 3], want[sizeof orig], got[sizeof orig];
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            for (uint32_t c = 0; c < 3; c++)
                orig[y * stride + 3 * x + c] = (uint8_t)(x + 85 * ((c + y) % 3));
    static const uint8_t order[4] = {0, 1, 2, 3};
    for (int k = 0; k < 410; k++) {
        float f = k < 400 ? (float)k / 50.0f
                          : (float[]){0.99999994f, 1.00000012f, 1e-7f, 255.0f, 256.0f, 0.5f,
                                      1.5f, 2.0f, 1e6f, 0.25f}[k - 400];
        for (unsigned ops = 1; ops <= 3; ops++) {
            factors fs = {f, f, 1.0f, 0.0};
            memcpy(want, orig, n);
            reference(want, w, h, 3, stride, order, ops, &fs);
            for (int path = 1; path < 3; path++) {
                if (!use_path(path))
                    continue;
                memcpy(got, orig, n);
                fmt_color_jitter(got, w, h, 3, stride, order, ops, f, f, 1.0f, 0.0);
                assert_same(want, got, n, stride, ops == 1 ? "brightness" : "contrast", path);
            }
        }
    }
    use_path(2);
}
END_TEST

/* every colour as 256 rows of 65536 pixels */
static uint8_t *all_colours(void)
{
    size_t n = (size_t)1 << 24;
    uint8_t *all = malloc(3 * n);
    ck_assert(all);
    for (size_t v = 0; v < n; v++) {
        all[3 * v] = (uint8_t)(v >> 16);
        all[3 * v + 1] = (uint8_t)(v >> 8);
        all[3 * v + 2] = (uint8_t)v;
    }
    return all;
}

/* saturation on all 2^24 colours: each of 16 factors on its own 2^20 of them; and the hue
 * with each of the 256 shifts on its own 2^16 colours (all of them once over the shifts) */
START_TEST(test_every_colour)
{
    static const float sat[16] = {0.0f, 1e-7f, 0.1f, 0.5f, 0.6f, 0.99999994f, 1.0f, 1.00000012f,
                                  1.19f, 1.4f, 1.5f, 2.0f, 3.0f, 7.0f, 100.0f, 0.3333333f};
    uint8_t *all = all_colours(), *want = malloc(3 << 24), *got = malloc(3 << 24);
    ck_assert(want && got);
    static const uint8_t order[4] = {3, 2, 1, 0};
    memcpy(want, all, 3 << 24);
    for (int k = 0; k < 16; k++) {
        factors fs = {1.0f, 1.0f, sat[k], 0.0};
        reference(want + ((size_t)k * 3 << 20), 1 << 12, 1 << 8, 3, 3 << 12, order, 4u, &fs);
    }
    for (int path = 1; path < 3; path++) {
        if (!use_path(path))
            continue;
        memcpy(got, all, 3 << 24);
        for (int k = 0; k < 16; k++)
            fmt_color_jitter(got + ((size_t)k * 3 << 20), 1 << 12, 1 << 8, 3, 3 << 12, order, 4u,
                             1.0f, 1.0f, sat[k], 0.0);
        assert_same(want, got, 3 << 24, 3 << 12, "saturation", path);
    }
    /* rows of 4093 pixels: every tail length */
    size_t block = 3 << 16;
    memcpy(want, all, 3 << 24);
    for (int pass = 0; pass < 3; pass++) {
        uint8_t *out = pass ? got : want;
        if (pass && !use_path(pass))
            continue;
        if (pass)
            memcpy(got, all, 3 << 24);
        for (int shift = 0; shift < 256; shift++) {
            double f = (shift < 128 ? shift : shift - 256) / 255.0 + (shift < 128 ? 1e-9 : -1e-9);
            factors fs = {1.0f, 1.0f, 1.0f, f};
            uint8_t *p = out + block * (size_t)shift;
            if (!pass) {
                reference(p, 4093, 16, 3, 4093 * 3, order, 8u, &fs);
                reference(p + 4093 * 3 * 16, 65536 - 4093 * 16, 1, 3, 3 * 65536, order, 8u, &fs);
            } else {
                fmt_color_jitter(p, 4093, 16, 3, 4093 * 3, order, 8u, 1.0f, 1.0f, 1.0f, f);
                fmt_color_jitter(p + 4093 * 3 * 16, 65536 - 4093 * 16, 1, 3, 3 * 65536, order, 8u,
                                 1.0f, 1.0f, 1.0f, f);
            }
        }
        if (pass)
            assert_same(want, got, 3 << 24, block, "hue (row: the shift)", pass);
    }
    use_path(2);
    free(all);
    free(want);
    free(got);
}
END_TEST

/* the conversions of each vector path against the plain ones on every input (all 2^24 RGB
 * colours, all 2^24 HSV triples): the AVX-512 path's hsv2rgb makes only one of q and t */
START_TEST(test_conversions)
{
    uint8_t *all = all_colours(), *want = malloc(3 << 24), *got = malloc(3 << 24);
    ck_assert(want && got);
    for (int to_rgb = 0; to_rgb < 2; to_rgb++) {
        use_path(0);
        fmt_color_hsv_rows(all, want, (size_t)1 << 24, to_rgb);
        for (int path = 1; path < 3; path++) {
            if (!use_path(path))
                continue;
            fmt_color_hsv_rows(all, got, (size_t)1 << 24, to_rgb);
            assert_same(want, got, 3 << 24, 3 << 16, to_rgb ? "hsv2rgb" : "rgb2hsv", path);
        }
    }
    use_path(2);
    free(all);
    free(want);
    free(got);
}
END_TEST

static Suite *jitter_suite(void)
{
    return TU_SUITE("color_jitter", "color_jitter", 120, test_orders, test_every_byte,
                    test_every_colour, test_conversions);
}

int main(void)
{
    int avx2 = use_path(1), avx512 = use_path(2);
    fprintf(stderr, "test_color_jitter: AVX2 path %s, AVX-512 path %s\n",
            avx2 ? "tested" : "not available", avx512 ? "tested" : "not available");
    return tu_run(jitter_suite());
}
