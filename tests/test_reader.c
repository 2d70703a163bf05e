/* test_reader.c - libshardread: batch contents against the dataset, orders, ranks, exact resume,
 * prefetch bounds, crop/pad/flip, access paths, flat memory, errors; and the formats/dataset read
 * paths underneath.
 *
 * Fixtures are real datasets built at run time by the shardc binaries of the same build directory
 * (found next to this program: <exe>/../bin/, else $BUILD/bin), once, before the tests fork. */
#include "dataset.h"
#include "pinned.h"
#include "raw.h"
#include "sampler.h"
#include "shardread.h"
#include "progs.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <libgen.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define N_SAMPLES 23
#define FIX_W 24
#define FIX_H 20

static char g_fixed[1100];              /* 23 RGB samples of 24x20, shards of 7 */
static char g_gray[1100];               /* the same, one channel */
static char g_var[1100];                /* 23 RGB samples of their own size, long side <= 40 */

/* ---- fixtures ---- */

/* First n lines of src into dst. */
static int head_lines(const char *src, const char *dst, int n)
{
    FILE *in = fopen(src, "r"), *out = fopen(dst, "w");
    int rc = in && out ? 0 : -1;
    char line[1024];
    for (int i = 0; rc == 0 && i < n; i++)
        if (!fgets(line, sizeof line, in) || fputs(line, out) < 0)
            rc = -1;
    if (in)
        fclose(in);
    if (out && fclose(out) != 0)
        rc = -1;
    return rc;
}

static int build_fixtures(void)
{
    if (tu_progs_root() != 0)
        return -1;
    char cmd[4096], list[1200], list23[1200];
    snprintf(list, sizeof list, "%s/list.txt", g_root);
    snprintf(list23, sizeof list23, "%s/list23.txt", g_root);
    snprintf(cmd, sizeof cmd, "'%s/shardc-mksample' '%s/src' --classes 3 --per-class 8 "
             "--no-broken --quiet --list '%s'", g_bin, g_root, list);
    if (run_quiet(cmd) != 0 || head_lines(list, list23, N_SAMPLES) != 0)
        return -1;
    snprintf(g_fixed, sizeof g_fixed, "%s/fixed", g_root);
    snprintf(g_gray, sizeof g_gray, "%s/gray", g_root);
    snprintf(g_var, sizeof g_var, "%s/var", g_root);
    const char *sets[][2] = {
        {g_fixed, "--size 24x20"}, {g_gray, "--size 24x20 --gray"}, {g_var, "--max-side 40"},
    };
    for (size_t i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "'%s/shardc' build '%s/src' --list '%s' -o '%s' %s "
                 "--shard-samples 7 -j 2 --no-progress", g_bin, g_root, list23, sets[i][0],
                 sets[i][1]);
        if (run_quiet(cmd) != 0) {
            fprintf(stderr, "test_reader: failed: %s\n", cmd);
            return -1;
        }
    }
    return 0;
}

/* A copy of a dataset directory (for damaging), at g_root/name. */
static void copy_dataset(const char *from, const char *name, char *out, size_t n)
{
    snprintf(out, n, "%s/%s", g_root, name);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", out, from, out);
    ck_assert_int_eq(run_quiet(cmd), 0);
}

/* ---- recording a reader's output ---- */

typedef struct {
    int end;                    /* SHR_EEND rather than a batch */
    uint64_t epoch, number;
    uint32_t n;
    int64_t idx[16], lab[16], src[16];
    uint8_t *data;
    size_t bytes;
} event;

static void options(shr_options *o, uint32_t batch, shr_order order, uint64_t seed)
{
    shr_options_init(o);
    o->batch_size = batch;
    o->order = order;
    o->seed = seed;
}

/* The next count events (batches or ends of epoch), releasing every batch. */
static event *take(shr_reader *r, size_t count)
{
    event *ev = calloc(count, sizeof *ev);
    ck_assert_ptr_nonnull(ev);
    for (size_t i = 0; i < count; i++) {
        const shr_batch *b;
        int rc = shr_next(r, &b);
        if (rc == SHR_EEND) {
            ck_assert_ptr_null(b);
            ev[i].end = 1;
            continue;
        }
        ck_assert_msg(rc == 0, "shr_next: %s (%s)", shr_strerror(rc), shr_last_error(r));
        ck_assert_uint_le(b->n, 16);
        ck_assert_uint_ge(b->n, 1);
        ev[i].epoch = b->epoch;
        ev[i].number = b->number;
        ev[i].n = b->n;
        for (uint32_t j = 0; j < b->n; j++) {
            ev[i].idx[j] = b->indices[j];
            ev[i].lab[j] = b->labels[j];
            ev[i].src[j] = b->sources[j];
        }
        ev[i].bytes = (size_t)b->n * b->height * b->width * b->channels;
        ev[i].data = malloc(ev[i].bytes);
        ck_assert_ptr_nonnull(ev[i].data);
        memcpy(ev[i].data, b->data, ev[i].bytes);
        shr_release(r, b);
    }
    return ev;
}

static void events_free(event *ev, size_t count)
{
    for (size_t i = 0; ev && i < count; i++)
        free(ev[i].data);
    free(ev);
}

static void assert_same_events(const event *a, const event *b, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        ck_assert_int_eq(a[i].end, b[i].end);
        if (a[i].end)
            continue;
        ck_assert_uint_eq(a[i].epoch, b[i].epoch);
        ck_assert_uint_eq(a[i].number, b[i].number);
        ck_assert_uint_eq(a[i].n, b[i].n);
        ck_assert_mem_eq(a[i].idx, b[i].idx, a[i].n * sizeof(int64_t));
        ck_assert_mem_eq(a[i].lab, b[i].lab, a[i].n * sizeof(int64_t));
        ck_assert_mem_eq(a[i].src, b[i].src, a[i].n * sizeof(int64_t));
        ck_assert_uint_eq(a[i].bytes, b[i].bytes);
        ck_assert_msg(memcmp(a[i].data, b[i].data, a[i].bytes) == 0, "event %zu: pixels differ",
                      i);
    }
}

/* Events of `epochs` whole epochs of a reader opened at epoch 0. */
static event *run_epochs(const char *dir, const shr_options *o, int epochs, size_t *count)
{
    shr_reader *r = tu_reader_open(dir, o);
    *count = (size_t)epochs * (shr_batches_per_epoch(r) + 1);
    event *ev = take(r, *count);
    shr_close(r);
    return ev;
}

/* `epochs` epochs of dir read with o give the count events of want, the same to the byte. */
static void assert_run_same(const char *dir, const shr_options *o, int epochs, const event *want,
                            size_t count)
{
    size_t n;
    event *ev = run_epochs(dir, o, epochs, &n);
    ck_assert_uint_eq(n, count);
    assert_same_events(want, ev, n);
    events_free(ev, n);
}

/* ---- expected pixels ---- */

/* The documented flip draw with flip_p 1/2: (word & 0xffffff) * 2^-24 < 0.5. */
static int flipped(uint64_t seed, uint64_t epoch, uint64_t idx)
{
    return (shr_mix(seed, epoch, idx, SHR_SALT_FLIP) & 0xffffff) < 0x800000;
}

static void mirror(uint8_t *p, uint32_t h, uint32_t w, uint32_t c)
{
    uint8_t *row = malloc((size_t)w * c);
    ck_assert_ptr_nonnull(row);
    for (uint32_t y = 0; y < h; y++) {
        uint8_t *line = p + (size_t)y * w * c;
        for (uint32_t x = 0; x < w; x++)
            memcpy(row + (size_t)x * c, line + (size_t)(w - 1 - x) * c, c);
        memcpy(line, row, (size_t)w * c);
    }
    free(row);
}

/* The stored sample at output size w x h, computed pixel by pixel: where the sample is larger
 * the window starts at (x0, y0), where smaller it is centered in a zero border. */
static void expect_sample(uint8_t *out, const fmt_sample *s, uint32_t w, uint32_t h, uint32_t x0,
                          uint32_t y0, int flip)
{
    uint32_t c = s->channels;
    for (uint32_t y = 0; y < h; y++) {
        for (uint32_t x = 0; x < w; x++) {
            long sy = s->height >= h ? (long)(y + y0) : (long)y - (long)(h - s->height) / 2;
            long sx = s->width >= w ? (long)(x + x0) : (long)x - (long)(w - s->width) / 2;
            int in = sy >= 0 && sy < (long)s->height && sx >= 0 && sx < (long)s->width;
            for (uint32_t k = 0; k < c; k++)
                out[((size_t)y * w + x) * c + k] =
                    in ? s->pixels[((size_t)sy * s->width + (size_t)sx) * c + k] : 0;
        }
    }
    if (flip)
        mirror(out, h, w, c);
}

static uint32_t center(uint32_t have, uint32_t want)
{
    return have > want ? (have - want) / 2 : 0;
}

/* Check every sample of every batch of ev against the dataset: labels, sources, and pixels as
 * cropped/padded/flipped per the options. */
static void check_against_dataset(const char *dir, const shr_options *o, const event *ev,
                                  size_t count, uint32_t w, uint32_t h)
{
    fmt_dataset *d;
    ck_assert_int_eq(fmt_dataset_open(&d, dir, NULL), 0);
    uint32_t c = fmt_dataset_manifest(d)->channels;
    uint8_t *want = malloc((size_t)w * h * c);
    ck_assert_ptr_nonnull(want);
    for (size_t i = 0; i < count; i++) {
        for (uint32_t j = 0; !ev[i].end && j < ev[i].n; j++) {
            uint64_t idx = (uint64_t)ev[i].idx[j];
            fmt_sample s;
            ck_assert_int_eq(fmt_dataset_get(d, idx, &s), 0);
            ck_assert_int_eq(ev[i].lab[j], s.label);
            ck_assert_int_eq(ev[i].src[j], (int64_t)s.source);
            uint32_t x0 = center(s.width, w), y0 = center(s.height, h);
            if (o->random_crop && s.width > w)
                x0 = (uint32_t)(shr_mix(o->seed, ev[i].epoch, idx, SHR_SALT_CROP_X) %
                                (s.width - w + 1));
            if (o->random_crop && s.height > h)
                y0 = (uint32_t)(shr_mix(o->seed, ev[i].epoch, idx, SHR_SALT_CROP_Y) %
                                (s.height - h + 1));
            int flip = o->flip && flipped(o->seed, ev[i].epoch, idx);
            expect_sample(want, &s, w, h, x0, y0, flip);
            ck_assert_msg(memcmp(ev[i].data + (size_t)j * w * h * c, want, (size_t)w * h * c) == 0,
                          "batch %zu sample %u (index %" PRIu64 "): pixels differ", i, j, idx);
        }
    }
    free(want);
    fmt_dataset_close(d);
}

