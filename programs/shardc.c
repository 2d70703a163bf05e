/* shardc - the dataset compiler's command line: build, info, verify, cat. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "shardread.h"
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

/* What msg says of the failure rc, else rc's name. */
static const char *reason(const shc_msg *msg, int rc)
{
    return msg->text[0] ? msg->text : shc_strerror(rc);
}

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
    if (asprintf(&p, "%s/manifest.json", dir) < 0)
        return 0;
    int ok = access(p, F_OK) == 0;
    free(p);
    return ok;
}

static int open_dataset(const char *dir, shr_dataset **d)
{
    shr_msg msg = {{0}};
    int rc = shr_dataset_open(d, dir, SHR_ACCESS_MMAP, &msg);
    if (rc) {
        fprintf(stderr, "shardc: %s\n", msg.text);
        /* usage error only when there is no dataset at all; a missing shard is damage */
        return rc == ENOENT && !has_manifest(dir) ? SHC_EXIT_USAGE : SHC_EXIT_REJECTS;
    }
    return 0;
}

/* Sample idx's metadata into *s: 0, or SHC_EXIT_USAGE after naming the dataset's size. */
static int get_sample(const char *dir, const shr_dataset *d, uint64_t idx, shr_sample *s)
{
    if (shr_dataset_sample(d, idx, s, NULL) == 0)
        return 0;
    shr_dataset_info info;
    shr_dataset_get_info(d, &info);
    fprintf(stderr, "shardc: %s has %" PRIu64 " samples; no sample %" PRIu64 "\n", dir,
            info.samples, idx);
    return SHC_EXIT_USAGE;
}

/* shardc info OUT --sample I: one sample's label, shape, provenance and augmentation. */
static int sample_info(const char *dir, shr_dataset *d, uint64_t idx, int json)
{
    shr_sample s;
    int rc = get_sample(dir, d, idx, &s);
    if (rc)
        return rc;
    const char *cls = s.label >= 0 && s.label <= UINT32_MAX
                      ? shr_dataset_class(d, (uint32_t)s.label) : NULL;
    cls = cls ? cls : "";
    shc_sample_record r;
    shc_msg msg = {{0}};
    if ((rc = shc_sample_record_get(dir, idx, &r, &msg)) != 0) {
        fprintf(stderr, "shardc: %s\n", msg.text);
        return SHC_EXIT_REJECTS;
    }
    const char *path = r.path;
    const shc_aug_record p = r.aug;
    int aug = r.augmented;
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
               "\", \"source\": %" PRIu64 ", \"path\": ", s.height, s.width, s.channels, r.hash,
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
               s.width, s.height, s.channels, r.hash, s.source, path ? path : "path unknown");
        if (aug)
            printf("variant:   %u\ncrop:      %ux%u at (%u, %u) of %ux%u\nflip:      %s\n"
                   "rotate:    %s\naffine:    %s\n"
                   "colour:    brightness %.4f, contrast %.4f, saturation %.4f, hue %s%s\n",
                   p.variant, p.crop_w, p.crop_h, p.crop_x, p.crop_y, p.src_w, p.src_h,
                   p.flip ? "yes" : "no", rot, aff, (double)p.brightness, (double)p.contrast,
                   (double)p.saturation, hue, p.gray ? ", grayscale" : "");
    }
    shc_sample_record_free(&r);
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

/* The segmentation extension of sample i's target (t: its boxes; the raw format's "Target
 * record, version 2") as JSON members: "size" [height, width], "masks" (runs, row-major),
 * "keypoints" ([x, y, v] per keypoint), "label_map" ([value, run] pairs). 0, ENOMEM, or the
 * dataset's error with msg saying which. */
