/* color.c - torchvision's ColorJitter: the ranges, ColorJitter.get_params on the sample's words
 * (torch.randperm(4) and the uniform factors), and the four ops in the drawn order. The ops are
 * Pillow's, byte for byte, applied together by fmt_color_jitter (pixels/enhance.c).
 */
#include "color.h"

#define JITTER_OPS 4

void shr_color_jitter_init(shr_color_jitter *j, const shr_options *o)
{
    const double *r[JITTER_OPS] = {o->jitter_brightness, o->jitter_contrast,
                                   o->jitter_saturation, o->jitter_hue};
    j->any = 0;
    for (int k = 0; k < JITTER_OPS; k++) {
        double center = k == 3 ? 0.0 : 1.0;
        j->lo[k] = (float)r[k][0];
        j->hi[k] = (float)r[k][1];
        j->has[k] = !(r[k][0] == center && r[k][1] == center);
        j->any |= j->has[k];
    }
}

void shr_color_jitter_draw(const shr_color_jitter *j, uint64_t seed, uint64_t epoch,
                           uint64_t index, shr_params *p)
{
    p->jitter = 0;
    p->brightness = p->contrast = p->saturation = 1.0f;
    p->hue = 0.0f;
    for (int k = 0; k < JITTER_OPS; k++)
        p->jitter_order[k] = (uint8_t)k;
    if (!j->any)
        return;
    /* torch.randperm(4) on the CPU: a Fisher-Yates shuffle from the front */
    uint32_t k = 0;
    for (uint32_t i = 0; i < JITTER_OPS - 1; i++) {
        uint32_t z = shr_tf_word(seed, epoch, index, SHR_SALT_JITTER, k++) % (JITTER_OPS - i);
        uint8_t t = p->jitter_order[i];
        p->jitter_order[i] = p->jitter_order[i + z];
        p->jitter_order[i + z] = t;
    }
    float *f[JITTER_OPS] = {&p->brightness, &p->contrast, &p->saturation, &p->hue};
    for (int op = 0; op < JITTER_OPS; op++) {
        if (!j->has[op])
            continue;
        *f[op] = shr_tf_uniform(shr_tf_word(seed, epoch, index, SHR_SALT_JITTER, k++), j->lo[op],
                                j->hi[op]);
        p->jitter |= 1u << op;
    }
}

void shr_color_jitter_apply(const shr_params *p, uint8_t *px, uint32_t width, uint32_t height,
                            uint32_t channels, size_t stride)
{
    fmt_color_jitter(px, width, height, channels, stride, p->jitter_order, p->jitter,
                     p->brightness, p->contrast, p->saturation, (double)p->hue);
}
