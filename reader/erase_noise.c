/* erase_noise.c - RandomErasing with value="random".
 *
 * torchvision fills the box with torch.empty([C, h, w]).normal_(): a standard normal per erased
 * value, in the delivered (normalised) units. Here value j of that [C, h, w] block, in its C
 * order, is a Box-Muller normal from the 64-bit word shr_mix(seed, epoch, index,
 * SHR_SALT_ERASE_NOISE << 32 | j / 2): the top 32 bits u1 and the low 32 bits u2 as uniforms
 * (w + 0.5) * 2^-32, and sqrt(-2 ln u1) times cos(2 pi u2) for even j, sin(2 pi u2) for odd j,
 * computed in double and rounded to float32 (then to half for float16). The distribution is
 * torch's; the values are the reader's own, the same at every thread count and after a resume.
 */
#include "erase_noise.h"
#include "mix.h"

#include <math.h>

static const double two_pi = 6.283185307179586476925286766559;

int shr_erase_noise_check(const shr_options *o, fmt_msg *m)
{
    if (o->erase_random && o->erase_p > 0 && o->dtype == SHR_DTYPE_U8)
        return fmt_fail(m, SHR_EINVAL, "erase_random needs a float dtype (float32 or "
                        "float16): normal noise is not whole numbers 0..255");
    return 0;
}

/* values 2m and 2m + 1 */
static void noise_pair(uint64_t seed, uint64_t epoch, uint64_t index, uint64_t m, float v[2])
{
    uint64_t w = shr_mix(seed, epoch, index, ((uint64_t)SHR_SALT_ERASE_NOISE << 32) | m);
    double u1 = ((double)(w >> 32) + 0.5) * 0x1p-32;
    double u2 = ((double)(w & 0xffffffffu) + 0.5) * 0x1p-32;
    double r = sqrt(-2.0 * log(u1));
    v[0] = (float)(r * cos(two_pi * u2));
    v[1] = (float)(r * sin(two_pi * u2));
}

float shr_erase_noise_value(uint64_t seed, uint64_t epoch, uint64_t index, uint64_t j)
{
    float v[2];
    noise_pair(seed, epoch, index, j / 2, v);
    return v[j % 2];
}

void shr_erase_noise_apply(const shr_tf_out *o, const shr_params *p, uint64_t seed,
                           uint64_t epoch, uint64_t index, void *dst)
{
    if (!p->erase || !p->erase_w || !p->erase_h)
        return;
    uint32_t C = o->channels, W = o->width;
    size_t plane = (size_t)W * o->height;
    uint64_t j = 0;
    float pair[2] = {0, 0};
    for (uint32_t c = 0; c < C; c++)
        for (uint32_t y = p->erase_y; y < p->erase_y + p->erase_h; y++)
            for (uint32_t x = p->erase_x; x < p->erase_x + p->erase_w; x++, j++) {
                size_t i = o->layout == SHR_LAYOUT_NHWC ? ((size_t)y * W + x) * C + c
                                                        : c * plane + (size_t)y * W + x;
                if (j % 2 == 0)
                    noise_pair(seed, epoch, index, j / 2, pair);
                float v = pair[j % 2];
                if (o->dtype == SHR_DTYPE_F32)
                    ((float *)dst)[i] = v;
                else if (o->dtype == SHR_DTYPE_F16)
                    ((uint16_t *)dst)[i] = shr_tf_half(v);
            }
}
