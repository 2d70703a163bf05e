/* transform.c - the RandomResizedCrop draw (torchvision's arithmetic, our words) and the output
 * kernels (uint8 HWC -> uint8/float32/float16, HWC/CHW, normalised, mirrored).
 *
 * Exactness of the draw. torchvision's get_params mixes float32 tensor arithmetic with Python
 * doubles, and a box that is off by one pixel gives other pixels, so every step here has the type
 * torch gives it: the uniform draws are torch's float32 uniform_ (an FMA of the 24-bit fraction,
 * measured against torch's own generator), the log of the ratio bounds and the exp of the drawn
 * log-ratio are torch's float32 log and exp (SLEEF's algorithms with FMA, which torch runs for
 * tensors of any size on x86-64, and which differ from libm's expf in the last bit for about one
 * value in ten), the products, square roots and round() are doubles with ties to even. The
 * floating point contraction is off (C11 mode; the pragma for compilers that contract by default)
 * so every fmaf below is one and nothing else is.
 *
 * The output kernels compute ((float)x - mean) / std with an IEEE division on every path: the
 * AVX2 path divides 8 lanes at a time (the AVX-512 one, for float32 CHW RGB, 16), the plain path
 * one value at a time, and all round the same way, so the bytes are equal; float16 is vcvtps2ph with round-to-nearest-even on one side
 * and shr_tf_half on the other.
 */
#include "transform.h"
#include "mirror.h"

#include "sampler.h"
#include "simd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#if defined(__x86_64__) || defined(__i386__)
#define SHR_TF_X86 1
#include <immintrin.h>
#endif

/* ---- torch's float32 exp and log ---- */

float shr_tf_torch_expf(float d)
{
    /* Cody-Waite reduction by ln 2 in two parts, then a degree-6 polynomial, all in float32
     * with fused multiply-adds */
    if (d < -104.0f)
        return 0.0f;
    if (d > 100.0f)
        return INFINITY;
    float q = rintf(d * 1.442695040888963407359924681001892137426645954152985934135449406931f);
    float s = fmaf(q, -0.693145751953125f, d);
    s = fmaf(q, -1.428606765330187045e-06f, s);
    float u = 0.000198527617612853646278381f;
    u = fmaf(u, s, 0.00139304355252534151077271f);
    u = fmaf(u, s, 0.00833336077630519866943359f);
    u = fmaf(u, s, 0.0416664853692054748535156f);
    u = fmaf(u, s, 0.166666671633720397949219f);
    u = fmaf(u, s, 0.5f);
    u = 1.0f + fmaf(s * s, u, s);
    return ldexpf(u, (int)q);
}

/* pairs of floats holding one value as hi + lo, for the log's extra precision */
typedef struct {
    float hi, lo;
} f2;

static f2 f2_sum(float x, float y)          /* exact x + y */
{
    float s = x + y, v = s - x;
    return (f2){ s, (x - (s - v)) + (y - v) };
}

static f2 f2_add(f2 x, f2 y)
{
    float s = x.hi + y.hi;
    return (f2){ s, x.hi - s + y.hi + x.lo + y.lo };
}

static f2 f2_add1(f2 x, float y)
{
    float s = x.hi + y;
    return (f2){ s, x.hi - s + y + x.lo };
}

static f2 f2_mul1(f2 x, float y)
{
    float s = x.hi * y;
    return (f2){ s, fmaf(x.lo, y, fmaf(x.hi, y, -s)) };
}

static f2 f2_div(f2 n, f2 d)
{
    float t = 1.0f / d.hi, s = n.hi * t;
    float u = fmaf(t, n.hi, -s);
    float v = fmaf(-d.lo, t, fmaf(-d.hi, t, 1.0f));
    return (f2){ s, fmaf(s, v, fmaf(n.lo, t, u)) };
}

static int f32_bits_exp(float d)
{
    uint32_t b;
    memcpy(&b, &d, 4);
    return (int)((b >> 23) & 0xff) - 0x7f;
}

static float f32_scale(float d, int e)      /* d * 2^e by the exponent field (no over/underflow) */
{
    uint32_t b;
    memcpy(&b, &d, 4);
    b += (uint32_t)e << 23;
    memcpy(&d, &b, 4);
    return d;
}

