/* draw.h - a detection sample's targets drawn on its pixels (draw.c), for `shardc cat --boxes
 * --masks --keypoints`, from what shardread.h's shr_dataset calls hand out. Each draws onto px,
 * an image of w x h pixels of ch channels (1: gray; else the first three are RGB), interleaved,
 * row by row. */
#ifndef SHC_DRAW_H
#define SHC_DRAW_H

#include <stdint.h>

#include "shardread.h"

/* The outline of each box of t, 1 pixel wide, in a colour of its category (gray: white). */
void shc_draw_boxes(uint8_t *px, uint32_t w, uint32_t h, uint32_t ch, const shr_target *t);

/* Each instance mask of t (masks: t->count masks of w x h bytes of 0 or 1, or NULL) and the
 * label map (map: w x h labels, or NULL; the value ignore left out) as a translucent overlay of
 * its category's (or label's) colour. */
void shc_draw_masks(uint8_t *px, uint32_t w, uint32_t h, uint32_t ch, const shr_target *t,
                    const uint8_t *masks, const uint16_t *map, uint32_t ignore);

/* t's keypoints (kp: t->count * K * 3 floats x, y, v) as dots joined by the skeleton's lines
 * (edges pairs of keypoint numbers, 1-based). */
void shc_draw_keypoints(uint8_t *px, uint32_t w, uint32_t h, uint32_t ch, const shr_target *t,
                        uint32_t K, const float *kp, const uint32_t *skeleton, uint32_t edges);

#endif
