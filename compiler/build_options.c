/* build_options.c - a build's options behind their public handle (shardc.h): shc_build_set,
 * one flag of `shardc build` at a time, dispatched over the table of flags (build_options.def);
 * shc_build_check, the checks between flags; and the setters of what is not a flag. Every
 * refusal is worded as shardc's command line words it: the command line prints them as they
 * are. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "augment.h"
#include "backend.h"
#include "build.h"
#include "raw.h"
#include "remote.h"
#include "util.h"

/* ---- the flags that take more than a number ---- */

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

static int set_format(shc_build_opts *o, const char *v, fmt_msg *msg)
{
    const fmt_backend *b = fmt_backend_find(v);
    if (!b) {
        char known[128];
        format_list(known, sizeof known);
        return fmt_fail(msg, SHC_EINPUT, "unknown --format '%.300s' (%s)", v, known);
    }
    o->backend = b;
    return 0;
}

static int set_jpeg_fraction(shc_build_opts *o, const char *v, fmt_msg *msg)
{
    char *end;
    errno = 0;
    double f = strtod(v, &end);
    if (errno || end == v || *end || !(f >= 0 && f <= 1))
        return fmt_fail(msg, SHC_EINPUT, "bad --jpeg-fraction '%s' (0..1)", v);
    o->jpeg_fraction = f;
    return 0;
}

static int set_compress(shc_build_opts *o, const char *v, fmt_msg *msg)
{
    fmt_msg why = {{0}};
    fmt_codec_spec c;
    if (fmt_codec_parse(v, &c, &why))
        return fmt_fail(msg, SHC_EINPUT, "bad --compress: %s", why.text);
    o->compress = c;
    return 0;
}

static int set_kpt_shape(shc_build_opts *o, const char *v, fmt_msg *msg)
{
    unsigned k, d;
    char tail;
    if (sscanf(v, "%u,%u%c", &k, &d, &tail) != 2 || k < 1 || k > 1024 || (d != 2 && d != 3))
        return fmt_fail(msg, SHC_EINPUT, "bad --kpt-shape '%s' (K,D: 1..1024 keypoints of 2 or 3 "
                        "values)", v);
    o->kpt_k = k;
    o->kpt_d = d;
    return 0;
}

static int set_mask_suffix(shc_build_opts *o, const char *v, fmt_msg *msg)
{
    if (!strchr(v, ':'))
        return fmt_fail(msg, SHC_EINPUT, "bad --mask-suffix '%s' (IMAGE_SUFFIX:MAP_SUFFIX)", v);
    o->mask_suffix = v;
    return 0;
}

/* The geometry's mode follows the flags given: --size (whichever comes last), else
 * --short-side, else each image's own size; shc_build_check refuses the two together. */
static int set_short_side(shc_build_opts *o, const char *v, fmt_msg *msg)
{
    uint64_t n;
    if (shc_parse_uint(v, 1, 65535, &n))
        return fmt_fail(msg, SHC_EINPUT, "bad --short-side '%s' (1..65535)", v);
    o->r.geom.short_side = (uint32_t)n;
    o->given.short_side = 1;
    if (!o->given.size)
        o->r.geom.mode = FMT_GEOM_SHORT_SIDE;
    return 0;
}

/* WxH, or N for NxN (torchvision's int size), each 1..65535, into *w and *h: --size, --crop. */
static int wxh(const char *flag, const char *v, uint32_t *w, uint32_t *h, fmt_msg *msg)
{
    uint32_t pw, ph;
    if (shc_parse_wxh(v, &pw, &ph))
        return fmt_fail(msg, SHC_EINPUT, "bad --%s '%s' (expected WxH or N, e.g. 224x224 or 224)",
                        flag, v);
    *w = pw;
    *h = ph;
    return 0;
}

static int set_size(shc_build_opts *o, const char *v, fmt_msg *msg)
{
    int rc = wxh("size", v, &o->r.geom.width, &o->r.geom.height, msg);
    if (rc == 0) {
        o->given.size = 1;
        o->r.geom.mode = FMT_GEOM_SIZE;
    }
    return rc;
}

