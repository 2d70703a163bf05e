/* testutil.h - fixtures and helpers shared by the unit tests (tests/test_*.c).
 *
 * The Makefile links each test program from its one .c file, so this is header-only: everything is
 * static and marked unused, and a test includes the header and uses what it needs. A helper that
 * cannot do its job fails the running test with a check assertion (which ends the forked child).
 *
 * The temp tree: tu_root_setup / tu_root_teardown, an unchecked fixture, run once in the runner
 * process; they make g_root = $TMPDIR/<program name>.XXXXXX (TMPDIR defaults to /tmp) and remove it
 * with everything under it at the end, even when a test failed in its forked child. tu_dir_setup,
 * a checked fixture, gives each test a fresh, empty g_dir inside g_root. tu_temp_fixtures adds both
 * to a TCase. A suite whose fixtures are built once, before the tests fork (datasets made with
 * the build's programs, tests/progs.h), calls tu_root_setup and tu_root_teardown from main and
 * builds them in g_root. */
#ifndef TESTUTIL_H
#define TESTUTIL_H

#include "backend.h"
#include "le.h"
#include "tuskip.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TU_UNUSED __attribute__((unused))

/* ---- the temp tree ---- */

/* Sizes that leave room for the names tests put below g_dir in their path buffers. */
static TU_UNUSED char g_root[512], g_dir[600];

static TU_UNUSED int tu_remove_entry(const char *path, const struct stat *st, int flag,
                                     struct FTW *ftw)
{
    return remove(path);
}

/* Remove path and everything under it, without following links; what cannot go stays. */
static TU_UNUSED void tu_rm_rf(const char *path)
{
    nftw(path, tu_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* An empty g_root means it could not be made: tu_dir_setup then fails each test, which says so. */
static TU_UNUSED void tu_root_setup(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(g_root, sizeof g_root, "%s/%s.XXXXXX", base && *base ? base : "/tmp",
             program_invocation_short_name);
    if (!mkdtemp(g_root))
        g_root[0] = '\0';
}

static TU_UNUSED void tu_root_teardown(void)
{
    if (g_root[0])
        tu_rm_rf(g_root);
}

static TU_UNUSED void tu_dir_setup(void)
{
    static unsigned seq;
    ck_assert_msg(g_root[0] != '\0', "cannot create a temp dir");
    snprintf(g_dir, sizeof g_dir, "%s/t%u.XXXXXX", g_root, seq++);
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
}

/* g_root for the whole run of tc, a fresh g_dir for each of its tests. */
static TU_UNUSED void tu_temp_fixtures(TCase *tc)
{
    tcase_add_unchecked_fixture(tc, tu_root_setup, tu_root_teardown);
    tcase_add_checked_fixture(tc, tu_dir_setup, NULL);
}

/* tu_suite (tuskip.h) on the temp tree: tu_temp_fixtures on its case. */
static TU_UNUSED Suite *tu_temp_suite(const char *name, const char *tcname, double timeout,
                                      TCase **tc)
{
    Suite *s = tu_suite(name, tcname, timeout, tc);
    tu_temp_fixtures(*tc);
    return s;
}

/* TU_SUITE on the temp tree. */
#define TU_TEMP_SUITE(name, tcname, timeout, ...)                                                 \
    tu_temp_suite_of((name), (tcname), (timeout), (const TTest *const[]){__VA_ARGS__, NULL})

static TU_UNUSED Suite *tu_temp_suite_of(const char *name, const char *tcname, double timeout,
                                         const TTest *const *t)
{
    TCase *tc;
    Suite *s = tu_temp_suite(name, tcname, timeout, &tc);
    tu_add_tests(tc, t);
    return s;
}

/* out = g_dir/name. */
static TU_UNUSED void tu_path(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", g_dir, name);
}

/* ---- files ---- */

/* Whether path names anything (a dangling link included). */
static TU_UNUSED int tu_exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* Whether path is a directory (links followed). */
static TU_UNUSED int tu_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Whether path is a regular file (links followed). */
static TU_UNUSED int tu_is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Size of path in bytes; stat must succeed. */
static TU_UNUSED uint64_t tu_file_size(const char *path)
{
    struct stat st;
    ck_assert_msg(stat(path, &st) == 0, "stat %s: %s", path, strerror(errno));
    return (uint64_t)st.st_size;
}

/* How many names dir holds, . and .. not counted; *only_match (if not NULL): whether `only` (if
 * not NULL) is one of them. */
static TU_UNUSED size_t tu_dir_entries(const char *dir, const char *only, int *only_match)
{
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "opendir %s: %s", dir, strerror(errno));
    size_t n = 0;
    int match = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        n++;
        if (only && strcmp(e->d_name, only) == 0)
            match = 1;
    }
    closedir(d);
    if (only_match)
        *only_match = match;
    return n;
}

