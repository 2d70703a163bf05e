/* mix.c - MixUp and CutMix: the batch's draws from the reader's words, and torchvision's
 * arithmetic on the delivered values.
 *
 * torchvision's RandomMixup / RandomCutmix (references/classification/transforms.py, as train.py
 * uses them with p = 1) work on the float batch and its one-hot float targets:
 *     batch_rolled = batch.roll(1, 0)          sample i's partner is sample i - 1 (0's is n - 1)
 *     MixUp:  batch_rolled.mul_(1 - lam); batch.mul_(lam).add_(batch_rolled)
 *     CutMix: batch[:, :, y1:y2, x1:x2] = batch_rolled[:, :, y1:y2, x1:x2];
 *             lam = 1 - (x2 - x1) * (y2 - y1) / (W * H)
 *     target_rolled.mul_(1 - lam); target.mul_(lam).add_(target_rolled)
 * A float16 tensor times a Python number is computed in float32 with the number as a float32
 * (torch >= 2's "opmath"), rounded back to half; each in-place op rounds to the dtype. That is
 * what is computed here, with contraction into fused multiply-adds off. (torch 1.x rounded the
 * number to half first: its float16 results can differ in the last bit.)
 *
 * The batch is mixed in place: going from the last sample down, sample i - 1 is still the
 * original when sample i takes from it; sample 0 takes from the original last sample, kept
 * aside first.
 *
 * Lambda. torch draws it with torch._sample_dirichlet([alpha, alpha])[0], a Beta(alpha, alpha);
 * here it is X / (X + Y) of two Gamma(alpha) variates from Marsaglia and Tsang's method on the
 * words of the batch's stream, computed in logarithms so that tiny alphas (whose gammas
 * underflow) still give a lambda near 0 or 1.
 */
#include "mix.h"

#include <math.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

static const double two_pi = 6.283185307179586476925286766559;

#define GAMMA_TRIES 64u         /* Marsaglia-Tsang accepts > 95% of tries: 64 never run out */
#define GAMMA_WORDS 200u        /* words per gamma: 3 per try, and one for alpha < 1 */

int shr_mix_check(const shr_options *o, fmt_msg *m)
{
    /* mixup_alpha and cutmix_alpha: options.def's ranges, checked before */
    if (o->mixup_alpha == 0 && o->cutmix_alpha == 0)
        return 0;
    if (o->dtype == SHR_DTYPE_U8)
        return fmt_fail(m, SHR_EINVAL, "mixup and cutmix need a float dtype (float32 or "
                        "float16): mixed pixels are not whole numbers");
    return 0;
}

void shr_mix_init(shr_mixer *m, const shr_options *o, const shr_tf_out *out, uint32_t classes)
{
    memset(m, 0, sizeof *m);
    m->mixup_alpha = o->mixup_alpha;
    m->cutmix_alpha = o->cutmix_alpha;
    m->classes = classes;
    m->width = out->width;
    m->height = out->height;
    m->channels = out->channels;
    m->dtype = out->dtype;
    m->layout = out->layout;
    m->on = o->mixup_alpha > 0 || o->cutmix_alpha > 0;
}

/* word k of the batch's stream, 64 bits */
static uint64_t word(uint64_t seed, uint64_t epoch, uint64_t key, uint32_t k)
{
    return shr_mix(seed, epoch, key, (uint64_t)SHR_SALT_MIX + k);
}

/* uniform in (0, 1): the top 53 bits, centred in their interval */
static double unit(uint64_t w)
{
    return ((double)(w >> 11) + 0.5) * 0x1p-53;
}

/* log of a Gamma(alpha, 1) variate from words k0 .. k0 + GAMMA_WORDS - 1 */
static double log_gamma_variate(double alpha, uint64_t seed, uint64_t epoch, uint64_t key,
                                uint32_t k0)
{
    double a = alpha < 1 ? alpha + 1 : alpha;
    double d = a - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    double logg = log(d);               /* the mode, should every try fail */
    uint32_t k = k0 + 1;
    for (uint32_t t = 0; t < GAMMA_TRIES; t++, k += 3) {
        /* a standard normal by Box-Muller */
        double x = sqrt(-2.0 * log(unit(word(seed, epoch, key, k)))) *
                   cos(two_pi * unit(word(seed, epoch, key, k + 1)));
        double v = 1.0 + c * x;
        if (v <= 0)
            continue;
        v = v * v * v;
        double u = unit(word(seed, epoch, key, k + 2));
        if (log(u) < 0.5 * x * x + d - d * v + d * log(v)) {
            logg = log(d) + log(v);
            break;
        }
    }
    /* Gamma(alpha) = Gamma(alpha + 1) * U^(1 / alpha) for alpha < 1 */
    if (alpha < 1)
        logg += log(unit(word(seed, epoch, key, k0))) / alpha;
    return logg;
}

double shr_mix_beta(double alpha, uint64_t seed, uint64_t epoch, uint64_t key)
{
    double lx = log_gamma_variate(alpha, seed, epoch, key, 16);
    double ly = log_gamma_variate(alpha, seed, epoch, key, 16 + GAMMA_WORDS);
    /* X / (X + Y) = 1 / (1 + exp(log Y - log X)) */
    return 1.0 / (1.0 + exp(ly - lx));
}

