/* scale.c - the read-time detection geometries (scale.h; the arithmetic: shardread.h, "Scale").
 *
 * Each geometry is described by the same few numbers, whatever the op: the whole stored image is
 * resized to scale_w x scale_h, a window of that resize (crop_x, crop_y, image_w, image_h) is
 * kept and lands at (pad_x, pad_y) of the output, the rest of which is zero. The boxes
 * (boxes.c) and the audit (shr_params) use the same numbers, so the pixels, the boxes and what
 * is reported cannot disagree. The window is resized directly (fmt_resample_window computes only
 * the kept part, with the bytes of a full resize then a crop), so no sample is ever held at its
 * resized size.
 *
 * Exactness of the draws. torchvision's RandomShortestSize computes in Python doubles, so the
 * multi-scale sizes are doubles truncated. ScaleJitter and FixedSizeCrop multiply Python numbers
 * with a float32 tensor (torch.rand(1)), so those products are float32 here, one rounding per
 * torch operation (the floating point contraction is off: C11 mode, the pragma for clang).
 */
#include "scale.h"

#include <math.h>
#include <string.h>

#include "geometry.h"
#include "sampler.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

int shr_scale_check(const shr_options *o, fmt_msg *m)
{
    if (o->scale == SHR_SCALE_NONE)
        return 0;
    if ((unsigned)o->scale > SHR_SCALE_RESIZE)
        return fmt_fail(m, SHR_EINVAL, "unknown scale mode");
    if (o->rrc)
        return fmt_fail(m, SHR_EINVAL, "scale and rrc exclude each other: both choose the resize");
    if (o->random_crop)
        return fmt_fail(m, SHR_EINVAL, "scale and random_crop exclude each other: scale places "
                        "the image itself");
    /* filter: options.def's row, checked before */
    if (o->scale == SHR_SCALE_MULTI) {
        if (o->scale_nsizes < 1 || o->scale_nsizes > SHR_SCALE_MAX_SIZES)
            return fmt_fail(m, SHR_EINVAL, "multi-scale needs 1 to 16 sizes (scale_nsizes)");
        for (uint32_t i = 0; i < o->scale_nsizes; i++)
            if (o->scale_sizes[i] == 0 || o->scale_sizes[i] > FMT_GEOM_MAX_SIDE)
                return fmt_fail(m, SHR_EINVAL, "multi-scale sizes must be in 1..1048576");
        if (o->scale_max == 0 || o->scale_max > FMT_GEOM_MAX_SIDE)
            return fmt_fail(m, SHR_EINVAL, "multi-scale needs a max size (scale_max) in "
                            "1..1048576");
    }
    if (shr_scale_per_image(o->scale)) {
        if (o->scale_dense && o->erase_p > 0)
            return fmt_fail(m, SHR_EINVAL, "RandomErasing is not supported with scale_dense yet: "
                            "use the canvas");
        if (o->scale_dense && (o->mixup_alpha > 0 || o->cutmix_alpha > 0))
            return fmt_fail(m, SHR_EINVAL, "MixUp and CutMix mix whole samples: not with "
                            "scale_dense");
        return 0;
    }
    if (o->scale == SHR_SCALE_RESIZE) {
        if (o->scale_nsizes != 1 || o->scale_sizes[0] == 0 ||
            o->scale_sizes[0] > FMT_GEOM_MAX_SIDE)
            return fmt_fail(m, SHR_EINVAL, "resize needs one size (scale_sizes[0], scale_nsizes "
                            "1) in 1..1048576");
        if (o->scale_max > FMT_GEOM_MAX_SIDE || (o->scale_max && o->scale_max <= o->scale_sizes[0]))
            return fmt_fail(m, SHR_EINVAL, "resize's max_size (scale_max) must be 0 or above its "
                            "size, at most 1048576");
        if (!o->width || !o->height)
            return fmt_fail(m, SHR_EINVAL, "resize needs the output (CenterCrop) width and height");
        return 0;
    }
    if (!o->width || !o->height)
        return fmt_fail(m, SHR_EINVAL, "%s needs the %s width and height",
                        o->scale == SHR_SCALE_JITTER ? "scale jitter" : "letterbox",
                        o->scale == SHR_SCALE_JITTER ? "target" : "output");
    /* scale_range: options.def's range, checked before */
    return 0;
}

/* RandomShortestSize's size for a shortest side s: r = min(s / short, max / long), each side
 * int(side * r) (Python floats), at least 1. */
