/* test_raw.c - the raw shard format: round trips, atomic writing, corruption and I/O failures. */
#include "raw.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

static uint64_t round_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) / a * a;
}

/* ---- fixtures: a set of samples written to a shard ---- */

static tu_sample *make_samples(size_t n, int shapes, int with_aux)
{
    return tu_samples_make(n, shapes, 10, 10, 40, with_aux ? TU_AUX_VARIED : 0);
}

/* Write samples to path, asserting the size accounting after every add. */
static void write_shard(const char *path, const tu_sample *s, size_t n, uint32_t align,
                        uint64_t first_index, uint64_t fingerprint, uint64_t input_end)
{
    fmt_raw_writer_opts opts = { .align = align, .first_index = first_index,
                                 .fingerprint = fingerprint };
    fmt_raw_writer *w;
    ck_assert_int_eq(fmt_raw_writer_open(&w, path, &opts), 0);
    uint32_t a = align ? align : FMT_RAW_DEFAULT_ALIGN;
    uint64_t predicted = a;
    ck_assert_uint_eq(fmt_raw_writer_size(w), predicted);
    for (size_t i = 0; i < n; i++) {
        fmt_sample_meta m;
        tu_sample_meta(&s[i], &m);
        ck_assert_int_eq(fmt_raw_writer_add(w, &m, s[i].px), 0);
        uint64_t cost = fmt_raw_sample_cost(tu_sample_len(&s[i]), s[i].aux_len, a);
        ck_assert_uint_eq(cost, round_up(tu_sample_len(&s[i]), a) + 64 + s[i].aux_len);
        predicted += cost;
        ck_assert_uint_eq(fmt_raw_writer_size(w), predicted);
        ck_assert_uint_eq(fmt_raw_writer_count(w), i + 1);
    }
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    ck_assert(tu_exists(tmp));
    ck_assert(!tu_exists(path));
    fmt_raw_header hdr;
    ck_assert_int_eq(fmt_raw_writer_finish(w, input_end, &hdr), 0);
    ck_assert(!tu_exists(tmp));
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq((uint64_t)st.st_size, predicted);
    ck_assert_uint_eq(hdr.file_size, predicted);
    ck_assert_uint_eq(hdr.sample_count, n);
}

/* Write, reopen and check every field, pixel and aux byte against the fixture. */
static void roundtrip(size_t n, int shapes, int with_aux, uint32_t align)
{
    char path[4200];
    tu_path(path, sizeof path, "shard-00000.raw");
    tu_rng_state = 0x9E3779B97F4A7C15ULL ^ (n * 131 + (uint64_t)shapes * 7 + align);
    tu_sample *s = make_samples(n, shapes, with_aux);
    write_shard(path, s, n, align, 5000 + n, 0xFEEDFACECAFEBEEFULL, 77777);

    fmt_msg msg = {{0}};
    fmt_raw_shard *sh;
    int rc = fmt_raw_open(&sh, path, &msg);
    ck_assert_msg(rc == 0, "open: %s", fmt_reason(&msg, rc));
    const fmt_raw_header *h = fmt_raw_get_header(sh);
    ck_assert_uint_eq(h->version_major, 1);
    ck_assert_uint_eq(h->version_minor, 0);
    ck_assert_uint_eq(h->sample_count, n);
    ck_assert_uint_eq(fmt_raw_count(sh), n);
    ck_assert_uint_eq(h->first_index, 5000 + n);
    ck_assert_uint_eq(h->fingerprint, 0xFEEDFACECAFEBEEFULL);
    ck_assert_uint_eq(h->input_end, 77777);
    ck_assert_uint_eq(h->align, align);

    uint64_t sum[3] = {0}, sumsq[3] = {0}, padded = 0, aux_total = 0;
    int same_shape = 1;
    for (size_t i = 0; i < n; i++) {
        for (uint64_t k = 0; k < tu_sample_len(&s[i]); k++) {
            uint64_t v = s[i].px[k];
            sum[k % s[i].c] += v;
            sumsq[k % s[i].c] += v * v;
        }
        padded += round_up(tu_sample_len(&s[i]), align);
        aux_total += s[i].aux_len;
        if (s[i].h != s[0].h || s[i].w != s[0].w || s[i].c != s[0].c)
            same_shape = 0;
    }
    for (int c = 0; c < 3; c++) {
        ck_assert_uint_eq(h->channel_sum[c], sum[c]);
        ck_assert_uint_eq(h->channel_sumsq[c], sumsq[c]);
    }
    ck_assert_uint_eq(h->index_offset, align + padded);
    ck_assert_uint_eq(h->aux_offset, align + padded + 64 * n);
    ck_assert_uint_eq(h->aux_size, aux_total);
    ck_assert_uint_eq(h->file_size, align + padded + 64 * n + aux_total);
    int fixed = n > 0 && same_shape;
    ck_assert_uint_eq(h->flags & FMT_RAW_FLAG_FIXED, fixed ? FMT_RAW_FLAG_FIXED : 0);
    if ((shapes == TU_SHAPES_FIXED_GRAY || shapes == TU_SHAPES_FIXED_RGB) && n > 0)
        ck_assert(fixed);
    if (shapes == TU_SHAPES_SAME_HW && n > 2)
        ck_assert(!fixed);
    if (fixed) {
        ck_assert_uint_eq(h->fixed_height, s[0].h);
        ck_assert_uint_eq(h->fixed_width, s[0].w);
        ck_assert_uint_eq(h->fixed_channels, s[0].c);
        ck_assert_uint_eq(h->stride, round_up(tu_sample_len(&s[0]), align));
    } else {
        ck_assert_uint_eq(h->stride, 0);
        ck_assert_uint_eq(h->fixed_height, 0);
    }

    const uint8_t *base = fmt_raw_base(sh);
    ck_assert_uint_eq((uintptr_t)base % 4096, 0);
    uint64_t off = align, aux_off = 0;
    for (size_t i = 0; i < n; i++) {
        fmt_raw_entry e;
        fmt_raw_get_entry(sh, i, &e);
        ck_assert_uint_eq(e.offset, off);
        if (fixed)
            ck_assert_uint_eq(e.offset, align + i * h->stride);
        ck_assert_uint_eq(e.length, tu_sample_len(&s[i]));
        ck_assert_uint_eq(e.hash, fmt_hash64(s[i].px, tu_sample_len(&s[i])));
        ck_assert_int_eq(e.label, s[i].label);
        ck_assert_uint_eq(e.height, s[i].h);
        ck_assert_uint_eq(e.width, s[i].w);
        ck_assert_uint_eq(e.channels, s[i].c);
        ck_assert_uint_eq(e.source, s[i].source);
        ck_assert_uint_eq(e.flags, s[i].aux ? FMT_RAW_ENTRY_AUX : 0);
        ck_assert_uint_eq(e.aux_len, s[i].aux_len);
        ck_assert_uint_eq(e.aux_off, s[i].aux ? aux_off : 0);
        const uint8_t *px = fmt_raw_pixels(sh, i);
        ck_assert_ptr_eq(px, base + off);
        ck_assert_mem_eq(px, s[i].px, tu_sample_len(&s[i]));
        uint32_t alen = 12345;
        const uint8_t *ax = fmt_raw_aux(sh, i, &alen);
        if (s[i].aux) {
            ck_assert_uint_eq(alen, s[i].aux_len);
            /* the record as the file holds it, read from the reader's private copy */
            ck_assert_mem_eq(ax, base + h->aux_offset + aux_off, alen);
            ck_assert_mem_eq(ax, s[i].aux, alen);
        } else {
            ck_assert_ptr_null(ax);
            ck_assert_uint_eq(alen, 0);
        }
        ck_assert_int_eq(fmt_raw_check_sample(sh, i), 0);
        /* all padding after the payload is zero */
        for (uint64_t k = off + e.length; k < round_up(off + e.length, align); k++)
            ck_assert_uint_eq(base[k], 0);
        off += round_up(e.length, align);
        aux_off += s[i].aux_len;
    }
    ck_assert_int_eq(fmt_raw_check_sample(sh, n), FMT_EINVAL);
    for (uint64_t k = FMT_RAW_HEADER_SIZE; k < align; k++)
        ck_assert_uint_eq(base[k], 0);

    /* a mapped shard keeps no descriptor: the mapping is all it reads */
    int fd;
    ck_assert_int_eq(fmt_raw_fd_get(sh, 0, &fd), FMT_EUNSUPPORTED);
    ck_assert_int_eq(fd, -1);
    fmt_raw_close(sh);

    /* opened without a mapping, its descriptor (from the cache) reads the same bytes */
    ck_assert_int_eq(fmt_raw_open_ex(&sh, path, FMT_RAW_OPEN_NOMAP, NULL), 0);
    if (n > 0) {
        uint8_t buf[64];
        size_t len = tu_sample_len(&s[n - 1]) < sizeof buf ? (size_t)tu_sample_len(&s[n - 1]) :
                     sizeof buf;
        fmt_raw_entry e;
        fmt_raw_get_entry(sh, n - 1, &e);
        ck_assert_int_eq(fmt_raw_fd_get(sh, 0, &fd), 0);
        ck_assert_int_eq(pread(fd, buf, len, (off_t)e.offset), (ssize_t)len);
        fmt_raw_fd_put(sh);
        ck_assert_mem_eq(buf, s[n - 1].px, len);
    }
    fmt_raw_close(sh);

    /* deterministic: the same samples give the same bytes */
    char path2[4200];
    tu_path(path2, sizeof path2, "shard-00001.raw");
    write_shard(path2, s, n, align, 5000 + n, 0xFEEDFACECAFEBEEFULL, 77777);
    tu_assert_same_file(path, path2);
    unlink(path);
    unlink(path2);
    tu_samples_free(s, n);
}

