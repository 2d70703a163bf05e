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
    /* per output, for the vpmaddwd pass: the taps in pairs (2q, 2q + 1), each pair as two words
     * of two int16 halves, hi = k >> 11 and lo = k & 2047 (so k = hi * 2048 + lo exactly);
     * NULL when some hi does not fit in int16 */
    uint32_t *kp;
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
    free(s->strip);
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
            int32_t xmin = t->span[2 * xx], n = t->span[2 * xx + 1];
            if (ch == 3) {
                /* the channels of a tap together, as Pillow's loop does */
                int32_t s0 = RS_HALF, s1 = RS_HALF, s2 = RS_HALF;
                const uint8_t *p = row + (size_t)xmin * 3;
                for (int32_t x = 0; x < n; x++, p += 3) {
                    s0 += p[0] * k[x];
                    s1 += p[1] * k[x];
                    s2 += p[2] * k[x];
                }
                out[(size_t)i * 3] = clip8(s0);
                out[(size_t)i * 3 + 1] = clip8(s1);
                out[(size_t)i * 3 + 2] = clip8(s2);
                continue;
            }
            for (uint32_t c = 0; c < ch; c++)
                out[(size_t)i * ch + c] = h_one(row, ch, k, xmin, n, c);
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

RS_INLINE v8si clip_v8(v8si a)
{
    const v8si zero = {0}, top = {255, 255, 255, 255, 255, 255, 255, 255};
    a >>= RS_BITS;
    a &= ~(a < zero);
    v8si big = a > top;
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

/* The horizontal pass, vectorised across rows: 8 source rows at a time are first transposed
 * into a strip whose column x holds the 8 rows' pixels at x (8 * ch bytes), so one output
 * pixel of all 8 rows is ch vectors of 8 lanes, each tap one multiply-add per vector. The
 * transposition costs one copy of the columns the window reads; rows left over (fewer than 8)
 * take the plain loop. */
RS_INLINE void h_strip(const uint8_t *src, size_t sstride, uint32_t rows, uint32_t in_w,
                       const uint32_t ch, const rs_table *t, uint32_t x0, uint32_t nx,
                       uint8_t *dst, size_t dstride, uint8_t *strip)
{
    const v8si half = {RS_HALF, RS_HALF, RS_HALF, RS_HALF, RS_HALF, RS_HALF, RS_HALF, RS_HALF};
    /* a column of the strip: 8 rows of ch bytes, plus a spare byte for RGB, which moves 4
     * bytes a pixel (the 4th is overwritten by the next row's, or lands in the spare byte) */
    const size_t colb = 8 * (size_t)ch + (ch == 3);
    int32_t c0 = t->span[2 * x0];
    int32_t c1 = t->span[2 * (x0 + nx - 1)] + t->span[2 * (x0 + nx - 1) + 1];
    for (uint32_t i = 0; i < nx; i++) {
        int32_t a = t->span[2 * (x0 + i)], b = a + t->span[2 * (x0 + i) + 1];
        c0 = a < c0 ? a : c0;
        c1 = b > c1 ? b : c1;
    }
    uint32_t y = 0;
    for (; y + 8 <= rows; y += 8) {
        for (uint32_t r = 0; r < 8; r++) {
            const uint8_t *row = src + (y + r) * sstride + (size_t)c0 * ch;
            uint8_t *d = strip + (size_t)r * ch;
            int32_t x = 0;
            if (ch == 3)
                for (; x + 1 < c1 - c0; x++)
                    memcpy(d + (size_t)x * colb, row + (size_t)x * 3, 4);
            for (; x < c1 - c0; x++)
                memcpy(d + (size_t)x * colb, row + (size_t)x * ch, ch);
        }
        for (uint32_t i = 0; i < nx; i++) {
            uint32_t xx = x0 + i;
            const int32_t *k = t->k + (size_t)xx * t->stride;
            int32_t n = t->span[2 * xx + 1];
            const uint8_t *p = strip + (size_t)(t->span[2 * xx] - c0) * colb;
            v8si a0 = half, a1 = half, a2 = half, a3 = half;
            for (int32_t x = 0; x < n; x++, p += colb) {
                int32_t kt = k[x];
                a0 += load8(p) * kt;
                if (ch > 1)
                    a1 += load8(p + 8) * kt;
                if (ch > 2)
                    a2 += load8(p + 16) * kt;
                if (ch > 3)
                    a3 += load8(p + 24) * kt;
            }
            uint8_t ob[32];
            store8(ob, a0);
            if (ch > 1)
                store8(ob + 8, a1);
            if (ch > 2)
                store8(ob + 16, a2);
            if (ch > 3)
                store8(ob + 24, a3);
            uint8_t *o = dst + y * dstride + (size_t)i * ch;
            if (ch == 3 && i + 1 < nx) {
                /* the 4th byte is pixel i + 1's, written next */
                for (uint32_t r = 0; r < 8; r++)
                    memcpy(o + r * dstride, ob + r * 3, 4);
            } else {
                for (uint32_t r = 0; r < 8; r++)
                    memcpy(o + r * dstride, ob + r * ch, ch);
            }
        }
    }
    if (y < rows)
        h_plain(src + y * sstride, sstride, rows - y, in_w, ch, t, x0, nx, dst + y * dstride,
                dstride);
}

RS_INLINE void h_vec(const uint8_t *src, size_t sstride, uint32_t rows, uint32_t in_w,
                     uint32_t ch, const rs_table *t, uint32_t x0, uint32_t nx, uint8_t *dst,
                     size_t dstride, uint8_t *strip)
{
    /* constant channel counts, so the copies and the vector count are unrolled */
    switch (ch) {
    case 1:
        h_strip(src, sstride, rows, in_w, 1, t, x0, nx, dst, dstride, strip);
        break;
    case 2:
        h_strip(src, sstride, rows, in_w, 2, t, x0, nx, dst, dstride, strip);
        break;
    case 3:
        h_strip(src, sstride, rows, in_w, 3, t, x0, nx, dst, dstride, strip);
        break;
    default:
        h_strip(src, sstride, rows, in_w, 4, t, x0, nx, dst, dstride, strip);
        break;
    }
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define RS_X86 1
#include <immintrin.h>

/* AVX2 with intrinsics: GCC lowers the byte-to-int conversions of the generic vector code
 * poorly (lane by lane), and these loops are the resampler's whole cost. */
#define RS_AVX2 static inline __attribute__((always_inline, target("avx2")))

RS_AVX2 __m256i ax_load8(const uint8_t *p)
{
    __m128i b;
    memcpy(&b, p, 8);       /* upper half unused */
    return _mm256_cvtepu8_epi32(b);
}

RS_AVX2 __m256i ax_madd(__m256i acc, __m256i v, __m256i k)
{
    return _mm256_add_epi32(acc, _mm256_mullo_epi32(v, k));
}

/* (a >> 22) clamped to 0..255, 8 bytes to p */
RS_AVX2 void ax_store8(uint8_t *p, __m256i a)
{
    a = _mm256_srai_epi32(a, RS_BITS);
    __m256i w = _mm256_packs_epi32(a, a);       /* per 128-bit lane: a0..a3 a0..a3 | a4..a7 .. */
    __m256i b = _mm256_packus_epi16(w, w);      /* bytes, saturated to 0..255 */
    __m256i q = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0));
    uint64_t v = (uint64_t)_mm_cvtsi128_si64(_mm256_castsi256_si128(q));
    memcpy(p, &v, 8);
}