static double multi_size(uint32_t s, uint32_t max, uint32_t src_w, uint32_t src_h, uint32_t *w,
                         uint32_t *h)
{
    double shortest = src_w < src_h ? src_w : src_h, longest = src_w < src_h ? src_h : src_w;
    double r = fmin((double)s / shortest, (double)max / longest);
    double fw = floor((double)src_w * r), fh = floor((double)src_h * r);
    *w = fw < 1 ? 1 : fw > FMT_GEOM_MAX_SIDE ? FMT_GEOM_MAX_SIDE : (uint32_t)fw;
    *h = fh < 1 ? 1 : fh > FMT_GEOM_MAX_SIDE ? FMT_GEOM_MAX_SIDE : (uint32_t)fh;
    return r;
}

void shr_scale_largest(const shr_options *o, uint32_t src_w, uint32_t src_h, uint32_t *w,
                       uint32_t *h)
{
    uint32_t s = 0;
    for (uint32_t i = 0; i < o->scale_nsizes; i++)
        s = o->scale_sizes[i] > s ? o->scale_sizes[i] : s;
    multi_size(s, o->scale_max, src_w, src_h, w, h);     /* both grow with s */
}

/* torch.rand(1) for the 32-bit word w: (w & 0xffffff) * 2^-24 in float32 */
static float rand1(uint32_t w)
{
    return shr_tf_uniform(w, 0.0f, 1.0f);
}

static uint32_t f32_side(float v)            /* int(v) of a float32 product, at least 1 */
{
    return v < 1.0f ? 1u : v > (float)FMT_GEOM_MAX_SIDE ? FMT_GEOM_MAX_SIDE : (uint32_t)v;
}

void shr_scale_draw(const shr_options *o, uint64_t seed, uint64_t epoch, uint64_t index,
                    uint32_t src_w, uint32_t src_h, uint32_t out_w, uint32_t out_h,
                    shr_params *p)
{
    p->x = p->y = 0;
    p->w = src_w;
    p->h = src_h;
    p->crop_x = p->crop_y = p->pad_x = p->pad_y = 0;
    uint32_t w0 = shr_tf_word(seed, epoch, index, SHR_SALT_SCALE, 0);
    switch (o->scale) {
    case SHR_SCALE_NATURAL:         /* the stored image as it is */
        p->scale_w = p->image_w = src_w;
        p->scale_h = p->image_h = src_h;
        p->scale_factor = 1.0f;
        break;
    case SHR_SCALE_MULTI: {
        uint32_t s = o->scale_sizes[w0 % o->scale_nsizes];    /* torch.randint(len(sizes)) */
        p->scale_factor = (float)multi_size(s, o->scale_max, src_w, src_h, &p->scale_w,
                                            &p->scale_h);
        p->image_w = p->scale_w;
        p->image_h = p->scale_h;
        break;
    }
    case SHR_SCALE_JITTER: {
        /* scale = lo + torch.rand(1) * (hi - lo); r = min(H_t / h, W_t / w) * scale */
        float span = (float)(o->scale_range[1] - o->scale_range[0]);
        float t = rand1(w0) * span;
        float scale = (float)o->scale_range[0] + t;
        float r = (float)fmin((double)out_h / src_h, (double)out_w / src_w) * scale;
        p->scale_factor = r;
        p->scale_w = f32_side((float)src_w * r);
        p->scale_h = f32_side((float)src_h * r);
        /* FixedSizeCrop: a crop at int(offset * r2) (one r2 for both axes) where larger, then
         * the bottom and right padded */
        p->image_w = p->scale_w < out_w ? p->scale_w : out_w;
        p->image_h = p->scale_h < out_h ? p->scale_h : out_h;
        if (p->image_w != p->scale_w || p->image_h != p->scale_h) {
            float r2 = rand1(shr_tf_word(seed, epoch, index, SHR_SALT_SCALE, 1));
            uint32_t off_w = p->scale_w > out_w ? p->scale_w - out_w : 0;
            uint32_t off_h = p->scale_h > out_h ? p->scale_h - out_h : 0;
            p->crop_x = (uint32_t)((float)off_w * r2);
            p->crop_y = (uint32_t)((float)off_h * r2);
        }
        break;
    }
    default: {
        /* letterbox: the build's --size W H --fit pad (pixels/geometry.h): Resize(S) then
         * CenterCrop, S the largest shortest side whose resize fits; resize: the build's
         * --short-side S [--max-side M] --crop W H */
        fmt_geom g = {.mode = FMT_GEOM_SIZE, .fit = FMT_FIT_PAD, .width = out_w, .height = out_h};
        if (o->scale == SHR_SCALE_RESIZE)
            g = (fmt_geom){.mode = FMT_GEOM_SHORT_SIDE, .short_side = o->scale_sizes[0],
                           .max_side = o->scale_max, .crop_w = out_w, .crop_h = out_h};
        fmt_geom_plan plan;
        if (fmt_geom_plan_for(&g, src_w, src_h, &plan) != 0) {
            /* only for sides beyond FMT_GEOM_MAX_SIDE, which no stored sample has: the image
             * fills the output */
            memset(&plan, 0, sizeof plan);
            plan.rs_w = plan.dst_w = out_w;
            plan.rs_h = plan.dst_h = out_h;
        }
        p->scale_w = plan.rs_w;
        p->scale_h = plan.rs_h;
        p->crop_x = plan.win_x;
        p->crop_y = plan.win_y;
        p->pad_x = plan.dst_x;
        p->pad_y = plan.dst_y;
        p->image_w = plan.dst_w;
        p->image_h = plan.dst_h;
        p->scale_factor = (float)plan.rs_w / (float)src_w;
        break;
    }
    }
}

