/* shardc - the dataset compiler's command line: build, info, verify, cat. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "augment.h"
#include "backend.h"
#include "raw.h"
#include "cli.h"
#include "shardread.h"
#include "inspect.h"
#include "dataset.h"
#include "draw.h"

static const char usage_main[] =
    "usage: shardc COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  build SRC... -o OUT [options]   compile images into the dataset directory OUT\n"
    "  info OUT [--json]               what OUT holds: samples, classes, shards, geometry, stats\n"
    "  verify OUT                      re-hash every sample; exit 1 naming each damaged one\n"
    "  cat OUT INDEX [-o FILE]         one sample as binary PPM (P6, or P5 for gray)\n"
    "  merge OUT                       join the parts of a build made with --part I/N\n"
    "\n"
    "  shardc COMMAND --help for a command's options; shardc --version\n";

static const char usage_info[] =
    "usage: shardc info OUT [--json] [--sample I] [--targets]\n"
    "  what the dataset directory OUT holds: samples, classes, shards, geometry, channel stats,\n"
    "  augmentation; with --sample I, one sample's label, shape, source file and the exact\n"
    "  augmentation parameters drawn for it (JSON keys source and params); with --targets, a\n"
    "  detection dataset's targets, one JSON line per sample (index, image_id, orig_size\n"
    "  [height, width] as torchvision's, dropped, boxes [x1, y1, x2, y2] in the sample's pixels,\n"
    "  labels, iscrowd, area; with segmentation: size [height, width], masks as row-major runs\n"
    "  from 0s, keypoints as [x, y, v] each, label_map as [value, run] pairs)\n";
static const char usage_verify[] =
    "usage: shardc verify OUT\n"
    "  re-hash every sample of OUT against its recorded hash; exit 1 naming each damaged sample\n";
static const char usage_merge[] =
    "usage: shardc merge OUT [--json]\n"
    "  check that OUT/parts holds every part of a build made with --part I/N, each finished and\n"
    "  built from the same inputs and options, then write OUT/manifest.json over the parts'\n"
    "  shards (no pixel is copied), OUT/rejects.tsv and OUT/inputs.tsv: the dataset a one-machine\n"
    "  build gives\n"
    "exit status: 0 merged, 1 merged and inputs were rejected, 2 parts missing, unfinished or\n"
    "inconsistent (nothing written), 3 fatal I/O error\n";
static const char usage_cat[] =
    "usage: shardc cat OUT INDEX [-o FILE] [--replay] [--boxes] [--masks] [--keypoints]\n"
    "  write sample INDEX of OUT as binary PPM (P6; P5 for gray) to stdout or FILE (PNG when\n"
    "  FILE ends in .png)\n"
    "  --boxes: a detection dataset's boxes drawn on it, 1-pixel outlines, one colour per\n"
    "  category\n"
    "  --masks: its instance masks (or label map) as translucent colour overlays\n"
    "  --keypoints: its keypoints as dots joined by the skeleton's lines\n"
    "  --replay: render the sample again from its source file (an augmented one from its recorded\n"
    "  parameters) and write that instead; exit 1 if it differs from the stored pixels\n";

static int wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    return 0;
}

/* ---- build ---- */

static int cmd_build(int argc, char **argv)
{
    shc_build_opts *o;
    int rc = shc_build_args(argc, argv, &o);
    if (rc)
        return rc;
    shc_build_view v;
    shc_build_view_get(o, &v);
    shc_cli_out out = {.progress = v.progress, .json = v.json, .strict = v.strict};
    shc_build_cb cb;
    shc_cli_callbacks(&cb, &out);
    rc = shc_build_exit(shc_build(o, &cb));
    shc_build_opts_free(o);
    return rc;
}