START_TEST(test_roundtrip_fixed_gray)
{
    roundtrip(7, TU_SHAPES_FIXED_GRAY, 1, 4096);
    roundtrip(5, TU_SHAPES_FIXED_GRAY, 0, 256);
}
END_TEST

START_TEST(test_roundtrip_fixed_rgb)
{
    roundtrip(9, TU_SHAPES_FIXED_RGB, 0, 256);   /* 300 bytes -> stride 512 */
    roundtrip(3, TU_SHAPES_FIXED_RGB, 1, 4096);
    roundtrip(1, TU_SHAPES_FIXED_RGB, 1, 65536);
}
END_TEST

START_TEST(test_roundtrip_mixed)
{
    roundtrip(23, TU_SHAPES_MIXED, 1, 256);
    roundtrip(11, TU_SHAPES_MIXED, 0, 4096);
    roundtrip(6, TU_SHAPES_MIXED, 1, 512);
    roundtrip(4, TU_SHAPES_SAME_HW, 0, 256);
}
END_TEST

START_TEST(test_exact_align_payload)
{
    /* 16x16x1 = 256: payloads fill their slots exactly, no padding */
    char path[4200];
    tu_path(path, sizeof path, "exact.raw");
    tu_rng_state = 42;
    tu_sample *s = make_samples(4, TU_SHAPES_MIXED, 0);
    for (int i = 0; i < 4; i++) {
        s[i].h = 16, s[i].w = 16, s[i].c = 1;
        free(s[i].px);
        s[i].px = malloc(256);
        ck_assert_ptr_nonnull(s[i].px);
        for (int k = 0; k < 256; k++)
            s[i].px[k] = (uint8_t)(i * 50 + k);
    }
    write_shard(path, s, 4, 256, 0, 0, 0);
    fmt_raw_shard *sh;
    ck_assert_int_eq(fmt_raw_open(&sh, path, NULL), 0);
    ck_assert_uint_eq(fmt_raw_get_header(sh)->stride, 256);
    ck_assert_uint_eq(fmt_raw_get_header(sh)->index_offset, 256 + 4 * 256);
    for (int i = 0; i < 4; i++)
        ck_assert_mem_eq(fmt_raw_pixels(sh, (uint64_t)i), s[i].px, 256);
    fmt_raw_close(sh);
    tu_samples_free(s, 4);
}
END_TEST

START_TEST(test_empty_shard)
{
    char path[4200];
    tu_path(path, sizeof path, "empty.raw");
    fmt_raw_writer *w;
    ck_assert_int_eq(fmt_raw_writer_open(&w, path, NULL), 0);
    ck_assert_uint_eq(fmt_raw_writer_count(w), 0);
    ck_assert_uint_eq(fmt_raw_writer_size(w), FMT_RAW_DEFAULT_ALIGN);
    ck_assert_int_eq(fmt_raw_writer_finish(w, 3, NULL), 0);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_size, FMT_RAW_DEFAULT_ALIGN);
    fmt_raw_shard *sh;
    ck_assert_int_eq(fmt_raw_open(&sh, path, NULL), 0);
    const fmt_raw_header *h = fmt_raw_get_header(sh);
    ck_assert_uint_eq(fmt_raw_count(sh), 0);
    ck_assert_uint_eq(h->flags, 0);
    ck_assert_uint_eq(h->index_offset, FMT_RAW_DEFAULT_ALIGN);
    ck_assert_uint_eq(h->aux_size, 0);
    ck_assert_uint_eq(h->input_end, 3);
    ck_assert_uint_eq(h->channel_sum[0], 0);
    ck_assert_int_eq(fmt_raw_check_sample(sh, 0), FMT_EINVAL);
    fmt_raw_close(sh);
    fmt_raw_close(NULL);
}
END_TEST

START_TEST(test_tmp_and_abort)
{
    char path[4200], tmp[4200];
    tu_path(path, sizeof path, "shard-00003.raw");
    tu_path(tmp, sizeof tmp, "shard-00003.raw.tmp");
    tu_rng_state = 7;
    tu_sample *s = make_samples(2, TU_SHAPES_FIXED_RGB, 1);
    fmt_raw_writer *w;
    ck_assert_int_eq(fmt_raw_writer_open(&w, path, NULL), 0);
    ck_assert(tu_exists(tmp));
    ck_assert(!tu_exists(path));
    fmt_sample_meta m;
    tu_sample_meta(&s[0], &m);
    ck_assert_int_eq(fmt_raw_writer_add(w, &m, s[0].px), 0);
    ck_assert(tu_exists(tmp));
    ck_assert(!tu_exists(path));
    fmt_raw_writer_abort(w);
    ck_assert(!tu_exists(tmp));
    ck_assert(!tu_exists(path));
    fmt_raw_writer_abort(NULL);

    /* a stale temp file from a killed build is truncated, not appended to */
    tu_spit(tmp, (const uint8_t *)"garbage", 7);
    write_shard(path, s, 2, 256, 0, 0, 0);
    fmt_raw_shard *sh;
    ck_assert_int_eq(fmt_raw_open(&sh, path, NULL), 0);
    fmt_raw_close(sh);
    tu_samples_free(s, 2);
}
END_TEST

