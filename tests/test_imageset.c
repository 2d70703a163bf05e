/* test_imageset.c - the per-image set backends png0, bmp and jpeg, through the fmt_backend table:
 * round trips, files checked with independent decoders (Pillow, djpeg), damage and atomicity. */
#include "imageset.h"
#include "image.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

static const fmt_backend *const g_backends[] = { &fmt_backend_png0, &fmt_backend_bmp,
                                                 &fmt_backend_jpeg };
static const char *const g_ext[] = { "png", "bmp", "jpg" };

static int is_jpeg(const fmt_backend *be)
{
    return be == &fmt_backend_jpeg;
}

/* Recompute an index's trailer hash after the test edited it. */
static void rehash(uint8_t *buf, size_t len)
{
    fmt_le_put64(buf + len - 8, XXH3_64bits(buf, len - 8));
}

static size_t g_count;

static int count_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    if (ftw->level > 0)
        g_count++;
    return 0;
}

/* Files and folders under dir, dir itself not counted. */
static size_t entries_under(const char *dir)
{
    g_count = 0;
    ck_assert_int_eq(nftw(dir, count_entry, 16, FTW_PHYS), 0);
    return g_count;
}

/* ---- fixtures ---- */

/* Smooth gradients with a little noise: typical of photos, so that JPEG stays close to them. */
static tu_sample *make_samples(size_t n, int shapes, int with_aux, int32_t nlabels)
{
    tu_sample *s = tu_samples_new(n);
    for (size_t i = 0; i < n; i++) {
        tu_sample_shape(&s[i], i, shapes, 24, 20, 40);
        s[i].label = (i % 5 == 4) ? -1 : (int32_t)(i % (size_t)nlabels);
        s[i].source = tu_rng();
        s[i].px = malloc((size_t)s[i].h * s[i].w * s[i].c);
        ck_assert_ptr_nonnull(s[i].px);
        uint8_t *p = s[i].px;
        for (uint32_t y = 0; y < s[i].h; y++)
            for (uint32_t x = 0; x < s[i].w; x++)
                for (uint32_t c = 0; c < s[i].c; c++)
                    *p++ = (uint8_t)(x * 150 / s[i].w + y * 60 / s[i].h + c * 20 + tu_rng() % 6);
        if (with_aux && i % 3 != 1)
            tu_sample_random_aux(&s[i], 1 + (uint32_t)(tu_rng() % 70));
    }
    return s;
}

static const char *const g_classes[] = { "cat", "big dog", "emu" };

typedef struct {
    const char *dir;
    const char *name;
    uint64_t first, fingerprint, input_end;
    const char *const *classes;
    size_t nclasses;
    int quality;
} wopts;

static void idx_path(char *out, size_t n, const char *dir, const char *name)
{
    snprintf(out, n, "%s/%s.idx", dir, name);
}

/* Write samples as one shard, asserting the writer's accounting; stored[i] (if not NULL) gets
 * what w_add said it stored. */
static fmt_shard_info write_set(const fmt_backend *be, const wopts *o, const tu_sample *s, size_t n,
                                uint64_t *stored)
{
    fmt_writer_opts wo = { .dir = o->dir, .name = o->name, .first_index = o->first,
                           .fingerprint = o->fingerprint, .quality = o->quality,
                           .classes = o->classes, .nclasses = o->nclasses };
    void *w;
    ck_assert_int_eq(be->w_open(&w, &wo), 0);
    uint64_t prev = be->w_size(w);
    for (size_t i = 0; i < n; i++) {
        fmt_sample_meta m;
        tu_sample_meta(&s[i], &m);
        uint64_t h = 0;
        int rc = be->w_add(w, &m, s[i].px, &h);
        ck_assert_msg(rc == 0, "add %zu: %s", i, fmt_strerror(rc));
        if (!is_jpeg(be))
            ck_assert_uint_eq(h, m.hash);
        if (stored)
            stored[i] = h;
        ck_assert_uint_eq(be->w_count(w), i + 1);
        uint64_t size = be->w_size(w);
        ck_assert_uint_gt(size, prev + 64 + s[i].aux_len);
        prev = size;
    }
    char p[4200];
    idx_path(p, sizeof p, o->dir, o->name);
    ck_assert(!tu_exists(p));
    fmt_shard_info info;
    memset(&info, 0xAB, sizeof info);
    ck_assert_int_eq(be->w_finish(w, o->input_end, &info), 0);
    ck_assert(tu_exists(p));
    ck_assert_uint_eq(info.bytes, prev);
    return info;
}

/* ---- independent decoders ---- */

/* Parse a binary PNM (P5 or P6, maxval 255). Returns the pixels (malloc'd) or NULL. */
static uint8_t *parse_pnm(const uint8_t *b, size_t len, uint32_t *w, uint32_t *h, uint32_t *c)
{
    if (len < 2 || b[0] != 'P' || (b[1] != '5' && b[1] != '6'))
        return NULL;
    *c = b[1] == '5' ? 1 : 3;
    size_t pos = 2;
    unsigned long v[3];
    for (int k = 0; k < 3; k++) {
        while (pos < len && (b[pos] == ' ' || b[pos] == '\n' || b[pos] == '\r' || b[pos] == '\t'))
            pos++;
        v[k] = 0;
        while (pos < len && b[pos] >= '0' && b[pos] <= '9')
            v[k] = v[k] * 10 + (b[pos++] - '0');
    }
    pos++; /* the single whitespace after maxval */
    *w = (uint32_t)v[0];
    *h = (uint32_t)v[1];
    size_t n = (size_t)*w * *h * *c;
    if (v[2] != 255 || pos + n != len)
        return NULL;
    uint8_t *px = malloc(n ? n : 1);
    if (px)
        memcpy(px, b + pos, n);
    return px;
}

static int have_djpeg(void)
{
    return system("djpeg -version </dev/null >/dev/null 2>&1") == 0 ||
           access("/usr/bin/djpeg", X_OK) == 0;
}

static int have_pil(void)
{
    return access("/usr/bin/python3", X_OK) == 0 &&
           system("/usr/bin/python3 -c 'import PIL.Image' >/dev/null 2>&1") == 0;
}

/* Decode an image file with djpeg (JPEG) or Pillow (PNG, BMP) into c channels; NULL and a
 * visible note if the tool is missing. */
