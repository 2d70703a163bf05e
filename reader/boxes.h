/* boxes.h - the read-time geometry applied to a detection sample's boxes: the crop or zero pad
 * to the output size, or the RandomResizedCrop box resized to it (or a scale op), then the
 * horizontal flip, then the warps (RandomRotation, RandomAffine, the automatic augmentations'
 * shears, translations and rotations: each box's corners through the warp's forward map, the
 * enclosing box), the clips to the output and the drop of boxes left without area (shardread.h,
 * "Targets").
 *
 * Internal to libshardread (not installed, not exported); a pure function of its arguments, so
 * any worker may move any sample's boxes and give the same floats. (Named boxes.h, not target.h:
 * formats/target.h, the stored record, shares the include path.)
 */
#ifndef SHR_BOXES_H
#define SHR_BOXES_H

#include <stdint.h>

#include "dataset.h"        /* fmt_target */
#include "shardread.h"
#include "transform.h"

/* the geometric ops of one sample: rotation, affine, up to SHR_AA_MAX_OPS automatic ones */
#define SHR_BOX_MAX_WARPS (2 + SHR_AA_MAX_OPS)

/* How the reader's geometry maps a stored sample onto the output. */
typedef struct {
    uint32_t width, height;         /* the output sample */
    int rrc;                        /* the params' box is resized to width x height */
    double min_fraction;            /* shr_options.min_box_area_fraction, 0..1 */
    shr_scale scale;                /* shr_options.scale: the params' scale fields place it */
} shr_box_geom;

/* Move the boxes of t by the sample's parameters p (as the reader draws them: the stored
 * rectangle x, y, w, h, the scale fields, the flip, and the warps' rotate, affine and aa_*).
 * The kept boxes go, in their stored order, to boxes (4 floats each), labels, area and iscrowd,
 * which have room for t->count entries, and (kept_idx, when not NULL) each kept box's position
 * in t; returns how many were kept, and *dropped the others.
 * The arithmetic: shardread.h, "Targets". */
SHR_INTERNAL uint32_t shr_box_map(const shr_box_geom *g, const fmt_target *t, const shr_params *p,
                                  float *boxes, int64_t *labels, float *area, uint8_t *iscrowd,
                                  uint32_t *kept_idx, uint32_t *dropped);

/* The sample's geometric ops after the flip (rotation, affine, the geometric auto_augment ops),
 * in the order the pixels get them, as forward maps (input position -> output position, x' =
 * f0 x + f1 y + f2, y' = f3 x + f4 y + f5) of the w x h frame they warp; returns how many. */
SHR_INTERNAL int shr_box_warps(const shr_params *p, double w, double h,
                               double f[SHR_BOX_MAX_WARPS][6]);

#endif
