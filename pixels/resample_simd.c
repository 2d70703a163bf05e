/* resample_simd.c - the resampler's two passes (see resample.c for the arithmetic) as SSE4.1,
 * AVX2 and AVX-512 code, giving the bytes of the plain C loops (resample_plain.c). resample.c
 * builds the coefficient tables and plans the passes; fmt_rs_h_pass and fmt_rs_v_pass run them
 * on the path its scratch chose (pixels/simd.h).
 *
 * Code paths: the loops are written once with GCC vector extensions and compiled three times,
 * for the baseline, SSE4.1 and AVX2 (function target attributes); the plain path is scalar C
 * (resample_plain.c), which the vector passes also use for what their blocks leave over.
 */
#include "resample_int.h"
#include "simd.h"

#include <string.h>
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#endif

/* the vector types are only used inside functions built for AVX2 / SSE4.1 */
#pragma GCC diagnostic ignored "-Wpsabi"

/* ---- the passes ---- */

/* Vector versions: written once, compiled per instruction set through the callers' target
 * attributes (always_inline makes the compiler generate them inside each caller). */
typedef int32_t v8si __attribute__((vector_size(32)));
typedef int32_t v4si __attribute__((vector_size(16)));
typedef uint8_t v8qu __attribute__((vector_size(8)));

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
/* Only the SSE4.1 and AVX2 paths inline these, so they may use SSE4.1: load8 and store8 are then
 * pmovzxbd and packus, where GCC turns __builtin_convertvector between byte and int vectors into
 * moves of one byte at a time (which made a 300x250 -> 224x224 bilinear resize 1.9x slower). */
#define RS_INLINE static inline __attribute__((always_inline, target("sse4.1")))
#define RS_SSE41_HELPERS 1
#else
#define RS_INLINE static inline __attribute__((always_inline))
#endif

RS_INLINE v8si load8(const uint8_t *p)
{
#ifdef RS_SSE41_HELPERS
    __m128i b = _mm_loadl_epi64((const __m128i *)p);
    v4si lo = (v4si)_mm_cvtepu8_epi32(b), hi = (v4si)_mm_cvtepu8_epi32(_mm_srli_si128(b, 4));
    return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7);
#else
    v8qu b;
    memcpy(&b, p, sizeof b);
    return __builtin_convertvector(b, v8si);
#endif
}

RS_INLINE v8si clip_v8(v8si a)
{
    const v8si zero = {0}, top = {255, 255, 255, 255, 255, 255, 255, 255};
    a >>= RS_BITS;
    a &= ~(a < zero);
    v8si big = a > top;
    return (a & ~big) | (top & big);
}

RS_INLINE void store8(uint8_t *p, v8si a)
{
#ifdef RS_SSE41_HELPERS
    v8si c = clip_v8(a);
    __m128i lo = (__m128i)__builtin_shufflevector(c, c, 0, 1, 2, 3);
    __m128i hi = (__m128i)__builtin_shufflevector(c, c, 4, 5, 6, 7);
    _mm_storel_epi64((__m128i *)p, _mm_packus_epi16(_mm_packus_epi32(lo, hi), _mm_setzero_si128()));
#else
    v8qu b = __builtin_convertvector(clip_v8(a), v8qu);
    memcpy(p, &b, sizeof b);
#endif
}

RS_INLINE void v_vec(const uint8_t *src, size_t sstride, int32_t yoff, size_t bytes,
                     const rs_table *t, uint32_t y0, uint32_t ny, uint8_t *dst, size_t dstride)
{
    const v8si half = {RS_HALF, RS_HALF, RS_HALF, RS_HALF, RS_HALF, RS_HALF, RS_HALF, RS_HALF};
    for (uint32_t i = 0; i < ny; i++) {
        const rs_vrow r = rs_v_row(t, y0 + i, src, sstride, yoff, dst + (size_t)i * dstride);
        size_t x = 0;
        for (; x + 32 <= bytes; x += 32) {
            v8si a0 = half, a1 = half, a2 = half, a3 = half;
            const uint8_t *p = r.base + x;
            for (int32_t y = 0; y < r.n; y++, p += sstride) {
                int32_t c = r.k[y];
                a0 += load8(p) * c;
                a1 += load8(p + 8) * c;
                a2 += load8(p + 16) * c;
                a3 += load8(p + 24) * c;
            }
            store8(r.out + x, a0);
            store8(r.out + x + 8, a1);
            store8(r.out + x + 16, a2);
            store8(r.out + x + 24, a3);
        }
        for (; x + 8 <= bytes; x += 8) {
            v8si a0 = half;
            const uint8_t *p = r.base + x;
            for (int32_t y = 0; y < r.n; y++, p += sstride)
                a0 += load8(p) * r.k[y];
            store8(r.out + x, a0);
        }
        rs_v_bytes(&r, sstride, x, bytes);
    }
}

/* The horizontal pass, vectorised across rows: 8 source rows at a time are first transposed
 * into a strip whose column x holds the 8 rows' pixels at x (8 * ch bytes), so one output
 * pixel of all 8 rows is ch vectors of 8 lanes, each tap one multiply-add per vector. The
 * transposition costs one copy of the columns the window reads; rows left over (fewer than 8)
 * take the plain loop. */