/* Each epoch in ev (one rank, no padding) holds every index exactly once. */
static void assert_permutations(const event *ev, size_t count, uint64_t n)
{
    uint8_t *seen = calloc(n, 1);
    ck_assert_ptr_nonnull(seen);
    uint64_t got = 0;
    for (size_t i = 0; i < count; i++) {
        if (ev[i].end) {
            ck_assert_uint_eq(got, n);
            memset(seen, 0, n);
            got = 0;
            continue;
        }
        for (uint32_t j = 0; j < ev[i].n; j++) {
            ck_assert_int_ge(ev[i].idx[j], 0);
            ck_assert_int_lt(ev[i].idx[j], (int64_t)n);
            ck_assert_msg(!seen[ev[i].idx[j]], "index %" PRId64 " twice in an epoch",
                          ev[i].idx[j]);
            seen[ev[i].idx[j]] = 1;
            got++;
        }
    }
    free(seen);
}

/* ---- tests ---- */

/* Parse `shardc cat` output (binary PPM/PGM) of sample idx into a malloc'd buffer. */
static uint8_t *cat_sample(const char *dir, int idx, int *w, int *h, int *c)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s/shardc' cat '%s' %d", g_bin, dir, idx);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char magic[3] = {0};
    int maxval;
    ck_assert_int_eq(fscanf(p, "%2s %d %d %d", magic, w, h, &maxval), 4);
    ck_assert_int_eq(fgetc(p), '\n');
    ck_assert_int_eq(maxval, 255);
    *c = strcmp(magic, "P6") == 0 ? 3 : 1;
    size_t n = (size_t)*w * *h * *c;
    uint8_t *buf = malloc(n);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, n, p), n);
    ck_assert_int_eq(pclose(p), 0);
    return buf;
}

START_TEST(test_sequential_matches_dataset)
{
    shr_options o;
    options(&o, 4, SHR_ORDER_SEQUENTIAL, 0);
    shr_reader *r = tu_reader_open(g_fixed, &o);
    ck_assert_uint_eq(shr_batches_per_epoch(r), 6);
    ck_assert_uint_eq(shr_samples_per_epoch(r), N_SAMPLES);
    shr_info info;
    shr_get_info(r, &info);
    ck_assert_uint_eq(info.samples, N_SAMPLES);
    ck_assert_uint_eq(info.classes, 3);
    ck_assert_uint_eq(info.width, FIX_W);
    ck_assert_uint_eq(info.height, FIX_H);
    ck_assert_uint_eq(info.channels, 3);
    ck_assert_uint_eq(info.batch_bytes, 4 * FIX_W * FIX_H * 3);
    ck_assert_uint_eq(info.ring_bytes,                   /* threads 2 + 2 slots */
                      4 * (info.batch_bytes + (3 * 8 + sizeof(shr_params)) * 4));
    ck_assert(info.mean[0] > 0 && info.std[0] > 0);

    event *ev = take(r, 7 + 2);     /* epoch 0, its end, and two batches of epoch 1 */
    uint64_t next = 0;
    for (int i = 0; i < 6; i++) {
        ck_assert(!ev[i].end);
        ck_assert_uint_eq(ev[i].epoch, 0);
        ck_assert_uint_eq(ev[i].number, (uint64_t)i);
        ck_assert_uint_eq(ev[i].n, i < 5 ? 4 : 3);
        for (uint32_t j = 0; j < ev[i].n; j++)
            ck_assert_int_eq(ev[i].idx[j], (int64_t)next++);
    }
    ck_assert_uint_eq(next, N_SAMPLES);
    ck_assert(ev[6].end);
    ck_assert(!ev[7].end && ev[7].epoch == 1 && ev[7].number == 0 && ev[7].idx[0] == 0);
    ck_assert(!ev[8].end && ev[8].epoch == 1 && ev[8].number == 1 && ev[8].idx[0] == 4);
    check_against_dataset(g_fixed, &o, ev, 9, FIX_W, FIX_H);

    /* and against the CLI's own reading of a few samples */
    const int picks[][2] = {{0, 0}, {2, 3}, {5, 2}};   /* event, sample: indices 0, 11, 22 */
    for (size_t i = 0; i < 3; i++) {
        int w, h, c;
        const event *e = &ev[picks[i][0]];
        uint8_t *cat = cat_sample(g_fixed, (int)e->idx[picks[i][1]], &w, &h, &c);
        ck_assert_int_eq(w, FIX_W);
        ck_assert_int_eq(h, FIX_H);
        ck_assert_int_eq(c, 3);
        ck_assert_mem_eq(cat, e->data + (size_t)picks[i][1] * FIX_W * FIX_H * 3,
                         (size_t)FIX_W * FIX_H * 3);
        free(cat);
    }
    events_free(ev, 9);
    shr_close(r);
}
END_TEST

START_TEST(test_random_permutations)
{
    shr_options o;
    options(&o, 5, SHR_ORDER_RANDOM, 7);
    size_t count;
    event *ev = run_epochs(g_fixed, &o, 3, &count);
    ck_assert_uint_eq(count, 3 * 6);
    assert_permutations(ev, count, N_SAMPLES);
    /* a real shuffle: not dataset order, and another order in the next epoch */
    int sorted = 1, same = 1;
    for (int j = 0; j < 5; j++) {
        sorted &= ev[0].idx[j] == j;
        same &= ev[0].idx[j] == ev[6].idx[j];
    }
    ck_assert(!sorted && !same);
    check_against_dataset(g_fixed, &o, ev, count, FIX_W, FIX_H);

    /* the same seed gives the same epochs, another seed others */
    assert_run_same(g_fixed, &o, 3, ev, count);
    o.seed = 8;
    size_t count2;
    event *other = run_epochs(g_fixed, &o, 1, &count2);
    ck_assert(memcmp(other[0].idx, ev[0].idx, 5 * sizeof(int64_t)) != 0);
    events_free(other, count2);
    events_free(ev, count);
}
END_TEST

START_TEST(test_quasi_permutations)
{
    shr_options o;
    options(&o, 4, SHR_ORDER_QUASI, 3);
    o.quasi_window = 2;
    size_t count;
    event *ev = run_epochs(g_fixed, &o, 2, &count);
    assert_permutations(ev, count, N_SAMPLES);
    check_against_dataset(g_fixed, &o, ev, count, FIX_W, FIX_H);
    events_free(ev, count);
}
END_TEST

/* Three ranks: same batch count each, and together they cover the epoch. */
static void check_ranks(shr_order order, shr_uneven uneven)
{
    const uint32_t world = 3;
    uint32_t seen[N_SAMPLES] = {0};
    uint64_t batches = 0, total = 0;
    size_t count[3];
    event *ev[3];
    for (uint32_t rank = 0; rank < world; rank++) {
        shr_options o;
        options(&o, 3, order, 11);
        o.world = world;
        o.rank = rank;
        o.uneven = uneven;
        shr_reader *r = tu_reader_open(g_fixed, &o);
        if (rank == 0)
            batches = shr_batches_per_epoch(r);
        ck_assert_uint_eq(shr_batches_per_epoch(r), batches);
        ck_assert_uint_eq(shr_samples_per_epoch(r), uneven == SHR_UNEVEN_PAD ? 8 : 7);
        count[rank] = batches + 1;
        ev[rank] = take(r, count[rank]);
        ck_assert(ev[rank][batches].end);
        for (uint64_t i = 0; i < batches; i++)
            for (uint32_t j = 0; j < ev[rank][i].n; j++) {
                seen[ev[rank][i].idx[j]]++;
                total++;
            }
        check_against_dataset(g_fixed, &o, ev[rank], count[rank], FIX_W, FIX_H);
        shr_close(r);
    }
    ck_assert_uint_eq(batches, 3);      /* 8 or 7 samples in batches of 3 */
    if (uneven == SHR_UNEVEN_PAD) {
        ck_assert_uint_eq(total, 24);   /* one sample repeated to even out the ranks */
        for (int i = 0; i < N_SAMPLES; i++)
            ck_assert_uint_ge(seen[i], 1);
    } else {
        ck_assert_uint_eq(total, 21);
        for (int i = 0; i < N_SAMPLES; i++)
            ck_assert_uint_le(seen[i], 1);
    }
    for (uint32_t rank = 0; rank < world; rank++)
        events_free(ev[rank], count[rank]);
}

START_TEST(test_ranks)
{
    check_ranks(SHR_ORDER_SEQUENTIAL, SHR_UNEVEN_PAD);
    check_ranks(SHR_ORDER_RANDOM, SHR_UNEVEN_PAD);
    check_ranks(SHR_ORDER_RANDOM, SHR_UNEVEN_DROP);
    check_ranks(SHR_ORDER_QUASI, SHR_UNEVEN_PAD);
}
END_TEST

/* From every position of an uninterrupted run, a reader opened at the state recorded there yields
 * exactly the rest of the run, ends of epochs included. */
START_TEST(test_resume_everywhere)
{
    shr_options o;
    options(&o, 4, SHR_ORDER_RANDOM, 99);
    o.flip = 1;
    shr_reader *r = tu_reader_open(g_fixed, &o);
    const size_t count = 2 * (6 + 1);
    shr_state st[2 * 7];
    event *all = calloc(count, sizeof *all);
    ck_assert_ptr_nonnull(all);
    for (size_t i = 0; i < count; i++) {
        st[i] = shr_get_state(r);
        event *one = take(r, 1);
        all[i] = one[0];
        free(one);
    }
    shr_state end = shr_get_state(r);
    shr_close(r);
    ck_assert(st[0].seed == 99 && st[0].epoch == 0 && st[0].cursor == 0);
    ck_assert(st[6].epoch == 0 && st[6].cursor == 6 && all[6].end);   /* SHR_EEND is next */
    ck_assert(st[7].epoch == 1 && st[7].cursor == 0);
    ck_assert(end.epoch == 2 && end.cursor == 0);

    for (size_t i = 0; i < count; i++) {
        shr_options ro = o;
        ro.seed = st[i].seed;
        ro.epoch = st[i].epoch;
        ro.cursor = st[i].cursor;
        ro.threads = 1 + (uint32_t)(i % 3);
        shr_reader *rr = tu_reader_open(g_fixed, &ro);
        shr_state s0 = shr_get_state(rr);
        ck_assert(s0.epoch == st[i].epoch && s0.cursor == st[i].cursor);
        event *rest = take(rr, count - i);
        assert_same_events(all + i, rest, count - i);
        events_free(rest, count - i);
        shr_close(rr);
    }
    events_free(all, count);
}
END_TEST

START_TEST(test_threads_identical)
{
    shr_options o;
    options(&o, 3, SHR_ORDER_RANDOM, 5);
    o.width = 32;
    o.height = 28;
    o.flip = 1;
    o.random_crop = 1;
    o.threads = 1;
    o.prefetch = 2;
    size_t n1;
    event *one = run_epochs(g_var, &o, 3, &n1);
    o.threads = 4;
    o.prefetch = 0;
    assert_run_same(g_var, &o, 3, one, n1);
    events_free(one, n1);
}
END_TEST

