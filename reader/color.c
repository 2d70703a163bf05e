/* color.c - ColorJitter and RandomGrayscale, byte for byte as torchvision's PIL path.
 *
 * What Pillow computes, and how it is reproduced:
 *   Image.blend(degenerate, image, alpha) (ImageEnhance's enhance) is, per byte,
 *   (UINT8)(in1 + alpha * (in2 - in1)) evaluated in float32 (int operands converted, alpha a C
 *   float), clipped to 0..255 when alpha is outside [0, 1] (libImaging/Blend.c). Brightness
 *   blends with black and contrast with one grey level, so each is a 256-entry table per sample
 *   built with that very expression; saturation blends each channel with the pixel's own L,
 *   computed in float lanes (the same IEEE operations, so every lane width gives the same
 *   bytes).
 *   The L conversion is integer: (r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16.
 *   Contrast's grey is ImageStat's mean of the L image (a sum over its histogram divided by the
 *   pixel count, in double) as int(mean + 0.5).
 *   The hue goes through Pillow's rgb2hsv and hsv2rgb (libImaging/Convert.c), which mix float
 *   and double arithmetic; the functions below keep every operand's type as C gives it there
 *   (floating point contraction is off in C11 mode, and Pillow's x86-64 build has no FMA), and
 *   the test compares them with Pillow on all 2^24 colours. Between the two, the hue byte is
 *   shifted by np.uint8(hue * 255), which truncates toward zero and wraps.
 */
#include "color.h"

#include <math.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define JITTER_OPS 4

void shr_color_jitter_init(shr_color_jitter *j, const shr_options *o)
{
    const double *r[JITTER_OPS] = {o->jitter_brightness, o->jitter_contrast,
                                   o->jitter_saturation, o->jitter_hue};
    j->any = 0;
    for (int k = 0; k < JITTER_OPS; k++) {
        double center = k == 3 ? 0.0 : 1.0;
        j->lo[k] = (float)r[k][0];
        j->hi[k] = (float)r[k][1];
        j->has[k] = !(r[k][0] == center && r[k][1] == center);
        j->any |= j->has[k];
    }
}

void shr_color_jitter_draw(const shr_color_jitter *j, uint64_t seed, uint64_t epoch,
                           uint64_t index, shr_params *p)
{
    p->jitter = 0;
    p->brightness = p->contrast = p->saturation = 1.0f;
    p->hue = 0.0f;
    for (int k = 0; k < JITTER_OPS; k++)
        p->jitter_order[k] = (uint8_t)k;
    if (!j->any)
        return;
    /* torch.randperm(4) on the CPU: a Fisher-Yates shuffle from the front */
    uint32_t k = 0;
    for (uint32_t i = 0; i < JITTER_OPS - 1; i++) {
        uint32_t z = shr_tf_word(seed, epoch, index, SHR_SALT_JITTER, k++) % (JITTER_OPS - i);
        uint8_t t = p->jitter_order[i];
        p->jitter_order[i] = p->jitter_order[i + z];
        p->jitter_order[i + z] = t;
    }
    float *f[JITTER_OPS] = {&p->brightness, &p->contrast, &p->saturation, &p->hue};
    for (int op = 0; op < JITTER_OPS; op++) {
        if (!j->has[op])
            continue;
        *f[op] = shr_tf_uniform(shr_tf_word(seed, epoch, index, SHR_SALT_JITTER, k++), j->lo[op],
                                j->hi[op]);
        p->jitter |= 1u << op;
    }
}

void shr_color_jitter_apply(const shr_params *p, uint8_t *px, uint32_t width, uint32_t height,
                            uint32_t channels, size_t stride)
{
    for (int i = 0; i < JITTER_OPS; i++) {
        int op = p->jitter_order[i];
        if (!(p->jitter & (1u << op)))
            continue;
        switch (op) {
        case 0:
            shr_color_brightness(px, width, height, channels, stride, p->brightness);
            break;
        case 1:
            shr_color_contrast(px, width, height, channels, stride, p->contrast);
            break;
        case 2:
            shr_color_saturation(px, width, height, channels, stride, p->saturation);
            break;
        default:
            shr_color_hue(px, width, height, channels, stride, (double)p->hue);
            break;
        }
    }
}

