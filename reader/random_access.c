/* random_access.c - shr_dataset (shardread.h, "Single samples"): a dataset's samples read one at
 * a time by index, with no reader, no threads and no transform; its info, classes and targets.
 * A dataset at a URL with a cache limit is read on demand through remote/remote.h's rmt_lazy
 * session: each call holds the shard of its sample (downloaded first if the cache lacks it)
 * while it reads, and the session's download thread evicts shards no call holds.
 * Errors go to the caller's shr_msg, as shr_open's do.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "reader.h"

struct shr_dataset {
    fmt_dataset *ds;
    int verify;                 /* SHR_DATASET_VERIFY */
    char *dir;                  /* shr_dataset_dir */
    rmt_lazy *lazy;             /* read on demand (shr_dataset_open_remote with a limit) */
    /* (initialised by every open) lazy: serialises shard loads, unloads (evictions) and
     * metadata read from a skeleton, so that no call reads a shard's memory while it is being
     * opened or closed */
    pthread_mutex_t mu;
};

int shr_dataset_open(shr_dataset **out, const char *dir, shr_access access, shr_msg *msg)
{
    return shr_dataset_open_flags(out, dir, access, 0, msg);
}

/* the checks every open makes of its arguments */
static int check_args(shr_dataset **out, const char *dir, shr_access access, unsigned flags,
                      fmt_msg *msg)
{
    if (!out || !dir)
        return fmt_fail(msg, SHR_EINVAL, "no dataset or directory given");
    *out = NULL;
    if ((unsigned)access > SHR_ACCESS_DIRECT)
        return fmt_fail(msg, SHR_EINVAL, "unknown access mode %d", (int)access);
    if (flags & ~SHR_DATASET_VERIFY)
        return fmt_fail(msg, SHR_EINVAL, "unknown dataset flags 0x%x", flags);
    return 0;
}

int shr_dataset_open_flags(shr_dataset **out, const char *dir, shr_access access,
                           unsigned flags, shr_msg *msg)
{
    int rc = check_args(out, dir, access, flags, msg);
    if (rc)
        return rc;
    if (rmt_is_url(dir))
        return shr_dataset_open_url(out, dir, access, flags, msg);
    shr_dataset *d = calloc(1, sizeof *d);
    if (!d || !(d->dir = strdup(dir))) {
        free(d);
        return fmt_fail(msg, ENOMEM, "out of memory");
    }
    pthread_mutex_init(&d->mu, NULL);
    fmt_msg why = {{0}};
    rc = fmt_dataset_open_ex(&d->ds, dir, (fmt_access)access, &why);
    if (rc) {
        shr_dataset_close(d);
        return fmt_fail(msg, rc, "cannot open dataset %s: %s", dir, fmt_reason(&why, rc));
    }
    d->verify = (flags & SHR_DATASET_VERIFY) != 0;
    *out = d;
    return 0;
}

/* ---- a dataset at a URL read on demand ---- */

/* the session's window: none (a shard is fetched only when a call waits for it) */
static size_t plan_none(void *ctx, uint64_t b, size_t *out)
{
    (void)ctx;
    (void)b;
    (void)out;
    return 0;
}

/* the session evicts shard k (no call holds it): closed first */
static void unload_shard(void *ctx, size_t k)
{
    shr_dataset *d = ctx;
    pthread_mutex_lock(&d->mu);
    fmt_dataset_shard_unload(d->ds, k, 0, NULL);
    pthread_mutex_unlock(&d->mu);
}

/* the parts of shards the open needs before they arrive (fmt_dataset_open_lazy's source) */
static int open_lazy(shr_dataset *d, const char *url, const char *cache, uint64_t limit,
                     shr_access access, fmt_msg *msg)
{
    rmt_options ro;
    memset(&ro, 0, sizeof ro);
    ro.cache = cache;
    uint8_t *man = NULL;
    size_t len = 0;
    int rc = rmt_lazy_open(&d->lazy, url, &ro, &d->dir, &man, &len, msg);
    if (rc)
        return rc;
    fmt_lazy_source src = rmt_lazy_source(d->lazy);
    rc = fmt_dataset_open_lazy(&d->ds, d->dir, (const char *)man, len, (fmt_access)access, 0,
                               &src, msg);
    free(man);
    if (rc == FMT_EUNSUPPORTED) {
        fmt_msg why = *msg;
        return fmt_fail(msg, rc, "%s (needed by cache_limit)", fmt_reason(&why, rc));
    }
    if (rc)
        return rc;
    uint64_t least = rmt_lazy_minimum(d->lazy, 1);
    if (least > limit)
        return fmt_fail(msg, SHR_EINVAL, "cache_limit %" PRIu64 " bytes is below the %" PRIu64
                        " bytes this Dataset needs at once (its largest shard)", limit, least);
    rmt_lazy_hooks h = {.plan = plan_none, .unload = unload_shard, .ctx = d};
    return rmt_lazy_start(d->lazy, &h, limit, 1, 1, 1, msg);
}

