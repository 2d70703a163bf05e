/* test_compress.c - payload codecs (compress.h) and compressed raw shards: specs, round trips of
 * every byte, damaged blocks, and the backend's three access modes on a compressed shard. */
#include "compress.h"
#include "raw.h"
#include "testutil.h"

#include <xxhash.h>

static uint64_t g_rng = 0x243F6A8885A308D3ull;

static uint64_t rng(void)
{
    return tu_xorshift(&g_rng);
}

/* Pixels that compress (smooth gradients with a little noise), or noise that does not. */
static void fill(uint8_t *p, size_t n, int compressible)
{
    for (size_t i = 0; i < n; i++)
        p[i] = compressible ? (uint8_t)((i / 3) % 251 + (rng() % 32 == 0)) : (uint8_t)rng();
}

START_TEST(test_codec_parse)
{
    fmt_codec_spec s;
    fmt_msg msg;
    char buf[32];
    ck_assert_int_eq(fmt_codec_parse("lz4", &s, &msg), 0);
    ck_assert_int_eq(s.codec, FMT_CODEC_LZ4);
    ck_assert_int_eq(s.level, 0);
    ck_assert_int_eq(fmt_codec_parse("lz4:9", &s, &msg), 0);
    ck_assert_int_eq(s.level, 9);
    fmt_codec_format(&s, buf, sizeof buf);
    ck_assert_str_eq(buf, "lz4:9");
    ck_assert_int_eq(fmt_codec_parse("zstd", &s, &msg), 0);
    ck_assert_int_eq(s.codec, FMT_CODEC_ZSTD);
    ck_assert_int_eq(fmt_codec_parse("zstd:-5", &s, &msg), 0);
    ck_assert_int_eq(s.level, -5);
    ck_assert_int_eq(fmt_codec_parse("zstd:19", &s, &msg), 0);
    ck_assert_int_eq(fmt_codec_parse("none", &s, &msg), 0);
    ck_assert_int_eq(s.codec, FMT_CODEC_NONE);
    const char *bad[] = {"", "lz5", "zstd:", "zstd:0", "zstd:20", "zstd:-8", "lz4:13", "lz4:x",
                         "zstd:3x", "none:1", "LZ4"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(fmt_codec_parse(bad[i], &s, &msg) == FMT_EINVAL, "'%s' accepted", bad[i]);
    ck_assert_int_eq(fmt_codec_parse("zstd:20", &s, &msg), FMT_EINVAL);
    ck_assert_str_eq(msg.text, "bad zstd level '20' (-7..-1 or 1..19)");
    ck_assert_int_eq(fmt_codec_parse("gzip", &s, &msg), FMT_EINVAL);
    ck_assert_str_eq(msg.text, "unknown codec 'gzip' (lz4, zstd)");
}
END_TEST

START_TEST(test_codec_roundtrip)
{
    const char *specs[] = {"lz4", "lz4:1", "lz4:9", "zstd", "zstd:-3", "zstd:9"};
    size_t sizes[] = {0, 1, 3, 4096, 150528, 1000003};
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        fmt_codec_spec s;
        ck_assert_int_eq(fmt_codec_parse(specs[k], &s, NULL), 0);
        for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
            for (int comp = 0; comp < 2; comp++) {
                size_t n = sizes[j], cap = fmt_compress_bound(s.codec, n), out;
                uint8_t *src = malloc(n + 1), *enc = malloc(cap), *back = malloc(n + 1);
                ck_assert(src && enc && back && cap >= n);
                fill(src, n, comp);
                ck_assert_int_eq(fmt_compress(&s, src, n, enc, cap, &out), 0);
                ck_assert_uint_le(out, cap);
                if (comp && n >= 4096)
                    ck_assert_uint_lt(out, n / 2);
                ck_assert_int_eq(fmt_decompress(s.codec, enc, out, back, n), 0);
                ck_assert(memcmp(src, back, n) == 0);
                /* the wrong expected length is a damaged block, never an overrun */
                if (n > 1) {
                    ck_assert_int_eq(fmt_decompress(s.codec, enc, out, back, n - 1),
                                     FMT_ECORRUPT);
                    back[n] = 0xA5;
                    int rc = fmt_decompress(s.codec, enc, out, back, n + 1);
                    ck_assert_int_eq(rc, FMT_ECORRUPT);
                }
                /* a cut block */
                if (out > 1)
                    ck_assert_int_eq(fmt_decompress(s.codec, enc, out / 2, back, n), FMT_ECORRUPT);
                ck_assert_int_eq(fmt_compress(&s, src, n, enc, cap - 1, &out), FMT_EINVAL);
                free(src);
                free(enc);
                free(back);
            }
        }
    }
    uint8_t x[4];
    ck_assert_int_eq(fmt_decompress(7, x, 4, x, 4), FMT_EINVAL);
    ck_assert_int_eq(fmt_decompress(FMT_CODEC_NONE, x, 4, x, 4), FMT_EINVAL);
}
END_TEST

