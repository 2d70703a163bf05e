/* test_segm_warp.c - instance masks and keypoints through the read-time geometry (reader/segm_read.h):
 * torch's nearest index against values worked out by hand (float32 products, the 2x shift),
 * and small masks moved by a zero pad with a crop, a RandomResizedCrop, the scale ops (a dense
 * multi-scale image, a letterbox) and the flip, each against its expected output written out
 * pixel by pixel; keypoints through the same maps, invisible ones and those leaving the image
 * zeroed, the flip's left/right swap; a label map's padding is its ignore index; the warps: a
 * quarter turn and a translation of a frame at the top left of a wider plane (Pillow's NEAREST,
 * the fill, the plane outside the frame untouched), keypoints through their forward maps. */
#include "segm_read.h"
#include "testutil.h"

#include <string.h>

/* a 5 x 4 stored mask with distinct pixels in column and row: value 10 y + x + 1 (not 0/1,
 * so that a wrong source pixel shows) */
static void stored(uint8_t m[20])
{
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 5; x++)
            m[y * 5 + x] = (uint8_t)(10 * y + x + 1);
}

START_TEST(test_nearest)
{
    /* in 5 -> out 3: s = 5/3 in float32 = 1.66666663; floor(0), floor(1.67), floor(3.33) */
    const uint32_t a[3] = {0, 1, 3};
    for (uint32_t i = 0; i < 3; i++)
        ck_assert_uint_eq(fmt_target_nearest(i, 5, 3), a[i]);
    /* in 3 -> out 7: s = 0.428571; 0 .. 6 -> 0 0 0 1 1 2 2 */
    const uint32_t b[7] = {0, 0, 0, 1, 1, 2, 2};
    for (uint32_t i = 0; i < 7; i++)
        ck_assert_uint_eq(fmt_target_nearest(i, 3, 7), b[i]);
    /* in 4 -> out 8: the shift; in == out: identity; never past in - 1 */
    for (uint32_t i = 0; i < 8; i++)
        ck_assert_uint_eq(fmt_target_nearest(i, 4, 8), i / 2);
    ck_assert_uint_eq(fmt_target_nearest(6, 9, 9), 6);
    /* in 7 -> out 3: s = 2.3333333; 2 * s = 4.6666665 -> 4 */
    ck_assert_uint_eq(fmt_target_nearest(2, 7, 3), 4);
    /* float32, not double: in 49 -> out 7 is s = 7 exactly; in 10 -> out 3, i 2 is
     * 2 * 3.3333333 = 6.6666665 -> 6 */
    ck_assert_uint_eq(fmt_target_nearest(6, 49, 7), 42);
    ck_assert_uint_eq(fmt_target_nearest(2, 10, 3), 6);
}
END_TEST

static void move(const shr_box_geom *g, const shr_params *p, int dense, uint8_t *out,
                 uint32_t *ow, uint32_t *oh)
{
    uint8_t m[20];
    int32_t xs[64], ys[64];
    stored(m);
    shr_segm_size(g, dense, p, ow, oh);
    shr_segm_tables(g, p, *ow, *oh, xs, ys);
    shr_segm_warp(m, 5, xs, ys, *ow, *oh, out);
}

START_TEST(test_pad_crop_flip)
{
    /* 7 x 3 output: columns 0..4 placed at (7 - 5) / 2 = 1, rows 1..3 kept (a crop) */
    shr_box_geom g = {.width = 7, .height = 3};
    shr_params p = {.x = 0, .y = 1, .w = 5, .h = 3, .src_w = 5, .src_h = 4};
    uint8_t out[21];
    uint32_t ow, oh;
    move(&g, &p, 0, out, &ow, &oh);
    const uint8_t want[21] = {0, 11, 12, 13, 14, 15, 0,
                              0, 21, 22, 23, 24, 25, 0,
                              0, 31, 32, 33, 34, 35, 0};
    ck_assert_uint_eq(ow, 7);
    ck_assert_uint_eq(oh, 3);
    ck_assert_mem_eq(out, want, 21);
    p.flip = 1;
    move(&g, &p, 0, out, &ow, &oh);
    const uint8_t flipped[21] = {0, 15, 14, 13, 12, 11, 0,
                                 0, 25, 24, 23, 22, 21, 0,
                                 0, 35, 34, 33, 32, 31, 0};
    ck_assert_mem_eq(out, flipped, 21);
}
END_TEST