/* The source columns [c0, c1) that outputs x0 .. x0 + nx - 1 of t read */
static inline void window_cols(const rs_table *t, uint32_t x0, uint32_t nx, int32_t *c0,
                               int32_t *c1)
{
    *c0 = *c1 = t->span[2 * x0];
    for (uint32_t i = 0; i < nx; i++) {
        int32_t a = t->span[2 * (x0 + i)], b = a + t->span[2 * (x0 + i) + 1];
        *c0 = a < *c0 ? a : *c0;
        *c1 = b > *c1 ? b : *c1;
    }
}

/* v[r] holds 8 32-bit elements (r, 0..7): afterwards v[c] holds (0..7, c) */
RS_AVX2 void ax_transpose8(__m256i v[8])
{
    __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]), t1 = _mm256_unpackhi_epi32(v[0], v[1]);
    __m256i t2 = _mm256_unpacklo_epi32(v[2], v[3]), t3 = _mm256_unpackhi_epi32(v[2], v[3]);
    __m256i t4 = _mm256_unpacklo_epi32(v[4], v[5]), t5 = _mm256_unpackhi_epi32(v[4], v[5]);
    __m256i t6 = _mm256_unpacklo_epi32(v[6], v[7]), t7 = _mm256_unpackhi_epi32(v[6], v[7]);
    __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
    __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
    v[0] = _mm256_permute2x128_si256(u0, u4, 0x20);
    v[1] = _mm256_permute2x128_si256(u1, u5, 0x20);
    v[2] = _mm256_permute2x128_si256(u2, u6, 0x20);
    v[3] = _mm256_permute2x128_si256(u3, u7, 0x20);
    v[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
    v[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
    v[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
    v[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
}

/* (hi * 2048 + lo) >> 22 of the vpmaddwd sums (lo with the rounding half) */
RS_AVX2 __m256i ax_hilo(__m256i hi, __m256i lo)
{
    return _mm256_srai_epi32(_mm256_add_epi32(_mm256_slli_epi32(hi, 11), lo), RS_BITS);
}

/* 8 rows x 8 RGB pixels (rows r at row[r] + 3 * x) as the strip's 8 columns x..x+7: pixel slots
 * of 4 bytes (the 4th zero), one 8x8 transposition of 32-bit slots */
RS_AVX2 void ax_rgb_block(const uint8_t *const row[8], size_t x, uint8_t *col)
{
    const __m256i sh = _mm256_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1,
                                        0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1);
    __m256i v[8];
    for (int r = 0; r < 8; r++) {
        const uint8_t *p = row[r] + 3 * x;
        __m256i a = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const void *)p)),
            _mm_loadu_si128((const void *)(p + 12)), 1);
        v[r] = _mm256_shuffle_epi8(a, sh);
    }
    ax_transpose8(v);
    for (int r = 0; r < 8; r++)
        _mm256_storeu_si256((void *)(col + 32 * r), v[r]);
}