static int set_crop(shc_build_opts *o, const char *v, fmt_msg *msg)
{
    return wxh("crop", v, &o->r.geom.crop_w, &o->r.geom.crop_h, msg);
}

static int set_fit(shc_build_opts *o, const char *v, fmt_msg *msg)
{
    int f = fmt_fit_parse(v);
    if (f < 0)
        return fmt_fail(msg, SHC_EINPUT, "bad --fit '%s' (crop, pad or stretch)", v);
    o->r.geom.fit = (fmt_fit)f;
    o->given.fit = 1;
    return 0;
}

static int set_filter(shc_build_opts *o, const char *v, fmt_msg *msg)
{
    fmt_filter f;
    if (fmt_filter_parse(v, &f))
        return fmt_fail(msg, SHC_EINPUT, "bad --filter '%s' (nearest, box, bilinear, hamming, "
                        "bicubic or lanczos)", v);
    o->r.geom.filter = f;
    return 0;
}

/* --augment K takes the default augmentation unless --aug gave one; --aug's spec is parsed
 * into r.aug when it is good, and again by shc_build_check, which refuses a bad one after the
 * checks that come before it on the command line. */
static int set_augment(shc_build_opts *o, const char *v, fmt_msg *msg)
{
    uint64_t n;
    if (shc_parse_uint(v, 1, FMT_AUG_MAX_VARIANTS, &n))
        return fmt_fail(msg, SHC_EINPUT, "bad --augment '%s' (1..1024 variants)", v);
    o->r.augment = (uint32_t)n;
    if (!o->given.aug)
        fmt_aug_parse(FMT_AUG_DEFAULT_SPEC, &o->r.aug, NULL);
    return 0;
}

static int set_aug(shc_build_opts *o, const char *v, fmt_msg *msg)
{
    fmt_aug_spec a;
    o->given.aug = v;
    if (fmt_aug_parse(v, &a, NULL) == 0)
        o->r.aug = a;
    return 0;
}

static int set_align(shc_build_opts *o, const char *v, fmt_msg *msg)
{
    uint64_t n;
    if (shc_parse_size(v, &n) || n < FMT_RAW_MIN_ALIGN || n > FMT_RAW_MAX_ALIGN || (n & (n - 1)))
        return fmt_fail(msg, SHC_EINPUT, "bad --align '%s' (a power of two, 256..1MiB)", v);
    o->align = (uint32_t)n;
    return 0;
}

static int set_part(shc_build_opts *o, const char *v, fmt_msg *msg)
{
    fmt_msg why = {{0}};
    shc_part p;
    if (strcmp(v, "auto") == 0)     /* the library reads no environment */
        return fmt_fail(msg, SHC_EINPUT, "--part auto: the program resolves it "
                        "(shc_part_from_env), then sets the part");
    int rc = shc_part_parse(v, &p, &why);
    if (rc)
        return fmt_fail(msg, SHC_EINPUT, "%s", fmt_reason(&why, rc));
    o->part = p;
    return 0;
}

/* ---- the table ---- */

#define FLAG_ROW_SWITCH(name, field, value) {name, 0, 0, NULL},
#define FLAG_ROW_ALIAS(name, of) {name, 0, 0, of},
#define FLAG_ROW_VALUE(name, short_name) {name, short_name, 1, NULL},

static const shc_build_flag g_flags[] = {
#define SHC_OPT_SWITCH(name, field, value) FLAG_ROW_SWITCH(name, field, value)
#define SHC_OPT_ALIAS(name, of) FLAG_ROW_ALIAS(name, of)
#define SHC_OPT_STRING(name, short_name, field) FLAG_ROW_VALUE(name, short_name)
#define SHC_OPT_UINT(name, short_name, field, ctype, lo, hi, refusal)                            \
    FLAG_ROW_VALUE(name, short_name)
#define SHC_OPT_SIZE(name, field, min, refusal) FLAG_ROW_VALUE(name, 0)
#define SHC_OPT_CALL(name, fn) FLAG_ROW_VALUE(name, 0)
#include "build_options.def"   /* it #undefs the SHC_OPT_* macros */
};