/* ---- blends ---- */

uint8_t shr_color_blend(int in1, int in2, float alpha)
{
    float t = (float)in1 + alpha * (float)(in2 - in1);
    if (t <= 0.0f)
        return 0;
    if (t >= 255.0f)
        return 255;
    return (uint8_t)t;
}

uint8_t shr_color_luma(uint8_t r, uint8_t g, uint8_t b)
{
    return (uint8_t)(((uint32_t)r * 19595 + (uint32_t)g * 38470 + (uint32_t)b * 7471 + 0x8000)
                     >> 16);
}

void shr_color_apply_lut(uint8_t *px, uint32_t width, uint32_t height, uint32_t channels,
                         size_t stride, const uint8_t *lut, int per_band)
{
    for (uint32_t y = 0; y < height; y++) {
        uint8_t *p = px + (size_t)y * stride;
        if (channels == 3 && per_band)
            for (uint32_t x = 0; x < width; x++, p += 3) {
                p[0] = lut[p[0]];
                p[1] = lut[256 + p[1]];
                p[2] = lut[512 + p[2]];
            }
        else
            for (size_t i = 0; i < (size_t)width * channels; i++)
                p[i] = lut[p[i]];
    }
}

void shr_color_brightness(uint8_t *px, uint32_t width, uint32_t height, uint32_t channels,
                          size_t stride, float factor)
{
    uint8_t lut[256];
    for (int v = 0; v < 256; v++)
        lut[v] = shr_color_blend(0, v, factor);
    shr_color_apply_lut(px, width, height, channels, stride, lut, 0);
}

void shr_color_contrast(uint8_t *px, uint32_t width, uint32_t height, uint32_t channels,
                        size_t stride, float factor)
{
    /* ImageStat's mean of the L image: its histogram's sum over the count */
    uint64_t hist[256] = {0};
    for (uint32_t y = 0; y < height; y++) {
        const uint8_t *p = px + (size_t)y * stride;
        if (channels == 3)
            for (uint32_t x = 0; x < width; x++, p += 3)
                hist[shr_color_luma(p[0], p[1], p[2])]++;
        else
            for (uint32_t x = 0; x < width; x++)
                hist[p[x]]++;
    }
    double sum = 0.0;
    for (int v = 0; v < 256; v++)
        sum += (double)v * (double)hist[v];
    double mean = sum / ((double)width * (double)height);
    int grey = (int)(mean + 0.5);
    uint8_t lut[256];
    for (int v = 0; v < 256; v++)
        lut[v] = shr_color_blend(grey, v, factor);
    shr_color_apply_lut(px, width, height, channels, stride, lut, 0);
}

void shr_color_saturation(uint8_t *px, uint32_t width, uint32_t height, uint32_t channels,
                          size_t stride, float factor)
{
    if (channels != 3)
        return;             /* an L image blended with itself */
    for (uint32_t y = 0; y < height; y++) {
        uint8_t *p = px + (size_t)y * stride;
        for (uint32_t x = 0; x < width; x++, p += 3) {
            int l = shr_color_luma(p[0], p[1], p[2]);
            p[0] = shr_color_blend(l, p[0], factor);
            p[1] = shr_color_blend(l, p[1], factor);
            p[2] = shr_color_blend(l, p[2], factor);
        }
    }
}

void shr_color_grayscale(uint8_t *px, uint32_t width, uint32_t height, uint32_t channels,
                         size_t stride)
{
    if (channels != 3)
        return;
    for (uint32_t y = 0; y < height; y++) {
        uint8_t *p = px + (size_t)y * stride;
        for (uint32_t x = 0; x < width; x++, p += 3)
            p[0] = p[1] = p[2] = shr_color_luma(p[0], p[1], p[2]);
    }
}