/* cols RGB pixels of 8 rows (from src, rows sstride apart) as strip columns of 8 4-byte slots
 * (32 bytes a column, the 4th byte of each slot zero) */
RS_AVX2 void ax_rgb_strip(const uint8_t *src, size_t sstride, size_t cols, uint8_t *strip)
{
    const uint8_t *row[8];
    for (uint32_t r = 0; r < 8; r++)
        row[r] = src + r * sstride;
    size_t x = 0;
    /* a block reads 3 * x + 28 bytes of each row */
    for (; x + 10 <= cols; x += 8)
        ax_rgb_block(row, x, strip + x * 32);
    for (; x < cols; x++)
        for (uint32_t r = 0; r < 8; r++) {
            uint8_t *d = strip + x * 32 + (size_t)r * 4;
            memcpy(d, row[r] + 3 * x, 3);
            d[3] = 0;
        }
}

/* The transposed strip of h_strip, with RGB pixels in 4-byte slots (4th byte zero) so that the
 * transposition is of 32-bit units. */
RS_AVX2 void h_strip_avx2(const uint8_t *src, size_t sstride, uint32_t rows, uint32_t in_w,
                          const uint32_t ch, const rs_table *t, uint32_t x0, uint32_t nx,
                          uint8_t *dst, size_t dstride, uint8_t *strip)
{
    const __m256i half = _mm256_set1_epi32(RS_HALF);
    const uint32_t cw = ch == 3 ? 4 : ch;      /* bytes of a pixel slot */
    const size_t colb = 8 * (size_t)cw;
    int32_t c0, c1;
    window_cols(t, x0, nx, &c0, &c1);
    const size_t cols = (size_t)(c1 - c0);
    uint32_t y = 0;
    for (; y + 8 <= rows; y += 8) {
        /* the next 8 rows' window, into the cache while these are computed: short row
         * segments a stride apart are 8 streams too short for the hardware prefetcher, and
         * a source read once (a batch's sample) comes from memory */
        if (y + 16 <= rows)
            for (uint32_t r = 8; r < 16; r++) {
                const char *row = (const char *)(src + (y + r) * sstride + (size_t)c0 * ch);
                for (size_t b = 0; b < cols * ch; b += 64)
                    _mm_prefetch(row + b, _MM_HINT_T0);
                _mm_prefetch(row + cols * ch - 1, _MM_HINT_T0);
            }
        if (ch == 3) {
            ax_rgb_strip(src + y * sstride + (size_t)c0 * 3, sstride, cols, strip);
        } else {
            for (uint32_t r = 0; r < 8; r++) {
                const uint8_t *row = src + (y + r) * sstride + (size_t)c0 * ch;
                uint8_t *d = strip + (size_t)r * ch;
                for (size_t x = 0; x < cols; x++)
                    memcpy(d + x * colb, row + x * ch, ch);
            }
        }
        for (uint32_t i = 0; i < nx; i++) {
            uint32_t xx = x0 + i;
            int32_t n = t->span[2 * xx + 1];
            const uint8_t *p = strip + (size_t)(t->span[2 * xx] - c0) * colb;
            const int32_t *k = t->k + (size_t)xx * t->stride;
            __m256i a0 = half, a1 = half, a2 = half, a3 = half;
            for (int32_t x = 0; x < n; x++, p += colb) {
                __m256i kt = _mm256_set1_epi32(k[x]);
                a0 = ax_madd(a0, ax_load8(p), kt);
                if (cw > 1)
                    a1 = ax_madd(a1, ax_load8(p + 8), kt);
                if (cw > 2)
                    a2 = ax_madd(a2, ax_load8(p + 16), kt);
                if (cw > 3)
                    a3 = ax_madd(a3, ax_load8(p + 24), kt);
            }
            uint8_t ob[32];
            if (cw == 4) {
                /* a0..a3 hold rows 0-1, 2-3, 4-5, 6-7 (4 slots each): clamped to bytes in
                 * one pack, [0 2 4 6 | 1 3 5 7] put back in row order */
                __m256i p01 = _mm256_packs_epi32(_mm256_srai_epi32(a0, RS_BITS),
                                                 _mm256_srai_epi32(a1, RS_BITS));
                __m256i p23 = _mm256_packs_epi32(_mm256_srai_epi32(a2, RS_BITS),
                                                 _mm256_srai_epi32(a3, RS_BITS));
                __m256i b = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(p01, p23),
                                                        _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
                _mm256_storeu_si256((void *)ob, b);
            } else {
                ax_store8(ob, a0);
                if (cw > 1)
                    ax_store8(ob + 8, a1);
                if (cw > 2)
                    ax_store8(ob + 16, a2);
            }
            uint8_t *o = dst + y * dstride + (size_t)i * ch;
            if (ch == 3 && i + 1 < nx) {
                /* the 4th byte lands on pixel i + 1, written next */
                for (uint32_t r = 0; r < 8; r++)
                    memcpy(o + r * dstride, ob + r * 4, 4);
            } else {
                for (uint32_t r = 0; r < 8; r++)
                    memcpy(o + r * dstride, ob + r * cw, ch);
            }
        }
    }
    if (y < rows)
        h_plain(src + y * sstride, sstride, rows - y, in_w, ch, t, x0, nx, dst + y * dstride,
                dstride);
}