START_TEST(test_prefetch_bound)
{
    shr_options o;
    options(&o, 2, SHR_ORDER_SEQUENTIAL, 0);
    o.prefetch = 3;
    shr_reader *r = tu_reader_open(g_fixed, &o);
    const shr_batch *b0, *b1, *b2, *b3, *bx;
    ck_assert_int_eq(shr_next(r, &b0), 0);
    ck_assert_int_eq(shr_next(r, &b1), 0);
    /* holding prefetch - 1 batches, the next one still comes */
    ck_assert_int_eq(shr_next(r, &b2), 0);
    ck_assert_int_eq(b2->indices[0], 4);
    /* holding all of them, shr_next refuses instead of blocking, and nothing moves */
    shr_state before = shr_get_state(r);
    ck_assert_int_eq(shr_next(r, &bx), SHR_EINVAL);
    ck_assert_ptr_null(bx);
    ck_assert_ptr_nonnull(strstr(shr_last_error(r), "held"));
    shr_state after = shr_get_state(r);
    ck_assert(before.epoch == after.epoch && before.cursor == after.cursor);
    /* release out of order: b0 (the oldest) stays held, yet the next batch comes */
    shr_release(r, b1);
    shr_release(r, b1);                 /* a second release is ignored */
    ck_assert_int_eq(shr_next(r, &b3), 0);
    ck_assert_int_eq(b3->indices[0], 6);
    ck_assert_int_eq(b3->indices[1], 7);
    ck_assert_int_eq(b0->indices[0], 0);    /* still intact while held */
    ck_assert_int_eq(b0->indices[1], 1);
    ck_assert_int_eq(shr_next(r, &bx), SHR_EINVAL);
    shr_release(r, b2);
    shr_release(r, b0);
    shr_release(r, b3);
    shr_release(r, NULL);
    /* the stream went on in order: batches 4..11, then the end */
    event *ev = take(r, 9);
    for (int i = 0; i < 8; i++) {
        ck_assert_uint_eq(ev[i].number, 4 + (uint64_t)i);
        ck_assert_int_eq(ev[i].idx[0], 2 * (4 + i));
    }
    ck_assert(ev[8].end);
    events_free(ev, 9);
    shr_close(r);
}
END_TEST

START_TEST(test_close_with_held_batches)
{
    shr_options o;
    options(&o, 2, SHR_ORDER_RANDOM, 1);
    o.threads = 3;
    shr_reader *r = tu_reader_open(g_fixed, &o);
    const shr_batch *b;
    ck_assert_int_eq(shr_next(r, &b), 0);
    ck_assert_int_eq(shr_next(r, &b), 0);
    shr_close(r);                       /* frees held batches and stops busy workers */
    shr_close(NULL);
}
END_TEST

START_TEST(test_crop_pad)
{
    shr_options o;
    options(&o, 4, SHR_ORDER_SEQUENTIAL, 0);
    shr_reader *r = NULL;
    ck_assert_int_eq(shr_open(&r, g_var, &o, tu_fresh()), SHR_ESHAPE);
    ck_assert_ptr_null(r);
    ck_assert_ptr_nonnull(strstr(tu_msg.text, g_var));

    o.width = 32;
    o.height = 30;
    size_t count;
    event *ev = run_epochs(g_var, &o, 1, &count);
    check_against_dataset(g_var, &o, ev, count, 32, 30);
    events_free(ev, count);

    /* the fixture exercises both directions */
    fmt_dataset *d;
    ck_assert_int_eq(fmt_dataset_open(&d, g_var, NULL), 0);
    int crop = 0, pad = 0;
    for (uint64_t i = 0; i < N_SAMPLES; i++) {
        fmt_sample s;
        ck_assert_int_eq(fmt_dataset_get(d, i, &s), 0);
        crop |= s.width > 32 || s.height > 30;
        pad |= s.width < 32 || s.height < 30;
    }
    ck_assert(crop && pad);
    fmt_dataset_close(d);
}
END_TEST

START_TEST(test_flip)
{
    const char *sets[] = {g_fixed, g_gray};
    for (int k = 0; k < 2; k++) {
        shr_options o;
        options(&o, 4, SHR_ORDER_RANDOM, 5);
        size_t n_plain, n_flip;
        event *plain = run_epochs(sets[k], &o, 2, &n_plain);
        o.flip = 1;
        event *flip = run_epochs(sets[k], &o, 2, &n_flip);
        ck_assert_uint_eq(n_plain, n_flip);
        uint32_t c = k == 0 ? 3 : 1;
        size_t one = (size_t)FIX_W * FIX_H * c;
        uint8_t *m = malloc(one);
        int mirrored = 0, kept = 0;
        for (size_t i = 0; i < n_plain; i++) {
            for (uint32_t j = 0; !plain[i].end && j < plain[i].n; j++) {
                ck_assert_int_eq(plain[i].idx[j], flip[i].idx[j]);
                const uint8_t *a = plain[i].data + j * one, *b = flip[i].data + j * one;
                memcpy(m, a, one);
                mirror(m, FIX_H, FIX_W, c);
                if (flipped(5, plain[i].epoch, (uint64_t)plain[i].idx[j])) {
                    ck_assert_mem_eq(b, m, one);
                    ck_assert(memcmp(a, m, one) != 0);  /* the image is not symmetric */
                    mirrored++;
                } else {
                    ck_assert_mem_eq(b, a, one);
                    kept++;
                }
            }
        }
        ck_assert(mirrored > 5 && kept > 5);
        check_against_dataset(sets[k], &o, flip, n_flip, FIX_W, FIX_H);
        free(m);
        events_free(plain, n_plain);
        events_free(flip, n_flip);
    }
}
END_TEST

START_TEST(test_random_crop)
{
    shr_options o;
    options(&o, 4, SHR_ORDER_RANDOM, 21);
    o.width = 10;
    o.height = 10;
    o.random_crop = 1;
    size_t count;
    event *ev = run_epochs(g_var, &o, 2, &count);
    check_against_dataset(g_var, &o, ev, count, 10, 10);
    /* deterministic per (seed, epoch) */
    assert_run_same(g_var, &o, 2, ev, count);
    /* the draws really move the window: not all centered, and not the same in both epochs */
    fmt_dataset *d;
    ck_assert_int_eq(fmt_dataset_open(&d, g_var, NULL), 0);
    int off_center = 0, moved = 0;
    for (uint64_t i = 0; i < N_SAMPLES; i++) {
        fmt_sample s;
        ck_assert_int_eq(fmt_dataset_get(d, i, &s), 0);
        ck_assert(s.width >= 10 && s.height >= 10);
        uint64_t x0 = shr_mix(21, 0, i, SHR_SALT_CROP_X) % (s.width - 10 + 1);
        uint64_t x1 = shr_mix(21, 1, i, SHR_SALT_CROP_X) % (s.width - 10 + 1);
        off_center += x0 != (s.width - 10) / 2;
        moved += x0 != x1;
    }
    ck_assert(off_center > 3 && moved > 3);
    fmt_dataset_close(d);
    events_free(ev, count);

    /* random crop where larger, centered padding where smaller */
    o.width = 36;
    o.height = 36;
    ev = run_epochs(g_var, &o, 1, &count);
    check_against_dataset(g_var, &o, ev, count, 36, 36);
    events_free(ev, count);
}
END_TEST

START_TEST(test_access_modes)
{
    const char *sets[] = {g_fixed, g_var};
    for (int k = 0; k < 2; k++) {
        shr_options o;
        options(&o, 3, SHR_ORDER_RANDOM, 13);
        o.flip = 1;
        if (k == 1) {
            o.width = 30;
            o.height = 26;
        }
        size_t n_mmap;
        event *mm = run_epochs(sets[k], &o, 2, &n_mmap);
        check_against_dataset(sets[k], &o, mm, n_mmap, k ? 30 : FIX_W, k ? 26 : FIX_H);
        for (shr_access a = SHR_ACCESS_PREAD; a <= SHR_ACCESS_DIRECT; a++) {
            o.access = a;
            assert_run_same(sets[k], &o, 2, mm, n_mmap);
        }
        events_free(mm, n_mmap);
    }
}
END_TEST

/* fmt_dataset_read in each mode, into aligned and unaligned buffers, with small scratch. */
START_TEST(test_dataset_read)
{
    const char *sets[] = {g_fixed, g_var};
    fmt_dataset *ref;
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(fmt_dataset_open(&ref, sets[k], NULL), 0);
        for (fmt_access a = FMT_ACCESS_MMAP; a <= FMT_ACCESS_DIRECT; a++) {
            fmt_dataset *d;
            fmt_msg msg = {{0}};
            ck_assert_int_eq(fmt_dataset_open_ex(&d, sets[k], a, &msg), 0);
            ck_assert_int_eq(fmt_dataset_access(d), a);
            if (a == FMT_ACCESS_DIRECT && fmt_dataset_direct_shards(d) == 0)
                fprintf(stderr, "test_reader: O_DIRECT refused by the filesystem of %s: the "
                        "plain pread fallback was tested instead\n", sets[k]);
            if (a != FMT_ACCESS_DIRECT)
                ck_assert_uint_eq(fmt_dataset_direct_shards(d), 0);
            ck_assert_int_eq(fmt_dataset_advise(d, FMT_ADVICE_RANDOM), 0);
            ck_assert_int_eq(fmt_dataset_advise(d, FMT_ADVICE_SEQUENTIAL), 0);
            ck_assert_int_eq(fmt_dataset_advise(d, (fmt_advice)7), FMT_EINVAL);
            uint8_t *aligned, *scratch, *bad_scratch;
            ck_assert_int_eq(posix_memalign((void **)&aligned, 4096, 3 * 4096 * 4), 0);
            ck_assert_int_eq(posix_memalign((void **)&scratch, 4096, 8192), 0);
            bad_scratch = scratch + 512;
            uint8_t *odd = malloc(40 * 40 * 3 + 1);
            for (uint64_t i = 0; i < N_SAMPLES; i++) {
                fmt_sample s, m;
                ck_assert_int_eq(fmt_dataset_get(ref, i, &s), 0);
                ck_assert_ptr_nonnull(fmt_dataset_sample_file(d, i));
                ck_assert_ptr_nonnull(strstr(fmt_dataset_sample_file(d, i), "shard-0000"));
                uint8_t *dsts[] = {aligned, odd + 1, aligned + 4096 - 100};
                for (int t = 0; t < 3; t++) {
                    memset(dsts[t], 0xee, s.length);
                    memset(&m, 0, sizeof m);
                    m.pixels = (const uint8_t *)1;
                    ck_assert_int_eq(fmt_dataset_read(d, i, dsts[t], &m), 0);
                    ck_assert_mem_eq(dsts[t], s.pixels, s.length);
                    ck_assert_ptr_null(m.pixels);
                    ck_assert_uint_eq(m.index, i);
                    ck_assert_int_eq(m.label, s.label);
                    ck_assert_uint_eq(m.width, s.width);
                    ck_assert_uint_eq(m.height, s.height);
                    ck_assert_uint_eq(m.length, s.length);
                    ck_assert_uint_eq(m.hash, s.hash);
                    /* the smallest scratch: samples over 4 KiB take several chunks */
                    memset(dsts[t], 0xee, s.length);
                    ck_assert_int_eq(fmt_dataset_read_buf(d, i, dsts[t], NULL, scratch, 4096), 0);
                    ck_assert_mem_eq(dsts[t], s.pixels, s.length);
                }
                int bad = fmt_dataset_read_buf(d, i, aligned, NULL, bad_scratch, 4096);
                ck_assert_int_eq(bad, a == FMT_ACCESS_DIRECT && fmt_dataset_direct_shards(d)
                                      ? FMT_EINVAL : 0);
            }
            ck_assert_int_eq(fmt_dataset_read(d, N_SAMPLES, aligned, NULL), FMT_EINVAL);
            ck_assert_ptr_null(fmt_dataset_sample_file(d, N_SAMPLES));
            free(odd);
            free(scratch);
            free(aligned);
            fmt_dataset_close(d);
        }
        fmt_dataset_close(ref);
    }
    fmt_dataset *d = NULL;
    ck_assert_int_eq(fmt_dataset_open_ex(&d, g_fixed, (fmt_access)9, NULL), FMT_EINVAL);
    ck_assert_ptr_null(d);
}
END_TEST

