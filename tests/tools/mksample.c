/* mksample.c - the sample-data generator of shardc-mksample (mksample.h): synthetic class-folder
 * datasets (class images, the format mix, broken files, list files). Not part of the compiler
 * library: demos, tests and benchmarks run the program to make data on the spot, and the
 * generator's tests link this file. The program's command line is mksample_main.c, its detection
 * samples (--coco) mksample_coco.c.
 *
 * Rendering works on a float RGB canvas in layers: a background (a tinted gradient, or for photos
 * a four-corner gradient with soft blobs and value noise), then the class shape or texture drawn
 * with an anti-aliased coverage from a signed distance, then fine per-pixel noise and
 * quantisation. Colours live in an opponent space: a brightness L along the gray axis plus a
 * chroma vector of length C at hue h orthogonal to it. Every class owns a hue band, so classes
 * differ in colour even where the shape is small or partly hidden, and brightness jitter (which
 * only moves along the gray axis) does not blur the class difference.
 *
 * Every random draw comes from a splitmix64 stream keyed by (seed, class, index, purpose): the
 * size of an image does not depend on how its pixels were drawn, and nothing depends on the order
 * in which images are made.
 */
#include "mksample.h"
#include "enhance.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MKS_PI 3.14159265358979323846

/* ---- random numbers ------------------------------------------------------------------------ */

typedef struct {
    uint64_t s;
} mks_rng;

enum { MKS_TAG_PLAN = 1, MKS_TAG_DRAW = 2, MKS_TAG_NOISE = 3, MKS_TAG_BROKEN = 4 };

static mks_rng mks_rng_for(uint64_t seed, unsigned cls, unsigned index, unsigned tag)
{
    uint64_t s = mks_mix64(seed ^ 0x6a09e667f3bcc909ull);
    s = mks_mix64(s ^ ((uint64_t)cls << 32 | index));
    s = mks_mix64(s ^ (0x3c6ef372fe94f82bull * tag));
    return (mks_rng){ s };
}

static uint64_t mks_rng_u64(mks_rng *r)
{
    r->s += 0x9e3779b97f4a7c15ull;
    return mks_mix64(r->s);
}

static float mks_rng_uniform(mks_rng *r, double lo, double hi)
{
    double u = (double)(mks_rng_u64(r) >> 11) * 0x1.0p-53;
    return (float)(lo + (hi - lo) * u);
}

static uint32_t mks_rng_below(mks_rng *r, uint32_t n)
{
    return (uint32_t)(((mks_rng_u64(r) >> 32) * (uint64_t)n) >> 32);
}

/* ---- classes ------------------------------------------------------------------------------- */

typedef enum {
    MKS_CIRCLE, MKS_SQUARE, MKS_STRIPES, MKS_CHECKER, MKS_TRIANGLE, MKS_RING, MKS_CROSS, MKS_DOTS,
    MKS_DIAMOND, MKS_WAVES, MKS_GRID, MKS_STAR, MKS_MOON, MKS_TARGET, MKS_ZIGZAG, MKS_FRAME
} mks_kind;

static const char *const mks_names[MKS_MAX_CLASSES] = {
    "circle", "square", "stripes", "checker", "triangle", "ring", "cross", "dots",
    "diamond", "waves", "grid", "star", "moon", "target", "zigzag", "frame",
};

static int mks_is_texture(unsigned kind)
{
    return kind == MKS_STRIPES || kind == MKS_CHECKER || kind == MKS_DOTS || kind == MKS_WAVES ||
           kind == MKS_GRID || kind == MKS_ZIGZAG;
}

/* Class hues: bit-reversed indices spread any prefix of the classes around the colour circle
 * (4 classes: 0, 180, 90, 270 degrees), so small datasets get the most distinct colours. */
static float mks_class_hue(unsigned cls)
{
    unsigned rev = ((cls & 1) << 3) | ((cls & 2) << 1) | ((cls & 4) >> 1) | ((cls & 8) >> 3);
    return (float)(rev * (2.0 * MKS_PI / 16.0));
}

const char *mks_class_name(unsigned cls)
{
    return cls < MKS_MAX_CLASSES ? mks_names[cls] : NULL;
}

int mks_class_label(unsigned cls, unsigned classes)
{
    if (classes == 0 || classes > MKS_MAX_CLASSES || cls >= classes)
        return -1;
    int label = 0;
    for (unsigned i = 0; i < classes; i++)
        if (strcmp(mks_names[i], mks_names[cls]) < 0)
            label++;
    return label;
}

/* ---- options and plans --------------------------------------------------------------------- */

void mks_opts_init(mks_opts *o)
{
    memset(o, 0, sizeof *o);
    o->classes = 4;
    o->per_class = 24;
    o->seed = 1;
    o->min_side = 48;
    o->max_side = 160;
    o->broken = 1;
}

const char *mks_opts_error(const mks_opts *o)
{
    if (!o)
        return "no options";
    if (o->classes < 1 || o->classes > MKS_MAX_CLASSES)
        return "--classes must be 1..16";
    if (o->per_class < 1 || o->per_class > MKS_MAX_PER_CLASS)
        return "--per-class must be 1..1000000";
    if (o->photo)
        return NULL;
    if (o->min_side < MKS_MIN_SIDE_LIMIT || o->max_side > MKS_MAX_SIDE_LIMIT)
        return "sides must be 8..8192";
    if (o->min_side > o->max_side)
        return "--min-side must not exceed --max-side";
    return NULL;
}

/* The format mix, one slot per image, cycled per class with a class-dependent rotation:
 * 12 JPEG (60%), 5 PNG (25%), 3 BMP (15%). */
