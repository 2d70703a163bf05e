/* affine.c - RandomRotation and RandomAffine: torchvision's draws on the reader's words; the
 * transforms themselves are Pillow's, in pixels/warp.c (shared with the build's
 * pre-augmentation), with the vector path where fmt_simd() says so.
 */
#include "affine.h"
#include "simd.h"
#include "warp.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

void shr_affine_init(shr_affine *a, const shr_options *o)
{
    memset(a, 0, sizeof *a);
    a->rotation = o->rotation != 0;
    a->rot_lo = (float)o->rotation_degrees[0];
    a->rot_hi = (float)o->rotation_degrees[1];
    a->affine = o->affine != 0;
    a->deg_lo = (float)o->affine_degrees[0];
    a->deg_hi = (float)o->affine_degrees[1];
    a->translate[0] = o->affine_translate[0];
    a->translate[1] = o->affine_translate[1];
    a->has_translate = !(o->affine_translate[0] == 0 && o->affine_translate[1] == 0);
    a->scale_lo = (float)o->affine_scale[0];
    a->scale_hi = (float)o->affine_scale[1];
    a->has_scale = !(o->affine_scale[0] == 1 && o->affine_scale[1] == 1);
    for (int i = 0; i < 4; i++)
        a->shear[i] = (float)o->affine_shear[i];
    a->has_shear_y = !(o->affine_shear[2] == 0 && o->affine_shear[3] == 0);
    a->has_shear = a->has_shear_y || !(o->affine_shear[0] == 0 && o->affine_shear[1] == 0);
}

void shr_affine_draw(const shr_affine *a, uint64_t seed, uint64_t epoch, uint64_t index,
                     uint32_t width, uint32_t height, shr_params *p)
{
    p->rotate = 0;
    p->rotate_angle = 0.0f;
    p->affine = 0;
    p->affine_angle = 0.0f;
    p->affine_tx = p->affine_ty = 0;
    p->affine_scale = 1.0f;
    p->affine_shear_x = p->affine_shear_y = 0.0f;
    if (a->rotation) {
        p->rotate = 1;
        p->rotate_angle = shr_tf_uniform(shr_tf_word(seed, epoch, index, SHR_SALT_ROTATE, 0),
                                         a->rot_lo, a->rot_hi);
    }
    if (!a->affine)
        return;
    uint32_t k = 0;
#define WORD() shr_tf_word(seed, epoch, index, SHR_SALT_AFFINE, k++)
    p->affine = 1;
    p->affine_angle = shr_tf_uniform(WORD(), a->deg_lo, a->deg_hi);
    if (a->has_translate) {
        double max_dx = a->translate[0] * (double)width;
        double max_dy = a->translate[1] * (double)height;
        p->affine_tx = (int32_t)rint((double)shr_tf_uniform(WORD(), (float)-max_dx,
                                                            (float)max_dx));
        p->affine_ty = (int32_t)rint((double)shr_tf_uniform(WORD(), (float)-max_dy,
                                                            (float)max_dy));
    }
    if (a->has_scale)
        p->affine_scale = shr_tf_uniform(WORD(), a->scale_lo, a->scale_hi);
    if (a->has_shear) {
        p->affine_shear_x = shr_tf_uniform(WORD(), a->shear[0], a->shear[1]);
        if (a->has_shear_y)
            p->affine_shear_y = shr_tf_uniform(WORD(), a->shear[2], a->shear[3]);
    }
#undef WORD
}

/* ---- the transforms (pixels/warp.c) ---- */

static fmt_warp_filter warp_filter(shr_filter f)
{
    return f == SHR_FILTER_BILINEAR ? FMT_WARP_BILINEAR : FMT_WARP_NEAREST;
}

void shr_affine_inverse(double m[6], double cx, double cy, double angle, double tx, double ty,
                        double scale, double shear_x, double shear_y)
{
    fmt_warp_inverse(m, cx, cy, angle, tx, ty, scale, shear_x, shear_y);
}

void shr_affine_warp(const uint8_t *src, size_t sstride, uint8_t *dst, size_t dstride,
                     uint32_t width, uint32_t height, uint32_t channels, const double m[6],
                     shr_filter filter, const uint8_t fill[4])
{
    fmt_warp(src, sstride, dst, dstride, width, height, channels, m, warp_filter(filter), fill,
             fmt_simd());
}

void shr_affine_apply(const uint8_t *src, size_t sstride, uint8_t *dst, size_t dstride,
                      uint32_t width, uint32_t height, uint32_t channels, double angle, double tx,
                      double ty, double scale, double shear_x, double shear_y,
                      const double *center, shr_filter filter, const uint8_t fill[4])
{
    double cx = center ? center[0] : width * 0.5, cy = center ? center[1] : height * 0.5;
    double m[6];
    shr_affine_inverse(m, cx, cy, angle, tx, ty, scale, shear_x, shear_y);
    shr_affine_warp(src, sstride, dst, dstride, width, height, channels, m, filter, fill);
}

void shr_affine_rotate(const uint8_t *src, size_t sstride, uint8_t *dst, size_t dstride,
                       uint32_t width, uint32_t height, uint32_t channels, double angle,
                       shr_filter filter, const uint8_t fill[4])
{
    fmt_warp_rotate(src, sstride, dst, dstride, width, height, channels, angle,
                    warp_filter(filter), fill, fmt_simd());
}
