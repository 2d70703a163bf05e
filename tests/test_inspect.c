/* test_inspect.c - shardc.h's calls for looking into a built dataset (compiler/inspect.c):
 * shc_verify's lines and counts on a sound dataset, a damaged shard, a dataset without a
 * manifest and one of an unknown backend; a sample's record (hash, source path, augmentation)
 * and its replay against the formats' view of the dataset; shc_write_image's PPM and PNG; the
 * JSON string writers against the formats' own; shc_is_url; SHC_AUG_DEFAULT_SPEC against the
 * formats' default. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "augment.h"
#include "dataset.h"
#include "image.h"
#include "json.h"
#include "mksample.h"
#include "shardc.h"
#include "shardread.h"
#include "testutil.h"

START_TEST(default_spec_is_the_formats)
{
    ck_assert_str_eq(SHC_AUG_DEFAULT_SPEC, FMT_AUG_DEFAULT_SPEC);
}
END_TEST

/* what w writes for the len bytes at s (len SIZE_MAX: the string s, through the _string form) */
static char *written(int json_formats, const char *s, size_t len)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    ck_assert_ptr_nonnull(f);
    int rc = len == SIZE_MAX ? (json_formats ? fmt_json_string(f, s) : shc_json_string(f, s))
                             : (json_formats ? fmt_json_bytes(f, s, len) : shc_json_bytes(f, s, len));
    ck_assert_int_eq(rc, 0);
    fclose(f);
    return buf;
}

START_TEST(json_strings_are_the_formats)
{
    static const char *const strs[] = {"", "plain", "quote \" back \\ slash", "tab\tnl\n",
                                       "\x01\x1f", "caf\xc3\xa9", "bad \xff\xfe utf-8", NULL};
    for (size_t i = 0; i < sizeof strs / sizeof *strs; i++) {
        char *a = written(0, strs[i], SIZE_MAX), *b = written(1, strs[i], SIZE_MAX);
        ck_assert_str_eq(a, b);
        free(a);
        free(b);
    }
    char *a = written(0, "a\0b\xff", 4), *b = written(1, "a\0b\xff", 4);
    ck_assert_str_eq(a, "\"a\\u0000b\\udcff\"");
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
    a = written(0, NULL, SIZE_MAX);
    ck_assert_str_eq(a, "null");
    free(a);
}
END_TEST

START_TEST(urls)
{
    ck_assert_int_eq(shc_is_url("s3://bucket/prefix"), 1);
    ck_assert_int_eq(shc_is_url("http://host/ds"), 1);
    ck_assert_int_eq(shc_is_url("HTTPS://host/ds"), 1);
    ck_assert_int_eq(shc_is_url("/data/ds"), 0);
    ck_assert_int_eq(shc_is_url("s3:/x"), 0);
    ck_assert_int_eq(shc_is_url(NULL), 0);
}
END_TEST

/* the report's lines, joined with newlines */
typedef struct {
    char text[4096];
    int lines;
} lines;

static void add_line(void *ctx, const char *line)
{
    lines *l = ctx;
    size_t n = strlen(l->text);
    snprintf(l->text + n, sizeof l->text - n, "%s\n", line);
    l->lines++;
}

/* a built dataset of 6 gray 16x12 samples in shards of 4, in g_dir/name (aug: pre-augmented,
 * 2 variants each, flipped at random) */
static void build_aug(const char *name, char *out, size_t len, int aug)
{
    char src[700];
    tu_mks_src(src, sizeof src, 2, 3, 0, 0, 0);
    tu_path(out, len, name);
    char *srcs[] = {src};
    shc_build_opts *o = shc_build_opts_new();
    shc_msg why = {{0}};
    shc_build_sources(o, srcs, 1);
    ck_assert_msg(shc_build_set(o, "output", out, &why) == 0 &&
                  shc_build_set(o, "size", "16x12", &why) == 0 &&
                  shc_build_set(o, "gray", NULL, &why) == 0 &&
                  shc_build_set(o, "shard-samples", "4", &why) == 0 &&
                  (!aug || (shc_build_set(o, "augment", "2", &why) == 0 &&
                            shc_build_set(o, "aug", "flip", &why) == 0)) &&
                  shc_build_check(o, &why) == 0, "%s", why.text);
    ck_assert_int_eq(shc_build(o, NULL), 0);
    shc_build_opts_free(o);
}

static void build(const char *name, char *out, size_t len)
{
    build_aug(name, out, len, 0);
}

