/* test_resample.c - the resampler against Pillow, byte for byte: every filter, up and down,
 * 1xN, Nx1 and prime sizes, integer and fractional boxes, gray and RGB, on each code path
 * (plain, SSE4.1, AVX2) and with padded strides. Pillow (python3-pil) computes the references at
 * test time through tests/ref/pil_resize.py; without it the differential test says SKIPPED, the
 * path-agreement tests still run and the suite exits 77 (tests/tuskip.h). Also: 2 and 4 channels equal per-channel gray resizes, the
 * shared coefficient cache under threads, and argument errors. */
#include "resample.h"
#include "simd.h"
#include "testutil.h"

#include <check.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint32_t rng_next(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* Noise, hard black/white stripes (they make lanczos and bicubic overshoot, so clamping is
 * exercised) and a smooth ramp, in three bands. */
static uint8_t *make_image(uint32_t w, uint32_t h, uint32_t ch, uint32_t seed)
{
    uint8_t *p = malloc((size_t)w * h * ch + 1);
    ck_assert_ptr_nonnull(p);
    uint32_t s = seed * 2654435761u + 1;
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            for (uint32_t c = 0; c < ch; c++) {
                uint8_t v;
                uint32_t band = (y * 3 / h + x * 2 / w + c) % 3;
                if (band == 0)
                    v = (uint8_t)(rng_next(&s) >> 24);
                else if (band == 1)
                    v = ((x / 2 + y / 3 + c) & 1) ? 255 : 0;
                else
                    v = (uint8_t)((x * 7 + y * 5 + c * 40) & 255);
                p[((size_t)y * w + x) * ch + c] = v;
            }
    return p;
}

typedef struct {
    uint32_t sw, sh, dw, dh;
    int has_box;
    fmt_rs_box box;
} rs_case;

#define NOBOX {0, 0, 0, 0}

static const rs_case cases[] = {
    {1, 1, 1, 1, 0, NOBOX},
    {1, 1, 7, 5, 0, NOBOX},
    {1, 17, 5, 3, 0, NOBOX},
    {17, 1, 3, 9, 0, NOBOX},
    {13, 1, 1, 1, 0, NOBOX},
    {1, 29, 1, 4, 0, NOBOX},
    {97, 89, 31, 37, 0, NOBOX},
    {31, 37, 97, 89, 0, NOBOX},
    {500, 375, 224, 224, 1, {62, 0, 437, 375}},
    {500, 375, 224, 224, 1, {62.5f, 0.25f, 436.75f, 374.5f}},
    {320, 240, 320, 240, 1, {10.3f, 7.7f, 300.1f, 231.9f}},
    {320, 240, 320, 240, 1, {0, 0, 320, 200}},
    {64, 48, 64, 201, 0, NOBOX},
    {64, 48, 203, 48, 0, NOBOX},
    {997, 13, 3, 7, 0, NOBOX},
    {300, 7, 299, 7, 0, NOBOX},
    {41, 30, 40, 31, 0, NOBOX},
    {257, 129, 256, 128, 0, NOBOX},
    {33, 65, 1, 1, 0, NOBOX},
    {211, 173, 59, 83, 1, {3.141f, 2.718f, 199.5f, 170.25f}},
    {40, 40, 113, 127, 1, {5.5f, 6.25f, 20.75f, 30.125f}},
    {150, 100, 150, 100, 1, {0.5f, 0.5f, 149.5f, 99.5f}},
};
#define NCASES (sizeof cases / sizeof cases[0])

static const fmt_rs_path paths[] = {FMT_RS_PATH_PLAIN, FMT_RS_PATH_SSE41, FMT_RS_PATH_AVX2,
                                    FMT_RS_PATH_AVX512};
#define NPATHS (sizeof paths / sizeof paths[0])

