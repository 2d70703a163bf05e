/* Parts of a build: slices of the input list, --part parsing, --part auto from Slurm and MPI
 * variables, folder names, the part record's round trip. */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "build.h"
#include "merge.h"
#include "mksample.h"
#include "part.h"
#include "testutil.h"

/* Every N from 1 to more parts than inputs: contiguous slices, in order, covering [0, n) once,
 * sizes within one of each other. */
START_TEST(ranges_cover_the_list)
{
    static const uint64_t ns[] = {0, 1, 2, 7, 45, 1000, 1281167};
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
        uint64_t n = ns[k];
        for (uint32_t count = 1; count <= 70; count++) {
            uint64_t next = 0, small = UINT64_MAX, big = 0;
            for (uint32_t i = 0; i < count; i++) {
                shc_part p = {i, count};
                uint64_t lo, hi;
                shc_part_range(n, &p, &lo, &hi);
                ck_assert_uint_eq(lo, next);
                ck_assert_uint_le(lo, hi);
                next = hi;
                small = hi - lo < small ? hi - lo : small;
                big = hi - lo > big ? hi - lo : big;
            }
            ck_assert_uint_eq(next, n);
            ck_assert_uint_le(big - small, 1);
            if (count > n)
                ck_assert_uint_eq(small, 0); /* more parts than inputs: some are empty */
        }
    }
    uint64_t lo, hi;
    shc_part_range(45, NULL, &lo, &hi);
    ck_assert_uint_eq(lo, 0);
    ck_assert_uint_eq(hi, 45);
    shc_part whole = {0, 0};
    shc_part_range(45, &whole, &lo, &hi);
    ck_assert_uint_eq(hi, 45);
    /* a huge list does not overflow n * I */
    shc_part last = {SHC_PART_MAX - 1, SHC_PART_MAX};
    shc_part_range(UINT64_MAX / 2, &last, &lo, &hi);
    ck_assert_uint_eq(hi, UINT64_MAX / 2);
    ck_assert_uint_lt(lo, hi);
}
END_TEST

START_TEST(parse_i_of_n)
{
    shc_part p;
    fmt_msg why;
    ck_assert_int_eq(shc_part_parse("3/8", &p, &why), 0);
    ck_assert_uint_eq(p.index, 3);
    ck_assert_uint_eq(p.count, 8);
    ck_assert_int_eq(shc_part_parse("0/1", &p, NULL), 0);
    static const char *const bad[] = {"8/8", "9/8", "1/0", "-1/4", "3", "3/", "/3", "a/b",
                                      "3/8x", "1/100000", "", "3//8"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        why.text[0] = '\0';
        ck_assert_msg(shc_part_parse(bad[i], &p, &why) == EINVAL, "%s parsed", bad[i]);
        ck_assert_msg(strstr(why.text, bad[i]) != NULL, "message for %s: %s", bad[i], why.text);
        ck_assert_int_eq(shc_part_parse(bad[i], &p, NULL), EINVAL);
    }
    shc_part_parse("8/8", &p, &why);
    ck_assert_ptr_nonnull(strstr(why.text, "count from 0"));
}
END_TEST

/* A fake environment for shc_part_from_env. */
static const char *g_env[16][2];

static char *fake_getenv(const char *name)
{
    for (size_t i = 0; i < 16 && g_env[i][0]; i++)
        if (strcmp(g_env[i][0], name) == 0)
            return (char *)g_env[i][1];
    return NULL;
}

static void set_env(const char *const *kv)
{
    memset(g_env, 0, sizeof g_env);
    for (size_t i = 0; kv[2 * i]; i++) {
        g_env[i][0] = kv[2 * i];
        g_env[i][1] = kv[2 * i + 1];
    }
}

/* 0 and the part, or the error. */
static int from_env(const char *const *kv, shc_part *p, const char **from)
{
    set_env(kv);
    return shc_part_from_env(fake_getenv, p, from, NULL);
}