static uint8_t *decode_external(const char *path, uint32_t c, uint32_t *w, uint32_t *h)
{
    char cmd[5000];
    const char *ext = strrchr(path, '.');
    if (strcmp(ext, ".jpg") == 0) {
        if (!have_djpeg()) {
            tu_skip("djpeg comparison: djpeg not installed (libjpeg-turbo-progs)");
            return NULL;
        }
        snprintf(cmd, sizeof cmd, "djpeg -pnm '%s'", path);
    } else {
        if (!have_pil()) {
            tu_skip("Pillow comparison: /usr/bin/python3 with PIL not available");
            return NULL;
        }
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 -c 'import sys; from PIL import Image; "
                 "im = Image.open(sys.argv[1]).convert(sys.argv[2]); "
                 "sys.stdout.buffer.write(b\"%%s %%d %%d 255\\n\" %% (b\"P5\" if im.mode == \"L\" "
                 "else b\"P6\", im.width, im.height) + im.tobytes())' '%s' %s", path,
                 c == 1 ? "L" : "RGB");
    }
    size_t len;
    int status;
    uint8_t *out = tu_run_capture(cmd, &len, &status);
    ck_assert_msg(status == 0, "%s failed (status %d)", cmd, status);
    uint32_t oc;
    uint8_t *px = parse_pnm(out, len, w, h, &oc);
    free(out);
    ck_assert_msg(px != NULL, "cannot parse the output of %s", cmd);
    ck_assert_uint_eq(oc, c);
    return px;
}

/* ---- round trips ---- */

static void sample_file(char *out, size_t n, const char *dir, const char *folder, uint64_t index,
                        const char *ext)
{
    snprintf(out, n, "%s/%s/%08" PRIu64 ".%s", dir, folder, index, ext);
}

static const char *expected_folder(int32_t label, char *buf)
{
    if (label >= 0 && label < 3)
        return g_classes[label];
    sprintf(buf, "%d", label);
    return buf;
}

/* Write n samples with backend bi, reopen, and check every field, every pixel (against the input
 * for lossless sets, against djpeg for JPEG) and every file. */
static void roundtrip(int bi, size_t n, int shapes, int with_aux)
{
    const fmt_backend *be = g_backends[bi];
    tu_rng_state = 0x9E3779B97F4A7C15ULL ^ (n * 131 + (uint64_t)shapes * 7 + (uint64_t)bi);
    tu_sample *s = make_samples(n, shapes, with_aux, 4); /* label 3 is outside the class list */
    uint64_t *stored = calloc(n + 1, sizeof *stored);
    ck_assert_ptr_nonnull(stored);
    wopts o = { .dir = g_dir, .name = "shard-00002", .first = 100 + n,
                .fingerprint = 0xFEEDFACECAFEBEEFULL, .input_end = 777, .classes = g_classes,
                .nclasses = 3 };
    fmt_shard_info wi = write_set(be, &o, s, n, stored);

    char path[4200];
    idx_path(path, sizeof path, g_dir, o.name);
    void *sh;
    fmt_msg msg = {{0}};
    int rc = be->r_open(&sh, g_dir, path, FMT_ACCESS_MMAP, &msg);
    ck_assert_msg(rc == 0, "open: %s", fmt_reason(&msg, rc));
    const fmt_shard_info *in = be->r_info(sh);
    ck_assert_uint_eq(in->samples, n);
    ck_assert_uint_eq(in->first_index, 100 + n);
    ck_assert_uint_eq(in->fingerprint, 0xFEEDFACECAFEBEEFULL);
    ck_assert_uint_eq(in->input_end, 777);
    ck_assert_uint_eq(in->hash, wi.hash);
    ck_assert_uint_eq(in->bytes, wi.bytes);
    ck_assert_uint_eq(wi.samples, n);
    ck_assert_uint_eq(wi.first_index, 100 + n);
    ck_assert_uint_eq(wi.input_end, 777);

    /* the manifest hash is the index's trailer */
    size_t ilen;
    uint8_t *ibuf = tu_slurp(path, &ilen);
    ck_assert_uint_eq(in->hash, fmt_le_get64(ibuf + ilen - 8));
    ck_assert_uint_eq(in->hash, XXH3_64bits(ibuf, ilen - 8));
    ck_assert_mem_eq(ibuf, "SHARDIDX", 8);

    uint64_t sum[3] = {0}, sumsq[3] = {0}, disk = ilen;
    double abs_err = 0, values = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t len = tu_sample_len(&s[i]);
        for (uint64_t k = 0; k < len; k++) {
            uint64_t v = s[i].px[k];
            sum[k % s[i].c] += v;
            sumsq[k % s[i].c] += v * v;
        }
        fmt_sample smp;
        tu_get_sample(be, sh, i, &s[i], &smp);
        ck_assert_ptr_null(smp.pixels);
        ck_assert_uint_eq(smp.hash, stored[i]);
        if (s[i].aux) {
            ck_assert_uint_eq(smp.aux_len, s[i].aux_len);
            ck_assert_mem_eq(smp.aux, s[i].aux, s[i].aux_len);
        } else {
            ck_assert_ptr_null(smp.aux);
            ck_assert_uint_eq(smp.aux_len, 0);
        }

        /* the file: in its class folder, named by the dataset-wide index */
        char fb[16], file[4400], got_path[4400];
        sample_file(file, sizeof file, g_dir, expected_folder(s[i].label, fb), 100 + n + i,
                    g_ext[bi]);
        ck_assert_msg(tu_exists(file), "missing %s", file);
        ck_assert_int_eq(fmt_imageset_sample_path(sh, i, got_path, sizeof got_path), 0);
        ck_assert_str_eq(got_path, file);
        uint64_t fsize = tu_file_size(file);
        disk += fsize;
        if (bi == 0) /* PNG-0 is stored, not compressed */
            ck_assert_uint_ge(fsize, len);

        uint8_t *px = malloc(len);
        ck_assert_ptr_nonnull(px);
        rc = be->r_read(sh, i, px, NULL, 0);
        ck_assert_msg(rc == 0, "read %zu: %s", i, fmt_strerror(rc));
        ck_assert_uint_eq(fmt_hash64(px, len), stored[i]);
        if (!is_jpeg(be)) {
            ck_assert_mem_eq(px, s[i].px, len);
        } else {
            uint32_t ew, eh;
            uint8_t *ref = decode_external(file, s[i].c, &ew, &eh);
            if (ref) {
                ck_assert_uint_eq(ew, s[i].w);
                ck_assert_uint_eq(eh, s[i].h);
                ck_assert_mem_eq(px, ref, len);
                free(ref);
            }
            for (uint64_t k = 0; k < len; k++)
                abs_err += abs((int)px[k] - (int)s[i].px[k]);
            values += (double)len;
        }
        free(px);
        ck_assert_int_eq(be->r_check(sh, i), 0);
    }
    if (values > 0)
        ck_assert_msg(abs_err / values < 3.0, "jpeg q90 mean abs error %.2f", abs_err / values);
    for (int c = 0; c < 3; c++) {
        ck_assert_uint_eq(in->sum[c], sum[c]);
        ck_assert_uint_eq(in->sumsq[c], sumsq[c]);
        ck_assert_uint_eq(wi.sum[c], sum[c]);
        ck_assert_uint_eq(wi.sumsq[c], sumsq[c]);
    }
    ck_assert_uint_eq(in->bytes, disk);
    fmt_sample smp;
    ck_assert_int_eq(be->r_get(sh, n, &smp), FMT_EINVAL);
    ck_assert_int_eq(be->r_check(sh, n), FMT_EINVAL);
    be->r_close(sh);

    /* deterministic: the same samples into another directory give the same index and files */
    char dir2[4200];
    snprintf(dir2, sizeof dir2, "%s/again", g_dir);
    ck_assert_int_eq(mkdir(dir2, 0755), 0);
    o.dir = dir2;
    fmt_shard_info wi2 = write_set(be, &o, s, n, NULL);
    ck_assert_uint_eq(wi2.hash, wi.hash);
    ck_assert_uint_eq(wi2.bytes, wi.bytes);
    char path2[4300];
    idx_path(path2, sizeof path2, dir2, o.name);
    size_t ilen2;
    uint8_t *ibuf2 = tu_slurp(path2, &ilen2);
    ck_assert_uint_eq(ilen, ilen2);
    ck_assert_mem_eq(ibuf, ibuf2, ilen);
    free(ibuf);
    free(ibuf2);
    free(stored);
    tu_samples_free(s, n);
}

