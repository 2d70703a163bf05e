/* shardread.c - the reader: open and close, the ring of batch buffers, prefetch workers, consuming.
 *
 * Concurrency design
 * ------------------
 * One consumer thread calls shr_next; `threads` workers fill batches; shr_release may come from
 * any thread. Everything shared lives in the ring, under its mutex. The batch bytes themselves
 * are written without it, by the one worker that owns the slot at the time.
 *
 * The stream. Batches form one stream numbered k = 0, 1, 2, ... from where the reader was opened,
 * running across epochs: with nb batches per epoch and the reader opened at (E0, C0), stream batch
 * k is batch (C0 + k) % nb of epoch E0 + (C0 + k) / nb. This is a pure function, and the sampler
 * is one too, so whoever fills batch k needs nothing but k: the output cannot depend on which
 * worker filled what, or when.
 *
 * The ring (ring.c: slot states, claims and delivery in stream order, who wakes whom, why it
 * cannot stall) has P = prefetch slots, allocated at open; a slot holds one batch's buffers. A
 * worker claims stream batch k with a free slot, fills it unlocked, and marks it ready; shr_next
 * takes the batches in stream order and shr_release gives their slots back. With all P slots held
 * nothing can ever arrive, so shr_next returns SHR_EINVAL instead of blocking forever.
 *
 * Epochs. The stream does not stop at an epoch's end: workers fill the next epoch's first batches
 * while the consumer finishes the current one. The consumer alone turns the epoch: after the last
 * batch of an epoch, shr_next returns SHR_EEND once (no stream batch consumed) and moves its
 * (epoch, cursor) to (epoch + 1, 0).
 *
 * Memory. The P slots, and per worker an index array, an O_DIRECT bounce buffer and a sample
 * buffer for crop/pad that grows to the largest sample read, are all there is. Nothing is
 * allocated per batch or per epoch, so memory is bounded by the ring plus a per-worker constant.
 *
 * Failure. A worker that cannot fill its batch stores the error in the slot and hands it to the
 * ring as filled; the ring then stops all claims (idle workers are woken to exit). Batches before
 * the failed one are still delivered; when the consumer reaches it, shr_next returns its error and
 * the reader stays failed (SHR_ESTATE). Close stops the ring and joins the workers (each finishes
 * the batch in hand) before anything is freed.
 *
 * Files. This one is the reader's lifecycle: open (validation, the ring's buffers, the workers),
 * shr_next / shr_release, close. The options (defaults, checks, shr_draw_params) are options.c;
 * what a caller reads of an open reader (state, counts, info, a batch's targets) is info.c. What
 * a worker does to fill a batch (drawing each sample's parameters, crop, pad, resize and the
 * other transforms, recovery, targets, MixUp) is assemble.c; the state they share is reader.h;
 * the shr_dataset API, which reads single samples without a reader, is random_access.c.
 */
#include "shardread.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assemble.h"
#include "augment_read.h"
#include "dataset.h"
#include "direct.h"
#include "mix.h"
#include "pinned.h"
#include "reader.h"
#include "resample.h"
#include "ring.h"
#include "sampler.h"
#include "scale.h"
#include "simd.h"
#include "stats.h"
#include "transform.h"
#include "tune.h"

/* the access modes are passed through to the dataset layer by value */
_Static_assert(SHR_ACCESS_MMAP == (int)FMT_ACCESS_MMAP && SHR_ACCESS_PREAD == (int)FMT_ACCESS_PREAD &&
               SHR_ACCESS_DIRECT == (int)FMT_ACCESS_DIRECT, "access modes differ");

/* the public header's codes are the project's list (fmt.h): its own, and the formats layer's
 * it repeats (compared as ints: distinct enums) */
SHR_ERRORS(FMT_ERROR_CHECK)
_Static_assert(SHR_ELAST == SHR_ESTATE + 1, "a code of shardread.h is not in fmt.h's list");
_Static_assert((int)SHR_EFORMAT == (int)FMT_EFORMAT && (int)SHR_ECORRUPT == (int)FMT_ECORRUPT &&
               (int)SHR_ETRUNC == (int)FMT_ETRUNC && (int)SHR_ETOOBIG == (int)FMT_ETOOBIG &&
               (int)SHR_EUNSUPPORTED == (int)FMT_EUNSUPPORTED &&
               (int)SHR_EFMT_INVAL == (int)FMT_EINVAL && (int)SHR_EHASH == (int)FMT_EHASH &&
               (int)SHR_EVERSION == (int)FMT_EVERSION && (int)SHR_EFMT_STATE == (int)FMT_ESTATE &&
               (int)SHR_EEMPTY == (int)FMT_EEMPTY && SHR_EEMPTY + 1 == (int)FMT_ELAST,
               "formats error codes differ");

#define SHR_DIRECT_DEPTH 64u            /* DIRECT: requests in flight per worker */
#define SHR_DIRECT_STAGING (4u << 20)   /* DIRECT: staging for requests not read in place */
#define SHR_PAGE 4096u


const char *shr_strerror(int rc)
{
    return fmt_strerror(rc);
}

int shr_set_simd(int on)
{
    return fmt_simd_set(on);
}

int shr_simd_env_plain(char *(*get)(const char *))
{
    return fmt_simd_env_plain(get);
}

uint64_t shr_pin_device_from_env(char *(*get)(const char *))
{
    const char *s = get("LOCAL_RANK");
    char *end;
    if (!s || *s < '0' || *s > '9')
        return 0;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    return !errno && !*end && v < 65536 ? v + 1 : 0;
}

const char *shr_last_error(const shr_reader *r)
{
    return r ? r->err.text : "";
}

/* ---- open / close ---- */

