/* color.h - torchvision's ColorJitter on uint8 pixels: its ranges, its draws on the sample's
 * words, and the four ops in the drawn order, byte for byte as its PIL path gives them. The ops
 * themselves (Pillow 9.4's ImageEnhance blends, L conversion and HSV conversion) are
 * pixels/enhance.h's, which RandomGrayscale and the auto-augment policies use as well.
 *
 * Internal to libshardread. The functions are pure functions of their arguments (thread-safe).
 */
#ifndef SHR_COLOR_H
#define SHR_COLOR_H

#include <stddef.h>
#include <stdint.h>

#include "shardread.h"
#include "transform.h"
#include "enhance.h"

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

#endif
