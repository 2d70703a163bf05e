/* shardc - the dataset compiler's command line: build, info, verify, cat. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "augment.h"
#include "backend.h"
#include "raw.h"
#include "build.h"
#include "cli.h"
#include "inspect.h"
#include "dataset.h"
#include "merge.h"
#include "part.h"
#include "util.h"

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

static const char usage_build[] =
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
    "      --coco FILE         detection: COCO instances JSON; SRC is the image folder its\n"
    "                          file_names are relative to; boxes follow the geometry\n"
    "      --yolo DIR          detection: YOLO labels, DIR/D/S.txt for image SRC/D/S.EXT, one\n"
    "                          \"class cx cy w h\" line per box (needs --names)\n"
    "      --names FILE        YOLO class names, one per line (class i is line i + 1)\n"
    "      --skip-empty        detection: leave out images without a box (default: kept)\n"
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
    "      --aug SPEC          the augmentation, default " FMT_AUG_DEFAULT_SPEC "\n"
    "                          rrc=SMIN:SMAX[:RMIN:RMAX] random-resized-crop (area, aspect),\n"
    "                          flip[=P], jitter=S (or brightness=S,contrast=S,saturation=S)\n"
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
    "      --part auto         I and N from a Slurm job array (SLURM_ARRAY_TASK_ID, ..._MIN,\n"
    "                          ..._COUNT) or an MPI launcher (OMPI_COMM_WORLD_RANK/SIZE,\n"
    "                          PMI_RANK/PMI_SIZE, ...)\n"
    "\n"
    "exit status: 0 success, 1 finished with rejects (see OUT/rejects.tsv), 2 usage error,\n"
    "3 fatal I/O error (no manifest is left)\n";

static const char usage_info[] =
    "usage: shardc info OUT [--json] [--sample I] [--targets]\n"
    "  what the dataset directory OUT holds: samples, classes, shards, geometry, channel stats,\n"
    "  augmentation; with --sample I, one sample's label, shape, source file and the exact\n"
    "  augmentation parameters drawn for it (JSON keys source and params); with --targets, a\n"
    "  detection dataset's targets, one JSON line per sample (index, image_id, orig_size,\n"
    "  dropped, boxes [x1, y1, x2, y2] in the sample's pixels, labels, iscrowd, area)\n";
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
    "usage: shardc cat OUT INDEX [-o FILE] [--replay] [--boxes]\n"
    "  write sample INDEX of OUT as binary PPM (P6; P5 for gray) to stdout or FILE\n"
    "  --boxes: a detection dataset's boxes drawn on it, 1-pixel outlines, one colour per\n"
    "  category\n"
    "  --replay: render the sample again from its source file (an augmented one from its recorded\n"
    "  parameters) and write that instead; exit 1 if it differs from the stored pixels\n";

/* One line saying what is wrong, then where the usage is (the first line of the usage text). */
static int usage_error(const char *usage, const char *fmt, const char *arg)
{
    fprintf(stderr, "shardc: ");
    fprintf(stderr, fmt, arg);
    const char *nl = strchr(usage, '\n');
    fprintf(stderr, "\n%.*s\n(see --help)\n", nl ? (int)(nl - usage) : (int)strlen(usage), usage);
    return SHC_EXIT_USAGE;
}

/* "raw, hdf5, ..., bmp or jpeg": every backend compiled in. */
static void format_list(char *buf, size_t len)
{
    const char *const *n = fmt_backend_names();
    size_t k = 0, used = 0;
    while (n[k])
        k++;
    buf[0] = '\0';
    for (size_t i = 0; i < k && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i == 0 ? "" : i + 1 < k ? ", " :
                                 " or ", n[i]);
}

static int wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    return 0;
}

/* ---- build ---- */