/* The output kernel's settings: dtype, layout, normalisation; and the RandomResizedCrop's. */
static int set_output(shr_reader *r, const char *dir)
{
    const fmt_manifest *m = fmt_dataset_manifest(r->ds);
    const shr_options *o = &r->o;
    shr_tf_out_init(&r->out, o->dtype, o->layout, r->width, r->height, r->channels);
    if (o->unit > 1.0f)
        r->out.unit = o->unit;
    r->convert = o->dtype != SHR_DTYPE_U8 || (o->layout == SHR_LAYOUT_NCHW && r->channels > 1);
    if (o->normalize != SHR_NORM_NONE && r->channels > 4)
        return fmt_fail(r->why, SHR_EINVAL, "%s: cannot normalise %" PRIu32 " channels (at "
                        "most 4)", dir, r->channels);
    for (uint32_t c = 0; c < r->channels && o->normalize != SHR_NORM_NONE; c++) {
        if (o->normalize == SHR_NORM_GIVEN) {
            r->out.mean[c] = o->mean[c];
            r->out.std[c] = o->std[c];
        } else {
            if (c >= 3 || !(m->std[c] > 0) || !isfinite(m->std[c]) || !isfinite(m->mean[c]))
                return fmt_fail(r->why, SHR_EINVAL, "%s: the manifest has no usable "
                                "statistics for channel %" PRIu32 " (std %g): give mean and std",
                                dir, c, c < 3 ? m->std[c] : 0.0);
            /* the dataset's statistics are on the 0..255 scale: on the unit's scale too */
            r->out.mean[c] = (float)(m->mean[c] / r->out.unit);
            r->out.std[c] = (float)(m->std[c] / r->out.unit);
        }
    }
    if (o->rrc)
        shr_tf_rrc_init(&r->rrc, o->rrc_scale, o->rrc_ratio);
    shr_aug_init(&r->aug, o);
    return 0;
}

/* The one size every sample of the dataset has, where its manifest records none (a build without
 * --size, of images that all have one size): one pass over the index, which is in memory, made
 * only where no output size was given and the reader would otherwise be refused; it stops at the
 * first sample of another size. Samples in shards a tolerant open left closed are never read.
 * 1 with *w x *h, or 0 (sizes vary, or no sample can be read). */
static int common_size(const shr_reader *r, uint32_t *w, uint32_t *h)
{
    const fmt_manifest *m = fmt_dataset_manifest(r->ds);
    *w = *h = 0;
    for (uint64_t i = 0; i < m->samples; i++) {
        fmt_sample s;
        if (fmt_dataset_get(r->ds, i, &s) != 0)
            continue;           /* in a shard that did not open: skipped or replaced */
        if (!*w) {
            *w = s.width;
            *h = s.height;
        } else if (s.width != *w || s.height != *h) {
            return 0;
        }
    }
    return *w && *h;
}

/* The largest stored width and height (their canvas), from the manifest or one pass over the
 * index; samples in shards a tolerant open left closed are never read. */
static void largest_size(const shr_reader *r, uint32_t *w, uint32_t *h)
{
    const fmt_manifest *m = fmt_dataset_manifest(r->ds);
    *w = m->sample_width;
    *h = m->sample_height;
    for (uint64_t i = 0; !(m->sample_width && m->sample_height) && i < m->samples; i++) {
        fmt_sample s;
        if (fmt_dataset_get(r->ds, i, &s) != 0)
            continue;
        *w = s.width > *w ? s.width : *w;
        *h = s.height > *h ? s.height : *h;
    }
}

/* Batch geometry from the options or the dataset, and the sizes it implies. */
static int set_geometry(shr_reader *r, const char *dir)
{
    const fmt_manifest *m = fmt_dataset_manifest(r->ds);
    r->channels = m->channels;
    if (r->o.width) {
        r->width = r->o.width;
        r->height = r->o.height;
    } else if (r->o.scale == SHR_SCALE_MULTI) {
        r->width = r->height = r->o.scale_max;      /* the canvas of every image */
    } else if (r->o.scale == SHR_SCALE_NATURAL) {
        /* the canvas: the largest stored width and height (of every stream of a mixture) */
        largest_size(r, &r->width, &r->height);
        shr_mixture_largest(r, &r->width, &r->height);
        if (!r->width)
            return fmt_fail(r->why, SHR_EINVAL, "%s: no sample can be read to size the "
                            "natural sizes' canvas", dir);
        if ((uint64_t)r->width * r->height > SHR_MAX_PIXELS)
            return fmt_fail(r->why, SHR_EINVAL, "%s: the natural sizes' canvas %" PRIu32
                            "x%" PRIu32 " (the largest stored width x height) is past the "
                            "output size limit of %u pixels (SHR_MAX_PIXELS): give width and "
                            "height", dir, r->width, r->height, SHR_MAX_PIXELS);
    } else if (m->sample_width && m->sample_height) {
        r->width = m->sample_width;
        r->height = m->sample_height;
    } else if (common_size(r, &r->width, &r->height)) {
        r->src_w = r->width;    /* the manifest does not say so; the index does */
        r->src_h = r->height;
    } else {
        return fmt_fail(r->why, SHR_ESHAPE, "%s: samples vary in size: give width and height "
                        "to crop or pad them to", dir);
    }
    uint64_t sample, batch;
    if (__builtin_mul_overflow((uint64_t)r->width, r->height, &sample) ||
        __builtin_mul_overflow(sample, (uint64_t)r->channels, &sample) ||
        __builtin_mul_overflow(sample, (uint64_t)r->o.batch_size, &batch) || batch > SIZE_MAX / 2)
        return fmt_fail(r->why, SHR_EINVAL, "batch of %" PRIu32 " x %" PRIu32 "x%" PRIu32
                        " samples is too large", r->o.batch_size, r->width, r->height);
    r->staged_bytes = (size_t)sample;
    size_t elem = shr_tf_elem_size(r->o.dtype);
    if (__builtin_mul_overflow(sample, (uint64_t)elem, &sample) ||
        __builtin_mul_overflow(batch, (uint64_t)elem, &batch) || batch > SIZE_MAX / 2)
        return fmt_fail(r->why, SHR_EINVAL, "batch of %" PRIu32 " x %" PRIu32 "x%" PRIu32
                        " samples is too large", r->o.batch_size, r->width, r->height);
    r->sample_bytes = (size_t)sample;
    r->batch_bytes = (size_t)batch;
    uint64_t max = fmt_dataset_max_length(r->ds);
    if (max > SIZE_MAX / 2)
        return fmt_fail(r->why, FMT_ETOOBIG, "%s: a sample of %" PRIu64 " bytes is too large",
                        dir, max);
    r->sample_max = (size_t)max;
    if (m->sample_width && m->sample_height) {
        r->src_w = m->sample_width;
        r->src_h = m->sample_height;
    }
    r->uniform = r->src_w == r->width && r->src_h == r->height;
    return set_output(r, dir);
}

