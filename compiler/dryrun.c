/* dryrun.c - the build's fingerprint and its projections: shc_fingerprint (build.h), which
 * covers every option and input that reaches the bytes of the shards; the dry run, which lays out
 * the shards a build would write without writing them; and the warning when a fixed-size build
 * would be large or would not fit (dryrun.h).
 */
#include "dryrun.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <xxhash.h>

#include "backend.h"
#include "feed.h"
#include "fmt.h"
#include "image.h"
#include "part.h"
#include "raw.h"
#include "render.h"
#include "report.h"
#include "tsv.h"
#include "util.h"

/* ---- the fingerprint ---- */

uint64_t shc_fingerprint(const shc_build_opts *o, const fmt_inputs *in)
{
    XXH3_state_t *st = shc_hash_begin("shardc-build-1");
    if (!st)
        return 0;
    const shc_render_opts *r = &o->r;
    uint64_t v[] = {r->geom.mode, r->geom.fit, r->geom.width, r->geom.height, r->geom.short_side,
                    r->geom.max_side, r->channels, r->limits.max_side, r->limits.max_pixels,
                    r->max_file_bytes, o->shard_bytes, o->shard_samples, o->align, r->augment,
                    r->seed, r->geom.crop_w, r->geom.crop_h, (uint64_t)r->geom.filter,
                    (uint64_t)r->geom.shrink_on_load};
    XXH3_64bits_update(st, v, sizeof v);
    if (!in) {
        const char stag[] = "stream";
        XXH3_64bits_update(st, stag, sizeof stag);
    }
    if (o->compress.codec) {
        /* only when compressing, so that the fingerprints of other builds stay what they were */
        char spec[32];
        fmt_codec_format(&o->compress, spec, sizeof spec);
        shc_hash_str(st, spec);
    }
    if (o->jpeg_fraction > 0) {
        char spec[64];
        snprintf(spec, sizeof spec, "jpeg %.17g q%d", o->jpeg_fraction, o->quality);
        shc_hash_str(st, spec);
    }
    if (r->augment) {
        char spec[256];
        fmt_aug_format(&r->aug, spec, sizeof spec);
        shc_hash_str(st, spec);
    }
    if (o->target_hash) {
        /* only for detection builds, so that other fingerprints stay what they were */
        const char ttag[] = "targets";
        XXH3_64bits_update(st, ttag, sizeof ttag);
        XXH3_64bits_update(st, &o->target_hash, sizeof o->target_hash);
    }
    if (o->fields_hash) {
        const char ftag[] = "fields";
        XXH3_64bits_update(st, ftag, sizeof ftag);
        XXH3_64bits_update(st, &o->fields_hash, sizeof o->fields_hash);
    }
    if (in)
        shc_inputs_hash_items(st, in);
    return shc_hash_end(st);
}


/* ---- the dry run ---- */

/* Inputs rendered and encoded by a dry run for backends with w_sample_bytes. */
#define DRY_ENCODED_MAX 128

/* Render the input at pos and add, over its samples, what the backend would store
 * (w_sample_bytes) to *exact and its w_cost estimate to *est. Nothing is added when the input
 * cannot be rendered or encoded. */