START_TEST(test_label_map_pads_with_ignore)
{
    /* the pad and crop above on a label map: 0 is a label there, the padding 250 */
    shr_box_geom g = {.width = 7, .height = 5};
    shr_params p = {.x = 0, .y = 1, .w = 5, .h = 3, .src_w = 5, .src_h = 4, .flip = 1};
    uint8_t m[20], out[35];
    int32_t xs[7], ys[5];
    stored(m);
    m[5] = 0;                   /* stored (0, 1): a label 0, kept as 0 */
    shr_segm_tables(&g, &p, 7, 5, xs, ys);
    shr_segm_warp_map(m, 5, xs, ys, 7, 5, 250, out);
    const uint8_t want[35] = {250, 250, 250, 250, 250, 250, 250,
                              250, 15, 14, 13, 12, 0, 250,
                              250, 25, 24, 23, 22, 21, 250,
                              250, 35, 34, 33, 32, 31, 250,
                              250, 250, 250, 250, 250, 250, 250};
    ck_assert_mem_eq(out, want, 35);
}
END_TEST

START_TEST(test_rrc)
{
    /* the box (1, 0) 3 x 2 resized to 6 x 4 (the shift: 2x on both axes), flipped */
    shr_box_geom g = {.width = 6, .height = 4, .rrc = 1};
    shr_params p = {.x = 1, .y = 0, .w = 3, .h = 2, .src_w = 5, .src_h = 4, .flip = 1};
    uint8_t out[24];
    uint32_t ow, oh;
    move(&g, &p, 0, out, &ow, &oh);
    const uint8_t want[24] = {4, 4, 3, 3, 2, 2,
                              4, 4, 3, 3, 2, 2,
                              14, 14, 13, 13, 12, 12,
                              14, 14, 13, 13, 12, 12};
    ck_assert_mem_eq(out, want, 24);
    /* 3 x 2 -> 2 x 3: columns s = 1.5: 0, 1; rows s = 0.6666667: 0, 0, 1 */
    g.width = 2;
    g.height = 3;
    p.flip = 0;
    move(&g, &p, 0, out, &ow, &oh);
    const uint8_t small[6] = {2, 3, 2, 3, 12, 13};
    ck_assert_mem_eq(out, small, 6);
}
END_TEST

START_TEST(test_scale_ops)
{
    /* a multi-scale image 3 x 2 (5 x 4 resized: columns s = 1.6666666: 0 1 3; rows s = 2: 0 2)
     * dense: the masks are 3 x 2; flipped within the image */
    shr_box_geom g = {.width = 8, .height = 8, .scale = SHR_SCALE_MULTI};
    shr_params p = {.x = 0, .y = 0, .w = 5, .h = 4, .src_w = 5, .src_h = 4, .flip = 1,
                    .scale_w = 3, .scale_h = 2, .image_w = 3, .image_h = 2};
    uint8_t out[64];
    uint32_t ow, oh;
    move(&g, &p, 1, out, &ow, &oh);
    ck_assert_uint_eq(ow, 3);
    ck_assert_uint_eq(oh, 2);
    const uint8_t dense[6] = {4, 2, 1, 24, 22, 21};
    ck_assert_mem_eq(out, dense, 6);
    /* on the 8 x 8 canvas: the same at the top left, zeros around it */
    move(&g, &p, 0, out, &ow, &oh);
    ck_assert_uint_eq(ow, 8);
    uint8_t canvas[64] = {0};
    memcpy(canvas, dense, 3);
    memcpy(canvas + 8, dense + 3, 3);
    ck_assert_mem_eq(out, canvas, 64);
    /* a letterbox: 5 x 4 -> 2 x 2 (s 2.5: columns 0 2; rows 2: 0 2) placed at (1, 0) of a
     * 4 x 2 output; the flip mirrors the whole output */
    shr_box_geom lb = {.width = 4, .height = 2, .scale = SHR_SCALE_LETTERBOX};
    shr_params q = {.x = 0, .y = 0, .w = 5, .h = 4, .src_w = 5, .src_h = 4, .flip = 1,
                    .scale_w = 2, .scale_h = 2, .pad_x = 1, .image_w = 2, .image_h = 2};
    move(&lb, &q, 1, out, &ow, &oh);
    ck_assert_uint_eq(ow, 4);
    const uint8_t letter[8] = {0, 3, 1, 0, 0, 23, 21, 0};
    ck_assert_mem_eq(out, letter, 8);
}
END_TEST