float shr_tf_torch_logf(float d)
{
    if (isnan(d) || d < 0)
        return NAN;
    if (d == 0)
        return -INFINITY;
    if (isinf(d))
        return INFINITY;
    /* d = m * 2^e with m in [0.75, 1.5); log d = e log 2 + 2 atanh((m - 1) / (m + 1)) */
    int tiny = d < 1.17549435e-38f;
    if (tiny)
        d *= 18446744073709551616.0f;      /* 2^64 */
    int e = f32_bits_exp(d * (1.0f / 0.75f));
    float m = f32_scale(d, -e);
    if (tiny)
        e -= 64;
    f2 s = f2_mul1((f2){ 0.69314718246459960938f, -1.904654323148236017e-09f }, (float)e);
    f2 x = f2_div(f2_sum(-1.0f, m), f2_sum(1.0f, m));
    float x2 = x.hi * x.hi;
    float t = 0.3027294874e+0f;
    t = fmaf(t, x2, 0.3996108174e+0f);
    t = fmaf(t, x2, 0.6666694880e+0f);
    s = f2_add(s, (f2){ x.hi * 2, x.lo * 2 });
    s = f2_add1(s, x2 * x.hi * t);
    return s.hi + s.lo;
}

/* ---- RandomResizedCrop ---- */

void shr_tf_rrc_init(shr_tf_rrc *c, const double scale[2], const double ratio[2])
{
    for (int i = 0; i < 2; i++) {
        c->scale[i] = scale[i];
        c->ratio[i] = ratio[i];
        c->scale_f[i] = (float)scale[i];
        c->log_ratio[i] = shr_tf_torch_logf((float)ratio[i]);
    }
}

float shr_tf_uniform(uint32_t word, float lo, float hi)
{
    float x = (float)(word & 0xffffffu) * 0x1p-24f;
    return fmaf(x, hi - lo, lo);
}

uint32_t shr_tf_word(uint64_t seed, uint64_t epoch, uint64_t index, uint32_t salt, uint32_t k)
{
    uint64_t h = shr_mix(seed, epoch, index, (uint64_t)salt + k / 2);
    return (uint32_t)(k % 2 ? h >> 32 : h);
}

static uint32_t rrc_word(uint64_t seed, uint64_t epoch, uint64_t index, uint32_t k)
{
    return shr_tf_word(seed, epoch, index, SHR_SALT_RRC, k);
}

void shr_tf_rrc_box(const shr_tf_rrc *c, uint64_t seed, uint64_t epoch, uint64_t index,
                    uint32_t src_w, uint32_t src_h, shr_params *p)
{
    p->src_w = src_w;
    p->src_h = src_h;
    double area = (double)src_h * src_w;
    for (uint32_t a = 0; a < 10; a++) {
        /* each attempt's four words come from two hashes; the row and column words are only
         * needed when the box fits */
        uint64_t h0 = shr_mix(seed, epoch, index, SHR_SALT_RRC + 2 * a);
        double target = area * (double)shr_tf_uniform((uint32_t)h0, c->scale_f[0], c->scale_f[1]);
        double aspect = (double)shr_tf_torch_expf(shr_tf_uniform((uint32_t)(h0 >> 32),
                                                                c->log_ratio[0], c->log_ratio[1]));
        double w = rint(sqrt(target * aspect)), h = rint(sqrt(target / aspect));
        if (w > 0 && w <= src_w && h > 0 && h <= src_h) {
            p->w = (uint32_t)w;
            p->h = (uint32_t)h;
            p->y = rrc_word(seed, epoch, index, 4 * a + 2) % (src_h - p->h + 1);
            p->x = rrc_word(seed, epoch, index, 4 * a + 3) % (src_w - p->w + 1);
            return;
        }
    }
    double in_ratio = (double)src_w / (double)src_h;
    double rmin = fmin(c->ratio[0], c->ratio[1]), rmax = fmax(c->ratio[0], c->ratio[1]);
    uint32_t w = src_w, h = src_h;
    if (in_ratio < rmin)
        h = (uint32_t)rint((double)w / rmin);
    else if (in_ratio > rmax)
        w = (uint32_t)rint((double)h * rmax);
    /* rounding can reach 0 (ratios far from the image's) or, with a ratio bound just below the
     * image's, not at all; torchvision would fail on an empty box, we keep at least a pixel */
    if (w < 1)
        w = 1;
    if (h < 1)
        h = 1;
    p->w = w;
    p->h = h;
    p->x = (src_w - w) / 2;
    p->y = (src_h - h) / 2;
}

