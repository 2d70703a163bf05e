/* segm.h - instance masks and keypoints of a detection build: read from the annotations
 * (COCO segmentation as polygons or RLE, keypoints with the categories' names and skeleton),
 * rasterised at the source image's size, moved with its pixels by the build geometry and run-
 * length encoded into the target record's extension (formats/target.h, raw.md "Target record,
 * version 2").
 *
 * Rasterisation: a pixel (i, j) belongs to a polygon when its centre (i + 0.5, j + 0.5) is
 * inside by the even-odd rule (an edge crossing of the centre's row at x counts when
 * x <= i + 0.5, x computed as x0 + (yc - y0) * (x1 - x0) / (y1 - y0) in double for the edges
 * with (y0 <= yc) != (y1 <= yc)); an instance's polygons are united. COCO RLE is decoded as
 * its definition says (runs down the columns, 0s first). An instance given no segmentation in
 * a dataset with masks gets the pixels whose centres lie inside its box.
 *
 * The geometry: output pixel (X, Y) inside the plan's visible window takes the resized pixel
 * (X - dst_x + win_x, Y - dst_y + win_y), which takes source pixel fmt_target_nearest(x, src,
 * rs) per axis (floor(x * s), s = src / rs as a float, min src - 1; x / 2 where rs = 2 src),
 * as torch's nearest interpolation (torchvision.transforms.v2's resize of masks) computes it; outside the window: 0 (instances). Keypoints move as the
 * boxes do (fmt_target_map_box's affine map); one that lands outside the visible window, or
 * was not labelled (v 0), is stored as (0, 0, 0).
 */
#ifndef SHC_SEGM_H
#define SHC_SEGM_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "annot.h"

/* The categories' keypoints (COCO "keypoints" names, "skeleton"): every category that lists
 * keypoints lists the same names. Sets a->nkp, kp_names, skeleton, cat_kp (a->cats sorted).
 * 0; EINVAL naming the file and category; ENOMEM. */
int shc_segm_coco_categories(const char *file, json_t *cats, shc_annot *a, fmt_msg *msg);

/* Annotation i (its "segmentation", "keypoints", "num_keypoints") of an image of w x h: the
 * box's seg and kp fields and a->pool, a->ext. 0; EINVAL naming the file and entry for a
 * polygon with fewer than 3 points or an odd number of coordinates, a point or keypoint outside
 * the image, an RLE of another size or whose counts do not add up to h * w, a keypoint count
 * other than the category's; ENOMEM. */
int shc_segm_coco_annotation(const char *file, size_t i, json_t *an, uint32_t w, uint32_t h,
                             shc_annot *a, shc_annot_box *b, fmt_msg *msg);

/* Reusable buffers of one worker. */
typedef struct {
    uint8_t *src, *dst;
    size_t src_cap, dst_cap;
    double *xs;
    size_t xs_cap;
} shc_segm_scratch;

void shc_segm_scratch_free(shc_segm_scratch *s);

/* Box b's mask at the source's src_w x src_h size (box: b in source pixels, the mask of an
 * instance without segmentation), moved through plan p to out_w x out_h and run-length encoded:
 * the runs are appended to *runs (grown, *len its length, *cap its capacity); *empty says
 * whether no pixel is set. 0 or ENOMEM. */
int shc_segm_mask(const shc_annot *a, const shc_annot_box *b, uint32_t src_w, uint32_t src_h,
                  const double box[4], const fmt_geom_plan *p, shc_segm_scratch *s,
                  uint8_t **runs, size_t *len, size_t *cap, int *empty);

/* Box b's keypoints moved through plan p into out (K * 3 floats). */
void shc_segm_keypoints(const shc_annot *a, const shc_annot_box *b, uint32_t src_w,
                        uint32_t src_h, const fmt_geom_plan *p, float *out);

/* Hash a's segmentation part into the xxh3 state st. */
void shc_segm_hash(const shc_annot *a, void *st);

#endif
