/* A build's options through their public handle (shardc.h): the table of `shardc build`'s flags
 * (compiler/build_options.def) as shc_build_flags lists it, every flag reachable through
 * shc_build_set by its name, each kind of value refused in the command line's words and taken at
 * its bounds, the checks between flags (shc_build_check), the defaults, and a build made through
 * the public calls alone. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "augment.h"
#include "backend.h"
#include "build.h"
#include "mksample.h"
#include "shardc.h"
#include "testutil.h"

/* The flags the table must have, in its order: name, one-letter form, a value taken (NULL: a
 * switch), a value refused and the exact refusal (NULL: a value every string passes). Dropping
 * or renaming a row of build_options.def fails here. */
static const struct {
    const char *name;
    char short_name;
    const char *good, *bad, *refusal;
} g_flags[] = {
    {"output", 'o', "out", NULL, NULL},
    {"format", 0, "hdf5", "tiff", "unknown --format 'tiff' (raw, hdf5, lmdb, png0, bmp or jpeg)"},
    {"quality", 0, "100", "101", "bad --quality '101' (1..100)"},
    {"jpeg-fraction", 0, "1", "1.5", "bad --jpeg-fraction '1.5' (0..1)"},
    {"compress", 0, "zstd:3", "gzip", NULL},
    {"list", 0, "list.txt", NULL, NULL},
    {"fields", 0, "f.jsonl", NULL, NULL},
    {"coco", 0, "c.json", NULL, NULL},
    {"yolo", 0, "labels", NULL, NULL},
    {"names", 0, "names.txt", NULL, NULL},
    {"kpt-shape", 0, "17,3", "17,4",
     "bad --kpt-shape '17,4' (K,D: 1..1024 keypoints of 2 or 3 values)"},
    {"masks", 0, "maps", NULL, NULL},
    {"mask-suffix", 0, "_a:_b", "_a", "bad --mask-suffix '_a' (IMAGE_SUFFIX:MAP_SUFFIX)"},
    {"ignore-index", 0, "0", "65536", "bad --ignore-index '65536' (0..65535)"},
    {"skip-empty", 0, NULL, NULL, NULL},
    {"wds", 0, NULL, NULL, NULL},
    {"wds-label", 0, "txt", NULL, NULL},
    {"archive-buffer", 0, "1", "0", "bad --archive-buffer '0' (e.g. 512MiB)"},
    {"short-side", 0, "65535", "65536", "bad --short-side '65536' (1..65535)"},
    {"crop", 0, "224x200", "224x", "bad --crop '224x' (expected WxH or N, e.g. 224x224 or 224)"},
    {"size", 0, "224", "x", "bad --size 'x' (expected WxH or N, e.g. 224x224 or 224)"},
    {"fit", 0, "pad", "fill", "bad --fit 'fill' (crop, pad or stretch)"},
    {"max-side", 0, "1", "0", "bad --max-side '0' (1..65535)"},
    {"filter", 0, "lanczos", "cubic",
     "bad --filter 'cubic' (nearest, box, bilinear, hamming, bicubic or lanczos)"},
    {"shrink-on-load", 0, NULL, NULL, NULL},
    {"gray", 0, NULL, NULL, NULL},
    {"grey", 0, NULL, NULL, NULL},
    {"augment", 0, "1024", "1025", "bad --augment '1025' (1..1024 variants)"},
    {"aug", 0, "flip", NULL, NULL},
    {"seed", 0, "18446744073709551615", "18446744073709551616",
     "bad --seed '18446744073709551616' (an unsigned 64-bit integer)"},
    {"threads", 'j', "1024", "0", "bad thread count '0' (1..1024)"},
    {"shard-size", 0, "4KiB", "4095", "bad --shard-size '4095' (e.g. 1GiB, at least 4KiB)"},
    {"shard-samples", 0, "1", "0", "bad --shard-samples '0'"},
    {"align", 0, "1MiB", "384", "bad --align '384' (a power of two, 256..1MiB)"},
    {"max-pixels", 0, "1", "-1", "bad --max-pixels '-1'"},
    {"max-image-side", 0, "65535", "65536", "bad --max-image-side '65536' (1..65535)"},
    {"max-file-size", 0, "1", "1X", "bad --max-file-size '1X'"},
    {"strict", 0, NULL, NULL, NULL},
    {"resume", 0, NULL, NULL, NULL},
    {"force", 0, NULL, NULL, NULL},
    {"dry-run", 0, NULL, NULL, NULL},
    {"progress", 0, NULL, NULL, NULL},
    {"no-progress", 0, NULL, NULL, NULL},
    {"json", 0, NULL, NULL, NULL},
    {"part", 0, "3/8", "8/8", NULL},
    {"staging", 0, "stage", NULL, NULL},
    {"upload-part-size", 0, "5MiB", "0",
     "--upload-part-size: expected a size, e.g. 64MiB, not '0'"},
    {"upload-threads", 0, "16", "17", "--upload-threads: expected 1..16, not '17'"},
};
#define NFLAGS (sizeof g_flags / sizeof *g_flags)