START_TEST(test_roundtrip_fixed_gray)
{
    roundtrip(_i, 9, TU_SHAPES_FIXED_GRAY, 0);
}
END_TEST

START_TEST(test_roundtrip_fixed_rgb)
{
    roundtrip(_i, 7, TU_SHAPES_FIXED_RGB, 1);
}
END_TEST

START_TEST(test_roundtrip_mixed)
{
    roundtrip(_i, 23, TU_SHAPES_MIXED, 1);
}
END_TEST

START_TEST(test_empty_shard)
{
    const fmt_backend *be = g_backends[_i];
    wopts o = { .dir = g_dir, .name = "shard-00000", .first = 0, .fingerprint = 5,
                .input_end = 9 };
    fmt_shard_info wi = write_set(be, &o, NULL, 0, NULL);
    ck_assert_uint_eq(wi.samples, 0);
    char path[4200];
    idx_path(path, sizeof path, g_dir, o.name);
    ck_assert_uint_eq(wi.bytes, tu_file_size(path));
    ck_assert_uint_eq(wi.bytes, 168);
    ck_assert_uint_eq(entries_under(g_dir), 1); /* only the index */
    void *sh;
    fmt_msg msg = {{0}};
    int rc = be->r_open(&sh, g_dir, path, FMT_ACCESS_PREAD, &msg);
    ck_assert_msg(rc == 0, "open: %s", fmt_reason(&msg, rc));
    const fmt_shard_info *in = be->r_info(sh);
    ck_assert_uint_eq(in->samples, 0);
    ck_assert_uint_eq(in->fingerprint, 5);
    ck_assert_uint_eq(in->input_end, 9);
    ck_assert_uint_eq(in->hash, wi.hash);
    ck_assert_uint_eq(in->bytes, 168);
    fmt_sample smp;
    ck_assert_int_eq(be->r_get(sh, 0, &smp), FMT_EINVAL);
    be->r_close(sh);
    be->r_close(NULL);
}
END_TEST

/* ---- the files, read by other decoders ---- */

START_TEST(test_files_independent_decoder)
{
    const fmt_backend *be = g_backends[_i];
    tu_rng_state = 42 + (uint64_t)_i;
    tu_sample *s = make_samples(6, TU_SHAPES_MIXED, 0, 3);
    s[0].c = 1; /* make sure both kinds are there (pixels stay valid: fewer bytes are read) */
    s[1].c = 3;
    free(s[1].px);
    s[1].px = malloc(tu_sample_len(&s[1]));
    for (uint64_t k = 0; k < tu_sample_len(&s[1]); k++)
        s[1].px[k] = (uint8_t)(k * 3);
    uint64_t stored[6];
    wopts o = { .dir = g_dir, .name = "shard-00000", .classes = g_classes, .nclasses = 3 };
    write_set(be, &o, s, 6, stored);
    for (size_t i = 0; i < 6; i++) {
        char fb[16], file[4400];
        sample_file(file, sizeof file, g_dir, expected_folder(s[i].label, fb), i, g_ext[_i]);
        uint32_t w, h;
        uint8_t *px = decode_external(file, s[i].c, &w, &h);
        if (!px)
            continue;
        ck_assert_uint_eq(w, s[i].w);
        ck_assert_uint_eq(h, s[i].h);
        if (is_jpeg(be)) /* what a JPEG decoder sees is what the stored hash is of */
            ck_assert_uint_eq(fmt_hash64(px, tu_sample_len(&s[i])), stored[i]);
        else
            ck_assert_mem_eq(px, s[i].px, tu_sample_len(&s[i]));
        free(px);
    }
    /* and our own decoder of the files agrees with the reader */
    for (size_t i = 0; i < 6; i++) {
        char fb[16], file[4400];
        sample_file(file, sizeof file, g_dir, expected_folder(s[i].label, fb), i, g_ext[_i]);
        size_t len;
        uint8_t *buf = tu_slurp(file, &len);
        fmt_image_type t = fmt_image_sniff(buf, len);
        ck_assert_int_eq(t, _i == 0 ? FMT_IMG_PNG : _i == 1 ? FMT_IMG_BMP : FMT_IMG_JPEG);
        free(buf);
    }
    tu_samples_free(s, 6);
}
END_TEST

START_TEST(test_png0_is_stored)
{
    /* a constant image compresses to almost nothing at any level above 0 */
    uint8_t px[64 * 48 * 3];
    memset(px, 7, sizeof px);
    tu_sample s = { .h = 48, .w = 64, .c = 3, .label = 0, .px = px };
    wopts o = { .dir = g_dir, .name = "shard-00000", .classes = g_classes, .nclasses = 3 };
    write_set(&fmt_backend_png0, &o, &s, 1, NULL);
    char file[4400];
    sample_file(file, sizeof file, g_dir, "cat", 0, "png");
    uint64_t size = tu_file_size(file);
    ck_assert_uint_ge(size, sizeof px + 48); /* pixels and one filter byte per row */
    ck_assert_uint_lt(size, sizeof px + 48 + 200);
    /* the raw rows are in the file as they are */
    size_t len;
    uint8_t *buf = tu_slurp(file, &len);
    uint8_t row[64 * 3 + 1];
    row[0] = 0; /* filter type none */
    memset(row + 1, 7, sizeof row - 1);
    ck_assert_ptr_nonnull(memmem(buf, len, row, sizeof row));
    free(buf);
}
END_TEST