/* A detection dataset: how its boxes are moved (every geometric op included: the boxes follow
 * the rotation, affine and auto_augment warps through their params, boxes.h). */
static int set_targets(shr_reader *r, const char *dir)
{
    shr_options *o = &r->o;
    const fmt_manifest *m = fmt_dataset_manifest(r->ds);
    const uint32_t *flip_idx = o->flip_indices;
    o->flip_indices = NULL;     /* the caller's: never kept */
    r->targets = m->targets && !o->skip_targets;
    if (!r->targets)
        return 0;
    r->boxes.width = r->width;
    r->boxes.height = r->height;
    r->boxes.rrc = o->rrc != 0;
    r->boxes.min_fraction = o->min_box_area_fraction;
    r->boxes.scale = o->scale;
    /* masks and keypoints (segm_read.h): moved by the crop, pad, RandomResizedCrop, scale ops,
     * flip and the warps of rotation, affine and auto_augment */
    r->segm_ext = m->target_ext & SEGM_EXT;      /* a mixture's streams agree on them */
    r->segm_k = r->segm_ext & FMT_TARGET_EXT_KEYPOINTS ? m->num_keypoints : 0;
    if (!r->segm_ext)
        return 0;
    r->map_bytes = o->label_map_bytes == 2 ? 2 : 1;
    if ((r->segm_ext & FMT_TARGET_EXT_MAP) && r->map_bytes == 1 && m->ignore_index > 255)
        return fmt_fail(r->why, SHR_EINVAL, "%s: the label maps' ignore index is %" PRIu32
                        ": uint8 label maps hold 0 .. 255 (label_map_bytes 2 delivers uint16 "
                        "ones; in Python label_dtype='int64')", dir, m->ignore_index);
    r->ignore_index = (uint16_t)m->ignore_index;
    if (o->flip && r->segm_k && !flip_idx)
        return fmt_fail(r->why, SHR_EINVAL, "%s: the dataset has %" PRIu32 " keypoints "
                        "per instance: a flip needs flip_indices (the left/right swap, as "
                        "COCO's person keypoints have it)", dir, r->segm_k);
    if (o->flip && r->segm_k) {
        if (o->num_flip_indices != r->segm_k)
            return fmt_fail(r->why, SHR_EINVAL, "%s: flip_indices has %" PRIu32
                            " entries: the dataset has %" PRIu32 " keypoints per instance", dir,
                            o->num_flip_indices, r->segm_k);
        r->flip_idx = malloc(r->segm_k * sizeof *r->flip_idx);
        if (!r->flip_idx)
            return ENOMEM;
        for (uint32_t j = 0; j < r->segm_k; j++) {
            if (flip_idx[j] >= r->segm_k)
                return fmt_fail(r->why, SHR_EINVAL, "%s: flip_indices[%" PRIu32 "] is %"
                                PRIu32 ": not a keypoint (0 .. %" PRIu32 ")", dir, j,
                                flip_idx[j], r->segm_k - 1);
            r->flip_idx[j] = flip_idx[j];
        }
    }
    return 0;
}

/* MixUp / CutMix: a classification dataset with a class count for the soft labels. */
static int set_mix(shr_reader *r, const char *dir)
{
    const shr_options *o = &r->o;
    if (!(o->mixup_alpha > 0 || o->cutmix_alpha > 0))
        return 0;
    if (fmt_dataset_manifest(r->ds)->targets)
        return fmt_fail(r->why, SHR_EINVAL, "%s: mixup and cutmix need a classification "
                        "dataset: this one has detection targets", dir);
    uint32_t classes = o->num_classes;
    if (!classes)
        classes = (uint32_t)fmt_dataset_manifest(r->ds)->nclasses;
    if (!classes)
        return fmt_fail(r->why, SHR_EINVAL, "%s: mixup and cutmix need class labels: the "
                        "dataset has no classes (give num_classes)", dir);
    if ((uint64_t)classes * o->batch_size > ((uint64_t)1 << 31))
        return fmt_fail(r->why, SHR_EINVAL, "%s: soft labels of %" PRIu32 " x %" PRIu32
                        " are too large", dir, o->batch_size, classes);
    shr_mix_init(&r->mix, o, &r->out, classes);
    return 0;
}

