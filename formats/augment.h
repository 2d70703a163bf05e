/* augment.h - deterministic pre-augmentation: the SPEC, the parameters drawn for one variant, and
 * their application to a decoded source image.
 *
 * Every variant is a pure function of (source image, spec, seed, source index, variant number):
 * the random draws come from a counter-based generator keyed by (seed, source, variant, draw), so
 * the bytes do not depend on thread count, work order or resumption. The parameters drawn are
 * recorded with the sample (fmt_aug_params, serialised as a 64- or 96-byte aux record, see
 * augment.md)
 * so any variant can be audited and reproduced from its source with fmt_aug_apply.
 *
 * Operations, always applied in this order:
 *   crop        random-resized-crop: a source rectangle of area fraction in [scale_min, scale_max]
 *               of the source and aspect ratio (w/h) log-uniform in [ratio_min, ratio_max],
 *               at a uniform position (up to 10 tries, then the largest centered rectangle of the
 *               clamped ratio, as torchvision does), cut out and resized alone to the output
 *               size with the geometry's filter (torchvision's resized_crop: Pillow's
 *               img.crop(rect).resize(size, filter), byte for byte); without `rrc` the crop is
 *               the source rectangle under the geometry's visible window
 *   flip        horizontal mirror with probability flip_p
 *   rotate      torchvision's F.rotate(img, a, nearest or bilinear, fill=0), a uniform in [-r, r]
 *               degrees (RandomRotation(r)): Pillow's Image.rotate (pixels/warp.h)
 *   affine      instead of rotate: torchvision's F.affine(img, a, (tx, ty), sc, (sx, 0), nearest
 *               or bilinear, fill=0) with RandomAffine(D, (T, T), (SMIN, SMAX), SH)'s draws:
 *               Pillow's affine transform (pixels/warp.h)
 *   brightness  pixel * b,                       b uniform in [1 - s, 1 + s]
 *   contrast    m + c * (pixel - m),             c uniform in [1 - s, 1 + s], m = mean luma
 *   saturation  l + t * (pixel - l),             t uniform in [1 - s, 1 + s], l = pixel's luma
 *   hue         torchvision's adjust_hue(img, f), f uniform in [-h, h] (Pillow's HSV round trip,
 *               pixels/hsv.h)
 *   gray        with probability gray_p, torchvision's rgb_to_grayscale(img, 3): Pillow's L in
 *               all three channels
 * Brightness, contrast and saturation run in 16.16 fixed point with round-half-up and clamping to
 * 0..255; rotate, hue and gray are Pillow's own arithmetic, reproduced exactly; so the result is
 * the same on every machine. Hue and gray leave a one-channel image as it is.
 */
#ifndef FMT_AUGMENT_H
#define FMT_AUGMENT_H

#include "geometry.h"

#define FMT_AUG_DEFAULT_SPEC "rrc=0.08:1:0.75:1.3333,flip=0.5,jitter=0.4"
#define FMT_AUG_RECORD_SIZE 64u       /* versions 1 and 2 */
#define FMT_AUG_RECORD_SIZE_AFFINE 96u        /* version 3: a variant with an affine warp */
#define FMT_AUG_RECORD_MAX 96u
#define FMT_AUG_MAX_VARIANTS 1024u

typedef struct {
    int rrc;                            /* random-resized-crop on */
    double scale_min, scale_max;        /* area fraction, 0 < min <= max <= 1 */
    double ratio_min, ratio_max;        /* aspect ratio w/h, 0 < min <= max */
    double flip_p;                      /* 0..1 */
    double brightness, contrast, saturation;   /* jitter strengths, 0..1 */
    double rotate;                      /* rotation range in degrees, 0..180 */
    int rotate_bilinear;                /* the rotation's filter: 0 nearest, 1 bilinear */
    double hue;                         /* hue strength, 0..0.5 */
    double gray_p;                      /* grayscale probability, 0..1 */
    int affine;                         /* RandomAffine on (then rotate is 0) */
    double affine_degrees;              /* its rotation range [-D, D], 0..180 */
    double affine_translate;            /* its translation bound, fraction of the side, 0..1 */
    double affine_scale_min, affine_scale_max;   /* its scale range, 0 < min <= max <= 10 */
    double affine_shear;                /* its x shear range [-SH, SH] in degrees, 0 <= SH < 90 */
} fmt_aug_spec;