/* shc_build_flags lists exactly these, in order, with their one-letter forms and values. */
START_TEST(table_lists_every_flag)
{
    size_t n = 0;
    const shc_build_flag *f = shc_build_flags(&n);
    ck_assert_uint_eq(n, NFLAGS);
    for (size_t i = 0; i < NFLAGS; i++) {
        ck_assert_str_eq(f[i].name, g_flags[i].name);
        ck_assert_int_eq(f[i].short_name, g_flags[i].short_name);
        ck_assert_int_eq(f[i].has_value, g_flags[i].good != NULL);
        if (strcmp(f[i].name, "grey") == 0)
            ck_assert_str_eq(f[i].alias_of, "gray");
        else
            ck_assert_ptr_null(f[i].alias_of);
    }
}
END_TEST

/* Each flag by its name: its good value taken, its bad one refused in the exact words, a value
 * given to a switch and none to a flag that needs one refused naming the flag. */
START_TEST(every_flag_is_set_by_its_name)
{
    for (size_t i = 0; i < NFLAGS; i++) {
        shc_build_opts *o = shc_build_opts_new();
        ck_assert_ptr_nonnull(o);
        shc_msg why = {{0}};
        char want[600];
        int rc = shc_build_set(o, g_flags[i].name, g_flags[i].good, &why);
        ck_assert_msg(rc == 0, "--%s %s: %s", g_flags[i].name, g_flags[i].good, why.text);
        if (g_flags[i].bad) {
            rc = shc_build_set(o, g_flags[i].name, g_flags[i].bad, &why);
            ck_assert_int_eq(rc, SHC_EINPUT);
            if (g_flags[i].refusal)
                ck_assert_str_eq(why.text, g_flags[i].refusal);
        }
        if (g_flags[i].good) {
            ck_assert_int_eq(shc_build_set(o, g_flags[i].name, NULL, &why), SHC_EINPUT);
            snprintf(want, sizeof want, "--%s needs a value", g_flags[i].name);
        } else {
            ck_assert_int_eq(shc_build_set(o, g_flags[i].name, "1", &why), SHC_EINPUT);
            snprintf(want, sizeof want, "--%s takes no value",
                     strcmp(g_flags[i].name, "grey") == 0 ? "gray" : g_flags[i].name);
        }
        ck_assert_str_eq(why.text, want);
        shc_build_opts_free(o);
    }
}
END_TEST