START_TEST(test_bmp_layout)
{
    /* 24-bit RGB, 8-bit gray */
    uint8_t rgb[5 * 3 * 3], gray[5 * 3];
    for (size_t k = 0; k < sizeof rgb; k++)
        rgb[k] = (uint8_t)(k * 5);
    for (size_t k = 0; k < sizeof gray; k++)
        gray[k] = (uint8_t)(k * 11);
    tu_sample s[2] = { { .h = 3, .w = 5, .c = 3, .label = 1, .px = rgb },
                     { .h = 3, .w = 5, .c = 1, .label = 1, .px = gray } };
    wopts o = { .dir = g_dir, .name = "shard-00000", .classes = g_classes, .nclasses = 3 };
    write_set(&fmt_backend_bmp, &o, s, 2, NULL);
    char file[4400];
    size_t len;
    sample_file(file, sizeof file, g_dir, "big dog", 0, "bmp");
    uint8_t *b = tu_slurp(file, &len);
    ck_assert_uint_eq(b[28], 24);
    ck_assert_uint_eq(len, 54 + 3 * 16);
    free(b);
    sample_file(file, sizeof file, g_dir, "big dog", 1, "bmp");
    b = tu_slurp(file, &len);
    ck_assert_uint_eq(b[28], 8);
    free(b);
}
END_TEST

START_TEST(test_jpeg_quality)
{
    tu_rng_state = 99;
    tu_sample *s = make_samples(1, TU_SHAPES_FIXED_RGB, 0, 3);
    uint64_t sizes[2];
    int q[2] = { 30, 98 };
    for (int k = 0; k < 2; k++) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/q%d", g_dir, q[k]);
        ck_assert_int_eq(mkdir(dir, 0755), 0);
        wopts o = { .dir = dir, .name = "shard-00000", .classes = g_classes, .nclasses = 3,
                    .quality = q[k] };
        write_set(&fmt_backend_jpeg, &o, s, 1, NULL);
        char file[4400];
        sample_file(file, sizeof file, dir, "cat", 0, "jpg");
        sizes[k] = tu_file_size(file);
        char path[4300];
        idx_path(path, sizeof path, dir, o.name);
        size_t len;
        uint8_t *b = tu_slurp(path, &len);
        ck_assert_uint_eq(fmt_le_get32(b + 20), (uint32_t)q[k]); /* recorded for information */
        free(b);
    }
    ck_assert_uint_lt(sizes[0], sizes[1]);
    /* quality 0 is the default 90, others outside 1..100 are refused */
    void *w;
    fmt_writer_opts wo = { .dir = g_dir, .name = "x", .quality = 101 };
    ck_assert_int_eq(fmt_backend_jpeg.w_open(&w, &wo), FMT_EINVAL);
    wo.quality = -1;
    ck_assert_int_eq(fmt_backend_jpeg.w_open(&w, &wo), FMT_EINVAL);
    tu_samples_free(s, 1);
}
END_TEST

/* ---- class folders ---- */

START_TEST(test_class_folders)
{
    const fmt_backend *be = g_backends[_i];
    static const char *const classes[] = { "cat", ".hidden", "a/b", NULL, "..", "", "ok\nno",
                                           "spaced name" };
    /* label: expected folder */
    static const struct { int32_t label; const char *folder; } want[] = {
        { 0, "cat" }, { 1, "1" }, { 2, "2" }, { 3, "3" }, { 4, "4" }, { 5, "5" }, { 6, "6" },
        { 7, "spaced name" }, { 8, "8" }, { -1, "-1" }, { 0, "cat" }, { 12345, "12345" },
    };
    size_t n = sizeof want / sizeof want[0];
    tu_sample *s = calloc(n, sizeof *s);
    uint8_t px[4 * 4 * 3];
    memset(px, 100, sizeof px);
    for (size_t i = 0; i < n; i++)
        s[i] = (tu_sample){ .h = 4, .w = 4, .c = 3, .label = want[i].label, .px = px };
    wopts o = { .dir = g_dir, .name = "shard-00007", .first = 99999998, .classes = classes,
                .nclasses = 8 };
    write_set(be, &o, s, n, NULL);
    /* 9-digit indexes past 99999999 */
    for (size_t i = 0; i < n; i++) {
        char file[4400];
        sample_file(file, sizeof file, g_dir, want[i].folder, 99999998 + i, g_ext[_i]);
        ck_assert_msg(tu_exists(file), "missing %s", file);
    }
    char file[4400];
    snprintf(file, sizeof file, "%s/cat/100000008.%s", g_dir, g_ext[_i]);
    ck_assert(tu_exists(file));
    /* folders cat 1 2 3 4 5 6 "spaced name" 8 -1 12345, the files, the index; no temp files */
    ck_assert_uint_eq(entries_under(g_dir), 11 + n + 1);
    free(s);
}
END_TEST

/* ---- damage ---- */

/* A finished shard of n mixed samples in g_dir; returns the open reader. */
static void *damaged_fixture(const fmt_backend *be, size_t n, tu_sample **sp, char *path,
                             size_t plen)
{
    tu_rng_state = 1234;
    *sp = make_samples(n, TU_SHAPES_MIXED, 1, 3);
    for (size_t i = 0; i < n; i++) {
        /* big enough that a byte in the middle of the file is pixel data */
        (*sp)[i].h += 16;
        (*sp)[i].w += 16;
        free((*sp)[i].px);
        (*sp)[i].px = malloc(tu_sample_len(&(*sp)[i]));
        for (uint64_t k = 0; k < tu_sample_len(&(*sp)[i]); k++)
            (*sp)[i].px[k] = (uint8_t)(k / 7 + i);
    }
    wopts o = { .dir = g_dir, .name = "shard-00001", .first = 50, .classes = g_classes,
                .nclasses = 3 };
    write_set(be, &o, *sp, n, NULL);
    idx_path(path, plen, g_dir, o.name);
    void *sh;
    fmt_msg msg = {{0}};
    int rc = be->r_open(&sh, g_dir, path, FMT_ACCESS_MMAP, &msg);
    ck_assert_msg(rc == 0, "open: %s", fmt_reason(&msg, rc));
    return sh;
}

START_TEST(test_missing_file)
{
    const fmt_backend *be = g_backends[_i];
    tu_sample *s;
    char path[4200], file[4400];
    void *sh = damaged_fixture(be, 5, &s, path, sizeof path);
    ck_assert_int_eq(fmt_imageset_sample_path(sh, 2, file, sizeof file), 0);
    ck_assert_int_eq(unlink(file), 0);
    uint8_t *px = malloc(tu_sample_len(&s[2]));
    ck_assert_int_eq(be->r_read(sh, 2, px, NULL, 0), ENOENT);
    ck_assert_int_eq(be->r_check(sh, 2), ENOENT);
    fmt_msg msg = {{0}};
    ck_assert_int_eq(fmt_imageset_read(sh, 2, px, &msg), ENOENT);
    ck_assert_msg(strstr(msg.text, file) != NULL, "message does not name the file: %s", msg.text);
    memset(&msg, 0, sizeof msg);
    ck_assert_int_eq(fmt_imageset_check(sh, 2, &msg), ENOENT);
    ck_assert_msg(strstr(msg.text, file) != NULL, "message does not name the file: %s", msg.text);
    /* the others are unaffected; open does not look at the files */
    ck_assert_int_eq(be->r_check(sh, 1), 0);
    ck_assert_int_eq(be->r_check(sh, 3), 0);
    be->r_close(sh);
    fmt_msg omsg = {{0}};
    ck_assert_int_eq(be->r_open(&sh, g_dir, path, FMT_ACCESS_MMAP, &omsg), 0);
    be->r_close(sh);
    /* a folder where the file should be */
    ck_assert_int_eq(mkdir(file, 0755), 0);
    ck_assert_int_eq(be->r_open(&sh, g_dir, path, FMT_ACCESS_MMAP, &omsg), 0);
    ck_assert_int_eq(be->r_read(sh, 2, px, NULL, 0), EISDIR);
    be->r_close(sh);
    free(px);
    tu_samples_free(s, 5);
}
END_TEST

