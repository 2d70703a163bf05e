/* The segmentation extension of the target record (formats/masks.c): masks, keypoints and a
 * label map round trip through encode and view byte for byte; every malformed part is refused
 * with a message; version 1 records stay as they were. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "target.h"
#include "testutil.h"

#define W 7
#define H 5

/* A record of two boxes with masks, 2 keypoints each and a label map; its bytes in *rec. */
static uint32_t sample_record(uint64_t *rec, size_t cap, uint8_t masks[2][W * H],
                              uint16_t map[W * H])
{
    static const float boxes[8] = {0, 0, 3, 2, 1, 1, 7, 5};
    static const int64_t labels[2] = {3, 9};
    static const float area[2] = {6, 24};
    static const uint8_t crowd[2] = {0, 1};
    static const float kps[12] = {1.5f, 0.5f, 2, 0, 0, 0, 6.25f, 4, 1, 7, 5, 2};
    for (int i = 0; i < W * H; i++) {
        masks[0][i] = (uint8_t)(i % W < 3 && i / W < 2);
        masks[1][i] = (uint8_t)(i % W >= 1 && i / W >= 1);
        map[i] = (uint16_t)(i < 10 ? 0 : i < 20 ? 300 : 255);
    }
    static uint8_t runs[2 * (2 * W * H + 8)], mruns[5 * W * H + 8];
    static uint32_t off[3];
    off[0] = 0;
    off[1] = (uint32_t)fmt_mask_encode(masks[0], W * H, runs);
    off[2] = off[1] + (uint32_t)fmt_mask_encode(masks[1], W * H, runs + off[1]);
    uint32_t max;
    uint32_t mlen = (uint32_t)fmt_map_encode(map, W * H, mruns, &max);
    ck_assert_uint_eq(max, 300);
    fmt_target t = {.count = 2, .image_id = 42, .orig_width = 14, .orig_height = 10,
                    .boxes = boxes, .labels = labels, .area = area, .iscrowd = crowd,
                    .ext = FMT_TARGET_EXT_MASKS | FMT_TARGET_EXT_KEYPOINTS | FMT_TARGET_EXT_MAP,
                    .num_keypoints = 2, .map_width = W, .map_height = H, .map_max = max,
                    .keypoints = kps, .mask_offsets = off, .mask_runs = runs, .map_runs = mruns,
                    .map_len = mlen};
    uint32_t len = fmt_target_record_size(&t);
    ck_assert_uint_gt(len, fmt_target_size(2));
    ck_assert_uint_eq(len % 8, 0);
    ck_assert_uint_eq(fmt_target_encode(&t, (uint8_t *)rec, cap), len);
    return len;
}

START_TEST(round_trip)
{
    uint64_t rec[256];
    uint8_t masks[2][W * H], got[W * H];
    uint16_t map[W * H], map16[W * H];
    int64_t map64[W * H];
    uint32_t len = sample_record(rec, sizeof rec, masks, map);
    fmt_target t;
    fmt_msg msg = {{0}};
    ck_assert_int_eq(fmt_target_view((uint8_t *)rec, len, W, H, &t, &msg), 0);
    ck_assert_uint_eq(t.count, 2);
    ck_assert_uint_eq(t.ext, 7);
    ck_assert_uint_eq(t.num_keypoints, 2);
    ck_assert_float_eq(t.keypoints[6], 6.25f);
    ck_assert_float_eq(t.keypoints[11], 2);
    for (uint32_t i = 0; i < 2; i++) {
        ck_assert_int_eq(fmt_target_mask(&t, i, got), 0);
        ck_assert_mem_eq(got, masks[i], W * H);
    }
    ck_assert_int_eq(fmt_target_mask(&t, 2, got), FMT_EINVAL);
    ck_assert_int_eq(fmt_target_label_map(&t, map16, 2), 0);
    ck_assert_mem_eq(map16, map, sizeof map);
    ck_assert_int_eq(fmt_target_label_map(&t, map64, 8), 0);
    ck_assert_int_eq(map64[15], 300);
    ck_assert_int_eq(map64[34], 255);
    /* a map with values past 255 is not decoded to uint8 */
    ck_assert_int_eq(fmt_target_label_map(&t, got, 1), FMT_EINVAL);
    /* any size other than the sample's is refused */
    ck_assert_int_eq(fmt_target_view((uint8_t *)rec, len, W + 1, H, &t, &msg), FMT_ECORRUPT);
    ck_assert_msg(strstr(msg.text, "masks of 7x5 for a 8x5 sample"), "%s", msg.text);
}
END_TEST

