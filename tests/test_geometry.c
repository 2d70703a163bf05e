/* test_geometry.c - geometry plans (exact numbers), the shrink-on-load hint, and the resize:
 * exact constants, zero padding, exact copies, monotonic gradients, agreement with a reference
 * Lanczos, block images, and identical bytes across runs and threads. Everything is in memory;
 * no fixture files are needed. */
#include "geometry.h"
#include "testutil.h"

#include <check.h>
#include <libavutil/cpu.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---- */

static fmt_image img_new(uint32_t w, uint32_t h, uint32_t ch)
{
    fmt_image im = {calloc((size_t)w * h * ch, 1), w, h, ch};
    ck_assert_ptr_nonnull(im.pixels);
    return im;
}

static void img_fill(fmt_image *im, const uint8_t *colour)
{
    size_t n = (size_t)im->width * im->height;
    for (size_t i = 0; i < n; i++)
        memcpy(im->pixels + i * im->channels, colour, im->channels);
}

static uint32_t rng_next(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static void img_random(fmt_image *im, uint32_t seed)
{
    size_t n = (size_t)im->width * im->height * im->channels;
    for (size_t i = 0; i < n; i++)
        im->pixels[i] = (uint8_t)(rng_next(&seed) >> 24);
}

static uint8_t *px(const fmt_image *im, uint32_t x, uint32_t y)
{
    return im->pixels + ((size_t)y * im->width + x) * im->channels;
}

static fmt_geom geom_size(uint32_t w, uint32_t h, fmt_fit fit)
{
    fmt_geom g = {FMT_GEOM_SIZE, fit, w, h, 0, 0};
    return g;
}

static fmt_geom geom_short(uint32_t s, uint32_t max_side)
{
    fmt_geom g = {FMT_GEOM_SHORT_SIDE, FMT_FIT_CROP, 0, 0, s, max_side};
    return g;
}

static fmt_geom geom_keep(uint32_t max_side)
{
    fmt_geom g = {FMT_GEOM_KEEP, FMT_FIT_CROP, 0, 0, 0, max_side};
    return g;
}

/* Resize with a fresh plan for the image's size; fails the test on error. */
static fmt_image resize_with(fmt_resizer *r, const fmt_image *src, const fmt_geom *g,
                             fmt_geom_plan *plan_out)
{
    fmt_geom_plan p;
    ck_assert_int_eq(fmt_geom_plan_for(g, src->width, src->height, &p), 0);
    fmt_image out;
    fmt_msg msg = {{0}};
    int rc = fmt_resize(r, src, &p, &out, &msg);
    ck_assert_msg(rc == 0, "resize %ux%u failed: %s", src->width, src->height,
                  fmt_reason(&msg, rc));
    ck_assert_uint_eq(out.width, p.out_w);
    ck_assert_uint_eq(out.height, p.out_h);
    ck_assert_uint_eq(out.channels, src->channels);
    if (plan_out)
        *plan_out = p;
    return out;
}

/* ---- plans ---- */

typedef struct {
    uint32_t sw, sh;
    fmt_geom g;
    fmt_geom_plan want;     /* out_w, out_h, src_x, src_y, src_w, src_h, dst_x, dst_y, dst_w,
                             * dst_h */
} plan_case;

#define SIZE(w, h, f) {FMT_GEOM_SIZE, f, w, h, 0, 0}
#define SHORT(s, m) {FMT_GEOM_SHORT_SIDE, FMT_FIT_CROP, 0, 0, s, m}
#define KEEP(m) {FMT_GEOM_KEEP, FMT_FIT_CROP, 0, 0, 0, m}

static const plan_case plan_cases[] = {
    /* crop: landscape, portrait, square, odd offsets, aspect other than 1 */
    {500, 375, SIZE(224, 224, FMT_FIT_CROP), {224, 224, 62, 0, 375, 375, 0, 0, 224, 224}},
    {375, 500, SIZE(224, 224, FMT_FIT_CROP), {224, 224, 0, 62, 375, 375, 0, 0, 224, 224}},
    {501, 375, SIZE(224, 224, FMT_FIT_CROP), {224, 224, 63, 0, 375, 375, 0, 0, 224, 224}},
    {224, 224, SIZE(224, 224, FMT_FIT_CROP), {224, 224, 0, 0, 224, 224, 0, 0, 224, 224}},
    {300, 300, SIZE(224, 224, FMT_FIT_CROP), {224, 224, 0, 0, 300, 300, 0, 0, 224, 224}},
    {640, 480, SIZE(320, 180, FMT_FIT_CROP), {320, 180, 0, 60, 640, 360, 0, 0, 320, 180}},
    {1000, 500, SIZE(300, 100, FMT_FIT_CROP), {300, 100, 0, 83, 1000, 333, 0, 0, 300, 100}},
    {1920, 1080, SIZE(100, 100, FMT_FIT_CROP), {100, 100, 420, 0, 1080, 1080, 0, 0, 100, 100}},
    /* rounding of the crop side: 2.5 -> 3 and 1.5 -> 2 (halves up) */
    {5, 5, SIZE(2, 1, FMT_FIT_CROP), {2, 1, 0, 1, 5, 3, 0, 0, 2, 1}},
    {3, 5, SIZE(4, 2, FMT_FIT_CROP), {4, 2, 0, 1, 3, 2, 0, 0, 4, 2}},
    {5, 3, SIZE(2, 4, FMT_FIT_CROP), {2, 4, 1, 0, 2, 3, 0, 0, 2, 4}},
    /* 1-pixel-wide and 1-pixel-high sources: a 1x1 crop from the middle */
    {1, 1000, SIZE(224, 224, FMT_FIT_CROP), {224, 224, 0, 499, 1, 1, 0, 0, 224, 224}},
    {1000, 1, SIZE(224, 224, FMT_FIT_CROP), {224, 224, 499, 0, 1, 1, 0, 0, 224, 224}},
    {1, 1, SIZE(3, 7, FMT_FIT_CROP), {3, 7, 0, 0, 1, 1, 0, 0, 3, 7}},
    /* pad: letterbox and pillarbox offsets */
    {500, 375, SIZE(224, 224, FMT_FIT_PAD), {224, 224, 0, 0, 500, 375, 0, 28, 224, 168}},
    {375, 500, SIZE(224, 224, FMT_FIT_PAD), {224, 224, 0, 0, 375, 500, 28, 0, 168, 224}},
    {640, 480, SIZE(320, 180, FMT_FIT_PAD), {320, 180, 0, 0, 640, 480, 40, 0, 240, 180}},
    {333, 100, SIZE(100, 100, FMT_FIT_PAD), {100, 100, 0, 0, 333, 100, 0, 35, 100, 30}},
    {1000, 1, SIZE(224, 224, FMT_FIT_PAD), {224, 224, 0, 0, 1000, 1, 0, 111, 224, 1}},
    {5, 2, SIZE(4, 4, FMT_FIT_PAD), {4, 4, 0, 0, 5, 2, 0, 1, 4, 2}},
    {3, 2, SIZE(5, 5, FMT_FIT_PAD), {5, 5, 0, 0, 3, 2, 0, 1, 5, 3}},
    {4, 3, SIZE(2, 2, FMT_FIT_PAD), {2, 2, 0, 0, 4, 3, 0, 0, 2, 2}},
    {224, 224, SIZE(224, 224, FMT_FIT_PAD), {224, 224, 0, 0, 224, 224, 0, 0, 224, 224}},
    /* stretch */
    {500, 375, SIZE(224, 224, FMT_FIT_STRETCH), {224, 224, 0, 0, 500, 375, 0, 0, 224, 224}},
    {1, 1000, SIZE(7, 3, FMT_FIT_STRETCH), {7, 3, 0, 0, 1, 1000, 0, 0, 7, 3}},
    /* short side: down, up, square, halves, max_side capping */
    {500, 375, SHORT(256, 0), {341, 256, 0, 0, 500, 375, 0, 0, 341, 256}},
    {375, 500, SHORT(256, 0), {256, 341, 0, 0, 375, 500, 0, 0, 256, 341}},
    {1024, 768, SHORT(256, 0), {341, 256, 0, 0, 1024, 768, 0, 0, 341, 256}},
    {300, 300, SHORT(256, 0), {256, 256, 0, 0, 300, 300, 0, 0, 256, 256}},
    {100, 50, SHORT(256, 0), {512, 256, 0, 0, 100, 50, 0, 0, 512, 256}},
    {3, 2, SHORT(3, 0), {5, 3, 0, 0, 3, 2, 0, 0, 5, 3}},
    {1, 1000, SHORT(2, 0), {2, 2000, 0, 0, 1, 1000, 0, 0, 2, 2000}},
    {1000, 250, SHORT(256, 512), {512, 128, 0, 0, 1000, 250, 0, 0, 512, 128}},
    {250, 1000, SHORT(256, 512), {128, 512, 0, 0, 250, 1000, 0, 0, 128, 512}},
    {1000, 250, SHORT(256, 1024), {1024, 256, 0, 0, 1000, 250, 0, 0, 1024, 256}},
    {500, 375, SHORT(256, 400), {341, 256, 0, 0, 500, 375, 0, 0, 341, 256}},
    {500, 500, SHORT(256, 100), {100, 100, 0, 0, 500, 500, 0, 0, 100, 100}},
    {1, 1000, SHORT(256, 1000), {1, 1000, 0, 0, 1, 1000, 0, 0, 1, 1000}},
    {640, 480, SHORT(480, 0), {640, 480, 0, 0, 640, 480, 0, 0, 640, 480}},
    /* keep: identity, capped, never upscaled */
    {500, 375, KEEP(0), {500, 375, 0, 0, 500, 375, 0, 0, 500, 375}},
    {500, 375, KEEP(400), {400, 300, 0, 0, 500, 375, 0, 0, 400, 300}},
    {375, 500, KEEP(400), {300, 400, 0, 0, 375, 500, 0, 0, 300, 400}},
    {500, 375, KEEP(1000), {500, 375, 0, 0, 500, 375, 0, 0, 500, 375}},
    {500, 375, KEEP(500), {500, 375, 0, 0, 500, 375, 0, 0, 500, 375}},
    {3, 1, KEEP(2), {2, 1, 0, 0, 3, 1, 0, 0, 2, 1}},
    {1, 7, KEEP(2), {1, 2, 0, 0, 1, 7, 0, 0, 1, 2}},
    {1, 1, KEEP(0), {1, 1, 0, 0, 1, 1, 0, 0, 1, 1}},
};

static void plan_assert(const fmt_geom_plan *got, const fmt_geom_plan *want, uint32_t sw,
                        uint32_t sh, int i)
{
    ck_assert_msg(memcmp(got, want, sizeof *got) == 0,
                  "case %d (%ux%u): got out %ux%u src %u,%u %ux%u dst %u,%u %ux%u, want out %ux%u "
                  "src %u,%u %ux%u dst %u,%u %ux%u",
                  i, sw, sh, got->out_w, got->out_h, got->src_x, got->src_y, got->src_w,
                  got->src_h, got->dst_x, got->dst_y, got->dst_w, got->dst_h, want->out_w,
                  want->out_h, want->src_x, want->src_y, want->src_w, want->src_h, want->dst_x,
                  want->dst_y, want->dst_w, want->dst_h);
}

START_TEST(test_plan_table)
{
    int n = (int)(sizeof plan_cases / sizeof plan_cases[0]);
    for (int i = 0; i < n; i++) {
        const plan_case *c = &plan_cases[i];
        fmt_geom_plan p;
        memset(&p, 0xa5, sizeof p);
        ck_assert_int_eq(fmt_geom_plan_for(&c->g, c->sw, c->sh, &p), 0);
        plan_assert(&p, &c->want, c->sw, c->sh, i);
    }
}
END_TEST

/* Invariants over a grid of sizes: rectangles inside their images, crops centred with the
 * target aspect to within rounding, pads centred, short side exact. */
START_TEST(test_plan_invariants)
{
    static const uint32_t sides[] = {1, 2, 3, 7, 64, 99, 224, 255, 256, 375, 500, 1023, 4000};
    static const uint32_t targets[][2] = {{224, 224}, {1, 1}, {320, 180}, {3, 7}, {256, 100}};
    size_t ns = sizeof sides / sizeof sides[0], nt = sizeof targets / sizeof targets[0];
    for (size_t a = 0; a < ns; a++) {
        for (size_t b = 0; b < ns; b++) {
            uint32_t sw = sides[a], sh = sides[b];
            for (size_t t = 0; t < nt; t++) {
                uint32_t W = targets[t][0], H = targets[t][1];
                fmt_geom g = geom_size(W, H, FMT_FIT_CROP);
                fmt_geom_plan p;
                ck_assert_int_eq(fmt_geom_plan_for(&g, sw, sh, &p), 0);
                ck_assert_uint_eq(p.out_w, W);
                ck_assert_uint_eq(p.out_h, H);
                ck_assert(p.src_x + p.src_w <= sw && p.src_y + p.src_h <= sh);
                ck_assert(p.src_w == sw || p.src_h == sh);
                ck_assert_uint_eq(p.src_x, (sw - p.src_w) / 2);
                ck_assert_uint_eq(p.src_y, (sh - p.src_h) / 2);
                /* aspect within half a pixel of the target on the derived side */
                double asp = (double)W / H;
                if (p.src_h == sh && p.src_w > 1 && p.src_w < sw)
                    ck_assert(fabs(p.src_w - sh * asp) <= 0.5);
                if (p.src_w == sw && p.src_h > 1 && p.src_h < sh)
                    ck_assert(fabs(p.src_h - sw / asp) <= 0.5);

                g.fit = FMT_FIT_PAD;
                ck_assert_int_eq(fmt_geom_plan_for(&g, sw, sh, &p), 0);
                ck_assert(p.dst_w == W || p.dst_h == H);
                ck_assert(p.dst_w >= 1 && p.dst_h >= 1 && p.dst_w <= W && p.dst_h <= H);
                ck_assert_uint_eq(p.dst_x, (W - p.dst_w) / 2);
                ck_assert_uint_eq(p.dst_y, (H - p.dst_h) / 2);
                ck_assert(p.src_w == sw && p.src_h == sh && p.src_x == 0 && p.src_y == 0);
            }
            fmt_geom g = geom_short(100, 0);
            fmt_geom_plan p;
            ck_assert_int_eq(fmt_geom_plan_for(&g, sw, sh, &p), 0);
            ck_assert_uint_eq(p.out_w < p.out_h ? p.out_w : p.out_h, 100);
            ck_assert(p.dst_w == p.out_w && p.dst_h == p.out_h && p.dst_x == 0 && p.dst_y == 0);
            g = geom_short(100, 150);
            ck_assert_int_eq(fmt_geom_plan_for(&g, sw, sh, &p), 0);
            ck_assert_uint_le(p.out_w > p.out_h ? p.out_w : p.out_h, 150);
            g = geom_keep(300);
            ck_assert_int_eq(fmt_geom_plan_for(&g, sw, sh, &p), 0);
            ck_assert_uint_le(p.out_w, sw);
            ck_assert_uint_le(p.out_h, sh);
            ck_assert_uint_le(p.out_w > p.out_h ? p.out_w : p.out_h, 300);
        }
    }
}
END_TEST

START_TEST(test_plan_errors)
{
    fmt_geom_plan p;
    fmt_geom g = geom_size(224, 224, FMT_FIT_CROP);
    static const fmt_geom_plan zero;
    ck_assert_int_eq(fmt_geom_plan_for(&g, 0, 10, &p), FMT_EINVAL);
    ck_assert_mem_eq(&p, &zero, sizeof p);
    ck_assert_int_eq(fmt_geom_plan_for(&g, 10, 0, &p), FMT_EINVAL);
    ck_assert_int_eq(fmt_geom_plan_for(NULL, 10, 10, &p), FMT_EINVAL);
    ck_assert_int_eq(fmt_geom_plan_for(&g, 10, 10, NULL), FMT_EINVAL);
    g = geom_size(0, 224, FMT_FIT_CROP);
    ck_assert_int_eq(fmt_geom_plan_for(&g, 10, 10, &p), FMT_EINVAL);
    g = geom_size(224, 0, FMT_FIT_PAD);
    ck_assert_int_eq(fmt_geom_plan_for(&g, 10, 10, &p), FMT_EINVAL);
    g = geom_size(224, 224, (fmt_fit)7);
    ck_assert_int_eq(fmt_geom_plan_for(&g, 10, 10, &p), FMT_EINVAL);
    g = geom_short(0, 0);
    ck_assert_int_eq(fmt_geom_plan_for(&g, 10, 10, &p), FMT_EINVAL);
    g.mode = (fmt_geom_mode)9;
    ck_assert_int_eq(fmt_geom_plan_for(&g, 10, 10, &p), FMT_EINVAL);
    g = geom_size(FMT_GEOM_MAX_SIDE + 1, 1, FMT_FIT_STRETCH);
    ck_assert_int_eq(fmt_geom_plan_for(&g, 10, 10, &p), FMT_ETOOBIG);
    /* 1 x 100000 with short side 100 would be 100 x 10^7 */
    g = geom_short(100, 0);
    ck_assert_int_eq(fmt_geom_plan_for(&g, 1, 100000, &p), FMT_ETOOBIG);
    ck_assert_mem_eq(&p, &zero, sizeof p);
    /* ... which max_side brings back into range */
    g = geom_short(100, 1000);
    ck_assert_int_eq(fmt_geom_plan_for(&g, 1, 100000, &p), 0);
    ck_assert_uint_eq(p.out_w, 1);
    ck_assert_uint_eq(p.out_h, 1000);
    /* sizes near 2^32 do not overflow the arithmetic */
    g = geom_size(224, 224, FMT_FIT_PAD);
    ck_assert_int_eq(fmt_geom_plan_for(&g, UINT32_MAX, 1, &p), 0);
    ck_assert_uint_eq(p.dst_w, 224);
    ck_assert_uint_eq(p.dst_h, 1);
    ck_assert_uint_eq(p.dst_y, 111);
    g = geom_keep(1000);
    ck_assert_int_eq(fmt_geom_plan_for(&g, UINT32_MAX, UINT32_MAX - 1, &p), 0);
    ck_assert_uint_eq(p.out_w, 1000);
    ck_assert_uint_eq(p.out_h, 1000);
}
END_TEST

/* ---- shrink-on-load hint ---- */

START_TEST(test_min_decode_cases)
{
    static const struct {
        uint32_t sw, sh;
        fmt_geom g;
        uint32_t mw, mh;
    } cases[] = {
        /* crop: the whole source at the crop's scale 224/375 */
        {500, 375, SIZE(224, 224, FMT_FIT_CROP), 299, 224},
        {375, 500, SIZE(224, 224, FMT_FIT_CROP), 224, 299},
        {4000, 3000, SIZE(224, 224, FMT_FIT_CROP), 299, 224},
        {1920, 1080, SIZE(320, 180, FMT_FIT_CROP), 320, 180},
        {1000, 500, SIZE(300, 100, FMT_FIT_CROP), 300, 151},   /* ceil(500 * 100 / 333) */
        {500, 375, SIZE(224, 224, FMT_FIT_PAD), 224, 168},
        {500, 375, SIZE(250, 125, FMT_FIT_STRETCH), 250, 125},
        {1024, 768, SHORT(256, 0), 341, 256},
        {1000, 250, SHORT(256, 512), 512, 128},
        {500, 375, KEEP(400), 400, 300},
        /* no reduction: upscale, identity, one axis kept */
        {100, 100, SIZE(224, 224, FMT_FIT_CROP), 0, 0},
        {224, 224, SIZE(224, 224, FMT_FIT_CROP), 0, 0},
        {500, 375, SIZE(250, 375, FMT_FIT_STRETCH), 0, 0},
        {500, 375, SIZE(600, 100, FMT_FIT_STRETCH), 0, 0},
        {500, 375, KEEP(0), 0, 0},
        {500, 375, KEEP(500), 0, 0},
        {100, 50, SHORT(256, 0), 0, 0},
        {1, 1000, SIZE(224, 224, FMT_FIT_CROP), 0, 0},
        /* invalid options */
        {500, 375, SIZE(0, 224, FMT_FIT_CROP), 0, 0},
        {0, 375, SIZE(224, 224, FMT_FIT_CROP), 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t mw = 77, mh = 77;
        fmt_geom_min_decode(&cases[i].g, cases[i].sw, cases[i].sh, &mw, &mh);
        ck_assert_msg(mw == cases[i].mw && mh == cases[i].mh, "case %zu: got %ux%u want %ux%u",
                      i, mw, mh, cases[i].mw, cases[i].mh);
    }
}
END_TEST

/* The contract, checked the way the JPEG decoder uses it: for every DCT scale 1/2, 1/4, 1/8
 * whose output (ceil(side * s)) is at least the hint on both axes, the fresh plan on that
 * decoded size must not upscale on either axis. And the hint must allow some reduction
 * whenever the target is at most half the source. */
START_TEST(test_min_decode_never_upscales)
{
    static const uint32_t sides[] = {17, 100, 224, 333, 375, 500, 640, 1023, 1024, 2000, 4001};
    fmt_geom geoms[] = {
        SIZE(224, 224, FMT_FIT_CROP), SIZE(224, 224, FMT_FIT_PAD), SIZE(224, 224, FMT_FIT_STRETCH),
        SIZE(320, 180, FMT_FIT_CROP), SIZE(100, 300, FMT_FIT_PAD), SIZE(31, 7, FMT_FIT_CROP),
        SHORT(256, 0), SHORT(100, 150), KEEP(300), KEEP(64),
    };
    size_t ns = sizeof sides / sizeof sides[0];
    for (size_t gi = 0; gi < sizeof geoms / sizeof geoms[0]; gi++) {
        for (size_t a = 0; a < ns; a++) {
            for (size_t b = 0; b < ns; b++) {
                uint32_t sw = sides[a], sh = sides[b], mw, mh;
                fmt_geom_min_decode(&geoms[gi], sw, sh, &mw, &mh);
                fmt_geom_plan full;
                ck_assert_int_eq(fmt_geom_plan_for(&geoms[gi], sw, sh, &full), 0);
                if (mw == 0) {
                    ck_assert_uint_eq(mh, 0);
                    ck_assert(full.dst_w >= full.src_w || full.dst_h >= full.src_h);
                    continue;
                }
                ck_assert(mw < sw && mh < sh);
                for (uint32_t d = 2; d <= 8; d *= 2) {
                    uint32_t dw = (sw + d - 1) / d, dh = (sh + d - 1) / d;
                    if (dw < mw || dh < mh)
                        continue;
                    fmt_geom_plan p;
                    ck_assert_int_eq(fmt_geom_plan_for(&geoms[gi], dw, dh, &p), 0);
                    ck_assert_msg(p.dst_w <= p.src_w && p.dst_h <= p.src_h,
                                  "geom %zu %ux%u decoded 1/%u as %ux%u: %ux%u -> %ux%u", gi,
                                  sw, sh, d, dw, dh, p.src_w, p.src_h, p.dst_w, p.dst_h);
                    if (geoms[gi].mode == FMT_GEOM_SIZE) {
                        ck_assert_uint_eq(p.out_w, full.out_w);
                        ck_assert_uint_eq(p.out_h, full.out_h);
                    }
                }
                if (2 * (uint64_t)full.dst_w <= full.src_w &&
                    2 * (uint64_t)full.dst_h <= full.src_h)
                    ck_assert_msg(mw <= (sw + 1) / 2 && mh <= (sh + 1) / 2,
                                  "geom %zu %ux%u: hint %ux%u rules out 1/2", gi, sw, sh, mw, mh);
            }
        }
    }
}
END_TEST

/* Plans for a shrunk decode keep the full-size output and map the rectangle. */
START_TEST(test_plan_decoded)
{
    fmt_geom_plan p, q;
    /* short side: a fresh plan on the 1/4 decode would give 134x100 */
    fmt_geom g = geom_short(100, 0);
    ck_assert_int_eq(fmt_geom_plan_for(&g, 251, 188, &p), 0);
    ck_assert_uint_eq(p.out_w, 134);
    ck_assert_int_eq(fmt_geom_plan_decoded(&g, 1001, 750, 251, 188, &p), 0);
    fmt_geom_plan want = {133, 100, 0, 0, 251, 188, 0, 0, 133, 100};
    plan_assert(&p, &want, 1001, 750, 0);
    /* crop: x 62..437 of 500 maps to 31..219 of 250 */
    g = geom_size(224, 224, FMT_FIT_CROP);
    ck_assert_int_eq(fmt_geom_plan_decoded(&g, 500, 375, 250, 188, &p), 0);
    fmt_geom_plan want2 = {224, 224, 31, 0, 188, 188, 0, 0, 224, 224};
    plan_assert(&p, &want2, 500, 375, 1);
    /* pad: placement from the full size */
    g = geom_size(100, 100, FMT_FIT_PAD);
    ck_assert_int_eq(fmt_geom_plan_decoded(&g, 1001, 750, 126, 94, &p), 0);
    ck_assert_int_eq(fmt_geom_plan_for(&g, 1001, 750, &q), 0);
    ck_assert_uint_eq(p.dst_h, q.dst_h);
    ck_assert_uint_eq(p.dst_y, q.dst_y);
    ck_assert(p.src_x == 0 && p.src_y == 0 && p.src_w == 126 && p.src_h == 94);
    /* a 1-pixel crop never vanishes */
    g = geom_size(224, 224, FMT_FIT_CROP);
    ck_assert_int_eq(fmt_geom_plan_decoded(&g, 1, 1001, 1, 126, &p), 0);
    ck_assert(p.src_w == 1 && p.src_h == 1 && p.src_y < 126);
    /* no reduction: the same as fmt_geom_plan_for */
    ck_assert_int_eq(fmt_geom_plan_decoded(&g, 640, 480, 640, 480, &p), 0);
    ck_assert_int_eq(fmt_geom_plan_for(&g, 640, 480, &q), 0);
    ck_assert_mem_eq(&p, &q, sizeof p);
    ck_assert_int_eq(fmt_geom_plan_decoded(&g, 640, 480, 0, 60, &p), FMT_EINVAL);
    ck_assert_int_eq(fmt_geom_plan_decoded(&g, 0, 480, 80, 60, &p), FMT_EINVAL);
    /* over the hint-driven decodes of many sizes: rectangle inside, output unchanged */
    static const uint32_t sides[] = {17, 100, 333, 500, 1001, 4001};
    fmt_geom geoms[] = {SIZE(224, 224, FMT_FIT_CROP), SIZE(96, 64, FMT_FIT_PAD), SHORT(64, 0),
                        KEEP(50)};
    for (size_t gi = 0; gi < sizeof geoms / sizeof geoms[0]; gi++)
        for (size_t a = 0; a < 6; a++)
            for (size_t b = 0; b < 6; b++)
                for (uint32_t d = 1; d <= 8; d *= 2) {
                    uint32_t sw = sides[a], sh = sides[b];
                    uint32_t dw = (sw + d - 1) / d, dh = (sh + d - 1) / d;
                    ck_assert_int_eq(fmt_geom_plan_for(&geoms[gi], sw, sh, &q), 0);
                    ck_assert_int_eq(fmt_geom_plan_decoded(&geoms[gi], sw, sh, dw, dh, &p), 0);
                    ck_assert(p.out_w == q.out_w && p.out_h == q.out_h && p.dst_x == q.dst_x &&
                              p.dst_y == q.dst_y && p.dst_w == q.dst_w && p.dst_h == q.dst_h);
                    ck_assert(p.src_w >= 1 && p.src_h >= 1 && p.src_x + p.src_w <= dw &&
                              p.src_y + p.src_h <= dh);
                }
}
END_TEST

/* ---- resize ---- */

/* Every mode keeps a constant colour exactly, on 1 and 3 channels, including the area
 * pre-reduction (> 16x) and the stepped upscale (> 4096x); pad borders are zero. */
START_TEST(test_resize_constant)
{
    static const uint8_t colours[][3] = {{0, 0, 0}, {255, 255, 255}, {17, 200, 255}, {128, 1, 254}};
    static const struct {
        uint32_t sw, sh;
        fmt_geom g;
    } cases[] = {
        {500, 375, SIZE(224, 224, FMT_FIT_CROP)},
        {375, 500, SIZE(224, 224, FMT_FIT_PAD)},
        {500, 375, SIZE(224, 224, FMT_FIT_PAD)},
        {500, 375, SIZE(97, 313, FMT_FIT_STRETCH)},
        {100, 50, SHORT(256, 0)},
        {1024, 768, SHORT(256, 0)},
        {1000, 250, SHORT(256, 512)},
        {500, 375, KEEP(333)},
        {7, 5, SIZE(3, 2, FMT_FIT_CROP)},
        {1, 1, SIZE(9, 4, FMT_FIT_STRETCH)},
        {1, 1000, SIZE(224, 224, FMT_FIT_CROP)},
        {1000, 1, SIZE(64, 64, FMT_FIT_PAD)},
        {4000, 30, SIZE(10, 30, FMT_FIT_STRETCH)},      /* 400x: area pre-reduction */
        {30, 3000, SIZE(30, 7, FMT_FIT_STRETCH)},
        {2, 1, SIZE(9000, 3, FMT_FIT_STRETCH)},        /* 4500x: two upscale steps */
    };
    fmt_resizer *r;
    ck_assert_int_eq(fmt_resizer_create(&r), 0);
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        for (uint32_t ch = 1; ch <= 3; ch += 2) {
            for (size_t k = 0; k < sizeof colours / sizeof colours[0]; k++) {
                fmt_image src = img_new(cases[ci].sw, cases[ci].sh, ch);
                img_fill(&src, colours[k]);
                fmt_geom_plan p;
                fmt_image out = resize_with(r, &src, &cases[ci].g, &p);
                /* count, then assert once: check records every assertion it passes */
                size_t bad = 0, first = SIZE_MAX;
                for (uint32_t y = 0; y < out.height; y++) {
                    for (uint32_t x = 0; x < out.width; x++) {
                        int inside = x >= p.dst_x && x < p.dst_x + p.dst_w && y >= p.dst_y &&
                                     y < p.dst_y + p.dst_h;
                        static const uint8_t black[3];
                        if (memcmp(px(&out, x, y), inside ? colours[k] : black, ch) != 0) {
                            bad++;
                            first = first < SIZE_MAX ? first : (size_t)y * out.width + x;
                        }
                    }
                }
                ck_assert_msg(bad == 0, "case %zu ch %u colour %zu: %zu wrong pixels, first at %zu",
                              ci, ch, k, bad, first);
                free(out.pixels);
                free(src.pixels);
            }
        }
    }
    fmt_resizer_free(r);
}
END_TEST

/* Pad borders are zero whatever the picture, and the picture fills its rectangle. */
START_TEST(test_resize_pad_borders)
{
    fmt_resizer *r;
    ck_assert_int_eq(fmt_resizer_create(&r), 0);
    fmt_image src = img_new(500, 375, 3);
    img_random(&src, 7);
    for (size_t i = 0; i < (size_t)500 * 375 * 3; i++)
        src.pixels[i] |= 0x10;      /* no zero pixels, so a zero in the picture is a bug */
    fmt_geom g = geom_size(224, 224, FMT_FIT_PAD);
    fmt_geom_plan p;
    fmt_image out = resize_with(r, &src, &g, &p);
    ck_assert_uint_eq(p.dst_y, 28);
    ck_assert_uint_eq(p.dst_h, 168);
    size_t zeros_inside = 0, nonzero_border = 0;
    for (uint32_t y = 0; y < 224; y++) {
        for (uint32_t x = 0; x < 224; x++) {
            const uint8_t *q = px(&out, x, y);
            int zero = q[0] == 0 && q[1] == 0 && q[2] == 0;
            if (y < 28 || y >= 28 + 168)
                nonzero_border += !zero;
            else
                zeros_inside += zero;
        }
    }
    ck_assert_uint_eq(nonzero_border, 0);
    ck_assert_uint_eq(zeros_inside, 0);
    free(out.pixels);
    free(src.pixels);
    fmt_resizer_free(r);
}
END_TEST

/* Plans that do not scale copy exactly: the identity and a crop without scaling. */
START_TEST(test_resize_identity_copies)
{
    fmt_resizer *r;
    ck_assert_int_eq(fmt_resizer_create(&r), 0);
    for (uint32_t ch = 1; ch <= 3; ch += 2) {
        fmt_image src = img_new(601, 400, ch);
        img_random(&src, 11 + ch);
        fmt_geom g = geom_keep(0);
        fmt_image out = resize_with(r, &src, &g, NULL);
        ck_assert_mem_eq(out.pixels, src.pixels, (size_t)601 * 400 * ch);
        free(out.pixels);

        g = geom_size(400, 400, FMT_FIT_CROP);  /* 400x400 at x = 100, unscaled */
        fmt_geom_plan p;
        out = resize_with(r, &src, &g, &p);
        ck_assert_uint_eq(p.src_x, 100);
        for (uint32_t y = 0; y < 400; y++)
            ck_assert_mem_eq(px(&out, 0, y), px(&src, 100, y), (size_t)400 * ch);
        free(out.pixels);

        g = geom_size(601, 400, FMT_FIT_PAD);
        out = resize_with(r, &src, &g, NULL);
        ck_assert_mem_eq(out.pixels, src.pixels, (size_t)601 * 400 * ch);
        free(out.pixels);
        free(src.pixels);
    }
    fmt_resizer_free(r);
}
END_TEST

/* A horizontal gradient stays non-decreasing along every row after downscales, including
 * the area pre-reduction path, and keeps its end values near 0 and 255. */
START_TEST(test_resize_gradient_monotonic)
{
    static const struct {
        uint32_t sw, sh;
        fmt_geom g;
    } cases[] = {
        {1000, 300, SIZE(224, 224, FMT_FIT_CROP)},
        {1000, 300, SIZE(224, 224, FMT_FIT_PAD)},
        {1000, 750, SHORT(256, 0)},
        {997, 13, SIZE(331, 5, FMT_FIT_STRETCH)},
        {5000, 40, SIZE(50, 40, FMT_FIT_STRETCH)},  /* 100x: area pre-reduction */
    };
    fmt_resizer *r;
    ck_assert_int_eq(fmt_resizer_create(&r), 0);
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        for (uint32_t ch = 1; ch <= 3; ch += 2) {
            fmt_image src = img_new(cases[ci].sw, cases[ci].sh, ch);
            for (uint32_t y = 0; y < src.height; y++)
                for (uint32_t x = 0; x < src.width; x++)
                    for (uint32_t c = 0; c < ch; c++)
                        px(&src, x, y)[c] = (uint8_t)((x * 255u + (src.width - 1) / 2) /
                                                      (src.width - 1));
            fmt_geom_plan p;
            fmt_image out = resize_with(r, &src, &cases[ci].g, &p);
            for (uint32_t y = p.dst_y; y < p.dst_y + p.dst_h; y++) {
                uint32_t falls = 0, at = 0;
                for (uint32_t x = p.dst_x + 1; x < p.dst_x + p.dst_w; x++)
                    for (uint32_t c = 0; c < ch; c++)
                        if (px(&out, x, y)[c] < px(&out, x - 1, y)[c]) {
                            falls++;
                            at = x;
                        }
                ck_assert_msg(falls == 0, "case %zu: row %u falls %u times, last at x %u", ci, y,
                              falls, at);
                uint8_t first = px(&out, p.dst_x, y)[0];
                uint8_t last = px(&out, p.dst_x + p.dst_w - 1, y)[0];
                if (p.src_w == src.width) {
                    ck_assert_uint_le(first, 3);
                    ck_assert_uint_ge(last, 252);
                }
                ck_assert_uint_lt(first, last);
            }
            free(out.pixels);
            free(src.pixels);
        }
    }
    fmt_resizer_free(r);
}
END_TEST