START_TEST(test_memory_flat)
{
    shr_options o;
    options(&o, 2, SHR_ORDER_RANDOM, 17);
    o.width = 30;
    o.height = 30;
    o.flip = 1;
    o.random_crop = 1;
    o.access = (shr_access)_i;          /* mmap, pread, direct */
    shr_reader *r = tu_reader_open(g_var, &o);
    /* warm-up outside the window: under ThreadSanitizer the anonymous RSS grows by about 1.5 MB
     * over the first dozen epochs of random crops and flips (its shadow and metadata) and then
     * stays flat, to epoch 200 at least; uninstrumented builds are flat from epoch 2, and the
     * heap, checked below to the kilobyte, does not move in any build */
    for (int e = 0; e < 16; e++)
        ck_assert_int_eq(tu_reader_drain(r), SHR_EEND);
    (void)tu_rss_anon();                /* stdio's first-use allocations, outside the window */
    size_t heap2 = mallinfo2().uordblks, rss2 = tu_rss_anon();
    for (int e = 16; e < 64; e++)
        ck_assert_int_eq(tu_reader_drain(r), SHR_EEND);
    size_t heap50 = mallinfo2().uordblks, rss50 = tu_rss_anon();
    shr_state st = shr_get_state(r);
    ck_assert_uint_eq(st.epoch, 64);
    shr_close(r);
    /* 48 epochs of 12 batches: a leak of even a few bytes per batch would show in the heap */
    ck_assert_msg(heap50 <= heap2 + 1024, "heap grew from %zu to %zu bytes", heap2, heap50);
    ck_assert_msg(rss50 <= rss2 + (1u << 20), "anonymous RSS grew from %zu to %zu bytes", rss2,
                  rss50);
}
END_TEST

START_TEST(test_open_errors)
{
    shr_reader *r = (shr_reader *)&r;
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/no-such-dataset", g_root);
    ck_assert_int_eq(shr_open(&r, dir, NULL, tu_fresh()), ENOENT);
    ck_assert_ptr_null(r);
    ck_assert_ptr_nonnull(strstr(tu_msg.text, "no-such-dataset"));
    ck_assert_str_eq(shr_strerror(ENOENT), strerror(ENOENT));

    char copy[1200], shard[1300];
    copy_dataset(g_fixed, "truncated", copy, sizeof copy);
    snprintf(shard, sizeof shard, "%s/shard-00001.raw", copy);
    ck_assert_int_eq(truncate(shard, 5000), 0);
    ck_assert_int_eq(shr_open(&r, copy, NULL, tu_fresh()), FMT_ETRUNC);
    ck_assert_ptr_null(r);
    ck_assert_ptr_nonnull(strstr(tu_msg.text, "shard-00001.raw"));

    copy_dataset(g_fixed, "garbage", copy, sizeof copy);
    snprintf(shard, sizeof shard, "%s/shard-00002.raw", copy);
    int fd = open(shard, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, "this is no shard header", 23, 0), 23);
    close(fd);
    ck_assert_int_eq(shr_open(&r, copy, NULL, tu_fresh()), FMT_EFORMAT);
    ck_assert_ptr_nonnull(strstr(tu_msg.text, "shard-00002.raw"));

    /* each access mode reports the same */
    shr_options o;
    shr_options_init(&o);
    o.access = SHR_ACCESS_DIRECT;
    ck_assert_int_eq(shr_open(&r, copy, &o, tu_fresh()), FMT_EFORMAT);
    ck_assert_int_eq(shr_open(NULL, g_fixed, NULL, tu_fresh()), SHR_EINVAL);
}
END_TEST

/* A thread that opens a missing dataset, and one that reads out-of-range samples of an open
 * one: each with its own message buffer */
typedef struct {
    const char *dir;
    const shr_dataset *d;
    uint64_t idx;
    int rc, bad;
    shr_msg msg;
} msg_job;

static void *open_in_thread(void *arg)
{
    msg_job *j = arg;
    shr_reader *r;
    j->rc = shr_open(&r, j->dir, NULL, &j->msg);
    return NULL;
}

static void *reads_in_thread(void *arg)
{
    msg_job *j = arg;
    char want[64];
    snprintf(want, sizeof want, "sample %" PRIu64 " is out of range", j->idx);
    uint8_t buf[16];
    for (int k = 0; k < 2000; k++) {
        j->msg.text[0] = '\0';
        j->rc = shr_dataset_read(j->d, j->idx, buf, sizeof buf, NULL, &j->msg);
        j->bad += j->rc != SHR_EINVAL || !strstr(j->msg.text, want);
    }
    return NULL;
}

/* Errors travel in the caller's shr_msg: written by the call that failed, in the caller's
 * buffer whatever thread made the call (nothing per thread or static), left as it was by a call
 * that succeeds, and optional (NULL). */
START_TEST(test_caller_message)
{
    /* a failure in another thread: its message is in the buffer it was given */
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/no-such-dataset", g_root);
    msg_job j = {.dir = dir};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, open_in_thread, &j), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(j.rc, ENOENT);
    ck_assert_msg(strstr(j.msg.text, "cannot open dataset") && strstr(j.msg.text, dir),
                  "%s", j.msg.text);
    ck_assert_str_eq(shr_last_error(NULL), "");     /* nothing kept for the thread */

    /* success leaves the buffer as it was; NULL is accepted */
    shr_msg m;
    snprintf(m.text, sizeof m.text, "untouched");
    shr_reader *r = NULL;
    ck_assert_int_eq(shr_open(&r, g_fixed, NULL, &m), 0);
    ck_assert_str_eq(m.text, "untouched");
    shr_close(r);
    ck_assert_int_eq(shr_open(&r, dir, NULL, NULL), ENOENT);
    ck_assert_ptr_null(r);

    /* two threads failing at once on one dataset: each message names its own sample */
    shr_dataset *d;
    ck_assert_int_eq(shr_dataset_open(&d, g_fixed, SHR_ACCESS_PREAD, &m), 0);
    ck_assert_str_eq(m.text, "untouched");
    msg_job a = {.d = d, .idx = N_SAMPLES}, b = {.d = d, .idx = N_SAMPLES + 1000};
    pthread_t ta, tb;
    ck_assert_int_eq(pthread_create(&ta, NULL, reads_in_thread, &a), 0);
    ck_assert_int_eq(pthread_create(&tb, NULL, reads_in_thread, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    ck_assert_int_eq(a.bad, 0);
    ck_assert_int_eq(b.bad, 0);
    uint8_t buf[16];
    ck_assert_int_eq(shr_dataset_read(d, N_SAMPLES, buf, sizeof buf, NULL, NULL), SHR_EINVAL);
    shr_dataset_close(d);
}
END_TEST

/* LOCAL_RANK as pin_device, read through the caller's getter */
static const char *g_local_rank;
static char *local_rank_stub(const char *name)
{
    return strcmp(name, "LOCAL_RANK") == 0 ? (char *)g_local_rank : NULL;
}

START_TEST(test_pin_device_from_env)
{
    const char *given[] = {"3", "0", "65535", "65536", "-1", "", "2x", " 1", NULL};
    const uint64_t want[] = {4, 1, 65536, 0, 0, 0, 0, 0, 0};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        g_local_rank = given[k];
        ck_assert_msg(shr_pin_device_from_env(local_rank_stub) == want[k], "LOCAL_RANK '%s'",
                      given[k] ? given[k] : "(unset)");
    }
}
END_TEST

START_TEST(test_bad_options)
{
    shr_options o;
    shr_reader *r = NULL;
    for (int k = 0; k < 14; k++) {
        options(&o, 4, SHR_ORDER_RANDOM, 0);
        switch (k) {
        case 0: o.batch_size = 0; break;
        case 1: o.rank = 3; o.world = 3; break;
        case 2: o.world = 0; o.rank = 0; break;
        case 3: o.prefetch = 1; break;
        case 4: o.threads = 0; break;
        case 5: o.width = 16; break;
        case 6: o.height = 16; break;
        case 7: o.cursor = 7; break;                /* 6 batches per epoch */
        case 8: o.order = (shr_order)9; break;
        case 9: o.access = (shr_access)9; break;
        case 10: o.pin = (shr_pin)9; break;
        case 11: o.batch_size = 24; o.drop_last = 1; break;     /* no batch at all */
        case 12: o.order = SHR_ORDER_QUASI; o.quasi_window = 0; break;
        case 13: o.pin_device = 65537; break;
        }
        r = (shr_reader *)&o;
        tu_msg.text[0] = '\0';
        ck_assert_msg(shr_open(&r, g_fixed, &o, tu_fresh()) == SHR_EINVAL, "case %d", k);
        ck_assert_ptr_null(r);
        ck_assert_msg(tu_msg.text[0] != '\0', "case %d has no message", k);
    }
    ck_assert_str_eq(tu_msg.text, "pin_device must be 0 (the current device) or a device index "
                     "+ 1, at most 65536, not 65537");
    /* the limits themselves are fine: cursor == batches (SHR_EEND next), prefetch 2, a device
     * (none here: the plain memory of a machine without CUDA) */
    options(&o, 4, SHR_ORDER_RANDOM, 0);
    o.pin_device = 65536;
    o.cursor = 6;
    o.epoch = 3;
    o.prefetch = 2;
    o.threads = 1;
    r = tu_reader_open(g_fixed, &o);
    const shr_batch *b;
    ck_assert_int_eq(shr_next(r, &b), SHR_EEND);
    ck_assert_int_eq(shr_next(r, &b), 0);
    ck_assert_uint_eq(b->epoch, 4);
    ck_assert_uint_eq(b->number, 0);
    shr_release(r, b);
    ck_assert_int_eq(shr_next(r, NULL), SHR_EINVAL);
    shr_close(r);
    ck_assert_int_eq(shr_next(NULL, &b), SHR_EINVAL);

    /* NULL options: the defaults (batch 256, so one short batch of everything) */
    r = tu_reader_open(g_fixed, NULL);
    ck_assert_uint_eq(shr_batches_per_epoch(r), 1);
    ck_assert_int_eq(shr_next(r, &b), 0);
    ck_assert_uint_eq(b->n, N_SAMPLES);
    ck_assert(!b->pinned || shr_cuda_available());
    shr_release(r, b);
    shr_close(r);
}
END_TEST