START_TEST(test_writer_bad_args)
{
    char path[4200];
    tu_path(path, sizeof path, "args.raw");
    const uint32_t bad_aligns[] = { 1, 64, 128, 100, 3000, 2u << 20, 0x80000000u };
    for (size_t i = 0; i < sizeof bad_aligns / sizeof bad_aligns[0]; i++) {
        fmt_raw_writer *w = (fmt_raw_writer *)&path;
        fmt_raw_writer_opts o = { .align = bad_aligns[i] };
        ck_assert_int_eq(fmt_raw_writer_open(&w, path, &o), FMT_EINVAL);
        ck_assert_ptr_null(w);
    }
    char missing[4300];
    snprintf(missing, sizeof missing, "%s/no/such/dir/x.raw", g_dir);
    fmt_raw_writer *w;
    ck_assert_int_eq(fmt_raw_writer_open(&w, missing, NULL), ENOENT);

    ck_assert_int_eq(fmt_raw_writer_open(&w, path, &(fmt_raw_writer_opts){ .align = 256 }), 0);
    uint8_t px[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    fmt_sample_meta m = { .height = 2, .width = 2, .channels = 3, .label = 4 };
    m.hash = fmt_hash64(px, 12);
    fmt_sample_meta bad = m;
    bad.channels = 2;
    ck_assert_int_eq(fmt_raw_writer_add(w, &bad, px), FMT_EINVAL);
    bad = m;
    bad.height = 0;
    ck_assert_int_eq(fmt_raw_writer_add(w, &bad, px), FMT_EINVAL);
    bad = m;
    bad.width = 0;
    ck_assert_int_eq(fmt_raw_writer_add(w, &bad, px), FMT_EINVAL);
    bad = m;
    bad.label = -2;
    ck_assert_int_eq(fmt_raw_writer_add(w, &bad, px), FMT_EINVAL);
    bad = m;
    bad.aux_len = 5;
    ck_assert_int_eq(fmt_raw_writer_add(w, &bad, px), FMT_EINVAL);
    bad = m;
    bad.height = bad.width = UINT32_MAX;
    ck_assert_int_eq(fmt_raw_writer_add(w, &bad, px), FMT_ETOOBIG);
    /* rejected arguments leave the writer usable and the shard untouched */
    ck_assert_uint_eq(fmt_raw_writer_count(w), 0);
    ck_assert_uint_eq(fmt_raw_writer_size(w), 256);
    /* aux pointer with zero length: no aux record */
    m.aux = px;
    ck_assert_int_eq(fmt_raw_writer_add(w, &m, px), 0);
    ck_assert_int_eq(fmt_raw_writer_finish(w, 0, NULL), 0);
    fmt_raw_shard *sh;
    ck_assert_int_eq(fmt_raw_open(&sh, path, NULL), 0);
    ck_assert_uint_eq(fmt_raw_count(sh), 1);
    uint32_t alen;
    ck_assert_ptr_null(fmt_raw_aux(sh, 0, &alen));
    ck_assert_mem_eq(fmt_raw_pixels(sh, 0), px, 12);
    fmt_raw_close(sh);
}
END_TEST

START_TEST(test_sample_cost)
{
    ck_assert_uint_eq(fmt_raw_sample_cost(1, 0, 256), 256 + 64);
    ck_assert_uint_eq(fmt_raw_sample_cost(256, 0, 256), 256 + 64);
    ck_assert_uint_eq(fmt_raw_sample_cost(257, 9, 256), 512 + 64 + 9);
    ck_assert_uint_eq(fmt_raw_sample_cost(150528, 0, 0), 151552 + 64);
    ck_assert_uint_eq(fmt_raw_sample_cost(UINT64_MAX - 10, 0, 4096), UINT64_MAX);
}
END_TEST

/* ---- corruption ---- */

/* A non-FIXED shard with aux records, as bytes in memory. */
static uint8_t *base_shard(size_t *len, int shapes)
{
    char path[4200];
    tu_path(path, sizeof path, "base.raw");
    tu_rng_state = 0xABCDEF;
    tu_sample *s = make_samples(6, shapes, 1);
    write_shard(path, s, 6, 256, 12, 34, 56);
    tu_samples_free(s, 6);
    uint8_t *buf = tu_slurp(path, len);
    unlink(path);
    return buf;
}

static int open_bytes(const uint8_t *buf, size_t len, fmt_msg *msg)
{
    char path[4200];
    tu_path(path, sizeof path, "victim.raw");
    tu_spit(path, buf, len);
    fmt_raw_shard *sh = (fmt_raw_shard *)&path;
    if (msg)
        memset(msg, 0, sizeof *msg);
    int rc = fmt_raw_open(&sh, path, msg);
    if (rc == 0)
        fmt_raw_close(sh);
    else
        ck_assert_ptr_null(sh);
    unlink(path);
    return rc;
}

static void rehash_header(uint8_t *buf)
{
    fmt_le_put64(buf + 248, XXH3_64bits(buf, 248));
}

/* Recompute index_hash (over index and aux up to the end of buf) and then the header hash, so that
 * only the structural checks can object to a crafted file. */
static void rehash_all(uint8_t *buf, size_t len)
{
    uint64_t index_offset = fmt_le_get64(buf + 32);
    fmt_le_put64(buf + 160, XXH3_64bits(buf + index_offset, len - index_offset));
    rehash_header(buf);
}

START_TEST(test_payload_corruption)
{
    size_t len;
    uint8_t *buf = base_shard(&len, TU_SHAPES_MIXED);
    uint64_t index_offset = fmt_le_get64(buf + 32);
    uint8_t *e3 = buf + index_offset + 3 * 64;
    uint64_t off = fmt_le_get64(e3), plen = fmt_le_get64(e3 + 8);
    buf[off + plen / 2] ^= 0x10;
    char path[4200];
    tu_path(path, sizeof path, "flipped.raw");
    tu_spit(path, buf, len);
    fmt_raw_shard *sh;
    ck_assert_int_eq(fmt_raw_open(&sh, path, NULL), 0);
    for (uint64_t i = 0; i < fmt_raw_count(sh); i++)
        ck_assert_int_eq(fmt_raw_check_sample(sh, i), i == 3 ? FMT_EHASH : 0);
    fmt_raw_close(sh);
    free(buf);
}
END_TEST

START_TEST(test_header_corruption)
{
    size_t len;
    uint8_t *buf = base_shard(&len, TU_SHAPES_MIXED);
    ck_assert_int_eq(open_bytes(buf, len, NULL), 0);
    const size_t spots[] = { 12, 16, 33, 64, 100, 113, 160, 200, 247, 248, 255 };
    for (size_t i = 0; i < sizeof spots / sizeof spots[0]; i++) {
        fmt_msg msg;
        buf[spots[i]] ^= 0x01;
        ck_assert_int_eq(open_bytes(buf, len, &msg), FMT_EHASH);
        ck_assert_str_eq(msg.text, "bad header hash");
        buf[spots[i]] ^= 0x01;
    }
    /* a flip in the padding after the header is not covered, and ignored */
    buf[FMT_RAW_HEADER_SIZE] = 0xFF;
    ck_assert_int_eq(open_bytes(buf, len, NULL), 0);
    free(buf);
}
END_TEST

START_TEST(test_index_corruption)
{
    size_t len;
    uint8_t *buf = base_shard(&len, TU_SHAPES_MIXED);
    uint64_t index_offset = fmt_le_get64(buf + 32), aux_offset = fmt_le_get64(buf + 40);
    ck_assert_uint_gt(len, aux_offset);
    const uint64_t spots[] = { index_offset, index_offset + 16, index_offset + 64 * 5 + 63,
                               aux_offset, len - 1 };
    for (size_t i = 0; i < sizeof spots / sizeof spots[0]; i++) {
        fmt_msg msg;
        buf[spots[i]] ^= 0x80;
        ck_assert_int_eq(open_bytes(buf, len, &msg), FMT_EHASH);
        ck_assert_str_eq(msg.text, "bad index hash");
        buf[spots[i]] ^= 0x80;
    }
    ck_assert_int_eq(open_bytes(buf, len, NULL), 0);
    free(buf);
}
END_TEST

/* A shard from its header and its index with the aux records alone (a shard that has not
 * arrived): the same entries and aux records as the file's open, no payloads; a changed byte of
 * the index or aux area, a header that does not match, or a tail of another length refused. */
START_TEST(test_open_parts)
{
    size_t len;
    uint8_t *buf = base_shard(&len, TU_SHAPES_MIXED);
    uint64_t index_offset = fmt_le_get64(buf + 32);
    size_t tl = len - (size_t)index_offset;
    char path[4200];
    tu_path(path, sizeof path, "whole.raw");
    tu_spit(path, buf, len);
    fmt_raw_shard *whole, *parts = (fmt_raw_shard *)&path;
    ck_assert_int_eq(fmt_raw_open(&whole, path, NULL), 0);
    ck_assert_int_eq(fmt_raw_open_parts(&parts, buf, buf + index_offset, tl, NULL), 0);
    ck_assert_uint_eq(fmt_raw_count(parts), 6);
    ck_assert_uint_eq(fmt_raw_get_header(parts)->header_hash,
                      fmt_raw_get_header(whole)->header_hash);
    ck_assert_uint_eq(fmt_raw_get_header(parts)->file_size, len);
    for (uint64_t i = 0; i < 6; i++) {
        fmt_raw_entry a, b;
        fmt_raw_get_entry(whole, i, &a);
        fmt_raw_get_entry(parts, i, &b);
        ck_assert(a.offset == b.offset && a.length == b.length && a.hash == b.hash &&
                  a.label == b.label && a.height == b.height && a.width == b.width &&
                  a.channels == b.channels && a.flags == b.flags && a.source == b.source);
        uint32_t la, lb;
        const uint8_t *xa = fmt_raw_aux(whole, i, &la), *xb = fmt_raw_aux(parts, i, &lb);
        ck_assert_uint_eq(la, lb);
        ck_assert_int_eq(xa == NULL, xb == NULL);
        if (la)
            ck_assert_int_eq(memcmp(xa, xb, la), 0);
        ck_assert_ptr_null(fmt_raw_pixels(parts, i));
        ck_assert_ptr_null(fmt_raw_stored(parts, i));
        ck_assert_int_eq(fmt_raw_check_sample(parts, i), FMT_EUNSUPPORTED);
    }
    int fd;
    ck_assert_int_eq(fmt_raw_fd_get(parts, 0, &fd), FMT_EUNSUPPORTED);
    fmt_raw_close(parts);
    fmt_raw_close(whole);
    unlink(path);
    fmt_msg msg;
    buf[len - 1] ^= 0x04;                   /* the last aux byte */
    ck_assert_int_eq(fmt_raw_open_parts(&parts, buf, buf + index_offset, tl, &msg), FMT_EHASH);
    ck_assert_str_eq(msg.text, "bad index hash");
    ck_assert_ptr_null(parts);
    buf[len - 1] ^= 0x04;
    ck_assert_int_eq(fmt_raw_open_parts(&parts, buf, buf + index_offset, tl - 1, &msg),
                     FMT_ETRUNC);
    buf[40] ^= 0x01;                        /* aux_offset: the header's own hash fails */
    ck_assert_int_eq(fmt_raw_open_parts(&parts, buf, buf + index_offset, tl, &msg), FMT_EHASH);
    ck_assert_str_eq(msg.text, "bad header hash");
    buf[40] ^= 0x01;
    /* an entry whose payload would pass the index, hashes made right: the entry checks */
    uint8_t *e0 = buf + index_offset;
    fmt_le_put64(e0, index_offset);
    rehash_all(buf, len);
    ck_assert_int_eq(fmt_raw_open_parts(&parts, buf, buf + index_offset, tl, &msg), FMT_ECORRUPT);
    free(buf);
}
END_TEST

START_TEST(test_truncation)
{
    size_t len;
    uint8_t *buf = base_shard(&len, TU_SHAPES_MIXED);
    uint64_t index_offset = fmt_le_get64(buf + 32);
    const size_t cuts[] = { 0, 1, 7, 8, 100, 255, 256, 257, 300, 600, (size_t)index_offset - 1,
                            (size_t)index_offset, (size_t)index_offset + 100,
                            (size_t)fmt_le_get64(buf + 40), len - 1 };
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        fmt_msg msg;
        int rc = open_bytes(buf, cuts[i], &msg);
        ck_assert_msg(rc == FMT_ETRUNC, "cut at %zu: %s", cuts[i], fmt_reason(&msg, rc));
        ck_assert_str_ne(msg.text, "");
    }
    /* a longer file than the header says is refused too */
    uint8_t *longer = calloc(1, len + 1);
    memcpy(longer, buf, len);
    ck_assert_int_eq(open_bytes(longer, len + 1, NULL), FMT_ECORRUPT);
    free(longer);
    free(buf);
}
END_TEST