enum {
    OPT_FORMAT = 256, OPT_LIST, OPT_SIZE, OPT_FIT, OPT_SHORT, OPT_MAXSIDE, OPT_GRAY, OPT_SHARDSIZE,
    OPT_SHARDSAMPLES, OPT_ALIGN, OPT_MAXPIX, OPT_MAXIMGSIDE, OPT_MAXFILE, OPT_STRICT, OPT_RESUME,
    OPT_FORCE, OPT_DRYRUN, OPT_PROGRESS, OPT_NOPROGRESS, OPT_JSON, OPT_AUGMENT, OPT_AUG, OPT_SEED,
    OPT_QUALITY, OPT_COMPRESS, OPT_CROP, OPT_FILTER, OPT_SHRINK, OPT_PART, OPT_JPEGFRACTION,
    OPT_WDS, OPT_WDSLABEL, OPT_ARCBUF, OPT_COCO, OPT_YOLO, OPT_NAMES, OPT_SKIPEMPTY
};

int shc_build_args(int argc, char **argv, shc_build_opts *out)
{
    static const struct option opts[] = {
        {"output", required_argument, 0, 'o'},      {"threads", required_argument, 0, 'j'},
        {"format", required_argument, 0, OPT_FORMAT}, {"list", required_argument, 0, OPT_LIST},
        {"size", required_argument, 0, OPT_SIZE},   {"fit", required_argument, 0, OPT_FIT},
        {"short-side", required_argument, 0, OPT_SHORT},
        {"max-side", required_argument, 0, OPT_MAXSIDE}, {"gray", no_argument, 0, OPT_GRAY},
        {"grey", no_argument, 0, OPT_GRAY},
        {"shard-size", required_argument, 0, OPT_SHARDSIZE},
        {"shard-samples", required_argument, 0, OPT_SHARDSAMPLES},
        {"align", required_argument, 0, OPT_ALIGN},
        {"max-pixels", required_argument, 0, OPT_MAXPIX},
        {"max-image-side", required_argument, 0, OPT_MAXIMGSIDE},
        {"max-file-size", required_argument, 0, OPT_MAXFILE},
        {"strict", no_argument, 0, OPT_STRICT},     {"resume", no_argument, 0, OPT_RESUME},
        {"force", no_argument, 0, OPT_FORCE},       {"dry-run", no_argument, 0, OPT_DRYRUN},
        {"progress", no_argument, 0, OPT_PROGRESS},
        {"no-progress", no_argument, 0, OPT_NOPROGRESS},
        {"json", no_argument, 0, OPT_JSON},         {"augment", required_argument, 0, OPT_AUGMENT},
        {"aug", required_argument, 0, OPT_AUG},     {"seed", required_argument, 0, OPT_SEED},
        {"quality", required_argument, 0, OPT_QUALITY},
        {"compress", required_argument, 0, OPT_COMPRESS},
        {"jpeg-fraction", required_argument, 0, OPT_JPEGFRACTION},
        {"crop", required_argument, 0, OPT_CROP},   {"filter", required_argument, 0, OPT_FILTER},
        {"shrink-on-load", no_argument, 0, OPT_SHRINK},
        {"part", required_argument, 0, OPT_PART},
        {"wds", no_argument, 0, OPT_WDS},           {"wds-label", required_argument, 0, OPT_WDSLABEL},
        {"archive-buffer", required_argument, 0, OPT_ARCBUF},
        {"coco", required_argument, 0, OPT_COCO},   {"yolo", required_argument, 0, OPT_YOLO},
        {"names", required_argument, 0, OPT_NAMES},
        {"skip-empty", no_argument, 0, OPT_SKIPEMPTY},
        {0, 0, 0, 0}};
    shc_build_opts o;
    shc_build_opts_init(&o);
    o.progress = isatty(STDERR_FILENO);
    const char *aug_spec = NULL;
    long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    o.threads = nproc > 0 ? (unsigned)nproc : 1;
    int have_size = 0, have_short = 0, have_fit = 0;
    uint64_t v;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:j:", opts, NULL)) != -1) {
        switch (c) {
        case 'o': o.out = optarg; break;
        case 'j':
            if (shc_parse_uint(optarg, 1, 1024, &v))
                return usage_error(usage_build, "bad thread count '%s' (1..1024)", optarg);
            o.threads = (unsigned)v;
            break;
        case OPT_FORMAT:
            if (!(o.backend = fmt_backend_find(optarg))) {
                char known[128], why[512];
                format_list(known, sizeof known);
                snprintf(why, sizeof why, "unknown --format '%.300s' (%s)", optarg, known);
                return usage_error(usage_build, "%s", why);
            }
            break;
        case OPT_QUALITY:
            if (shc_parse_uint(optarg, 1, 100, &v))
                return usage_error(usage_build, "bad --quality '%s' (1..100)", optarg);
            o.quality = (int)v;
            break;
        case OPT_LIST: o.list = optarg; break;
        case OPT_WDS: o.wds = 1; break;
        case OPT_WDSLABEL: o.wds_label = optarg; break;
        case OPT_ARCBUF:
            if (shc_parse_size(optarg, &o.archive_buffer) || o.archive_buffer == 0)
                return usage_error(usage_build, "bad --archive-buffer '%s' (e.g. 512MiB)", optarg);
            break;
        case OPT_SIZE:
            if (shc_parse_wxh(optarg, &o.r.geom.width, &o.r.geom.height))
                return usage_error(usage_build,
                                   "bad --size '%s' (expected WxH or N, e.g. 224x224 or 224)",
                                   optarg);
            have_size = 1;
            break;
        case OPT_FIT: {
            int f = fmt_fit_parse(optarg);
            if (f < 0)
                return usage_error(usage_build, "bad --fit '%s' (crop, pad or stretch)", optarg);
            o.r.geom.fit = (fmt_fit)f;
            have_fit = 1;
            break;
        }
        case OPT_SHORT:
            if (shc_parse_uint(optarg, 1, 65535, &v))
                return usage_error(usage_build, "bad --short-side '%s' (1..65535)", optarg);
            o.r.geom.short_side = (uint32_t)v;
            have_short = 1;
            break;
        case OPT_MAXSIDE:
            if (shc_parse_uint(optarg, 1, 65535, &v))
                return usage_error(usage_build, "bad --max-side '%s' (1..65535)", optarg);
            o.r.geom.max_side = (uint32_t)v;
            break;
        case OPT_CROP:
            if (shc_parse_wxh(optarg, &o.r.geom.crop_w, &o.r.geom.crop_h))
                return usage_error(usage_build,
                                   "bad --crop '%s' (expected WxH or N, e.g. 224x224 or 224)",
                                   optarg);
            break;
        case OPT_FILTER:
            if (fmt_filter_parse(optarg, &o.r.geom.filter))
                return usage_error(usage_build,
                                   "bad --filter '%s' (nearest, box, bilinear, hamming, bicubic "
                                   "or lanczos)", optarg);
            break;
        case OPT_SHRINK: o.r.geom.shrink_on_load = 1; break;
        case OPT_GRAY: o.r.channels = 1; break;
        case OPT_SHARDSIZE:
            if (shc_parse_size(optarg, &o.shard_bytes) || o.shard_bytes < 4096)
                return usage_error(usage_build, "bad --shard-size '%s' (e.g. 1GiB, at least 4KiB)",
                                   optarg);
            break;
        case OPT_SHARDSAMPLES:
            if (shc_parse_uint(optarg, 1, UINT64_MAX, &o.shard_samples))
                return usage_error(usage_build, "bad --shard-samples '%s'", optarg);
            break;
        case OPT_ALIGN:
            if (shc_parse_size(optarg, &v) || v < FMT_RAW_MIN_ALIGN || v > FMT_RAW_MAX_ALIGN ||
                (v & (v - 1)))
                return usage_error(usage_build, "bad --align '%s' (a power of two, 256..1MiB)",
                                   optarg);
            o.align = (uint32_t)v;
            break;
        case OPT_MAXPIX:
            if (shc_parse_uint(optarg, 1, UINT64_MAX, &o.r.limits.max_pixels))
                return usage_error(usage_build, "bad --max-pixels '%s'", optarg);
            break;
        case OPT_MAXIMGSIDE:
            if (shc_parse_uint(optarg, 1, 65535, &v))
                return usage_error(usage_build, "bad --max-image-side '%s' (1..65535)", optarg);
            o.r.limits.max_side = (uint32_t)v;
            break;
        case OPT_MAXFILE:
            if (shc_parse_size(optarg, &o.r.max_file_bytes) || o.r.max_file_bytes == 0)
                return usage_error(usage_build, "bad --max-file-size '%s'", optarg);
            break;
        case OPT_STRICT: o.strict = 1; break;
        case OPT_RESUME: o.resume = 1; break;
        case OPT_FORCE: o.force = 1; break;
        case OPT_DRYRUN: o.dry_run = 1; break;
        case OPT_PROGRESS: o.progress = 1; break;
        case OPT_NOPROGRESS: o.progress = 0; break;
        case OPT_JSON: o.json = 1; break;
        case OPT_AUGMENT:
            if (shc_parse_uint(optarg, 1, FMT_AUG_MAX_VARIANTS, &v))
                return usage_error(usage_build, "bad --augment '%s' (1..1024 variants)", optarg);
            o.r.augment = (uint32_t)v;
            break;
        case OPT_AUG: aug_spec = optarg; break;
        case OPT_JPEGFRACTION: {
            char *end;
            errno = 0;
            double f = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(f >= 0 && f <= 1))
                return usage_error(usage_build, "bad --jpeg-fraction '%s' (0..1)", optarg);
            o.jpeg_fraction = f;
            break;
        }
        case OPT_COMPRESS: {
            fmt_msg why;
            if (fmt_codec_parse(optarg, &o.compress, &why))
                return usage_error(usage_build, "bad --compress: %s", why.text);
            break;
        }
        case OPT_PART: {
            char perr[512];
            const char *from = NULL;
            if (strcmp(optarg, "auto") == 0
                    ? shc_part_from_env(getenv, &o.part, &from, perr, sizeof perr) != 0
                    : shc_part_parse(optarg, &o.part, perr, sizeof perr) != 0)
                return usage_error(usage_build, "%s", perr);
            break;
        }
        case OPT_COCO: o.coco = optarg; break;
        case OPT_YOLO: o.yolo = optarg; break;
        case OPT_NAMES: o.names = optarg; break;
        case OPT_SKIPEMPTY: o.skip_empty = 1; break;
        case OPT_SEED:
            if (shc_parse_uint(optarg, 0, UINT64_MAX, &o.r.seed))
                return usage_error(usage_build, "bad --seed '%s' (an unsigned 64-bit integer)",
                                   optarg);
            break;
        default: fputs(usage_build, stderr); return SHC_EXIT_USAGE;
        }
    }
    if (optind >= argc)
        return usage_error(usage_build, "%s", "no SRC given");
    if (!o.out && !o.dry_run)
        return usage_error(usage_build, "%s", "no output directory given (-o OUT)");
    if (have_size && have_short)
        return usage_error(usage_build, "%s", "--size and --short-side exclude each other");
    if (have_size && o.r.geom.max_side)
        return usage_error(usage_build, "%s", "--size and --max-side exclude each other");
    if (have_fit && !have_size)
        return usage_error(usage_build, "%s", "--fit needs --size");
    if (o.jpeg_fraction > 0 && strcmp(o.backend->name, "raw") != 0)
        return usage_error(usage_build, "--jpeg-fraction is for --format raw (%s: use --format "
                           "jpeg for JPEG only)", o.backend->name);
    /* the JPEG mix picks samples by their index within the shard set being written, which a part
     * does not know for the whole dataset: its parts would not merge into a one-machine build */
    if (o.jpeg_fraction > 0 && o.part.count > 0)
        return usage_error(usage_build, "%s", "--jpeg-fraction cannot be combined with --part");
    if (o.compress.codec && strcmp(o.backend->name, "raw") != 0)
        return usage_error(usage_build, "--compress is for --format raw (%s stores its own way)",
                           o.backend->name);
    if (have_size && o.r.geom.crop_w)
        return usage_error(usage_build, "%s",
                           "--size and --crop exclude each other (--size crops already)");
    if (o.wds && o.list)
        return usage_error(usage_build, "%s", "--wds and --list exclude each other");
    if (o.wds_label && !o.wds)
        return usage_error(usage_build, "%s", "--wds-label needs --wds");
    if (o.resume && o.force)
        return usage_error(usage_build, "%s", "--resume and --force exclude each other");
    if (aug_spec && !o.r.augment)
        return usage_error(usage_build, "%s", "--aug needs --augment K");
    if (o.coco && o.yolo)
        return usage_error(usage_build, "%s", "--coco and --yolo exclude each other");
    if (o.yolo && !o.names)
        return usage_error(usage_build, "%s", "--yolo needs --names FILE (the class names)");
    if (o.names && !o.yolo)
        return usage_error(usage_build, "%s", "--names needs --yolo");
    if (o.skip_empty && !o.coco && !o.yolo)
        return usage_error(usage_build, "%s", "--skip-empty needs --coco or --yolo");
    if ((o.coco || o.yolo) && (o.list || o.wds))
        return usage_error(usage_build, "%s", "--coco/--yolo list the images themselves (no "
                           "--list or --wds)");
    if ((o.coco || o.yolo) && o.r.augment)
        return usage_error(usage_build, "%s", "--augment cannot be combined with --coco/--yolo "
                           "(pre-augmented variants do not carry boxes)");

    if (o.r.augment) {
        if (!have_size)
            return usage_error(usage_build, "%s", "--augment needs --size WxH (the variants' size)");
        fmt_msg msg = {{0}};
        if (fmt_aug_parse(aug_spec ? aug_spec : FMT_AUG_DEFAULT_SPEC, &o.r.aug, &msg) != 0)
            return usage_error(usage_build, "bad --aug: %s", msg.text);
    }
    o.r.geom.mode = have_size ? FMT_GEOM_SIZE : have_short ? FMT_GEOM_SHORT_SIDE : FMT_GEOM_KEEP;
    o.srcs = argv + optind;
    o.nsrc = (size_t)(argc - optind);
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
            "%d:%02d, %" PRIu64 " rejected%s", p->done, p->total,
            p->total ? 100.0 * (double)p->done / (double)p->total : 100.0, rate, (int)eta / 60,
            (int)eta % 60, p->rejects, p->final ? "\n" : "");
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
               "\"images_per_s\": %.1f, \"threads\": %u, \"out\": \"%s\"", s->samples,
               s->classes, s->shards, s->bytes, s->inputs, s->rejects, s->warnings, s->seconds,
               s->images_per_s, s->threads, s->out);
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

