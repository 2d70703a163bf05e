/* boxes.c - detection boxes through the read-time geometry (boxes.h). */
#include "boxes.h"

#include <math.h>

#include "affine.h"
#include "autoaugment.h"
#include "scale.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

static const double deg_to_rad = 3.14159265358979323846 / 180.0;
static const double rad_to_deg = 180.0 / 3.14159265358979323846;

static double clampd(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* The forward map of a Pillow matrix m (output position -> input position, x = m0 x' + m1 y'
 * + m2, y = m3 x' + m4 y' + m5): input -> output, its inverse. */
static void forward_of(const double m[6], double f[6])
{
    double det = m[0] * m[4] - m[1] * m[3];
    f[0] = m[4] / det;
    f[1] = -m[1] / det;
    f[3] = -m[3] / det;
    f[4] = m[0] / det;
    f[2] = -(f[0] * m[2] + f[1] * m[5]);
    f[5] = -(f[3] * m[2] + f[4] * m[5]);
}

/* Pillow's round(x, 15) as Image.rotate rounds its cosine and sine (exact 0 and 1 at quarter
 * turns); to the nearest 1e-15, which is all a box needs */
static double round15(double x)
{
    return nearbyint(x * 1e15) / 1e15;
}

/* F.rotate(angle) of a w x h image (expand=False, centre (w / 2, h / 2)), forward: a
 * counter-clockwise turn about the centre, in y-down pixel-edge coordinates */
static void rotate_forward(double f[6], double angle, double w, double h)
{
    double a = fmod(angle, 360.0) * deg_to_rad;
    double c = round15(cos(a)), s = round15(sin(a));
    double cx = w / 2.0, cy = h / 2.0;
    f[0] = c;
    f[1] = s;
    f[2] = cx - c * cx - s * cy;
    f[3] = -s;
    f[4] = c;
    f[5] = cy + s * cx - c * cy;
}

/* F.affine(angle, [tx, ty], scale, [shear_x, shear_y], center) forward: the inverse of
 * torchvision's inverse matrix, the one the pixels are sampled with */
static void affine_forward(double f[6], double cx, double cy, double angle, double tx, double ty,
                           double scale, double shear_x, double shear_y)
{
    double m[6];
    shr_affine_inverse(m, cx, cy, angle, tx, ty, scale, shear_x, shear_y);
    forward_of(m, f);
}

int shr_box_warps(const shr_params *p, double w, double h, double f[SHR_BOX_MAX_WARPS][6])
{
    int n = 0;
    if (p->rotate)
        rotate_forward(f[n++], (double)p->rotate_angle, w, h);
    if (p->affine)
        affine_forward(f[n++], w * 0.5, h * 0.5, (double)p->affine_angle, (double)p->affine_tx,
                       (double)p->affine_ty, (double)p->affine_scale,
                       (double)p->affine_shear_x, (double)p->affine_shear_y);
    for (uint32_t i = 0; i < p->aa_ops && i < SHR_AA_MAX_OPS; i++) {
        int op = p->aa_op[i];
        double m = (double)p->aa_magnitude[i];
        if (!shr_aa_op_geometric(op))
            continue;
        if (op == SHR_AA_SHEAR_X || op == SHR_AA_SHEAR_Y) {
            /* _apply_op: F.affine with shear atan(m) in degrees about the origin */
            double s = atan(m) * rad_to_deg;
            affine_forward(f[n++], 0.0, 0.0, 0.0, 0.0, 0.0, 1.0,
                           op == SHR_AA_SHEAR_X ? s : 0.0, op == SHR_AA_SHEAR_Y ? s : 0.0);
        } else if (op == SHR_AA_TRANSLATE_X || op == SHR_AA_TRANSLATE_Y) {
            double t = (double)(int64_t)m;      /* int(magnitude) */
            affine_forward(f[n++], w * 0.5, h * 0.5, 0.0, op == SHR_AA_TRANSLATE_X ? t : 0.0,
                           op == SHR_AA_TRANSLATE_Y ? t : 0.0, 1.0, 0.0, 0.0);
        } else if (op == SHR_AA_ROTATE) {
            rotate_forward(f[n++], m, w, h);
        }
    }
    return n;
}

/* b (x1, y1, x2, y2) replaced by the axis-aligned box enclosing its 4 corners mapped by f */
static void map_box(const double f[6], double b[4])
{
    const double xs[4] = {b[0], b[2], b[2], b[0]}, ys[4] = {b[1], b[1], b[3], b[3]};
    double lo_x = INFINITY, lo_y = INFINITY, hi_x = -INFINITY, hi_y = -INFINITY;
    for (int k = 0; k < 4; k++) {
        double x = f[0] * xs[k] + f[1] * ys[k] + f[2];
        double y = f[3] * xs[k] + f[4] * ys[k] + f[5];
        lo_x = x < lo_x ? x : lo_x;
        hi_x = x > hi_x ? x : hi_x;
        lo_y = y < lo_y ? y : lo_y;
        hi_y = y > hi_y ? y : hi_y;
    }
    b[0] = lo_x;
    b[1] = lo_y;
    b[2] = hi_x;
    b[3] = hi_y;
}

uint32_t shr_box_map(const shr_box_geom *g, const fmt_target *t, const shr_params *p,
                     float *boxes, int64_t *labels, float *area, uint8_t *iscrowd,
                     uint32_t *kept_idx, uint32_t *dropped)
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
    /* the frame the geometric ops warp: the output, but a multi-scale image alone */
    double gw = W, gh = H;
    if (g->scale != SHR_SCALE_NONE) {
        sx = (double)p->scale_w / p->src_w;
        sy = (double)p->scale_h / p->src_h;
        dx = (double)p->pad_x - p->crop_x;
        dy = (double)p->pad_y - p->crop_y;
        x0 = p->pad_x;
        y0 = p->pad_y;
        x1 = x0 + p->image_w;
        y1 = y0 + p->image_h;
        if (shr_scale_per_image(g->scale)) {
            fw = gw = p->image_w;
            gh = p->image_h;
        }
    }
    /* the geometric ops: each box through each op's forward map, the enclosing box of the
     * mapped corners clipped to the frame after each; the area by |det| of the linear parts */
    double f[SHR_BOX_MAX_WARPS][6];
    int nw = shr_box_warps(p, gw, gh, f);
    double det = 1.0;
    for (int k = 0; k < nw; k++)
        det *= fabs(f[k][0] * f[k][4] - f[k][1] * f[k][3]);
    uint32_t kept = 0;
    for (uint32_t i = 0; i < t->count; i++) {
        const float *b = t->boxes + 4 * (size_t)i;
        /* u: the box never clipped (for min_box_area_fraction); c: the clipped one */
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
            m = fw - u[2];
            u[2] = fw - u[0];
            u[0] = m;
        }
        /* a box left without area by a clip is gone before the next op (a warp would give a
         * line's enclosing box an area) */
        int keep = 1;
        for (int k = 0; k < nw; k++) {
            keep = c[0] < c[2] && c[1] < c[3];
            if (!keep)
                break;
            map_box(f[k], c);
            map_box(f[k], u);
            c[0] = clampd(c[0], 0, gw);
            c[1] = clampd(c[1], 0, gh);
            c[2] = clampd(c[2], 0, gw);
            c[3] = clampd(c[3], 0, gh);
        }
        float fb[4] = {(float)c[0], (float)c[1], (float)c[2], (float)c[3]};
        keep = keep && fb[0] < fb[2] && fb[1] < fb[3];
        /* the kept fraction of the box's area; the mapped box always has area (stored boxes
         * do, and the scales are positive) */
        if (keep && g->min_fraction > 0)
            keep = (c[2] - c[0]) * (c[3] - c[1]) >= g->min_fraction * (u[2] - u[0]) * (u[3] - u[1]);
        if (!keep)
            continue;
        for (int k = 0; k < 4; k++)
            boxes[4 * (size_t)kept + k] = fb[k];
        labels[kept] = t->labels[i];
        area[kept] = (float)((double)t->area[i] * sx * sy * det);
        iscrowd[kept] = t->iscrowd[i];
        if (kept_idx)
            kept_idx[kept] = i;
        kept++;
    }
    *dropped = t->count - kept;
    return kept;
}