static void dry_encode(const shc_build_opts *o, const fmt_inputs *in, size_t pos,
                       const uint8_t *data, size_t data_len, uint64_t first_index, fmt_resizer *rz,
                       uint64_t *exact, uint64_t *est)
{
    uint32_t nper = shc_render_count(&o->r);
    fmt_image *imgs = calloc(nper, sizeof *imgs);
    fmt_aug_params *params = calloc(nper, sizeof *params);
    if (!imgs || !params ||
        (data ? shc_render_mem(&o->r, data, data_len, pos, rz, imgs, params, NULL)
              : shc_render(&o->r, in->items[pos].path, pos, rz, imgs, params, NULL))) {
        free(imgs);
        free(params);
        return;
    }
    fmt_writer_opts wo = {.align = o->align, .quality = o->quality, .codec = o->compress.codec,
                          .level = o->compress.level, .jpeg_fraction = o->jpeg_fraction};
    uint64_t e = 0, c = 0;
    int ok = 1;
    for (uint32_t v = 0; v < nper; v++) {
        fmt_image *im = &imgs[v];
        uint8_t rec[FMT_AUG_RECORD_MAX] = {0};
        wo.first_index = first_index + v;   /* the sample's dataset index (the mixed mode's pick) */
        fmt_sample_meta m = {.height = im->height, .width = im->width, .channels = im->channels,
                             .label = in->items[pos].label, .source = pos,
                             .aux = o->r.augment ? rec : NULL,
                             .aux_len = o->r.augment ? fmt_aug_record_size(&o->r.aug) : 0};
        uint64_t len = (uint64_t)im->width * im->height * im->channels;
        m.hash = fmt_hash64(im->pixels, (size_t)len);
        uint64_t b = o->backend->w_sample_bytes(&wo, &m, im->pixels);
        ok = ok && b != 0;
        e += b;
        c += o->backend->w_cost(len, m.aux_len, o->align);
        fmt_image_free(im);
    }
    if (ok) {
        *exact += e;
        *est += c;
    }
    free(imgs);
    free(params);
}

/* The projection: every input is probed (header only) for the sample size the geometry gives
 * it, and the shards are laid out as the writer would, input by input. Backends whose stored
 * size depends on the pixels (w_sample_bytes: image files, compressed payloads) get their
 * w_cost scaled by exact / estimated bytes over up to DRY_ENCODED_MAX inputs, evenly spread,
 * that are really rendered and encoded. */
