/* cli.c - the `shardc build` command line (cli.h): its usage text, the argument parser, and the
 * callbacks that print a build. Shared by shardc (shardc.c) and shardc-mpi (shardc-mpi.c); not
 * part of the compiler library, since it prints. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <time.h>


const char shc_usage_build[] =
    "usage: shardc build SRC... -o OUT [options]\n"
    "\n"
    "SRC is a class-folder tree (each subfolder a class; sorted names give labels 0..K-1),\n"
    "or, with --list, the folder the list's paths are relative to. SRC may also be an archive\n"
    "(.tar, .tar.gz/.tgz, .tar.bz2, .tar.xz, .tar.zst, .zip), read in place as the tree it\n"
    "extracts into; a top-level NAME.tar member in it is class NAME (ImageNet's train tar).\n"
    "\n"
    "  -o, --output OUT        dataset directory to write (created if missing)\n"
    "      --format FMT        raw (default), hdf5, lmdb, or per-image sets png0, bmp, jpeg\n"
    "      --quality Q         JPEG quality for --format jpeg and --jpeg-fraction (default 90)\n"
    "      --jpeg-fraction P   raw: store about P (0..1) of the samples as JPEG at --quality,\n"
    "                          chosen by a hash of the sample index (formats/raw.md), decoded\n"
    "                          by the reader's workers: fewer bytes for CPU time\n"
    "      --compress C        raw: compress each sample on its own, C = lz4[:1..12] or\n"
    "                          zstd[:LEVEL] (default level 1; -7..-1 faster, up to 19 smaller)\n"
    "      --list FILE         list file: \"path label\" per line (ARCHIVE!MEMBER: a member)\n"
    "      --fields FILE       JSON lines {\"path\": P, \"fields\": {NAME: VALUE, ...}}: each\n"
    "                          input's fields (ints, floats, arrays of them, strings)\n"
    "      --coco FILE         detection: COCO instances JSON; SRC is the image folder its\n"
    "                          file_names are relative to; boxes follow the geometry\n"
    "      --yolo DIR          detection: YOLO labels, DIR/D/S.txt for image SRC/D/S.EXT, one\n"
    "                          \"class cx cy w h\" line per box or \"class x1 y1 x2 y2 ...\"\n"
    "                          per polygon (instance masks; needs --names)\n"
    "      --names FILE        YOLO class names, one per line (class i is line i + 1)\n"
    "      --kpt-shape K,D     YOLO pose: \"class cx cy w h\" then K keypoints of D values\n"
    "                          (2: x y; 3: x y visibility), as data.yaml's kpt_shape\n"
    "      --masks DIR         semantic segmentation: label-map PNGs (palette or grey),\n"
    "                          DIR/D/S.png for image SRC/D/S.EXT\n"
    "      --mask-suffix A:B   --masks: the map of image stem XA is stem XB (Cityscapes:\n"
    "                          _leftImg8bit:_gtFine_labelIds)\n"
    "      --ignore-index N    --masks: the label of padding (default 255)\n"
    "      --skip-empty        detection: leave out images without a box (default: kept);\n"
    "                          --masks: images without a label map (default: an error)\n"
    "      --wds               SRCs are WebDataset shards: members grouped by key, the image\n"
    "                          of each group a sample, in the shards' order\n"
    "      --wds-label L       the label of a --wds sample: cls (default: the .cls member),\n"
    "                          txt (the .txt member) or json:FIELD (an integer in the .json)\n"
    "      --archive-buffer SIZE  archive members read ahead of their turn at most (default\n"
    "                          512MiB; an archive not in path order is read again for the rest)\n"
    "      --short-side N      torchvision Resize(N): short side N (up or down), long side\n"
    "                          int(N * long / short)\n"
    "      --crop WxH          torchvision CenterCrop((H, W)) after the resize (zero-padded\n"
    "                          where the image is smaller); N is NxN, as CenterCrop(N)\n"
    "      --size WxH          fixed output size (N: NxN), with --fit crop|pad|stretch\n"
    "                          (default crop: Resize(short side covering WxH) then\n"
    "                          CenterCrop, so --size 224 is CenterCrop(224)(Resize(224)(img)))\n"
    "      --fit MODE          crop, pad (letterbox, zero border) or stretch\n"
    "      --max-side N        cap the long side at N (Resize's max_size with --short-side)\n"
    "                          (no geometry option: keep each image's own size)\n"
    "      --filter F          resize filter: bilinear (default, torchvision's), nearest, box,\n"
    "                          hamming, bicubic, lanczos; pixels equal Pillow's Image.resize\n"
    "      --shrink-on-load    decode JPEGs at a reduced DCT scale that still covers the\n"
    "                          resize (faster; pixels close to, not equal to, the exact ones)\n"
    "      --gray              store one channel (default: RGB)\n"
    "      --augment K         write K pre-augmented variants per image (needs --size)\n"
    "      --aug SPEC          the augmentation, default " SHC_AUG_DEFAULT_SPEC "\n"
    "                          rrc=SMIN:SMAX[:RMIN:RMAX] random-resized-crop (area, aspect),\n"
    "                          flip[=P], jitter=S (or brightness=S,contrast=S,saturation=S),\n"
    "                          rotate=D[:bilinear] (degrees), or affine=D:T:SMIN:SMAX:SH\n"
    "                          [:bilinear] (RandomAffine's degrees, translate, scale, shear),\n"
    "                          hue=H (0..0.5),\n"
    "                          gray[=P] (grayscale with probability P)\n"
    "      --seed S            seed of the augmentation draws (default 0)\n"
    "  -j, --threads N         worker threads (default: all cores)\n"
    "      --shard-size SIZE   bound on a shard's size, e.g. 512MiB (default 1GiB)\n"
    "      --shard-samples N   bound on samples per shard\n"
    "      --align N           raw: every payload at a multiple of N, a power of two 256..1MiB\n"
    "                          (default: packed, payloads of 64KiB and more page-aligned)\n"
    "      --max-pixels N      refuse images with more pixels (default 178956970)\n"
    "      --max-image-side N  refuse images with a longer side (default 32768)\n"
    "      --max-file-size SIZE  refuse input files larger than this (default 1GiB)\n"
    "      --strict            the first bad image aborts the build; images that decode\n"
    "                          with a warning (stored otherwise) count as bad\n"
    "      --resume            continue an interrupted build in OUT\n"
    "      --force             replace what OUT holds\n"
    "      --dry-run           report counts and projected size; write nothing\n"
    "      --progress, --no-progress   progress line (default: when stderr is a terminal)\n"
    "      --json              machine-readable summary on stdout\n"
    "      --part I/N          build part I of N (I counts from 0) into OUT/parts/IIIII-of-NNNNN:\n"
    "                          a contiguous slice of the sorted inputs; then shardc merge OUT\n"
    "      --staging DIR       OUT s3://BUCKET/PREFIX: shards wait for their upload in DIR\n"
    "                          (default: $SHARDREAD_CACHE/upload, else ~/.cache/shardread/upload)\n"
    "      --upload-part-size SIZE  OUT s3://: larger shards go up in parts of SIZE (multipart;\n"
    "                          default $SHARDC_UPLOAD_PART_SIZE, else 64MiB)\n"
    "      --upload-threads N  OUT s3://: shards uploaded at once, each on its own connection\n"
    "                          (1..16, default 4); at most N + 1 shards wait in the staging folder\n"
    "      --part auto         I and N from a Slurm job array (SLURM_ARRAY_TASK_ID, ..._MIN,\n"
    "                          ..._COUNT) or an MPI launcher (OMPI_COMM_WORLD_RANK/SIZE,\n"
    "                          PMI_RANK/PMI_SIZE, ...)\n"
    "\n"
    "exit status: 0 success, 1 finished with rejects (see OUT/rejects.tsv), 2 usage error,\n"
    "3 fatal I/O error (no manifest is left)\n";

const char *shc_cli_cache(void)
{
    const char *c = getenv("SHARDREAD_CACHE");
    return c && *c ? c : NULL;
}

int shc_cli_part_size(uint64_t *size)
{
    shc_msg why;
    if (shc_part_size_from_env(getenv, size, &why) == 0)
        return 0;
    fprintf(stderr, "shardc: %s\n", why.text);
    return -1;
}

/* One line saying what is wrong, then where the usage is (the first line of the usage text). */
int shc_usage_error(const char *usage, const char *fmt, const char *arg)
{
    fprintf(stderr, "shardc: ");
    fprintf(stderr, fmt, arg);
    const char *nl = strchr(usage, '\n');
    fprintf(stderr, "\n%.*s\n(see --help)\n", nl ? (int)(nl - usage) : (int)strlen(usage), usage);
    return SHC_EXIT_USAGE;
}

