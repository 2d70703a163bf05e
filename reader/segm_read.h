/* segm_read.h - the read-time geometry applied to a segmentation sample's instance masks and
 * keypoints (shardread.h, "Masks and keypoints"): the crop or zero pad, the RandomResizedCrop
 * box resized to the output, or a scale op, then the horizontal flip; masks sampled nearest as
 * torch's interpolate(mode="nearest") samples them (what torchvision.transforms.v2 does to a
 * Mask), 0 in the padding; keypoints through the boxes' affine maps (boxes.h). Then the warps
 * (RandomRotation, RandomAffine, auto_augment's shears, translations and rotations): masks and
 * label maps through the pixels' own Pillow arithmetic (pixels/warp.c) with NEAREST sampling
 * and the same inverse matrix, keypoints through its forward map.
 *
 * Internal to libshardread; pure functions of their arguments, so any worker gives the same bytes.
 */
#ifndef SHR_SEGM_READ_H
#define SHR_SEGM_READ_H

#include <stddef.h>
#include <stdint.h>

#include "boxes.h"
#include "shardread.h"

/* The size of the masks of a sample with params p: the output (g->width x g->height), or the
 * image alone where dense is set (a multi-scale or natural-size list of images). */
SHR_INTERNAL void shr_segm_size(const shr_box_geom *g, int dense, const shr_params *p,
                                uint32_t *w, uint32_t *h);

/* The source column (xs, ow entries) and row (ys, oh entries) of each output column and row of a
 * sample stored at p->src_w x p->src_h, moved by p to ow x oh masks; -1 where the output is
 * padding. The flip is in xs. */
SHR_INTERNAL void shr_segm_tables(const shr_box_geom *g, const shr_params *p, uint32_t ow,
                                  uint32_t oh, int32_t *xs, int32_t *ys);

/* out (ow x oh) from the stored mask m (sw wide) by the tables; returns whether any pixel is 1.
 * The plain definition, pixel by pixel from a decoded plane: the reader moves masks from their
 * runs (shr_segm_mask), and tests/test_segm_warp.c holds that to this. */
SHR_INTERNAL int shr_segm_warp(const uint8_t *m, uint32_t sw, const int32_t *xs, const int32_t *ys,
                               uint32_t ow, uint32_t oh, uint8_t *out);

/* The column segments of the table xs (ow entries) into seg, 3 numbers each: [x0, x1) and
 * whether xs falls there: the longest spans of columns with xs >= 0 that step one way only (a
 * flip steps down). seg holds 3 ow numbers; returns the count. */
SHR_INTERNAL uint32_t shr_segm_cols(const int32_t *xs, uint32_t ow, uint32_t *seg);

/* shr_segm_warp of instance i's stored mask of t, the same bytes, from its runs: each source
 * row the tables sample is read once, its runs of 1s become output intervals through the
 * segments (shr_segm_cols of xs, nseg of them), set in the output row zeroed first; a row
 * sampling the source row of the row before copies it; no decoded plane, rows no output row
 * samples skipped. iv holds 2 ow numbers. Returns whether any pixel is 1; -1 when t has no
 * mask i. */
SHR_INTERNAL int shr_segm_mask(const fmt_target *t, uint32_t i, const int32_t *xs,
                               const int32_t *ys, uint32_t ow, uint32_t oh, const uint32_t *seg,
                               uint32_t nseg, uint32_t *iv, uint8_t *out);

/* A label map: out (ow x oh) from the stored map m (sw wide, one byte a label) by the tables,
 * fill (the dataset's ignore index) in the padding. The plain definition, as shr_segm_warp is
 * for masks: the reader moves uint8 maps by shr_segm_map, tested against this. */
SHR_INTERNAL void shr_segm_warp_map(const uint8_t *m, uint32_t sw, const int32_t *xs,
                                    const int32_t *ys, uint32_t ow, uint32_t oh, uint8_t fill,
                                    uint8_t *out);

/* shr_segm_warp_map of t's stored label map (map_max <= 255), the same bytes, from its runs as
 * shr_segm_mask moves a mask's (each output row filled with fill, then each run of another
 * label set over its output intervals). 0; -1 when t has no map or a label above 255. */
SHR_INTERNAL int shr_segm_map(const fmt_target *t, const int32_t *xs, const int32_t *ys,
                              uint32_t ow, uint32_t oh, const uint32_t *seg, uint32_t nseg,
                              uint32_t *iv, uint8_t fill, uint8_t *out);

/* shr_segm_warp_map of a map of uint16 labels. */
SHR_INTERNAL void shr_segm_warp_map16(const uint16_t *m, uint32_t sw, const int32_t *xs,
                                      const int32_t *ys, uint32_t ow, uint32_t oh, uint16_t fill,
                                      uint16_t *out);

/* The frame the warps of p turn (gw x gh at the top left of the masks): the output, but a
 * multi-scale or natural-size image alone. */
SHR_INTERNAL void shr_segm_frame(const shr_box_geom *g, const shr_params *p, uint32_t *gw,
                                 uint32_t *gh);

/* Whether p has a warp (rotation, affine or a geometric auto_augment op). */
SHR_INTERNAL int shr_segm_has_warps(const shr_params *p);

/* The warps of p, in the pixels' order, on the gw x gh plane (rows stride bytes apart) with
 * Pillow's NEAREST sampling, fill where a position maps outside; scratch holds gw * gh bytes.
 * Returns whether any byte of the plane is non-zero after. */
SHR_INTERNAL int shr_segm_warp_plane(const shr_params *p, uint8_t *plane, size_t stride,
                                     uint32_t gw, uint32_t gh, uint8_t fill, uint8_t *scratch);

/* shr_segm_warp_plane of a uint16 label map (ow x oh, rows ow values apart): its low and high
 * bytes as two planes, each through the same warps (NEAREST picks the same source position for
 * both), fill split alike; scratch holds 3 ow * oh bytes. */
SHR_INTERNAL void shr_segm_warp_plane16(const shr_params *p, uint16_t *map, uint32_t ow,
                                        uint32_t oh, uint32_t gw, uint32_t gh, uint16_t fill,
                                        uint8_t *scratch);

/* One instance's k keypoints kp (x, y, v) moved by p into out: x' = (x - p.x) sx + dx as the
 * boxes move, then, where p flips, x' = fw - x' and out[j] = moved[flip_idx[j]], then each warp's
 * forward map (shr_box_warps on the frame gw x gh). A keypoint stored invisible (v = 0), moved
 * outside the image rectangle (closed) before the warps or outside the frame [0, gw] x [0, gh]
 * after any warp is (0, 0, 0). */
SHR_INTERNAL void shr_segm_keypoints(const shr_box_geom *g, const shr_params *p, const float *kp,
                                     uint32_t k, const uint32_t *flip_idx, float *out);

#endif
