/* resample_plain.c - the resampler's two passes in plain C (see resample.c for the arithmetic):
 * Pillow's loops, the bytes every vector path of resample_simd.c gives, and the path taken with
 * the switch of simd.h off. */
#include "resample_int.h"

/* One output sample of the horizontal pass, channel c of pixel xx. */
static inline uint8_t h_one(const uint8_t *row, uint32_t ch, const int32_t *k, int32_t xmin,
                            int32_t n, uint32_t c)
{
    int32_t acc = RS_HALF;
    const uint8_t *p = row + (size_t)xmin * ch + c;
    for (int32_t x = 0; x < n; x++)
        acc += p[(size_t)x * ch] * k[x];
    return rs_clip8(acc);
}

/* Horizontal pass over `rows` rows: outputs x0 .. x0 + nx - 1 of table t, written from dst. */
void rs_h_plain(const uint8_t *src, size_t sstride, uint32_t rows, uint32_t in_w, uint32_t ch,
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
                out[(size_t)i * 3] = rs_clip8(s0);
                out[(size_t)i * 3 + 1] = rs_clip8(s1);
                out[(size_t)i * 3 + 2] = rs_clip8(s2);
                continue;
            }
            for (uint32_t c = 0; c < ch; c++)
                out[(size_t)i * ch + c] = h_one(row, ch, k, xmin, n, c);
        }
    }
}

/* Vertical pass: output rows y0 .. y0 + ny - 1 of table t, `bytes` wide; src's first row is
 * source row yoff. */
void rs_v_plain(const uint8_t *src, size_t sstride, int32_t yoff, size_t bytes,
                const rs_table *t, uint32_t y0, uint32_t ny, uint8_t *dst, size_t dstride)
{
    for (uint32_t i = 0; i < ny; i++) {
        const rs_vrow r = rs_v_row(t, y0 + i, src, sstride, yoff, dst + (size_t)i * dstride);
        rs_v_bytes(&r, sstride, 0, bytes);
    }
}