/* The run encoding itself, against hand-made bytes: runs of 0s first, varints. */
START_TEST(run_bytes)
{
    uint8_t m[300] = {0}, out[700];
    ck_assert_uint_eq(fmt_mask_encode(m, 300, out), 2);
    ck_assert_uint_eq(out[0], 0xac);    /* 300 = 0b10_0101100 */
    ck_assert_uint_eq(out[1], 0x02);
    m[0] = 1;
    ck_assert_uint_eq(fmt_mask_encode(m, 300, out), 4);
    ck_assert_uint_eq(out[0], 0);       /* no 0s first */
    ck_assert_uint_eq(out[1], 1);
    ck_assert_uint_eq(out[2], 0xab);
    ck_assert_uint_eq(out[3], 0x02);
    uint16_t map[4] = {7, 7, 7, 1000};
    uint32_t max;
    ck_assert_uint_eq(fmt_map_encode(map, 4, out, &max), 5);
    ck_assert_uint_eq(max, 1000);
    const uint8_t want[5] = {7, 3, 0xe8, 0x07, 1};
    ck_assert_mem_eq(out, want, 5);
}
END_TEST

/* Flip one byte of each part: the view refuses the record. */
START_TEST(damage)
{
    uint64_t rec[256], bad[256];
    uint8_t masks[2][W * H];
    uint16_t map[W * H];
    uint32_t len = sample_record(rec, sizeof rec, masks, map);
    size_t ext = fmt_target_size(2);
    /* extension header fields, first keypoint's v, a mask run, the map's last run */
    size_t at[] = {ext, ext + 4, ext + 8, ext + 16, ext + 20, ext + 24, ext + 28,
                   ext + 32 + 8, ext + 32 + 24 + 12, len - 9, len - 1};
    for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
        memcpy(bad, rec, len);
        ((uint8_t *)bad)[at[k]] ^= 0x41;
        fmt_target t;
        fmt_msg msg = {{0}};
        ck_assert_msg(fmt_target_view((uint8_t *)bad, len, W, H, &t, &msg) == FMT_ECORRUPT,
                      "byte %zu changed but the record was accepted", at[k]);
        ck_assert_msg(strstr(msg.text, "target record"), "%s", msg.text);
    }
    /* a record cut short */
    fmt_target t;
    fmt_msg msg = {{0}};
    ck_assert_int_eq(fmt_target_view((uint8_t *)rec, len - 8, W, H, &t, &msg), FMT_ECORRUPT);
}
END_TEST

/* ext 0 writes the version 1 record, byte for byte what it was. */
START_TEST(version1)
{
    static const float boxes[4] = {1, 2, 3, 4};
    static const int64_t labels[1] = {5};
    static const float area[1] = {4};
    static const uint8_t crowd[1] = {0};
    fmt_target t = {.count = 1, .image_id = 1, .orig_width = 9, .orig_height = 9,
                    .boxes = boxes, .labels = labels, .area = area, .iscrowd = crowd};
    uint64_t rec[16];
    ck_assert_uint_eq(fmt_target_record_size(&t), fmt_target_size(1));
    ck_assert_uint_eq(fmt_target_encode(&t, (uint8_t *)rec, sizeof rec), 64);
    ck_assert_uint_eq(((uint8_t *)rec)[0], 'B');
    ck_assert_uint_eq(((uint8_t *)rec)[3], '1');
    fmt_target v;
    fmt_msg msg = {{0}};
    ck_assert_int_eq(fmt_target_view((uint8_t *)rec, 64, 9, 9, &v, &msg), 0);
    ck_assert_uint_eq(v.ext, 0);
}
END_TEST

int main(void)
{
    Suite *s = TU_SUITE("masks", "core", 0, round_trip, run_bytes, damage, version1);
    return tu_run(s);
}
