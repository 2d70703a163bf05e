/* hsv.h - Pillow's RGB <-> HSV conversions (libImaging/Convert.c) and the hue shift that
 * torchvision's adjust_hue makes with them, byte for byte.
 *
 * adjust_hue(img, f) on a PIL RGB image converts it to HSV, adds np.uint8(f * 255) to the hue
 * byte (truncated toward zero, wrapping) and converts back; greys (r == g == b) come back as
 * they were. The reader's ColorJitter (enhance.c, with its vector kernels) and the build's
 * pre-augmentation (augment.c) both use these. Pure functions, thread-safe.
 */
#ifndef FMT_HSV_H
#define FMT_HSV_H

#include <stddef.h>
#include <stdint.h>

/* Pillow's RGB -> HSV and HSV -> RGB of one pixel. */
void fmt_rgb2hsv(const uint8_t rgb[3], uint8_t hsv[3]);
void fmt_hsv2rgb(const uint8_t hsv[3], uint8_t rgb[3]);

/* The hue byte's shift for a hue factor in [-0.5, 0.5] (a double, as Python has it):
 * np.uint8(f * 255). */
uint8_t fmt_hue_shift(double hue_factor);

/* n RGB pixels (interleaved) shifted in hue by `shift`, in place. */
void fmt_hue_row(uint8_t *p, size_t n, uint8_t shift);

#endif