static int cmd_build(int argc, char **argv)
{
    shc_build_opts o;
    int rc = shc_build_args(argc, argv, &o);
    if (rc)
        return rc;
    shc_cli_out out = {.progress = o.progress, .json = o.json, .strict = o.strict};
    shc_build_cb cb;
    shc_cli_callbacks(&cb, &out);
    return shc_build_exit(shc_build(&o, &cb));
}

/* ---- info ---- */


/* A JSON string. Names on disk are bytes: valid UTF-8 is written as it is, and each byte that is
 * not part of valid UTF-8 as the escaped lone surrogate U+DC00 + byte (Python's
 * "surrogateescape": os.fsencode(json.loads(...)) gives the original bytes back). */
static void print_json_string(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    putchar('"');
    while (*s) {
        int n = fmt_utf8_len(s, 4);
        if (n == 0) {
            printf("\\udc%02x", *s++);
        } else if (n > 1) {
            fwrite(s, 1, (size_t)n, stdout);
            s += n;
        } else if (*s == '"' || *s == '\\') {
            printf("\\%c", *s++);
        } else if (*s < 0x20 || *s == 0x7f) {
            printf("\\u%04x", *s++);
        } else {
            putchar(*s++);
        }
    }
    putchar('"');
}

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
    if (json) {
        printf("{\"index\": %" PRIu64 ", \"label\": %d, \"class\": ", idx, (int)s.label);
        print_json_string(cls);
        printf(", \"height\": %u, \"width\": %u, \"channels\": %u, \"hash\": \"%016" PRIx64
               "\", \"source\": %" PRIu64 ", \"path\": ", s.height, s.width, s.channels, s.hash,
               s.source);
        if (path)
            print_json_string(path);
        else
            printf("null");
        if (aug)
            printf(", \"variant\": %u, \"params\": {\"source_size\": [%u, %u], \"crop\": [%u, %u, "
                   "%u, %u], \"flip\": %s, \"brightness\": %.9g, \"contrast\": %.9g, "
                   "\"saturation\": %.9g}}\n", p.variant, p.src_w, p.src_h, p.crop_x, p.crop_y,
                   p.crop_w, p.crop_h, p.flip ? "true" : "false", (double)p.brightness,
                   (double)p.contrast, (double)p.saturation);
        else
            printf(", \"variant\": null, \"params\": null}\n");
    } else {
        printf("sample:    %" PRIu64 "\nlabel:     %d (%s)\nshape:     %ux%u, %u channel(s)\n"
               "hash:      %016" PRIx64 "\nsource:    %" PRIu64 " (%s)\n", idx, (int)s.label, cls,
               s.width, s.height, s.channels, s.hash, s.source, path ? path : "path unknown");
        if (aug)
            printf("variant:   %u\ncrop:      %ux%u at (%u, %u) of %ux%u\nflip:      %s\n"
                   "colour:    brightness %.4f, contrast %.4f, saturation %.4f\n", p.variant,
                   p.crop_w, p.crop_h, p.crop_x, p.crop_y, p.src_w, p.src_h, p.flip ? "yes" : "no",
                   (double)p.brightness, (double)p.contrast, (double)p.saturation);
    }
    free(path);
    return 0;
}

