/* autoaugment.c - TrivialAugmentWide and RandAugment: torchvision's tables and draws with the
 * reader's words, and every op of _apply_op on the PIL image, byte for byte.
 *
 * What torch and Pillow compute, and how it is reproduced:
 *   The magnitude tables are float32 tensors: torch.linspace (torch 1.13's x86-64 kernel, whose
 *   first 16 values are vector lanes base + k * step and the others fused multiply-adds from the
 *   nearer end; shr_aa_linspace) and, for Posterize, 8 - round(arange(bins) / ((bins - 1) / d))
 *   in float32 with halves to even. _apply_op gets the entry as a Python double.
 *   ShearX/Y: F.affine(angle 0, translate 0, scale 1, shear degrees(atan(m)), center [0, 0]);
 *   TranslateX/Y: F.affine with translate int(m) (truncated), the default centre; Rotate:
 *   F.rotate(m). Brightness, Color, Contrast: ImageEnhance with the factor 1 + m (color.c).
 *   Sharpness: ImageEnhance.Sharpness, a blend with image.filter(SMOOTH): Pillow's 3x3
 *   ImagingFilter, kernel (1 1 1 / 1 5 1 / 1 1 1) with each weight divided by 13 in float32,
 *   summed in float32 from 0.5 row by row (the row below first), truncated and clipped; the
 *   border rows and columns are copied, so they blend with themselves and keep their values.
 *   Posterize, Solarize, AutoContrast and Equalize are ImageOps' lookup tables per band
 *   (autocontrast from each band's lowest and highest value, scale 255 / (hi - lo) in double
 *   and int() of ix * scale - lo * scale; equalize from each band's histogram in integers).
 *   Vector kernels (AVX2 where fmt_simd() says so, simd.h) give the same bytes: Sharpness's
 *   filter and blend in float lanes with the same operations in the same order, Posterize's
 *   table as a mask and Solarize's as a compare and select (where its table has that form).
 */
#include "autoaugment.h"

#include "affine.h"
#include "color.h"
#include "simd.h"

#include <math.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* CPython's math.degrees factor (180.0 / Py_MATH_PI) */
static const double rad_to_deg = 180.0 / 3.14159265358979323846;

void shr_aa_init(shr_aa *t, const shr_options *o)
{
    t->policy = o->auto_augment;
    t->num_ops = o->aa_num_ops;
    t->magnitude = o->aa_magnitude;
    t->bins = o->aa_bins;
    t->filter = o->aug_interpolation;
    memcpy(t->fill, o->aug_fill, 4);
}

float shr_aa_linspace(float start, float end, uint32_t steps, uint32_t i)
{
    if (steps == 1)
        return start;
    float step = (end - start) / (float)(steps - 1);
    uint32_t half = steps / 2;
    if (steps >= 16 && i < 16) {
        uint32_t base_i = i < 8 ? 0 : 8, k = i - base_i;
        float base = base_i < half ? fmaf(step, (float)base_i, start)
                                   : fmaf(-step, (float)(steps - base_i - 1), end);
        return base + (float)k * step;
    }
    return i < half ? fmaf(step, (float)i, start) : fmaf(-step, (float)(steps - i - 1), end);
}

/* torch's round (halves to even) of float32 i / (float)div: Posterize's table */
static float posterize_bits(uint32_t bins, uint32_t bin, double div)
{
    float q = (float)bin / (float)((double)(bins - 1) / div);
    return 8.0f - rintf(q);
}

/* whether op has a magnitude table (torchvision's ndim > 0) and a sign draw */
static int has_table(int op)
{
    return op != SHR_AA_IDENTITY && op != SHR_AA_AUTOCONTRAST && op != SHR_AA_EQUALIZE;
}

static int is_signed(int op)
{
    return has_table(op) && op != SHR_AA_POSTERIZE && op != SHR_AA_SOLARIZE;
}