/* ---- compressed raw shards ---- */

#define NS 12

typedef struct {
    uint32_t h, w;
    uint8_t *px;
} sample;

/* A shard of NS samples, even ones compressible, odd ones noise (stored plain), written with
 * codec; returns the samples. */
static sample *write_compressed(const char *path, int codec, int level)
{
    sample *s = calloc(NS, sizeof *s);
    ck_assert_ptr_nonnull(s);
    fmt_raw_writer *w;
    fmt_raw_writer_opts o = {.codec = codec, .level = level, .first_index = 0};
    ck_assert_int_eq(fmt_raw_writer_open(&w, path, &o), 0);
    for (int i = 0; i < NS; i++) {
        s[i].h = 20 + (uint32_t)(rng() % 200);
        s[i].w = 20 + (uint32_t)(rng() % 200);
        size_t n = (size_t)s[i].h * s[i].w * 3;
        s[i].px = malloc(n);
        ck_assert_ptr_nonnull(s[i].px);
        fill(s[i].px, n, i % 2 == 0);
        fmt_sample_meta m = {.height = s[i].h, .width = s[i].w, .channels = 3, .label = i,
                             .source = (uint64_t)i, .hash = fmt_hash64(s[i].px, n)};
        ck_assert_int_eq(fmt_raw_writer_add(w, &m, s[i].px), 0);
    }
    ck_assert_int_eq(fmt_raw_writer_finish(w, NS, NULL), 0);
    return s;
}

static void free_samples(sample *s)
{
    for (int i = 0; i < NS; i++)
        free(s[i].px);
    free(s);
}

