/* hsv.c - Pillow's rgb2hsv and hsv2rgb (libImaging/Convert.c), which mix float and double
 * arithmetic: the functions below keep every operand's type as C gives it there (floating point
 * contraction is off in C11 mode, and Pillow's x86-64 build has no FMA). The reader's tests
 * compare them with Pillow on all 2^24 colours. */
#include "hsv.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

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

void fmt_rgb2hsv(const uint8_t rgb[3], uint8_t hsv[3])
{
    rgb2hsv(rgb[0], rgb[1], rgb[2], &hsv[0], &hsv[1], &hsv[2]);
}

void fmt_hsv2rgb(const uint8_t hsv[3], uint8_t rgb[3])
{
    hsv2rgb(hsv[0], hsv[1], hsv[2], rgb);
}

uint8_t fmt_hue_shift(double hue_factor)
{
    return (uint8_t)(int)(hue_factor * 255.0);
}

void fmt_hue_row(uint8_t *p, size_t n, uint8_t shift)
{
    for (size_t x = 0; x < n; x++, p += 3) {
        if (p[0] == p[1] && p[1] == p[2])
            continue;       /* grey: saturation 0 comes back as it was */
        uint8_t h, s, v;
        rgb2hsv(p[0], p[1], p[2], &h, &s, &v);
        hsv2rgb((uint8_t)(h + shift), s, v, p);
    }
}
