/* test_lmdb.c - the lmdb backend, used only through its fmt_backend table: round trips, the layout
 * that liblmdb and the standard tools see (formats/lmdb.md), atomic writing, damage, crafted
 * environments and concurrent reads. */
#include "testutil.h"

#include <check.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "fdcache.h"

#define LM_VALUE_HEADER_TEST 48

static const fmt_backend *const be = &fmt_backend_lmdb;

static void be64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (56 - 8 * i));
}

/* ---- fixtures: samples written to a shard ---- */

/* Fixed RGB is 32x30x3, 2880 bytes: an overflow value; mixed shapes go from 1 byte (a leaf
 * value) to 60x60x3 (an overflow value). */
static tu_sample *make_samples(size_t n, int shapes, int with_aux)
{
    return tu_samples_make(n, shapes, 32, 30, 60, with_aux ? TU_AUX_VARIED : 0);
}

typedef struct {
    const char *name;
    uint64_t first_index, fingerprint, input_end;
    int replace;                /* an older shard of this name tu_exists until finish */
} tshard;

static void shard_paths(const char *name, char *fin, char *tmp, char *data, size_t n)
{
    snprintf(fin, n, "%s/%s.lmdb", g_dir, name);
    if (tmp)
        snprintf(tmp, n, "%s/%s.lmdb.tmp", g_dir, name);
    if (data)
        snprintf(data, n, "%s/%s.lmdb/data.mdb", g_dir, name);
}

/* Write samples through the table, asserting the temporary/final names and the size accounting
 * after every add; *info receives what finish says, *projected the last w_size. */
static void write_shard(const tshard *t, const tu_sample *s, size_t n, fmt_shard_info *info,
                        uint64_t *projected)
{
    char fin[1400], tmp[1400], data[1400];
    shard_paths(t->name, fin, tmp, data, sizeof fin);
    fmt_writer_opts o = {.dir = g_dir, .name = t->name, .first_index = t->first_index,
                         .fingerprint = t->fingerprint};
    void *w;
    ck_assert_int_eq(be->w_open(&w, &o), 0);
    ck_assert(tu_is_dir(tmp));
    ck_assert(t->replace ? tu_is_dir(fin) : !tu_exists(fin));
    uint64_t size = be->w_size(w);
    ck_assert_uint_gt(size, 0);
    for (size_t i = 0; i < n; i++) {
        fmt_sample_meta m;
        tu_sample_meta(&s[i], &m);
        uint64_t stored = 0;
        ck_assert_int_eq(be->w_add(w, &m, s[i].px, &stored), 0);
        ck_assert_uint_eq(stored, m.hash);
        uint64_t cost = be->w_cost(tu_sample_len(&s[i]), s[i].aux_len, 0);
        ck_assert_uint_gt(cost, tu_sample_len(&s[i]) + s[i].aux_len);
        size += cost;
        ck_assert_uint_eq(be->w_size(w), size);
        ck_assert_uint_eq(be->w_count(w), i + 1);
    }
    ck_assert(t->replace ? tu_is_dir(fin) : !tu_exists(fin));
    ck_assert_int_eq(be->w_finish(w, t->input_end, info), 0);
    ck_assert(!tu_exists(tmp));
    ck_assert(tu_is_dir(fin));
    int only = 0;
    ck_assert_uint_eq(tu_dir_entries(fin, "data.mdb", &only), 1);   /* no lock.mdb */
    ck_assert(only);
    ck_assert_uint_eq(info->bytes, tu_file_size(data));
    /* the projection bounds the real size (--shard-size relies on it) */
    ck_assert_uint_le(info->bytes, size);
    if (projected)
        *projected = size;
}

static void expected_sums(const tu_sample *s, size_t n, uint64_t sum[3], uint64_t sumsq[3])
{
    memset(sum, 0, 3 * sizeof *sum);
    memset(sumsq, 0, 3 * sizeof *sumsq);
    for (size_t i = 0; i < n; i++) {
        for (uint64_t k = 0; k < tu_sample_len(&s[i]); k++) {
            uint64_t v = s[i].px[k];
            sum[k % s[i].c] += v;
            sumsq[k % s[i].c] += v * v;
        }
    }
}

static void *open_shard(const char *name, fmt_access access)
{
    char fin[1400];
    shard_paths(name, fin, NULL, NULL, sizeof fin);
    void *r = (void *)1;
    fmt_msg msg = {{0}};
    int rc = be->r_open(&r, g_dir, fin, access, &msg);
    ck_assert_msg(rc == 0, "open %s: %s", fin, fmt_reason(&msg, rc));
    ck_assert_ptr_nonnull(r);
    return r;
}

/* Everything the reader says about the shard against the fixture. */
static void check_shard(const tshard *t, const tu_sample *s, size_t n, const fmt_shard_info *winfo,
                        fmt_access access)
{
    void *r = open_shard(t->name, access);
    const fmt_shard_info *ri = be->r_info(r);
    ck_assert_uint_eq(ri->samples, n);
    ck_assert_uint_eq(ri->first_index, t->first_index);
    ck_assert_uint_eq(ri->fingerprint, t->fingerprint);
    ck_assert_uint_eq(ri->input_end, t->input_end);
    ck_assert_uint_eq(ri->bytes, winfo->bytes);
    ck_assert_uint_eq(ri->hash, winfo->hash);
    uint64_t sum[3], sumsq[3];
    expected_sums(s, n, sum, sumsq);
    for (int c = 0; c < 3; c++) {
        ck_assert_uint_eq(ri->sum[c], sum[c]);
        ck_assert_uint_eq(ri->sumsq[c], sumsq[c]);
        ck_assert_uint_eq(winfo->sum[c], sum[c]);
        ck_assert_uint_eq(winfo->sumsq[c], sumsq[c]);
    }
    ck_assert_uint_eq(winfo->samples, n);
    ck_assert_uint_eq(winfo->first_index, t->first_index);
    ck_assert_uint_eq(winfo->fingerprint, t->fingerprint);
    ck_assert_uint_eq(winfo->input_end, t->input_end);

    for (size_t i = 0; i < n; i++) {
        fmt_sample smp;
        memset(&smp, 0xAB, sizeof smp);
        tu_get_sample(be, r, i, &s[i], &smp);
        uint64_t len = tu_sample_len(&s[i]);
        ck_assert_uint_eq(smp.hash, fmt_hash64(s[i].px, len));
        ck_assert_ptr_nonnull(smp.pixels);     /* zero copy in every access mode */
        ck_assert_mem_eq(smp.pixels, s[i].px, len);
        ck_assert_uint_eq(smp.aux_len, s[i].aux_len);
        if (s[i].aux) {
            ck_assert_ptr_nonnull(smp.aux);
            ck_assert_mem_eq(smp.aux, s[i].aux, s[i].aux_len);
        } else {
            ck_assert_ptr_null(smp.aux);
        }
        uint8_t *buf = malloc(len + 1);
        ck_assert_ptr_nonnull(buf);
        memset(buf, 0x5A, len + 1);
        ck_assert_int_eq(be->r_read(r, i, buf, NULL, 0), 0);
        ck_assert_mem_eq(buf, s[i].px, len);
        ck_assert_mem_eq(buf, smp.pixels, len);
        ck_assert_uint_eq(buf[len], 0x5A);      /* nothing past the sample */
        free(buf);
        ck_assert_int_eq(be->r_check(r, i), 0);
    }
    fmt_sample smp;
    uint8_t one;
    ck_assert_int_eq(be->r_get(r, n, &smp), FMT_EINVAL);
    ck_assert_int_eq(be->r_read(r, n, &one, NULL, 0), FMT_EINVAL);
    ck_assert_int_eq(be->r_check(r, n), FMT_EINVAL);
    ck_assert_int_eq(be->r_advise(r, FMT_ADVICE_SEQUENTIAL), 0);
    ck_assert_int_eq(be->r_advise(r, FMT_ADVICE_RANDOM), 0);
    ck_assert_int_eq(be->r_advise(r, FMT_ADVICE_NORMAL), 0);
    ck_assert_int_eq(be->r_advise(r, (fmt_advice)7), FMT_EINVAL);
    be->r_close(r);
}

/* ---- an independent reading of the layout in formats/lmdb.md, with liblmdb alone ---- */