typedef struct {
    fmt_image_type type;
    uint32_t channels;
    int quality, subsampling, progressive, restart_rows;
} mks_slot;

static const mks_slot mks_slots[20] = {
    { FMT_IMG_JPEG, 3, 90, 420, 0, 0 },
    { FMT_IMG_PNG, 3, 0, 0, 0, 0 },
    { FMT_IMG_JPEG, 3, 95, 444, 0, 0 },
    { FMT_IMG_BMP, 3, 0, 0, 0, 0 },
    { FMT_IMG_JPEG, 3, 85, 420, 1, 0 },
    { FMT_IMG_PNG, 3, 0, 0, 0, 0 },
    { FMT_IMG_JPEG, 3, 90, 420, 0, 2 },
    { FMT_IMG_JPEG, 3, 80, 422, 0, 0 },
    { FMT_IMG_PNG, 1, 0, 0, 0, 0 },
    { FMT_IMG_JPEG, 1, 90, 0, 0, 0 },
    { FMT_IMG_BMP, 3, 0, 0, 0, 0 },
    { FMT_IMG_JPEG, 3, 92, 444, 1, 0 },
    { FMT_IMG_PNG, 3, 0, 0, 0, 0 },
    { FMT_IMG_JPEG, 3, 75, 420, 0, 0 },
    { FMT_IMG_JPEG, 3, 90, 422, 0, 1 },
    { FMT_IMG_BMP, 1, 0, 0, 0, 0 },
    { FMT_IMG_JPEG, 3, 95, 420, 0, 0 },
    { FMT_IMG_PNG, 3, 0, 0, 0, 0 },
    { FMT_IMG_JPEG, 1, 85, 0, 1, 0 },
    { FMT_IMG_JPEG, 3, 60, 420, 0, 0 },
};


static const char *mks_ext(fmt_image_type t)
{
    return t == FMT_IMG_PNG ? "png" : t == FMT_IMG_BMP ? "bmp" : "jpg";
}

int mks_plan(const mks_opts *o, unsigned cls, unsigned index, mks_item *it)
{
    memset(it, 0, sizeof *it);
    if (mks_opts_error(o) || cls >= o->classes || index >= o->per_class)
        return FMT_EINVAL;
    mks_rng r = mks_rng_for(o->seed, cls, index, MKS_TAG_PLAN);
    if (o->photo) {
        /* every photo its own size, as in ImageNet: the long side uniform in
         * MKS_PHOTO_MIN_LONG..MKS_PHOTO_MAX_LONG, the aspect ratio uniform in 1..1.5, one in
         * three portrait */
        uint32_t lng = MKS_PHOTO_MIN_LONG + mks_rng_below(&r, MKS_PHOTO_MAX_LONG - MKS_PHOTO_MIN_LONG + 1);
        uint32_t shrt = (uint32_t)((uint64_t)lng * 1000 / (1000 + mks_rng_below(&r, 501)));
        int portrait = mks_rng_below(&r, 3) == 0;
        it->width = portrait ? shrt : lng;
        it->height = portrait ? lng : shrt;
        it->channels = 3;
        it->type = FMT_IMG_JPEG;
        it->jpeg.quality = MKS_PHOTO_QUALITY;
        it->jpeg.subsampling = 420;
    } else {
        uint32_t span = o->max_side - o->min_side + 1;
        it->width = o->min_side + mks_rng_below(&r, span);
        it->height = o->min_side + mks_rng_below(&r, span);
        const mks_slot *s = &mks_slots[(index + cls * 7u) % 20u];
        it->type = s->type;
        it->channels = s->channels;
        if (s->type == FMT_IMG_JPEG) {
            it->jpeg.quality = s->quality;
            it->jpeg.subsampling = s->channels == 3 ? s->subsampling : 420;
            it->jpeg.progressive = s->progressive;
            it->jpeg.restart_rows = s->restart_rows;
            /* exactly one CMYK file per dataset: slot 0 of class 0 is a baseline RGB JPEG */
            it->jpeg.cmyk = cls == 0 && index == 0;
        } else if (s->type == FMT_IMG_PNG) {
            it->png_level = 6;
        }
    }
    snprintf(it->name, sizeof it->name, "%05u.%s", index, mks_ext(it->type));
    return 0;
}

/* ---- drawing ------------------------------------------------------------------------------- */

typedef struct {
    float *p;           /* RGB, 0..255 scale, unclamped */
    uint32_t w, h;
} mks_canvas;

typedef struct {
    float rgb[3];
} mks_color;

/* Opponent colour: brightness l (0..1) on the gray axis plus chroma c (0..~0.5) at hue h. */
static mks_color mks_color_lch(float l, float c, float h)
{
    const float u0 = 0.70710678f, u1 = -0.70710678f;                    /* (1,-1,0)/sqrt2 */
    const float v0 = 0.40824829f, v1 = 0.40824829f, v2 = -0.81649658f;  /* (1,1,-2)/sqrt6 */
    float a = c * cosf(h), b = c * sinf(h);
    mks_color col = { { 255.0f * (l + a * u0 + b * v0), 255.0f * (l + a * u1 + b * v1),
                        255.0f * (l + b * v2) } };
    return col;
}