/* Every sample's target as a JSON line (float32 values printed so that they read back exactly). */
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
               "\"dropped\": %u, \"boxes\": [", i, t.image_id, t.orig_width, t.orig_height,
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
        printf("]}\n");
    }
    return 0;
}

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
            return usage_error(usage_info, "unknown option '%s'", argv[i]);
        else if (!dir)
            dir = argv[i];
        else
            return usage_error(usage_info, "unexpected argument '%s'", argv[i]);
    }
    if (!dir)
        return usage_error(usage_info, "%s", "no dataset directory given");
    uint64_t sidx = 0;
    if (sample && shc_parse_uint(sample, 0, UINT64_MAX, &sidx))
        return usage_error(usage_info, "bad --sample '%s'", sample);
    fmt_dataset *d;
    int rc = open_dataset(dir, &d);
    if (rc)
        return rc;
    if (sample) {
        rc = sample_info(dir, d, sidx, json);
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
            print_json_string(m->classes[i]);
        }
        printf("], \"num_classes\": %zu, \"backend\": ", m->nclasses);
        print_json_string(m->backend);
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
            print_json_string(m->shards[i].file);
            printf(", \"first\": %" PRIu64 ", \"samples\": %" PRIu64 ", \"bytes\": %" PRIu64 "}",
                   m->shards[i].first, m->shards[i].samples, m->shards[i].bytes);
        }
        printf("], \"tool\": ");
        print_json_string(m->tool);
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