static int make_sampler(shr_reader *r)
{
    const fmt_manifest *m = fmt_dataset_manifest(r->ds);
    uint64_t *counts = calloc(m->nshards ? m->nshards : 1, sizeof *counts);
    if (!counts)
        return ENOMEM;
    for (size_t i = 0; i < m->nshards; i++)
        counts[i] = m->shards[i].samples;
    shr_sampler_cfg cfg = {
        .n = m->samples,
        .order = r->o.order,
        .seed = r->o.seed,
        .rank = r->o.rank,
        .world = r->o.world,
        .uneven = r->o.uneven,
        .batch_size = r->o.batch_size,
        .drop_last = r->o.drop_last,
        .nshards = m->nshards,
        .shard_counts = counts,
        .window = r->o.quasi_window ? r->o.quasi_window : 1,
        .start_epoch = r->o.epoch,
        .start = r->o.consumed,
        .mix = r->mx ? &r->mx->plan : NULL,
    };
    if (r->mx)
        cfg.n = r->mx->plan.total;
    int rc = shr_sampler_create(&r->sampler, &cfg);
    free(counts);
    if (rc)
        return fmt_fail(r->why, rc, "cannot plan the epochs: %s", shr_strerror(rc));
    r->nb = shr_sampler_batches(r->sampler);
    if (r->nb == 0)
        return fmt_fail(r->why, SHR_EINVAL, "no batches: %" PRIu64 " samples, %" PRIu64
                        " for this rank, batch_size %" PRIu32 "%s", cfg.n,
                        shr_sampler_per_rank(r->sampler), r->o.batch_size,
                        r->o.drop_last ? " with drop_last" : "");
    if (r->o.consumed > cfg.n)
        return fmt_fail(r->why, SHR_EINVAL, "consumed %" PRIu64 " is past the epoch's %"
                        PRIu64 " samples", r->o.consumed, cfg.n);
    uint64_t first = shr_sampler_batches_in(r->sampler, r->o.epoch);
    if (r->o.cursor > first)
        return fmt_fail(r->why, SHR_EINVAL, "cursor %" PRIu64 " is past the epoch's %" PRIu64
                        " batches", r->o.cursor, first);
    /* cursor == the epoch's batches: it is consumed and its SHR_EEND is next */
    r->epoch = r->o.epoch;
    r->cursor = r->o.cursor;
    r->e0 = r->o.epoch + (r->o.cursor == first);
    r->c0 = r->o.cursor == first ? 0 : r->o.cursor;
    r->nb0 = shr_sampler_batches_in(r->sampler, r->e0);
    return 0;
}

static int make_ring(shr_reader *r)
{
    uint32_t n = r->nslots;
    r->slots = calloc(n, sizeof *r->slots);
    if (!r->slots)
        return ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        shr_slot *s = &r->slots[i];
        fmt_msg why = {""};
        int rc = shr_host_alloc(r->batch_bytes, &s->data, &s->b.pinned, (shr_pin)r->o.pin,
                                (int)r->o.pin_device - 1, &why);
        if (why.text[0] && !r->unpinned.text[0])
            r->unpinned = why;
        if (rc)
            return fmt_fail(r->why, rc, "cannot allocate %u batch buffers of %zu bytes", n,
                            r->batch_bytes);
        void *arr = NULL;
        if (shr_host_alloc(3 * (size_t)r->o.batch_size * sizeof *s->arrays, &arr,
                           &s->arrays_pinned, (shr_pin)r->o.pin, (int)r->o.pin_device - 1,
                           NULL) == 0) {
            memset(arr, 0, 3 * (size_t)r->o.batch_size * sizeof *s->arrays);
            s->arrays = arr;
        }
        s->params = calloc(r->o.batch_size, sizeof *s->params);
        s->bad_idx = calloc(r->o.batch_size, sizeof *s->bad_idx);
        s->bad_err = calloc(2 * (size_t)r->o.batch_size, sizeof *s->bad_err);
        if (!s->arrays || !s->params || !s->bad_idx || !s->bad_err)
            return ENOMEM;
        s->bad_pos = s->bad_err + r->o.batch_size;
        s->b.bad_indices = s->bad_idx;
        s->b.bad_errors = s->bad_err;
        s->b.bad_positions = s->bad_pos;
        s->b.params = s->params;
        s->b.dtype = r->o.dtype;
        s->b.layout = r->o.layout;
        s->b.data = s->data;
        s->b.labels = s->arrays;
        s->b.indices = s->arrays + r->o.batch_size;
        s->b.sources = s->arrays + 2 * (size_t)r->o.batch_size;
        s->b.height = r->height;
        s->b.width = r->width;
        s->b.channels = r->channels;
        if (r->mx && !(s->streams = calloc(r->o.batch_size, sizeof *s->streams)))
            return ENOMEM;
        s->b.streams = s->streams;
        if (r->mix.on) {
            s->soft = calloc((size_t)r->o.batch_size * r->mix.classes, sizeof *s->soft);
            if (!s->soft)
                return ENOMEM;
            s->b.soft_labels = s->soft;
            s->b.num_classes = r->mix.classes;
        }
        if (!r->targets)
            continue;
        size_t bs = r->o.batch_size;
        s->t_off = calloc(bs + 1, sizeof *s->t_off);
        s->t_image = calloc(bs, sizeof *s->t_image);
        s->t_dropped = calloc(bs, sizeof *s->t_dropped);
        s->t_orig = calloc(2 * bs, sizeof *s->t_orig);
        s->t_stored = calloc(bs, sizeof *s->t_stored);
        /* room for one box per sample to start with: never NULL, even in a batch of none */
        if (!s->t_off || !s->t_image || !s->t_dropped || !s->t_orig || !s->t_stored ||
            shr_grow_targets(s, bs))
            return ENOMEM;
        s->b.target_offsets = s->t_off;
        s->b.target_image_ids = s->t_image;
        s->b.target_dropped = s->t_dropped;
        s->b.target_orig_sizes = s->t_orig;
        if (!r->segm_ext)
            continue;
        s->b.num_keypoints = r->segm_k;
        s->b.label_map = (r->segm_ext & FMT_TARGET_EXT_MAP) != 0;
        s->b.label_map_bytes = s->b.label_map ? r->map_bytes : 0;
        if (r->segm_ext & (FMT_TARGET_EXT_MASKS | FMT_TARGET_EXT_MAP)) {
            s->t_moff = calloc(bs + 1, sizeof *s->t_moff);
            s->t_msize = calloc(2 * bs, sizeof *s->t_msize);
            if (!s->t_moff || !s->t_msize)
                return ENOMEM;
            s->b.target_mask_offsets = s->t_moff;
            s->b.target_mask_sizes = s->t_msize;
        }
        if (shr_grow_targets(s, bs + 1))    /* the segmentation arrays too */
            return ENOMEM;
    }
    return 0;
}

