/* draw.c - a detection sample's targets drawn on its pixels, for `shardc cat --boxes --masks
 * --keypoints` (shardc.c). */
#include "draw.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The outline of each box of t: the pixels whose squares the box's edges cross (columns
 * floor(x1) .. ceil(x2) - 1, rows likewise), in a colour of its category. */
void shc_draw_boxes(uint8_t *px, uint32_t w, uint32_t h, uint32_t ch, const shr_target *t)
{
    static const uint8_t pal[8][3] = {{255, 40, 40}, {40, 255, 40}, {60, 120, 255}, {255, 220, 0},
                                      {255, 0, 255}, {0, 255, 255}, {255, 140, 0}, {255, 255, 255}};
    for (uint32_t k = 0; k < t->count; k++) {
        const float *b = t->boxes + 4 * (size_t)k;
        const uint8_t *c = pal[(uint64_t)t->labels[k] % 8];
        long x0 = (long)floorf(b[0]), y0 = (long)floorf(b[1]);
        long x1 = (long)ceilf(b[2]) - 1, y1 = (long)ceilf(b[3]) - 1;
        x0 = x0 < 0 ? 0 : x0;
        y0 = y0 < 0 ? 0 : y0;
        x1 = x1 >= (long)w ? (long)w - 1 : x1;
        y1 = y1 >= (long)h ? (long)h - 1 : y1;
        for (long y = y0; y <= y1; y++)
            for (long x = x0; x <= x1; x++) {
                if (y != y0 && y != y1 && x != x0 && x != x1)
                    continue;
                uint8_t *p = px + ((size_t)y * w + (size_t)x) * ch;
                if (ch == 1)
                    p[0] = 255;
                else
                    memcpy(p, c, 3);
            }
    }
}

static const uint8_t cat_pal[8][3] = {{255, 40, 40}, {40, 255, 40}, {60, 120, 255},
                                       {255, 220, 0}, {255, 0, 255}, {0, 255, 255},
                                       {255, 140, 0}, {255, 255, 255}};

/* Blend colour c into the pixel at p half and half (gray: the colour's mean). */
static void cat_blend(uint8_t *p, uint32_t ch, const uint8_t *c)
{
    if (ch == 1) {
        p[0] = (uint8_t)((p[0] + (c[0] + c[1] + c[2]) / 3 + 1) / 2);
        return;
    }
    for (int k = 0; k < 3; k++)
        p[k] = (uint8_t)((p[k] + c[k] + 1) / 2);
}

/* Each instance mask of t (and the label map, the ignore index left out) as a translucent
 * overlay: a pixel set blends half of its category's (or label's) colour in. */
void shc_draw_masks(uint8_t *px, uint32_t w, uint32_t h, uint32_t ch, const shr_target *t,
                    const uint8_t *masks, const uint16_t *map, uint32_t ignore)
{
    size_t npix = (size_t)w * h;
    for (uint32_t k = 0; masks && k < t->count; k++) {
        const uint8_t *m8 = masks + npix * k;
        for (size_t i = 0; i < npix; i++)
            if (m8[i])
                cat_blend(px + i * ch, ch, cat_pal[(uint64_t)t->labels[k] % 8]);
    }
    for (size_t i = 0; map && i < npix; i++)
        if (map[i] != ignore)
            cat_blend(px + i * ch, ch, cat_pal[map[i] % 8]);
}

static void cat_dot(uint8_t *px, uint32_t w, uint32_t h, uint32_t ch, long x, long y,
                    const uint8_t *c)
{
    if (x < 0 || y < 0 || x >= (long)w || y >= (long)h)
        return;
    uint8_t *p = px + ((size_t)y * w + (size_t)x) * ch;
    if (ch == 1)
        p[0] = c[0];
    else
        memcpy(p, c, 3);
}

/* Keypoints of t: the skeleton's lines (both ends labelled) in the instance's colour, then a
 * 3x3 dot per labelled keypoint (white; its centre the instance's colour). */
void shc_draw_keypoints(uint8_t *px, uint32_t w, uint32_t h, uint32_t ch, const shr_target *t,
                        uint32_t K, const float *kps, const uint32_t *skeleton, uint32_t edges)
{
    static const uint8_t white[3] = {255, 255, 255};
    for (uint32_t k = 0; k < t->count; k++) {
        const float *kp = kps + 3 * (size_t)k * K;
        const uint8_t *c = cat_pal[(uint64_t)t->labels[k] % 8];
        for (uint32_t e = 0; e < edges; e++) {
            uint32_t a = skeleton[2 * e] - 1, b = skeleton[2 * e + 1] - 1;
            if (a >= K || b >= K || kp[3 * a + 2] <= 0 || kp[3 * b + 2] <= 0)
                continue;
            double x0 = kp[3 * a], y0 = kp[3 * a + 1], x1 = kp[3 * b], y1 = kp[3 * b + 1];
            double n = fmax(fabs(x1 - x0), fabs(y1 - y0));
            for (double i = 0; i <= n; i++) {
                double f = n > 0 ? i / n : 0;
                cat_dot(px, w, h, ch, (long)floor(x0 + f * (x1 - x0)),
                        (long)floor(y0 + f * (y1 - y0)), c);
            }
        }
        for (uint32_t j = 0; j < K; j++) {
            if (kp[3 * j + 2] <= 0)
                continue;
            long x = (long)floorf(kp[3 * j]), y = (long)floorf(kp[3 * j + 1]);
            for (long dy = -1; dy <= 1; dy++)
                for (long dx = -1; dx <= 1; dx++)
                    cat_dot(px, w, h, ch, x + dx, y + dy, dx || dy ? white : c);
        }
    }
}