/* shr_segm_keypoints of the three keypoints kp (swap: the flip's pairs, or NULL) under g and p
 * give want. */
static void keypoints_are(const shr_box_geom *g, const shr_params *p, const float kp[9],
                          const uint32_t *swap, const float want[9])
{
    float out[9];
    shr_segm_keypoints(g, p, kp, 3, swap, out);
    ck_assert_mem_eq(out, want, 9 * sizeof *out);
}

START_TEST(test_keypoints)
{
    /* a pad: x' = x - 0 + (7 - 5) / 2 = x + 1; y' = y - 1 (a crop of the first row), the image
     * [0, 7] x [0, 3]; flipped: x' = 7 - x', keypoints 0 and 1 swapped */
    shr_box_geom g = {.width = 7, .height = 3};
    shr_params p = {.x = 0, .y = 1, .w = 5, .h = 3, .src_w = 5, .src_h = 4};
    const float kp[9] = {1.5f, 2.25f, 2, 4.0f, 0.5f, 1, 3.0f, 3.0f, 0};
    const uint32_t swap[3] = {1, 0, 2};
    /* the second leaves the image (y' = -0.5), the third is stored invisible */
    keypoints_are(&g, &p, kp, swap, (const float[9]){2.5f, 1.25f, 2, 0, 0, 0, 0, 0, 0});
    p.flip = 1;
    keypoints_are(&g, &p, kp, swap, (const float[9]){0, 0, 0, 4.5f, 1.25f, 2, 0, 0, 0});
    /* RandomResizedCrop: (x - 1) * 6 / 3, y * 4 / 2: the first lands at y' = 4.5, below the
     * image; the second at x' = 6, its right edge (closed: kept) */
    shr_box_geom r = {.width = 6, .height = 4, .rrc = 1};
    shr_params q = {.x = 1, .y = 0, .w = 3, .h = 2, .src_w = 5, .src_h = 4};
    keypoints_are(&r, &q, kp, NULL, (const float[9]){0, 0, 0, 6.0f, 1.0f, 1, 0, 0, 0});
}
END_TEST