int shr_tf_bernoulli(uint32_t w, double p)
{
    return (float)(w & 0xffffffu) * 0x1p-24f < (float)p;
}

/* ---- output kernels ---- */

size_t shr_tf_elem_size(shr_dtype d)
{
    return d == SHR_DTYPE_F32 ? 4 : d == SHR_DTYPE_F16 ? 2 : 1;
}

uint16_t shr_tf_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u)                              /* inf or nan (quiet, payload kept) */
        return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 | (ax >> 13 & 0x3ff) : 0));
    if (ax >= 0x477ff000u)                              /* rounds to >= 65520: infinity */
        return (uint16_t)(sign | 0x7c00);
    if (ax < 0x38800000u) {                             /* below 2^-14: a subnormal half */
        if (ax < 0x33000000u)                           /* below 2^-25: rounds to 0 */
            return sign;
        uint32_t e = ax >> 23, m = (ax & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e;                       /* m * 2^(e - 150) in units of 2^-24 */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1)))
            q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = ax - 0x38000000u;                      /* rebias the exponent by 127 - 15 */
    uint32_t q = r >> 13, rem = r & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (q & 1)))
        q++;                                            /* may carry into the exponent: right */
    return (uint16_t)(sign | q);
}

static int cpu_has_avx2(unsigned features)
{
#if SHR_TF_X86 && defined(__GNUC__)
    return (features & FMT_CPU_AVX2) && (features & FMT_CPU_F16C);
#else
    (void)features;
    return 0;
#endif
}

static int cpu_has_avx512(unsigned features)
{
#ifdef FMT_AVX512
    return cpu_has_avx2(features) && (features & FMT_CPU_AVX512);
#else
    (void)features;
    return 0;
#endif
}

void shr_tf_out_init(shr_tf_out *o, shr_dtype dtype, shr_layout layout, uint32_t width,
                     uint32_t height, uint32_t channels)
{
    memset(o, 0, sizeof *o);
    o->dtype = dtype;
    o->layout = layout;
    o->width = width;
    o->height = height;
    o->channels = channels;
    for (int c = 0; c < 4; c++) {
        o->mean[c] = 0.0f;
        o->std[c] = 1.0f;
    }
    o->unit = 1.0f;
    unsigned f = fmt_simd_features();
    o->path = !cpu_has_avx2(f) ? SHR_TF_PLAIN
              : cpu_has_avx512(f) && fmt_simd_avx512() ? SHR_TF_AVX512 : SHR_TF_AVX2;
}

int shr_tf_out_set_path(shr_tf_out *o, shr_tf_path path)
{
    if ((path == SHR_TF_AVX2 && !cpu_has_avx2(fmt_cpu())) ||
        (path == SHR_TF_AVX512 && !cpu_has_avx512(fmt_cpu())) || (unsigned)path > SHR_TF_AVX512)
        return -1;
    o->path = path;
    return 0;
}

/* x as a float32, divided by the unit (ToTensor's / 255) where there is one */
static inline float unit1(const shr_tf_out *o, uint8_t v)
{
    return o->unit != 1.0f ? (float)v / o->unit : (float)v;
}

/* One element at position e (in elements) of dst. */
static inline void put1(const shr_tf_out *o, void *dst, size_t e, uint8_t v, uint32_t c)
{
    switch (o->dtype) {
    case SHR_DTYPE_U8:
        ((uint8_t *)dst)[e] = v;
        break;
    case SHR_DTYPE_F32:
        ((float *)dst)[e] = (unit1(o, v) - o->mean[c]) / o->std[c];
        break;
    case SHR_DTYPE_F16:
        ((uint16_t *)dst)[e] = shr_tf_half((unit1(o, v) - o->mean[c]) / o->std[c]);
        break;
    }
}

/* Pixels [x0, x1) of row y, one element at a time: the plain path, and the AVX2 path's tails. */
static void store_span(const shr_tf_out *o, const uint8_t *row, uint32_t y, uint32_t x0,
                       uint32_t x1, int mirror, void *dst)
{
    uint32_t W = o->width, C = o->channels;
    size_t plane = (size_t)W * o->height;
    for (uint32_t x = x0; x < x1; x++) {
        uint32_t dx = mirror ? W - 1 - x : x;
        for (uint32_t c = 0; c < C; c++) {
            size_t e = o->layout == SHR_LAYOUT_NHWC ? ((size_t)y * W + dx) * C + c
                                                    : c * plane + (size_t)y * W + dx;
            put1(o, dst, e, row[(size_t)x * C + c], c);
        }
    }
}