float shr_aa_magnitude(int op, int rand, uint32_t bins, uint32_t bin, uint32_t width,
                       uint32_t height)
{
    switch (op) {
    case SHR_AA_SHEAR_X:
    case SHR_AA_SHEAR_Y:
        return shr_aa_linspace(0.0f, rand ? 0.3f : 0.99f, bins, bin);
    case SHR_AA_TRANSLATE_X:
        return shr_aa_linspace(0.0f, rand ? (float)(150.0 / 331.0 * width) : 32.0f, bins, bin);
    case SHR_AA_TRANSLATE_Y:
        return shr_aa_linspace(0.0f, rand ? (float)(150.0 / 331.0 * height) : 32.0f, bins, bin);
    case SHR_AA_ROTATE:
        return shr_aa_linspace(0.0f, rand ? 30.0f : 135.0f, bins, bin);
    case SHR_AA_BRIGHTNESS:
    case SHR_AA_COLOR:
    case SHR_AA_CONTRAST:
    case SHR_AA_SHARPNESS:
        return shr_aa_linspace(0.0f, rand ? 0.9f : 0.99f, bins, bin);
    case SHR_AA_POSTERIZE:
        return posterize_bits(bins, bin, rand ? 4.0 : 6.0);
    case SHR_AA_SOLARIZE:
        return shr_aa_linspace(255.0f, 0.0f, bins, bin);
    default:
        return 0.0f;
    }
}

/* torchvision 0.14's AutoAugment IMAGENET policy: (op, probability, magnitude bin or -1) */
static const struct {
    uint8_t op;
    float p;
    int8_t bin;
} imagenet_policy[25][2] = {
    {{SHR_AA_POSTERIZE, 0.4f, 8}, {SHR_AA_ROTATE, 0.6f, 9}},
    {{SHR_AA_SOLARIZE, 0.6f, 5}, {SHR_AA_AUTOCONTRAST, 0.6f, -1}},
    {{SHR_AA_EQUALIZE, 0.8f, -1}, {SHR_AA_EQUALIZE, 0.6f, -1}},
    {{SHR_AA_POSTERIZE, 0.6f, 7}, {SHR_AA_POSTERIZE, 0.6f, 6}},
    {{SHR_AA_EQUALIZE, 0.4f, -1}, {SHR_AA_SOLARIZE, 0.2f, 4}},
    {{SHR_AA_EQUALIZE, 0.4f, -1}, {SHR_AA_ROTATE, 0.8f, 8}},
    {{SHR_AA_SOLARIZE, 0.6f, 3}, {SHR_AA_EQUALIZE, 0.6f, -1}},
    {{SHR_AA_POSTERIZE, 0.8f, 5}, {SHR_AA_EQUALIZE, 1.0f, -1}},
    {{SHR_AA_ROTATE, 0.2f, 3}, {SHR_AA_SOLARIZE, 0.6f, 8}},
    {{SHR_AA_EQUALIZE, 0.6f, -1}, {SHR_AA_POSTERIZE, 0.4f, 6}},
    {{SHR_AA_ROTATE, 0.8f, 8}, {SHR_AA_COLOR, 0.4f, 0}},
    {{SHR_AA_ROTATE, 0.4f, 9}, {SHR_AA_EQUALIZE, 0.6f, -1}},
    {{SHR_AA_EQUALIZE, 0.0f, -1}, {SHR_AA_EQUALIZE, 0.8f, -1}},
    {{SHR_AA_INVERT, 0.6f, -1}, {SHR_AA_EQUALIZE, 1.0f, -1}},
    {{SHR_AA_COLOR, 0.6f, 4}, {SHR_AA_CONTRAST, 1.0f, 8}},
    {{SHR_AA_ROTATE, 0.8f, 8}, {SHR_AA_COLOR, 1.0f, 2}},
    {{SHR_AA_COLOR, 0.8f, 8}, {SHR_AA_SOLARIZE, 0.8f, 7}},
    {{SHR_AA_SHARPNESS, 0.4f, 7}, {SHR_AA_INVERT, 0.6f, -1}},
    {{SHR_AA_SHEAR_X, 0.6f, 5}, {SHR_AA_EQUALIZE, 1.0f, -1}},
    {{SHR_AA_COLOR, 0.4f, 0}, {SHR_AA_EQUALIZE, 0.6f, -1}},
    {{SHR_AA_EQUALIZE, 0.4f, -1}, {SHR_AA_SOLARIZE, 0.2f, 4}},
    {{SHR_AA_SOLARIZE, 0.6f, 5}, {SHR_AA_AUTOCONTRAST, 0.6f, -1}},
    {{SHR_AA_INVERT, 0.6f, -1}, {SHR_AA_EQUALIZE, 1.0f, -1}},
    {{SHR_AA_COLOR, 0.6f, 4}, {SHR_AA_CONTRAST, 1.0f, 8}},
    {{SHR_AA_EQUALIZE, 0.8f, -1}, {SHR_AA_EQUALIZE, 0.6f, -1}},
};

