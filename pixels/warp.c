/* warp.c - Pillow 9.4's affine transform and Image.rotate, as torchvision's F.affine and
 * F.rotate call them on a PIL image.
 *
 * What Pillow computes, and how it is reproduced:
 *   The matrix. torchvision's F.affine hands Pillow the inverse matrix of
 *   _get_inverse_affine_matrix, computed in Python doubles with libm's cos, sin and tan; F.rotate
 *   calls Image.rotate, which takes the angle modulo 360 (Python's float %), turns 0 and 180
 *   degrees (and 90 and 270 on a square image) into exact copies and transposes, and otherwise
 *   builds its own matrix from cos and sin each rounded to 15 decimals (Python's round(x, 15)).
 *   Both are evaluated here with the same operations in the same order, on the same libm.
 *   The sampling (libImaging/Geometry.c, ImagingTransformAffine). NEAREST with no rotation or
 *   shear terms (a[1] == a[3] == 0) is ImagingScaleAffine: a column table built by adding a[0]
 *   in double, rows by adding a[4]. Otherwise, when the four corners map inside +-32768, it is
 *   the 16.16 fixed-point walk (coefficients rounded with floor(v * 65536 + 0.5), positions
 *   accumulated in integers, >> 16); else a double walk. BILINEAR is the generic transform: each
 *   output pixel's centre mapped in double, refused unless 0 <= x < width and 0 <= y < height,
 *   then Pillow's two-tap blend in double with edge clamping and a truncation to uint8. A pixel
 *   that maps outside keeps the fill colour the output image was created with.
 *   Floating point contraction is off (C11 mode), as in Pillow's x86-64 build.
 *   The vector path of BILINEAR on RGB (AVX2, where the caller allows it and the CPU has it)
 *   maps 4 pixels at a time in double lanes and blends the three channels of a pixel in double
 *   lanes, with the same operations: the same bytes.
 */
#include "warp.h"
#include "simd.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define WARP_AVX2 1
#include <immintrin.h>
/* no FMA: no multiply-add is fused, so the vector path's doubles are the plain path's */
#define WARP_AVX2_FN __attribute__((target("avx2")))
#endif

/* CPython's math.radians factor (Py_MATH_PI / 180.0) */
static const double deg_to_rad = 3.14159265358979323846 / 180.0;

/* ---- matrices ---- */

void fmt_warp_inverse(double m[6], double cx, double cy, double angle, double tx, double ty,
                        double scale, double shear_x, double shear_y)
{
    double rot = angle * deg_to_rad;
    double sx = shear_x * deg_to_rad;
    double sy = shear_y * deg_to_rad;
    double a = cos(rot - sy) / cos(sy);
    double b = -cos(rot - sy) * tan(sx) / cos(sy) - sin(rot);
    double c = sin(rot - sy) / cos(sy);
    double d = -sin(rot - sy) * tan(sx) / cos(sy) + cos(rot);
    m[0] = d / scale;
    m[1] = -b / scale;
    m[2] = 0.0 / scale;
    m[3] = -c / scale;
    m[4] = a / scale;
    m[5] = 0.0 / scale;
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
    m[2] += cx;
    m[5] += cy;
}

/* Python's round(x, 15) of |x| <= 1: the decimal rounding (correctly rounded, as printf's is)
 * read back as the nearest double; n / 1e15 is that, both being exact doubles. */
static double round15(double x)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.15f", x);
    int neg = buf[0] == '-';
    int64_t n = 0;
    for (const char *s = buf + neg; *s; s++)
        if (*s >= '0' && *s <= '9')
            n = n * 10 + (*s - '0');
    double v = (double)n / 1e15;
    return neg ? -v : v;
}

/* Python's x % 360.0 */
static double py_mod360(double x)
{
    double m = fmod(x, 360.0);
    if (m != 0.0) {
        if (m < 0)
            m += 360.0;
    } else {
        m = 0.0;
    }
    return m;
}