static float mks_clampf(float v, float lo, float hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* Coverage of a pixel by a region, from the signed distance (pixels, negative inside): a one-pixel
 * ramp across the edge, which is enough anti-aliasing to keep JPEG and resize artefacts natural. */
static float mks_cover(float d)
{
    return mks_clampf(0.5f - d, 0.0f, 1.0f);
}

/* Distance to the edge of stripes of period p (stripe where the phase is in [0, 0.5)). */
static float mks_stripe_dist(float s, float p)
{
    float t = s / p - floorf(s / p);
    return (fabsf(t - 0.25f) - 0.25f) * p;
}

static float mks_box_dist(float x, float y, float a, float b)
{
    float qx = fabsf(x) - a, qy = fabsf(y) - b;
    if (qx > 0 && qy > 0)
        return sqrtf(qx * qx + qy * qy);
    return qx > qy ? qx : qy;
}

/* Signed distance to a simple polygon (negative inside), by edge distance and crossing parity. */
static float mks_poly_dist(const float (*v)[2], int n, float px, float py)
{
    float d = (px - v[0][0]) * (px - v[0][0]) + (py - v[0][1]) * (py - v[0][1]);
    float s = 1.0f;
    for (int i = 0, j = n - 1; i < n; j = i, i++) {
        float ex = v[j][0] - v[i][0], ey = v[j][1] - v[i][1];
        float wx = px - v[i][0], wy = py - v[i][1];
        float t = mks_clampf((wx * ex + wy * ey) / (ex * ex + ey * ey), 0.0f, 1.0f);
        float bx = wx - ex * t, by = wy - ey * t;
        float dd = bx * bx + by * by;
        if (dd < d)
            d = dd;
        int c1 = py >= v[i][1], c2 = py < v[j][1], c3 = ex * wy > ey * wx;
        if ((c1 && c2 && c3) || (!c1 && !c2 && !c3))
            s = -s;
    }
    return s * sqrtf(d);
}

/* The drawn parameters of one class instance. */
typedef struct {
    unsigned kind;
    float cx, cy, r;        /* centre and size (pixels) */
    float ca, sa;           /* rotation */
    float period, width, wavelength, amp; /* textures */
    float poly[10][2];
    int npoly;
} mks_shape;

static void mks_shape_draw(mks_shape *sh, unsigned cls, mks_rng *r, uint32_t w, uint32_t h)
{
    float m = (float)(w < h ? w : h);
    /* textures keep their look at any size: periods grow with the image beyond ~120 px */
    float k = m > 120.0f ? m / 120.0f : 1.0f;
    sh->kind = cls;
    sh->cx = mks_rng_uniform(r, 0.32, 0.68) * (float)w;
    sh->cy = mks_rng_uniform(r, 0.32, 0.68) * (float)h;
    sh->r = mks_rng_uniform(r, 0.22, 0.36) * m;
    float ang;
    switch (cls) {
    case MKS_TRIANGLE:
    case MKS_STAR:
    case MKS_STRIPES:
    case MKS_WAVES:
    case MKS_ZIGZAG:
        ang = mks_rng_uniform(r, 0.0, 2.0 * MKS_PI);
        break;
    default:
        ang = mks_rng_uniform(r, -0.26, 0.26);
        break;
    }
    sh->ca = cosf(ang);
    sh->sa = sinf(ang);
    sh->period = mks_rng_uniform(r, 7.0, 13.0) * k;
    sh->width = mks_rng_uniform(r, 0.9, 1.5) * k;
    sh->wavelength = mks_rng_uniform(r, 18.0, 34.0) * k;
    sh->amp = mks_rng_uniform(r, 2.5, 5.0) * k;
    sh->npoly = 0;
    if (cls == MKS_TRIANGLE) {
        for (int i = 0; i < 3; i++) {
            double a = -MKS_PI / 2 + i * 2.0 * MKS_PI / 3.0;
            sh->poly[i][0] = sh->r * 1.1f * (float)cos(a);
            sh->poly[i][1] = sh->r * 1.1f * (float)sin(a);
        }
        sh->npoly = 3;
    } else if (cls == MKS_STAR) {
        for (int i = 0; i < 10; i++) {
            double a = -MKS_PI / 2 + i * MKS_PI / 5.0;
            float rad = (i & 1) ? sh->r * 0.45f : sh->r * 1.05f;
            sh->poly[i][0] = rad * (float)cos(a);
            sh->poly[i][1] = rad * (float)sin(a);
        }
        sh->npoly = 10;
    }
}

/* Signed distance (or, for the smooth waves, a negated coverage offset) at local coordinates. */
static float mks_shape_dist(const mks_shape *sh, float x, float y)
{
    float r = sh->r, p = sh->period;
    switch (sh->kind) {
    case MKS_CIRCLE:
        return sqrtf(x * x + y * y) - r;
    case MKS_SQUARE:
        return mks_box_dist(x, y, 0.8f * r, 0.8f * r);
    case MKS_STRIPES:
        return mks_stripe_dist(x, p);
    case MKS_CHECKER: {
        /* inside where exactly one axis is in its "on" half: distance to the nearer edge */
        float dx = mks_stripe_dist(x, p * 1.6f), dy = mks_stripe_dist(y, p * 1.6f);
        float e = fminf(fabsf(dx), fabsf(dy));
        return ((dx < 0) != (dy < 0)) ? -e : e;
    }
    case MKS_TRIANGLE:
    case MKS_STAR:
        return mks_poly_dist((const float (*)[2])sh->poly, sh->npoly, x, y);
    case MKS_RING:
        return fabsf(sqrtf(x * x + y * y) - 0.8f * r) - 0.2f * r;
    case MKS_CROSS:
        return fminf(mks_box_dist(x, y, r, 0.28f * r), mks_box_dist(x, y, 0.28f * r, r));
    case MKS_DOTS: {
        float fx = x - p * 1.2f * floorf(x / (p * 1.2f) + 0.5f);
        float fy = y - p * 1.2f * floorf(y / (p * 1.2f) + 0.5f);
        return sqrtf(fx * fx + fy * fy) - 0.33f * p * 1.2f;
    }
    case MKS_DIAMOND: {
        float a = 0.62f * r, b = 1.05f * r;
        return (fabsf(x) * b + fabsf(y) * a - a * b) / sqrtf(a * a + b * b);
    }
    case MKS_WAVES: {
        float s = y + sh->amp * sinf(2.0f * (float)MKS_PI * x / sh->wavelength);
        /* smooth bands: coverage 0.5 + 0.5 sin maps back through mks_cover's ramp */
        return -0.5f * sinf(2.0f * (float)MKS_PI * s / p);
    }
    case MKS_GRID: {
        float q = p * 1.4f;
        float fx = fabsf(x - q * floorf(x / q + 0.5f)), fy = fabsf(y - q * floorf(y / q + 0.5f));
        return fminf(fx, fy) - sh->width;
    }
    case MKS_MOON:
        return fmaxf(sqrtf(x * x + y * y) - r,
                     -(sqrtf((x - 0.45f * r) * (x - 0.45f * r) + (y + 0.15f * r) * (y + 0.15f * r)) -
                       0.85f * r));
    case MKS_TARGET: {
        float rho = sqrtf(x * x + y * y);
        return fmaxf(rho - r, mks_stripe_dist(rho + 0.1f * r, 0.4f * r));
    }
    case MKS_ZIGZAG: {
        float t = x / sh->wavelength - floorf(x / sh->wavelength);
        float tri = 4.0f * fabsf(t - 0.5f) - 1.0f;
        return mks_stripe_dist(y + sh->amp * tri, p);
    }
    case MKS_FRAME:
        return fmaxf(mks_box_dist(x, y, 0.85f * r, 0.85f * r), -mks_box_dist(x, y, 0.55f * r, 0.55f * r));
    default:
        return 1.0f;
    }
}

/* Composite the class shape or texture in colour fg over the canvas. */
static void mks_paint_shape(mks_canvas *cv, const mks_shape *sh, mks_color fg)
{
    uint32_t x0 = 0, y0 = 0, x1 = cv->w, y1 = cv->h;
    if (!mks_is_texture(sh->kind)) {
        /* every shape lies within 1.25 r of its centre: skip the rest of the canvas */
        float R = 1.25f * sh->r + 2.0f;
        x0 = (uint32_t)fmaxf(0.0f, sh->cx - R);
        y0 = (uint32_t)fmaxf(0.0f, sh->cy - R);
        x1 = (uint32_t)fminf((float)cv->w, sh->cx + R + 1.0f);
        y1 = (uint32_t)fminf((float)cv->h, sh->cy + R + 1.0f);
    }
    for (uint32_t y = y0; y < y1; y++) {
        float dy = (float)y + 0.5f - sh->cy;
        float *px = cv->p + ((size_t)y * cv->w + x0) * 3;
        for (uint32_t x = x0; x < x1; x++, px += 3) {
            float dx = (float)x + 0.5f - sh->cx;
            float lx = dx * sh->ca + dy * sh->sa, ly = -dx * sh->sa + dy * sh->ca;
            float a = mks_cover(mks_shape_dist(sh, lx, ly));
            if (a <= 0.0f)
                continue;
            for (int c = 0; c < 3; c++)
                px[c] += (fg.rgb[c] - px[c]) * a;
        }
    }
}

/* Linear gradient from colour a to colour b along direction angle ang. */
static void mks_fill_gradient(mks_canvas *cv, mks_color a, mks_color b, float ang)
{
    float gx = cosf(ang) / (float)cv->w, gy = sinf(ang) / (float)cv->h;
    float *px = cv->p;
    for (uint32_t y = 0; y < cv->h; y++)
        for (uint32_t x = 0; x < cv->w; x++, px += 3) {
            float t = 0.5f + ((float)x - 0.5f * (float)cv->w) * gx + ((float)y - 0.5f * (float)cv->h) * gy;
            for (int c = 0; c < 3; c++)
                px[c] = a.rgb[c] + (b.rgb[c] - a.rgb[c]) * t;
        }
}

/* Add triangular per-pixel luma noise of amplitude amp and quantise into img (1 or 3 channels;
 * gray is ITU-R 601 luma of the quantised RGB, fmt_luma: as libjpeg and Pillow compute it). */
static void mks_quantise(const mks_canvas *cv, mks_rng *r, float amp, fmt_image *img)
{
    const float *px = cv->p;
    uint8_t *out = img->pixels;
    size_t n = (size_t)cv->w * cv->h;
    uint64_t bits = 0;
    float scale = amp / 255.0f;
    for (size_t i = 0; i < n; i++, px += 3) {
        if ((i & 3) == 0)
            bits = mks_rng_u64(r);
        float noise = (float)((int)(bits & 0xff) + (int)((bits >> 8) & 0xff) - 255) * scale;
        bits >>= 16;
        uint8_t q[3];
        for (int c = 0; c < 3; c++)
            q[c] = (uint8_t)(mks_clampf(px[c] + noise, 0.0f, 255.0f) + 0.5f);
        if (img->channels == 1) {
            *out++ = fmt_luma(q[0], q[1], q[2]);
        } else {
            out[0] = q[0];
            out[1] = q[1];
            out[2] = q[2];
            out += 3;
        }
    }
}

static int mks_canvas_alloc(mks_canvas *cv, uint32_t w, uint32_t h)
{
    cv->w = w;
    cv->h = h;
    cv->p = malloc((size_t)w * h * 3 * sizeof *cv->p);
    return cv->p ? 0 : ENOMEM;
}

/* img (the canvas's size, channels) quantised from cv with noise of amplitude amp drawn from the
 * sample's own noise stream. 0 or ENOMEM. */
static int mks_canvas_image(const mks_canvas *cv, float amp, uint64_t seed, unsigned cls,
                            unsigned index, uint32_t channels, fmt_image *img)
{
    int rc = fmt_image_alloc(img, cv->w, cv->h, channels);
    if (rc)
        return rc;
    mks_rng nr = mks_rng_for(seed, cls, index, MKS_TAG_NOISE);
    mks_quantise(cv, &nr, amp, img);
    return 0;
}

static int mks_check_geometry(unsigned cls, uint32_t w, uint32_t h, uint32_t channels)
{
    if (cls >= MKS_MAX_CLASSES || w == 0 || h == 0 || w > 65535 || h > 65535 ||
        (channels != 1 && channels != 3))
        return FMT_EINVAL;
    return 0;
}

/* img emptied, the geometry checked and the canvas (w x h) allocated: 0, FMT_EINVAL or ENOMEM. */
static int mks_canvas_start(mks_canvas *cv, fmt_image *img, unsigned cls, uint32_t w, uint32_t h,
                            uint32_t channels)
{
    memset(img, 0, sizeof *img);
    int rc = mks_check_geometry(cls, w, h, channels);
    return rc ? rc : mks_canvas_alloc(cv, w, h);
}

int mks_render(unsigned cls, unsigned index, uint64_t seed, uint32_t w, uint32_t h,
               uint32_t channels, fmt_image *img)
{
    mks_canvas cv = { 0 };
    int rc = mks_canvas_start(&cv, img, cls, w, h, channels);
    if (rc)
        goto leave;
    mks_rng r = mks_rng_for(seed, cls, index, MKS_TAG_DRAW);
    float hue = mks_class_hue(cls);
    /* background: the class hue, weakly saturated, any brightness, with a gentle gradient */
    float bl = mks_rng_uniform(&r, 0.3, 0.7), bc = mks_rng_uniform(&r, 0.12, 0.2);
    float bh = hue + mks_rng_uniform(&r, -0.15, 0.15), gd = mks_rng_uniform(&r, 0.0, 0.12);
    float gang = mks_rng_uniform(&r, 0.0, 2.0 * MKS_PI);
    mks_fill_gradient(&cv, mks_color_lch(bl - gd, bc, bh), mks_color_lch(bl + gd, bc, bh), gang);
    /* foreground: the class hue, strongly saturated */
    mks_color fg = mks_color_lch(mks_rng_uniform(&r, 0.4, 0.62), mks_rng_uniform(&r, 0.3, 0.42),
                                 hue + mks_rng_uniform(&r, -0.1, 0.1));
    mks_shape sh;
    mks_shape_draw(&sh, cls, &r, w, h);
    mks_paint_shape(&cv, &sh, fg);
    float amp = mks_rng_uniform(&r, 3.0, 10.0);
    rc = mks_canvas_image(&cv, amp, seed, cls, index, channels, img);
leave:
    free(cv.p);
    return rc;
}

/* Soft blob of colour col: weight (1 - d^2/R^2)^2 inside radius R, a cheap stand-in for a
 * Gaussian that needs no exp() per pixel and has a bounded footprint. */
static void mks_paint_blob(mks_canvas *cv, float cx, float cy, float R, float alpha, mks_color col)
{
    uint32_t x0 = (uint32_t)fmaxf(0.0f, cx - R), y0 = (uint32_t)fmaxf(0.0f, cy - R);
    uint32_t x1 = (uint32_t)fminf((float)cv->w, cx + R + 1.0f);
    uint32_t y1 = (uint32_t)fminf((float)cv->h, cy + R + 1.0f);
    float inv = 1.0f / (R * R);
    for (uint32_t y = y0; y < y1; y++) {
        float dy = (float)y + 0.5f - cy;
        float *px = cv->p + ((size_t)y * cv->w + x0) * 3;
        for (uint32_t x = x0; x < x1; x++, px += 3) {
            float dx = (float)x + 0.5f - cx;
            float q = 1.0f - (dx * dx + dy * dy) * inv;
            if (q <= 0.0f)
                continue;
            float a = alpha * q * q;
            for (int c = 0; c < 3; c++)
                px[c] += (col.rgb[c] - px[c]) * a;
        }
    }
}

/* Add bilinear value noise (random lattice every `cell` pixels, amplitude amp) to the luma. */
static int mks_add_value_noise(mks_canvas *cv, mks_rng *r, float cell, float amp)
{
    uint32_t gw = (uint32_t)((float)cv->w / cell) + 2, gh = (uint32_t)((float)cv->h / cell) + 2;
    float *g = malloc((size_t)gw * gh * sizeof *g);
    if (!g)
        return ENOMEM;
    for (size_t i = 0; i < (size_t)gw * gh; i++)
        g[i] = mks_rng_uniform(r, -amp, amp);
    float *px = cv->p;
    for (uint32_t y = 0; y < cv->h; y++) {
        float fy = (float)y / cell;
        uint32_t iy = (uint32_t)fy;
        float ty = fy - (float)iy;
        const float *g0 = g + (size_t)iy * gw, *g1 = g0 + gw;
        for (uint32_t x = 0; x < cv->w; x++, px += 3) {
            float fx = (float)x / cell;
            uint32_t ix = (uint32_t)fx;
            float tx = fx - (float)ix;
            float top = g0[ix] + (g0[ix + 1] - g0[ix]) * tx;
            float bot = g1[ix] + (g1[ix + 1] - g1[ix]) * tx;
            float v = top + (bot - top) * ty;
            px[0] += v;
            px[1] += v;
            px[2] += v;
        }
    }
    free(g);
    return 0;
}

int mks_render_photo(unsigned cls, unsigned index, uint64_t seed, uint32_t w, uint32_t h,
                     fmt_image *img)
{
    mks_canvas cv = { 0 };
    int rc = mks_canvas_start(&cv, img, cls, w, h, 3);
    if (rc)
        goto leave;
    mks_rng r = mks_rng_for(seed, cls, index, MKS_TAG_DRAW);
    float hue = mks_class_hue(cls), m = (float)(w < h ? w : h);
    /* four-corner gradient in muted colours of any hue: the "scene" */
    mks_color corner[4];
    for (int i = 0; i < 4; i++)
        corner[i] = mks_color_lch(mks_rng_uniform(&r, 0.2, 0.8), mks_rng_uniform(&r, 0.02, 0.14),
                                  mks_rng_uniform(&r, 0.0, 2.0 * MKS_PI));
    float *px = cv.p;
    for (uint32_t y = 0; y < h; y++) {
        float ty = ((float)y + 0.5f) / (float)h;
        for (uint32_t x = 0; x < w; x++, px += 3) {
            float tx = ((float)x + 0.5f) / (float)w;
            for (int c = 0; c < 3; c++) {
                float top = corner[0].rgb[c] + (corner[1].rgb[c] - corner[0].rgb[c]) * tx;
                float bot = corner[2].rgb[c] + (corner[3].rgb[c] - corner[2].rgb[c]) * tx;
                px[c] = top + (bot - top) * ty;
            }
        }
    }
    unsigned nblobs = 4 + mks_rng_below(&r, 6);
    for (unsigned i = 0; i < nblobs; i++) {
        float bx = mks_rng_uniform(&r, 0.0, w), by = mks_rng_uniform(&r, 0.0, h);
        float R = mks_rng_uniform(&r, 0.12, 0.4) * m, alpha = mks_rng_uniform(&r, 0.4, 0.9);
        mks_color col = mks_color_lch(mks_rng_uniform(&r, 0.15, 0.85), mks_rng_uniform(&r, 0.03, 0.2),
                                      mks_rng_uniform(&r, 0.0, 2.0 * MKS_PI));
        mks_paint_blob(&cv, bx, by, R, alpha, col);
    }
    /* the class content, as in mks_render */
    mks_color fg = mks_color_lch(mks_rng_uniform(&r, 0.4, 0.62), mks_rng_uniform(&r, 0.3, 0.42),
                                 hue + mks_rng_uniform(&r, -0.1, 0.1));
    mks_shape sh;
    mks_shape_draw(&sh, cls, &r, w, h);
    mks_paint_shape(&cv, &sh, fg);
    /* texture at two scales: what makes a JPEG of it as large as a photo's */
    rc = mks_add_value_noise(&cv, &r, mks_rng_uniform(&r, 5.0, 9.0), mks_rng_uniform(&r, 8.0, 16.0));
    if (rc)
        goto leave;
    rc = mks_add_value_noise(&cv, &r, mks_rng_uniform(&r, 1.6, 2.4), mks_rng_uniform(&r, 6.0, 12.0));
    if (rc)
        goto leave;
    float amp = mks_rng_uniform(&r, 8.0, 14.0);
    rc = mks_canvas_image(&cv, amp, seed, cls, index, 3, img);
leave:
    free(cv.p);
    return rc;
}

/* ---- files --------------------------------------------------------------------------------- */

/* Plain write: sample data is cheap to remake, so no fsync (it would dominate generation time). */
static int mks_write(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return errno;
    int rc = 0;
    const uint8_t *p = data;
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, p + done, len - done);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = errno;
            break;
        }
        done += (size_t)n;
    }
    if (close(fd) != 0 && !rc)
        rc = errno;
    return rc;
}