/* RGB with vpmaddwd: the strip's columns (8 rows x 4-byte slots) become pair blocks of 96 bytes,
 * block c holding columns c and c + 1 as int16 pairs for the 24 row-channel values j = 3r + ch:
 * three vectors of 8 lanes, [j 0-3 | j 12-15], [j 4-7 | j 16-19], [j 8-11 | j 20-23], each lane
 * (column c's value, column c + 1's). One vpmaddwd then takes two taps of 8 values, with the
 * coefficients split as k = hi * 2048 + lo (both int16, rs_table.kp): sum(p * k) is
 * 2048 * sum(p * hi) + sum(p * lo), exactly Pillow's int32 sum. An odd tap count pairs the last
 * tap with a coefficient of 0 and the column after the window (zeroed at the strip's end). */
RS_AVX2 void h_rgb_madd(const uint8_t *src, size_t sstride, uint32_t rows, uint32_t in_w,
                        const rs_table *t, uint32_t x0, uint32_t nx, uint8_t *dst,
                        size_t dstride, uint8_t *strip)
{
    const __m256i half = _mm256_set1_epi32(RS_HALF), zero = _mm256_setzero_si256();
    const __m256i compact = _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1,
                                             -1, 0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1,
                                             -1, -1);
    const __m256i slots = _mm256_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1,
                                           0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1);
    int32_t c0, c1;
    window_cols(t, x0, nx, &c0, &c1);
    const size_t cols = (size_t)(c1 - c0);
    /* the slot strip (cols + 1 columns of 32 bytes, the last zero), then the pair blocks */
    uint8_t *pairs = (uint8_t *)(((uintptr_t)(strip + (cols + 1) * 32) + 31) & ~(uintptr_t)31);
    uint32_t y = 0;
    for (; y + 8 <= rows; y += 8) {
        /* the next 8 rows' window comes into the cache while these are computed, a few lines
         * per block of outputs: all at once would fill the line-fill buffers and stall (short
         * row segments a stride apart are too short for the hardware prefetcher, and a sample
         * read once comes from memory) */
        const char *pf_base = (const char *)(src + (y + 8) * sstride + (size_t)c0 * 3);
        const size_t lpr = cols * 3 / 64 + 2;  /* lines a row covers, at most */
        const size_t pf_total = y + 16 <= rows ? 8 * lpr : 0;
        const size_t pf_step = (pf_total + (nx + 7) / 8 - 1) / ((nx + 7) / 8);
        size_t pf = 0;
        ax_rgb_strip(src + y * sstride + (size_t)c0 * 3, sstride, cols, strip);
        _mm256_storeu_si256((void *)(strip + cols * 32), zero);
        __m256i a = _mm256_shuffle_epi8(_mm256_loadu_si256((const void *)strip), compact);
        __m256i alo = _mm256_unpacklo_epi8(a, zero), ahi = _mm256_unpackhi_epi8(a, zero);
        for (size_t c = 0; c < cols; c++) {
            __m256i b = _mm256_shuffle_epi8(
                _mm256_loadu_si256((const void *)(strip + (c + 1) * 32)), compact);
            __m256i blo = _mm256_unpacklo_epi8(b, zero), bhi = _mm256_unpackhi_epi8(b, zero);
            uint8_t *pb = pairs + c * 96;
            _mm256_store_si256((void *)pb, _mm256_unpacklo_epi16(alo, blo));
            _mm256_store_si256((void *)(pb + 32), _mm256_unpackhi_epi16(alo, blo));
            _mm256_store_si256((void *)(pb + 64), _mm256_unpacklo_epi16(ahi, bhi));
            alo = blo;
            ahi = bhi;
        }
        /* 8 outputs at a time: each leaves as 8 rows x 4-byte slots, the 8 are transposed
         * back into rows (8 pixels, 24 bytes a row) and stored a row at a time */
        for (uint32_t i0 = 0; i0 < nx; i0 += 8) {
            uint32_t m = nx - i0 < 8 ? nx - i0 : 8;
            for (size_t e = pf + pf_step < pf_total ? pf + pf_step : pf_total; pf < e; pf++) {
                _mm_prefetch(pf_base + (pf / lpr) * sstride + (pf % lpr) * 64, _MM_HINT_T0);
            }
            __m256i res[8];
            for (uint32_t k = 0; k < 8; k++) {
                if (k >= m) {
                    res[k] = zero;
                    continue;
                }
                uint32_t xx = x0 + i0 + k;
                int32_t n = t->span[2 * xx + 1];
                const uint8_t *p = pairs + (size_t)(t->span[2 * xx] - c0) * 96;
                const uint32_t *kp = t->kp + (size_t)xx * t->stride;
                __m256i h0 = zero, h1 = zero, h2 = zero, l0 = half, l1 = half, l2 = half;
                for (int32_t q = 0; q < n; q += 2, p += 192, kp += 2) {
                    __m256i kh = _mm256_set1_epi32((int)kp[0]), kl = _mm256_set1_epi32((int)kp[1]);
                    __m256i v0 = _mm256_load_si256((const void *)p);
                    __m256i v1 = _mm256_load_si256((const void *)(p + 32));
                    __m256i v2 = _mm256_load_si256((const void *)(p + 64));
                    h0 = _mm256_add_epi32(h0, _mm256_madd_epi16(v0, kh));
                    l0 = _mm256_add_epi32(l0, _mm256_madd_epi16(v0, kl));
                    h1 = _mm256_add_epi32(h1, _mm256_madd_epi16(v1, kh));
                    l1 = _mm256_add_epi32(l1, _mm256_madd_epi16(v1, kl));
                    h2 = _mm256_add_epi32(h2, _mm256_madd_epi16(v2, kh));
                    l2 = _mm256_add_epi32(l2, _mm256_madd_epi16(v2, kl));
                }
                __m256i f0 = ax_hilo(h0, l0), f1 = ax_hilo(h1, l1), f2 = ax_hilo(h2, l2);
                /* bytes: lane 0 j 0..11 (rows 0-3), lane 1 j 12..23 (rows 4-7); then row r in
                 * 32-bit slot r */
                __m256i bb = _mm256_packus_epi16(_mm256_packs_epi32(f0, f1),
                                                 _mm256_packs_epi32(f2, f2));
                res[k] = _mm256_shuffle_epi8(bb, slots);
            }
            /* transpose 8 x 8 slots: row r gets outputs i0 .. i0 + 7 */
            ax_transpose8(res);
            uint8_t *o = dst + y * dstride + (size_t)i0 * 3;
            for (uint32_t r = 0; r < 8; r++) {
                /* 4 pixels of 3 bytes per lane, then 4 spare bytes */
                __m256i c = _mm256_shuffle_epi8(res[r], compact);
                uint8_t *d = o + r * dstride;
                if (i0 + 10 <= nx) {
                    /* the 4 spare bytes land on pixels i0 + 8 and i0 + 9, written next */
                    _mm_storeu_si128((void *)d, _mm256_castsi256_si128(c));
                    _mm_storeu_si128((void *)(d + 12), _mm256_extracti128_si256(c, 1));
                } else {
                    uint8_t b[28];
                    _mm_storeu_si128((void *)b, _mm256_castsi256_si128(c));
                    _mm_storeu_si128((void *)(b + 12), _mm256_extracti128_si256(c, 1));
                    memcpy(d, b, (size_t)m * 3);
                }
            }
        }
    }
    if (y < rows)
        h_plain(src + y * sstride, sstride, rows - y, in_w, 3, t, x0, nx, dst + y * dstride,
                dstride);
}