/* What was drawn for one variant. */
typedef struct {
    uint64_t source;                    /* input position of the source image */
    uint32_t variant;                   /* 0 .. K-1 */
    uint32_t src_w, src_h;              /* size of the decoded source the crop refers to */
    uint32_t crop_x, crop_y, crop_w, crop_h;   /* source rectangle resized to the output */
    uint32_t flip;                      /* 1: mirrored */
    float angle;                        /* rotation (or the affine's angle) in degrees */
    uint32_t rotate_bilinear;           /* the warp's filter: 0 nearest, 1 bilinear */
    uint32_t affine;                    /* 1: F.affine with angle and the four below */
    int32_t affine_tx, affine_ty;       /* its translation in pixels */
    float affine_scale;                 /* its scale */
    float affine_shear_x, affine_shear_y;      /* its shear in degrees (y is 0 when drawn) */
    float brightness, contrast, saturation;    /* factors (1 = unchanged) */
    uint32_t hue_on;                    /* 1: adjust_hue applied (even with a factor of 0, whose
                                         * HSV round trip still changes pixels) */
    float hue;                          /* its factor in [-0.5, 0.5]; 0 when hue_on is 0 */
    uint32_t gray;                      /* 1: converted to grayscale (three equal channels) */
    uint32_t filter;                    /* fmt_filter of the resize */
} fmt_aug_params;

/* Parse SPEC ("rrc=SMIN:SMAX[:RMIN:RMAX],flip[=P],jitter=S,brightness=S,contrast=S,
 * saturation=S,rotate=D[:nearest|:bilinear],affine=D:T:SMIN:SMAX:SH[:nearest|:bilinear],hue=H,
 * gray[=P]"; "none" for no operation). On error returns FMT_EINVAL and msg says what was
 * expected where. */
int fmt_aug_parse(const char *spec, fmt_aug_spec *out, fmt_msg *msg);

/* Canonical text of a spec (every value explicit), for the manifest. */
void fmt_aug_format(const fmt_aug_spec *s, char *buf, size_t len);

/* Draw variant `variant` of source `source` for a decoded source of src_w x src_h, whose geometry
 * plan (without augmentation) is base (its filter is recorded; its window gives the crop when
 * the spec has no rrc; its output size bounds the affine's translation). */
void fmt_aug_draw(const fmt_aug_spec *s, uint64_t seed, uint64_t source, uint32_t variant,
                  uint32_t src_w, uint32_t src_h, const fmt_geom_plan *base, fmt_aug_params *p);

/* Produce the variant: crop p's rectangle out of src (which must be p->src_w x p->src_h), resize
 * it to out_w x out_h with p's filter, then flip and colour as p says. dst is allocated here
 * (zeroed on error). */
int fmt_aug_apply(fmt_resizer *rz, const fmt_image *src, const fmt_aug_params *p, uint32_t out_w,
                  uint32_t out_h, fmt_image *dst, fmt_msg *msg);
/* The same into dst's buffer when it is large enough (see fmt_image_reserve), else a new one;
 * dst keeps a buffer on error. */
int fmt_aug_apply_into(fmt_resizer *rz, const fmt_image *src, const fmt_aug_params *p,
                       uint32_t out_w, uint32_t out_h, fmt_image *dst, fmt_msg *msg);

/* The length of every aux record a build with this spec writes: FMT_AUG_RECORD_SIZE_AFFINE with
 * affine, else FMT_AUG_RECORD_SIZE. */
uint32_t fmt_aug_record_size(const fmt_aug_spec *s);

/* Little-endian aux record <-> params. encode writes FMT_AUG_RECORD_SIZE bytes, or
 * FMT_AUG_RECORD_SIZE_AFFINE when p->affine, and returns that length. decode: FMT_ECORRUPT on a
 * bad magic, length or field. */
uint32_t fmt_aug_encode(const fmt_aug_params *p, uint8_t out[FMT_AUG_RECORD_MAX]);
int fmt_aug_decode(const uint8_t *in, size_t len, fmt_aug_params *p);

/* The generator: uniform double in [0, 1) for draw number `draw` of (seed, source, variant). */
double fmt_aug_uniform(uint64_t seed, uint64_t source, uint32_t variant, uint32_t draw);

#endif