RS_INLINE void h_strip(const uint8_t *src, size_t sstride, uint32_t rows, uint32_t in_w,
                       const uint32_t ch, const rs_table *t, uint32_t x0, uint32_t nx,
                       uint8_t *dst, size_t dstride, uint8_t *strip)
{
    const v8si half = {RS_HALF, RS_HALF, RS_HALF, RS_HALF, RS_HALF, RS_HALF, RS_HALF, RS_HALF};
    /* a column of the strip: 8 rows of ch bytes, plus a spare byte for RGB, which moves 4
     * bytes a pixel (the 4th is overwritten by the next row's, or lands in the spare byte) */
    const size_t colb = 8 * (size_t)ch + (ch == 3);
    int32_t c0 = t->span[2 * x0];
    int32_t c1 = t->span[2 * (x0 + nx - 1)] + t->span[2 * (x0 + nx - 1) + 1];
    for (uint32_t i = 0; i < nx; i++) {
        int32_t a = t->span[2 * (x0 + i)], b = a + t->span[2 * (x0 + i) + 1];
        c0 = a < c0 ? a : c0;
        c1 = b > c1 ? b : c1;
    }
    uint32_t y = 0;
    for (; y + 8 <= rows; y += 8) {
        for (uint32_t r = 0; r < 8; r++) {
            const uint8_t *row = src + (y + r) * sstride + (size_t)c0 * ch;
            uint8_t *d = strip + (size_t)r * ch;
            int32_t x = 0;
            if (ch == 3)
                for (; x + 1 < c1 - c0; x++)
                    memcpy(d + (size_t)x * colb, row + (size_t)x * 3, 4);
            for (; x < c1 - c0; x++)
                memcpy(d + (size_t)x * colb, row + (size_t)x * ch, ch);
        }
        for (uint32_t i = 0; i < nx; i++) {
            uint32_t xx = x0 + i;
            const int32_t *k = t->k + (size_t)xx * t->stride;
            int32_t n = t->span[2 * xx + 1];
            const uint8_t *p = strip + (size_t)(t->span[2 * xx] - c0) * colb;
            v8si a0 = half, a1 = half, a2 = half, a3 = half;
            for (int32_t x = 0; x < n; x++, p += colb) {
                int32_t kt = k[x];
                a0 += load8(p) * kt;
                if (ch > 1)
                    a1 += load8(p + 8) * kt;
                if (ch > 2)
                    a2 += load8(p + 16) * kt;
                if (ch > 3)
                    a3 += load8(p + 24) * kt;
            }
            uint8_t ob[32];
            store8(ob, a0);
            if (ch > 1)
                store8(ob + 8, a1);
            if (ch > 2)
                store8(ob + 16, a2);
            if (ch > 3)
                store8(ob + 24, a3);
            uint8_t *o = dst + y * dstride + (size_t)i * ch;
            if (ch == 3 && i + 1 < nx) {
                /* the 4th byte is pixel i + 1's, written next */
                for (uint32_t r = 0; r < 8; r++)
                    memcpy(o + r * dstride, ob + r * 3, 4);
            } else {
                for (uint32_t r = 0; r < 8; r++)
                    memcpy(o + r * dstride, ob + r * ch, ch);
            }
        }
    }
    if (y < rows)
        rs_h_plain(src + y * sstride, sstride, rows - y, in_w, ch, t, x0, nx, dst + y * dstride,
                   dstride);
}

RS_INLINE void h_vec(const uint8_t *src, size_t sstride, uint32_t rows, uint32_t in_w,
                     uint32_t ch, const rs_table *t, uint32_t x0, uint32_t nx, uint8_t *dst,
                     size_t dstride, uint8_t *strip)
{
    /* constant channel counts, so the copies and the vector count are unrolled */
    switch (ch) {
    case 1:
        h_strip(src, sstride, rows, in_w, 1, t, x0, nx, dst, dstride, strip);
        break;
    case 2:
        h_strip(src, sstride, rows, in_w, 2, t, x0, nx, dst, dstride, strip);
        break;
    case 3:
        h_strip(src, sstride, rows, in_w, 3, t, x0, nx, dst, dstride, strip);
        break;
    default:
        h_strip(src, sstride, rows, in_w, 4, t, x0, nx, dst, dstride, strip);
        break;
    }
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define RS_X86 1
#include <immintrin.h>

/* AVX2 with intrinsics: GCC lowers the byte-to-int conversions of the generic vector code
 * poorly (lane by lane), and these loops are the resampler's whole cost. */
#define RS_AVX2 static inline __attribute__((always_inline, target("avx2")))

RS_AVX2 __m256i ax_load8(const uint8_t *p)
{
    __m128i b;
    memcpy(&b, p, 8);       /* upper half unused */
    return _mm256_cvtepu8_epi32(b);
}

RS_AVX2 __m256i ax_madd(__m256i acc, __m256i v, __m256i k)
{
    return _mm256_add_epi32(acc, _mm256_mullo_epi32(v, k));
}

/* (a >> 22) clamped to 0..255, 8 bytes to p */
RS_AVX2 void ax_store8(uint8_t *p, __m256i a)
{
    a = _mm256_srai_epi32(a, RS_BITS);
    __m256i w = _mm256_packs_epi32(a, a);       /* per 128-bit lane: a0..a3 a0..a3 | a4..a7 .. */
    __m256i b = _mm256_packus_epi16(w, w);      /* bytes, saturated to 0..255 */
    __m256i q = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0));
    uint64_t v = (uint64_t)_mm_cvtsi128_si64(_mm256_castsi256_si128(q));
    memcpy(p, &v, 8);
}

/* The source columns [c0, c1) that outputs x0 .. x0 + nx - 1 of t read */
static inline void window_cols(const rs_table *t, uint32_t x0, uint32_t nx, int32_t *c0,
                               int32_t *c1)
{
    *c0 = *c1 = t->span[2 * x0];
    for (uint32_t i = 0; i < nx; i++) {
        int32_t a = t->span[2 * (x0 + i)], b = a + t->span[2 * (x0 + i) + 1];
        *c0 = a < *c0 ? a : *c0;
        *c1 = b > *c1 ? b : *c1;
    }
}

/* v[r] holds 8 32-bit elements (r, 0..7): afterwards v[c] holds (0..7, c) */
RS_AVX2 void ax_transpose8(__m256i v[8])
{
    __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]), t1 = _mm256_unpackhi_epi32(v[0], v[1]);
    __m256i t2 = _mm256_unpacklo_epi32(v[2], v[3]), t3 = _mm256_unpackhi_epi32(v[2], v[3]);
    __m256i t4 = _mm256_unpacklo_epi32(v[4], v[5]), t5 = _mm256_unpackhi_epi32(v[4], v[5]);
    __m256i t6 = _mm256_unpacklo_epi32(v[6], v[7]), t7 = _mm256_unpackhi_epi32(v[6], v[7]);
    __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
    __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
    v[0] = _mm256_permute2x128_si256(u0, u4, 0x20);
    v[1] = _mm256_permute2x128_si256(u1, u5, 0x20);
    v[2] = _mm256_permute2x128_si256(u2, u6, 0x20);
    v[3] = _mm256_permute2x128_si256(u3, u7, 0x20);
    v[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
    v[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
    v[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
    v[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
}

/* (hi * 2048 + lo) >> 22 of the vpmaddwd sums (lo with the rounding half) */
RS_AVX2 __m256i ax_hilo(__m256i hi, __m256i lo)
{
    return _mm256_srai_epi32(_mm256_add_epi32(_mm256_slli_epi32(hi, 11), lo), RS_BITS);
}

/* 8 rows x 8 RGB pixels (rows r at row[r] + 3 * x) as the strip's 8 columns x..x+7: pixel slots
 * of 4 bytes (the 4th zero), one 8x8 transposition of 32-bit slots */
RS_AVX2 void ax_rgb_block(const uint8_t *const row[8], size_t x, uint8_t *col)
{
    const __m256i sh = _mm256_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1,
                                        0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1);
    __m256i v[8];
    for (int r = 0; r < 8; r++) {
        const uint8_t *p = row[r] + 3 * x;
        __m256i a = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const void *)p)),
            _mm_loadu_si128((const void *)(p + 12)), 1);
        v[r] = _mm256_shuffle_epi8(a, sh);
    }
    ax_transpose8(v);
    for (int r = 0; r < 8; r++)
        _mm256_storeu_si256((void *)(col + 32 * r), v[r]);
}