static int mks_mkdir(const char *path)
{
    if (mkdir(path, 0755) == 0)
        return 0;
    int rc = errno;
    struct stat st;
    if (rc == EEXIST && stat(path, &st) == 0)
        return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
    return rc;
}

/* mkdir -p: path is modified while walking but restored. */
static int mks_mkdir_p(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/' || p[-1] == '/')
            continue;
        *p = '\0';
        int rc = mks_mkdir(path);
        *p = '/';
        if (rc)
            return rc;
    }
    return mks_mkdir(path);
}

static int mks_path(char *dst, size_t cap, const char *dir, const char *sub, const char *name)
{
    int n = name ? snprintf(dst, cap, "%s/%s/%s", dir, sub, name) : snprintf(dst, cap, "%s/%s", dir, sub);
    return n < 0 || (size_t)n >= cap ? ENAMETOOLONG : 0;
}

/* ---- broken files -------------------------------------------------------------------------- */

/* One of each kind of damage the reject path must survive; the name says which. Each is placed in
 * class (k % classes) and made from an image of that class, so it looks like a real member. */
enum {
    MKS_B_EMPTY, MKS_B_TEXT, MKS_B_JPEG_TRUNC, MKS_B_JPEG_CORRUPT, MKS_B_PNG_TRUNC, MKS_B_PNG_CRC,
    MKS_B_BMP_TRUNC, MKS_B_BMP_HUGE, MKS_B_PNG_HUGE, MKS_B_COUNT
};