/* Resample with padded source and destination strides; returns the packed result. */
static uint8_t *run_case(fmt_rs_scratch *s, const rs_case *c, uint32_t ch, fmt_filter f,
                         const uint8_t *img)
{
    size_t spad = 5, dpad = 3;
    size_t sstride = (size_t)c->sw * ch + spad, dstride = (size_t)c->dw * ch + dpad;
    uint8_t *sbuf = malloc(sstride * c->sh), *dbuf = malloc(dstride * c->dh);
    ck_assert_ptr_nonnull(sbuf);
    ck_assert_ptr_nonnull(dbuf);
    memset(sbuf, 0xa5, sstride * c->sh);
    memset(dbuf, 0x5a, dstride * c->dh);
    for (uint32_t y = 0; y < c->sh; y++)
        memcpy(sbuf + y * sstride, img + (size_t)y * c->sw * ch, (size_t)c->sw * ch);
    fmt_rs_view sv = {sbuf, c->sw, c->sh, ch, sstride}, dv = {dbuf, c->dw, c->dh, ch, dstride};
    fmt_msg msg = {{0}};
    int rc = fmt_resample(s, &sv, c->has_box ? &c->box : NULL, f, &dv, &msg);
    ck_assert_msg(rc == 0, "%ux%u -> %ux%u %s: %s", c->sw, c->sh, c->dw, c->dh,
                  fmt_filter_name(f), fmt_reason(&msg, rc));
    uint8_t *out = malloc((size_t)c->dw * c->dh * ch + 1);
    ck_assert_ptr_nonnull(out);
    int past_end = 0;   /* plain checks in the loops: every check assertion writes a log */
    for (uint32_t y = 0; y < c->dh; y++) {
        memcpy(out + (size_t)y * c->dw * ch, dbuf + y * dstride, (size_t)c->dw * ch);
        for (size_t i = 0; i < dpad; i++)
            past_end |= dbuf[y * dstride + (size_t)c->dw * ch + i] != 0x5a;
    }
    ck_assert_msg(!past_end, "wrote past the row end");
    free(sbuf);
    free(dbuf);
    return out;
}

/* tests/ref/pil_resize.py, found next to the source tree of this binary or under the cwd. */
static void find_script(char *out, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            snprintf(out, len, "%s/../../tests/ref/pil_resize.py", exe);
            if (access(out, R_OK) == 0)
                return;
        }
    }
    snprintf(out, len, "tests/ref/pil_resize.py");
}

static uint8_t *read_all(const char *path, size_t want)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    uint8_t *p = malloc(want + 1);
    ck_assert_ptr_nonnull(p);
    size_t got = fread(p, 1, want + 1, f);
    fclose(f);
    ck_assert_msg(got == want, "%s: %zu bytes, expected %zu", path, got, want);
    return p;
}

