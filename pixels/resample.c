/* resample.c - Pillow-exact resampling (see resample.h for what is computed).
 *
 * Why the arithmetic is what it is: Pillow builds each axis's coefficients in double precision
 * (filter values at (i + xmin - centre + 0.5) / filterscale, divided by their sum), rounds them
 * half away from zero to 22-bit integers, and sums pixel * coefficient in a 32-bit int starting
 * at 2^21, then takes bits 22..29 clamped to 0..255. To give its bytes we compute the doubles
 * with the same expressions in the same order and types (box edges are floats: their
 * difference is a float subtraction), and do the same integer sums. Integer addition is
 * associative, so the vector loops may add the products in any order and still give the plain
 * loop's bytes; no sum can overflow (|coefficients| sum to less than 2^23 and pixels are < 2^8).
 *
 * Tables: one per axis and geometry, with per-output (first tap, tap count) and the taps padded
 * with zeros to a multiple of 8, so a vector loop may read whole vectors of coefficients.
 *
 * Passes: the horizontal and vertical loops, plain C and vector, are resample_simd.c's; this file
 * builds and caches the tables, chooses a scratch's path and plans the passes of a window.
 */
#include "resample.h"
#include "resample_int.h"
#include "simd.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define RS_BUCKETS 1024u
#define RS_MEMO 8                       /* tables a scratch remembers */
#define RS_MAX_TAPS ((size_t)1 << 28)   /* out_len * stride bound of one table */

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* ---- filters (Pillow's definitions) ---- */

static double f_box(double x)
{
    return x > -0.5 && x <= 0.5 ? 1.0 : 0.0;
}

static double f_bilinear(double x)
{
    if (x < 0.0)
        x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

static double f_hamming(double x)
{
    if (x < 0.0)
        x = -x;
    if (x == 0.0)
        return 1.0;
    if (x >= 1.0)
        return 0.0;
    x = x * M_PI;
    /* the constants are single precision in Pillow */
    return sin(x) / x * (0.54f + 0.46f * cos(x));
}

static double f_bicubic(double x)
{
    const double a = -0.5;
    if (x < 0.0)
        x = -x;
    if (x < 1.0)
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0)
        return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

static double sinc(double x)
{
    if (x == 0.0)
        return 1.0;
    x = x * M_PI;
    return sin(x) / x;
}

static double f_lanczos(double x)
{
    return -3.0 <= x && x < 3.0 ? sinc(x) * sinc(x / 3) : 0.0;
}

static const struct {
    const char *name;
    double (*fn)(double);
    double support;
} filters[FMT_FILTER_COUNT] = {
    [FMT_FILTER_NEAREST] = {"nearest", NULL, 0.0},
    [FMT_FILTER_BOX] = {"box", f_box, 0.5},
    [FMT_FILTER_BILINEAR] = {"bilinear", f_bilinear, 1.0},
    [FMT_FILTER_HAMMING] = {"hamming", f_hamming, 1.0},
    [FMT_FILTER_BICUBIC] = {"bicubic", f_bicubic, 2.0},
    [FMT_FILTER_LANCZOS] = {"lanczos", f_lanczos, 3.0},
};

const char *fmt_filter_name(fmt_filter f)
{
    return (unsigned)f < FMT_FILTER_COUNT ? filters[f].name : "unknown";
}

int fmt_filter_parse(const char *name, fmt_filter *f)
{
    for (int i = 0; name && i < FMT_FILTER_COUNT; i++) {
        if (strcmp(name, filters[i].name) == 0) {
            *f = (fmt_filter)i;
            return 0;
        }
    }
    return FMT_EINVAL;
}

/* ---- coefficient tables ---- */


static int same_key(const rs_table *t, uint32_t in_len, float b0, float b1, uint32_t out_len,
                    fmt_filter f)
{
    return t->in_len == in_len && t->out_len == out_len && t->filter == f &&
           memcmp(&t->b0, &b0, sizeof b0) == 0 && memcmp(&t->b1, &b1, sizeof b1) == 0;
}

static void table_free(rs_table *t)
{
    if (!t)
        return;
    free(t->span);
    free(t->k);
    free(t->kp);
    free(t);
}

/* Build the table the way Pillow's precompute_coeffs + normalize_coeffs_8bpc does. */
static int table_build(uint32_t in_len, float b0, float b1, uint32_t out_len, fmt_filter f,
                       rs_table **out)
{
    *out = NULL;
    double support, scale, filterscale;
    filterscale = scale = (double)(b1 - b0) / out_len;
    if (filterscale < 1.0)
        filterscale = 1.0;
    support = filters[f].support * filterscale;
    double ksize_d = ceil(support) * 2 + 1;
    if (ksize_d > (double)RS_MAX_TAPS)
        return FMT_ETOOBIG;
    size_t ksize = (size_t)ksize_d;
    size_t stride = (ksize + 7) & ~(size_t)7;
    if (stride > RS_MAX_TAPS / out_len)
        return FMT_ETOOBIG;
    rs_table *t = calloc(1, sizeof *t);
    double *w = malloc(ksize * sizeof *w);
    if (!t || !w)
        goto nomem;
    t->in_len = in_len;
    t->out_len = out_len;
    t->b0 = b0;
    t->b1 = b1;
    t->filter = f;
    t->stride = (uint32_t)stride;
    t->span = malloc(2 * sizeof *t->span * out_len);
    t->k = calloc(stride * out_len, sizeof *t->k);
    if (!t->span || !t->k)
        goto nomem;
    t->bytes = sizeof *t + 2 * sizeof *t->span * out_len + stride * out_len * sizeof *t->k;
    double ss = 1.0 / filterscale;
    for (uint32_t xx = 0; xx < out_len; xx++) {
        double center = b0 + (xx + 0.5) * scale;
        double ww = 0.0;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0)
            xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > (int)in_len)
            xmax = (int)in_len;
        xmax -= xmin;
        if (xmax < 0)
            xmax = 0;
        for (int x = 0; x < xmax; x++) {
            w[x] = filters[f].fn((x + xmin - center + 0.5) * ss);
            ww += w[x];
        }
        int32_t *k = t->k + (size_t)xx * stride;
        for (int x = 0; x < xmax; x++) {
            double v = ww != 0.0 ? w[x] / ww : w[x];
            k[x] = v < 0 ? (int32_t)(-0.5 + v * (1 << RS_BITS))
                         : (int32_t)(0.5 + v * (1 << RS_BITS));
        }
        t->span[2 * xx] = xmin;
        t->span[2 * xx + 1] = xmax;
    }
    free(w);
    w = NULL;
    t->kp = malloc(stride * out_len * sizeof *t->kp);
    if (!t->kp)
        goto nomem;
    t->bytes += stride * out_len * sizeof *t->kp;
    for (size_t i = 0; i < stride * out_len && t->kp; i += 2) {
        /* k[i + 1] is 0 past the count (stride > count when the count is odd) */
        int32_t a = t->k[i], b = t->k[i + 1];
        int32_t ah = a >> 11, bh = b >> 11;     /* arithmetic: a == ah * 2048 + (a & 2047) */
        if (ah < INT16_MIN || ah > INT16_MAX || bh < INT16_MIN || bh > INT16_MAX) {
            free(t->kp);
            t->kp = NULL;
            break;
        }
        t->kp[i] = (uint16_t)ah | (uint32_t)(uint16_t)bh << 16;
        t->kp[i + 1] = (uint32_t)(a & 2047) | (uint32_t)(b & 2047) << 16;
    }
    *out = t;
    return 0;
nomem:
    free(w);
    table_free(t);
    return ENOMEM;
}