/* Output sizes past SHR_MAX_SIDE / SHR_MAX_PIXELS are refused at open, before any allocation,
 * with the limit and the option in the message (they were an allocation of hundreds of GiB,
 * ENOMEM without a message, or under ASan an allocation-size-too-big abort). */
START_TEST(test_output_limits)
{
    shr_options o;
    shr_params p;
    for (int k = 0; k < 5; k++) {
        options(&o, 4, SHR_ORDER_SEQUENTIAL, 0);
        const char *want = "width x height";
        switch (k) {
        case 0: o.width = 1u << 31; o.height = 64; o.rrc = 1; break;
        case 1: o.width = SHR_MAX_SIDE + 1; o.height = 1; break;
        case 2: o.width = 16385; o.height = 16384; break;     /* one row past the pixels */
        case 3:
            o.scale = SHR_SCALE_MULTI;
            o.scale_nsizes = 1;
            o.scale_sizes[0] = 1u << 20;
            o.scale_max = 1u << 20;
            want = "scale_max 1048576";
            break;
        case 4:
            o.scale = SHR_SCALE_MULTI;
            o.scale_nsizes = 1;
            o.scale_sizes[0] = 800;
            o.scale_max = 16385;
            want = "scale_max 16385";
            break;
        }
        shr_reader *r = (shr_reader *)&o;
        ck_assert_msg(shr_open(&r, g_var, &o, tu_fresh()) == SHR_EINVAL, "case %d", k);
        ck_assert_ptr_null(r);
        const char *msg = tu_msg.text;
        ck_assert_msg(strstr(msg, want) && strstr(msg, "268435456") &&
                      (k >= 3 || strstr(msg, "65536")), "case %d: %s", k, msg);
        ck_assert_int_eq(shr_draw_params(&o, 0, 0, 40, 30, &p), SHR_EINVAL);
    }
    /* the limits themselves are allowed (checked without opening: a ring of them is GiBs) */
    options(&o, 4, SHR_ORDER_SEQUENTIAL, 0);
    o.width = o.height = 16384;
    ck_assert_int_eq(shr_draw_params(&o, 0, 0, 40, 30, &p), 0);
    o.width = SHR_MAX_SIDE;
    o.height = SHR_MAX_PIXELS / SHR_MAX_SIDE;
    ck_assert_int_eq(shr_draw_params(&o, 0, 0, 40, 30, &p), 0);
    options(&o, 4, SHR_ORDER_SEQUENTIAL, 0);
    o.scale = SHR_SCALE_MULTI;
    o.scale_nsizes = 1;
    o.scale_sizes[0] = 1u << 20;
    o.scale_max = 16384;
    ck_assert_int_eq(shr_draw_params(&o, 0, 0, 40, 30, &p), 0);
    o.width = o.height = 64;            /* a canvas given: scale_max bounds only the images */
    o.scale_max = 1u << 20;
    ck_assert_int_eq(shr_draw_params(&o, 0, 0, 40, 30, &p), 0);
}
END_TEST

/* A dataset whose manifest disagrees with its samples opens (samples are not scanned at open),
 * then the worker that meets one fails the reader with a message naming the shard. */
START_TEST(test_worker_failure)
{
    char copy[1200];
    copy_dataset(g_fixed, "lying-manifest", copy, sizeof copy);
    fmt_manifest m;
    ck_assert_int_eq(fmt_manifest_read(copy, &m, NULL), 0);
    ck_assert_uint_eq(m.channels, 3);
    m.channels = 1;
    ck_assert_int_eq(fmt_manifest_write(copy, &m), 0);
    fmt_manifest_free(&m);
    /* the manifest's description is checked against every sample at open: every access mode
     * refuses the dataset the same way, before any batch */
    for (shr_access a = SHR_ACCESS_MMAP; a <= SHR_ACCESS_DIRECT; a++) {
        shr_options o;
        options(&o, 4, SHR_ORDER_SEQUENTIAL, 0);
        o.access = a;
        shr_reader *r = (shr_reader *)1;
        ck_assert_int_eq(shr_open(&r, copy, &o, tu_fresh()), FMT_ECORRUPT);
        ck_assert_ptr_null(r);
        ck_assert_ptr_nonnull(strstr(tu_msg.text, "shard-00000.raw"));
        ck_assert_ptr_nonnull(strstr(tu_msg.text, "'channels'"));
    }
}
END_TEST

START_TEST(test_strerror)
{
    ck_assert_str_eq(shr_strerror(SHR_EEND), "end of epoch");
    ck_assert_str_eq(shr_strerror(SHR_ESHAPE), "samples vary in size and no output size was given");
    ck_assert_str_eq(shr_strerror(FMT_ETRUNC), fmt_strerror(FMT_ETRUNC));
    ck_assert_str_eq(shr_strerror(EIO), strerror(EIO));
    ck_assert_ptr_nonnull(shr_strerror(-1));
    /* one strerror for the project's one list of codes (fmt.h): every library's, by value */
#define ROW(code, value, name) {value, name},
    static const struct {
        int value;
        const char *name;
    } rows[] = {FMT_ERRORS(ROW) SHR_ERRORS(ROW) SHC_ERRORS(ROW) SHC_MERGE_ERRORS(ROW)};
#undef ROW
    for (size_t k = 0; k < sizeof rows / sizeof *rows; k++) {
        ck_assert_str_eq(shr_strerror(rows[k].value), rows[k].name);
        ck_assert_int_ge(rows[k].value, -30900);
        ck_assert_int_le(rows[k].value, -30587);
    }
    ck_assert_str_eq(shr_strerror(-30600), "inputs were rejected");     /* the compiler's */
    ck_assert_str_eq(shr_strerror(-30589), "parts missing or unfinished");
    ck_assert_str_eq(shr_strerror(SHR_EINVAL), "invalid argument");
    ck_assert_str_eq(shr_strerror(SHR_ELAST), "unknown error");
    ck_assert_str_eq(shr_strerror(FMT_ELAST), "unknown error");
}
END_TEST

START_TEST(test_host_alloc)
{
    void *p;
    int pinned = -1;
    ck_assert_int_eq(shr_host_alloc(100000, &p, &pinned, SHR_PIN_OFF, -1, NULL), 0);
    ck_assert_int_eq(pinned, 0);
    ck_assert_uint_eq((uintptr_t)p % SHR_HOST_ALIGN, 0);
    memset(p, 0x5a, 100000);
    shr_host_free(p, pinned);
    ck_assert_int_eq(shr_host_alloc(0, &p, &pinned, SHR_PIN_OFF, -1, NULL), EINVAL);
    ck_assert_int_eq(shr_host_alloc(10, &p, &pinned, (shr_pin)5, -1, NULL), EINVAL);
    ck_assert_ptr_null(p);
    /* the public call refuses NULL places for its answers */
    pinned = -1;
    ck_assert_int_eq(shr_host_alloc(10, NULL, &pinned, SHR_PIN_OFF, -1, NULL), EINVAL);
    ck_assert_int_eq(pinned, 0);
    p = &pinned;
    ck_assert_int_eq(shr_host_alloc(10, &p, NULL, SHR_PIN_OFF, -1, NULL), EINVAL);
    ck_assert_ptr_null(p);
    fmt_msg why = {{0}};
    ck_assert_int_eq(shr_host_alloc(1 << 20, &p, &pinned, SHR_PIN_AUTO, 0, &why), 0);
    ck_assert_str_eq(why.text, "");     /* pinned, or no device: nothing failed */
    ck_assert_uint_eq((uintptr_t)p % SHR_HOST_ALIGN, 0);
    memset(p, 0xa5, 1 << 20);
    if (shr_cuda_available())
        ck_assert_int_eq(pinned, 1);
    else
        ck_assert_int_eq(pinned, 0);
    shr_host_free(p, pinned);
    shr_host_free(NULL, 0);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)  /* their allocators abort on
                                                                      * such a size */
    /* more than any machine can lock or hold: with a device the failed cudaHostAlloc is told to
     * this caller (no process-wide status keeps it), then plain memory fails too */
    ck_assert_int_eq(shr_host_alloc((size_t)1 << 60, &p, &pinned, SHR_PIN_AUTO, -1, &why),
                     ENOMEM);
    if (shr_cuda_available())
        ck_assert_msg(strncmp(why.text, "cudaHostAlloc of 1152921504606846976 bytes: ", 44) == 0,
                      "%s", why.text);
    else
        ck_assert_str_eq(why.text, "");
#endif
    char status[512];
    ck_assert_ptr_null(strstr(shr_cuda_status(status, sizeof status), "cudaHostAlloc"));
    if (!shr_cuda_available())
        fprintf(stderr, "test_reader: no CUDA device: pinned allocation not exercised (skipped)\n");
}
END_TEST

/* shr_epoch_order gives, for every order, rank and uneven mode, the indices a reader with the same
 * options delivers, epoch by epoch, its batches laid end to end. */