/* Lanczos a = 3 as Pillow computes it (pixel centres aligned, kernel stretched by the scale
 * when reducing), in double precision, for one row. */
static double lanczos3(double x)
{
    if (x == 0)
        return 1;
    if (x <= -3 || x >= 3)
        return 0;
    double px_ = M_PI * x;
    return 3 * sin(px_) * sin(px_ / 3) / (px_ * px_);
}

static double ref_lanczos_row(const uint8_t *row, uint32_t n, uint32_t m, uint32_t i)
{
    double scale = (double)n / m, fs = scale > 1 ? scale : 1;
    double centre = (i + 0.5) * scale, sum = 0, wsum = 0;
    for (int64_t j = (int64_t)floor(centre - 3 * fs); j <= (int64_t)ceil(centre + 3 * fs); j++) {
        double w = lanczos3((j + 0.5 - centre) / fs);
        int64_t jj = j < 0 ? 0 : j >= (int64_t)n ? (int64_t)n - 1 : j;  /* edge replicated */
        sum += w * row[jj];
        wsum += w;
    }
    return sum / wsum;
}

/* The filter is Lanczos-3 on pixel centres: a random 1-row image resized 1-D matches the
 * double-precision reference within 2 levels away from the edges (fixed-point coefficients),
 * for a reduction and an enlargement. A half-pixel phase error or another filter would miss
 * by tens of levels on random data. */