static void free_reader(shr_reader *r)
{
    for (uint32_t i = 0; r->workers && i < r->o.threads; i++) {
        free(r->workers[i].idx);
        free(r->workers[i].bounce);
        free(r->workers[i].sample);
        free(r->workers[i].staged);
        fmt_rs_scratch_free(r->workers[i].rs);
        shr_direct_free(r->workers[i].direct);
        free(r->workers[i].items);
        free(r->workers[i].mix_keep);
        free(r->workers[i].held);
    }
    free(r->workers);
    for (uint32_t i = 0; r->slots && i < r->nslots; i++) {
        shr_host_free(r->slots[i].data, r->slots[i].b.pinned);
        shr_host_free(r->slots[i].arrays, r->slots[i].arrays_pinned);
        free(r->slots[i].bad_idx);
        free(r->slots[i].bad_err);
        free(r->slots[i].params);
        free(r->slots[i].t_off);
        free(r->slots[i].t_image);
        free(r->slots[i].t_dropped);
        free(r->slots[i].t_orig);
        free(r->slots[i].t_stored);
        free(r->slots[i].t_boxes);
        free(r->slots[i].t_labels);
        free(r->slots[i].t_area);
        free(r->slots[i].t_crowd);
        free(r->slots[i].t_kept);
        free(r->slots[i].t_kp);
        free(r->slots[i].t_masks);
        free(r->slots[i].t_scratch);
        free(r->slots[i].t_moff);
        free(r->slots[i].t_msize);
        free(r->slots[i].t_xy);
        free(r->slots[i].soft);
        free(r->slots[i].streams);
    }
    free(r->slots);
    free(r->flip_idx);
    shr_lazy_close(r);          /* their threads unload shards of the datasets: stopped first */
    shr_sampler_free(r->sampler);
    fmt_rs_cache_free(r->rs_cache);
    fmt_dataset_close(r->ds);
    shr_mixture_free(r->mx);
    free(r);
}

/* Resize a w x h image of zeros to width x height: what it leaves behind in the scratch (the
 * coefficient tables of both axes, the intermediate rows) is what resizing a box of that size
 * needs. */
static int resize_dummy(const shr_reader *r, fmt_rs_scratch *rs, uint32_t w, uint32_t h,
                        uint8_t *zeros, uint8_t *out)
{
    const fmt_rs_view in = {.pixels = zeros, .width = w, .height = h, .channels = r->channels,
                            .stride = (size_t)w * r->channels};
    const fmt_rs_view o = {.pixels = out, .width = r->width, .height = r->height,
                           .channels = r->channels, .stride = (size_t)r->width * r->channels};
    return fmt_resample(rs, &in, NULL, shr_rs_filter(r->o.filter), &o, NULL);
}

/* A worker's scratch grows to the tallest box it resizes: grown here to the tallest possible
 * (a 1-pixel-wide box of the largest stored height), so it does not grow while training. */
static int prewarm_scratch(const shr_reader *r, fmt_rs_scratch *rs)
{
    uint8_t *zeros = calloc((size_t)r->max_h * r->channels, 1);
    uint8_t *out = malloc(r->staged_bytes);
    int rc = zeros && out ? resize_dummy(r, rs, 1, r->max_h, zeros, out) : ENOMEM;
    free(zeros);
    free(out);
    return rc;
}

/* RandomResizedCrop boxes are 1..max_w wide and 1..max_h tall, and the resampler's coefficient
 * tables depend on nothing else (the output size and filter being fixed): all of them are built
 * into the shared cache here, once, so that none is built (and memory does not grow) while
 * training. Tables that do not fit in the cache's bound are rebuilt per worker as needed. */
static int prewarm_tables(shr_reader *r)
{
    const fmt_manifest *m = fmt_dataset_manifest(r->ds);
    r->max_w = m->sample_width;
    r->max_h = m->sample_height;
    int fixed = r->max_w && r->max_h;
    for (uint64_t i = 0; !fixed && i < m->samples; i++) {
        fmt_sample s;
        int rc = fmt_dataset_get(r->ds, i, &s);
        if (rc && fmt_dataset_sample_error(r->ds, i))
            continue;           /* in a shard that did not open: never resized */
        if (rc)
            return rc;
        r->max_w = s.width > r->max_w ? s.width : r->max_w;
        r->max_h = s.height > r->max_h ? s.height : r->max_h;
    }
    shr_mixture_largest(r, &r->max_w, &r->max_h);
    fmt_rs_scratch *rs = NULL;
    uint32_t side = r->max_w > r->max_h ? r->max_w : r->max_h;
    uint8_t *zeros = calloc((size_t)side * r->channels, 1), *out = malloc(r->staged_bytes);
    int rc = zeros && out ? fmt_rs_cache_create(&r->rs_cache) : ENOMEM;
    if (!rc)
        rc = fmt_rs_scratch_create(r->rs_cache, &rs);
    /* a row of w pixels to width x 1 builds the w -> width table; a column likewise */
    for (uint32_t w = 1; !rc && w <= r->max_w; w++) {
        const fmt_rs_view in = {zeros, w, 1, r->channels, (size_t)w * r->channels};
        const fmt_rs_view o = {out, r->width, 1, r->channels, (size_t)r->width * r->channels};
        rc = fmt_resample(rs, &in, NULL, shr_rs_filter(r->o.filter), &o, NULL);
    }
    for (uint32_t h = 1; !rc && h <= r->max_h; h++) {
        const fmt_rs_view in = {zeros, 1, h, r->channels, r->channels};
        const fmt_rs_view o = {out, 1, r->height, r->channels, r->channels};
        rc = fmt_resample(rs, &in, NULL, shr_rs_filter(r->o.filter), &o, NULL);
    }
    fmt_rs_scratch_free(rs);
    free(zeros);
    free(out);
    return rc;
}