#if SHR_TF_X86 && defined(__GNUC__)

/* pshufb masks (-1: zero). deint3[c][b]: channel c's bytes of 16 RGB pixels from input block b
 * (bytes 16b..16b+15 of the 48). The mirror's reversals of 16 pixels: shr_mirror_rgb16 and
 * shr_mirror_gray16 (mirror.h). */
static const int8_t deint3[3][3][16] = {
    {
        {0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
        {-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1},
        {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13},
    },
    {
        {1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
        {-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1},
        {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14},
    },
    {
        {2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
        {-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1},
        {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15},
    },
};

#define TF_AVX2_FN __attribute__((target("avx2,f16c")))

TF_AVX2_FN static inline __m128i mask(const int8_t *m)
{
    return _mm_loadu_si128((const __m128i *)m);
}

TF_AVX2_FN static inline __m128i shuf3(__m128i a, __m128i b, __m128i c, const int8_t m[3][16])
{
    return _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, mask(m[0])),
                                     _mm_shuffle_epi8(b, mask(m[1]))),
                        _mm_shuffle_epi8(c, mask(m[2])));
}

/* 8 values (bytes) -> ((float)x [/ unit] - m) / s, in float32 lanes */
TF_AVX2_FN static inline __m256 norm8(const shr_tf_out *o, __m128i v8, __m256 m, __m256 s)
{
    __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v8));
    if (o->unit != 1.0f)
        f = _mm256_div_ps(f, _mm256_set1_ps(o->unit));
    return _mm256_div_ps(_mm256_sub_ps(f, m), s);
}

/* 16 bytes v to 16 elements at dst (element offset e), lanes 0..7 normalised with (m0, s0),
 * lanes 8..15 with (m1, s1) */
TF_AVX2_FN static inline void emit16(const shr_tf_out *o, void *dst, size_t e, __m128i v, __m256 m0,
                                  __m256 s0, __m256 m1, __m256 s1)
{
    if (o->dtype == SHR_DTYPE_U8) {
        _mm_storeu_si128((__m128i *)((uint8_t *)dst + e), v);
        return;
    }
    /* Float samples are 2 or 4 times the bytes of the uint8 ones and go to a batch far larger
     * than the caches: streaming stores, where aligned, skip reading every line before writing
     * it, and leave the caches to the source pixels. shr_tf_store fences them. */
    __m256 lo = norm8(o, v, m0, s0), hi = norm8(o, _mm_srli_si128(v, 8), m1, s1);
    if (o->dtype == SHR_DTYPE_F32) {
        float *f = (float *)dst + e;
        if (((uintptr_t)f & 31) == 0) {
            _mm256_stream_ps(f, lo);
            _mm256_stream_ps(f + 8, hi);
        } else {
            _mm256_storeu_ps(f, lo);
            _mm256_storeu_ps(f + 8, hi);
        }
    } else {
        __m128i a = _mm256_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT);
        __m128i b = _mm256_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT);
        uint16_t *h = (uint16_t *)dst + e;
        if (((uintptr_t)h & 15) == 0) {
            _mm_stream_si128((__m128i *)h, a);
            _mm_stream_si128((__m128i *)(h + 8), b);
        } else {
            _mm_storeu_si128((__m128i *)h, a);
            _mm_storeu_si128((__m128i *)(h + 8), b);
        }
    }
}