/* ---- hue ---- */

static inline int clip8(int v)
{
    return v <= 0 ? 0 : v >= 255 ? 255 : v;
}

/* Pillow's rgb2hsv_row. Only the two quotients the hue needs are computed (each is the same
 * float division Pillow makes), and fmod(x, 1.0) of x = h / 6 + 1, which lies in [5/6, 2), is
 * x or the exact x - 1. */
static inline void rgb2hsv(uint8_t r, uint8_t g, uint8_t b, uint8_t *hh, uint8_t *ss, uint8_t *vv)
{
    uint8_t maxc = r > g ? (r > b ? r : b) : (g > b ? g : b);
    uint8_t minc = r < g ? (r < b ? r : b) : (g < b ? g : b);
    *vv = maxc;
    if (minc == maxc) {
        *hh = *ss = 0;
        return;
    }
    float cr = (float)(maxc - minc);
    float s = cr / (float)maxc;
    float h;
    if (r == maxc)
        h = (float)(maxc - b) / cr - (float)(maxc - g) / cr;
    else if (g == maxc)
        h = (float)(2.0 + (float)(maxc - r) / cr - (float)(maxc - b) / cr);
    else
        h = (float)(4.0 + (float)(maxc - g) / cr - (float)(maxc - r) / cr);
    double x = h / 6.0 + 1.0;
    h = (float)(x >= 1.0 ? x - 1.0 : x);
    *hh = (uint8_t)clip8((int)(h * 255.0));
    *ss = (uint8_t)clip8((int)(s * 255.0));
}

/* C's round() of a non-negative x below 2^31, without the library call */
static inline int round_pos(double x)
{
    int i = (int)x;
    return x - (double)i >= 0.5 ? i + 1 : i;
}

/* Pillow's hsv2rgb; floor() of the non-negative sector is a truncation */
static inline void hsv2rgb(uint8_t h, uint8_t s, uint8_t v, uint8_t *out)
{
    if (s == 0) {
        out[0] = out[1] = out[2] = v;
        return;
    }
    double hd = (float)h * 6.0 / 255.0;
    int i = (int)hd;
    float f = (float)(hd - (float)i);
    float fs = (float)((float)s / 255.0);
    uint8_t p = (uint8_t)clip8(round_pos((float)v * (1.0 - fs)));
    uint8_t q = (uint8_t)clip8(round_pos((float)v * (1.0 - fs * f)));
    uint8_t t = (uint8_t)clip8(round_pos((float)v * (1.0 - fs * (1.0 - f))));
    switch (i % 6) {
    case 0:
        out[0] = v, out[1] = t, out[2] = p;
        break;
    case 1:
        out[0] = q, out[1] = v, out[2] = p;
        break;
    case 2:
        out[0] = p, out[1] = v, out[2] = t;
        break;
    case 3:
        out[0] = p, out[1] = q, out[2] = v;
        break;
    case 4:
        out[0] = t, out[1] = p, out[2] = v;
        break;
    default:
        out[0] = v, out[1] = p, out[2] = q;
        break;
    }
}

void shr_color_rgb2hsv(const uint8_t rgb[3], uint8_t hsv[3])
{
    rgb2hsv(rgb[0], rgb[1], rgb[2], &hsv[0], &hsv[1], &hsv[2]);
}

void shr_color_hsv2rgb(const uint8_t hsv[3], uint8_t rgb[3])
{
    hsv2rgb(hsv[0], hsv[1], hsv[2], rgb);
}

static void hue_span(uint8_t *p, uint32_t n, uint8_t shift)
{
    for (uint32_t x = 0; x < n; x++, p += 3) {
        if (p[0] == p[1] && p[1] == p[2])
            continue;       /* grey: saturation 0 comes back as it was */
        uint8_t h, s, v;
        rgb2hsv(p[0], p[1], p[2], &h, &s, &v);
        hsv2rgb((uint8_t)(h + shift), s, v, p);
    }
}

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <immintrin.h>
#define HUE_AVX2 1
#define AVX2_FN __attribute__((target("avx2")))