/* The download's progress line, while stderr is a terminal: bytes, rate, ETA. */
static void download_progress(void *ctx, uint64_t got, uint64_t total, int final)
{
    const struct timespec *t0 = ctx;
    if (total == 0)             /* every shard cached: nothing to show */
        return;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    double s = (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
    double rate = s > 0 ? (double)got / s : 0;
    double eta = rate > 0 && total > got ? (double)(total - got) / rate : 0;
    char b1[32], b2[32], b3[32];
    fprintf(stderr, "\r\033[Kshardc: downloaded %s of %s (%.0f%%), %s/s, ETA %d:%02d%s",
            shc_human_size(got, b1, sizeof b1), shc_human_size(total, b2, sizeof b2),
            total ? 100.0 * (double)got / (double)total : 100.0,
            shc_human_size((uint64_t)rate, b3, sizeof b3), (int)eta / 60, (int)eta % 60,
            final ? "\n" : "");
}

/* A dataset at a URL (docs/REMOTE.md): *dir becomes its folder in the local cache
 * ($SHARDREAD_CACHE, else ~/.cache/shardread), complete and checked; *owned is what to free
 * (NULL for a local path). 0 or the exit status, after a message. */
static int resolve_url(const char **dir, char **owned)
{
    *owned = NULL;
    if (!shc_is_url(*dir))
        return 0;
    shc_msg msg = {{0}};
    shc_fetch_stats st;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int tty = isatty(STDERR_FILENO);
    int rc = shc_resolve_url(*dir, shc_cli_cache(), tty ? download_progress : NULL,
                             tty ? &t0 : NULL, owned, &st, &msg);
    if (rc) {
        fprintf(stderr, "shardc: %s\n", msg.text);
        return rc == SHR_EHASH || rc == SHR_ECORRUPT || rc == SHR_ETRUNC ? SHC_EXIT_REJECTS
                                                                        : SHC_EXIT_IO;
    }
    if (st.fetched)
        fprintf(stderr, "shardc: %s: %" PRIu64 " of %" PRIu64 " shard(s) downloaded and checked "
                "(%" PRIu64 " bytes) into %s\n", *dir, st.fetched, st.shards, st.bytes, *owned);
    *dir = *owned;
    return 0;
}

/* ---- info ---- */


static int has_manifest(const char *dir)
{
    char *p;
    if (asprintf(&p, "%s/%s", dir, FMT_MANIFEST_NAME) < 0)
        return 0;
    int ok = access(p, F_OK) == 0;
    free(p);
    return ok;
}

static int open_dataset(const char *dir, fmt_dataset **d)
{
    fmt_msg msg = {{0}};
    int rc = fmt_dataset_open(d, dir, &msg);
    if (rc) {
        fprintf(stderr, "shardc: cannot open dataset %s: %s\n", dir, fmt_reason(&msg, rc));
        /* usage error only when there is no dataset at all; a missing shard is damage */
        return rc == ENOENT && !has_manifest(dir) ? SHC_EXIT_USAGE : SHC_EXIT_REJECTS;
    }
    return 0;
}

/* shardc info OUT --sample I: one sample's label, shape, provenance and augmentation. */
static int sample_info(const char *dir, fmt_dataset *d, uint64_t idx, int json)
{
    fmt_sample s;
    if (fmt_dataset_get(d, idx, &s) != 0) {
        fprintf(stderr, "shardc: %s has %" PRIu64 " samples; no sample %" PRIu64 "\n", dir,
                fmt_dataset_count(d), idx);
        return SHC_EXIT_USAGE;
    }
    const fmt_manifest *m = fmt_dataset_manifest(d);
    const char *cls = s.label >= 0 && (size_t)s.label < m->nclasses ? m->classes[s.label] : "";
    char *path = NULL;
    shc_input_path(dir, s.source, &path);
    fmt_aug_params p;
    int aug = s.aux && fmt_aug_decode(s.aux, s.aux_len, &p) == 0;
    char hue[32] = "null";      /* the hue factor when adjust_hue was applied */
    if (aug && p.hue_on)
        snprintf(hue, sizeof hue, json ? "%.9g" : "%.4f", (double)p.hue);
    else if (!json)
        snprintf(hue, sizeof hue, "off");
    char rot[64] = "null";      /* the rotation: {"degrees": a, "filter": f} */
    if (aug && p.angle != 0.0f && !p.affine)
        snprintf(rot, sizeof rot, json ? "{\"degrees\": %.9g, \"filter\": \"%s\"}" : "%.4f degrees, %s",
                 (double)p.angle, p.rotate_bilinear ? "bilinear" : "nearest");
    else if (!json)
        snprintf(rot, sizeof rot, "none");
    /* the affine warp: F.affine's arguments */
    char aff[192] = "null";
    if (aug && p.affine)
        snprintf(aff, sizeof aff,
                 json ? "{\"degrees\": %.9g, \"translate\": [%d, %d], \"scale\": %.9g, "
                        "\"shear\": [%.9g, %.9g], \"filter\": \"%s\"}"
                      : "%.4f degrees, translate (%d, %d), scale %.4f, shear (%.4f, %.4f), %s",
                 (double)p.angle, p.affine_tx, p.affine_ty, (double)p.affine_scale,
                 (double)p.affine_shear_x, (double)p.affine_shear_y,
                 p.rotate_bilinear ? "bilinear" : "nearest");
    else if (!json)
        snprintf(aff, sizeof aff, "none");
    if (json) {
        printf("{\"index\": %" PRIu64 ", \"label\": %d, \"class\": ", idx, (int)s.label);
        shc_json_string(stdout, cls);
        printf(", \"height\": %u, \"width\": %u, \"channels\": %u, \"hash\": \"%016" PRIx64
               "\", \"source\": %" PRIu64 ", \"path\": ", s.height, s.width, s.channels, s.hash,
               s.source);
        if (path)
            shc_json_string(stdout, path);
        else
            printf("null");
        if (aug)
            printf(", \"variant\": %u, \"params\": {\"source_size\": [%u, %u], \"crop\": [%u, %u, "
                   "%u, %u], \"flip\": %s, \"brightness\": %.9g, \"contrast\": %.9g, "
                   "\"saturation\": %.9g, \"hue\": %s, \"grayscale\": %s, \"rotate\": %s, "
                   "\"affine\": %s}}\n",
                   p.variant, p.src_w, p.src_h, p.crop_x, p.crop_y, p.crop_w, p.crop_h,
                   p.flip ? "true" : "false", (double)p.brightness, (double)p.contrast,
                   (double)p.saturation, hue, p.gray ? "true" : "false", rot, aff);
        else
            printf(", \"variant\": null, \"params\": null}\n");
    } else {
        printf("sample:    %" PRIu64 "\nlabel:     %d (%s)\nshape:     %ux%u, %u channel(s)\n"
               "hash:      %016" PRIx64 "\nsource:    %" PRIu64 " (%s)\n", idx, (int)s.label, cls,
               s.width, s.height, s.channels, s.hash, s.source, path ? path : "path unknown");
        if (aug)
            printf("variant:   %u\ncrop:      %ux%u at (%u, %u) of %ux%u\nflip:      %s\n"
                   "rotate:    %s\naffine:    %s\n"
                   "colour:    brightness %.4f, contrast %.4f, saturation %.4f, hue %s%s\n",
                   p.variant, p.crop_w, p.crop_h, p.crop_x, p.crop_y, p.src_w, p.src_h,
                   p.flip ? "yes" : "no", rot, aff, (double)p.brightness, (double)p.contrast,
                   (double)p.saturation, hue, p.gray ? ", grayscale" : "");
    }
    free(path);
    return 0;
}

/* Runs of npix values (row-major) as a JSON list: masks [0s, 1s, 0s, ...], starting with
 * 0s; label maps [[value, run], ...]. */
static void print_runs(const uint8_t *v8, const uint16_t *v16, size_t npix)
{
    printf("[");
    size_t i = 0;
    int first = 1;
    if (v8 && npix && v8[0])
        printf("0"), first = 0;
    while (i < npix) {
        size_t j = i + 1;
        unsigned v = v8 ? v8[i] : v16[i];
        while (j < npix && (v8 ? v8[j] : v16[j]) == v)
            j++;
        if (v8)
            printf("%s%zu", first ? "" : ", ", j - i);
        else
            printf("%s[%u, %zu]", first ? "" : ", ", v, j - i);
        first = 0;
        i = j;
    }
    printf("]");
}

/* The segmentation extension of a target (raw.md "Target record, version 2") as JSON members:
 * "size" [height, width], "masks" (runs, row-major), "keypoints" ([x, y, v] per keypoint),
 * "label_map" ([value, run] pairs). 0 or ENOMEM. */
static int print_segm(const fmt_target *t)
{
    size_t npix = (size_t)t->map_width * t->map_height;
    printf(", \"size\": [%u, %u]", t->map_height, t->map_width);
    if (t->ext & FMT_TARGET_EXT_KEYPOINTS) {
        printf(", \"keypoints\": [");
        for (uint32_t k = 0; k < t->count; k++) {
            printf("%s[", k ? ", " : "");
            for (uint32_t j = 0; j < t->num_keypoints; j++) {
                const float *p = t->keypoints + 3 * ((size_t)k * t->num_keypoints + j);
                printf("%s[%.9g, %.9g, %.9g]", j ? ", " : "", (double)p[0], (double)p[1],
                       (double)p[2]);
            }
            printf("]");
        }
        printf("]");
    }
    if (t->ext & (FMT_TARGET_EXT_MASKS | FMT_TARGET_EXT_MAP)) {
        void *buf = malloc(2 * (npix ? npix : 1));
        if (!buf)
            return ENOMEM;
        if (t->ext & FMT_TARGET_EXT_MASKS) {
            printf(", \"masks\": [");
            for (uint32_t k = 0; k < t->count; k++) {
                printf("%s", k ? ", " : "");
                fmt_target_mask(t, k, buf);
                print_runs(buf, NULL, npix);
            }
            printf("]");
        }
        if (t->ext & FMT_TARGET_EXT_MAP) {
            printf(", \"label_map\": ");
            fmt_target_label_map(t, buf, 2);
            print_runs(NULL, buf, npix);
        }
        free(buf);
    }
    return 0;
}

/* A dataset's fields schema as a JSON array of {"name", "type", "count"}. */
static void print_field_schema(const fmt_manifest *m)
{
    printf("[");
    for (size_t k = 0; k < m->nfields; k++) {
        printf("%s{\"name\": ", k ? ", " : "");
        shc_json_string(stdout, m->fields[k].name);
        printf(", \"type\": \"%s\", \"count\": %u}", fmt_field_type_name(m->fields[k].type),
               m->fields[k].count);
    }
    printf("]");
}

/* Sample i's fields as the members of a JSON object ("name": value, ...): ints and floats (a
 * vector as an array; a float that is not finite as null), text as a string, bytes as a string
 * of hex digits. */
static int print_fields(const fmt_dataset *d, uint64_t i, fmt_msg *msg)
{
    const fmt_manifest *m = fmt_dataset_manifest(d);
    const uint8_t *rec;
    size_t len, n;
    fmt_field_value v[FMT_FIELDS_MAX];
    int rc = fmt_dataset_fields_record(d, i, &rec, &len, msg);
    if (rc == 0)
        rc = fmt_fields_view(rec, len, v, FMT_FIELDS_MAX, &n, msg);
    if (rc)
        return rc;
    for (size_t k = 0; k < n && k < m->nfields; k++) {
        const uint8_t *p = v[k].data;
        printf("%s", k ? ", " : "");
        shc_json_string(stdout, m->fields[k].name);
        printf(": ");
        if (v[k].type == FMT_FIELD_STR) {
            shc_json_bytes(stdout, p, v[k].count);
        } else if (v[k].type == FMT_FIELD_BYTES) {
            putchar('"');
            for (uint32_t j = 0; j < v[k].count; j++)
                printf("%02x", p[j]);
            putchar('"');
        } else {
            int vec = m->fields[k].count > 0;
            printf("%s", vec ? "[" : "");
            for (uint32_t j = 0; j < v[k].count; j++) {
                uint64_t u = 0;
                for (int b = 7; b >= 0; b--)      /* little-endian */
                    u = u << 8 | p[8 * (size_t)j + (size_t)b];
                printf("%s", j ? ", " : "");
                if (v[k].type == FMT_FIELD_INT) {
                    printf("%" PRId64, (int64_t)u);
                } else {
                    double x;
                    memcpy(&x, &u, sizeof x);
                    if (isfinite(x))
                        printf("%.17g", x);
                    else
                        printf("null");
                }
            }
            printf("%s", vec ? "]" : "");
        }
    }
    return 0;
}

/* Every sample's target as a JSON line (float32 values printed so that they read back exactly);
 * a dataset with fields too adds the sample's "fields" object. */
static int print_targets(const char *dir, const fmt_dataset *d)
{
    for (uint64_t i = 0; i < fmt_dataset_count(d); i++) {
        fmt_target t;
        fmt_msg msg = {{0}};
        int rc = fmt_dataset_target(d, i, &t, &msg);
        if (rc) {
            fprintf(stderr, "shardc: %s: sample %" PRIu64 ": %s\n", dir, i, fmt_reason(&msg, rc));
            return SHC_EXIT_REJECTS;
        }
        printf("{\"index\": %" PRIu64 ", \"image_id\": %" PRId64 ", \"orig_size\": [%u, %u], "
               "\"dropped\": %u, \"boxes\": [", i, t.image_id, t.orig_height, t.orig_width,
               t.dropped);
        for (uint32_t k = 0; k < t.count; k++)
            printf("%s[%.9g, %.9g, %.9g, %.9g]", k ? ", " : "", (double)t.boxes[4 * k],
                   (double)t.boxes[4 * k + 1], (double)t.boxes[4 * k + 2],
                   (double)t.boxes[4 * k + 3]);
        printf("], \"labels\": [");
        for (uint32_t k = 0; k < t.count; k++)
            printf("%s%" PRId64, k ? ", " : "", t.labels[k]);
        printf("], \"iscrowd\": [");
        for (uint32_t k = 0; k < t.count; k++)
            printf("%s%u", k ? ", " : "", t.iscrowd[k]);
        printf("], \"area\": [");
        for (uint32_t k = 0; k < t.count; k++)
            printf("%s%.9g", k ? ", " : "", (double)t.area[k]);
        printf("]");
        if (t.ext && print_segm(&t) != 0) {
            fprintf(stderr, "shardc: %s: sample %" PRIu64 ": out of memory\n", dir, i);
            return ENOMEM;
        }
        if (fmt_dataset_manifest(d)->nfields) {
            printf(", \"fields\": {");
            if ((rc = print_fields(d, i, &msg)) != 0) {
                printf("}}\n");
                fprintf(stderr, "shardc: %s: sample %" PRIu64 ": %s\n", dir, i,
                        fmt_reason(&msg, rc));
                return SHC_EXIT_REJECTS;
            }
            printf("}");
        }
        printf("}\n");
    }
    return 0;
}

static int cmd_info_dir(const char *dir, int json, int targets, const uint64_t *sample);

static int cmd_info(int argc, char **argv)
{
    int json = 0, targets = 0;
    const char *dir = NULL, *sample = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strcmp(argv[i], "--sample") == 0 && i + 1 < argc)
            sample = argv[++i];
        else if (strcmp(argv[i], "--targets") == 0)
            targets = 1;
        else if (argv[i][0] == '-')
            return shc_usage_error(usage_info, "unknown option '%s'", argv[i]);
        else if (!dir)
            dir = argv[i];
        else
            return shc_usage_error(usage_info, "unexpected argument '%s'", argv[i]);
    }
    if (!dir)
        return shc_usage_error(usage_info, "%s", "no dataset directory given");
    uint64_t sidx = 0;
    if (sample && shc_parse_uint(sample, 0, UINT64_MAX, &sidx))
        return shc_usage_error(usage_info, "bad --sample '%s'", sample);
    char *cached;
    int rc = resolve_url(&dir, &cached);
    if (rc)
        return rc;
    rc = cmd_info_dir(dir, json, targets, sample ? &sidx : NULL);
    free(cached);
    return rc;
}