static void spec_check(const tshard *t, const tu_sample *s, size_t n, const fmt_shard_info *info)
{
    uint64_t content_hash = info->hash;
    char fin[1400];
    shard_paths(t->name, fin, NULL, NULL, sizeof fin);
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_stat st;
    ck_assert_int_eq(mdb_env_create(&env), 0);
    ck_assert_int_eq(mdb_env_open(env, fin, MDB_RDONLY | MDB_NOLOCK, 0), 0);
    ck_assert_int_eq(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
    ck_assert_int_eq(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
    ck_assert_int_eq(mdb_stat(txn, dbi, &st), 0);
    ck_assert_uint_eq(st.ms_entries, n + 2);
    size_t rcap = 1;            /* every header and aux record, in order */
    for (size_t i = 0; i < n; i++)
        rcap += 48 + s[i].aux_len;
    uint8_t *records = malloc(rcap);
    size_t rlen = 0;

    XXH3_state_t *ih = XXH3_createState();
    XXH3_64bits_reset(ih);
    for (size_t i = 0; i < n; i++) {
        uint8_t kb[8];
        be64(kb, t->first_index + i);
        MDB_val k = {8, kb}, v;
        ck_assert_int_eq(mdb_get(txn, dbi, &k, &v), 0);
        const uint8_t *p = v.mv_data;
        uint64_t len = tu_sample_len(&s[i]);
        ck_assert_uint_eq(v.mv_size, 48 + len + s[i].aux_len);
        ck_assert_mem_eq(p, "SHLV", 4);
        ck_assert_uint_eq(fmt_le_get16(p + 4), 1);
        ck_assert_uint_eq(fmt_le_get16(p + 6), 48);
        ck_assert_int_eq((int32_t)fmt_le_get32(p + 8), s[i].label);
        ck_assert_uint_eq(fmt_le_get32(p + 12), s[i].h);
        ck_assert_uint_eq(fmt_le_get32(p + 16), s[i].w);
        ck_assert_uint_eq(fmt_le_get32(p + 20), s[i].c);
        ck_assert_uint_eq(fmt_le_get64(p + 24), XXH3_64bits(s[i].px, len));
        ck_assert_uint_eq(fmt_le_get64(p + 32), s[i].source);
        ck_assert_uint_eq(fmt_le_get32(p + 40), s[i].aux_len);
        ck_assert_uint_eq(fmt_le_get32(p + 44), 0);
        ck_assert_mem_eq(p + 48, s[i].px, len);
        if (s[i].aux_len)
            ck_assert_mem_eq(p + 48 + len, s[i].aux, s[i].aux_len);
        /* an overflow value starts 16 bytes into a page: pixels are 64-byte aligned */
        if (v.mv_size > 2100)
            ck_assert_uint_eq((uintptr_t)(p + 48) % 64, 0);
        XXH3_64bits_update(ih, p, 48);
        XXH3_64bits_update(ih, p + 48 + len, s[i].aux_len);
        memcpy(records + rlen, p, 48);
        memcpy(records + rlen + 48, p + 48 + len, s[i].aux_len);
        rlen += 48 + s[i].aux_len;
    }
    MDB_val k = {15, "__shardc__/meta"}, v;
    ck_assert_int_eq(mdb_get(txn, dbi, &k, &v), 0);
    ck_assert_uint_eq(v.mv_size, 128);
    const uint8_t *m = v.mv_data;
    ck_assert_mem_eq(m, "SHARDLMD", 8);
    ck_assert_uint_eq(fmt_le_get16(m + 8), 1);
    ck_assert_uint_eq(fmt_le_get16(m + 10), 1);
    ck_assert_uint_eq(fmt_le_get32(m + 12), 128);
    ck_assert_uint_eq(fmt_le_get64(m + 16), n);
    ck_assert_uint_eq(fmt_le_get64(m + 24), t->first_index);
    ck_assert_uint_eq(fmt_le_get64(m + 32), t->fingerprint);
    ck_assert_uint_eq(fmt_le_get64(m + 40), t->input_end);
    ck_assert_uint_eq(fmt_le_get64(m + 96), XXH3_64bits_digest(ih));
    ck_assert_uint_eq(fmt_le_get64(m + 120), XXH3_64bits(m, 120));
    ck_assert_uint_eq(fmt_le_get64(m + 120), content_hash);
    XXH3_freeState(ih);
    /* 1.1: __shardc__/index, the metadata value then every record, where the shard's info (the
     * manifest's skeleton range) says it lies in data.mdb */
    uint8_t meta[128];
    memcpy(meta, m, 128);
    MDB_val ik = {16, "__shardc__/index"}, iv;
    ck_assert_int_eq(mdb_get(txn, dbi, &ik, &iv), 0);
    ck_assert_uint_eq(iv.mv_size, 128 + rlen);
    ck_assert_mem_eq(iv.mv_data, meta, 128);
    if (rlen)
        ck_assert_mem_eq((const uint8_t *)iv.mv_data + 128, records, rlen);
    ck_assert_uint_eq(info->skel_len, iv.mv_size);
    char data[1400];
    shard_paths(t->name, fin, NULL, data, sizeof fin);
    int dfd = open(data, O_RDONLY);
    ck_assert_int_ge(dfd, 0);
    uint8_t *at = malloc(iv.mv_size);
    ck_assert_int_eq(pread(dfd, at, iv.mv_size, (off_t)info->skel_off), (ssize_t)iv.mv_size);
    ck_assert_mem_eq(at, iv.mv_data, iv.mv_size);
    free(at);
    close(dfd);
    free(records);

    /* a cursor walks the samples in order, then the index and the metadata */
    MDB_cursor *cur;
    ck_assert_int_eq(mdb_cursor_open(txn, dbi, &cur), 0);
    size_t seen = 0;
    for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT), seen++) {
        if (seen < n) {
            uint8_t kb[8];
            be64(kb, t->first_index + seen);
            ck_assert_uint_eq(k.mv_size, 8);
            ck_assert_mem_eq(k.mv_data, kb, 8);
        } else if (seen == n) {
            ck_assert_uint_eq(k.mv_size, 16);
            ck_assert_mem_eq(k.mv_data, "__shardc__/index", 16);
        } else {
            ck_assert_uint_eq(k.mv_size, 15);
            ck_assert_mem_eq(k.mv_data, "__shardc__/meta", 15);
        }
    }
    ck_assert_uint_eq(seen, n + 2);
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    mdb_env_close(env);
}

static void remove_shard(const char *name)
{
    char fin[1400], data[1400], lock[1500];
    shard_paths(name, fin, NULL, data, sizeof fin);
    snprintf(lock, sizeof lock, "%s/lock.mdb", fin);
    ck_assert_int_eq(unlink(data), 0);
    unlink(lock);
    ck_assert_int_eq(rmdir(fin), 0);
}

static void roundtrip(size_t n, int shapes, int with_aux)
{
    tu_rng_state = 0x9E3779B97F4A7C15ULL ^ (n * 131 + (uint64_t)shapes * 7 + (uint64_t)with_aux);
    tu_sample *s = make_samples(n, shapes, with_aux);
    tshard t = {"shard-00000", 5000 + n, 0xFEEDFACECAFEBEEFULL, 77777, 0};
    fmt_shard_info info;
    write_shard(&t, s, n, &info, NULL);
    check_shard(&t, s, n, &info, FMT_ACCESS_MMAP);
    check_shard(&t, s, n, &info, FMT_ACCESS_PREAD);
    check_shard(&t, s, n, &info, FMT_ACCESS_DIRECT);
    spec_check(&t, s, n, &info);

    /* deterministic: the same samples give the same hash and the same bytes */
    tshard t2 = t;
    t2.name = "shard-00001";
    fmt_shard_info info2;
    write_shard(&t2, s, n, &info2, NULL);
    ck_assert_uint_eq(info2.hash, info.hash);
    ck_assert_uint_eq(info2.bytes, info.bytes);
    char d1[1400], d2[1400], fin[1400];
    shard_paths(t.name, fin, NULL, d1, sizeof d1);
    shard_paths(t2.name, fin, NULL, d2, sizeof d2);
    tu_assert_same_file(d1, d2);

    /* ... and any metadata field changes the content hash */
    tshard t3 = t;
    t3.name = "shard-00002";
    t3.input_end++;
    fmt_shard_info info3;
    write_shard(&t3, s, n, &info3, NULL);
    ck_assert_uint_ne(info3.hash, info.hash);
    remove_shard(t.name);
    remove_shard(t2.name);
    remove_shard(t3.name);
    tu_samples_free(s, n);
}

START_TEST(test_roundtrip_fixed_gray)
{
    roundtrip(7, TU_SHAPES_FIXED_GRAY, 1);
    roundtrip(5, TU_SHAPES_FIXED_GRAY, 0);
}
END_TEST