int shr_dataset_open_remote(shr_dataset **out, const char *url, const char *cache,
                            uint64_t cache_limit, shr_access access, unsigned flags,
                            shr_msg *msg)
{
    int rc = check_args(out, url, access, flags, msg);
    if (rc)
        return rc;
    if (!rmt_is_url(url))
        return fmt_fail(msg, SHR_EINVAL, "%s is not a URL (s3://, http://, https://)",
                        url);
    if (!cache_limit)
        return shr_dataset_open_url_cache(out, url, cache, access, flags, msg);
    shr_dataset *d = calloc(1, sizeof *d);
    if (!d)
        return fmt_fail(msg, ENOMEM, "out of memory");
    pthread_mutex_init(&d->mu, NULL);
    fmt_msg why = {{0}};
    rc = open_lazy(d, url, cache, cache_limit, access, &why);
    if (rc) {
        fmt_fail(msg, rc, "cannot open dataset %s: %s", url, fmt_reason(&why, rc));
        shr_dataset_close(d);
        return rc;
    }
    d->verify = (flags & SHR_DATASET_VERIFY) != 0;
    *out = d;
    return 0;
}

int shr_dataset_hold(const shr_dataset *cd, uint64_t idx, shr_msg *msg)
{
    shr_dataset *d = (shr_dataset *)cd;     /* (the caller's handle; the lock is ours) */
    if (!d)
        return fmt_fail(msg, SHR_EINVAL, "no dataset given");
    /* (a local dataset's shards are all open: only the range is checked, without a search) */
    long s = idx >= fmt_dataset_count(d->ds) ? -1
             : d->lazy ? fmt_manifest_find_shard(fmt_dataset_manifest(d->ds), idx) : 0;
    if (s < 0)
        return fmt_fail(msg, SHR_EINVAL, "sample %" PRIu64 " is out of range (%" PRIu64
                        " samples)", idx, fmt_dataset_count(d->ds));
    if (!d->lazy)
        return 0;
    fmt_msg why = {{0}};
    int rc = rmt_lazy_acquire(d->lazy, (size_t)s, RMT_WAIT, &why);
    if (rc)
        return fmt_fail(msg, rc, "%s", fmt_reason(&why, rc));
    pthread_mutex_lock(&d->mu);
    rc = fmt_dataset_shard_load(d->ds, (size_t)s, &why);
    pthread_mutex_unlock(&d->mu);
    if (rc) {
        rmt_lazy_release(d->lazy, (size_t)s);
        return fmt_fail(msg, rc, "%s", fmt_reason(&why, rc));
    }
    return 0;
}

int shr_dataset_meta_resident(const shr_dataset *d)
{
    return d && (!d->lazy || fmt_dataset_skeletons(d->ds));
}

void shr_dataset_unhold(const shr_dataset *d, uint64_t idx)
{
    if (!d || !d->lazy)
        return;
    long s = fmt_manifest_find_shard(fmt_dataset_manifest(d->ds), idx);
    if (s >= 0)
        rmt_lazy_release(d->lazy, (size_t)s);
}

/* What the public calls below hold around their work: the shard of a sample in range, of a
 * dataset read on demand (*held set; an index out of range is left to the call to report). */
static int hold_for(const shr_dataset *d, uint64_t idx, int *held, fmt_msg *msg)
{
    *held = 0;
    if (!d || !d->lazy || idx >= fmt_dataset_count(d->ds))
        return 0;
    int rc = shr_dataset_hold(d, idx, msg);
    *held = rc == 0;
    return rc;
}

/* Around a call that reads only a sample's metadata or aux record (its target, its fields): a
 * dataset read on demand whose open kept the shards' skeletons answers from them, under the
 * lock (*held 2; the skeleton's memory lasts as long as the dataset), and downloads nothing;
 * any other holds the sample's shard as hold_for does. */
static int hold_meta(const shr_dataset *d, uint64_t idx, int *held, fmt_msg *msg)
{
    if (d && d->lazy && shr_dataset_meta_resident(d)) {
        pthread_mutex_lock(&((shr_dataset *)d)->mu);
        *held = 2;
        return 0;
    }
    return hold_for(d, idx, held, msg);
}

