/* warp.h - Pillow 9.4's affine transform (Image.transform(size, AFFINE, matrix, resample,
 * fillcolor)) and Image.rotate, byte for byte, as torchvision's F.affine and F.rotate call them
 * on a PIL image: the reader's RandomRotation/RandomAffine (reader/affine.c) and the build's
 * pre-augmentation (augment.c) both use these.
 *
 * Pure functions of their arguments (thread-safe). Pixels are uint8, interleaved `channels`
 * (1 or 3) per pixel, rows `stride` bytes apart; the warps read src and write a separate dst of
 * the same size (they must not overlap). `vector` allows the AVX2 path where the CPU has it (the
 * same bytes).
 */
#ifndef FMT_WARP_H
#define FMT_WARP_H

#include <stddef.h>
#include <stdint.h>

typedef enum { FMT_WARP_NEAREST, FMT_WARP_BILINEAR } fmt_warp_filter;

/* torchvision's _get_inverse_affine_matrix(center, angle, translate, scale, shear) (angles in
 * degrees, the Python doubles): Pillow's 6 coefficients, output pixel -> input position. */
void fmt_warp_inverse(double m[6], double cx, double cy, double angle, double tx, double ty,
                      double scale, double shear_x, double shear_y);

/* Image.transform(size, AFFINE, m, resample, fillcolor=fill) of src into dst (both width x
 * height): NEAREST through Pillow's scale, 16.16 fixed point or float paths as it chooses them,
 * BILINEAR through its generic transform; positions that map outside the image keep fill. */
void fmt_warp(const uint8_t *src, size_t sstride, uint8_t *dst, size_t dstride, uint32_t width,
              uint32_t height, uint32_t channels, const double m[6], fmt_warp_filter filter,
              const uint8_t fill[4], int vector);

/* F.rotate(img, angle, filter, expand=False, center=None, fill) on the PIL image: Pillow's
 * Image.rotate, its exact quarter turns (where the image is square) and half turn included. */
void fmt_warp_rotate(const uint8_t *src, size_t sstride, uint8_t *dst, size_t dstride,
                     uint32_t width, uint32_t height, uint32_t channels, double angle,
                     fmt_warp_filter filter, const uint8_t fill[4], int vector);

#endif