START_TEST(test_damaged_file)
{
    const fmt_backend *be = g_backends[_i];
    tu_sample *s;
    char path[4200], file[4400];
    void *sh = damaged_fixture(be, 5, &s, path, sizeof path);
    ck_assert_int_eq(fmt_imageset_sample_path(sh, 1, file, sizeof file), 0);
    size_t len;
    uint8_t *b = tu_slurp(file, &len);
    b[len / 2] ^= 0x5A;
    tu_spit(file, b, len);
    ck_assert_int_eq(be->r_check(sh, 1), FMT_EHASH);
    fmt_msg msg = {{0}};
    ck_assert_int_eq(fmt_imageset_check(sh, 1, &msg), FMT_EHASH);
    ck_assert_msg(strstr(msg.text, file) != NULL, "message does not name the file: %s", msg.text);
    ck_assert_int_eq(be->r_check(sh, 0), 0);
    ck_assert_int_eq(be->r_check(sh, 2), 0);
    /* reading does not hash: it decodes (PNG: the chunk CRC catches it) or gives other pixels */
    uint8_t *px = malloc(tu_sample_len(&s[1]));
    int rc = be->r_read(sh, 1, px, NULL, 0);
    if (_i == 0)
        ck_assert_int_ne(rc, 0);
    if (rc == 0 && !is_jpeg(be))
        ck_assert(memcmp(px, s[1].px, tu_sample_len(&s[1])) != 0);
    free(b);

    /* a truncated file, and one with bytes appended */
    ck_assert_int_eq(fmt_imageset_sample_path(sh, 3, file, sizeof file), 0);
    b = tu_slurp(file, &len);
    tu_spit(file, b, len - 10);
    ck_assert_int_eq(be->r_read(sh, 3, px, NULL, 0), FMT_ETRUNC);
    ck_assert_int_eq(be->r_check(sh, 3), FMT_ETRUNC);
    uint8_t *longer = malloc(len + 1);
    memcpy(longer, b, len);
    longer[len] = 0;
    tu_spit(file, longer, len + 1);
    memset(&msg, 0, sizeof msg);
    ck_assert_int_eq(fmt_imageset_read(sh, 3, px, &msg), FMT_ECORRUPT);
    ck_assert_msg(strstr(msg.text, file) != NULL, "message does not name the file: %s", msg.text);
    tu_spit(file, b, len);
    ck_assert_int_eq(be->r_check(sh, 3), 0);
    free(longer);
    free(b);

    /* the same bytes but not an image at all: the file hash catches it first, decode in read */
    ck_assert_int_eq(fmt_imageset_sample_path(sh, 4, file, sizeof file), 0);
    b = tu_slurp(file, &len);
    memset(b, 'x', len);
    tu_spit(file, b, len);
    ck_assert_int_eq(be->r_check(sh, 4), FMT_EHASH);
    memset(&msg, 0, sizeof msg);
    ck_assert_int_eq(fmt_imageset_read(sh, 4, px, &msg), FMT_EFORMAT);
    ck_assert_msg(strstr(msg.text, file) != NULL, "message does not name the file: %s", msg.text);
    free(b);
    free(px);
    be->r_close(sh);
    tu_samples_free(s, 5);
}
END_TEST

/* Index with entry i's height and width swapped (same byte count): the file decodes to another
 * shape than recorded. */
START_TEST(test_shape_mismatch)
{
    const fmt_backend *be = g_backends[_i];
    uint8_t px[6 * 10 * 3];
    for (size_t k = 0; k < sizeof px; k++)
        px[k] = (uint8_t)(k / 3);
    tu_sample s = { .h = 6, .w = 10, .c = 3, .label = 0, .px = px };
    wopts o = { .dir = g_dir, .name = "shard-00000", .classes = g_classes, .nclasses = 3 };
    write_set(be, &o, &s, 1, NULL);
    char path[4200];
    idx_path(path, sizeof path, g_dir, o.name);
    size_t len;
    uint8_t *b = tu_slurp(path, &len);
    fmt_le_put32(b + 160 + 44, 10);
    fmt_le_put32(b + 160 + 48, 6);
    rehash(b, len);
    tu_spit(path, b, len);
    void *sh;
    fmt_msg msg = {{0}};
    ck_assert_int_eq(be->r_open(&sh, g_dir, path, FMT_ACCESS_MMAP, &msg), 0);
    uint8_t out[sizeof px];
    ck_assert_int_eq(fmt_imageset_read(sh, 0, out, &msg), FMT_ECORRUPT);
    ck_assert_msg(strstr(msg.text, "decoded") != NULL, "%s", msg.text);
    ck_assert_int_eq(be->r_check(sh, 0), FMT_ECORRUPT);
    be->r_close(sh);

    /* a recorded pixel hash that the file does not decode to */
    fmt_le_put32(b + 160 + 44, 6);
    fmt_le_put32(b + 160 + 48, 10);
    b[160] ^= 1;
    rehash(b, len);
    tu_spit(path, b, len);
    ck_assert_int_eq(be->r_open(&sh, g_dir, path, FMT_ACCESS_MMAP, &msg), 0);
    ck_assert_int_eq(be->r_read(sh, 0, out, NULL, 0), 0);
    memset(&msg, 0, sizeof msg);
    ck_assert_int_eq(fmt_imageset_check(sh, 0, &msg), FMT_EHASH);
    ck_assert_msg(strstr(msg.text, "pixel hash") != NULL, "%s", msg.text);
    be->r_close(sh);
    free(b);
}
END_TEST

static int open_bytes(const fmt_backend *be, const char *path, const uint8_t *b, size_t len,
                      fmt_msg *msg)
{
    tu_spit(path, b, len);
    memset(msg, 0, sizeof *msg);
    void *sh = (void *)1;
    int rc = be->r_open(&sh, g_dir, path, FMT_ACCESS_MMAP, msg);
    if (rc == 0)
        be->r_close(sh);
    else
        ck_assert_ptr_null(sh);
    return rc;
}