static int build_error(const char *fmt, const char *arg)
{
    return shc_usage_error(shc_usage_build, fmt, arg);
}

double shc_cli_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ---- build ---- */

/* getopt_long's table, from the library's table of flags (shc_build_flags): a flag with a
 * one-letter form returns that letter, any other FLAG_BASE + its row (an alias: its target's
 * row, so that an abbreviation of both names stays one flag, as getopt_long takes it). */
enum { FLAG_BASE = 256, FLAG_MAX = 96 };

static size_t flag_row(const shc_build_flag *f, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(f[i].name, name) == 0)
            return i;
    return n;
}

static void getopt_table(const shc_build_flag *f, size_t n, struct option *opts, char *shorts)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t row = f[i].alias_of ? flag_row(f, n, f[i].alias_of) : i;
        opts[i] = (struct option){f[i].name, f[i].has_value ? required_argument : no_argument,
                                  NULL, f[i].short_name ? f[i].short_name
                                                        : FLAG_BASE + (int)row};
        if (f[i].short_name) {
            shorts[k++] = f[i].short_name;
            if (f[i].has_value)
                shorts[k++] = ':';
        }
    }
    opts[n] = (struct option){0, 0, 0, 0};
    shorts[k] = '\0';
}

/* The row getopt_long's c stands for (n: none). */
static size_t flag_of(const shc_build_flag *f, size_t n, int c)
{
    if (c >= FLAG_BASE)
        return (size_t)(c - FLAG_BASE) < n ? (size_t)(c - FLAG_BASE) : n;
    for (size_t i = 0; i < n; i++)
        if (f[i].short_name && f[i].short_name == c)
            return i;
    return n;
}