START_TEST(test_roundtrip_fixed_rgb)
{
    roundtrip(9, TU_SHAPES_FIXED_RGB, 0);
    roundtrip(3, TU_SHAPES_FIXED_RGB, 1);
    roundtrip(4, TU_SHAPES_IMAGENET, 1);
}
END_TEST

START_TEST(test_roundtrip_mixed)
{
    roundtrip(23, TU_SHAPES_MIXED, 1);
    roundtrip(400, TU_SHAPES_MIXED, 0);    /* several leaf pages and a branch level */
    roundtrip(1, TU_SHAPES_MIXED, 1);
}
END_TEST

START_TEST(test_empty_shard)
{
    roundtrip(0, TU_SHAPES_MIXED, 0);
    roundtrip(0, TU_SHAPES_FIXED_RGB, 1);
    be->r_close(NULL);
}
END_TEST

/* n samples of 1024x683x3 (2 MiB), filled by a cheap generator. */
static tu_sample *make_big_samples(size_t n)
{
    tu_sample *s = tu_samples_new(n);
    for (size_t i = 0; i < n; i++) {
        s[i].h = 683, s[i].w = 1024, s[i].c = 3, s[i].label = (int32_t)i, s[i].source = i;
        size_t len = (size_t)tu_sample_len(&s[i]);
        s[i].px = malloc(len);
        ck_assert_ptr_nonnull(s[i].px);
        uint64_t x = tu_rng();
        for (size_t k = 0; k < len; k += 8) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            memcpy(s[i].px + k, &x, len - k < 8 ? len - k : 8);
        }
    }
    return s;
}

/* A shard large enough for several write transactions and map resizes. */
START_TEST(test_large_shard)
{
    tu_rng_state = 99;
    const size_t n = 36;    /* 36 x 2 MiB: past the 64 MiB transaction size */
    tu_sample *s = make_big_samples(n);
    tshard t = {"shard-00007", 123456, 1, 2, 0};
    fmt_shard_info info;
    uint64_t projected;
    write_shard(&t, s, n, &info, &projected);
    /* the projection is close as well as an upper bound */
    ck_assert_uint_ge(info.bytes, projected - projected / 1000);
    check_shard(&t, s, n, &info, FMT_ACCESS_MMAP);
    tu_samples_free(s, n);
}
END_TEST

/* ---- what the standard tools see ---- */

/* The output of the command fmt with path put in; the command must succeed. */
static char *run_tool(const char *fmt, const char *path)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, fmt, path);
    size_t len;
    int status;
    char *out = (char *)tu_run_capture(cmd, &len, &status);
    ck_assert_int_eq(status, 0);
    return out;
}

/* mdb_dump -p's rendering of a key: printable bytes as they are, anything else as a backslash
 * and two hex digits (versions differ on a backslash itself; the keys here hold none). */
static void dump_escape(const uint8_t *k, size_t n, char *out)
{
    char *o = out;
    *o++ = ' ';
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_ne(k[i], '\\');
        if (isprint(k[i]))
            *o++ = (char)k[i];
        else
            o += sprintf(o, "\\%02x", k[i]);
    }
    *o = '\0';
}

START_TEST(test_standard_tools)
{
    if (!tu_have_tool("command -v mdb_stat") || !tu_have_tool("command -v mdb_dump")) {
        tu_skip("mdb_stat/mdb_dump not installed (lmdb-utils): the standard tools check");
        return;
    }
    tu_rng_state = 7;
    const size_t n = 9;
    tu_sample *s = make_samples(n, TU_SHAPES_FIXED_GRAY, 1);
    /* keys 00 01 00 00 00 00 00 'P' .. 'X': escaped bytes and printable ones */
    tshard t = {"shard-00003", 0x0001000000000050ULL, 3, 4, 0};
    fmt_shard_info info;
    write_shard(&t, s, n, &info, NULL);
    char fin[1400];
    shard_paths(t.name, fin, NULL, NULL, sizeof fin);

    char *out = run_tool("mdb_stat '%s' 2>&1", fin);
    char want[64];
    snprintf(want, sizeof want, "Entries: %zu\n", n + 2);
    ck_assert_msg(strstr(out, want), "mdb_stat said:\n%s", out);
    free(out);

    out = run_tool("mdb_dump -p '%s' 2>&1", fin);
    char *p = strstr(out, "HEADER=END\n");
    ck_assert_ptr_nonnull(p);
    p += strlen("HEADER=END\n");
    /* key and value lines alternate; the keys are the samples' in order, then the index and the
     * metadata */
    for (size_t i = 0; i <= n + 1; i++) {
        char *eol = strchr(p, '\n');
        ck_assert_ptr_nonnull(eol);
        *eol = '\0';
        char exp[128];
        if (i < n) {
            uint8_t kb[8];
            be64(kb, t.first_index + i);
            dump_escape(kb, 8, exp);
        } else if (i == n) {
            dump_escape((const uint8_t *)"__shardc__/index", 16, exp);
        } else {
            dump_escape((const uint8_t *)"__shardc__/meta", 15, exp);
        }
        ck_assert_str_eq(p, exp);
        p = strchr(eol + 1, '\n');     /* skip the value line */
        ck_assert_ptr_nonnull(p);
        p++;
    }
    ck_assert(strncmp(p, "DATA=END", 8) == 0);
    free(out);

    /* the tools may leave a lock.mdb in the shard: the reader neither needs nor counts it */
    void *r = open_shard(t.name, FMT_ACCESS_MMAP);
    ck_assert_uint_eq(be->r_info(r)->bytes, info.bytes);
    ck_assert_uint_eq(be->r_info(r)->hash, info.hash);
    be->r_close(r);
    tu_samples_free(s, n);
}
END_TEST

/* ---- writing: temporaries, abort, replacement, bad arguments, I/O failure ---- */

START_TEST(test_tmp_and_abort)
{
    tu_rng_state = 11;
    tu_sample *s = make_samples(5, TU_SHAPES_FIXED_RGB, 1);
    char fin[1400], tmp[1400];
    shard_paths("shard-00004", fin, tmp, NULL, sizeof fin);
    fmt_writer_opts o = {.dir = g_dir, .name = "shard-00004", .first_index = 10};
    void *w;
    ck_assert_int_eq(be->w_open(&w, &o), 0);
    tu_add_samples(be, w, s, 0, 5);
    ck_assert(tu_is_dir(tmp));
    ck_assert(!tu_exists(fin));
    be->w_abort(w);
    ck_assert_uint_eq(tu_dir_entries(g_dir, NULL, NULL), 0);
    be->w_abort(NULL);

    /* abort right after open */
    ck_assert_int_eq(be->w_open(&w, &o), 0);
    be->w_abort(w);
    ck_assert_uint_eq(tu_dir_entries(g_dir, NULL, NULL), 0);

    /* a temporary environment left by a killed build is replaced */
    ck_assert_int_eq(mkdir(tmp, 0755), 0);
    char junk[1500];
    snprintf(junk, sizeof junk, "%s/data.mdb", tmp);
    ck_assert_int_eq(fmt_write_file_atomic(junk, "garbage", 7), 0);
    snprintf(junk, sizeof junk, "%s/lock.mdb", tmp);
    ck_assert_int_eq(fmt_write_file_atomic(junk, "lock", 4), 0);
    tshard t = {"shard-00004", 10, 0, 5, 0};
    fmt_shard_info info;
    write_shard(&t, s, 5, &info, NULL);
    check_shard(&t, s, 5, &info, FMT_ACCESS_MMAP);
    tu_samples_free(s, 5);
}
END_TEST

START_TEST(test_replace_existing)
{
    tu_rng_state = 12;
    tu_sample *a = make_samples(4, TU_SHAPES_MIXED, 0), *b = make_samples(6, TU_SHAPES_FIXED_RGB, 1);
    tshard t = {"shard-00005", 40, 1, 44, 0};
    fmt_shard_info ia, ib;
    write_shard(&t, a, 4, &ia, NULL);
    /* rewriting a shard (a resumed build redoing it) swaps the new one in */
    t.input_end = 46;
    t.replace = 1;
    write_shard(&t, b, 6, &ib, NULL);
    ck_assert_uint_ne(ia.hash, ib.hash);
    check_shard(&t, b, 6, &ib, FMT_ACCESS_MMAP);
    int only = 0;
    ck_assert_uint_eq(tu_dir_entries(g_dir, "shard-00005.lmdb", &only), 1);
    ck_assert(only);
    tu_samples_free(a, 4);
    tu_samples_free(b, 6);
}
END_TEST