START_TEST(auto_from_slurm_arrays)
{
    shc_part p;
    const char *from;
    /* --array=1-8: task 1 is part 0 */
    const char *a[] = {"SLURM_ARRAY_TASK_ID", "1", "SLURM_ARRAY_TASK_MIN", "1",
                       "SLURM_ARRAY_TASK_MAX", "8", "SLURM_ARRAY_TASK_COUNT", "8", NULL};
    ck_assert_int_eq(from_env(a, &p, &from), 0);
    ck_assert_uint_eq(p.index, 0);
    ck_assert_uint_eq(p.count, 8);
    ck_assert_str_eq(from, "SLURM_ARRAY_TASK_*");
    /* --array=0-63, only COUNT */
    const char *b[] = {"SLURM_ARRAY_TASK_ID", "63", "SLURM_ARRAY_TASK_COUNT", "64", NULL};
    ck_assert_int_eq(from_env(b, &p, &from), 0);
    ck_assert_uint_eq(p.index, 63);
    ck_assert_uint_eq(p.count, 64);
    /* only MIN and MAX */
    const char *c[] = {"SLURM_ARRAY_TASK_ID", "12", "SLURM_ARRAY_TASK_MIN", "10",
                       "SLURM_ARRAY_TASK_MAX", "13", NULL};
    ck_assert_int_eq(from_env(c, &p, &from), 0);
    ck_assert_uint_eq(p.index, 2);
    ck_assert_uint_eq(p.count, 4);
    /* --array=0-14:2 (8 tasks) */
    const char *d[] = {"SLURM_ARRAY_TASK_ID", "6", "SLURM_ARRAY_TASK_MIN", "0",
                       "SLURM_ARRAY_TASK_MAX", "14", "SLURM_ARRAY_TASK_STEP", "2",
                       "SLURM_ARRAY_TASK_COUNT", "8", NULL};
    ck_assert_int_eq(from_env(d, &p, &from), 0);
    ck_assert_uint_eq(p.index, 3);
    ck_assert_uint_eq(p.count, 8);
    /* an array that is a list (--array=1,3,7): refused */
    const char *e[] = {"SLURM_ARRAY_TASK_ID", "3", "SLURM_ARRAY_TASK_MIN", "1",
                       "SLURM_ARRAY_TASK_MAX", "7", "SLURM_ARRAY_TASK_COUNT", "3", NULL};
    ck_assert_int_eq(from_env(e, &p, &from), EINVAL);
    /* the array wins over the MPI variables srun also sets */
    const char *f[] = {"SLURM_PROCID", "0", "SLURM_NTASKS", "1", "SLURM_ARRAY_TASK_ID", "2",
                       "SLURM_ARRAY_TASK_COUNT", "4", NULL};
    ck_assert_int_eq(from_env(f, &p, &from), 0);
    ck_assert_uint_eq(p.index, 2);
    ck_assert_uint_eq(p.count, 4);
    const char *g[] = {"SLURM_ARRAY_TASK_ID", "2", NULL};
    ck_assert_int_eq(from_env(g, &p, &from), EINVAL);
    const char *h[] = {"SLURM_ARRAY_TASK_ID", "x", "SLURM_ARRAY_TASK_COUNT", "4", NULL};
    ck_assert_int_eq(from_env(h, &p, &from), EINVAL);
    const char *i[] = {"SLURM_ARRAY_TASK_ID", "9", "SLURM_ARRAY_TASK_MIN", "1",
                       "SLURM_ARRAY_TASK_MAX", "8", NULL};
    ck_assert_int_eq(from_env(i, &p, &from), EINVAL);
}
END_TEST