/* Multi-scale and natural sizes: every sample of ds (at path), at its largest, inside the
 * canvas. */
static int scale_fits(const shr_reader *r, const fmt_dataset *ds, const char *path)
{
    const fmt_manifest *m = fmt_dataset_manifest(ds);
    int fixed = m->sample_width && m->sample_height;
    for (uint64_t i = 0; i < (fixed ? 1 : m->samples); i++) {
        uint32_t sw = m->sample_width, sh = m->sample_height, w, h;
        if (!fixed) {
            fmt_sample s;
            int rc = fmt_dataset_get(ds, i, &s);
            if (rc && fmt_dataset_sample_error(ds, i))
                continue;       /* in a shard that did not open: never read */
            if (rc)
                return fmt_fail(r->why, rc, "%s: sample %" PRIu64 ": %s", path, i,
                                shr_strerror(rc));
            sw = s.width;
            sh = s.height;
        }
        w = sw;
        h = sh;
        if (r->o.scale == SHR_SCALE_MULTI)
            shr_scale_largest(&r->o, sw, sh, &w, &h);
        if (w > r->width || h > r->height)
            return fmt_fail(r->why, SHR_EINVAL, "%s: sample %" PRIu64 " (%" PRIu32 "x%"
                            PRIu32 ") becomes %" PRIu32 "x%" PRIu32 " at its largest scale, "
                            "more than the %" PRIu32 "x%" PRIu32 " canvas: give a larger one "
                            "(width, height)%s", path, i, sw, sh, w, h, r->width, r->height,
                            r->o.scale == SHR_SCALE_MULTI ? " or smaller sizes" : "");
    }
    return 0;
}

/* The scale ops: the resampler's shared tables, and (multi-scale, natural sizes) every
 * sample's largest image inside the canvas, in every stream of a mixture. */
static int scale_setup(shr_reader *r, const char *dir)
{
    int rc = fmt_rs_cache_create(&r->rs_cache);
    if (rc)
        return fmt_fail(r->why, rc, "%s: cannot prepare the resampler: %s", dir,
                        shr_strerror(rc));
    if (!shr_scale_per_image(r->o.scale))
        return 0;
    if (!r->mx)
        return scale_fits(r, r->ds, dir);
    for (uint32_t s = 0; s < r->mx->plan.n; s++) {
        char path[600];
        snprintf(path, sizeof path, "stream %" PRIu32 " (%.500s)", s, r->mx->paths[s]);
        if ((rc = scale_fits(r, r->mx->ds[s], path)) != 0)
            return rc;
    }
    return 0;
}

/* Stop and join the workers that were started. A worker waiting for a shard of a dataset at a
 * URL is woken first: the shard may never come (a bounded cache another reader keeps full). */
static void stop_workers(shr_reader *r)
{
    shr_lazy_cancel(r);
    shr_ring_stop(&r->ring);
    for (uint32_t i = 0; i < r->nworkers; i++)
        pthread_join(r->workers[i].thread, NULL);
    r->nworkers = 0;
}

static int start_workers(shr_reader *r)
{
    r->workers = calloc(r->o.threads, sizeof *r->workers);
    if (!r->workers)
        return ENOMEM;
    for (uint32_t i = 0; i < r->o.threads; i++) {
        shr_worker *w = &r->workers[i];
        w->r = r;
        /* DIRECT keeps each direct item's batch position after the batch's indices */
        w->idx = calloc((size_t)r->o.batch_size * (r->o.access == SHR_ACCESS_DIRECT ? 2 : 1),
                        sizeof *w->idx);
        if (!w->idx)
            return ENOMEM;
        if (r->o.access != SHR_ACCESS_MMAP &&
            posix_memalign(&w->bounce, FMT_DIRECT_ALIGN, SHR_BOUNCE_BYTES) != 0) {
            w->bounce = NULL;
            return ENOMEM;
        }
        /* crop/pad needs the whole stored sample in memory when it is not mapped (pread, direct,
         * or a backend that decodes, such as the per-image sets); sized once, so memory does not
         * creep up as workers meet larger samples */
        if (!r->uniform || r->convert || r->o.rrc || r->aug.pixels ||
            r->o.scale != SHR_SCALE_NONE) {
            w->sample = malloc(r->sample_max);
            if (!w->sample)
                return ENOMEM;
            w->sample_cap = r->sample_max;
        } else if (r->o.access == SHR_ACCESS_DIRECT && r->direct_shards > 0) {
            int rc = shr_direct_create(&w->direct, SHR_DIRECT_DEPTH, SHR_DIRECT_STAGING,
                                       !r->o.direct_pread);
            w->items = calloc(r->o.batch_size, sizeof *w->items);
            if (rc || !w->items)
                return ENOMEM;
        }
        /* where the pixels are resized or padded before the output kernel converts them */
        if ((!r->uniform && r->convert) || r->o.rrc || r->aug.pixels ||
            r->o.scale != SHR_SCALE_NONE) {
            /* the augmentations' scratch follows the sample */
            w->staged = malloc(r->staged_bytes * (r->aug.scratch ? 2 : 1));
            if (!w->staged)
                return ENOMEM;
        }
        if (r->mix.on && !(w->mix_keep = malloc(r->sample_bytes)))
            return ENOMEM;
        /* a dataset at a URL: a batch's shards, and as many substitutes' */
        w->held_cap = (size_t)r->o.batch_size * 2;
        if (r->nlz && !(w->held = calloc(w->held_cap + r->o.batch_size, sizeof *w->held)))
            return ENOMEM;
        if (r->o.rrc || r->o.scale != SHR_SCALE_NONE) {
            int rc = fmt_rs_scratch_create(r->rs_cache, &w->rs);
            if (!rc && r->o.rrc)
                rc = prewarm_scratch(r, w->rs);
            if (rc)
                return fmt_fail(r->why, rc, "cannot set up the resampler: %s",
                                shr_strerror(rc));
        }
    }
    shr_tune_init(r, r->o.threads_auto, r->o.threads);
    for (uint32_t i = 0; i < r->o.threads; i++) {
        r->workers[i].id = i;
        int rc = pthread_create(&r->workers[i].thread, NULL, shr_worker_main, &r->workers[i]);
        if (rc)
            return fmt_fail(r->why, rc, "cannot start worker thread: %s", shr_strerror(rc));
        r->nworkers++;
    }
    return 0;
}