START_TEST(test_writer_bad_args)
{
    tu_rng_state = 13;
    tu_sample *s = make_samples(2, TU_SHAPES_FIXED_GRAY, 0);
    fmt_writer_opts o = {.dir = g_dir, .name = "shard-00006", .first_index = 0};
    void *w;
    ck_assert_int_eq(be->w_open(&w, &o), 0);
    fmt_sample_meta m;
    tu_sample_meta(&s[0], &m);
    uint64_t before = be->w_size(w);
    m.channels = 2;
    ck_assert_int_eq(be->w_add(w, &m, s[0].px, NULL), FMT_EINVAL);
    m.channels = 1;
    m.height = 0;
    ck_assert_int_eq(be->w_add(w, &m, s[0].px, NULL), FMT_EINVAL);
    m.height = s[0].h;
    m.width = 0;
    ck_assert_int_eq(be->w_add(w, &m, s[0].px, NULL), FMT_EINVAL);
    m.width = s[0].w;
    m.label = -2;
    ck_assert_int_eq(be->w_add(w, &m, s[0].px, NULL), FMT_EINVAL);
    m.label = s[0].label;
    m.aux_len = 5;
    ck_assert_int_eq(be->w_add(w, &m, s[0].px, NULL), FMT_EINVAL);
    m.aux_len = 0;
    /* an LMDB value holds at most 4 GiB - 1 bytes; the pixels are never read */
    fmt_sample_meta big = m;
    big.height = 70000, big.width = 70000;
    ck_assert_int_eq(be->w_add(w, &big, s[0].px, NULL), FMT_ETOOBIG);
    ck_assert_uint_eq(be->w_count(w), 0);
    ck_assert_uint_eq(be->w_size(w), before);
    /* the writer is still usable */
    ck_assert_int_eq(be->w_add(w, &m, s[0].px, NULL), 0);
    tu_sample_meta(&s[1], &m);
    ck_assert_int_eq(be->w_add(w, &m, s[1].px, NULL), 0);
    fmt_shard_info info;
    ck_assert_int_eq(be->w_finish(w, 2, &info), 0);
    tshard t = {"shard-00006", 0, 0, 2, 0};
    check_shard(&t, s, 2, &info, FMT_ACCESS_MMAP);

    /* costs: monotonic, page-granular for overflow values, refusing what LMDB cannot store */
    ck_assert_uint_lt(be->w_cost(1, 0, 0), be->w_cost(1000, 0, 0));
    ck_assert_uint_lt(be->w_cost(1000, 0, 0), be->w_cost(150528, 0, 0));
    ck_assert_uint_ge(be->w_cost(150528, 0, 0), 150528 + 48);
    ck_assert_uint_eq((be->w_cost(150528, 0, 0) - 48) % 64, 0);     /* + its index record */
    ck_assert_uint_eq(be->w_cost(150528, 0, 4096), be->w_cost(150528, 0, 0));
    ck_assert_uint_eq(be->w_cost((uint64_t)UINT32_MAX, 0, 0), UINT64_MAX);
    ck_assert_uint_eq(be->w_cost(UINT64_MAX - 10, 100, 0), UINT64_MAX);
    tu_samples_free(s, 2);
}
END_TEST

START_TEST(test_write_failure)
{
    /* the file size limit makes LMDB's page writes fail, as a full disk would */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {.rlim_cur = 1 << 20, .rlim_max = RLIM_INFINITY};
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    tu_rng_state = 14;
    const size_t n = 30;
    tu_sample *s = make_big_samples(n);
    char fin[1400], tmp[1400];
    shard_paths("shard-00008", fin, tmp, NULL, sizeof fin);
    fmt_writer_opts o = {.dir = g_dir, .name = "shard-00008"};
    void *w;
    ck_assert_int_eq(be->w_open(&w, &o), 0);
    int rc = 0;
    size_t i;
    for (i = 0; i < n && rc == 0; i++) {
        fmt_sample_meta m;
        tu_sample_meta(&s[i], &m);
        rc = be->w_add(w, &m, s[i].px, NULL);
    }
    /* a commit (before the map grows past its first 32 MiB) fails inside an add */
    ck_assert_msg(rc == EFBIG || rc == EIO, "rc %d after %zu adds", rc, i);
    fmt_sample_meta m;
    tu_sample_meta(&s[0], &m);
    ck_assert_int_eq(be->w_add(w, &m, s[0].px, NULL), FMT_ESTATE);
    ck_assert_int_eq(be->w_finish(w, 0, NULL), rc);
    ck_assert(!tu_exists(tmp));
    ck_assert(!tu_exists(fin));

    /* failing in finish: fewer samples than the first resize */
    ck_assert_int_eq(be->w_open(&w, &o), 0);
    tu_add_samples(be, w, s, 0, 5);
    rc = be->w_finish(w, 0, NULL);
    ck_assert_msg(rc == EFBIG || rc == EIO, "rc %d", rc);
    ck_assert(!tu_exists(tmp));
    ck_assert(!tu_exists(fin));
    tu_samples_free(s, n);
}
END_TEST

/* ---- damage ---- */

/* A shard of 12 mixed samples; its data.mdb's bytes in *buf. */
static tu_sample *base_shard(size_t *n, uint8_t **buf, size_t *len, fmt_shard_info *info)
{
    tu_rng_state = 0xABCDEF;
    *n = 12;
    tu_sample *s = make_samples(*n, TU_SHAPES_MIXED, 1);
    /* sample 3 large enough for an overflow value, samples 0 and 5 leaf values; all three
     * distinct enough to be found in the file by their pixels */
    s[0].h = 5, s[0].w = 5, s[0].c = 3;
    tu_sample_random_pixels(&s[0]);
    s[3].label = 17;
    s[3].h = 40, s[3].w = 50, s[3].c = 3;
    tu_sample_random_pixels(&s[3]);
    s[5].h = 4, s[5].w = 4, s[5].c = 1;
    tu_sample_random_pixels(&s[5]);
    tshard t = {"base", 1000, 5, 6, 0};
    write_shard(&t, s, *n, info, NULL);
    char fin[1400], data[1400];
    shard_paths(t.name, fin, NULL, data, sizeof fin);
    *buf = tu_slurp(data, len);
    return s;
}

/* Open shard folder fin with the backend, the reason in *msg (none wanted: NULL); *r is NULL
 * when it fails. */
static int open_fin(const char *fin, fmt_msg *msg, void **r)
{
    fmt_msg local;
    if (!msg)
        msg = &local;
    memset(msg, 0, sizeof *msg);
    *r = (void *)1;
    int rc = be->r_open(r, g_dir, fin, FMT_ACCESS_MMAP, msg);
    if (rc != 0)
        ck_assert_ptr_null(*r);
    return rc;
}

/* Open a shard whose data.mdb holds exactly these bytes. */
static int open_bytes(const uint8_t *buf, size_t len, fmt_msg *msg)
{
    char fin[1400], data[1400];
    shard_paths("bytes", fin, NULL, data, sizeof fin);
    ck_assert_int_eq(mkdir(fin, 0755), 0);
    tu_spit(data, buf, len);
    void *r;
    int rc = open_fin(fin, msg, &r);
    if (rc == 0)
        be->r_close(r);
    unlink(data);
    char lock[1500];
    snprintf(lock, sizeof lock, "%s/lock.mdb", fin);
    unlink(lock);
    ck_assert_int_eq(rmdir(fin), 0);
    return rc;
}

/* Offset of sample i's pixels (or of its value header: - 48) in the file bytes. */
static size_t find_pixels(const uint8_t *buf, size_t len, const tu_sample *s)
{
    size_t plen = (size_t)tu_sample_len(s);
    const uint8_t *p = memmem(buf, len, s->px, plen);
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_null(memmem(p + 1, len - (size_t)(p + 1 - buf), s->px, plen));
    return (size_t)(p - buf);
}