__attribute__((target("avx2"))) static void h_avx2(const uint8_t *src, size_t sstride,
                                                   uint32_t rows, uint32_t in_w, uint32_t ch,
                                                   const rs_table *t, uint32_t x0, uint32_t nx,
                                                   uint8_t *dst, size_t dstride, uint8_t *strip)
{
    switch (ch) {
    case 1:
        h_strip_avx2(src, sstride, rows, in_w, 1, t, x0, nx, dst, dstride, strip);
        break;
    case 2:
        h_strip_avx2(src, sstride, rows, in_w, 2, t, x0, nx, dst, dstride, strip);
        break;
    case 3:
        if (t->kp)
            h_rgb_madd(src, sstride, rows, in_w, t, x0, nx, dst, dstride, strip);
        else
            h_strip_avx2(src, sstride, rows, in_w, 3, t, x0, nx, dst, dstride, strip);
        break;
    default:
        h_strip_avx2(src, sstride, rows, in_w, 4, t, x0, nx, dst, dstride, strip);
        break;
    }
}

/* 32 bytes of one output row of the vertical pass with vpmaddwd (as h_rgb_madd): rows y and
 * y + 1 interleaved byte by byte and widened to int16 pairs, two taps a vpmaddwd, the coefficients
 * split as k = hi * 2048 + lo; an odd last tap is paired with zeros. The four vectors hold bytes
 * [0-3 | 16-19], [4-7 | 20-23], [8-11 | 24-27], [12-15 | 28-31], which two packs put back in
 * order. */