START_TEST(test_shard_roundtrip)
{
    const int codecs[] = {FMT_CODEC_LZ4, FMT_CODEC_ZSTD};
    for (size_t c = 0; c < 2; c++) {
        char path[700];
        tu_path(path, sizeof path, "shard-00000.raw");
        sample *s = write_compressed(path, codecs[c], c ? 5 : 0);
        /* the raw format itself: even samples encoded, odd ones (noise) stored plain */
        fmt_raw_shard *sh;
        fmt_msg msg;
        ck_assert_int_eq(fmt_raw_open(&sh, path, &msg), 0);
        ck_assert_uint_eq(fmt_raw_get_header(sh)->version_major, 2);
        for (int i = 0; i < NS; i++) {
            fmt_raw_entry e;
            fmt_raw_get_entry(sh, (uint64_t)i, &e);
            ck_assert_uint_eq(e.length, (uint64_t)s[i].h * s[i].w * 3);
            if (i % 2 == 0) {
                ck_assert_uint_eq(e.codec, (uint32_t)codecs[c]);
                ck_assert_uint_lt(e.stored, e.length / 2);
                ck_assert_ptr_null(fmt_raw_pixels(sh, (uint64_t)i));
            } else {
                ck_assert_uint_eq(e.codec, FMT_CODEC_NONE);
                ck_assert_uint_eq(e.stored, e.length);
                ck_assert(memcmp(fmt_raw_pixels(sh, (uint64_t)i), s[i].px, e.length) == 0);
            }
            ck_assert_int_eq(fmt_raw_check_sample(sh, (uint64_t)i), 0);
        }
        fmt_raw_close(sh);

        /* the backend in every access mode decodes to the same bytes (with and without scratch,
         * and with a scratch too small for the stored bytes) */
        size_t scratch_len = 8192;
        uint8_t *scratch;
        ck_assert_int_eq(posix_memalign((void **)&scratch, FMT_DIRECT_ALIGN, scratch_len), 0);
        for (int a = FMT_ACCESS_MMAP; a <= FMT_ACCESS_DIRECT; a++) {
            void *b;
            ck_assert_int_eq(fmt_backend_raw.r_open(&b, g_dir, path, (fmt_access)a, &msg), 0);
            for (int i = 0; i < NS; i++) {
                fmt_sample fs;
                ck_assert_int_eq(fmt_backend_raw.r_get(b, (uint64_t)i, &fs), 0);
                uint8_t *dst = malloc(fs.length);
                ck_assert_int_eq(fmt_backend_raw.r_read(b, (uint64_t)i, dst, NULL, 0), 0);
                ck_assert(memcmp(dst, s[i].px, fs.length) == 0);
                memset(dst, 0, fs.length);
                ck_assert_int_eq(fmt_backend_raw.r_read(b, (uint64_t)i, dst, scratch,
                                                        scratch_len), 0);
                ck_assert(memcmp(dst, s[i].px, fs.length) == 0);
                ck_assert_int_eq(fmt_backend_raw.r_check(b, (uint64_t)i), 0);
                free(dst);
            }
            fmt_backend_raw.r_close(b);
        }
        free(scratch);
        free_samples(s);
        unlink(path);
    }
}
END_TEST

START_TEST(test_shard_damage)
{
    /* every byte of a compressed payload flipped in turn: reading that sample fails cleanly
     * (a block that does not decode, or decodes to pixels whose hash does not match) in every
     * access mode, and verify's check fails too; the other samples still read */
    char path[700];
    tu_path(path, sizeof path, "shard-00000.raw");
    g_rng = 99;
    sample *s = write_compressed(path, FMT_CODEC_LZ4, 0);
    fmt_raw_shard *sh;
    ck_assert_int_eq(fmt_raw_open(&sh, path, NULL), 0);
    fmt_raw_entry e;
    fmt_raw_get_entry(sh, 2, &e);
    fmt_raw_close(sh);
    ck_assert_uint_eq(e.codec, FMT_CODEC_LZ4);
    size_t len;
    uint8_t *orig = tu_slurp(path, &len);
    uint8_t *dst = malloc(e.length);
    uint64_t step = e.stored / 97 + 1;
    for (uint64_t k = 0; k < e.stored; k += step) {
        uint8_t *buf = malloc(len);
        memcpy(buf, orig, len);
        buf[e.offset + k] ^= 0x5A;
        tu_spit(path, buf, len);
        free(buf);
        for (int a = FMT_ACCESS_MMAP; a <= FMT_ACCESS_DIRECT; a++) {
            void *b;
            fmt_msg msg;
            ck_assert_int_eq(fmt_backend_raw.r_open(&b, g_dir, path, (fmt_access)a, &msg), 0);
            int rc = fmt_backend_raw.r_read(b, 2, dst, NULL, 0);
            ck_assert_msg(rc == FMT_ECORRUPT || rc == FMT_EHASH, "byte %llu: rc %d",
                          (unsigned long long)k, rc);
            rc = fmt_backend_raw.r_check(b, 2);
            ck_assert(rc == FMT_ECORRUPT || rc == FMT_EHASH);
            ck_assert_int_eq(fmt_backend_raw.r_read(b, 3, dst, NULL, 0), 0);
            fmt_backend_raw.r_close(b);
        }
    }
    /* what the message says */
    uint8_t *enc = orig + e.offset;
    fmt_msg msg;
    ck_assert_int_eq(fmt_raw_decode(&e, enc, dst, &msg), 0);
    fmt_raw_entry cut = e;
    cut.stored = e.stored / 2;
    ck_assert_int_eq(fmt_raw_decode(&cut, enc, dst, &msg), FMT_ECORRUPT);
    ck_assert_msg(strstr(msg.text, "damaged lz4 block") != NULL, "%s", msg.text);
    fmt_raw_entry wrong = e;
    wrong.hash ^= 1;
    ck_assert_int_eq(fmt_raw_decode(&wrong, enc, dst, &msg), FMT_EHASH);
    ck_assert_msg(strstr(msg.text, "do not match their hash") != NULL, "%s", msg.text);
    free(dst);
    free(orig);
    free_samples(s);
}
END_TEST

