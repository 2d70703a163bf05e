/* geometry.c - output geometry plans and the resize that applies them.
 *
 * Resizing is libswscale's Lanczos (a = 3), run on each channel as a separate GRAY8 plane.
 * scripts/resize-compare.md has the measurements behind the choice: of libswscale (area,
 * bicubic, lanczos; packed RGB24, planar GBRP, per-channel GRAY8) and stb_image_resize (all its
 * filters, linear and sRGB), this is the closest to Pillow's antialiased LANCZOS (~55 dB PSNR)
 * and among the fastest (~0.6 ms for 375x375 -> 224x224 RGB). Scaling packed RGB makes swscale
 * go through YUV internally, which costs accuracy and is no faster; GRAY8 planes keep the
 * channels apart and full range, so a constant colour stays exactly that colour.
 *
 * Reproducibility: SWS_BITEXACT | SWS_ACCURATE_RND make the SIMD paths produce the C
 * reference's bytes, and the resizer never shares state between threads. The planes handed
 * to swscale are 64-byte aligned with padded strides: swscale logs a warning (to stderr, through
 * the process-wide av_log) on unaligned buffers, and the padding keeps its vector loads and
 * stores inside our allocations.
 *
 * Two limits of swscale are handled here rather than met at run time:
 *  - a Lanczos downscale by more than about 28x on one axis exceeds swscale's filter size
 *    limit (170 taps with SWS_ACCURATE_RND); swscale then cascades through YUV420P, or fails
 *    (32768 -> 1). Above FMT_RZ_MAX_DOWN we first reduce that axis by exact area averaging
 *    (integer arithmetic) to FMT_RZ_PRE_DOWN times the target, so swscale only ever sees
 *    moderate factors;
 *  - an upscale by more than about 6900x on one axis fails; we upscale in steps of at most
 *    FMT_RZ_MAX_UP.
 */
#include "geometry.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <libswscale/swscale.h>

#define FMT_RZ_FLAGS (SWS_LANCZOS | SWS_BITEXACT | SWS_ACCURATE_RND)
#define FMT_RZ_MAX_DOWN 16u     /* largest per-axis reduction handed to swscale */
#define FMT_RZ_PRE_DOWN 8u      /* area pre-reduction lands at this multiple of the target */
#define FMT_RZ_MAX_UP 4096u     /* largest per-axis enlargement handed to swscale in one step */
#define FMT_RZ_CACHE 4          /* scaler contexts kept per resizer */
#define FMT_RZ_ALIGN 64u
#define FMT_RZ_KEEP_BYTES (32u << 20) /* scratch kept between calls; larger is released */

/* ---- plans ---- */

/* round(num / den), halves up; num < 2^64 - 2^32 holds for every product of two uint32. */
static uint64_t div_round(uint64_t num, uint64_t den)
{
    return (num + den / 2) / den;
}

static uint64_t div_ceil(uint64_t num, uint64_t den)
{
    return num / den + (num % den != 0);
}

