/* augtest.h - fixtures shared by the read-time augmentation suites (test_augment_read.c,
 * test_affine.c): datasets built at run time by the shardc binaries of the same build directory
 * (testutil.h's g_root), the readers' recorded batches, and the python3 (torch, torchvision,
 * numpy, Pillow) that runs the suite's reference script tests/ref/AUGTEST_SCRIPT. Define
 * AUGTEST_NAME (the program's name, for messages), AUGTEST_SCRIPT and AUGTEST_SEED (where the
 * suite's rnd() starts) before including it; main is tu_run_fixtures(build_fixtures(), ...). */
#ifndef AUGTEST_H
#define AUGTEST_H

#include <check.h>
#include <ftw.h>
#include <inttypes.h>
#include <libgen.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "progs.h"
#include "shardread.h"
#include "testutil.h"

static char g_rgb[1100];                /* RGB samples of many sizes */
static char g_gray[1100];               /* the same, one channel */
static char g_script[1100];             /* the reference script */
static const char *g_py;                /* python3 with torchvision, or NULL */
static uint64_t g_rng = AUGTEST_SEED;

/* The suite's test pixels: xorshift64 from AUGTEST_SEED, the same sequence on every run. */
static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}


/* The reference script tests/ref/AUGTEST_SCRIPT: from the repository root (where the test suites
 * run), else next to the build directory holding this program. */
static int find_script(void)
{
    snprintf(g_script, sizeof g_script, "tests/ref/%s", AUGTEST_SCRIPT);
    if (file_exists(g_script))
        return 0;
    snprintf(g_script, sizeof g_script, "%s/../../tests/ref/%s", g_bin, AUGTEST_SCRIPT);
    return file_exists(g_script) ? 0 : -1;
}

static int build_fixtures(void)
{
    if (tu_progs_root() != 0 || tu_build_read_sets(g_rgb, g_gray, NULL, 0) != 0)
        return -1;
    if (find_script() != 0) {
        fprintf(stderr, AUGTEST_NAME ": tests/ref/" AUGTEST_SCRIPT " not found (run from the "
                "repository root)\n");
        return -1;
    }
    g_py = tu_python("numpy, torch, torchvision, PIL");
    if (!g_py)
        fprintf(stderr, AUGTEST_NAME ": no python3 with torchvision and Pillow: the checks "
                "against torchvision will say SKIPPED (set PYTHON)\n");
    return 0;
}

/* Run the reference script's MODE on DIR: 1 done, 0 skipped (no python: said and counted). */
static int run_check(const char *mode, const char *dir)
{
    if (!g_py) {
        tu_skip("the %s check against torchvision (no python3 with torch, torchvision, numpy and "
                "Pillow; set PYTHON)", mode);
        return 0;
    }
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' '%s' %s '%s' >&2", g_py, g_script, mode, dir);
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s check failed (see above)", mode);
    return 1;
}

static void make_dir(char *dir, size_t len, const char *name)
{
    snprintf(dir, len, "%s/%s", g_root, name);
    ck_assert_int_eq(mkdir(dir, 0755), 0);
}

/* dir/name, created or truncated, open for writing: a list the reference script reads. */
static FILE *open_list(const char *dir, const char *name)
{
    char path[1300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "cannot create %s", path);
    return f;
}

/* A fresh case folder (make_dir, its path into dir) with its list file `list` there open for
 * writing. */
static FILE *open_case(char *dir, size_t len, const char *name, const char *list)
{
    make_dir(dir, len, name);
    return open_list(dir, list);
}

/* One line of the reader's n draws for sample i: shr_mix words from salt on, in hex. */
static void put_words(FILE *f, uint64_t seed, uint64_t epoch, uint64_t i, uint32_t salt,
                      uint32_t n)
{
    for (uint32_t k = 0; k < n; k++)
        fprintf(f, " %016" PRIx64, shr_mix(seed, epoch, i, (uint64_t)salt + k));
    fputc('\n', f);
}

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(p, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

static uint8_t *read_file(const char *path, size_t n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    uint8_t *p = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(fread(p, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
    return p;
}

/* ---- the delivered batches, recorded ---- */

typedef struct {
    uint8_t *data;              /* n samples */
    shr_params *params;
    int64_t *idx;
    uint32_t n;
} rec;

static void keep_rec(const shr_batch *b, size_t one, void *recs)
{
    rec *r = tu_vec_add(recs, sizeof *r);
    r->n = b->n;
    r->data = tu_memdup(b->data, one * b->n);
    r->params = tu_memdup(b->params, sizeof(shr_params) * b->n);
    r->idx = tu_memdup(b->indices, sizeof(int64_t) * b->n);
}

/* All batches of `epochs` epochs from a reader with options o. */
static rec *record(const char *ds, const shr_options *o, int epochs, size_t *nrec,
                   size_t *sample_bytes)
{
    tu_vec recs = {NULL, 0};
    *sample_bytes = tu_reader_each(ds, o, epochs, keep_rec, &recs);
    *nrec = recs.n;
    return recs.v;
}

static void free_recs(rec *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].data);
        free(v[i].params);
        free(v[i].idx);
    }
    free(v);
}

/* The readers of the checks: RandomResizedCrop to w x h and a flip, random order, batches of
 * 5. */
static shr_options reader_options(uint64_t seed, uint32_t w, uint32_t h)
{
    return tu_rrc_options(5, seed, w, h);
}

#endif