RS_AVX2 void v_madd32(const uint8_t *p, size_t sstride, int32_t n, const uint32_t *kp,
                      uint8_t *out)
{
    const __m256i zero = _mm256_setzero_si256(), half = _mm256_set1_epi32(RS_HALF);
    __m256i h0 = zero, h1 = zero, h2 = zero, h3 = zero, l0 = half, l1 = half, l2 = half, l3 = half;
    for (int32_t y = 0; y < n; y += 2, p += 2 * sstride, kp += 2) {
        __m256i a = _mm256_loadu_si256((const void *)p);
        __m256i b = y + 1 < n ? _mm256_loadu_si256((const void *)(p + sstride)) : zero;
        __m256i lo = _mm256_unpacklo_epi8(a, b), hi = _mm256_unpackhi_epi8(a, b);
        __m256i v0 = _mm256_unpacklo_epi8(lo, zero), v1 = _mm256_unpackhi_epi8(lo, zero);
        __m256i v2 = _mm256_unpacklo_epi8(hi, zero), v3 = _mm256_unpackhi_epi8(hi, zero);
        __m256i kh = _mm256_set1_epi32((int)kp[0]), kl = _mm256_set1_epi32((int)kp[1]);
        h0 = _mm256_add_epi32(h0, _mm256_madd_epi16(v0, kh));
        l0 = _mm256_add_epi32(l0, _mm256_madd_epi16(v0, kl));
        h1 = _mm256_add_epi32(h1, _mm256_madd_epi16(v1, kh));
        l1 = _mm256_add_epi32(l1, _mm256_madd_epi16(v1, kl));
        h2 = _mm256_add_epi32(h2, _mm256_madd_epi16(v2, kh));
        l2 = _mm256_add_epi32(l2, _mm256_madd_epi16(v2, kl));
        h3 = _mm256_add_epi32(h3, _mm256_madd_epi16(v3, kh));
        l3 = _mm256_add_epi32(l3, _mm256_madd_epi16(v3, kl));
    }
    __m256i f0 = ax_hilo(h0, l0), f1 = ax_hilo(h1, l1), f2 = ax_hilo(h2, l2), f3 = ax_hilo(h3, l3);
    __m256i r = _mm256_packus_epi16(_mm256_packs_epi32(f0, f1), _mm256_packs_epi32(f2, f3));
    _mm256_storeu_si256((void *)out, r);
}

