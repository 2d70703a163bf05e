/* assemble.c - batch assembly: what a worker does, with no lock held, to fill the ring slot it
 * claimed with stream batch k (the ring, the stream and the failure rules: shardread.c).
 *
 * Per sample: draw its parameters (shr_draw: a pure function of seed, epoch and index), then
 * put its pixels into the batch by the cheapest path that gives the same values: a copy (or a
 * direct read) when the stored sample is already at the output size; a crop or pad; otherwise
 * the transform path (transform.h, scale.h: RandomResizedCrop, the scale ops, the output dtype
 * and layout, the uint8 augmentations of augment_read.h), RandomErasing last. A batch read with
 * O_DIRECT goes through the direct engine (direct.h) at once. Then, per batch: read-time
 * recovery (on_error skip or substitute), the detection targets moved with their samples, and
 * MixUp / CutMix on the finished batch.
 */
#include "assemble.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "erase_noise.h"
#include "mirror.h"
#include "scale.h"
#include "segm_read.h"
#include "stats.h"

/* ---- a sample's dataset: the reader's, or in a mixture its stream's ---- */

/* Sample g (a global index in a mixture, mixture.h) is sample *i of the dataset returned. */
static const fmt_dataset *src_of(const shr_reader *r, uint64_t g, uint64_t *i)
{
    if (!r->mx) {
        *i = g;
        return r->ds;
    }
    uint32_t s = shr_mix_plan_stream(&r->mx->plan, g);
    *i = g - r->mx->plan.first[s];
    return r->mx->ds[s];
}

/* Its index in its dataset, for messages. */
static uint64_t src_local(const shr_reader *r, uint64_t g)
{
    uint64_t i;
    (void)src_of(r, g, &i);
    return i;
}

static const char *src_file(const shr_reader *r, uint64_t g)
{
    uint64_t i;
    const fmt_dataset *d = src_of(r, g, &i);
    return fmt_dataset_sample_file(d, i);
}

static int src_get(const shr_reader *r, uint64_t g, fmt_sample *s)
{
    uint64_t i;
    const fmt_dataset *d = src_of(r, g, &i);
    return fmt_dataset_get(d, i, s);
}

static int src_read_buf(const shr_reader *r, uint64_t g, void *dst, void *bounce)
{
    uint64_t i;
    const fmt_dataset *d = src_of(r, g, &i);
    return fmt_dataset_read_buf(d, i, dst, NULL, bounce, SHR_BOUNCE_BYTES);
}

static int src_extent(const shr_reader *r, uint64_t g, fmt_extent *x)
{
    uint64_t i;
    const fmt_dataset *d = src_of(r, g, &i);
    return fmt_dataset_extent(d, i, x);
}

/* The label offset of sample g's stream (labels="offset"), else 0. */
static int64_t src_label_offset(const shr_reader *r, uint64_t g)
{
    return r->mx ? r->mx->label_offset[shr_mix_plan_stream(&r->mx->plan, g)] : 0;
}

/* on_error of sample g's stream. */
static shr_on_error src_on_error(const shr_reader *r, uint64_t g)
{
    if (!r->mx)
        return r->o.on_error;
    return r->mx->on_error[shr_mix_plan_stream(&r->mx->plan, g)];
}

/* ---- one sample ---- */

/* Where a stored extent `have` goes in an output extent `want`: copy n = min(have, want) from
 * src_off to dst_off. Larger: crop (centered, or at a drawn offset); smaller: pad (centered). */
static void place(uint32_t have, uint32_t want, int random, uint64_t draw, uint32_t *src_off,
                  uint32_t *dst_off, uint32_t *n)
{
    if (have >= want) {
        *src_off = random ? (uint32_t)(draw % ((uint64_t)have - want + 1)) : (have - want) / 2;
        *dst_off = 0;
        *n = want;
    } else {
        *src_off = 0;
        *dst_off = (want - have) / 2;
        *n = have;
    }
}

/* The parameters of sample idx, stored at src_w x src_h, for an output of out_w x out_h: see
 * shardread.h (rrc: the RandomResizedCrop box; else the crop/pad's stored rectangle). */
void shr_draw(const shr_options *o, const shr_tf_rrc *rrc, const shr_aug *aug, uint32_t out_w,
              uint32_t out_h, uint64_t epoch, uint64_t idx, uint32_t src_w, uint32_t src_h,
              shr_params *p)
{
    memset(p, 0, sizeof *p);
    p->src_w = src_w;
    p->src_h = src_h;
    if (o->rrc) {
        shr_tf_rrc_box(rrc, o->seed, epoch, idx, src_w, src_h, p);
    } else if (o->scale != SHR_SCALE_NONE) {
        shr_scale_draw(o, o->seed, epoch, idx, src_w, src_h, out_w, out_h, p);
    } else {
        uint32_t dx, dy;
        uint64_t rx = o->random_crop ? shr_mix(o->seed, epoch, idx, SHR_SALT_CROP_X) : 0;
        uint64_t ry = o->random_crop ? shr_mix(o->seed, epoch, idx, SHR_SALT_CROP_Y) : 0;
        place(src_w, out_w, o->random_crop, rx, &p->x, &dx, &p->w);
        place(src_h, out_h, o->random_crop, ry, &p->y, &dy, &p->h);
    }
    p->flip = o->flip && shr_tf_bernoulli((uint32_t)shr_mix(o->seed, epoch, idx, SHR_SALT_FLIP),
                                          o->flip_p);
    if (aug->any && shr_scale_per_image(o->scale))  /* the image, not the canvas */
        shr_aug_draw(aug, o->seed, epoch, idx, p->image_w, p->image_h, p);
    else if (aug->any)
        shr_aug_draw(aug, o->seed, epoch, idx, out_w, out_h, p);
}

