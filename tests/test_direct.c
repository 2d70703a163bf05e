/* test_direct.c - the O_DIRECT batch engine (reader/direct.h) against fmt_dataset_read: every
 * layout of destinations (in place, staged, merged runs, out of file order), compressed samples,
 * io_uring and the pread fallback, and damage. */
#include "compress.h"
#include "dataset.h"
#include "direct.h"
#include "manifest.h"
#include "raw.h"
#include "testutil.h"

#define NS 40

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;

static uint64_t rng(void)
{
    return tu_xorshift(&g_rng);
}

/* A one-shard dataset in g_dir/name: NS samples of h x w x 3 (compressible when codec is set),
 * with a manifest the dataset layer accepts. */
static void make_dataset(const char *name, uint32_t h, uint32_t w, int codec, uint32_t align)
{
    char dir[700];
    tu_path(dir, sizeof dir, name);
    ck_assert_int_eq(mkdir(dir, 0777), 0);
    const fmt_backend *be = &fmt_backend_raw;
    fmt_writer_opts wo = {.dir = dir, .name = "shard-00000", .codec = codec, .align = align};
    void *wr;
    ck_assert_int_eq(be->w_open(&wr, &wo), 0);
    size_t n = (size_t)h * w * 3;
    uint8_t *px = malloc(n);
    uint64_t sum[3] = {0}, sumsq[3] = {0};
    for (int i = 0; i < NS; i++) {
        for (size_t k = 0; k < n; k++)
            px[k] = codec ? (uint8_t)(k / 7 + i) : (uint8_t)rng();
        fmt_sample_meta m = {.height = h, .width = w, .channels = 3, .label = i % 3,
                             .source = (uint64_t)i, .hash = fmt_hash64(px, n)};
        fmt_pixel_sums(px, (size_t)h * w, 3, m.sum, m.sumsq);
        for (int c = 0; c < 3; c++) {
            sum[c] += m.sum[c];
            sumsq[c] += m.sumsq[c];
        }
        ck_assert_int_eq(be->w_add(wr, &m, px, NULL), 0);
    }
    free(px);
    fmt_shard_info info;
    ck_assert_int_eq(be->w_finish(wr, NS, &info), 0);
    fmt_manifest_shard sh = {.file = "shard-00000.raw", .first = 0, .samples = NS,
                             .bytes = info.bytes, .hash = info.hash};
    char *classes[] = {"a", "b", "c"};
    fmt_manifest m = {0};
    m.backend = "raw";
    m.backend_version = be->version;
    m.tool = "test";
    m.samples = NS;
    m.inputs = NS;
    m.nclasses = 3;
    m.classes = classes;
    m.geom.mode = FMT_GEOM_SIZE;
    m.geom.width = w;
    m.geom.height = h;
    m.channels = 3;
    m.sample_width = w;
    m.sample_height = h;
    m.pixels = (uint64_t)NS * w * h;
    m.nshards = 1;
    m.shards = &sh;
    m.build_json = "{}";
    ck_assert_int_eq(fmt_manifest_write(dir, &m), 0);
}

/* Read samples order[0 .. n) into dst slots of `stride` bytes (+ skew) through the engine and
 * compare each with fmt_dataset_read. */
static void read_and_compare(const char *name, const uint64_t *order, uint32_t n, size_t stride,
                             size_t skew, int uring)
{
    char dir[700];
    tu_path(dir, sizeof dir, name);
    fmt_dataset *ds, *ref;
    fmt_msg msg;
    ck_assert_int_eq(fmt_dataset_open_ex(&ds, dir, FMT_ACCESS_DIRECT, &msg), 0);
    ck_assert_int_eq(fmt_dataset_open(&ref, dir, &msg), 0);
    shr_direct *d;
    ck_assert_int_eq(shr_direct_create(&d, 8, 4096, uring), 0);
    if (uring && !shr_direct_uring(d))
        fprintf(stderr, "test_direct: io_uring refused by the kernel: pread path only (skipped)\n");
    ck_assert(uring || !shr_direct_uring(d));
    uint8_t *batch;
    ck_assert_int_eq(posix_memalign((void **)&batch, 4096, stride * n + skew + 4096), 0);
    memset(batch, 0xEE, stride * n + skew + 4096);
    shr_direct_item *it = calloc(n, sizeof *it);
    for (uint32_t i = 0; i < n; i++) {
        ck_assert_int_eq(fmt_dataset_extent(ds, order[i], &it[i].x), 0);
        it[i].dst = batch + skew + i * stride;
    }
    uint32_t bad;
    ck_assert_int_eq(shr_direct_read(d, it, n, &bad, &msg), 0);
    for (uint32_t i = 0; i < n; i++) {
        fmt_sample s;
        ck_assert_int_eq(fmt_dataset_get(ref, order[i], &s), 0);
        uint8_t *want = malloc(s.length);
        ck_assert_int_eq(fmt_dataset_read(ref, order[i], want, NULL), 0);
        ck_assert_msg(memcmp(it[i].dst, want, s.length) == 0, "%s: sample %llu differs", name,
                      (unsigned long long)order[i]);
        /* nothing written between the slots */
        for (size_t k = s.length; k < stride && i + 1 < n; k++)
            ck_assert_uint_eq(it[i].dst[k], 0xEE);
        free(want);
    }
    for (uint32_t i = 0; i < n; i++)
        fmt_extent_release(&it[i].x);
    free(it);
    free(batch);
    shr_direct_free(d);
    fmt_dataset_close(ds);
    fmt_dataset_close(ref);
}