static void unhold_for(const shr_dataset *d, uint64_t idx, int held)
{
    if (held == 2)
        pthread_mutex_unlock(&((shr_dataset *)d)->mu);
    else if (held)
        shr_dataset_unhold(d, idx);
}

const char *shr_dataset_dir(const shr_dataset *d)
{
    return d ? d->dir : NULL;
}

void shr_dataset_close(shr_dataset *d)
{
    if (!d)
        return;
    rmt_lazy_close(d->lazy);    /* first: its thread unloads shards of d->ds */
    fmt_dataset_close(d->ds);
    pthread_mutex_destroy(&d->mu);
    free(d->dir);
    free(d);
}

void shr_dataset_get_info(const shr_dataset *d, shr_dataset_info *info)
{
    const fmt_manifest *m = fmt_dataset_manifest(d->ds);
    memset(info, 0, sizeof *info);
    info->format = fmt_dataset_backend(d->ds);
    info->tool = m->tool ? m->tool : "";
    info->samples = m->samples;
    info->inputs = m->inputs;
    info->rejects = m->rejects;
    info->classes = (uint32_t)m->nclasses;
    info->channels = m->channels;
    info->width = m->sample_width;
    info->height = m->sample_height;
    info->geom_mode = fmt_geom_mode_name(m->geom.mode);
    info->geom_fit = fmt_fit_name(m->geom.fit);
    info->geom_width = m->geom.width;
    info->geom_height = m->geom.height;
    info->geom_short_side = m->geom.short_side;
    info->geom_max_side = m->geom.max_side;
    for (int c = 0; c < 3; c++) {
        info->mean[c] = m->mean[c];
        info->std[c] = m->std[c];
    }
    info->augment = m->augment;
    info->aug_spec = m->aug_spec ? m->aug_spec : "";
    info->seed = m->seed;
    info->targets = m->targets;
}

uint32_t shr_dataset_shard_count(const shr_dataset *d)
{
    return d ? (uint32_t)fmt_dataset_manifest(d->ds)->nshards : 0;
}

int shr_dataset_shard(const shr_dataset *d, uint32_t k, shr_dataset_shard_info *s)
{
    const fmt_manifest *m = d ? fmt_dataset_manifest(d->ds) : NULL;
    if (!m || !s || k >= m->nshards)
        return SHR_EINVAL;
    s->file = m->shards[k].file;
    s->first = m->shards[k].first;
    s->samples = m->shards[k].samples;
    s->bytes = m->shards[k].bytes;
    return 0;
}

void shr_dataset_transform(const shr_dataset *d, char *buf, size_t len)
{
    if (buf && len)
        fmt_geom_chain(&fmt_dataset_manifest(d->ds)->geom, buf, len);
}

void shr_dataset_get_targets(const shr_dataset *d, shr_dataset_targets *t)
{
    const fmt_manifest *m = fmt_dataset_manifest(d->ds);
    memset(t, 0, sizeof *t);
    if (!m->targets)
        return;
    t->categories = (uint32_t)m->ncategories;
    t->record_version = m->target_ext ? 2 : 1;
    t->ignore_index = m->ignore_index;
    t->num_keypoints = m->num_keypoints;
    t->edges = m->nskeleton;
    t->skeleton = m->nskeleton ? m->skeleton : NULL;
}

const char *shr_dataset_class(const shr_dataset *d, uint32_t label)
{
    const fmt_manifest *m = fmt_dataset_manifest(d->ds);
    return label < m->nclasses ? m->classes[label] : NULL;
}

static void sample_meta(const fmt_sample *f, shr_sample *s)
{
    s->label = f->label;
    s->height = f->height;
    s->width = f->width;
    s->channels = f->channels;
    s->source = f->source;
    s->bytes = f->length;
}

int shr_dataset_sample(const shr_dataset *d, uint64_t idx, shr_sample *s, shr_msg *msg)
{
    fmt_sample f;
    int rc;
    if (d->lazy && fmt_dataset_skeletons(d->ds)) {
        /* a loaded shard answers, else its skeleton: no download (the lock keeps the shard from
         * being loaded or evicted meanwhile) */
        shr_dataset *dw = (shr_dataset *)d;
        pthread_mutex_lock(&dw->mu);
        rc = fmt_dataset_get(d->ds, idx, &f);
        pthread_mutex_unlock(&dw->mu);
    } else {
        int held;
        if ((rc = hold_for(d, idx, &held, msg)) != 0)
            return rc;
        rc = fmt_dataset_get(d->ds, idx, &f);
        unhold_for(d, idx, held);
    }
    if (rc)
        return fmt_fail(msg, SHR_EINVAL, "sample %" PRIu64 " is out of range (%" PRIu64
                        " samples)", idx, fmt_dataset_count(d->ds));
    sample_meta(&f, s);
    return 0;
}