START_TEST(test_warps)
{
    /* a 4 x 4 frame at the top left of a 6 x 4 plane, value 10 y + x + 1 */
    uint8_t plane[24], scratch[16];
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 6; x++)
            plane[y * 6 + x] = (uint8_t)(10 * y + x + 1);
    shr_params p = {.x = 0, .y = 0, .w = 4, .h = 4, .src_w = 4, .src_h = 4};
    ck_assert_int_eq(shr_segm_has_warps(&p), 0);
    /* Image.rotate(90), counter-clockwise: output (x, y) is input (3 - y, x) */
    p.rotate = 1;
    p.rotate_angle = 90.0f;
    ck_assert_int_eq(shr_segm_has_warps(&p), 1);
    ck_assert_int_eq(shr_segm_warp_plane(&p, plane, 6, 4, 4, 0, scratch), 1);
    const uint8_t turned[24] = {
        4, 14, 24, 34, 5, 6,
        3, 13, 23, 33, 15, 16,
        2, 12, 22, 32, 25, 26,
        1, 11, 21, 31, 35, 36,
    };
    ck_assert_mem_eq(plane, turned, sizeof turned);
    /* F.affine(translate=[1, 0]) about the centre: output column x takes column x - 1, column
     * 0 the fill */
    shr_params q = {.x = 0, .y = 0, .w = 4, .h = 4, .src_w = 4, .src_h = 4, .affine = 1,
                    .affine_scale = 1.0f, .affine_tx = 1};
    ck_assert_int_eq(shr_segm_warp_plane(&q, plane, 6, 4, 4, 250, scratch), 1);
    const uint8_t moved[24] = {
        250, 4, 14, 24, 5, 6,
        250, 3, 13, 23, 15, 16,
        250, 2, 12, 22, 25, 26,
        250, 1, 11, 21, 35, 36,
    };
    ck_assert_mem_eq(plane, moved, sizeof moved);
    /* a mask pushed out entirely is empty */
    uint8_t one[16] = {0};
    one[3] = 1;
    ck_assert_int_eq(shr_segm_warp_plane(&q, one, 4, 4, 4, 0, scratch), 0);
    /* keypoints: the turn maps (x, y) to (y, 4 - x), the translation to (x + 1, y) */
    shr_box_geom g = {.width = 4, .height = 4};
    const float kp[9] = {1.0f, 0.5f, 2, 0.5f, 3.5f, 1, 2.0f, 2.0f, 0};
    keypoints_are(&g, &p, kp, NULL, (const float[9]){0.5f, 3.0f, 2, 3.5f, 3.5f, 1, 0, 0, 0});
    keypoints_are(&g, &q, kp, NULL, (const float[9]){2.0f, 0.5f, 2, 1.5f, 3.5f, 1, 0, 0, 0});
    /* pushed by 3: the first lands on the frame's right edge (closed: kept), the second at
     * 3.5; pushed by 4, both leave it */
    q.affine_tx = 3;
    keypoints_are(&g, &q, kp, NULL, (const float[9]){4.0f, 0.5f, 2, 3.5f, 3.5f, 1, 0, 0, 0});
    q.affine_tx = 4;
    keypoints_are(&g, &q, kp, NULL, (const float[9]){0});
}
END_TEST

/* ---- instance masks moved from their runs (shr_segm_mask) against the decoded plane moved by
 * shr_segm_warp, byte for byte, over seeded random masks, stored sizes, geometries and
 * tables ---- */

static uint32_t rnd_state;

static uint32_t rnd(uint32_t n)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 17;
    rnd_state ^= rnd_state << 5;
    return n ? rnd_state % n : 0;
}

/* a random sw x sh mask: empty, full, one pixel, rectangles or noise */
static void random_mask(uint8_t *m, uint32_t sw, uint32_t sh)
{
    size_t n = (size_t)sw * sh;
    uint32_t kind = rnd(6);
    memset(m, kind == 1, n);
    if (kind == 2)
        m[rnd((uint32_t)n)] = 1;
    for (uint32_t r = 0; kind == 3 && r < 1 + rnd(5); r++) {
        uint32_t x0 = rnd(sw), y0 = rnd(sh), x1 = x0 + 1 + rnd(sw - x0), y1 = y0 + 1 + rnd(sh - y0);
        for (uint32_t y = y0; y < y1; y++)
            memset(m + (size_t)y * sw + x0, 1, x1 - x0);
    }
    for (size_t i = 0; kind >= 4 && i < n; i++)
        m[i] = rnd(kind == 4 ? 2 : 9) == 0;
}

/* tables for ow x oh from a stored sw x sh sample: shr_segm_tables of a random geometry (a
 * RandomResizedCrop box, a crop or pad, a letterbox or multi-scale image; flipped or not), or
 * tables made up (rising or falling with padding at the ends, or any column and row) */
