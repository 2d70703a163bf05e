/* inspect.c - looking into a built dataset: sample provenance and replay, the manifest's checks
 * and the whole check of `shardc verify` (shc_verify), the JSON string writers and the URL
 * resolution of shardc.h's "looking into a built dataset". */
#include "inspect.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <strings.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "json.h"
#include "part.h"
#include "raw.h"
#include "remote.h"
#include "shardc.h"
#include "tsv.h"
#include "util.h"

/* shc_input_path's search: the row of `source`. */
typedef struct {
    uint64_t source;
    char *path;
} path_search;

static int find_path(void *ctx, const shc_inputs_row *row)
{
    path_search *s = ctx;
    if (row->source != s->source)
        return 0;
    s->path = strdup(row->path);
    return s->path ? 1 : ENOMEM;
}

int shc_input_path(const char *dir, uint64_t source, char **path)
{
    path_search s = {source, NULL};
    int rc = shc_inputs_tsv_read(dir, find_path, &s);
    *path = s.path;
    return s.path ? 0 : rc ? rc : ENOENT;
}

int shc_render_opts_from_manifest(const fmt_manifest *m, shc_render_opts *o, fmt_msg *msg)
{
    memset(o, 0, sizeof *o);
    o->geom = m->geom;
    o->channels = m->channels;
    o->limits.max_side = FMT_DEFAULT_MAX_SIDE;
    o->limits.max_pixels = FMT_DEFAULT_MAX_PIXELS;
    o->max_file_bytes = 1ull << 30;
    o->augment = m->augment;
    o->seed = m->seed;
    json_t *b = m->build_json ? json_loads(m->build_json, 0, NULL) : NULL;
    if (b) {
        json_t *v;
        if (json_is_integer(v = json_object_get(b, "max_side_limit")) && json_integer_value(v) > 0)
            o->limits.max_side = (uint32_t)json_integer_value(v);
        if (json_is_integer(v = json_object_get(b, "max_pixels")) && json_integer_value(v) > 0)
            o->limits.max_pixels = (uint64_t)json_integer_value(v);
        if (json_is_integer(v = json_object_get(b, "max_file_bytes")) && json_integer_value(v) > 0)
            o->max_file_bytes = (uint64_t)json_integer_value(v);
        json_decref(b);
    }
    if (m->augment)
        return fmt_aug_parse(m->aug_spec, &o->aug, msg);
    return 0;
}

int shc_replay(const fmt_dataset *d, const fmt_sample *s, const char *path, fmt_image *out,
               fmt_msg *msg)
{
    shc_render_opts o;
    fmt_msg why = {{0}};
    fmt_resizer *rz = NULL;
    fmt_image dec = {0};
    memset(out, 0, sizeof *out);
    int rc = shc_render_opts_from_manifest(fmt_dataset_manifest(d), &o, &why);
    if (rc == 0)
        rc = fmt_resizer_create(&rz);
    if (rc)
        return fmt_fail(msg, rc, "%s", fmt_reason(&why, rc));
    if (s->aux) {
        fmt_aug_params p;
        if ((rc = fmt_aug_decode(s->aux, s->aux_len, &p)) != 0) {
            fmt_fail(msg, rc, "the sample's augmentation record is damaged");
            goto leave;
        }
        /* the source at full size, as the build decoded it for augmentation */
        shc_render_opts full = o;
        full.augment = 0;
        full.geom = (fmt_geom){.mode = FMT_GEOM_KEEP};
        rc = shc_render(&full, path, s->source, rz, &dec, NULL, msg);
        if (rc == 0 && (rc = fmt_aug_apply(rz, &dec, &p, s->width, s->height, out, &why)) != 0)
            fmt_fail(msg, rc, "%s", fmt_reason(&why, rc));
    } else {
        o.augment = 0;
        rc = shc_render(&o, path, s->source, rz, out, NULL, msg);
    }
leave:
    fmt_image_free(&dec);
    fmt_resizer_free(rz);
    if (rc)
        fmt_image_free(out);
    return rc;
}

/* ---- manifest cross-checks (shardc verify) ---- */

typedef struct {
    void (*report)(void *ctx, const char *line);
    void *ctx;
    size_t n;
} mismatch_sink;

