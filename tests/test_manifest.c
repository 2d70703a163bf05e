/* Manifest: round trip, validation of every field a reader relies on, shard lookup. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "manifest.h"
#include "testutil.h"

static fmt_manifest sample_manifest(fmt_manifest_shard *sh, char **classes)
{
    fmt_manifest m = {0};
    m.backend = "raw";
    m.backend_version = 1;
    m.tool = "shardc test";
    m.samples = 10;
    m.inputs = 12;
    m.rejects = 2;
    m.nclasses = 2;
    m.classes = classes;
    m.geom.mode = FMT_GEOM_SIZE;
    m.geom.fit = FMT_FIT_PAD;
    m.geom.width = 32;
    m.geom.height = 24;
    m.channels = 3;
    m.sample_width = 32;
    m.sample_height = 24;
    m.pixels = 7680;
    m.mean[0] = 100.5;
    m.mean[1] = 50.25;
    m.mean[2] = 0.125;
    m.std[0] = 10;
    m.std[1] = 20;
    m.std[2] = 30;
    m.fingerprint = 0xfedcba9876543210ull;
    sh[0] = (fmt_manifest_shard){.file = "shard-00000.raw", .first = 0, .samples = 6, .bytes = 1234,
                                 .hash = 0x0123456789abcdefull};
    sh[1] = (fmt_manifest_shard){.file = "shard-00001.raw", .first = 6, .samples = 0, .bytes = 4096,
                                 .hash = 1};
    sh[2] = (fmt_manifest_shard){.file = "shard-00002.raw", .first = 6, .samples = 4, .bytes = 5678,
                                 .hash = 0xffffffffffffffffull, .skel_off = 4096,
                                 .skel_len = 320};
    m.nshards = 3;
    m.shards = sh;
    m.build_json = "{\"channels\": 3}";
    return m;
}

START_TEST(round_trip)
{
    fmt_manifest_shard sh[3];
    char *classes[] = {"cat", "dog \"quoted\""};
    fmt_manifest m = sample_manifest(sh, classes), r;
    char *json;
    ck_assert_int_eq(fmt_manifest_dump(&m, &json), 0);
    fmt_msg msg = {{0}};
    ck_assert_int_eq(fmt_manifest_parse(json, strlen(json), &r, &msg), 0);
    ck_assert_str_eq(r.backend, "raw");
    ck_assert_uint_eq(r.samples, 10);
    ck_assert_uint_eq(r.inputs, 12);
    ck_assert_uint_eq(r.rejects, 2);
    ck_assert_uint_eq(r.nclasses, 2);
    ck_assert_str_eq(r.classes[1], "dog \"quoted\"");
    ck_assert_int_eq(r.geom.mode, FMT_GEOM_SIZE);
    ck_assert_int_eq(r.geom.fit, FMT_FIT_PAD);
    ck_assert_uint_eq(r.geom.width, 32);
    ck_assert_uint_eq(r.sample_height, 24);
    ck_assert_uint_eq(r.fingerprint, 0xfedcba9876543210ull);
    ck_assert_uint_eq(r.nshards, 3);
    ck_assert_uint_eq(r.shards[0].hash, 0x0123456789abcdefull);
    ck_assert_uint_eq(r.shards[2].hash, 0xffffffffffffffffull);
    ck_assert_uint_eq(r.shards[2].first, 6);
    /* the skeleton range, where one is set, and none where none is */
    ck_assert_uint_eq(r.shards[2].skel_off, 4096);
    ck_assert_uint_eq(r.shards[2].skel_len, 320);
    ck_assert_uint_eq(r.shards[0].skel_len, 0);
    ck_assert_ptr_null(strstr(json, "\"skeleton\": {\"offset\": 0"));
    const char *sk = strstr(json, "\"skeleton\"");     /* shard 2's alone */
    ck_assert_ptr_nonnull(sk);
    ck_assert_ptr_null(strstr(sk + 1, "\"skeleton\""));
    ck_assert_double_eq_tol(r.mean[1], 50.25, 1e-9);
    ck_assert_double_eq_tol(r.std[2], 30, 1e-9);
    ck_assert_ptr_nonnull(strstr(r.build_json, "\"channels\""));
    /* lookup skips the empty shard */
    ck_assert_int_eq(fmt_manifest_find_shard(&r, 0), 0);
    ck_assert_int_eq(fmt_manifest_find_shard(&r, 5), 0);
    ck_assert_int_eq(fmt_manifest_find_shard(&r, 6), 2);
    ck_assert_int_eq(fmt_manifest_find_shard(&r, 9), 2);
    ck_assert_int_eq(fmt_manifest_find_shard(&r, 10), -1);
    fmt_manifest_free(&r);
    free(json);
}
END_TEST