static void print_mismatch(void *ctx, const char *line)
{
    (void)ctx;
    printf("mismatch: %s\n", line);
}

/* Every shard checked before any library parses it (size and whole-file hash against the
 * manifest, then the backend's own pre-check), then opened and compared with its manifest
 * entry, every sample checked against the manifest's description and re-hashed; then the
 * manifest's fields against each other and the shards (inspect.c). Each problem is one line on
 * stdout ("damaged: ..." or "mismatch: ..."); exit 1 if there is any. */
static int cmd_verify(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-')
        return usage_error(usage_verify, "%s", "expected one dataset directory");
    const char *dir = argv[1];
    fmt_manifest m;
    fmt_msg msg = {{0}};
    int rc = fmt_manifest_read(dir, &m, &msg);
    if (rc) {
        fprintf(stderr, "shardc: cannot read the manifest of %s: %s\n", dir, fmt_reason(&msg, rc));
        return rc == ENOENT ? SHC_EXIT_USAGE : SHC_EXIT_REJECTS;
    }
    const fmt_backend *be = fmt_backend_find(m.backend);
    if (!be || be->version != m.backend_version) {
        fprintf(stderr, "shardc: %s: backend '%s' version %u is not supported\n", dir, m.backend,
                m.backend_version);
        fmt_manifest_free(&m);
        return SHC_EXIT_REJECTS;
    }
    uint64_t damaged = 0, checked = 0, pixels = 0, shard_fp = m.fingerprint;
    size_t mismatches = 0, unread = 0;
    uint64_t (*sum)[3] = calloc(m.nshards + 1, sizeof *sum);
    uint64_t (*sumsq)[3] = calloc(m.nshards + 1, sizeof *sumsq);
    if (!sum || !sumsq) {
        free(sum);
        free(sumsq);
        fmt_manifest_free(&m);
        return SHC_EXIT_IO;
    }
    for (size_t k = 0; k < m.nshards; k++) {
        const fmt_manifest_shard *ms = &m.shards[k];
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
            free(data);
            fmt_manifest_free(&m);
            return SHC_EXIT_IO;
        }
        void *s = NULL;
        fmt_msg smsg = {{0}};
        rc = 0;
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
            rc = fmt_shard_check_info(&m, k, h, &smsg);
            if (h->fingerprint != m.fingerprint)
                shard_fp = h->fingerprint;
            memcpy(sum[k], h->sum, sizeof sum[k]);
            memcpy(sumsq[k], h->sumsq, sizeof sumsq[k]);
        }
        if (rc) {
            /* the whole shard is unusable: name its samples as a range */
            if (ms->samples)
                printf("damaged: samples %" PRIu64 "-%" PRIu64 " (%s): %s\n", ms->first,
                       ms->first + ms->samples - 1, path, fmt_reason(&smsg, rc));
            else
                printf("damaged: %s: %s\n", path, fmt_reason(&smsg, rc));
            damaged += ms->samples ? ms->samples : 1;
            unread++;
        } else {
            for (uint64_t i = 0; i < h->samples; i++) {
                checked++;
                fmt_sample e;
                fmt_msg emsg = {{0}};
                int crc = be->r_get(s, i, &e);
                if (crc == 0) {
                    e.index = ms->first + i;
                    pixels += (uint64_t)e.height * e.width;
                    if ((crc = fmt_manifest_check_sample(&m, &e, &emsg)) != 0) {
                        printf("mismatch: %s\n", fmt_reason(&emsg, crc));
                        mismatches++;
                    }
                }
                crc = be->r_check(s, i);
                if (crc != 0) {
                    char file[1024];
                    if (!be->r_sample_path || be->r_sample_path(s, i, file, sizeof file) != 0)
                        snprintf(file, sizeof file, "%s, entry %" PRIu64, path, i);
                    printf("damaged: sample %" PRIu64 " (%s): %s\n", ms->first + i, file,
                           crc == FMT_EHASH ? "hash mismatch" : fmt_strerror(crc));
                    damaged++;
                }
            }
        }
        be->r_close(s);
        free(sdir);
        free(data);
        free(path);
    }
    /* the manifest as a whole; its stats only when every shard could be read */
    if (!unread)
        mismatches += shc_check_manifest(dir, &m, (const uint64_t(*)[3])sum,
                                         (const uint64_t(*)[3])sumsq, pixels, shard_fp,
                                         print_mismatch, NULL);
    free(sum);
    free(sumsq);
    if (damaged || mismatches)
        fprintf(stderr, "shardc: %s: %" PRIu64 " damaged sample(s), %zu manifest mismatch(es)\n",
                dir, damaged, mismatches);
    else
        fprintf(stderr, "shardc: %s: all %" PRIu64 " samples in %zu shard(s) verified\n", dir,
                checked, m.nshards);
    fmt_manifest_free(&m);
    return damaged || mismatches ? SHC_EXIT_REJECTS : SHC_EXIT_OK;
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
            return usage_error(usage_merge, "unknown option '%s'", argv[i]);
        else if (!dir)
            dir = argv[i];
        else
            return usage_error(usage_merge, "unexpected argument '%s'", argv[i]);
    }
    if (!dir)
        return usage_error(usage_merge, "%s", "no dataset directory given");
    char err[4096];
    shc_merge_result r;
    double t0 = shc_now();
    int rc = shc_merge(dir, &r, err, sizeof err);
    if (rc) {
        fprintf(stderr, "shardc: cannot merge %s: %s\n", dir, err);
        return rc == SHC_MERGE_ENOPARTS || rc == SHC_MERGE_EMISSING ||
                       rc == SHC_MERGE_EMISMATCH || rc == SHC_MERGE_EBUSY
                   ? SHC_EXIT_USAGE : SHC_EXIT_IO;
    }
    double dt = shc_now() - t0;
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