START_TEST(test_writer_bad_codec)
{
    char path[700];
    tu_path(path, sizeof path, "shard-00000.raw");
    fmt_raw_writer *w;
    fmt_raw_writer_opts bad[] = {{.codec = 3}, {.codec = -1}, {.codec = FMT_CODEC_LZ4, .level = 13},
                                 {.codec = FMT_CODEC_ZSTD, .level = 20},
                                 {.codec = FMT_CODEC_NONE, .level = 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(fmt_raw_writer_open(&w, path, &bad[i]), FMT_EINVAL);
        ck_assert(!tu_exists(path));
    }
    /* an alignment with a codec: version 2, runs at that alignment */
    fmt_raw_writer_opts o = {.codec = FMT_CODEC_ZSTD, .align = 512};
    ck_assert_int_eq(fmt_raw_writer_open(&w, path, &o), 0);
    uint8_t px[300] = {0};
    fmt_sample_meta m = {.height = 10, .width = 10, .channels = 3, .hash = fmt_hash64(px, 300)};
    ck_assert_int_eq(fmt_raw_writer_add(w, &m, px), 0);
    fmt_raw_header h;
    ck_assert_int_eq(fmt_raw_writer_finish(w, 1, &h), 0);
    ck_assert_uint_eq(h.version_major, 2);
    ck_assert_uint_eq(h.data_offset, 512);
}
END_TEST

START_TEST(test_jpeg_pick)
{
    /* the documented rule, computed here from XXH3 directly, and the fraction it gives */
    const double fractions[] = {0, 0.1, 0.5, 0.9, 1};
    for (size_t f = 0; f < 5; f++) {
        unsigned picked = 0;
        for (uint64_t i = 0; i < 20000; i++) {
            uint8_t le[8];
            for (int b = 0; b < 8; b++)
                le[b] = (uint8_t)(i >> (8 * b));
            uint64_t h = XXH3_64bits_withSeed(le, 8, 0x6a706567u);
            int want = (double)(h >> 11) * 0x1.0p-53 < fractions[f];
            ck_assert_int_eq(fmt_raw_jpeg_pick(i, fractions[f]), want);
            picked += (unsigned)want;
        }
        double off = (double)picked - 20000 * fractions[f];
        ck_assert_msg(off >= -300 && off <= 300, "fraction %g: %u picked", fractions[f], picked);
    }
    ck_assert(!fmt_raw_jpeg_pick(12345, 0));
    ck_assert(fmt_raw_jpeg_pick(12345, 1));
}
END_TEST

int main(void)
{
    return tu_run_suite(TU_TEMP_SUITE("compress", "compress", 120, test_codec_parse,
                                      test_codec_roundtrip, test_shard_roundtrip, test_shard_damage,
                                      test_writer_bad_codec, test_jpeg_pick));
}
