/* augment_read.c - the read-time augmentation pipeline: options checked, draws made, ops
 * applied in order. The ops themselves are in color.c and erase.c. */
#include "augment_read.h"

#include <math.h>

void shr_aug_init(shr_aug *a, const shr_options *o)
{
    shr_color_jitter_init(&a->jitter, o);
    a->gray_p = o->grayscale_p;
    shr_erase_init(&a->erase, o);
    a->pixels = a->jitter.any || a->gray_p > 0;
    a->any = a->pixels || o->erase_p > 0;
}

static int range_ok(const double r[2], double lo, double hi)
{
    return r[0] >= lo && r[0] <= r[1] && r[1] <= hi;
}

const char *shr_aug_check(const shr_options *o)
{
    if (!range_ok(o->jitter_brightness, 0, INFINITY))
        return "jitter_brightness must satisfy 0 <= min <= max (finite)";
    if (!range_ok(o->jitter_contrast, 0, INFINITY))
        return "jitter_contrast must satisfy 0 <= min <= max (finite)";
    if (!range_ok(o->jitter_saturation, 0, INFINITY))
        return "jitter_saturation must satisfy 0 <= min <= max (finite)";
    if (!range_ok(o->jitter_hue, -0.5, 0.5))
        return "jitter_hue must satisfy -0.5 <= min <= max <= 0.5";
    if (!(o->jitter_brightness[1] < INFINITY && o->jitter_contrast[1] < INFINITY &&
          o->jitter_saturation[1] < INFINITY))
        return "jitter ranges must be finite";
    if (!(o->grayscale_p >= 0 && o->grayscale_p <= 1))
        return "grayscale_p must be a probability in 0..1";
    if (!(o->erase_p >= 0 && o->erase_p <= 1))
        return "erase_p must be a probability in 0..1";
    if (o->erase_p > 0) {
        if (!range_ok(o->erase_scale, 0, 1))
            return "erase_scale must satisfy 0 <= min <= max <= 1";
        if (!(o->erase_ratio[0] > 0 && o->erase_ratio[0] <= o->erase_ratio[1] &&
              o->erase_ratio[1] < 1e6))
            return "erase_ratio must satisfy 0 < min <= max";
        for (int c = 0; c < 4; c++) {
            float v = o->erase_value[c];
            if (!isfinite(v))
                return "erase_value must be finite";
            if (o->dtype == SHR_DTYPE_U8 && !(v >= 0 && v <= 255 && v == floorf(v)))
                return "erase_value must be whole numbers 0..255 with the uint8 dtype";
        }
    }
    return NULL;
}

void shr_aug_draw(const shr_aug *a, uint64_t seed, uint64_t epoch, uint64_t index,
                  uint32_t width, uint32_t height, shr_params *p)
{
    shr_color_jitter_draw(&a->jitter, seed, epoch, index, p);
    p->gray = a->gray_p > 0 &&
              shr_tf_bernoulli(shr_tf_word(seed, epoch, index, SHR_SALT_GRAY, 0), a->gray_p);
    shr_erase_draw(&a->erase, seed, epoch, index, width, height, p);
}

void shr_aug_pixels(const shr_aug *a, const shr_params *p, uint8_t *px, uint32_t width,
                    uint32_t height, uint32_t channels, size_t stride)
{
    if (p->jitter)
        shr_color_jitter_apply(p, px, width, height, channels, stride);
    if (p->gray)
        shr_color_grayscale(px, width, height, channels, stride);
}

void shr_aug_output(const shr_aug *a, const shr_tf_out *o, const shr_params *p, void *dst)
{
    if (p->erase)
        shr_erase_apply(&a->erase, o, p, dst);
}