/* The whole file, malloc'd (up to 1 GiB). */
static TU_UNUSED uint8_t *tu_slurp(const char *path, size_t *len)
{
    uint8_t *buf = NULL;
    int rc = fmt_read_file(path, (size_t)1 << 30, &buf, len);
    ck_assert_msg(rc == 0, "read %s: %s", path, fmt_strerror(rc));
    return buf;
}

/* The files a and b hold the same bytes. */
static TU_UNUSED void tu_assert_same_file(const char *a, const char *b)
{
    size_t la, lb;
    uint8_t *da = tu_slurp(a, &la), *db = tu_slurp(b, &lb);
    ck_assert_uint_eq(la, lb);
    ck_assert_mem_eq(da, db, la);
    free(da);
    free(db);
}

/* Create or truncate path and write len bytes to it. */
static TU_UNUSED void tu_spit(const char *path, const void *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_msg(fd >= 0, "cannot create %s: %s", path, strerror(errno));
    ck_assert_int_eq(write(fd, buf, len), (ssize_t)len);
    ck_assert_int_eq(close(fd), 0);
}

/* XOR the byte at off in the file with mask (the same call again restores it). */
static TU_UNUSED void tu_flip_byte(const char *path, uint64_t off, uint8_t mask)
{
    int fd = open(path, O_RDWR);
    ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
    uint8_t b;
    ck_assert_int_eq(pread(fd, &b, 1, (off_t)off), 1);
    b ^= mask;
    ck_assert_int_eq(pwrite(fd, &b, 1, (off_t)off), 1);
    close(fd);
}

/* ---- memory and descriptors ---- */

/* The process's resident anonymous memory (RssAnon of /proc/self/status), in bytes: heap and
 * private mappings, not the page cache behind mapped files. */
static TU_UNUSED size_t tu_rss_anon(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "RssAnon: %zu kB", &kb) == 1)
            break;
    fclose(f);
    return kb * 1024;
}

/* The process's open descriptors: the entries of /proc/self/fd (the listing's own descriptor,
 * ".." and "." included, so compare counts, not absolute values). */
static TU_UNUSED unsigned tu_open_fds(void)
{
    unsigned n = 0;
    DIR *d = opendir("/proc/self/fd");
    ck_assert_ptr_nonnull(d);
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* ---- other programs ---- */

/* Whether the shell command succeeds (its output discarded): "h5dump --version". */
static TU_UNUSED int tu_have_tool(const char *cmd)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s >/dev/null 2>&1", cmd);
    return system(buf) == 0;
}

/* Run a shell command and return its whole stdout, malloc'd, with a NUL after the *len bytes (so
 * text output is a string); *status gets the status pclose returns. */
static TU_UNUSED uint8_t *tu_run_capture(const char *cmd, size_t *len, int *status)
{
    FILE *p = popen(cmd, "r");
    ck_assert_msg(p != NULL, "cannot run %s", cmd);
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    size_t r;
    while ((r = fread(buf + n, 1, cap - 1 - n, p)) > 0) {
        n += r;
        if (n == cap - 1) {
            cap *= 2;
            buf = realloc(buf, cap);
            ck_assert_ptr_nonnull(buf);
        }
    }
    buf[n] = '\0';
    *status = pclose(p);
    *len = n;
    return buf;
}

