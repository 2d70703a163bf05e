/* A streamed build (shardc.h's producer calls, stream.h, build.h opts.stream): items added while
 * the build runs, by path, bytes and pixels; rejects at their positions; the window; cancel
 * leaves nothing; an empty stream is refused; the public fields schema (every type) and
 * categories reach the manifest as the formats' types, with the refusals of a bad schema.
 * (tests/python/test_writer.py compares such builds with shardc's.) */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "dataset.h"
#include "mksample.h"
#include "stream.h"
#include "target.h"
#include "testutil.h"

typedef struct {
    shc_build_opts o;
    shc_summary sum;
    size_t rejects;
    int rc;
} run;

static void on_reject(void *ctx, const char *path, const char *reason)
{
    (void)path;
    (void)reason;
    ((run *)ctx)->rejects++;
}

static void on_summary(void *ctx, const shc_summary *s)
{
    ((run *)ctx)->sum = *s;
}

static void *build_thread(void *arg)
{
    run *r = arg;
    shc_build_cb cb = {.ctx = r, .reject = on_reject, .summary = on_summary};
    r->rc = shc_build(&r->o, &cb);
    shc_stream_cancel(r->o.stream);
    return NULL;
}

static void start(run *r, const char *out, shc_stream *st, pthread_t *tid)
{
    memset(r, 0, sizeof *r);
    shc_build_opts_init(&r->o);
    r->o.out = out;
    r->o.stream = st;
    r->o.threads = 3;
    r->o.shard_samples = 2;
    r->o.r.geom = (fmt_geom){.mode = FMT_GEOM_SIZE, .width = 16, .height = 12};
    ck_assert_int_eq(pthread_create(tid, NULL, build_thread, r), 0);
}

/* The stream closed and its build joined: the build succeeded with samples samples; the dataset
 * it wrote at out, open. */
static fmt_dataset *finish_ok(shc_stream *st, pthread_t tid, const run *r, uint64_t samples,
                              const char *out)
{
    shc_stream_close(st);
    pthread_join(tid, NULL);
    ck_assert_int_eq(r->rc, 0);
    ck_assert_uint_eq(r->sum.samples, samples);
    fmt_dataset *ds = NULL;
    ck_assert_int_eq(fmt_dataset_open_ex(&ds, out, FMT_ACCESS_PREAD, NULL), 0);
    return ds;
}

