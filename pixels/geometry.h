/* geometry.h - output geometry (what size a sample becomes) and the resize that produces it.
 *
 * The geometry is a torchvision-style chain with torchvision's own arithmetic, so the stored
 * pixels are those of `transform(Image.open(p).convert('RGB'))` for the matching transform:
 *
 *   FMT_GEOM_SHORT_SIDE   Resize(short_side[, max_size=max_side]): the short side becomes
 *                         short_side, the long side int(short_side * long / short) (truncated,
 *                         as torchvision computes it in Python floats); when max_side is set
 *                         and the long side exceeds it, long = max_side and short =
 *                         int(max_side * short / long). Then CenterCrop(crop_h, crop_w) if
 *                         crop_w is set.
 *   FMT_GEOM_KEEP         the source size, or, when max_side is set and the long side exceeds
 *                         it, long = max_side and short = round(short * max_side / long) (halves
 *                         up); then CenterCrop if crop_w is set.
 *   FMT_GEOM_SIZE, FMT_FIT_CROP     Resize(S) then CenterCrop(height, width), S the smallest
 *                         short side whose resize covers width x height: for a square target,
 *                         S = width, i.e. CenterCrop(N)(Resize(N)(img)).
 *   FMT_GEOM_SIZE, FMT_FIT_PAD      Resize(S) then CenterCrop(height, width), S the largest short
 *                         side whose resize fits inside: torchvision's CenterCrop pads the
 *                         missing border with zeros (left (W - w) // 2, top (H - h) // 2).
 *   FMT_GEOM_SIZE, FMT_FIT_STRETCH  Resize((height, width)).
 *
 * CenterCrop(h, w) of an image W x H, as torchvision computes it: an axis that is too small is
 * first padded with zeros ((W - w) // 2 before, the rest after), then the crop starts at
 * int(round((W - w) / 2)) with Python's round (halves to even: 69 / 2 -> 34, 71 / 2 -> 36).
 *
 * The resize is fmt_resample (Pillow's Image.resize) with the geometry's filter, default
 * bilinear as in torchvision; only the part of the resized image that the crop keeps is
 * computed. max_side is ignored by FMT_GEOM_SIZE; fit only matters for FMT_GEOM_SIZE.
 *
 * Shrink-on-load (shrink_on_load set): a JPEG may be decoded at a reduced DCT scale that still
 * covers the resize, and the resize then reads the decoded image through a sub-pixel box (the
 * full-size box scaled by the decoder's factor), so the result stays close to the exact one
 * (not equal: the decoder's own downscaling replaces part of the filter).
 */
#ifndef FMT_GEOMETRY_H
#define FMT_GEOMETRY_H

#include "image.h"
#include "resample.h"

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
    uint32_t max_side;      /* 0 = none; caps the long side of KEEP / SHORT_SIDE */
    uint32_t crop_w, crop_h;    /* CenterCrop after KEEP / SHORT_SIDE; 0 = none */
    fmt_filter filter;      /* resize filter; 0 is bilinear */
    int shrink_on_load;     /* allow a reduced-scale JPEG decode (changes pixels slightly) */
} fmt_geom;

/* How a source becomes the output: the box of the source is resized to rs_w x rs_h; the window
 * (win_x, win_y, dst_w, dst_h) of that resized image lands at (dst_x, dst_y) of the
 * out_w x out_h output, the rest of which is zero (padding). */
typedef struct {
    uint32_t out_w, out_h;          /* output image size */
    uint32_t src_x, src_y, src_w, src_h;   /* whole pixels holding the box */
    uint32_t dst_x, dst_y, dst_w, dst_h;   /* where the visible pixels land in the output */
    fmt_rs_box box;                 /* source region resized (Pillow's box) */
    uint32_t rs_w, rs_h;            /* size the box is resized to */
    uint32_t win_x, win_y;          /* top left of the visible part in the resized image */
    fmt_filter filter;              /* the geometry's filter */
} fmt_geom_plan;

/* Plan for a source of src_w x src_h (see the top of this file). Returns 0; FMT_EINVAL for a
 * zero source side, a zero width/height/short_side that the mode needs, a crop size with one
 * side zero, or an unknown mode or fit; FMT_ETOOBIG when an output side would exceed
 * FMT_GEOM_MAX_SIDE (or, for a resize that is cropped, a resized side FMT_RS_MAX_SIDE). On
 * error *p is zeroed. */
int fmt_geom_plan_for(const fmt_geom *g, uint32_t src_w, uint32_t src_h, fmt_geom_plan *p);

/* The plan for a src_w x src_h source that was decoded at a reduced dec_w x dec_h (JPEG
 * shrink-on-load): the output, resize and window are those of the full-size plan; only the
 * box is mapped onto the decoded image, by the decoder's scale (k/8 when dec is
 * ceil(src * k / 8) on both axes, else dec / src per axis), keeping its fractions. With
 * dec == src it equals fmt_geom_plan_for. Errors as fmt_geom_plan_for, plus FMT_EINVAL for a
 * zero decoded side or one larger than the source. */
