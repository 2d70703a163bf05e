/* erase.h - torchvision's RandomErasing on a delivered sample (after the conversion to the
 * output dtype and the normalisation, as torchvision erases the normalised tensor).
 *
 * Internal to libshardread; pure functions of their arguments (thread-safe).
 */
#ifndef SHR_ERASE_H
#define SHR_ERASE_H

#include <stdint.h>

#include "shardread.h"
#include "transform.h"

/* The ranges and values derived once per reader. */
typedef struct {
    double p_d;
    float scale_f[2];               /* the scale bounds in float32 (torch's uniform_) */
    float log_ratio[2];             /* torch.log(torch.tensor(ratio)) */
    float value[4];                 /* per channel, in delivered units */
} shr_erase;

SHR_INTERNAL void shr_erase_init(shr_erase *e, const shr_options *o);

/* torchvision's RandomErasing draws for an output of width x height (see shardread.h,
 * SHR_SALT_ERASE): fills p->erase and the box. */
SHR_INTERNAL void shr_erase_draw(const shr_erase *e, uint64_t seed, uint64_t epoch,
                                 uint64_t index, uint32_t width, uint32_t height, shr_params *p);

/* Write e->value into p's box of one delivered sample (o's dtype, layout and size). */
SHR_INTERNAL void shr_erase_apply(const shr_erase *e, const shr_tf_out *o, const shr_params *p,
                                  void *dst);

#endif