/* cols RGB pixels of 8 rows (from src, rows sstride apart) as strip columns of 8 4-byte slots
 * (32 bytes a column, the 4th byte of each slot zero) */
RS_AVX2 void ax_rgb_strip(const uint8_t *src, size_t sstride, size_t cols, uint8_t *strip)
{
    const uint8_t *row[8];
    for (uint32_t r = 0; r < 8; r++)
        row[r] = src + r * sstride;
    size_t x = 0;
    /* a block reads 3 * x + 28 bytes of each row */
    for (; x + 10 <= cols; x += 8)
        ax_rgb_block(row, x, strip + x * 32);
    for (; x < cols; x++)
        for (uint32_t r = 0; r < 8; r++) {
            uint8_t *d = strip + x * 32 + (size_t)r * 4;
            memcpy(d, row[r] + 3 * x, 3);
            d[3] = 0;
        }
}

/* The transposed strip of h_strip, with RGB pixels in 4-byte slots (4th byte zero) so that the
 * transposition is of 32-bit units. */
RS_AVX2 void h_strip_avx2(const uint8_t *src, size_t sstride, uint32_t rows, uint32_t in_w,
                          const uint32_t ch, const rs_table *t, uint32_t x0, uint32_t nx,
                          uint8_t *dst, size_t dstride, uint8_t *strip)
{
    const __m256i half = _mm256_set1_epi32(RS_HALF);
    const uint32_t cw = ch == 3 ? 4 : ch;      /* bytes of a pixel slot */
    const size_t colb = 8 * (size_t)cw;
    int32_t c0, c1;
    window_cols(t, x0, nx, &c0, &c1);
    const size_t cols = (size_t)(c1 - c0);
    uint32_t y = 0;
    for (; y + 8 <= rows; y += 8) {
        /* the next 8 rows' window, into the cache while these are computed: short row
         * segments a stride apart are 8 streams too short for the hardware prefetcher, and
         * a source read once (a batch's sample) comes from memory */
        if (y + 16 <= rows)
            for (uint32_t r = 8; r < 16; r++) {
                const char *row = (const char *)(src + (y + r) * sstride + (size_t)c0 * ch);
                for (size_t b = 0; b < cols * ch; b += 64)
                    _mm_prefetch(row + b, _MM_HINT_T0);
                _mm_prefetch(row + cols * ch - 1, _MM_HINT_T0);
            }
        if (ch == 3) {
            ax_rgb_strip(src + y * sstride + (size_t)c0 * 3, sstride, cols, strip);
        } else {
            for (uint32_t r = 0; r < 8; r++) {
                const uint8_t *row = src + (y + r) * sstride + (size_t)c0 * ch;
                uint8_t *d = strip + (size_t)r * ch;
                for (size_t x = 0; x < cols; x++)
                    memcpy(d + x * colb, row + x * ch, ch);
            }
        }
        for (uint32_t i = 0; i < nx; i++) {
            uint32_t xx = x0 + i;
            int32_t n = t->span[2 * xx + 1];
            const uint8_t *p = strip + (size_t)(t->span[2 * xx] - c0) * colb;
            const int32_t *k = t->k + (size_t)xx * t->stride;
            __m256i a0 = half, a1 = half, a2 = half, a3 = half;
            for (int32_t x = 0; x < n; x++, p += colb) {
                __m256i kt = _mm256_set1_epi32(k[x]);
                a0 = ax_madd(a0, ax_load8(p), kt);
                if (cw > 1)
                    a1 = ax_madd(a1, ax_load8(p + 8), kt);
                if (cw > 2)
                    a2 = ax_madd(a2, ax_load8(p + 16), kt);
                if (cw > 3)
                    a3 = ax_madd(a3, ax_load8(p + 24), kt);
            }
            uint8_t ob[32];
            if (cw == 4) {
                /* a0..a3 hold rows 0-1, 2-3, 4-5, 6-7 (4 slots each): clamped to bytes in
                 * one pack, [0 2 4 6 | 1 3 5 7] put back in row order */
                __m256i p01 = _mm256_packs_epi32(_mm256_srai_epi32(a0, RS_BITS),
                                                 _mm256_srai_epi32(a1, RS_BITS));
                __m256i p23 = _mm256_packs_epi32(_mm256_srai_epi32(a2, RS_BITS),
                                                 _mm256_srai_epi32(a3, RS_BITS));
                __m256i b = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(p01, p23),
                                                        _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
                _mm256_storeu_si256((void *)ob, b);
            } else {
                ax_store8(ob, a0);
                if (cw > 1)
                    ax_store8(ob + 8, a1);
                if (cw > 2)
                    ax_store8(ob + 16, a2);
            }
            uint8_t *o = dst + y * dstride + (size_t)i * ch;
            if (ch == 3 && i + 1 < nx) {
                /* the 4th byte lands on pixel i + 1, written next */
                for (uint32_t r = 0; r < 8; r++)
                    memcpy(o + r * dstride, ob + r * 4, 4);
            } else {
                for (uint32_t r = 0; r < 8; r++)
                    memcpy(o + r * dstride, ob + r * cw, ch);
            }
        }
    }
    if (y < rows)
        rs_h_plain(src + y * sstride, sstride, rows - y, in_w, ch, t, x0, nx, dst + y * dstride,
                   dstride);
}

/* RGB with vpmaddwd: the strip's columns (8 rows x 4-byte slots) become pair blocks of 96 bytes,
 * block c holding columns c and c + 1 as int16 pairs for the 24 row-channel values j = 3r + ch:
 * three vectors of 8 lanes, [j 0-3 | j 12-15], [j 4-7 | j 16-19], [j 8-11 | j 20-23], each lane
 * (column c's value, column c + 1's). One vpmaddwd then takes two taps of 8 values, with the
 * coefficients split as k = hi * 2048 + lo (both int16, rs_table.kp): sum(p * k) is
 * 2048 * sum(p * hi) + sum(p * lo), exactly Pillow's int32 sum. An odd tap count pairs the last
 * tap with a coefficient of 0 and the column after the window (zeroed at the strip's end). */
