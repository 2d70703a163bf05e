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
 * Code paths: the loops are written once with GCC vector extensions and compiled three times,
 * for the baseline, SSE4.1 and AVX2 (function target attributes); the plain path is scalar C.
 */
#include "resample.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#endif

/* the vector types are only used inside functions built for AVX2 / SSE4.1 */
#pragma GCC diagnostic ignored "-Wpsabi"

#define RS_BITS 22                      /* fixed point fraction bits (Pillow's PRECISION_BITS) */
#define RS_HALF (1 << (RS_BITS - 1))
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

typedef struct rs_table {
    /* key */
    uint32_t in_len, out_len;
    float b0, b1;
    fmt_filter filter;
    /* value */
    uint32_t stride;            /* coefficients per output, >= tap count, multiple of 8 */
    int32_t *span;              /* per output: first source index, tap count */
    int32_t *k;                 /* per output: stride coefficients, zero beyond the count */
    size_t bytes;
    struct rs_table *next;      /* cache bucket chain */
} rs_table;

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
};

static int cpu_has(fmt_rs_path p)
{
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    if (p == FMT_RS_PATH_AVX2)
        return __builtin_cpu_supports("avx2");
    if (p == FMT_RS_PATH_SSE41)
        return __builtin_cpu_supports("sse4.1");
#endif
    return p == FMT_RS_PATH_PLAIN;
}

static fmt_rs_path best_path(void)
{
    if (cpu_has(FMT_RS_PATH_AVX2))
        return FMT_RS_PATH_AVX2;
    if (cpu_has(FMT_RS_PATH_SSE41))
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
    const char *env = getenv("SHARDC_RESAMPLE");
    (*s)->path = env && strcmp(env, "plain") == 0 ? FMT_RS_PATH_PLAIN : best_path();
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
    free(s);
}