/* The crop/pad of p (from draw) of the stored src into dst, uint8 HWC at the output size;
 * mirrored left to right where mirror is set (the flip done in the same pass as the copy: a row
 * placed at dx lands mirrored at width - dx - nx). */
static void crop_pad(const shr_reader *r, uint8_t *dst, const uint8_t *src, const fmt_sample *s,
                     const shr_params *p, int mirror)
{
    uint32_t c = r->channels, nx = p->w, ny = p->h;
    uint32_t dx = (r->width - nx) / 2, dy = (r->height - ny) / 2;  /* 0 where cropped */
    uint32_t at = mirror ? r->width - dx - nx : dx;                 /* where each row lands */
    size_t rowb = (size_t)r->width * c;
    /* zeros where padded, and only there: the rows above and below, each row's two margins */
    memset(dst, 0, (size_t)dy * rowb);
    memset(dst + (size_t)(dy + ny) * rowb, 0, (size_t)(r->height - dy - ny) * rowb);
    for (uint32_t y = 0; y < ny; y++) {
        const uint8_t *from = src + (((size_t)(p->y + y) * s->width + p->x) * c);
        uint8_t *row = dst + (size_t)(dy + y) * rowb;
        if (nx < r->width) {
            memset(row, 0, (size_t)at * c);
            memset(row + (size_t)(at + nx) * c, 0, (size_t)(r->width - at - nx) * c);
        }
        if (mirror)
            shr_mirror_copy(row + (size_t)at * c, from, nx, c);
        else
            memcpy(row + (size_t)at * c, from, (size_t)nx * c);
    }
}

/* The resampler's name for a filter. */
fmt_filter shr_rs_filter(shr_filter f)
{
    switch (f) {
    case SHR_FILTER_NEAREST:
        return FMT_FILTER_NEAREST;
    case SHR_FILTER_BOX:
        return FMT_FILTER_BOX;
    case SHR_FILTER_HAMMING:
        return FMT_FILTER_HAMMING;
    case SHR_FILTER_BICUBIC:
        return FMT_FILTER_BICUBIC;
    case SHR_FILTER_LANCZOS:
        return FMT_FILTER_LANCZOS;
    default:
        return FMT_FILTER_BILINEAR;
    }
}

/* The box of p cropped out of the stored src and resized to the output size (uint8 HWC) into
 * dst: torchvision's resized_crop, which crops first, so the filter sees no pixel outside the box
 * (a Pillow resize with a box would read past its edges). */
static int resize_box(shr_worker *w, uint64_t idx, const uint8_t *src, const fmt_sample *s,
                      const shr_params *p, uint8_t *dst, fmt_msg *msg)
{
    const shr_reader *r = w->r;
    uint32_t c = r->channels;
    size_t stride = (size_t)s->width * c;
    const fmt_rs_view in = {
        .pixels = (uint8_t *)(uintptr_t)(src + (size_t)p->y * stride + (size_t)p->x * c),
        .width = p->w, .height = p->h, .channels = c, .stride = stride,
    };
    const fmt_rs_view out = {
        .pixels = dst, .width = r->width, .height = r->height, .channels = c,
        .stride = (size_t)r->width * c,
    };
    fmt_msg m = {{0}};
    int rc = fmt_resample(w->rs, &in, NULL, shr_rs_filter(r->o.filter), &out, &m);
    if (rc)
        return fmt_fail(msg, rc, "%s: sample %" PRIu64 ": cannot resize %" PRIu32 "x%" PRIu32
                        " to %" PRIu32 "x%" PRIu32 ": %s", src_file(r, idx),
                        src_local(r, idx), p->w, p->h, r->width, r->height, fmt_reason(&m, rc));
    return 0;
}

/* verify_samples: the stored pixels px (s->length bytes) against their recorded hash. */
static int verify_px(const shr_reader *r, uint64_t idx, const uint8_t *px, const fmt_sample *s,
                     fmt_msg *msg)
{
    if (!r->o.verify_samples || fmt_hash64(px, (size_t)s->length) == s->hash)
        return 0;
    return fmt_fail(msg, FMT_EHASH, "%s: sample %" PRIu64 ": pixels do not match their hash "
                    "(damaged)", src_file(r, idx), src_local(r, idx));
}

/* put_transformed for the scale ops (shardread.h, "Scale"): the geometry into the staged
 * sample, the mirror (of the image alone in a multi-scale canvas), the uint8 augmentations on
 * the image, the output kernel, and a multi-scale canvas's padding zeroed after normalisation. */
