/* augment_read.c - the read-time augmentation pipeline: options checked, draws made, ops
 * applied in order. The ops themselves are in affine.c, autoaugment.c, color.c and erase.c.
 *
 * The order is torchvision's usual recipe: the crop (RandomResizedCrop) and the flip, then the
 * geometric transforms (RandomRotation, RandomAffine), then the policy (TrivialAugmentWide or
 * RandAugment), then the colour ops (ColorJitter, RandomGrayscale), the conversion and
 * normalisation, and RandomErasing. Rotation and affine come before the policy and the colour
 * ops because they move pixels and bring in the fill colour, which the colour ops then treat as
 * torchvision does when the transforms are composed in that order (the detection and
 * classification recipes put the geometry first). */
#include "augment_read.h"
#include "mirror.h"
#include "segm_read.h"
#include "stats.h"

#include <math.h>
#include <string.h>

void shr_aug_init(shr_aug *a, const shr_options *o)
{
    shr_color_jitter_init(&a->jitter, o);
    a->gray_p = o->grayscale_p;
    shr_erase_init(&a->erase, o);
    shr_affine_init(&a->affine, o);
    shr_aa_init(&a->aa, o);
    a->filter = o->aug_interpolation;
    memcpy(a->fill, o->aug_fill, 4);
    a->scratch = o->rotation || o->affine || o->auto_augment != SHR_AUTO_AUGMENT_NONE;
    a->pixels = a->jitter.any || a->gray_p > 0 || a->scratch;
    a->any = a->pixels || o->erase_p > 0;
}

int shr_aug_check(const shr_options *o, fmt_msg *m)
{
    /* the jitter ranges, rotation_degrees and affine_degrees, _translate, _scale and _shear:
     * options.def's ranges, checked before */
    /* aug_interpolation and auto_augment (the choices), aa_bins, aa_num_ops and aa_magnitude:
     * options.def's rows, checked before; the magnitude is a bin index besides */
    if (o->auto_augment == SHR_AUTO_AUGMENT_RAND && !(o->aa_magnitude < o->aa_bins))
        return fmt_fail(m, SHR_EINVAL, "auto_augment magnitude (aa_magnitude) must be below "
                        "num_magnitude_bins (aa_bins)");
    /* grayscale_p and erase_p: options.def's ranges, checked before */
    if (o->erase_p > 0) {
        /* erase_scale and erase_ratio: options.def's ranges, checked before */
        for (int c = 0; c < 4; c++) {
            float v = o->erase_value[c];
            if (!isfinite(v))
                return fmt_fail(m, SHR_EINVAL, "erase_value must be finite");
            if (o->dtype == SHR_DTYPE_U8 && !(v >= 0 && v <= 255 && v == floorf(v)))
                return fmt_fail(m, SHR_EINVAL, "erase_value must be whole numbers 0..255 with the "
                                "uint8 dtype");
        }
    }
    return 0;
}

void shr_aug_draw(const shr_aug *a, uint64_t seed, uint64_t epoch, uint64_t index,
                  uint32_t width, uint32_t height, shr_params *p)
{
    shr_affine_draw(&a->affine, seed, epoch, index, width, height, p);
    shr_aa_draw(&a->aa, seed, epoch, index, width, height, p);
    shr_color_jitter_draw(&a->jitter, seed, epoch, index, p);
    p->gray = a->gray_p > 0 &&
              shr_tf_bernoulli(shr_tf_word(seed, epoch, index, SHR_SALT_GRAY, 0), a->gray_p);
    shr_erase_draw(&a->erase, seed, epoch, index, width, height, p);
}

int shr_aug_has_pixels(const shr_params *p)
{
    return p->jitter || p->gray || p->rotate || p->affine || p->aa_ops;
}

int shr_aug_pixels(const shr_aug *a, const shr_params *p, uint8_t *px, uint32_t width,
                   uint32_t height, uint32_t channels, size_t stride, uint8_t *scratch)
{
    int flip = (int)p->flip;
    if (flip && shr_segm_has_warps(p)) {  /* the ops the flip does not commute with */
        shr_mirror_rows(px, width, height, channels, stride);
        flip = 0;
        shr_stage_lap(SHR_STAGE_FLIP);
    }
    size_t row = (size_t)width * channels;
    /* the warps ping-pong between px and scratch: one copy back at most */
    if (p->rotate && p->affine) {
        shr_affine_rotate(px, stride, scratch, row, width, height, channels,
                          (double)p->rotate_angle, a->filter, a->fill);
        shr_stage_lap(SHR_STAGE_ROTATE);
        shr_affine_apply(scratch, row, px, stride, width, height, channels,
                         (double)p->affine_angle, (double)p->affine_tx, (double)p->affine_ty,
                         (double)p->affine_scale, (double)p->affine_shear_x,
                         (double)p->affine_shear_y, NULL, a->filter, a->fill);
        shr_stage_lap(SHR_STAGE_AFFINE);
    } else if (p->rotate) {
        shr_affine_rotate(px, stride, scratch, row, width, height, channels,
                          (double)p->rotate_angle, a->filter, a->fill);
        shr_tf_copy_rows(px, stride, scratch, row, row, height);
        shr_stage_lap(SHR_STAGE_ROTATE);
    } else if (p->affine) {
        shr_affine_apply(px, stride, scratch, row, width, height, channels,
                         (double)p->affine_angle, (double)p->affine_tx, (double)p->affine_ty,
                         (double)p->affine_scale, (double)p->affine_shear_x,
                         (double)p->affine_shear_y, NULL, a->filter, a->fill);
        shr_tf_copy_rows(px, stride, scratch, row, row, height);
        shr_stage_lap(SHR_STAGE_AFFINE);
    }
    if (p->aa_ops) {
        shr_aa_apply(&a->aa, p, px, width, height, channels, stride, scratch);
        shr_stage_lap(SHR_STAGE_AUTO_AUGMENT);
    }
    if (p->jitter) {
        shr_color_jitter_apply(p, px, width, height, channels, stride);
        shr_stage_lap(SHR_STAGE_JITTER);
    }
    if (p->gray) {
        fmt_color_grayscale(px, width, height, channels, stride);
        shr_stage_lap(SHR_STAGE_GRAYSCALE);
    }
    return flip;
}