const shc_build_flag *shc_build_flags(size_t *n)
{
    if (n)
        *n = sizeof g_flags / sizeof *g_flags;
    return g_flags;
}

int shc_build_set(shc_build_opts *o, const char *name, const char *value, fmt_msg *msg)
{
    if (!name)
        return fmt_fail(msg, SHC_EINPUT, "%s", "no option name given");
#define NEED_VALUE(name)                                                                         \
    if (!value)                                                                                  \
        return fmt_fail(msg, SHC_EINPUT, "--%s needs a value", name);
#define SHC_OPT_SWITCH(row, field, v)                                                            \
    if (strcmp(name, row) == 0) {                                                                \
        if (value)                                                                               \
            return fmt_fail(msg, SHC_EINPUT, "--%s takes no value", row);                        \
        o->field = v;                                                                            \
        return 0;                                                                                \
    }
#define SHC_OPT_ALIAS(row, of)                                                                   \
    if (strcmp(name, row) == 0)                                                                  \
        return shc_build_set(o, of, value, msg);
#define SHC_OPT_STRING(row, short_name, field)                                                   \
    if (strcmp(name, row) == 0) {                                                                \
        NEED_VALUE(row)                                                                          \
        o->field = value;                                                                        \
        return 0;                                                                                \
    }
#define SHC_OPT_UINT(row, short_name, field, ctype, lo, hi, refusal)                             \
    if (strcmp(name, row) == 0) {                                                                \
        uint64_t n;                                                                              \
        NEED_VALUE(row)                                                                          \
        if (shc_parse_uint(value, lo, hi, &n))                                                   \
            return fmt_fail(msg, SHC_EINPUT, refusal, value);                                    \
        o->field = (ctype)n;                                                                     \
        return 0;                                                                                \
    }
#define SHC_OPT_SIZE(row, field, min, refusal)                                                   \
    if (strcmp(name, row) == 0) {                                                                \
        uint64_t n;                                                                              \
        NEED_VALUE(row)                                                                          \
        if (shc_parse_size(value, &n) || n < (min))                                              \
            return fmt_fail(msg, SHC_EINPUT, refusal, value);                                    \
        o->field = n;                                                                            \
        return 0;                                                                                \
    }
#define SHC_OPT_CALL(row, fn)                                                                    \
    if (strcmp(name, row) == 0) {                                                                \
        NEED_VALUE(row)                                                                          \
        return fn(o, value, msg);                                                                \
    }
#include "build_options.def"   /* it #undefs the SHC_OPT_* macros */
#undef NEED_VALUE
    return fmt_fail(msg, SHC_EINPUT, "unknown option '--%s'", name);
}

/* ---- the checks between flags, in the command line's order ---- */