static int put_scaled(shr_worker *w, uint64_t idx, const uint8_t *src, const fmt_sample *s,
                      const shr_params *p, int pix, uint8_t *dst, fmt_msg *msg)
{
    const shr_reader *r = w->r;
    uint32_t c = r->channels;
    size_t stride = (size_t)r->width * c;
    const fmt_rs_view in = {
        .pixels = (uint8_t *)(uintptr_t)src, .width = s->width, .height = s->height,
        .channels = c, .stride = (size_t)s->width * c,
    };
    fmt_msg m = {{0}};
    int multi = shr_scale_per_image(r->o.scale), mirror = (int)p->flip;
    /* a multi-scale uint8 HWC image not mirrored goes straight into the batch: only the image
     * is written (then the canvas around it zeroed); a mirrored one is mirrored within its own
     * width by the output kernel as shr_scale_store stores the image alone */
    int direct = multi && !r->convert && !pix && !mirror, dense = multi && r->o.scale_dense;
    uint8_t *px = direct ? dst : w->staged;
    if (direct && dense)
        stride = (size_t)p->image_w * c;
    int rc = shr_scale_pixels(w->rs, shr_rs_filter(r->o.filter), &in, p, px, r->width, r->height,
                              stride, !multi, &m);
    if (rc)
        return fmt_fail(msg, rc, "%s: sample %" PRIu64 ": cannot resize %" PRIu32 "x%" PRIu32
                        " to %" PRIu32 "x%" PRIu32 ": %s", src_file(r, idx),
                        src_local(r, idx), s->width, s->height, p->scale_w, p->scale_h,
                        fmt_reason(&m, rc));
    shr_stage_lap(SHR_STAGE_RESIZE);
    if (direct) {
        if (!dense)
            shr_scale_zero_canvas(&r->out, p, dst);
        return 0;
    }
    if (pix) {
        shr_params q = *p;
        q.flip = (uint32_t)mirror;
        mirror = multi ? shr_aug_pixels(&r->aug, &q, w->staged, p->image_w, p->image_h, c,
                                        stride, w->staged + r->staged_bytes)
                       : shr_aug_pixels(&r->aug, &q, w->staged, r->width, r->height, c, stride,
                                        w->staged + r->staged_bytes);
    }
    if (multi)
        shr_scale_store(&r->out, w->staged, stride, mirror, p, dense, dst);
    else
        shr_tf_store(&r->out, w->staged, stride, mirror, dst);
    shr_stage_lap(SHR_STAGE_CONVERT);
    return 0;
}

/* put_sample for RandomResizedCrop and for outputs other than uint8 NHWC: the finished uint8
 * pixels (the stored sample itself where it needs no crop, pad or resize) are converted into dst
 * by the output kernel, which also mirrors them. */
static int put_transformed(shr_worker *w, uint64_t idx, uint8_t *dst, const fmt_sample *s,
                           const shr_params *p, fmt_msg *msg)
{
    const shr_reader *r = w->r;
    uint32_t c = r->channels;
    const uint8_t *src = s->pixels;
    if (!(r->o.access == SHR_ACCESS_MMAP && s->pixels)) {
        const char *file = src_file(r, idx);
        if (s->length > w->sample_cap)
            return fmt_fail(msg, FMT_ECORRUPT, "%s: sample %" PRIu64 " is larger than the "
                            "largest sample", file, src_local(r, idx));
        int rc = src_read_buf(r, idx, w->sample, w->bounce);
        if (rc)
            return fmt_fail(msg, rc, "%s: cannot read sample %" PRIu64 ": %s", file,
                            src_local(r, idx), shr_strerror(rc));
        src = w->sample;
    }
    int vrc = verify_px(r, idx, src, s, msg);
    if (vrc)
        return vrc;
    shr_stage_lap(SHR_STAGE_READ);
    size_t stride = (size_t)s->width * c;
    int pix = r->aug.pixels && shr_aug_has_pixels(p);
    if (r->o.scale != SHR_SCALE_NONE)
        return put_scaled(w, idx, src, s, p, pix, dst, msg);
    if (r->o.rrc) {
        int rc = resize_box(w, idx, src, s, p, r->convert || p->flip || pix ? w->staged : dst,
                            msg);
        if (rc)
            return rc;
        shr_stage_lap(SHR_STAGE_RESIZE);
        if (!r->convert && !p->flip && !pix)
            return 0;
        src = w->staged;
        stride = (size_t)r->width * c;
    } else if (p->w == r->width && p->h == r->height) {
        src += (size_t)p->y * stride + (size_t)p->x * c;   /* a crop (or none): read in place */
        if (pix) {
            /* the stored pixels are not ours to change */
            size_t row = (size_t)r->width * c;
            shr_tf_copy_rows(w->staged, row, src, stride, row, r->height);
            src = w->staged;
            stride = row;
            shr_stage_lap(SHR_STAGE_RESIZE);
        }
    } else {
        crop_pad(r, w->staged, src, s, p, 0);
        src = w->staged;
        stride = (size_t)r->width * c;
        shr_stage_lap(SHR_STAGE_RESIZE);
    }
    /* the colour ops commute with the mirror (they are per pixel, or use statistics of the
     * whole image), so they run before the output kernel mirrors; the geometric ones do not, and
     * shr_aug_pixels mirrors first where the sample has one */
    int mirror = (int)p->flip;
    if (pix)
        mirror = shr_aug_pixels(&r->aug, p, w->staged, r->width, r->height, c, stride,
                                w->staged + r->staged_bytes);
    shr_tf_store(&r->out, src, stride, mirror, dst);
    shr_stage_lap(SHR_STAGE_CONVERT);
    return 0;
}

/* fmt_dataset_get failed for sample idx: out of range, or in a shard a tolerant open left
 * closed (the file named once, with why it did not open). */
static int get_failed(const shr_reader *r, uint64_t idx, int rc, fmt_msg *msg)
{
    uint64_t li;
    const fmt_dataset *ds = src_of(r, idx, &li);
    const char *why = fmt_dataset_sample_error(ds, li);
    if (!why)
        return fmt_fail(msg, rc, "sample %" PRIu64 " is out of range", idx);
    return fmt_fail(msg, rc, "%s: sample %" PRIu64 ": the shard did not open (%s)",
                    src_file(r, idx), src_local(r, idx), why);
}

