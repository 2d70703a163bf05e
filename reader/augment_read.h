/* augment_read.h - the read-time augmentations after the crop and flip, in the order the reader
 * applies them (see shardread.h, "Augmentations"): RandomRotation, RandomAffine,
 * TrivialAugmentWide or RandAugment, ColorJitter and RandomGrayscale on the uint8 sample, then,
 * once the output kernel has converted it, RandomErasing on the delivered values.
 *
 * Internal to libshardread; pure functions of their arguments (thread-safe).
 */
#ifndef SHR_AUGMENT_READ_H
#define SHR_AUGMENT_READ_H

#include <stddef.h>
#include <stdint.h>

#include "affine.h"
#include "autoaugment.h"
#include "color.h"
#include "erase.h"
#include "fmt.h"
#include "shardread.h"
#include "transform.h"

/* What the options ask for, prepared once per reader. */
typedef struct {
    shr_color_jitter jitter;
    double gray_p;
    shr_erase erase;
    shr_affine affine;              /* RandomRotation, RandomAffine */
    shr_aa aa;                      /* TrivialAugmentWide, RandAugment */
    shr_filter filter;              /* their interpolation and fill */
    uint8_t fill[4];
    int pixels;                     /* some op changes the uint8 pixels */
    int scratch;                    /* some op needs shr_aug_pixels' scratch */
    int any;                        /* some op is on */
} shr_aug;

SHR_INTERNAL void shr_aug_init(shr_aug *a, const shr_options *o);

/* 0, or SHR_EINVAL with the reason o's augmentation options are bad in m. */
SHR_INTERNAL int shr_aug_check(const shr_options *o, fmt_msg *m);

/* Every augmentation's draws for the sample (output width x height) into p. */
SHR_INTERNAL void shr_aug_draw(const shr_aug *a, uint64_t seed, uint64_t epoch, uint64_t index,
                               uint32_t width, uint32_t height, shr_params *p);

/* Whether p has uint8 ops for shr_aug_pixels. */
SHR_INTERNAL int shr_aug_has_pixels(const shr_params *p);

/* The uint8 ops of p on the sample px (width x height, channels, rows stride bytes apart), the
 * flip first where p has a geometric op (rotation, affine, a shear, translation or rotation of
 * the auto augmentation: they do not commute with the mirror). scratch: width * height *
 * channels bytes where a->scratch is set (else may be NULL). Returns whether the sample is
 * still to be mirrored (p->flip, unless done here). */
SHR_INTERNAL int shr_aug_pixels(const shr_aug *a, const shr_params *p, uint8_t *px,
                                uint32_t width, uint32_t height, uint32_t channels,
                                size_t stride, uint8_t *scratch);

#endif