/* Image.rotate's matrix for an angle already taken modulo 360 (center and translate None) */
static void rotate_matrix(double m[6], uint32_t width, uint32_t height, double angle)
{
    double cx = width / 2.0, cy = height / 2.0;
    double r = -(angle * deg_to_rad);
    m[0] = round15(cos(r));
    m[1] = round15(sin(r));
    m[2] = 0.0;
    m[3] = round15(-sin(r));
    m[4] = round15(cos(r));
    m[5] = 0.0;
    double x = -cx - 0, y = -cy - 0;
    double t2 = m[0] * x + m[1] * y + m[2];
    double t5 = m[3] * x + m[4] * y + m[5];
    m[2] = t2 + cx;
    m[5] = t5 + cy;
}

/* ---- sampling ---- */

/* Geometry.c's COORD: -1 below 0, else the truncation; values past int range come out as x86's
 * INT_MIN there, outside the image either way */
static inline int coord(double v)
{
    return v < 0.0 ? -1 : v < 2147483648.0 ? (int)v : -1;
}

/* Geometry.c's FLOOR */
static inline int ifloor(double v)
{
    return v < 0.0 ? (int)floor(v) : (int)v;
}

static void fill_image(uint8_t *dst, size_t dstride, uint32_t width, uint32_t height,
                       uint32_t channels, const uint8_t fill[4])
{
    for (uint32_t y = 0; y < height; y++) {
        uint8_t *row = dst + (size_t)y * dstride;
        if (channels == 1) {
            memset(row, fill[0], width);
            continue;
        }
        if (fill[0] == fill[1] && fill[1] == fill[2]) {
            memset(row, fill[0], (size_t)width * 3);
            continue;
        }
        for (uint32_t x = 0; x < width; x++, row += 3) {
            row[0] = fill[0];
            row[1] = fill[1];
            row[2] = fill[2];
        }
    }
}

static inline void copy_px(uint8_t *d, const uint8_t *s, uint32_t channels)
{
    d[0] = s[0];
    if (channels == 3) {
        d[1] = s[1];
        d[2] = s[2];
    }
}

#define SCALE_CHUNK 1024

/* ImagingScaleAffine */
static void scale_nearest(const uint8_t *src, size_t sstride, uint8_t *dst, size_t dstride,
                          uint32_t width, uint32_t height, uint32_t C, const double a[6])
{
    int xsize = (int)width, ysize = (int)height;
    /* the columns that map inside: [xmin, xmax) */
    int xmin = xsize, xmax = 0;
    double xo = a[2] + a[0] * 0.5;
    for (int x = 0; x < xsize; x++) {
        int xin = coord(xo);
        if (xin >= 0 && xin < xsize) {
            xmax = x + 1;
            if (x < xmin)
                xmin = x;
        }
        xo += a[0];
    }
    if (xmin >= xmax)
        return;
    /* Pillow's column table, a chunk at a time (the same sums: the walk carries on); entries of
     * columns inside [xmin, xmax) that map outside stay 0, as in its calloc'd table */
    int tab[SCALE_CHUNK];
    xo = a[2] + a[0] * 0.5;
    for (int xs = 0; xs < xsize; xs += SCALE_CHUNK) {
        int xe = xs + SCALE_CHUNK < xsize ? xs + SCALE_CHUNK : xsize;
        for (int x = xs; x < xe; x++) {
            int xin = coord(xo);
            tab[x - xs] = xin >= 0 && xin < xsize ? xin : 0;
            xo += a[0];
        }
        int lo = xmin > xs ? xmin : xs, hi = xmax < xe ? xmax : xe;
        if (lo >= hi)
            continue;
        /* a table of consecutive columns (a translation: TranslateX/Y, RandomAffine's
         * translate) is one copy a row; the table itself says so, whatever the coefficients */
        int run = 1;
        for (int x = lo + 1; x < hi && run; x++)
            run = tab[x - xs] == tab[lo - xs] + (x - lo);
        double yo = a[5] + a[4] * 0.5;
        for (int y = 0; y < ysize; y++) {
            int yi = coord(yo);
            if (yi >= 0 && yi < ysize) {
                const uint8_t *in = src + (size_t)yi * sstride;
                uint8_t *out = dst + (size_t)y * dstride;
                if (run)
                    memcpy(out + (size_t)lo * C, in + (size_t)tab[lo - xs] * C,
                           (size_t)(hi - lo) * C);
                else if (C == 3)
                    for (int x = lo; x < hi; x++) {
                        const uint8_t *s = in + (size_t)tab[x - xs] * 3;
                        uint8_t *d = out + (size_t)x * 3;
                        d[0] = s[0];
                        d[1] = s[1];
                        d[2] = s[2];
                    }
                else
                    for (int x = lo; x < hi; x++)
                        out[x] = in[tab[x - xs]];
            }
            yo += a[4];
        }
    }
}