/* round() of non-negative doubles below 2^31 (4 lanes) as int32 */
AVX2_FN static inline __m128i round_pos4(__m256d x)
{
    __m128i i = _mm256_cvttpd_epi32(x);
    __m256d frac = _mm256_sub_pd(x, _mm256_cvtepi32_pd(i));
    __m128i up = _mm256_cvtpd_epi32(_mm256_and_pd(_mm256_cmp_pd(frac, _mm256_set1_pd(0.5),
                                                                _CMP_GE_OQ),
                                                  _mm256_set1_pd(1.0)));
    return _mm_add_epi32(i, up);
}

AVX2_FN static inline __m256d lo_pd(__m256 v)
{
    return _mm256_cvtps_pd(_mm256_castps256_ps128(v));
}

AVX2_FN static inline __m256d hi_pd(__m256 v)
{
    return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
}

AVX2_FN static inline __m256 to_ps(__m256d lo, __m256d hi)
{
    return _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo));
}

AVX2_FN static inline __m256i to_epi32(__m128i lo, __m128i hi)
{
    return _mm256_set_m128i(hi, lo);
}

/* The scalar code's operations, 8 pixels at a time, each with the same type and rounding: the
 * float quotients and products in float lanes, the double steps in double lanes; the sector's
 * switch and the case of the maximum become blends. */
