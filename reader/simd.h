/* simd.h - the AVX2 helpers shared by the augmentations' vector kernels (color.c,
 * autoaugment.c, erase.c, mirror.c), and the switch between those kernels and the plain C paths
 * (which affine.c also hands to formats/warp.c).
 *
 * Internal to libshardread. SHR_AVX2 is defined where the compiler can build AVX2 functions
 * (x86 with GCC or Clang, unless built with -DSHR_NO_SIMD); each such function carries AVX2_FN (the target attribute, without
 * FMA: no multiply-add is ever fused, so float results are those of the plain C code) and runs
 * only where shr_simd() says so.
 */
#ifndef SHR_SIMD_H
#define SHR_SIMD_H

#include <stddef.h>
#include <stdint.h>

#include "shardread.h"

/* Whether the vector kernels run: AVX2 on this CPU, unless the environment variable
 * SHARDREAD_SIMD is "0" when first asked (then every op takes its plain C path). Both paths
 * give the same bytes. shr_simd_set(on) overrides that for the whole process (on only takes
 * where the CPU has AVX2; not to be called while ops run) and returns the new setting: the
 * tests compare the paths with it. */
SHR_INTERNAL int shr_simd(void);
SHR_INTERNAL int shr_simd_set(int on);

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(SHR_NO_SIMD)
#define SHR_AVX2 1
#include <immintrin.h>
#define AVX2_FN __attribute__((target("avx2")))

/* 8 interleaved RGB pixels (24 bytes, read exactly) as three vectors of 32-bit lanes */
AVX2_FN static inline void simd_load_rgb8(const uint8_t *p, __m256i *r, __m256i *g, __m256i *b)
{
    __m128i lo = _mm_loadu_si128((const __m128i *)p);
    __m128i hi = _mm_loadl_epi64((const __m128i *)(p + 16));
    const __m128i rg_lo = _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1);
    const __m128i rg_hi = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, -1, -1, -1, -1, -1, 0, 3,
                                        6);
    const __m128i b_lo = _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                       -1);
    const __m128i b_hi = _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, -1, -1, -1, -1, -1, -1, -1,
                                       -1);
    __m128i rg = _mm_or_si128(_mm_shuffle_epi8(lo, rg_lo), _mm_shuffle_epi8(hi, rg_hi));
    __m128i bb = _mm_or_si128(_mm_shuffle_epi8(lo, b_lo), _mm_shuffle_epi8(hi, b_hi));
    *r = _mm256_cvtepu8_epi32(rg);
    *g = _mm256_cvtepu8_epi32(_mm_srli_si128(rg, 8));
    *b = _mm256_cvtepu8_epi32(bb);
}

/* three vectors of 32-bit lanes (0..255) back as 8 interleaved pixels (24 bytes written) */
AVX2_FN static inline void simd_store_rgb8(uint8_t *p, __m256i r, __m256i g, __m256i b)
{
    /* bytes: r0-3 g0-3 b0-3 b0-3 | r4-7 g4-7 b4-7 b4-7 */
    __m256i x = _mm256_packus_epi16(_mm256_packus_epi32(r, g), _mm256_packus_epi32(b, b));
    __m128i lo = _mm256_castsi256_si128(x), hi = _mm256_extracti128_si256(x, 1);
    const __m128i a = _mm_setr_epi8(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11, -1, -1, -1, -1);
    const __m128i b4 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 1);
    const __m128i c = _mm_setr_epi8(5, 9, 2, 6, 10, 3, 7, 11, -1, -1, -1, -1, -1, -1, -1, -1);
    _mm_storeu_si128((__m128i *)p, _mm_or_si128(_mm_shuffle_epi8(lo, a),
                                                _mm_shuffle_epi8(hi, b4)));
    _mm_storel_epi64((__m128i *)(p + 16), _mm_shuffle_epi8(hi, c));
}

/* 8 single-channel bytes as 32-bit lanes, and back */
AVX2_FN static inline __m256i simd_load8(const uint8_t *p)
{
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

AVX2_FN static inline void simd_store8(uint8_t *p, __m256i v)
{
    __m256i x = _mm256_packus_epi16(_mm256_packus_epi32(v, v), v);
    __m128i lo = _mm256_castsi256_si128(x), hi = _mm256_extracti128_si256(x, 1);
    _mm_storel_epi64((__m128i *)p, _mm_unpacklo_epi32(lo, hi));
}

AVX2_FN static inline __m256i simd_luma8(__m256i r, __m256i g, __m256i b)
{
    __m256i s = _mm256_add_epi32(_mm256_mullo_epi32(r, _mm256_set1_epi32(19595)),
                                 _mm256_mullo_epi32(g, _mm256_set1_epi32(38470)));
    s = _mm256_add_epi32(s, _mm256_mullo_epi32(b, _mm256_set1_epi32(7471)));
    return _mm256_srli_epi32(_mm256_add_epi32(s, _mm256_set1_epi32(0x8000)), 16);
}

/* shr_color_blend of 8 lanes: in1 + alpha * (in2 - in1) in float, clipped, truncated */
AVX2_FN static inline __m256i simd_blend8(__m256i in1, __m256i in2, __m256 alpha)
{
    __m256 t = _mm256_add_ps(_mm256_cvtepi32_ps(in1),
                             _mm256_mul_ps(alpha, _mm256_cvtepi32_ps(_mm256_sub_epi32(in2, in1))));
    t = _mm256_min_ps(_mm256_max_ps(t, _mm256_setzero_ps()), _mm256_set1_ps(255.0f));
    return _mm256_cvttps_epi32(t);
}

#endif

#endif