START_TEST(test_resize_matches_reference_lanczos)
{
    static const uint32_t sizes[][2] = {{300, 112}, {301, 100}, {97, 250}};
    fmt_resizer *r;
    ck_assert_int_eq(fmt_resizer_create(&r), 0);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        uint32_t n = sizes[k][0], m = sizes[k][1];
        fmt_image src = img_new(n, 1, 1);
        img_random(&src, 99 + (uint32_t)k);
        fmt_geom g = geom_size(m, 1, FMT_FIT_STRETCH);
        fmt_image out = resize_with(r, &src, &g, NULL);
        double scale = (double)n / m, margin = 4 * (scale > 1 ? scale : 1);
        int worst = 0;
        for (uint32_t i = 0; i < m; i++) {
            double centre = (i + 0.5) * scale;
            if (centre < margin || centre > n - margin)
                continue;
            double ref = ref_lanczos_row(src.pixels, n, m, i);
            ref = ref < 0 ? 0 : ref > 255 ? 255 : ref;
            int d = abs((int)out.pixels[i] - (int)lround(ref));
            worst = d > worst ? d : worst;
        }
        ck_assert_msg(worst <= 2, "%u -> %u: differs from reference Lanczos by %d", n, m, worst);
        free(out.pixels);
        free(src.pixels);
    }
    fmt_resizer_free(r);
}
END_TEST