RS_AVX2 void h_rgb_madd(const uint8_t *src, size_t sstride, uint32_t rows, uint32_t in_w,
                        const rs_table *t, uint32_t x0, uint32_t nx, uint8_t *dst,
                        size_t dstride, uint8_t *strip)
{
    const __m256i half = _mm256_set1_epi32(RS_HALF), zero = _mm256_setzero_si256();
    const __m256i compact = _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1,
                                             -1, 0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1,
                                             -1, -1);
    const __m256i slots = _mm256_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1,
                                           0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1);
    int32_t c0, c1;
    window_cols(t, x0, nx, &c0, &c1);
    const size_t cols = (size_t)(c1 - c0);
    /* the slot strip (cols + 1 columns of 32 bytes, the last zero), then the pair blocks */
    uint8_t *pairs = (uint8_t *)(((uintptr_t)(strip + (cols + 1) * 32) + 31) & ~(uintptr_t)31);
    uint32_t y = 0;
    for (; y + 8 <= rows; y += 8) {
        /* the next 8 rows' window comes into the cache while these are computed, a few lines
         * per block of outputs: all at once would fill the line-fill buffers and stall (short
         * row segments a stride apart are too short for the hardware prefetcher, and a sample
         * read once comes from memory) */
        const char *pf_base = (const char *)(src + (y + 8) * sstride + (size_t)c0 * 3);
        const size_t lpr = cols * 3 / 64 + 2;  /* lines a row covers, at most */
        const size_t pf_total = y + 16 <= rows ? 8 * lpr : 0;
        const size_t pf_step = (pf_total + (nx + 7) / 8 - 1) / ((nx + 7) / 8);
        size_t pf = 0;
        ax_rgb_strip(src + y * sstride + (size_t)c0 * 3, sstride, cols, strip);
        _mm256_storeu_si256((void *)(strip + cols * 32), zero);
        __m256i a = _mm256_shuffle_epi8(_mm256_loadu_si256((const void *)strip), compact);
        __m256i alo = _mm256_unpacklo_epi8(a, zero), ahi = _mm256_unpackhi_epi8(a, zero);
        for (size_t c = 0; c < cols; c++) {
            __m256i b = _mm256_shuffle_epi8(
                _mm256_loadu_si256((const void *)(strip + (c + 1) * 32)), compact);
            __m256i blo = _mm256_unpacklo_epi8(b, zero), bhi = _mm256_unpackhi_epi8(b, zero);
            uint8_t *pb = pairs + c * 96;
            _mm256_store_si256((void *)pb, _mm256_unpacklo_epi16(alo, blo));
            _mm256_store_si256((void *)(pb + 32), _mm256_unpackhi_epi16(alo, blo));
            _mm256_store_si256((void *)(pb + 64), _mm256_unpacklo_epi16(ahi, bhi));
            alo = blo;
            ahi = bhi;
        }
        /* 8 outputs at a time: each leaves as 8 rows x 4-byte slots, the 8 are transposed
         * back into rows (8 pixels, 24 bytes a row) and stored a row at a time */
        for (uint32_t i0 = 0; i0 < nx; i0 += 8) {
            uint32_t m = nx - i0 < 8 ? nx - i0 : 8;
            for (size_t e = pf + pf_step < pf_total ? pf + pf_step : pf_total; pf < e; pf++) {
                _mm_prefetch(pf_base + (pf / lpr) * sstride + (pf % lpr) * 64, _MM_HINT_T0);
            }
            __m256i res[8];
            for (uint32_t k = 0; k < 8; k++) {
                if (k >= m) {
                    res[k] = zero;
                    continue;
                }
                uint32_t xx = x0 + i0 + k;
                int32_t n = t->span[2 * xx + 1];
                const uint8_t *p = pairs + (size_t)(t->span[2 * xx] - c0) * 96;
                const uint32_t *kp = t->kp + (size_t)xx * t->stride;
                __m256i h0 = zero, h1 = zero, h2 = zero, l0 = half, l1 = half, l2 = half;
                for (int32_t q = 0; q < n; q += 2, p += 192, kp += 2) {
                    __m256i kh = _mm256_set1_epi32((int)kp[0]), kl = _mm256_set1_epi32((int)kp[1]);
                    __m256i v0 = _mm256_load_si256((const void *)p);
                    __m256i v1 = _mm256_load_si256((const void *)(p + 32));
                    __m256i v2 = _mm256_load_si256((const void *)(p + 64));
                    h0 = _mm256_add_epi32(h0, _mm256_madd_epi16(v0, kh));
                    l0 = _mm256_add_epi32(l0, _mm256_madd_epi16(v0, kl));
                    h1 = _mm256_add_epi32(h1, _mm256_madd_epi16(v1, kh));
                    l1 = _mm256_add_epi32(l1, _mm256_madd_epi16(v1, kl));
                    h2 = _mm256_add_epi32(h2, _mm256_madd_epi16(v2, kh));
                    l2 = _mm256_add_epi32(l2, _mm256_madd_epi16(v2, kl));
                }
                __m256i f0 = ax_hilo(h0, l0), f1 = ax_hilo(h1, l1), f2 = ax_hilo(h2, l2);
                /* bytes: lane 0 j 0..11 (rows 0-3), lane 1 j 12..23 (rows 4-7); then row r in
                 * 32-bit slot r */
                __m256i bb = _mm256_packus_epi16(_mm256_packs_epi32(f0, f1),
                                                 _mm256_packs_epi32(f2, f2));
                res[k] = _mm256_shuffle_epi8(bb, slots);
            }
            /* transpose 8 x 8 slots: row r gets outputs i0 .. i0 + 7 */
            ax_transpose8(res);
            uint8_t *o = dst + y * dstride + (size_t)i0 * 3;
            for (uint32_t r = 0; r < 8; r++) {
                /* 4 pixels of 3 bytes per lane, then 4 spare bytes */
                __m256i c = _mm256_shuffle_epi8(res[r], compact);
                uint8_t *d = o + r * dstride;
                if (i0 + 10 <= nx) {
                    /* the 4 spare bytes land on pixels i0 + 8 and i0 + 9, written next */
                    _mm_storeu_si128((void *)d, _mm256_castsi256_si128(c));
                    _mm_storeu_si128((void *)(d + 12), _mm256_extracti128_si256(c, 1));
                } else {
                    uint8_t b[28];
                    _mm_storeu_si128((void *)b, _mm256_castsi256_si128(c));
                    _mm_storeu_si128((void *)(b + 12), _mm256_extracti128_si256(c, 1));
                    memcpy(d, b, (size_t)m * 3);
                }
            }
        }
    }
    if (y < rows)
        rs_h_plain(src + y * sstride, sstride, rows - y, in_w, 3, t, x0, nx, dst + y * dstride,
                   dstride);
}