/* the record, the replay: what the formats' view of the dataset says */
START_TEST(sample_record_and_replay)
{
    for (int aug = 0; aug < 2; aug++) {
        char ds[700], want[900];
        build_aug(aug ? "aug" : "plain", ds, sizeof ds, aug);
        fmt_dataset *d;
        ck_assert_int_eq(fmt_dataset_open(&d, ds, NULL), 0);
        uint64_t n = fmt_dataset_count(d);
        ck_assert_uint_eq(n, aug ? 12 : 6);
        for (uint64_t i = 0; i < n; i++) {
            fmt_sample s;
            ck_assert_int_eq(fmt_dataset_get(d, i, &s), 0);
            shc_sample_record r;
            shc_msg why = {{0}};
            ck_assert_msg(shc_sample_record_get(ds, i, &r, &why) == 0, "%s", why.text);
            ck_assert_uint_eq(r.hash, s.hash);
            ck_assert_ptr_nonnull(r.path);
            ck_assert_ptr_nonnull(strstr(r.path, "/src/"));
            ck_assert_int_eq(r.augmented, aug);
            if (aug) {
                fmt_aug_params p;
                ck_assert_int_eq(fmt_aug_decode(s.aux, s.aux_len, &p), 0);
                ck_assert_uint_eq(r.aug.variant, p.variant);
                ck_assert_uint_eq(r.aug.variant, i % 2);
                ck_assert_uint_eq(r.aug.flip, p.flip);
                ck_assert_uint_eq(r.aug.src_w, p.src_w);
                ck_assert_uint_eq(r.aug.crop_w, p.crop_w);
                ck_assert(r.aug.brightness == p.brightness);
            }
            /* the replay gives the stored pixels back, from the record's source */
            shc_replayed re;
            ck_assert_msg(shc_replay_sample(ds, i, &re, &why) == 0, "%s", why.text);
            ck_assert_str_eq(re.path, r.path);
            ck_assert_uint_eq(re.width, s.width);
            ck_assert_uint_eq(re.height, s.height);
            ck_assert_uint_eq(re.channels, 1);
            ck_assert_mem_eq(re.pixels, s.pixels, s.length);
            shc_replayed_free(&re);
            ck_assert_ptr_null(re.pixels);
            shc_sample_record_free(&r);
            ck_assert_ptr_null(r.path);
        }
        fmt_dataset_close(d);
        /* past the end: refused, naming the count */
        shc_sample_record r;
        shc_replayed re;
        shc_msg why = {{0}};
        snprintf(want, sizeof want, "%s has %" PRIu64 " samples; no sample %" PRIu64, ds, n, n);
        ck_assert_int_eq(shc_sample_record_get(ds, n, &r, &why), SHR_EFMT_INVAL);
        ck_assert_str_eq(why.text, want);
        ck_assert_int_eq(shc_replay_sample(ds, n, &re, &why), SHR_EFMT_INVAL);
        ck_assert_str_eq(why.text, want);
        /* without inputs.tsv: no path, and no replay */
        char tsv[800];
        snprintf(tsv, sizeof tsv, "%s/inputs.tsv", ds);
        ck_assert_int_eq(unlink(tsv), 0);
        ck_assert_int_eq(shc_sample_record_get(ds, 1, &r, &why), 0);
        ck_assert_ptr_null(r.path);
        ck_assert_int_eq(shc_replay_sample(ds, 1, &re, &why), ENOENT);
        snprintf(want, sizeof want, "%s/inputs.tsv does not name source ", ds);
        ck_assert_msg(strncmp(why.text, want, strlen(want)) == 0, "%s", why.text);
        ck_assert_ptr_null(re.pixels);
    }
    /* no dataset: the open's error */
    char none[700];
    tu_path(none, sizeof none, "none");
    shc_sample_record r;
    shc_msg why = {{0}};
    ck_assert_int_eq(shc_sample_record_get(none, 0, &r, &why), ENOENT);
    ck_assert_ptr_nonnull(strstr(why.text, "cannot open dataset "));
}
END_TEST

START_TEST(write_image)
{
    uint8_t px[2 * 3 * 3];
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (uint8_t)(i * 13);
    char ppm[700], png[700], bad[700];
    tu_path(ppm, sizeof ppm, "a.ppm");
    tu_path(png, sizeof png, "a.PNG");
    tu_path(bad, sizeof bad, "no/such/folder.ppm");
    /* PPM: the header and the pixels, exactly; gray is P5 */
    ck_assert_int_eq(shc_write_image(ppm, px, 3, 2, 3), 0);
    size_t n;
    uint8_t *b = tu_slurp(ppm, &n);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(n, 11 + sizeof px);
    ck_assert_mem_eq(b, "P6\n3 2\n255\n", 11);
    ck_assert_mem_eq(b + 11, px, sizeof px);
    free(b);
    ck_assert_int_eq(shc_write_image(ppm, px, 3, 2, 1), 0);
    b = tu_slurp(ppm, &n);
    ck_assert_uint_eq(n, 11 + 6);
    ck_assert_mem_eq(b, "P5\n3 2\n255\n", 11);
    free(b);
    /* PNG (any case of the suffix): decodes to the same pixels */
    ck_assert_int_eq(shc_write_image(png, px, 3, 2, 3), 0);
    b = tu_slurp(png, &n);
    ck_assert_ptr_nonnull(b);
    ck_assert_mem_eq(b, "\x89PNG", 4);
    fmt_image img = {0};
    fmt_msg m = {{0}};
    ck_assert_int_eq(fmt_image_decode(b, n, NULL, &img, &m), 0);
    ck_assert_uint_eq(img.width, 3);
    ck_assert_uint_eq(img.height, 2);
    ck_assert_mem_eq(img.pixels, px, sizeof px);
    fmt_image_free(&img);
    free(b);
    /* a folder that is not there: the error, nothing written */
    ck_assert_int_eq(shc_write_image(bad, px, 3, 2, 3), ENOENT);
}
END_TEST

