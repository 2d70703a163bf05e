/* boxes.c - detection boxes through the read-time geometry (boxes.h). */
#include "boxes.h"

static double clampd(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

uint32_t shr_box_map(const shr_box_geom *g, const fmt_target *t, const shr_params *p,
                     float *boxes, int64_t *labels, float *area, uint8_t *iscrowd,
                     uint32_t *dropped)
{
    /* x' = (x - p.x) * sx + dx per axis. A crop or pad copies pixels one for one (sx = 1) and
     * places the used rectangle at (width - w) / 2 (0 where cropped, since w = width there; the
     * integer offset crop_pad uses). RandomResizedCrop maps the box's edges onto the output's
     * (Pillow's resize maps pixel edges linearly). */
    double W = g->width, H = g->height;
    double sx = g->rrc ? W / p->w : 1.0, sy = g->rrc ? H / p->h : 1.0;
    double dx = g->rrc ? 0.0 : (double)((g->width - p->w) / 2);
    double dy = g->rrc ? 0.0 : (double)((g->height - p->h) / 2);
    /* the clip rectangle and the width the flip mirrors about: the output, but for the scale
     * ops the image inside it (shardread.h, "Scale") */
    double x0 = 0, y0 = 0, x1 = W, y1 = H, fw = W;
    if (g->scale != SHR_SCALE_NONE) {
        sx = (double)p->scale_w / p->src_w;
        sy = (double)p->scale_h / p->src_h;
        dx = (double)p->pad_x - p->crop_x;
        dy = (double)p->pad_y - p->crop_y;
        x0 = p->pad_x;
        y0 = p->pad_y;
        x1 = x0 + p->image_w;
        y1 = y0 + p->image_h;
        if (g->scale == SHR_SCALE_MULTI)
            fw = p->image_w;
    }
    uint32_t kept = 0;
    for (uint32_t i = 0; i < t->count; i++) {
        const float *b = t->boxes + 4 * (size_t)i;
        double u[4] = {
            ((double)b[0] - p->x) * sx + dx, ((double)b[1] - p->y) * sy + dy,
            ((double)b[2] - p->x) * sx + dx, ((double)b[3] - p->y) * sy + dy,
        };
        double c[4] = {clampd(u[0], x0, x1), clampd(u[1], y0, y1), clampd(u[2], x0, x1),
                       clampd(u[3], y0, y1)};
        if (p->flip) {
            double m = fw - c[2];
            c[2] = fw - c[0];
            c[0] = m;
        }
        float f[4] = {(float)c[0], (float)c[1], (float)c[2], (float)c[3]};
        int keep = f[0] < f[2] && f[1] < f[3];
        /* the kept fraction of the box's area; the mapped box always has area (stored boxes
         * do, and the scales are positive) */
        if (keep && g->min_fraction > 0)
            keep = (c[2] - c[0]) * (c[3] - c[1]) >= g->min_fraction * (u[2] - u[0]) * (u[3] - u[1]);
        if (!keep)
            continue;
        for (int k = 0; k < 4; k++)
            boxes[4 * (size_t)kept + k] = f[k];
        labels[kept] = t->labels[i];
        area[kept] = (float)((double)t->area[i] * sx * sy);
        iscrowd[kept] = t->iscrowd[i];
        kept++;
    }
    *dropped = t->count - kept;
    return kept;
}