/* ---- deterministic fixtures ---- */

/* xorshift64* on the state at s (not 0): the same numbers on every run and host. */
static TU_UNUSED uint64_t tu_xorshift(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

/* tu_xorshift for the fixtures: a test seeds tu_rng_state (not 0). */
static TU_UNUSED uint64_t tu_rng_state;

static TU_UNUSED uint64_t tu_rng(void)
{
    return tu_xorshift(&tu_rng_state);
}

/* A sample for the backend tests: h x w x c pixels (HWC) and an optional aux record. */
typedef struct {
    uint32_t h, w, c;
    int32_t label;
    uint64_t source;
    uint8_t *px;
    uint8_t *aux;
    uint32_t aux_len;
} tu_sample;

/* n zeroed samples (room for one when n is 0, so the pointer can be freed alike). */
static TU_UNUSED tu_sample *tu_samples_new(size_t n)
{
    tu_sample *s = calloc(n ? n : 1, sizeof *s);
    ck_assert_ptr_nonnull(s);
    return s;
}

static TU_UNUSED void tu_samples_free(tu_sample *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(s[i].px);
        free(s[i].aux);
    }
    free(s);
}

static TU_UNUSED uint64_t tu_sample_len(const tu_sample *s)
{
    return (uint64_t)s->h * s->w * s->c;
}

/* A random shape from tu_rng: sides 1..max_side, 1 or 3 channels. */
static TU_UNUSED void tu_sample_random_shape(tu_sample *s, uint32_t max_side)
{
    s->h = 1 + (uint32_t)(tu_rng() % max_side);
    s->w = 1 + (uint32_t)(tu_rng() % max_side);
    s->c = (tu_rng() & 1) ? 3 : 1;
}

/* (Re)allocate s->px for the shape s holds and fill it with tu_rng bytes. */
static TU_UNUSED void tu_sample_random_pixels(tu_sample *s)
{
    size_t len = (size_t)tu_sample_len(s);
    free(s->px);
    s->px = malloc(len ? len : 1);
    ck_assert_ptr_nonnull(s->px);
    for (size_t k = 0; k < len; k++)
        s->px[k] = (uint8_t)tu_rng();
}

/* Sample i of a random set, for the shape s holds: a label in 0..999 (none, -1, for every fourth
 * sample), a source index and the pixels, all from tu_rng. */
static TU_UNUSED void tu_sample_random(tu_sample *s, size_t i)
{
    s->label = (i % 4 == 3) ? -1 : (int32_t)(tu_rng() % 1000);
    s->source = tu_rng();
    tu_sample_random_pixels(s);
}

/* Give s an aux record of len tu_rng bytes. */
static TU_UNUSED void tu_sample_random_aux(tu_sample *s, uint32_t len)
{
    s->aux_len = len;
    s->aux = malloc(len);
    ck_assert_ptr_nonnull(s->aux);
    for (uint32_t k = 0; k < len; k++)
        s->aux[k] = (uint8_t)tu_rng();
}

/* The kinds of sample set the format suites write: all gray 17x13, all RGB of one size, 8x8 gray
 * with one RGB (sample 2), random shapes (tu_sample_random_shape), all RGB 224x224. */
enum { TU_SHAPES_FIXED_GRAY, TU_SHAPES_FIXED_RGB, TU_SHAPES_MIXED, TU_SHAPES_SAME_HW,
       TU_SHAPES_IMAGENET };

/* Give sample i of a set of kind `shapes` its shape: rgb_h x rgb_w for TU_SHAPES_FIXED_RGB,
 * sides up to max_side for TU_SHAPES_MIXED. */
