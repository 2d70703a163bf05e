/* enhance.h - the colour arithmetic both the reader and the build use (see enhance.c for why
 * brightness, contrast and saturation exist twice): Pillow's RGB -> L (the one luma), its
 * ImageEnhance blends and the hue shift as torchvision's PIL path applies them (the reader's
 * ColorJitter, RandomGrayscale and auto-augment policies), and the build's 16.16 fixed point
 * (formats/augment.md).
 *
 * Every function is a pure function of its arguments (thread-safe); pixels are uint8,
 * interleaved `channels` (1 or 3) per pixel, rows `stride` bytes apart, and are changed in
 * place. One-channel images are Pillow's "L" images: saturation and hue leave them as they are,
 * as torchvision does. The vector kernels run where fmt_simd() says so (simd.h).
 */
#ifndef FMT_ENHANCE_H
#define FMT_ENHANCE_H

#include <stddef.h>
#include <stdint.h>

/* ITU-R 601 luma with Pillow's rounding (Pillow 9.4 Convert.c, L24):
 * L = (R * 19595 + G * 38470 + B * 7471 + 0x8000) >> 16. The weights sum to 65536, so a gray
 * pixel (R = G = B = v) maps back to v exactly. Verified against Image.convert('L') for all 2^24
 * colours. The decoders' gray conversion, both ColorJitters, the grayscale ops and the vector
 * kernels (simd_luma8, simd.h: the same weights) all use it. */
#define FMT_LUMA_R 19595u
#define FMT_LUMA_G 38470u
#define FMT_LUMA_B 7471u
static inline uint8_t fmt_luma(uint8_t r, uint8_t g, uint8_t b)
{
    return (uint8_t)((r * FMT_LUMA_R + g * FMT_LUMA_G + b * FMT_LUMA_B + 0x8000u) >> 16);
}

/* The build's brightness, contrast and saturation, in this order, on npix pixels (contiguous):
 * each factor f (1 leaves the op out) as 16.16 fixed point q = lrint(f * 65536); brightness
 * v * q, contrast m + (v - m) * q with m the mean luma rounded half up, saturation
 * l + (v - l) * q with l the pixel's luma; each rounded half up and clamped to 0..255
 * (formats/augment.md). Saturation leaves a one-channel image as it is. */
void fmt_color_q16(uint8_t *px, size_t npix, uint32_t channels, float brightness,
                   float contrast, float saturation);

/* Each byte of width x height pixels (rows stride apart) through lut: one table, or with
 * per_band and 3 channels a table of 256 per channel (R, G, B), as Pillow's point(). */
void fmt_color_apply_lut(uint8_t *px, uint32_t width, uint32_t height, uint32_t channels,
                         size_t stride, const uint8_t *lut, int per_band);

/* torchvision's functional ops on a PIL image (F.adjust_brightness and the others). */
void fmt_color_brightness(uint8_t *px, uint32_t width, uint32_t height, uint32_t channels,
                          size_t stride, float factor);
void fmt_color_contrast(uint8_t *px, uint32_t width, uint32_t height, uint32_t channels,
                        size_t stride, float factor);
void fmt_color_saturation(uint8_t *px, uint32_t width, uint32_t height, uint32_t channels,
                          size_t stride, float factor);
/* hue_factor in [-0.5, 0.5] (a double, as Python has it) */
void fmt_color_hue(uint8_t *px, uint32_t width, uint32_t height, uint32_t channels,
                   size_t stride, double hue_factor);
/* torchvision's ColorJitter once its parameters are drawn: the ops in order[0..3] (0
 * brightness, 1 contrast, 2 saturation, 3 hue; order a permutation of 0..3) whose bit is set
 * in ops, each as the function above gives it, in one or two passes over the pixels. */
void fmt_color_jitter(uint8_t *px, uint32_t width, uint32_t height, uint32_t channels,
                      size_t stride, const uint8_t order[4], unsigned ops, float brightness,
                      float contrast, float saturation, double hue);
/* F.rgb_to_grayscale(img, 3): Pillow's L in all three channels (nothing for one channel). */
void fmt_color_grayscale(uint8_t *px, uint32_t width, uint32_t height, uint32_t channels,
                         size_t stride);

/* Pillow's blend of one value: (UINT8) of in1 + alpha * (in2 - in1) in float, clipped. */
uint8_t fmt_color_blend(int in1, int in2, float alpha);
/* Pillow's RGB -> HSV or HSV -> RGB (fmt_rgb2hsv, fmt_hsv2rgb: hsv.h) over n pixels (in and
 * out interleaved, 3 bytes each; may be the same), through the vector path where fmt_simd()
 * says so (simd.h): ColorJitter's AVX-512 kernels where fmt_simd_avx512() does, else AVX2. */
void fmt_color_hsv_rows(const uint8_t *in, uint8_t *out, size_t n, int to_rgb);

#endif