static int read_sample(const shr_dataset *d, uint64_t idx, void *dst, size_t len, shr_sample *meta,
                       fmt_msg *msg)
{
    fmt_sample f;
    if (fmt_dataset_get(d->ds, idx, &f) != 0)
        return fmt_fail(msg, SHR_EINVAL, "sample %" PRIu64 " is out of range (%" PRIu64
                        " samples)", idx, fmt_dataset_count(d->ds));
    if (f.length > len)
        return fmt_fail(msg, SHR_EINVAL, "sample %" PRIu64 " has %" PRIu64 " bytes, the "
                        "buffer %zu", idx, f.length, len);
    int rc;
    if (f.pixels && fmt_dataset_access(d->ds) == FMT_ACCESS_MMAP) {
        memcpy(dst, f.pixels, f.length);
        rc = 0;
    } else {
        rc = fmt_dataset_read(d->ds, idx, dst, NULL);
    }
    if (rc)
        return fmt_fail(msg, rc, "%s: cannot read sample %" PRIu64 ": %s",
                        fmt_dataset_sample_file(d->ds, idx), idx, shr_strerror(rc));
    if (d->verify && fmt_hash64(dst, (size_t)f.length) != f.hash)
        return fmt_fail(msg, FMT_EHASH, "%s: sample %" PRIu64 ": pixels do not match "
                        "their hash (damaged or changed since the build)",
                        fmt_dataset_sample_file(d->ds, idx), idx);
    if (meta)
        sample_meta(&f, meta);
    return 0;
}

int shr_dataset_read(const shr_dataset *d, uint64_t idx, void *dst, size_t len, shr_sample *meta,
                     shr_msg *msg)
{
    int held, rc = hold_for(d, idx, &held, msg);
    if (rc)
        return rc;
    rc = read_sample(d, idx, dst, len, meta, msg);
    unhold_for(d, idx, held);
    return rc;
}

/* Sample idx's stored target into *f, for shr_dataset_target and shr_dataset_segm: 0, or an
 * error with msg saying which (no targets, out of range, unreadable). */
static int stored_target(const shr_dataset *d, uint64_t idx, fmt_target *f, fmt_msg *msg)
{
    if (!fmt_dataset_manifest(d->ds)->targets)
        return fmt_fail(msg, SHR_EINVAL, "the dataset has no targets (not a detection "
                        "dataset)");
    if (idx >= fmt_dataset_count(d->ds))
        return fmt_fail(msg, SHR_EINVAL, "sample %" PRIu64 " is out of range (%" PRIu64
                        " samples)", idx, fmt_dataset_count(d->ds));
    fmt_msg m = {{0}};
    int rc = fmt_dataset_target(d->ds, idx, f, &m);
    if (rc)
        return fmt_fail(msg, rc, "%s: sample %" PRIu64 ": cannot read its target: %s",
                        fmt_dataset_sample_file(d->ds, idx), idx, fmt_reason(&m, rc));
    return 0;
}

static int target_of(const shr_dataset *d, uint64_t idx, shr_target *t, fmt_msg *msg)
{
    if (!d || !t)
        return fmt_fail(msg, SHR_EINVAL, "no dataset or target given");
    fmt_target f;
    int rc = stored_target(d, idx, &f, msg);
    if (rc)
        return rc;
    memset(t, 0, sizeof *t);
    t->count = f.count;
    t->dropped = f.dropped;
    t->image_id = f.image_id;
    t->orig_width = f.orig_width;
    t->orig_height = f.orig_height;
    t->boxes = f.boxes;
    t->labels = f.labels;
    t->area = f.area;
    t->iscrowd = f.iscrowd;
    return 0;
}

int shr_dataset_target(const shr_dataset *d, uint64_t idx, shr_target *t, shr_msg *msg)
{
    int held, rc = hold_meta(d, idx, &held, msg);
    if (rc)
        return rc;
    rc = target_of(d, idx, t, msg);
    unhold_for(d, idx, held);
    return rc;
}