/* AutoAugment(IMAGENET)'s get_params and forward (see shardread.h, SHR_SALT_AUTO_AUGMENT) */
static void draw_imagenet(uint64_t seed, uint64_t epoch, uint64_t index, uint32_t width,
                          uint32_t height, shr_params *p)
{
    uint32_t id = shr_tf_word(seed, epoch, index, SHR_SALT_AUTO_AUGMENT, 0) % 25;
    uint32_t n = 0;
    for (uint32_t i = 0; i < 2; i++) {
        uint32_t w = shr_tf_word(seed, epoch, index, SHR_SALT_AUTO_AUGMENT, 1 + i);
        float prob = (float)(w & 0xffffff) * 0x1p-24f;
        if (!(prob <= imagenet_policy[id][i].p))
            continue;
        int op = imagenet_policy[id][i].op;
        float m = imagenet_policy[id][i].bin < 0
                      ? 0.0f
                      : shr_aa_magnitude(op, 1, 10, (uint32_t)imagenet_policy[id][i].bin, width,
                                         height);
        if (op != SHR_AA_INVERT && is_signed(op) &&
            shr_tf_word(seed, epoch, index, SHR_SALT_AUTO_AUGMENT, 3 + i) % 2 == 0)
            m = -m;
        p->aa_op[n] = (uint8_t)op;
        p->aa_magnitude[n] = m;
        n++;
    }
    p->aa_ops = n;
}

void shr_aa_draw(const shr_aa *t, uint64_t seed, uint64_t epoch, uint64_t index, uint32_t width,
                 uint32_t height, shr_params *p)
{
    p->aa_ops = 0;
    memset(p->aa_op, 0, sizeof p->aa_op);
    memset(p->aa_magnitude, 0, sizeof p->aa_magnitude);
    if (t->policy == SHR_AUTO_AUGMENT_NONE)
        return;
    if (t->policy == SHR_AUTO_AUGMENT_IMAGENET) {
        draw_imagenet(seed, epoch, index, width, height, p);
        return;
    }
    uint32_t k = 0;
#define WORD() shr_tf_word(seed, epoch, index, SHR_SALT_AUTO_AUGMENT, k++)
    int rand = t->policy == SHR_AUTO_AUGMENT_RAND;
    uint32_t n = rand ? t->num_ops : 1;
    for (uint32_t i = 0; i < n; i++) {
        int op = (int)(WORD() % SHR_AA_OPS);
        float m = 0.0f;
        if (has_table(op)) {
            uint32_t bin = rand ? t->magnitude : WORD() % t->bins;
            m = shr_aa_magnitude(op, rand, t->bins, bin, width, height);
        }
        if (is_signed(op) && WORD() % 2)
            m = -m;
        p->aa_op[i] = (uint8_t)op;
        p->aa_magnitude[i] = m;
    }
    p->aa_ops = n;
#undef WORD
}

int shr_aa_op_geometric(int op)
{
    return op >= SHR_AA_SHEAR_X && op <= SHR_AA_ROTATE;
}

/* ---- ImageOps and ImageEnhance ---- */

/* image.histogram(): 256 counts per band */
static void histogram(const uint8_t *px, uint32_t width, uint32_t height, uint32_t channels,
                      size_t stride, uint64_t *h)
{
    /* neighbouring pixels mostly share a value, and one table's increments of one bin wait on
     * each other: even and odd pixels count into two tables (32-bit: a row pair's counts fit),
     * summed at the end */
    uint32_t t[2][3 * 256];
    memset(t, 0, sizeof t);
    memset(h, 0, sizeof(uint64_t) * 256 * channels);
    for (uint32_t y = 0; y < height; y++) {
        const uint8_t *p = px + (size_t)y * stride;
        uint32_t x = 0;
        if (channels == 3) {
            for (; x + 2 <= width; x += 2, p += 6) {
                t[0][p[0]]++;
                t[0][256 + p[1]]++;
                t[0][512 + p[2]]++;
                t[1][p[3]]++;
                t[1][256 + p[4]]++;
                t[1][512 + p[5]]++;
            }
            if (x < width) {
                t[0][p[0]]++;
                t[0][256 + p[1]]++;
                t[0][512 + p[2]]++;
            }
        } else {
            for (; x + 2 <= width; x += 2) {
                t[0][p[x]]++;
                t[1][p[x + 1]]++;
            }
            if (x < width)
                t[0][p[x]]++;
        }
        /* flushed every 1024 rows: a bin of a table gets at most 1024 x 2^19 counts */
        if ((y & 1023) == 1023 || y + 1 == height) {
            for (uint32_t i = 0; i < (channels == 3 ? 768u : 256u); i++)
                h[i] += (uint64_t)t[0][i] + t[1][i];
            memset(t, 0, sizeof t);
        }
    }
}