static int check_fixed(const double a[6], int x, int y)
{
    return fabs(x * a[0] + y * a[1] + a[2]) < 32768.0 &&
           fabs(x * a[3] + y * a[4] + a[5]) < 32768.0;
}

static int64_t fix16(double v)
{
    return ifloor(v * 65536.0 + 0.5);
}

/* affine_fixed: 16.16 fixed point (inlined with C a constant: one loop per channel count) */
static inline void fixed_nearest(const uint8_t *src, size_t sstride, uint8_t *dst,
                                 size_t dstride, uint32_t width, uint32_t height, uint32_t C,
                                 const double a[6])
{
    int64_t a0 = fix16(a[0]), a1 = fix16(a[1]), a3 = fix16(a[3]), a4 = fix16(a[4]);
    int64_t a2 = fix16(a[2] + a[0] * 0.5 + a[1] * 0.5);
    int64_t a5 = fix16(a[5] + a[3] * 0.5 + a[4] * 0.5);
    int64_t xsize = width, ysize = height;
    if (a0 == 65536 && a3 == 0) {
        /* a step of exactly one column along the row and none down it (ShearX): xin is
         * (a2 >> 16) + x and yin is a5 >> 16 for the whole row, so the row is one copy */
        for (uint32_t y = 0; y < height; y++, a2 += a1, a5 += a4) {
            int64_t base = a2 >> 16, yin = a5 >> 16;
            if (yin < 0 || yin >= ysize)
                continue;
            int64_t x0 = base < 0 ? -base : 0, x1 = xsize - base;
            x1 = x1 < (int64_t)width ? x1 : (int64_t)width;
            if (x0 < x1)
                memcpy(dst + (size_t)y * dstride + (size_t)x0 * C,
                       src + (size_t)yin * sstride + (size_t)(base + x0) * C,
                       (size_t)(x1 - x0) * C);
        }
        return;
    }
    for (uint32_t y = 0; y < height; y++) {
        int64_t xx = a2, yy = a5;
        uint8_t *out = dst + (size_t)y * dstride;
        for (uint32_t x = 0; x < width; x++) {
            int64_t xin = xx >> 16, yin = yy >> 16;
            if (xin >= 0 && xin < xsize && yin >= 0 && yin < ysize)
                copy_px(out + (size_t)x * C, src + (size_t)yin * sstride + (size_t)xin * C, C);
            xx += a0;
            yy += a3;
        }
        a2 += a1;
        a5 += a4;
    }
}