static int segm_of(const shr_dataset *d, uint64_t idx, uint32_t *num_keypoints,
                   const float **keypoints, int *has_masks, uint32_t *width, uint32_t *height,
                   uint8_t *masks, size_t cap, fmt_msg *msg)
{
    if (!d)
        return fmt_fail(msg, SHR_EINVAL, "no dataset given");
    fmt_target f;
    int rc = stored_target(d, idx, &f, msg);
    if (rc)
        return rc;
    size_t npix = (size_t)f.map_width * f.map_height;
    if (num_keypoints)
        *num_keypoints = f.num_keypoints;
    if (keypoints)
        *keypoints = f.keypoints;
    if (has_masks)
        *has_masks = (f.ext & FMT_TARGET_EXT_MASKS) != 0;
    if (width)
        *width = f.map_width;
    if (height)
        *height = f.map_height;
    if (masks && (f.ext & FMT_TARGET_EXT_MASKS)) {
        if (cap < npix * f.count)
            return fmt_fail(msg, SHR_EINVAL, "%zu bytes for %" PRIu32 " masks of %"
                            PRIu32 "x%" PRIu32, cap, f.count, f.map_width, f.map_height);
        for (uint32_t i = 0; i < f.count; i++)
            fmt_target_mask(&f, i, masks + npix * i);
    }
    return 0;
}

int shr_dataset_segm(const shr_dataset *d, uint64_t idx, uint32_t *num_keypoints,
                     const float **keypoints, int *has_masks, uint32_t *width, uint32_t *height,
                     uint8_t *masks, size_t cap, shr_msg *msg)
{
    int held, rc = hold_meta(d, idx, &held, msg);
    if (rc)
        return rc;
    rc = segm_of(d, idx, num_keypoints, keypoints, has_masks, width, height, masks, cap, msg);
    unhold_for(d, idx, held);
    return rc;
}

int shr_dataset_has_label_maps(const shr_dataset *d)
{
    return d && (fmt_dataset_manifest(d->ds)->target_ext & FMT_TARGET_EXT_MAP) != 0;
}

static int label_map_of(const shr_dataset *d, uint64_t idx, uint32_t *width,
                        uint32_t *height, uint32_t *max_value, void *out, size_t cap, int elem,
                        fmt_msg *msg)
{
    if (!d)
        return fmt_fail(msg, SHR_EINVAL, "no dataset given");
    if (!(fmt_dataset_manifest(d->ds)->target_ext & FMT_TARGET_EXT_MAP))
        return fmt_fail(msg, SHR_EINVAL, "the dataset has no label maps (not built "
                        "with shardc build --masks)");
    if (out && elem != 1 && elem != 2 && elem != 8)
        return fmt_fail(msg, SHR_EINVAL, "a label map value takes 1, 2 or 8 bytes, "
                        "not %d", elem);
    fmt_target f;
    int rc = stored_target(d, idx, &f, msg);
    if (rc)
        return rc;
    if (width)
        *width = f.map_width;
    if (height)
        *height = f.map_height;
    if (max_value)
        *max_value = f.map_max;
    if (!out)
        return 0;
    size_t need = (size_t)f.map_width * f.map_height * (size_t)elem;
    if (cap < need)
        return fmt_fail(msg, SHR_EINVAL, "%zu bytes for a %" PRIu32 "x%" PRIu32
                        " label map of %d-byte values", cap, f.map_width, f.map_height, elem);
    if (elem == 1 && f.map_max > 255)
        return fmt_fail(msg, SHR_EINVAL, "%s: sample %" PRIu64 ": its label map has "
                        "value %" PRIu32 ", above 255: read it with 2- or 8-byte values",
                        fmt_dataset_sample_file(d->ds, idx), idx, f.map_max);
    if (fmt_target_label_map(&f, out, elem) != 0)
        return fmt_fail(msg, SHR_EINVAL, "%s: sample %" PRIu64 ": its label map "
                        "cannot be decoded", fmt_dataset_sample_file(d->ds, idx), idx);
    return 0;
}

int shr_dataset_label_map(const shr_dataset *d, uint64_t idx, uint32_t *width, uint32_t *height,
                          uint32_t *max_value, void *out, size_t cap, int elem, shr_msg *msg)
{
    int held, rc = hold_meta(d, idx, &held, msg);
    if (rc)
        return rc;
    rc = label_map_of(d, idx, width, height, max_value, out, cap, elem, msg);
    unhold_for(d, idx, held);
    return rc;
}