int fmt_geom_plan_decoded(const fmt_geom *g, uint32_t src_w, uint32_t src_h, uint32_t dec_w,
                          uint32_t dec_h, fmt_geom_plan *p);

/* fmt_geom_plan_decoded in two steps, for a caller that plans once from the header: p, the
 * full-size plan of a src_w x src_h source (fmt_geom_plan_for), with its box mapped onto the
 * dec_w x dec_h decoded image. Returns 0, or FMT_EINVAL (p zeroed) for a zero decoded side or
 * one larger than the source. */
int fmt_geom_plan_map(fmt_geom_plan *p, uint32_t src_w, uint32_t src_h, uint32_t dec_w,
                      uint32_t dec_h);

/* The shrink-on-load hint for fmt_decode_opts: the decoded size of the smallest DCT scale
 * 1/8, 1/4 or 1/2 whose coverage (side / d, the box of fmt_geom_plan_decoded) is at least 1.5
 * times the resized size on both axes, so the resize never enlarges and still filters enough to
 * stay within 40 dB of the exact result. Both are 0 (decode at full size) unless g->shrink_on_load is set and the plan
 * reduces both axes, or when the options are invalid. */
void fmt_geom_min_decode(const fmt_geom *g, uint32_t src_w, uint32_t src_h,
                         uint32_t *min_w, uint32_t *min_h);
/* The same from plan, the full-size plan of g for the src_w x src_h source (fmt_geom_plan_for
 * returned 0 for it): no second planning. */
void fmt_geom_plan_min_decode(const fmt_geom *g, const fmt_geom_plan *plan, uint32_t src_w,
                              uint32_t src_h, uint32_t *min_w, uint32_t *min_h);

/* The source rectangle of the plain center crop for FMT_GEOM_SIZE with FMT_FIT_CROP: the
 * largest centred rectangle of aspect width/height (sides rounded, offsets halved down); the
 * whole source otherwise. Pre-augmentation uses it as the crop when there is no
 * random-resized-crop. */
void fmt_geom_center_rect(const fmt_geom *g, uint32_t src_w, uint32_t src_h, uint32_t *x,
                          uint32_t *y, uint32_t *w, uint32_t *h);

/* The chain as text for the manifest and `shardc info`, torchvision style, e.g.
 * "Resize(256, bilinear) | CenterCrop((224, 224))". Truncated to len (NUL-terminated). */
void fmt_geom_chain(const fmt_geom *g, char *buf, size_t len);

/* Reusable resize state: a resampling scratch (see resample.h). One per thread; not
 * thread-safe. Distinct resizers may be used concurrently, and may share one coefficient
 * cache. */
typedef struct fmt_resizer fmt_resizer;

/* Returns 0, FMT_EINVAL (r NULL) or ENOMEM. fmt_resizer_create keeps coefficient tables for
 * itself; fmt_resizer_create_shared uses cache (which must outlive the resizer). */
int fmt_resizer_create(fmt_resizer **r);
int fmt_resizer_create_shared(fmt_rs_cache *cache, fmt_resizer **r);
void fmt_resizer_free(fmt_resizer *r);            /* accepts NULL */
/* The resampling scratch inside r, for direct fmt_resample calls. */
fmt_rs_scratch *fmt_resizer_scratch(fmt_resizer *r);

/* Apply plan p to src (with p->filter) into dst, reusing dst's buffer when it is large enough
 * (dst->pixels NULL or a buffer of dst->cap bytes from an earlier call or fmt_image_reserve;
 * it is grown otherwise). dst becomes p->out_w x p->out_h with src's channels. On error dst
 * keeps its buffer and msg says why. Errors: FMT_EINVAL (bad arguments or a plan that does not
 * fit src), ENOMEM, FMT_ETOOBIG. */
int fmt_resize_into(fmt_resizer *r, const fmt_image *src, const fmt_geom_plan *p, fmt_image *dst,
                    fmt_msg *msg);

/* As fmt_resize_into into a newly allocated dst (zeroed on error; release with
 * fmt_image_free). */
int fmt_resize(fmt_resizer *r, const fmt_image *src, const fmt_geom_plan *p, fmt_image *dst,
               fmt_msg *msg);

/* Region-of-interest decoding: the pixels of a src_w x src_h source that fmt_resize_into(r,
 * source, p, ...) reads, as rect (x, y, width, height; see fmt_resample_source_rect). A decoder
 * may skip every other pixel (fmt_decode_opts.roi_*) and the output stays the same bytes. The
 * whole source when p does not fit it. */
void fmt_resize_source_rect(fmt_resizer *r, const fmt_geom_plan *p, uint32_t src_w,
                            uint32_t src_h, uint32_t rect[4]);

#endif