#define EXPECT_OPEN(rc_want, needle)                                                           \
    do {                                                                                       \
        int rc_ = open_bytes(be, path, b, len, &msg);                                          \
        ck_assert_msg(rc_ == (rc_want), "want %d got %d (%s)", (rc_want), rc_, msg.text);     \
        ck_assert_msg(strstr(msg.text, needle) != NULL, "message '%s' lacks '%s'", msg.text,  \
                      needle);                                                                 \
    } while (0)

START_TEST(test_index_damage)
{
    const fmt_backend *be = g_backends[_i];
    tu_sample *s;
    char path[4200];
    void *sh = damaged_fixture(be, 4, &s, path, sizeof path);
    be->r_close(sh);
    size_t len0;
    uint8_t *orig = tu_slurp(path, &len0);
    uint8_t *b = malloc(len0 + 16);
    size_t len;
    fmt_msg msg;

    /* truncations */
    size_t cuts[] = { 0, 3, 8, 100, 167, 168, len0 - 1 };
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
        memcpy(b, orig, len0);
        len = cuts[k];
        int rc = open_bytes(be, path, b, len, &msg);
        ck_assert_msg(rc == FMT_ETRUNC, "cut %zu: %d (%s)", len, rc, msg.text);
        ck_assert(msg.text[0] != '\0');
    }
    /* garbage */
    len = len0;
    for (size_t k = 0; k < len; k++)
        b[k] = (uint8_t)(k * 7 + 1);
    EXPECT_OPEN(FMT_EFORMAT, "magic");
    /* a flipped bit anywhere is caught, most by the trailer hash */
    for (size_t off = 8; off < len0; off += 1 + len0 / 97) {
        memcpy(b, orig, len0);
        b[off] ^= 0x10;
        int rc = open_bytes(be, path, b, len, &msg);
        ck_assert_msg(rc != 0, "flip at %zu accepted", off);
        ck_assert(msg.text[0] != '\0');
    }
    memcpy(b, orig, len0);
    b[len0 / 2] ^= 1;
    EXPECT_OPEN(FMT_EHASH, "hash");
    /* extra bytes */
    memcpy(b, orig, len0);
    b[len0] = 0;
    len = len0 + 1;
    EXPECT_OPEN(FMT_ECORRUPT, "header says");
    len = len0;

    /* crafted, correctly hashed indexes */
    memcpy(b, orig, len0);
    b[8] = 2;
    rehash(b, len);
    EXPECT_OPEN(FMT_EVERSION, "version");
    memcpy(b, orig, len0);
    fmt_le_put32(b + 12, 128);
    rehash(b, len);
    EXPECT_OPEN(FMT_ECORRUPT, "header size");
    memcpy(b, orig, len0);
    fmt_le_put32(b + 16, (uint32_t)(_i == 0 ? 2 : 1));
    rehash(b, len);
    EXPECT_OPEN(FMT_ECORRUPT, "set, not");
    memcpy(b, orig, len0);
    fmt_le_put64(b + 24, 5); /* sample_count without room for it */
    rehash(b, len);
    EXPECT_OPEN(FMT_ECORRUPT, "folder table does not follow");
    memcpy(b, orig, len0);
    fmt_le_put64(b + 32, UINT64_MAX - 1); /* first_index + count overflows */
    rehash(b, len);
    EXPECT_OPEN(FMT_ECORRUPT, "overflows");
    memcpy(b, orig, len0);
    fmt_le_put64(b + 152, fmt_le_get64(b + 152) + 1); /* images_size */
    rehash(b, len);
    EXPECT_OPEN(FMT_ECORRUPT, "image sizes");

    const size_t e0 = 160;
    struct { size_t off; int width; uint64_t val; const char *text; } bad[] = {
        { 52, 2, 2, "channel" },
        { 44, 4, 0, "zero height" },
        { 48, 4, 0, "zero height" },
        { 40, 4, (uint32_t)-2, "label" },
        { 56, 4, 1000, "bad folder" },
        { 16, 8, 0, "empty image" },
        { 44, 4, 0xFFFFFFFF, "shape too large" },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        memcpy(b, orig, len0);
        uint8_t *e = b + e0 + 64 * 2;
        if (bad[k].width == 2) {
            e[bad[k].off] = (uint8_t)bad[k].val;
            e[bad[k].off + 1] = 0;
        } else if (bad[k].width == 4) {
            fmt_le_put32(e + bad[k].off, (uint32_t)bad[k].val);
        } else {
            fmt_le_put64(e + bad[k].off, bad[k].val);
        }
        if (bad[k].off == 44 && bad[k].val == 0xFFFFFFFF) {
            fmt_le_put32(e + 48, 0xFFFFFFFF);
            e[52] = 3;
        }
        rehash(b, len);
        EXPECT_OPEN(FMT_ECORRUPT, bad[k].text);
    }
    /* an aux record outside the aux area (sample 0 has one) */
    memcpy(b, orig, len0);
    ck_assert_uint_eq(fmt_le_get32(b + e0 + 54) & 1, 1);
    fmt_le_put64(b + e0 + 32, fmt_le_get64(b + 136));
    rehash(b, len);
    EXPECT_OPEN(FMT_ECORRUPT, "aux record");

    /* folder names that would leave the dataset directory */
    uint64_t ft = fmt_le_get64(orig + 104);
    ck_assert_uint_eq(fmt_le_get32(orig + 120), 3); /* cat, big dog, emu (labels 0, 1, 2, 0) */
    ck_assert_uint_eq(orig[ft], 3);
    ck_assert_mem_eq(orig + ft + 2, "cat", 3);
    const char *evil[] = { "..x", "a/b", ".\0.", "\x01zz" };
    for (size_t k = 0; k < sizeof evil / sizeof evil[0]; k++) {
        memcpy(b, orig, len0);
        memcpy(b + ft + 2, evil[k], 3);
        rehash(b, len);
        EXPECT_OPEN(FMT_ECORRUPT, "unsafe name");
    }
    memcpy(b, orig, len0);
    b[ft] = 0; /* empty name */
    rehash(b, len);
    EXPECT_OPEN(FMT_ECORRUPT, "folder");
    memcpy(b, orig, len0);
    b[ft] = 250; /* runs past the table */
    rehash(b, len);
    EXPECT_OPEN(FMT_ECORRUPT, "outside the folder table");
    memcpy(b, orig, len0);
    fmt_le_put32(b + 120, 2); /* one record fewer than the table holds */
    rehash(b, len);
    EXPECT_OPEN(FMT_ECORRUPT, "stray bytes");

    /* the original still opens */
    memcpy(b, orig, len0);
    EXPECT_OPEN(0, "");
    /* a directory, a missing file */
    void *sh2;
    fmt_msg m2 = {{0}};
    ck_assert_int_eq(be->r_open(&sh2, g_dir, g_dir, FMT_ACCESS_MMAP, &m2), EISDIR);
    unlink(path);
    ck_assert_int_eq(be->r_open(&sh2, g_dir, path, FMT_ACCESS_MMAP, &m2), ENOENT);
    free(b);
    free(orig);
    tu_samples_free(s, 4);
}
END_TEST

