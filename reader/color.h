/* color.h - torchvision's ColorJitter and RandomGrayscale on uint8 pixels, byte for byte as its
 * PIL path gives them (Pillow 9.4's ImageEnhance blends, L conversion and HSV conversion).
 *
 * Internal to libshardread. Every function is a pure function of its arguments (thread-safe);
 * pixels are uint8, interleaved `channels` (1 or 3) per pixel, rows `stride` bytes apart, and
 * are changed in place. One-channel images are Pillow's "L" images: saturation and hue leave
 * them as they are, as torchvision does.
 */
#ifndef SHR_COLOR_H
#define SHR_COLOR_H

#include <stddef.h>
#include <stdint.h>

#include "shardread.h"
#include "transform.h"

/* The jitter ranges, as torchvision's ColorJitter holds them after _check_input, in float32 as
 * torch's uniform_ takes them; has[k] is 0 where torchvision's value is None (the range is the
 * op's identity: (1, 1) for brightness, contrast and saturation, (0, 0) for hue). */
typedef struct {
    float lo[4], hi[4];             /* 0 brightness, 1 contrast, 2 saturation, 3 hue */
    int has[4];
    int any;                        /* some has[k] */
} shr_color_jitter;

/* From shr_options' jitter_* ranges (already checked). */
SHR_INTERNAL void shr_color_jitter_init(shr_color_jitter *j, const shr_options *o);

/* torchvision's ColorJitter.get_params on the sample's words (see shardread.h,
 * SHR_SALT_JITTER): fills p->jitter, jitter_order, brightness, contrast, saturation, hue. */
SHR_INTERNAL void shr_color_jitter_draw(const shr_color_jitter *j, uint64_t seed, uint64_t epoch,
                                        uint64_t index, shr_params *p);

/* The four ops in p's order, as ColorJitter.forward applies them. */
SHR_INTERNAL void shr_color_jitter_apply(const shr_params *p, uint8_t *px, uint32_t width,
                                         uint32_t height, uint32_t channels, size_t stride);

/* Each byte of width x height pixels (rows stride apart) through lut: one table, or with
 * per_band and 3 channels a table of 256 per channel (R, G, B), as Pillow's point(). */
SHR_INTERNAL void shr_color_apply_lut(uint8_t *px, uint32_t width, uint32_t height,
                                      uint32_t channels, size_t stride, const uint8_t *lut,
                                      int per_band);

/* torchvision's functional ops on a PIL image (F.adjust_brightness and the others). */
SHR_INTERNAL void shr_color_brightness(uint8_t *px, uint32_t width, uint32_t height,
                                       uint32_t channels, size_t stride, float factor);
SHR_INTERNAL void shr_color_contrast(uint8_t *px, uint32_t width, uint32_t height,
                                     uint32_t channels, size_t stride, float factor);
SHR_INTERNAL void shr_color_saturation(uint8_t *px, uint32_t width, uint32_t height,
                                       uint32_t channels, size_t stride, float factor);
/* hue_factor in [-0.5, 0.5] (a double, as Python has it) */
SHR_INTERNAL void shr_color_hue(uint8_t *px, uint32_t width, uint32_t height, uint32_t channels,
                                size_t stride, double hue_factor);
/* F.rgb_to_grayscale(img, 3): Pillow's L in all three channels (nothing for one channel). */
SHR_INTERNAL void shr_color_grayscale(uint8_t *px, uint32_t width, uint32_t height,
                                      uint32_t channels, size_t stride);

/* Pillow's blend of one value: (UINT8) of in1 + alpha * (in2 - in1) in float, clipped. */
SHR_INTERNAL uint8_t shr_color_blend(int in1, int in2, float alpha);
/* Pillow's RGB -> L: (r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16. */
SHR_INTERNAL uint8_t shr_color_luma(uint8_t r, uint8_t g, uint8_t b);
/* Pillow's RGB -> HSV or HSV -> RGB (fmt_rgb2hsv, fmt_hsv2rgb: formats/hsv.h) over n pixels
 * (in and out interleaved, 3 bytes each; may be the same), through the vector path where
 * fmt_simd() says so (simd.h). */
SHR_INTERNAL void shr_color_hsv_rows(const uint8_t *in, uint8_t *out, size_t n, int to_rgb);


#endif
