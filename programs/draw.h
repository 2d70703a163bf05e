/* draw.h - a detection sample's targets drawn on its pixels (draw.c), for `shardc cat --boxes
 * --masks --keypoints`. Each draws onto px, an image of w x h pixels of ch channels (1: gray;
 * else the first three are RGB), interleaved, row by row. */
#ifndef SHC_DRAW_H
#define SHC_DRAW_H

#include <stdint.h>

#include "dataset.h"

/* The outline of each box of t, 1 pixel wide, in a colour of its category (gray: white). */
void shc_draw_boxes(uint8_t *px, uint32_t w, uint32_t h, uint32_t ch, const fmt_target *t);

/* Each instance mask of t (or its label map, the value ignore left out) as a translucent overlay
 * of its category's (or label's) colour. 0; FMT_ECORRUPT when t's masks are not w x h; ENOMEM. */
int shc_draw_masks(uint8_t *px, uint32_t w, uint32_t h, uint32_t ch, const fmt_target *t,
                   uint32_t ignore);

/* t's keypoints as dots joined by the skeleton's lines (m: the manifest, which holds it). */
void shc_draw_keypoints(uint8_t *px, uint32_t w, uint32_t h, uint32_t ch,
                        const fmt_target *t, const fmt_manifest *m);

#endif