__attribute__((target("avx2"))) static void h_avx2(const uint8_t *src, size_t sstride,
                                                   uint32_t rows, uint32_t in_w, uint32_t ch,
                                                   const rs_table *t, uint32_t x0, uint32_t nx,
                                                   uint8_t *dst, size_t dstride, uint8_t *strip)
{
    switch (ch) {
    case 1:
        h_strip_avx2(src, sstride, rows, in_w, 1, t, x0, nx, dst, dstride, strip);
        break;
    case 2:
        h_strip_avx2(src, sstride, rows, in_w, 2, t, x0, nx, dst, dstride, strip);
        break;
    case 3:
        if (t->kp)
            h_rgb_madd(src, sstride, rows, in_w, t, x0, nx, dst, dstride, strip);
        else
            h_strip_avx2(src, sstride, rows, in_w, 3, t, x0, nx, dst, dstride, strip);
        break;
    default:
        h_strip_avx2(src, sstride, rows, in_w, 4, t, x0, nx, dst, dstride, strip);
        break;
    }
}

/* 32 bytes of one output row of the vertical pass with vpmaddwd (as h_rgb_madd): rows y and
 * y + 1 interleaved byte by byte and widened to int16 pairs, two taps a vpmaddwd, the coefficients
 * split as k = hi * 2048 + lo; an odd last tap is paired with zeros. The four vectors hold bytes
 * [0-3 | 16-19], [4-7 | 20-23], [8-11 | 24-27], [12-15 | 28-31], which two packs put back in
 * order. */
RS_AVX2 void v_madd32(const uint8_t *p, size_t sstride, int32_t n, const uint32_t *kp,
                      uint8_t *out)
{
    const __m256i zero = _mm256_setzero_si256(), half = _mm256_set1_epi32(RS_HALF);
    __m256i h0 = zero, h1 = zero, h2 = zero, h3 = zero, l0 = half, l1 = half, l2 = half, l3 = half;
    for (int32_t y = 0; y < n; y += 2, p += 2 * sstride, kp += 2) {
        __m256i a = _mm256_loadu_si256((const void *)p);
        __m256i b = y + 1 < n ? _mm256_loadu_si256((const void *)(p + sstride)) : zero;
        __m256i lo = _mm256_unpacklo_epi8(a, b), hi = _mm256_unpackhi_epi8(a, b);
        __m256i v0 = _mm256_unpacklo_epi8(lo, zero), v1 = _mm256_unpackhi_epi8(lo, zero);
        __m256i v2 = _mm256_unpacklo_epi8(hi, zero), v3 = _mm256_unpackhi_epi8(hi, zero);
        __m256i kh = _mm256_set1_epi32((int)kp[0]), kl = _mm256_set1_epi32((int)kp[1]);
        h0 = _mm256_add_epi32(h0, _mm256_madd_epi16(v0, kh));
        l0 = _mm256_add_epi32(l0, _mm256_madd_epi16(v0, kl));
        h1 = _mm256_add_epi32(h1, _mm256_madd_epi16(v1, kh));
        l1 = _mm256_add_epi32(l1, _mm256_madd_epi16(v1, kl));
        h2 = _mm256_add_epi32(h2, _mm256_madd_epi16(v2, kh));
        l2 = _mm256_add_epi32(l2, _mm256_madd_epi16(v2, kl));
        h3 = _mm256_add_epi32(h3, _mm256_madd_epi16(v3, kh));
        l3 = _mm256_add_epi32(l3, _mm256_madd_epi16(v3, kl));
    }
    __m256i f0 = ax_hilo(h0, l0), f1 = ax_hilo(h1, l1), f2 = ax_hilo(h2, l2), f3 = ax_hilo(h3, l3);
    __m256i r = _mm256_packus_epi16(_mm256_packs_epi32(f0, f1), _mm256_packs_epi32(f2, f3));
    _mm256_storeu_si256((void *)out, r);
}

__attribute__((target("avx2"))) static void v_avx2(const uint8_t *src, size_t sstride,
                                                   int32_t yoff, size_t bytes, const rs_table *t,
                                                   uint32_t y0, uint32_t ny, uint8_t *dst,
                                                   size_t dstride)
{
    const __m256i half = _mm256_set1_epi32(RS_HALF);
    for (uint32_t i = 0; i < ny; i++) {
        const rs_vrow r = rs_v_row(t, y0 + i, src, sstride, yoff, dst + (size_t)i * dstride);
        size_t x = 0;
        if (t->kp)
            for (; x + 32 <= bytes; x += 32)
                v_madd32(r.base + x, sstride, r.n, t->kp + (size_t)(y0 + i) * t->stride,
                         r.out + x);
        for (; x + 32 <= bytes; x += 32) {
            __m256i a0 = half, a1 = half, a2 = half, a3 = half;
            const uint8_t *p = r.base + x;
            for (int32_t y = 0; y < r.n; y++, p += sstride) {
                __m256i kt = _mm256_set1_epi32(r.k[y]);
                a0 = ax_madd(a0, ax_load8(p), kt);
                a1 = ax_madd(a1, ax_load8(p + 8), kt);
                a2 = ax_madd(a2, ax_load8(p + 16), kt);
                a3 = ax_madd(a3, ax_load8(p + 24), kt);
            }
            ax_store8(r.out + x, a0);
            ax_store8(r.out + x + 8, a1);
            ax_store8(r.out + x + 16, a2);
            ax_store8(r.out + x + 24, a3);
        }
        for (; x + 8 <= bytes; x += 8) {
            __m256i a0 = half;
            const uint8_t *p = r.base + x;
            for (int32_t y = 0; y < r.n; y++, p += sstride)
                a0 = ax_madd(a0, ax_load8(p), _mm256_set1_epi32(r.k[y]));
            ax_store8(r.out + x, a0);
        }
        rs_v_bytes(&r, sstride, x, bytes);
    }
}

