/* mirror.c - the horizontal flip of uint8 pixel rows (mirror.h).
 *
 * The plain paths move one pixel at a time. The AVX2 paths (1 and 3 channels, the common cases)
 * reverse blocks of 16 pixels with byte shuffles: 16 bytes for gray; for RGB 48 bytes in three
 * registers, each output register gathered from at most two input ones (the tables below: output
 * byte j of the block is input byte 45 - 3 * (j / 3) + j % 3). In place, a block from each end
 * is loaded before either is stored, and the two ends walk inwards; what is left in the middle
 * (under 32 pixels) and the tails go the plain way. Only bytes move, so both paths agree.
 */
#include "mirror.h"
#include "simd.h"

#include <string.h>

/* ---- plain ---- */

static void swap_px(uint8_t *a, uint8_t *b, uint32_t c)
{
    for (uint32_t k = 0; k < c; k++) {
        uint8_t t = a[k];
        a[k] = b[k];
        b[k] = t;
    }
}

/* pixels [lo, hi) of one row mirrored in place about the row's middle: x <-> lo + hi - 1 - x */
static void mirror_span_plain(uint8_t *row, uint32_t lo, uint32_t hi, uint32_t c)
{
    for (uint32_t a = lo, b = hi; b - a > 1; a++, b--)
        swap_px(row + (size_t)a * c, row + (size_t)(b - 1) * c, c);
}

static void mirror_copy_plain(uint8_t *dst, const uint8_t *src, uint32_t from, uint32_t n,
                              uint32_t c)
{
    for (uint32_t x = from; x < n; x++)
        memcpy(dst + (size_t)x * c, src + (size_t)(n - 1 - x) * c, c);
}

/* ---- AVX2 ---- */

/* for output register k of a reversed 16-pixel RGB block: the shuffle of each input register */
const int8_t shr_mirror_rgb16[3][3][16] = {
    {{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
     {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 14},
     {13, 14, 15, 10, 11, 12, 7, 8, 9, 4, 5, 6, 1, 2, 3, -1}},
    {{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 15, -1},
     {15, -1, 11, 12, 13, 8, 9, 10, 5, 6, 7, 2, 3, 4, -1, 0},
     {-1, 0, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}},
    {{-1, 12, 13, 14, 9, 10, 11, 6, 7, 8, 3, 4, 5, 0, 1, 2},
     {1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
     {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}},
};

/* the reversal of 16 one-byte pixels */
const int8_t shr_mirror_gray16[16] = {15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0};

#ifdef FMT_AVX2

/* the shuffles of a reversed RGB block, in registers: loaded once per row, not per block */
typedef struct {
    __m128i m01, m02, m10, m11, m12, m20, m21, gray;
} rev_masks;

AVX2_FN static inline rev_masks masks_load(void)
{
    rev_masks m;
    m.m01 = _mm_loadu_si128((const __m128i *)shr_mirror_rgb16[0][1]);
    m.m02 = _mm_loadu_si128((const __m128i *)shr_mirror_rgb16[0][2]);
    m.m10 = _mm_loadu_si128((const __m128i *)shr_mirror_rgb16[1][0]);
    m.m11 = _mm_loadu_si128((const __m128i *)shr_mirror_rgb16[1][1]);
    m.m12 = _mm_loadu_si128((const __m128i *)shr_mirror_rgb16[1][2]);
    m.m20 = _mm_loadu_si128((const __m128i *)shr_mirror_rgb16[2][0]);
    m.m21 = _mm_loadu_si128((const __m128i *)shr_mirror_rgb16[2][1]);
    m.gray = _mm_loadu_si128((const __m128i *)shr_mirror_gray16);
    return m;
}

/* 16 pixels at s, reversed, into v (c == 1: v[0]; c == 3: v[0..2]; the tables' all-empty
 * shuffles left out) */
AVX2_FN static inline void rev16_load(const uint8_t *s, uint32_t c, const rev_masks *m,
                                      __m128i v[3])
{
    __m128i a = _mm_loadu_si128((const __m128i *)s);
    if (c == 1) {
        v[0] = _mm_shuffle_epi8(a, m->gray);
        return;
    }
    __m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
    __m128i d = _mm_loadu_si128((const __m128i *)(s + 32));
    v[0] = _mm_or_si128(_mm_shuffle_epi8(b, m->m01), _mm_shuffle_epi8(d, m->m02));
    v[1] = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, m->m10), _mm_shuffle_epi8(b, m->m11)),
                        _mm_shuffle_epi8(d, m->m12));
    v[2] = _mm_or_si128(_mm_shuffle_epi8(a, m->m20), _mm_shuffle_epi8(b, m->m21));
}

