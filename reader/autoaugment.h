/* autoaugment.h - torchvision 0.14's TrivialAugmentWide and RandAugment on uint8 pixels, byte for
 * byte as its PIL path gives them: the op tables of _augmentation_space, the draws, and each op
 * of _apply_op (the geometric ones through affine.c, the blends through color.c, the rest here:
 * ImageEnhance.Sharpness, ImageOps.posterize, solarize, autocontrast and equalize).
 *
 * Internal to libshardread. Every function is a pure function of its arguments (thread-safe);
 * pixels are uint8, interleaved `channels` (1 or 3) per pixel, rows `stride` bytes apart,
 * changed in place; `scratch` is room for width * height * channels bytes the op may overwrite.
 */
#ifndef SHR_AUTOAUGMENT_H
#define SHR_AUTOAUGMENT_H

#include <stddef.h>
#include <stdint.h>

#include "shardread.h"
#include "transform.h"

/* The policy and its fixed tables, prepared once per reader. */
typedef struct {
    shr_auto_augment policy;
    uint32_t num_ops, magnitude, bins;
    shr_filter filter;
    uint8_t fill[4];
} shr_aa;

SHR_INTERNAL void shr_aa_init(shr_aa *t, const shr_options *o);

/* The policy's draws for an output of width x height (see shardread.h, SHR_SALT_AUTO_AUGMENT):
 * fills p->aa_ops, aa_op, aa_magnitude. */
SHR_INTERNAL void shr_aa_draw(const shr_aa *t, uint64_t seed, uint64_t epoch, uint64_t index,
                              uint32_t width, uint32_t height, shr_params *p);

/* The ops of p in order. */
SHR_INTERNAL void shr_aa_apply(const shr_aa *t, const shr_params *p, uint8_t *px, uint32_t width,
                               uint32_t height, uint32_t channels, size_t stride,
                               uint8_t *scratch);

/* Whether op moves pixels (does not commute with a mirror): the shears, translations, rotation. */
SHR_INTERNAL int shr_aa_op_geometric(int op);

/* torchvision's _apply_op(img, op, magnitude, interpolation, fill) on the PIL image. */
SHR_INTERNAL void shr_aa_apply_op(int op, double magnitude, shr_filter filter,
                                  const uint8_t fill[4], uint8_t *px, uint32_t width,
                                  uint32_t height, uint32_t channels, size_t stride,
                                  uint8_t *scratch);

/* torch.linspace(start, end, steps) in float32 as torch 1.13 computes it on x86-64 (its AVX2
 * kernel: the first 16 values as a vector base plus k * step, the rest with fused
 * multiply-adds from the nearer end). */
SHR_INTERNAL float shr_aa_linspace(float start, float end, uint32_t steps, uint32_t i);

/* The magnitude table entry bin of op (its unsigned value; 0 for the ops without one), for
 * TrivialAugmentWide (rand 0) or RandAugment (rand 1) on a width x height image. */
SHR_INTERNAL float shr_aa_magnitude(int op, int rand, uint32_t bins, uint32_t bin,
                                    uint32_t width, uint32_t height);

/* The ImageOps and ImageEnhance ops. */
SHR_INTERNAL void shr_aa_sharpness(uint8_t *px, uint32_t width, uint32_t height,
                                   uint32_t channels, size_t stride, float factor,
                                   uint8_t *scratch);
SHR_INTERNAL void shr_aa_posterize(uint8_t *px, uint32_t width, uint32_t height,
                                   uint32_t channels, size_t stride, int bits);
SHR_INTERNAL void shr_aa_solarize(uint8_t *px, uint32_t width, uint32_t height,
                                  uint32_t channels, size_t stride, double threshold);
SHR_INTERNAL void shr_aa_autocontrast(uint8_t *px, uint32_t width, uint32_t height,
                                      uint32_t channels, size_t stride);
SHR_INTERNAL void shr_aa_equalize(uint8_t *px, uint32_t width, uint32_t height,
                                  uint32_t channels, size_t stride);

#endif