START_TEST(auto_from_mpi_launchers)
{
    shc_part p;
    const char *from;
    const char *a[] = {"OMPI_COMM_WORLD_RANK", "2", "OMPI_COMM_WORLD_SIZE", "4", NULL};
    ck_assert_int_eq(from_env(a, &p, &from), 0);
    ck_assert_uint_eq(p.index, 2);
    ck_assert_uint_eq(p.count, 4);
    const char *b[] = {"PMI_RANK", "0", "PMI_SIZE", "3", NULL};
    ck_assert_int_eq(from_env(b, &p, &from), 0);
    ck_assert_uint_eq(p.count, 3);
    ck_assert_str_eq(from, "PMI_RANK/PMI_SIZE");
    const char *c[] = {"MV2_COMM_WORLD_RANK", "5", "MV2_COMM_WORLD_SIZE", "6", NULL};
    ck_assert_int_eq(from_env(c, &p, &from), 0);
    ck_assert_uint_eq(p.index, 5);
    const char *d[] = {"SLURM_PROCID", "7", "SLURM_NTASKS", "8", NULL};
    ck_assert_int_eq(from_env(d, &p, &from), 0);
    ck_assert_uint_eq(p.index, 7);
    const char *e[] = {"OMPI_COMM_WORLD_RANK", "4", "OMPI_COMM_WORLD_SIZE", "4", NULL};
    ck_assert_int_eq(from_env(e, &p, &from), EINVAL);
    const char *f[] = {"PMI_RANK", "1", NULL};
    ck_assert_int_eq(from_env(f, &p, &from), EINVAL);
    const char *none[] = {"HOME", "/root", NULL};
    ck_assert_int_eq(from_env(none, &p, &from), ENOENT);
    /* the reason names the variables */
    fmt_msg why = {{0}};
    set_env(e);
    ck_assert_int_eq(shc_part_from_env(fake_getenv, &p, &from, &why), EINVAL);
    ck_assert_ptr_nonnull(strstr(why.text, "OMPI_COMM_WORLD_RANK=4 and OMPI_COMM_WORLD_SIZE=4"));
    set_env(none);
    ck_assert_int_eq(shc_part_from_env(fake_getenv, &p, &from, &why), ENOENT);
    ck_assert_ptr_nonnull(strstr(why.text, "neither a Slurm job array"));
}
END_TEST