AVX2_FN static inline void rev16_store(uint8_t *d, uint32_t c, const __m128i v[3])
{
    _mm_storeu_si128((__m128i *)d, v[0]);
    if (c == 3) {
        _mm_storeu_si128((__m128i *)(d + 16), v[1]);
        _mm_storeu_si128((__m128i *)(d + 32), v[2]);
    }
}

/* c is 1 or 3; the callers pass a constant, so each gets its own loop */
AVX2_FN static inline void mirror_row_avx2(uint8_t *row, uint32_t n, uint32_t c,
                                           const rev_masks *m)
{
    uint32_t a = 0, b = n;      /* [a, b): not yet mirrored; a and b move by 16 together */
    while (b - a >= 32) {
        __m128i lv[3], rv[3];
        rev16_load(row + (size_t)a * c, c, m, lv);
        rev16_load(row + (size_t)(b - 16) * c, c, m, rv);
        rev16_store(row + (size_t)a * c, c, rv);
        rev16_store(row + (size_t)(b - 16) * c, c, lv);
        a += 16;
        b -= 16;
    }
    mirror_span_plain(row, a, b, c);
}

AVX2_FN static inline uint32_t mirror_copy_avx2(uint8_t *dst, const uint8_t *src, uint32_t n,
                                                uint32_t c, const rev_masks *m)
{
    uint32_t x = 0;
    for (; x + 16 <= n; x += 16) {
        __m128i v[3];
        rev16_load(src + (size_t)(n - 16 - x) * c, c, m, v);
        rev16_store(dst + (size_t)x * c, c, v);
    }
    return x;
}

AVX2_FN static void mirror_rows_avx2(uint8_t *px, uint32_t width, uint32_t height,
                                     uint32_t c, size_t stride)
{
    rev_masks m = masks_load();
    for (uint32_t y = 0; y < height; y++) {
        if (c == 3)
            mirror_row_avx2(px + (size_t)y * stride, width, 3, &m);
        else
            mirror_row_avx2(px + (size_t)y * stride, width, 1, &m);
    }
}

AVX2_FN static uint32_t mirror_copy_any_avx2(uint8_t *dst, const uint8_t *src, uint32_t n,
                                             uint32_t c)
{
    rev_masks m = masks_load();
    return c == 3 ? mirror_copy_avx2(dst, src, n, 3, &m) : mirror_copy_avx2(dst, src, n, 1, &m);
}
#endif

/* ---- the API ---- */

void shr_mirror_rows(uint8_t *px, uint32_t width, uint32_t height, uint32_t channels,
                     size_t stride)
{
#ifdef FMT_AVX2
    if ((channels == 3 || channels == 1) && fmt_simd()) {
        mirror_rows_avx2(px, width, height, channels, stride);
        return;
    }
#endif
    for (uint32_t y = 0; y < height; y++)
        mirror_span_plain(px + (size_t)y * stride, 0, width, channels);
}

void shr_mirror_copy(uint8_t *dst, const uint8_t *src, uint32_t n, uint32_t channels)
{
    uint32_t x = 0;
#ifdef FMT_AVX2
    if ((channels == 3 || channels == 1) && fmt_simd())
        x = mirror_copy_any_avx2(dst, src, n, channels);
#endif
    mirror_copy_plain(dst, src, x, n, channels);
}