/* ImagingTransformAffine's double walk, for coefficients beyond the fixed point's range */
static inline void float_nearest(const uint8_t *src, size_t sstride, uint8_t *dst, size_t dstride,
                          uint32_t width, uint32_t height, uint32_t C, const double a[6])
{
    int xsize = (int)width, ysize = (int)height;
    double xo = a[2] + a[1] * 0.5 + a[0] * 0.5;
    double yo = a[5] + a[4] * 0.5 + a[3] * 0.5;
    for (uint32_t y = 0; y < height; y++) {
        double xx = xo, yy = yo;
        uint8_t *out = dst + (size_t)y * dstride;
        for (uint32_t x = 0; x < width; x++) {
            int xin = coord(xx);
            if (xin >= 0 && xin < xsize) {
                int yin = coord(yy);
                if (yin >= 0 && yin < ysize)
                    copy_px(out + (size_t)x * C, src + (size_t)yin * sstride + (size_t)xin * C,
                            C);
            }
            xx += a[0];
            yy += a[3];
        }
        xo += a[1];
        yo += a[4];
    }
}

#ifdef WARP_AVX2
/* the 3 bytes of an RGB pixel as 4 double lanes (the 4th 0); a 4-byte load where the pixel is
 * not the row's last */
WARP_AVX2_FN static inline __m256d px_pd(const uint8_t *row, int c, int last)
{
    uint32_t v;
    if (c < last) {
        memcpy(&v, row + (size_t)c * 3, 4);
        v &= 0xffffffu;
    } else {
        v = 0;
        memcpy(&v, row + (size_t)c * 3, 3);
    }
    return _mm256_cvtepi32_pd(_mm_cvtepu8_epi32(_mm_cvtsi32_si128((int)v)));
}

/* bilinear's per-pixel blend for RGB, the three channels in double lanes: the same operations
 * (int differences converted exactly, products and sums in double) */
WARP_AVX2_FN static inline void bilinear_rgb(uint8_t *out, const uint8_t *in0, const uint8_t *in1,
                                        int c0, int c1, int last, double dx, double dy)
{
    __m256d vdx = _mm256_set1_pd(dx), vdy = _mm256_set1_pd(dy);
    __m256d a0 = px_pd(in0, c0, last), a1 = px_pd(in0, c1, last);
    __m256d b0 = px_pd(in1, c0, last), b1 = px_pd(in1, c1, last);
    __m256d v1 = _mm256_add_pd(a0, _mm256_mul_pd(_mm256_sub_pd(a1, a0), vdx));
    __m256d v2 = _mm256_add_pd(b0, _mm256_mul_pd(_mm256_sub_pd(b1, b0), vdx));
    v1 = _mm256_add_pd(v1, _mm256_mul_pd(_mm256_sub_pd(v2, v1), vdy));
    __m128i i = _mm256_cvttpd_epi32(v1);
    i = _mm_packus_epi16(_mm_packus_epi32(i, i), i);
    uint32_t w = (uint32_t)_mm_cvtsi128_si32(i);
    memcpy(out, &w, 3);
}

/* bilinear() for RGB: the positions of 4 output pixels at a time in double lanes (the same
 * products and sums, floor for Geometry.c's FLOOR), then each pixel's blend */
