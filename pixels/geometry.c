/* geometry.c - output geometry plans (torchvision's arithmetic) and the resize that applies
 * them (fmt_resample, Pillow's arithmetic).
 *
 * A plan never resizes a crop of the source: torchvision resizes the whole image and crops the
 * result, and a crop of a resize is not a resize of a crop (the filter reads neighbours across
 * the crop's edge). So the plan keeps the whole source as the box, the full resized size, and
 * the window of it that the crop keeps; fmt_resample_window computes only that window.
 */
#include "geometry.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FMT_GEOM_SHRINK_MARGIN
#define FMT_GEOM_SHRINK_MARGIN 3    /* decoded coverage >= this / 2 times the resize */
#endif

/* ---- plans ---- */

/* round(num / den), halves up; num < 2^64 - 2^32 holds for every product of two uint32. */
static uint64_t div_round(uint64_t num, uint64_t den)
{
    return (num + den / 2) / den;
}

static uint32_t clamp_side(uint64_t v, uint32_t hi)
{
    return v < 1 ? 1 : v > hi ? hi : (uint32_t)v;
}

/* int(a * b / c) as Python computes it: a * b is exact (< 2^53 for our sides), the true
 * division is correctly rounded to a double, int() truncates. */
static uint64_t py_int_div(uint64_t a, uint64_t b, uint64_t c)
{
    return (uint64_t)((double)(a * b) / (double)c);
}

/* torchvision's Resize(size, max_size) output for a w x h image (max_size 0 = none). Sides
 * that torchvision would make 0 (extreme aspect with max_size) become 1. */
static void tv_resize(uint32_t w, uint32_t h, uint32_t size, uint32_t max_size, uint64_t *ow,
                      uint64_t *oh)
{
    uint32_t shortv = w <= h ? w : h, longv = w <= h ? h : w;
    uint64_t ns = size, nl = py_int_div(size, longv, shortv);
    if (max_size && nl > max_size) {
        ns = py_int_div(max_size, ns, nl);
        nl = max_size;
    }
    if (ns < 1)
        ns = 1;
    if (nl < 1)
        nl = 1;
    *ow = w <= h ? ns : nl;
    *oh = w <= h ? nl : ns;
}

/* Scale (w, h) down so that its long side is max_side; the short side is derived from the
 * source aspect (sw, sh), not from the already rounded (w, h), to round only once. */
static void cap_long_side(uint32_t max_side, uint32_t sw, uint32_t sh, uint64_t *w, uint64_t *h)
{
    if (!max_side || (*w <= max_side && *h <= max_side))
        return;
    if (*w >= *h) {
        *w = max_side;
        *h = div_round((uint64_t)sh * max_side, sw);
        if (*h < 1)
            *h = 1;
    } else {
        *h = max_side;
        *w = div_round((uint64_t)sw * max_side, sh);
        if (*w < 1)
            *w = 1;
    }
}

/* torchvision's CenterCrop on one axis: an image side rs cropped (or zero-padded) to c. */
static void crop_axis(uint32_t rs, uint32_t c, uint32_t *dst_off, uint32_t *dst_len,
                      uint32_t *win)
{
    if (c > rs) {
        *dst_off = (c - rs) / 2;
        *dst_len = rs;
        *win = 0;
        return;
    }
    /* int(round(d / 2)) with Python's round: halves go to the even neighbour */
    uint32_t d = rs - c, q = d / 2;
    if ((d & 1) && (q & 1))
        q++;
    *dst_off = 0;
    *dst_len = c;
    *win = q;
}

/* Smallest (cover) or largest (fit) short side S whose torchvision resize of sw x sh covers /
 * fits in W x H; 0 when no S fits. Both tests are monotonic in S. */