START_TEST(test_bad_magic)
{
    size_t len;
    uint8_t *buf = base_shard(&len, TU_SHAPES_MIXED);
    fmt_msg msg;
    buf[0] = 'X';
    ck_assert_int_eq(open_bytes(buf, len, &msg), FMT_EFORMAT);
    ck_assert_str_eq(msg.text, "bad magic (not a raw shard)");
    ck_assert_int_eq(open_bytes((const uint8_t *)"hello world", 11, NULL), FMT_EFORMAT);
    ck_assert_int_eq(open_bytes((const uint8_t *)"SHARDRAX", 8, NULL), FMT_EFORMAT);
    fmt_raw_header h;
    ck_assert_int_eq(fmt_raw_decode_header(buf, &h, NULL), FMT_EFORMAT);
    free(buf);

    /* a directory and a missing file give errno values */
    fmt_raw_shard *sh;
    ck_assert_int_eq(fmt_raw_open(&sh, g_dir, NULL), EISDIR);
    char missing[4300];
    snprintf(missing, sizeof missing, "%s/missing.raw", g_dir);
    ck_assert_int_eq(fmt_raw_open(&sh, missing, NULL), ENOENT);
}
END_TEST

START_TEST(test_versions)
{
    size_t len;
    uint8_t *buf = base_shard(&len, TU_SHAPES_MIXED);
    fmt_msg msg;
    fmt_le_put16(buf + 8, 3);
    rehash_header(buf);
    ck_assert_int_eq(open_bytes(buf, len, &msg), FMT_EVERSION);
    fmt_raw_header h;
    ck_assert_int_eq(fmt_raw_decode_header(buf, &h, NULL), FMT_EVERSION);
    ck_assert_uint_eq(h.version_major, 3);
    fmt_le_put16(buf + 8, 0);
    rehash_header(buf);
    ck_assert_int_eq(open_bytes(buf, len, NULL), FMT_EVERSION);

    /* a later minor version with data in reserved space and unknown flag bits is read */
    fmt_le_put16(buf + 8, 1);
    fmt_le_put16(buf + 10, 7);
    buf[84] = 0x55;
    buf[170] = 0xAA;
    buf[247] = 0x01;
    fmt_le_put32(buf + 68, 0xF0);
    uint64_t index_offset = fmt_le_get64(buf + 32);
    buf[index_offset + 60] = 0x77;          /* entry reserved bytes */
    buf[index_offset + 39] = 0x80;          /* unknown entry flag bit */
    rehash_all(buf, len);
    ck_assert_int_eq(open_bytes(buf, len, &msg), 0);
    ck_assert_int_eq(fmt_raw_decode_header(buf, &h, NULL), 0);
    ck_assert_uint_eq(h.version_minor, 7);
    free(buf);
}
END_TEST