WARP_AVX2_FN static void bilinear_rgb_avx2(const uint8_t *src, size_t sstride, uint8_t *dst,
                                      size_t dstride, int xsize, int ysize, const double a[6])
{
    const __m256d a0 = _mm256_set1_pd(a[0]), a2 = _mm256_set1_pd(a[2]);
    const __m256d a3 = _mm256_set1_pd(a[3]), a5 = _mm256_set1_pd(a[5]);
    const __m256d half = _mm256_set1_pd(0.5), zero = _mm256_setzero_pd();
    const __m256d xs = _mm256_set1_pd((double)xsize), ys = _mm256_set1_pd((double)ysize);
    for (int y = 0; y < ysize; y++) {
        uint8_t *out = dst + (size_t)y * dstride;
        double yc = y + 0.5;
        const __m256d a1y = _mm256_set1_pd(a[1] * yc), a4y = _mm256_set1_pd(a[4] * yc);
        for (int x = 0; x < xsize; x += 4) {
            __m256d xc = _mm256_add_pd(_mm256_set_pd(x + 3, x + 2, x + 1, x), half);
            __m256d xin = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(a0, xc), a1y), a2);
            __m256d yin = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(a3, xc), a4y), a5);
            __m256d in = _mm256_and_pd(
                _mm256_and_pd(_mm256_cmp_pd(xin, zero, _CMP_GE_OQ),
                              _mm256_cmp_pd(xin, xs, _CMP_LT_OQ)),
                _mm256_and_pd(_mm256_cmp_pd(yin, zero, _CMP_GE_OQ),
                              _mm256_cmp_pd(yin, ys, _CMP_LT_OQ)));
            int mask = _mm256_movemask_pd(in);
            if (!mask)
                continue;
            /* outside lanes are clamped into the image so the conversions stay in range */
            xin = _mm256_blendv_pd(zero, _mm256_sub_pd(xin, half), in);
            yin = _mm256_blendv_pd(zero, _mm256_sub_pd(yin, half), in);
            __m256d fx = _mm256_floor_pd(xin), fy = _mm256_floor_pd(yin);
            double dx[4], dy[4];
            int32_t x0[4], y0[4];
            _mm256_storeu_pd(dx, _mm256_sub_pd(xin, fx));
            _mm256_storeu_pd(dy, _mm256_sub_pd(yin, fy));
            _mm_storeu_si128((__m128i *)x0, _mm256_cvttpd_epi32(fx));
            _mm_storeu_si128((__m128i *)y0, _mm256_cvttpd_epi32(fy));
            for (int k = 0; k < 4 && x + k < xsize; k++) {
                if (!(mask >> k & 1))
                    continue;
                int c0 = x0[k] < 0 ? 0 : x0[k] < xsize ? x0[k] : xsize - 1;
                int c1 = x0[k] + 1 < 0 ? 0 : x0[k] + 1 < xsize ? x0[k] + 1 : xsize - 1;
                int r0 = y0[k] < 0 ? 0 : y0[k] < ysize ? y0[k] : ysize - 1;
                const uint8_t *in0 = src + (size_t)r0 * sstride;
                /* where there is no second row, v2 is computed from the first: v1 again */
                const uint8_t *in1 = y0[k] + 1 >= 0 && y0[k] + 1 < ysize
                                         ? src + (size_t)(y0[k] + 1) * sstride : in0;
                bilinear_rgb(out + (size_t)(x + k) * 3, in0, in1, c0, c1, xsize - 1, dx[k],
                             dy[k]);
            }
        }
    }
}
#endif

/* ImagingGenericTransform with affine_transform and bilinear_filter8 / bilinear_filter32RGB */
static void bilinear(const uint8_t *src, size_t sstride, uint8_t *dst, size_t dstride,
                     uint32_t width, uint32_t height, uint32_t C, const double a[6], int vector)
{
    int xsize = (int)width, ysize = (int)height;
#ifdef WARP_AVX2
    if (C == 3 && vector && (fmt_cpu() & FMT_CPU_AVX2)) {
        bilinear_rgb_avx2(src, sstride, dst, dstride, xsize, ysize, a);
        return;
    }
#endif
    for (int y = 0; y < ysize; y++) {
        uint8_t *out = dst + (size_t)y * dstride;
        double yc = y + 0.5;
        for (int x = 0; x < xsize; x++) {
            double xc = x + 0.5;
            double xin = a[0] * xc + a[1] * yc + a[2];
            double yin = a[3] * xc + a[4] * yc + a[5];
            if (xin < 0.0 || xin >= xsize || yin < 0.0 || yin >= ysize)
                continue;
            xin -= 0.5;
            yin -= 0.5;
            int x0 = ifloor(xin), y0 = ifloor(yin);
            double dx = xin - x0, dy = yin - y0;
            int c0 = x0 < 0 ? 0 : x0 < xsize ? x0 : xsize - 1;
            int c1 = x0 + 1 < 0 ? 0 : x0 + 1 < xsize ? x0 + 1 : xsize - 1;
            int r0 = y0 < 0 ? 0 : y0 < ysize ? y0 : ysize - 1;
            int has2 = y0 + 1 >= 0 && y0 + 1 < ysize;
            const uint8_t *in0 = src + (size_t)r0 * sstride;
            const uint8_t *in1 = has2 ? src + (size_t)(y0 + 1) * sstride : in0;
            size_t i0 = (size_t)c0 * C, i1 = (size_t)c1 * C;
            for (uint32_t b = 0; b < C; b++) {
                double v1 = in0[i0 + b] + (in0[i1 + b] - in0[i0 + b]) * dx;
                double v2 = has2 ? in1[i0 + b] + (in1[i1 + b] - in1[i0 + b]) * dx : v1;
                v1 = v1 + (v2 - v1) * dy;
                out[(size_t)x * C + b] = (uint8_t)v1;
            }
        }
    }
}