/* 2x reduction of an image made of 2x2 blocks. Lanczos is not an area filter: its side lobes
 * pull in the neighbouring blocks (about 7% from each adjacent block and -2% from the next, per
 * axis), so the output equals the block colours only where that cancels:
 *  - blocks whose colour is linear in the block position (the symmetric kernel, centred on
 *    each block, reproduces a linear ramp) come out exact to rounding, away from the borders;
 *  - blocks of random colours differing from each neighbour by at most 8 levels come out
 *    within 4 levels of their colour (|lobes| sum to about 0.3 in 2-D, times 8, plus rounding). */
START_TEST(test_resize_blocks_2x)
{
    fmt_resizer *r;
    ck_assert_int_eq(fmt_resizer_create(&r), 0);
    const uint32_t bw = 40, bh = 30;
    fmt_geom g = geom_size(bw, bh, FMT_FIT_STRETCH);
    for (uint32_t ch = 1; ch <= 3; ch += 2) {
        fmt_image src = img_new(2 * bw, 2 * bh, ch);
        uint8_t *blocks = malloc((size_t)bw * bh * ch);
        ck_assert_ptr_nonnull(blocks);

        for (uint32_t by = 0; by < bh; by++)
            for (uint32_t bx = 0; bx < bw; bx++)
                for (uint32_t c = 0; c < ch; c++)
                    blocks[((size_t)by * bw + bx) * ch + c] =
                        (uint8_t)(20 + 3 * bx + 2 * by + 7 * c);
        for (uint32_t y = 0; y < 2 * bh; y++)
            for (uint32_t x = 0; x < 2 * bw; x++)
                memcpy(px(&src, x, y), blocks + ((size_t)(y / 2) * bw + x / 2) * ch, ch);
        fmt_image out = resize_with(r, &src, &g, NULL);
        int worst = 0;
        for (uint32_t by = 3; by < bh - 3; by++)
            for (uint32_t bx = 3; bx < bw - 3; bx++)
                for (uint32_t c = 0; c < ch; c++) {
                    int d = abs(px(&out, bx, by)[c] - blocks[((size_t)by * bw + bx) * ch + c]);
                    worst = d > worst ? d : worst;
                }
        ck_assert_msg(worst <= 1, "ramp blocks: off by %d", worst);
        free(out.pixels);

        uint32_t seed = 5;
        for (uint32_t by = 0; by < bh; by++)
            for (uint32_t bx = 0; bx < bw; bx++)
                for (uint32_t c = 0; c < ch; c++) {
                    /* a random walk: within 8 levels of the left and the upper neighbour */
                    int left = bx ? blocks[((size_t)by * bw + bx - 1) * ch + c] : 128;
                    int up = by ? blocks[((size_t)(by - 1) * bw + bx) * ch + c] : left;
                    int v = (left + up) / 2 + (int)(rng_next(&seed) % 9) - 4;
                    int lo = (left > up ? left : up) - 8, hi = (left < up ? left : up) + 8;
                    v = v < lo ? lo : v > hi ? hi : v;
                    blocks[((size_t)by * bw + bx) * ch + c] = (uint8_t)v;
                }
        for (uint32_t y = 0; y < 2 * bh; y++)
            for (uint32_t x = 0; x < 2 * bw; x++)
                memcpy(px(&src, x, y), blocks + ((size_t)(y / 2) * bw + x / 2) * ch, ch);
        out = resize_with(r, &src, &g, NULL);
        worst = 0;
        for (uint32_t by = 0; by < bh; by++)
            for (uint32_t bx = 0; bx < bw; bx++)
                for (uint32_t c = 0; c < ch; c++) {
                    int d = abs(px(&out, bx, by)[c] - blocks[((size_t)by * bw + bx) * ch + c]);
                    worst = d > worst ? d : worst;
                }
        ck_assert_msg(worst <= 4, "random blocks: off by %d", worst);
        free(out.pixels);
        free(blocks);
        free(src.pixels);
    }
    fmt_resizer_free(r);
}
END_TEST