/* The shards a tolerant open left closed, each named once, in the reader's last error: every
 * stream's in a mixture, each shard after its stream (with the stream's own on_error). */
static void note_unavailable(shr_reader *r)
{
    uint32_t streams = r->mx ? r->mx->plan.n : 1;
    size_t used = 0;
    for (uint32_t st = 0; st < streams; st++) {
        const fmt_dataset *ds = r->mx ? r->mx->ds[st] : r->ds;
        shr_on_error on_error = r->mx ? r->mx->on_error[st] : r->o.on_error;
        size_t n = fmt_dataset_unavailable(ds);
        const fmt_manifest *m = fmt_dataset_manifest(ds);
        for (size_t i = 0; n && i < m->nshards && used < sizeof r->err.text; i++) {
            const char *path, *why;
            if (fmt_dataset_shard_status(ds, i, &path, &why) == 0)
                continue;
            char stream[48] = "";
            if (r->mx)
                snprintf(stream, sizeof stream, "stream %" PRIu32 ": ", st);
            int k = snprintf(r->err.text + used, sizeof r->err.text - used, "%s%s%s: cannot "
                             "open (%s): its %" PRIu64 " samples are %s", used ? "; " : "",
                             stream, path, why, m->shards[i].samples,
                             on_error == SHR_ON_ERROR_SKIP ? "skipped" : "replaced");
            used += k > 0 ? (size_t)k : 0;
        }
    }
}

int shr_open_source(fmt_dataset **ds, const char *path, const char *cache, shr_access access,
                    shr_on_error on_error, char **dir, fmt_msg *msg)
{
    char *local = NULL;
    if (rmt_is_url(path)) {
        rmt_options ro;
        memset(&ro, 0, sizeof ro);
        ro.cache = cache;
        int rc = rmt_resolve(path, &ro, &local, NULL, msg);
        if (rc)
            return rc;
    }
    int rc = fmt_dataset_open_flags(ds, local ? local : path, (fmt_access)access,
                                    on_error != SHR_ON_ERROR_FAIL ? FMT_OPEN_TOLERANT : 0, msg);
    if (rc == 0 && dir) {
        *dir = local ? local : strdup(path);
        local = NULL;
        if (!*dir) {
            fmt_dataset_close(*ds);
            *ds = NULL;
            rc = fmt_fail(msg, ENOMEM, "out of memory");
        }
    }
    free(local);
    return rc;
}

int shr_open(shr_reader **out, const char *dir, const shr_options *opt, shr_msg *msg)
{
    return shr_open_with(out, dir, opt, NULL, msg);
}