START_TEST(test_epoch_order)
{
    static const uint64_t counts[] = {7, 7, 7, 2};     /* g_fixed's shards */
    const shr_order orders[] = {SHR_ORDER_SEQUENTIAL, SHR_ORDER_RANDOM, SHR_ORDER_QUASI};
    for (size_t oi = 0; oi < 3; oi++)
        for (int uneven = SHR_UNEVEN_PAD; uneven <= SHR_UNEVEN_DROP; uneven++)
            for (uint32_t world = 1; world <= 3; world += 2)
                for (uint32_t rank = 0; rank < world; rank++) {
                    shr_options o;
                    options(&o, 4, orders[oi], 13);
                    o.quasi_window = 2;
                    o.uneven = (shr_uneven)uneven;
                    o.world = world;
                    o.rank = rank;
                    size_t count;
                    event *ev = run_epochs(g_fixed, &o, 3, &count);
                    shr_order_spec sp = {.n = N_SAMPLES, .order = orders[oi], .seed = 13,
                                         .rank = rank, .world = world,
                                         .uneven = (shr_uneven)uneven, .nshards = 4,
                                         .shard_counts = counts, .window = 2};
                    size_t at = 0;
                    for (uint64_t e = 0; e < 3; e++) {
                        uint64_t want[N_SAMPLES], n = 99, only = 99;
                        shr_msg msg = {""};
                        ck_assert_int_eq(shr_epoch_order(&sp, e, want, &n, &msg), 0);
                        ck_assert_int_eq(shr_epoch_order(&sp, e, NULL, &only, NULL), 0);
                        ck_assert_uint_eq(n, only);
                        ck_assert_uint_eq(n, uneven == SHR_UNEVEN_PAD
                                                 ? (N_SAMPLES + world - 1) / world
                                                 : N_SAMPLES / world);
                        uint64_t got = 0;
                        for (; !ev[at].end; at++) {
                            ck_assert_uint_eq(ev[at].epoch, e);
                            for (uint32_t j = 0; j < ev[at].n; j++, got++) {
                                ck_assert_uint_lt(got, n);
                                ck_assert_msg((uint64_t)ev[at].idx[j] == want[got],
                                              "order %zu rank %u/%u epoch %" PRIu64 " pos %"
                                              PRIu64, oi, rank, world, e, got);
                            }
                        }
                        at++;
                        ck_assert_uint_eq(got, n);
                    }
                    events_free(ev, count);
                }
    /* refusals, each said */
    uint64_t out[N_SAMPLES], n = 7;
    shr_msg msg = {""};
    shr_order_spec sp = {.n = N_SAMPLES, .order = SHR_ORDER_QUASI, .world = 2, .rank = 2,
                         .nshards = 4, .shard_counts = counts};
    ck_assert_int_eq(shr_epoch_order(NULL, 0, out, &n, &msg), SHR_EINVAL);
    ck_assert_uint_eq(n, 0);
    ck_assert_str_eq(msg.text, "no order given");
    ck_assert_int_eq(shr_epoch_order(&sp, 0, out, &n, &msg), SHR_EINVAL);
    ck_assert_str_eq(msg.text, "rank must be below world");
    sp.rank = 1;
    sp.shard_counts = NULL;
    ck_assert_int_eq(shr_epoch_order(&sp, 0, out, &n, &msg), SHR_EINVAL);
    ck_assert_str_eq(msg.text, "a quasi order needs the shards' sample counts");
    static const uint64_t short_counts[] = {7, 7, 7, 1};
    sp.shard_counts = short_counts;
    ck_assert_int_eq(shr_epoch_order(&sp, 0, out, &n, &msg), SHR_EINVAL);
    ck_assert_str_eq(msg.text, "the shards' sample counts do not sum to n, or n is too large");
    sp.order = (shr_order)9;
    ck_assert_int_eq(shr_epoch_order(&sp, 0, out, &n, &msg), SHR_EINVAL);
    ck_assert_str_eq(msg.text, "unknown order");
    /* world 0 is one rank; the shard counts mean nothing to a sequential order */
    sp = (shr_order_spec){.n = 5, .order = SHR_ORDER_SEQUENTIAL};
    ck_assert_int_eq(shr_epoch_order(&sp, 4, out, &n, NULL), 0);
    ck_assert_uint_eq(n, 5);
    for (uint64_t i = 0; i < 5; i++)
        ck_assert_uint_eq(out[i], i);
}
END_TEST

/* shr_manifest_peek reads the manifest alone: what shr_dataset_get_info says of the same fields,
 * and an answer where the shards are damaged; a missing or bad manifest is told. */
START_TEST(test_manifest_peek)
{
    const char *dirs[] = {g_fixed, g_gray, g_var};
    for (int i = 0; i < 3; i++) {
        shr_manifest_summary m;
        shr_msg msg = {""};
        ck_assert_int_eq(shr_manifest_peek(dirs[i], &m, &msg), 0);
        shr_dataset *d = NULL;
        ck_assert_int_eq(shr_dataset_open(&d, dirs[i], SHR_ACCESS_MMAP, &msg), 0);
        shr_dataset_info info;
        shr_dataset_get_info(d, &info);
        ck_assert_str_eq(m.format, info.format);
        ck_assert_uint_eq(m.samples, info.samples);
        ck_assert_uint_eq(m.channels, info.channels);
        ck_assert_uint_eq(m.width, info.width);
        ck_assert_uint_eq(m.height, info.height);
        shr_dataset_close(d);
    }
    shr_manifest_summary m;
    ck_assert_int_eq(shr_manifest_peek(g_fixed, &m, NULL), 0);
    ck_assert_str_eq(m.format, "raw");
    ck_assert_uint_eq(m.samples, N_SAMPLES);
    ck_assert(m.width == FIX_W && m.height == FIX_H && m.channels == 3);
    ck_assert_int_eq(shr_manifest_peek(g_var, &m, NULL), 0);
    ck_assert(m.width == 0 && m.height == 0);

    /* a shard emptied: the open fails, the manifest still answers */
    char dir[1200], cmd[2600];
    copy_dataset(g_fixed, "peek_damaged", dir, sizeof dir);
    snprintf(cmd, sizeof cmd, "for f in '%s'/*.shard '%s'/shard-*; do [ -f \"$f\" ] && : > \"$f\"; "
             "done; true", dir, dir);
    ck_assert_int_eq(run_quiet(cmd), 0);
    shr_dataset *d = NULL;
    ck_assert_int_ne(shr_dataset_open(&d, dir, SHR_ACCESS_MMAP, NULL), 0);
    ck_assert_int_eq(shr_manifest_peek(dir, &m, NULL), 0);
    ck_assert_uint_eq(m.samples, N_SAMPLES);
    /* no manifest; a damaged one; no arguments */
    shr_msg msg = {""};
    ck_assert_int_eq(shr_manifest_peek(g_root, &m, &msg), ENOENT);
    snprintf(cmd, sizeof cmd, "printf '{\"version\": ' > '%s/manifest.json'", dir);
    ck_assert_int_eq(run_quiet(cmd), 0);
    msg.text[0] = '\0';
    ck_assert_int_eq(shr_manifest_peek(dir, &m, &msg), SHR_ECORRUPT);
    ck_assert_msg(strstr(msg.text, "manifest") != NULL, "%s", msg.text);
    ck_assert_int_eq(shr_manifest_peek(NULL, &m, &msg), SHR_EINVAL);
    ck_assert_str_eq(msg.text, "no dataset directory or summary given");
    ck_assert_int_eq(shr_manifest_peek(g_fixed, NULL, NULL), SHR_EINVAL);
}
END_TEST

/* shr_dataset_pixels: the mapped pixels of every sample are those shr_dataset_read copies; where
 * the shards are not mapped it says so; bad arguments are refused. */
START_TEST(test_dataset_pixels)
{
    shr_dataset *d = NULL;
    shr_msg msg = {""};
    ck_assert_int_eq(shr_dataset_open(&d, g_fixed, SHR_ACCESS_MMAP, &msg), 0);
    uint8_t buf[FIX_W * FIX_H * 3];
    for (uint64_t i = 0; i < N_SAMPLES; i++) {
        const void *px = NULL;
        uint64_t len = 0;
        ck_assert_int_eq(shr_dataset_pixels(d, i, &px, &len, &msg), 0);
        ck_assert_uint_eq(len, sizeof buf);
        ck_assert_int_eq(shr_dataset_read(d, i, buf, sizeof buf, NULL, &msg), 0);
        ck_assert_int_eq(memcmp(px, buf, sizeof buf), 0);
    }
    const void *px = &msg;
    uint64_t len = 7;
    ck_assert_int_eq(shr_dataset_pixels(d, N_SAMPLES, &px, &len, &msg), SHR_EINVAL);
    ck_assert_ptr_null(px);
    ck_assert_uint_eq(len, 0);
    ck_assert_str_eq(msg.text, "sample 23: no such sample (23 samples)");
    ck_assert_int_eq(shr_dataset_pixels(NULL, 0, &px, &len, &msg), SHR_EINVAL);
    ck_assert_int_eq(shr_dataset_pixels(d, 0, NULL, &len, &msg), SHR_EINVAL);
    ck_assert_int_eq(shr_dataset_pixels(d, 0, &px, NULL, &msg), SHR_EINVAL);
    shr_dataset_close(d);
    /* read with pread: nothing is mapped */
    ck_assert_int_eq(shr_dataset_open(&d, g_fixed, SHR_ACCESS_PREAD, &msg), 0);
    ck_assert_int_eq(shr_dataset_pixels(d, 3, &px, &len, &msg), SHR_EUNSUPPORTED);
    ck_assert_ptr_null(px);
    ck_assert_str_eq(msg.text, "sample 3: the raw shards do not map its pixels as stored (read "
                     "it with shr_dataset_read)");
    shr_dataset_close(d);
}
END_TEST

/* shr_pinned: whether the ring is pinned, and why not in the caller's message: pin off, no
 * device (the probe's words), never a failure another reader met. */
START_TEST(test_pinned_reason)
{
    for (int pin = 0; pin < 2; pin++) {
        shr_options o;
        shr_options_init(&o);
        o.batch_size = 4;
        o.pin = pin ? SHR_PIN_OFF : SHR_PIN_AUTO;
        shr_reader *r = NULL;
        ck_assert_msg(shr_open(&r, g_fixed, &o, tu_fresh()) == 0, "%s", tu_msg.text);
        shr_info info;
        shr_get_info(r, &info);
        shr_msg why = {"unchanged"};
        int got = shr_pinned(r, &why);
        ck_assert_int_eq(got, info.pinned);
        ck_assert_int_eq(shr_pinned(r, NULL), got);
        if (pin)
            ck_assert_str_eq(why.text, "pinned memory is off (pin)");
        else if (got)
            ck_assert_str_eq(why.text, "unchanged");
        else {
            char status[400];
            char want[600];
            snprintf(want, sizeof want, "no CUDA device: %s",
                     shr_cuda_status(status, sizeof status));
            ck_assert_str_eq(why.text, want);
        }
        ck_assert_int_eq(got, pin ? 0 : shr_cuda_available());
        shr_close(r);
    }
    shr_msg why = {"unchanged"};
    ck_assert_int_eq(shr_pinned(NULL, &why), 0);
    ck_assert_str_eq(why.text, "unchanged");
}
END_TEST

/* shr_dataset: single samples through the public API equal the formats layer's, in every access
 * mode and for fixed and varying sizes; the manifest's facts; errors name the file. */