/* A single source pixel (1-pixel-wide source, crop fit) fills the whole output. */
START_TEST(test_resize_one_pixel_source)
{
    fmt_resizer *r;
    ck_assert_int_eq(fmt_resizer_create(&r), 0);
    fmt_image src = img_new(1, 1000, 3);
    img_random(&src, 3);
    fmt_geom g = geom_size(224, 224, FMT_FIT_CROP);
    fmt_image out = resize_with(r, &src, &g, NULL);
    const uint8_t *mid = px(&src, 0, 499);
    uint32_t bad = 0;
    for (uint32_t i = 0; i < 224 * 224; i++)
        bad += memcmp(out.pixels + 3 * i, mid, 3) != 0;
    ck_assert_uint_eq(bad, 0);
    free(out.pixels);
    free(src.pixels);
    fmt_resizer_free(r);
}
END_TEST

/* Same input, same bytes: twice on one resizer (with other geometries in between, so cached
 * scalers are evicted and rebuilt), and on two threads at once with a resizer each. */
typedef struct {
    const fmt_image *src;
    const fmt_geom *geoms;
    size_t ngeoms;
    int rounds;
    uint64_t hash[8];
    int rc;
} det_job;

static void *det_worker(void *arg)
{
    det_job *j = arg;
    fmt_resizer *r = NULL;
    j->rc = fmt_resizer_create(&r);
    for (int round = 0; round < j->rounds && !j->rc; round++) {
        for (size_t k = 0; k < j->ngeoms && !j->rc; k++) {
            fmt_geom_plan p;
            fmt_image out;
            j->rc = fmt_geom_plan_for(&j->geoms[k], j->src->width, j->src->height, &p);
            if (!j->rc)
                j->rc = fmt_resize(r, j->src, &p, &out, NULL);
            if (j->rc)
                break;
            uint64_t h = fmt_hash64(out.pixels, (size_t)out.width * out.height * out.channels);
            if (round == 0)
                j->hash[k] = h;
            else if (h != j->hash[k])
                j->rc = -1;
            free(out.pixels);
        }
    }
    fmt_resizer_free(r);
    return NULL;
}