/* Sample idx into dst, before RandomErasing (see put_sample). */
static int put_pixels(shr_worker *w, uint64_t epoch, uint64_t idx, uint8_t *dst, fmt_sample *s,
                      shr_params *p, fmt_msg *msg)
{
    const shr_reader *r = w->r;
    int rc = src_get(r, idx, s);
    if (rc)
        return get_failed(r, idx, rc, msg);
    const char *file = src_file(r, idx);
    if (s->channels != r->channels)
        return fmt_fail(msg, FMT_ECORRUPT, "%s: sample %" PRIu64 " has %" PRIu32 " channels, the "
                        "dataset %" PRIu32, file, src_local(r, idx), s->channels, r->channels);
    shr_draw(&r->o, &r->rrc, &r->aug, r->width, r->height, epoch, idx, s->width, s->height, p);
    if (r->o.rrc || r->convert || r->aug.pixels || r->o.scale != SHR_SCALE_NONE)
        return put_transformed(w, idx, dst, s, p, msg);
    /* zero copy where the backend hands out mapped pixels */
    int mmap = r->o.access == SHR_ACCESS_MMAP && s->pixels != NULL;
    if (s->width == r->width && s->height == r->height) {
        if (mmap) {
            /* copy, then hash the copy: what is delivered is what was verified, even when the
             * mapped file changes in between */
            memcpy(dst, s->pixels, r->sample_bytes);
            if ((rc = verify_px(r, idx, dst, s, msg)) != 0)
                return rc;
        } else {
            rc = src_read_buf(r, idx, dst, w->bounce);
            if (rc == 0 && (rc = verify_px(r, idx, dst, s, msg)) != 0)
                return rc;
        }
    } else {
        const uint8_t *src = s->pixels;
        if (!mmap) {
            /* sized at open for the dataset's largest sample; the index cannot change since */
            if (s->length > w->sample_cap)
                return fmt_fail(msg, FMT_ECORRUPT, "%s: sample %" PRIu64 " is larger than the "
                                "largest sample", file, src_local(r, idx));
            rc = src_read_buf(r, idx, w->sample, w->bounce);
            src = w->sample;
        }
        if (rc == 0 && (rc = verify_px(r, idx, src, s, msg)) != 0)
            return rc;
        if (rc == 0) {
            shr_stage_lap(SHR_STAGE_READ);
            crop_pad(r, dst, src, s, p, p->flip);
            shr_stage_lap(SHR_STAGE_RESIZE);
            return 0;
        }
    }
    if (rc)
        return fmt_fail(msg, rc, "%s: cannot read sample %" PRIu64 ": %s", file,
                        src_local(r, idx), shr_strerror(rc));
    shr_stage_lap(SHR_STAGE_READ);
    if (p->flip) {
        shr_mirror_rows(dst, r->width, r->height, r->channels, (size_t)r->width * r->channels);
        shr_stage_lap(SHR_STAGE_FLIP);
    }
    return 0;
}

/* RandomErasing's box of sample idx in dst: erase_value, or with erase_random the sample's
 * normal noise. */
static void erase_sample(const shr_reader *r, uint64_t epoch, uint64_t idx, const shr_params *p,
                         void *dst)
{
    if (r->o.erase_random)
        shr_erase_noise_apply(&r->out, p, r->o.seed, epoch, idx, dst);
    else
        shr_erase_apply(&r->aug.erase, &r->out, p, dst);
}

/* Sample idx into dst (sample_bytes at the output geometry and dtype), its parameters into p.
 * RandomErasing writes into the delivered values, as the mirror does: an output stage, after
 * whichever path put the pixels there (here, and after the O_DIRECT batch engine). */
static int put_sample(shr_worker *w, uint64_t epoch, uint64_t idx, uint8_t *dst, fmt_sample *s,
                      shr_params *p, fmt_msg *msg)
{
    shr_stage_mark();
    int rc = put_pixels(w, epoch, idx, dst, s, p, msg);
    if (rc == 0 && p->erase) {
        erase_sample(w->r, epoch, idx, p, dst);
        shr_stage_lap(SHR_STAGE_ERASE);
    }
    return rc;
}

/* ---- one batch ---- */

/* Fill the batch's samples idx[0 .. n) (at the output size, every one) through the direct
 * engine: all reads in flight at once, straight into the batch where alignment allows; in a
 * mixture each from its stream's shards, in one set of requests. A sample whose shard has no
 * extents (not read with O_DIRECT) is read as put_sample reads it. With verify_samples, each
 * sample read by the engine is hashed in the batch, before any mirroring. */