TF_AVX2_FN static void store_avx2_rgb(const shr_tf_out *o, const uint8_t *src, size_t stride,
                                   int mirror, void *dst)
{
    uint32_t W = o->width, H = o->height;
    size_t plane = (size_t)W * H;
    const __m128i rev1 = mask(shr_mirror_gray16);
    __m256 mc[3], sc[3], mp[3], sp[3];
    for (int c = 0; c < 3; c++) {
        mc[c] = _mm256_set1_ps(o->mean[c]);
        sc[c] = _mm256_set1_ps(o->std[c]);
        /* interleaved lanes starting at channel c: c, c+1, c+2, c, ... */
        float mm[8], ss[8];
        for (int k = 0; k < 8; k++) {
            mm[k] = o->mean[(c + k) % 3];
            ss[k] = o->std[(c + k) % 3];
        }
        mp[c] = _mm256_loadu_ps(mm);
        sp[c] = _mm256_loadu_ps(ss);
    }
    for (uint32_t y = 0; y < H; y++) {
        const uint8_t *row = src + (size_t)y * stride;
        uint32_t x = 0;
        for (; x + 16 <= W; x += 16) {
            const uint8_t *p = row + (size_t)x * 3;
            __m128i a = _mm_loadu_si128((const __m128i *)p);
            __m128i b = _mm_loadu_si128((const __m128i *)(p + 16));
            __m128i c = _mm_loadu_si128((const __m128i *)(p + 32));
            uint32_t dx = mirror ? W - 16 - x : x;
            if (o->layout == SHR_LAYOUT_NCHW) {
                for (int ch = 0; ch < 3; ch++) {
                    __m128i v = shuf3(a, b, c, deint3[ch]);
                    if (mirror)
                        v = _mm_shuffle_epi8(v, rev1);
                    emit16(o, dst, ch * plane + (size_t)y * W + dx, v, mc[ch], sc[ch], mc[ch],
                           sc[ch]);
                }
            } else {
                __m128i v0 = a, v1 = b, v2 = c;
                if (mirror) {
                    v0 = shuf3(a, b, c, shr_mirror_rgb16[0]);
                    v1 = shuf3(a, b, c, shr_mirror_rgb16[1]);
                    v2 = shuf3(a, b, c, shr_mirror_rgb16[2]);
                }
                size_t e = ((size_t)y * W + dx) * 3;
                /* element offsets 0, 8, 16, 24, 32, 40 start at channels 0, 2, 1, 0, 2, 1 */
                emit16(o, dst, e, v0, mp[0], sp[0], mp[2], sp[2]);
                emit16(o, dst, e + 16, v1, mp[1], sp[1], mp[0], sp[0]);
                emit16(o, dst, e + 32, v2, mp[2], sp[2], mp[1], sp[1]);
            }
        }
        store_span(o, row, y, x, W, mirror, dst);
    }
    /* leave the upper halves clean: legacy-SSE code after a dirty AVX state (libm, other
     * translation units' scalar code in this thread) runs several times slower */
    _mm256_zeroupper();
}

TF_AVX2_FN static void store_avx2_gray(const shr_tf_out *o, const uint8_t *src, size_t stride,
                                    int mirror, void *dst)
{
    uint32_t W = o->width, H = o->height;
    const __m128i rev1 = mask(shr_mirror_gray16);
    __m256 m = _mm256_set1_ps(o->mean[0]), s = _mm256_set1_ps(o->std[0]);
    for (uint32_t y = 0; y < H; y++) {
        const uint8_t *row = src + (size_t)y * stride;
        uint32_t x = 0;
        for (; x + 16 <= W; x += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(row + x));
            if (mirror)
                v = _mm_shuffle_epi8(v, rev1);
            emit16(o, dst, (size_t)y * W + (mirror ? W - 16 - x : x), v, m, s, m, s);
        }
        store_span(o, row, y, x, W, mirror, dst);
    }
    /* leave the upper halves clean: legacy-SSE code after a dirty AVX state (libm, other
     * translation units' scalar code in this thread) runs several times slower */
    _mm256_zeroupper();
}

#endif

#ifdef FMT_AVX512

/* bytes [0, n) of a 64-byte vector (n may be negative or past 64) */
AVX512_FN static inline __mmask64 bytes_mask(ptrdiff_t n)
{
    return n <= 0 ? 0 : n >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << n) - 1;
}

/* n RGB pixels (n <= 64) from p, 3n bytes read exactly, into v[0..2] (zeros past them) */
AVX512_FN static inline void load64rgb(const uint8_t *p, uint32_t n, __m512i v[3])
{
    if (n == 64) {
        /* plain loads: masked byte loads are several times slower on some CPUs (AMD Zen) */
        v[0] = _mm512_loadu_si512((const void *)p);
        v[1] = _mm512_loadu_si512((const void *)(p + 64));
        v[2] = _mm512_loadu_si512((const void *)(p + 128));
    } else {
        ptrdiff_t b = 3 * (ptrdiff_t)n;
        v[0] = _mm512_maskz_loadu_epi8(bytes_mask(b), p);
        v[1] = _mm512_maskz_loadu_epi8(bytes_mask(b - 64), p + 64);
        v[2] = _mm512_maskz_loadu_epi8(bytes_mask(b - 128), p + 128);
    }
}