START_TEST(test_resize_deterministic)
{
    static const fmt_geom geoms[] = {
        SIZE(224, 224, FMT_FIT_CROP), SHORT(256, 0), SIZE(224, 224, FMT_FIT_PAD),
        SIZE(100, 30, FMT_FIT_STRETCH), KEEP(111), SIZE(37, 41, FMT_FIT_CROP),
        SIZE(600, 500, FMT_FIT_STRETCH),
    };
    size_t ng = sizeof geoms / sizeof geoms[0];
    fmt_image src = img_new(640, 480, 3);
    img_random(&src, 1234);
    det_job single = {&src, geoms, ng, 2, {0}, 0};
    det_worker(&single);
    ck_assert_int_eq(single.rc, 0);

    /* byte-level check of one result, independent of the hash */
    fmt_resizer *r1, *r2;
    ck_assert_int_eq(fmt_resizer_create(&r1), 0);
    ck_assert_int_eq(fmt_resizer_create(&r2), 0);
    fmt_image a = resize_with(r1, &src, &geoms[0], NULL);
    fmt_image b = resize_with(r2, &src, &geoms[0], NULL);
    ck_assert_mem_eq(a.pixels, b.pixels, (size_t)224 * 224 * 3);
    free(a.pixels);
    free(b.pixels);
    fmt_resizer_free(r1);
    fmt_resizer_free(r2);

    det_job t[2] = {{&src, geoms, ng, 3, {0}, 0}, {&src, geoms, ng, 3, {0}, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, det_worker, &t[i]), 0);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(t[i].rc, 0);
        ck_assert_mem_eq(t[i].hash, single.hash, sizeof single.hash);
    }
    free(src.pixels);
}
END_TEST