/* What the values become, and the bounds of each kind. */
START_TEST(values_land_in_the_options)
{
    shc_build_opts *o = shc_build_opts_new();
    shc_msg why = {{0}};
#define SET(name, value) ck_assert_msg(shc_build_set(o, name, value, &why) == 0, "%s", why.text)
#define REFUSED(name, value, words)                                                              \
    do {                                                                                         \
        ck_assert_int_eq(shc_build_set(o, name, value, &why), SHC_EINPUT);                       \
        ck_assert_str_eq(why.text, words);                                                       \
    } while (0)
    SET("quality", "1");
    ck_assert_int_eq(o->quality, 1);
    REFUSED("quality", "0", "bad --quality '0' (1..100)");
    ck_assert_int_eq(o->quality, 1);            /* a refusal changes nothing */
    SET("threads", "1");
    ck_assert_uint_eq(o->threads, 1);
    REFUSED("threads", "1025", "bad thread count '1025' (1..1024)");
    SET("seed", "0");
    SET("seed", "18446744073709551615");
    ck_assert(o->r.seed == UINT64_MAX);
    SET("shard-size", "4096");
    ck_assert_uint_eq(o->shard_bytes, 4096);
    SET("shard-size", "1GiB");
    ck_assert_uint_eq(o->shard_bytes, 1ull << 30);
    SET("align", "256");
    ck_assert_uint_eq(o->align, 256);
    REFUSED("align", "2MiB", "bad --align '2MiB' (a power of two, 256..1MiB)");
    REFUSED("align", "128", "bad --align '128' (a power of two, 256..1MiB)");
    SET("jpeg-fraction", "0");
    REFUSED("jpeg-fraction", "nan", "bad --jpeg-fraction 'nan' (0..1)");
    SET("size", "65535x1");
    ck_assert_uint_eq(o->r.geom.width, 65535);
    ck_assert_uint_eq(o->r.geom.height, 1);
    ck_assert_int_eq(o->r.geom.mode, FMT_GEOM_SIZE);
    REFUSED("size", "65536", "bad --size '65536' (expected WxH or N, e.g. 224x224 or 224)");
    SET("crop", "7");
    ck_assert_uint_eq(o->r.geom.crop_w, 7);
    ck_assert_uint_eq(o->r.geom.crop_h, 7);
    SET("grey", NULL);
    ck_assert_uint_eq(o->r.channels, 1);
    SET("progress", NULL);
    ck_assert_int_eq(o->progress, 1);
    SET("no-progress", NULL);
    ck_assert_int_eq(o->progress, 0);
    SET("part", "3/8");
    ck_assert_uint_eq(o->part.index, 3);
    ck_assert_uint_eq(o->part.count, 8);
    REFUSED("part", "auto", "--part auto: the program resolves it (shc_part_from_env), then "
            "sets the part");
    for (const char *const *n = fmt_backend_names(); *n; n++) {
        SET("format", *n);
        ck_assert_str_eq(o->backend->name, *n);
    }
    SET("compress", "lz4:12");
    ck_assert_int_ne(o->compress.codec, 0);
    ck_assert_int_eq(shc_build_set(o, "compress", "gzip", &why), SHC_EINPUT);
    ck_assert_msg(strncmp(why.text, "bad --compress: ", 16) == 0, "%s", why.text);
    /* unknown names are refused naming the name */
    REFUSED("sizes", "1", "unknown option '--sizes'");
    REFUSED("", NULL, "unknown option '--'");
#undef SET
#undef REFUSED
    shc_build_opts_free(o);
}
END_TEST

/* The geometry's mode and the augmentation follow the flags in any order. */
START_TEST(derived_fields)
{
    shc_build_opts *o = shc_build_opts_new();
    ck_assert_int_eq(o->r.geom.mode, FMT_GEOM_KEEP);
    ck_assert_int_eq(shc_build_set(o, "short-side", "256", NULL), 0);
    ck_assert_int_eq(o->r.geom.mode, FMT_GEOM_SHORT_SIDE);
    ck_assert_int_eq(shc_build_set(o, "size", "224", NULL), 0);
    ck_assert_int_eq(o->r.geom.mode, FMT_GEOM_SIZE);
    ck_assert_int_eq(shc_build_set(o, "short-side", "256", NULL), 0);
    ck_assert_int_eq(o->r.geom.mode, FMT_GEOM_SIZE);
    shc_build_opts_free(o);

    fmt_aug_spec def, flip;
    ck_assert_int_eq(fmt_aug_parse(FMT_AUG_DEFAULT_SPEC, &def, NULL), 0);
    ck_assert_int_eq(fmt_aug_parse("flip", &flip, NULL), 0);
    o = shc_build_opts_new();
    ck_assert_int_eq(shc_build_set(o, "augment", "2", NULL), 0);
    ck_assert_mem_eq(&o->r.aug, &def, sizeof def);
    ck_assert_int_eq(shc_build_set(o, "aug", "flip", NULL), 0);
    ck_assert_mem_eq(&o->r.aug, &flip, sizeof flip);
    shc_build_opts_free(o);
    o = shc_build_opts_new();
    ck_assert_int_eq(shc_build_set(o, "aug", "flip", NULL), 0);
    ck_assert_int_eq(shc_build_set(o, "augment", "2", NULL), 0);
    ck_assert_mem_eq(&o->r.aug, &flip, sizeof flip);
    shc_build_opts_free(o);
}
END_TEST