/* Each flag through shc_build_set, then the checks between flags (shc_build_check); then the
 * program's defaults from its environment (the library reads none): --part auto, the crash
 * tests, and for an s3:// OUT the cache root and the multipart part size. */
static int build_args(int argc, char **argv, shc_build_opts *o)
{
    static struct option opts[FLAG_MAX + 1];
    static char shorts[2 * FLAG_MAX + 1];
    size_t n;
    const shc_build_flag *f = shc_build_flags(&n);
    if (n > FLAG_MAX) {
        fprintf(stderr, "shardc: %zu build flags, more than the %d the command line holds\n", n,
                FLAG_MAX);
        return SHC_EXIT_USAGE;
    }
    getopt_table(f, n, opts, shorts);
    shc_msg why = {{0}};
    if (isatty(STDERR_FILENO))
        shc_build_set(o, "progress", NULL, NULL);
    long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    char num[32];
    snprintf(num, sizeof num, "%ld", nproc < 1 ? 1L : nproc > 1024 ? 1024L : nproc);
    shc_build_set(o, "threads", num, NULL);
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, shorts, opts, NULL)) != -1) {
        size_t row = flag_of(f, n, c);
        if (row == n) {
            fputs(shc_usage_build, stderr);
            return SHC_EXIT_USAGE;
        }
        if (strcmp(f[row].name, "part") == 0 && strcmp(optarg, "auto") == 0) {
            shc_part p;
            const char *from = NULL;
            int rc = shc_part_from_env(getenv, &p, &from, &why);
            if (rc)
                return build_error("%s", why.text[0] ? why.text : shc_strerror(rc));
            shc_build_set_part(o, &p);
            continue;
        }
        if (shc_build_set(o, f[row].name, f[row].has_value ? optarg : NULL, &why))
            return build_error("%s", why.text);
    }
    shc_build_sources(o, argv + optind, (size_t)(argc - optind));
    if (shc_build_check(o, &why))
        return build_error("%s", why.text);
    shc_crash_opts crash;
    shc_crash_from_env(getenv, &crash);
    shc_build_set_crash(o, &crash);
    shc_build_view v;
    shc_build_view_get(o, &v);
    if (v.remote_out) {
        shc_build_set_cache(o, shc_cli_cache());
        uint64_t ps;
        if (shc_cli_part_size(&ps) != 0)
            return SHC_EXIT_USAGE;
        if (!v.merge.part_size && ps) {
            snprintf(num, sizeof num, "%" PRIu64, ps);
            shc_build_set(o, "upload-part-size", num, NULL);
        }
    }
    return 0;
}