START_TEST(test_header_codec)
{
    fmt_raw_header h = {
        .version_major = 1, .version_minor = 3, .sample_count = 2, .first_index = 99,
        .index_offset = 4096 * 3, .aux_offset = 4096 * 3 + 128, .aux_size = 10,
        .file_size = 4096 * 3 + 138, .align = 4096, .flags = FMT_RAW_FLAG_FIXED,
        .fixed_height = 20, .fixed_width = 30, .fixed_channels = 3, .stride = 4096,
        .fingerprint = 0x0102030405060708ULL, .input_end = 1234,
        .channel_sum = { 1, 2, 3 }, .channel_sumsq = { 4, 5, 6 }, .index_hash = 0xFFEE,
        .header_hash = 42,
    };
    uint8_t b[FMT_RAW_HEADER_SIZE];
    fmt_raw_encode_header(&h, b);
    ck_assert_mem_eq(b, "SHARDRAW", 8);
    ck_assert_uint_eq(fmt_le_get64(b + 16), 2);
    ck_assert_uint_eq(fmt_le_get64(b + 96), 0x0102030405060708ULL);
    ck_assert_uint_eq(b[96], 0x08);     /* little-endian */
    ck_assert_uint_eq(fmt_le_get64(b + 248), XXH3_64bits(b, 248));
    fmt_raw_header d;
    fmt_msg msg = {{0}};
    int rc = fmt_raw_decode_header(b, &d, &msg);
    ck_assert_msg(rc == 0, "%s", fmt_reason(&msg, rc));
    ck_assert_uint_eq(d.version_major, 1);
    ck_assert_uint_eq(d.version_minor, 3);
    ck_assert_uint_eq(d.sample_count, h.sample_count);
    ck_assert_uint_eq(d.first_index, h.first_index);
    ck_assert_uint_eq(d.index_offset, h.index_offset);
    ck_assert_uint_eq(d.aux_offset, h.aux_offset);
    ck_assert_uint_eq(d.aux_size, h.aux_size);
    ck_assert_uint_eq(d.file_size, h.file_size);
    ck_assert_uint_eq(d.align, h.align);
    ck_assert_uint_eq(d.flags, h.flags);
    ck_assert_uint_eq(d.fixed_height, h.fixed_height);
    ck_assert_uint_eq(d.fixed_width, h.fixed_width);
    ck_assert_uint_eq(d.fixed_channels, h.fixed_channels);
    ck_assert_uint_eq(d.stride, h.stride);
    ck_assert_uint_eq(d.fingerprint, h.fingerprint);
    ck_assert_uint_eq(d.input_end, h.input_end);
    for (int c = 0; c < 3; c++) {
        ck_assert_uint_eq(d.channel_sum[c], h.channel_sum[c]);
        ck_assert_uint_eq(d.channel_sumsq[c], h.channel_sumsq[c]);
    }
    ck_assert_uint_eq(d.index_hash, h.index_hash);
    ck_assert_uint_eq(d.header_hash, fmt_le_get64(b + 248));
    ck_assert_uint_ne(d.header_hash, 42);   /* computed, not copied */
}
END_TEST

typedef struct {
    size_t off;
    int width;                  /* 2, 4 or 8 bytes; 0 ends the list */
    uint64_t value;
} patch;

typedef struct {
    const char *what;
    const char *reason;         /* the expected fmt_msg, NULL: not checked */
    int want;
    patch p[5];
} header_case;

/* Apply p to a copy of the header of buf, re-hash it and expect ECORRUPT or ETRUNC from both the
 * header decoder (where it can tell) and fmt_raw_open. */
static void expect_bad_header(const uint8_t *buf, size_t len, const header_case *hc)
{
    const patch *p = hc->p;
    uint8_t *copy = malloc(len);
    memcpy(copy, buf, len);
    for (size_t i = 0; i < 5 && p[i].width; i++) {
        if (p[i].width == 8)
            fmt_le_put64(copy + p[i].off, p[i].value);
        else if (p[i].width == 4)
            fmt_le_put32(copy + p[i].off, (uint32_t)p[i].value);
        else
            fmt_le_put16(copy + p[i].off, (uint16_t)p[i].value);
    }
    rehash_header(copy);
    fmt_msg msg;
    int rc = open_bytes(copy, len, &msg);
    ck_assert_msg(rc == hc->want, "%s: got %d (%s)", hc->what, rc, fmt_reason(&msg, rc));
    if (hc->reason)
        ck_assert_str_eq(msg.text, hc->reason);
    free(copy);
}