static void random_tables(uint32_t sw, uint32_t sh, int32_t *xs, int32_t *ys, uint32_t *ow,
                          uint32_t *oh)
{
    uint32_t kind = rnd(6);
    *ow = 1 + rnd(rnd(4) ? 80 : 3);
    *oh = 1 + rnd(rnd(4) ? 80 : 3);
    if (kind <= 2) {
        shr_box_geom g = {.width = *ow, .height = *oh, .rrc = kind == 0};
        shr_params p = {.src_w = sw, .src_h = sh, .flip = (int)rnd(2)};
        p.x = rnd(sw);
        p.y = rnd(sh);
        p.w = 1 + rnd(sw - p.x);
        p.h = 1 + rnd(sh - p.y);
        if (kind == 1) {        /* crop or pad: the window as wide as the output where cropped */
            p.w = p.w < *ow ? p.w : *ow;
            p.h = p.h < *oh ? p.h : *oh;
        }
        if (kind == 2) {
            g.scale = rnd(2) ? SHR_SCALE_LETTERBOX : SHR_SCALE_MULTI;
            p.x = p.y = 0;
            p.w = sw;
            p.h = sh;
            p.scale_w = 1 + rnd(70);
            p.scale_h = 1 + rnd(70);
            p.crop_x = rnd(p.scale_w);
            p.crop_y = rnd(p.scale_h);
            p.image_w = 1 + rnd(p.scale_w - p.crop_x);
            p.image_h = 1 + rnd(p.scale_h - p.crop_y);
            p.pad_x = rnd(4);
            p.pad_y = rnd(4);
            g.width = p.pad_x + p.image_w + rnd(4);
            g.height = p.pad_y + p.image_h + rnd(4);
        }
        shr_segm_size(&g, (int)rnd(2), &p, ow, oh);
        shr_segm_tables(&g, &p, *ow, *oh, xs, ys);
        return;
    }
    int32_t *t[2] = {xs, ys};
    uint32_t n[2] = {*ow, *oh}, s[2] = {sw, sh};
    for (int a = 0; a < 2; a++) {
        if (kind == 5) {        /* anything: steps both ways, rows read again, padding inside */
            for (uint32_t i = 0; i < n[a]; i++)
                t[a][i] = rnd(5) == 0 ? -1 : (int32_t)rnd(s[a]);
            continue;
        }
        uint32_t lead = rnd(3), tail = rnd(3), v = rnd(s[a]);
        int down = kind == 4 && a == 0;
        for (uint32_t i = 0; i < n[a]; i++) {
            int pad = i < lead || i + tail >= n[a];
            t[a][down ? n[a] - 1 - i : i] = pad ? -1 : (int32_t)v;
            if (!pad && rnd(2) && v + 1 < s[a])
                v += 1 + rnd(s[a] - v - 1 < 3 ? s[a] - v - 1 : 3);
        }
    }
}

START_TEST(test_mask_runs)
{
    enum { SW = 64, SH = 48, O = 80 };
    static uint8_t m[SW * SH], plane[SW * SH], want[O * O + 1], got[O * O + 1];
    static uint8_t runs[2 * SW * SH + 8];
    static uint32_t seg[3 * O], iv[2 * O];
    int32_t xs[O], ys[O];
    rnd_state = 2463534242u;
    for (int c = 0; c < 4000; c++) {
        uint32_t sw = 1 + rnd(c % 3 ? SW : 4), sh = 1 + rnd(c % 5 ? SH : 4), ow, oh;
        random_mask(m, sw, sh);
        uint32_t off[2] = {0, (uint32_t)fmt_mask_encode(m, (size_t)sw * sh, runs)};
        fmt_target t = {.count = 1, .ext = FMT_TARGET_EXT_MASKS, .map_width = sw,
                        .map_height = sh, .mask_offsets = off, .mask_runs = runs};
        random_tables(sw, sh, xs, ys, &ow, &oh);
        ck_assert_int_eq(fmt_target_mask(&t, 0, plane), 0);
        ck_assert_mem_eq(plane, m, (size_t)sw * sh);   /* the reference is the mask itself */
        int any = shr_segm_warp(plane, sw, xs, ys, ow, oh, want);
        memset(got, 0xa5, sizeof got);
        uint32_t nseg = shr_segm_cols(xs, ow, seg);
        ck_assert_uint_le(nseg, ow);
        int r = shr_segm_mask(&t, 0, xs, ys, ow, oh, seg, nseg, iv, got);
        if (r != any || memcmp(got, want, (size_t)ow * oh) != 0)
            ck_abort_msg("case %d: %ux%u -> %ux%u: shr_segm_mask differs (any %d, want %d)", c,
                         sw, sh, ow, oh, r, any);
        ck_assert_uint_eq(got[(size_t)ow * oh], 0xa5);      /* nothing written past the plane */
    }
    uint32_t off[2] = {0, 0};
    fmt_target none = {.count = 1, .map_width = 1, .map_height = 1, .mask_offsets = off,
                       .mask_runs = runs};
    ck_assert_int_eq(shr_segm_mask(&none, 0, xs, ys, 1, 1, seg, 0, iv, got), -1);
}
END_TEST