static int fill_pinned(shr_worker *w, shr_slot *slot, uint64_t epoch, uint32_t n, uint32_t *pm)
{
    const shr_reader *r = w->r;
    shr_batch *b = &slot->b;
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t idx = w->idx[i];
        uint8_t *dst = b->data + (size_t)i * r->sample_bytes;
        fmt_sample s;
        int rc = src_get(r, idx, &s);
        if (rc)
            return get_failed(r, idx, rc, &slot->msg);
        b->labels[i] = s.label + (s.label >= 0 ? src_label_offset(r, idx) : 0);
        b->indices[i] = (int64_t)idx;
        b->sources[i] = (int64_t)s.source;
        if (s.channels != r->channels || s.width != r->width || s.height != r->height ||
            src_extent(r, idx, &w->items[m].x) != 0) {
            if ((rc = put_sample(w, epoch, idx, dst, &s, &slot->params[i], &slot->msg)))
                return rc;
            continue;
        }
        shr_draw(&r->o, &r->rrc, &r->aug, r->width, r->height, epoch, idx, s.width, s.height,
             &slot->params[i]);
        w->items[m].dst = dst;
        w->idx[n + m] = i;          /* the item's batch position */
        *pm = ++m;
    }
    uint32_t bad;
    fmt_msg msg = {{0}};
    shr_stage_mark();
    int rc = shr_direct_read(w->direct, w->items, m, &bad, &msg);
    shr_stage_lap(SHR_STAGE_READ);
    if (rc) {
        uint64_t idx = w->idx[w->idx[n + bad]];
        return fmt_fail(&slot->msg, rc, "%s: cannot read sample %" PRIu64 ": %s",
                        src_file(r, idx), src_local(r, idx), fmt_reason(&msg, rc));
    }
    for (uint32_t j = 0; j < m; j++) {
        uint32_t i = (uint32_t)w->idx[n + j];
        if (r->o.verify_samples) {
            uint64_t idx = w->idx[i];
            fmt_sample s;
            if ((rc = src_get(r, idx, &s)) != 0)
                return fmt_fail(&slot->msg, rc, "sample %" PRIu64 " is out of range", idx);
            if ((rc = verify_px(r, idx, b->data + (size_t)i * r->sample_bytes, &s,
                                &slot->msg)) != 0)
                return rc;
        }
        if (slot->params[i].flip) {
            shr_stage_mark();
            shr_mirror_rows(b->data + (size_t)i * r->sample_bytes, r->width, r->height,
                               r->channels, (size_t)r->width * r->channels);
            shr_stage_lap(SHR_STAGE_FLIP);
        }
        if (slot->params[i].erase) {
            shr_stage_mark();
            erase_sample(r, epoch, w->idx[i], &slot->params[i],
                         b->data + (size_t)i * r->sample_bytes);
            shr_stage_lap(SHR_STAGE_ERASE);
        }
    }
    return 0;
}

/* fill_pinned, then unpin the descriptors of the extents it took (fmt_extent_release), on
 * every path: a batch holds its shards' descriptors only while its reads are in flight. */
static int fill_direct(shr_worker *w, shr_slot *slot, uint64_t epoch, uint32_t n)
{
    uint32_t m = 0;
    int rc = fill_pinned(w, slot, epoch, n, &m);
    for (uint32_t j = 0; j < m; j++)
        fmt_extent_release(&w->items[j].x);
    return rc;
}

/* Stream batch k is batch *number of *epoch (see "The stream" in shardread.c; the first epoch may be a
 * resumed one, shorter than the rest). */
void shr_stream_pos(const shr_reader *r, uint64_t k, uint64_t *epoch, uint64_t *number)
{
    if (k < r->nb0 - r->c0) {
        *epoch = r->e0;
        *number = r->c0 + k;
        return;
    }
    uint64_t t = k - (r->nb0 - r->c0);
    *epoch = r->e0 + 1 + t / r->nb;
    *number = t % r->nb;
}

uint64_t shr_stream_epoch_end(const shr_reader *r, uint64_t k)
{
    uint64_t first = r->nb0 - r->c0;
    if (k < first)
        return first;
    if (!r->nb)
        return UINT64_MAX;
    return first + ((k - first) / r->nb + 1) * r->nb;
}

/* on_error substitute: the first candidate that reads cleanly takes position i (see
 * shardread.h, "Read-time recovery"). 0, or the last candidate's error. */
static int substitute(shr_worker *w, shr_slot *slot, uint64_t epoch, uint64_t bad, uint32_t i,
                      fmt_sample *s)
{
    const shr_reader *r = w->r;
    /* in a mixture, from the same stream: the global indices of its samples */
    uint64_t local;
    uint64_t n = fmt_dataset_count(src_of(r, bad, &local)), first = bad - local;
    fmt_msg msg;
    int rc = SHR_ECORRUPT;
    for (uint32_t a = 0; a < 16; a++) {
        uint64_t c = first + shr_mix(r->o.seed, epoch, bad, SHR_SALT_SUBSTITUTE + a) % n;
        if (c == bad || (r->nlz && shr_lazy_hold(w, c) != 0))
            continue;       /* at a URL: from shards the cache holds now */
        rc = put_sample(w, epoch, c, slot->b.data + (size_t)i * r->sample_bytes, s,
                        &slot->params[i], &msg);
        if (rc == 0) {
            slot->b.indices[i] = (int64_t)c;
            return 0;
        }
    }
    return rc;
}

/* The slot's box arrays grown to hold n boxes (never shrunk: they settle at the most boxes a
 * batch has had). 0 or ENOMEM, the old arrays kept. */