static int print_segm(const shr_dataset *d, uint64_t i, const shr_target *t, shr_msg *msg)
{
    uint32_t K = 0, w = 0, h = 0;
    const float *kps = NULL;
    int has_masks = 0, map = shr_dataset_has_label_maps(d);
    int rc = shr_dataset_segm(d, i, &K, &kps, &has_masks, &w, &h, NULL, 0, msg);
    if (rc)
        return rc;
    size_t npix = (size_t)w * h;
    printf(", \"size\": [%u, %u]", h, w);
    if (K) {
        printf(", \"keypoints\": [");
        for (uint32_t k = 0; k < t->count; k++) {
            printf("%s[", k ? ", " : "");
            for (uint32_t j = 0; j < K; j++) {
                const float *p = kps + 3 * ((size_t)k * K + j);
                printf("%s[%.9g, %.9g, %.9g]", j ? ", " : "", (double)p[0], (double)p[1],
                       (double)p[2]);
            }
            printf("]");
        }
        printf("]");
    }
    if (has_masks) {
        size_t cap = npix * t->count;
        uint8_t *masks = malloc(cap ? cap : 1);
        if (!masks)
            return ENOMEM;
        if ((rc = shr_dataset_segm(d, i, NULL, NULL, NULL, NULL, NULL, masks, cap, msg)) != 0) {
            free(masks);
            return rc;
        }
        printf(", \"masks\": [");
        for (uint32_t k = 0; k < t->count; k++) {
            printf("%s", k ? ", " : "");
            print_runs(masks + npix * k, NULL, npix);
        }
        printf("]");
        free(masks);
    }
    if (map) {
        uint16_t *buf = malloc(2 * (npix ? npix : 1));
        if (!buf)
            return ENOMEM;
        printf(", \"label_map\": ");
        rc = shr_dataset_label_map(d, i, NULL, NULL, NULL, buf, 2 * npix, 2, msg);
        if (rc == 0)
            print_runs(NULL, buf, npix);
        free(buf);
    }
    return rc;
}

/* The name of a field type (SHR_FIELD_*), as the manifest's schema writes it. */
static const char *field_type_name(uint32_t type)
{
    switch (type) {
    case SHR_FIELD_INT:
        return "int";
    case SHR_FIELD_FLOAT:
        return "float";
    case SHR_FIELD_STR:
        return "str";
    case SHR_FIELD_BYTES:
        return "bytes";
    }
    return "unknown";
}

/* The dataset's number of fields. */
static uint32_t field_count(const shr_dataset *d)
{
    uint32_t n = 0;
    while (shr_dataset_field_def(d, n, NULL, NULL, NULL) == 0)
        n++;
    return n;
}

/* A dataset's fields schema as a JSON array of {"name", "type", "count"}. */
static void print_field_schema(const shr_dataset *d)
{
    printf("[");
    const char *name;
    uint32_t type, count;
    for (uint32_t k = 0; shr_dataset_field_def(d, k, &name, &type, &count) == 0; k++) {
        printf("%s{\"name\": ", k ? ", " : "");
        shc_json_string(stdout, name);
        printf(", \"type\": \"%s\", \"count\": %u}", field_type_name(type), count);
    }
    printf("]");
}

/* Sample i's fields as the members of a JSON object ("name": value, ...): ints and floats (a
 * vector as an array; a float that is not finite as null), text as a string, bytes as a string
 * of hex digits. */
