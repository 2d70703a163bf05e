/* mirror.h - the horizontal flip of uint8 pixel rows: in place, or while copying a row into its
 * mirrored place (the flip fused into the copy that places a sample in its output).
 *
 * Internal to libshardread. Every path gives the same bytes: an AVX2 one for 1 and 3 channels
 * (16 pixels reversed per step with byte shuffles) where fmt_simd() says so, plain C otherwise.
 */
#ifndef SHR_MIRROR_H
#define SHR_MIRROR_H

#include <stddef.h>
#include <stdint.h>

#include "transform.h"    /* SHR_INTERNAL */

/* Mirror width x height pixels of channels bytes left to right in place, rows stride apart. */
SHR_INTERNAL void shr_mirror_rows(uint8_t *px, uint32_t width, uint32_t height,
                                  uint32_t channels, size_t stride);

/* One row of n pixels of channels bytes, mirrored: pixel x of dst is pixel n - 1 - x of src.
 * dst and src must not overlap. */
SHR_INTERNAL void shr_mirror_copy(uint8_t *dst, const uint8_t *src, uint32_t n,
                                  uint32_t channels);

/* The pshufb masks that reverse 16 RGB pixels held in three 16-byte registers: output register k
 * is the OR of the input registers r shuffled by [k][r] (-1: zero). Byte j of the reversed
 * block is byte 45 - 3 * (j / 3) + j % 3 of the input. Shared with the output conversion's
 * mirrored store (transform.c). */
SHR_INTERNAL extern const int8_t shr_mirror_rgb16[3][3][16];
/* pshufb mask reversing 16 one-channel pixels */
SHR_INTERNAL extern const int8_t shr_mirror_gray16[16];

#endif
