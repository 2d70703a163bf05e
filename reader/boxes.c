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
    uint32_t kept = 0;
    for (uint32_t i = 0; i < t->count; i++) {
        const float *b = t->boxes + 4 * (size_t)i;
        double u[4] = {
            ((double)b[0] - p->x) * sx + dx, ((double)b[1] - p->y) * sy + dy,
            ((double)b[2] - p->x) * sx + dx, ((double)b[3] - p->y) * sy + dy,
        };
        double c[4] = {clampd(u[0], 0, W), clampd(u[1], 0, H), clampd(u[2], 0, W),
                       clampd(u[3], 0, H)};
        if (p->flip) {
            double x1 = W - c[2];
            c[2] = W - c[0];
            c[0] = x1;
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
