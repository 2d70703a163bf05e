/* mksample_coco.h - shardc-mksample's detection samples (mksample_coco.c): images of shapes with
 * their boxes as COCO instances JSON. Part of the program only, not of the generator that
 * mksample.h declares (whose tests link mksample.c alone). */
#ifndef MKS_MKSAMPLE_COCO_H
#define MKS_MKSAMPLE_COCO_H

#include <stdint.h>

#include "fmt.h"

/* Write `count` PNGs OUT/NNNNNN.png (ids 1..count, the id in the name) over a noisy background,
 * each with 1..max_shapes shapes (0: 4) of the four categories (ids 1..4) drawn inside their box, boxes that
 * may touch the image's border; and the COCO instances JSON at json_path (boxes [x, y, w, h] in
 * whole pixels, area w * h, iscrowd 0, annotation ids 1..N in image order). Every fifth image
 * has no shape. With polygons set each annotation also has its shape's outline as COCO
 * polygons ("segmentation", pixel corners): the rectangle's 4 corners, the ellipse's 24 points,
 * the frame's 4 bars, the cross's 2 bars (the same images and boxes either way). Deterministic
 * in seed. 0 or an errno, msg naming the file. */
int mks_coco_generate(const char *out, const char *json_path, unsigned count, uint64_t seed,
                      unsigned min_side, unsigned max_side, unsigned max_shapes, int polygons,
                      fmt_msg *msg);

#endif