#ifdef FMT_AVX2
/* Posterize's table, i & mask, and Solarize's, i < k ? i : 255 - i (k in 1..255), on n bytes */
AVX2_FN static size_t mask_avx2(uint8_t *p, size_t n, uint8_t mask)
{
    const __m256i m = _mm256_set1_epi8((char)mask);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(p + i));
        _mm256_storeu_si256((__m256i *)(p + i), _mm256_and_si256(v, m));
    }
    return i;
}

AVX2_FN static size_t solarize_avx2(uint8_t *p, size_t n, int k)
{
    const __m256i last = _mm256_set1_epi8((char)(k - 1)), ones = _mm256_set1_epi8(-1);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(p + i));
        __m256i below = _mm256_cmpeq_epi8(_mm256_min_epu8(v, last), v);     /* v <= k - 1 */
        _mm256_storeu_si256((__m256i *)(p + i),
                            _mm256_blendv_epi8(_mm256_xor_si256(v, ones), v, below));
    }
    return i;
}
#endif

void shr_aa_posterize(uint8_t *px, uint32_t width, uint32_t height, uint32_t channels,
                      size_t stride, int bits)
{
    uint8_t lut[256];
    int mask = ~((1 << (8 - bits)) - 1);
    size_t row = (size_t)width * channels;
    (void)row;
#ifdef FMT_AVX2
    if (fmt_simd()) {
        for (uint32_t y = 0; y < height; y++) {
            uint8_t *p = px + (size_t)y * stride;
            for (size_t i = mask_avx2(p, row, (uint8_t)mask); i < row; i++)
                p[i] = (uint8_t)(p[i] & mask);
        }
        return;
    }
#endif
    for (int i = 0; i < 256; i++)
        lut[i] = (uint8_t)(i & mask);
    fmt_color_apply_lut(px, width, height, channels, stride, lut, 0);
}

void shr_aa_solarize(uint8_t *px, uint32_t width, uint32_t height, uint32_t channels,
                     size_t stride, double threshold)
{
    uint8_t lut[256];
    int k = 0;              /* the table keeps i below k (each i < threshold up to there) */
    for (int i = 0; i < 256; i++) {
        lut[i] = (uint8_t)((double)i < threshold ? i : 255 - i);
        if (k == i && lut[i] == i && (double)i < threshold)
            k = i + 1;
    }
    size_t row = (size_t)width * channels;
    (void)row;
#ifdef FMT_AVX2
    /* a table that is i < k ? i : 255 - i (k 1..255): a compare and a select */
    int simple = k >= 1 && k <= 255;
    for (int i = k; i < 256 && simple; i++)
        simple = lut[i] == 255 - i;
    if (simple && fmt_simd()) {
        for (uint32_t y = 0; y < height; y++) {
            uint8_t *p = px + (size_t)y * stride;
            for (size_t i = solarize_avx2(p, row, k); i < row; i++)
                p[i] = lut[p[i]];
        }
        return;
    }
#endif
    fmt_color_apply_lut(px, width, height, channels, stride, lut, 0);
}

/* The identity table: a band the operation leaves as it is. */
static void band_identity(uint8_t *lb)
{
    for (int i = 0; i < 256; i++)
        lb[i] = (uint8_t)i;
}

/* autocontrast's table of one band from its histogram hb */
static void band_autocontrast(const uint64_t *hb, uint8_t *lb)
{
    int lo = 0, hi = 255;
    while (lo < 255 && !hb[lo])
        lo++;
    while (hi > 0 && !hb[hi])
        hi--;
    if (hi <= lo) {
        band_identity(lb);
        return;
    }
    double scale = 255.0 / (hi - lo);
    double offset = -lo * scale;
    for (int i = 0; i < 256; i++) {
        double v = i * scale + offset;
        int ix = v <= -1.0 ? -1 : (int)v;    /* int(): toward zero; clipped below anyway */
        lb[i] = (uint8_t)(ix < 0 ? 0 : ix > 255 ? 255 : ix);
    }
}