void shr_mix_draw(const shr_mixer *m, uint64_t seed, uint64_t epoch, uint64_t key,
                  shr_mix_record *rec)
{
    memset(rec, 0, sizeof *rec);
    if (!m->on)
        return;
    int cut = m->cutmix_alpha > 0 &&
              (m->mixup_alpha == 0 || (word(seed, epoch, key, 0) & 1));
    double alpha = cut ? m->cutmix_alpha : m->mixup_alpha;
    double lam = shr_mix_beta(alpha, seed, epoch, key);
    rec->op = cut ? SHR_MIX_CUTMIX : SHR_MIX_MIXUP;
    rec->lam_drawn = lam;
    rec->lam = lam;
    if (!cut)
        return;
    int64_t W = m->width, H = m->height;
    int64_t rx = (int64_t)(word(seed, epoch, key, 1) % (uint64_t)W);
    int64_t ry = (int64_t)(word(seed, epoch, key, 2) % (uint64_t)H);
    double r = 0.5 * sqrt(1.0 - lam);
    int64_t rw = (int64_t)(r * (double)W), rh = (int64_t)(r * (double)H);
    int64_t x1 = rx - rw > 0 ? rx - rw : 0, y1 = ry - rh > 0 ? ry - rh : 0;
    int64_t x2 = rx + rw < W ? rx + rw : W, y2 = ry + rh < H ? ry + rh : H;
    rec->x1 = (uint32_t)x1;
    rec->y1 = (uint32_t)y1;
    rec->x2 = (uint32_t)x2;
    rec->y2 = (uint32_t)y2;
    rec->lam = 1.0 - (double)((x2 - x1) * (y2 - y1)) / (double)(W * H);
}

/* IEEE half -> float (exact) */
static float from_half(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, f = h & 0x3ff;
    float v;
    if (e == 0)
        v = (float)f * 0x1p-24f;
    else if (e == 31)
        v = f ? NAN : INFINITY;
    else
        v = ldexpf((float)(f | 0x400), (int)e - 25);
    return sign ? -v : v;
}

/* dst = dst * l + src * r elementwise over n values, torch's mul_ then add_ at the dtype */
static void blend(shr_dtype dt, void *dst, const void *src, size_t n, double lam)
{
    if (dt == SHR_DTYPE_F32) {
        float l = (float)lam, r = (float)(1.0 - lam);
        float *restrict d = dst;
        const float *restrict s = src;
        size_t i = 0;
        /* blocks of 8 the compiler turns into vector instructions (the same operations, so the
         * same floats) */
        for (; i + 8 <= n; i += 8) {
            float a[8], b[8];
            for (int k = 0; k < 8; k++) {
                a[k] = d[i + k] * l;
                b[k] = s[i + k] * r;
            }
            for (int k = 0; k < 8; k++)
                d[i + k] = a[k] + b[k];
        }
        for (; i < n; i++) {
            float a = d[i] * l, b = s[i] * r;
            d[i] = a + b;
        }
    } else {
        float l = (float)lam, r = (float)(1.0 - lam);
        uint16_t *d = dst;
        const uint16_t *s = src;
        for (size_t i = 0; i < n; i++) {
            float a = from_half(shr_tf_half(from_half(d[i]) * l));
            float b = from_half(shr_tf_half(from_half(s[i]) * r));
            d[i] = shr_tf_half(a + b);
        }
    }
}

/* copy rec's box of one sample from src to dst */
static void paste(const shr_mixer *m, const shr_mix_record *rec, uint8_t *dst, const uint8_t *src,
                  size_t elem)
{
    size_t W = m->width, H = m->height, C = m->channels;
    size_t cols = rec->x2 - rec->x1;
    for (size_t y = rec->y1; y < rec->y2; y++) {
        if (m->layout == SHR_LAYOUT_NHWC) {
            size_t at = (y * W + rec->x1) * C * elem;
            memcpy(dst + at, src + at, cols * C * elem);
        } else {
            for (size_t c = 0; c < C; c++) {
                size_t at = ((c * H + y) * W + rec->x1) * elem;
                memcpy(dst + at, src + at, cols * elem);
            }
        }
    }
}

int shr_mix_apply(const shr_mixer *m, const shr_mix_record *rec, void *data, uint32_t n,
                  const int64_t *labels, float *soft, void *keep, uint32_t *bad)
{
    size_t K = m->classes;
    for (uint32_t i = 0; i < n; i++)
        if (labels[i] < 0 || (uint64_t)labels[i] >= K) {
            *bad = i;
            return SHR_EINVAL;
        }
    memset(soft, 0, (size_t)n * K * sizeof *soft);
    if (rec->op == SHR_MIX_NONE || n == 0) {
        for (uint32_t i = 0; i < n; i++)
            soft[i * K + (size_t)labels[i]] = 1.0f;
        return 0;
    }
    /* soft labels: onehot(y) * (float)lam + onehot(y_rolled) * (float)(1 - lam) */
    float l = (float)rec->lam, r = (float)(1.0 - rec->lam);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t p = i ? i - 1 : n - 1;
        float *row = soft + i * K;
        row[labels[i]] = l;
        row[labels[p]] = row[labels[p]] + r;    /* l + r where both are the same class */
    }
    size_t elem = shr_tf_elem_size(m->dtype);
    size_t values = (size_t)m->width * m->height * m->channels, bytes = values * elem;
    uint8_t *px = data;
    memcpy(keep, px + (size_t)(n - 1) * bytes, bytes);
    for (uint32_t i = n; i-- > 0;) {
        const uint8_t *partner = i ? px + (size_t)(i - 1) * bytes : keep;
        if (rec->op == SHR_MIX_MIXUP)
            blend(m->dtype, px + (size_t)i * bytes, partner, values, rec->lam_drawn);
        else
            paste(m, rec, px + (size_t)i * bytes, partner, elem);
    }
    return 0;
}