int shr_scale_pixels(fmt_rs_scratch *rs, fmt_filter f, const fmt_rs_view *src,
                     const shr_params *p, uint8_t *dst, uint32_t out_w, uint32_t out_h,
                     size_t dst_stride, int border, fmt_msg *m)
{
    uint32_t c = src->channels;
    size_t row = (size_t)out_w * c;
    /* the border: rows above and below the image, columns left and right of it */
    for (uint32_t y = 0; border && y < out_h; y++) {
        uint8_t *d = dst + (size_t)y * dst_stride;
        if (y < p->pad_y || y >= p->pad_y + p->image_h) {
            memset(d, 0, row);
            continue;
        }
        memset(d, 0, (size_t)p->pad_x * c);
        size_t right = (size_t)(p->pad_x + p->image_w) * c;
        memset(d + right, 0, row - right);
    }
    const fmt_rs_view out = {
        .pixels = dst + (size_t)p->pad_y * dst_stride + (size_t)p->pad_x * c,
        .width = p->image_w, .height = p->image_h, .channels = c, .stride = dst_stride,
    };
    return fmt_resample_window(rs, src, NULL, f, p->scale_w, p->scale_h, p->crop_x, p->crop_y,
                               &out, m);
}

void shr_scale_store(const shr_tf_out *o, const uint8_t *src, size_t stride, int mirror,
                     const shr_params *p, int dense, void *dst)
{
    /* the kernel writes a dense sample of its width and height: the image is written as one,
     * a row at a time where a row of the canvas is a row of the image (HWC, one channel), else
     * whole, then its rows moved out to their places in the canvas */
    size_t e = shr_tf_elem_size(o->dtype), W = o->width, H = o->height, C = o->channels;
    uint32_t iw = p->image_w, ih = p->image_h;
    shr_tf_out one = *o;
    one.width = iw;
    uint8_t *d = dst;
    if (dense) {
        one.height = ih;
        shr_tf_store(&one, src, stride, mirror, dst);
        return;
    }
    if (o->layout == SHR_LAYOUT_NHWC || C == 1) {
        one.height = 1;
        for (uint32_t y = 0; y < ih; y++)
            shr_tf_store(&one, src + (size_t)y * stride, stride, mirror, d + (size_t)y * W * C * e);
    } else {
        one.height = ih;
        shr_tf_store(&one, src, stride, mirror, dst);
        /* dense row k (channel k / ih, row k % ih) at k * iw goes to (c * H + y) * W: never
         * before it, and past the end of every dense row before it, so moving the last first
         * overwrites none still to move */
        for (size_t k = C * ih; k-- > 0;) {
            size_t c = k / ih, y = k % ih;
            memmove(d + ((c * H + y) * W) * e, d + k * iw * e, iw * e);
        }
    }
    shr_scale_zero_canvas(o, p, dst);
}

void shr_scale_zero_canvas(const shr_tf_out *o, const shr_params *p, void *dst)
{
    size_t e = shr_tf_elem_size(o->dtype);
    uint32_t W = o->width, H = o->height, C = o->channels;
    uint32_t iw = p->image_w < W ? p->image_w : W, ih = p->image_h < H ? p->image_h : H;
    uint8_t *d = dst;
    if (o->layout == SHR_LAYOUT_NCHW) {
        for (uint32_t c = 0; c < C; c++) {
            uint8_t *plane = d + (size_t)c * W * H * e;
            for (uint32_t y = 0; y < ih; y++)
                memset(plane + ((size_t)y * W + iw) * e, 0, (size_t)(W - iw) * e);
            memset(plane + (size_t)ih * W * e, 0, (size_t)(H - ih) * W * e);
        }
        return;
    }
    for (uint32_t y = 0; y < ih; y++)
        memset(d + ((size_t)y * W + iw) * C * e, 0, (size_t)(W - iw) * C * e);
    memset(d + (size_t)ih * W * C * e, 0, (size_t)(H - ih) * W * C * e);
}
