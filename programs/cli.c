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

#include "augment.h"
#include "backend.h"
#include "json.h"
#include "part.h"
#include "raw.h"
#include "remote.h"
#include "util.h"

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
    "      --aug SPEC          the augmentation, default " FMT_AUG_DEFAULT_SPEC "\n"
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
    fmt_msg why;
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

static int build_error(const char *fmt, const char *arg)
{
    return shc_usage_error(shc_usage_build, fmt, arg);
}

/* ---- build ---- */

enum {
    OPT_FORMAT = 256, OPT_LIST, OPT_SIZE, OPT_FIT, OPT_SHORT, OPT_MAXSIDE, OPT_GRAY, OPT_SHARDSIZE,
    OPT_SHARDSAMPLES, OPT_ALIGN, OPT_MAXPIX, OPT_MAXIMGSIDE, OPT_MAXFILE, OPT_STRICT, OPT_RESUME,
    OPT_FORCE, OPT_DRYRUN, OPT_PROGRESS, OPT_NOPROGRESS, OPT_JSON, OPT_AUGMENT, OPT_AUG, OPT_SEED,
    OPT_QUALITY, OPT_COMPRESS, OPT_CROP, OPT_FILTER, OPT_SHRINK, OPT_PART, OPT_JPEGFRACTION,
    OPT_WDS, OPT_WDSLABEL, OPT_ARCBUF, OPT_COCO, OPT_YOLO, OPT_NAMES, OPT_SKIPEMPTY,
    OPT_FIELDS, OPT_STAGING, OPT_PARTSIZE, OPT_UPTHREADS, OPT_KPTSHAPE, OPT_MASKS, OPT_MASKSUFFIX,
    OPT_IGNORE
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
        {"kpt-shape", required_argument, 0, OPT_KPTSHAPE},
        {"masks", required_argument, 0, OPT_MASKS},
        {"mask-suffix", required_argument, 0, OPT_MASKSUFFIX},
        {"ignore-index", required_argument, 0, OPT_IGNORE},
        {"fields", required_argument, 0, OPT_FIELDS},
        {"staging", required_argument, 0, OPT_STAGING},
        {"upload-part-size", required_argument, 0, OPT_PARTSIZE},
        {"upload-threads", required_argument, 0, OPT_UPTHREADS},
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
                return build_error("bad thread count '%s' (1..1024)", optarg);
            o.threads = (unsigned)v;
            break;
        case OPT_FORMAT:
            if (!(o.backend = fmt_backend_find(optarg))) {
                char known[128], why[512];
                format_list(known, sizeof known);
                snprintf(why, sizeof why, "unknown --format '%.300s' (%s)", optarg, known);
                return build_error("%s", why);
            }
            break;
        case OPT_QUALITY:
            if (shc_parse_uint(optarg, 1, 100, &v))
                return build_error("bad --quality '%s' (1..100)", optarg);
            o.quality = (int)v;
            break;
        case OPT_LIST: o.list = optarg; break;
        case OPT_WDS: o.wds = 1; break;
        case OPT_WDSLABEL: o.wds_label = optarg; break;
        case OPT_ARCBUF:
            if (shc_parse_size(optarg, &o.archive_buffer) || o.archive_buffer == 0)
                return build_error("bad --archive-buffer '%s' (e.g. 512MiB)", optarg);
            break;
        case OPT_SIZE:
            if (shc_parse_wxh(optarg, &o.r.geom.width, &o.r.geom.height))
                return build_error("bad --size '%s' (expected WxH or N, e.g. 224x224 or 224)",
                                   optarg);
            have_size = 1;
            break;
        case OPT_FIT: {
            int f = fmt_fit_parse(optarg);
            if (f < 0)
                return build_error("bad --fit '%s' (crop, pad or stretch)", optarg);
            o.r.geom.fit = (fmt_fit)f;
            have_fit = 1;
            break;
        }
        case OPT_SHORT:
            if (shc_parse_uint(optarg, 1, 65535, &v))
                return build_error("bad --short-side '%s' (1..65535)", optarg);
            o.r.geom.short_side = (uint32_t)v;
            have_short = 1;
            break;
        case OPT_MAXSIDE:
            if (shc_parse_uint(optarg, 1, 65535, &v))
                return build_error("bad --max-side '%s' (1..65535)", optarg);
            o.r.geom.max_side = (uint32_t)v;
            break;
        case OPT_CROP:
            if (shc_parse_wxh(optarg, &o.r.geom.crop_w, &o.r.geom.crop_h))
                return build_error("bad --crop '%s' (expected WxH or N, e.g. 224x224 or 224)",
                                   optarg);
            break;
        case OPT_FILTER:
            if (fmt_filter_parse(optarg, &o.r.geom.filter))
                return build_error("bad --filter '%s' (nearest, box, bilinear, hamming, bicubic "
                                   "or lanczos)", optarg);
            break;
        case OPT_SHRINK: o.r.geom.shrink_on_load = 1; break;
        case OPT_GRAY: o.r.channels = 1; break;
        case OPT_SHARDSIZE:
            if (shc_parse_size(optarg, &o.shard_bytes) || o.shard_bytes < 4096)
                return build_error("bad --shard-size '%s' (e.g. 1GiB, at least 4KiB)", optarg);
            break;
        case OPT_SHARDSAMPLES:
            if (shc_parse_uint(optarg, 1, UINT64_MAX, &o.shard_samples))
                return build_error("bad --shard-samples '%s'", optarg);
            break;
        case OPT_ALIGN:
            if (shc_parse_size(optarg, &v) || v < FMT_RAW_MIN_ALIGN || v > FMT_RAW_MAX_ALIGN ||
                (v & (v - 1)))
                return build_error("bad --align '%s' (a power of two, 256..1MiB)", optarg);
            o.align = (uint32_t)v;
            break;
        case OPT_MAXPIX:
            if (shc_parse_uint(optarg, 1, UINT64_MAX, &o.r.limits.max_pixels))
                return build_error("bad --max-pixels '%s'", optarg);
            break;
        case OPT_MAXIMGSIDE:
            if (shc_parse_uint(optarg, 1, 65535, &v))
                return build_error("bad --max-image-side '%s' (1..65535)", optarg);
            o.r.limits.max_side = (uint32_t)v;
            break;
        case OPT_MAXFILE:
            if (shc_parse_size(optarg, &o.r.max_file_bytes) || o.r.max_file_bytes == 0)
                return build_error("bad --max-file-size '%s'", optarg);
            break;
        case OPT_STAGING: o.staging = optarg; break;
        case OPT_PARTSIZE:
            if (shc_parse_size(optarg, &o.upload_part_size) != 0 || o.upload_part_size == 0)
                return build_error("--upload-part-size: expected a size, e.g. 64MiB, not '%s'",
                                   optarg);
            break;
        case OPT_UPTHREADS:
            if (shc_parse_uint(optarg, 1, 16, &v))
                return build_error("--upload-threads: expected 1..16, not '%s'", optarg);
            o.upload_threads = (unsigned)v;
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
                return build_error("bad --augment '%s' (1..1024 variants)", optarg);
            o.r.augment = (uint32_t)v;
            break;
        case OPT_AUG: aug_spec = optarg; break;
        case OPT_JPEGFRACTION: {
            char *end;
            errno = 0;
            double f = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(f >= 0 && f <= 1))
                return build_error("bad --jpeg-fraction '%s' (0..1)", optarg);
            o.jpeg_fraction = f;
            break;
        }
        case OPT_COMPRESS: {
            fmt_msg why;
            if (fmt_codec_parse(optarg, &o.compress, &why))
                return build_error("bad --compress: %s", why.text);
            break;
        }
        case OPT_PART: {
            fmt_msg why = {{0}};
            const char *from = NULL;
            int rc = strcmp(optarg, "auto") == 0
                         ? shc_part_from_env(getenv, &o.part, &from, &why)
                         : shc_part_parse(optarg, &o.part, &why);
            if (rc)
                return build_error("%s", fmt_reason(&why, rc));
            break;
        }
        case OPT_COCO: o.coco = optarg; break;
        case OPT_FIELDS: o.fields = optarg; break;
        case OPT_YOLO: o.yolo = optarg; break;
        case OPT_NAMES: o.names = optarg; break;
        case OPT_SKIPEMPTY: o.skip_empty = 1; break;
        case OPT_KPTSHAPE: {
            unsigned k, d;
            char tail;
            if (sscanf(optarg, "%u,%u%c", &k, &d, &tail) != 2 || k < 1 || k > 1024 ||
                (d != 2 && d != 3))
                return build_error("bad --kpt-shape '%s' (K,D: 1..1024 keypoints of 2 or 3 "
                                   "values)", optarg);
            o.kpt_k = k;
            o.kpt_d = d;
            break;
        }
        case OPT_MASKS: o.masks = optarg; break;
        case OPT_MASKSUFFIX:
            if (!strchr(optarg, ':'))
                return build_error("bad --mask-suffix '%s' (IMAGE_SUFFIX:MAP_SUFFIX)", optarg);
            o.mask_suffix = optarg;
            break;
        case OPT_IGNORE:
            if (shc_parse_uint(optarg, 0, 65535, &v))
                return build_error("bad --ignore-index '%s' (0..65535)", optarg);
            o.ignore_index = (uint32_t)v;
            break;
        case OPT_SEED:
            if (shc_parse_uint(optarg, 0, UINT64_MAX, &o.r.seed))
                return build_error("bad --seed '%s' (an unsigned 64-bit integer)", optarg);
            break;
        default: fputs(shc_usage_build, stderr); return SHC_EXIT_USAGE;
        }
    }
    if (optind >= argc)
        return build_error("%s", "no SRC given");
    if (!o.out && !o.dry_run)
        return build_error("%s", "no output directory given (-o OUT)");
    if (have_size && have_short)
        return build_error("%s", "--size and --short-side exclude each other");
    if (have_size && o.r.geom.max_side)
        return build_error("%s", "--size and --max-side exclude each other");
    if (have_fit && !have_size)
        return build_error("%s", "--fit needs --size");
    if (o.jpeg_fraction > 0 && strcmp(o.backend->name, "raw") != 0)
        return build_error("--jpeg-fraction is for --format raw (%s: use --format "
                           "jpeg for JPEG only)", o.backend->name);
    /* the JPEG mix picks samples by their index within the shard set being written, which a part
     * does not know for the whole dataset: its parts would not merge into a one-machine build */
    if (o.jpeg_fraction > 0 && o.part.count > 0)
        return build_error("%s", "--jpeg-fraction cannot be combined with --part");
    if (o.compress.codec && strcmp(o.backend->name, "raw") != 0)
        return build_error("--compress is for --format raw (%s stores its own way)",
                           o.backend->name);
    if (have_size && o.r.geom.crop_w)
        return build_error("%s", "--size and --crop exclude each other (--size crops already)");
    if (o.wds && o.list)
        return build_error("%s", "--wds and --list exclude each other");
    if (o.wds_label && !o.wds)
        return build_error("%s", "--wds-label needs --wds");
    if (o.resume && o.force)
        return build_error("%s", "--resume and --force exclude each other");
    if (aug_spec && !o.r.augment)
        return build_error("%s", "--aug needs --augment K");
    if (o.coco && o.yolo)
        return build_error("%s", "--coco and --yolo exclude each other");
    if (o.masks && (o.coco || o.yolo))
        return build_error("%s", "--masks (label maps) excludes --coco and --yolo");
    if (o.kpt_k && !o.yolo)
        return build_error("%s", "--kpt-shape needs --yolo");
    if ((o.mask_suffix || o.ignore_index != 255) && !o.masks)
        return build_error("%s", "--mask-suffix and --ignore-index need --masks");
    if (o.yolo && !o.names)
        return build_error("%s", "--yolo needs --names FILE (the class names)");
    if (o.names && !o.yolo)
        return build_error("%s", "--names needs --yolo");
    if (o.skip_empty && !o.coco && !o.yolo && !o.masks)
        return build_error("%s", "--skip-empty needs --coco, --yolo or --masks");
    if ((o.coco || o.yolo || o.masks) && (o.list || o.wds))
        return build_error("%s", "--coco/--yolo list the images themselves (no "
                           "--list or --wds)");
    if ((o.coco || o.yolo || o.masks) && o.r.augment)
        return build_error("%s", "--augment cannot be combined with --coco/--yolo "
                           "(pre-augmented variants do not carry boxes)");

    if (o.r.augment) {
        if (!have_size)
            return build_error("%s", "--augment needs --size WxH (the variants' size)");
        fmt_msg msg = {{0}};
        if (fmt_aug_parse(aug_spec ? aug_spec : FMT_AUG_DEFAULT_SPEC, &o.r.aug, &msg) != 0)
            return build_error("bad --aug: %s", msg.text);
    }
    /* the environment sets the program's defaults for an s3:// OUT (cache root, part size) and
     * its crash tests; the library reads no environment */
    shc_crash_from_env(getenv, &o.crash);
    if (o.out && rmt_is_url(o.out)) {
        o.cache = shc_cli_cache();
        uint64_t ps;
        if (shc_cli_part_size(&ps) != 0)
            return SHC_EXIT_USAGE;
        if (!o.upload_part_size)
            o.upload_part_size = ps;
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
        fmt_json_string(stdout, s->out);
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