static const char *const mks_broken_names[MKS_B_COUNT] = {
    "broken-zero-bytes.jpg",
    "broken-text-not-image.jpg",
    "broken-truncated-half.jpg",
    "broken-corrupt-scan.jpg",
    "broken-truncated-half.png",
    "broken-bad-crc.png",
    "broken-truncated-half.bmp",
    "broken-header-60000x60000.bmp",
    "broken-header-60000x60000.png",
};

_Static_assert(MKS_B_COUNT == MKS_BROKEN_FILES, "mksample.h names the number of broken files");

static const char mks_text[] =
    "this is a text file with an image name: it must be rejected, not decoded\n";

static uint32_t mks_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void mks_put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void mks_put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* CRC-32 as PNG uses it; bitwise, as it only ever covers one 17-byte IHDR. */
static uint32_t mks_crc32(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return c ^ 0xffffffffu;
}

/* Start of the entropy-coded data of the first scan, or 0 if the markers do not lead there. */
static size_t mks_jpeg_scan_start(const uint8_t *b, size_t len)
{
    size_t p = 2;
    while (p + 4 <= len) {
        if (b[p] != 0xff)
            return 0;
        if (b[p + 1] == 0xff) {
            p++;
            continue;
        }
        size_t seg = (size_t)b[p + 2] << 8 | b[p + 3];
        if (b[p + 1] == 0xda)
            return p + 2 + seg < len ? p + 2 + seg : 0;
        p += 2 + seg;
    }
    return 0;
}