static TU_UNUSED void tu_sample_shape(tu_sample *s, size_t i, int shapes, uint32_t rgb_h,
                                      uint32_t rgb_w, uint32_t max_side)
{
    if (shapes == TU_SHAPES_FIXED_GRAY) {
        s->h = 17, s->w = 13, s->c = 1;
    } else if (shapes == TU_SHAPES_FIXED_RGB) {
        s->h = rgb_h, s->w = rgb_w, s->c = 3;
    } else if (shapes == TU_SHAPES_SAME_HW) {
        s->h = 8, s->w = 8, s->c = i == 2 ? 3 : 1;  /* one RGB among gray */
    } else if (shapes == TU_SHAPES_IMAGENET) {
        s->h = 224, s->w = 224, s->c = 3;
    } else {
        tu_sample_random_shape(s, max_side);
    }
}

#define TU_AUX_VARIED UINT32_MAX /* aux of 1..70 bytes, on all samples but every third from 1 */

/* n random samples (tu_sample_random) shaped by tu_sample_shape, with aux records of aux bytes
 * each (none for 0) or TU_AUX_VARIED. */
static TU_UNUSED tu_sample *tu_samples_make(size_t n, int shapes, uint32_t rgb_h, uint32_t rgb_w,
                                            uint32_t max_side, uint32_t aux)
{
    tu_sample *s = tu_samples_new(n);
    for (size_t i = 0; i < n; i++) {
        tu_sample_shape(&s[i], i, shapes, rgb_h, rgb_w, max_side);
        tu_sample_random(&s[i], i);
        if (aux == TU_AUX_VARIED && i % 3 != 1)
            tu_sample_random_aux(&s[i], 1 + (uint32_t)(tu_rng() % 70));
        else if (aux && aux != TU_AUX_VARIED)
            tu_sample_random_aux(&s[i], aux);
    }
    return s;
}

/* What a writer's w_add takes for s: shape, label, source, hash, sums and aux (m->aux points
 * into s). */
static TU_UNUSED void tu_sample_meta(const tu_sample *s, fmt_sample_meta *m)
{
    memset(m, 0, sizeof *m);
    m->height = s->h;
    m->width = s->w;
    m->channels = s->c;
    m->label = s->label;
    m->source = s->source;
    m->hash = fmt_hash64(s->px, tu_sample_len(s));
    fmt_pixel_sums(s->px, (size_t)s->h * s->w, s->c, m->sum, m->sumsq);
    m->aux = s->aux;
    m->aux_len = s->aux_len;
}

/* Add samples s[from..to) to writer w; each add must succeed. */
static TU_UNUSED void tu_add_samples(const fmt_backend *be, void *w, const tu_sample *s,
                                     size_t from, size_t to)
{
    for (size_t i = from; i < to; i++) {
        fmt_sample_meta m;
        tu_sample_meta(&s[i], &m);
        ck_assert_int_eq(be->w_add(w, &m, s[i].px, NULL), 0);
    }
}

/* r_get of sample i of shard sh must succeed (into *smp) and give what s holds: index i, label,
 * shape, source and length. */
static TU_UNUSED void tu_get_sample(const fmt_backend *be, void *sh, uint64_t i, const tu_sample *s,
                                    fmt_sample *smp)
{
    ck_assert_int_eq(be->r_get(sh, i, smp), 0);
    ck_assert_uint_eq(smp->index, i);
    ck_assert_int_eq(smp->label, s->label);
    ck_assert_uint_eq(smp->height, s->h);
    ck_assert_uint_eq(smp->width, s->w);
    ck_assert_uint_eq(smp->channels, s->c);
    ck_assert_uint_eq(smp->source, s->source);
    ck_assert_uint_eq(smp->length, tu_sample_len(s));
}

/* A shard's skeleton (sk: r_open_parts, a shard before its file arrives) against the file's open
 * (sh) and the fixture's n samples: the same account, every sample's metadata, hash and aux
 * record, no pixels; reading or checking pixels refused. */