int shr_grow_targets(shr_slot *slot, size_t n)
{
    if (n <= slot->tcap)
        return 0;
    size_t cap = slot->tcap * 2 > n ? slot->tcap * 2 : n;
    float *b = realloc(slot->t_boxes, cap * 4 * sizeof *b);
    if (b)
        slot->t_boxes = b;
    int64_t *l = realloc(slot->t_labels, cap * sizeof *l);
    if (l)
        slot->t_labels = l;
    float *a = realloc(slot->t_area, cap * sizeof *a);
    if (a)
        slot->t_area = a;
    uint8_t *c = realloc(slot->t_crowd, cap);
    if (c)
        slot->t_crowd = c;
    /* a segmentation dataset's: the kept boxes' positions and their keypoints */
    int segm = slot->t_moff || slot->b.num_keypoints;
    uint32_t *kept = segm ? realloc(slot->t_kept, cap * sizeof *kept) : slot->t_kept;
    if (kept)
        slot->t_kept = kept;
    float *kp = slot->b.num_keypoints
                ? realloc(slot->t_kp, cap * slot->b.num_keypoints * 3 * sizeof *kp) : slot->t_kp;
    if (kp)
        slot->t_kp = kp;
    slot->b.target_keypoints = slot->t_kp;
    /* where some grew and some did not, those that moved are still the batch's */
    slot->b.target_boxes = slot->t_boxes;
    slot->b.target_labels = slot->t_labels;
    slot->b.target_area = slot->t_area;
    slot->b.target_iscrowd = slot->t_crowd;
    if (!b || !l || !a || !c || (segm && !kept) || (slot->b.num_keypoints && !kp))
        return ENOMEM;
    slot->tcap = cap;
    return 0;
}

/* *p (cap bytes) grown to n bytes at least; 0 or ENOMEM (the old buffer kept) */
static int grow_bytes(void **p, size_t *cap, size_t n)
{
    if (n <= *cap)
        return 0;
    size_t c = *cap * 2 > n ? *cap * 2 : n;
    void *q = realloc(*p, c);
    if (!q)
        return ENOMEM;
    *p = q;
    *cap = c;
    return 0;
}

/* Sample i's masks and keypoints (segm_read.h): the boxes kept by shr_box_map (slot->t_kept, kept of
 * them from box off) get their keypoints, and their masks warped into the slot's masks at
 * *moff; an instance whose mask is left empty is dropped with its box (the arrays compacted).
 * Returns the instances kept; -1 with ENOMEM in *rc. */
static int64_t segm_sample(const shr_reader *r, shr_slot *slot, uint32_t i, int64_t off,
                           uint32_t kept, size_t *moff, int *rc)
{
    const fmt_target *t = &slot->t_stored[i];
    const shr_params *p = &slot->params[i];
    uint32_t K = r->segm_k, ow = 0, oh = 0;
    int masks = (r->segm_ext & FMT_TARGET_EXT_MASKS) != 0;
    int map = (r->segm_ext & FMT_TARGET_EXT_MAP) != 0;
    size_t plane = 0, spix = 0;
    uint32_t gw = 0, gh = 0;
    int warp = (masks || map) && shr_segm_has_warps(p);
    if (warp)
        shr_segm_frame(&r->boxes, p, &gw, &gh);
    *rc = 0;
    if (masks || map) {
        shr_segm_size(&r->boxes, r->o.scale_dense, p, &ow, &oh);
        plane = (size_t)ow * oh;
        spix = (size_t)t->map_width * t->map_height;
        /* the warps' scratch; a uint16 map's stored map decoded before it, 2 bytes a label
         * (masks and uint8 maps are moved from their runs, no decoded plane) */
        size_t wide = map ? r->map_bytes : 1;
        if (grow_bytes((void **)&slot->t_scratch, &slot->scap,
                       (wide == 2 ? spix * 2 : 0) + plane * wide * 2) ||
            grow_bytes((void **)&slot->t_xy, &slot->xycap, ((size_t)ow * 6 + oh + 1) * 4) ||
            grow_bytes((void **)&slot->t_masks, &slot->mcap,
                       *moff + plane * (map ? wide : kept) + 2)) {
            *rc = ENOMEM;
            return -1;
        }
        slot->b.target_masks = slot->t_masks;
        shr_segm_tables(&r->boxes, p, ow, oh, slot->t_xy, slot->t_xy + ow);
        slot->t_msize[2 * (size_t)i] = ow;
        slot->t_msize[2 * (size_t)i + 1] = oh;
    }
    if (map && r->map_bytes == 2) {
        /* uint16 labels: the map and the warps' planes 2-byte aligned (moff stays even) */
        uint16_t *src = (uint16_t *)(void *)slot->t_scratch;
        uint16_t *dst = (uint16_t *)(void *)(slot->t_masks + *moff);
        if (fmt_target_label_map(t, src, 2) != 0) {
            *rc = SHR_EINVAL;
            return -1;
        }
        shr_segm_warp_map16(src, t->map_width, slot->t_xy, slot->t_xy + ow, ow, oh,
                            r->ignore_index, dst);
        if (warp)
            shr_segm_warp_plane16(p, dst, ow, oh, gw, gh, r->ignore_index,
                                  slot->t_scratch + 2 * spix);
        *moff += 2 * plane;
        return 0;
    }
    if (map) {
        /* one label map a sample, no boxes: values above 255 are not uint8 labels */
        uint32_t *seg = (uint32_t *)(void *)(slot->t_xy + ow + oh + 1);
        if (shr_segm_map(t, slot->t_xy, slot->t_xy + ow, ow, oh, seg,
                         shr_segm_cols(slot->t_xy, ow, seg), seg + 3 * (size_t)ow,
                         (uint8_t)r->ignore_index, slot->t_masks + *moff) != 0) {
            *rc = SHR_EINVAL;
            return -1;
        }
        if (warp)
            shr_segm_warp_plane(p, slot->t_masks + *moff, ow, gw, gh, (uint8_t)r->ignore_index,
                                slot->t_scratch);
        *moff += plane;
        return 0;
    }
    /* the tables' column segments and a row's intervals after them (shr_segm_mask) */
    uint32_t *seg = NULL, *iv = NULL, nseg = 0;
    if (masks && kept) {
        seg = (uint32_t *)(void *)(slot->t_xy + ow + oh + 1);
        iv = seg + 3 * (size_t)ow;
        nseg = shr_segm_cols(slot->t_xy, ow, seg);
    }
    uint32_t out = 0;
    for (uint32_t j = 0; j < kept; j++) {
        uint32_t s = slot->t_kept[off + j];
        if (masks) {
            uint8_t *dst = slot->t_masks + *moff + plane * out;
            if (shr_segm_mask(t, s, slot->t_xy, slot->t_xy + ow, ow, oh, seg, nseg, iv,
                              dst) != 1 ||
                (warp && !shr_segm_warp_plane(p, dst, ow, gw, gh, 0, slot->t_scratch)))
                continue;       /* no pixel left: dropped with its box */
        }
        int64_t d = off + out, k = off + j;
        if (d != k) {
            memcpy(slot->t_boxes + 4 * d, slot->t_boxes + 4 * k, 4 * sizeof *slot->t_boxes);
            slot->t_labels[d] = slot->t_labels[k];
            slot->t_area[d] = slot->t_area[k];
            slot->t_crowd[d] = slot->t_crowd[k];
        }
        if (K)
            shr_segm_keypoints(&r->boxes, p, t->keypoints + (size_t)s * K * 3, K, r->flip_idx,
                               slot->t_kp + (size_t)d * K * 3);
        out++;
    }
    slot->t_dropped[i] += kept - out;
    *moff += plane * out;
    return out;
}

