/* record.c - what a finished build records about itself: the manifest's fields, the build options
 * it keeps as JSON, and the check that what it staged opens as a reader opens it. */
#include "record.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "fields.h"
#include "part.h"
#include "stream.h"

char *shc_build_options_json(const shc_build_opts *o)
{
    char *s, codec[32];
    fmt_codec_format(&o->compress, codec, sizeof codec);
    int n = asprintf(&s,
                     "{\"channels\": %u, \"max_side_limit\": %u, \"max_pixels\": %" PRIu64
                     ", \"max_file_bytes\": %" PRIu64 ", \"shard_bytes\": %" PRIu64
                     ", \"shard_samples\": %" PRIu64 ", \"align\": %u, \"compress\": \"%s\""
                     ", \"jpeg_fraction\": %.17g, \"quality\": %d, \"source\": \"%s\"}",
                     o->r.channels, o->r.limits.max_side, o->r.limits.max_pixels,
                     o->r.max_file_bytes,
                     o->shard_bytes, o->shard_samples, o->align, codec, o->jpeg_fraction,
                     o->quality, o->stream ? "stream" : o->coco ? "coco" : o->yolo ? "yolo"
                     : o->masks ? "masks" :
                     o->list ? "list" : "folders");
    return n < 0 ? NULL : s;
}

int shc_check_staged(const char *dir, uint64_t *boxes, uint64_t *dropped, fmt_msg *msg)
{
    fmt_dataset *d = NULL;
    *boxes = *dropped = 0;
    int rc = fmt_dataset_open_flags(&d, dir, FMT_ACCESS_PREAD, FMT_OPEN_STAGED, msg);
    int targets = rc == 0 && fmt_dataset_manifest(d)->targets;
    for (uint64_t i = 0; targets && rc == 0 && i < fmt_dataset_count(d); i++) {
        fmt_target t;
        if ((rc = fmt_dataset_target(d, i, &t, msg)) == 0) {
            *boxes += t.count;
            *dropped += t.dropped;
        }
    }
    fmt_dataset_close(d);
    return rc;
}

int shc_count_shard_boxes(const fmt_backend *be, const char *dir, const char *name, int pairs,
                          uint64_t *boxes, uint64_t *dropped, fmt_msg *msg)
{
    char *path = fmt_path_join(dir, name, "");
    void *s = NULL;
    int rc = path ? be->r_open(&s, dir, path, FMT_ACCESS_MMAP, msg) : ENOMEM;
    const fmt_shard_info *h = rc ? NULL : be->r_info(s);
    uint64_t *copy = NULL;      /* a record's aligned copy, as fmt_target_view takes it */
    size_t cap = 0;
    for (uint64_t i = 0; h && rc == 0 && i < h->samples; i++) {
        fmt_sample e;
        const uint8_t *tg, *fl;
        size_t tlen, flen;
        if ((rc = be->r_get(s, i, &e)) != 0 || !e.aux)
            continue;
        tg = e.aux;
        tlen = e.aux_len;
        if (pairs && (rc = fmt_pair_view(e.aux, e.aux_len, &tg, &tlen, &fl, &flen, msg)) != 0)
            break;
        if (tlen > cap) {
            free(copy);
            cap = tlen;
            if (!(copy = malloc(cap))) {
                rc = ENOMEM;
                break;
            }
        }
        memcpy(copy, tg, tlen);
        fmt_target t;
        if ((rc = fmt_target_view((const uint8_t *)copy, tlen, e.width, e.height, &t, msg)) == 0) {
            *boxes += t.count;
            *dropped += t.dropped;
        }
    }
    free(copy);
    be->r_close(s);
    free(path);
    return rc;
}

void shc_record_manifest(const shc_record_in *r, fmt_manifest *m, char *tool, size_t tool_len,
                         char *spec, size_t spec_len)
{
    const shc_build_opts *o = r->o;
    const shc_annot *annot = r->annot;
    snprintf(tool, tool_len, "shardc %s", SHARDC_VERSION);
    m->backend = (char *)o->backend->name;
    m->backend_version = o->backend->version;
    m->tool = tool;
    m->samples = r->samples;
    m->inputs = r->hi - r->lo + r->in->nskipped;
    m->rejects = r->rejects + r->in->nskipped;
    m->classes = r->in->classes;
    m->nclasses = r->in->nclasses;
    m->geom = o->r.geom;
    m->channels = o->r.channels;
    m->augment = o->r.augment;
    m->seed = o->r.seed;
    if (o->r.augment)
        fmt_aug_format(&o->r.aug, spec, spec_len);
    m->aug_spec = o->r.augment ? spec : NULL;
    if (o->r.geom.mode == FMT_GEOM_SIZE) {
        m->sample_width = o->r.geom.width;
        m->sample_height = o->r.geom.height;
    } else if (o->r.geom.crop_w) {
        m->sample_width = o->r.geom.crop_w;
        m->sample_height = o->r.geom.crop_h;
    }
    m->pixels = r->shards->pixels;
    shc_channel_stats(r->shards->sum, r->shards->sumsq, r->shards->pixels, o->r.channels, m->mean,
                      m->std);
    m->fingerprint = r->fingerprint;
    m->nshards = r->shards->n;
    m->shards = r->shards->v;
    if (annot) {
        m->targets = 1;
        m->target_source = (char *)(annot->kind == SHC_ANNOT_COCO ? "coco"
                                    : annot->kind == SHC_ANNOT_MAPS ? "masks" : "yolo");
        m->ignore_index = annot->ignore_index;
        m->target_hash = o->target_hash;
        m->target_skipped = annot->skipped_empty;
        m->categories = annot->cats;
        m->ncategories = annot->ncats;
        m->target_ext = annot->ext;
        m->num_keypoints = annot->nkp;
        m->keypoint_names = annot->kp_names;
        m->nskeleton = annot->nskeleton;
        m->skeleton = annot->skeleton;
    }
    const fmt_category *scats;
    size_t nscats = 0;
    if (!annot && o->stream && shc_stream_targets(o->stream, &scats, &nscats)) {
        /* the Python writer's targets: the categories it was given or saw */
        m->targets = 1;
        m->target_source = "stream";
        m->target_hash = o->target_hash;
        m->categories = (fmt_category *)scats;
        m->ncategories = nscats;
    }
    size_t nsf = 0;
    const fmt_field_def *sf = o->stream ? shc_stream_fields(o->stream, &nsf) : NULL;
    if (r->fin->defs || sf) {
        m->fields = r->fin->defs ? r->fin->defs : (fmt_field_def *)sf;
        m->nfields = r->fin->defs ? r->fin->ndefs : nsf;
        m->fields_source = (char *)(r->fin->defs ? "jsonl" : "stream");
        m->fields_hash = o->fields_hash;
    }
    m->build_json = shc_build_options_json(o);
    if (o->part.count && m->build_json) {
        /* what the merge checks and adds up */
        shc_part_record pr = {.part = o->part, .inputs = r->in->n, .first_input = r->lo,
                              .end_input = r->hi, .listing_skips = r->in->nskipped,
                              .rejects = r->rejects, .list_hash = shc_inputs_hash(r->in),
                              .fingerprint = r->fingerprint, .pixels = r->shards->pixels,
                              .quality = o->quality};
        memcpy(pr.sum, r->shards->sum, sizeof pr.sum);
        memcpy(pr.sumsq, r->shards->sumsq, sizeof pr.sumsq);
        char *with = NULL;
        int rc = shc_part_record_add(m->build_json, &pr, &with);
        free(m->build_json);
        m->build_json = rc ? NULL : with;
    }
}