/* Replace the first occurrence of `from` in the dumped JSON by `to` and parse the result. */
static int parse_edited(const char *from, const char *to, fmt_msg *msg)
{
    fmt_manifest_shard sh[3];
    char *classes[] = {"cat", "dog"};
    fmt_manifest m = sample_manifest(sh, classes), r;
    char *json;
    ck_assert_int_eq(fmt_manifest_dump(&m, &json), 0);
    char *at = strstr(json, from);
    ck_assert_msg(at != NULL, "fixture lacks '%s'", from);
    size_t n = strlen(json) + strlen(to) + 1;
    char *e = malloc(n);
    snprintf(e, n, "%.*s%s%s", (int)(at - json), json, to, at + strlen(from));
    memset(msg, 0, sizeof *msg);
    int rc = fmt_manifest_parse(e, strlen(e), &r, msg);
    if (rc == 0)
        fmt_manifest_free(&r);
    free(e);
    free(json);
    return rc;
}

START_TEST(rejects_bad_fields)
{
    fmt_msg msg;
    ck_assert_int_eq(parse_edited("\"samples\": 10", "\"samples\": 11", &msg), FMT_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(msg.text, "samples"));
    ck_assert_int_eq(parse_edited("\"samples\": 10", "\"samples\": -1", &msg), FMT_ECORRUPT);
    ck_assert_int_eq(parse_edited("\"samples\": 10", "\"samples\": \"10\"", &msg), FMT_ECORRUPT);
    ck_assert_int_eq(parse_edited("shard-00001.raw", "../etc/passwd", &msg), FMT_ECORRUPT);
    /* shard paths stay inside the dataset: relative, no '.'-names, no empty components */
    static const char *const unsafe[] = {"/etc/passwd", "parts/../../x", "parts/./shard.raw",
                                         "parts//shard.raw", "parts/shard.raw/", ".hidden",
                                         "a/b/c/d/e", "parts/.p/shard.raw"};
    for (size_t i = 0; i < sizeof unsafe / sizeof *unsafe; i++)
        ck_assert_msg(parse_edited("shard-00001.raw", unsafe[i], &msg) == FMT_ECORRUPT,
                      "unsafe path %s accepted", unsafe[i]);
    ck_assert_int_eq(parse_edited("shard-00001.raw", "parts/00001-of-00002/shard-00001.raw", &msg),
                     0);
    /* offsets: a part's own numbering; never past the dataset-wide first index; then fields
     * out of range, versions and formats not this one's, hashes not hex, repeated keys */
    static const struct {
        const char *from, *to;
        int want;
    } edits[] = {
        {"\"first\": 6,", "\"first\": 6, \"offset\": 7,", FMT_ECORRUPT},
        {"\"first\": 6,", "\"first\": 6, \"offset\": -1,", FMT_ECORRUPT},
        {"\"first\": 6", "\"first\": 7", FMT_ECORRUPT},
        {"\"channels\": 3,", "\"channels\": 2,", FMT_ECORRUPT},
        {"\"manifest_version\": 1", "\"manifest_version\": 2", FMT_EVERSION},
        {"\"format\": \"shardc\"", "\"format\": \"other\"", FMT_EFORMAT},
        {"0123456789abcdef", "0123456789abcdeg", FMT_ECORRUPT},
        {"\"mode\": \"size\"", "\"mode\": \"huge\"", FMT_ECORRUPT},
        {"\"mean\": [", "\"mean\": [1, ", FMT_ECORRUPT},
        {"\"tool\"", "\"tool\": 1, \"tool\"", FMT_ECORRUPT},
        /* a skeleton range inside the file, not empty, an object */
        {"\"offset\": 4096", "\"offset\": 5400", FMT_ECORRUPT},
        {"\"bytes\": 320", "\"bytes\": 0", FMT_ECORRUPT},
        {"\"skeleton\": {", "\"skeleton\": 1, \"x\": {", FMT_ECORRUPT},
        {"\"offset\": 4096", "\"offset\": 5000", 0},
    };
    for (size_t i = 0; i < sizeof edits / sizeof *edits; i++)
        ck_assert_int_eq(parse_edited(edits[i].from, edits[i].to, &msg), edits[i].want);
}
END_TEST