static int cmd_info_dir(const char *dir, int json, int targets, const uint64_t *sample)
{
    fmt_dataset *d;
    int rc = open_dataset(dir, &d);
    if (rc)
        return rc;
    if (sample) {
        rc = sample_info(dir, d, *sample, json);
        fmt_dataset_close(d);
        return rc;
    }
    const fmt_manifest *m = fmt_dataset_manifest(d);
    if (targets) {
        if (!m->targets) {
            fprintf(stderr, "shardc: %s has no targets (not a detection dataset)\n", dir);
            fmt_dataset_close(d);
            return SHC_EXIT_USAGE;
        }
        rc = print_targets(dir, d);
        fmt_dataset_close(d);
        return rc;
    }
    uint64_t bytes = 0;
    for (size_t i = 0; i < m->nshards; i++)
        bytes += m->shards[i].bytes;
    if (json) {
        printf("{\"samples\": %" PRIu64 ", \"classes\": [", m->samples);
        for (size_t i = 0; i < m->nclasses; i++) {
            if (i)
                printf(", ");
            shc_json_string(stdout, m->classes[i]);
        }
        printf("], \"num_classes\": %zu, \"backend\": ", m->nclasses);
        shc_json_string(stdout, m->backend);
        printf(", \"inputs\": %" PRIu64 ", \"rejects\": %" PRIu64 ", \"bytes\": %" PRIu64
               ", \"channels\": %u, \"geometry\": {\"mode\": \"%s\", \"fit\": \"%s\", \"width\": %u, "
               "\"height\": %u, \"short_side\": %u, \"max_side\": %u}, \"sample_width\": %u, "
               "\"sample_height\": %u, \"mean\": [", m->inputs, m->rejects,
               bytes, m->channels, fmt_geom_mode_name(m->geom.mode), fmt_fit_name(m->geom.fit),
               m->geom.width, m->geom.height, m->geom.short_side, m->geom.max_side,
               m->sample_width, m->sample_height);
        for (uint32_t c = 0; c < m->channels; c++)
            printf("%s%.4f", c ? ", " : "", m->mean[c]);
        printf("], \"std\": [");
        for (uint32_t c = 0; c < m->channels; c++)
            printf("%s%.4f", c ? ", " : "", m->std[c]);
        printf("], \"shards\": [");
        for (size_t i = 0; i < m->nshards; i++) {
            printf("%s{\"file\": ", i ? ", " : "");
            shc_json_string(stdout, m->shards[i].file);
            printf(", \"first\": %" PRIu64 ", \"samples\": %" PRIu64 ", \"bytes\": %" PRIu64 "}",
                   m->shards[i].first, m->shards[i].samples, m->shards[i].bytes);
        }
        printf("], \"tool\": ");
        shc_json_string(stdout, m->tool);
        printf(", \"targets\": %s, \"fields\": ", m->targets ? "true" : "false");
        print_field_schema(m);
        printf("}\n");
    } else {
        char hb[32];
        printf("dataset:   %s (%s, written by %s)\n", dir, m->backend, m->tool);
        printf("samples:   %" PRIu64 " from %" PRIu64 " inputs, %" PRIu64 " rejected\n", m->samples,
               m->inputs, m->rejects);
        printf("classes:   %zu", m->nclasses);
        for (size_t i = 0; i < m->nclasses && i < 10; i++)
            printf("%s%s", i ? ", " : " (", m->classes[i]);
        printf("%s\n", m->nclasses > 10 ? ", ...)" : m->nclasses ? ")" : "");
        if (m->geom.mode == FMT_GEOM_SIZE)
            printf("geometry:  %ux%u, fit %s, %u channel(s)\n", m->geom.width, m->geom.height,
                   fmt_fit_name(m->geom.fit), m->channels);
        else if (m->geom.mode == FMT_GEOM_SHORT_SIDE)
            printf("geometry:  short side %u%s, %u channel(s)\n", m->geom.short_side,
                   m->geom.max_side ? ", long side capped" : "", m->channels);
        else
            printf("geometry:  source sizes%s, %u channel(s)\n",
                   m->geom.max_side ? ", long side capped" : "", m->channels);
        char chain[256];
        fmt_geom_chain(&m->geom, chain, sizeof chain);
        printf("transform: %s\n", chain);
        if (m->targets)
            printf("targets:   %zu categories (record version %u)\n", m->ncategories,
                   m->target_ext ? 2 : 1);
        for (size_t k = 0; k < m->nfields; k++) {
            printf("%s %s %s", k ? "," : "fields:   ", m->fields[k].name,
                   fmt_field_type_name(m->fields[k].type));
            if (m->fields[k].count)
                printf("[%u]", m->fields[k].count);
        }
        if (m->nfields)
            printf("\n");
        printf("shards:    %zu, %s\n", m->nshards, shc_human_size(bytes, hb, sizeof hb));
        printf("mean:     ");
        for (uint32_t c = 0; c < m->channels; c++)
            printf(" %.3f", m->mean[c]);
        printf("\nstd:      ");
        for (uint32_t c = 0; c < m->channels; c++)
            printf(" %.3f", m->std[c]);
        printf("\n");
    }
    fmt_dataset_close(d);
    return 0;
}