START_TEST(test_pixel_damage)
{
    size_t n, len;
    uint8_t *buf;
    fmt_shard_info info;
    tu_sample *s = base_shard(&n, &buf, &len, &info);
    char fin[1400], data[1400];
    shard_paths("base", fin, NULL, data, sizeof fin);
    const size_t victims[] = {3, 5};
    for (size_t v = 0; v < 2; v++) {
        size_t k = victims[v];
        size_t off = find_pixels(buf, len, &s[k]) + (size_t)tu_sample_len(&s[k]) / 2;
        tu_flip_byte(data, off, 0x10);
        /* the shard opens (hashes are not checked on open); check names the damaged sample */
        void *r = open_shard("base", FMT_ACCESS_MMAP);
        for (size_t i = 0; i < n; i++)
            ck_assert_int_eq(be->r_check(r, i), i == k ? FMT_EHASH : 0);
        be->r_close(r);
        tu_flip_byte(data, off, 0x10);
    }
    free(buf);
    tu_samples_free(s, n);
}
END_TEST

START_TEST(test_header_damage)
{
    size_t n, len;
    uint8_t *buf;
    fmt_shard_info info;
    tu_sample *s = base_shard(&n, &buf, &len, &info);
    ck_assert_int_eq(open_bytes(buf, len, NULL), 0);
    fmt_msg msg;
    const size_t victims[] = {3, 5};
    for (size_t v = 0; v < 2; v++) {
        size_t k = victims[v];
        size_t hdr = find_pixels(buf, len, &s[k]) - 48;
        char want[128];

        buf[hdr] ^= 1;                              /* value magic */
        ck_assert_int_eq(open_bytes(buf, len, &msg), FMT_ECORRUPT);
        snprintf(want, sizeof want, "sample %zu: bad value magic", k);
        ck_assert_str_eq(msg.text, want);
        buf[hdr] ^= 1;

        buf[hdr + 4] = 2;                           /* value version */
        ck_assert_int_eq(open_bytes(buf, len, &msg), FMT_EVERSION);
        buf[hdr + 4] = 1;

        buf[hdr + 12] ^= 0x40;                      /* height: the size no longer adds up */
        ck_assert_int_eq(open_bytes(buf, len, &msg), FMT_ECORRUPT);
        snprintf(want, sizeof want, "sample %zu: value is ", k);
        ck_assert_msg(strncmp(msg.text, want, strlen(want)) == 0, "%s", msg.text);
        buf[hdr + 12] ^= 0x40;

        buf[hdr + 20] = 2;                          /* channels */
        ck_assert_int_eq(open_bytes(buf, len, &msg), FMT_ECORRUPT);
        buf[hdr + 20] = (uint8_t)s[k].c;

        /* fields that keep the value consistent are caught by the index hash */
        const size_t fields[] = {8, 24, 31, 32, 44};
        for (size_t f = 0; f < sizeof fields / sizeof *fields; f++) {
            buf[hdr + fields[f]] ^= 0x04;
            ck_assert_int_eq(open_bytes(buf, len, &msg), FMT_EHASH);
            ck_assert_str_eq(msg.text, "bad index hash");
            buf[hdr + fields[f]] ^= 0x04;
        }
    }
    /* an aux byte too */
    size_t aux = find_pixels(buf, len, &s[0]) + (size_t)tu_sample_len(&s[0]);
    ck_assert_mem_eq(buf + aux, s[0].aux, s[0].aux_len);
    buf[aux] ^= 0x01;
    ck_assert_int_eq(open_bytes(buf, len, &msg), FMT_EHASH);
    buf[aux] ^= 0x01;
    ck_assert_int_eq(open_bytes(buf, len, NULL), 0);
    free(buf);
    tu_samples_free(s, n);
}
END_TEST

START_TEST(test_meta_damage)
{
    size_t n, len;
    uint8_t *buf;
    fmt_shard_info info;
    tu_sample *s = base_shard(&n, &buf, &len, &info);
    uint8_t *m = memmem(buf, len, "SHARDLMD", 8);
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(fmt_le_get64(m + 120), info.hash);
    fmt_msg msg;
    const size_t spots[] = {8, 12, 16, 24, 40, 50, 100, 110, 119, 120, 127};
    for (size_t i = 0; i < sizeof spots / sizeof *spots; i++) {
        m[spots[i]] ^= 0x20;
        int rc = open_bytes(buf, len, &msg);
        if (spots[i] == 8) {    /* the major version is checked before the hash */
            ck_assert_int_eq(rc, FMT_EVERSION);
        } else {
            ck_assert_int_eq(rc, FMT_EHASH);
            ck_assert_str_eq(msg.text, "bad metadata hash");
        }
        m[spots[i]] ^= 0x20;
    }
    m[0] = 'X';
    ck_assert_int_eq(open_bytes(buf, len, &msg), FMT_EFORMAT);
    ck_assert_str_eq(msg.text, "bad metadata magic (not a shardc lmdb shard)");
    m[0] = 'S';
    ck_assert_int_eq(open_bytes(buf, len, NULL), 0);
    free(buf);
    tu_samples_free(s, n);
}
END_TEST

START_TEST(test_truncation)
{
    size_t n, len;
    uint8_t *buf;
    fmt_shard_info info;
    tu_sample *s = base_shard(&n, &buf, &len, &info);
    long ps = sysconf(_SC_PAGESIZE);
    ck_assert_uint_eq(len % (size_t)ps, 0);
    const size_t cuts[] = {0, 1, 100, (size_t)ps - 1, (size_t)ps, (size_t)ps + 16,
                           2 * (size_t)ps - 1, 2 * (size_t)ps, 3 * (size_t)ps, len / 2,
                           len - (size_t)ps, len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        if (cuts[i] >= len)
            continue;
        fmt_msg msg;
        int rc = open_bytes(buf, cuts[i], &msg);
        ck_assert_msg(rc == FMT_ETRUNC, "cut at %zu: %d %s", cuts[i], rc, fmt_reason(&msg, rc));
        ck_assert_str_ne(msg.text, "");
    }
    fmt_msg msg;
    ck_assert_int_eq(open_bytes(buf, 0, &msg), FMT_ETRUNC);
    ck_assert_str_eq(msg.text, "data.mdb is empty");
    free(buf);
    tu_samples_free(s, n);
}
END_TEST

START_TEST(test_garbage)
{
    fmt_msg msg;
    tu_rng_state = 15;
    size_t len = 64 << 10;
    uint8_t *buf = malloc(len);
    ck_assert_ptr_nonnull(buf);
    for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)tu_rng();
    ck_assert_int_eq(open_bytes(buf, len, &msg), FMT_EFORMAT);
    ck_assert_str_eq(msg.text, "data.mdb is not an lmdb environment");
    memset(buf, 0, len);
    ck_assert_int_eq(open_bytes(buf, len, &msg), FMT_EFORMAT);
    ck_assert_int_eq(open_bytes(buf, 3000, &msg), FMT_ETRUNC);
    free(buf);

    /* paths that are not shards */
    char p[1400], q[1500];
    void *r = (void *)1;
    tu_path(p, sizeof p, "missing.lmdb");
    ck_assert_int_eq(be->r_open(&r, g_dir, p, FMT_ACCESS_MMAP, &msg), ENOENT);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(fmt_write_file_atomic(p, "x", 1), 0);     /* a file, not a directory */
    ck_assert_int_eq(be->r_open(&r, g_dir, p, FMT_ACCESS_MMAP, &msg), FMT_EFORMAT);
    ck_assert_str_eq(msg.text, "not a directory (an lmdb shard is an environment directory)");
    tu_path(p, sizeof p, "empty.lmdb");
    ck_assert_int_eq(mkdir(p, 0755), 0);
    ck_assert_int_eq(be->r_open(&r, g_dir, p, FMT_ACCESS_MMAP, &msg), ENOENT);
    ck_assert_str_eq(msg.text, "data.mdb: No such file or directory");
    snprintf(q, sizeof q, "%s/data.mdb", p);
    ck_assert_int_eq(mkdir(q, 0755), 0);
    ck_assert_int_eq(be->r_open(&r, g_dir, p, FMT_ACCESS_MMAP, &msg), FMT_EFORMAT);
    ck_assert_str_eq(msg.text, "data.mdb is not a regular file");
    ck_assert_ptr_null(r);
}
END_TEST

/* ---- environments crafted with liblmdb, per formats/lmdb.md ---- */

typedef struct {
    uint8_t key[32];
    size_t klen;
    uint8_t *val;
    size_t vlen;
} kv;

typedef struct {
    kv e[8];
    size_t n;
} kvset;

static void kv_add(kvset *set, const void *key, size_t klen, const uint8_t *val, size_t vlen)
{
    kv *e = &set->e[set->n++];
    memcpy(e->key, key, klen);
    e->klen = klen;
    e->val = malloc(vlen ? vlen : 1);
    ck_assert_ptr_nonnull(e->val);
    memcpy(e->val, val, vlen);
    e->vlen = vlen;
}