/* shc_build_check: the checks between flags, first failure first, in the command line's words. */
START_TEST(checks_between_flags)
{
    static const struct {
        const char *flags[8];   /* name, value pairs (value NULL: a switch), NULL-terminated */
        const char *refusal;    /* NULL: accepted */
    } cases[] = {
        {{"output", "o", NULL}, NULL},
        {{"dry-run", NULL, NULL}, NULL},
        {{"size", "224", "augment", "2", "output", "o", NULL}, NULL},
        {{"size", "9", NULL}, "no output directory given (-o OUT)"},
        {{"output", "o", "size", "9", "short-side", "9", NULL},
         "--size and --short-side exclude each other"},
        {{"output", "o", "short-side", "9", "max-side", "9", NULL}, NULL},
        {{"output", "o", "size", "9", "max-side", "9", NULL},
         "--size and --max-side exclude each other"},
        {{"output", "o", "fit", "pad", NULL}, "--fit needs --size"},
        {{"output", "o", "format", "jpeg", "jpeg-fraction", "0.5", NULL},
         "--jpeg-fraction is for --format raw (jpeg: use --format jpeg for JPEG only)"},
        {{"output", "o", "jpeg-fraction", "0.5", "part", "0/2", NULL},
         "--jpeg-fraction cannot be combined with --part"},
        {{"output", "o", "format", "hdf5", "compress", "lz4", NULL},
         "--compress is for --format raw (hdf5 stores its own way)"},
        {{"output", "o", "resume", NULL, "force", NULL, NULL},
         "--resume and --force exclude each other"},
        {{"output", "o", "aug", "bogus", NULL}, "--aug needs --augment K"},
        {{"output", "o", "augment", "2", NULL}, "--augment needs --size WxH (the variants' size)"},
        {{"output", "o", "ignore-index", "0", NULL},
         "--mask-suffix and --ignore-index need --masks"},
        {{"output", "o", "yolo", "y", NULL}, "--yolo needs --names FILE (the class names)"},
        {{"output", "o", "coco", "c", "list", "l", NULL},
         "--coco/--yolo list the images themselves (no --list or --wds)"},
        {{"output", "o", "skip-empty", NULL, NULL}, "--skip-empty needs --coco, --yolo or --masks"},
    };
    static char *srcs[] = {"src"};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        shc_build_opts *o = shc_build_opts_new();
        shc_msg why = {{0}};
        shc_build_sources(o, srcs, 1);
        for (size_t i = 0; cases[k].flags[i]; i += 2)
            ck_assert_msg(shc_build_set(o, cases[k].flags[i], cases[k].flags[i + 1], &why) == 0,
                          "case %zu: %s", k, why.text);
        int rc = shc_build_check(o, &why);
        if (cases[k].refusal) {
            ck_assert_msg(rc == SHC_EINPUT, "case %zu accepted", k);
            ck_assert_str_eq(why.text, cases[k].refusal);
        } else {
            ck_assert_msg(rc == 0, "case %zu: %s", k, why.text);
        }
        shc_build_opts_free(o);
    }
    /* no sources: the first refusal; a bad --aug after the checks before it */
    shc_build_opts *o = shc_build_opts_new();
    shc_msg why = {{0}};
    ck_assert_int_eq(shc_build_check(o, &why), SHC_EINPUT);
    ck_assert_str_eq(why.text, "no SRC given");
    shc_build_sources(o, srcs, 1);
    ck_assert_int_eq(shc_build_set(o, "output", "o", NULL), 0);
    ck_assert_int_eq(shc_build_set(o, "aug", "rrc=2", NULL), 0);
    ck_assert_int_eq(shc_build_set(o, "augment", "2", NULL), 0);
    ck_assert_int_eq(shc_build_check(o, &why), SHC_EINPUT);
    ck_assert_str_eq(why.text, "--augment needs --size WxH (the variants' size)");
    ck_assert_int_eq(shc_build_set(o, "size", "8", NULL), 0);
    ck_assert_int_eq(shc_build_check(o, &why), SHC_EINPUT);
    ck_assert_msg(strncmp(why.text, "bad --aug: ", 11) == 0, "%s", why.text);
    shc_build_opts_free(o);
}
END_TEST