START_TEST(test_public_dataset)
{
    const char *sets[] = {g_fixed, g_var, g_gray};
    for (int k = 0; k < 3; k++) {
        fmt_dataset *ref;
        ck_assert_int_eq(fmt_dataset_open(&ref, sets[k], NULL), 0);
        const fmt_manifest *m = fmt_dataset_manifest(ref);
        for (shr_access a = SHR_ACCESS_MMAP; a <= SHR_ACCESS_DIRECT; a++) {
            shr_dataset *d = NULL;
            ck_assert_msg(shr_dataset_open(&d, sets[k], a, tu_fresh()) == 0, "%s", tu_msg.text);
            shr_dataset_info info;
            shr_dataset_get_info(d, &info);
            ck_assert_str_eq(info.format, "raw");
            ck_assert_uint_eq(info.samples, N_SAMPLES);
            ck_assert_uint_eq(info.classes, 3);
            ck_assert_uint_eq(info.channels, k == 2 ? 1 : 3);
            ck_assert_uint_eq(info.width, k == 1 ? 0 : FIX_W);
            ck_assert_uint_eq(info.height, k == 1 ? 0 : FIX_H);
            ck_assert_str_eq(info.geom_mode, k == 1 ? "keep" : "size");
            ck_assert_uint_eq(info.geom_max_side, k == 1 ? 40 : 0);
            ck_assert_uint_eq(info.geom_width, k == 1 ? 0 : FIX_W);
            ck_assert_uint_eq(info.augment, 0);
            ck_assert_str_eq(info.aug_spec, "");
            ck_assert_ptr_nonnull(strstr(info.tool, "shardc"));
            for (uint32_t c = 0; c < info.channels; c++) {
                ck_assert(info.mean[c] == m->mean[c]);
                ck_assert(info.std[c] == m->std[c]);
            }
            for (uint32_t c = 0; c < 3; c++)
                ck_assert_str_eq(shr_dataset_class(d, c), m->classes[c]);
            ck_assert_ptr_null(shr_dataset_class(d, 3));
            /* the shards as the manifest lists them; the geometry's chain as its text */
            ck_assert_uint_eq(shr_dataset_shard_count(d), m->nshards);
            for (uint32_t j = 0; j <= m->nshards; j++) {
                shr_dataset_shard_info sh = {0};
                if (j == m->nshards) {
                    ck_assert_int_eq(shr_dataset_shard(d, j, &sh), SHR_EINVAL);
                    break;
                }
                ck_assert_int_eq(shr_dataset_shard(d, j, &sh), 0);
                ck_assert_str_eq(sh.file, m->shards[j].file);
                ck_assert_uint_eq(sh.first, m->shards[j].first);
                ck_assert_uint_eq(sh.samples, m->shards[j].samples);
                ck_assert_uint_eq(sh.bytes, m->shards[j].bytes);
            }
            char chain[256], want[256];
            fmt_geom_chain(&m->geom, want, sizeof want);
            shr_dataset_transform(d, chain, sizeof chain);
            ck_assert_str_eq(chain, want);
            shr_dataset_transform(d, chain, 6);
            ck_assert_uint_eq(strlen(chain), 5);
            ck_assert_int_eq(strncmp(chain, want, 5), 0);
            shr_dataset_targets tg;
            memset(&tg, 0xee, sizeof tg);
            shr_dataset_get_targets(d, &tg);
            ck_assert_uint_eq(tg.categories, 0);
            ck_assert_uint_eq(tg.record_version, 0);
            ck_assert_uint_eq(tg.edges, 0);
            ck_assert_ptr_null(tg.skeleton);
            uint8_t buf[40 * 40 * 3];
            for (uint64_t i = 0; i < N_SAMPLES; i++) {
                fmt_sample f;
                shr_sample s, r2;
                ck_assert_int_eq(fmt_dataset_get(ref, i, &f), 0);
                ck_assert_int_eq(shr_dataset_sample(d, i, &s, tu_fresh()), 0);
                ck_assert_int_eq(s.label, f.label);
                ck_assert_uint_eq(s.width, f.width);
                ck_assert_uint_eq(s.height, f.height);
                ck_assert_uint_eq(s.channels, f.channels);
                ck_assert_uint_eq(s.source, f.source);
                ck_assert_uint_eq(s.bytes, (uint64_t)f.width * f.height * f.channels);
                memset(buf, 0xee, sizeof buf);
                ck_assert_int_eq(shr_dataset_read(d, i, buf, s.bytes, &r2, tu_fresh()), 0);
                ck_assert_mem_eq(buf, f.pixels, f.length);
                ck_assert_int_eq(r2.label, s.label);
                ck_assert_uint_eq(r2.bytes, s.bytes);
                /* one byte short: refused, nothing written */
                memset(buf, 0xee, sizeof buf);
                ck_assert_int_eq(shr_dataset_read(d, i, buf, s.bytes - 1, NULL, tu_fresh()),
                                 SHR_EINVAL);
                ck_assert_uint_eq(buf[0], 0xee);
            }
            /* a local dataset: its folder; holds nest and change nothing, past the end refused */
            ck_assert_str_eq(shr_dataset_dir(d), sets[k]);
            ck_assert_int_eq(shr_dataset_hold(d, 0, tu_fresh()), 0);
            ck_assert_int_eq(shr_dataset_hold(d, 0, tu_fresh()), 0);
            ck_assert_int_eq(shr_dataset_read(d, 0, buf, sizeof buf, NULL, tu_fresh()), 0);
            shr_dataset_unhold(d, 0);
            shr_dataset_unhold(d, 0);
            ck_assert_int_eq(shr_dataset_hold(d, N_SAMPLES, tu_fresh()), SHR_EINVAL);
            ck_assert_ptr_nonnull(strstr(tu_msg.text, "out of range"));
            shr_sample s;
            tu_msg.text[0] = '\0';
            ck_assert_int_eq(shr_dataset_sample(d, N_SAMPLES, &s, tu_fresh()), SHR_EINVAL);
            ck_assert_ptr_nonnull(strstr(tu_msg.text, "out of range"));
            tu_msg.text[0] = '\0';
            ck_assert_int_eq(shr_dataset_read(d, N_SAMPLES, buf, sizeof buf, NULL, tu_fresh()),
                             SHR_EINVAL);
            ck_assert_ptr_nonnull(strstr(tu_msg.text, "out of range"));
            shr_dataset_close(d);
        }
        fmt_dataset_close(ref);
    }

    shr_dataset *d = (shr_dataset *)&d;
    char dir[1200], copy[1200], shard[1300];
    snprintf(dir, sizeof dir, "%s/no-such-dataset", g_root);
    ck_assert_int_eq(shr_dataset_open(&d, dir, SHR_ACCESS_MMAP, tu_fresh()), ENOENT);
    ck_assert_ptr_null(d);
    ck_assert_ptr_nonnull(strstr(tu_msg.text, "no-such-dataset"));
    ck_assert_int_eq(shr_dataset_open(&d, g_fixed, (shr_access)9, tu_fresh()), SHR_EINVAL);
    ck_assert_int_eq(shr_dataset_open(NULL, g_fixed, SHR_ACCESS_MMAP, tu_fresh()), SHR_EINVAL);
    /* read on demand is for URLs */
    ck_assert_int_eq(shr_dataset_open_remote(&d, g_fixed, NULL, 1 << 20, SHR_ACCESS_MMAP, 0,
                                             tu_fresh()),
                     SHR_EINVAL);
    ck_assert_ptr_null(d);
    ck_assert_ptr_nonnull(strstr(tu_msg.text, "is not a URL"));
    copy_dataset(g_fixed, "truncated-ds", copy, sizeof copy);
    snprintf(shard, sizeof shard, "%s/shard-00001.raw", copy);
    ck_assert_int_eq(truncate(shard, 5000), 0);
    ck_assert_int_eq(shr_dataset_open(&d, copy, SHR_ACCESS_MMAP, tu_fresh()), FMT_ETRUNC);
    ck_assert_ptr_nonnull(strstr(tu_msg.text, "shard-00001.raw"));

    /* truncated after open, read with pread: a clean error naming the shard */
    copy_dataset(g_fixed, "truncated-later", copy, sizeof copy);
    snprintf(shard, sizeof shard, "%s/shard-00001.raw", copy);
    ck_assert_int_eq(shr_dataset_open(&d, copy, SHR_ACCESS_PREAD, tu_fresh()), 0);
    ck_assert_int_eq(truncate(shard, 5000), 0);
    uint8_t buf[FIX_W * FIX_H * 3];
    ck_assert_int_eq(shr_dataset_read(d, 0, buf, sizeof buf, NULL, tu_fresh()), 0);
    ck_assert_int_eq(shr_dataset_read(d, 13, buf, sizeof buf, NULL, tu_fresh()), FMT_ETRUNC);
    ck_assert_ptr_nonnull(strstr(tu_msg.text, "shard-00001.raw"));
    shr_dataset_close(d);
    shr_dataset_close(NULL);
}
END_TEST

/* ---- read-time recovery ---- */

#define NBAD 3
static const uint64_t g_bad[NBAD] = {3, 10, 18};

static int is_bad(uint64_t idx)
{
    for (int i = 0; i < NBAD; i++)
        if (g_bad[i] == idx)
            return 1;
    return 0;
}

/* A copy of the fixed dataset (shards of 7) with one payload byte of each g_bad sample flipped:
 * the damage only a hash finds. */
static void damaged_copy(char *out, size_t n)
{
    copy_dataset(g_fixed, "damaged-samples", out, n);
    for (int i = 0; i < NBAD; i++) {
        char shard[1400];
        snprintf(shard, sizeof shard, "%s/shard-%05d.raw", out, (int)(g_bad[i] / 7));
        fmt_raw_shard *rs;
        ck_assert_int_eq(fmt_raw_open(&rs, shard, NULL), 0);
        uint64_t off = (uint64_t)(fmt_raw_pixels(rs, g_bad[i] % 7) - fmt_raw_base(rs)) + 5;
        fmt_raw_close(rs);
        int fd = open(shard, O_RDWR);
        ck_assert_int_ge(fd, 0);
        uint8_t b;
        ck_assert_int_eq(pread(fd, &b, 1, (off_t)off), 1);
        b ^= 0x40;
        ck_assert_int_eq(pwrite(fd, &b, 1, (off_t)off), 1);
        close(fd);
    }
}

/* The substitute the header promises for bad sample idx. */
static uint64_t expected_substitute(uint64_t seed, uint64_t epoch, uint64_t idx, uint64_t n)
{
    for (uint32_t a = 0; a < 16; a++) {
        uint64_t c = shr_mix(seed, epoch, idx, SHR_SALT_SUBSTITUTE + a) % n;
        if (c != idx && !is_bad(c))
            return c;
    }
    ck_abort_msg("no substitute");
    return 0;
}

/* Three damaged samples, verify_samples on, random order, two epochs, every access mode: with
 * fail the first batch holding one fails with FMT_EHASH naming the shard; with substitute and
 * skip every epoch completes, each bad sample is listed with FMT_EHASH, the substitute is the
 * promised one, the counters add up, and every other sample is byte-identical to a clean read
 * of the undamaged dataset (by index: clean[idx]). */
