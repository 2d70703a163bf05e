/* mix.h - MixUp and CutMix on a finished batch (torchvision's reference recipe, RandomMixup and
 * RandomCutmix, one of the two per batch; transforms.v2.MixUp and CutMix compute the same): the
 * draws per batch from the reader's words, the pixels mixed in place at the output dtype and
 * layout, and the soft labels. See shardread.h, "MixUp and CutMix".
 *
 * Internal to libshardread; pure functions of their arguments (thread-safe).
 */
#ifndef SHR_MIX_H
#define SHR_MIX_H

#include <stddef.h>
#include <stdint.h>

#include "fmt.h"
#include "shardread.h"
#include "transform.h"

/* What the options ask for, prepared once per reader. */
typedef struct {
    double mixup_alpha, cutmix_alpha;   /* 0: that op is off */
    uint32_t classes;                   /* soft label columns */
    uint32_t width, height, channels;
    shr_dtype dtype;
    shr_layout layout;
    int on;                             /* some op is on */
} shr_mixer;

/* 0, or SHR_EINVAL with the reason o's MixUp / CutMix options are bad (without the dataset) in
 * m. */
SHR_INTERNAL int shr_mix_check(const shr_options *o, fmt_msg *m);

/* m for batches of the output out, with `classes` soft label columns. */
SHR_INTERNAL void shr_mix_init(shr_mixer *m, const shr_options *o, const shr_tf_out *out,
                               uint32_t classes);

/* The draws of batch `key` (see shardread.h: number * world + rank) of epoch: which op, the
 * Beta(alpha, alpha) lambda and, for CutMix, the box and the final lambda. */
SHR_INTERNAL void shr_mix_draw(const shr_mixer *m, uint64_t seed, uint64_t epoch, uint64_t key,
                               shr_mix_record *rec);

/* Beta(alpha, alpha) from the words of stream key (exposed for the tests). */
SHR_INTERNAL double shr_mix_beta(double alpha, uint64_t seed, uint64_t epoch, uint64_t key);

/* Mix the n samples of data (m's dtype and layout) as rec says, sample i with sample i - 1
 * (sample 0 with n - 1), and write the soft labels (n * classes float32) from labels. keep: room
 * for one sample at the output dtype. Returns 0, or SHR_EINVAL when a label is not in
 * [0, classes) (*bad is then its position; nothing is mixed). */
SHR_INTERNAL int shr_mix_apply(const shr_mixer *m, const shr_mix_record *rec, void *data,
                               uint32_t n, const int64_t *labels, float *soft, void *keep,
                               uint32_t *bad);

#endif
