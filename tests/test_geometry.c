/* test_geometry.c - geometry plans (exact numbers, torchvision's arithmetic), the shrink-on-load
 * hint and box, and the resize: exact constants, zero padding, exact copies, monotonic
 * gradients, windows equal to a full resize then crop, box-filter blocks, and identical bytes
 * across runs, threads and code paths. Everything is in memory; no fixture files are needed.
 * The resampler's own agreement with Pillow is tests/test_resample.c; the whole chain's with
 * torchvision is tests/e2e_torchvision.sh. */
#include "geometry.h"
#include "simd.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---- */

static fmt_image img_new(uint32_t w, uint32_t h, uint32_t ch)
{
    fmt_image im = {calloc((size_t)w * h * ch, 1), w, h, ch, 0};
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

/* A new w x h x ch image of img_random's pixels from seed. */
static fmt_image img_noise(uint32_t w, uint32_t h, uint32_t ch, uint32_t seed)
{
    fmt_image im = img_new(w, h, ch);
    img_random(&im, seed);
    return im;
}

static uint8_t *px(const fmt_image *im, uint32_t x, uint32_t y)
{
    return im->pixels + ((size_t)y * im->width + x) * im->channels;
}

static fmt_geom geom_size(uint32_t w, uint32_t h, fmt_fit fit)
{
    fmt_geom g = {FMT_GEOM_SIZE, fit, w, h, 0, 0, 0, 0, FMT_FILTER_BILINEAR, 0};
    return g;
}

static fmt_geom geom_short(uint32_t s, uint32_t max_side)
{
    fmt_geom g = {FMT_GEOM_SHORT_SIDE, FMT_FIT_CROP, 0, 0, s, max_side, 0, 0, FMT_FILTER_BILINEAR,
                  0};
    return g;
}

static fmt_geom geom_keep(uint32_t max_side)
{
    fmt_geom g = {FMT_GEOM_KEEP, FMT_FIT_CROP, 0, 0, 0, max_side, 0, 0, FMT_FILTER_BILINEAR, 0};
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
    /* out_w, out_h, rs_w, rs_h, win_x, win_y, dst_x, dst_y, dst_w, dst_h */
    uint32_t want[10];
} plan_case;

#define SIZE(w, h, f) {FMT_GEOM_SIZE, f, w, h, 0, 0, 0, 0, FMT_FILTER_BILINEAR, 0}
#define SHORT(s, m) {FMT_GEOM_SHORT_SIDE, FMT_FIT_CROP, 0, 0, s, m, 0, 0, FMT_FILTER_BILINEAR, 0}
#define SHORTC(s, m, cw, chh) \
    {FMT_GEOM_SHORT_SIDE, FMT_FIT_CROP, 0, 0, s, m, cw, chh, FMT_FILTER_BILINEAR, 0}
#define KEEP(m) {FMT_GEOM_KEEP, FMT_FIT_CROP, 0, 0, 0, m, 0, 0, FMT_FILTER_BILINEAR, 0}
#define KEEPC(m, cw, chh) {FMT_GEOM_KEEP, FMT_FIT_CROP, 0, 0, 0, m, cw, chh, FMT_FILTER_BILINEAR, 0}

/* Expected values worked out from torchvision 0.14's formulas: Resize(S) gives the long side
 * int(S * long / short); CenterCrop starts at int(round(d / 2)) (halves to even) and pads
 * (W - w) // 2 before. */
static const plan_case plan_cases[] = {
    /* --size crop = Resize(S) + CenterCrop, S the smallest covering short side */
    {500, 375, SIZE(224, 224, FMT_FIT_CROP), {224, 224, 298, 224, 37, 0, 0, 0, 224, 224}},
    {375, 500, SIZE(224, 224, FMT_FIT_CROP), {224, 224, 224, 298, 0, 37, 0, 0, 224, 224}},
    /* 224 * 501 / 375 = 299.26 -> 299; d = 75, round(37.5) = 38 */
    {501, 375, SIZE(224, 224, FMT_FIT_CROP), {224, 224, 299, 224, 38, 0, 0, 0, 224, 224}},
    /* 224 * 503 / 375 = 300.45 -> 300; d = 76 -> 38 */
    {503, 375, SIZE(224, 224, FMT_FIT_CROP), {224, 224, 300, 224, 38, 0, 0, 0, 224, 224}},
    /* 224 * 499 / 375 = 298.07 -> 298; d = 74 -> 37 */
    {499, 375, SIZE(224, 224, FMT_FIT_CROP), {224, 224, 298, 224, 37, 0, 0, 0, 224, 224}},
    /* d = 69: round(34.5) = 34 (even) */
    {293, 224, SIZE(224, 224, FMT_FIT_CROP), {224, 224, 293, 224, 34, 0, 0, 0, 224, 224}},
    {224, 224, SIZE(224, 224, FMT_FIT_CROP), {224, 224, 224, 224, 0, 0, 0, 0, 224, 224}},
    {300, 300, SIZE(224, 224, FMT_FIT_CROP), {224, 224, 224, 224, 0, 0, 0, 0, 224, 224}},
    /* non-square target: S = 240 is the first with int(S * 4 / 3) >= 320 */
    {640, 480, SIZE(320, 180, FMT_FIT_CROP), {320, 180, 320, 240, 0, 30, 0, 0, 320, 180}},
    /* S = 150: 300x150, d = 50 -> 25 */
    {1000, 500, SIZE(300, 100, FMT_FIT_CROP), {300, 100, 300, 150, 0, 25, 0, 0, 300, 100}},
    {1920, 1080, SIZE(100, 100, FMT_FIT_CROP), {100, 100, 177, 100, 38, 0, 0, 0, 100, 100}},
    {1, 1, SIZE(3, 7, FMT_FIT_CROP), {3, 7, 7, 7, 2, 0, 0, 0, 3, 7}},
    {1000, 1, SIZE(4, 4, FMT_FIT_CROP), {4, 4, 4000, 4, 1998, 0, 0, 0, 4, 4}},
    /* pad: Resize(S), S the largest that fits, then CenterCrop's zero padding */
    {500, 375, SIZE(224, 224, FMT_FIT_PAD), {224, 224, 224, 168, 0, 0, 0, 28, 224, 168}},
    {375, 500, SIZE(224, 224, FMT_FIT_PAD), {224, 224, 168, 224, 0, 0, 28, 0, 168, 224}},
    {640, 480, SIZE(320, 180, FMT_FIT_PAD), {320, 180, 240, 180, 0, 0, 40, 0, 240, 180}},
    /* S = 30: int(30 * 3.33) = 99; pad left (100 - 99) // 2 = 0 */
    {333, 100, SIZE(100, 100, FMT_FIT_PAD), {100, 100, 99, 30, 0, 0, 0, 35, 99, 30}},
    {224, 224, SIZE(224, 224, FMT_FIT_PAD), {224, 224, 224, 224, 0, 0, 0, 0, 224, 224}},
    /* no S fits (1 x 1 would be 1000 wide): the long side is limited to the target */
    {1000, 1, SIZE(224, 224, FMT_FIT_PAD), {224, 224, 224, 1, 0, 0, 0, 111, 224, 1}},
    /* stretch */
    {500, 375, SIZE(224, 224, FMT_FIT_STRETCH), {224, 224, 224, 224, 0, 0, 0, 0, 224, 224}},
    {1, 1000, SIZE(7, 3, FMT_FIT_STRETCH), {7, 3, 7, 3, 0, 0, 0, 0, 7, 3}},
    /* short side: int(), not round(): 256 * 500 / 375 = 341.33, 3 * 3 / 2 = 4.5 -> 4 */
    {500, 375, SHORT(256, 0), {341, 256, 341, 256, 0, 0, 0, 0, 341, 256}},
    {375, 500, SHORT(256, 0), {256, 341, 256, 341, 0, 0, 0, 0, 256, 341}},
    {1024, 768, SHORT(256, 0), {341, 256, 341, 256, 0, 0, 0, 0, 341, 256}},
    {300, 300, SHORT(256, 0), {256, 256, 256, 256, 0, 0, 0, 0, 256, 256}},
    {100, 50, SHORT(256, 0), {512, 256, 512, 256, 0, 0, 0, 0, 512, 256}},
    {3, 2, SHORT(3, 0), {4, 3, 4, 3, 0, 0, 0, 0, 4, 3}},
    {333, 1000, SHORT(100, 0), {100, 300, 100, 300, 0, 0, 0, 0, 100, 300}},
    {1, 1000, SHORT(2, 0), {2, 2000, 2, 2000, 0, 0, 0, 0, 2, 2000}},
    /* max_size: int(512 * 256 / 1024) = 128 */
    {1000, 250, SHORT(256, 512), {512, 128, 512, 128, 0, 0, 0, 0, 512, 128}},
    {250, 1000, SHORT(256, 512), {128, 512, 128, 512, 0, 0, 0, 0, 128, 512}},
    {1000, 250, SHORT(256, 1024), {1024, 256, 1024, 256, 0, 0, 0, 0, 1024, 256}},
    {500, 375, SHORT(256, 400), {341, 256, 341, 256, 0, 0, 0, 0, 341, 256}},
    {500, 500, SHORT(256, 100), {100, 100, 100, 100, 0, 0, 0, 0, 100, 100}},
    {640, 480, SHORT(480, 0), {640, 480, 640, 480, 0, 0, 0, 0, 640, 480}},
    /* --short-side 256 --crop 224x224: d = 117 -> round(58.5) = 58, d = 32 -> 16 */
    {500, 375, SHORTC(256, 0, 224, 224), {224, 224, 341, 256, 58, 16, 0, 0, 224, 224}},
    {375, 500, SHORTC(256, 0, 224, 224), {224, 224, 256, 341, 16, 58, 0, 0, 224, 224}},
    /* crop larger than the image: zero padding, (120 - 100) // 2 = 10 before */
    {100, 50, KEEPC(0, 120, 61), {120, 61, 100, 50, 0, 0, 10, 5, 100, 50}},
    {100, 50, KEEPC(0, 120, 40), {120, 40, 100, 50, 0, 5, 10, 0, 100, 40}},
    /* crop only: d = 5 -> round(2.5) = 2, d = 7 -> round(3.5) = 4 */
    {8, 10, KEEPC(0, 3, 3), {3, 3, 8, 10, 2, 4, 0, 0, 3, 3}},
    /* keep: identity, capped (round), never upscaled */
    {500, 375, KEEP(0), {500, 375, 500, 375, 0, 0, 0, 0, 500, 375}},
    {500, 375, KEEP(400), {400, 300, 400, 300, 0, 0, 0, 0, 400, 300}},
    {375, 500, KEEP(400), {300, 400, 300, 400, 0, 0, 0, 0, 300, 400}},
    {500, 375, KEEP(1000), {500, 375, 500, 375, 0, 0, 0, 0, 500, 375}},
    {3, 1, KEEP(2), {2, 1, 2, 1, 0, 0, 0, 0, 2, 1}},
    {1, 7, KEEP(2), {1, 2, 1, 2, 0, 0, 0, 0, 1, 2}},
    {1, 1, KEEP(0), {1, 1, 1, 1, 0, 0, 0, 0, 1, 1}},
};

static void plan_assert(const fmt_geom_plan *got, const uint32_t want[10], uint32_t sw,
                        uint32_t sh, int i)
{
    uint32_t g[10] = {got->out_w, got->out_h, got->rs_w, got->rs_h, got->win_x,
                      got->win_y, got->dst_x, got->dst_y, got->dst_w, got->dst_h};
    ck_assert_msg(memcmp(g, want, sizeof g) == 0,
                  "case %d (%ux%u): got out %ux%u rs %ux%u win %u,%u dst %u,%u %ux%u, want out "
                  "%ux%u rs %ux%u win %u,%u dst %u,%u %ux%u",
                  i, sw, sh, g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], want[0],
                  want[1], want[2], want[3], want[4], want[5], want[6], want[7], want[8],
                  want[9]);
    /* the box is the whole source: torchvision resizes the whole image, then crops */
    ck_assert(got->box.x0 == 0.0f && got->box.y0 == 0.0f && got->box.x1 == (float)sw &&
              got->box.y1 == (float)sh);
    ck_assert(got->src_x == 0 && got->src_y == 0 && got->src_w == sw && got->src_h == sh);
}

