/* test_roi.c - region-of-interest decoding: a JPEG decoded only where the build's geometry reads
 * it (fmt_resize_source_rect, fmt_decode_opts.roi_*) gives, through shc_render_mem_into, the same
 * bytes as the full decode, over photo-like images of many sizes, every JPEG layout the decoder
 * meets (4:2:0, 4:2:2, 4:4:4, progressive, restart markers, gray) and every kind of geometry
 * (the build's --size crop and pad, --short-side with --crop and --max-side, every filter); the
 * region is really smaller than the image in most of those cases; and a damaged file fails or
 * warns exactly as it does with the full decode. */
#include "codec.h"
#include "geometry.h"
#include "image.h"
#include "mksample.h"
#include "render.h"
#include "testutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    fmt_geom g;
} geom_case;

static const geom_case g_geoms[] = {
    {"size 224x224 (crop)", {.mode = FMT_GEOM_SIZE, .fit = FMT_FIT_CROP, .width = 224,
                             .height = 224}},
    {"size 96x64 (crop)", {.mode = FMT_GEOM_SIZE, .fit = FMT_FIT_CROP, .width = 96,
                           .height = 64}},
    {"size 100x90 (pad)", {.mode = FMT_GEOM_SIZE, .fit = FMT_FIT_PAD, .width = 100,
                           .height = 90}},
    {"short 256 crop 224", {.mode = FMT_GEOM_SHORT_SIDE, .short_side = 256, .crop_w = 224,
                            .crop_h = 224}},
    {"short 100 bicubic", {.mode = FMT_GEOM_SHORT_SIDE, .short_side = 100,
                           .filter = FMT_FILTER_BICUBIC}},
    {"short 96 max 120 crop 100x90 lanczos",
     {.mode = FMT_GEOM_SHORT_SIDE, .short_side = 96, .max_side = 120, .crop_w = 100,
      .crop_h = 90, .filter = FMT_FILTER_LANCZOS}},
    {"short 160 crop 64x150 hamming", {.mode = FMT_GEOM_SHORT_SIDE, .short_side = 160,
                                       .crop_w = 64, .crop_h = 150,
                                       .filter = FMT_FILTER_HAMMING}},
    {"keep crop 50x70", {.mode = FMT_GEOM_KEEP, .crop_w = 50, .crop_h = 70}},
    {"short 300 crop 200 box", {.mode = FMT_GEOM_SHORT_SIDE, .short_side = 300, .crop_w = 200,
                                .crop_h = 200, .filter = FMT_FILTER_BOX}},
    {"size 128x128 nearest", {.mode = FMT_GEOM_SIZE, .fit = FMT_FIT_CROP, .width = 128,
                              .height = 128, .filter = FMT_FILTER_NEAREST}},
};

typedef struct {
    const char *name;
    fmt_jpeg_opts j;
    int gray;
} layout_case;

static const layout_case g_layouts[] = {
    {"4:2:0", {.quality = 90, .subsampling = 420}, 0},
    {"4:2:2", {.quality = 85, .subsampling = 422}, 0},
    {"4:4:4", {.quality = 95, .subsampling = 444}, 0},
    {"progressive 4:2:0", {.quality = 90, .subsampling = 420, .progressive = 1}, 0},
    {"restart markers 4:2:0", {.quality = 75, .subsampling = 420, .restart_rows = 2}, 0},
    {"gray", {.quality = 90}, 1},
};

/* photo-like sizes: odd and even, landscape and portrait, MCU-aligned and not */
static const uint32_t g_sizes[][2] = {
    {640, 480}, {480, 640}, {500, 375}, {333, 500}, {257, 193}, {1023, 511}, {97, 301},
    {320, 320}, {641, 427}, {150, 449},
};

static uint8_t *encode(uint32_t w, uint32_t h, unsigned k, const layout_case *l, size_t *len)
{
    fmt_image im = {0};
    ck_assert_int_eq(mks_render_photo(k % 4, k, 11, w, h, &im), 0);
    if (l->gray)
        fmt_image_rgb_to_gray_inplace(&im);
    uint8_t *buf = NULL;
    ck_assert_int_eq(fmt_jpeg_encode(&im, &l->j, &buf, len), 0);
    fmt_image_free(&im);
    return buf;
}

/* Render file with o, the full decode when full is set; returns the rc, output in *out. */
static int render(shc_render_opts o, int full, shc_render_scratch *s, const uint8_t *file,
                  size_t len, fmt_image *out, fmt_msg *msg)
{
    o.full_decode = full;
    return shc_render_mem_into(&o, file, len, 0, s, out, NULL, msg);
}

