/* affine.h - torchvision's RandomRotation and RandomAffine on uint8 pixels, byte for byte as its
 * PIL path gives them: F.affine and F.rotate are Pillow 9.4's Image.transform(size, AFFINE,
 * matrix, resample, fillcolor), with torchvision's inverse matrix (_get_inverse_affine_matrix) or
 * Pillow's own (Image.rotate), and the sampling of libImaging/Geometry.c (pixels/warp.c; the
 * functions below pass it fmt_simd()).
 *
 * Internal to libshardread. Every function is a pure function of its arguments (thread-safe);
 * pixels are uint8, interleaved `channels` (1 or 3) per pixel, rows `stride` bytes apart. The
 * warps read src and write a separate dst of the same size (they must not overlap).
 */
#ifndef SHR_AFFINE_H
#define SHR_AFFINE_H

#include <stddef.h>
#include <stdint.h>

#include "shardread.h"
#include "transform.h"

/* The options' ranges, as torchvision holds them, in float32 as torch's uniform_ takes them;
 * has_* is 0 where torchvision's value is None (nothing drawn). */
typedef struct {
    int rotation, affine;
    float rot_lo, rot_hi;
    float deg_lo, deg_hi;
    double translate[2];            /* fractions of width and height */
    int has_translate, has_scale, has_shear, has_shear_y;
    float scale_lo, scale_hi;
    float shear[4];
} shr_affine;

SHR_INTERNAL void shr_affine_init(shr_affine *a, const shr_options *o);

/* RandomRotation.get_params (stream SHR_SALT_ROTATE) and RandomAffine.get_params (stream
 * SHR_SALT_AFFINE, img_size = [width, height]) on the sample's words: fills p->rotate,
 * rotate_angle, affine and the affine_* values. */
SHR_INTERNAL void shr_affine_draw(const shr_affine *a, uint64_t seed, uint64_t epoch,
                                  uint64_t index, uint32_t width, uint32_t height, shr_params *p);

/* torchvision's _get_inverse_affine_matrix(center, angle, translate, scale, shear) (angles in
 * degrees, the Python doubles): Pillow's 6 coefficients, output pixel -> input position. */
SHR_INTERNAL void shr_affine_inverse(double m[6], double cx, double cy, double angle, double tx,
                                     double ty, double scale, double shear_x, double shear_y);

/* Image.transform(size, AFFINE, m, resample, fillcolor=fill) of src into dst (both width x
 * height): NEAREST through Pillow's scale, 16.16 fixed point or float paths as it chooses them,
 * BILINEAR through its generic transform; positions that map outside the image keep fill. */
SHR_INTERNAL void shr_affine_warp(const uint8_t *src, size_t sstride, uint8_t *dst,
                                  size_t dstride, uint32_t width, uint32_t height,
                                  uint32_t channels, const double m[6], shr_filter filter,
                                  const uint8_t fill[4]);

/* F.affine(img, angle, [tx, ty], scale, [shear_x, shear_y], filter, fill, center) on the PIL
 * image: center NULL is torchvision's default (width * 0.5, height * 0.5). */
SHR_INTERNAL void shr_affine_apply(const uint8_t *src, size_t sstride, uint8_t *dst,
                                   size_t dstride, uint32_t width, uint32_t height,
                                   uint32_t channels, double angle, double tx, double ty,
                                   double scale, double shear_x, double shear_y,
                                   const double *center, shr_filter filter,
                                   const uint8_t fill[4]);

/* F.rotate(img, angle, filter, expand=False, center=None, fill) on the PIL image: Pillow's
 * Image.rotate, its exact quarter turns (where the image is square) and half turn included. */
SHR_INTERNAL void shr_affine_rotate(const uint8_t *src, size_t sstride, uint8_t *dst,
                                    size_t dstride, uint32_t width, uint32_t height,
                                    uint32_t channels, double angle, shr_filter filter,
                                    const uint8_t fill[4]);

#endif