int shr_dataset_field_def(const shr_dataset *d, uint32_t k, const char **name, uint32_t *type,
                          uint32_t *count)
{
    const fmt_manifest *m = d ? fmt_dataset_manifest(d->ds) : NULL;
    if (!m || k >= m->nfields)
        return SHR_EINVAL;
    if (name)
        *name = m->fields[k].name;
    if (type)
        *type = m->fields[k].type;
    if (count)
        *count = m->fields[k].count;
    return 0;
}

static int fields_of(const shr_dataset *d, uint64_t idx, shr_field *out, uint32_t cap,
                     fmt_msg *msg)
{
    if (!d || !out)
        return fmt_fail(msg, SHR_EINVAL, "no dataset or fields given");
    const fmt_manifest *m = fmt_dataset_manifest(d->ds);
    if (!m->nfields)
        return fmt_fail(msg, SHR_EINVAL, "the dataset has no fields");
    if (cap < m->nfields)
        return fmt_fail(msg, SHR_EINVAL, "room for %" PRIu32 " fields, the dataset has "
                        "%zu", cap, m->nfields);
    if (idx >= fmt_dataset_count(d->ds))
        return fmt_fail(msg, SHR_EINVAL, "sample %" PRIu64 " is out of range (%" PRIu64
                        " samples)", idx, fmt_dataset_count(d->ds));
    const uint8_t *rec;
    size_t len;
    fmt_field_value v[FMT_FIELDS_MAX];
    size_t n = 0;
    fmt_msg why = {{0}};
    int rc = fmt_dataset_fields_record(d->ds, idx, &rec, &len, &why);
    if (rc == 0)
        rc = fmt_fields_view(rec, len, v, FMT_FIELDS_MAX, &n, &why);
    if (rc)
        return fmt_fail(msg, rc, "%s: sample %" PRIu64 ": cannot read its fields: %s",
                        fmt_dataset_sample_file(d->ds, idx), idx, fmt_reason(&why, rc));
    for (size_t i = 0; i < n && i < cap; i++)
        out[i] = (shr_field){.type = v[i].type, .count = v[i].count, .data = v[i].data};
    return 0;
}

int shr_dataset_fields(const shr_dataset *d, uint64_t idx, shr_field *out, uint32_t cap,
                       shr_msg *msg)
{
    int held, rc = hold_meta(d, idx, &held, msg);
    if (rc)
        return rc;
    rc = fields_of(d, idx, out, cap, msg);
    unhold_for(d, idx, held);
    return rc;
}

/* shardread.h: the manifest alone */
int shr_manifest_peek(const char *dir, shr_manifest_summary *s, shr_msg *msg)
{
    if (!dir || !s)
        return fmt_fail(msg, SHR_EINVAL, "no dataset directory or summary given");
    memset(s, 0, sizeof *s);
    fmt_manifest m;
    int rc = fmt_manifest_read(dir, &m, msg);
    if (rc)
        return rc;
    snprintf(s->format, sizeof s->format, "%s", m.backend);
    s->samples = m.samples;
    s->channels = m.channels;
    s->width = m.sample_width;
    s->height = m.sample_height;
    fmt_manifest_free(&m);
    return 0;
}

/* shardread.h: a sample's pixels in the mapping, where they are there as stored */
int shr_dataset_pixels(const shr_dataset *d, uint64_t idx, const void **px, uint64_t *len,
                       shr_msg *msg)
{
    if (px)
        *px = NULL;
    if (len)
        *len = 0;
    if (!d || !px || !len)
        return fmt_fail(msg, SHR_EINVAL, "no dataset or answer given");
    if (d->lazy)
        return fmt_fail(msg, SHR_EUNSUPPORTED, "%s is read on demand: its pixels are not mapped",
                        d->dir);
    fmt_sample s;
    int rc = fmt_dataset_get(d->ds, idx, &s);
    if (rc == FMT_EINVAL)
        return fmt_fail(msg, SHR_EINVAL, "sample %" PRIu64 ": no such sample (%" PRIu64
                        " samples)", idx, fmt_dataset_manifest(d->ds)->samples);
    if (rc)
        return fmt_fail(msg, rc, "sample %" PRIu64 ": %s", idx, fmt_strerror(rc));
    if (!s.pixels)
        return fmt_fail(msg, SHR_EUNSUPPORTED, "sample %" PRIu64 ": the %s shards do not map "
                        "its pixels as stored (read it with shr_dataset_read)", idx,
                        fmt_dataset_backend(d->ds));
    *px = s.pixels;
    *len = s.length;
    return 0;
}