/* No CPU-dependent rounding: the same resizes with swscale's SIMD code disabled (plain C)
 * give the same bytes as with everything this CPU offers. */
START_TEST(test_resize_same_without_simd)
{
    static const fmt_geom geoms[] = {
        SIZE(224, 224, FMT_FIT_CROP), SHORT(256, 0), SIZE(224, 224, FMT_FIT_PAD),
        SIZE(61, 700, FMT_FIT_STRETCH), SIZE(20, 20, FMT_FIT_CROP),
    };
    size_t ng = sizeof geoms / sizeof geoms[0];
    for (uint32_t ch = 1; ch <= 3; ch += 2) {
        fmt_image src = img_new(640, 480, ch);
        img_random(&src, 4321 + ch);
        uint64_t simd[8], plain[8];
        for (int pass = 0; pass < 2; pass++) {
            av_force_cpu_flags(pass == 0 ? -1 : 0);     /* -1: detect; 0: none */
            fmt_resizer *r;
            ck_assert_int_eq(fmt_resizer_create(&r), 0);
            for (size_t k = 0; k < ng; k++) {
                fmt_image out = resize_with(r, &src, &geoms[k], NULL);
                uint64_t h = fmt_hash64(out.pixels, (size_t)out.width * out.height * ch);
                (pass == 0 ? simd : plain)[k] = h;
                free(out.pixels);
            }
            fmt_resizer_free(r);
        }
        av_force_cpu_flags(-1);
        for (size_t k = 0; k < ng; k++)
            ck_assert_msg(simd[k] == plain[k], "geometry %zu, %u channels: SIMD and C differ", k,
                          ch);
        free(src.pixels);
    }
}
END_TEST