static char *dup_str(const char *s)
{
    char *p = strdup(s);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* The one class folder mksample wrote into src. */
static void class_dir(const char *src, char *out, size_t n)
{
    DIR *d = opendir(src);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    out[0] = '\0';
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            snprintf(out, n, "%s/%s", src, e->d_name);
    closedir(d);
    ck_assert(out[0]);
}

static int add_path(shc_stream *st, const char *path, int32_t label)
{
    shc_item it = {.kind = SHC_ITEM_PATH, .name = dup_str(path), .label = label};
    int rc = shc_stream_add(st, &it);
    free(it.name);
    return rc;
}

/* A streamed build of one class folder: per_class images generated in g_dir/src, built into
 * g_dir/out with a window of `window` items (st, run r on thread tid), the class folder at cls
 * open (d) for next_image. */
typedef struct {
    char src[700], out[700], cls[960];
    shc_stream *st;
    run r;
    pthread_t tid;
    DIR *d;
} one_class;

static void start_one_class(one_class *c, unsigned per_class, size_t window)
{
    snprintf(c->out, sizeof c->out, "%s/out", g_dir);
    tu_mks_src(c->src, sizeof c->src, 1, per_class, 0, 0, 0);
    ck_assert_int_eq(shc_stream_create(window, 0, NULL, 0, &c->st), 0);
    start(&c->r, c->out, c->st, &c->tid);
    class_dir(c->src, c->cls, sizeof c->cls);
    c->d = opendir(c->cls);
    ck_assert_ptr_nonnull(c->d);
}

/* The path of the class folder's next image into p: 0 when there is none left. */
static int next_image(one_class *c, char *p, size_t n)
{
    struct dirent *e;
    while ((e = readdir(c->d)))
        if (e->d_name[0] != '.') {
            snprintf(p, n, "%s/%s", c->cls, e->d_name);
            return 1;
        }
    return 0;
}

/* Files by path and by bytes, pixels and a refused item: every position is a sample or a reject,
 * in order; classes named "0".."2" from the labels. */
START_TEST(paths_bytes_pixels)
{
    char p[1300];
    one_class c;
    start_one_class(&c, 4, 2);
    int files = 0;
    while (next_image(&c, p, sizeof p)) {
        ck_assert_int_eq(add_path(c.st, p, files % 3), 0);
        /* the same file's bytes */
        FILE *f = fopen(p, "rb");
        ck_assert_ptr_nonnull(f);
        uint8_t *buf = malloc(1 << 20);
        size_t n = fread(buf, 1, 1 << 20, f);
        fclose(f);
        shc_item it = {.kind = SHC_ITEM_ENCODED, .name = dup_str("<memory>"), .label = 1,
                       .data = buf, .len = n};
        ck_assert_int_eq(shc_stream_add(c.st, &it), 0);
        ck_assert_ptr_null(it.data);    /* taken */
        files++;
    }
    closedir(c.d);
    ck_assert_int_eq(files, 4);
    uint8_t *px = calloc(5 * 7 * 4, 1);
    shc_item it = {.kind = SHC_ITEM_PIXELS, .name = dup_str("<px>"), .label = 2, .data = px,
                   .len = 5 * 7 * 4, .width = 7, .height = 5, .channels = 4};
    ck_assert_int_eq(shc_stream_add(c.st, &it), 0);
    shc_item bad = {.kind = SHC_ITEM_REJECT, .name = dup_str("<bad>"), .label = 0,
                    .data = (uint8_t *)dup_str("not an image"), .len = 12};
    ck_assert_int_eq(shc_stream_add(c.st, &bad), 0);
    shc_item junk = {.kind = SHC_ITEM_ENCODED, .name = dup_str("<junk>"), .label = 0,
                     .data = (uint8_t *)dup_str("junk bytes"), .len = 10};
    ck_assert_int_eq(shc_stream_add(c.st, &junk), 0);
    /* a label out of range is refused, the item stays the caller's */
    shc_item far = {.kind = SHC_ITEM_PATH, .name = dup_str(p), .label = -1};
    ck_assert_int_eq(shc_stream_add(c.st, &far), EINVAL);
    free(far.name);
    ck_assert_uint_eq(shc_stream_added(c.st), 11);
    shc_stream_close(c.st);
    pthread_join(c.tid, NULL);
    ck_assert_int_eq(c.r.rc, SHC_EREJECTS);
    ck_assert_uint_eq(c.r.rejects, 2);
    ck_assert_uint_eq(c.r.sum.samples, 9);
    ck_assert_uint_eq(c.r.sum.inputs, 11);
    ck_assert_uint_eq(c.r.sum.classes, 3);
    ck_assert_uint_eq(c.r.sum.shards, 5);
    fmt_dataset *ds = NULL;
    ck_assert_int_eq(fmt_dataset_open_ex(&ds, c.out, FMT_ACCESS_PREAD, NULL), 0);
    ck_assert_uint_eq(fmt_dataset_count(ds), 9);
    fmt_dataset_close(ds);
    shc_stream_free(c.st);
}
END_TEST

/* Cancel: the build stops (SHC_ESTOPPED), a producer waiting on the full window is released, and
 * the output directory keeps nothing of the build. */
START_TEST(cancel_leaves_nothing)
{
    char p[1300];
    one_class c;
    start_one_class(&c, 6, 3);
    while (next_image(&c, p, sizeof p))
        ck_assert_int_eq(add_path(c.st, p, 0), 0);
    closedir(c.d);
    DIR *d;
    struct dirent *e;
    shc_stream_cancel(c.st);
    ck_assert_int_eq(add_path(c.st, p, 0), ECANCELED);
    pthread_join(c.tid, NULL);
    ck_assert_int_eq(c.r.rc, SHC_ESTOPPED);
    ck_assert_ptr_nonnull(d = opendir(c.out));
    while ((e = readdir(d)))
        ck_assert_msg(e->d_name[0] == '.' && strcmp(e->d_name, ".rejects.journal") != 0,
                      "left in out: %s", e->d_name);
    closedir(d);
    shc_stream_free(c.st);
}
END_TEST

/* Nothing added: refused as shardc refuses an empty source, with nothing written; given class
 * names bound the labels. */
START_TEST(empty_and_classes)
{
    char out[700];
    snprintf(out, sizeof out, "%s/out", g_dir);
    const char *names[] = {"cat", "dog"};
    shc_stream *st;
    ck_assert_int_eq(shc_stream_create(4, 1 << 20, names, 2, &st), 0);
    size_t n;
    const char *const *got = shc_stream_classes(st, &n);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(got[1], "dog");
    shc_item it = {.kind = SHC_ITEM_PATH, .name = dup_str("x.jpg"), .label = 2};
    ck_assert_int_eq(shc_stream_add(st, &it), EINVAL);
    free(it.name);
    run r;
    pthread_t tid;
    start(&r, out, st, &tid);
    shc_stream_close(st);
    pthread_join(tid, NULL);
    ck_assert_int_eq(r.rc, SHC_EINPUT);
    char m[800];
    snprintf(m, sizeof m, "%s/manifest.json", out);
    ck_assert(!tu_exists(m));
    shc_stream_free(st);
}
END_TEST

/* An 8x6 RGB item of pixels at label, with the fields record rec (may be NULL) and the target
 * tg (may be NULL), each copied. */
static int add_pixels(shc_stream *st, const char *name, int32_t label, const uint8_t *rec,
                      uint32_t rec_len, const uint8_t *tg, uint32_t tg_len)
{
    shc_item it = {.kind = SHC_ITEM_PIXELS, .name = dup_str(name), .label = label,
                   .data = calloc(8 * 6 * 3, 1), .len = 8 * 6 * 3, .width = 8, .height = 6,
                   .channels = 3};
    ck_assert_ptr_nonnull(it.data);
    if (rec) {
        ck_assert_ptr_nonnull(it.fields = malloc(rec_len));
        memcpy(it.fields, rec, rec_len);
        it.fields_len = rec_len;
    }
    if (tg) {
        ck_assert_ptr_nonnull(it.target = malloc(tg_len));
        memcpy(it.target, tg, tg_len);
        it.target_len = tg_len;
    }
    int rc = shc_stream_add(st, &it);
    free(it.name);
    free(it.data);
    free(it.fields);
    free(it.target);
    return rc;
}

/* The public schema (shc_field_def: every type, scalars and vectors) becomes the manifest's
 * fields as the formats' types, name for name; the items' records are stored as given; a
 * record not of the schema is refused. The public limits and type codes are the formats'. */
START_TEST(public_fields_schema)
{
    ck_assert_uint_eq(SHC_FIELDS_MAX, FMT_FIELDS_MAX);
    ck_assert_uint_eq(SHC_FIELDS_MAX_RECORD, FMT_FIELDS_MAX_RECORD);
    ck_assert_uint_eq(SHC_TARGET_MAX_BOXES, FMT_TARGET_MAX_BOXES);
    ck_assert_int_eq(SHC_ITEM_MAX_LABEL, FMT_MAX_LABEL);
    ck_assert_int_eq(SHC_FIELD_INT, FMT_FIELD_INT);
    ck_assert_int_eq(SHC_FIELD_FLOAT, FMT_FIELD_FLOAT);
    ck_assert_int_eq(SHC_FIELD_STR, FMT_FIELD_STR);
    ck_assert_int_eq(SHC_FIELD_BYTES, FMT_FIELD_BYTES);
    char out[700];
    snprintf(out, sizeof out, "%s/out", g_dir);
    const shc_field_def defs[] = {
        {"id", SHC_FIELD_INT, 0},       {"hot", SHC_FIELD_INT, 3},
        {"score", SHC_FIELD_FLOAT, 0},  {"xy", SHC_FIELD_FLOAT, 2},
        {"caption", SHC_FIELD_STR, 0},  {"blob", SHC_FIELD_BYTES, 0}};
    shc_stream *st;
    ck_assert_int_eq(shc_stream_create(4, 0, NULL, 0, &st), 0);
    shc_msg msg = {{0}};
    ck_assert_int_eq(shc_stream_set_fields(st, defs, 6, &msg), 0);
    /* the stream keeps a copy in the formats' type */
    size_t nf;
    const fmt_field_def *kept = shc_stream_fields(st, &nf);
    ck_assert_uint_eq(nf, 6);
    for (size_t i = 0; i < nf; i++) {
        ck_assert_str_eq(kept[i].name, defs[i].name);
        ck_assert_ptr_ne(kept[i].name, defs[i].name);
        ck_assert_uint_eq(kept[i].type, defs[i].type);
        ck_assert_uint_eq(kept[i].count, defs[i].count);
    }
    int64_t id = -42, hot[3] = {1, 0, 1};
    double score = 0.25, xy[2] = {1.5, -2};
    const uint8_t blob[3] = {0, 1, 255};
    fmt_field_value v[6] = {{FMT_FIELD_INT, 1, &id},      {FMT_FIELD_INT, 3, hot},
                            {FMT_FIELD_FLOAT, 1, &score}, {FMT_FIELD_FLOAT, 2, xy},
                            {FMT_FIELD_STR, 6, "h\xc3\xa9llo"},  {FMT_FIELD_BYTES, 3, blob}};
    uint8_t rec[512];
    uint32_t len = fmt_fields_encode(v, 6, rec, sizeof rec);
    ck_assert_uint_gt(len, 0);
    /* a record of another schema (one field fewer) is refused, the item stays the caller's */
    uint8_t other[512];
    uint32_t olen = fmt_fields_encode(v, 5, other, sizeof other);
    ck_assert_uint_gt(olen, 0);
    ck_assert_int_eq(add_pixels(st, "<bad>", 0, other, olen, NULL, 0), EINVAL);
    ck_assert_int_eq(add_pixels(st, "<none>", 0, NULL, 0, NULL, 0), EINVAL);
    run r;
    pthread_t tid;
    start(&r, out, st, &tid);
    ck_assert_int_eq(add_pixels(st, "<a>", 0, rec, len, NULL, 0), 0);
    ck_assert_int_eq(add_pixels(st, "<b>", 1, rec, len, NULL, 0), 0);
    /* set once, before the first item */
    ck_assert_int_eq(shc_stream_set_fields(st, defs, 6, &msg), EBUSY);
    fmt_dataset *ds = finish_ok(st, tid, &r, 2, out);
    const fmt_manifest *m = fmt_dataset_manifest(ds);
    ck_assert_uint_eq(m->nfields, 6);
    for (size_t i = 0; i < 6; i++) {
        ck_assert_str_eq(m->fields[i].name, defs[i].name);
        ck_assert_uint_eq(m->fields[i].type, defs[i].type);
        ck_assert_uint_eq(m->fields[i].count, defs[i].count);
    }
    ck_assert_str_eq(m->fields_source, "stream");
    for (uint64_t i = 0; i < 2; i++) {
        const uint8_t *got;
        size_t glen;
        ck_assert_int_eq(fmt_dataset_fields_record(ds, i, &got, &glen, NULL), 0);
        ck_assert_uint_eq(glen, len);
        ck_assert_int_eq(memcmp(got, rec, len), 0);
    }
    fmt_dataset_close(ds);
    shc_stream_free(st);
}
END_TEST

/* A bad public schema is refused with the formats' check and words, nothing kept: no fields,
 * too many, a NULL or bad name, an unknown type, a count for str, a name twice. And the public
 * label bound is the stream's. */
START_TEST(public_fields_refused)
{
    shc_stream *st;
    ck_assert_int_eq(shc_stream_create(2, 0, NULL, 0, &st), 0);
    shc_msg msg = {{0}};
    shc_field_def many[SHC_FIELDS_MAX + 1];
    for (size_t i = 0; i <= SHC_FIELDS_MAX; i++)
        many[i] = (shc_field_def){"f", SHC_FIELD_INT, 0};
    ck_assert_int_eq(shc_stream_set_fields(st, many, 0, &msg), FMT_EINVAL);
    ck_assert_str_eq(msg.text, "0 fields (1..64)");
    ck_assert_int_eq(shc_stream_set_fields(st, many, SHC_FIELDS_MAX + 1, &msg), FMT_EINVAL);
    ck_assert_str_eq(msg.text, "65 fields (1..64)");
    const shc_field_def null_name[] = {{NULL, SHC_FIELD_INT, 0}};
    ck_assert_int_eq(shc_stream_set_fields(st, null_name, 1, &msg), FMT_EINVAL);
    ck_assert_ptr_nonnull(strstr(msg.text, "field 0: name ''"));
    const shc_field_def bad_name[] = {{"1x", SHC_FIELD_INT, 0}};
    ck_assert_int_eq(shc_stream_set_fields(st, bad_name, 1, &msg), FMT_EINVAL);
    ck_assert_ptr_nonnull(strstr(msg.text, "field 0: name '1x'"));
    const shc_field_def bad_type[] = {{"a", 9, 0}};
    ck_assert_int_eq(shc_stream_set_fields(st, bad_type, 1, &msg), FMT_EINVAL);
    ck_assert_str_eq(msg.text, "field 'a': unknown type 9");
    const shc_field_def str_count[] = {{"a", SHC_FIELD_INT, 2}, {"s", SHC_FIELD_STR, 4}};
    ck_assert_int_eq(shc_stream_set_fields(st, str_count, 2, &msg), FMT_EINVAL);
    ck_assert_str_eq(msg.text, "field 's': count 4 (0 for str and bytes)");
    const shc_field_def twice[] = {{"a", SHC_FIELD_INT, 0}, {"a", SHC_FIELD_FLOAT, 0}};
    ck_assert_int_eq(shc_stream_set_fields(st, twice, 2, &msg), FMT_EINVAL);
    ck_assert_str_eq(msg.text, "field 'a' named twice");
    size_t nf;
    ck_assert_ptr_null(shc_stream_fields(st, &nf));
    ck_assert_uint_eq(nf, 0);
    /* without a schema, an item's label goes up to SHC_ITEM_MAX_LABEL */
    ck_assert_int_eq(add_pixels(st, "<far>", SHC_ITEM_MAX_LABEL + 1, NULL, 0, NULL, 0), EINVAL);
    ck_assert_int_eq(add_pixels(st, "<top>", SHC_ITEM_MAX_LABEL, NULL, 0, NULL, 0), 0);
    ck_assert_uint_eq(shc_stream_added(st), 1);
    shc_stream_free(st);
}
END_TEST

/* The public categories (shc_category) become the manifest's, id for id and name for name,
 * with the item's box stored under its category; ids not increasing are refused. */
START_TEST(public_categories)
{
    char out[700];
    snprintf(out, sizeof out, "%s/out", g_dir);
    shc_stream *st;
    ck_assert_int_eq(shc_stream_create(4, 0, NULL, 0, &st), 0);
    ck_assert_int_eq(shc_stream_set_targets(st), 0);
    const shc_category unsorted[] = {{7, "dog"}, {1, "cat"}};
    ck_assert_int_eq(shc_stream_set_categories(st, unsorted, 2), EINVAL);
    const shc_category twice[] = {{1, "cat"}, {1, "dog"}};
    ck_assert_int_eq(shc_stream_set_categories(st, twice, 2), EINVAL);
    const fmt_category *kept;
    size_t nc;
    ck_assert_int_eq(shc_stream_targets(st, &kept, &nc), 1);
    ck_assert_uint_eq(nc, 0);
    const shc_category cats[] = {{1, "cat"}, {7, "dog"}};
    ck_assert_int_eq(shc_stream_set_categories(st, cats, 2), 0);
    ck_assert_int_eq(shc_stream_targets(st, &kept, &nc), 1);
    ck_assert_uint_eq(nc, 2);
    ck_assert_int_eq(kept[1].id, 7);
    ck_assert_str_eq(kept[1].name, "dog");
    ck_assert_ptr_ne(kept[1].name, cats[1].name);
    /* one box (1, 1)-(5, 3) of category 7 on an 8x6 source */
    uint8_t tg[SHC_SRC_TARGET_SIZE(1)];
    uint32_t n = 1, zero = 0;
    int64_t image_id = 99, cat = 7;
    double box[4] = {1, 1, 5, 3}, area = NAN;
    memcpy(tg, &n, 4);
    memcpy(tg + 4, &zero, 4);
    memcpy(tg + 8, &image_id, 8);
    memcpy(tg + 16, box, 32);
    memcpy(tg + 48, &cat, 8);
    memcpy(tg + 56, &area, 8);
    tg[64] = 0;
    /* a target is required, and the label is -1 */
    ck_assert_int_eq(add_pixels(st, "<none>", -1, NULL, 0, NULL, 0), EINVAL);
    ck_assert_int_eq(add_pixels(st, "<label>", 0, NULL, 0, tg, sizeof tg), EINVAL);
    run r;
    pthread_t tid;
    start(&r, out, st, &tid);
    ck_assert_int_eq(add_pixels(st, "<a>", -1, NULL, 0, tg, sizeof tg), 0);
    fmt_dataset *ds = finish_ok(st, tid, &r, 1, out);
    const fmt_manifest *m = fmt_dataset_manifest(ds);
    ck_assert_uint_eq(m->ncategories, 2);
    ck_assert_int_eq(m->categories[0].id, 1);
    ck_assert_str_eq(m->categories[0].name, "cat");
    ck_assert_int_eq(m->categories[1].id, 7);
    ck_assert_str_eq(m->categories[1].name, "dog");
    fmt_target t;
    ck_assert_int_eq(fmt_dataset_target(ds, 0, &t, NULL), 0);
    ck_assert_uint_eq(t.count, 1);
    ck_assert_int_eq(t.labels[0], 7);
    ck_assert_int_eq(t.image_id, 99);
    ck_assert_uint_eq(t.orig_width, 8);
    ck_assert_uint_eq(t.orig_height, 6);
    /* 8x6 to 16x12: every coordinate doubled, the area (4 x 2) four times */
    ck_assert_float_eq(t.boxes[0], 2);
    ck_assert_float_eq(t.boxes[1], 2);
    ck_assert_float_eq(t.boxes[2], 10);
    ck_assert_float_eq(t.boxes[3], 6);
    ck_assert_float_eq(t.area[0], 32);
    fmt_dataset_close(ds);
    shc_stream_free(st);
}
END_TEST

int main(void)
{
    Suite *s = TU_TEMP_SUITE("stream", "core", 60, paths_bytes_pixels, cancel_leaves_nothing,
                             empty_and_classes, public_fields_schema, public_fields_refused,
                             public_categories);
    return tu_run(s);
}
