/* segm_read.c - instance masks and keypoints through the read-time geometry (segm_read.h). */
#include "segm_read.h"

#include <math.h>
#include <string.h>

#include "affine.h"
#include "autoaugment.h"
#include "scale.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* The boxes' map of a sample (boxes.c, shr_box_map): x' = (x - p.x) * sx + dx per axis, the
 * image rectangle [x0, x1] x [y0, y1] and the width fw the flip mirrors about. */
typedef struct {
    double sx, sy, dx, dy, x0, y0, x1, y1, fw;
} frame;

static void frame_of(const shr_box_geom *g, const shr_params *p, frame *f)
{
    double W = g->width, H = g->height;
    f->sx = g->rrc ? W / p->w : 1.0;
    f->sy = g->rrc ? H / p->h : 1.0;
    f->dx = g->rrc ? 0.0 : (double)((g->width - p->w) / 2);
    f->dy = g->rrc ? 0.0 : (double)((g->height - p->h) / 2);
    f->x0 = 0;
    f->y0 = 0;
    f->x1 = W;
    f->y1 = H;
    f->fw = W;
    if (g->scale != SHR_SCALE_NONE) {
        f->sx = (double)p->scale_w / p->src_w;
        f->sy = (double)p->scale_h / p->src_h;
        f->dx = (double)p->pad_x - p->crop_x;
        f->dy = (double)p->pad_y - p->crop_y;
        f->x0 = p->pad_x;
        f->y0 = p->pad_y;
        f->x1 = f->x0 + p->image_w;
        f->y1 = f->y0 + p->image_h;
        if (shr_scale_per_image(g->scale))
            f->fw = p->image_w;
    }
}

void shr_segm_size(const shr_box_geom *g, int dense, const shr_params *p, uint32_t *w,
                   uint32_t *h)
{
    int list = dense && shr_scale_per_image(g->scale);
    *w = list ? p->image_w : g->width;
    *h = list ? p->image_h : g->height;
}

/* One axis: the source index of output index o (before the flip), -1 in the padding. n: the
 * output's extent; at, len: the stored window (p.x, p.w); src: the stored extent; the scale
 * op's resize (rs), window (crop) and placement (pad, img). */
static int32_t axis(const shr_box_geom *g, uint32_t o, uint32_t n, uint32_t at, uint32_t len,
                    uint32_t src, uint32_t rs, uint32_t crop, uint32_t pad, uint32_t img)
{
    if (g->scale != SHR_SCALE_NONE) {
        if (o < pad || o - pad >= img)
            return -1;
        return (int32_t)fmt_target_nearest(o - pad + crop, src, rs);
    }
    if (g->rrc)
        return (int32_t)(at + fmt_target_nearest(o, len, n));
    uint32_t off = (n - len) / 2;       /* 0 where cropped (len == n) */
    if (o < off || o - off >= len)
        return -1;
    return (int32_t)(o - off + at);
}

void shr_segm_tables(const shr_box_geom *g, const shr_params *p, uint32_t ow, uint32_t oh,
                     int32_t *xs, int32_t *ys)
{
    frame f;
    frame_of(g, p, &f);
    uint32_t fw = (uint32_t)f.fw;
    for (uint32_t x = 0; x < ow; x++) {
        uint32_t c = p->flip && x < fw ? fw - 1 - x : x;
        xs[x] = axis(g, c, g->width, p->x, p->w, p->src_w, p->scale_w, p->crop_x, p->pad_x,
                     p->image_w);
    }
    for (uint32_t y = 0; y < oh; y++)
        ys[y] = axis(g, y, g->height, p->y, p->h, p->src_h, p->scale_h, p->crop_y, p->pad_y,
                     p->image_h);
}