/* One channel of n RGB pixels (n <= 64) from p (3n bytes, read exactly) in the order of idx:
 * byte i is p[idx[i]] (idx[i] < 192), through two byte permutes over the three 64-byte blocks */
AVX512_FN static inline __m512i chan64(const uint8_t *p, uint32_t n, __m512i idx)
{
    __m512i v[3];
    load64rgb(p, n, v);
    __m512i r = _mm512_permutex2var_epi8(v[0], idx, v[1]);
    __mmask64 hi = _mm512_cmpge_epu8_mask(idx, _mm512_set1_epi8((char)128));
    return _mm512_mask_permutexvar_epi8(r, hi, idx, v[2]);
}

/* The byte permutes' indices of channel c of 64 RGB pixels (3 x 64 bytes): fwd[c] in order,
 * rev[c] mirrored (output i from pixel 63 - i). */
AVX512_FN static void chw_indices(__m512i fwd[3], __m512i rev[3])
{
    for (int c = 0; c < 3; c++) {
        uint8_t a[64], b[64];
        for (int i = 0; i < 64; i++) {
            a[i] = (uint8_t)(3 * i + c);
            b[i] = (uint8_t)(3 * (63 - i) + c);
        }
        fwd[c] = _mm512_loadu_si512(a);
        rev[c] = _mm512_loadu_si512(b);
    }
}

/* uint8 CHW from RGB with AVX-512: each row in blocks of 64 pixels, the block's 192 source bytes
 * loaded once and deinterleaved into its three channels by byte permutes (the float kernel's,
 * below), each stored into its plane as it comes out; a mirrored block reads its pixels from the
 * right end of the row, the permute's indices reversed. About a sixth of the AVX2 path's
 * instructions per pixel (16 pixels an iteration, three shuffles and two ors per channel);
 * one pass over the source, where a pass per channel read it three times. */
AVX512_FN static void store_avx512_rgb_chw_u8(const shr_tf_out *o, const uint8_t *src,
                                              size_t stride, int mirror, uint8_t *dst)
{
    uint32_t W = o->width, H = o->height;
    size_t plane = (size_t)W * H;
    __m512i fwd[3], rev[3];
    __mmask64 fwd_hi[3], rev_hi[3];
    const __m512i top = _mm512_set1_epi8((char)128);
    chw_indices(fwd, rev);
    for (int c = 0; c < 3; c++) {
        fwd_hi[c] = _mm512_cmpge_epu8_mask(fwd[c], top);
        rev_hi[c] = _mm512_cmpge_epu8_mask(rev[c], top);
    }
    for (uint32_t y = 0; y < H; y++) {
        const uint8_t *row = src + (size_t)y * stride;
        uint8_t *d = dst + (size_t)y * W;
        for (uint32_t j = 0; j < W; j += 64) {
            uint32_t n = W - j < 64 ? W - j : 64;
            const uint8_t *p = row + 3 * (size_t)(mirror ? W - j - n : j);
            __m512i v[3];
            load64rgb(p, n, v);
            for (uint32_t c = 0; c < 3; c++) {
                __m512i idx;
                __mmask64 hi;
                if (!mirror) {
                    idx = fwd[c];
                    hi = fwd_hi[c];
                } else if (n == 64) {
                    idx = rev[c];
                    hi = rev_hi[c];
                } else {
                    idx = _mm512_sub_epi8(rev[c], _mm512_set1_epi8((char)(3 * (64 - n))));
                    hi = _mm512_cmpge_epu8_mask(idx, top);
                }
                __m512i ch = _mm512_mask_permutexvar_epi8(
                    _mm512_permutex2var_epi8(v[0], idx, v[1]), hi, idx, v[2]);
                uint8_t *out = d + c * plane + j;
                if (n == 64)
                    _mm512_storeu_si512((void *)out, ch);
                else
                    _mm512_mask_storeu_epi8(out, bytes_mask(n), ch);
            }
        }
    }
    _mm256_zeroupper();
}

/* float32 CHW from RGB with AVX-512: each row of each channel plane in blocks of 64 outputs, the
 * first block short so that the others start on a 64-byte line (no store splits a line); values
 * as norm8's, an IEEE division per lane, so the bytes are the plain path's. A mirrored block
 * reads its source pixels from the right end of the row, the permute's indices reversed. Plain
 * stores, not streaming ones: with a Loader thread filling batches of multi-scale float32
 * images (about 4.7 MB each) they made this stage about 20% faster than streaming stores on an
 * AMD Zen machine (32 MiB L3), the cached lines being the ones the batch's consumer reads. */