/* ---- verify ---- */

static void print_line(void *ctx, const char *line)
{
    (void)ctx;
    printf("%s\n", line);
}

/* Every shard, sample and manifest field checked (shc_verify): each problem is one line on
 * stdout ("damaged: ..." or "mismatch: ..."); exit 1 if there is any. */
static int verify_dir(const char *dir)
{
    shc_verify_result r;
    shc_msg msg = {{0}};
    int rc = shc_verify(dir, print_line, NULL, &r, &msg);
    if (rc && !r.opened) {
        fprintf(stderr, "shardc: %s\n", msg.text);
        return rc == ENOENT ? SHC_EXIT_USAGE : SHC_EXIT_REJECTS;
    }
    if (rc)
        return SHC_EXIT_IO;
    if (r.damaged || r.mismatches)
        fprintf(stderr, "shardc: %s: %" PRIu64 " damaged sample(s), %zu manifest mismatch(es)\n",
                dir, r.damaged, r.mismatches);
    else
        fprintf(stderr, "shardc: %s: all %" PRIu64 " samples in %zu shard(s) verified\n", dir,
                r.checked, r.shards);
    return r.damaged || r.mismatches ? SHC_EXIT_REJECTS : SHC_EXIT_OK;
}

static int cmd_verify(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-')
        return shc_usage_error(usage_verify, "%s", "expected one dataset directory");
    const char *dir = argv[1];
    char *cached;
    int rc = resolve_url(&dir, &cached);
    if (rc)
        return rc;
    rc = verify_dir(dir);
    free(cached);
    return rc;
}