__attribute__((target("avx2"))) static void v_avx2(const uint8_t *src, size_t sstride,
                                                   int32_t yoff, size_t bytes, const rs_table *t,
                                                   uint32_t y0, uint32_t ny, uint8_t *dst,
                                                   size_t dstride)
{
    const __m256i half = _mm256_set1_epi32(RS_HALF);
    for (uint32_t i = 0; i < ny; i++) {
        uint32_t yy = y0 + i;
        const int32_t *k = t->k + (size_t)yy * t->stride;
        const uint8_t *base = src + (size_t)(t->span[2 * yy] - yoff) * sstride;
        int32_t n = t->span[2 * yy + 1];
        uint8_t *out = dst + (size_t)i * dstride;
        size_t x = 0;
        if (t->kp)
            for (; x + 32 <= bytes; x += 32)
                v_madd32(base + x, sstride, n, t->kp + (size_t)yy * t->stride, out + x);
        for (; x + 32 <= bytes; x += 32) {
            __m256i a0 = half, a1 = half, a2 = half, a3 = half;
            const uint8_t *p = base + x;
            for (int32_t y = 0; y < n; y++, p += sstride) {
                __m256i kt = _mm256_set1_epi32(k[y]);
                a0 = ax_madd(a0, ax_load8(p), kt);
                a1 = ax_madd(a1, ax_load8(p + 8), kt);
                a2 = ax_madd(a2, ax_load8(p + 16), kt);
                a3 = ax_madd(a3, ax_load8(p + 24), kt);
            }
            ax_store8(out + x, a0);
            ax_store8(out + x + 8, a1);
            ax_store8(out + x + 16, a2);
            ax_store8(out + x + 24, a3);
        }
        for (; x + 8 <= bytes; x += 8) {
            __m256i a0 = half;
            const uint8_t *p = base + x;
            for (int32_t y = 0; y < n; y++, p += sstride)
                a0 = ax_madd(a0, ax_load8(p), _mm256_set1_epi32(k[y]));
            ax_store8(out + x, a0);
        }
        for (; x < bytes; x++) {
            int32_t acc = RS_HALF;
            for (int32_t y = 0; y < n; y++)
                acc += base[(size_t)y * sstride + x] * k[y];
            out[x] = clip8(acc);
        }
    }
}