__attribute__((target("sse4.1"))) static void h_sse41(const uint8_t *src, size_t sstride,
                                                      uint32_t rows, uint32_t in_w, uint32_t ch,
                                                      const rs_table *t, uint32_t x0,
                                                      uint32_t nx, uint8_t *dst, size_t dstride,
                                                      uint8_t *strip)
{
    h_vec(src, sstride, rows, in_w, ch, t, x0, nx, dst, dstride, strip);
}

__attribute__((target("sse4.1"))) static void v_sse41(const uint8_t *src, size_t sstride,
                                                      int32_t yoff, size_t bytes,
                                                      const rs_table *t, uint32_t y0,
                                                      uint32_t ny, uint8_t *dst, size_t dstride)
{
    v_vec(src, sstride, yoff, bytes, t, y0, ny, dst, dstride);
}
#endif

#if defined(RS_X86) && defined(FMT_AVX512)
#define RS_HAVE_AVX512 1
#define RS_AVX512 static inline __attribute__((always_inline, target("avx2,avx512f,avx512bw,avx512vbmi")))

/* v_madd32 on 64 bytes: the same unpacks (they work within 128-bit lanes, so the two packs put
 * the bytes back in order just the same), twice the width */
RS_AVX512 void v_madd64(const uint8_t *p, size_t sstride, int32_t n, const uint32_t *kp,
                        uint8_t *out, __mmask64 m)
{
    const __m512i zero = _mm512_setzero_si512(), half = _mm512_set1_epi32(RS_HALF);
    __m512i h0 = zero, h1 = zero, h2 = zero, h3 = zero, l0 = half, l1 = half, l2 = half, l3 = half;
    for (int32_t y = 0; y < n; y += 2, p += 2 * sstride, kp += 2) {
        __m512i a, b = zero;
        if (m == ~(__mmask64)0) {
            a = _mm512_loadu_si512((const void *)p);
            if (y + 1 < n)
                b = _mm512_loadu_si512((const void *)(p + sstride));
        } else {
            a = _mm512_maskz_loadu_epi8(m, p);
            if (y + 1 < n)
                b = _mm512_maskz_loadu_epi8(m, p + sstride);
        }
        __m512i lo = _mm512_unpacklo_epi8(a, b), hi = _mm512_unpackhi_epi8(a, b);
        __m512i v0 = _mm512_unpacklo_epi8(lo, zero), v1 = _mm512_unpackhi_epi8(lo, zero);
        __m512i v2 = _mm512_unpacklo_epi8(hi, zero), v3 = _mm512_unpackhi_epi8(hi, zero);
        __m512i kh = _mm512_set1_epi32((int)kp[0]), kl = _mm512_set1_epi32((int)kp[1]);
        h0 = _mm512_add_epi32(h0, _mm512_madd_epi16(v0, kh));
        l0 = _mm512_add_epi32(l0, _mm512_madd_epi16(v0, kl));
        h1 = _mm512_add_epi32(h1, _mm512_madd_epi16(v1, kh));
        l1 = _mm512_add_epi32(l1, _mm512_madd_epi16(v1, kl));
        h2 = _mm512_add_epi32(h2, _mm512_madd_epi16(v2, kh));
        l2 = _mm512_add_epi32(l2, _mm512_madd_epi16(v2, kl));
        h3 = _mm512_add_epi32(h3, _mm512_madd_epi16(v3, kh));
        l3 = _mm512_add_epi32(l3, _mm512_madd_epi16(v3, kl));
    }
#define RS_HILO512(h, l) \
    _mm512_srai_epi32(_mm512_add_epi32(_mm512_slli_epi32(h, 11), l), RS_BITS)
    __m512i f0 = RS_HILO512(h0, l0), f1 = RS_HILO512(h1, l1), f2 = RS_HILO512(h2, l2);
    __m512i f3 = RS_HILO512(h3, l3);
    __m512i r = _mm512_packus_epi16(_mm512_packs_epi32(f0, f1), _mm512_packs_epi32(f2, f3));
    if (m == ~(__mmask64)0)
        _mm512_storeu_si512((void *)out, r);
    else
        _mm512_mask_storeu_epi8(out, m, r);
}

/* The vertical pass with AVX-512 where the table has the vpmaddwd split: 64 bytes of a row at a
 * time, the row's last bytes by masked loads and stores; else the AVX2 pass. */
__attribute__((target("avx2,avx512f,avx512bw,avx512vbmi"))) static void
v_avx512(const uint8_t *src, size_t sstride, int32_t yoff, size_t bytes, const rs_table *t,
         uint32_t y0, uint32_t ny, uint8_t *dst, size_t dstride)
{
    if (!t->kp) {
        v_avx2(src, sstride, yoff, bytes, t, y0, ny, dst, dstride);
        return;
    }
    for (uint32_t i = 0; i < ny; i++) {
        const rs_vrow r = rs_v_row(t, y0 + i, src, sstride, yoff, dst + (size_t)i * dstride);
        const uint32_t *kp = t->kp + (size_t)(y0 + i) * t->stride;
        for (size_t x = 0; x < bytes; x += 64) {
            size_t left = bytes - x;
            __mmask64 m = left >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << left) - 1;
            v_madd64(r.base + x, sstride, r.n, kp, r.out + x, m);
        }
    }
    _mm256_zeroupper();
}

/* The horizontal pass with AVX-512 VBMI, a row at a time with no transposition: a row's output
 * values (pixel i, channel c: value i * ch + c) go 16 to a block; the taps of a group of 1, 2 or
 * 4 blocks (as many as fit) lie in a window of at most 64 source bytes, loaded once, from which
 * one vpermb per tap pair gathers each value's two taps as the two int16 halves of its 32-bit
 * lane (the high bytes zeroed by the mask), and vpmaddwd sums them with the coefficients split
 * as in h_rgb_madd (k = hi * 2048 + lo, rs_table.kp): Pillow's int32 sums exactly. The plan of
 * a call (per group: its window; per block: the tap pairs' byte indices and coefficients) is
 * laid out in the strip first. A geometry whose single blocks' windows do not fit 64 bytes (a
 * strong reduction), or a table without the split, takes the AVX2 pass. */
typedef struct {
    uint32_t start;             /* the window's first byte in the row */
    uint32_t pad;
    uint64_t mask;              /* its bytes inside the row */
} rs_h512_group;

/* The tap pairs a call needs (the most taps of its outputs, halved up), and the strip bytes of
 * its plan; 0 where the pass does not apply. */