int shr_segm_warp(const uint8_t *m, uint32_t sw, const int32_t *xs, const int32_t *ys,
                  uint32_t ow, uint32_t oh, uint8_t *out)
{
    uint8_t any = 0;
    for (uint32_t y = 0; y < oh; y++) {
        uint8_t *row = out + (size_t)y * ow;
        if (ys[y] < 0) {
            memset(row, 0, ow);
            continue;
        }
        const uint8_t *src = m + (size_t)ys[y] * sw;
        for (uint32_t x = 0; x < ow; x++) {
            uint8_t v = xs[x] < 0 ? 0 : src[xs[x]];
            row[x] = v;
            any |= v;
        }
    }
    return any != 0;
}

uint32_t shr_segm_cols(const int32_t *xs, uint32_t ow, uint32_t *seg)
{
    uint32_t n = 0, x = 0;
    while (x < ow) {
        if (xs[x] < 0) {
            x++;
            continue;
        }
        uint32_t o0 = x++;
        int dir = 0;
        for (; x < ow && xs[x] >= 0; x++) {
            int d = (xs[x] > xs[x - 1]) - (xs[x] < xs[x - 1]);
            if (d && !dir)
                dir = d;
            else if (d && d != dir)
                break;
        }
        seg[3 * n] = o0;
        seg[3 * n + 1] = x;
        seg[3 * n + 2] = dir < 0;
        n++;
    }
    return n;
}

/* The first x of [lo, hi) where xs[x] >= c (up: xs non-decreasing there) or xs[x] < c (down:
 * xs non-increasing); hi where there is none. */