int shc_build_args(int argc, char **argv, shc_build_opts **out)
{
    *out = NULL;
    shc_build_opts *o = shc_build_opts_new();
    if (!o) {
        fprintf(stderr, "shardc: out of memory\n");
        return SHC_EXIT_IO;
    }
    int rc = build_args(argc, argv, o);
    if (rc) {
        shc_build_opts_free(o);
        return rc;
    }
    *out = o;
    return 0;
}

/* ---- printing a build: shc_build's callbacks ---- */

/* A line printed while a progress line shows first erases it. */
static const char *erase(const shc_cli_out *out)
{
    return out->progress && out->showing ? "\r\033[K" : "";
}

static void on_message(void *ctx, const char *text)
{
    fprintf(stderr, "%sshardc: %s\n", erase(ctx), text);
}

static void on_reject(void *ctx, const char *path, const char *reason)
{
    shc_cli_out *out = ctx;
    fprintf(stderr, "%sshardc: cannot decode %s: %s (%s)\n", out->progress ? "\r\033[K" : "",
            path, reason, out->strict ? "aborting: --strict" : "skipped");
}

static void on_warning(void *ctx, const char *path, const char *text)
{
    fprintf(stderr, "%sshardc: warning: %s: %s (stored; see warnings.tsv)\n", erase(ctx), path,
            text);
}

static void on_progress(void *ctx, const shc_progress *p)
{
    shc_cli_out *out = ctx;
    double rate = p->seconds > 0 ? (double)p->done / p->seconds : 0;
    double eta = rate > 0 ? (double)(p->total - p->done) / rate : 0;
    fprintf(stderr, "\r\033[Kshardc: %" PRIu64 "/%" PRIu64 " images (%.0f%%), %.0f img/s, ETA "
            "%d:%02d, %" PRIu64 " rejected", p->done, p->total,
            p->total ? 100.0 * (double)p->done / (double)p->total : 100.0, rate, (int)eta / 60,
            (int)eta % 60, p->rejects);
    if (p->uploading) {
        /* an s3:// OUT: what went up of the finished shards, and when those will be up */
        char b1[32], b2[32], b3[32];
        double up = p->seconds > 0 ? (double)p->sent / p->seconds : 0;
        double left = up > 0 && p->to_send > p->sent ? (double)(p->to_send - p->sent) / up : 0;
        fprintf(stderr, "; uploaded %s of %s, %s/s, ETA %d:%02d",
                shc_human_size(p->sent, b1, sizeof b1), shc_human_size(p->to_send, b2, sizeof b2),
                shc_human_size((uint64_t)up, b3, sizeof b3), (int)left / 60, (int)left % 60);
    }
    if (p->final)
        fputc('\n', stderr);
    out->showing = !p->final;
}

