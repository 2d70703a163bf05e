/* erase_noise.h - RandomErasing's value="random": the erased box filled with standard normal
 * noise from the reader's words (see shardread.h, SHR_SALT_ERASE_NOISE), in the delivered
 * dtype and layout.
 *
 * Internal to libshardread; pure functions of their arguments (thread-safe).
 */
#ifndef SHR_ERASE_NOISE_H
#define SHR_ERASE_NOISE_H

#include <stdint.h>

#include "fmt.h"
#include "shardread.h"
#include "transform.h"

/* 0, or SHR_EINVAL with the reason o's erase_random is bad in m. */
SHR_INTERNAL int shr_erase_noise_check(const shr_options *o, fmt_msg *m);

/* Value j (0, 1, ...) of the noise of sample `index`: a standard normal. */
SHR_INTERNAL float shr_erase_noise_value(uint64_t seed, uint64_t epoch, uint64_t index,
                                         uint64_t j);

/* Fill p's erased box of one delivered sample (o's dtype, layout and size) with the noise, in
 * torchvision's order: channel, then row, then column of the box. */
SHR_INTERNAL void shr_erase_noise_apply(const shr_tf_out *o, const shr_params *p, uint64_t seed,
                                        uint64_t epoch, uint64_t index, void *dst);

#endif