static int print_fields(const shr_dataset *d, uint64_t i, uint32_t nfields, shr_msg *msg)
{
    shr_field v[64];
    int rc = shr_dataset_fields(d, i, v, 64, msg);
    if (rc)
        return rc;
    for (uint32_t k = 0; k < nfields; k++) {
        const uint8_t *p = v[k].data;
        const char *name;
        uint32_t count;
        shr_dataset_field_def(d, k, &name, NULL, &count);
        printf("%s", k ? ", " : "");
        shc_json_string(stdout, name);
        printf(": ");
        if (v[k].type == SHR_FIELD_STR) {
            shc_json_bytes(stdout, p, v[k].count);
        } else if (v[k].type == SHR_FIELD_BYTES) {
            putchar('"');
            for (uint32_t j = 0; j < v[k].count; j++)
                printf("%02x", p[j]);
            putchar('"');
        } else {
            int vec = count > 0;
            printf("%s", vec ? "[" : "");
            for (uint32_t j = 0; j < v[k].count; j++) {
                uint64_t u = 0;
                for (int b = 7; b >= 0; b--)      /* little-endian */
                    u = u << 8 | p[8 * (size_t)j + (size_t)b];
                printf("%s", j ? ", " : "");
                if (v[k].type == SHR_FIELD_INT) {
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
static int print_targets(const char *dir, const shr_dataset *d)
{
    shr_dataset_info info;
    shr_dataset_targets tg;
    shr_dataset_get_info(d, &info);
    shr_dataset_get_targets(d, &tg);
    uint32_t nfields = field_count(d);
    for (uint64_t i = 0; i < info.samples; i++) {
        shr_target t;
        shr_msg msg = {{0}};
        int rc = shr_dataset_target(d, i, &t, &msg);
        if (rc) {
            fprintf(stderr, "shardc: %s: sample %" PRIu64 ": %s\n", dir, i, msg.text);
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
        if (tg.record_version > 1 && (rc = print_segm(d, i, &t, &msg)) != 0) {
            if (rc == ENOMEM) {
                fprintf(stderr, "shardc: %s: sample %" PRIu64 ": out of memory\n", dir, i);
                return ENOMEM;
            }
            fprintf(stderr, "shardc: %s: sample %" PRIu64 ": %s\n", dir, i, msg.text);
            return SHC_EXIT_REJECTS;
        }
        if (nfields) {
            printf(", \"fields\": {");
            if ((rc = print_fields(d, i, nfields, &msg)) != 0) {
                printf("}}\n");
                fprintf(stderr, "shardc: %s: sample %" PRIu64 ": %s\n", dir, i, msg.text);
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
    shr_dataset *d;
    int rc = open_dataset(dir, &d);
    if (rc)
        return rc;
    if (sample) {
        rc = sample_info(dir, d, *sample, json);
        shr_dataset_close(d);
        return rc;
    }
    shr_dataset_info m;
    shr_dataset_get_info(d, &m);
    if (targets) {
        if (!m.targets) {
            fprintf(stderr, "shardc: %s has no targets (not a detection dataset)\n", dir);
            shr_dataset_close(d);
            return SHC_EXIT_USAGE;
        }
        rc = print_targets(dir, d);
        shr_dataset_close(d);
        return rc;
    }
    uint32_t nshards = shr_dataset_shard_count(d);
    shr_dataset_shard_info sh;
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < nshards; i++)
        if (shr_dataset_shard(d, i, &sh) == 0)
            bytes += sh.bytes;
    shr_dataset_targets tg;
    shr_dataset_get_targets(d, &tg);
    if (json) {
        printf("{\"samples\": %" PRIu64 ", \"classes\": [", m.samples);
        for (uint32_t i = 0; i < m.classes; i++) {
            if (i)
                printf(", ");
            shc_json_string(stdout, shr_dataset_class(d, i));
        }
        printf("], \"num_classes\": %u, \"backend\": ", m.classes);
        shc_json_string(stdout, m.format);
        printf(", \"inputs\": %" PRIu64 ", \"rejects\": %" PRIu64 ", \"bytes\": %" PRIu64
               ", \"channels\": %u, \"geometry\": {\"mode\": \"%s\", \"fit\": \"%s\", \"width\": %u, "
               "\"height\": %u, \"short_side\": %u, \"max_side\": %u}, \"sample_width\": %u, "
               "\"sample_height\": %u, \"mean\": [", m.inputs, m.rejects,
               bytes, m.channels, m.geom_mode, m.geom_fit,
               m.geom_width, m.geom_height, m.geom_short_side, m.geom_max_side,
               m.width, m.height);
        for (uint32_t c = 0; c < m.channels; c++)
            printf("%s%.4f", c ? ", " : "", m.mean[c]);
        printf("], \"std\": [");
        for (uint32_t c = 0; c < m.channels; c++)
            printf("%s%.4f", c ? ", " : "", m.std[c]);
        printf("], \"shards\": [");
        for (uint32_t i = 0; i < nshards; i++) {
            if (shr_dataset_shard(d, i, &sh) != 0)
                continue;
            printf("%s{\"file\": ", i ? ", " : "");
            shc_json_string(stdout, sh.file);
            printf(", \"first\": %" PRIu64 ", \"samples\": %" PRIu64 ", \"bytes\": %" PRIu64 "}",
                   sh.first, sh.samples, sh.bytes);
        }
        printf("], \"tool\": ");
        shc_json_string(stdout, m.tool);
        printf(", \"targets\": %s, \"fields\": ", m.targets ? "true" : "false");
        print_field_schema(d);
        printf("}\n");
    } else {
        char hb[32];
        printf("dataset:   %s (%s, written by %s)\n", dir, m.format, m.tool);
        printf("samples:   %" PRIu64 " from %" PRIu64 " inputs, %" PRIu64 " rejected\n", m.samples,
               m.inputs, m.rejects);
        printf("classes:   %u", m.classes);
        for (uint32_t i = 0; i < m.classes && i < 10; i++)
            printf("%s%s", i ? ", " : " (", shr_dataset_class(d, i));
        printf("%s\n", m.classes > 10 ? ", ...)" : m.classes ? ")" : "");
        if (strcmp(m.geom_mode, "size") == 0)
            printf("geometry:  %ux%u, fit %s, %u channel(s)\n", m.geom_width, m.geom_height,
                   m.geom_fit, m.channels);
        else if (strcmp(m.geom_mode, "short-side") == 0)
            printf("geometry:  short side %u%s, %u channel(s)\n", m.geom_short_side,
                   m.geom_max_side ? ", long side capped" : "", m.channels);
        else
            printf("geometry:  source sizes%s, %u channel(s)\n",
                   m.geom_max_side ? ", long side capped" : "", m.channels);
        char chain[256];
        shr_dataset_transform(d, chain, sizeof chain);
        printf("transform: %s\n", chain);
        if (m.targets)
            printf("targets:   %u categories (record version %u)\n", tg.categories,
                   tg.record_version);
        const char *name;
        uint32_t type, count, k;
        for (k = 0; shr_dataset_field_def(d, k, &name, &type, &count) == 0; k++) {
            printf("%s %s %s", k ? "," : "fields:   ", name, field_type_name(type));
            if (count)
                printf("[%u]", count);
        }
        if (k)
            printf("\n");
        printf("shards:    %u, %s\n", nshards, shc_human_size(bytes, hb, sizeof hb));
        printf("mean:     ");
        for (uint32_t c = 0; c < m.channels; c++)
            printf(" %.3f", m.mean[c]);
        printf("\nstd:      ");
        for (uint32_t c = 0; c < m.channels; c++)
            printf(" %.3f", m.std[c]);
        printf("\n");
    }
    shr_dataset_close(d);
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
    shc_msg why = {{0}};
    shc_merge_result r;
    double t0 = shc_cli_now();
    int rc = shc_merge(dir, &mo, &r, &why);
    if (rc) {
        fprintf(stderr, "shardc: cannot merge %s: %s\n", dir, reason(&why, rc));
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

/* The targets of sample idx drawn on a copy of its pixels px (w x h x ch, len bytes), into
 * *drawn: what (CAT_*) says. 0, or the exit status after a message. */
static int draw_targets(const char *dir, const shr_dataset *d, uint64_t idx, int what,
                        const uint8_t *px, uint32_t w, uint32_t h, uint32_t ch, size_t len,
                        uint8_t **drawn)
{
    shr_dataset_info info;
    shr_dataset_get_info(d, &info);
    shr_target t;
    shr_msg msg = {{0}};
    int rc = info.targets ? shr_dataset_target(d, idx, &t, &msg) : SHR_EINVAL;
    if (!info.targets)
        snprintf(msg.text, sizeof msg.text, "the dataset has no targets");
    *drawn = rc ? NULL : malloc(len ? len : 1);
    if (rc || !*drawn) {
        fprintf(stderr, "shardc: cannot draw the targets of sample %" PRIu64 " of %s: %s\n", idx,
                dir, rc ? msg.text : strerror(ENOMEM));
        return rc == SHR_EINVAL || rc == SHR_EFMT_INVAL ? SHC_EXIT_USAGE : SHC_EXIT_IO;
    }
    shr_dataset_targets tg;
    shr_dataset_get_targets(d, &tg);
    uint32_t K = 0, mw = 0, mh = 0;
    const float *kps = NULL;
    int has_masks = 0, map = shr_dataset_has_label_maps(d);
    if (shr_dataset_segm(d, idx, &K, &kps, &has_masks, &mw, &mh, NULL, 0, &msg) != 0)
        K = 0, has_masks = 0;
    const char *lacks = what & CAT_MASKS && !has_masks && !map ? "masks"
                        : what & CAT_KEYPOINTS && !K ? "keypoints" : NULL;
    memcpy(*drawn, px, len);
    uint8_t *masks = NULL;
    uint16_t *lmap = NULL;
    rc = lacks ? SHR_EINVAL : 0;
    if (!rc && what & CAT_MASKS) {
        size_t npix = (size_t)w * h;
        if (mw != w || mh != h)
            rc = SHR_ECORRUPT;
        else if (has_masks && !(masks = malloc(npix * t.count > 0 ? npix * t.count : 1)))
            rc = ENOMEM;
        else if (map && !(lmap = malloc(2 * (npix ? npix : 1))))
            rc = ENOMEM;
        if (!rc && masks)
            rc = shr_dataset_segm(d, idx, NULL, NULL, NULL, NULL, NULL, masks, npix * t.count,
                                  NULL);
        if (!rc && lmap)
            rc = shr_dataset_label_map(d, idx, NULL, NULL, NULL, lmap, 2 * npix, 2, NULL);
        if (!rc)
            shc_draw_masks(*drawn, w, h, ch, &t, masks, lmap, tg.ignore_index);
    }
    free(masks);
    free(lmap);
    if (rc) {
        fprintf(stderr, "shardc: cannot draw the %s of sample %" PRIu64 " of %s: %s\n",
                lacks ? lacks : "masks", idx, dir, lacks ? "the dataset has none"
                : shr_strerror(rc));
        free(*drawn);
        *drawn = NULL;
        return lacks ? SHC_EXIT_USAGE : SHC_EXIT_IO;
    }
    if (what & CAT_BOXES)
        shc_draw_boxes(*drawn, w, h, ch, &t);
    if (what & CAT_KEYPOINTS)
        shc_draw_keypoints(*drawn, w, h, ch, &t, K, kps, tg.skeleton, tg.edges);
    return 0;
}

static int cat_dir(const char *dir, uint64_t idx, const char *outfile, int replay, int boxes)
{
    shr_dataset *d;
    int rc = open_dataset(dir, &d);
    if (rc)
        return rc;
    shr_sample s;
    if ((rc = get_sample(dir, d, idx, &s)) != 0) {
        shr_dataset_close(d);
        return rc;
    }
    /* the stored pixels, copied out */
    uint8_t *stored = malloc(s.bytes ? (size_t)s.bytes : 1);
    rc = stored ? shr_dataset_read(d, idx, stored, s.bytes, NULL, NULL) : ENOMEM;
    if (rc) {
        fprintf(stderr, "shardc: cannot read sample %" PRIu64 " of %s: %s\n", idx, dir,
                shr_strerror(rc));
        free(stored);
        shr_dataset_close(d);
        return SHC_EXIT_REJECTS;
    }
    const uint8_t *px = stored;
    uint32_t w = s.width, h = s.height, ch = s.channels;
    size_t len = (size_t)s.bytes;
    shc_replayed re = {0};
    int differs = 0;
    if (replay) {
        shc_msg why = {{0}};
        if (shc_replay_sample(dir, idx, &re, &why) != 0) {
            fprintf(stderr, "shardc: %s\n", why.text);
            free(stored);
            shr_dataset_close(d);
            return SHC_EXIT_REJECTS;
        }
        size_t n = (size_t)re.width * re.height * re.channels;
        if (re.width != w || re.height != h || re.channels != ch ||
            memcmp(re.pixels, px, n) != 0) {
            size_t diff = 0;
            for (size_t k = 0; n == len && k < n; k++)
                diff += re.pixels[k] != px[k];
            fprintf(stderr, "shardc: replay of sample %" PRIu64 " from %s differs from the stored "
                    "pixels (%zu of %zu bytes)\n", idx, re.path, diff, n);
            differs = 1;
        } else {
            fprintf(stderr, "shardc: replay of sample %" PRIu64 " from %s matches the stored "
                    "pixels\n", idx, re.path);
        }
        px = re.pixels;
        len = n;
        w = re.width;
        h = re.height;
        ch = re.channels;
    }
    uint8_t *drawn = NULL;
    if (boxes) {
        rc = draw_targets(dir, d, idx, boxes, px, w, h, ch, len, &drawn);
        if (rc) {
            shc_replayed_free(&re);
            free(stored);
            shr_dataset_close(d);
            return rc;
        }
        px = drawn;
    }
    if (outfile) {
        rc = shc_write_image(outfile, px, w, h, ch);
        if (rc)
            fprintf(stderr, "shardc: cannot write %s: %s\n", outfile, shc_strerror(rc));
    } else {
        char head[64];
        int hn = snprintf(head, sizeof head, "P%c\n%u %u\n255\n", ch == 1 ? '5' : '6', w, h);
        if (fwrite(head, 1, (size_t)hn, stdout) != (size_t)hn ||
            fwrite(px, 1, len, stdout) != len || fflush(stdout) != 0) {
            rc = errno ? errno : EIO;
            fprintf(stderr, "shardc: cannot write to stdout: %s\n", strerror(rc));
        }
    }
    shc_replayed_free(&re);
    free(stored);
    free(drawn);
    shr_dataset_close(d);
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
