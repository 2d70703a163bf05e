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
} fmt_target;

/* Bytes of a record of n boxes: 32 + 29 n rounded up to a multiple of 8. 0 when n exceeds
 * FMT_TARGET_MAX_BOXES. */
uint32_t fmt_target_size(uint32_t n);

/* Write t as a record into out (cap bytes, at least fmt_target_size(t->count)); padding is zero.
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

#endif
