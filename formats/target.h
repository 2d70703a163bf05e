/* target.h - a detection sample's target: its boxes, their category ids, iscrowd flags and
 * areas, the source image's id and size (spec: the "Target record" section of formats/raw.md).
 *
 * A target travels as a sample's aux record, so every backend stores it, hashes it and checks it
 * wherever it stores an aux record. The record is little-endian and laid out so that its arrays
 * can be used in place: boxes (float32 x1, y1, x2, y2) at byte 32, the category ids (int64) right
 * after them, then the areas (float32) and the iscrowd flags (uint8); every record is a multiple
 * of 8 bytes long, so records placed back to back from an 8-aligned start stay 8-aligned.
 *
 * Coordinates are pixel edges of the stored image: a box covering the whole W x H sample is
 * (0, 0, W, H).
 */
#ifndef FMT_TARGET_H
#define FMT_TARGET_H

#include <stddef.h>
#include <stdint.h>

#include "fmt.h"
#include "geometry.h"

#define FMT_TARGET_MAGIC 0x31584f42u    /* "BOX1" little-endian */
#define FMT_TARGET_MAGIC2 0x32584f42u   /* "BOX2": BOX1 and the segmentation extension */
#define FMT_TARGET_HEADER 32u
/* Boxes one record may hold: keeps a record under 2 MiB, and the largest real annotation sets
 * (a few thousand boxes per image) well inside. */
#define FMT_TARGET_MAX_BOXES 65536u

/* A target, decoded or to encode. The arrays hold count entries (boxes: 4 per box). From
 * fmt_target_view they point into the record (read-only, as long as the record lives). */
typedef struct {
    uint32_t count;
    int64_t image_id;                   /* the annotation's image id (COCO "id") */
    uint32_t orig_width, orig_height;   /* the source image's size */
    uint32_t dropped;                   /* boxes the build's geometry left without area */
    const float *boxes;                 /* count * 4: x1, y1, x2, y2 */
    const int64_t *labels;              /* category ids as the annotations give them */
    const float *area;                  /* count */
    const uint8_t *iscrowd;             /* count, 0 or 1 */
    /* The segmentation extension (raw.md "Target record, version 2"; masks.c). ext 0: a
     * version 1 record, the fields below unused. */
    uint32_t ext;                       /* FMT_TARGET_EXT_* bits */
    uint32_t num_keypoints;             /* K per instance (EXT_KEYPOINTS), else 0 */
    uint32_t map_width, map_height;     /* the stored sample's size, the masks' and map's */
    uint32_t map_max;                   /* EXT_MAP: the largest value in the label map */
    const float *keypoints;             /* count * K * 3: x, y, v */
    const uint32_t *mask_offsets;       /* EXT_MASKS: count + 1 offsets into mask_runs */
    const uint8_t *mask_runs;           /* instance i: mask_runs[off[i] .. off[i + 1]) */
    const uint8_t *map_runs;            /* EXT_MAP: map_len bytes of (value, run) pairs */
    uint32_t map_len;
} fmt_target;

#define FMT_TARGET_EXT_MASKS 1u         /* an instance mask per box */
#define FMT_TARGET_EXT_KEYPOINTS 2u     /* K keypoints per box */
#define FMT_TARGET_EXT_MAP 4u           /* a semantic label map for the sample */
#define FMT_TARGET_EXT_HEADER 32u
#define FMT_TARGET_MAX_KEYPOINTS 1024u
#define FMT_TARGET_MAX_LABEL 65535u     /* label map values are uint16 at most */

/* Bytes of t's record (version 1 when t->ext is 0, else version 2 with t's sections; map_len
 * and mask_offsets[count] give the run bytes). 0 when it would exceed UINT32_MAX or a count
 * its limit. */
uint32_t fmt_target_record_size(const fmt_target *t);

/* Bytes of a record of n boxes: 32 + 29 n rounded up to a multiple of 8. 0 when n exceeds
 * FMT_TARGET_MAX_BOXES. */
uint32_t fmt_target_size(uint32_t n);

/* Write t as a record into out (cap bytes, at least fmt_target_record_size(t)); padding is zero.
 * With t->ext 0 the record is version 1 (fmt_target_size(t->count) bytes), else version 2.
 * Returns the record's length, or 0 if cap is too small or count too large. */
uint32_t fmt_target_encode(const fmt_target *t, uint8_t *out, size_t cap);

/* Check a record and point t into it. rec must be 8-aligned (FMT_EINVAL otherwise; records a
 * backend hands back misaligned are copied by fmt_dataset_target). Checked: magic, the length
 * against the count, zero padding, every coordinate finite with 0 <= x1 < x2 <= width and
 * 0 <= y1 < y2 <= height (width, height: the stored sample's size; 0, 0: not checked), areas
 * finite and >= 0, iscrowd 0 or 1. 0, or FMT_ECORRUPT with msg saying which field of which box.
 * On a big-endian host: FMT_EUNSUPPORTED. */