/* equalize's table of one band from its histogram hb */
static void band_equalize(const uint64_t *hb, uint8_t *lb)
{
    uint64_t total = 0, last = 0;
    int nonzero = 0;
    for (int i = 0; i < 256; i++)
        if (hb[i]) {
            total += hb[i];
            last = hb[i];
            nonzero++;
        }
    uint64_t step = nonzero <= 1 ? 0 : (total - last) / 255;
    if (!step) {
        band_identity(lb);
        return;
    }
    uint64_t n = step / 2;
    for (int i = 0; i < 256; i++) {
        uint64_t v = n / step;
        lb[i] = (uint8_t)(v > 255 ? 255 : v);
        n += hb[i];
    }
}

/* The image's per-band histograms, a table per band made from its histogram, applied. */
static void apply_band_luts(uint8_t *px, uint32_t width, uint32_t height, uint32_t channels,
                            size_t stride, void (*band)(const uint64_t *hb, uint8_t *lb))
{
    uint64_t h[768];
    uint8_t lut[768];
    histogram(px, width, height, channels, stride, h);
    for (uint32_t b = 0; b < channels; b++)
        band(h + 256 * b, lut + 256 * b);
    fmt_color_apply_lut(px, width, height, channels, stride, lut, 1);
}

void shr_aa_autocontrast(uint8_t *px, uint32_t width, uint32_t height, uint32_t channels,
                         size_t stride)
{
    apply_band_luts(px, width, height, channels, stride, band_autocontrast);
}

void shr_aa_equalize(uint8_t *px, uint32_t width, uint32_t height, uint32_t channels,
                     size_t stride)
{
    apply_band_luts(px, width, height, channels, stride, band_equalize);
}

/* Filter.c's clip8 */
static inline uint8_t clip8f(float v)
{
    return v <= 0.0f ? 0 : v >= 255.0f ? 255 : (uint8_t)v;
}

#ifdef FMT_AVX2
AVX2_FN static inline __m256 bytes8_ps(const uint8_t *p)
{
    return _mm256_cvtepi32_ps(simd_load8(p));
}

/* shr_aa_sharpness's inner loop, 8 bytes at a time with the same float operations in the same
 * order; returns where it stopped */
AVX2_FN static size_t sharp_avx2(const uint8_t *up, const uint8_t *mid, const uint8_t *dn,
                                 uint8_t *out, size_t C, size_t row, float factor)
{
    const __m256 k1 = _mm256_set1_ps(1.0f / 13.0f), k5 = _mm256_set1_ps(5.0f / 13.0f);
    const __m256 f = _mm256_set1_ps(factor), half = _mm256_set1_ps(0.5f);
    size_t i = C;
    for (; i + 8 + C <= row; i += 8) {
        __m256 s = half, t;
        t = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(bytes8_ps(dn + i - C), k1),
                                        _mm256_mul_ps(bytes8_ps(dn + i), k1)),
                          _mm256_mul_ps(bytes8_ps(dn + i + C), k1));
        s = _mm256_add_ps(s, t);
        t = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(bytes8_ps(mid + i - C), k1),
                                        _mm256_mul_ps(bytes8_ps(mid + i), k5)),
                          _mm256_mul_ps(bytes8_ps(mid + i + C), k1));
        s = _mm256_add_ps(s, t);
        t = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(bytes8_ps(up + i - C), k1),
                                        _mm256_mul_ps(bytes8_ps(up + i), k1)),
                          _mm256_mul_ps(bytes8_ps(up + i + C), k1));
        s = _mm256_add_ps(s, t);
        s = _mm256_min_ps(_mm256_max_ps(s, _mm256_setzero_ps()), _mm256_set1_ps(255.0f));
        simd_store8(out + i, simd_blend8(_mm256_cvttps_epi32(s), simd_load8(mid + i), f));
    }
    return i;
}
#endif