static size_t h512_plan_bytes(const rs_table *t, uint32_t ch, uint32_t x0, uint32_t nx,
                              uint32_t *pairs)
{
    if (!t->kp || !nx || ch < 1 || ch > 4)
        return 0;
    int32_t most = 1;
    for (uint32_t i = 0; i < nx; i++)
        most = t->span[2 * (x0 + i) + 1] > most ? t->span[2 * (x0 + i) + 1] : most;
    uint32_t p = (uint32_t)(most + 1) / 2;
    size_t values = (size_t)nx * ch, blocks = (values + 15) / 16;
    *pairs = p;
    return blocks * sizeof(rs_h512_group) + 64 + blocks * p * 192;
}

size_t fmt_rs_h_strip_bytes(fmt_rs_path path, const rs_table *t, uint32_t in_w, uint32_t ch,
                            uint32_t x0, uint32_t nx)
{
    uint32_t p;
    (void)in_w;
    return path == FMT_RS_PATH_AVX512 ? h512_plan_bytes(t, ch, x0, nx, &p) : 0;
}

/* Whether every group of g blocks has its taps within 64 bytes of its first value's first tap */
static int h512_groups_fit(const rs_table *t, uint32_t ch, uint32_t x0, size_t values, size_t g)
{
    for (size_t v0 = 0; v0 < values; v0 += 16 * g) {
        size_t start = (size_t)t->span[2 * (x0 + v0 / ch)] * ch;
        size_t last = v0 + 16 * g < values ? v0 + 16 * g - 1 : values - 1;
        uint32_t xx = x0 + (uint32_t)(last / ch);
        /* the first taps never go down (Pillow's windows move right), the last tap of the
         * group's last pixel ends it */
        int32_t end = t->span[2 * xx] + (t->span[2 * xx + 1] > 0 ? t->span[2 * xx + 1] : 1);
        if ((size_t)end * ch - start > 64)
            return 0;
    }
    return 1;
}

/* Lay out the plan in strip (cap bytes); 0 where the pass does not apply. */
static int h512_plan(const rs_table *t, uint32_t in_w, uint32_t ch, uint32_t x0, uint32_t nx,
                     uint8_t *strip, size_t cap, rs_h512_group **hdr, uint8_t **data,
                     uint32_t *pairs, uint32_t *group)
{
    size_t need = h512_plan_bytes(t, ch, x0, nx, pairs);
    if (!need || need > cap)
        return 0;
    uint32_t p = *pairs;
    size_t values = (size_t)nx * ch, blocks = (values + 15) / 16;
    size_t row = (size_t)in_w * ch;
    size_t g = 4;
    while (g > 1 && !h512_groups_fit(t, ch, x0, values, g))
        g /= 2;
    *group = (uint32_t)g;
    *hdr = (rs_h512_group *)(void *)strip;
    *data = (uint8_t *)(((uintptr_t)(strip + blocks * sizeof(rs_h512_group)) + 63) &
                        ~(uintptr_t)63);
    size_t start = 0;
    for (size_t b = 0; b < blocks; b++) {
        size_t v0 = 16 * b;
        if (b % g == 0) {
            start = (size_t)t->span[2 * (x0 + v0 / ch)] * ch;
            rs_h512_group *h = &(*hdr)[b / g];
            h->start = (uint32_t)start;
            h->pad = 0;
            size_t avail = row - start;
            h->mask = avail >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << avail) - 1;
        }
        for (uint32_t q = 0; q < p; q++) {
            uint8_t *idx = *data + (b * p + q) * 192;
            uint32_t *kh = (uint32_t *)(void *)(idx + 64), *kl = (uint32_t *)(void *)(idx + 128);
            memset(idx, 0, 192);
            for (size_t j = 0; j < 16 && v0 + j < values; j++) {
                size_t v = v0 + j;
                uint32_t xx = x0 + (uint32_t)(v / ch), c = (uint32_t)(v % ch);
                int32_t xmin = t->span[2 * xx], n = t->span[2 * xx + 1];
                /* a tap past the count has coefficient 0: its byte is the pair's first */
                int32_t a = 2 * (int32_t)q < n ? 2 * (int32_t)q : 0;
                int32_t bb = 2 * (int32_t)q + 1 < n ? 2 * (int32_t)q + 1 : a;
                size_t ia = (size_t)(xmin + a) * ch + c - start;
                size_t ib = (size_t)(xmin + bb) * ch + c - start;
                if (ia >= 64 || ib >= 64)
                    return 0;
                idx[4 * j] = (uint8_t)ia;
                idx[4 * j + 2] = (uint8_t)ib;
                kh[j] = t->kp[(size_t)xx * t->stride + 2 * q];
                kl[j] = t->kp[(size_t)xx * t->stride + 2 * q + 1];
            }
        }
    }
    return 1;
}

/* A group's window: a plain load where it is whole (masked byte loads are several times slower
 * on some CPUs, AMD Zen) */
RS_AVX512 __m512i h512_window(const uint8_t *row, const rs_h512_group *h)
{
    return h->mask == ~(uint64_t)0 ? _mm512_loadu_si512((const void *)(row + h->start))
                                   : _mm512_maskz_loadu_epi8(h->mask, row + h->start);
}

/* One block's 16 sums from its group's window, (hi * 2048 + lo) >> 22 */
RS_AVX512 __m512i h512_block(__m512i win, const uint8_t *d, uint32_t p)
{
    const __m512i half = _mm512_set1_epi32(RS_HALF);
    __m512i hi = _mm512_setzero_si512(), lo = half;
    for (uint32_t q = 0; q < p; q++, d += 192) {
        __m512i v = _mm512_maskz_permutexvar_epi8(0x5555555555555555ull,
                                                  _mm512_load_si512((const void *)d), win);
        hi = _mm512_add_epi32(hi, _mm512_madd_epi16(v, _mm512_load_si512((const void *)(d + 64))));
        lo = _mm512_add_epi32(lo, _mm512_madd_epi16(v, _mm512_load_si512((const void *)(d + 128))));
    }
    return RS_HILO512(hi, lo);
}

/* Rows of the pass, p tap pairs (a constant where inlined), g blocks a window: the blocks four at
 * a time, their sums packed to 64 bytes in order, the last short group the same with masks. */
