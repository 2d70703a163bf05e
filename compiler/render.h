/* render.h - what one input image becomes: decode (with shrink-on-load), then either the plain
 * geometry (one sample) or K augmented variants. Shared by the build workers and by replay, so a
 * replayed sample goes through exactly the code that wrote it.
 */
#ifndef SHC_RENDER_H
#define SHC_RENDER_H

#include <stddef.h>
#include <stdint.h>

#include "augment.h"

typedef struct {
    fmt_geom geom;
    uint32_t channels;          /* 1 or 3 */
    fmt_limits limits;
    uint64_t max_file_bytes;    /* inputs larger than this are rejected */
    uint32_t augment;           /* K variants per input; 0 = the plain sample */
    fmt_aug_spec aug;
    uint64_t seed;
} shc_render_opts;

/* Number of samples one input yields. */
static inline uint32_t shc_render_count(const shc_render_opts *o)
{
    return o->augment ? o->augment : 1;
}

/* Render the input at path (input position `source`) into out[0 .. shc_render_count) and, when
 * augmenting, params[0 ..). On failure returns non-zero, every out[] is empty, and reason holds
 * a one-line explanation. */
int shc_render(const shc_render_opts *o, const char *path, uint64_t source, fmt_resizer *rz,
               fmt_image *out, fmt_aug_params *params, char *reason, size_t rlen);

#endif