START_TEST(test_layouts)
{
    /* 64x48x3 = 9216 bytes: in place when the slot allows (runs merged), 37x23x3 = 2553: staged,
     * 160x120x3 = 57600, version 1 at 4096, compressed */
    make_dataset("aligned", 48, 64, 0, 0);
    make_dataset("odd", 23, 37, 0, 0);
    make_dataset("big", 120, 160, 0, 0);
    make_dataset("v1", 23, 37, 0, 4096);
    make_dataset("lz4", 48, 64, FMT_CODEC_LZ4, 0);
    make_dataset("zstd", 23, 37, FMT_CODEC_ZSTD, 0);
    const char *names[] = {"aligned", "odd", "big", "v1", "lz4", "zstd"};
    const size_t len[] = {9216, 2553, 57600, 2553, 9216, 2553};
    uint64_t seq[NS], perm[NS], dup[NS];
    for (uint32_t i = 0; i < NS; i++)
        seq[i] = perm[i] = i;
    for (uint32_t i = NS - 1; i > 0; i--) {
        uint32_t j = (uint32_t)(rng() % (i + 1));
        uint64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (uint32_t i = 0; i < NS; i++)
        dup[i] = (i * 7) % 5;       /* the same samples more than once, as padding repeats */
    for (size_t k = 0; k < 6; k++) {
        for (int uring = 0; uring < 2; uring++) {
            read_and_compare(names[k], seq, NS, len[k], 0, uring);        /* back to back */
            read_and_compare(names[k], perm, NS, len[k], 0, uring);       /* out of order */
            read_and_compare(names[k], seq, 17, len[k] + 100, 4, uring);  /* misaligned slots */
            read_and_compare(names[k], dup, NS, len[k], 0, uring);
            read_and_compare(names[k], seq + 3, 1, len[k], 0, uring);
        }
    }
}
END_TEST

START_TEST(test_damage)
{
    /* a compressed block damaged on disk: the engine names the item; a file cut short: ETRUNC */
    make_dataset("z", 23, 37, FMT_CODEC_ZSTD, 0);
    char dir[700], path[800];
    tu_path(dir, sizeof dir, "z");
    snprintf(path, sizeof path, "%s/shard-00000.raw", dir);
    fmt_dataset *ds;
    fmt_msg msg;
    ck_assert_int_eq(fmt_dataset_open_ex(&ds, dir, FMT_ACCESS_DIRECT, &msg), 0);
    fmt_extent x;
    ck_assert_int_eq(fmt_dataset_extent(ds, 6, &x), 0);
    ck_assert_int_eq(x.codec, FMT_CODEC_ZSTD);
    tu_flip_byte(path, x.offset + x.stored / 2, 0x10);
    shr_direct *d;
    ck_assert_int_eq(shr_direct_create(&d, 4, 0, 1), 0);
    shr_direct_item it[NS];
    uint8_t *buf = malloc((size_t)NS * 2553);
    for (uint32_t i = 0; i < NS; i++) {
        ck_assert_int_eq(fmt_dataset_extent(ds, i, &it[i].x), 0);
        it[i].dst = buf + (size_t)i * 2553;
    }
    uint32_t bad = 99;
    int rc = shr_direct_read(d, it, NS, &bad, &msg);
    ck_assert(rc == FMT_ECORRUPT || rc == FMT_EHASH);
    ck_assert_uint_eq(bad, 6);
    ck_assert_msg(strstr(msg.text, "damaged zstd block") != NULL, "%s", msg.text);
    /* truncated after open */
    ck_assert_int_eq(truncate(path, (off_t)(x.offset + 10)), 0);
    rc = shr_direct_read(d, it + 10, NS - 10, &bad, &msg);
    ck_assert_int_eq(rc, FMT_ETRUNC);
    for (uint32_t i = 0; i < NS; i++)
        fmt_extent_release(&it[i].x);
    fmt_extent_release(&x);
    free(buf);
    shr_direct_free(d);
    fmt_dataset_close(ds);
    ck_assert_int_eq(shr_direct_create(&d, 0, 0, 1), EINVAL);
    /* the path is the caller's choice (shr_options.direct_pread): the library reads no
     * environment, so SHR_DIRECT_NO_URING (shardbench's) changes nothing here */
    ck_assert_int_eq(shr_direct_create(&d, 4, 0, 1), 0);
    int kernel = shr_direct_uring(d);
    shr_direct_free(d);
    setenv("SHR_DIRECT_NO_URING", "1", 1);
    ck_assert_int_eq(shr_direct_create(&d, 4, 0, 1), 0);
    ck_assert_int_eq(shr_direct_uring(d), kernel);
    shr_direct_free(d);
    ck_assert_int_eq(shr_direct_create(&d, 4, 0, 0), 0);
    ck_assert_int_eq(shr_direct_uring(d), 0);
    shr_direct_free(d);
    unsetenv("SHR_DIRECT_NO_URING");
}
END_TEST

int main(void)
{
    return tu_run_suite(TU_TEMP_SUITE("direct", "direct", 120, test_layouts, test_damage));
}