int fmt_rs_scratch_set_path(fmt_rs_scratch *s, fmt_rs_path path)
{
    if (!s)
        return FMT_EINVAL;
    if (path == FMT_RS_PATH_AUTO)
        path = best_path();
    if (path > FMT_RS_PATH_AVX2 || !cpu_has(path))
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
    switch (p) {
    case FMT_RS_PATH_PLAIN:
        return "plain";
    case FMT_RS_PATH_SSE41:
        return "sse4.1";
    case FMT_RS_PATH_AVX2:
        return "avx2";
    default:
        return "auto";
    }
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

/* ---- the passes ---- */

static inline uint8_t clip8(int32_t v)
{
    v >>= RS_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* One output sample of the horizontal pass, channel c of pixel xx. */
static inline uint8_t h_one(const uint8_t *row, uint32_t ch, const int32_t *k, int32_t xmin,
                            int32_t n, uint32_t c)
{
    int32_t acc = RS_HALF;
    const uint8_t *p = row + (size_t)xmin * ch + c;
    for (int32_t x = 0; x < n; x++)
        acc += p[(size_t)x * ch] * k[x];
    return clip8(acc);
}

/* Horizontal pass over `rows` rows: outputs x0 .. x0 + nx - 1 of table t, written from dst. */
static void h_plain(const uint8_t *src, size_t sstride, uint32_t rows, uint32_t in_w, uint32_t ch,
                    const rs_table *t, uint32_t x0, uint32_t nx, uint8_t *dst, size_t dstride)
{
    (void)in_w;
    for (uint32_t y = 0; y < rows; y++) {
        const uint8_t *row = src + y * sstride;
        uint8_t *out = dst + y * dstride;
        for (uint32_t i = 0; i < nx; i++) {
            uint32_t xx = x0 + i;
            const int32_t *k = t->k + (size_t)xx * t->stride;
            for (uint32_t c = 0; c < ch; c++)
                out[(size_t)i * ch + c] =
                    h_one(row, ch, k, t->span[2 * xx], t->span[2 * xx + 1], c);
        }
    }
}

/* Vertical pass: output rows y0 .. y0 + ny - 1 of table t, `bytes` wide; src's first row is
 * source row yoff. */
static void v_plain(const uint8_t *src, size_t sstride, int32_t yoff, size_t bytes,
                    const rs_table *t, uint32_t y0, uint32_t ny, uint8_t *dst, size_t dstride)
{
    for (uint32_t i = 0; i < ny; i++) {
        uint32_t yy = y0 + i;
        const int32_t *k = t->k + (size_t)yy * t->stride;
        const uint8_t *base = src + (size_t)(t->span[2 * yy] - yoff) * sstride;
        int32_t n = t->span[2 * yy + 1];
        uint8_t *out = dst + (size_t)i * dstride;
        for (size_t x = 0; x < bytes; x++) {
            int32_t acc = RS_HALF;
            for (int32_t y = 0; y < n; y++)
                acc += base[(size_t)y * sstride + x] * k[y];
            out[x] = clip8(acc);
        }
    }
}

/* Vector versions: written once, compiled per instruction set through the callers' target
 * attributes (always_inline makes the compiler generate them inside each caller). */
typedef int32_t v8si __attribute__((vector_size(32)));
typedef int32_t v4si __attribute__((vector_size(16)));
typedef uint8_t v8qu __attribute__((vector_size(8)));
typedef uint8_t v4qu __attribute__((vector_size(4)));

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
/* Only the SSE4.1 and AVX2 paths inline these, so they may use SSE4.1: load8 and store8 are then
 * pmovzxbd and packus, where GCC turns __builtin_convertvector between byte and int vectors into
 * moves of one byte at a time (which made a 300x250 -> 224x224 bilinear resize 1.9x slower). */
#define RS_INLINE static inline __attribute__((always_inline, target("sse4.1")))
#define RS_SSE41_HELPERS 1
#else
#define RS_INLINE static inline __attribute__((always_inline))
#endif

RS_INLINE v8si load8(const uint8_t *p)
{
#ifdef RS_SSE41_HELPERS
    __m128i b = _mm_loadl_epi64((const __m128i *)p);
    v4si lo = (v4si)_mm_cvtepu8_epi32(b), hi = (v4si)_mm_cvtepu8_epi32(_mm_srli_si128(b, 4));
    return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7);
#else
    v8qu b;
    memcpy(&b, p, sizeof b);
    return __builtin_convertvector(b, v8si);
#endif
}

RS_INLINE v4si load4(const uint8_t *p)
{
    v4qu b;
    memcpy(&b, p, sizeof b);
    return __builtin_convertvector(b, v4si);
}

RS_INLINE v8si clip_v8(v8si a)
{
    const v8si zero = {0}, top = {255, 255, 255, 255, 255, 255, 255, 255};
    a >>= RS_BITS;
    a &= ~(a < zero);
    v8si big = a > top;
    return (a & ~big) | (top & big);
}

RS_INLINE v4si clip_v4(v4si a)
{
    const v4si zero = {0}, top = {255, 255, 255, 255};
    a >>= RS_BITS;
    a &= ~(a < zero);
    v4si big = a > top;
    return (a & ~big) | (top & big);
}

RS_INLINE void store8(uint8_t *p, v8si a)
{
#ifdef RS_SSE41_HELPERS
    v8si c = clip_v8(a);
    __m128i lo = (__m128i)__builtin_shufflevector(c, c, 0, 1, 2, 3);
    __m128i hi = (__m128i)__builtin_shufflevector(c, c, 4, 5, 6, 7);
    _mm_storel_epi64((__m128i *)p, _mm_packus_epi16(_mm_packus_epi32(lo, hi), _mm_setzero_si128()));
#else
    v8qu b = __builtin_convertvector(clip_v8(a), v8qu);
    memcpy(p, &b, sizeof b);
#endif
}

RS_INLINE void v_vec(const uint8_t *src, size_t sstride, int32_t yoff, size_t bytes,
                     const rs_table *t, uint32_t y0, uint32_t ny, uint8_t *dst, size_t dstride)
{
    const v8si half = {RS_HALF, RS_HALF, RS_HALF, RS_HALF, RS_HALF, RS_HALF, RS_HALF, RS_HALF};
    for (uint32_t i = 0; i < ny; i++) {
        uint32_t yy = y0 + i;
        const int32_t *k = t->k + (size_t)yy * t->stride;
        const uint8_t *base = src + (size_t)(t->span[2 * yy] - yoff) * sstride;
        int32_t n = t->span[2 * yy + 1];
        uint8_t *out = dst + (size_t)i * dstride;
        size_t x = 0;
        for (; x + 32 <= bytes; x += 32) {
            v8si a0 = half, a1 = half, a2 = half, a3 = half;
            const uint8_t *p = base + x;
            for (int32_t y = 0; y < n; y++, p += sstride) {
                int32_t c = k[y];
                a0 += load8(p) * c;
                a1 += load8(p + 8) * c;
                a2 += load8(p + 16) * c;
                a3 += load8(p + 24) * c;
            }
            store8(out + x, a0);
            store8(out + x + 8, a1);
            store8(out + x + 16, a2);
            store8(out + x + 24, a3);
        }
        for (; x + 8 <= bytes; x += 8) {
            v8si a0 = half;
            const uint8_t *p = base + x;
            for (int32_t y = 0; y < n; y++, p += sstride)
                a0 += load8(p) * k[y];
            store8(out + x, a0);
        }
        for (; x < bytes; x++) {
            int32_t acc = RS_HALF;
            for (int32_t y = 0; y < n; y++)
                acc += base[(size_t)y * sstride + x] * k[y];
            out[x] = clip8(acc);
        }
    }
}

RS_INLINE void h_vec(const uint8_t *src, size_t sstride, uint32_t rows, uint32_t in_w,
                     uint32_t ch, const rs_table *t, uint32_t x0, uint32_t nx, uint8_t *dst,
                     size_t dstride)
{
    if (ch == 2) {
        h_plain(src, sstride, rows, in_w, ch, t, x0, nx, dst, dstride);
        return;
    }
    for (uint32_t y = 0; y < rows; y++) {
        const uint8_t *row = src + y * sstride;
        uint8_t *out = dst + y * dstride;
        for (uint32_t i = 0; i < nx; i++) {
            uint32_t xx = x0 + i;
            const int32_t *k = t->k + (size_t)xx * t->stride;
            int32_t xmin = t->span[2 * xx], n = t->span[2 * xx + 1];
            uint8_t *o = out + (size_t)i * ch;
            if (ch == 1) {
                /* whole vectors of taps; the padding coefficients are zero */
                int32_t nv = (n + 7) & ~7;
                if ((int64_t)xmin + nv > in_w) {
                    o[0] = h_one(row, 1, k, xmin, n, 0);
                    continue;
                }
                v8si a = {0};
                const uint8_t *p = row + xmin;
                for (int32_t x = 0; x < nv; x += 8) {
                    v8si kv;
                    memcpy(&kv, k + x, sizeof kv);
                    a += load8(p + x) * kv;
                }
                int32_t acc = RS_HALF + a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
                o[0] = clip8(acc);
            } else {
                /* one pixel per 4-byte load; for 3 channels the fourth byte is the next pixel's
                 * (ignored), so the last pixel of a row is read by the plain loop */
                if (ch == 3 && (int64_t)xmin + n >= in_w) {
                    for (uint32_t c = 0; c < 3; c++)
                        o[c] = h_one(row, 3, k, xmin, n, c);
                    continue;
                }
                v4si a = {RS_HALF, RS_HALF, RS_HALF, RS_HALF};
                const uint8_t *p = row + (size_t)xmin * ch;
                for (int32_t x = 0; x < n; x++, p += ch)
                    a += load4(p) * k[x];
                a = clip_v4(a);
                for (uint32_t c = 0; c < ch; c++)
                    o[c] = (uint8_t)a[c];
            }
        }
    }
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define RS_X86 1
__attribute__((target("avx2"))) static void h_avx2(const uint8_t *src, size_t sstride,
                                                   uint32_t rows, uint32_t in_w, uint32_t ch,
                                                   const rs_table *t, uint32_t x0, uint32_t nx,
                                                   uint8_t *dst, size_t dstride)
{
    h_vec(src, sstride, rows, in_w, ch, t, x0, nx, dst, dstride);
}

__attribute__((target("avx2"))) static void v_avx2(const uint8_t *src, size_t sstride,
                                                   int32_t yoff, size_t bytes, const rs_table *t,
                                                   uint32_t y0, uint32_t ny, uint8_t *dst,
                                                   size_t dstride)
{
    v_vec(src, sstride, yoff, bytes, t, y0, ny, dst, dstride);
}

__attribute__((target("sse4.1"))) static void h_sse41(const uint8_t *src, size_t sstride,
                                                      uint32_t rows, uint32_t in_w, uint32_t ch,
                                                      const rs_table *t, uint32_t x0,
                                                      uint32_t nx, uint8_t *dst, size_t dstride)
{
    h_vec(src, sstride, rows, in_w, ch, t, x0, nx, dst, dstride);
}

__attribute__((target("sse4.1"))) static void v_sse41(const uint8_t *src, size_t sstride,
                                                      int32_t yoff, size_t bytes,
                                                      const rs_table *t, uint32_t y0,
                                                      uint32_t ny, uint8_t *dst, size_t dstride)
{
    v_vec(src, sstride, yoff, bytes, t, y0, ny, dst, dstride);
}
#endif

static void h_pass(fmt_rs_path path, const uint8_t *src, size_t sstride, uint32_t rows,
                   uint32_t in_w, uint32_t ch, const rs_table *t, uint32_t x0, uint32_t nx,
                   uint8_t *dst, size_t dstride)
{
#ifdef RS_X86
    if (path == FMT_RS_PATH_AVX2)
        return h_avx2(src, sstride, rows, in_w, ch, t, x0, nx, dst, dstride);
    if (path == FMT_RS_PATH_SSE41)
        return h_sse41(src, sstride, rows, in_w, ch, t, x0, nx, dst, dstride);
#endif
    h_plain(src, sstride, rows, in_w, ch, t, x0, nx, dst, dstride);
}

static void v_pass(fmt_rs_path path, const uint8_t *src, size_t sstride, int32_t yoff,
                   size_t bytes, const rs_table *t, uint32_t y0, uint32_t ny, uint8_t *dst,
                   size_t dstride)
{
#ifdef RS_X86
    if (path == FMT_RS_PATH_AVX2)
        return v_avx2(src, sstride, yoff, bytes, t, y0, ny, dst, dstride);
    if (path == FMT_RS_PATH_SSE41)
        return v_sse41(src, sstride, yoff, bytes, t, y0, ny, dst, dstride);
#endif
    v_plain(src, sstride, yoff, bytes, t, y0, ny, dst, dstride);
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
        h_pass(s->path, src->pixels + (size_t)first * src->stride, src->stride, (uint32_t)rows,
               sw, ch, tx, win_x, dw, s->tmp, tstride);
        v_pass(s->path, s->tmp, tstride, first, tstride, ty, win_y, dh, dst->pixels,
               dst->stride);
    } else if (need_h) {
        h_pass(s->path, src->pixels + (size_t)win_y * src->stride, src->stride, dh, sw, ch, tx,
               win_x, dw, dst->pixels, dst->stride);
    } else {
        v_pass(s->path, src->pixels + (size_t)win_x * ch, src->stride, 0, (size_t)dw * ch, ty,
               win_y, dh, dst->pixels, dst->stride);
    }
    return 0;
}