START_TEST(test_crafted_headers)
{
    size_t len;
    uint8_t *buf = base_shard(&len, TU_SHAPES_MIXED);
    uint64_t n = fmt_le_get64(buf + 16), io = fmt_le_get64(buf + 32), ao = fmt_le_get64(buf + 40), as = fmt_le_get64(buf + 48);
    const int C = FMT_ECORRUPT, T = FMT_ETRUNC;
    ck_assert_uint_ge(as, 64);
    ck_assert_uint_eq(ao, io + 64 * n);
    const header_case cases[] = {
        { "header_size", "bad header size 512", C, { { 12, 4, 512 } } },
        { "align 0", "bad alignment 0", C, { { 64, 4, 0 } } },
        { "align 64", "bad alignment 64", C, { { 64, 4, 64 } } },
        { "align not a power of two", "bad alignment 768", C, { { 64, 4, 768 } } },
        { "align 2 MiB", "bad alignment 2097152", C, { { 64, 4, 2u << 20 } } },
        { "index_offset near UINT64_MAX", "index extends past end of file", C,
          { { 32, 8, UINT64_MAX - 63 } } },
        { "index_offset below align", "bad index offset 128", C, { { 32, 8, 128 } } },
        { "index_offset not a multiple of 64", NULL, C, { { 32, 8, io + 8 } } },
        { "sample_count huge", "index extends past end of file", C, { { 16, 8, UINT64_MAX / 2 } } },
        { "sample_count wrapping", "index extends past end of file", C,
          { { 16, 8, (1ULL << 58) + n } } },
        { "sample_count one more", "aux area does not follow the index", C, { { 16, 8, n + 1 } } },
        { "aux_offset not after the index", "aux area does not follow the index", C,
          { { 40, 8, ao + 64 } } },
        { "aux_size overflowing", "aux area does not end at end of file", C,
          { { 48, 8, UINT64_MAX } } },
        { "aux_size past the end", "aux area does not end at end of file", C,
          { { 48, 8, as + 1 } } },
        { "aux_size wrapping to 0", "aux area does not end at end of file", C,
          { { 48, 8, UINT64_MAX - ao + 1 } } },
        { "file_size huge", NULL, T, { { 56, 8, UINT64_MAX }, { 48, 8, UINT64_MAX - ao } } },
        { "file_size short", NULL, C, { { 56, 8, len - 64 }, { 48, 8, as - 64 } } },
        { "file_size long", NULL, T, { { 56, 8, len + 4096 }, { 48, 8, as + 4096 } } },
        { "FIXED on mixed shapes", "entry 0: does not match the fixed layout", C,
          { { 68, 4, FMT_RAW_FLAG_FIXED }, { 72, 4, 5 }, { 76, 4, 5 }, { 80, 4, 1 },
            { 88, 8, 256 } } },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_bad_header(buf, len, &cases[i]);
    free(buf);
}
END_TEST

START_TEST(test_crafted_fixed_headers)
{
    size_t len;
    uint8_t *buf = base_shard(&len, TU_SHAPES_FIXED_RGB);   /* 10x10x3, stride 512 at align 256 */
    ck_assert_uint_eq(fmt_le_get64(buf + 88), 512);
    ck_assert_int_eq(open_bytes(buf, len, NULL), 0);
    const int C = FMT_ECORRUPT;
    const header_case cases[] = {
        { "stride 0", "bad stride 0", C, { { 88, 8, 0 } } },
        { "stride too small", "bad stride 256", C, { { 88, 8, 256 } } },
        { "stride too large", "bad stride 768", C, { { 88, 8, 768 } } },
        { "stride huge", "bad stride 18446744073709551360", C, { { 88, 8, UINT64_MAX - 255 } } },
        { "fixed_channels 2", "bad fixed shape 10x10x2", C, { { 80, 4, 2 } } },
        { "fixed_height 0", "bad fixed shape 0x10x3", C, { { 72, 4, 0 } } },
        { "fixed shape differs from entries", "entry 0: does not match the fixed layout", C,
          { { 72, 4, 5 }, { 88, 8, 256 } } },
        { "fixed shape overflowing", "bad fixed shape 4294967295x4294967295x3", C,
          { { 72, 4, UINT32_MAX }, { 76, 4, UINT32_MAX }, { 80, 4, 3 } } },
        { "fixed payloads past the index", "fixed payloads extend past the index", C,
          { { 72, 4, 1u << 20 }, { 76, 4, 1u << 20 }, { 88, 8, 3ULL << 40 } } },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_bad_header(buf, len, &cases[i]);
    /* decode alone reports the specific reason */
    uint8_t h[FMT_RAW_HEADER_SIZE];
    memcpy(h, buf, sizeof h);
    fmt_le_put64(h + 16, UINT64_MAX / 2);
    rehash_header(h);
    fmt_raw_header d;
    fmt_msg msg = {{0}};
    ck_assert_int_eq(fmt_raw_decode_header(h, &d, &msg), FMT_ECORRUPT);
    ck_assert_str_eq(msg.text, "index extends past end of file");
    free(buf);
}
END_TEST

/* Patch entry i of a shard image at field offset off, re-hash index and header, expect rc. */
static void expect_bad_entry(const uint8_t *buf, size_t len, uint64_t i, size_t off, int width,
                             uint64_t value, int want, const char *what)
{
    uint8_t *copy = malloc(len);
    memcpy(copy, buf, len);
    uint8_t *e = copy + fmt_le_get64(copy + 32) + i * 64 + off;
    if (width == 8)
        fmt_le_put64(e, value);
    else if (width == 4)
        fmt_le_put32(e, (uint32_t)value);
    else
        fmt_le_put16(e, (uint16_t)value);
    rehash_all(copy, len);
    fmt_msg msg;
    int rc = open_bytes(copy, len, &msg);
    ck_assert_msg(rc == want, "%s: got %d (%s)", what, rc, fmt_reason(&msg, rc));
    free(copy);
}

START_TEST(test_crafted_entries)
{
    size_t len;
    uint8_t *buf = base_shard(&len, TU_SHAPES_MIXED);
    const int C = FMT_ECORRUPT;
    uint64_t io = fmt_le_get64(buf + 32), as = fmt_le_get64(buf + 48);
    const uint8_t *ix = buf + io;
    ck_assert_uint_eq(fmt_le_get64(buf + 68) & FMT_RAW_FLAG_FIXED, 0);
    ck_assert_uint_eq(fmt_le_get32(ix + 38) & 0xFFFF, FMT_RAW_ENTRY_AUX);   /* entry 0 has aux */
    ck_assert_uint_eq(fmt_le_get32(ix + 64 + 38) & 0xFFFF, 0);              /* entry 1 has none */

    /* control: re-hashing alone keeps the file valid, so the failures below are structural */
    expect_bad_entry(buf, len, 0, 24, 4, fmt_le_get32(ix + 24), 0, "control");
    expect_bad_entry(buf, len, 3, 24, 4, (uint32_t)-1, 0, "label -1");
    expect_bad_entry(buf, len, 1, 48, 8, UINT64_MAX, 0, "aux_off ignored without AUX");
    expect_bad_entry(buf, len, 1, 38, 2, FMT_RAW_ENTRY_AUX, 0, "empty aux record");

    expect_bad_entry(buf, len, 2, 0, 8, fmt_le_get64(ix + 64), C, "overlaps the previous payload");
    expect_bad_entry(buf, len, 1, 0, 8, fmt_le_get64(ix + 128), C, "after the next payload");
    expect_bad_entry(buf, len, 0, 0, 8, 0, C, "inside the header area");
    expect_bad_entry(buf, len, 5, 0, 8, io, C, "at the index");
    expect_bad_entry(buf, len, 5, 0, 8, io + 4096, C, "past the index");
    expect_bad_entry(buf, len, 5, 0, 8, UINT64_MAX & ~(uint64_t)255, C, "offset + length wraps");
    expect_bad_entry(buf, len, 1, 0, 8, fmt_le_get64(ix + 64) + 64, C, "offset not aligned");
    expect_bad_entry(buf, len, 2, 8, 8, fmt_le_get64(ix + 128 + 8) + 1, C, "length not the shape");
    expect_bad_entry(buf, len, 2, 8, 8, UINT64_MAX, C, "length huge");
    expect_bad_entry(buf, len, 2, 36, 2, 2, C, "channels 2");
    expect_bad_entry(buf, len, 2, 36, 2, 0, C, "channels 0");
    expect_bad_entry(buf, len, 2, 28, 4, 0, C, "height 0");
    expect_bad_entry(buf, len, 2, 32, 4, 0, C, "width 0");
    expect_bad_entry(buf, len, 2, 28, 4, UINT32_MAX, C, "height huge");
    expect_bad_entry(buf, len, 3, 24, 4, (uint32_t)-2, C, "label -2");
    expect_bad_entry(buf, len, 0, 48, 8, as, C, "aux record past the aux area");
    expect_bad_entry(buf, len, 0, 48, 8, UINT64_MAX - 1, C, "aux record wrapping");
    expect_bad_entry(buf, len, 0, 56, 4, (uint32_t)as + 1, C, "aux record too long");
    free(buf);

    /* a FIXED shard whose entry keeps the length but changes the shape */
    buf = base_shard(&len, TU_SHAPES_FIXED_RGB);
    ck_assert_uint_eq(fmt_le_get64(buf + 68) & FMT_RAW_FLAG_FIXED, FMT_RAW_FLAG_FIXED);
    expect_bad_entry(buf, len, 2, 28, 4, 5, C, "fixed: height 5 (then 5x20x3 = 300)");
    uint8_t *copy = malloc(len);
    memcpy(copy, buf, len);
    uint8_t *e2 = copy + fmt_le_get64(copy + 32) + 2 * 64;
    fmt_le_put32(e2 + 28, 5);
    fmt_le_put32(e2 + 32, 20);
    rehash_all(copy, len);
    fmt_msg msg;
    ck_assert_int_eq(open_bytes(copy, len, &msg), C);
    ck_assert_str_eq(msg.text, "entry 2: does not match the fixed layout");
    free(copy);
    free(buf);
}
END_TEST

/* ---- writer I/O failures ---- */

/* In a child with RLIMIT_FSIZE = limit (SIGXFSZ ignored, so writes past it fail with EFBIG): write
 * samples of 4096 bytes at align 4096 and report {add rcs..., finish rc, tmp exists, final exists}
 * through a pipe. */
static void fsize_child(const char *path, rlim_t limit, int nadd, int out[8])
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int r[8] = {0};
        close(fds[0]);
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = { limit, limit };
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
            _exit(2);
        static uint8_t px[4096];
        memset(px, 0x5A, sizeof px);
        fmt_sample_meta m = { .height = 64, .width = 64, .channels = 1 };
        m.hash = fmt_hash64(px, sizeof px);
        fmt_raw_writer *w;
        fmt_raw_writer_opts o = { .align = 4096 };
        if (fmt_raw_writer_open(&w, path, &o) != 0)
            _exit(3);
        for (int i = 0; i < nadd; i++)
            r[i] = fmt_raw_writer_add(w, &m, px);
        r[nadd] = fmt_raw_writer_finish(w, 0, NULL);
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        r[nadd + 1] = tu_exists(tmp);
        r[nadd + 2] = tu_exists(path);
        if (write(fds[1], r, sizeof r) != (ssize_t)sizeof r)
            _exit(4);
        _exit(0);
    }
    close(fds[1]);
    ck_assert_int_eq(read(fds[0], out, 8 * sizeof(int)), (ssize_t)(8 * sizeof(int)));
    close(fds[0]);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

START_TEST(test_write_failure_fsize)
{
    char path[4200];
    tu_path(path, sizeof path, "shard-00009.raw");
    int r[8];
    /* the second payload is cut short by the limit; the writer then stays failed */
    fsize_child(path, 4096 * 2 + 1000, 3, r);
    ck_assert_int_eq(r[0], 0);
    ck_assert_int_eq(r[1], EFBIG);
    ck_assert_int_eq(r[2], FMT_ESTATE);
    ck_assert_int_eq(r[3], EFBIG);          /* finish reports the original error */
    ck_assert_int_eq(r[4], 0);              /* no temp file */
    ck_assert_int_eq(r[5], 0);              /* no final file */
    /* payloads fit exactly; the index does not */
    fsize_child(path, 4096 * 3, 2, r);
    ck_assert_int_eq(r[0], 0);
    ck_assert_int_eq(r[1], 0);
    ck_assert_int_eq(r[2], EFBIG);
    ck_assert_int_eq(r[3], 0);
    ck_assert_int_eq(r[4], 0);
    ck_assert(!tu_exists(path));
}
END_TEST

START_TEST(test_write_failure_enospc)
{
    if (access("/dev/full", W_OK) != 0)
        return; /* no /dev/full here: the rlimit test covers the failed state */
    char path[4200], tmp[4200];
    tu_path(path, sizeof path, "full.raw");
    tu_path(tmp, sizeof tmp, "full.raw.tmp");
    uint8_t px[300] = {0};
    fmt_sample_meta m = { .height = 10, .width = 10, .channels = 3 };
    for (int finish = 0; finish < 2; finish++) {
        ck_assert_int_eq(symlink("/dev/full", tmp), 0);
        fmt_raw_writer *w;
        ck_assert_int_eq(fmt_raw_writer_open(&w, path, &(fmt_raw_writer_opts){ .align = 256 }), 0);
        ck_assert_int_eq(fmt_raw_writer_add(w, &m, px), ENOSPC);
        ck_assert_int_eq(fmt_raw_writer_add(w, &m, px), FMT_ESTATE);
        ck_assert_uint_eq(fmt_raw_writer_count(w), 0);
        if (finish)
            ck_assert_int_eq(fmt_raw_writer_finish(w, 0, NULL), ENOSPC);
        else
            fmt_raw_writer_abort(w);
        ck_assert(!tu_exists(tmp));
        ck_assert(!tu_exists(path));
    }
}
END_TEST

START_TEST(test_rename_failure)
{
    /* the final name is taken by a non-empty directory: rename fails, the temp file goes */
    char path[4200], tmp[4200], inner[4300];
    tu_path(path, sizeof path, "taken.raw");
    tu_path(tmp, sizeof tmp, "taken.raw.tmp");
    snprintf(inner, sizeof inner, "%s/x", path);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    tu_spit(inner, (const uint8_t *)"x", 1);
    fmt_raw_writer *w;
    ck_assert_int_eq(fmt_raw_writer_open(&w, path, NULL), 0);
    int rc = fmt_raw_writer_finish(w, 0, NULL);
    ck_assert_int_gt(rc, 0);
    ck_assert(!tu_exists(tmp));
    unlink(inner);
    rmdir(path);
}
END_TEST

/* ---- pixel sums ---- */

static void naive_sums(const uint8_t *p, size_t npix, uint32_t c, uint64_t s[3], uint64_t q[3])
{
    for (size_t i = 0; i < npix; i++) {
        for (uint32_t k = 0; k < c; k++) {
            uint64_t v = p[i * c + k];
            s[k] += v;
            q[k] += v * v;
        }
    }
}

static void check_sums(const uint8_t *p, size_t npix, uint32_t c)
{
    uint64_t s1[3] = { 5, 6, 7 }, q1[3] = { 8, 9, 10 }, s2[3] = { 5, 6, 7 }, q2[3] = { 8, 9, 10 };
    naive_sums(p, npix, c, s1, q1);
    fmt_pixel_sums(p, npix, c, s2, q2);
    for (int k = 0; k < 3; k++) {
        ck_assert_msg(s1[k] == s2[k] && q1[k] == q2[k], "npix %zu channels %u: channel %d",
                      npix, c, k);
    }
}

START_TEST(test_pixel_sums)
{
    const size_t big = (size_t)48 * 65536 * 2 + 1000;
    uint8_t *p = malloc(big);
    ck_assert_ptr_nonnull(p);
    tu_rng_state = 99;
    for (size_t i = 0; i < big; i++)
        p[i] = (uint8_t)tu_rng();
    const size_t n1[] = { 0, 1, 47, 48, 49, 1001, 48 * 65536 - 1, 48 * 65536, 48 * 65536 + 17,
                          2 * 48 * 65536 + 5 };
    for (size_t i = 0; i < sizeof n1 / sizeof n1[0]; i++)
        check_sums(p, n1[i], 1);
    const size_t n3[] = { 0, 1, 15, 16, 17, 333, 16 * 65536 - 1, 16 * 65536 + 1,
                          2 * 16 * 65536 + 7 };
    for (size_t i = 0; i < sizeof n3 / sizeof n3[0]; i++) {
        check_sums(p, n3[i], 3);
        check_sums(p + 1, n3[i], 3);    /* unaligned start */
    }
    check_sums(p, 24 * 65536 + 3, 2);
    /* all 255: the per-chunk 32-bit lanes must not overflow */
    memset(p, 255, big);
    check_sums(p, 2 * 48 * 65536 + 5, 1);
    check_sums(p, 2 * 16 * 65536 + 7, 3);
    uint64_t s[3] = {0}, q[3] = {0};
    fmt_pixel_sums(p, 2 * 16 * 65536 + 7, 3, s, q);
    ck_assert_uint_eq(s[2], 255ULL * (2 * 16 * 65536 + 7));
    ck_assert_uint_eq(q[2], 65025ULL * (2 * 16 * 65536 + 7));
    free(p);
}
END_TEST

/* ---- version 2: the packed layout (no alignment given) ---- */

/* Samples of one shape hxwxc, or (h == 0) of shapes drawn from a mix of tiny, mid-sized and
 * large (>= FMT_RAW_RUN_BYTES) ones. */
static tu_sample *make_packed_samples(size_t n, uint32_t h, uint32_t w, uint32_t c)
{
    tu_sample *s = calloc(n, sizeof *s);
    ck_assert_ptr_nonnull(s);
    for (size_t i = 0; i < n; i++) {
        if (h) {
            s[i].h = h, s[i].w = w, s[i].c = c;
        } else {
            static const uint32_t side[] = {1, 8, 37, 100, 150, 160};
            s[i].h = side[tu_rng() % 6];
            s[i].w = side[tu_rng() % 6];
            s[i].c = (tu_rng() & 1) ? 3 : 1;
        }
        s[i].label = (int32_t)(i % 7);
        s[i].source = i;
        size_t len = (size_t)s[i].h * s[i].w * s[i].c;
        s[i].px = malloc(len);
        ck_assert_ptr_nonnull(s[i].px);
        for (size_t k = 0; k < len; k++)
            s[i].px[k] = (uint8_t)tu_rng();
        if (i % 5 == 0) {
            s[i].aux_len = 16;
            s[i].aux = malloc(16);
            ck_assert_ptr_nonnull(s[i].aux);
            memset(s[i].aux, (int)i, 16);
        }
    }
    return s;
}

/* Write s with no alignment given, then check the layout against raw.md's rule (computed here
 * independently), the zero padding, every pixel mapped and unmapped, and return the file size. */
static uint64_t packed_roundtrip(const tu_sample *s, size_t n)
{
    char path[4200];
    tu_path(path, sizeof path, "shard-00000.raw");
    fmt_raw_writer *w;
    ck_assert_int_eq(fmt_raw_writer_open(&w, path, &(fmt_raw_writer_opts){ .first_index = 3 }), 0);
    for (size_t i = 0; i < n; i++) {
        fmt_sample_meta m;
        tu_sample_meta(&s[i], &m);
        ck_assert_int_eq(fmt_raw_writer_add(w, &m, s[i].px), 0);
    }
    uint64_t predicted = fmt_raw_writer_size(w);
    ck_assert_int_eq(fmt_raw_writer_finish(w, 9, NULL), 0);

    /* the rule: after the previous payload, unless the payload is at least a run long or would
     * cross the end of the current run; then at the next multiple of 4096, starting a run */
    const uint64_t run = FMT_RAW_RUN_BYTES;
    uint64_t pos = 4096, run_start = 4096, aux_total = 0;
    uint64_t *off = calloc(n ? n : 1, sizeof *off);
    ck_assert_ptr_nonnull(off);
    for (size_t i = 0; i < n; i++) {
        uint64_t len = tu_sample_len(&s[i]);
        if (len >= run || pos - run_start + len > run)
            pos = run_start = round_up(pos, 4096);
        off[i] = pos;
        pos += len;
        aux_total += s[i].aux_len;
    }
    size_t flen;
    uint8_t *file = tu_slurp(path, &flen);
    ck_assert_uint_eq(flen, predicted);
    fmt_raw_shard *sh;
    for (int mapped = 0; mapped < 2; mapped++) {
        fmt_msg msg;
        ck_assert_int_eq(fmt_raw_open_ex(&sh, path, mapped ? 0 : FMT_RAW_OPEN_NOMAP, &msg), 0);
        const fmt_raw_header *h = fmt_raw_get_header(sh);
        ck_assert_uint_eq(h->version_major, 2);
        ck_assert_uint_eq(h->data_offset, 4096);
        ck_assert_uint_eq(h->align, 4096);
        ck_assert_uint_eq(h->stride, 0);
        ck_assert_uint_eq(h->index_offset, round_up(pos, 64));
        ck_assert_uint_eq(h->file_size, round_up(pos, 64) + 64 * n + aux_total);
        ck_assert_uint_eq(h->first_index, 3);
        ck_assert_uint_eq(h->input_end, 9);
        for (size_t i = 0; i < n; i++) {
            fmt_raw_entry e;
            fmt_raw_get_entry(sh, i, &e);
            ck_assert_uint_eq(e.offset, off[i]);
            ck_assert_uint_eq(e.length, tu_sample_len(&s[i]));
            ck_assert_uint_eq(e.stored, e.length);
            ck_assert_uint_eq(e.codec, FMT_RAW_CODEC_NONE);
            ck_assert_int_eq(e.label, s[i].label);
            ck_assert_mem_eq(file + e.offset, s[i].px, (size_t)e.length);
            const uint8_t *px = fmt_raw_pixels(sh, i);
            if (mapped)
                ck_assert_mem_eq(px, s[i].px, (size_t)e.length);
            else
                ck_assert_ptr_null(px);
            uint32_t alen;
            const uint8_t *aux = fmt_raw_aux(sh, i, &alen);
            ck_assert_uint_eq(alen, s[i].aux_len);
            if (alen)
                ck_assert_mem_eq(aux, s[i].aux, alen);
            ck_assert_int_eq(fmt_raw_check_sample(sh, i), 0);
            /* padding in front of a payload (up to the previous one's end) is zero */
            uint64_t prev_end = i ? off[i - 1] + tu_sample_len(&s[i - 1]) : FMT_RAW_HEADER_SIZE;
            for (uint64_t k = prev_end; k < e.offset; k++)
                ck_assert_uint_eq(file[k], 0);
        }
        fmt_raw_close(sh);
    }
    free(off);
    free(file);
    return flen;
}

START_TEST(test_packed_layout)
{
    tu_rng_state = 0x5eed0002;
    /* tiny samples: packed, not one page each (version 1 at 4096 would be 21x the pixels) */
    size_t n = 2000;
    tu_sample *s = make_packed_samples(n, 8, 8, 3);
    uint64_t size = packed_roundtrip(s, n);
    uint64_t pixels = 192 * n, aux = 16 * (n / 5);
    ck_assert_uint_le(size, 4096 + pixels + pixels / 50 + 64 * n + aux + 64);
    uint64_t cost = 0;
    for (size_t i = 0; i < n; i++)
        cost += fmt_raw_sample_cost(192, s[i].aux_len, 0);
    /* the cost of a fixed shape is its share of a run: within a run's padding of the real size */
    ck_assert_uint_le(cost + 4096, size + 4096);
    ck_assert_uint_ge(cost + 4096 + 4096, size);
    tu_samples_free(s, n);

    /* large samples start at page boundaries */
    s = make_packed_samples(5, 160, 150, 3);
    packed_roundtrip(s, 5);
    tu_samples_free(s, 5);

    /* a mix of every size; and an empty shard */
    s = make_packed_samples(300, 0, 0, 0);
    packed_roundtrip(s, 300);
    tu_samples_free(s, 300);
    packed_roundtrip(NULL, 0);
}
END_TEST

START_TEST(test_packed_cost)
{
    /* large: page-rounded; small: a run of k shared by k samples */
    ck_assert_uint_eq(fmt_raw_sample_cost(150528, 0, 0), 151552 + 64);
    ck_assert_uint_eq(fmt_raw_sample_cost(65536, 3, 0), 65536 + 64 + 3);
    ck_assert_uint_eq(fmt_raw_sample_cost(192, 0, 0), (65536 + 340) / 341 + 64);
    ck_assert_uint_eq(fmt_raw_sample_cost(40000, 0, 0), 40960 + 64);
    ck_assert_uint_eq(fmt_raw_sample_cost(0, 0, 0), 64);
    ck_assert_uint_eq(fmt_raw_sample_cost(UINT64_MAX - 10, 0, 0), UINT64_MAX);
}
END_TEST

START_TEST(test_packed_corruption)
{
    /* a version 2 shard of a few samples, then damaged entries and header fields */
    tu_rng_state = 0x5eed0003;
    tu_sample *s = make_packed_samples(6, 0, 0, 0);
    packed_roundtrip(s, 6);
    tu_samples_free(s, 6);
    char path[4200];
    tu_path(path, sizeof path, "shard-00000.raw");
    size_t len;
    uint8_t *orig = tu_slurp(path, &len), *buf = malloc(len);
    ck_assert_ptr_nonnull(buf);
    uint64_t ix = fmt_le_get64(orig + 32);
    fmt_msg msg;
    fmt_raw_shard *sh;
    struct { size_t at; int width; uint64_t value; int rc; const char *text; } cases[] = {
        { 168, 8, 100, FMT_ECORRUPT, "bad data offset 100" },
        { 168, 8, ix + 64, FMT_ECORRUPT, "bad index offset" },
        { 168, 8, 8192, FMT_ECORRUPT, "entry 0: payload starts before the data area" },
        { (size_t)ix + 64 + 0, 8, 0, FMT_ECORRUPT, "entry 1: payload overlaps the previous one" },
        { (size_t)ix + 64 + 0, 8, ix - 1, FMT_ECORRUPT, "entry 1: payload extends past the data area" },
        { (size_t)ix + 39, 1, 0x0f, FMT_EUNSUPPORTED, "entry 0: unknown codec 15" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(buf, orig, len);
        if (cases[i].width == 8)
            fmt_le_put64(buf + cases[i].at, cases[i].value);
        else
            buf[cases[i].at] = (uint8_t)cases[i].value;
        rehash_all(buf, len);
        tu_spit(path, buf, len);
        ck_assert_int_eq(fmt_raw_open(&sh, path, &msg), cases[i].rc);
        ck_assert_msg(strstr(msg.text, cases[i].text) != NULL, "case %zu: '%s'", i, msg.text);
    }
    free(buf);
    free(orig);
}
END_TEST

int main(void)
{
    return tu_run(TU_TEMP_SUITE("raw", "raw", 60, test_roundtrip_fixed_gray,
                                test_roundtrip_fixed_rgb, test_roundtrip_mixed,
                                test_exact_align_payload, test_empty_shard, test_tmp_and_abort,
                                test_writer_bad_args, test_sample_cost, test_payload_corruption,
                                test_header_corruption, test_index_corruption, test_open_parts,
                                test_truncation, test_bad_magic, test_versions, test_header_codec,
                                test_crafted_headers, test_crafted_fixed_headers,
                                test_crafted_entries, test_write_failure_fsize,
                                test_write_failure_enospc, test_rename_failure, test_pixel_sums,
                                test_packed_layout, test_packed_cost, test_packed_corruption));
}