START_TEST(rejects_garbage)
{
    fmt_manifest r;
    fmt_msg msg = {{0}};
    const char *cases[] = {"", "{", "[]", "null", "{\"format\": \"shardc\"}", "\xff\xfe{}",
                           "{\"format\": \"shardc\", \"manifest_version\": 1}"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int rc = fmt_manifest_parse(cases[i], strlen(cases[i]), &r, &msg);
        ck_assert_msg(rc != 0, "case %zu parsed", i);
    }
}
END_TEST

/* The manifest of dir (NULL name) or the one named reads, with sample_manifest's 10 samples. */
static void assert_reads_back(const char *dir, const char *name)
{
    fmt_manifest r;
    ck_assert_int_eq(name ? fmt_manifest_read_named(dir, name, &r, NULL)
                          : fmt_manifest_read(dir, &r, NULL), 0);
    ck_assert_uint_eq(r.samples, 10);
    fmt_manifest_free(&r);
}

/* A new folder from the mkdtemp template dir, and sample_manifest with classes a and b. */
static fmt_manifest temp_manifest(char *dir)
{
    static fmt_manifest_shard sh[3];
    static char *classes[] = {"a", "b"};
    ck_assert_ptr_nonnull(mkdtemp(dir));
    return sample_manifest(sh, classes);
}

/* The folder dir and its manifest.json gone. */
static void remove_manifest_dir(const char *dir)
{
    char path[256];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    unlink(path);
    rmdir(dir);
}

START_TEST(write_read_dir)
{
    char dir[] = "/tmp/test_manifest_XXXXXX";
    fmt_manifest m = temp_manifest(dir), r;
    ck_assert_int_eq(fmt_manifest_read(dir, &r, NULL), ENOENT);
    ck_assert_int_eq(fmt_manifest_write(dir, &m), 0);
    char path[256];
    snprintf(path, sizeof path, "%s/manifest.json.tmp", dir);
    ck_assert_int_ne(access(path, F_OK), 0); /* no temp left behind */
    assert_reads_back(dir, NULL);
    remove_manifest_dir(dir);
}
END_TEST

/* A staged manifest is not the manifest until it is published: a build opens what it wrote under
 * it and only then lets readers see it. */
START_TEST(stage_then_publish)
{
    char dir[] = "/tmp/test_manifest_XXXXXX";
    fmt_manifest m = temp_manifest(dir), r;
    ck_assert_int_eq(fmt_manifest_stage(dir, &m), 0);
    ck_assert_int_eq(fmt_manifest_read(dir, &r, NULL), ENOENT);
    assert_reads_back(dir, FMT_MANIFEST_STAGED_NAME);
    ck_assert_int_eq(fmt_manifest_publish(dir), 0);
    ck_assert_int_eq(fmt_manifest_read_named(dir, FMT_MANIFEST_STAGED_NAME, &r, NULL), ENOENT);
    assert_reads_back(dir, NULL);
    ck_assert_int_eq(fmt_manifest_publish(dir), ENOENT);    /* nothing staged */
    remove_manifest_dir(dir);
}
END_TEST

START_TEST(offsets_and_shard_dirs)
{
    fmt_manifest_shard sh[3];
    char *classes[] = {"a", "b"};
    fmt_manifest m = sample_manifest(sh, classes), r;
    sh[1].file = "parts/00001-of-00002/shard-00000.raw";
    sh[1].offset = 6;
    sh[2].file = "parts/00001-of-00002/shard-00001.raw";
    sh[2].offset = 6;
    char *json;
    ck_assert_int_eq(fmt_manifest_dump(&m, &json), 0);
    ck_assert_ptr_nonnull(strstr(json, "\"offset\": 6"));
    fmt_msg msg = {{0}};
    ck_assert_int_eq(fmt_manifest_parse(json, strlen(json), &r, &msg), 0);
    ck_assert_uint_eq(r.shards[0].offset, 0);
    ck_assert_uint_eq(r.shards[1].offset, 6);
    ck_assert_uint_eq(r.shards[2].offset, 6);
    ck_assert_str_eq(r.shards[2].file, "parts/00001-of-00002/shard-00001.raw");
    char *d0 = fmt_manifest_shard_dir("/data/ds", &r.shards[0]);
    char *d2 = fmt_manifest_shard_dir("/data/ds", &r.shards[2]);
    ck_assert_str_eq(d0, "/data/ds");
    ck_assert_str_eq(d2, "/data/ds/parts/00001-of-00002");
    free(d0);
    free(d2);
    fmt_manifest_free(&r);
    free(json);
}
END_TEST

int main(void)
{
    Suite *s = TU_SUITE("manifest", "core", 0, round_trip, rejects_bad_fields, rejects_garbage,
                        write_read_dir, stage_then_publish, offsets_and_shard_dirs);
    return tu_run(s);
}