/* ---- atomicity ---- */

START_TEST(test_abort_leaves_nothing)
{
    const fmt_backend *be = g_backends[_i];
    tu_rng_state = 7;
    tu_sample *s = make_samples(6, TU_SHAPES_MIXED, 1, 4);
    fmt_writer_opts wo = { .dir = g_dir, .name = "shard-00000", .classes = g_classes,
                           .nclasses = 3 };
    void *w;
    ck_assert_int_eq(be->w_open(&w, &wo), 0);
    tu_add_samples(be, w, s, 0, 6);
    ck_assert_uint_gt(entries_under(g_dir), 6);
    be->w_abort(w);
    ck_assert_uint_eq(entries_under(g_dir), 0);
    be->w_abort(NULL);

    /* next to a finished shard: its files and the shared folders stay */
    wopts o = { .dir = g_dir, .name = "shard-00000", .classes = g_classes, .nclasses = 3 };
    write_set(be, &o, s, 3, NULL);
    size_t before = entries_under(g_dir);
    wo.name = "shard-00001";
    wo.first_index = 3;
    ck_assert_int_eq(be->w_open(&w, &wo), 0);
    tu_add_samples(be, w, s, 3, 6);
    be->w_abort(w);
    ck_assert_uint_eq(entries_under(g_dir), before);
    char path[4200];
    idx_path(path, sizeof path, g_dir, "shard-00000");
    void *sh;
    fmt_msg msg = {{0}};
    ck_assert_int_eq(be->r_open(&sh, g_dir, path, FMT_ACCESS_MMAP, &msg), 0);
    for (uint64_t i = 0; i < 3; i++)
        ck_assert_int_eq(be->r_check(sh, i), 0);
    be->r_close(sh);
    tu_samples_free(s, 6);
}
END_TEST

START_TEST(test_rewrite_removes_old_index)
{
    /* a shard written again: the old index goes at open, before its files are replaced */
    const fmt_backend *be = g_backends[_i];
    tu_rng_state = 8;
    tu_sample *s = make_samples(3, TU_SHAPES_FIXED_RGB, 0, 3);
    wopts o = { .dir = g_dir, .name = "shard-00000", .classes = g_classes, .nclasses = 3 };
    write_set(be, &o, s, 3, NULL);
    char path[4200];
    idx_path(path, sizeof path, g_dir, o.name);
    ck_assert(tu_exists(path));
    fmt_writer_opts wo = { .dir = g_dir, .name = "shard-00000", .classes = g_classes,
                           .nclasses = 3 };
    void *w;
    ck_assert_int_eq(be->w_open(&w, &wo), 0);
    ck_assert(!tu_exists(path));
    tu_add_samples(be, w, s, 0, 1);
    ck_assert(!tu_exists(path));
    fmt_shard_info info;
    ck_assert_int_eq(be->w_finish(w, 1, &info), 0);
    ck_assert_uint_eq(info.samples, 1);
    ck_assert(tu_exists(path));
    tu_samples_free(s, 3);
}
END_TEST

START_TEST(test_writer_errors)
{
    const fmt_backend *be = g_backends[_i];
    void *w;
    char missing[4200];
    snprintf(missing, sizeof missing, "%s/nope", g_dir);
    fmt_writer_opts wo = { .dir = missing, .name = "shard-00000" };
    ck_assert_int_eq(be->w_open(&w, &wo), ENOENT);
    wo.dir = g_dir;
    wo.name = "a/b";
    ck_assert_int_eq(be->w_open(&w, &wo), FMT_EINVAL);
    wo.name = "shard-00000";
    wo.classes = g_classes;
    wo.nclasses = 3;
    ck_assert_int_eq(be->w_open(&w, &wo), 0);

    /* bad samples are refused and leave the writer usable */
    uint8_t px[8 * 8 * 3];
    memset(px, 50, sizeof px);
    fmt_sample_meta m = { .height = 8, .width = 8, .channels = 2 };
    ck_assert_int_eq(be->w_add(w, &m, px, NULL), FMT_EINVAL);
    m.channels = 3;
    m.height = 0;
    ck_assert_int_eq(be->w_add(w, &m, px, NULL), FMT_EINVAL);
    m.height = 8;
    m.label = -2;
    ck_assert_int_eq(be->w_add(w, &m, px, NULL), FMT_EINVAL);
    m.label = 0;
    m.aux_len = 4;
    ck_assert_int_eq(be->w_add(w, &m, px, NULL), FMT_EINVAL);
    m.aux_len = 0;
    ck_assert_int_eq(be->w_add(w, &m, NULL, NULL), FMT_EINVAL);
    ck_assert_uint_eq(be->w_count(w), 0);
    m.hash = fmt_hash64(px, sizeof px);
    ck_assert_int_eq(be->w_add(w, &m, px, NULL), 0);
    ck_assert_uint_eq(be->w_count(w), 1);

    /* an I/O error fails the writer: a file named like the next class folder */
    char blocker[4200];
    snprintf(blocker, sizeof blocker, "%s/big dog", g_dir);
    tu_spit(blocker, (const uint8_t *)"x", 1);
    m.label = 1;
    ck_assert_int_eq(be->w_add(w, &m, px, NULL), ENOTDIR);
    m.label = 0;
    ck_assert_int_eq(be->w_add(w, &m, px, NULL), FMT_ESTATE);
    ck_assert_int_eq(be->w_finish(w, 0, NULL), ENOTDIR);
    /* nothing of the shard is left, the blocker is untouched */
    ck_assert_uint_eq(entries_under(g_dir), 1);
    ck_assert(tu_exists(blocker));
}
END_TEST