static TU_UNUSED void tu_skeleton_matches(const fmt_backend *be, void *sk, void *sh,
                                          const tu_sample *s, uint64_t n)
{
    const fmt_shard_info *a = be->r_info(sk), *b = be->r_info(sh);
    ck_assert_uint_eq(a->samples, n);
    ck_assert_uint_eq(a->samples, b->samples);
    ck_assert_uint_eq(a->first_index, b->first_index);
    ck_assert_uint_eq(a->hash, b->hash);
    ck_assert_uint_eq(a->bytes, b->bytes);
    ck_assert_uint_eq(a->fingerprint, b->fingerprint);
    ck_assert_uint_eq(a->input_end, b->input_end);
    for (uint64_t i = 0; i < n; i++) {
        fmt_sample x, y;
        tu_get_sample(be, sk, i, &s[i], &x);
        tu_get_sample(be, sh, i, &s[i], &y);
        ck_assert_uint_eq(x.hash, y.hash);
        ck_assert_uint_eq(x.aux_len, s[i].aux_len);
        ck_assert(x.aux_len == 0 || memcmp(x.aux, s[i].aux, x.aux_len) == 0);
        ck_assert_ptr_null(x.pixels);
    }
    uint8_t *px = malloc(n ? tu_sample_len(&s[0]) : 1);
    ck_assert_ptr_nonnull(px);
    ck_assert_int_eq(be->r_read(sk, 0, px, NULL, 0), FMT_EUNSUPPORTED);
    ck_assert_int_eq(be->r_check(sk, 0), FMT_EUNSUPPORTED);
    free(px);
}

/* ---- the runner ---- */

/* Run every test of s (each in a forked child unless CK_FORK=no); EXIT_SUCCESS when none failed,
 * for main to return. */
static TU_UNUSED int tu_run(Suite *s)
{
    return tu_run_suite(s);
}

/* ck_assert_msg for a check in a hot loop (a byte or element at a time): the same failure, but
 * a pass costs nothing. check records a checkpoint for every passing assertion, in fork mode a
 * write to its pipe, so a comparison of millions of values spends its time there, most of all
 * under the sanitizers. */
#define tu_check(expr, ...)                                                                        \
    do {                                                                                           \
        if (!(expr))                                                                               \
            ck_abort_msg(__VA_ARGS__);                                                             \
    } while (0)

#ifdef SHARDREAD_H
/* ---- the reader (shardread.h included before this header) ---- */

/* The message of the last failed library call a test made: the caller's buffer those calls take
 * (the tests call the library from one thread). */
static TU_UNUSED shr_msg tu_msg;

/* tu_msg emptied, for a call to fill: a check of the message after a failed call then sees that
 * call's message alone (a call that succeeds leaves the buffer as it was). */
static TU_UNUSED shr_msg *tu_fresh(void)
{
    tu_msg.text[0] = '\0';
    return &tu_msg;
}

/* shr_open of dir with o must succeed; the reader. */
static TU_UNUSED shr_reader *tu_reader_open(const char *dir, const shr_options *o)
{
    shr_reader *r = NULL;
    int rc = shr_open(&r, dir, o, tu_fresh());
    ck_assert_msg(rc == 0, "shr_open %s: %s (%s)", dir, shr_strerror(rc), tu_msg.text);
    ck_assert_ptr_nonnull(r);
    return r;
}

/* Take and release batches until shr_next fails; what it failed with (SHR_EEND at the end of an
 * epoch). */
static TU_UNUSED int tu_reader_drain(shr_reader *r)
{
    const shr_batch *b;
    int rc;
    while ((rc = shr_next(r, &b)) == 0)
        shr_release(r, b);
    return rc;
}

/* A shuffled reader's options: batches of `batch`, the seed, RandomResizedCrop to w x h and the
 * flip. */