START_TEST(names)
{
    char name[SHC_PART_NAME_LEN];
    shc_part p = {3, 8}, q;
    shc_part_name(&p, name);
    ck_assert_str_eq(name, "00003-of-00008");
    ck_assert_int_eq(shc_part_name_parse(name, &q), 0);
    ck_assert_uint_eq(q.index, 3);
    ck_assert_uint_eq(q.count, 8);
    static const char *const bad[] = {"00008-of-00008", "00003-of-00000", "0003-of-00008",
                                      "00003-of-000080", "00003_of_00008", "0000a-of-00008",
                                      "00003-of-00008.tmp", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(shc_part_name_parse(bad[i], &q) == EINVAL, "%s parsed", bad[i]);
}
END_TEST

START_TEST(record_round_trip)
{
    shc_part_record r = {.part = {5, 64}, .inputs = 1281167, .first_input = 100091,
                         .end_input = 120109, .listing_skips = 2, .rejects = 7,
                         .list_hash = 0xfedcba9876543210ull, .fingerprint = 0x0123456789abcdefull,
                         .pixels = 1ull << 40, .sum = {UINT64_MAX, 1, 2},
                         .sumsq = {3, UINT64_MAX - 1, 0}, .quality = 90};
    char *json = NULL, *rest = NULL;
    ck_assert_int_eq(shc_part_record_add("{\"channels\": 3, \"align\": 4096}", &r, &json), 0);
    shc_part_record s;
    ck_assert_int_eq(shc_part_record_get(json, &s, &rest), 0);
    ck_assert_uint_eq(s.part.index, 5);
    ck_assert_uint_eq(s.part.count, 64);
    ck_assert_uint_eq(s.inputs, r.inputs);
    ck_assert_uint_eq(s.first_input, r.first_input);
    ck_assert_uint_eq(s.end_input, r.end_input);
    ck_assert_uint_eq(s.listing_skips, 2);
    ck_assert_uint_eq(s.rejects, 7);
    ck_assert_uint_eq(s.list_hash, r.list_hash);
    ck_assert_uint_eq(s.fingerprint, r.fingerprint);
    ck_assert_uint_eq(s.pixels, r.pixels);
    ck_assert_mem_eq(s.sum, r.sum, sizeof r.sum);
    ck_assert_mem_eq(s.sumsq, r.sumsq, sizeof r.sumsq);
    ck_assert_int_eq(s.quality, 90);
    ck_assert_str_eq(rest, "{\"channels\":3,\"align\":4096}");
    free(rest);
    ck_assert_int_eq(shc_part_record_get("{\"channels\": 3}", &s, NULL), ENOENT);
    ck_assert_int_eq(shc_part_record_get(NULL, &s, NULL), ENOENT);
    /* damaged records are refused, not half read */
    char *bad = strdup(json);
    char *at = strstr(bad, "\"first_input\":100091");
    ck_assert_ptr_nonnull(at);
    memcpy(at, "\"first_input\":999999", strlen("\"first_input\":100091")); /* past the end */
    ck_assert_int_eq(shc_part_record_get(bad, &s, NULL), EINVAL);
    free(bad);
    free(json);
}
END_TEST

START_TEST(stats_from_sums)
{
    /* 4 pixels of one channel: 0, 2, 4, 6: mean 3, std sqrt(5) */
    uint64_t sum[3] = {12, 0, 0}, sumsq[3] = {56, 0, 0};
    double mean[3] = {0}, std[3] = {0};
    shc_channel_stats(sum, sumsq, 4, 1, mean, std);
    ck_assert_double_eq_tol(mean[0], 3.0, 1e-12);
    ck_assert_double_eq_tol(std[0], 2.2360679774997896, 1e-12);
    shc_channel_stats(sum, sumsq, 0, 1, mean, std);
    ck_assert_double_eq(mean[0], 0.0);
    ck_assert_double_eq(std[0], 0.0);
}
END_TEST

/* A driver's stop request (shardc-mpi's, when another rank failed): the build ends before its
 * first input with SHC_EXIT_IO, leaves no manifest, and the part can be resumed to completion. */
/* g_dir/src: 2 classes of per_class images, none broken */
static void make_src(char *src, size_t len, unsigned per_class)
{
    tu_mks_src(src, len, 2, per_class, 0, 0, 0);
}

START_TEST(build_stops_when_asked)
{
    char src[700], out[700], part[800];
    make_src(src, sizeof src, 5);
    snprintf(out, sizeof out, "%s/out", g_dir);
    char *srcs[] = {src};
    shc_build_ctl ctl = {0};
    shc_build_opts o = {.srcs = srcs, .nsrc = 1, .out = out, .backend = &fmt_backend_raw,
                        .threads = 2, .shard_bytes = 1u << 30, .part = {1, 2}, .ctl = &ctl};
    o.r.channels = 3;
    o.r.max_file_bytes = 1u << 30;
    o.r.limits = (fmt_limits){FMT_DEFAULT_MAX_SIDE, FMT_DEFAULT_MAX_PIXELS};
    o.r.geom = (fmt_geom){.mode = FMT_GEOM_SIZE, .width = 16, .height = 12};
    atomic_store(&ctl.stop, 1);
    ck_assert_int_eq(shc_build(&o, NULL), SHC_ESTOPPED);
    snprintf(part, sizeof part, "%s/parts/00001-of-00002/manifest.json", out);
    ck_assert_int_ne(access(part, F_OK), 0);
    ck_assert_uint_eq(atomic_load(&ctl.total), 5);      /* its slice: inputs 5..9 */
    ck_assert_uint_eq(atomic_load(&ctl.done), 0);
    atomic_store(&ctl.stop, 0);
    o.resume = 1;
    ck_assert_int_eq(shc_build(&o, NULL), 0);
    ck_assert_int_eq(access(part, F_OK), 0);
    ck_assert_uint_eq(atomic_load(&ctl.done), 5);
}
END_TEST

/* The crash tests are build options, which programs take from their environment: the library
 * reads none (SHARDC_CRASH_AT set, a build without the option completes); the option kills the
 * build at its point; shc_crash_from_env reads the three variables through the getter given. */
static char *crash_env(const char *name)
{
    static char at[] = "7", after[] = "x", points[] = "2";
    return !strcmp(name, "SHARDC_CRASH_AT") ? at : !strcmp(name, "SHARDC_CRASH_AFTER") ? after
           : !strcmp(name, "SHARDC_CRASH_POINTS") ? points : NULL;
}

static const char *g_part_size;
static char *part_size_stub(const char *name)
{
    return strcmp(name, "SHARDC_UPLOAD_PART_SIZE") == 0 ? (char *)g_part_size : NULL;
}

/* SHARDC_UPLOAD_PART_SIZE through the caller's getter: a size, or refused naming the value */
START_TEST(part_size_from_env)
{
    uint64_t size = 7;
    fmt_msg why = {{0}};
    g_part_size = NULL;
    ck_assert_int_eq(shc_part_size_from_env(part_size_stub, &size, &why), 0);
    ck_assert_uint_eq(size, 0);
    g_part_size = "4000";
    ck_assert_int_eq(shc_part_size_from_env(part_size_stub, &size, &why), 0);
    ck_assert_uint_eq(size, 4000);
    g_part_size = "64MiB";
    ck_assert_int_eq(shc_part_size_from_env(part_size_stub, &size, &why), 0);
    ck_assert_uint_eq(size, 64u << 20);
    g_part_size = "0";
    ck_assert_int_eq(shc_part_size_from_env(part_size_stub, &size, &why), FMT_EINVAL);
    ck_assert_uint_eq(size, 0);
    g_part_size = "lots";
    ck_assert_int_eq(shc_part_size_from_env(part_size_stub, &size, &why), FMT_EINVAL);
    ck_assert_str_eq(why.text, "SHARDC_UPLOAD_PART_SIZE: expected a size, e.g. 64MiB, not 'lots'");
}
END_TEST

START_TEST(crash_is_an_option_not_the_environment)
{
    char src[700], out[700], man[800];
    make_src(src, sizeof src, 3);
    char *srcs[] = {src};
    shc_build_opts o;
    shc_build_opts_init(&o);
    o.srcs = srcs;
    o.nsrc = 1;
    o.r.geom = (fmt_geom){.mode = FMT_GEOM_SIZE, .width = 16, .height = 12};
    setenv("SHARDC_CRASH_AT", "1", 1);
    snprintf(out, sizeof out, "%s/whole", g_dir);
    o.out = out;
    ck_assert_int_eq(shc_build(&o, NULL), 0);
    snprintf(man, sizeof man, "%s/manifest.json", out);
    ck_assert_int_eq(access(man, F_OK), 0);
    unsetenv("SHARDC_CRASH_AT");

    snprintf(out, sizeof out, "%s/killed", g_dir);
    o.crash.at = 1;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(shc_build(&o, NULL) == 0 ? 0 : 1);
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "status %d", st);
    snprintf(man, sizeof man, "%s/manifest.json", out);
    ck_assert_int_ne(access(man, F_OK), 0);

    shc_crash_opts c = {9, 9, 9};
    shc_crash_from_env(crash_env, &c);
    ck_assert_uint_eq(c.at, 7);
    ck_assert_uint_eq(c.after, 0);          /* not a whole number */
    ck_assert_uint_eq(c.report, 2);
}
END_TEST