/* The targets of the batch's delivered samples (b->indices, b->params), moved by their
 * geometry (see "Targets" in shardread.h). Done once the batch's samples are settled, so that
 * skipped and substituted samples are accounted for by construction. */
static int fill_targets(const shr_reader *r, shr_slot *slot)
{
    shr_batch *b = &slot->b;
    fmt_msg m = {{0}};
    size_t total = 0;
    for (uint32_t i = 0; i < b->n; i++) {
        uint64_t idx = (uint64_t)b->indices[i];
        uint64_t li;
        const fmt_dataset *ds = src_of(r, idx, &li);
        int rc = fmt_dataset_target(ds, li, &slot->t_stored[i], &m);
        if (rc)
            return fmt_fail(&slot->msg, rc, "%s: sample %" PRIu64 ": cannot read its target: %s",
                            src_file(r, idx), src_local(r, idx), fmt_reason(&m, rc));
        total += slot->t_stored[i].count;
    }
    if (shr_grow_targets(slot, total))
        return fmt_fail(&slot->msg, ENOMEM, "cannot hold the %zu boxes of batch %" PRIu64,
                        total, b->number);
    int64_t off = 0;
    size_t moff = 0;
    for (uint32_t i = 0; i < b->n; i++) {
        const fmt_target *t = &slot->t_stored[i];
        slot->t_off[i] = off;
        if (slot->t_moff)
            slot->t_moff[i] = (int64_t)moff;
        uint32_t kept = shr_box_map(&r->boxes, t, &slot->params[i],
                                    slot->t_boxes + 4 * (size_t)off, slot->t_labels + off,
                                    slot->t_area + off, slot->t_crowd + off,
                                    r->segm_ext ? slot->t_kept + off : NULL,
                                    &slot->t_dropped[i]);
        if (r->segm_ext) {
            int rc;
            int64_t n = segm_sample(r, slot, i, off, kept, &moff, &rc);
            if (n < 0 && rc == SHR_EINVAL)
                return fmt_fail(&slot->msg, rc, "%s: sample %" PRIu64 ": its label map has "
                                "value %" PRIu32 ", above 255: uint8 label maps hold 0 .. 255 "
                                "(label_map_bytes 2 delivers uint16 ones; in Python "
                                "label_dtype='int64')", src_file(r, (uint64_t)b->indices[i]),
                                src_local(r, (uint64_t)b->indices[i]),
                                t->map_max);
            if (n < 0)
                return fmt_fail(&slot->msg, rc, "cannot hold the masks of batch %" PRIu64,
                                b->number);
            kept = (uint32_t)n;
        }
        off += kept;
        slot->t_image[i] = t->image_id;
        slot->t_orig[2 * (size_t)i] = t->orig_width;
        slot->t_orig[2 * (size_t)i + 1] = t->orig_height;
    }
    slot->t_off[b->n] = off;
    if (slot->t_moff)
        slot->t_moff[b->n] = (int64_t)moff;
    return 0;
}

/* Fill slot with stream batch k: its samples, then their targets. */
static int fill(shr_worker *w, shr_slot *slot, uint64_t k);

/* MixUp / CutMix on the finished batch, drawn from its key (see "MixUp and CutMix" in
 * shardread.h): once the batch's samples are settled, so skipped and substituted samples mix
 * as delivered. */
static int mix_batch(shr_worker *w, shr_slot *slot)
{
    const shr_reader *r = w->r;
    shr_batch *b = &slot->b;
    uint64_t key = b->number * r->o.world + r->o.rank;
    shr_mix_draw(&r->mix, r->o.seed, b->epoch, key, &b->mix);
    uint32_t bad = 0;
    if (shr_mix_apply(&r->mix, &b->mix, b->data, b->n, b->labels, slot->soft, w->mix_keep,
                      &bad) != 0)
        return fmt_fail(&slot->msg, SHR_EINVAL, "%s: sample %" PRId64 ": label %" PRId64
                        " is not in [0, num_classes %" PRIu32 ") for mixup/cutmix",
                        src_file(r, (uint64_t)b->indices[bad]),
                        src_local(r, (uint64_t)b->indices[bad]), b->labels[bad], r->mix.classes);
    return 0;
}