/* The outline of each box of t: the pixels whose squares the box's edges cross (columns
 * floor(x1) .. ceil(x2) - 1, rows likewise), in a colour of its category. */
static void draw_boxes(uint8_t *px, uint32_t w, uint32_t h, uint32_t ch, const fmt_target *t)
{
    static const uint8_t pal[8][3] = {{255, 40, 40}, {40, 255, 40}, {60, 120, 255}, {255, 220, 0},
                                      {255, 0, 255}, {0, 255, 255}, {255, 140, 0}, {255, 255, 255}};
    for (uint32_t k = 0; k < t->count; k++) {
        const float *b = t->boxes + 4 * (size_t)k;
        const uint8_t *c = pal[(uint64_t)t->labels[k] % 8];
        long x0 = (long)floorf(b[0]), y0 = (long)floorf(b[1]);
        long x1 = (long)ceilf(b[2]) - 1, y1 = (long)ceilf(b[3]) - 1;
        x0 = x0 < 0 ? 0 : x0;
        y0 = y0 < 0 ? 0 : y0;
        x1 = x1 >= (long)w ? (long)w - 1 : x1;
        y1 = y1 >= (long)h ? (long)h - 1 : y1;
        for (long y = y0; y <= y1; y++)
            for (long x = x0; x <= x1; x++) {
                if (y != y0 && y != y1 && x != x0 && x != x1)
                    continue;
                uint8_t *p = px + ((size_t)y * w + (size_t)x) * ch;
                if (ch == 1)
                    p[0] = 255;
                else
                    memcpy(p, c, 3);
            }
    }
}