START_TEST(test_map_runs)
{
    /* label maps alike (shr_segm_map against fmt_target_label_map + shr_segm_warp_map): a few
     * labels in rectangles over a background, or noise of many, any fill */
    enum { SW = 64, SH = 48, O = 80 };
    static uint16_t m[SW * SH];
    static uint8_t plane[SW * SH], want[O * O + 1], got[O * O + 1];
    static uint8_t runs[5 * SW * SH + 8];
    static uint32_t seg[3 * O], iv[2 * O];
    int32_t xs[O], ys[O];
    rnd_state = 88172645u;
    for (int c = 0; c < 3000; c++) {
        uint32_t sw = 1 + rnd(c % 3 ? SW : 4), sh = 1 + rnd(c % 5 ? SH : 4), ow, oh, max;
        size_t n = (size_t)sw * sh;
        uint32_t labels = 1 + rnd(c % 4 ? 8 : 256);
        for (size_t k = 0; k < n; k++)
            m[k] = (uint16_t)(c % 2 ? rnd(labels) : 0);
        for (uint32_t r = 0; c % 2 == 0 && r < rnd(6); r++) {
            uint32_t x0 = rnd(sw), y0 = rnd(sh), x1 = x0 + 1 + rnd(sw - x0);
            uint32_t y1 = y0 + 1 + rnd(sh - y0), v = rnd(labels);
            for (uint32_t y = y0; y < y1; y++)
                for (uint32_t x = x0; x < x1; x++)
                    m[(size_t)y * sw + x] = (uint16_t)v;
        }
        fmt_target t = {.ext = FMT_TARGET_EXT_MAP, .map_width = sw, .map_height = sh,
                        .map_runs = runs};
        t.map_len = (uint32_t)fmt_map_encode(m, n, runs, &max);
        t.map_max = max;
        random_tables(sw, sh, xs, ys, &ow, &oh);
        uint8_t fill = (uint8_t)rnd(256);
        ck_assert_int_eq(fmt_target_label_map(&t, plane, 1), 0);
        size_t same = 0;                        /* the reference is the map itself */
        while (same < n && plane[same] == m[same])
            same++;
        ck_assert_uint_eq(same, n);
        shr_segm_warp_map(plane, sw, xs, ys, ow, oh, fill, want);
        memset(got, 0xa5, sizeof got);
        int r = shr_segm_map(&t, xs, ys, ow, oh, seg, shr_segm_cols(xs, ow, seg), iv, fill, got);
        if (r != 0 || memcmp(got, want, (size_t)ow * oh) != 0)
            ck_abort_msg("case %d: %ux%u -> %ux%u: shr_segm_map differs", c, sw, sh, ow, oh);
        ck_assert_uint_eq(got[(size_t)ow * oh], 0xa5);
    }
    /* a label above 255 is not a uint8 map */
    uint16_t big[2] = {3, 256};
    uint32_t max;
    fmt_target t = {.ext = FMT_TARGET_EXT_MAP, .map_width = 2, .map_height = 1,
                    .map_runs = runs};
    t.map_len = (uint32_t)fmt_map_encode(big, 2, runs, &max);
    t.map_max = max;
    xs[0] = 0;
    xs[1] = 1;
    ys[0] = 0;
    ck_assert_int_eq(shr_segm_map(&t, xs, ys, 2, 1, seg, 1, iv, 0, got), -1);
}
END_TEST

int main(void)
{
    return tu_run(TU_SUITE("segm_warp", "segm_warp", 0, test_nearest, test_pad_crop_flip,
                           test_label_map_pads_with_ignore, test_rrc, test_scale_ops,
                           test_keypoints, test_warps, test_mask_runs, test_map_runs));
}