static uint32_t clamp_side(uint64_t v, uint32_t hi)
{
    return v < 1 ? 1 : v > hi ? hi : (uint32_t)v;
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

int fmt_geom_plan_for(const fmt_geom *g, uint32_t src_w, uint32_t src_h, fmt_geom_plan *p)
{
    if (!g || !p)
        return FMT_EINVAL;
    memset(p, 0, sizeof *p);
    if (src_w == 0 || src_h == 0)
        return FMT_EINVAL;
    fmt_geom_plan q = {0};
    q.src_w = src_w;
    q.src_h = src_h;
    switch (g->mode) {
    case FMT_GEOM_SIZE: {
        uint32_t W = g->width, H = g->height;
        if (W == 0 || H == 0)
            return FMT_EINVAL;
        if (W > FMT_GEOM_MAX_SIDE || H > FMT_GEOM_MAX_SIDE)
            return FMT_ETOOBIG;
        q.out_w = q.dst_w = W;
        q.out_h = q.dst_h = H;
        /* Is the source at least as wide as the target, aspect-wise? */
        int wider = (uint64_t)src_w * H >= (uint64_t)src_h * W;
        switch (g->fit) {
        case FMT_FIT_CROP:
            if (wider) {
                q.src_w = clamp_side(div_round((uint64_t)src_h * W, H), src_w);
                q.src_x = (src_w - q.src_w) / 2;
            } else {
                q.src_h = clamp_side(div_round((uint64_t)src_w * H, W), src_h);
                q.src_y = (src_h - q.src_h) / 2;
            }
            break;
        case FMT_FIT_PAD:
            if (wider) {
                q.dst_h = clamp_side(div_round((uint64_t)src_h * W, src_w), H);
                q.dst_y = (H - q.dst_h) / 2;
            } else {
                q.dst_w = clamp_side(div_round((uint64_t)src_w * H, src_h), W);
                q.dst_x = (W - q.dst_w) / 2;
            }
            break;
        case FMT_FIT_STRETCH:
            break;
        default:
            return FMT_EINVAL;
        }
        break;
    }
    case FMT_GEOM_SHORT_SIDE:
    case FMT_GEOM_KEEP: {
        uint64_t w = src_w, h = src_h;
        if (g->mode == FMT_GEOM_SHORT_SIDE) {
            uint32_t s = g->short_side;
            if (s == 0)
                return FMT_EINVAL;
            if (src_w <= src_h) {
                w = s;
                h = div_round((uint64_t)src_h * s, src_w);
            } else {
                h = s;
                w = div_round((uint64_t)src_w * s, src_h);
            }
        }
        cap_long_side(g->max_side, src_w, src_h, &w, &h);
        if (w > FMT_GEOM_MAX_SIDE || h > FMT_GEOM_MAX_SIDE)
            return FMT_ETOOBIG;
        q.out_w = q.dst_w = (uint32_t)w;
        q.out_h = q.dst_h = (uint32_t)h;
        break;
    }
    default:
        return FMT_EINVAL;
    }
    *p = q;
    return 0;
}

/* Map the span [*x, *x + *w) of an axis of n pixels onto the same axis decoded at m pixels. */
static void map_span(uint32_t *x, uint32_t *w, uint32_t n, uint32_t m)
{
    uint64_t a = div_round((uint64_t)*x * m, n), b = div_round(((uint64_t)*x + *w) * m, n);
    if (b > m)
        b = m;
    if (b <= a) {
        if (a >= m)
            a = m - 1;
        b = a + 1;
    }
    *x = (uint32_t)a;
    *w = (uint32_t)(b - a);
}

int fmt_geom_plan_decoded(const fmt_geom *g, uint32_t src_w, uint32_t src_h, uint32_t dec_w,
                          uint32_t dec_h, fmt_geom_plan *p)
{
    int rc = fmt_geom_plan_for(g, src_w, src_h, p);
    if (rc)
        return rc;
    if (dec_w == 0 || dec_h == 0) {
        memset(p, 0, sizeof *p);
        return FMT_EINVAL;
    }
    map_span(&p->src_x, &p->src_w, src_w, dec_w);
    map_span(&p->src_y, &p->src_h, src_h, dec_h);
    return 0;
}

void fmt_geom_min_decode(const fmt_geom *g, uint32_t src_w, uint32_t src_h, uint32_t *min_w,
                         uint32_t *min_h)
{
    *min_w = 0;
    *min_h = 0;
    fmt_geom_plan p;
    if (fmt_geom_plan_for(g, src_w, src_h, &p) != 0)
        return;
    /* A decoder reduces both axes together, so an axis that keeps its size or grows rules out
     * any reduction. */
    if (p.dst_w >= p.src_w || p.dst_h >= p.src_h)
        return;
    /* The whole source at the plan's scale, rounded up so that the fresh plan made on the
     * decoded size (whose crop is the decoded size times the same fraction) still covers the
     * target on both axes. */
    *min_w = (uint32_t)div_ceil((uint64_t)src_w * p.dst_w, p.src_w);
    *min_h = (uint32_t)div_ceil((uint64_t)src_h * p.dst_h, p.src_h);
}

/* ---- the resizer ---- */

typedef struct {
    struct SwsContext *sws;
    int sw, sh, dw, dh;
    uint64_t used;              /* tick of the last use, for LRU replacement */
} rz_entry;

/* Planar scratch image: `channels` planes of h rows of `stride` bytes, one after another. */
typedef struct {
    uint8_t *data;
    size_t cap;
    uint32_t w, h, channels;
    size_t stride;
} rz_planes;

struct fmt_resizer {
    rz_entry cache[FMT_RZ_CACHE];
    uint64_t tick;
    rz_planes buf[2];           /* ping-pong between stages */
    uint64_t *acc;              /* area reduction accumulator row */
    size_t acc_cap;
};

int fmt_resizer_create(fmt_resizer **r)
{
    if (!r)
        return FMT_EINVAL;
    *r = calloc(1, sizeof **r);
    return *r ? 0 : ENOMEM;
}

void fmt_resizer_free(fmt_resizer *r)
{
    if (!r)
        return;
    for (int i = 0; i < FMT_RZ_CACHE; i++)
        sws_freeContext(r->cache[i].sws);
    free(r->buf[0].data);
    free(r->buf[1].data);
    free(r->acc);
    free(r);
}

static uint8_t *plane(const rz_planes *b, uint32_t c)
{
    return b->data + (size_t)c * b->stride * b->h;
}

/* Shape b as channels planes of w x h, growing its buffer when needed. The stride leaves at
 * least FMT_RZ_ALIGN bytes after each row and the buffer as much after the last plane. */
static int planes_shape(rz_planes *b, uint32_t w, uint32_t h, uint32_t channels)
{
    size_t stride = ((size_t)w + 2 * FMT_RZ_ALIGN - 1) & ~(size_t)(FMT_RZ_ALIGN - 1);
    if (stride > (size_t)INT32_MAX || h > (uint32_t)INT32_MAX ||
        h > SIZE_MAX / stride / channels)
        return FMT_ETOOBIG;
    size_t need = stride * h * channels + FMT_RZ_ALIGN;
    if (need > b->cap) {
        free(b->data);
        b->cap = 0;
        b->data = aligned_alloc(FMT_RZ_ALIGN, need);
        if (!b->data)
            return ENOMEM;
        b->cap = need;
    }
    b->w = w;
    b->h = h;
    b->channels = channels;
    b->stride = stride;
    return 0;
}

/* Copy the plan's source rectangle of src into one plane per channel. */
static void split(const fmt_image *src, const fmt_geom_plan *p, rz_planes *b)
{
    uint32_t ch = src->channels;
    size_t sstride = (size_t)src->width * ch;
    for (uint32_t y = 0; y < p->src_h; y++) {
        const uint8_t *s = src->pixels + (size_t)(p->src_y + y) * sstride + (size_t)p->src_x * ch;
        size_t off = (size_t)y * b->stride;
        if (ch == 1) {
            memcpy(b->data + off, s, p->src_w);
            continue;
        }
        uint8_t *d0 = plane(b, 0) + off, *d1 = plane(b, 1) + off, *d2 = plane(b, 2) + off;
        for (uint32_t x = 0; x < p->src_w; x++, s += 3) {
            d0[x] = s[0];
            d1[x] = s[1];
            d2[x] = s[2];
        }
    }
}

/* Interleave the planes of b into out at (x0, y0). */
static void merge(const rz_planes *b, fmt_image *out, uint32_t x0, uint32_t y0)
{
    uint32_t ch = out->channels;
    size_t ostride = (size_t)out->width * ch;
    for (uint32_t y = 0; y < b->h; y++) {
        uint8_t *d = out->pixels + (size_t)(y0 + y) * ostride + (size_t)x0 * ch;
        size_t off = (size_t)y * b->stride;
        if (ch == 1) {
            memcpy(d, b->data + off, b->w);
            continue;
        }
        const uint8_t *s0 = plane(b, 0) + off, *s1 = plane(b, 1) + off, *s2 = plane(b, 2) + off;
        for (uint32_t x = 0; x < b->w; x++, d += 3) {
            d[0] = s0[x];
            d[1] = s1[x];
            d[2] = s2[x];
        }
    }
}

/* Exact area average of n source samples (step apart) into m < n outputs: output i covers
 * source span [i*n/m, (i+1)*n/m). Working in units of 1/m of a source pixel (so source pixel
 * j is [j*m, (j+1)*m) and output i is [i*n, (i+1)*n)), every weight is an integer and each
 * output's weights sum to n. */
static void area_line(const uint8_t *s, size_t sstep, uint32_t n, uint8_t *d, size_t dstep,
                      uint32_t m)
{
    uint64_t j = 0;
    for (uint32_t i = 0; i < m; i++) {
        uint64_t lo = (uint64_t)i * n, hi = lo + n, acc = 0;
        for (j = lo / m; j * m < hi; j++) {
            uint64_t a = j * m > lo ? j * m : lo, e = (j + 1) * m < hi ? (j + 1) * m : hi;
            acc += (e - a) * s[j * sstep];
        }
        d[(size_t)i * dstep] = (uint8_t)((acc + n / 2) / n);
    }
}

static int area_reduce_w(const rz_planes *a, rz_planes *b, uint32_t m)
{
    int rc = planes_shape(b, m, a->h, a->channels);
    if (rc)
        return rc;
    for (uint32_t c = 0; c < a->channels; c++)
        for (uint32_t y = 0; y < a->h; y++)
            area_line(plane(a, c) + (size_t)y * a->stride, 1, a->w,
                      plane(b, c) + (size_t)y * b->stride, 1, m);
    return 0;
}

/* The vertical counterpart accumulates whole rows, so memory is read in order. */
static int area_reduce_h(fmt_resizer *r, const rz_planes *a, rz_planes *b, uint32_t m)
{
    int rc = planes_shape(b, a->w, m, a->channels);
    if (rc)
        return rc;
    if (r->acc_cap < a->w) {
        free(r->acc);
        r->acc_cap = 0;
        r->acc = malloc(sizeof *r->acc * a->w);
        if (!r->acc)
            return ENOMEM;
        r->acc_cap = a->w;
    }
    uint32_t n = a->h;
    for (uint32_t c = 0; c < a->channels; c++) {
        for (uint32_t i = 0; i < m; i++) {
            uint64_t lo = (uint64_t)i * n, hi = lo + n;
            memset(r->acc, 0, sizeof *r->acc * a->w);
            for (uint64_t j = lo / m; j * m < hi; j++) {
                uint64_t s0 = j * m > lo ? j * m : lo, e = (j + 1) * m < hi ? (j + 1) * m : hi;
                uint64_t wgt = e - s0;
                const uint8_t *row = plane(a, c) + (size_t)j * a->stride;
                for (uint32_t x = 0; x < a->w; x++)
                    r->acc[x] += wgt * row[x];
            }
            uint8_t *out = plane(b, c) + (size_t)i * b->stride;
            for (uint32_t x = 0; x < a->w; x++)
                out[x] = (uint8_t)((r->acc[x] + n / 2) / n);
        }
    }
    return 0;
}

static struct SwsContext *get_scaler(fmt_resizer *r, int sw, int sh, int dw, int dh)
{
    rz_entry *victim = &r->cache[0];
    r->tick++;
    for (int i = 0; i < FMT_RZ_CACHE; i++) {
        rz_entry *e = &r->cache[i];
        if (e->sws && e->sw == sw && e->sh == sh && e->dw == dw && e->dh == dh) {
            e->used = r->tick;
            return e->sws;
        }
        if (!e->sws || (victim->sws && e->used < victim->used))
            victim = e;
    }
    /* sws_getCachedContext reuses victim's context when only cheap parameters differ and
     * frees it otherwise; either way victim->sws is no longer valid on its own. */
    struct SwsContext *c = sws_getCachedContext(victim->sws, sw, sh, AV_PIX_FMT_GRAY8, dw, dh,
                                                AV_PIX_FMT_GRAY8, FMT_RZ_FLAGS, NULL, NULL, NULL);
    victim->sws = c;
    victim->sw = sw;
    victim->sh = sh;
    victim->dw = dw;
    victim->dh = dh;
    victim->used = r->tick;
    return c;
}

static int sws_stage(fmt_resizer *r, const rz_planes *a, rz_planes *b, uint32_t w, uint32_t h,
                     fmt_msg *msg)
{
    int rc = planes_shape(b, w, h, a->channels);
    if (rc)
        return rc;
    struct SwsContext *c = get_scaler(r, (int)a->w, (int)a->h, (int)w, (int)h);
    if (!c)
        return fmt_fail(msg, FMT_EUNSUPPORTED, "scaler cannot map %ux%u to %ux%u", a->w, a->h,
                        w, h);
    for (uint32_t ch = 0; ch < a->channels; ch++) {
        const uint8_t *in[4] = {plane(a, ch)};
        int in_stride[4] = {(int)a->stride};
        uint8_t *out[4] = {plane(b, ch)};
        int out_stride[4] = {(int)b->stride};
        if (sws_scale(c, in, in_stride, 0, (int)a->h, out, out_stride) != (int)h)
            return fmt_fail(msg, FMT_EUNSUPPORTED, "scaler failed on %ux%u to %ux%u", a->w,
                            a->h, w, h);
    }
    return 0;
}

/* The next size on one axis: at most FMT_RZ_MAX_UP times larger than cur. */
static uint32_t up_step(uint32_t cur, uint32_t target)
{
    uint64_t lim = (uint64_t)cur * FMT_RZ_MAX_UP;
    return target > lim ? (uint32_t)lim : target;
}

/* Rectangle copy for plans that do not scale. */
static void copy_rect(const fmt_image *src, const fmt_geom_plan *p, fmt_image *out)
{
    uint32_t ch = src->channels;
    size_t sstride = (size_t)src->width * ch, ostride = (size_t)out->width * ch;
    for (uint32_t y = 0; y < p->src_h; y++)
        memcpy(out->pixels + (size_t)(p->dst_y + y) * ostride + (size_t)p->dst_x * ch,
               src->pixels + (size_t)(p->src_y + y) * sstride + (size_t)p->src_x * ch,
               (size_t)p->src_w * ch);
}

/* A resizer lives as long as its worker thread; one huge image should not pin its scratch
 * (hundreds of MB for a 10k x 10k source) for the rest of the run. */
static void release_large(fmt_resizer *r)
{
    for (int i = 0; i < 2; i++) {
        if (r->buf[i].cap > FMT_RZ_KEEP_BYTES) {
            free(r->buf[i].data);
            memset(&r->buf[i], 0, sizeof r->buf[i]);
        }
    }
    if (r->acc_cap * sizeof *r->acc > FMT_RZ_KEEP_BYTES) {
        free(r->acc);
        r->acc = NULL;
        r->acc_cap = 0;
    }
}

static int plan_fits(const fmt_image *src, const fmt_geom_plan *p)
{
    return p->src_w && p->src_h && p->dst_w && p->dst_h &&
           (uint64_t)p->src_x + p->src_w <= src->width &&
           (uint64_t)p->src_y + p->src_h <= src->height &&
           (uint64_t)p->dst_x + p->dst_w <= p->out_w && (uint64_t)p->dst_y + p->dst_h <= p->out_h &&
           p->out_w <= FMT_GEOM_MAX_SIDE && p->out_h <= FMT_GEOM_MAX_SIDE;
}

int fmt_resize(fmt_resizer *r, const fmt_image *src, const fmt_geom_plan *p, fmt_image *dst,
               fmt_msg *msg)
{
    if (msg)
        msg->text[0] = '\0';
    if (dst)
        memset(dst, 0, sizeof *dst);
    if (!r || !src || !p || !dst || !src->pixels)
        return fmt_fail(msg, FMT_EINVAL, "invalid argument");
    if (src->channels != 1 && src->channels != 3)
        return fmt_fail(msg, FMT_EINVAL, "cannot resize %u channels", src->channels);
    if (!plan_fits(src, p))
        return fmt_fail(msg, FMT_EINVAL, "plan does not fit a %ux%u image", src->width,
                        src->height);
    uint32_t ch = src->channels;
    uint64_t bytes = (uint64_t)p->out_w * p->out_h * ch;   /* < 2^41 by FMT_GEOM_MAX_SIDE */
    if (bytes > SIZE_MAX)
        return fmt_fail(msg, ENOMEM, "output of %ux%u is too large", p->out_w, p->out_h);
    int padded = p->dst_w != p->out_w || p->dst_h != p->out_h;
    fmt_image out = {NULL, p->out_w, p->out_h, ch};
    out.pixels = padded ? calloc(1, (size_t)bytes) : malloc((size_t)bytes);
    if (!out.pixels)
        return fmt_fail(msg, ENOMEM, "cannot allocate a %ux%u image", p->out_w, p->out_h);
    int rc = 0;
    if (p->src_w == p->dst_w && p->src_h == p->dst_h) {
        copy_rect(src, p, &out);
        goto done;
    }
    rz_planes *a = &r->buf[0], *b = &r->buf[1], *t;
    rc = planes_shape(a, p->src_w, p->src_h, ch);
    if (rc)
        goto fail;
    split(src, p, a);
    if (a->w > (uint64_t)FMT_RZ_MAX_DOWN * p->dst_w) {
        rc = area_reduce_w(a, b, FMT_RZ_PRE_DOWN * p->dst_w);
        if (rc)
            goto fail;
        t = a, a = b, b = t;
    }
    if (a->h > (uint64_t)FMT_RZ_MAX_DOWN * p->dst_h) {
        rc = area_reduce_h(r, a, b, FMT_RZ_PRE_DOWN * p->dst_h);
        if (rc)
            goto fail;
        t = a, a = b, b = t;
    }
    while (a->w != p->dst_w || a->h != p->dst_h) {
        rc = sws_stage(r, a, b, up_step(a->w, p->dst_w), up_step(a->h, p->dst_h), msg);
        if (rc)
            goto fail;
        t = a, a = b, b = t;
    }
    merge(a, &out, p->dst_x, p->dst_y);
    release_large(r);
done:
    *dst = out;
    return 0;
fail:
    release_large(r);
    free(out.pixels);
    if (rc == ENOMEM || rc == FMT_ETOOBIG)
        return fmt_fail(msg, rc, "cannot allocate scratch for %ux%u to %ux%u", p->src_w,
                        p->src_h, p->dst_w, p->dst_h);
    return rc;
}