static int cmd_cat(int argc, char **argv)
{
    const char *dir = NULL, *index = NULL, *outfile = NULL;
    int replay = 0, boxes = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--boxes") == 0) {
            boxes = 1;
        } else if (strcmp(argv[i], "--replay") == 0) {
            replay = 1;
        } else if (strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--output") == 0) {
            if (++i >= argc)
                return usage_error(usage_cat, "%s", "-o needs a file name");
            outfile = argv[i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return usage_error(usage_cat, "unknown option '%s'", argv[i]);
        } else if (!dir) {
            dir = argv[i];
        } else if (!index) {
            index = argv[i];
        } else {
            return usage_error(usage_cat, "unexpected argument '%s'", argv[i]);
        }
    }
    uint64_t idx;
    if (!dir || !index)
        return usage_error(usage_cat, "%s", "expected OUT and INDEX");
    if (shc_parse_uint(index, 0, UINT64_MAX, &idx))
        return usage_error(usage_cat, "bad INDEX '%s'", index);
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
            fprintf(stderr, "shardc: cannot draw the boxes of sample %" PRIu64 " of %s: %s\n", idx,
                    dir, rc ? fmt_reason(&msg, rc) : strerror(ENOMEM));
            fmt_image_free(&re);
            free(owned);
            fmt_dataset_close(d);
            return rc == FMT_EINVAL ? SHC_EXIT_USAGE : SHC_EXIT_IO;
        }
        memcpy(drawn, s.pixels, s.length);
        draw_boxes(drawn, s.width, s.height, s.channels, &t);
        s.pixels = drawn;
    }
    char head[64];
    int hn = snprintf(head, sizeof head, "P%c\n%u %u\n255\n", s.channels == 1 ? '5' : '6', s.width,
                      s.height);
    if (outfile) {
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
    } cmds[] = {{"build", cmd_build, usage_build},
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