static TU_UNUSED shr_options tu_rrc_options(uint32_t batch, uint64_t seed, uint32_t w, uint32_t h)
{
    shr_options o;
    shr_options_init(&o);
    o.batch_size = batch;
    o.order = SHR_ORDER_RANDOM;
    o.seed = seed;
    o.rrc = o.flip = 1;
    o.width = w;
    o.height = h;
    return o;
}

/* A growing array of n elements at v: tu_vec_add gives room for one more, zeroed. */
typedef struct {
    void *v;
    size_t n;
} tu_vec;

static TU_UNUSED void *tu_vec_add(tu_vec *a, size_t size)
{
    char *p = realloc(a->v, (a->n + 1) * size);
    ck_assert_ptr_nonnull(p);
    a->v = p;
    memset(p + a->n * size, 0, size);
    return p + a->n++ * size;
}

/* A malloc'd copy of n bytes at p. */
static TU_UNUSED void *tu_memdup(const void *p, size_t n)
{
    void *q = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(q);
    memcpy(q, p, n);
    return q;
}

/* The batches of `epochs` epochs from reader r (options o), given to keep(b, one, arg) before
 * their release, each epoch ending in SHR_EEND; one, returned, is a sample's bytes in the output
 * (the batch's over batch_size). */
static TU_UNUSED size_t tu_reader_keep(shr_reader *r, const shr_options *o, int epochs,
                                       void (*keep)(const shr_batch *b, size_t one, void *arg),
                                       void *arg)
{
    shr_info info;
    shr_get_info(r, &info);
    size_t one = info.batch_bytes / o->batch_size;
    for (int e = 0; e < epochs; e++) {
        const shr_batch *b;
        int rc;
        while ((rc = shr_next(r, &b)) == 0) {
            keep(b, one, arg);
            shr_release(r, b);
        }
        ck_assert_int_eq(rc, SHR_EEND);
    }
    return one;
}

/* Every batch of `epochs` epochs from a reader on dir with o (tu_reader_open), given to
 * keep(b, one, arg) before its release, each epoch ending in SHR_EEND; one, returned, is a
 * sample's bytes in the output (the batch's over batch_size). */
static TU_UNUSED size_t tu_reader_each(const char *dir, const shr_options *o, int epochs,
                                     void (*keep)(const shr_batch *b, size_t one, void *arg),
                                     void *arg)
{
    shr_reader *r = tu_reader_open(dir, o);
    size_t one = tu_reader_keep(r, o, epochs, keep, arg);
    shr_close(r);
    return one;
}
#endif

#ifdef PROGS_H
/* For the suites whose fixtures are built by the programs of the build (progs.h): g_bin found
 * and g_root made. 0, or -1 with a line on stderr saying which is missing. */
static TU_UNUSED int tu_progs_root(void)
{
    if (find_bins() != 0) {
        fprintf(stderr, "%s: shardc not found next to the test (run make all)\n",
                program_invocation_short_name);
        return -1;
    }
    tu_root_setup();
    return g_root[0] ? 0 : -1;
}

/* shardc-mksample g_root/SRC ARGS --no-broken --quiet: the fixtures' source images. 0, or its
 * exit status. */
static TU_UNUSED int tu_mksample(const char *src, const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s/shardc-mksample' '%s/%s' %s --no-broken --quiet", g_bin, g_root,
             src, args);
    return run_quiet(cmd);
}

/* shardc-mksample g_root/img --coco g_root/inst.json ARGS --quiet: a detection fixture's images
 * and their annotations. 0, or its exit status. */
static TU_UNUSED int tu_mksample_coco(const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s/shardc-mksample' '%s/img' --coco '%s/inst.json' %s --quiet",
             g_bin, g_root, g_root, args);
    return run_quiet(cmd);
}

/* shardc build g_root/SRC -o OUT ARGS --no-progress: a fixture dataset. 0, or its exit status
 * with the command on stderr. */