/* shc_build_opts_new holds shc_build_opts_init's defaults; the view and the other setters. */
START_TEST(defaults_and_view)
{
    shc_build_opts init;
    shc_build_opts_init(&init);
    shc_build_opts *o = shc_build_opts_new();
    ck_assert_mem_eq(o, &init, sizeof init);
    shc_build_view v;
    shc_build_view_get(o, &v);
    ck_assert_ptr_null(v.out);
    ck_assert_int_eq(v.remote_out, 0);
    ck_assert_int_eq(shc_build_set(o, "output", "s3://b/p", NULL), 0);
    ck_assert_int_eq(shc_build_set(o, "staging", "st", NULL), 0);
    ck_assert_int_eq(shc_build_set(o, "upload-part-size", "5MiB", NULL), 0);
    ck_assert_int_eq(shc_build_set(o, "strict", NULL, NULL), 0);
    shc_build_set_cache(o, "cache");
    shc_part p = {1, 4};
    shc_build_set_part(o, &p);
    shc_build_view_get(o, &v);
    ck_assert_str_eq(v.out, "s3://b/p");
    ck_assert_int_eq(v.remote_out, 1);
    ck_assert_int_eq(v.strict, 1);
    ck_assert_str_eq(v.merge.staging, "st");
    ck_assert_str_eq(v.merge.cache, "cache");
    ck_assert_uint_eq(v.merge.part_size, 5u << 20);
    ck_assert_uint_eq(v.part.index, 1);
    ck_assert_uint_eq(v.part.count, 4);
    shc_crash_opts c = {3, 0, 1};
    shc_build_set_crash(o, &c);
    ck_assert(o->crash.at == 3 && o->crash.report == 1);
    shc_build_opts_free(o);
    shc_build_opts_free(NULL);
}
END_TEST

static void count_samples(void *ctx, const shc_summary *s)
{
    *(uint64_t *)ctx = s->samples;
}

/* A build through shardc.h alone (the header's example) writes the bytes of one whose struct was
 * filled field by field, as the command line did before the handle. */
START_TEST(public_calls_build)
{
    char src[700], a[700], b[700], fa[800], fb[800];
    tu_mks_src(src, sizeof src, 2, 3, 0, 0, 0);
    tu_path(a, sizeof a, "a");
    tu_path(b, sizeof b, "b");
    char *srcs[] = {src};

    shc_build_opts *o = shc_build_opts_new();
    shc_msg why = {{0}};
    shc_build_sources(o, srcs, 1);
    ck_assert_msg(shc_build_set(o, "output", a, &why) == 0 && shc_build_set(o, "size", "16x12",
                  &why) == 0 && shc_build_set(o, "gray", NULL, &why) == 0 &&
                  shc_build_set(o, "shard-samples", "4", &why) == 0 &&
                  shc_build_set(o, "threads", "2", &why) == 0 && shc_build_check(o, &why) == 0,
                  "%s", why.text);
    uint64_t samples = 0;
    shc_build_cb cb = {.ctx = &samples, .summary = count_samples};
    ck_assert_int_eq(shc_build(o, &cb), 0);
    ck_assert_uint_eq(samples, 6);
    shc_build_opts_free(o);

    shc_build_opts f;
    shc_build_opts_init(&f);
    f.srcs = srcs;
    f.nsrc = 1;
    f.out = b;
    f.r.geom.mode = FMT_GEOM_SIZE;
    f.r.geom.width = 16;
    f.r.geom.height = 12;
    f.r.channels = 1;
    f.shard_samples = 4;
    f.threads = 2;
    ck_assert_int_eq(shc_build(&f, NULL), 0);
    for (int i = 0; i < 2; i++) {
        snprintf(fa, sizeof fa, "%s/shard-%05d.raw", a, i);
        snprintf(fb, sizeof fb, "%s/shard-%05d.raw", b, i);
        size_t la, lb;
        uint8_t *da = tu_slurp(fa, &la), *db = tu_slurp(fb, &lb);
        ck_assert_msg(da && db, "%s or %s missing", fa, fb);
        ck_assert_uint_eq(la, lb);
        ck_assert_mem_eq(da, db, la);
        free(da);
        free(db);
    }
}
END_TEST

int main(void)
{
    return tu_run(TU_TEMP_SUITE("build_options", "core", 0,
                                table_lists_every_flag, every_flag_is_set_by_its_name,
                                values_land_in_the_options, derived_fields, checks_between_flags,
                                defaults_and_view, public_calls_build));
}