RS_AVX512 void h512_rows(const uint8_t *src, size_t sstride, uint32_t rows, size_t lines,
                         const rs_h512_group *hdr, const uint8_t *data, const uint32_t p,
                         const uint32_t g, size_t values, uint8_t *dst, size_t dstride)
{
    /* full: the blocks of whole groups of 64 values (a short last block is never among them) */
    const size_t blocks = (values + 15) / 16, full = values / 64 * 4, iters = (blocks + 3) / 4;
    /* after the packs, dword 4k + j holds block j's lane k: put back in order */
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const size_t bp = (size_t)p * 192;
    for (uint32_t y = 0; y < rows; y++) {
        const uint8_t *row = src + (size_t)y * sstride;
        const char *next = y + 1 < rows ? (const char *)((uintptr_t)(row + sstride) & ~(uintptr_t)63)
                                        : NULL;
        uint8_t *out = dst + (size_t)y * dstride;
        size_t pf = next ? 0 : lines;
        size_t b = 0;
        for (; b < full; b += 4) {
            for (size_t e = (b / 4 + 1) * lines / iters; pf < e; pf++)
                _mm_prefetch(next + 64 * pf, _MM_HINT_T0);
            const uint8_t *d = data + b * bp;
            __m512i win = h512_window(row, &hdr[b / g]);
            __m512i r0 = h512_block(win, d, p);
            if (g == 1)
                win = h512_window(row, &hdr[b + 1]);
            __m512i r1 = h512_block(win, d + bp, p);
            if (g <= 2)
                win = h512_window(row, &hdr[(b + 2) / g]);
            __m512i r2 = h512_block(win, d + 2 * bp, p);
            if (g == 1)
                win = h512_window(row, &hdr[b + 3]);
            __m512i r3 = h512_block(win, d + 3 * bp, p);
            __m512i w = _mm512_packus_epi16(_mm512_packs_epi32(r0, r1),
                                            _mm512_packs_epi32(r2, r3));
            _mm512_storeu_si512((void *)(out + 16 * b), _mm512_permutexvar_epi32(order, w));
        }
        if (b < blocks) {
            for (; pf < lines; pf++)
                _mm_prefetch(next + 64 * pf, _MM_HINT_T0);
            __m512i r[4], win = _mm512_setzero_si512();
            for (size_t k = 0; k < 4; k++) {
                r[k] = _mm512_setzero_si512();
                if (b + k >= blocks)
                    continue;
                if ((b + k) % g == 0)
                    win = h512_window(row, &hdr[(b + k) / g]);
                r[k] = h512_block(win, data + (b + k) * bp, p);
            }
            __m512i w = _mm512_packus_epi16(_mm512_packs_epi32(r[0], r[1]),
                                            _mm512_packs_epi32(r[2], r[3]));
            w = _mm512_permutexvar_epi32(order, w);
            _mm512_mask_storeu_epi8(out + 16 * b, ((__mmask64)1 << (values - 16 * b)) - 1, w);
        }
    }
}

__attribute__((target("avx2,avx512f,avx512bw,avx512vbmi"))) static void
h_avx512(const uint8_t *src, size_t sstride, uint32_t rows, uint32_t in_w, uint32_t ch,
         const rs_table *t, uint32_t x0, uint32_t nx, uint8_t *dst, size_t dstride,
         uint8_t *strip, size_t strip_cap)
{
    rs_h512_group *hdr;
    uint8_t *data;
    uint32_t p, g;
    if (!h512_plan(t, in_w, ch, x0, nx, strip, strip_cap, &hdr, &data, &p, &g)) {
        h_avx2(src, sstride, rows, in_w, ch, t, x0, nx, dst, dstride, strip);
        return;
    }
    size_t values = (size_t)nx * ch;
    /* the next row comes into the cache while this one is computed, its lines spread over the
     * row's iterations (a sample's rows come from memory: read once) */
    const size_t lines = ((size_t)in_w * ch + 63) / 64 + 1;
    /* constant tap pairs and group sizes for the common cases (bilinear enlargements and mild
     * reductions), so that the sums stay in registers */
    if (p == 1 && g == 4)
        h512_rows(src, sstride, rows, lines, hdr, data, 1, 4, values, dst, dstride);
    else if (p == 1 && g == 2)
        h512_rows(src, sstride, rows, lines, hdr, data, 1, 2, values, dst, dstride);
    else if (p == 2)
        h512_rows(src, sstride, rows, lines, hdr, data, 2, g, values, dst, dstride);
    else
        h512_rows(src, sstride, rows, lines, hdr, data, p, g, values, dst, dstride);
    _mm256_zeroupper();
}
#else
size_t fmt_rs_h_strip_bytes(fmt_rs_path path, const rs_table *t, uint32_t in_w, uint32_t ch,
                            uint32_t x0, uint32_t nx)
{
    (void)path, (void)t, (void)in_w, (void)ch, (void)x0, (void)nx;
    return 0;
}
#endif

void fmt_rs_h_pass(fmt_rs_path path, const uint8_t *src, size_t sstride, uint32_t rows,
                   uint32_t in_w, uint32_t ch, const rs_table *t, uint32_t x0, uint32_t nx,
                   uint8_t *dst, size_t dstride, uint8_t *strip, size_t strip_cap)
{
#ifdef RS_HAVE_AVX512
    if (path == FMT_RS_PATH_AVX512)
        return h_avx512(src, sstride, rows, in_w, ch, t, x0, nx, dst, dstride, strip, strip_cap);
#endif
#ifdef RS_X86
    (void)strip_cap;
    if (path == FMT_RS_PATH_AVX2)
        return h_avx2(src, sstride, rows, in_w, ch, t, x0, nx, dst, dstride, strip);
    if (path == FMT_RS_PATH_SSE41)
        return h_sse41(src, sstride, rows, in_w, ch, t, x0, nx, dst, dstride, strip);
#else
    (void)strip;
    (void)strip_cap;
#endif
    rs_h_plain(src, sstride, rows, in_w, ch, t, x0, nx, dst, dstride);
}

void fmt_rs_v_pass(fmt_rs_path path, const uint8_t *src, size_t sstride, int32_t yoff,
                   size_t bytes, const rs_table *t, uint32_t y0, uint32_t ny, uint8_t *dst,
                   size_t dstride)
{
#ifdef RS_HAVE_AVX512
    if (path == FMT_RS_PATH_AVX512)
        return v_avx512(src, sstride, yoff, bytes, t, y0, ny, dst, dstride);
#endif
#ifdef RS_X86
    if (path == FMT_RS_PATH_AVX2)
        return v_avx2(src, sstride, yoff, bytes, t, y0, ny, dst, dstride);
    if (path == FMT_RS_PATH_SSE41)
        return v_sse41(src, sstride, yoff, bytes, t, y0, ny, dst, dstride);
#endif
    rs_v_plain(src, sstride, yoff, bytes, t, y0, ny, dst, dstride);
}
