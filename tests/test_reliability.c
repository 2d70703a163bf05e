/* test_reliability.c - datasets that change or break under a reader, and names that are bytes.
 *
 *   class names   a class name that is not valid UTF-8 goes through the manifest byte for byte
 *                 (escaped as Python's surrogateescape writes it), and fmt_dataset_probe refuses
 *                 what a reader refuses, naming the file
 *   rewrites      a raw shard changed in place under open readers, in every access mode: an index
 *                 entry pointed 1 TiB away, another shard copied over it, and a seeded trial of
 *                 byte flips, swaps and truncations under 4 readers; never a signal, never a
 *                 changed sample delivered with verify_samples on
 *   tolerant      with on_error skip or substitute a shard that does not open leaves the dataset
 *                 open, its samples skipped or replaced and counted; with fail the open fails
 *
 * The fixture is a real dataset built at run time by the shardc binaries of the same build:
 * 35 RGB samples of 24x20 in 5 raw shards of 7 (equal sizes, so one can be copied over another).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dataset.h"
#include "fmt.h"
#include "le.h"
#include "manifest.h"
#include "raw.h"
#include "shardread.h"
#include "progs.h"
#include "testutil.h"

#define N 35
#define PER_SHARD 7
#define NSHARDS 5
#define W 24
#define H 20
#define LEN ((size_t)W * H * 3)

static char g_fixed[1100];
static uint8_t g_orig[N][LEN];          /* every sample's pixels, read before any damage */
static const fmt_access g_modes[3] = {FMT_ACCESS_MMAP, FMT_ACCESS_PREAD, FMT_ACCESS_DIRECT};
static const char *const g_mode_names[3] = {"mmap", "pread", "direct"};

/* ---- fixtures ---- */

static int build_fixture(void)
{
    if (tu_progs_root() != 0)
        return -1;
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s/shardc-mksample' '%s/src' --classes 3 --per-class 12 "
             "--no-broken --quiet --list '%s/all.txt' && head -n %d '%s/all.txt' > '%s/list.txt'",
             g_bin, g_root, g_root, N, g_root, g_root);
    if (run_quiet(cmd) != 0)
        return -1;
    snprintf(g_fixed, sizeof g_fixed, "%s/fixed", g_root);
    snprintf(cmd, sizeof cmd, "'%s/shardc' build '%s/src' --list '%s/list.txt' -o '%s' "
             "--size %dx%d --shard-samples %d -j 2 --no-progress", g_bin, g_root, g_root,
             g_fixed, W, H, PER_SHARD);
    if (run_quiet(cmd) != 0) {
        fprintf(stderr, "test_reliability: failed: %s\n", cmd);
        return -1;
    }
    fmt_dataset *d;
    fmt_msg msg = {{0}};
    if (fmt_dataset_open_ex(&d, g_fixed, FMT_ACCESS_PREAD, &msg) != 0) {
        fprintf(stderr, "test_reliability: %s\n", msg.text);
        return -1;
    }
    int rc = fmt_dataset_count(d) == N && fmt_dataset_manifest(d)->nshards == NSHARDS ? 0 : -1;
    for (uint64_t i = 0; rc == 0 && i < N; i++)
        rc = fmt_dataset_read(d, i, g_orig[i], NULL);
    fmt_dataset_close(d);
    return rc;
}