static void on_summary(void *ctx, const shc_summary *s)
{
    shc_cli_out *out = ctx;
    char hb[32];
    fprintf(stderr, "shardc: wrote %" PRIu64 " samples (%zu classes) in %zu shard(s), %s, to %s; "
            "%zu rejected%s; %zu with warnings%s; %.2f s, %.0f images/s\n", s->samples,
            s->classes, s->shards, shc_human_size(s->bytes, hb, sizeof hb), s->out, s->rejects,
            s->rejects ? " (see rejects.tsv)" : "", s->warnings,
            s->warnings ? " (see warnings.tsv)" : "", s->seconds, s->images_per_s);
    if (s->targets)
        fprintf(stderr, "shardc: %" PRIu64 " boxes stored, %" PRIu64 " dropped by the geometry "
                "(no area left), %" PRIu64 " images without annotations left out\n", s->boxes,
                s->boxes_dropped, s->skipped_empty);
    if (out->json) {
        printf("{\"samples\": %" PRIu64 ", \"classes\": %zu, \"shards\": %zu, \"bytes\": %" PRIu64
               ", \"inputs\": %zu, \"rejects\": %zu, \"warnings\": %zu, \"seconds\": %.3f, "
               "\"images_per_s\": %.1f, \"threads\": %u, \"out\": ", s->samples, s->classes,
               s->shards, s->bytes, s->inputs, s->rejects, s->warnings, s->seconds,
               s->images_per_s, s->threads);
        shc_json_string(stdout, s->out);
        if (s->targets)
            printf(", \"boxes\": %" PRIu64 ", \"boxes_dropped\": %" PRIu64
                   ", \"skipped_empty\": %" PRIu64, s->boxes, s->boxes_dropped, s->skipped_empty);
        printf("}\n");
    }
}

static void on_projection(void *ctx, const shc_projection *p)
{
    shc_cli_out *out = ctx;
    char b1[32], b2[32];
    fprintf(stderr,
            "shardc: dry run: %zu inputs in %zu classes, %" PRIu64 " would be stored, %" PRIu64
            " unreadable, %zu skipped while listing\n"
            "shardc: projected output %s in %" PRIu64 " shard(s), from %s of input (%.1fx)\n",
            p->inputs, p->classes, p->samples, p->unreadable, p->skipped,
            shc_human_size(p->bytes, b1, sizeof b1), p->shards,
            shc_human_size(p->input_bytes, b2, sizeof b2),
            p->input_bytes ? (double)p->bytes / (double)p->input_bytes : 0.0);
    if (p->encoded)
        fprintf(stderr, "shardc: (%" PRIu64 " of the inputs encoded to measure the stored size: "
                "%.3f of the uncompressed estimate)\n", p->encoded, p->scale);
    if (out->json)
        printf("{\"dry_run\": true, \"inputs\": %zu, \"classes\": %zu, \"samples\": %" PRIu64
               ", \"unreadable\": %" PRIu64 ", \"projected_bytes\": %" PRIu64
               ", \"shards\": %" PRIu64 ", \"shard_bytes\": %" PRIu64 ", \"input_bytes\": %" PRIu64
               ", \"encoded\": %" PRIu64 "}\n", p->inputs, p->classes, p->samples, p->unreadable,
               p->bytes, p->shards, p->shard_bytes, p->input_bytes, p->encoded);
}

void shc_cli_callbacks(shc_build_cb *cb, shc_cli_out *out)
{
    *cb = (shc_build_cb){.ctx = out, .message = on_message, .reject = on_reject,
                         .warning = on_warning,
                         .progress = out->progress ? on_progress : NULL, .summary = on_summary,
                         .projection = on_projection};
}
