/* geometry.h - output geometry (what size a sample becomes) and the resize that produces it.
 *
 * A plan is computed from the source size and the options; it says which source rectangle is
 * used, what size it is scaled to, and where that lands in the output (padding around it for
 * FMT_FIT_PAD). The same plan drives shrink-on-load: fmt_geom_min_decode() tells the decoder the
 * smallest decoded size that still never upscales.
 *
 * Rounding, everywhere: a derived side is round(exact), halves rounded up, and at least 1; an
 * offset that centres a rectangle is (larger - smaller) / 2 rounded down.
 *
 *   FMT_GEOM_SIZE, FMT_FIT_CROP     the largest centred source rectangle of aspect W/H, scaled to
 *                                   exactly W x H. A source wider than W/H keeps its height and
 *                                   uses width round(src_h * W / H) (e.g. 500x375 -> 224x224
 *                                   crops x 62..436, all rows); a taller one likewise.
 *   FMT_GEOM_SIZE, FMT_FIT_PAD      the whole source scaled to fit in W x H: the axis that
 *                                   limits fills exactly, the other is round(side * scale);
 *                                   centred, the border is zero (black) pixels.
 *   FMT_GEOM_SIZE, FMT_FIT_STRETCH  the whole source to W x H.
 *   FMT_GEOM_SHORT_SIDE             short side = short_side exactly (up or down), long side =
 *                                   round(long * short_side / short); then, if max_side is set
 *                                   and the long side exceeds it, long = max_side and short =
 *                                   round(short * max_side / long) from the source sides.
 *                                   A square source gives short_side x short_side.
 *   FMT_GEOM_KEEP                   the source size, unless max_side is set and the long side
 *                                   exceeds it: then scaled down as above (never up).
 * max_side is ignored by FMT_GEOM_SIZE; fit is used only by FMT_GEOM_SIZE.
 */
#ifndef FMT_GEOMETRY_H
#define FMT_GEOMETRY_H

#include "image.h"

/* Largest output side a plan may produce (FMT_ETOOBIG beyond): a sanity bound against plans
 * such as a 1-pixel-wide source with a large short side, not a limit of the resizer. */
#define FMT_GEOM_MAX_SIDE (1u << 20)

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

/* Plan for a source of src_w x src_h (see the top of this file). Returns 0; FMT_EINVAL for a
 * zero source side, a zero width/height/short_side that the mode needs, or an unknown mode or
 * fit; FMT_ETOOBIG when an output side would exceed FMT_GEOM_MAX_SIDE. On error *p is zeroed. */
int fmt_geom_plan_for(const fmt_geom *g, uint32_t src_w, uint32_t src_h, fmt_geom_plan *p);

/* The plan for a src_w x src_h source that was decoded at a reduced dec_w x dec_h (JPEG
 * shrink-on-load): the output size and placement are those of the full-size plan, only the
 * source rectangle is mapped onto the decoded image (edges scaled and rounded, at least 1
 * pixel). Unlike fmt_geom_plan_for(g, dec_w, dec_h), whose short side, long side or padding
 * can differ by a pixel because the decoded aspect is rounded (1001x750 with short side 100
 * gives 133x100, its 1/4 decode 251x188 gives 134x100), the output shape then does not depend
 * on the DCT scale the decoder picked. With dec == src it equals fmt_geom_plan_for.
 * Errors as fmt_geom_plan_for, plus FMT_EINVAL for a zero decoded side. */
int fmt_geom_plan_decoded(const fmt_geom *g, uint32_t src_w, uint32_t src_h, uint32_t dec_w,
                          uint32_t dec_h, fmt_geom_plan *p);

/* The smallest decoded size (*min_w, *min_h) at which the plan for a src_w x src_h source still
 * downscales or keeps size on both axes: the shrink-on-load hint for fmt_decode_opts.
 * It is the whole source scaled by the plan's factor on each axis, rounded up (for a crop, the
 * factor that maps the crop rectangle to W x H, applied to the whole source): a decoder that
 * delivers at least that and a fresh plan made on the decoded size never upscales.
 * Both are 0 when the full size is needed: when the plan keeps the size or upscales on either
 * axis (a decoder reduces both axes together), or when the options are invalid. */
void fmt_geom_min_decode(const fmt_geom *g, uint32_t src_w, uint32_t src_h,
                         uint32_t *min_w, uint32_t *min_h);

/* Reusable resize state (scaler contexts for the last few geometries, scratch buffers). One per
 * thread; not thread-safe. Distinct resizers may be used concurrently. */
typedef struct fmt_resizer fmt_resizer;

/* Returns 0, FMT_EINVAL (r NULL) or ENOMEM. */
int fmt_resizer_create(fmt_resizer **r);
void fmt_resizer_free(fmt_resizer *r);            /* accepts NULL */

/* Apply plan p to src: its source rectangle is scaled to dst_w x dst_h and placed at
 * (dst_x, dst_y) of a p->out_w x p->out_h image, the rest of which is zero. dst is allocated
 * here (src->channels channels, 1 or 3; release with fmt_image_free) and zeroed on error.
 * A plan that does not scale (src_w == dst_w and src_h == dst_h) copies the pixels exactly.
 *
 * The filter is Lanczos (a = 3, libswscale), applied to each channel separately, like Pillow's
 * Image.resize(LANCZOS) but without reading source pixels outside the rectangle; a constant
 * colour stays exactly that colour, edges may ring by a few levels. Reductions by more than 16x
 * on an axis are first area-averaged to 8x the target. The output depends only on the inputs
 * (no CPU-dependent rounding), so it is the same on every run, machine and thread.
 *
 * The plan must fit src (its rectangle inside src, its dst rectangle inside the output) and
 * come from fmt_geom_plan_for for src's size or be consistent like one. Errors: FMT_EINVAL
 * (bad arguments or plan), ENOMEM, FMT_ETOOBIG (scratch too large), FMT_EUNSUPPORTED (the
 * scaler refused the geometry); msg says which. */
int fmt_resize(fmt_resizer *r, const fmt_image *src, const fmt_geom_plan *p, fmt_image *dst,
               fmt_msg *msg);

#endif