AVX2_FN static void hue_avx2(uint8_t *p, uint32_t n, uint8_t shift)
{
    const __m256i c255 = _mm256_set1_epi32(255);
    uint32_t x = 0;
    for (; x + 8 <= n; x += 8) {
        uint8_t *q8 = p + (size_t)x * 3;
        int32_t R[8], G[8], B[8];
        for (int k = 0; k < 8; k++) {
            R[k] = q8[3 * k];
            G[k] = q8[3 * k + 1];
            B[k] = q8[3 * k + 2];
        }
        __m256i r = _mm256_loadu_si256((const __m256i *)R);
        __m256i g = _mm256_loadu_si256((const __m256i *)G);
        __m256i b = _mm256_loadu_si256((const __m256i *)B);
        __m256i mx = _mm256_max_epi32(r, _mm256_max_epi32(g, b));
        __m256i mn = _mm256_min_epi32(r, _mm256_min_epi32(g, b));
        __m256i grey = _mm256_cmpeq_epi32(mx, mn);
        if (_mm256_movemask_epi8(grey) == -1)
            continue;
        /* grey lanes divide by 1 instead of 0: their results are discarded */
        __m256 cr = _mm256_cvtepi32_ps(_mm256_sub_epi32(mx, mn));
        cr = _mm256_blendv_ps(cr, _mm256_set1_ps(1.0f), _mm256_castsi256_ps(grey));
        __m256 mxf = _mm256_cvtepi32_ps(_mm256_max_epi32(mx, _mm256_set1_epi32(1)));
        __m256 s = _mm256_div_ps(cr, mxf);
        __m256 rc = _mm256_div_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(mx, r)), cr);
        __m256 gc = _mm256_div_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(mx, g)), cr);
        __m256 bc = _mm256_div_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(mx, b)), cr);
        __m256 hr = _mm256_sub_ps(bc, gc);
        __m256d two = _mm256_set1_pd(2.0), four = _mm256_set1_pd(4.0);
        __m256 hg = to_ps(_mm256_sub_pd(_mm256_add_pd(two, lo_pd(rc)), lo_pd(bc)),
                          _mm256_sub_pd(_mm256_add_pd(two, hi_pd(rc)), hi_pd(bc)));
        __m256 hb = to_ps(_mm256_sub_pd(_mm256_add_pd(four, lo_pd(gc)), lo_pd(rc)),
                          _mm256_sub_pd(_mm256_add_pd(four, hi_pd(gc)), hi_pd(rc)));
        __m256 h = _mm256_blendv_ps(hb, hg, _mm256_castsi256_ps(_mm256_cmpeq_epi32(g, mx)));
        h = _mm256_blendv_ps(h, hr, _mm256_castsi256_ps(_mm256_cmpeq_epi32(r, mx)));
        /* x = h / 6 + 1 in double, minus 1 where >= 1, back to float, times 255 in double */
        __m256d six = _mm256_set1_pd(6.0), one = _mm256_set1_pd(1.0), k255 = _mm256_set1_pd(255.0);
        __m256d xl = _mm256_add_pd(_mm256_div_pd(lo_pd(h), six), one);
        __m256d xh = _mm256_add_pd(_mm256_div_pd(hi_pd(h), six), one);
        xl = _mm256_sub_pd(xl, _mm256_and_pd(_mm256_cmp_pd(xl, one, _CMP_GE_OQ), one));
        xh = _mm256_sub_pd(xh, _mm256_and_pd(_mm256_cmp_pd(xh, one, _CMP_GE_OQ), one));
        __m256 hf = to_ps(xl, xh);
        __m256i uh = to_epi32(_mm256_cvttpd_epi32(_mm256_mul_pd(lo_pd(hf), k255)),
                              _mm256_cvttpd_epi32(_mm256_mul_pd(hi_pd(hf), k255)));
        __m256i us = to_epi32(_mm256_cvttpd_epi32(_mm256_mul_pd(lo_pd(s), k255)),
                              _mm256_cvttpd_epi32(_mm256_mul_pd(hi_pd(s), k255)));
        uh = _mm256_min_epi32(_mm256_max_epi32(uh, _mm256_setzero_si256()), c255);
        us = _mm256_min_epi32(_mm256_max_epi32(us, _mm256_setzero_si256()), c255);
        us = _mm256_andnot_si256(grey, us);
        uh = _mm256_and_si256(_mm256_add_epi32(uh, _mm256_set1_epi32(shift)), c255);
        /* hsv2rgb */
        __m256d hdl = _mm256_div_pd(_mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(uh)),
                                                  six), k255);
        __m256d hdh = _mm256_div_pd(_mm256_mul_pd(_mm256_cvtepi32_pd(
                                                      _mm256_extracti128_si256(uh, 1)), six),
                                    k255);
        __m128i il = _mm256_cvttpd_epi32(hdl), ih = _mm256_cvttpd_epi32(hdh);
        __m256 f = to_ps(_mm256_sub_pd(hdl, _mm256_cvtepi32_pd(il)),
                         _mm256_sub_pd(hdh, _mm256_cvtepi32_pd(ih)));
        __m256 fs = to_ps(_mm256_div_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(us)), k255),
                          _mm256_div_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(us, 1)),
                                        k255));
        __m256 fsf = _mm256_mul_ps(fs, f);
        __m256d vl = _mm256_cvtepi32_pd(_mm256_castsi256_si128(mx));
        __m256d vh = _mm256_cvtepi32_pd(_mm256_extracti128_si256(mx, 1));
        __m256i pp = to_epi32(round_pos4(_mm256_mul_pd(vl, _mm256_sub_pd(one, lo_pd(fs)))),
                              round_pos4(_mm256_mul_pd(vh, _mm256_sub_pd(one, hi_pd(fs)))));
        __m256i qq = to_epi32(round_pos4(_mm256_mul_pd(vl, _mm256_sub_pd(one, lo_pd(fsf)))),
                              round_pos4(_mm256_mul_pd(vh, _mm256_sub_pd(one, hi_pd(fsf)))));
        __m256i tt = to_epi32(
            round_pos4(_mm256_mul_pd(vl, _mm256_sub_pd(one, _mm256_mul_pd(
                                                                lo_pd(fs),
                                                                _mm256_sub_pd(one, lo_pd(f)))))),
            round_pos4(_mm256_mul_pd(vh, _mm256_sub_pd(one, _mm256_mul_pd(
                                                                hi_pd(fs),
                                                                _mm256_sub_pd(one, hi_pd(f)))))));
        pp = _mm256_min_epi32(_mm256_max_epi32(pp, _mm256_setzero_si256()), c255);
        qq = _mm256_min_epi32(_mm256_max_epi32(qq, _mm256_setzero_si256()), c255);
        tt = _mm256_min_epi32(_mm256_max_epi32(tt, _mm256_setzero_si256()), c255);
        __m256i sec = to_epi32(il, ih);
        sec = _mm256_blendv_epi8(sec, _mm256_setzero_si256(),
                                 _mm256_cmpeq_epi32(sec, _mm256_set1_epi32(6)));
        __m256i s0 = _mm256_cmpeq_epi32(sec, _mm256_setzero_si256());
        __m256i s1 = _mm256_cmpeq_epi32(sec, _mm256_set1_epi32(1));
        __m256i s2 = _mm256_cmpeq_epi32(sec, _mm256_set1_epi32(2));
        __m256i s3 = _mm256_cmpeq_epi32(sec, _mm256_set1_epi32(3));
        __m256i s4 = _mm256_cmpeq_epi32(sec, _mm256_set1_epi32(4));
        __m256i s5 = _mm256_cmpeq_epi32(sec, _mm256_set1_epi32(5));
        /* r: v (0, 5), q (1), p (2, 3), t (4); g: t (0), v (1, 2), q (3), p (4, 5);
         * b: p (0, 1), t (2), v (3, 4), q (5) */
        __m256i orr = tt;
        orr = _mm256_blendv_epi8(orr, pp, _mm256_or_si256(s2, s3));
        orr = _mm256_blendv_epi8(orr, qq, s1);
        orr = _mm256_blendv_epi8(orr, mx, _mm256_or_si256(s0, s5));
        __m256i og = pp;
        og = _mm256_blendv_epi8(og, qq, s3);
        og = _mm256_blendv_epi8(og, mx, _mm256_or_si256(s1, s2));
        og = _mm256_blendv_epi8(og, tt, s0);
        __m256i ob = qq;
        ob = _mm256_blendv_epi8(ob, mx, _mm256_or_si256(s3, s4));
        ob = _mm256_blendv_epi8(ob, tt, s2);
        ob = _mm256_blendv_epi8(ob, pp, _mm256_or_si256(s0, s1));
        /* saturation 0 (grey, or too little to show in a byte): v, v, v */
        __m256i flat = _mm256_cmpeq_epi32(us, _mm256_setzero_si256());
        orr = _mm256_blendv_epi8(orr, mx, flat);
        og = _mm256_blendv_epi8(og, mx, flat);
        ob = _mm256_blendv_epi8(ob, mx, flat);
        _mm256_storeu_si256((__m256i *)R, orr);
        _mm256_storeu_si256((__m256i *)G, og);
        _mm256_storeu_si256((__m256i *)B, ob);
        for (int k = 0; k < 8; k++) {
            q8[3 * k] = (uint8_t)R[k];
            q8[3 * k + 1] = (uint8_t)G[k];
            q8[3 * k + 2] = (uint8_t)B[k];
        }
    }
    hue_span(p + (size_t)x * 3, n - x, shift);
}

static int have_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
}
#endif

void shr_color_hue(uint8_t *px, uint32_t width, uint32_t height, uint32_t channels, size_t stride,
                   double hue_factor)
{
    shr_color_hue_path(px, width, height, channels, stride, hue_factor, 1);
}

void shr_color_hue_path(uint8_t *px, uint32_t width, uint32_t height, uint32_t channels,
                        size_t stride, double hue_factor, int vector)
{
    if (channels != 3)
        return;
    uint8_t shift = (uint8_t)(int)(hue_factor * 255.0);
#ifdef HUE_AVX2
    if (vector && have_avx2()) {
        for (uint32_t y = 0; y < height; y++)
            hue_avx2(px + (size_t)y * stride, width, shift);
        return;
    }
#endif
    for (uint32_t y = 0; y < height; y++)
        hue_span(px + (size_t)y * stride, width, shift);
}