START_TEST(test_plan_table)
{
    int n = (int)(sizeof plan_cases / sizeof plan_cases[0]);
    for (int i = 0; i < n; i++) {
        const plan_case *c = &plan_cases[i];
        fmt_geom_plan p;
        memset(&p, 0xa5, sizeof p);
        ck_assert_int_eq(fmt_geom_plan_for(&c->g, c->sw, c->sh, &p), 0);
        plan_assert(&p, c->want, c->sw, c->sh, i);
    }
}
END_TEST

/* Invariants over a grid of sizes: crop covers with the smallest short side and its window
 * lies inside; pad fits with the largest, centred as CenterCrop pads; short side exact. */
START_TEST(test_plan_invariants)
{
    static const uint32_t sides[] = {1, 2, 3, 7, 64, 99, 224, 255, 256, 375, 500, 1023, 4000};
    static const uint32_t targets[][2] = {{224, 224}, {1, 1}, {320, 180}, {3, 7}, {256, 100}};
    size_t ns = sizeof sides / sizeof sides[0], nt = sizeof targets / sizeof targets[0];
    for (size_t a = 0; a < ns; a++) {
        for (size_t b = 0; b < ns; b++) {
            uint32_t sw = sides[a], sh = sides[b];
            uint32_t shortv = sw < sh ? sw : sh;
            for (size_t t = 0; t < nt; t++) {
                uint32_t W = targets[t][0], H = targets[t][1];
                fmt_geom g = geom_size(W, H, FMT_FIT_CROP);
                fmt_geom_plan p, q;
                ck_assert_int_eq(fmt_geom_plan_for(&g, sw, sh, &p), 0);
                ck_assert(p.out_w == W && p.out_h == H && p.dst_w == W && p.dst_h == H);
                ck_assert(p.rs_w >= W && p.rs_h >= H);
                ck_assert(p.win_x + W <= p.rs_w && p.win_y + H <= p.rs_h);
                ck_assert(p.win_x == (p.rs_w - W) / 2 || p.win_x == (p.rs_w - W + 1) / 2);
                ck_assert(p.win_y == (p.rs_h - H) / 2 || p.win_y == (p.rs_h - H + 1) / 2);
                /* smallest: a short side one less would not cover */
                uint32_t S = sw <= sh ? p.rs_w : p.rs_h;
                if (S > 1) {
                    fmt_geom s1 = geom_short(S - 1, 0);
                    s1.crop_w = s1.crop_h = 1;  /* only the resized size is wanted */
                    ck_assert_int_eq(fmt_geom_plan_for(&s1, sw, sh, &q), 0);
                    ck_assert(q.rs_w < W || q.rs_h < H);
                }

                g.fit = FMT_FIT_PAD;
                ck_assert_int_eq(fmt_geom_plan_for(&g, sw, sh, &p), 0);
                ck_assert(p.out_w == W && p.out_h == H);
                ck_assert(p.rs_w <= W && p.rs_h <= H && p.dst_w == p.rs_w && p.dst_h == p.rs_h);
                ck_assert_uint_eq(p.dst_x, (W - p.dst_w) / 2);
                ck_assert_uint_eq(p.dst_y, (H - p.dst_h) / 2);
                ck_assert(p.win_x == 0 && p.win_y == 0);
            }
            fmt_geom g = geom_short(100, 0);
            fmt_geom_plan p;
            ck_assert_int_eq(fmt_geom_plan_for(&g, sw, sh, &p), 0);
            ck_assert_uint_eq(p.out_w < p.out_h ? p.out_w : p.out_h, 100);
            ck_assert_uint_eq(sw <= sh ? p.out_w : p.out_h, 100);
            uint64_t longv = sw <= sh ? sh : sw, got = sw <= sh ? p.out_h : p.out_w;
            /* int(100 * long / short): got <= exact < got + 1 */
            ck_assert(got * shortv <= 100 * longv && 100 * longv < (got + 1) * shortv);
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
    g = geom_short(10, 0);
    g.crop_w = 5;       /* a crop needs both sides */
    ck_assert_int_eq(fmt_geom_plan_for(&g, 10, 10, &p), FMT_EINVAL);
    g = geom_size(8, 8, FMT_FIT_CROP);
    g.crop_w = g.crop_h = 5;    /* --size crops already */
    ck_assert_int_eq(fmt_geom_plan_for(&g, 10, 10, &p), FMT_EINVAL);
    g = geom_short(10, 0);
    g.filter = FMT_FILTER_COUNT;
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

static fmt_geom shrink(fmt_geom g)
{
    g.shrink_on_load = 1;
    return g;
}

START_TEST(test_min_decode_cases)
{
    static const struct {
        uint32_t sw, sh;
        fmt_geom g;
        uint32_t mw, mh;
    } cases[] = {
        /* the decoded size at the smallest 1/d with side / d >= 1.5 x the resized size */
        {500, 375, SIZE(224, 224, FMT_FIT_CROP), 0, 0},        /* 298x224: only full size */
        {1000, 750, SIZE(224, 224, FMT_FIT_CROP), 500, 375},   /* 298x224: 1/2 */
        {375, 500, SIZE(100, 100, FMT_FIT_CROP), 188, 250},   /* 100x133: 1/2 */
        {4000, 3000, SIZE(224, 224, FMT_FIT_CROP), 500, 375}, /* 298x224: 1/8 */
        {4001, 3001, SIZE(224, 224, FMT_FIT_CROP), 501, 376},
        {1920, 1080, SIZE(320, 180, FMT_FIT_CROP), 480, 270},
        {1000, 500, SIZE(300, 100, FMT_FIT_CROP), 500, 250},
        {500, 375, SIZE(224, 224, FMT_FIT_PAD), 0, 0},         /* 224x168: 250 < 1.5 x 224 */
        {700, 525, SIZE(224, 224, FMT_FIT_PAD), 350, 263},     /* 224x168: 1/2 */
        {500, 375, SIZE(125, 93, FMT_FIT_STRETCH), 250, 188},  /* 1/4 leaves less than 1.5x */
        {750, 375, SIZE(125, 62, FMT_FIT_STRETCH), 188, 94},   /* 1/4: 187.5 x 93.75 */
        {500, 375, SIZE(125, 94, FMT_FIT_STRETCH), 250, 188},  /* 93.75 < 94: 1/2 */
        {1024, 768, SHORT(256, 0), 512, 384},                  /* 341x256: 1/4 is 256: 1/2 */
        {1000, 250, SHORT(256, 512), 0, 0},                    /* 512x128: full */
        {1024, 768, SHORTC(256, 0, 224, 224), 512, 384},
        {17, 9, SIZE(4, 2, FMT_FIT_STRETCH), 9, 5},            /* 1/2: 8.5 x 4.5 */
        {900, 600, KEEP(400), 0, 0},                           /* 400x267: 450 < 600 */
        {1500, 1000, KEEP(400), 750, 500},
        {4, 4, SIZE(1, 1, FMT_FIT_STRETCH), 2, 2},
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
        fmt_geom g = shrink(cases[i].g);
        fmt_geom_min_decode(&g, cases[i].sw, cases[i].sh, &mw, &mh);
        ck_assert_msg(mw == cases[i].mw && mh == cases[i].mh, "case %zu: got %ux%u want %ux%u",
                      i, mw, mh, cases[i].mw, cases[i].mh);
        /* off by default: shrink-on-load changes pixels */
        fmt_geom_min_decode(&cases[i].g, cases[i].sw, cases[i].sh, &mw, &mh);
        ck_assert(mw == 0 && mh == 0);
    }
}
END_TEST

/* The contract, checked the way the JPEG decoder uses it: for every DCT scale k/8 whose output
 * (ceil(side * k / 8)) is at least the hint on both axes, the decoded plan's box still spans at
 * least the resized size (no enlargement) and the output is the full-size plan's. And the hint
 * allows 1/2 whenever the resize is at most a third of the source. */
START_TEST(test_min_decode_never_upscales)
{
    static const uint32_t sides[] = {17, 100, 224, 333, 375, 500, 640, 1023, 1024, 2000, 4001};
    fmt_geom geoms[] = {
        SIZE(224, 224, FMT_FIT_CROP), SIZE(224, 224, FMT_FIT_PAD), SIZE(224, 224, FMT_FIT_STRETCH),
        SIZE(320, 180, FMT_FIT_CROP), SIZE(100, 300, FMT_FIT_PAD), SIZE(31, 7, FMT_FIT_CROP),
        SHORT(256, 0), SHORT(100, 150), KEEP(300), KEEP(64), SHORTC(160, 0, 128, 128),
    };
    size_t ns = sizeof sides / sizeof sides[0];
    for (size_t gi = 0; gi < sizeof geoms / sizeof geoms[0]; gi++) {
        fmt_geom g = shrink(geoms[gi]);
        for (size_t a = 0; a < ns; a++) {
            for (size_t b = 0; b < ns; b++) {
                uint32_t sw = sides[a], sh = sides[b], mw, mh;
                fmt_geom_min_decode(&g, sw, sh, &mw, &mh);
                fmt_geom_plan full;
                ck_assert_int_eq(fmt_geom_plan_for(&g, sw, sh, &full), 0);
                if (mw == 0) {
                    ck_assert_uint_eq(mh, 0);
                    ck_assert(3 * (uint64_t)full.rs_w > sw || 3 * (uint64_t)full.rs_h > sh);
                    continue;
                }
                ck_assert(mw < sw && mh < sh);
                for (uint32_t k = 1; k < 8; k *= 2) {
                    uint32_t dw = (sw * k + 7) / 8, dh = (sh * k + 7) / 8;
                    if (dw < mw || dh < mh)
                        continue;
                    fmt_geom_plan p;
                    ck_assert_int_eq(fmt_geom_plan_decoded(&g, sw, sh, dw, dh, &p), 0);
                    ck_assert_msg(p.box.x1 - p.box.x0 >= (float)p.rs_w &&
                                      p.box.y1 - p.box.y0 >= (float)p.rs_h,
                                  "geom %zu %ux%u decoded %u/8 as %ux%u: box %gx%g -> %ux%u",
                                  gi, sw, sh, k, dw, dh, (double)(p.box.x1 - p.box.x0),
                                  (double)(p.box.y1 - p.box.y0), p.rs_w, p.rs_h);
                    ck_assert(p.out_w == full.out_w && p.out_h == full.out_h &&
                              p.rs_w == full.rs_w && p.rs_h == full.rs_h &&
                              p.win_x == full.win_x && p.win_y == full.win_y);
                }
                if (3 * (uint64_t)full.rs_w <= sw && 3 * (uint64_t)full.rs_h <= sh)
                    ck_assert_msg(mw <= (sw + 1) / 2 && mh <= (sh + 1) / 2,
                                  "geom %zu %ux%u: hint %ux%u rules out 1/2", gi, sw, sh, mw, mh);
            }
        }
    }
}
END_TEST

/* Plans for a shrunk decode keep the full-size output and map the box by the DCT scale. */
START_TEST(test_plan_decoded)
{
    fmt_geom_plan p, q;
    fmt_geom g = geom_short(100, 0);
    /* 1001x750 at 2/8 is 251x188 (ceil(250.25), ceil(187.5)): the box is 250.25 x 187.5 */
    ck_assert_int_eq(fmt_geom_plan_decoded(&g, 1001, 750, 251, 188, &p), 0);
    ck_assert_int_eq(fmt_geom_plan_for(&g, 1001, 750, &q), 0);
    ck_assert(p.out_w == 133 && p.out_h == 100 && p.rs_w == 133 && p.rs_h == 100);
    ck_assert(p.box.x0 == 0.0f && p.box.y0 == 0.0f && p.box.x1 == 250.25f && p.box.y1 == 187.5f);
    ck_assert(p.src_x == 0 && p.src_y == 0 && p.src_w == 251 && p.src_h == 188);
    /* crop: the window comes from the full-size plan */
    g = geom_size(224, 224, FMT_FIT_CROP);
    ck_assert_int_eq(fmt_geom_plan_decoded(&g, 1000, 750, 500, 375, &p), 0);
    ck_assert_int_eq(fmt_geom_plan_for(&g, 1000, 750, &q), 0);
    ck_assert(p.box.x1 == 500.0f && p.box.y1 == 375.0f);
    ck_assert(p.rs_w == q.rs_w && p.win_x == q.win_x && p.out_w == 224);
    /* a decode that is not k/8 of the source: per-axis ratio */
    ck_assert_int_eq(fmt_geom_plan_decoded(&g, 1000, 700, 300, 200, &p), 0);
    ck_assert(p.box.x1 == 300.0f && p.box.y1 == 200.0f);
    /* no reduction: the same as fmt_geom_plan_for */
    ck_assert_int_eq(fmt_geom_plan_decoded(&g, 640, 480, 640, 480, &p), 0);
    ck_assert_int_eq(fmt_geom_plan_for(&g, 640, 480, &q), 0);
    ck_assert_mem_eq(&p, &q, sizeof p);
    ck_assert_int_eq(fmt_geom_plan_decoded(&g, 640, 480, 0, 60, &p), FMT_EINVAL);
    ck_assert_int_eq(fmt_geom_plan_decoded(&g, 0, 480, 80, 60, &p), FMT_EINVAL);
    ck_assert_int_eq(fmt_geom_plan_decoded(&g, 640, 480, 641, 480, &p), FMT_EINVAL);
}
END_TEST

/* ---- resize ---- */

/* A resizer, or the test fails. */
static fmt_resizer *resizer_new(void)
{
    fmt_resizer *r;
    ck_assert_int_eq(fmt_resizer_create(&r), 0);
    return r;
}

/* Every mode keeps a constant colour exactly (coefficients sum to one), on 1 and 3 channels,
 * including strong reductions and enlargements; pad borders are zero. */
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
        {4000, 30, SIZE(10, 30, FMT_FIT_STRETCH)},      /* 400x down */
        {30, 3000, SIZE(30, 7, FMT_FIT_STRETCH)},
        {2, 1, SIZE(9000, 3, FMT_FIT_STRETCH)},        /* 4500x up */
        {640, 480, SHORTC(256, 0, 224, 224)},
        {100, 50, KEEPC(0, 120, 61)},
    };
    fmt_resizer *r = resizer_new();
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
    fmt_resizer *r = resizer_new();
    fmt_image src = img_noise(500, 375, 3, 7);
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
    fmt_resizer *r = resizer_new();
    for (uint32_t ch = 1; ch <= 3; ch += 2) {
        fmt_image src = img_noise(601, 400, ch, 11 + ch);
        fmt_geom g = geom_keep(0);
        fmt_image out = resize_with(r, &src, &g, NULL);
        ck_assert_mem_eq(out.pixels, src.pixels, (size_t)601 * 400 * ch);
        free(out.pixels);

        g = geom_size(400, 400, FMT_FIT_CROP);  /* 400x400 at x = 100, unscaled */
        fmt_geom_plan p;
        out = resize_with(r, &src, &g, &p);
        ck_assert_uint_eq(p.win_x, 100);
        ck_assert_uint_eq(p.rs_w, 601);
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
        {5000, 40, SIZE(50, 40, FMT_FIT_STRETCH)},  /* 100x */
    };
    fmt_resizer *r = resizer_new();
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
                if (p.win_x == 0 && p.dst_w == p.rs_w) {
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

/* The geometry composes the resampler as torchvision composes Resize and CenterCrop: for every
 * filter, the output equals fmt_resample to the full resized size, cut at the window and placed
 * at dst (the resampler itself is tied to Pillow in test_resample.c). */
START_TEST(test_resize_is_resample_then_crop)
{
    static const fmt_geom geoms[] = {
        SIZE(224, 224, FMT_FIT_CROP), SIZE(97, 61, FMT_FIT_PAD), SHORTC(150, 0, 128, 100),
        SHORTC(90, 0, 200, 50), SIZE(33, 200, FMT_FIT_STRETCH), KEEPC(0, 77, 500),
    };
    fmt_resizer *r = resizer_new();
    fmt_rs_scratch *rs;
    ck_assert_int_eq(fmt_rs_scratch_create(NULL, &rs), 0);
    for (uint32_t ch = 1; ch <= 3; ch += 2) {
        fmt_image src = img_noise(301, 211, ch, 5 + ch);
        for (size_t gi = 0; gi < sizeof geoms / sizeof geoms[0]; gi++) {
            for (int f = 0; f < FMT_FILTER_COUNT; f++) {
                fmt_geom g = geoms[gi];
                g.filter = (fmt_filter)f;
                fmt_geom_plan p;
                fmt_image out = resize_with(r, &src, &g, &p);
                uint8_t *full = malloc((size_t)p.rs_w * p.rs_h * ch);
                ck_assert_ptr_nonnull(full);
                fmt_rs_view sv = {src.pixels, src.width, src.height, ch, (size_t)src.width * ch};
                fmt_rs_view dv = {full, p.rs_w, p.rs_h, ch, (size_t)p.rs_w * ch};
                ck_assert_int_eq(fmt_resample(rs, &sv, NULL, (fmt_filter)f, &dv, NULL), 0);
                size_t bad = 0;
                for (uint32_t y = 0; y < out.height; y++)
                    for (uint32_t x = 0; x < out.width; x++) {
                        int in = x >= p.dst_x && x < p.dst_x + p.dst_w && y >= p.dst_y &&
                                 y < p.dst_y + p.dst_h;
                        static const uint8_t black[3];
                        const uint8_t *want =
                            in ? full + ((size_t)(p.win_y + y - p.dst_y) * p.rs_w + p.win_x + x -
                                         p.dst_x) * ch
                               : black;
                        bad += memcmp(px(&out, x, y), want, ch) != 0;
                    }
                ck_assert_msg(bad == 0, "geometry %zu filter %s ch %u: %zu pixels differ", gi,
                              fmt_filter_name((fmt_filter)f), ch, bad);
                free(full);
                free(out.pixels);
            }
        }
        free(src.pixels);
    }
    fmt_rs_scratch_free(rs);
    fmt_resizer_free(r);
}
END_TEST

/* 2x reduction of an image made of 2x2 blocks with Pillow's box filter (support 0.5, stretched
 * to 1 by the reduction: exactly the two source pixels of each block per axis, weight 1/2
 * each) gives back the block colours exactly, for any colours. */
START_TEST(test_resize_blocks_2x)
{
    fmt_resizer *r = resizer_new();
    const uint32_t bw = 40, bh = 30;
    fmt_geom g = geom_size(bw, bh, FMT_FIT_STRETCH);
    g.filter = FMT_FILTER_BOX;
    for (uint32_t ch = 1; ch <= 3; ch += 2) {
        fmt_image src = img_new(2 * bw, 2 * bh, ch);
        uint8_t *blocks = malloc((size_t)bw * bh * ch);
        ck_assert_ptr_nonnull(blocks);
        uint32_t seed = 5 + ch;
        for (size_t i = 0; i < (size_t)bw * bh * ch; i++)
            blocks[i] = (uint8_t)(rng_next(&seed) >> 24);
        for (uint32_t y = 0; y < 2 * bh; y++)
            for (uint32_t x = 0; x < 2 * bw; x++)
                memcpy(px(&src, x, y), blocks + ((size_t)(y / 2) * bw + x / 2) * ch, ch);
        fmt_image out = resize_with(r, &src, &g, NULL);
        ck_assert_mem_eq(out.pixels, blocks, (size_t)bw * bh * ch);
        free(out.pixels);
        free(blocks);
        free(src.pixels);
    }
    fmt_resizer_free(r);
}
END_TEST

/* A single source pixel fills the whole output, whatever the geometry and filter. */
START_TEST(test_resize_one_pixel_source)
{
    fmt_resizer *r = resizer_new();
    fmt_image src = img_noise(1, 1, 3, 3);
    static const fmt_geom geoms[] = {SIZE(224, 224, FMT_FIT_CROP), SHORTC(9, 0, 4, 3),
                                     SIZE(5, 300, FMT_FIT_STRETCH)};
    for (size_t gi = 0; gi < 3; gi++) {
        for (int f = 0; f < FMT_FILTER_COUNT; f++) {
            fmt_geom g = geoms[gi];
            g.filter = (fmt_filter)f;
            fmt_image out = resize_with(r, &src, &g, NULL);
            uint32_t bad = 0;
            for (uint32_t i = 0; i < out.width * out.height; i++)
                bad += memcmp(out.pixels + 3 * i, src.pixels, 3) != 0;
            ck_assert_uint_eq(bad, 0);
            free(out.pixels);
        }
    }
    free(src.pixels);
    fmt_resizer_free(r);
}
END_TEST

/* Same input, same bytes: twice on one resizer (with other geometries in between, so
 * remembered tables are evicted and rebuilt), and on two threads at once with a resizer each. */
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
    fmt_image src = img_noise(640, 480, 3, 1234);
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

/* No CPU-dependent results: the same resizes with the plain C path (the switch off:
 * fmt_simd_set(0), what SHARDC_RESAMPLE=plain asks of the programs) give the same bytes as
 * with the vector code this CPU offers. */
START_TEST(test_resize_same_without_simd)
{
    static const fmt_geom geoms[] = {
        SIZE(224, 224, FMT_FIT_CROP), SHORT(256, 0), SIZE(224, 224, FMT_FIT_PAD),
        SIZE(61, 700, FMT_FIT_STRETCH), SIZE(20, 20, FMT_FIT_CROP), SHORTC(300, 0, 250, 250),
    };
    size_t ng = sizeof geoms / sizeof geoms[0];
    for (uint32_t ch = 1; ch <= 3; ch += 2) {
        fmt_image src = img_noise(640, 480, ch, 4321 + ch);
        uint64_t simd[8] = {0}, plain[8] = {0};
        for (int pass = 0; pass < 2; pass++) {
            fmt_simd_set(!pass);
            fmt_resizer *r;
            ck_assert_int_eq(fmt_resizer_create(&r), 0);
            ck_assert_int_eq(fmt_rs_scratch_path(fmt_resizer_scratch(r)) == FMT_RS_PATH_PLAIN,
                             pass);
            for (size_t k = 0; k < ng; k++) {
                for (int f = 0; f < FMT_FILTER_COUNT; f++) {
                    fmt_geom g = geoms[k];
                    g.filter = (fmt_filter)f;
                    fmt_image out = resize_with(r, &src, &g, NULL);
                    uint64_t h = fmt_hash64(out.pixels, (size_t)out.width * out.height * ch);
                    (pass == 0 ? simd : plain)[k] ^= h * (uint64_t)(2 * f + 1);
                    free(out.pixels);
                }
            }
            fmt_resizer_free(r);
        }
        fmt_simd_set(1);
        for (size_t k = 0; k < ng; k++)
            ck_assert_msg(simd[k] == plain[k], "geometry %zu, %u channels: SIMD and C differ", k,
                          ch);
        free(src.pixels);
    }
}
END_TEST

/* A large source and a small one through the same resizer (its scratch grows, then is
 * reused): the same source gives the same bytes again. */
START_TEST(test_resize_large_source)
{
    fmt_resizer *r = resizer_new();
    fmt_image src = img_noise(4000, 3000, 3, 77);
    fmt_image small = img_noise(50, 40, 3, 78);
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
    fmt_resizer *r = resizer_new();
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
    bad.box.x1 = 101;   /* beyond the 100-pixel source */
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

int main(void)
{
    return tu_run(TU_SUITE("geometry", "core", 120, test_plan_table, test_plan_invariants,
                           test_plan_errors, test_plan_decoded, test_min_decode_cases,
                           test_min_decode_never_upscales, test_resize_constant,
                           test_resize_pad_borders, test_resize_identity_copies,
                           test_resize_gradient_monotonic, test_resize_is_resample_then_crop,
                           test_resize_blocks_2x, test_resize_one_pixel_source,
                           test_resize_deterministic, test_resize_same_without_simd,
                           test_resize_large_source, test_resize_errors));
}
