/* resample_int.h - what resample.c (tables, planning) shares with resample_simd.c and
 * resample_plain.c (the passes): the fixed point of Pillow's sums, the coefficient table, and the
 * two passes.
 */
#ifndef FMT_RESAMPLE_INT_H
#define FMT_RESAMPLE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "resample.h"

#define RS_BITS 22                      /* fixed point fraction bits (Pillow's PRECISION_BITS) */
#define RS_HALF (1 << (RS_BITS - 1))

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

/* A sum of the passes back to a byte: the fixed point dropped, clamped to 0..255. */
static inline uint8_t rs_clip8(int32_t v)
{
    v >>= RS_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Output row yy of a vertical pass over src (whose first row is source row yoff, rows sstride
 * apart), written at out: its coefficients, the first source row it reads and its tap count. */
typedef struct {
    const int32_t *k;
    const uint8_t *base;
    int32_t n;
    uint8_t *out;
} rs_vrow;

static inline rs_vrow rs_v_row(const rs_table *t, uint32_t yy, const uint8_t *src, size_t sstride,
                               int32_t yoff, uint8_t *out)
{
    rs_vrow r = {t->k + (size_t)yy * t->stride, src + (size_t)(t->span[2 * yy] - yoff) * sstride,
                 t->span[2 * yy + 1], out};
    return r;
}

/* Bytes x .. bytes - 1 of a vertical pass's output row r: Pillow's loop, the one every path ends
 * its rows with. */
static inline void rs_v_bytes(const rs_vrow *r, size_t sstride, size_t x, size_t bytes)
{
    for (; x < bytes; x++) {
        int32_t acc = RS_HALF;
        for (int32_t y = 0; y < r->n; y++)
            acc += r->base[(size_t)y * sstride + x] * r->k[y];
        r->out[x] = rs_clip8(acc);
    }
}

/* The passes in plain C (resample_plain.c), as fmt_rs_h_pass and fmt_rs_v_pass below with the
 * plain path; the vector passes end their rows with them. */
void rs_h_plain(const uint8_t *src, size_t sstride, uint32_t rows, uint32_t in_w, uint32_t ch,
                const rs_table *t, uint32_t x0, uint32_t nx, uint8_t *dst, size_t dstride);
void rs_v_plain(const uint8_t *src, size_t sstride, int32_t yoff, size_t bytes,
                const rs_table *t, uint32_t y0, uint32_t ny, uint8_t *dst, size_t dstride);

/* Horizontal pass over `rows` rows of src (in_w pixels of ch channels): outputs x0 .. x0 + nx - 1
 * of table t, written from dst; strip is the scratch's buffer (strip_cap bytes) for 8 transposed
 * rows (the vector paths) or the AVX-512 pass's plan. */
void fmt_rs_h_pass(fmt_rs_path path, const uint8_t *src, size_t sstride, uint32_t rows,
                   uint32_t in_w, uint32_t ch, const rs_table *t, uint32_t x0, uint32_t nx,
                   uint8_t *dst, size_t dstride, uint8_t *strip, size_t strip_cap);

/* The strip bytes the horizontal pass of path needs beyond the transposed rows' (the AVX-512
 * pass's plan; 0 for the other paths, or where that pass does not apply) */
size_t fmt_rs_h_strip_bytes(fmt_rs_path path, const rs_table *t, uint32_t in_w, uint32_t ch,
                            uint32_t x0, uint32_t nx);

/* Vertical pass: output rows y0 .. y0 + ny - 1 of table t, `bytes` wide; src's first row is
 * source row yoff. */
void fmt_rs_v_pass(fmt_rs_path path, const uint8_t *src, size_t sstride, int32_t yoff,
                   size_t bytes, const rs_table *t, uint32_t y0, uint32_t ny, uint8_t *dst,
                   size_t dstride);

#endif
