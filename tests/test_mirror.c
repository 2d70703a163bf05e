/* test_mirror.c - the horizontal flip of pixel rows (reader/mirror.h), in place and fused into a
 * copy: against a one-pixel-at-a-time reference, for every width from 0 to 100 and some large
 * ones, 1 to 4 channels, through the vector path (where the CPU has AVX2) and the plain one,
 * with the bytes past each row (the stride's padding) and around the copy's destination left
 * alone. */
#include "mirror.h"
#include "simd.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static const uint32_t g_widths_big[] = {127, 128, 129, 224, 511, 512, 640, 1001};

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (uint8_t)(x >> 23);
    }
}

/* pixel x of each output row is pixel w - 1 - x of the input row */
static void reference(uint8_t *out, const uint8_t *in, uint32_t w, uint32_t c)
{
    for (uint32_t x = 0; x < w; x++)
        memcpy(out + (size_t)x * c, in + (size_t)(w - 1 - x) * c, c);
}

static void check_width(uint32_t w, uint32_t c)
{
    const uint32_t h = 3, pad = 7;
    size_t stride = (size_t)w * c + pad, n = stride * h;
    uint8_t *px = malloc(n + 1), *orig = malloc(n + 1), *want = malloc(n + 1);
    uint8_t *dst = malloc((size_t)w * c + 32);
    ck_assert(px && orig && want && dst);
    fill(orig, n, w * 5 + c);
    memcpy(want, orig, n);
    for (uint32_t y = 0; y < h; y++)
        reference(want + y * stride, orig + y * stride, w, c);
    for (int vec = 0; vec <= 1; vec++) {
        fmt_simd_set(vec);
        memcpy(px, orig, n);
        shr_mirror_rows(px, w, h, c, stride);
        ck_assert_msg(memcmp(px, want, n) == 0, "in place: width %u, %u channels, %s path", w,
                      c, vec && fmt_simd() ? "vector" : "plain");
        memset(dst, 0xa5, (size_t)w * c + 32);
        shr_mirror_copy(dst + 16, orig, w, c);
        ck_assert_msg(memcmp(dst + 16, want, (size_t)w * c) == 0,
                      "copy: width %u, %u channels, %s path", w, c,
                      vec && fmt_simd() ? "vector" : "plain");
        for (size_t i = 0; i < 16; i++)
            ck_assert_msg(dst[i] == 0xa5 && dst[16 + (size_t)w * c + i] == 0xa5,
                          "copy: width %u, %u channels: a byte outside the row was written", w,
                          c);
    }
    fmt_simd_set(1);
    free(px);
    free(orig);
    free(want);
    free(dst);
}

START_TEST(test_every_width)
{
    uint32_t c = (uint32_t)_i;
    for (uint32_t w = 0; w <= 100; w++)
        check_width(w, c);
    for (size_t k = 0; k < sizeof g_widths_big / sizeof g_widths_big[0]; k++)
        check_width(g_widths_big[k], c);
}
END_TEST

/* mirroring twice gives the rows back, whatever the path */
START_TEST(test_twice_is_identity)
{
    const uint32_t w = 640, h = 4, c = 3;
    size_t n = (size_t)w * h * c;
    uint8_t *px = malloc(n), *orig = malloc(n);
    ck_assert(px && orig);
    fill(orig, n, 99);
    memcpy(px, orig, n);
    shr_mirror_rows(px, w, h, c, (size_t)w * c);
    ck_assert(memcmp(px, orig, n) != 0);
    shr_mirror_rows(px, w, h, c, (size_t)w * c);
    ck_assert(memcmp(px, orig, n) == 0);
    free(px);
    free(orig);
}
END_TEST

int main(void)
{
    fprintf(stderr, "test_mirror: vector path %s\n", fmt_simd() ? "on" : "not available");
    TCase *tc;
    Suite *s = tu_suite("mirror", "mirror", 0, &tc);
    tcase_add_loop_test(tc, test_every_width, 1, 5);
    tcase_add_test(tc, test_twice_is_identity);
    return tu_run(s);
}