/* Overwrite 32 bytes inside the scan with FF 00 pairs (stuffed-FF bytes that read as a run of one
 * bits, which no Huffman table assigns to any code) and point the scan header's first component
 * at Huffman tables 3, which the file does not define. libjpeg only warns about the first (and
 * Pillow, like shardc, then stores what it decoded), but the second is fatal to both. The result
 * is checked with the real decoder. */
static int mks_corrupt_scan(uint8_t *b, size_t len)
{
    size_t start = mks_jpeg_scan_start(b, len);
    if (start == 0 || start < 8 || len < start + 2 + 96)
        return FMT_EINVAL;
    size_t sos = start - 2;
    while (sos > 0 && !(b[sos] == 0xff && b[sos + 1] == 0xda))
        sos--;
    if (b[sos] != 0xff || b[sos + 1] != 0xda || sos + 6 >= start)
        return FMT_EINVAL;
    b[sos + 6] = 0x33; /* Td = Ta = 3 */
    size_t pos = start + (len - 2 - start) * 5 / 12;
    for (size_t i = 0; i < 32; i += 2) {
        b[pos + i] = 0xff;
        b[pos + i + 1] = 0x00;
    }
    fmt_decode_opts dopts = { .channels = 3 };
    fmt_image img = { 0 };
    int rc = fmt_image_decode(b, len, &dopts, &img, NULL);
    fmt_image_free(&img);
    return rc != 0 ? 0 : FMT_EINVAL;
}