/* A source whose scratch the resizer does not keep (over 32 MiB of planes): the second
 * resize reallocates and must give the same bytes, and a small one in between still works. */
START_TEST(test_resize_large_source)
{
    fmt_resizer *r;
    ck_assert_int_eq(fmt_resizer_create(&r), 0);
    fmt_image src = img_new(4000, 3000, 3);
    img_random(&src, 77);
    fmt_image small = img_new(50, 40, 3);
    img_random(&small, 78);
    fmt_geom g = geom_size(224, 224, FMT_FIT_CROP);
    fmt_image a = resize_with(r, &src, &g, NULL);
    fmt_image c = resize_with(r, &small, &g, NULL);
    fmt_image b = resize_with(r, &src, &g, NULL);
    ck_assert_mem_eq(a.pixels, b.pixels, (size_t)224 * 224 * 3);
    free(a.pixels);
    free(b.pixels);
    free(c.pixels);
    free(small.pixels);
    free(src.pixels);
    fmt_resizer_free(r);
}
END_TEST

START_TEST(test_resize_errors)
{
    fmt_resizer *r;
    ck_assert_int_eq(fmt_resizer_create(&r), 0);
    ck_assert_int_eq(fmt_resizer_create(NULL), FMT_EINVAL);
    fmt_resizer_free(NULL);
    fmt_image src = img_new(100, 80, 3);
    fmt_geom g = geom_size(50, 50, FMT_FIT_CROP);
    fmt_geom_plan p;
    ck_assert_int_eq(fmt_geom_plan_for(&g, 100, 80, &p), 0);
    fmt_image out;
    fmt_msg msg = {{0}};

    memset(&out, 0xa5, sizeof out);
    src.channels = 4;
    ck_assert_int_eq(fmt_resize(r, &src, &p, &out, &msg), FMT_EINVAL);
    ck_assert_ptr_null(out.pixels);
    ck_assert_uint_eq(out.width, 0);
    ck_assert(msg.text[0] != '\0');
    src.channels = 3;

    fmt_geom_plan bad = p;
    bad.src_x = 60;     /* 60 + 80 > 100 */
    ck_assert_int_eq(fmt_resize(r, &src, &bad, &out, &msg), FMT_EINVAL);
    ck_assert_ptr_null(out.pixels);
    bad = p;
    bad.dst_y = 1;      /* 1 + 50 > 50 */
    ck_assert_int_eq(fmt_resize(r, &src, &bad, &out, NULL), FMT_EINVAL);
    bad = p;
    bad.dst_w = 0;
    ck_assert_int_eq(fmt_resize(r, &src, &bad, &out, NULL), FMT_EINVAL);
    ck_assert_int_eq(fmt_resize(NULL, &src, &p, &out, NULL), FMT_EINVAL);
    ck_assert_int_eq(fmt_resize(r, NULL, &p, &out, NULL), FMT_EINVAL);
    ck_assert_int_eq(fmt_resize(r, &src, NULL, &out, NULL), FMT_EINVAL);
    ck_assert_int_eq(fmt_resize(r, &src, &p, NULL, NULL), FMT_EINVAL);

    /* the resizer still works after refusals */
    ck_assert_int_eq(fmt_resize(r, &src, &p, &out, &msg), 0);
    ck_assert_uint_eq(out.width, 50);
    free(out.pixels);
    free(src.pixels);
    fmt_resizer_free(r);
}
END_TEST

static Suite *geometry_suite(void)
{
    Suite *s = suite_create("geometry");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_plan_table);
    tcase_add_test(tc, test_plan_invariants);
    tcase_add_test(tc, test_plan_errors);
    tcase_add_test(tc, test_plan_decoded);
    tcase_add_test(tc, test_min_decode_cases);
    tcase_add_test(tc, test_min_decode_never_upscales);
    tcase_add_test(tc, test_resize_constant);
    tcase_add_test(tc, test_resize_pad_borders);
    tcase_add_test(tc, test_resize_identity_copies);
    tcase_add_test(tc, test_resize_gradient_monotonic);
    tcase_add_test(tc, test_resize_matches_reference_lanczos);
    tcase_add_test(tc, test_resize_blocks_2x);
    tcase_add_test(tc, test_resize_one_pixel_source);
    tcase_add_test(tc, test_resize_deterministic);
    tcase_add_test(tc, test_resize_same_without_simd);
    tcase_add_test(tc, test_resize_large_source);
    tcase_add_test(tc, test_resize_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(geometry_suite());
}