/* ---- merge ---- */

static int cmd_merge(int argc, char **argv)
{
    const char *dir = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (argv[i][0] == '-')
            return shc_usage_error(usage_merge, "unknown option '%s'", argv[i]);
        else if (!dir)
            dir = argv[i];
        else
            return shc_usage_error(usage_merge, "unexpected argument '%s'", argv[i]);
    }
    if (!dir)
        return shc_usage_error(usage_merge, "%s", "no dataset directory given");
    shc_merge_opts mo = {NULL, shc_cli_cache(), 0};
    if (shc_is_url(dir) && shc_cli_part_size(&mo.part_size) != 0)
        return SHC_EXIT_USAGE;
    fmt_msg why = {{0}};
    shc_merge_result r;
    double t0 = shc_cli_now();
    int rc = shc_merge(dir, &mo, &r, &why);
    if (rc) {
        fprintf(stderr, "shardc: cannot merge %s: %s\n", dir, fmt_reason(&why, rc));
        return shc_merge_exit(rc);
    }
    double dt = shc_cli_now() - t0;
    char hb[32];
    fprintf(stderr, "shardc: merged %u part(s) into %s: %" PRIu64 " samples in %" PRIu64
            " shard(s), %s, %" PRIu64 " rejected%s; %.3f s\n", r.parts, dir, r.samples, r.shards,
            shc_human_size(r.bytes, hb, sizeof hb), r.rejects,
            r.rejects ? " (see rejects.tsv)" : "", dt);
    if (json)
        printf("{\"parts\": %u, \"samples\": %" PRIu64 ", \"shards\": %" PRIu64 ", \"bytes\": %"
               PRIu64 ", \"inputs\": %" PRIu64 ", \"rejects\": %" PRIu64 ", \"seconds\": %.3f}\n",
               r.parts, r.samples, r.shards, r.bytes, r.inputs, r.rejects, dt);
    return r.rejects ? SHC_EXIT_REJECTS : SHC_EXIT_OK;
}