static uint32_t col_bound(const int32_t *xs, uint32_t lo, uint32_t hi, int32_t c, int down)
{
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (down ? xs[mid] < c : xs[mid] >= c)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* The output intervals of source columns [a, b) (a < b) through the segments, appended to iv
 * as [x0, x1) pairs from iv[2 * n]; returns the new count. */
static uint32_t run_cols(const int32_t *xs, const uint32_t *seg, uint32_t nseg, int32_t a,
                         int32_t b, uint32_t *iv, uint32_t n)
{
    for (uint32_t k = 0; k < nseg; k++) {
        uint32_t o0 = seg[3 * k], o1 = seg[3 * k + 1];
        int down = (int)seg[3 * k + 2];
        int32_t first = xs[o0], last = xs[o1 - 1];
        int32_t lo = down ? last : first, hi = down ? first : last;
        if (b <= lo || a > hi)
            continue;
        uint32_t x0 = down ? col_bound(xs, o0, o1, b, 1) : col_bound(xs, o0, o1, a, 0);
        uint32_t x1 = down ? col_bound(xs, x0, o1, a, 1) : col_bound(xs, x0, o1, b, 0);
        if (x0 < x1) {
            iv[2 * n] = x0;
            iv[2 * n + 1] = x1;
            n++;
        }
    }
    return n;
}

/* out (ow x oh) from the runs first starts at, a mask's (0s and 1s alternating, from 0s) or,
 * with map, a label map's (value and length pairs), sw wide, through the tables: each output
 * row filled with fill, then each run of another value over the source row the row samples
 * set over its output intervals (run_cols); a row sampling the source row of the row sampled
 * before copies that row. Returns whether any interval was set. */
static int move_runs(const fmt_mask_runs *first, int map, uint32_t sw, const int32_t *xs,
                     const int32_t *ys, uint32_t ow, uint32_t oh, const uint32_t *seg,
                     uint32_t nseg, uint32_t *iv, uint8_t fill, uint8_t *out)
{
    fmt_mask_runs rr = *first;
    /* the current run: [start, end) of the flattened plane, value v; before the first, empty
     * (a mask's v flips as each run is read: 1 so that its first run is 0s) */
    uint64_t start = 0, end = 0;
    uint32_t v = 1, len;
    int64_t row = -1;           /* the source row the output row last sampled */
    uint32_t last = 0;
    int any = 0;
    for (uint32_t y = 0; y < oh; y++) {
        uint8_t *o = out + (size_t)y * ow;
        if (ys[y] < 0) {
            memset(o, fill, ow);
            continue;
        }
        if (ys[y] == row) {
            memcpy(o, out + (size_t)last * ow, ow);
            last = y;
            continue;
        }
        uint64_t r0 = (uint64_t)ys[y] * sw, r1 = r0 + sw;
        if (r0 < start) {       /* a row above the runs read: from the first run again */
            rr = *first;
            start = end = 0;
            v = 1;
        }
        memset(o, fill, ow);
        for (;;) {
            if (end > r0 && start < r1 && v != fill) {
                uint64_t a = start > r0 ? start : r0, b = end < r1 ? end : r1;
                uint32_t n = run_cols(xs, seg, nseg, (int32_t)(a - r0), (int32_t)(b - r0), iv, 0);
                for (uint32_t k = 0; k < n; k++)
                    memset(o + iv[2 * k], (int)v, iv[2 * k + 1] - iv[2 * k]);
                any |= n > 0;
            }
            if (end >= r1 || !(map ? fmt_map_run(&rr, &v, &len) : fmt_mask_run(&rr, &len)))
                break;
            v ^= !map;
            start = end;
            end += len;
        }
        row = ys[y];
        last = y;
    }
    return any;
}

int shr_segm_mask(const fmt_target *t, uint32_t i, const int32_t *xs, const int32_t *ys,
                  uint32_t ow, uint32_t oh, const uint32_t *seg, uint32_t nseg, uint32_t *iv,
                  uint8_t *out)
{
    fmt_mask_runs rr;
    if (fmt_target_mask_runs(t, i, &rr) != 0)
        return -1;
    return move_runs(&rr, 0, t->map_width, xs, ys, ow, oh, seg, nseg, iv, 0, out);
}

int shr_segm_map(const fmt_target *t, const int32_t *xs, const int32_t *ys, uint32_t ow,
                 uint32_t oh, const uint32_t *seg, uint32_t nseg, uint32_t *iv, uint8_t fill,
                 uint8_t *out)
{
    fmt_mask_runs rr;
    if (t->map_max > 255 || fmt_target_map_runs(t, &rr) != 0)
        return -1;
    (void)move_runs(&rr, 1, t->map_width, xs, ys, ow, oh, seg, nseg, iv, fill, out);
    return 0;
}

void shr_segm_warp_map(const uint8_t *m, uint32_t sw, const int32_t *xs, const int32_t *ys,
                       uint32_t ow, uint32_t oh, uint8_t fill, uint8_t *out)
{
    for (uint32_t y = 0; y < oh; y++) {
        uint8_t *row = out + (size_t)y * ow;
        if (ys[y] < 0) {
            memset(row, fill, ow);
            continue;
        }
        const uint8_t *src = m + (size_t)ys[y] * sw;
        for (uint32_t x = 0; x < ow; x++)
            row[x] = xs[x] < 0 ? fill : src[xs[x]];
    }
}

void shr_segm_warp_map16(const uint16_t *m, uint32_t sw, const int32_t *xs, const int32_t *ys,
                         uint32_t ow, uint32_t oh, uint16_t fill, uint16_t *out)
{
    for (uint32_t y = 0; y < oh; y++) {
        uint16_t *row = out + (size_t)y * ow;
        const uint16_t *src = ys[y] < 0 ? NULL : m + (size_t)ys[y] * sw;
        for (uint32_t x = 0; x < ow; x++)
            row[x] = !src || xs[x] < 0 ? fill : src[xs[x]];
    }
}

void shr_segm_frame(const shr_box_geom *g, const shr_params *p, uint32_t *gw, uint32_t *gh)
{
    int alone = shr_scale_per_image(g->scale);
    *gw = alone ? p->image_w : g->width;
    *gh = alone ? p->image_h : g->height;
}

int shr_segm_has_warps(const shr_params *p)
{
    if (p->rotate || p->affine)
        return 1;
    for (uint32_t i = 0; i < p->aa_ops && i < SHR_AA_MAX_OPS; i++)
        if (shr_aa_op_geometric(p->aa_op[i]))
            return 1;
    return 0;
}

int shr_segm_warp_plane(const shr_params *p, uint8_t *plane, size_t stride, uint32_t gw,
                        uint32_t gh, uint8_t fill, uint8_t *scratch)
{
    const uint8_t f4[4] = {fill, fill, fill, fill};
    size_t row = gw;
    /* the order of shr_aug_pixels: rotation, affine, then auto_augment's ops */
    if (p->rotate) {
        shr_affine_rotate(plane, stride, scratch, row, gw, gh, 1, (double)p->rotate_angle,
                          SHR_FILTER_NEAREST, f4);
        shr_tf_copy_rows(plane, stride, scratch, row, row, gh);
    }
    if (p->affine) {
        shr_affine_apply(plane, stride, scratch, row, gw, gh, 1, (double)p->affine_angle,
                         (double)p->affine_tx, (double)p->affine_ty, (double)p->affine_scale,
                         (double)p->affine_shear_x, (double)p->affine_shear_y, NULL,
                         SHR_FILTER_NEAREST, f4);
        shr_tf_copy_rows(plane, stride, scratch, row, row, gh);
    }
    for (uint32_t i = 0; i < p->aa_ops && i < SHR_AA_MAX_OPS; i++)
        if (shr_aa_op_geometric(p->aa_op[i]))
            shr_aa_apply_op(p->aa_op[i], (double)p->aa_magnitude[i], SHR_FILTER_NEAREST, f4,
                            plane, gw, gh, 1, stride, scratch);
    uint8_t any = 0;
    for (uint32_t y = 0; y < gh; y++)
        for (uint32_t x = 0; x < gw; x++)
            any |= plane[(size_t)y * stride + x];
    return any != 0;
}

void shr_segm_warp_plane16(const shr_params *p, uint16_t *map, uint32_t ow, uint32_t oh,
                           uint32_t gw, uint32_t gh, uint16_t fill, uint8_t *scratch)
{
    size_t n = (size_t)ow * oh;
    uint8_t *lo = scratch, *hi = scratch + n;
    for (size_t i = 0; i < n; i++) {
        lo[i] = (uint8_t)(map[i] & 0xff);
        hi[i] = (uint8_t)(map[i] >> 8);
    }
    shr_segm_warp_plane(p, lo, ow, gw, gh, (uint8_t)(fill & 0xff), scratch + 2 * n);
    shr_segm_warp_plane(p, hi, ow, gw, gh, (uint8_t)(fill >> 8), scratch + 2 * n);
    for (size_t i = 0; i < n; i++)
        map[i] = (uint16_t)(lo[i] | hi[i] << 8);
}

void shr_segm_keypoints(const shr_box_geom *g, const shr_params *p, const float *kp, uint32_t k,
                        const uint32_t *flip_idx, float *out)
{
    frame f;
    frame_of(g, p, &f);
    uint32_t gw, gh;
    shr_segm_frame(g, p, &gw, &gh);
    double w[SHR_BOX_MAX_WARPS][6];
    int nw = shr_box_warps(p, gw, gh, w);
    int flip = p->flip && flip_idx;
    for (uint32_t j = 0; j < k; j++) {
        const float *s = kp + 3 * (size_t)(flip ? flip_idx[j] : j);
        float *d = out + 3 * (size_t)j;
        double x = ((double)s[0] - p->x) * f.sx + f.dx;
        double y = ((double)s[1] - p->y) * f.sy + f.dy;
        int in = s[2] != 0.0f && x >= f.x0 && x <= f.x1 && y >= f.y0 && y <= f.y1;
        if (p->flip)
            x = f.fw - x;
        for (int n = 0; n < nw && in; n++) {
            double a = w[n][0] * x + w[n][1] * y + w[n][2];
            double b = w[n][3] * x + w[n][4] * y + w[n][5];
            x = a;
            y = b;
            in = x >= 0 && x <= gw && y >= 0 && y <= gh;
        }
        if (!in) {
            d[0] = d[1] = d[2] = 0.0f;
            continue;
        }
        d[0] = (float)x;
        d[1] = (float)y;
        d[2] = s[2];
    }
}