int shr_open_with(shr_reader **out, const char *dir, const shr_options *opt, shr_mixture *mx,
                  fmt_msg *msg)
{
    if (!out || !dir) {
        shr_mixture_free(mx);
        return fmt_fail(msg, SHR_EINVAL, "no reader or directory given");
    }
    *out = NULL;
    shr_options o;
    int rc = shr_options_full(opt, &o, msg);
    if (!rc)
        rc = shr_check_options(&o, msg);
    if (rc) {
        if (mx)
            fmt_dataset_close(mx->ds[0]);
        shr_mixture_free(mx);
        return rc;
    }
    if (o.prefetch == 0)
        o.prefetch = o.threads + 2 > SHR_MAX_PREFETCH ? SHR_MAX_PREFETCH : o.threads + 2;

    shr_reader *r = calloc(1, sizeof *r);
    if (!r) {
        if (mx)
            fmt_dataset_close(mx->ds[0]);
        shr_mixture_free(mx);
        return fmt_fail(msg, ENOMEM, "out of memory");
    }
    /* the open's message: the helpers below write it (r->why), the caller gets it on failure */
    fmt_msg why = {{0}};
    r->why = &why;
    r->o = o;
    r->mx = mx;
    r->nslots = o.prefetch;
    int sync_ready = 0;
    fmt_msg src = {{0}};
    /* with on_error skip or substitute, a shard that cannot be opened is one more source of
     * samples that cannot be read, handled as those are (see "Read-time recovery") */
    if (mx)
        r->ds = mx->ds[0];      /* opened by shr_open_mixture */
    else if (rmt_is_url(dir) && (rc = shr_lazy_open(r, dir)) != 1)
        goto lazy;              /* the shards arrive as they are read (or the error) */
    else
        rc = shr_open_source(&r->ds, dir, o.cache, o.access, o.on_error, NULL, &src);
    if (rc) {
        fmt_fail(&why, rc, "cannot open dataset %s: %s", dir, fmt_reason(&src, rc));
        goto leave;
    }
    note_unavailable(r);
lazy:
    if (rc == 0 && mx)
        rc = shr_mixture_lazy(r);   /* its streams at URLs read as their shards arrive */
    if (rc)
        goto leave;
    r->recovers = !mx && o.on_error != SHR_ON_ERROR_FAIL;
    r->direct_shards = mx ? 0 : fmt_dataset_direct_shards(r->ds);
    for (uint32_t s = 0; mx && s < mx->plan.n; s++) {
        r->recovers |= mx->on_error[s] != SHR_ON_ERROR_FAIL;
        r->direct_shards += fmt_dataset_direct_shards(mx->ds[s]);
    }
    rc = set_geometry(r, dir);
    if (rc == 0 && mx)
        rc = shr_mixture_geometry(r, &why);
    if (rc)
        goto leave;
    rc = set_targets(r, dir);
    if (rc)
        goto leave;
    rc = set_mix(r, dir);
    if (rc)
        goto leave;
    rc = make_sampler(r);
    /* a dataset at a URL: the downloads start now, unless the open still reads something of
     * every sample (the sizes, from the shards' skeletons: fmt_dataset_open_lazy), which no
     * shard unloaded by the download thread may race: then just before the workers */
    int lazy_later = shr_lazy_later(r);
    if (rc == 0 && r->nlz && !lazy_later)
        rc = shr_lazy_start(r);
    if (rc)
        goto leave;
    uint64_t ring;
    if (__builtin_mul_overflow((uint64_t)r->batch_bytes, (uint64_t)r->nslots, &ring) ||
        ring > SIZE_MAX / 2) {
        rc = fmt_fail(r->why, SHR_EINVAL, "a ring of %" PRIu32 " batches of %zu bytes is too "
                      "large", r->nslots, r->batch_bytes);
        goto leave;
    }
    rc = make_ring(r);
    if (rc)
        goto leave;
    if (shr_ring_init(&r->ring, r->nslots, shr_fill_slot, r) != 0) {
        rc = ENOMEM;
        goto leave;
    }
    sync_ready = 1;
    /* Only a hint to the kernel's read-ahead (a failure changes no result). Sequential order
     * wants aggressive read-ahead. Random orders want none, except through a mapping: there
     * MADV_RANDOM makes every 4 KiB page fault a synchronous read of its own, and a 224x224
     * sample is 37 of them (measured cold: 8x slower than the default fault-around, which then
     * matches pread); so RANDOM is for mappings only where each sample fits in one page, the
     * case where fault-around would read mostly neighbours. pread reads a whole sample in one
     * request with or without read-ahead. */
    fmt_advice advice = FMT_ADVICE_SEQUENTIAL;
    if (o.order != SHR_ORDER_SEQUENTIAL)
        advice = o.access != SHR_ACCESS_MMAP || r->sample_max <= SHR_PAGE ? FMT_ADVICE_RANDOM
                                                                          : FMT_ADVICE_NORMAL;
    (void)fmt_dataset_advise(r->ds, advice);
    if (o.scale != SHR_SCALE_NONE) {
        rc = scale_setup(r, dir);
        if (rc)
            goto leave;
    }
    if (o.rrc) {
        rc = prewarm_tables(r);
        if (rc) {
            fmt_fail(r->why, rc, "%s: cannot prepare the resampler: %s", dir,
                     shr_strerror(rc));
            goto leave;
        }
    }
    if (lazy_later && (rc = shr_lazy_start(r)) != 0)
        goto leave;
    rc = start_workers(r);
leave:
    r->why = NULL;
    if (rc) {
        if (!why.text[0])
            fmt_fail(&why, rc, "cannot open a reader on %s: %s", dir, shr_strerror(rc));
        if (msg)
            *msg = why;
        if (sync_ready) {
            stop_workers(r);
            shr_ring_destroy(&r->ring);
        }
        free_reader(r);
        return rc;
    }
    *out = r;
    return 0;
}

void shr_close(shr_reader *r)
{
    if (!r)
        return;
    stop_workers(r);
    shr_ring_destroy(&r->ring);
    free_reader(r);
}

/* ---- consuming ---- */

int shr_next(shr_reader *r, const shr_batch **b)
{
    if (b)
        *b = NULL;
    if (!r)
        return SHR_EINVAL;
    if (!b)
        return fmt_fail(&r->err, SHR_EINVAL, "shr_next needs somewhere to put the batch");
    if (r->failed)
        return SHR_ESTATE;
    if (r->cursor == shr_sampler_batches_in(r->sampler, r->epoch)) {
        r->epoch++;
        r->cursor = 0;
        return SHR_EEND;
    }
    uint32_t si;
    uint64_t t0 = shr_now_ns();
    if (shr_ring_next(&r->ring, &si, NULL) != 0)
        return fmt_fail(&r->err, SHR_EINVAL, "all %" PRIu32 " batches of the ring are held: "
                        "release one before asking for the next", r->nslots);
    uint64_t t1 = shr_now_ns();
    SHR_ADD(r->c_wait_ns, t1 - t0);
    SHR_ADD(r->c_batches, 1);
    shr_tune_step(r, t1);
    shr_slot *slot = &r->slots[si];

    if (slot->rc) {
        r->failed = 1;
        r->err = slot->msg;
        return slot->rc;
    }
    r->cursor++;
    if (slot->b.nbad) {
        /* recovered samples: counted and reported, never hidden */
        uint32_t skipped = 0;
        for (uint32_t i = 0; i < slot->b.nbad; i++)
            skipped += slot->bad_pos[i] < 0;
        r->recovery.skipped += skipped;
        r->recovery.replaced += slot->b.nbad - skipped;
        r->err = slot->msg;
    }
    *b = &slot->b;
    return 0;
}

void shr_release(shr_reader *r, const shr_batch *b)
{
    if (!r || !b)
        return;
    /* b must be one of this reader's slots (shr_batch is a slot's first member) */
    uintptr_t p = (uintptr_t)b, lo = (uintptr_t)r->slots;
    if (p < lo || p >= lo + (uintptr_t)r->nslots * sizeof *r->slots ||
        (p - lo) % sizeof *r->slots != 0)
        return;
    /* a second release of the same batch is ignored (the ring finds the slot not held) */
    (void)shr_ring_release(&r->ring, (uint32_t)((p - lo) / sizeof *r->slots));
}
