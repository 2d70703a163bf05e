/* augtest.h - fixtures shared by the read-time augmentation suites (test_augment_read.c,
 * test_affine.c): datasets built at run time by the shardc binaries of the same build
 * directory, and the python3 (torch, torchvision, numpy, Pillow) that runs the suite's
 * reference script tests/ref/AUGTEST_SCRIPT. Define AUGTEST_NAME (the program's name, for messages)
 * and AUGTEST_SCRIPT before including it. */
#ifndef AUGTEST_H
#define AUGTEST_H

#include <check.h>
#include <ftw.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "progs.h"
#include "tuskip.h"

static char g_root[1024];               /* temp dir of the whole run */
static char g_rgb[1100];                /* RGB samples of many sizes */
static char g_gray[1100];               /* the same, one channel */
static char g_script[1100];             /* the reference script */
static const char *g_py;                /* python3 with torchvision, or NULL */


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
    if (find_bins() != 0) {
        fprintf(stderr, AUGTEST_NAME ": shardc not found next to the test (run make all)\n");
        return -1;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(g_root, sizeof g_root, "%s/" AUGTEST_NAME ".XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_root)) {
        g_root[0] = '\0';
        return -1;
    }
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s/shardc-mksample' '%s/src' --classes 3 --per-class 8 "
             "--min-side 30 --max-side 90 --no-broken --quiet", g_bin, g_root);
    if (run_quiet(cmd) != 0)
        return -1;
    snprintf(g_rgb, sizeof g_rgb, "%s/rgb", g_root);
    snprintf(g_gray, sizeof g_gray, "%s/gray", g_root);
    const char *sets[][2] = {
        {g_rgb, "--short-side 40 --max-side 64"},
        {g_gray, "--short-side 40 --max-side 64 --gray"},
    };
    for (size_t i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "'%s/shardc' build '%s/src' -o '%s' %s --shard-samples 7 -j 2 "
                 "--no-progress", g_bin, g_root, sets[i][0], sets[i][1]);
        if (run_quiet(cmd) != 0) {
            fprintf(stderr, AUGTEST_NAME ": failed: %s\n", cmd);
            return -1;
        }
    }
    if (find_script() != 0) {
        fprintf(stderr, AUGTEST_NAME ": tests/ref/" AUGTEST_SCRIPT " not found (run from the "
                "repository root)\n");
        return -1;
    }
    g_py = find_python();
    if (!g_py)
        fprintf(stderr, AUGTEST_NAME ": no python3 with torchvision and Pillow: the checks "
                "against torchvision will say SKIPPED (set PYTHON)\n");
    return 0;
}

static void remove_fixtures(void)
{
    if (g_root[0])
        nftw(g_root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
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

#endif
