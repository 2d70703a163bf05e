/* le.h - little-endian integers in byte buffers, for the on-disk formats and their tests.
 *
 * Every multi-byte field that shardc writes is little-endian whatever the host, so these go byte by
 * byte: p needs no alignment and the code no byte-order #ifs (compilers turn each into one load or
 * store on little-endian hosts). p must hold at least 2, 4 or 8 bytes. */
#ifndef FMT_LE_H
#define FMT_LE_H

#include <stdint.h>

/* Store v at p[0..1], least significant byte first. */
static inline void fmt_le_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

/* Store v at p[0..3], least significant byte first. */
static inline void fmt_le_put32(uint8_t *p, uint32_t v)
{
    fmt_le_put16(p, (uint16_t)v);
    fmt_le_put16(p + 2, (uint16_t)(v >> 16));
}

/* Store v at p[0..7], least significant byte first. */
static inline void fmt_le_put64(uint8_t *p, uint64_t v)
{
    fmt_le_put32(p, (uint32_t)v);
    fmt_le_put32(p + 4, (uint32_t)(v >> 32));
}

/* The value that fmt_le_put16 stored at p[0..1]. */
static inline uint16_t fmt_le_get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

/* The value that fmt_le_put32 stored at p[0..3]. */
static inline uint32_t fmt_le_get32(const uint8_t *p)
{
    return fmt_le_get16(p) | (uint32_t)fmt_le_get16(p + 2) << 16;
}

/* The value that fmt_le_put64 stored at p[0..7]. */
static inline uint64_t fmt_le_get64(const uint8_t *p)
{
    return fmt_le_get32(p) | (uint64_t)fmt_le_get32(p + 4) << 32;
}

#endif