void shr_aa_sharpness(uint8_t *px, uint32_t width, uint32_t height, uint32_t channels,
                      size_t stride, float factor, uint8_t *scratch)
{
    if (width < 3 || height < 3)
        return;             /* Pillow's filter copies such images: a blend with itself */
    size_t row = (size_t)width * channels;
    shr_tf_copy_rows(scratch, row, px, stride, row, height);
    const float k1 = 1.0f / 13.0f, k5 = 5.0f / 13.0f;
    const size_t C = channels;
    for (uint32_t y = 1; y + 1 < height; y++) {
        const uint8_t *up = scratch + (y - 1) * row, *mid = scratch + y * row;
        const uint8_t *dn = scratch + (y + 1) * row;
        uint8_t *out = px + (size_t)y * stride;
        size_t i = C;
#ifdef FMT_AVX2
        if (fmt_simd())
            i = sharp_avx2(up, mid, dn, out, C, row, factor);
#endif
        for (; i < row - C; i++) {
            float ss = 0.5f;
            ss += (float)dn[i - C] * k1 + (float)dn[i] * k1 + (float)dn[i + C] * k1;
            ss += (float)mid[i - C] * k1 + (float)mid[i] * k5 + (float)mid[i + C] * k1;
            ss += (float)up[i - C] * k1 + (float)up[i] * k1 + (float)up[i + C] * k1;
            out[i] = fmt_color_blend(clip8f(ss), mid[i], factor);
        }
    }
}

/* ---- the ops ---- */

void shr_aa_apply_op(int op, double m, shr_filter filter, const uint8_t fill[4], uint8_t *px,
                     uint32_t width, uint32_t height, uint32_t channels, size_t stride,
                     uint8_t *scratch)
{
    size_t row = (size_t)width * channels;
    static const double origin[2] = {0.0, 0.0};
    switch (op) {
    case SHR_AA_SHEAR_X:
    case SHR_AA_SHEAR_Y: {
        double s = atan(m) * rad_to_deg;
        shr_affine_apply(px, stride, scratch, row, width, height, channels, 0.0, 0.0, 0.0, 1.0,
                         op == SHR_AA_SHEAR_X ? s : 0.0, op == SHR_AA_SHEAR_Y ? s : 0.0, origin,
                         filter, fill);
        shr_tf_copy_rows(px, stride, scratch, row, row, height);
        break;
    }
    case SHR_AA_TRANSLATE_X:
    case SHR_AA_TRANSLATE_Y: {
        double t = (double)(int64_t)m;
        shr_affine_apply(px, stride, scratch, row, width, height, channels, 0.0,
                         op == SHR_AA_TRANSLATE_X ? t : 0.0, op == SHR_AA_TRANSLATE_Y ? t : 0.0,
                         1.0, 0.0, 0.0, NULL, filter, fill);
        shr_tf_copy_rows(px, stride, scratch, row, row, height);
        break;
    }
    case SHR_AA_ROTATE:
        shr_affine_rotate(px, stride, scratch, row, width, height, channels, m, filter, fill);
        shr_tf_copy_rows(px, stride, scratch, row, row, height);
        break;
    case SHR_AA_BRIGHTNESS:
        fmt_color_brightness(px, width, height, channels, stride, (float)(1.0 + m));
        break;
    case SHR_AA_COLOR:
        fmt_color_saturation(px, width, height, channels, stride, (float)(1.0 + m));
        break;
    case SHR_AA_CONTRAST:
        fmt_color_contrast(px, width, height, channels, stride, (float)(1.0 + m));
        break;
    case SHR_AA_SHARPNESS:
        shr_aa_sharpness(px, width, height, channels, stride, (float)(1.0 + m), scratch);
        break;
    case SHR_AA_POSTERIZE:
        shr_aa_posterize(px, width, height, channels, stride, (int)m);
        break;
    case SHR_AA_SOLARIZE:
        shr_aa_solarize(px, width, height, channels, stride, m);
        break;
    case SHR_AA_AUTOCONTRAST:
        shr_aa_autocontrast(px, width, height, channels, stride);
        break;
    case SHR_AA_EQUALIZE:
        shr_aa_equalize(px, width, height, channels, stride);
        break;
    case SHR_AA_INVERT:
        /* ImageOps.invert: 255 - x in every band */
        for (uint32_t y = 0; y < height; y++)
            for (size_t i = 0; i < (size_t)width * channels; i++)
                px[y * stride + i] = (uint8_t)(255 - px[y * stride + i]);
        break;
    default:
        break;
    }
}

void shr_aa_apply(const shr_aa *t, const shr_params *p, uint8_t *px, uint32_t width,
                  uint32_t height, uint32_t channels, size_t stride, uint8_t *scratch)
{
    for (uint32_t i = 0; i < p->aa_ops && i < SHR_AA_MAX_OPS; i++)
        shr_aa_apply_op(p->aa_op[i], (double)p->aa_magnitude[i], t->filter, t->fill, px, width,
                        height, channels, stride, scratch);
}
