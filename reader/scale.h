/* scale.h - the read-time detection geometries (shardread.h, "Scale"): multi-scale resize
 * (torchvision's RandomShortestSize), large-scale jitter (ScaleJitter then FixedSizeCrop) and
 * letterbox (the build's --fit pad): their draws, and the pixels they make.
 *
 * Internal to libshardread (not installed, not exported). Every function is a pure function of
 * its arguments (the resampler scratch aside), so any worker may transform any sample and give
 * the same bytes and parameters.
 */
#ifndef SHR_SCALE_H
#define SHR_SCALE_H

#include <stddef.h>
#include <stdint.h>

#include "resample.h"
#include "fmt.h"
#include "shardread.h"
#include "transform.h"

/* 0, or SHR_EINVAL with the reason o's scale options are bad in m. */
SHR_INTERNAL int shr_scale_check(const shr_options *o, fmt_msg *m);

/* The geometry of a sample stored at src_w x src_h for an output (canvas) of out_w x out_h:
 * fills p->x, y, w, h (the whole stored image), scale_w .. image_h and scale_factor. o->scale
 * must not be SHR_SCALE_NONE. */
SHR_INTERNAL void shr_scale_draw(const shr_options *o, uint64_t seed, uint64_t epoch,
                                 uint64_t index, uint32_t src_w, uint32_t src_h, uint32_t out_w,
                                 uint32_t out_h, shr_params *p);

/* SHR_SCALE_MULTI and SHR_SCALE_NATURAL: each image its own size, at the top left of the canvas
 * (or dense). */
static inline int shr_scale_per_image(shr_scale s)
{
    return s == SHR_SCALE_MULTI || s == SHR_SCALE_NATURAL;
}

/* SHR_SCALE_MULTI: the largest image (width, height) any draw gives a src_w x src_h sample. */
SHR_INTERNAL void shr_scale_largest(const shr_options *o, uint32_t src_w, uint32_t src_h,
                                    uint32_t *w, uint32_t *h);

/* The pixels of p (from shr_scale_draw) of the stored image src into dst, uint8 HWC of the
 * output's out_w x out_h, rows dst_stride bytes apart: the window of the resize at
 * (pad_x, pad_y), zero around it where border is set (else the bytes around it are left as
 * they are). f: the resize's filter. 0, or fmt_resample's error (m says why). */
SHR_INTERNAL int shr_scale_pixels(fmt_rs_scratch *rs, fmt_filter f, const fmt_rs_view *src,
                                  const shr_params *p, uint8_t *dst, uint32_t out_w,
                                  uint32_t out_h, size_t dst_stride, int border, fmt_msg *m);

/* A multi-scale sample into its canvas: the top-left p->image_w x p->image_h of the uint8
 * sample src (rows stride bytes apart) through o's output kernel (mirrored where mirror is
 * set) into the top left of dst, o->width x o->height elements, and zero around it; or, with
 * dense set, into the first image_w * image_h * channels elements of dst, as a sample of that
 * size. Only the image is converted. */
SHR_INTERNAL void shr_scale_store(const shr_tf_out *o, const uint8_t *src, size_t stride,
                                  int mirror, const shr_params *p, int dense, void *dst);

/* Zero (in the delivered units: 0, 0.0) the elements of one delivered sample dst (written by
 * o's output kernel) outside its image, the top-left p->image_w x p->image_h: the batch padding
 * of SHR_SCALE_MULTI, which comes after normalisation. */
SHR_INTERNAL void shr_scale_zero_canvas(const shr_tf_out *o, const shr_params *p, void *dst);

#endif