static void kv_free(kvset *set)
{
    for (size_t i = 0; i < set->n; i++)
        free(set->e[i].val);
    set->n = 0;
}

/* A sample value as the spec lays it out: h x w x c pixels p + k, an aux record of aux_len. */
static size_t spec_value(uint8_t *out, uint32_t h, uint32_t w, uint32_t c, int32_t label,
                         uint8_t p, uint32_t aux_len)
{
    size_t len = (size_t)h * w * c;
    memset(out, 0, 48);
    memcpy(out, "SHLV", 4);
    fmt_le_put16(out + 4, 1);
    fmt_le_put16(out + 6, 48);
    fmt_le_put32(out + 8, (uint32_t)label);
    fmt_le_put32(out + 12, h);
    fmt_le_put32(out + 16, w);
    fmt_le_put32(out + 20, c);
    for (size_t k = 0; k < len; k++)
        out[48 + k] = (uint8_t)(p + k);
    fmt_le_put64(out + 24, XXH3_64bits(out + 48, len));
    fmt_le_put64(out + 32, 1000 + p);
    fmt_le_put32(out + 40, aux_len);
    for (uint32_t k = 0; k < aux_len; k++)
        out[48 + len + k] = (uint8_t)(0xA0 + k);
    return 48 + len + aux_len;
}

/* The metadata record for the sample values in set (those with 8-byte keys, in set order). */
static void spec_meta(uint8_t *m, const kvset *set, uint64_t count, uint64_t first)
{
    memset(m, 0, 128);
    memcpy(m, "SHARDLMD", 8);
    fmt_le_put16(m + 8, 1);
    fmt_le_put16(m + 10, 0);
    fmt_le_put32(m + 12, 128);
    fmt_le_put64(m + 16, count);
    fmt_le_put64(m + 24, first);
    fmt_le_put64(m + 32, 0x1234);
    fmt_le_put64(m + 40, 99);
    XXH3_state_t *st = XXH3_createState();
    XXH3_64bits_reset(st);
    for (size_t i = 0; i < set->n; i++) {
        const kv *e = &set->e[i];
        if (e->klen != 8 || e->vlen < 48)
            continue;
        uint32_t aux_len = fmt_le_get32(e->val + 40);
        XXH3_64bits_update(st, e->val, 48);
        if (aux_len <= e->vlen - 48)
            XXH3_64bits_update(st, e->val + e->vlen - aux_len, aux_len);
    }
    fmt_le_put64(m + 96, XXH3_64bits_digest(st));
    XXH3_freeState(st);
    fmt_le_put64(m + 120, XXH3_64bits(m, 120));
}

static void rehash_meta(uint8_t *m)
{
    fmt_le_put64(m + 120, XXH3_64bits(m, 120));
}

/* Write set into a fresh environment and open it with the backend. */
static int open_crafted(const kvset *set, unsigned dbflags, fmt_msg *msg, fmt_shard_info *info)
{
    char fin[1400], data[1400];
    shard_paths("crafted", fin, NULL, data, sizeof fin);
    ck_assert_int_eq(mkdir(fin, 0755), 0);
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    ck_assert_int_eq(mdb_env_create(&env), 0);
    ck_assert_int_eq(mdb_env_set_mapsize(env, 16 << 20), 0);
    ck_assert_int_eq(mdb_env_open(env, fin, MDB_NOLOCK, 0644), 0);
    ck_assert_int_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
    ck_assert_int_eq(mdb_dbi_open(txn, NULL, dbflags, &dbi), 0);
    for (size_t i = 0; i < set->n; i++) {
        MDB_val k = {set->e[i].klen, (void *)set->e[i].key};
        MDB_val v = {set->e[i].vlen, set->e[i].val};
        ck_assert_int_eq(mdb_put(txn, dbi, &k, &v, 0), 0);
    }
    ck_assert_int_eq(mdb_txn_commit(txn), 0);
    mdb_env_close(env);

    void *r;
    int rc = open_fin(fin, msg, &r);
    if (rc == 0) {
        if (info)
            *info = *be->r_info(r);
        /* every sample reads back as the spec value says */
        for (uint64_t i = 0; i < be->r_info(r)->samples; i++) {
            fmt_sample smp;
            ck_assert_int_eq(be->r_get(r, i, &smp), 0);
            ck_assert_int_eq(be->r_check(r, i), 0);
            ck_assert_uint_eq(smp.source, 1000 + smp.pixels[0]);
            for (uint32_t k = 0; k < smp.aux_len; k++)
                ck_assert_uint_eq(smp.aux[k], 0xA0 + k);
        }
        be->r_close(r);
    }
    unlink(data);
    ck_assert_int_eq(rmdir(fin), 0);
    return rc;
}

/* open_crafted of set fails with rc and says exactly text. */
static void crafted_fails(const kvset *set, int rc, const char *text)
{
    fmt_msg msg;
    ck_assert_int_eq(open_crafted(set, 0, &msg, NULL), rc);
    ck_assert_str_eq(msg.text, text);
}

/* Two or three samples from first on, with the metadata; tweak() may change anything first. */
static void crafted_base(kvset *set, uint64_t first, size_t n)
{
    static uint8_t val[8192];
    for (size_t i = 0; i < n; i++) {
        uint8_t kb[8];
        be64(kb, first + i);
        size_t vlen = i == 1 ? spec_value(val, 40, 30, 3, 2, 7, 0)            /* overflow */
                             : spec_value(val, 3, 2, 1, (int32_t)i - 1, (uint8_t)(50 * i), 9);
        kv_add(set, kb, 8, val, vlen);
    }
}

static void add_meta(kvset *set, uint64_t count, uint64_t first, uint8_t m[128])
{
    spec_meta(m, set, count, first);
    kv_add(set, "__shardc__/meta", 15, m, 128);
}