int shc_build_check(const shc_build_opts *o, fmt_msg *msg)
{
#define REFUSE(...) return fmt_fail(msg, SHC_EINPUT, __VA_ARGS__)
    int have_size = o->given.size, have_short = o->given.short_side;
    if (o->nsrc == 0 && !o->stream)
        REFUSE("%s", "no SRC given");
    if (!o->out && !o->dry_run)
        REFUSE("%s", "no output directory given (-o OUT)");
    if (have_size && have_short)
        REFUSE("%s", "--size and --short-side exclude each other");
    if (have_size && o->r.geom.max_side)
        REFUSE("%s", "--size and --max-side exclude each other");
    if (o->given.fit && !have_size)
        REFUSE("%s", "--fit needs --size");
    if (o->jpeg_fraction > 0 && strcmp(o->backend->name, "raw") != 0)
        REFUSE("--jpeg-fraction is for --format raw (%s: use --format jpeg for JPEG only)",
               o->backend->name);
    /* the JPEG mix picks samples by their index within the shard set being written, which a part
     * does not know for the whole dataset: its parts would not merge into a one-machine build */
    if (o->jpeg_fraction > 0 && o->part.count > 0)
        REFUSE("%s", "--jpeg-fraction cannot be combined with --part");
    if (o->compress.codec && strcmp(o->backend->name, "raw") != 0)
        REFUSE("--compress is for --format raw (%s stores its own way)", o->backend->name);
    if (have_size && o->r.geom.crop_w)
        REFUSE("%s", "--size and --crop exclude each other (--size crops already)");
    if (o->wds && o->list)
        REFUSE("%s", "--wds and --list exclude each other");
    if (o->wds_label && !o->wds)
        REFUSE("%s", "--wds-label needs --wds");
    if (o->resume && o->force)
        REFUSE("%s", "--resume and --force exclude each other");
    if (o->given.aug && !o->r.augment)
        REFUSE("%s", "--aug needs --augment K");
    if (o->coco && o->yolo)
        REFUSE("%s", "--coco and --yolo exclude each other");
    if (o->masks && (o->coco || o->yolo))
        REFUSE("%s", "--masks (label maps) excludes --coco and --yolo");
    if (o->kpt_k && !o->yolo)
        REFUSE("%s", "--kpt-shape needs --yolo");
    if ((o->mask_suffix || o->ignore_index != 255) && !o->masks)
        REFUSE("%s", "--mask-suffix and --ignore-index need --masks");
    if (o->yolo && !o->names)
        REFUSE("%s", "--yolo needs --names FILE (the class names)");
    if (o->names && !o->yolo)
        REFUSE("%s", "--names needs --yolo");
    if (o->skip_empty && !o->coco && !o->yolo && !o->masks)
        REFUSE("%s", "--skip-empty needs --coco, --yolo or --masks");
    if ((o->coco || o->yolo || o->masks) && (o->list || o->wds))
        REFUSE("%s", "--coco/--yolo list the images themselves (no --list or --wds)");
    if ((o->coco || o->yolo || o->masks) && o->r.augment)
        REFUSE("%s", "--augment cannot be combined with --coco/--yolo (pre-augmented variants do "
               "not carry boxes)");
    if (o->r.augment) {
        if (!have_size)
            REFUSE("%s", "--augment needs --size WxH (the variants' size)");
        fmt_msg why = {{0}};
        fmt_aug_spec a;
        if (fmt_aug_parse(o->given.aug ? o->given.aug : FMT_AUG_DEFAULT_SPEC, &a, &why) != 0)
            REFUSE("bad --aug: %s", why.text);
    }
#undef REFUSE
    return 0;
}

/* ---- the handle, and what is not a flag ---- */

shc_build_opts *shc_build_opts_new(void)
{
    shc_build_opts *o = malloc(sizeof *o);
    if (o)
        shc_build_opts_init(o);
    return o;
}

void shc_build_opts_free(shc_build_opts *o)
{
    free(o);
}

void shc_build_sources(shc_build_opts *o, char *const *srcs, size_t n)
{
    o->srcs = srcs;
    o->nsrc = n;
}

void shc_build_set_part(shc_build_opts *o, const shc_part *p)
{
    o->part = p ? *p : (shc_part){0, 0};
}

void shc_build_set_ctl(shc_build_opts *o, shc_build_ctl *ctl)
{
    o->ctl = ctl;
}

void shc_build_set_cache(shc_build_opts *o, const char *cache)
{
    o->cache = cache;
}

void shc_build_set_crash(shc_build_opts *o, const shc_crash_opts *c)
{
    o->crash = c ? *c : (shc_crash_opts){0, 0, 0};
}

void shc_build_set_stream(shc_build_opts *o, shc_stream *stream)
{
    o->stream = stream;
}

void shc_build_view_get(const shc_build_opts *o, shc_build_view *v)
{
    *v = (shc_build_view){.out = o->out, .remote_out = o->out && rmt_is_url(o->out),
                          .strict = o->strict, .dry_run = o->dry_run, .progress = o->progress,
                          .json = o->json, .jpeg_fraction = o->jpeg_fraction, .part = o->part,
                          .merge = {o->staging, o->cache, o->upload_part_size}};
}