/* ---- cat ---- */

enum { CAT_BOXES = 1, CAT_MASKS = 2, CAT_KEYPOINTS = 4 };

static int cat_dir(const char *dir, uint64_t idx, const char *outfile, int replay, int boxes);

static int cmd_cat(int argc, char **argv)
{
    const char *dir = NULL, *index = NULL, *outfile = NULL;
    int replay = 0, boxes = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--boxes") == 0) {
            boxes |= CAT_BOXES;
        } else if (strcmp(argv[i], "--masks") == 0) {
            boxes |= CAT_MASKS;
        } else if (strcmp(argv[i], "--keypoints") == 0) {
            boxes |= CAT_KEYPOINTS;
        } else if (strcmp(argv[i], "--replay") == 0) {
            replay = 1;
        } else if (strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--output") == 0) {
            if (++i >= argc)
                return shc_usage_error(usage_cat, "%s", "-o needs a file name");
            outfile = argv[i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return shc_usage_error(usage_cat, "unknown option '%s'", argv[i]);
        } else if (!dir) {
            dir = argv[i];
        } else if (!index) {
            index = argv[i];
        } else {
            return shc_usage_error(usage_cat, "unexpected argument '%s'", argv[i]);
        }
    }
    uint64_t idx;
    if (!dir || !index)
        return shc_usage_error(usage_cat, "%s", "expected OUT and INDEX");
    if (shc_parse_uint(index, 0, UINT64_MAX, &idx))
        return shc_usage_error(usage_cat, "bad INDEX '%s'", index);
    char *cached;
    int rc = resolve_url(&dir, &cached);
    if (rc)
        return rc;
    rc = cat_dir(dir, idx, outfile, replay, boxes);
    free(cached);
    return rc;
}