/* A fresh copy of the fixture: g_root/name. */
static void copy_fixture(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", g_root, name);
    nftw(out, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s'", g_fixed, out);
    ck_assert_int_eq(run_quiet(cmd), 0);
}

static void shard_path(char *out, size_t n, const char *dir, int k)
{
    snprintf(out, n, "%s/shard-%05d.raw", dir, k);
}

static fmt_raw_header shard_header(const char *path)
{
    fmt_raw_shard *s;
    ck_assert_int_eq(fmt_raw_open_ex(&s, path, FMT_RAW_OPEN_NOMAP, NULL), 0);
    fmt_raw_header h = *fmt_raw_get_header(s);
    fmt_raw_close(s);
    return h;
}

/* Overwrite [off, off + len) of path in place (no truncation, as a program writing into an
 * existing file does). */
static void write_at(const char *path, const void *buf, size_t len, uint64_t off)
{
    int fd = open(path, O_WRONLY);
    ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
    ck_assert_int_eq(pwrite(fd, buf, len, (off_t)off), (ssize_t)len);
    close(fd);
}

static uint8_t *slurp(const char *path, size_t *len)
{
    uint8_t *buf = NULL;
    ck_assert_int_eq(fmt_read_file(path, (size_t)1 << 30, &buf, len), 0);
    return buf;
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static shr_reader *open_reader(const char *dir, int mode, int verify, shr_on_error on_error,
                               uint64_t seed)
{
    shr_options o;
    shr_options_init(&o);
    o.batch_size = 4;
    o.threads = 2;
    o.order = seed ? SHR_ORDER_RANDOM : SHR_ORDER_SEQUENTIAL;
    o.seed = seed;
    o.access = (shr_access)g_modes[mode];
    o.verify_samples = verify;
    o.on_error = on_error;
    shr_reader *r = NULL;
    int rc = shr_open(&r, dir, &o, tu_fresh());
    ck_assert_msg(rc == 0, "%s: shr_open: %s", g_mode_names[mode], tu_msg.text);
    return r;
}

/* One epoch of r: every sample delivered must be the original pixels of the index it carries.
 * Returns how many were delivered; *failed gets shr_next's error (0: the epoch ended). */
static uint64_t drain_epoch(shr_reader *r, const char *what, int *failed)
{
    uint64_t delivered = 0;
    *failed = 0;
    for (;;) {
        const shr_batch *b;
        int rc = shr_next(r, &b);
        if (rc == SHR_EEND)
            break;
        if (rc) {
            *failed = rc;
            break;
        }
        for (uint32_t i = 0; i < b->n; i++) {
            int64_t idx = b->indices[i];
            ck_assert(idx >= 0 && idx < N);
            ck_assert_msg(memcmp((const uint8_t *)b->data + (size_t)i * LEN, g_orig[idx], LEN) == 0,
                          "%s: sample %lld delivered with pixels that are not its own", what,
                          (long long)idx);
        }
        delivered += b->n;
        shr_release(r, b);
    }
    return delivered;
}

/* ---- class names ---- */

START_TEST(test_class_name_bytes)
{
    fmt_manifest m = {0};
    char *names[] = {"a", "b\xff", "caf\xc3\xa9", "\xe9t\xe9", "x\\udcff", "q\"\\\x01"};
    m.backend = "raw";
    m.backend_version = 2;
    m.tool = "shardc test";
    m.nclasses = sizeof names / sizeof *names;
    m.classes = names;
    m.channels = 3;
    char *json = NULL;
    ck_assert_int_eq(fmt_manifest_dump(&m, &json), 0);
    /* what Python's json.load and os.fsencode give back the bytes from */
    ck_assert_ptr_nonnull(strstr(json, "\"b\\udcff\""));
    ck_assert_ptr_nonnull(strstr(json, "\"\\udce9t\\udce9\""));
    ck_assert_ptr_nonnull(strstr(json, "\"caf\xc3\xa9\""));
    ck_assert_ptr_nonnull(strstr(json, "\"x\\\\udcff\""));
    fmt_manifest back;
    fmt_msg msg = {{0}};
    int rc = fmt_manifest_parse(json, strlen(json), &back, &msg);
    ck_assert_msg(rc == 0, "%s", msg.text);
    ck_assert_uint_eq(back.nclasses, m.nclasses);
    for (size_t i = 0; i < m.nclasses; i++)
        ck_assert_str_eq(back.classes[i], names[i]);
    fmt_manifest_free(&back);
    free(json);

    /* an escaped surrogate pair is a character, not two bytes; a NUL is no class name */
    const char *pair = "\"\\ud83d\\ude00\"";
    const char *nul = "\"a\\u0000ff\"";
    for (int k = 0; k < 2; k++) {
        char doc[1024];
        snprintf(doc, sizeof doc, "{\"format\": \"shardc\", \"manifest_version\": %d, "
                 "\"classes\": [%s]}", FMT_MANIFEST_VERSION, k ? nul : pair);
        memset(&back, 0, sizeof back);
        rc = fmt_manifest_parse(doc, strlen(doc), &back, &msg);
        ck_assert_int_eq(rc, FMT_ECORRUPT);     /* the rest of the manifest is missing */
        if (k == 1)
            ck_assert_msg(strstr(msg.text, "backend") || strstr(msg.text, "NUL"), "%s", msg.text);
        fmt_manifest_free(&back);
    }
}
END_TEST

/* A build whose class folder is not valid UTF-8: the dataset opens, with the name's bytes. */
START_TEST(test_build_odd_class_name)
{
    char src[1200], out[1200], cmd[8192];
    snprintf(src, sizeof src, "%s/odd-src", g_root);
    snprintf(out, sizeof out, "%s/odd-out", g_root);
    snprintf(cmd, sizeof cmd, "'%s/shardc-mksample' '%s' --classes 3 --per-class 2 --no-broken "
             "--quiet && mv '%s/square' '%s/b\xff'", g_bin, src, src, src);
    ck_assert_int_eq(run_quiet(cmd), 0);
    snprintf(cmd, sizeof cmd, "'%s/shardc' build '%s' -o '%s' --size 16x16 --no-progress", g_bin,
             src, out);
    ck_assert_int_eq(run_quiet(cmd), 0);
    for (int mode = 0; mode < 3; mode++) {
        fmt_dataset *d;
        fmt_msg msg = {{0}};
        int rc = fmt_dataset_open_ex(&d, out, g_modes[mode], &msg);
        ck_assert_msg(rc == 0, "%s: %s", g_mode_names[mode], msg.text);
        const fmt_manifest *m = fmt_dataset_manifest(d);
        ck_assert_uint_eq(m->nclasses, 3);
        ck_assert_str_eq(m->classes[0], "b\xff");
        for (uint64_t i = 0; i < fmt_dataset_count(d); i++)
            ck_assert_int_eq(fmt_dataset_check(d, i), 0);
        fmt_dataset_close(d);
    }
    snprintf(cmd, sizeof cmd, "'%s/shardc' verify '%s'", g_bin, out);
    ck_assert_int_eq(run_quiet(cmd), 0);
}
END_TEST

/* fmt_dataset_probe (what build and merge run on what they wrote) refuses what a reader
 * refuses, and names the file. */
START_TEST(test_probe)
{
    char dir[1200], path[1300];
    copy_fixture(dir, sizeof dir, "probe");
    fmt_msg msg = {{0}};
    ck_assert_int_eq(fmt_dataset_probe(dir, &msg), 0);
    shard_path(path, sizeof path, dir, 2);
    ck_assert_int_eq(truncate(path, 1000), 0);
    ck_assert_int_ne(fmt_dataset_probe(dir, &msg), 0);
    ck_assert_msg(strstr(msg.text, "shard-00002.raw") != NULL, "%s", msg.text);
}
END_TEST

/* ---- shards rewritten under open readers ---- */

/* Entry 0 of shard 1 set to 1 TiB in place: readers opened before it read what was there. */
START_TEST(test_index_rewritten)
{
    int mode = _i;
    char dir[1200], path[1300];
    copy_fixture(dir, sizeof dir, "index");
    fmt_dataset *d;
    ck_assert_int_eq(fmt_dataset_open_ex(&d, dir, g_modes[mode], NULL), 0);
    shr_reader *r[2] = {open_reader(dir, mode, 0, SHR_ON_ERROR_FAIL, 0),
                        open_reader(dir, mode, 1, SHR_ON_ERROR_FAIL, 0)};
    shard_path(path, sizeof path, dir, 1);
    fmt_raw_header h = shard_header(path);
    uint8_t far[8];
    fmt_le_put64(far, (uint64_t)1 << 40);
    for (uint32_t e = 0; e < PER_SHARD; e++)
        write_at(path, far, 8, h.index_offset + (uint64_t)e * FMT_RAW_ENTRY_SIZE);
    uint8_t buf[LEN];
    for (uint64_t i = 0; i < N; i++) {
        ck_assert_int_eq(fmt_dataset_read(d, i, buf, NULL), 0);
        ck_assert_int_eq(memcmp(buf, g_orig[i], LEN), 0);
        ck_assert_int_eq(fmt_dataset_check(d, i), 0);
    }
    for (int k = 0; k < 2; k++) {
        int failed;
        ck_assert_uint_eq(drain_epoch(r[k], g_mode_names[mode], &failed), N);
        ck_assert_int_eq(failed, 0);
        shr_close(r[k]);
    }
    fmt_dataset_close(d);
}
END_TEST

/* Shard 2 copied over shard 1 in place: with verification every sample of shard 1 is reported
 * (its pixels changed, its hashes did not), in every mode; nothing wrong is delivered. */
START_TEST(test_shard_overwritten)
{
    int mode = _i;
    char dir[1200], p1[1300], p2[1300];
    copy_fixture(dir, sizeof dir, "over");
    fmt_dataset *d;
    ck_assert_int_eq(fmt_dataset_open_ex(&d, dir, g_modes[mode], NULL), 0);
    shr_reader *r = open_reader(dir, mode, 1, SHR_ON_ERROR_SKIP, 0);
    shard_path(p1, sizeof p1, dir, 1);
    shard_path(p2, sizeof p2, dir, 2);
    size_t len1 = 0, len2;
    free(slurp(p1, &len1));
    uint8_t *other = slurp(p2, &len2);
    ck_assert_uint_eq(len1, len2);
    write_at(p1, other, len2, 0);
    free(other);
    uint8_t buf[LEN];
    for (uint64_t i = 0; i < N; i++) {
        fmt_sample meta;
        int rc = fmt_dataset_read(d, i, buf, &meta);
        int changed = i >= PER_SHARD && i < 2 * PER_SHARD;
        if (!changed) {
            ck_assert_int_eq(rc, 0);
            ck_assert_int_eq(memcmp(buf, g_orig[i], LEN), 0);
            continue;
        }
        /* what verify_samples does: the pixels read against the hash the reader holds */
        ck_assert_msg(rc != 0 || fmt_hash64(buf, LEN) != meta.hash,
                      "%s: sample %llu of the overwritten shard passes verification",
                      g_mode_names[mode], (unsigned long long)i);
        ck_assert_int_ne(fmt_dataset_check(d, i), 0);
    }
    int failed;
    uint64_t got = drain_epoch(r, g_mode_names[mode], &failed);
    ck_assert_int_eq(failed, 0);
    shr_recovery rec = shr_get_recovery(r);
    ck_assert_uint_eq(got + rec.skipped, N);
    shr_close(r);
    fmt_dataset_close(d);
}
END_TEST

/* The seeded trial: bytes flipped in payloads, in an index and header, two shards swapped in
 * place, one truncated, under 4 readers per access mode opened before. No signal, no changed
 * sample delivered (verify_samples, on_error skip), every sample delivered or counted. In mmap
 * mode the truncation is a zeroed tail: truncating a mapped file raises SIGBUS (documented). */
START_TEST(test_seeded_trial)
{
    int mode = _i;
    uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)(mode + 1);
    for (int round = 0; round < 3; round++) {
        char dir[1200], name[64], path[1300];
        snprintf(name, sizeof name, "trial-%d-%d", mode, round);
        copy_fixture(dir, sizeof dir, name);
        shr_reader *r[4];
        for (int k = 0; k < 4; k++)
            r[k] = open_reader(dir, mode, 1, SHR_ON_ERROR_SKIP, k ? rng_next(&seed) | 1 : 0);
        /* a random role per shard: 0 flip payload bytes, 1 flip index and header bytes,
         * 2 and 3 swapped, 4 truncated */
        int role[NSHARDS] = {0, 1, 2, 3, 4};
        for (int k = NSHARDS - 1; k > 0; k--) {
            int j = (int)(rng_next(&seed) % (uint64_t)(k + 1)), t = role[k];
            role[k] = role[j];
            role[j] = t;
        }
        int swap_a = -1, swap_b = -1;
        for (int s = 0; s < NSHARDS; s++) {
            shard_path(path, sizeof path, dir, s);
            fmt_raw_header h = shard_header(path);
            if (role[s] == 0) {
                for (int f = 0; f < 6; f++) {
                    uint8_t b = (uint8_t)(rng_next(&seed) | 1);
                    uint64_t off = h.data_offset + rng_next(&seed) % (h.index_offset -
                                                                       h.data_offset);
                    int fd = open(path, O_RDWR);
                    uint8_t cur;
                    ck_assert_int_eq(pread(fd, &cur, 1, (off_t)off), 1);
                    cur ^= b;
                    ck_assert_int_eq(pwrite(fd, &cur, 1, (off_t)off), 1);
                    close(fd);
                }
            } else if (role[s] == 1) {
                for (int f = 0; f < 6; f++) {
                    uint8_t b = (uint8_t)(rng_next(&seed) | 1);
                    uint64_t off = f == 0 ? rng_next(&seed) % FMT_RAW_HEADER_SIZE
                                          : h.index_offset + rng_next(&seed) %
                                                (h.file_size - h.index_offset);
                    write_at(path, &b, 1, off);
                }
            } else if (role[s] == 2) {
                swap_a = s;
            } else if (role[s] == 3) {
                swap_b = s;
            } else {
                uint64_t keep = FMT_RAW_HEADER_SIZE + rng_next(&seed) % (h.file_size -
                                                                         FMT_RAW_HEADER_SIZE);
                if (g_modes[mode] == FMT_ACCESS_MMAP) {
                    size_t n = (size_t)(h.file_size - keep);
                    uint8_t *zero = calloc(1, n);
                    write_at(path, zero, n, keep);
                    free(zero);
                } else {
                    ck_assert_int_eq(truncate(path, (off_t)keep), 0);
                }
            }
        }
        char pa[1300], pb[1300];
        size_t la, lb;
        shard_path(pa, sizeof pa, dir, swap_a);
        shard_path(pb, sizeof pb, dir, swap_b);
        uint8_t *a = slurp(pa, &la), *b = slurp(pb, &lb);
        ck_assert_uint_eq(la, lb);
        write_at(pa, b, lb, 0);
        write_at(pb, a, la, 0);
        free(a);
        free(b);
        for (int k = 0; k < 4; k++) {
            char what[128];
            snprintf(what, sizeof what, "%s round %d reader %d", g_mode_names[mode], round, k);
            int failed;
            uint64_t got = drain_epoch(r[k], what, &failed);
            ck_assert_msg(failed == 0, "%s: %s", what, shr_last_error(r[k]));
            shr_recovery rec = shr_get_recovery(r[k]);
            ck_assert_uint_eq(got + rec.skipped, N);
            shr_close(r[k]);
        }
    }
}
END_TEST

/* ---- shards that do not open, with on_error ---- */

START_TEST(test_tolerant_open)
{
    int mode = _i;
    char dir[1200], p1[1300], p3[1300];
    copy_fixture(dir, sizeof dir, "tolerant");
    shard_path(p1, sizeof p1, dir, 1);
    shard_path(p3, sizeof p3, dir, 3);
    ck_assert_int_eq(truncate(p1, 3000), 0);
    ck_assert_int_eq(unlink(p3), 0);

    shr_options o;
    shr_options_init(&o);
    o.batch_size = 4;
    o.threads = 2;
    o.access = (shr_access)g_modes[mode];
    shr_reader *r = NULL;
    ck_assert_int_ne(shr_open(&r, dir, &o, tu_fresh()), 0);
    ck_assert_msg(strstr(tu_msg.text, "shard-00001.raw"), "%s", tu_msg.text);

    for (int sub = 0; sub < 2; sub++) {
        r = open_reader(dir, mode, 1, sub ? SHR_ON_ERROR_SUBSTITUTE : SHR_ON_ERROR_SKIP, 0);
        /* each shard that did not open named once, with why */
        const char *e = shr_last_error(r), *p = strstr(e, "shard-00001.raw");
        ck_assert_msg(p && !strstr(p + 1, "shard-00001.raw"), "%s", e);
        p = strstr(e, "shard-00003.raw");
        ck_assert_msg(p && !strstr(p + 1, "shard-00003.raw"), "%s", e);
        int failed;
        uint64_t got = drain_epoch(r, g_mode_names[mode], &failed);
        ck_assert_msg(failed == 0, "%s", shr_last_error(r));
        shr_recovery rec = shr_get_recovery(r);
        if (sub) {
            ck_assert_uint_eq(got, N);
            ck_assert_uint_eq(rec.replaced, 2 * PER_SHARD);
            ck_assert_uint_eq(rec.skipped, 0);
        } else {
            ck_assert_uint_eq(got, N - 2 * PER_SHARD);
            ck_assert_uint_eq(rec.skipped, 2 * PER_SHARD);
            ck_assert_uint_eq(rec.replaced, 0);
        }
        ck_assert_msg(strstr(shr_last_error(r), "did not open"), "%s", shr_last_error(r));
        shr_close(r);
    }

    /* the dataset layer: the samples of the closed shards say why; the others read */
    fmt_dataset *d;
    ck_assert_int_eq(fmt_dataset_open_flags(&d, dir, g_modes[mode], FMT_OPEN_TOLERANT, NULL), 0);
    ck_assert_uint_eq(fmt_dataset_unavailable(d), 2);
    uint8_t buf[LEN];
    for (uint64_t i = 0; i < N; i++) {
        int closed = (i / PER_SHARD) == 1 || (i / PER_SHARD) == 3;
        int rc = fmt_dataset_read(d, i, buf, NULL);
        ck_assert_int_eq(rc != 0, closed);
        ck_assert_int_eq(fmt_dataset_sample_error(d, i) != NULL, closed);
    }
    fmt_dataset_close(d);

    /* no shard at all: refused, even when tolerant */
    for (int s = 0; s < NSHARDS; s++) {
        char p[1300];
        shard_path(p, sizeof p, dir, s);
        unlink(p);
    }
    fmt_msg msg = {{0}};
    ck_assert_int_ne(fmt_dataset_open_flags(&d, dir, g_modes[mode], FMT_OPEN_TOLERANT, &msg), 0);
    ck_assert_msg(strstr(msg.text, "no shard"), "%s", msg.text);
}
END_TEST

static Suite *reliability_suite(void)
{
    TCase *tc;
    Suite *s = tu_suite("reliability", "reliability", 60, &tc);
    TU_ADD_TESTS(tc, test_class_name_bytes, test_build_odd_class_name, test_probe);
    TU_ADD_LOOP_TESTS(tc, 0, 3, test_index_rewritten, test_shard_overwritten, test_seeded_trial,
                      test_tolerant_open);
    return s;
}

int main(void)
{
    int rc = build_fixture();
    int failed = 1;
    if (rc == 0) {
        failed = tu_run(reliability_suite()) != EXIT_SUCCESS;
    } else {
        fprintf(stderr, "test_reliability: cannot build the fixture dataset\n");
    }
    tu_root_teardown();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