int fmt_target_view(const uint8_t *rec, size_t len, uint32_t width, uint32_t height,
                    fmt_target *t, fmt_msg *msg);

/* ---- the segmentation extension (masks.c) ----
 * Runs are unsigned LEB128 varints (7 bits a byte, least significant group first, the last byte
 * below 0x80, minimal length: no trailing 0x80 0x00). A mask is its runs in row-major order,
 * alternating 0s and 1s and starting with 0s (the first run may be 0, no other), adding up to
 * width * height; a label map is (value, run) pairs in row-major order, each run > 0, adding
 * up to width * height. */

/* Bytes of the longest run encoding of an npix-pixel mask (fmt_mask_encode) / label map
 * (fmt_map_encode): what out must hold. */
size_t fmt_mask_encode_bound(size_t npix);
size_t fmt_map_encode_bound(size_t npix);

/* Encode npix 0/non-zero bytes (a mask, row-major) / npix label values; return the bytes
 * written to out. fmt_map_encode also gives the largest value in *max. npix < 2^32. */
size_t fmt_mask_encode(const uint8_t *mask, size_t npix, uint8_t *out);
size_t fmt_map_encode(const uint16_t *map, size_t npix, uint8_t *out, uint32_t *max);

/* Decode a checked record's mask of instance i into out (map_width * map_height bytes, 0 or 1).
 * 0; FMT_EINVAL when t has no masks or i >= count. */
int fmt_target_mask(const fmt_target *t, uint32_t i, uint8_t *out);

/* The runs of a checked record's mask of instance i, one at a time, for a reader that moves
 * them without a decoded plane (fmt_target_mask's runs): fmt_target_mask_runs starts r at the
 * first (0 or FMT_EINVAL as fmt_target_mask); each fmt_mask_run gives the next run's length in
 * *len and returns 1, or 0 after the last. Runs alternate 0s and 1s, starting with 0s. */
typedef struct {
    const uint8_t *p;
    size_t at, end;
} fmt_mask_runs;
int fmt_target_mask_runs(const fmt_target *t, uint32_t i, fmt_mask_runs *r);
int fmt_mask_run(fmt_mask_runs *r, uint32_t *len);

/* The same for a checked record's label map: fmt_target_map_runs starts r (0, or FMT_EINVAL
 * when t has no map); each fmt_map_run gives the next run's value and length and returns 1, or
 * 0 after the last. */
int fmt_target_map_runs(const fmt_target *t, fmt_mask_runs *r);
int fmt_map_run(fmt_mask_runs *r, uint32_t *value, uint32_t *len);

/* Decode a checked record's label map into out, elem bytes per value (1: uint8, only when
 * map_max <= 255; 2: uint16; 8: int64), row-major. 0; FMT_EINVAL otherwise. */
int fmt_target_label_map(const fmt_target *t, void *out, int elem);

/* Check the version 2 extension at rec[off .. len) of a record of t->count boxes and point t's
 * extension fields into it (fmt_target_view's second half). width, height: the sample's size
 * (0, 0: not checked against it). 0, or FMT_ECORRUPT saying what is wrong. */
int fmt_target_view_ext(const uint8_t *rec, size_t len, size_t off, uint32_t width,
                        uint32_t height, fmt_target *t, fmt_msg *msg);

/* Write t's extension at out (fmt_target_record_size(t) - fmt_target_size(t->count) bytes,
 * zeroed by the caller). */
void fmt_target_encode_ext(const fmt_target *t, uint8_t *out);

/* Bytes of t's extension (its header and sections), 0 when over UINT32_MAX. */
uint64_t fmt_target_ext_size(const fmt_target *t);

/* The build geometry applied to one box. p is the plan of a src_w x src_h source (its resize,
 * window and placement; the box of a reduced-scale decode is not used). in: x1, y1, x2, y2 in
 * source pixels. The box is scaled by rs_w / src_w and rs_h / src_h (Pillow's resize maps pixel
 * edges linearly), moved by dst - win (the crop window or the padding), clipped to the visible
 * window [dst_x, dst_x + dst_w] x [dst_y, dst_y + dst_h], in double precision, then rounded to
 * float32. out receives the box; *area_scale (may be NULL) the factor an area is multiplied by.
 * Returns 1 when the float32 box has area (x1 < x2 and y1 < y2), 0 when the box is to be
 * dropped. */
int fmt_target_map_box(const fmt_geom_plan *p, uint32_t src_w, uint32_t src_h, const double in[4],
                       float out[4], double *area_scale);

/* torch's nearest source index of destination index i when `in` samples are resized to `out`
 * (its nearest_idx, what interpolate(mode="nearest") and so torchvision.transforms.v2 do to
 * masks): i where in == out, i >> 1 where out == 2 * in, else
 * min(floor(i * (float)(in / out)), in - 1) in float32. The masks and label maps of a build and
 * of the reader's geometry both move by it. */
uint32_t fmt_target_nearest(uint32_t i, uint32_t in, uint32_t out);

#endif