START_TEST(test_index_rename_failure)
{
    /* the index's final name is a non-empty directory: finish fails and cleans up */
    const fmt_backend *be = g_backends[_i];
    char path[4200], inner[4300];
    idx_path(path, sizeof path, g_dir, "shard-00000");
    snprintf(inner, sizeof inner, "%s/x", path);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    tu_spit(inner, (const uint8_t *)"x", 1);
    fmt_writer_opts wo = { .dir = g_dir, .name = "shard-00000" };
    void *w;
    /* removing the old index fails too: a directory */
    int rc = be->w_open(&w, &wo);
    ck_assert_int_gt(rc, 0);
    unlink(inner);
    rmdir(path);
    ck_assert_int_eq(be->w_open(&w, &wo), 0);
    uint8_t px[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    fmt_sample_meta m = { .height = 2, .width = 2, .channels = 3, .label = 5,
                          .hash = fmt_hash64(px, 12) };
    ck_assert_int_eq(be->w_add(w, &m, px, NULL), 0);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    tu_spit(inner, (const uint8_t *)"x", 1);
    rc = be->w_finish(w, 0, NULL);
    ck_assert_int_gt(rc, 0);
    /* the directory and its file only */
    ck_assert_uint_eq(entries_under(g_dir), 2);
}
END_TEST

START_TEST(test_cost_and_size)
{
    const fmt_backend *be = g_backends[_i];
    uint8_t px[64 * 64 * 3];
    for (size_t k = 0; k < sizeof px; k++)
        px[k] = (uint8_t)((k / 3) % 64 * 3 + k % 3 * 10);
    fmt_writer_opts wo = { .dir = g_dir, .name = "shard-00000" };
    void *w;
    ck_assert_int_eq(be->w_open(&w, &wo), 0);
    uint64_t s0 = be->w_size(w);
    ck_assert_uint_eq(s0, 168); /* an empty index */
    uint8_t aux[10] = {0};
    fmt_sample_meta m = { .height = 64, .width = 64, .channels = 3, .label = -1,
                          .hash = fmt_hash64(px, sizeof px), .aux = aux, .aux_len = 10 };
    ck_assert_int_eq(be->w_add(w, &m, px, NULL), 0);
    uint64_t grown = be->w_size(w) - s0;
    uint64_t cost = be->w_cost(sizeof px, 10, 0);
    /* an estimate, but never below the real growth for the uncompressed formats and JPEG
     * (uncompressed size as the estimate) */
    ck_assert_uint_ge(cost, grown);
    ck_assert_uint_le(cost, grown + sizeof px / 8 + (is_jpeg(be) ? sizeof px : 2048));
    ck_assert_uint_eq(be->w_cost(UINT64_MAX, 10, 0), UINT64_MAX);
    fmt_shard_info info;
    uint64_t size = be->w_size(w);
    ck_assert_int_eq(be->w_finish(w, 0, &info), 0);
    ck_assert_uint_eq(info.bytes, size);
}
END_TEST

/* ---- concurrency ---- */

typedef struct {
    const fmt_backend *be;
    void *sh;
    size_t n;
    uint8_t **ref;
    const uint64_t *len;
    unsigned seed;
    int mismatches;
} reader_arg;

static void *reader_thread(void *p)
{
    reader_arg *a = p;
    for (size_t k = 0; k < a->n; k++) {
        size_t i = (k * 7 + a->seed) % a->n;
        uint8_t *px = malloc(a->len[i]);
        if (!px || a->be->r_read(a->sh, i, px, NULL, 0) != 0 ||
            memcmp(px, a->ref[i], a->len[i]) != 0 || a->be->r_check(a->sh, i) != 0)
            a->mismatches++;
        free(px);
    }
    return NULL;
}

START_TEST(test_parallel_reads)
{
    const fmt_backend *be = g_backends[_i];
    tu_rng_state = 31337;
    size_t n = 24;
    tu_sample *s = make_samples(n, TU_SHAPES_MIXED, 0, 3);
    wopts o = { .dir = g_dir, .name = "shard-00000", .classes = g_classes, .nclasses = 3 };
    write_set(be, &o, s, n, NULL);
    char path[4200];
    idx_path(path, sizeof path, g_dir, o.name);
    void *sh;
    fmt_msg msg = {{0}};
    ck_assert_int_eq(be->r_open(&sh, g_dir, path, FMT_ACCESS_MMAP, &msg), 0);
    uint8_t **ref = calloc(n, sizeof *ref);
    uint64_t *len = calloc(n, sizeof *len);
    for (size_t i = 0; i < n; i++) {
        len[i] = tu_sample_len(&s[i]);
        ref[i] = malloc(len[i]);
        ck_assert_int_eq(be->r_read(sh, i, ref[i], NULL, 0), 0);
    }
    pthread_t t[8];
    reader_arg args[8];
    for (unsigned k = 0; k < 8; k++) {
        args[k] = (reader_arg){ .be = be, .sh = sh, .n = n, .ref = ref, .len = len, .seed = k * 5 };
        ck_assert_int_eq(pthread_create(&t[k], NULL, reader_thread, &args[k]), 0);
    }
    for (unsigned k = 0; k < 8; k++) {
        pthread_join(t[k], NULL);
        ck_assert_int_eq(args[k].mismatches, 0);
    }
    be->r_close(sh);
    for (size_t i = 0; i < n; i++)
        free(ref[i]);
    free(ref);
    free(len);
    tu_samples_free(s, n);
}
END_TEST

START_TEST(test_backend_tables)
{
    ck_assert_str_eq(fmt_backend_png0.name, "png0");
    ck_assert_str_eq(fmt_backend_bmp.name, "bmp");
    ck_assert_str_eq(fmt_backend_jpeg.name, "jpeg");
    for (int k = 0; k < 3; k++) {
        const fmt_backend *be = g_backends[k];
        ck_assert_uint_eq(be->version, 1);
        ck_assert_str_eq(be->suffix, ".idx");
        ck_assert_ptr_nonnull(be->w_open);
        ck_assert_ptr_nonnull(be->w_add);
        ck_assert_ptr_nonnull(be->w_count);
        ck_assert_ptr_nonnull(be->w_size);
        ck_assert_ptr_nonnull(be->w_cost);
        ck_assert_ptr_nonnull(be->w_finish);
        ck_assert_ptr_nonnull(be->w_abort);
        ck_assert_ptr_nonnull(be->r_open);
        ck_assert_ptr_nonnull(be->r_close);
        ck_assert_ptr_nonnull(be->r_info);
        ck_assert_ptr_nonnull(be->r_get);
        ck_assert_ptr_nonnull(be->r_read);
        ck_assert_ptr_nonnull(be->r_check);
    }
}
END_TEST

static Suite *imageset_suite(void)
{
    TCase *tc;
    Suite *s = tu_temp_suite("imageset", "imageset", 120, &tc);
    tcase_add_test(tc, test_backend_tables);
    TU_ADD_LOOP_TESTS(tc, 0, 3, test_roundtrip_fixed_gray, test_roundtrip_fixed_rgb,
                      test_roundtrip_mixed, test_empty_shard, test_files_independent_decoder);
    TU_ADD_TESTS(tc, test_png0_is_stored, test_bmp_layout, test_jpeg_quality);
    TU_ADD_LOOP_TESTS(tc, 0, 3, test_class_folders, test_missing_file, test_damaged_file,
                      test_shape_mismatch, test_index_damage, test_abort_leaves_nothing,
                      test_rewrite_removes_old_index, test_writer_errors, test_index_rename_failure,
                      test_cost_and_size, test_parallel_reads);
    return s;
}

int main(void)
{
    return tu_run(imageset_suite());
}