/* An s3:// merge with no staging folder to be had (no HOME, none given) is refused with a
 * reason, and with a NULL message too (the library reads no environment for it). */
START_TEST(merge_upload_without_staging)
{
    setenv("AWS_ACCESS_KEY_ID", "k", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "s", 1);
    setenv("AWS_REGION", "us-east-1", 1);
    setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9", 1);
    unsetenv("HOME");
    fmt_msg why = {{0}};
    ck_assert_int_eq(shc_merge("s3://bkt/ds", NULL, NULL, &why), FMT_EINVAL);
    ck_assert_msg(strstr(why.text, "no staging folder for s3://bkt/ds") && strstr(why.text, "HOME"),
                  "%s", why.text);
    ck_assert_int_eq(shc_merge("s3://bkt/ds", NULL, NULL, NULL), FMT_EINVAL);
}
END_TEST

/* More parts missing than one message holds: the list ends in "...", never cut mid-name, and
 * the reason still names the first of them. Nothing is written. */
START_TEST(merge_lists_missing_parts_within_the_message)
{
    char out[700], part[800];
    snprintf(out, sizeof out, "%s/out", g_dir);
    ck_assert_int_eq(mkdir(out, 0777), 0);
    snprintf(part, sizeof part, "%s/parts", out);
    ck_assert_int_eq(mkdir(part, 0777), 0);
    snprintf(part, sizeof part, "%s/parts/00000-of-00030", out);
    ck_assert_int_eq(mkdir(part, 0777), 0);
    fmt_msg why;
    memset(&why, 'x', sizeof why);
    ck_assert_int_eq(shc_merge(out, NULL, NULL, &why), SHC_MERGE_EMISSING);
    ck_assert_uint_lt(strlen(why.text), sizeof why.text);
    ck_assert_ptr_nonnull(strstr(why.text, "30 of 30 parts in "));
    ck_assert_ptr_nonnull(strstr(why.text, ": part 00000-of-00030 is unfinished (no manifest"));
    ck_assert_ptr_nonnull(strstr(why.text, "; part 00001-of-00030 is missing;"));
    ck_assert_str_eq(why.text + strlen(why.text) - 14, "is missing ...");
    ck_assert_int_eq(shc_merge(out, NULL, NULL, NULL), SHC_MERGE_EMISSING);
    snprintf(part, sizeof part, "%s/manifest.json", out);
    ck_assert_int_ne(access(part, F_OK), 0);

    /* a folder name longer than the message: shortened to its end, the first part still named */
    char deep[PATH_MAX], name[201];
    memset(name, 'd', 200);
    name[200] = '\0';
    snprintf(deep, sizeof deep, "%s/%s", g_dir, name);
    ck_assert_int_eq(mkdir(deep, 0777), 0);
    snprintf(deep, sizeof deep, "%s/%s/%s", g_dir, name, name);
    ck_assert_int_eq(mkdir(deep, 0777), 0);
    snprintf(deep, sizeof deep, "%s/%s/%s/%s", g_dir, name, name, name);
    ck_assert_int_eq(mkdir(deep, 0777), 0);
    char deep_parts[PATH_MAX + 64];
    snprintf(deep_parts, sizeof deep_parts, "%s/parts", deep);
    ck_assert_int_eq(mkdir(deep_parts, 0777), 0);
    snprintf(deep_parts, sizeof deep_parts, "%s/parts/00000-of-00030", deep);
    ck_assert_int_eq(mkdir(deep_parts, 0777), 0);
    ck_assert_int_eq(shc_merge(deep, NULL, NULL, &why), SHC_MERGE_EMISSING);
    ck_assert_msg(strstr(why.text, "ddd/parts are not ready: part 00000-of-00030 is unfinished")
                  != NULL, "%s", why.text);
    ck_assert_ptr_nonnull(strstr(why.text, "30 of 30 parts in ..."));
}
END_TEST

int main(void)
{
    TCase *tc;
    Suite *s = tu_suite("part", "core", 0, &tc);
    TU_ADD_TESTS(tc, ranges_cover_the_list, parse_i_of_n, auto_from_slurm_arrays,
                 auto_from_mpi_launchers, names, record_round_trip, stats_from_sums);
    tu_temp_fixtures(tc);
    TU_ADD_TESTS(tc, build_stops_when_asked, part_size_from_env,
                 crash_is_an_option_not_the_environment, merge_upload_without_staging,
                 merge_lists_missing_parts_within_the_message);
    return tu_run(s);
}