/* Encode a class image of one format and damage it as broken file k demands. */
static int mks_make_broken(unsigned k, unsigned cls, uint64_t seed, uint8_t **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    if (k == MKS_B_EMPTY)
        return 0;
    if (k == MKS_B_TEXT) {
        *out = malloc(sizeof mks_text - 1);
        if (!*out)
            return ENOMEM;
        memcpy(*out, mks_text, sizeof mks_text - 1);
        *out_len = sizeof mks_text - 1;
        return 0;
    }
    fmt_image img = { 0 };
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = mks_render(cls, MKS_MAX_PER_CLASS + k, seed, 96, 72, 3, &img);
    if (rc)
        goto leave;
    if (k == MKS_B_JPEG_TRUNC || k == MKS_B_JPEG_CORRUPT) {
        fmt_jpeg_opts jo = { .quality = 90, .subsampling = 420 };
        rc = fmt_jpeg_encode(&img, &jo, &buf, &len);
    } else if (k == MKS_B_PNG_TRUNC || k == MKS_B_PNG_CRC || k == MKS_B_PNG_HUGE) {
        rc = fmt_png_encode(&img, 6, &buf, &len);
    } else {
        rc = fmt_bmp_encode(&img, &buf, &len);
    }
    if (rc)
        goto leave;
    switch (k) {
    case MKS_B_JPEG_TRUNC:
    case MKS_B_PNG_TRUNC:
    case MKS_B_BMP_TRUNC:
        len /= 2;
        break;
    case MKS_B_JPEG_CORRUPT:
        rc = mks_corrupt_scan(buf, len);
        break;
    case MKS_B_PNG_CRC: {
        /* damage only the stored CRC of the first IDAT: the data itself stays decodable, so
         * only a decoder that checks CRCs notices */
        size_t p = 8;
        rc = FMT_EINVAL;
        while (p + 12 <= len) {
            size_t clen = mks_be32(buf + p);
            if (clen > len - p - 12)
                break;
            if (memcmp(buf + p + 4, "IDAT", 4) == 0) {
                buf[p + 8 + clen + 3] ^= 0xff;
                rc = 0;
                break;
            }
            p += 12 + clen;
        }
        break;
    }
    case MKS_B_PNG_HUGE:
        /* IHDR is the first chunk (offset 8): patch both sides and recompute its CRC, so the
         * file is well-formed up to the size check */
        if (len < 33 || memcmp(buf + 12, "IHDR", 4) != 0) {
            rc = FMT_EINVAL;
            break;
        }
        mks_put_be32(buf + 16, 60000);
        mks_put_be32(buf + 20, 60000);
        mks_put_be32(buf + 29, mks_crc32(buf + 12, 17));
        break;
    case MKS_B_BMP_HUGE:
        /* BITMAPINFOHEADER (or later) width and height at 18 and 22 */
        if (len < 54) {
            rc = FMT_EINVAL;
            break;
        }
        mks_put_le32(buf + 18, 60000);
        mks_put_le32(buf + 22, 60000);
        break;
    default:
        break;
    }
leave:
    fmt_image_free(&img);
    if (rc) {
        free(buf);
        return rc;
    }
    *out = buf;
    *out_len = len;
    return 0;
}