static void write_all(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot create %s", path);
    ck_assert_uint_eq(fwrite(p, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

START_TEST(test_pillow_differential)
{
    char script[PATH_MAX + 64];
    const char *py = tu_python_or_skip("PIL",
                                       "no python3 with Pillow (python3-pil): the differential "
                                       "test against Pillow");
    if (!py)
        return;
    find_script(script, sizeof script);
    char list[700];
    snprintf(list, sizeof list, "%s/cases.txt", g_dir);
    FILE *lf = fopen(list, "w");
    ck_assert_ptr_nonnull(lf);
    for (size_t i = 0; i < NCASES; i++) {
        const rs_case *c = &cases[i];
        for (uint32_t ch = 1; ch <= 3; ch += 2) {
            char in[700];
            snprintf(in, sizeof in, "%s/in-%zu-%u", g_dir, i, ch);
            uint8_t *img = make_image(c->sw, c->sh, ch, (uint32_t)i);
            write_all(in, img, (size_t)c->sw * c->sh * ch);
            free(img);
            for (int f = 0; f < FMT_FILTER_COUNT; f++) {
                char box[128] = "-";
                if (c->has_box)
                    snprintf(box, sizeof box, "%.9g,%.9g,%.9g,%.9g", (double)c->box.x0,
                             (double)c->box.y0, (double)c->box.x1, (double)c->box.y1);
                fprintf(lf, "%s %u %u %s %s %u %u %s %s/ref-%zu-%u-%d\n", in, c->sw, c->sh,
                        ch == 1 ? "L" : "RGB", fmt_filter_name((fmt_filter)f), c->dw, c->dh,
                        box, g_dir, i, ch, f);
            }
        }
    }
    ck_assert_int_eq(fclose(lf), 0);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s %s %s", py, script, list);
    ck_assert_msg(system(cmd) == 0, "reference script failed: %s", cmd);

    fmt_rs_cache *cache;
    ck_assert_int_eq(fmt_rs_cache_create(&cache), 0);
    fmt_rs_scratch *s;
    ck_assert_int_eq(fmt_rs_scratch_create(cache, &s), 0);
    int npaths = 0;
    for (size_t pi = 0; pi < NPATHS; pi++) {
        if (fmt_rs_scratch_set_path(s, paths[pi]) != 0) {
            fprintf(stderr, "note: this CPU has no %s; that path is not tested\n",
                    fmt_rs_path_name(paths[pi]));
            continue;
        }
        npaths++;
        size_t mismatches = 0;
        for (size_t i = 0; i < NCASES; i++) {
            const rs_case *c = &cases[i];
            for (uint32_t ch = 1; ch <= 3; ch += 2) {
                uint8_t *img = make_image(c->sw, c->sh, ch, (uint32_t)i);
                for (int f = 0; f < FMT_FILTER_COUNT; f++) {
                    char ref_path[700];
                    snprintf(ref_path, sizeof ref_path, "%s/ref-%zu-%u-%d", g_dir, i, ch, f);
                    size_t n = (size_t)c->dw * c->dh * ch;
                    uint8_t *ref = read_all(ref_path, n);
                    uint8_t *got = run_case(s, c, ch, (fmt_filter)f, img);
                    size_t diff = 0, first = 0;
                    for (size_t b = 0; b < n; b++)
                        if (got[b] != ref[b] && !diff++)
                            first = b;
                    if (diff) {
                        mismatches++;
                        fprintf(stderr,
                                "%s: %ux%u -> %ux%u ch %u %s box %d: %zu bytes differ, first at "
                                "%zu (%u vs pillow %u)\n",
                                fmt_rs_path_name(paths[pi]), c->sw, c->sh, c->dw, c->dh, ch,
                                fmt_filter_name((fmt_filter)f), c->has_box, diff, first,
                                got[first], ref[first]);
                    }
                    free(ref);
                    free(got);
                }
                free(img);
            }
        }
        ck_assert_msg(mismatches == 0, "%zu cases differ from Pillow on the %s path", mismatches,
                      fmt_rs_path_name(paths[pi]));
    }
    ck_assert_int_ge(npaths, 1);
    fmt_rs_scratch_free(s);
    fmt_rs_cache_free(cache);
}
END_TEST

/* 2 and 4 channels: each channel is filtered on its own, so the result equals resizing each
 * channel plane as a gray image (which the differential test ties to Pillow). */
START_TEST(test_channels_independent)
{
    fmt_rs_scratch *s;
    ck_assert_int_eq(fmt_rs_scratch_create(NULL, &s), 0);
    for (uint32_t ch = 2; ch <= 4; ch += 2) {
        for (size_t i = 0; i < NCASES; i++) {
            const rs_case *c = &cases[i];
            uint8_t *img = make_image(c->sw, c->sh, ch, (uint32_t)i + 100);
            uint8_t *plane = malloc((size_t)c->sw * c->sh);
            ck_assert_ptr_nonnull(plane);
            for (int f = 0; f < FMT_FILTER_COUNT; f++) {
                uint8_t *all = run_case(s, c, ch, (fmt_filter)f, img);
                for (uint32_t k = 0; k < ch; k++) {
                    for (size_t p = 0; p < (size_t)c->sw * c->sh; p++)
                        plane[p] = img[p * ch + k];
                    uint8_t *one = run_case(s, c, 1, (fmt_filter)f, plane);
                    size_t bad = 0;
                    for (size_t p = 0; p < (size_t)c->dw * c->dh; p++)
                        bad += all[p * ch + k] != one[p];
                    ck_assert_msg(bad == 0, "case %zu channel %u of %u, %s: %zu pixels differ",
                                  i, k, ch, fmt_filter_name((fmt_filter)f), bad);
                    free(one);
                }
                free(all);
            }
            free(plane);
            free(img);
        }
    }
    fmt_rs_scratch_free(s);
}
END_TEST

/* Every vector path equals the plain path on many random geometries (sizes 1..300, random
 * fractional boxes), including widths that end inside a vector. */
START_TEST(test_paths_agree_random)
{
    fmt_rs_scratch *plain, *vec;
    ck_assert_int_eq(fmt_rs_scratch_create(NULL, &plain), 0);
    ck_assert_int_eq(fmt_rs_scratch_create(NULL, &vec), 0);
    ck_assert_int_eq(fmt_rs_scratch_set_path(plain, FMT_RS_PATH_PLAIN), 0);
    uint32_t seed = 77;
    for (int it = 0; it < 300; it++) {
        rs_case c = {0};
        c.sw = 1 + rng_next(&seed) % 300;
        c.sh = 1 + rng_next(&seed) % 120;
        c.dw = 1 + rng_next(&seed) % 300;
        c.dh = 1 + rng_next(&seed) % 120;
        if (rng_next(&seed) & 1) {
            c.has_box = 1;
            float a = (float)(rng_next(&seed) % 1000) / 1000.0f * (float)c.sw;
            float b = (float)(rng_next(&seed) % 1000) / 1000.0f * (float)c.sw;
            float d = (float)(rng_next(&seed) % 1000) / 1000.0f * (float)c.sh;
            float e = (float)(rng_next(&seed) % 1000) / 1000.0f * (float)c.sh;
            c.box = (fmt_rs_box){fminf(a, b), fminf(d, e), fmaxf(a, b), fmaxf(d, e)};
        }
        uint32_t ch = 1 + rng_next(&seed) % 4;
        fmt_filter f = (fmt_filter)(rng_next(&seed) % FMT_FILTER_COUNT);
        uint8_t *img = make_image(c.sw, c.sh, ch, (uint32_t)it);
        uint8_t *want = run_case(plain, &c, ch, f, img);
        for (size_t pi = 1; pi < NPATHS; pi++) {
            if (fmt_rs_scratch_set_path(vec, paths[pi]) != 0)
                continue;
            uint8_t *got = run_case(vec, &c, ch, f, img);
            ck_assert_msg(memcmp(got, want, (size_t)c.dw * c.dh * ch) == 0,
                          "%s differs from plain: %ux%u -> %ux%u ch %u %s",
                          fmt_rs_path_name(paths[pi]), c.sw, c.sh, c.dw, c.dh, ch,
                          fmt_filter_name(f));
            free(got);
        }
        free(want);
        free(img);
    }
    fmt_rs_scratch_free(plain);
    fmt_rs_scratch_free(vec);
}
END_TEST

/* A window of a resize equals the same rectangle cut out of the full resize. */
START_TEST(test_window_equals_crop)
{
    fmt_rs_scratch *s;
    ck_assert_int_eq(fmt_rs_scratch_create(NULL, &s), 0);
    uint32_t seed = 1234;
    for (int it = 0; it < 400; it++) {
        rs_case c = {0};
        c.sw = 1 + rng_next(&seed) % 200;
        c.sh = 1 + rng_next(&seed) % 100;
        c.dw = 1 + rng_next(&seed) % 200;
        c.dh = 1 + rng_next(&seed) % 100;
        if (it % 5 == 0) {
            c.dw = c.sw;            /* one axis without a pass */
            c.dh = it % 10 ? c.dh : c.sh;
        }
        uint32_t ch = 1 + rng_next(&seed) % 3;
        fmt_filter f = (fmt_filter)(rng_next(&seed) % FMT_FILTER_COUNT);
        fmt_rs_path path = paths[rng_next(&seed) % NPATHS];
        if (fmt_rs_scratch_set_path(s, path) != 0)
            ck_assert_int_eq(fmt_rs_scratch_set_path(s, FMT_RS_PATH_PLAIN), 0);
        uint8_t *img = make_image(c.sw, c.sh, ch, (uint32_t)it);
        uint8_t *full = run_case(s, &c, ch, f, img);
        uint32_t ww = 1 + rng_next(&seed) % c.dw, wh = 1 + rng_next(&seed) % c.dh;
        uint32_t wx = rng_next(&seed) % (c.dw - ww + 1), wy = rng_next(&seed) % (c.dh - wh + 1);
        uint8_t *win = malloc((size_t)ww * wh * ch);
        ck_assert_ptr_nonnull(win);
        fmt_rs_view sv = {img, c.sw, c.sh, ch, (size_t)c.sw * ch};
        fmt_rs_view dv = {win, ww, wh, ch, (size_t)ww * ch};
        ck_assert_int_eq(fmt_resample_window(s, &sv, NULL, f, c.dw, c.dh, wx, wy, &dv, NULL), 0);
        int bad = 0;
        for (uint32_t y = 0; y < wh; y++)
            bad |= memcmp(win + (size_t)y * ww * ch,
                          full + ((size_t)(wy + y) * c.dw + wx) * ch, (size_t)ww * ch) != 0;
        ck_assert_msg(!bad, "window %ux%u at %u,%u of %ux%u -> %ux%u ch %u %s differs", ww, wh,
                      wx, wy, c.sw, c.sh, c.dw, c.dh, ch, fmt_filter_name(f));
        free(win);
        free(full);
        free(img);
    }
    fmt_rs_scratch_free(s);
}
END_TEST

/* The switch (fmt_simd_set) makes a scratch plain; the environment does not (the programs
 * read SHARDC_RESAMPLE and set the switch: the library reads no environment). */
START_TEST(test_switch_forces_plain)
{
    fmt_rs_scratch *s;
    ck_assert_int_eq(fmt_rs_scratch_create(NULL, &s), 0);
    fmt_rs_path best = fmt_rs_scratch_path(s);
    ck_assert_int_ne(best, FMT_RS_PATH_AUTO);
    fmt_rs_scratch_free(s);
    fmt_simd_set(0);
    ck_assert_int_eq(fmt_rs_scratch_create(NULL, &s), 0);
    ck_assert_int_eq(fmt_rs_scratch_path(s), FMT_RS_PATH_PLAIN);
    fmt_rs_scratch_free(s);
    fmt_simd_set(1);
    setenv("SHARDC_RESAMPLE", "plain", 1);
    ck_assert_int_eq(fmt_rs_scratch_create(NULL, &s), 0);
    ck_assert_int_eq(fmt_rs_scratch_path(s), best);
    fmt_rs_scratch_free(s);
    unsetenv("SHARDC_RESAMPLE");
}
END_TEST

/* ---- the shared cache under threads ---- */

typedef struct {
    fmt_rs_cache *cache;
    int id;
    uint8_t *out[NCASES];
} thr_arg;

static void *thr_run(void *p)
{
    thr_arg *a = p;
    fmt_rs_scratch *s;
    if (fmt_rs_scratch_create(a->cache, &s) != 0)
        return NULL;
    for (int rep = 0; rep < 3; rep++) {
        for (size_t k = 0; k < NCASES; k++) {
            size_t i = (k + (size_t)a->id * 5) % NCASES;
            const rs_case *c = &cases[i];
            uint8_t *img = make_image(c->sw, c->sh, 3, (uint32_t)i);
            fmt_rs_view sv = {img, c->sw, c->sh, 3, (size_t)c->sw * 3};
            uint8_t *dst = malloc((size_t)c->dw * c->dh * 3);
            fmt_rs_view dv = {dst, c->dw, c->dh, 3, (size_t)c->dw * 3};
            if (dst && fmt_resample(s, &sv, c->has_box ? &c->box : NULL, FMT_FILTER_BILINEAR,
                                    &dv, NULL) == 0 && rep == 2) {
                free(a->out[i]);
                a->out[i] = dst;
                dst = NULL;
            }
            free(dst);
            free(img);
        }
    }
    fmt_rs_scratch_free(s);
    return NULL;
}

START_TEST(test_cache_threads)
{
    fmt_rs_cache *cache;
    ck_assert_int_eq(fmt_rs_cache_create(&cache), 0);
    enum { N = 4 };
    thr_arg args[N];
    pthread_t th[N];
    memset(args, 0, sizeof args);
    for (int t = 0; t < N; t++) {
        args[t].cache = cache;
        args[t].id = t;
        ck_assert_int_eq(pthread_create(&th[t], NULL, thr_run, &args[t]), 0);
    }
    for (int t = 0; t < N; t++)
        pthread_join(th[t], NULL);
    /* every thread got every result, and the same bytes */
    for (size_t i = 0; i < NCASES; i++) {
        size_t n = (size_t)cases[i].dw * cases[i].dh * 3;
        for (int t = 0; t < N; t++) {
            ck_assert_ptr_nonnull(args[t].out[i]);
            ck_assert_int_eq(memcmp(args[t].out[i], args[0].out[i], n), 0);
        }
    }
    for (int t = 0; t < N; t++)
        for (size_t i = 0; i < NCASES; i++)
            free(args[t].out[i]);
    /* at most one table per distinct (axis, geometry): at most two per case */
    size_t count = fmt_rs_cache_count(cache);
    ck_assert_uint_gt(count, 0);
    ck_assert_uint_le(count, 2 * NCASES);
    /* a second pass adds nothing */
    thr_arg again = {cache, 0, {0}};
    thr_run(&again);
    ck_assert_uint_eq(fmt_rs_cache_count(cache), count);
    for (size_t i = 0; i < NCASES; i++)
        free(again.out[i]);
    fmt_rs_cache_free(cache);
}
END_TEST

START_TEST(test_errors)
{
    fmt_rs_scratch *s;
    ck_assert_int_eq(fmt_rs_scratch_create(NULL, &s), 0);
    uint8_t src[4 * 4 * 3] = {0}, dst[2 * 2 * 3];
    fmt_rs_view sv = {src, 4, 4, 3, 12}, dv = {dst, 2, 2, 3, 6};
    fmt_msg msg = {{0}};
    fmt_rs_box outside = {0, 0, 4.5f, 4};
    ck_assert_int_eq(fmt_resample(s, &sv, &outside, FMT_FILTER_BILINEAR, &dv, &msg), FMT_EINVAL);
    ck_assert_msg(strstr(msg.text, "box") != NULL, "%s", msg.text);
    fmt_rs_box neg = {-0.5f, 0, 4, 4}, flipped = {3, 0, 1, 4}, nan = {NAN, 0, 4, 4};
    ck_assert_int_eq(fmt_resample(s, &sv, &neg, FMT_FILTER_BILINEAR, &dv, NULL), FMT_EINVAL);
    ck_assert_int_eq(fmt_resample(s, &sv, &flipped, FMT_FILTER_BILINEAR, &dv, NULL), FMT_EINVAL);
    ck_assert_int_eq(fmt_resample(s, &sv, &nan, FMT_FILTER_BILINEAR, &dv, NULL), FMT_EINVAL);
    ck_assert_int_eq(fmt_resample(s, &sv, NULL, (fmt_filter)99, &dv, NULL), FMT_EINVAL);
    fmt_rs_view gray = {dst, 2, 2, 1, 2};
    ck_assert_int_eq(fmt_resample(s, &sv, NULL, FMT_FILTER_BILINEAR, &gray, NULL), FMT_EINVAL);
    fmt_rs_view short_stride = {src, 4, 4, 3, 11};
    ck_assert_int_eq(fmt_resample(s, &short_stride, NULL, FMT_FILTER_BILINEAR, &dv, NULL),
                     FMT_EINVAL);
    ck_assert_int_eq(fmt_resample(s, &sv, NULL, FMT_FILTER_BILINEAR, &dv, NULL), 0);
    fmt_filter f;
    ck_assert_int_eq(fmt_filter_parse("lanczos", &f), 0);
    ck_assert_int_eq(f, FMT_FILTER_LANCZOS);
    ck_assert_int_eq(fmt_filter_parse("sinc", &f), FMT_EINVAL);
    ck_assert_str_eq(fmt_filter_name(FMT_FILTER_BILINEAR), "bilinear");
    fmt_rs_scratch_free(s);
}
END_TEST

int main(void)
{
    Suite *s = TU_TEMP_SUITE("resample", "core", 600, test_pillow_differential,
                             test_channels_independent, test_paths_agree_random,
                             test_window_equals_crop, test_switch_forces_plain, test_cache_threads,
                             test_errors);
    return tu_run_suite(s);
}
