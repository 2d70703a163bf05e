/* simd.h - the one switch between the vector kernels and the plain C paths, the one probe of
 * the CPU's vector features, and the AVX2 helpers shared by the augmentations' kernels
 * (reader/color.c, autoaugment.c, erase.c, mirror.c).
 *
 * Every kernel family asks here: the resampler (resample.c: its scratch's path), the warps
 * (warp.c, through the `vector` argument its callers take from fmt_simd()), the reader's
 * augmentations and its output transform (reader/transform.c). Every path gives the same bytes;
 * the switch exists for the tests, which compare the paths, and for measurements.
 *
 * FMT_AVX2 is defined where the compiler can build AVX2 functions (x86 with GCC or Clang, unless
 * built with -DFMT_NO_SIMD); each such function carries AVX2_FN (the target attribute, without
 * FMA: no multiply-add is ever fused, so float results are those of the plain C code) and runs
 * only where fmt_simd() says so.
 */
#ifndef FMT_SIMD_H
#define FMT_SIMD_H

#include <stddef.h>
#include <stdint.h>

#include "enhance.h"

/* The CPU's vector features (FMT_CPU_*), probed once. */
#define FMT_CPU_SSE41 1u
#define FMT_CPU_AVX2 2u
#define FMT_CPU_F16C 4u
#define FMT_CPU_AVX512 8u /* AVX-512 F, BW and VBMI */
unsigned fmt_cpu(void);

/* The switch: on, unless fmt_simd_set(0) turned it off, for the whole process (not to be called
 * while ops run); fmt_simd_set returns fmt_simd(). The tests compare the paths with it, and the
 * programs and the Python package turn it off when their environment says plain
 * (fmt_simd_env_plain); the library reads no environment.
 *
 * fmt_simd(): whether the AVX2 kernels run (the switch on and AVX2 on this CPU).
 * fmt_simd_features(): the features the vector kernels may use (fmt_cpu(), or 0 with the switch
 * off): objects that choose their path once (a resampling scratch, an output transform) ask it
 * when they are made. */
int fmt_simd(void);
unsigned fmt_simd_features(void);
int fmt_simd_set(int on);

/* 1 when the environment, read through get (getenv, or a stand-in), asks for the plain C paths:
 * SHARDREAD_SIMD=0, SHARDC_RESAMPLE=plain or SHARDC_TRANSFORM=plain (three names, one switch:
 * each turns every vector kernel off). */
int fmt_simd_env_plain(char *(*get)(const char *));

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(FMT_NO_SIMD)
#define FMT_AVX2 1
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

/* fmt_luma of 8 lanes (enhance.h) */
AVX2_FN static inline __m256i simd_luma8(__m256i r, __m256i g, __m256i b)
{
    __m256i s = _mm256_add_epi32(_mm256_mullo_epi32(r, _mm256_set1_epi32(FMT_LUMA_R)),
                                 _mm256_mullo_epi32(g, _mm256_set1_epi32(FMT_LUMA_G)));
    s = _mm256_add_epi32(s, _mm256_mullo_epi32(b, _mm256_set1_epi32(FMT_LUMA_B)));
    return _mm256_srli_epi32(_mm256_add_epi32(s, _mm256_set1_epi32(0x8000)), 16);
}

/* fmt_color_blend of 8 lanes: in1 + alpha * (in2 - in1) in float, clipped, truncated */
AVX2_FN static inline __m256i simd_blend8(__m256i in1, __m256i in2, __m256 alpha)
{
    __m256 t = _mm256_add_ps(_mm256_cvtepi32_ps(in1),
                             _mm256_mul_ps(alpha, _mm256_cvtepi32_ps(_mm256_sub_epi32(in2, in1))));
    t = _mm256_min_ps(_mm256_max_ps(t, _mm256_setzero_ps()), _mm256_set1_ps(255.0f));
    return _mm256_cvttps_epi32(t);
}

#endif

/* FMT_AVX512: the compiler can build AVX-512 (F, BW, VBMI) functions, marked AVX512_FN (no FMA
 * either); they run only where fmt_simd_avx512() says so: the switch on, the CPU and the OS
 * with AVX-512 F, BW and VBMI, and fmt_simd_avx512_set(0) not called (the tests call it to run the
 * AVX2 kernels on a CPU that has both). */
#if defined(FMT_AVX2) && !defined(FMT_NO_AVX512)
#define FMT_AVX512 1
#define AVX512_FN __attribute__((target("avx2,avx512f,avx512bw,avx512vbmi")))
#endif
int fmt_simd_avx512(void);
int fmt_simd_avx512_set(int on);

#endif