void fmt_warp(const uint8_t *src, size_t sstride, uint8_t *dst, size_t dstride, uint32_t width,
              uint32_t height, uint32_t channels, const double m[6], fmt_warp_filter filter,
              const uint8_t fill[4], int vector)
{
    fill_image(dst, dstride, width, height, channels, fill);
    if (filter == FMT_WARP_BILINEAR)
        bilinear(src, sstride, dst, dstride, width, height, channels, m, vector);
    else if (m[1] == 0 && m[3] == 0)
        scale_nearest(src, sstride, dst, dstride, width, height, channels, m);
    else if (check_fixed(m, 0, 0) && check_fixed(m, (int)width, (int)height) &&
             check_fixed(m, 0, (int)height) && check_fixed(m, (int)width, 0)) {
        if (channels == 3)
            fixed_nearest(src, sstride, dst, dstride, width, height, 3, m);
        else
            fixed_nearest(src, sstride, dst, dstride, width, height, 1, m);
    } else if (channels == 3) {
        float_nearest(src, sstride, dst, dstride, width, height, 3, m);
    } else {
        float_nearest(src, sstride, dst, dstride, width, height, 1, m);
    }
}

/* Pillow's transposes, exact quarter and half turns */
static void turn(const uint8_t *src, size_t sstride, uint8_t *dst, size_t dstride,
                 uint32_t width, uint32_t height, uint32_t C, int quarter)
{
    uint32_t n = width;      /* quarter turns only on square images */
    for (uint32_t r = 0; r < height; r++) {
        uint8_t *out = dst + (size_t)r * dstride;
        for (uint32_t c = 0; c < width; c++) {
            const uint8_t *s;
            if (quarter == 2)
                s = src + (size_t)(height - 1 - r) * sstride + (size_t)(width - 1 - c) * C;
            else if (quarter == 1)      /* ROTATE_90, counter-clockwise */
                s = src + (size_t)c * sstride + (size_t)(n - 1 - r) * C;
            else                        /* ROTATE_270 */
                s = src + (size_t)(n - 1 - c) * sstride + (size_t)r * C;
            copy_px(out + (size_t)c * C, s, C);
        }
    }
}

void fmt_warp_rotate(const uint8_t *src, size_t sstride, uint8_t *dst, size_t dstride,
                     uint32_t width, uint32_t height, uint32_t channels, double angle,
                     fmt_warp_filter filter, const uint8_t fill[4], int vector)
{
    angle = py_mod360(angle);
    if (angle == 0.0) {
        for (uint32_t y = 0; y < height; y++)
            memcpy(dst + (size_t)y * dstride, src + (size_t)y * sstride, (size_t)width * channels);
        return;
    }
    if (angle == 180.0 || ((angle == 90.0 || angle == 270.0) && width == height)) {
        turn(src, sstride, dst, dstride, width, height, channels,
             angle == 180.0 ? 2 : angle == 90.0 ? 1 : 3);
        return;
    }
    double m[6];
    rotate_matrix(m, width, height, angle);
    fmt_warp(src, sstride, dst, dstride, width, height, channels, m, filter, fill, vector);
}
