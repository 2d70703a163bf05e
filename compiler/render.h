/* render.h - what one input image becomes: decode (shrink-on-load when the geometry allows it),
 * then either the plain geometry (one sample) or K augmented variants. Shared by the build
 * workers and by replay, so a replayed sample goes through exactly the code that wrote it.
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
    /* Non-zero: decode every pixel. By default a JPEG at full scale is decoded in the region
     * the geometry reads (fmt_resize_source_rect): the same bytes, less work. */
    int full_decode;
} shc_render_opts;

/* Number of samples one input yields. */
static inline uint32_t shc_render_count(const shc_render_opts *o)
{
    return o->augment ? o->augment : 1;
}

/* Per-worker state reused from image to image: the file buffer, the decoded image and the
 * resizer. Once it has seen the largest input, rendering into reused outputs allocates nothing
 * of ours (libjpeg/libspng still allocate their own per-image state). One per thread. */
typedef struct shc_render_scratch shc_render_scratch;

/* cache may be NULL or shared by all workers (it must outlive the scratch). Returns 0, ENOMEM. */
int shc_render_scratch_create(fmt_rs_cache *cache, shc_render_scratch **s);
void shc_render_scratch_free(shc_render_scratch *s);     /* accepts NULL */

/* Render the input at path (input position `source`) into out[0 .. shc_render_count) and, when
 * augmenting, params[0 ..). out[] are images whose buffers are reused when large enough
 * (zeroed images the first time; see fmt_image_reserve). On failure returns non-zero, out[]
 * keep (or lose) their buffers but hold no sample, and msg (may be NULL) holds a one-line
 * explanation. On success msg holds the decoder's warning (fmt_image_decode), or "" if none. */
int shc_render_into(const shc_render_opts *o, const char *path, uint64_t source,
                    shc_render_scratch *s, fmt_image *out, fmt_aug_params *params, fmt_msg *msg);

/* After a successful shc_render_into / shc_render_mem_into with s: the input's size (its
 * header's, before any reduced-scale decode) and the plan its pixels went through (the output,
 * resize and window are those of fmt_geom_plan_for at that size; the box may be that of a
 * reduced-scale decode). What detection boxes are moved by. */
void shc_render_geometry(const shc_render_scratch *s, uint32_t *src_w, uint32_t *src_h,
                         fmt_geom_plan *plan);

/* As shc_render_into, from the encoded input's bytes (an archive member; file need only live
 * during the call). */
int shc_render_mem_into(const shc_render_opts *o, const uint8_t *file, size_t len,
                        uint64_t source, shc_render_scratch *s, fmt_image *out,
                        fmt_aug_params *params, fmt_msg *msg);

/* As shc_render_into, from pixels already decoded: height rows of width * channels bytes
 * (channels 1 gray, 3 RGB or 4 RGBA), rows packed; px need only live during the call. The decode
 * is skipped (no shrink-on-load: the pixels are the full-size image); the limits, the channel
 * conversion to o->channels (gray replicated, alpha dropped, colour to gray by fmt_luma: what
 * the decoders do to files of those layouts) and everything after the decode are the same.
 * msg holds "" on success (no decoder, no warning). */
int shc_render_pixels_into(const shc_render_opts *o, const uint8_t *px, uint32_t width,
                           uint32_t height, uint32_t channels, uint64_t source,
                           shc_render_scratch *s, fmt_image *out, fmt_aug_params *params,
                           fmt_msg *msg);

/* As shc_render_into with a resizer of the caller's and newly allocated out[] (every out[] is
 * empty on failure). */
int shc_render(const shc_render_opts *o, const char *path, uint64_t source, fmt_resizer *rz,
               fmt_image *out, fmt_aug_params *params, fmt_msg *msg);

/* As shc_render, from the encoded input's bytes. */
int shc_render_mem(const shc_render_opts *o, const uint8_t *file, size_t len, uint64_t source,
                   fmt_resizer *rz, fmt_image *out, fmt_aug_params *params, fmt_msg *msg);

#endif