START_TEST(verify_sound_and_damaged)
{
    char ds[700], shard[800], want[1800];
    build("ds", ds, sizeof ds);
    lines l = {{0}, 0};
    shc_verify_result r;
    shc_msg why = {{0}};
    ck_assert_int_eq(shc_verify(ds, add_line, &l, &r, &why), 0);
    ck_assert_int_eq(r.opened, 1);
    ck_assert_uint_eq(r.checked, 6);
    ck_assert_uint_eq(r.damaged, 0);
    ck_assert_uint_eq(r.mismatches, 0);
    ck_assert_uint_eq(r.shards, 2);
    ck_assert_int_eq(l.lines, 0);

    /* the last byte of the first shard (its index) flipped: the shard cannot be opened, and its
     * 4 samples are named as a range */
    snprintf(shard, sizeof shard, "%s/shard-00000.raw", ds);
    size_t n;
    uint8_t *b = tu_slurp(shard, &n);
    ck_assert_ptr_nonnull(b);
    FILE *f = fopen(shard, "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, (long)n - 1, SEEK_SET);
    fputc(b[n - 1] ^ 0x5a, f);
    fclose(f);
    free(b);
    ck_assert_int_eq(shc_verify(ds, add_line, &l, &r, &why), 0);
    ck_assert_uint_eq(r.damaged, 4);
    ck_assert_uint_eq(r.checked, 2);
    ck_assert_uint_eq(r.mismatches, 0);
    ck_assert_int_eq(l.lines, 1);
    snprintf(want, sizeof want, "damaged: samples 0-3 (%s): bad index hash\n", shard);
    ck_assert_str_eq(l.text, want);
    /* NULL report: the counts alone */
    ck_assert_int_eq(shc_verify(ds, NULL, NULL, &r, NULL), 0);
    ck_assert_uint_eq(r.damaged, 4);
}
END_TEST

START_TEST(verify_refusals)
{
    char dir[700], want[900];
    tu_path(dir, sizeof dir, "none");
    lines l = {{0}, 0};
    shc_verify_result r;
    shc_msg why = {{0}};
    ck_assert_int_eq(shc_verify(dir, add_line, &l, &r, &why), ENOENT);
    ck_assert_int_eq(r.opened, 0);
    snprintf(want, sizeof want, "cannot read the manifest of %s: ", dir);
    ck_assert_msg(strncmp(why.text, want, strlen(want)) == 0, "%s", why.text);

    /* a backend this build does not know */
    char ds[700], man[800];
    build("ds", ds, sizeof ds);
    snprintf(man, sizeof man, "%s/manifest.json", ds);
    size_t n;
    char *m = (char *)tu_slurp(man, &n);
    ck_assert_ptr_nonnull(m);
    char *p = strstr(m, "\"backend\": \"raw\"");
    ck_assert_ptr_nonnull(p);
    memcpy(p + strlen("\"backend\": \""), "rax", 3);
    FILE *f = fopen(man, "wb");
    ck_assert_ptr_nonnull(f);
    fwrite(m, 1, n, f);
    fclose(f);
    free(m);
    int rc = shc_verify(ds, add_line, &l, &r, &why);
    ck_assert_int_eq(rc, SHR_EUNSUPPORTED);
    ck_assert_int_eq(r.opened, 0);
    snprintf(want, sizeof want, "%s: backend 'rax' version 2 is not supported", ds);
    ck_assert_str_eq(why.text, want);
    ck_assert_int_eq(l.lines, 0);
}
END_TEST

int main(void)
{
    return tu_run(TU_TEMP_SUITE("inspect", "core", 0,
                                default_spec_is_the_formats, json_strings_are_the_formats, urls,
                                verify_sound_and_damaged, verify_refusals, sample_record_and_replay,
                                write_image));
}
