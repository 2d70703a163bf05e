/* geometry.h - output geometry (what size a sample becomes) and the resize that produces it.
 *
 * A plan is computed from the source size and the options; it says which source rectangle is
 * used, what size it is scaled to, and where that lands in the output (padding around it for
 * FMT_FIT_PAD). The same plan drives shrink-on-load: fmt_geom_min_decode() tells the decoder the
 * smallest decoded size that still never upscales.
 */
#ifndef FMT_GEOMETRY_H
#define FMT_GEOMETRY_H

#include "image.h"

typedef enum {
    FMT_GEOM_KEEP = 0,      /* keep the source size (optionally capped by max_side) */
    FMT_GEOM_SIZE,          /* fixed width x height, with a fit mode */
    FMT_GEOM_SHORT_SIDE     /* short side = short_side (up or down), aspect kept, capped by max_side */
} fmt_geom_mode;

typedef enum {
    FMT_FIT_CROP = 0,       /* scale so the target is covered, center crop (default) */
    FMT_FIT_PAD,            /* scale to fit inside, center, pad with zeros (letterbox) */
    FMT_FIT_STRETCH         /* scale each axis independently */
} fmt_fit;

typedef struct {
    fmt_geom_mode mode;
    fmt_fit fit;
    uint32_t width, height; /* FMT_GEOM_SIZE */
    uint32_t short_side;    /* FMT_GEOM_SHORT_SIDE */
    uint32_t max_side;      /* 0 = none; caps the long side of KEEP / SHORT_SIDE, never upscales */
} fmt_geom;

typedef struct {
    uint32_t out_w, out_h;          /* output image size */
    uint32_t src_x, src_y, src_w, src_h;   /* source rectangle used */
    uint32_t dst_x, dst_y, dst_w, dst_h;   /* where the scaled rectangle lands in the output */
} fmt_geom_plan;

/* Plan for a source of src_w x src_h. Returns 0, or FMT_EINVAL for zero sizes/bad options. */
int fmt_geom_plan_for(const fmt_geom *g, uint32_t src_w, uint32_t src_h, fmt_geom_plan *p);

/* The smallest decoded size (*min_w, *min_h) at which the plan for a src_w x src_h source still
 * downscales or keeps size on both axes: the shrink-on-load hint for fmt_decode_opts.
 * Both are 0 when the full size is needed (or any reduction would upscale). */
void fmt_geom_min_decode(const fmt_geom *g, uint32_t src_w, uint32_t src_h,
                         uint32_t *min_w, uint32_t *min_h);

/* Reusable resize state (scaler contexts, scratch buffers). One per thread; not thread-safe. */
typedef struct fmt_resizer fmt_resizer;

int fmt_resizer_create(fmt_resizer **r);
void fmt_resizer_free(fmt_resizer *r);            /* accepts NULL */

/* Apply plan p to src (whose size must be the plan's source size), producing dst (allocated
 * here, p->out_w x p->out_h, src->channels channels). When the plan is an identity the pixels
 * are copied. The output depends only on the inputs (no CPU-dependent rounding), so it is the
 * same on every run and every thread. */
int fmt_resize(fmt_resizer *r, const fmt_image *src, const fmt_geom_plan *p, fmt_image *dst,
               fmt_msg *msg);

#endif