__attribute__((target("sse4.1"))) static void h_sse41(const uint8_t *src, size_t sstride,
                                                      uint32_t rows, uint32_t in_w, uint32_t ch,
                                                      const rs_table *t, uint32_t x0,
                                                      uint32_t nx, uint8_t *dst, size_t dstride,
                                                      uint8_t *strip)
{
    h_vec(src, sstride, rows, in_w, ch, t, x0, nx, dst, dstride, strip);
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
                   uint8_t *dst, size_t dstride, uint8_t *strip)
{
#ifdef RS_X86
    if (path == FMT_RS_PATH_AVX2)
        return h_avx2(src, sstride, rows, in_w, ch, t, x0, nx, dst, dstride, strip);
    if (path == FMT_RS_PATH_SSE41)
        return h_sse41(src, sstride, rows, in_w, ch, t, x0, nx, dst, dstride, strip);
#else
    (void)strip;
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
    if (need_h) {
        /* the vector horizontal pass transposes 8 rows of the columns it reads; the strip
         * grows geometrically from 64 KiB (sources up to 2047 RGB pixels wide), so a stream
         * of varied sizes reallocates rarely, typically never */
        /* 4x: the RGB vpmaddwd pass keeps a 96-byte pair block per column beside it */
        size_t need = ((size_t)sw + 2) * 8 * (ch + 1) * 4 + 64;
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
        h_pass(s->path, src->pixels + (size_t)first * src->stride, src->stride, (uint32_t)rows,
               sw, ch, tx, win_x, dw, s->tmp, tstride, s->strip);
        v_pass(s->path, s->tmp, tstride, first, tstride, ty, win_y, dh, dst->pixels,
               dst->stride);
    } else if (need_h) {
        h_pass(s->path, src->pixels + (size_t)win_y * src->stride, src->stride, dh, sw, ch, tx,
               win_x, dw, dst->pixels, dst->stride, s->strip);
    } else {
        v_pass(s->path, src->pixels + (size_t)win_x * ch, src->stride, 0, (size_t)dw * ch, ty,
               win_y, dh, dst->pixels, dst->stride);
    }
    return 0;
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
    if (need_h) {
        c0 = tx->span[2 * win_x];
        c1 = c0;
        for (uint32_t i = 0; i < dw; i++) {
            int64_t a = tx->span[2 * (win_x + i)], e = a + tx->span[2 * (win_x + i) + 1];
            c0 = a < c0 ? a : c0;
            c1 = e > c1 ? e : c1;
        }
    }
    if (need_v) {
        r0 = ty->span[2 * win_y];
        r1 = r0;
        for (uint32_t i = 0; i < dh; i++) {
            int64_t a = ty->span[2 * (win_y + i)], e = a + ty->span[2 * (win_y + i) + 1];
            r0 = a < r0 ? a : r0;
            r1 = e > r1 ? e : r1;
        }
    }
    if (c0 < 0 || r0 < 0 || c1 > sw || r1 > sh || c1 <= c0 || r1 <= r0)
        return 0;               /* (not reached: the tables stay inside the image) */
    rect[0] = (uint32_t)c0;
    rect[1] = (uint32_t)r0;
    rect[2] = (uint32_t)(c1 - c0);
    rect[3] = (uint32_t)(r1 - r0);
    return 0;
}