START_TEST(test_recovery)
{
    char dir[1200];
    damaged_copy(dir, sizeof dir);
    const size_t px = (size_t)FIX_W * FIX_H * 3;
    uint8_t clean[23][24 * 20 * 3];
    fmt_dataset *ds;
    ck_assert_int_eq(fmt_dataset_open(&ds, g_fixed, NULL), 0);
    for (uint64_t i = 0; i < 23; i++)
        ck_assert_int_eq(fmt_dataset_read(ds, i, clean[i], NULL), 0);
    fmt_dataset_close(ds);
    for (shr_access a = SHR_ACCESS_MMAP; a <= SHR_ACCESS_DIRECT; a++) {
        shr_options o;
        options(&o, 4, SHR_ORDER_RANDOM, 77);
        o.access = a;
        o.verify_samples = 1;
        /* fail */
        shr_reader *r = tu_reader_open(dir, &o);
        const shr_batch *b;
        ck_assert_int_eq(tu_reader_drain(r), FMT_EHASH);
        ck_assert_ptr_nonnull(strstr(shr_last_error(r), ".raw"));
        shr_close(r);
        for (int mode = SHR_ON_ERROR_SKIP; mode <= SHR_ON_ERROR_SUBSTITUTE; mode++) {
            o.on_error = (shr_on_error)mode;
            r = tu_reader_open(dir, &o);
            uint64_t nb = shr_batches_per_epoch(r), bad_seen = 0;
            for (uint64_t epoch = 0; epoch < 2; epoch++) {
                uint64_t delivered = 0;
                for (uint64_t k = 0; k < nb; k++) {
                    ck_assert_int_eq(shr_next(r, &b), 0);
                    ck_assert_uint_eq(b->epoch, epoch);
                    uint64_t plan[4];
                    shr_sampler *sp;
                    shr_sampler_cfg cfg = {.n = 23, .order = SHR_ORDER_RANDOM, .seed = 77,
                                           .world = 1, .batch_size = 4};
                    ck_assert_int_eq(shr_sampler_create(&sp, &cfg), 0);
                    uint32_t np = shr_sampler_batch(sp, epoch, k, plan);
                    shr_sampler_free(sp);
                    uint32_t pos = 0, nbad = 0;
                    for (uint32_t i = 0; i < np; i++) {
                        if (!is_bad(plan[i])) {
                            ck_assert_int_eq(b->indices[pos], (int64_t)plan[i]);
                            ck_assert_mem_eq(b->data + pos * px, clean[plan[i]], px);
                            pos++;
                            continue;
                        }
                        ck_assert_uint_lt(nbad, b->nbad);
                        ck_assert_int_eq(b->bad_indices[nbad], (int64_t)plan[i]);
                        ck_assert_int_eq(b->bad_errors[nbad], FMT_EHASH);
                        if (mode == SHR_ON_ERROR_SKIP) {
                            ck_assert_int_eq(b->bad_positions[nbad], -1);
                        } else {
                            uint64_t c = expected_substitute(77, epoch, plan[i], 23);
                            ck_assert_int_eq(b->bad_positions[nbad], (int32_t)pos);
                            ck_assert_int_eq(b->indices[pos], (int64_t)c);
                            ck_assert_mem_eq(b->data + pos * px, clean[c], px);
                            pos++;
                        }
                        nbad++;
                    }
                    ck_assert_uint_eq(nbad, b->nbad);
                    ck_assert_uint_eq(b->n, pos);
                    delivered += b->n;
                    bad_seen += nbad;
                    shr_release(r, b);
                }
                ck_assert_int_eq(shr_next(r, &b), SHR_EEND);
                ck_assert_uint_eq(delivered, mode == SHR_ON_ERROR_SKIP ? 23 - NBAD : 23);
            }
            ck_assert_uint_eq(bad_seen, 2 * NBAD);
            shr_recovery rec = shr_get_recovery(r);
            ck_assert_uint_eq(rec.skipped, mode == SHR_ON_ERROR_SKIP ? 2 * NBAD : 0);
            ck_assert_uint_eq(rec.replaced, mode == SHR_ON_ERROR_SUBSTITUTE ? 2 * NBAD : 0);
            ck_assert_ptr_nonnull(strstr(shr_last_error(r), "do not match their hash"));
            shr_close(r);
        }
    }
}
END_TEST

/* ---- elastic resumption ---- */

/* W = 4 ranks read c batches each of epoch 1 and save their states (all with the same consumed
 * count); readers on W' = 3 and W' = 2 ranks resume from it: over the first part and the resumed
 * part every sample of the epoch is read exactly once, but for the padding the resumed epoch
 * declares (SHR_UNEVEN_PAD: W' * per-rank share - samples left; those are repeats) or drops
 * (SHR_UNEVEN_DROP: never repeats, drops that many); the next epoch is whole again. Every
 * order. */
static void check_elastic(shr_order order, shr_uneven uneven, uint32_t wnew, uint64_t c)
{
    const uint64_t n = 23;
    const uint32_t B = 2, W = 4;
    uint32_t seen[23] = {0};
    uint64_t consumed = 0;
    for (uint32_t rank = 0; rank < W; rank++) {
        shr_options o;
        options(&o, B, order, 5);
        o.rank = rank;
        o.world = W;
        o.uneven = uneven;
        o.quasi_window = 2;
        o.epoch = 1;
        shr_reader *r = tu_reader_open(g_fixed, &o);
        for (uint64_t k = 0; k < c; k++) {
            const shr_batch *b;
            ck_assert_int_eq(shr_next(r, &b), 0);
            for (uint32_t i = 0; i < b->n; i++)
                seen[b->indices[i]]++;
            shr_release(r, b);
        }
        shr_state st = shr_get_state(r);
        ck_assert_uint_eq(st.epoch, 1);
        ck_assert_uint_eq(st.cursor, c);
        if (rank == 0)
            consumed = st.consumed;
        ck_assert_uint_eq(st.consumed, consumed);
        shr_close(r);
    }
    ck_assert_uint_eq(consumed, c * B * W < n ? c * B * W : n);
    uint64_t left = n - consumed, got = 0;
    for (uint32_t rank = 0; rank < wnew; rank++) {
        shr_options o;
        options(&o, B, order, 5);
        o.rank = rank;
        o.world = wnew;
        o.uneven = uneven;
        o.quasi_window = 2;
        o.epoch = 1;
        o.consumed = consumed;
        shr_reader *r = tu_reader_open(g_fixed, &o);
        const shr_batch *b;
        int rc;
        uint64_t batches = 0;
        while ((rc = shr_next(r, &b)) == 0) {
            ck_assert_uint_eq(b->epoch, 1);
            for (uint32_t i = 0; i < b->n; i++)
                seen[b->indices[i]]++;
            got += b->n;
            batches++;
            shr_release(r, b);
        }
        ck_assert_int_eq(rc, SHR_EEND);
        ck_assert_uint_eq(batches, shr_batches_in_epoch(r, 1));
        ck_assert_uint_eq(shr_get_state(r).consumed, 0);   /* epoch 2, nothing consumed yet */
        ck_assert_uint_eq(shr_batches_in_epoch(r, 2), shr_batches_per_epoch(r));
        ck_assert_int_eq(shr_next(r, &b), 0);
        ck_assert_uint_eq(b->epoch, 2);
        ck_assert_uint_eq(b->number, 0);
        shr_release(r, b);
        shr_close(r);
    }
    uint64_t once = 0, twice = 0, never = 0;
    for (uint64_t i = 0; i < n; i++) {
        ck_assert_uint_le(seen[i], 2);
        once += seen[i] == 1;
        twice += seen[i] == 2;
        never += seen[i] == 0;
    }
    uint64_t share = uneven == SHR_UNEVEN_PAD ? (left + wnew - 1) / wnew : left / wnew;
    if (uneven == SHR_UNEVEN_PAD) {
        ck_assert_uint_eq(got, share * wnew);
        ck_assert_uint_eq(never, 0);
        ck_assert_uint_eq(twice, share * wnew - left);      /* the declared padding */
    } else {
        ck_assert_uint_eq(twice, 0);
        ck_assert_uint_eq(never, left - share * wnew);      /* the declared drop */
    }
}

START_TEST(test_elastic_resume)
{
    static const shr_order orders[] = {SHR_ORDER_SEQUENTIAL, SHR_ORDER_RANDOM, SHR_ORDER_QUASI};
    for (int i = 0; i < 3; i++)
        for (uint32_t w = 2; w <= 4; w++)
            for (uint64_t c = 0; c <= 2; c++) {
                check_elastic(orders[i], SHR_UNEVEN_PAD, w, c);
                check_elastic(orders[i], SHR_UNEVEN_DROP, w, c);
            }
}
END_TEST

START_TEST(test_elastic_options)
{
    shr_options o;
    options(&o, 2, SHR_ORDER_RANDOM, 1);
    o.consumed = 4;
    o.cursor = 1;
    shr_reader *r = (shr_reader *)1;
    ck_assert_int_eq(shr_open(&r, g_fixed, &o, tu_fresh()), SHR_EINVAL);
    ck_assert_ptr_nonnull(strstr(tu_msg.text, "not both"));
    o.cursor = 0;
    o.consumed = 24;
    ck_assert_int_eq(shr_open(&r, g_fixed, &o, tu_fresh()), SHR_EINVAL);
    /* everything consumed: the epoch's end comes first, then a whole epoch */
    o.consumed = 23;
    r = tu_reader_open(g_fixed, &o);
    const shr_batch *b;
    ck_assert_int_eq(shr_next(r, &b), SHR_EEND);
    ck_assert_int_eq(shr_next(r, &b), 0);
    ck_assert_uint_eq(b->epoch, 1);
    shr_release(r, b);
    shr_close(r);
    o.on_error = (shr_on_error)7;
    o.consumed = 0;
    ck_assert_int_eq(shr_open(&r, g_fixed, &o, tu_fresh()), SHR_EINVAL);
}
END_TEST

static Suite *reader_suite(void)
{
    TCase *tc;
    Suite *s = tu_suite("reader", "reader", 120, &tc);
    TU_ADD_TESTS(tc, test_sequential_matches_dataset, test_random_permutations,
                 test_quasi_permutations, test_ranks, test_resume_everywhere,
                 test_threads_identical, test_prefetch_bound, test_close_with_held_batches,
                 test_crop_pad, test_flip, test_random_crop, test_access_modes, test_dataset_read);
    tcase_add_loop_test(tc, test_memory_flat, 0, 3);
    TU_ADD_TESTS(tc, test_open_errors, test_caller_message, test_pinned_reason,
                 test_pin_device_from_env, test_bad_options, test_output_limits,
                 test_worker_failure, test_recovery, test_elastic_resume, test_elastic_options,
                 test_strerror, test_host_alloc, test_epoch_order, test_manifest_peek,
                 test_dataset_pixels, test_public_dataset);
    return s;
}

int main(void)
{
    int rc = build_fixtures();
    return tu_run_fixtures(rc, reader_suite());
}