/* ---- the dataset --------------------------------------------------------------------------- */

/* Render and encode one planned image. */
static int mks_encode_item(const mks_opts *o, unsigned cls, unsigned index, const mks_item *it,
                           uint8_t **buf, size_t *len)
{
    fmt_image img = { 0 };
    int rc = o->photo ? mks_render_photo(cls, index, o->seed, it->width, it->height, &img)
                      : mks_render(cls, index, o->seed, it->width, it->height, it->channels, &img);
    if (rc)
        goto leave;
    if (it->type == FMT_IMG_JPEG)
        rc = fmt_jpeg_encode(&img, &it->jpeg, buf, len);
    else if (it->type == FMT_IMG_PNG)
        rc = fmt_png_encode(&img, it->png_level, buf, len);
    else
        rc = fmt_bmp_encode(&img, buf, len);
leave:
    fmt_image_free(&img);
    return rc;
}

/* The end of one file: the len bytes at *buf, made when rc is 0, written to path (mks_write);
 * *buf freed either way. rc, or the write's. */
static int write_made(int rc, const char *path, uint8_t **buf, size_t len)
{
    if (!rc)
        rc = mks_write(path, *buf, len);
    free(*buf);
    *buf = NULL;
    return rc;
}

/* The list file: valid images in label order, then index order. */
static int mks_write_list(const mks_opts *o, char *path, size_t pathcap)
{
    size_t cap = (size_t)o->classes * o->per_class * 40 + 1, used = 0;
    char *text = malloc(cap);
    if (!text)
        return ENOMEM;
    int rc = 0;
    for (unsigned label = 0; label < o->classes; label++) {
        unsigned cls = 0;
        while (mks_class_label(cls, o->classes) != (int)label)
            cls++;
        for (unsigned i = 0; i < o->per_class; i++) {
            mks_item it;
            rc = mks_plan(o, cls, i, &it);
            if (rc)
                goto leave;
            int n = snprintf(text + used, cap - used, "%s/%s %u\n", mks_names[cls], it.name, label);
            if (n < 0 || (size_t)n >= cap - used) {
                rc = ENOMEM; /* cannot happen: 40 bytes cover the longest line */
                goto leave;
            }
            used += (size_t)n;
        }
    }
    snprintf(path, pathcap, "%s", o->list_path);
    rc = mks_write(o->list_path, text, used);
leave:
    free(text);
    return rc;
}

int mks_generate(const char *out_dir, const mks_opts *o, mks_report *r)
{
    mks_report local;
    if (!r)
        r = &local;
    memset(r, 0, sizeof *r);
    if (!out_dir || !*out_dir || mks_opts_error(o))
        return fmt_fail(&r->msg, FMT_EINVAL, "%s",
                        out_dir && *out_dir ? mks_opts_error(o) : "no output folder given");
    char path[4096] = "";   /* the file or folder being written, named when that fails */
    const size_t cap = sizeof path;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = 0;
    if (strlen(out_dir) >= cap) {
        rc = ENAMETOOLONG;
        goto leave;
    }
    snprintf(path, cap, "%s", out_dir);
    rc = mks_mkdir_p(path);
    if (rc)
        goto leave;
    for (unsigned cls = 0; cls < o->classes; cls++) {
        rc = mks_path(path, cap, out_dir, mks_names[cls], NULL);
        if (!rc)
            rc = mks_mkdir(path);
        if (rc)
            goto leave;
        for (unsigned i = 0; i < o->per_class; i++) {
            mks_item it;
            rc = mks_plan(o, cls, i, &it);
            if (!rc)
                rc = mks_path(path, cap, out_dir, mks_names[cls], it.name);
            if (!rc)
                rc = mks_encode_item(o, cls, i, &it, &buf, &len);
            if ((rc = write_made(rc, path, &buf, len)) != 0)
                goto leave;
            r->images++;
            r->bytes += len;
            r->jpeg += it.type == FMT_IMG_JPEG;
            r->png += it.type == FMT_IMG_PNG;
            r->bmp += it.type == FMT_IMG_BMP;
        }
        r->classes++;
    }
    if (o->broken && !o->photo) {
        for (unsigned k = 0; k < MKS_B_COUNT; k++) {
            unsigned cls = k % o->classes;
            rc = mks_path(path, cap, out_dir, mks_names[cls], mks_broken_names[k]);
            if (!rc)
                rc = mks_make_broken(k, cls, o->seed, &buf, &len);
            if ((rc = write_made(rc, path, &buf, len)) != 0)
                goto leave;
            r->broken++;
            r->bytes += len;
        }
    }
    if (o->list_path) {
        rc = mks_write_list(o, path, cap);
        if (rc)
            goto leave;
    }
    path[0] = '\0';
leave:
    free(buf);
    if (rc) {
        /* strerror capitalises; our messages are lowercase */
        char reason[256];
        snprintf(reason, sizeof reason, "%s", fmt_strerror(rc));
        reason[0] = (char)tolower((unsigned char)reason[0]);
        fmt_fail(&r->msg, rc, "cannot write %s: %s", path[0] ? path : out_dir, reason);
    }
    return rc;
}