START_TEST(test_crafted_envs)
{
    kvset set = {0};
    uint8_t m[160];
    fmt_msg msg;
    fmt_shard_info info;

    /* the spec, written by someone else, reads */
    crafted_base(&set, 77, 3);
    add_meta(&set, 3, 77, m);
    int rc = open_crafted(&set, 0, &msg, &info);
    ck_assert_msg(rc == 0, "%s", fmt_reason(&msg, rc));
    ck_assert_uint_eq(info.samples, 3);
    ck_assert_uint_eq(info.first_index, 77);
    ck_assert_uint_eq(info.fingerprint, 0x1234);
    ck_assert_uint_eq(info.input_end, 99);
    ck_assert_uint_eq(info.hash, fmt_le_get64(m + 120));
    kv_free(&set);

    /* a later minor version: a longer metadata record, reserved bytes, another reserved key */
    crafted_base(&set, 77, 3);
    spec_meta(m, &set, 3, 77);
    fmt_le_put16(m + 10, 4);
    m[104] = 0x55;
    memset(m + 128, 0x66, 32);
    rehash_meta(m);
    kv_add(&set, "__shardc__/meta", 15, m, 160);
    kv_add(&set, "__shardc__/later", 16, (const uint8_t *)"x", 1);
    ck_assert_int_eq(open_crafted(&set, 0, &msg, NULL), 0);
    kv_free(&set);

    /* not ours: no metadata */
    crafted_base(&set, 0, 2);
    crafted_fails(&set, FMT_EFORMAT, "no __shardc__/meta key (not a shardc lmdb shard)");
    kv_free(&set);

    /* keys 10 and key1 against metadata for count samples from first: a missing sample (keys
     * 10 and 12), keys from the wrong first index, counts that disagree with the keys (then
     * also with a reserved key more), a key that is neither a sample nor reserved */
    static const struct {
        uint64_t key1, count, first;
        const char *extra, *text, *reserved_text;
    } keyed[] = {
        {12, 2, 10, NULL, "key 12 found where 11 was expected", NULL},
        {11, 2, 11, NULL, "key 10 found where 11 was expected", NULL},
        {11, 3, 10, NULL, "metadata says 3 samples, the database holds 3 entries",
         "2 sample keys, the metadata says 3"},
        {11, 1, 10, NULL, "more sample keys than the 1 the metadata says", NULL},
        {11, 2, 10, "hello", "unexpected key of 5 bytes", NULL},
    };
    for (size_t k = 0; k < sizeof keyed / sizeof keyed[0]; k++) {
        crafted_base(&set, 10, 2);
        be64(set.e[1].key, keyed[k].key1);
        add_meta(&set, keyed[k].count, keyed[k].first, m);
        if (keyed[k].extra)
            kv_add(&set, keyed[k].extra, strlen(keyed[k].extra), (const uint8_t *)"x", 1);
        crafted_fails(&set, FMT_ECORRUPT, keyed[k].text);
        if (keyed[k].reserved_text) {
            kv_add(&set, "__shardc__/x", 12, (const uint8_t *)"", 0);
            crafted_fails(&set, FMT_ECORRUPT, keyed[k].reserved_text);
        }
        kv_free(&set);
    }

    /* metadata: version, size, overflowing range, index hash */
    crafted_base(&set, 10, 2);
    spec_meta(m, &set, 2, 10);
    fmt_le_put16(m + 8, 2);
    rehash_meta(m);
    kv_add(&set, "__shardc__/meta", 15, m, 128);
    crafted_fails(&set, FMT_EVERSION, "unsupported version 2.0 (this reader knows 1.x)");
    set.e[2].vlen = 100;
    crafted_fails(&set, FMT_ECORRUPT, "metadata value is 100 bytes, expected at least 128");
    set.e[2].vlen = 128;
    fmt_le_put16(set.e[2].val + 8, 1);
    fmt_le_put32(set.e[2].val + 12, 64);
    rehash_meta(set.e[2].val);
    crafted_fails(&set, FMT_ECORRUPT, "bad metadata size 64");
    fmt_le_put32(set.e[2].val + 12, 256);
    rehash_meta(set.e[2].val);
    ck_assert_int_eq(open_crafted(&set, 0, &msg, NULL), FMT_ECORRUPT);
    fmt_le_put32(set.e[2].val + 12, 128);
    fmt_le_put64(set.e[2].val + 24, UINT64_MAX);
    rehash_meta(set.e[2].val);
    crafted_fails(&set, FMT_ECORRUPT, "sample range overflows");
    fmt_le_put64(set.e[2].val + 24, 10);
    set.e[2].val[96] ^= 1;
    rehash_meta(set.e[2].val);
    crafted_fails(&set, FMT_EHASH, "bad index hash");
    set.e[2].val[96] ^= 1;
    rehash_meta(set.e[2].val);
    ck_assert_int_eq(open_crafted(&set, 0, &msg, NULL), 0);
    kv_free(&set);

    /* sample values */
    static const struct {
        size_t at;
        uint32_t value;
        int width;
        int rc;
        const char *msg;
    } bad[] = {
        {6, 40, 2, FMT_ECORRUPT, "sample 0: bad value header size 40"},
        {12, 0, 4, FMT_ECORRUPT, "sample 0: zero height or width"},
        {16, 0, 4, FMT_ECORRUPT, "sample 0: zero height or width"},
        {20, 2, 4, FMT_ECORRUPT, "sample 0: bad channel count 2"},
        {20, 0, 4, FMT_ECORRUPT, "sample 0: bad channel count 0"},
        {8, (uint32_t)-2, 4, FMT_ECORRUPT, "sample 0: bad label -2"},
        {40, 10, 4, FMT_ECORRUPT, "sample 0: value is 63 bytes, its header says 3x2x1 pixels "
                                  "and 10 aux bytes"},
        {40, 0xFFFFFFF0u, 4, FMT_ECORRUPT, NULL},
        {12, 0x80000000u, 4, FMT_ECORRUPT, NULL},
    };
    for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
        crafted_base(&set, 10, 2);
        if (bad[b].width == 2)
            fmt_le_put16(set.e[0].val + bad[b].at, (uint16_t)bad[b].value);
        else
            fmt_le_put32(set.e[0].val + bad[b].at, bad[b].value);
        add_meta(&set, 2, 10, m);
        ck_assert_int_eq(open_crafted(&set, 0, &msg, NULL), bad[b].rc);
        if (bad[b].msg)
            ck_assert_str_eq(msg.text, bad[b].msg);
        kv_free(&set);
    }
    crafted_base(&set, 10, 2);
    set.e[0].vlen = 20;
    add_meta(&set, 2, 10, m);
    crafted_fails(&set, FMT_ECORRUPT, "sample 0: value of 20 bytes is shorter than its header");
    kv_free(&set);

    /* a database with duplicate keys is not one of ours (small values: LMDB's limit for them) */
    crafted_base(&set, 10, 1);
    add_meta(&set, 1, 10, m);
    ck_assert_int_eq(open_crafted(&set, MDB_DUPSORT, &msg, NULL), FMT_ECORRUPT);
    ck_assert_str_eq(msg.text, "main database has flags 0x4");
    kv_free(&set);
}
END_TEST

/* ---- concurrent reads ---- */

typedef struct {
    void *r;
    uint64_t n;
    const uint64_t *ref;        /* per sample: hash of r_read's bytes with the metadata mixed in */
    unsigned seed;
    uint64_t mismatches;
} reader_job;

static uint64_t sample_digest(const fmt_sample *m, const uint8_t *px)
{
    uint64_t h = XXH3_64bits(px, (size_t)m->length);
    uint64_t fields[8] = {h, (uint64_t)m->label, m->height, m->width, m->channels, m->source,
                          m->hash, m->aux ? XXH3_64bits(m->aux, m->aux_len) : 0};
    return XXH3_64bits(fields, sizeof fields);
}

static void *reader_main(void *arg)
{
    reader_job *j = arg;
    uint8_t *buf = malloc(224 * 224 * 3);
    if (!buf) {
        j->mismatches++;
        return NULL;
    }
    for (int round = 0; round < 4; round++) {
        for (uint64_t k = 0; k < j->n; k++) {
            /* a different order per thread and round */
            uint64_t i = (k * 7 + j->seed * 13 + (uint64_t)round * 5) % j->n;
            fmt_sample m;
            if (be->r_get(j->r, i, &m) != 0 || be->r_read(j->r, i, buf, NULL, 0) != 0 ||
                memcmp(buf, m.pixels, (size_t)m.length) != 0 || be->r_check(j->r, i) != 0 ||
                sample_digest(&m, buf) != j->ref[i])
                j->mismatches++;
        }
    }
    free(buf);
    return NULL;
}

START_TEST(test_parallel_reads)
{
    tu_rng_state = 16;
    const size_t n = 48;
    tu_sample *s = make_samples(n, TU_SHAPES_MIXED, 1);
    /* a few full-size images among the small ones */
    for (size_t i = 0; i < n; i += 8) {
        s[i].h = 224, s[i].w = 224, s[i].c = 3;
        tu_sample_random_pixels(&s[i]);
    }
    tshard t = {"shard-00009", 0, 0, 0, 0};
    fmt_shard_info info;
    write_shard(&t, s, n, &info, NULL);
    void *r = open_shard(t.name, FMT_ACCESS_MMAP);

    /* one thread first: the reference */
    uint64_t *ref = calloc(n, sizeof *ref);
    uint8_t *buf = malloc(224 * 224 * 3);
    ck_assert_ptr_nonnull(ref);
    ck_assert_ptr_nonnull(buf);
    for (size_t i = 0; i < n; i++) {
        fmt_sample m;
        ck_assert_int_eq(be->r_get(r, i, &m), 0);
        ck_assert_int_eq(be->r_read(r, i, buf, NULL, 0), 0);
        ck_assert_mem_eq(buf, s[i].px, tu_sample_len(&s[i]));
        ref[i] = sample_digest(&m, buf);
    }
    free(buf);

    enum { THREADS = 8 };
    pthread_t th[THREADS];
    reader_job jobs[THREADS];
    for (unsigned k = 0; k < THREADS; k++) {
        jobs[k] = (reader_job){.r = r, .n = n, .ref = ref, .seed = k};
        ck_assert_int_eq(pthread_create(&th[k], NULL, reader_main, &jobs[k]), 0);
    }
    for (unsigned k = 0; k < THREADS; k++) {
        ck_assert_int_eq(pthread_join(th[k], NULL), 0);
        ck_assert_uint_eq(jobs[k].mismatches, 0);
    }
    be->r_close(r);
    free(ref);
    tu_samples_free(s, n);
}
END_TEST

/* An open shard holds no descriptor of its own (an environment held one per shard, so a dataset
 * of more shards than `ulimit -n` did not open): a mapped shard none at all, one past the
 * mapping cap one from the bounded cache at most, opened on demand; both read the same bytes. */