AVX512_FN static void store_avx512_rgb_chw(const shr_tf_out *o, const uint8_t *src,
                                           size_t stride, int mirror, float *dst)
{
    uint32_t W = o->width, H = o->height;
    size_t plane = (size_t)W * H;
    __m512i fwd[3], rev[3];
    chw_indices(fwd, rev);
    const __m512 unit = _mm512_set1_ps(o->unit);
    const int scaled = o->unit != 1.0f;
    for (uint32_t c = 0; c < 3; c++) {
        const __m512 m = _mm512_set1_ps(o->mean[c]), s = _mm512_set1_ps(o->std[c]);
        for (uint32_t y = 0; y < H; y++) {
            const uint8_t *row = src + (size_t)y * stride;
            float *d = dst + c * plane + (size_t)y * W;
            /* floats to the next line (none where d is not even float-aligned): the first
             * block */
            uint32_t head = ((uintptr_t)d & 3) ? 0 : (uint32_t)((64 - ((uintptr_t)d & 63)) & 63) / 4;
            if (head > W)
                head = W;
            for (uint32_t j = 0; j < W;) {
                uint32_t n = j == 0 && head ? head : W - j < 64 ? W - j : 64;
                __m512i v;
                if (mirror)
                    v = chan64(row + 3 * (size_t)(W - j - n), n,
                               _mm512_sub_epi8(rev[c], _mm512_set1_epi8((char)(3 * (64 - n)))));
                else
                    v = chan64(row + 3 * (size_t)j, n, fwd[c]);
                const __m128i part[4] = {
                    _mm512_extracti32x4_epi32(v, 0), _mm512_extracti32x4_epi32(v, 1),
                    _mm512_extracti32x4_epi32(v, 2), _mm512_extracti32x4_epi32(v, 3),
                };
                for (uint32_t q = 0; q < 4 && 16 * q < n; q++) {
                    __m512 f = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(part[q]));
                    if (scaled)
                        f = _mm512_div_ps(f, unit);
                    f = _mm512_div_ps(_mm512_sub_ps(f, m), s);
                    float *out = d + j + 16 * q;
                    uint32_t k = n - 16 * q;
                    if (k < 16)
                        _mm512_mask_storeu_ps(out, (__mmask16)((1u << k) - 1), f);
                    else
                        _mm512_storeu_ps(out, f);
                }
                j += n;
            }
        }
    }
    _mm256_zeroupper();
}

#endif

void shr_tf_store(const shr_tf_out *o, const uint8_t *src, size_t stride, int mirror, void *dst)
{
    if (o->dtype == SHR_DTYPE_U8 && (o->layout == SHR_LAYOUT_NHWC || o->channels == 1) &&
        !mirror) {
        size_t row = (size_t)o->width * o->channels;
        for (uint32_t y = 0; y < o->height; y++)
            memcpy((uint8_t *)dst + y * row, src + y * stride, row);
        return;
    }
#ifdef FMT_AVX512
    if (o->path == SHR_TF_AVX512 && o->channels == 3 && o->layout == SHR_LAYOUT_NCHW) {
        if (o->dtype == SHR_DTYPE_F32) {
            store_avx512_rgb_chw(o, src, stride, mirror, dst);
            return;
        }
        if (o->dtype == SHR_DTYPE_U8) {
            store_avx512_rgb_chw_u8(o, src, stride, mirror, dst);
            return;
        }
    }
#endif
#if SHR_TF_X86 && defined(__GNUC__)
    if (o->path >= SHR_TF_AVX2 && (o->channels == 3 || o->channels == 1)) {
        if (o->channels == 3)
            store_avx2_rgb(o, src, stride, mirror, dst);
        else
            store_avx2_gray(o, src, stride, mirror, dst);
        /* the streaming stores are weakly ordered: done before the sample is handed on */
        _mm_sfence();
        return;
    }
#endif
    for (uint32_t y = 0; y < o->height; y++)
        store_span(o, src + (size_t)y * stride, y, 0, o->width, mirror, dst);
}

void shr_tf_copy_rows(uint8_t *dst, size_t dstride, const uint8_t *src, size_t sstride,
                      size_t row, uint32_t height)
{
    for (uint32_t y = 0; y < height; y++)
        memcpy(dst + (size_t)y * dstride, src + (size_t)y * sstride, row);
}
