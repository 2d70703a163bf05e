/* erase.c - RandomErasing: torchvision's get_params with the reader's words, and the box
 * written with the value in the delivered dtype and layout.
 *
 * The draw has RandomResizedCrop's arithmetic (transform.c) with two differences torchvision
 * has: the height takes the product with the aspect ratio and the width the quotient, and a
 * box must be strictly smaller than the image in both directions. The words are consumed as
 * torch's generator would be: two per attempt, and the row and column after the one that fits.
 * The box is written one channel at a time, row by row, with the dtype chosen once per channel.
 */
#include "erase.h"

#include <math.h>
#include <string.h>

void shr_erase_init(shr_erase *e, const shr_options *o)
{
    e->p_d = o->erase_p;
    for (int i = 0; i < 2; i++) {
        e->scale_f[i] = (float)o->erase_scale[i];
        e->log_ratio[i] = shr_tf_torch_logf((float)o->erase_ratio[i]);
    }
    for (int c = 0; c < 4; c++)
        e->value[c] = o->erase_value[c];
}

void shr_erase_draw(const shr_erase *e, uint64_t seed, uint64_t epoch, uint64_t index,
                    uint32_t width, uint32_t height, shr_params *p)
{
    p->erase = 0;
    p->erase_x = p->erase_y = p->erase_w = p->erase_h = 0;
    if (!(e->p_d > 0) ||
        !shr_tf_bernoulli(shr_tf_word(seed, epoch, index, SHR_SALT_ERASE, 0), e->p_d))
        return;
    double area = (double)height * (double)width;
    for (uint32_t a = 0; a < 10; a++) {
        uint32_t k = 1 + 2 * a;
        double target = area * (double)shr_tf_uniform(shr_tf_word(seed, epoch, index,
                                                                  SHR_SALT_ERASE, k),
                                                      e->scale_f[0], e->scale_f[1]);
        double aspect = (double)shr_tf_torch_expf(shr_tf_uniform(
            shr_tf_word(seed, epoch, index, SHR_SALT_ERASE, k + 1), e->log_ratio[0],
            e->log_ratio[1]));
        double h = rint(sqrt(target * aspect)), w = rint(sqrt(target / aspect));
        if (!(h < height && w < width))
            continue;
        p->erase = 1;
        p->erase_h = (uint32_t)h;
        p->erase_w = (uint32_t)w;
        p->erase_y = shr_tf_word(seed, epoch, index, SHR_SALT_ERASE, k + 2) %
                     (height - p->erase_h + 1);
        p->erase_x = shr_tf_word(seed, epoch, index, SHR_SALT_ERASE, k + 3) %
                     (width - p->erase_w + 1);
        return;
    }
}

/* the box of one channel: erase_w values step apart per row, rows row apart, from index i0 */
#define ERASE_FILL(T, val)                                                                      \
    do {                                                                                        \
        T *d_ = (T *)dst + i0;                                                                  \
        for (uint32_t y_ = 0; y_ < p->erase_h; y_++, d_ += row)                                 \
            for (uint32_t x_ = 0; x_ < p->erase_w; x_++)                                        \
                d_[(size_t)x_ * step] = (val);                                                  \
    } while (0)

void shr_erase_apply(const shr_erase *e, const shr_tf_out *o, const shr_params *p, void *dst)
{
    if (!p->erase || !p->erase_w || !p->erase_h)
        return;
    uint32_t C = o->channels, W = o->width;
    size_t plane = (size_t)W * o->height;
    int nhwc = o->layout == SHR_LAYOUT_NHWC;
    size_t step = nhwc ? C : 1, row = nhwc ? (size_t)W * C : W;
    for (uint32_t c = 0; c < C; c++) {
        float v = e->value[c < 4 ? c : 3];
        size_t i0 = nhwc ? ((size_t)p->erase_y * W + p->erase_x) * C + c
                         : c * plane + (size_t)p->erase_y * W + p->erase_x;
        switch (o->dtype) {
        case SHR_DTYPE_U8:
            if (step == 1) {
                for (uint32_t y = 0; y < p->erase_h; y++)
                    memset((uint8_t *)dst + i0 + y * row, (uint8_t)v, p->erase_w);
            } else {
                ERASE_FILL(uint8_t, (uint8_t)v);
            }
            break;
        case SHR_DTYPE_F32:
            ERASE_FILL(float, v);
            break;
        case SHR_DTYPE_F16: {
            uint16_t v16 = shr_tf_half(v);
            ERASE_FILL(uint16_t, v16);
            break;
        }
        }
    }
}