static int cat_dir(const char *dir, uint64_t idx, const char *outfile, int replay, int boxes)
{
    fmt_dataset *d;
    int rc = open_dataset(dir, &d);
    if (rc)
        return rc;
    fmt_sample s;
    if (fmt_dataset_get(d, idx, &s) != 0) {
        fprintf(stderr, "shardc: %s has %" PRIu64 " samples; no sample %" PRIu64 "\n", dir,
                fmt_dataset_count(d), idx);
        fmt_dataset_close(d);
        return SHC_EXIT_USAGE;
    }
    uint8_t *owned = NULL;
    if (!s.pixels) {
        /* a backend that decodes (per-image sets) or copies: read the sample out */
        owned = malloc(s.length ? (size_t)s.length : 1);
        rc = owned ? fmt_dataset_read(d, idx, owned, NULL) : ENOMEM;
        if (rc) {
            fprintf(stderr, "shardc: cannot read sample %" PRIu64 " of %s: %s\n", idx, dir,
                    fmt_strerror(rc));
            free(owned);
            fmt_dataset_close(d);
            return SHC_EXIT_REJECTS;
        }
        s.pixels = owned;
    }
    fmt_image re = {0};
    int differs = 0;
    if (replay) {
        char *path = NULL;
        fmt_msg why = {{0}};
        rc = shc_input_path(dir, s.source, &path);
        if (rc) {
            fprintf(stderr, "shardc: %s/inputs.tsv does not name source %" PRIu64 ": %s\n", dir,
                    s.source, fmt_strerror(rc));
            fmt_dataset_close(d);
            return SHC_EXIT_REJECTS;
        }
        rc = shc_replay(d, &s, path, &re, &why);
        if (rc) {
            fprintf(stderr, "shardc: cannot replay sample %" PRIu64 " from %s: %s\n", idx, path,
                    why.text);
            free(path);
            fmt_dataset_close(d);
            return SHC_EXIT_REJECTS;
        }
        size_t n = (size_t)re.width * re.height * re.channels;
        if (re.width != s.width || re.height != s.height || re.channels != s.channels ||
            memcmp(re.pixels, s.pixels, n) != 0) {
            size_t diff = 0;
            for (size_t k = 0; n == s.length && k < n; k++)
                diff += re.pixels[k] != s.pixels[k];
            fprintf(stderr, "shardc: replay of sample %" PRIu64 " from %s differs from the stored "
                    "pixels (%zu of %zu bytes)\n", idx, path, diff, n);
            differs = 1;
        } else {
            fprintf(stderr, "shardc: replay of sample %" PRIu64 " from %s matches the stored "
                    "pixels\n", idx, path);
        }
        free(path);
        s.pixels = re.pixels;
        s.length = n;
        s.width = re.width;
        s.height = re.height;
        s.channels = re.channels;
    }
    uint8_t *drawn = NULL;
    if (boxes) {
        fmt_target t;
        fmt_msg msg = {{0}};
        rc = fmt_dataset_target(d, idx, &t, &msg);
        drawn = rc ? NULL : malloc(s.length ? (size_t)s.length : 1);
        if (rc || !drawn) {
            fprintf(stderr, "shardc: cannot draw the targets of sample %" PRIu64 " of %s: %s\n", idx,
                    dir, rc ? fmt_reason(&msg, rc) : strerror(ENOMEM));
            fmt_image_free(&re);
            free(owned);
            fmt_dataset_close(d);
            return rc == FMT_EINVAL ? SHC_EXIT_USAGE : SHC_EXIT_IO;
        }
        const fmt_manifest *man = fmt_dataset_manifest(d);
        const char *lacks = boxes & CAT_MASKS && !(t.ext & (FMT_TARGET_EXT_MASKS | FMT_TARGET_EXT_MAP))
                            ? "masks" : boxes & CAT_KEYPOINTS && !(t.ext & FMT_TARGET_EXT_KEYPOINTS)
                            ? "keypoints" : NULL;
        memcpy(drawn, s.pixels, s.length);
        rc = lacks ? FMT_EINVAL : boxes & CAT_MASKS
             ? shc_draw_masks(drawn, s.width, s.height, s.channels, &t, man->ignore_index) : 0;
        if (rc) {
            fprintf(stderr, "shardc: cannot draw the %s of sample %" PRIu64 " of %s: %s\n",
                    lacks ? lacks : "masks", idx, dir, lacks ? "the dataset has none"
                    : fmt_strerror(rc));
            free(drawn);
            fmt_image_free(&re);
            free(owned);
            fmt_dataset_close(d);
            return lacks ? SHC_EXIT_USAGE : SHC_EXIT_IO;
        }
        if (boxes & CAT_BOXES)
            shc_draw_boxes(drawn, s.width, s.height, s.channels, &t);
        if (boxes & CAT_KEYPOINTS)
            shc_draw_keypoints(drawn, s.width, s.height, s.channels, &t, man);
        s.pixels = drawn;
    }
    char head[64];
    int hn = snprintf(head, sizeof head, "P%c\n%u %u\n255\n", s.channels == 1 ? '5' : '6', s.width,
                      s.height);
    size_t olen = outfile ? strlen(outfile) : 0;
    if (olen > 4 && strcasecmp(outfile + olen - 4, ".png") == 0) {
        fmt_image pi = {.pixels = (uint8_t *)s.pixels, .width = s.width, .height = s.height,
                        .channels = s.channels};
        uint8_t *png = NULL;
        size_t n = 0;
        rc = fmt_png_encode(&pi, 6, &png, &n);
        if (rc == 0)
            rc = fmt_write_file_atomic(outfile, png, n);
        free(png);
        if (rc)
            fprintf(stderr, "shardc: cannot write %s: %s\n", outfile, fmt_strerror(rc));
    } else if (outfile) {
        size_t n = (size_t)hn + s.length;
        uint8_t *buf = malloc(n);
        rc = buf ? 0 : ENOMEM;
        if (buf) {
            memcpy(buf, head, (size_t)hn);
            memcpy(buf + hn, s.pixels, s.length);
            rc = fmt_write_file_atomic(outfile, buf, n);
            free(buf);
        }
        if (rc)
            fprintf(stderr, "shardc: cannot write %s: %s\n", outfile, fmt_strerror(rc));
    } else {
        if (fwrite(head, 1, (size_t)hn, stdout) != (size_t)hn ||
            fwrite(s.pixels, 1, s.length, stdout) != s.length || fflush(stdout) != 0) {
            rc = errno ? errno : EIO;
            fprintf(stderr, "shardc: cannot write to stdout: %s\n", strerror(rc));
        }
    }
    fmt_image_free(&re);
    free(owned);
    free(drawn);
    fmt_dataset_close(d);
    return rc ? SHC_EXIT_IO : differs ? SHC_EXIT_REJECTS : SHC_EXIT_OK;
}

int main(int argc, char **argv)
{
    shc_simd_from_env(getenv);          /* the environment's switch: the program applies it */
    if (argc < 2) {
        fputs(usage_main, stderr);
        return SHC_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(usage_main, stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        printf("shardc %s\n", SHARDC_VERSION);
        return 0;
    }
    static const struct {
        const char *name;
        int (*fn)(int, char **);
        const char *usage;
    } cmds[] = {{"build", cmd_build, shc_usage_build},
                {"info", cmd_info, usage_info},
                {"verify", cmd_verify, usage_verify},
                {"cat", cmd_cat, usage_cat},
                {"merge", cmd_merge, usage_merge}};
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        if (strcmp(cmd, cmds[i].name) == 0) {
            if (wants_help(argc - 1, argv + 1)) {
                fputs(cmds[i].usage, stdout);
                return 0;
            }
            return cmds[i].fn(argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "shardc: unknown command '%s'\n%s", cmd, usage_main);
    return SHC_EXIT_USAGE;
}