int shc_dry_run(const shc_build_opts *o, const shc_build_cb *cb, const fmt_inputs *in,
                const shc_annot *annot, uint64_t lo, uint64_t hi)
{
    uint64_t samples = 0, bad = 0, src_bytes = 0, bytes = 0, shards = 0, cur = 0, cur_n = 0;
    uint32_t align = o->align;
    uint32_t nper = shc_render_count(&o->r);
    uint64_t *cost = calloc(in->n ? in->n : 1, sizeof *cost);
    shc_feed *feed = NULL;
    if (!cost || (in->narchives && shc_feed_start(in, lo, hi, o->r.max_file_bytes,
                                                  o->archive_buffer, &feed) != 0)) {
        free(cost);
        shc_say(cb, "out of memory");
        return ENOMEM;
    }
    for (size_t i = (size_t)lo; i < hi; i++) {
        uint8_t *buf = NULL;
        size_t len = 0;
        fmt_image_info info;
        fmt_geom_plan plan;
        int rc = in->items[i].archive ? shc_feed_take(feed, i, &buf, &len, NULL)
                                      : fmt_read_file(in->items[i].path,
                                                      (size_t)o->r.max_file_bytes, &buf, &len);
        if (rc == 0)
            rc = fmt_image_probe(buf, len, &info, NULL);
        free(buf);
        if (rc == 0)
            rc = fmt_geom_plan_for(&o->r.geom, info.width, info.height, &plan);
        if (rc) {
            bad++;
            continue;
        }
        src_bytes += len;
        /* a target record: as many boxes as annotated (the geometry may drop some) */
        uint32_t aux = o->r.augment ? fmt_aug_record_size(&o->r.aug)
                       : annot ? shc_annot_record_bytes(annot, i) : 0;
        cost[i] = nper * o->backend->w_cost((uint64_t)plan.out_w * plan.out_h * o->r.channels,
                                            aux, align);
    }
    shc_feed_free(feed);
    feed = NULL;
    double scale = 1.0;
    uint64_t good = hi - lo - bad, encoded = 0;
    /* raw stores plain pixels exactly as w_cost says: only compressed raw needs encoding */
    int measure = o->backend->w_sample_bytes &&
                  (strcmp(o->backend->name, "raw") != 0 || o->compress.codec ||
                   o->jpeg_fraction > 0);
    if (measure && good) {
        fmt_resizer *rz = NULL;
        uint64_t exact = 0, est = 0, step = (good + DRY_ENCODED_MAX - 1) / DRY_ENCODED_MAX, k = 0;
        /* archive members are read again, in one more walk of their archives */
        if (fmt_resizer_create(&rz) == 0 &&
            (!in->narchives || shc_feed_start(in, lo, hi, o->r.max_file_bytes,
                                              o->archive_buffer, &feed) == 0)) {
            for (size_t i = (size_t)lo; i < hi; i++) {
                uint8_t *data = NULL;
                size_t len = 0;
                int took = in->items[i].archive &&
                           shc_feed_take(feed, i, &data, &len, NULL) == 0;
                if (cost[i] && k++ % step == 0 && (took || !in->items[i].archive)) {
                    dry_encode(o, in, i, data, len, (k - 1) * nper, rz, &exact, &est);
                    encoded++;
                }
                free(data);
            }
            shc_feed_free(feed);
        }
        fmt_resizer_free(rz);
        if (est)
            scale = (double)exact / (double)est;
    }
    uint64_t header = o->backend->w_base ? o->backend->w_base()
                                         : align ? align : FMT_RAW_DEFAULT_ALIGN;
    for (size_t i = (size_t)lo; i < hi; i++) {
        if (!cost[i])
            continue;
        /* as the writer does: whole inputs per shard, bounded by the size so far (real bytes)
         * plus the next input's w_cost (an estimate) */
        if (cur_n == 0 || cur + cost[i] > o->shard_bytes ||
            (o->shard_samples && cur_n + nper > o->shard_samples)) {
            if (cur_n)
                bytes += cur;
            shards++;
            cur = header;
            cur_n = 0;
        }
        cur += (uint64_t)((double)cost[i] * scale + 0.5);
        cur_n += nper;
        samples += nper;
    }
    bytes += cur_n ? cur : 0;
    free(cost);
    uint64_t shard_bytes = bytes;
    /* the files next to the shards: inputs.tsv exactly, rejects.tsv and the manifest roughly */
    bytes += shc_inputs_tsv_bytes(in, lo, hi) + 1024 + 128 * shards + 16 * in->nclasses;
    if (cb && cb->projection) {
        shc_projection p = {.inputs = (size_t)(hi - lo), .classes = in->nclasses,
                            .skipped = in->nskipped, .samples = samples, .unreadable = bad,
                            .bytes = bytes, .shards = shards, .shard_bytes = shard_bytes,
                            .input_bytes = src_bytes, .encoded = encoded, .scale = scale};
        cb->projection(cb->ctx, &p);
    }
    return 0;
}

/* For fixed-size geometry the output size is known up front: warn when it is large or does not
 * fit on the output filesystem. */
void shc_warn_projection(const shc_build_opts *o, const shc_build_cb *cb, uint64_t ninputs)
{
    if (o->r.geom.mode != FMT_GEOM_SIZE)
        return;
    uint32_t align = o->align;   /* 0: the backend's own layout (raw: packed) */
    uint64_t per = o->backend->w_cost((uint64_t)o->r.geom.width * o->r.geom.height * o->r.channels,
                                       o->r.augment ? fmt_aug_record_size(&o->r.aug) : 0, align);
    uint64_t total = per * ninputs * shc_render_count(&o->r);
    struct statvfs vfs;
    char b1[32], b2[32];
    if (statvfs(o->out, &vfs) == 0) {
        uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
        if (total > avail)
            shc_say(cb, "warning: projected output %s exceeds the %s free in %s",
                    shc_human_size(total, b1, sizeof b1), shc_human_size(avail, b2, sizeof b2),
                    o->out);
        else if (total > (64ull << 30))
            shc_say(cb, "note: projected output %s (uncompressed pixels)",
                    shc_human_size(total, b1, sizeof b1));
    }
}