/* A mixture's batch, once settled: each sample's stream, and its index in that stream. */
static void name_streams(const shr_reader *r, shr_slot *slot)
{
    shr_batch *b = &slot->b;
    for (uint32_t i = 0; i < b->n; i++) {
        uint32_t s = shr_mix_plan_stream(&r->mx->plan, (uint64_t)b->indices[i]);
        slot->streams[i] = s;
        b->indices[i] -= (int64_t)r->mx->plan.first[s];
    }
    for (uint32_t i = 0; i < b->nbad; i++)
        slot->bad_idx[i] = (int64_t)src_local(r, (uint64_t)slot->bad_idx[i]);
}

static int fill_batch(shr_worker *w, shr_slot *slot, uint64_t k)
{
    int rc = fill(w, slot, k);
    if (rc == 0 && w->r->targets) {
        shr_stage_mark();
        rc = fill_targets(w->r, slot);
        shr_stage_lap(SHR_STAGE_TARGETS);
    }
    if (w->r->nlz)              /* the shards fill held (a dataset at a URL), which the
                                 * targets point into */
        shr_lazy_release(w, k);
    if (rc == 0 && w->r->mix.on) {
        shr_stage_mark();
        rc = mix_batch(w, slot);
        shr_stage_lap(SHR_STAGE_MIX);
    }
    if (rc == 0 && w->r->mx)
        name_streams(w->r, slot);
    return rc;
}

/* Fill slot's samples with stream batch k. A sample that cannot be read fails the batch, or is
 * skipped or substituted (on_error): slot->msg then holds the latest one's message. */
static int fill(shr_worker *w, shr_slot *slot, uint64_t k)
{
    const shr_reader *r = w->r;
    uint64_t epoch, number;
    shr_stream_pos(r, k, &epoch, &number);
    shr_batch *b = &slot->b;
    uint32_t n = shr_sampler_batch(r->sampler, epoch, number, w->idx);
    b->epoch = epoch;
    b->number = number;
    b->nbad = 0;
    if (r->nlz) {               /* datasets at URLs: the shards here, held until the end */
        int rc = shr_lazy_acquire(w, k, n, &slot->msg);
        if (rc)
            return rc;
    }
    /* The direct engine reads a whole batch at once. When one of its samples cannot be read
     * (or fails verification) and on_error asks for recovery, the batch is read again sample by
     * sample below, which knows which samples failed: a cost paid by damaged batches only. */
    if (w->direct) {
        b->n = n;
        int rc = fill_direct(w, slot, epoch, n);
        if (rc == 0 || !r->recovers)
            return rc;
    }
    uint32_t out = 0;
    for (uint32_t i = 0; i < n; i++) {
        fmt_sample s;
        int rc = put_sample(w, epoch, w->idx[i], b->data + (size_t)out * r->sample_bytes, &s,
                            &slot->params[out], &slot->msg);
        b->indices[out] = (int64_t)w->idx[i];
        shr_on_error on_error = src_on_error(r, w->idx[i]);
        if (rc) {
            if (on_error == SHR_ON_ERROR_FAIL)
                return rc;
            slot->bad_idx[b->nbad] = (int64_t)w->idx[i];
            slot->bad_err[b->nbad] = rc;
            slot->bad_pos[b->nbad] = -1;
            if (on_error == SHR_ON_ERROR_SKIP) {
                b->nbad++;
                continue;
            }
            fmt_msg keep = slot->msg;
            if (substitute(w, slot, epoch, w->idx[i], out, &s) != 0)
                return fmt_fail(&slot->msg, rc, "%s (and no substitute could be read)", keep.text);
            slot->msg = keep;
            slot->bad_pos[b->nbad++] = (int32_t)out;
        }
        b->labels[out] = s.label;
        if (s.label >= 0)     /* labels="offset" (a substitute: the same stream) */
            b->labels[out] += src_label_offset(r, w->idx[i]);
        b->sources[out] = (int64_t)s.source;
        out++;
    }
    b->n = out;
    return 0;
}

/* The ring's fill: stream batch k into slot si, by worker w, counted in the worker's stats
 * (stats.h): always the batch's wall and CPU time; with stage timing on, its stages and the
 * fill's times for timelines. */
int shr_fill_slot(void *ctx, void *worker, uint32_t si, uint64_t k)
{
    shr_reader *r = ctx;
    shr_worker *w = worker;
    shr_wstats *st = &w->st;
    shr_slot *slot = &r->slots[si];
    int timed = __atomic_load_n(&r->stats_on, __ATOMIC_RELAXED);
    shr_stage_sink = timed ? st : NULL;
    uint64_t c0 = shr_clock_ns(CLOCK_THREAD_CPUTIME_ID), t0 = shr_now_ns();
    slot->rc = fill_batch(w, slot, k);
    uint64_t t1 = shr_now_ns(), c1 = shr_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    shr_stage_sink = NULL;
    shr_wstats_publish(st, timed, k, slot->rc ? 0 : slot->b.n, t0, t1, c1 - c0);
    return slot->rc;
}

void *shr_worker_main(void *arg)
{
    shr_worker *w = arg;
    shr_ring_serve_as(&w->r->ring, w, w->id);
    return NULL;
}