static uint32_t search_short(uint32_t sw, uint32_t sh, uint32_t W, uint32_t H, int cover)
{
    uint32_t lo = 1, hi = W > H ? W : H;    /* S = max(W, H) always covers */
    uint64_t rw, rh;
    if (cover) {
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            tv_resize(sw, sh, mid, 0, &rw, &rh);
            if (rw >= W && rh >= H)
                hi = mid;
            else
                lo = mid + 1;
        }
        return lo;
    }
    tv_resize(sw, sh, 1, 0, &rw, &rh);
    if (rw > W || rh > H)
        return 0;
    while (lo < hi) {
        uint32_t mid = hi - (hi - lo) / 2;
        tv_resize(sw, sh, mid, 0, &rw, &rh);
        if (rw <= W && rh <= H)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

int fmt_geom_plan_for(const fmt_geom *g, uint32_t src_w, uint32_t src_h, fmt_geom_plan *p)
{
    if (!g || !p)
        return FMT_EINVAL;
    memset(p, 0, sizeof *p);
    if (src_w == 0 || src_h == 0 || (unsigned)g->filter >= FMT_FILTER_COUNT)
        return FMT_EINVAL;
    if ((g->crop_w == 0) != (g->crop_h == 0))
        return FMT_EINVAL;
    uint64_t rw, rh;            /* resized size */
    uint32_t cw = g->crop_w, chh = g->crop_h;
    switch (g->mode) {
    case FMT_GEOM_SIZE: {
        uint32_t W = g->width, H = g->height;
        if (W == 0 || H == 0 || cw)
            return FMT_EINVAL;
        if (W > FMT_GEOM_MAX_SIDE || H > FMT_GEOM_MAX_SIDE)
            return FMT_ETOOBIG;
        switch (g->fit) {
        case FMT_FIT_CROP:
            tv_resize(src_w, src_h, search_short(src_w, src_h, W, H, 1), 0, &rw, &rh);
            break;
        case FMT_FIT_PAD: {
            uint32_t s = search_short(src_w, src_h, W, H, 0);
            if (s) {
                tv_resize(src_w, src_h, s, 0, &rw, &rh);
            } else {
                /* so extreme an aspect that even a 1-pixel short side overflows: the long
                 * side is limited to the target */
                tv_resize(src_w, src_h, 1, 0, &rw, &rh);
                rw = rw > W ? W : rw;
                rh = rh > H ? H : rh;
            }
            break;
        }
        case FMT_FIT_STRETCH:
            rw = W;
            rh = H;
            break;
        default:
            return FMT_EINVAL;
        }
        cw = W;
        chh = H;
        break;
    }
    case FMT_GEOM_SHORT_SIDE:
        if (g->short_side == 0)
            return FMT_EINVAL;
        tv_resize(src_w, src_h, g->short_side, g->max_side, &rw, &rh);
        break;
    case FMT_GEOM_KEEP:
        rw = src_w;
        rh = src_h;
        cap_long_side(g->max_side, src_w, src_h, &rw, &rh);
        break;
    default:
        return FMT_EINVAL;
    }
    /* the resized image is only computed where the crop keeps it, so it may be larger than an
     * output may be (Resize(320) of a 1 x 4000 source is 320 x 1280000) */
    if (rw > FMT_RS_MAX_SIDE || rh > FMT_RS_MAX_SIDE || cw > FMT_GEOM_MAX_SIDE ||
        chh > FMT_GEOM_MAX_SIDE || (!cw && (rw > FMT_GEOM_MAX_SIDE || rh > FMT_GEOM_MAX_SIDE)))
        return FMT_ETOOBIG;
    fmt_geom_plan q = {0};
    q.src_w = src_w;
    q.src_h = src_h;
    q.box = (fmt_rs_box){0.0f, 0.0f, (float)src_w, (float)src_h};
    q.rs_w = (uint32_t)rw;
    q.rs_h = (uint32_t)rh;
    q.filter = g->filter;
    if (cw) {
        q.out_w = cw;
        q.out_h = chh;
        crop_axis(q.rs_w, cw, &q.dst_x, &q.dst_w, &q.win_x);
        crop_axis(q.rs_h, chh, &q.dst_y, &q.dst_h, &q.win_y);
    } else {
        q.out_w = q.dst_w = q.rs_w;
        q.out_h = q.dst_h = q.rs_h;
    }
    *p = q;
    return 0;
}

int fmt_geom_plan_decoded(const fmt_geom *g, uint32_t src_w, uint32_t src_h, uint32_t dec_w,
                          uint32_t dec_h, fmt_geom_plan *p)
{
    int rc = fmt_geom_plan_for(g, src_w, src_h, p);
    if (rc)
        return rc;
    return fmt_geom_plan_map(p, src_w, src_h, dec_w, dec_h);
}

int fmt_geom_plan_map(fmt_geom_plan *p, uint32_t src_w, uint32_t src_h, uint32_t dec_w,
                      uint32_t dec_h)
{
    if (dec_w == 0 || dec_h == 0 || dec_w > src_w || dec_h > src_h) {
        memset(p, 0, sizeof *p);
        return FMT_EINVAL;
    }
    if (dec_w == src_w && dec_h == src_h)
        return 0;
    /* A DCT-scaled decode at k/8 has ceil(side * k / 8) pixels, pixel j covering source
     * [8j / k, 8(j + 1) / k): the exact map is * k / 8, not dec / src. */
    double fx = (double)dec_w / src_w, fy = (double)dec_h / src_h;
    for (uint32_t k = 1; k < 8; k++) {
        if (((uint64_t)src_w * k + 7) / 8 == dec_w && ((uint64_t)src_h * k + 7) / 8 == dec_h) {
            fx = fy = k / 8.0;
            break;
        }
    }
    fmt_rs_box b = p->box;
    double x0 = b.x0 * fx, y0 = b.y0 * fy, x1 = b.x1 * fx, y1 = b.y1 * fy;
    x1 = x1 > dec_w ? dec_w : x1;
    y1 = y1 > dec_h ? dec_h : y1;
    p->box = (fmt_rs_box){(float)x0, (float)y0, (float)x1, (float)y1};
    if (p->box.x1 > (float)dec_w)
        p->box.x1 = (float)dec_w;
    if (p->box.y1 > (float)dec_h)
        p->box.y1 = (float)dec_h;
    p->src_x = (uint32_t)floor(p->box.x0);
    p->src_y = (uint32_t)floor(p->box.y0);
    p->src_w = clamp_side((uint64_t)ceil(p->box.x1) - p->src_x, dec_w - p->src_x);
    p->src_h = clamp_side((uint64_t)ceil(p->box.y1) - p->src_y, dec_h - p->src_y);
    return 0;
}

void fmt_geom_min_decode(const fmt_geom *g, uint32_t src_w, uint32_t src_h, uint32_t *min_w,
                         uint32_t *min_h)
{
    *min_w = 0;
    *min_h = 0;
    fmt_geom_plan p;
    if (!g || !g->shrink_on_load || fmt_geom_plan_for(g, src_w, src_h, &p) != 0)
        return;
    fmt_geom_plan_min_decode(g, &p, src_w, src_h, min_w, min_h);
}

void fmt_geom_plan_min_decode(const fmt_geom *g, const fmt_geom_plan *plan, uint32_t src_w,
                              uint32_t src_h, uint32_t *min_w, uint32_t *min_h)
{
    *min_w = 0;
    *min_h = 0;
    if (!g || !g->shrink_on_load)
        return;
    const fmt_geom_plan p = *plan;
    /* A decoder reduces both axes together, so an axis that keeps its size or grows rules out
     * any reduction. The decoded image at 1/d has ceil(side / d) pixels but covers side / d of
     * them, and the box is that: pick the smallest 1/d (d = 8, 4, 2, as the JPEG decoder
     * offers) with side / d >= 1.5 rs on both axes, and hint its decoded size, unless a
     * smaller scale has the same decoded size (tiny images), which the decoder would take.
     * The margin: the DCT's reduction acts like a box filter, and with the resize then
     * reducing by less than 1.5x the result drifted below 40 dB PSNR from the exact path on
     * some photos (down to 33 dB at 1x); with it the worst of 600 photos was 42 dB. */
    if (p.rs_w >= src_w || p.rs_h >= src_h)
        return;
    static const uint32_t denoms[] = {8, 4, 2};
    for (size_t i = 0; i < 3; i++) {
        uint64_t d = denoms[i];
        if (2 * (uint64_t)src_w < FMT_GEOM_SHRINK_MARGIN * d * p.rs_w ||
            2 * (uint64_t)src_h < FMT_GEOM_SHRINK_MARGIN * d * p.rs_h)
            continue;
        uint32_t w = (uint32_t)((src_w + d - 1) / d), h = (uint32_t)((src_h + d - 1) / d);
        int taken = 0;
        for (size_t j = 0; j < i; j++) {
            uint64_t e = denoms[j];
            taken |= (src_w + e - 1) / e >= w && (src_h + e - 1) / e >= h;
        }
        if (!taken) {
            *min_w = w;
            *min_h = h;
        }
        return;
    }
}

void fmt_geom_center_rect(const fmt_geom *g, uint32_t src_w, uint32_t src_h, uint32_t *x,
                          uint32_t *y, uint32_t *w, uint32_t *h)
{
    *x = *y = 0;
    *w = src_w;
    *h = src_h;
    if (!g || g->mode != FMT_GEOM_SIZE || g->fit != FMT_FIT_CROP || !g->width || !g->height ||
        !src_w || !src_h)
        return;
    uint32_t W = g->width, H = g->height;
    if ((uint64_t)src_w * H >= (uint64_t)src_h * W) {
        *w = clamp_side(div_round((uint64_t)src_h * W, H), src_w);
        *x = (src_w - *w) / 2;
    } else {
        *h = clamp_side(div_round((uint64_t)src_w * H, W), src_h);
        *y = (src_h - *h) / 2;
    }
}

static size_t cat(char *buf, size_t len, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static size_t cat(char *buf, size_t len, size_t at, const char *fmt, ...)
{
    if (at >= len)
        return at;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + at, len - at, fmt, ap);
    va_end(ap);
    return n < 0 ? at : at + (size_t)n;
}

void fmt_geom_chain(const fmt_geom *g, char *buf, size_t len)
{
    if (!len)
        return;
    buf[0] = '\0';
    size_t at = 0;
    const char *f = fmt_filter_name(g->filter);
    uint32_t cw = g->crop_w, chh = g->crop_h;
    switch (g->mode) {
    case FMT_GEOM_SIZE:
        if (g->fit == FMT_FIT_STRETCH) {
            at = cat(buf, len, at, "Resize((%u, %u), %s)", g->height, g->width, f);
            cw = 0;
        } else if (g->fit == FMT_FIT_CROP && g->width == g->height) {
            at = cat(buf, len, at, "Resize(%u, %s)", g->width, f);
        } else {
            at = cat(buf, len, at, "Resize(short side %s %ux%u, %s)",
                     g->fit == FMT_FIT_CROP ? "covering" : "fitting in", g->width, g->height, f);
        }
        if (g->fit != FMT_FIT_STRETCH) {
            cw = g->width;
            chh = g->height;
        }
        break;
    case FMT_GEOM_SHORT_SIDE:
        at = cat(buf, len, at, "Resize(%u, %s", g->short_side, f);
        at = g->max_side ? cat(buf, len, at, ", max_size=%u)", g->max_side)
                         : cat(buf, len, at, ")");
        break;
    default:
        at = g->max_side ? cat(buf, len, at, "long side capped at %u (%s)", g->max_side, f)
                         : cat(buf, len, at, "source size");
        break;
    }
    if (cw)
        at = cat(buf, len, at, " | CenterCrop((%u, %u))", chh, cw);
    if (g->shrink_on_load)
        cat(buf, len, at, " | shrink-on-load");
}

/* ---- the resizer ---- */

struct fmt_resizer {
    fmt_rs_scratch *rs;
};

int fmt_resizer_create_shared(fmt_rs_cache *cache, fmt_resizer **r)
{
    if (!r)
        return FMT_EINVAL;
    *r = calloc(1, sizeof **r);
    if (!*r)
        return ENOMEM;
    int rc = fmt_rs_scratch_create(cache, &(*r)->rs);
    if (rc) {
        free(*r);
        *r = NULL;
    }
    return rc;
}

int fmt_resizer_create(fmt_resizer **r)
{
    return fmt_resizer_create_shared(NULL, r);
}

void fmt_resizer_free(fmt_resizer *r)
{
    if (!r)
        return;
    fmt_rs_scratch_free(r->rs);
    free(r);
}

fmt_rs_scratch *fmt_resizer_scratch(fmt_resizer *r)
{
    return r ? r->rs : NULL;
}

static int plan_fits(const fmt_image *src, const fmt_geom_plan *p)
{
    const fmt_rs_box *b = &p->box;
    return p->rs_w && p->rs_h && p->dst_w && p->dst_h && p->out_w && p->out_h &&
           b->x0 >= 0.0f && b->y0 >= 0.0f && b->x1 <= (float)src->width &&
           b->y1 <= (float)src->height && b->x1 >= b->x0 && b->y1 >= b->y0 &&
           (uint64_t)p->win_x + p->dst_w <= p->rs_w && (uint64_t)p->win_y + p->dst_h <= p->rs_h &&
           (uint64_t)p->dst_x + p->dst_w <= p->out_w && (uint64_t)p->dst_y + p->dst_h <= p->out_h &&
           p->out_w <= FMT_GEOM_MAX_SIDE && p->out_h <= FMT_GEOM_MAX_SIDE &&
           p->rs_w <= FMT_GEOM_MAX_SIDE && p->rs_h <= FMT_GEOM_MAX_SIDE;
}

int fmt_resize_into(fmt_resizer *r, const fmt_image *src, const fmt_geom_plan *p, fmt_image *dst,
                    fmt_msg *msg)
{
    if (msg)
        msg->text[0] = '\0';
    if (!r || !src || !p || !dst || !src->pixels)
        return fmt_fail(msg, FMT_EINVAL, "invalid argument");
    if (src->channels != 1 && src->channels != 3)
        return fmt_fail(msg, FMT_EINVAL, "cannot resize %u channels", src->channels);
    if (!plan_fits(src, p))
        return fmt_fail(msg, FMT_EINVAL, "plan does not fit a %ux%u image", src->width,
                        src->height);
    uint32_t ch = src->channels;
    int rc = fmt_image_reserve(dst, p->out_w, p->out_h, ch);
    if (rc)
        return fmt_fail(msg, rc, "cannot allocate a %ux%u image", p->out_w, p->out_h);
    size_t ostride = (size_t)p->out_w * ch;
    if (p->dst_w != p->out_w || p->dst_h != p->out_h)
        memset(dst->pixels, 0, ostride * p->out_h);
    fmt_rs_view sv = {src->pixels, src->width, src->height, ch, (size_t)src->width * ch};
    fmt_rs_view dv = {dst->pixels + (size_t)p->dst_y * ostride + (size_t)p->dst_x * ch,
                      p->dst_w, p->dst_h, ch, ostride};
    return fmt_resample_window(r->rs, &sv, &p->box, p->filter, p->rs_w, p->rs_h, p->win_x,
                               p->win_y, &dv, msg);
}

void fmt_resize_source_rect(fmt_resizer *r, const fmt_geom_plan *p, uint32_t src_w,
                            uint32_t src_h, uint32_t rect[4])
{
    rect[0] = 0;
    rect[1] = 0;
    rect[2] = src_w;
    rect[3] = src_h;
    fmt_image src = {.width = src_w, .height = src_h, .channels = 3};
    if (!r || !p || !plan_fits(&src, p))
        return;
    if (fmt_resample_source_rect(r->rs, src_w, src_h, &p->box, p->filter, p->rs_w, p->rs_h,
                                 p->win_x, p->win_y, p->dst_w, p->dst_h, rect) != 0) {
        rect[0] = 0;
        rect[1] = 0;
        rect[2] = src_w;
        rect[3] = src_h;
    }
}

int fmt_resize(fmt_resizer *r, const fmt_image *src, const fmt_geom_plan *p, fmt_image *dst,
               fmt_msg *msg)
{
    if (dst)
        memset(dst, 0, sizeof *dst);
    int rc = fmt_resize_into(r, src, p, dst, msg);
    if (rc && dst)
        fmt_image_free(dst);
    return rc;
}