static void mismatch(mismatch_sink *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void mismatch(mismatch_sink *k, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    k->report(k->ctx, line);
    k->n++;
}

/* Lines of dir/name after its header line, or -1 if it cannot be read. */
static long count_lines(const char *dir, const char *name)
{
    char *p;
    if (asprintf(&p, "%s/%s", dir, name) < 0)
        return -1;
    int rc;
    FILE *f = fmt_fopen_file(p, &rc, NULL);
    free(p);
    if (!f)
        return -1;
    long n = 0;
    int c, last = '\n';
    while ((c = getc(f)) != EOF) {
        if (c == '\n')
            n++;
        last = c;
    }
    if (last != '\n')
        n++;
    fclose(f);
    return n > 0 ? n - 1 : 0;
}

/* One row of inputs.tsv appended to the fmt_inputs ctx. */
static int add_input(void *ctx, const shc_inputs_row *row)
{
    fmt_inputs *in = ctx;
    if (shc_grow_array(&in->items, &in->cap, in->n, sizeof *in->items, 256))
        return ENOMEM;
    in->items[in->n].label = row->label;
    if (!(in->items[in->n].path = strdup(row->path)))
        return ENOMEM;
    in->n++;
    return 0;
}

/* inputs.tsv as the fmt_inputs the build had (paths and labels; classes from m). */
static int inputs_from_tsv(const char *dir, const fmt_manifest *m, fmt_inputs *in)
{
    memset(in, 0, sizeof *in);
    int rc = shc_inputs_tsv_read(dir, add_input, in);
    in->classes = m->classes;
    in->nclasses = m->nclasses;
    return rc;
}

size_t shc_check_manifest(const char *dir, const fmt_manifest *m, const uint64_t (*sum)[3],
                          const uint64_t (*sumsq)[3], uint64_t pixels, uint64_t shard_fp,
                          void (*report)(void *ctx, const char *line), void *ctx)
{
    mismatch_sink k = {report, ctx, 0};
    /* geometry: a fixed --size means every sample has that size */
    if (m->geom.mode == FMT_GEOM_SIZE &&
        (m->sample_width != m->geom.width || m->sample_height != m->geom.height))
        mismatch(&k, "manifest: geometry %ux%u but sample size %ux%u (fields 'geometry', "
                 "'sample_width', 'sample_height')", m->geom.width, m->geom.height,
                 m->sample_width, m->sample_height);
    if (m->geom.mode != FMT_GEOM_SIZE && !m->geom.crop_w &&
        (m->sample_width || m->sample_height))
        mismatch(&k, "manifest: geometry mode %s has no fixed sample size, yet sample size is "
                 "%ux%u (fields 'geometry', 'sample_width', 'sample_height')",
                 fmt_geom_mode_name(m->geom.mode), m->sample_width, m->sample_height);
    /* stats: the shards' sums give them back */
    uint64_t ts[3] = {0}, tq[3] = {0};
    for (size_t i = 0; i < m->nshards; i++)
        for (int c = 0; c < 3; c++) {
            ts[c] += sum[i][c];
            tq[c] += sumsq[i][c];
        }
    if (pixels != m->pixels)
        mismatch(&k, "manifest: stats cover %" PRIu64 " pixels, the samples hold %" PRIu64
                 " (field 'stats.pixels')", m->pixels, pixels);
    for (uint32_t c = 0; c < m->channels && c < 3; c++) {
        double mean = pixels ? (double)ts[c] / (double)pixels : 0;
        double var = pixels ? (double)tq[c] / (double)pixels - mean * mean : 0;
        double sd = var > 0 ? sqrt(var) : 0;
        if (fabs(mean - m->mean[c]) > 1e-6 * (1 + fabs(mean)) ||
            fabs(sd - m->std[c]) > 1e-6 * (1 + sd))
            mismatch(&k, "manifest: channel %u mean/std %.6f/%.6f, the shards give %.6f/%.6f "
                     "(fields 'stats.mean', 'stats.std')", c, m->mean[c], m->std[c], mean, sd);
    }
    for (uint32_t c = m->channels; c < 3; c++)
        if (ts[c] || tq[c])
            mismatch(&k, "manifest: %u channel(s), yet the shards hold values for channel %u "
                     "(field 'channels')", m->channels, c);
    /* counts against the build's own lists */
    long ninputs = count_lines(dir, "inputs.tsv"), nrej = count_lines(dir, "rejects.tsv");
    if (ninputs < 0)
        mismatch(&k, "%s/inputs.tsv: cannot be read", dir);
    if (nrej < 0)
        mismatch(&k, "%s/rejects.tsv: cannot be read", dir);
    if (nrej >= 0 && (uint64_t)nrej != m->rejects)
        mismatch(&k, "manifest: %" PRIu64 " rejects, rejects.tsv lists %ld (field 'rejects')",
                 m->rejects, nrej);
    if (m->samples > 0 && m->augment == 0 && ninputs >= 0 && (uint64_t)ninputs < m->samples)
        mismatch(&k, "manifest: %" PRIu64 " samples from %ld listed inputs (field 'samples')",
                 m->samples, ninputs);
    if (ninputs >= 0 && m->inputs < (uint64_t)ninputs)
        mismatch(&k, "manifest: %" PRIu64 " inputs, inputs.tsv lists %ld (field 'inputs')",
                 m->inputs, ninputs);
    else if (ninputs >= 0 && nrej >= 0 && m->inputs > (uint64_t)ninputs + (uint64_t)nrej)
        mismatch(&k, "manifest: %" PRIu64 " inputs, more than the %ld listed and %ld rejected "
                 "(field 'inputs')", m->inputs, ninputs, nrej);
    /* everything the fingerprint covers, recomputed */
    if (m->nshards == 0)
        return k.n;
    /* one part of a build in parts (part.h) lists only its slice in inputs.tsv, while the
     * fingerprint covers the whole list: the merge checks that across the parts */
    shc_part_record pr;
    if (shc_part_record_get(m->build_json, &pr, NULL) == 0) {
        if (shard_fp != m->fingerprint || pr.fingerprint != m->fingerprint)
            mismatch(&k, "manifest: part %u of %u: its shards' fingerprint %016" PRIx64 ", its "
                     "manifest's %016" PRIx64 ", its part record's %016" PRIx64, pr.part.index,
                     pr.part.count, shard_fp, m->fingerprint, pr.fingerprint);
        return k.n;
    }
    shc_build_opts o;
    memset(&o, 0, sizeof o);
    o.target_hash = m->targets ? m->target_hash : 0;
    o.fields_hash = m->nfields ? m->fields_hash : 0;
    fmt_msg msg = {{0}};
    int rc = shc_render_opts_from_manifest(m, &o.r, &msg);
    if (rc) {
        mismatch(&k, "manifest: augmentation spec does not parse: %s (field 'augment.spec')",
                 fmt_reason(&msg, rc));
        return k.n;
    }
    json_t *b = m->build_json ? json_loads(m->build_json, 0, NULL) : NULL;
    json_t *v;
    if (b && json_is_integer(v = json_object_get(b, "shard_bytes")))
        o.shard_bytes = (uint64_t)json_integer_value(v);
    if (b && json_is_integer(v = json_object_get(b, "shard_samples")))
        o.shard_samples = (uint64_t)json_integer_value(v);
    if (b && json_is_integer(v = json_object_get(b, "align")))
        o.align = (uint32_t)json_integer_value(v);
    if (b && json_is_string(v = json_object_get(b, "compress")) &&
        fmt_codec_parse(json_string_value(v), &o.compress, NULL) != 0)
        mismatch(&k, "manifest: build option compress '%s' does not parse (field 'build')",
                 json_string_value(v));
    if (b && json_is_number(v = json_object_get(b, "jpeg_fraction")))
        o.jpeg_fraction = json_number_value(v);
    if (b && json_is_integer(v = json_object_get(b, "quality")))
        o.quality = (int)json_integer_value(v);
    /* a streamed build's fingerprint covers its options alone (build.h) */
    int streamed = b && json_is_string(v = json_object_get(b, "source")) &&
                   strcmp(json_string_value(v), "stream") == 0;
    json_decref(b);
    fmt_inputs in;
    rc = inputs_from_tsv(dir, m, &in);
    if (rc == 0) {
        uint64_t fp = shc_fingerprint(&o, streamed ? NULL : &in);
        if (fp != shard_fp || fp != m->fingerprint)
            mismatch(&k, "manifest: geometry, channels, classes, augmentation, seed or build "
                     "options differ from those the shards were built with (their fingerprint %016"
                     PRIx64 ", the manifest's fields give %016" PRIx64 ")", shard_fp, fp);
    } else {
        mismatch(&k, "%s/inputs.tsv: %s", dir, rc == FMT_ECORRUPT ? "malformed line" : strerror(rc));
    }
    for (size_t i = 0; i < in.n; i++)
        free(in.items[i].path);
    free(in.items);
    return k.n;
}

/* ---- shardc.h: the JSON writers, URLs ---- */

int shc_json_string(FILE *f, const char *str)
{
    return fmt_json_string(f, str);
}

int shc_json_bytes(FILE *f, const void *data, size_t len)
{
    return fmt_json_bytes(f, data, len);
}

int shc_is_url(const char *path)
{
    return rmt_is_url(path);
}

int shc_resolve_url(const char *url, const char *cache,
                    void (*progress)(void *ctx, uint64_t got, uint64_t total, int final),
                    void *progress_ctx, char **dir, shc_fetch_stats *st, shc_msg *msg)
{
    rmt_options ro;
    memset(&ro, 0, sizeof ro);
    ro.cache = cache;
    ro.progress = progress;
    ro.progress_ctx = progress_ctx;
    rmt_stats rs;
    memset(&rs, 0, sizeof rs);
    fmt_msg why = {{0}};
    *dir = NULL;
    int rc = rmt_resolve(url, &ro, dir, &rs, &why);
    if (rc) {
        if (msg)
            snprintf(msg->text, sizeof msg->text, "%s", fmt_reason(&why, rc));
        return rc;
    }
    if (st) {
        st->shards = rs.shards;
        st->fetched = rs.fetched;
        st->bytes = rs.bytes;
    }
    return 0;
}

/* ---- shc_verify ---- */

typedef struct {
    void (*report)(void *ctx, const char *line);
    void *ctx;
} verify_sink;

static void verify_line(const verify_sink *k, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void verify_line(const verify_sink *k, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *line = NULL;
    int n = vasprintf(&line, fmt, ap);
    va_end(ap);
    if (n >= 0 && k->report)
        k->report(k->ctx, line);
    if (n >= 0)
        free(line);
}

/* shc_check_manifest's lines, as "mismatch: ..." */
static void verify_mismatch(void *ctx, const char *line)
{
    verify_line(ctx, "mismatch: %s", line);
}

/* Shard k of m (backend be) in dir: checked, opened, compared, every sample re-hashed; its sums
 * into sum and sumsq, its fingerprint (when it differs) into *shard_fp. 0, or ENOMEM. */
static int verify_shard(const char *dir, const fmt_manifest *m, const fmt_backend *be, size_t k,
                        const verify_sink *out, shc_verify_result *res, uint64_t *pixels,
                        uint64_t *shard_fp, size_t *unread, uint64_t (*sum)[3],
                        uint64_t (*sumsq)[3])
{
    const fmt_manifest_shard *ms = &m->shards[k];
    char *path, *data;
    if (asprintf(&path, "%s/%s", dir, ms->file) < 0)
        path = NULL;
    if (path && asprintf(&data, "%s%s%s", path, be->data_file ? "/" : "",
                         be->data_file ? be->data_file : "") < 0)
        data = NULL;
    /* the shard's folder, where its backend finds the files that go with it */
    char *sdir = path && data ? fmt_manifest_shard_dir(dir, ms) : NULL;
    if (!sdir) {
        free(path);
        if (path)
            free(data);
        return ENOMEM;
    }
    void *s = NULL;
    fmt_msg smsg = {{0}};
    int rc = 0;
    if (ms->pins & FMT_PIN_FILE) {
        uint64_t whole = 0, size = 0;
        rc = fmt_hash_file(data, 0, 0, NULL, &whole, &size);
        if (rc)
            fmt_fail(&smsg, rc, "%s", fmt_strerror(rc));
        else if (size != ms->bytes)
            rc = fmt_fail(&smsg, FMT_ECORRUPT, "%s is %" PRIu64 " bytes, the manifest says %"
                          PRIu64, data, size, ms->bytes);
        else if (whole != ms->file_hash)
            rc = fmt_fail(&smsg, FMT_EHASH, "%s: whole-file hash %016" PRIx64 " differs from "
                          "the manifest's %016" PRIx64, data, whole, ms->file_hash);
    }
    if (!rc)
        rc = fmt_shard_precheck(be, path, ms, &smsg);
    if (!rc)
        rc = be->r_open(&s, sdir, path, FMT_ACCESS_MMAP, &smsg);
    const fmt_shard_info *h = rc ? NULL : be->r_info(s);
    if (h) {
        rc = fmt_shard_check_info(m, k, h, &smsg);
        if (h->fingerprint != m->fingerprint)
            *shard_fp = h->fingerprint;
        memcpy(sum[k], h->sum, sizeof sum[k]);
        memcpy(sumsq[k], h->sumsq, sizeof sumsq[k]);
    }
    if (rc) {
        /* the whole shard is unusable: name its samples as a range */
        if (ms->samples)
            verify_line(out, "damaged: samples %" PRIu64 "-%" PRIu64 " (%s): %s", ms->first,
                        ms->first + ms->samples - 1, path, fmt_reason(&smsg, rc));
        else
            verify_line(out, "damaged: %s: %s", path, fmt_reason(&smsg, rc));
        res->damaged += ms->samples ? ms->samples : 1;
        (*unread)++;
    } else {
        for (uint64_t i = 0; i < h->samples; i++) {
            res->checked++;
            fmt_sample e;
            fmt_msg emsg = {{0}};
            int crc = be->r_get(s, i, &e);
            if (crc == 0) {
                e.index = ms->first + i;
                *pixels += (uint64_t)e.height * e.width;
                if ((crc = fmt_manifest_check_sample(m, &e, &emsg)) != 0) {
                    verify_line(out, "mismatch: %s", fmt_reason(&emsg, crc));
                    res->mismatches++;
                }
            }
            crc = be->r_check(s, i);
            if (crc != 0) {
                char file[1024];
                if (!be->r_sample_path || be->r_sample_path(s, i, file, sizeof file) != 0)
                    snprintf(file, sizeof file, "%s, entry %" PRIu64, path, i);
                verify_line(out, "damaged: sample %" PRIu64 " (%s): %s", ms->first + i, file,
                            crc == FMT_EHASH ? "hash mismatch" : fmt_strerror(crc));
                res->damaged++;
            }
        }
    }
    be->r_close(s);
    free(sdir);
    free(data);
    free(path);
    return 0;
}

int shc_verify(const char *dir, void (*report)(void *ctx, const char *line), void *ctx,
               shc_verify_result *res, shc_msg *msg)
{
    memset(res, 0, sizeof *res);
    verify_sink out = {report, ctx};
    fmt_manifest m;
    fmt_msg why = {{0}};
    int rc = fmt_manifest_read(dir, &m, &why);
    if (rc)
        return fmt_fail(msg, rc, "cannot read the manifest of %s: %s", dir, fmt_reason(&why, rc));
    const fmt_backend *be = fmt_backend_find(m.backend);
    if (!be || be->version != m.backend_version) {
        rc = fmt_fail(msg, FMT_EUNSUPPORTED, "%s: backend '%s' version %u is not supported", dir,
                      m.backend, m.backend_version);
        fmt_manifest_free(&m);
        return rc;
    }
    res->opened = 1;
    res->shards = m.nshards;
    uint64_t pixels = 0, shard_fp = m.fingerprint;
    size_t unread = 0;
    uint64_t (*sum)[3] = calloc(m.nshards + 1, sizeof *sum);
    uint64_t (*sumsq)[3] = calloc(m.nshards + 1, sizeof *sumsq);
    rc = sum && sumsq ? 0 : ENOMEM;
    for (size_t k = 0; !rc && k < m.nshards; k++)
        rc = verify_shard(dir, &m, be, k, &out, res, &pixels, &shard_fp, &unread, sum, sumsq);
    /* the manifest as a whole; its stats only when every shard could be read */
    if (!rc && !unread)
        res->mismatches += shc_check_manifest(dir, &m, (const uint64_t(*)[3])sum,
                                              (const uint64_t(*)[3])sumsq, pixels, shard_fp,
                                              verify_mismatch, &out);
    free(sum);
    free(sumsq);
    fmt_manifest_free(&m);
    return rc;
}

/* ---- shardc.h: a sample's record, its replay, an image written ---- */

static int open_for(const char *dir, fmt_dataset **d, uint64_t idx, fmt_sample *s, fmt_msg *msg)
{
    fmt_msg why = {{0}};
    int rc = fmt_dataset_open(d, dir, &why);
    if (rc)
        return fmt_fail(msg, rc, "cannot open dataset %s: %s", dir, fmt_reason(&why, rc));
    if (fmt_dataset_get(*d, idx, s) != 0) {
        rc = fmt_fail(msg, FMT_EINVAL, "%s has %" PRIu64 " samples; no sample %" PRIu64, dir,
                      fmt_dataset_count(*d), idx);
        fmt_dataset_close(*d);
        *d = NULL;
    }
    return rc;
}

int shc_sample_record_get(const char *dir, uint64_t idx, shc_sample_record *r, shc_msg *msg)
{
    memset(r, 0, sizeof *r);
    fmt_dataset *d;
    fmt_sample s;
    int rc = open_for(dir, &d, idx, &s, msg);
    if (rc)
        return rc;
    r->hash = s.hash;
    shc_input_path(dir, s.source, &r->path);
    fmt_aug_params p;
    if (s.aux && fmt_aug_decode(s.aux, s.aux_len, &p) == 0) {
        r->augmented = 1;
        r->aug = (shc_aug_record){
            .variant = p.variant, .src_w = p.src_w, .src_h = p.src_h, .crop_x = p.crop_x,
            .crop_y = p.crop_y, .crop_w = p.crop_w, .crop_h = p.crop_h, .flip = p.flip,
            .angle = p.angle, .rotate_bilinear = p.rotate_bilinear, .affine = p.affine,
            .affine_tx = p.affine_tx, .affine_ty = p.affine_ty, .affine_scale = p.affine_scale,
            .affine_shear_x = p.affine_shear_x, .affine_shear_y = p.affine_shear_y,
            .brightness = p.brightness, .contrast = p.contrast, .saturation = p.saturation,
            .hue_on = p.hue_on, .hue = p.hue, .gray = p.gray};
    }
    fmt_dataset_close(d);
    return 0;
}

void shc_sample_record_free(shc_sample_record *r)
{
    if (r) {
        free(r->path);
        r->path = NULL;
    }
}

int shc_replay_sample(const char *dir, uint64_t idx, shc_replayed *out, shc_msg *msg)
{
    memset(out, 0, sizeof *out);
    fmt_dataset *d;
    fmt_sample s;
    int rc = open_for(dir, &d, idx, &s, msg);
    if (rc)
        return rc;
    char *path = NULL;
    rc = shc_input_path(dir, s.source, &path);
    if (rc) {
        fmt_fail(msg, rc, "%s/inputs.tsv does not name source %" PRIu64 ": %s", dir, s.source,
                 fmt_strerror(rc));
        fmt_dataset_close(d);
        return rc;
    }
    fmt_image re = {0};
    fmt_msg why = {{0}};
    rc = shc_replay(d, &s, path, &re, &why);
    fmt_dataset_close(d);
    if (rc) {
        fmt_fail(msg, rc, "cannot replay sample %" PRIu64 " from %s: %s", idx, path, why.text);
        free(path);
        return rc;
    }
    *out = (shc_replayed){.pixels = re.pixels, .width = re.width, .height = re.height,
                          .channels = re.channels, .path = path};
    return 0;
}

void shc_replayed_free(shc_replayed *r)
{
    if (r) {
        free(r->pixels);
        free(r->path);
        memset(r, 0, sizeof *r);
    }
}

int shc_write_image(const char *path, const uint8_t *px, uint32_t w, uint32_t h, uint32_t ch)
{
    size_t plen = strlen(path), len = (size_t)w * h * ch;
    uint8_t *buf = NULL;
    size_t n = 0;
    int rc;
    if (plen > 4 && strcasecmp(path + plen - 4, ".png") == 0) {
        fmt_image pi = {.pixels = (uint8_t *)px, .width = w, .height = h, .channels = ch};
        rc = fmt_png_encode(&pi, 6, &buf, &n);
    } else {
        char head[64];
        int hn = snprintf(head, sizeof head, "P%c\n%u %u\n255\n", ch == 1 ? '5' : '6', w, h);
        n = (size_t)hn + len;
        buf = malloc(n);
        rc = buf ? 0 : ENOMEM;
        if (buf) {
            memcpy(buf, head, (size_t)hn);
            memcpy(buf + hn, px, len);
        }
    }
    if (rc == 0)
        rc = fmt_write_file_atomic(path, buf, n);
    free(buf);
    return rc;
}