START_TEST(test_no_descriptor_per_shard)
{
    tu_rng_state = 17;
    const size_t n = 40;
    tu_sample *s = make_samples(n, TU_SHAPES_MIXED, 1);
    tshard t = {"shard-00011", 100, 5, 7, 0};
    fmt_shard_info info;
    write_shard(&t, s, n, &info, NULL);
    char fin[1400], data[1400];
    shard_paths(t.name, fin, NULL, data, sizeof fin);

    unsigned before = tu_open_fds();
    void *r[3];
    for (int k = 0; k < 3; k++)
        r[k] = open_shard(t.name, (fmt_access)k);
    ck_assert_uint_eq(tu_open_fds(), before);     /* mapped: no descriptor */
    fmt_sample m0;
    ck_assert_int_eq(be->r_get(r[0], 3, &m0), 0);
    ck_assert_ptr_nonnull(m0.pixels);

    size_t cap = fmt_map_cap();
    fmt_map_cap_set(0);
    unsigned cached = fmt_fdcache_open();
    void *p = open_shard(t.name, FMT_ACCESS_MMAP);
    fmt_map_cap_set(cap);
    ck_assert_uint_le(fmt_fdcache_open(), cached + 1);
    ck_assert_uint_le(tu_open_fds(), before + 1);
    uint8_t *buf = malloc(60 * 60 * 3);
    ck_assert_ptr_nonnull(buf);
    for (size_t i = 0; i < n; i++) {
        fmt_sample smp;
        tu_get_sample(be, p, i, &s[i], &smp);
        ck_assert_ptr_null(smp.pixels);         /* past the cap: read with pread */
        ck_assert_uint_eq(smp.aux_len, s[i].aux_len);
        if (s[i].aux)
            ck_assert_mem_eq(smp.aux, s[i].aux, s[i].aux_len);
        else
            ck_assert_ptr_null(smp.aux);
        memset(buf, 0x5A, 60 * 60 * 3);
        ck_assert_int_eq(be->r_read(p, i, buf, NULL, 0), 0);
        ck_assert_mem_eq(buf, s[i].px, tu_sample_len(&s[i]));
        if (tu_sample_len(&s[i]) < 60 * 60 * 3)
            ck_assert_uint_eq(buf[tu_sample_len(&s[i])], 0x5A);
        ck_assert_int_eq(be->r_check(p, i), 0);
        /* the mapped shards read the same, their pixels where they were */
        fmt_sample ms;
        ck_assert_int_eq(be->r_get(r[i % 3], i, &ms), 0);
        ck_assert_mem_eq(ms.pixels, s[i].px, tu_sample_len(&s[i]));
    }
    ck_assert_mem_eq(m0.pixels, s[3].px, tu_sample_len(&s[3]));
    ck_assert_int_eq(be->r_advise(p, FMT_ADVICE_RANDOM), 0);
    ck_assert_uint_le(tu_open_fds(), before + 1);

    /* a pixel flipped in the file: r_check of the pread shard sees it */
    fmt_sample smp;
    ck_assert_int_eq(be->r_get(p, 5, &smp), 0);
    uint64_t at = 0;
    {
        /* find sample 5's value in the file: its header's magic, then its pixels */
        FILE *f = fopen(data, "rb");
        ck_assert_ptr_nonnull(f);
        uint8_t *file = malloc(info.bytes);
        ck_assert_ptr_nonnull(file);
        ck_assert_uint_eq(fread(file, 1, info.bytes, f), info.bytes);
        fclose(f);
        for (at = LM_VALUE_HEADER_TEST; at + smp.length <= info.bytes; at++)
            if (memcmp(file + at, s[5].px, smp.length) == 0 &&
                memcmp(file + at - LM_VALUE_HEADER_TEST, "SHLV", 4) == 0)
                break;
        ck_assert_uint_lt(at + smp.length, info.bytes + 1);
        free(file);
    }
    for (int k = 0; k < 3; k++)
        be->r_close(r[k]);
    ck_assert_uint_le(tu_open_fds(), before + 1);
    int fd = open(data, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    uint8_t flip = (uint8_t)(s[5].px[0] ^ 0xFF);
    ck_assert_int_eq(pwrite(fd, &flip, 1, (off_t)at), 1);
    close(fd);
    ck_assert_int_eq(be->r_check(p, 5), FMT_EHASH);
    ck_assert_int_eq(be->r_check(p, 4), 0);
    be->r_close(p);
    ck_assert_uint_eq(tu_open_fds(), before);
    ck_assert_uint_eq(fmt_fdcache_open(), cached);
    free(buf);
    tu_samples_free(s, n);
}
END_TEST

/* lmdb 1.1: a shard's skeleton, the __shardc__/index value the manifest's range locates, opens
 * (r_open_parts) to the same account and samples as the file, without pixels; a byte changed in
 * it is refused, and so is a manifest whose range does not locate it (precheck). */
START_TEST(test_open_parts)
{
    tu_rng_state = 31;
    const size_t n = 23;
    tu_sample *s = make_samples(n, TU_SHAPES_MIXED, 1);
    tshard t = {"shard-00008", 400, 0xABCDEF, 99, 0};
    fmt_shard_info info;
    write_shard(&t, s, n, &info, NULL);
    fmt_manifest_shard ms = {.bytes = info.bytes, .hash = info.hash, .pins = info.pins,
                             .pin_hash = info.pin_hash, .skel_off = info.skel_off,
                             .skel_len = info.skel_len};
    ck_assert_uint_gt(info.skel_len, 128 + 48 * n);
    uint64_t hl = 1, from = 0, to = 0;
    ck_assert_int_eq(be->r_head_of(&ms, &hl, NULL), 0);
    ck_assert_uint_eq(hl, 0);
    ck_assert_int_eq(be->r_tail(NULL, &ms, &from, &to, NULL), 0);
    ck_assert_uint_eq(from, info.skel_off);
    ck_assert_uint_eq(to, info.skel_off + info.skel_len);
    char fin[1400], data[1400];
    shard_paths(t.name, fin, NULL, data, sizeof fin);
    size_t len;
    uint8_t *buf = tu_slurp(data, &len);
    ck_assert_uint_eq(len, info.bytes);
    fmt_msg msg = {{0}};
    void *sk = NULL, *sh = open_shard(t.name, FMT_ACCESS_PREAD);
    ck_assert_msg(be->r_open_parts(&sk, &ms, NULL, 0, buf + from, to - from, &msg) == 0, "%s",
                  msg.text);
    tu_skeleton_matches(be, sk, sh, s, n);
    be->r_close(sk);
    be->r_close(sh);
    /* a byte changed in the metadata, in a header, in an aux record: refused */
    size_t at[3] = {(size_t)from + 40, (size_t)from + 128 + 48 * 3 + 12, (size_t)to - 1};
    int want[3] = {FMT_EHASH, FMT_EHASH, FMT_EHASH};
    for (int k = 0; k < 3; k++) {
        buf[at[k]] ^= 0x10;
        sk = NULL;
        msg.text[0] = '\0';
        ck_assert_int_eq(be->r_open_parts(&sk, &ms, NULL, 0, buf + from, to - from, &msg), want[k]);
        ck_assert_ptr_null(sk);
        ck_assert(msg.text[0]);
        buf[at[k]] ^= 0x10;
    }
    /* without a range (a build before 1.1): no skeleton */
    fmt_manifest_shard old = ms;
    old.skel_off = old.skel_len = 0;
    ck_assert_int_eq(be->r_head_of(&old, &hl, NULL), FMT_EUNSUPPORTED);
    /* a range that is not the index value's: the file's open refuses the manifest */
    ck_assert_int_eq(be->r_precheck(fin, &ms, NULL), 0);
    fmt_manifest_shard moved = ms;
    moved.skel_off += 16;
    msg.text[0] = '\0';
    ck_assert_int_eq(be->r_precheck(fin, &moved, &msg), FMT_ECORRUPT);
    ck_assert_msg(strstr(msg.text, "skeleton range"), "%s", msg.text);
    free(buf);
    tu_samples_free(s, n);
}
END_TEST

int main(void)
{
    return tu_run(TU_TEMP_SUITE("lmdb", "core", 120, test_roundtrip_fixed_gray,
                                test_roundtrip_fixed_rgb, test_roundtrip_mixed, test_empty_shard,
                                test_large_shard, test_standard_tools, test_tmp_and_abort,
                                test_replace_existing, test_writer_bad_args, test_write_failure,
                                test_pixel_damage, test_header_damage, test_meta_damage,
                                test_truncation, test_garbage, test_crafted_envs,
                                test_parallel_reads, test_no_descriptor_per_shard,
                                test_open_parts));
}
