/* mksample_main.c - shardc-mksample's command line: a class-folder dataset through mks_generate
 * (mksample.c), or with --coco detection samples through mks_coco_generate (mksample_coco.c).
 */
#include "mksample.h"
#include "mksample_coco.h"

#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static const char usage_text[] =
    "usage: shardc-mksample OUT [options]\n"
    "Write a synthetic image dataset: OUT/<class>/NNNNN.jpg|png|bmp, one class per folder.\n"
    "\n"
    "  --classes N       number of classes, 1..16 (default 4)\n"
    "  --per-class M     valid images per class (default 24)\n"
    "  --seed S          generator seed (default 1); the same options give the same bytes\n"
    "  --min-side A      smallest image side in pixels (default 48)\n"
    "  --max-side B      largest image side in pixels (default 160)\n"
    "  --no-broken       do not add the broken files (broken-*.jpg/png/bmp)\n"
    "  --photo           photo-like JPEGs (quality 90) for benchmarks, each its own size: long\n"
    "                    side 360..640, aspect 1..1.5, a third portrait\n"
    "  --list FILE       also write FILE: \"class/file label\" per valid image\n"
    "  --coco FILE       detection instead: --per-class M PNGs OUT/NNNNNN.png (ids 1..M) with\n"
    "                    1..4 shapes each, every fifth none (categories rectangle, ellipse,\n"
    "                    frame, cross: ids 1..4), sides --min-side..--max-side, and their\n"
    "                    boxes as COCO instances JSON in FILE\n"
    "  --shapes N        with --coco: 1..N shapes per image instead of 1..4 (COCO averages\n"
    "                    7.3 objects per image: --shapes 16 gives about 6.8)\n"
    "  --polygons        with --coco: each shape's outline as COCO polygons too (instance\n"
    "                    masks: the rectangle, a 24-point ellipse, the frame's 4 and the\n"
    "                    cross's 2 bars); the same images and boxes\n"
    "  --quiet           no summary line\n"
    "  -h, --help        this text\n";

static int usage_error(const char *fmt, const char *arg)
{
    fputs("shardc-mksample: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\n", stderr);
    fputs(usage_text, stderr);
    return 2;
}

/* Whole decimal number in 0..max, nothing else. */
static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > max)
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    enum { OPT_CLASSES = 256, OPT_PER_CLASS, OPT_SEED, OPT_MIN_SIDE, OPT_MAX_SIDE, OPT_NO_BROKEN,
           OPT_PHOTO, OPT_LIST, OPT_QUIET, OPT_COCO, OPT_SHAPES,
           OPT_POLYGONS };
    static const struct option longopts[] = {
        { "classes", required_argument, NULL, OPT_CLASSES },
        { "per-class", required_argument, NULL, OPT_PER_CLASS },
        { "seed", required_argument, NULL, OPT_SEED },
        { "min-side", required_argument, NULL, OPT_MIN_SIDE },
        { "max-side", required_argument, NULL, OPT_MAX_SIDE },
        { "no-broken", no_argument, NULL, OPT_NO_BROKEN },
        { "photo", no_argument, NULL, OPT_PHOTO },
        { "list", required_argument, NULL, OPT_LIST },
        { "quiet", no_argument, NULL, OPT_QUIET },
        { "coco", required_argument, NULL, OPT_COCO },
        { "shapes", required_argument, NULL, OPT_SHAPES },
        { "polygons", no_argument, NULL, OPT_POLYGONS },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    mks_opts o;
    mks_opts_init(&o);
    int quiet = 0, polygons = 0;
    const char *coco = NULL;
    unsigned shapes = 4;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        uint64_t v = 0;
        switch (c) {
        case 'h':
            fputs(usage_text, stdout);
            return 0;
        case OPT_CLASSES:
        case OPT_PER_CLASS:
        case OPT_MIN_SIDE:
        case OPT_MAX_SIDE:
            if (parse_u64(optarg, UINT32_MAX, &v))
                return usage_error("invalid number '%s'", optarg);
            if (c == OPT_CLASSES)
                o.classes = (unsigned)v;
            else if (c == OPT_PER_CLASS)
                o.per_class = (unsigned)v;
            else if (c == OPT_MIN_SIDE)
                o.min_side = (unsigned)v;
            else
                o.max_side = (unsigned)v;
            break;
        case OPT_SEED:
            if (parse_u64(optarg, UINT64_MAX, &v))
                return usage_error("invalid seed '%s'", optarg);
            o.seed = v;
            break;
        case OPT_NO_BROKEN:
            o.broken = 0;
            break;
        case OPT_PHOTO:
            o.photo = 1;
            break;
        case OPT_LIST:
            o.list_path = optarg;
            break;
        case OPT_QUIET:
            quiet = 1;
            break;
        case OPT_COCO:
            coco = optarg;
            break;
        case OPT_POLYGONS:
            polygons = 1;
            break;
        case OPT_SHAPES:
            if (parse_u64(optarg, 1000, &v) || v == 0)
                return usage_error("--shapes needs a number of shapes from 1 to 1000, not '%s'",
                                   optarg);
            shapes = (unsigned)v;
            break;
        case ':':
            return usage_error("option '%s' needs a value", argv[optind - 1]);
        default:
            return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return usage_error("%s", optind >= argc ? "missing OUT directory" : "more than one OUT");
    const char *out = argv[optind];
    const char *why = mks_opts_error(&o);
    if (why)
        return usage_error("%s", why);

    if (coco) {
        fmt_msg m = {{0}};
        if (mks_coco_generate(out, coco, o.per_class, o.seed, o.min_side, o.max_side, shapes,
                              polygons, &m) != 0) {
            fprintf(stderr, "shardc-mksample: %s\n", m.text);
            return 1;
        }
        if (!quiet)
            printf("mksample: wrote %u detection images to %s, their boxes to %s\n", o.per_class,
                   out, coco);
        return 0;
    }
    mks_report r;
    int rc = mks_generate(out, &o, &r);
    if (rc) {
        fprintf(stderr, "shardc-mksample: %s\n", r.msg.text);
        return 1;
    }
    if (!quiet)
        printf("mksample: wrote %u images in %u classes (+%u broken) to %s\n", r.images, r.classes,
               r.broken, out);
    return 0;
}