START_TEST(test_roi_equals_full_decode)
{
    shc_render_scratch *s;
    ck_assert_int_eq(shc_render_scratch_create(NULL, &s), 0);
    fmt_resizer *rz;
    ck_assert_int_eq(fmt_resizer_create(&rz), 0);
    size_t nsz = sizeof g_sizes / sizeof *g_sizes, cases = 0, smaller = 0;
    for (size_t l = 0; l < sizeof g_layouts / sizeof *g_layouts; l++) {
        for (size_t z = 0; z < nsz; z++) {
            uint32_t w = g_sizes[z][0], h = g_sizes[z][1];
            size_t len;
            uint8_t *file = encode(w, h, (unsigned)(l * nsz + z), &g_layouts[l], &len);
            for (size_t g = 0; g < sizeof g_geoms / sizeof *g_geoms; g++) {
                shc_render_opts o = {.geom = g_geoms[g].g,
                                     .channels = g_layouts[l].gray ? 1 : 3,
                                     .max_file_bytes = UINT64_MAX};
                fmt_image a = {0}, b = {0};
                fmt_msg ma = {{0}}, mb = {{0}};
                int ra = render(o, 1, s, file, len, &a, &ma);
                int rb = render(o, 0, s, file, len, &b, &mb);
                ck_assert_msg(ra == 0 && rb == 0, "%s, %ux%u, %s: %d %d (%s / %s)",
                              g_layouts[l].name, w, h, g_geoms[g].name, ra, rb, ma.text,
                              mb.text);
                ck_assert_uint_eq(a.width, b.width);
                ck_assert_uint_eq(a.height, b.height);
                ck_assert_msg(memcmp(a.pixels, b.pixels, (size_t)a.width * a.height *
                                                             a.channels) == 0,
                              "%s, %ux%u, %s: the region decode differs", g_layouts[l].name,
                              w, h, g_geoms[g].name);
                fmt_geom_plan p;
                uint32_t rect[4];
                ck_assert_int_eq(fmt_geom_plan_for(&o.geom, w, h, &p), 0);
                fmt_resize_source_rect(rz, &p, w, h, rect);
                ck_assert(rect[0] + rect[2] <= w && rect[1] + rect[3] <= h);
                smaller += rect[2] < w || rect[3] < h;
                cases++;
                fmt_image_free(&a);
                fmt_image_free(&b);
            }
            free(file);
        }
    }
    /* not a vacuous check: most geometries crop, so most regions are smaller */
    ck_assert_msg(smaller * 2 > cases, "only %zu of %zu regions smaller than the image",
                  smaller, cases);
    fmt_resizer_free(rz);
    shc_render_scratch_free(s);
}
END_TEST

/* The region of a centre crop is the crop plus the filter's support, and shrinks to the crop
 * for an unscaled one (the documented arithmetic, on a case worked by hand). */
START_TEST(test_source_rect_arithmetic)
{
    fmt_resizer *rz;
    ck_assert_int_eq(fmt_resizer_create(&rz), 0);
    fmt_geom g = {.mode = FMT_GEOM_KEEP, .crop_w = 50, .crop_h = 70};
    fmt_geom_plan p;
    uint32_t r[4];
    ck_assert_int_eq(fmt_geom_plan_for(&g, 200, 100, &p), 0);
    fmt_resize_source_rect(rz, &p, 200, 100, r);
    /* CenterCrop: left round((200 - 50) / 2) = 75, top round((100 - 70) / 2) = 15 */
    ck_assert_uint_eq(r[0], 75);
    ck_assert_uint_eq(r[1], 15);
    ck_assert_uint_eq(r[2], 50);
    ck_assert_uint_eq(r[3], 70);
    /* 400x200 -> short side 100 (200x100, a 2x bilinear reduction: support 2 source pixels
     * each side of a centre) then crop 100x100 at x 50: output x 50 has centre 101, taps
     * 99 .. 102; output x 149 centre 299, taps 297 .. 300 */
    fmt_geom g2 = {.mode = FMT_GEOM_SHORT_SIDE, .short_side = 100, .crop_w = 100,
                   .crop_h = 100};
    ck_assert_int_eq(fmt_geom_plan_for(&g2, 400, 200, &p), 0);
    fmt_resize_source_rect(rz, &p, 400, 200, r);
    ck_assert_uint_eq(r[0], 99);
    ck_assert_uint_eq(r[2], 302 - 99 - 1);
    ck_assert_uint_eq(r[1], 0);
    ck_assert_uint_eq(r[3], 200);
    fmt_resizer_free(rz);
}
END_TEST

/* Damage anywhere in the file (below the region too) fails or warns as with the full decode. */
START_TEST(test_roi_damage_same_as_full)
{
    shc_render_scratch *s;
    ck_assert_int_eq(shc_render_scratch_create(NULL, &s), 0);
    size_t len;
    uint8_t *file = encode(640, 480, 3, &g_layouts[0], &len);
    shc_render_opts o = {.geom = g_geoms[6].g, .channels = 3, .max_file_bytes = UINT64_MAX};
    /* truncations at several points, and bytes overwritten inside the scan */
    int noticed = 0;
    for (int k = 0; k < 12; k++) {
        uint8_t *bad = malloc(len);
        ck_assert_ptr_nonnull(bad);
        memcpy(bad, file, len);
        size_t n = len;
        if (k < 6) {
            n = len - 2 - (size_t)k * (len / 8);
        } else {
            for (size_t i = 0; i < 24; i++)
                bad[len / 2 + (size_t)(k - 6) * (len / 14) + i] ^= 0x5a;
        }
        fmt_image a = {0}, b = {0};
        fmt_msg ma = {{0}}, mb = {{0}};
        int ra = render(o, 1, s, bad, n, &a, &ma);
        int rb = render(o, 0, s, bad, n, &b, &mb);
        ck_assert_msg(ra == rb, "damage %d: full decode %d (%s), region %d (%s)", k, ra,
                      ma.text, rb, mb.text);
        ck_assert_str_eq(ma.text, mb.text);
        noticed += ra != 0 || ma.text[0] != '\0';
        if (ra == 0)
            ck_assert_mem_eq(a.pixels, b.pixels, (size_t)a.width * a.height * a.channels);
        fmt_image_free(&a);
        fmt_image_free(&b);
        free(bad);
    }
    ck_assert_int_ge(noticed, 6);    /* the damage is seen (a reject or a warning) */
    free(file);
    shc_render_scratch_free(s);
}
END_TEST

int main(void)
{
    return tu_run(TU_SUITE("roi", "core", 300, test_roi_equals_full_decode,
                           test_source_rect_arithmetic, test_roi_damage_same_as_full));
}
