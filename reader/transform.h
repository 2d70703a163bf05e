/* transform.h - the reader's per-sample transforms: the RandomResizedCrop draw and the output
 * kernels that write a finished uint8 sample into a batch at the requested dtype and layout.
 *
 * Internal to libshardread (not installed, not exported): shardread.c calls these from its
 * workers. Everything here is a pure function of its arguments, so any worker may transform any
 * sample and give the same bytes.
 */
#ifndef SHR_TRANSFORM_H
#define SHR_TRANSFORM_H

#include <stddef.h>
#include <stdint.h>

#include "shardread.h"

#if defined(__GNUC__)
#define SHR_INTERNAL __attribute__((visibility("hidden")))
#else
#define SHR_INTERNAL
#endif

/* ---- RandomResizedCrop ---- */

/* The ranges and the values derived from them once per reader. */
typedef struct {
    double scale[2], ratio[2];      /* as given (the fallback uses the ratio range in double) */
    float scale_f[2];               /* the scale bounds in float32, as torch's uniform_ has them */
    float log_ratio[2];             /* torch.log(torch.tensor(ratio)): float32 */
} shr_tf_rrc;

SHR_INTERNAL void shr_tf_rrc_init(shr_tf_rrc *c, const double scale[2], const double ratio[2]);

/* torchvision's RandomResizedCrop.get_params for a src_w x src_h image, with the 32-bit words
 * words(k) = the k-th word of the draw (see shardread.h, SHR_SALT_RRC) in place of torch's
 * generator. Fills p->x, y, w, h (and src_w, src_h). */
SHR_INTERNAL void shr_tf_rrc_box(const shr_tf_rrc *c, uint64_t seed, uint64_t epoch,
                                 uint64_t index, uint32_t src_w, uint32_t src_h, shr_params *p);

/* torch's Tensor.uniform_(lo, hi) on a float32 tensor for one 32-bit word of its generator:
 * fma_f32((word & 0xffffff) * 2^-24, hi - lo, lo). */
SHR_INTERNAL float shr_tf_uniform(uint32_t word, float lo, float hi);

/* Word k of a sample's stream `salt`: the low (k even) or high (k odd) half of
 * shr_mix(seed, epoch, index, salt + k / 2). */
SHR_INTERNAL uint32_t shr_tf_word(uint64_t seed, uint64_t epoch, uint64_t index, uint32_t salt,
                                  uint32_t k);

/* torch.rand(1) < p for the word w: (w & 0xffffff) * 2^-24 < (float)p. */
SHR_INTERNAL int shr_tf_bernoulli(uint32_t w, double p);

/* PyTorch's float32 exp and log on x86-64 CPUs (the vectorised kernels torch.exp and torch.log
 * run even on one element), reproduced bit for bit. Exposed for the tests. */
SHR_INTERNAL float shr_tf_torch_expf(float d);
SHR_INTERNAL float shr_tf_torch_logf(float d);

/* ---- output kernels ---- */

/* SHR_TF_AVX512: the AVX2 kernels, and float32 CHW RGB by the AVX-512 kernel (pixels/simd.h's
 * fmt_simd_avx512()) */
typedef enum { SHR_TF_PLAIN = 0, SHR_TF_AVX2, SHR_TF_AVX512 } shr_tf_path;

/* How finished samples are written. */
typedef struct {
    shr_dtype dtype;
    shr_layout layout;
    uint32_t width, height, channels;   /* the output sample */
    float mean[4], std[4];              /* float dtypes: value = ((float)x - mean) / std */
    float unit;                         /* > 1: value = ((float)x / unit - mean) / std */
    shr_tf_path path;
} shr_tf_out;

/* Fill o for the given output; no normalisation (mean 0, std 1). The path is AVX2 where the CPU
 * has AVX2 and F16C (AVX512 where it has AVX-512 F, BW and VBMI too and fmt_simd_avx512() says
 * so), unless the switch of pixels/simd.h is off (fmt_simd_set(0), shr_set_simd(0): the programs'
 * and the package's SHARDC_TRANSFORM=plain, SHARDREAD_SIMD=0 or SHARDC_RESAMPLE=plain). */
SHR_INTERNAL void shr_tf_out_init(shr_tf_out *o, shr_dtype dtype, shr_layout layout,
                                  uint32_t width, uint32_t height, uint32_t channels);

/* Force a path; returns 0, or -1 when the CPU lacks it (o keeps its path). */
SHR_INTERNAL int shr_tf_out_set_path(shr_tf_out *o, shr_tf_path path);

/* Bytes per element of a dtype (1, 4 or 2). */
SHR_INTERNAL size_t shr_tf_elem_size(shr_dtype d);

/* Write one sample: src is o->width x o->height uint8 pixels, interleaved o->channels, rows
 * stride bytes apart; dst receives width * height * channels elements of o->dtype in o->layout
 * (HWC or CHW for the one sample), mirrored left to right where mirror is non-zero. dst must not
 * overlap src. Every path gives the same bytes. */
SHR_INTERNAL void shr_tf_store(const shr_tf_out *o, const uint8_t *src, size_t stride, int mirror,
                               void *dst);

/* Copy height rows of row bytes from src (rows sstride apart) to dst (dstride apart). */
SHR_INTERNAL void shr_tf_copy_rows(uint8_t *dst, size_t dstride, const uint8_t *src,
                                   size_t sstride, size_t row, uint32_t height);

/* float32 -> IEEE half, round to nearest even (what F16C's vcvtps2ph does). */
SHR_INTERNAL uint16_t shr_tf_half(float f);

#endif