struct fmt_rs_cache {
    pthread_mutex_t lock;
    rs_table *bucket[RS_BUCKETS];
    size_t count, bytes;
};

int fmt_rs_cache_create(fmt_rs_cache **c)
{
    if (!c)
        return FMT_EINVAL;
    *c = calloc(1, sizeof **c);
    if (!*c)
        return ENOMEM;
    if (pthread_mutex_init(&(*c)->lock, NULL) != 0) {
        free(*c);
        *c = NULL;
        return ENOMEM;
    }
    return 0;
}

void fmt_rs_cache_free(fmt_rs_cache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < RS_BUCKETS; i++) {
        for (rs_table *t = c->bucket[i], *n; t; t = n) {
            n = t->next;
            table_free(t);
        }
    }
    pthread_mutex_destroy(&c->lock);
    free(c);
}

size_t fmt_rs_cache_count(fmt_rs_cache *c)
{
    if (!c)
        return 0;
    pthread_mutex_lock(&c->lock);
    size_t n = c->count;
    pthread_mutex_unlock(&c->lock);
    return n;
}

static uint32_t key_hash(uint32_t in_len, float b0, float b1, uint32_t out_len, fmt_filter f)
{
    uint32_t u0, u1;
    memcpy(&u0, &b0, 4);
    memcpy(&u1, &b1, 4);
    uint64_t h = 0x9e3779b97f4a7c15ull;
    uint64_t parts[5] = {in_len, out_len, u0, u1, (uint64_t)f};
    for (int i = 0; i < 5; i++) {
        h ^= parts[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 33;
    }
    return (uint32_t)(h % RS_BUCKETS);
}

static rs_table *bucket_find(rs_table *t, uint32_t in_len, float b0, float b1, uint32_t out_len,
                             fmt_filter f)
{
    for (; t; t = t->next)
        if (same_key(t, in_len, b0, b1, out_len, f))
            return t;
    return NULL;
}

/* ---- scratch ---- */

typedef struct {
    rs_table *t;
    int owned;                  /* not in the cache: freed by the scratch */
    uint64_t used;
} rs_memo;

struct fmt_rs_scratch {
    fmt_rs_cache *cache;
    fmt_rs_path path;
    rs_memo memo[RS_MEMO];
    uint64_t tick;
    uint8_t *tmp;               /* horizontally resized rows */
    size_t tmp_cap;
    int32_t *xin;               /* nearest: source column per output column */
    size_t xin_cap;
    uint8_t *strip;             /* 8 rows transposed, for the vector horizontal pass */
    size_t strip_cap;
};

static int cpu_has(unsigned features, fmt_rs_path p)
{
#ifdef FMT_AVX512
    if (p == FMT_RS_PATH_AVX512)
        return (features & FMT_CPU_AVX2) && (features & FMT_CPU_AVX512);
#endif
    if (p == FMT_RS_PATH_AVX2)
        return (features & FMT_CPU_AVX2) != 0;
    if (p == FMT_RS_PATH_SSE41)
        return (features & FMT_CPU_SSE41) != 0;
    return p == FMT_RS_PATH_PLAIN;
}

static fmt_rs_path best_path(unsigned features)
{
    if (cpu_has(features, FMT_RS_PATH_AVX512) && fmt_simd_avx512())
        return FMT_RS_PATH_AVX512;
    if (cpu_has(features, FMT_RS_PATH_AVX2))
        return FMT_RS_PATH_AVX2;
    if (cpu_has(features, FMT_RS_PATH_SSE41))
        return FMT_RS_PATH_SSE41;
    return FMT_RS_PATH_PLAIN;
}

int fmt_rs_scratch_create(fmt_rs_cache *cache, fmt_rs_scratch **s)
{
    if (!s)
        return FMT_EINVAL;
    *s = calloc(1, sizeof **s);
    if (!*s)
        return ENOMEM;
    (*s)->cache = cache;
    (*s)->path = best_path(fmt_simd_features());
    return 0;
}

void fmt_rs_scratch_free(fmt_rs_scratch *s)
{
    if (!s)
        return;
    for (int i = 0; i < RS_MEMO; i++)
        if (s->memo[i].owned)
            table_free(s->memo[i].t);
    free(s->tmp);
    free(s->xin);
    free(s->strip);
    free(s);
}

int fmt_rs_scratch_set_path(fmt_rs_scratch *s, fmt_rs_path path)
{
    if (!s)
        return FMT_EINVAL;
    if (path == FMT_RS_PATH_AUTO)
        path = best_path(fmt_cpu());
    if (path > FMT_RS_PATH_AVX512 || !cpu_has(fmt_cpu(), path))
        return FMT_EUNSUPPORTED;
    s->path = path;
    return 0;
}

fmt_rs_path fmt_rs_scratch_path(const fmt_rs_scratch *s)
{
    return s->path;
}

const char *fmt_rs_path_name(fmt_rs_path p)
{
    static const char *const names[] = {[FMT_RS_PATH_PLAIN] = "plain",
                                        [FMT_RS_PATH_SSE41] = "sse4.1",
                                        [FMT_RS_PATH_AVX2] = "avx2",
                                        [FMT_RS_PATH_AVX512] = "avx512"};
    return FMT_NAME_IN(names, p, "auto");
}

/* The table for one axis: from the scratch's memo, else the shared cache, else built (and
 * published in the cache while it has room, else kept by the scratch). */
static int table_get(fmt_rs_scratch *s, uint32_t in_len, float b0, float b1, uint32_t out_len,
                     fmt_filter f, const rs_table **out)
{
    s->tick++;
    rs_memo *victim = &s->memo[0];
    for (int i = 0; i < RS_MEMO; i++) {
        rs_memo *m = &s->memo[i];
        if (m->t && same_key(m->t, in_len, b0, b1, out_len, f)) {
            m->used = s->tick;
            *out = m->t;
            return 0;
        }
        if (!m->t || (victim->t && m->used < victim->used))
            victim = m;
    }
    rs_table *t = NULL;
    int owned = 1;
    fmt_rs_cache *c = s->cache;
    uint32_t h = key_hash(in_len, b0, b1, out_len, f);
    if (c) {
        pthread_mutex_lock(&c->lock);
        t = bucket_find(c->bucket[h], in_len, b0, b1, out_len, f);
        pthread_mutex_unlock(&c->lock);
        if (t)
            owned = 0;
    }
    if (!t) {
        int rc = table_build(in_len, b0, b1, out_len, f, &t);
        if (rc)
            return rc;
        if (c) {
            /* built outside the lock; another thread may have published the same meanwhile */
            pthread_mutex_lock(&c->lock);
            rs_table *other = bucket_find(c->bucket[h], in_len, b0, b1, out_len, f);
            if (other) {
                table_free(t);
                t = other;
                owned = 0;
            } else if (c->bytes + t->bytes <= FMT_RS_CACHE_MAX_BYTES) {
                t->next = c->bucket[h];
                c->bucket[h] = t;
                c->count++;
                c->bytes += t->bytes;
                owned = 0;
            }
            pthread_mutex_unlock(&c->lock);
        }
    }
    if (victim->owned)
        table_free(victim->t);
    victim->t = t;
    victim->owned = owned;
    victim->used = s->tick;
    *out = t;
    return 0;
}

/* Pillow's nearest neighbour for a scaling affine map: positions accumulated in double from
 * box0 + scale / 2, truncated toward zero (negative -> outside, left zero). */
static int nearest(fmt_rs_scratch *s, const fmt_rs_view *src, const fmt_rs_box *b,
                   uint32_t out_w, uint32_t out_h, uint32_t win_x, uint32_t win_y,
                   const fmt_rs_view *dst)
{
    uint32_t ch = src->channels, dw = dst->width, dh = dst->height;
    if (s->xin_cap < dw) {
        int32_t *n = realloc(s->xin, sizeof *n * dw);
        if (!n)
            return ENOMEM;
        s->xin = n;
        s->xin_cap = dw;
    }
    double a0 = (double)(b->x1 - b->x0) / out_w, a4 = (double)(b->y1 - b->y0) / out_h;
    double xo = (double)b->x0 + a0 * 0.5, yo = (double)b->y0 + a4 * 0.5;
    /* positions are running sums, as in Pillow: step to the window rather than multiply */
    for (uint32_t x = 0; x < win_x; x++)
        xo += a0;
    for (uint32_t y = 0; y < win_y; y++)
        yo += a4;
    uint32_t xmin = dw, xmax = 0;
    for (uint32_t x = 0; x < dw; x++) {
        int xin = xo < 0.0 ? -1 : (int)xo;
        s->xin[x] = 0;
        if (xin >= 0 && xin < (int)src->width) {
            xmax = x + 1;
            if (x < xmin)
                xmin = x;
            s->xin[x] = xin;
        }
        xo += a0;
    }
    for (uint32_t y = 0; y < dh; y++) {
        int yi = yo < 0.0 ? -1 : (int)yo;
        uint8_t *out = dst->pixels + (size_t)y * dst->stride;
        memset(out, 0, (size_t)dw * ch);
        if (yi >= 0 && yi < (int)src->height) {
            const uint8_t *in = src->pixels + (size_t)yi * src->stride;
            if (ch == 3) {
                for (uint32_t x = xmin; x < xmax; x++)
                    memcpy(out + (size_t)x * 3, in + (size_t)s->xin[x] * 3, 3);
            } else {
                for (uint32_t x = xmin; x < xmax; x++)
                    memcpy(out + (size_t)x * ch, in + (size_t)s->xin[x] * ch, ch);
            }
        }
        yo += a4;
    }
    return 0;
}

static int view_ok(const fmt_rs_view *v)
{
    return v->pixels && v->width && v->height && v->channels >= 1 && v->channels <= 4 &&
           v->stride >= (size_t)v->width * v->channels;
}

int fmt_resample(fmt_rs_scratch *s, const fmt_rs_view *src, const fmt_rs_box *box,
                 fmt_filter f, const fmt_rs_view *dst, fmt_msg *msg)
{
    if (!dst)
        return fmt_fail(msg, FMT_EINVAL, "invalid argument");
    return fmt_resample_window(s, src, box, f, dst->width, dst->height, 0, 0, dst, msg);
}

int fmt_resample_window(fmt_rs_scratch *s, const fmt_rs_view *src, const fmt_rs_box *box,
                        fmt_filter f, uint32_t out_w, uint32_t out_h, uint32_t win_x,
                        uint32_t win_y, const fmt_rs_view *dst, fmt_msg *msg)
{
    if (!s || !src || !dst)
        return fmt_fail(msg, FMT_EINVAL, "invalid argument");
    if (!view_ok(src) || !view_ok(dst) || src->channels != dst->channels)
        return fmt_fail(msg, FMT_EINVAL, "invalid source or destination image");
    if ((unsigned)f >= FMT_FILTER_COUNT)
        return fmt_fail(msg, FMT_EINVAL, "unknown filter %d", (int)f);
    if (src->width > FMT_RS_MAX_SIDE || src->height > FMT_RS_MAX_SIDE ||
        out_w > FMT_RS_MAX_SIDE || out_h > FMT_RS_MAX_SIDE)
        return fmt_fail(msg, FMT_ETOOBIG, "image side larger than %u", FMT_RS_MAX_SIDE);
    uint32_t sw = src->width, sh = src->height, dw = dst->width, dh = dst->height;
    uint32_t ch = src->channels;
    if (!out_w || !out_h || (uint64_t)win_x + dw > out_w || (uint64_t)win_y + dh > out_h)
        return fmt_fail(msg, FMT_EINVAL, "window %ux%u at (%u, %u) is not inside %ux%u", dw, dh,
                        win_x, win_y, out_w, out_h);
    fmt_rs_box b = {0.0f, 0.0f, (float)sw, (float)sh};
    if (box)
        b = *box;
    /* written so that NaN fails */
    if (!(b.x0 >= 0.0f && b.y0 >= 0.0f && b.x1 <= (float)sw && b.y1 <= (float)sh &&
          b.x1 >= b.x0 && b.y1 >= b.y0))
        return fmt_fail(msg, FMT_EINVAL, "box (%g, %g, %g, %g) is not inside the %ux%u image",
                        (double)b.x0, (double)b.y0, (double)b.x1, (double)b.y1, sw, sh);
    int whole = b.x0 == 0.0f && b.y0 == 0.0f && b.x1 == (float)sw && b.y1 == (float)sh;
    if (sw == out_w && sh == out_h && whole) {
        for (uint32_t y = 0; y < dh; y++)
            memcpy(dst->pixels + y * dst->stride,
                   src->pixels + (size_t)(win_y + y) * src->stride + (size_t)win_x * ch,
                   (size_t)dw * ch);
        return 0;
    }
    if (f == FMT_FILTER_NEAREST) {
        int rc = nearest(s, src, &b, out_w, out_h, win_x, win_y, dst);
        return rc ? fmt_fail(msg, rc, "cannot allocate resampling scratch") : 0;
    }
    const rs_table *tx, *ty;
    int rc = table_get(s, sw, b.x0, b.x1, out_w, f, &tx);
    if (!rc)
        rc = table_get(s, sh, b.y0, b.y1, out_h, f, &ty);
    if (rc)
        return fmt_fail(msg, rc, "cannot build resampling tables for %ux%u to %ux%u", sw, sh,
                        out_w, out_h);
    /* Pillow skips a pass whose axis keeps its size with the whole image as box */
    int need_h = out_w != sw || b.x0 != 0.0f || b.x1 != (float)out_w;
    int need_v = out_h != sh || b.y0 != 0.0f || b.y1 != (float)out_h;
    if (need_h) {
        /* the vector horizontal pass transposes 8 rows of the columns it reads; the strip
         * grows geometrically from 64 KiB (sources up to 2047 RGB pixels wide), so a stream
         * of varied sizes reallocates rarely, typically never */
        /* 4x: the RGB vpmaddwd pass keeps a 96-byte pair block per column beside it */
        size_t need = ((size_t)sw + 2) * 8 * (ch + 1) * 4 + 64;
        size_t plan = fmt_rs_h_strip_bytes(s->path, tx, sw, ch, win_x, dw);
        need = plan > need ? plan : need;
        if (need > s->strip_cap) {
            size_t cap = s->strip_cap ? 2 * s->strip_cap : (size_t)64 << 10;
            need = need > cap ? need : cap;
            uint8_t *n = malloc(need);
            if (!n)
                return fmt_fail(msg, ENOMEM, "cannot allocate resampling scratch");
            free(s->strip);
            s->strip = n;
            s->strip_cap = need;
        }
    }
    if (need_h && need_v) {
        /* the source rows the window's vertical taps read */
        int32_t first = ty->span[2 * win_y];
        int32_t last = ty->span[2 * (win_y + dh - 1)] + ty->span[2 * (win_y + dh - 1) + 1];
        if (last < first)
            last = first;
        size_t tstride = (size_t)dw * ch, rows = (size_t)(last - first);
        if (rows && tstride > SIZE_MAX / rows)
            return fmt_fail(msg, FMT_ETOOBIG, "resampling scratch too large");
        size_t need = tstride * rows;
        if (need > s->tmp_cap) {
            uint8_t *n = malloc(need);
            if (!n)
                return fmt_fail(msg, ENOMEM, "cannot allocate resampling scratch");
            free(s->tmp);
            s->tmp = n;
            s->tmp_cap = need;
        }
        fmt_rs_h_pass(s->path, src->pixels + (size_t)first * src->stride, src->stride, (uint32_t)rows,
               sw, ch, tx, win_x, dw, s->tmp, tstride, s->strip, s->strip_cap);
        fmt_rs_v_pass(s->path, s->tmp, tstride, first, tstride, ty, win_y, dh, dst->pixels,
               dst->stride);
    } else if (need_h) {
        fmt_rs_h_pass(s->path, src->pixels + (size_t)win_y * src->stride, src->stride, dh, sw, ch, tx,
               win_x, dw, dst->pixels, dst->stride, s->strip, s->strip_cap);
    } else {
        fmt_rs_v_pass(s->path, src->pixels + (size_t)win_x * ch, src->stride, 0, (size_t)dw * ch, ty,
               win_y, dh, dst->pixels, dst->stride);
    }
    return 0;
}

/* The source indices [*lo, *hi) that outputs first .. first + n - 1 of t read together. */
static void span_union(const rs_table *t, uint32_t first, uint32_t n, int64_t *lo, int64_t *hi)
{
    *lo = t->span[2 * first];
    *hi = *lo;
    for (uint32_t i = 0; i < n; i++) {
        int64_t a = t->span[2 * (first + i)], e = a + t->span[2 * (first + i) + 1];
        *lo = a < *lo ? a : *lo;
        *hi = e > *hi ? e : *hi;
    }
}

int fmt_resample_source_rect(fmt_rs_scratch *s, uint32_t sw, uint32_t sh, const fmt_rs_box *box,
                             fmt_filter f, uint32_t out_w, uint32_t out_h, uint32_t win_x,
                             uint32_t win_y, uint32_t dw, uint32_t dh, uint32_t rect[4])
{
    rect[0] = 0;
    rect[1] = 0;
    rect[2] = sw;
    rect[3] = sh;
    if (!s || (unsigned)f >= FMT_FILTER_COUNT || !sw || !sh || !dw || !dh ||
        sw > FMT_RS_MAX_SIDE || sh > FMT_RS_MAX_SIDE || out_w > FMT_RS_MAX_SIDE ||
        out_h > FMT_RS_MAX_SIDE || (uint64_t)win_x + dw > out_w || (uint64_t)win_y + dh > out_h)
        return FMT_EINVAL;
    fmt_rs_box b = {0.0f, 0.0f, (float)sw, (float)sh};
    if (box)
        b = *box;
    if (!(b.x0 >= 0.0f && b.y0 >= 0.0f && b.x1 <= (float)sw && b.y1 <= (float)sh &&
          b.x1 >= b.x0 && b.y1 >= b.y0))
        return FMT_EINVAL;
    int whole = b.x0 == 0.0f && b.y0 == 0.0f && b.x1 == (float)sw && b.y1 == (float)sh;
    if (sw == out_w && sh == out_h && whole) {
        rect[0] = win_x;
        rect[1] = win_y;
        rect[2] = dw;
        rect[3] = dh;
        return 0;
    }
    if (f == FMT_FILTER_NEAREST)
        return 0;
    const rs_table *tx, *ty;
    int rc = table_get(s, sw, b.x0, b.x1, out_w, f, &tx);
    if (!rc)
        rc = table_get(s, sh, b.y0, b.y1, out_h, f, &ty);
    if (rc)
        return rc;
    /* as fmt_resample_window decides its passes */
    int need_h = out_w != sw || b.x0 != 0.0f || b.x1 != (float)out_w;
    int need_v = out_h != sh || b.y0 != 0.0f || b.y1 != (float)out_h;
    int64_t c0 = win_x, c1 = (int64_t)win_x + dw, r0 = win_y, r1 = (int64_t)win_y + dh;
    if (need_h)
        span_union(tx, win_x, dw, &c0, &c1);
    if (need_v)
        span_union(ty, win_y, dh, &r0, &r1);
    if (c0 < 0 || r0 < 0 || c1 > sw || r1 > sh || c1 <= c0 || r1 <= r0)
        return 0;               /* (not reached: the tables stay inside the image) */
    rect[0] = (uint32_t)c0;
    rect[1] = (uint32_t)r0;
    rect[2] = (uint32_t)(c1 - c0);
    rect[3] = (uint32_t)(r1 - r0);
    return 0;
}
