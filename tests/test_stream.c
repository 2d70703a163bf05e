/* A streamed build (stream.h, build.h opts.stream): items added while the build runs, by path,
 * bytes and pixels; rejects at their positions; the window; cancel leaves nothing; an empty
 * stream is refused. (tests/python/test_writer.py compares such builds with shardc's.) */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "dataset.h"
#include "mksample.h"
#include "stream.h"
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
    snprintf(c->src, sizeof c->src, "%s/src", g_dir);
    snprintf(c->out, sizeof c->out, "%s/out", g_dir);
    mks_opts mo;
    mks_opts_init(&mo);
    mo.classes = 1;
    mo.per_class = per_class;
    mo.broken = 0;
    mks_report rep;
    ck_assert_int_eq(mks_generate(c->src, &mo, &rep), 0);
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

int main(void)
{
    Suite *s = TU_TEMP_SUITE("stream", "core", 60, paths_bytes_pixels, cancel_leaves_nothing,
                             empty_and_classes);
    return tu_run(s);
}