static TU_UNUSED int tu_build(const char *src, const char *out, const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s/shardc' build '%s/%s' -o '%s' %s --no-progress", g_bin, g_root,
             src, out, args);
    int rc = run_quiet(cmd);
    if (rc != 0)
        fprintf(stderr, "%s: failed: %s\n", program_invocation_short_name, cmd);
    return rc;
}

/* A suite's one fixture dataset (tu_progs_root first): source images by tu_mksample with
 * src_args in g_root/src, built with build_args at g_root/ds (its path into ds, 1100 bytes). 0,
 * or -1 / the failing exit status. */
static TU_UNUSED int tu_build_ds(char ds[1100], const char *src_args, const char *build_args)
{
    if (tu_progs_root() != 0 || tu_mksample("src", src_args) != 0)
        return -1;
    snprintf(ds, 1100, "%s/ds", g_root);
    return tu_build("src", ds, build_args);
}

/* A suite's fixture dataset: path (of size bytes) is set to g_root/name, built with args. */
typedef struct {
    char *path;
    size_t size;
    const char *name, *args;
} tu_set;

/* tu_build of each of the n sets from g_root/SRC: 0, or -1 at the first that fails. */
static TU_UNUSED int tu_build_sets(const char *src, const tu_set *sets, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        snprintf(sets[i].path, sets[i].size, "%s/%s", g_root, sets[i].name);
        if (tu_build(src, sets[i].path, sets[i].args) != 0)
            return -1;
    }
    return 0;
}

/* The read-time suites' fixtures (after tu_progs_root): source images in g_root/src, 3 classes
 * of 8 with sides 30..90, and from them datasets of many sizes (short side 40, max 64, shards of
 * 7) in RGB at g_root/rgb and gray at g_root/gray (paths into rgb and gray, 1100 bytes each),
 * and the `more` sets given. 0, or -1 at the first that fails. */
static TU_UNUSED int tu_build_read_sets(char rgb[1100], char gray[1100], const tu_set *more,
                                        size_t nmore)
{
    if (tu_mksample("src", "--classes 3 --per-class 8 --min-side 30 --max-side 90") != 0)
        return -1;
    const tu_set sets[] = {
        {rgb, 1100, "rgb", "--short-side 40 --max-side 64 --shard-samples 7 -j 2"},
        {gray, 1100, "gray", "--short-side 40 --max-side 64 --gray --shard-samples 7 -j 2"},
    };
    if (tu_build_sets("src", sets, 2) != 0)
        return -1;
    return tu_build_sets("src", more, nmore);
}

/* Their main once the fixtures are built (rc 0) or not: run s, or say the fixtures failed; then
 * remove g_root. */
static TU_UNUSED int tu_run_fixtures(int rc, Suite *s)
{
    int status = EXIT_FAILURE;
    if (rc != 0) {
        fprintf(stderr, "%s: cannot build the fixture datasets\n",
                program_invocation_short_name);
        srunner_free(srunner_create(s));    /* frees s */
    } else {
        status = tu_run(s);
    }
    tu_root_teardown();
    return status;
}
#endif

#ifdef MKS_MKSAMPLE_H
/* ---- source folders by the generator (mksample.h included before this header) ---- */

/* g_dir/src (its path into src, len bytes) written by mks_generate: classes of per_class images,
 * sides from min_side to max_side (0: the generator's default), the broken files too when
 * broken. Its report. */
static TU_UNUSED mks_report tu_mks_src(char *src, size_t len, unsigned classes,
                                       unsigned per_class, unsigned min_side, unsigned max_side,
                                       int broken)
{
    snprintf(src, len, "%s/src", g_dir);
    mks_opts mo;
    mks_opts_init(&mo);
    mo.classes = classes;
    mo.per_class = per_class;
    mo.broken = broken;
    if (min_side)
        mo.min_side = min_side;
    if (max_side)
        mo.max_side = max_side;
    mks_report rep;
    ck_assert_msg(mks_generate(src, &mo, &rep) == 0, "mks_generate %s: %s", src, rep.msg.text);
    return rep;
}
#endif

#endif
