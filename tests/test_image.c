/* test_image.c - image codecs against second decoders: djpeg and Pillow for JPEG, libpng for PNG,
 * hand-made files with known pixels for BMP; plus bad input, limits and probing. */
#include "image.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>
#include <unistd.h>

#include <jpeglib.h> /* after stdio.h */

/* Write data to a new file in g_dir; path receives its name. */
static void temp_file(char *path, size_t n, const char *ext, const void *data, size_t len)
{
    static unsigned seq;
    snprintf(path, n, "%s/f%u.%s", g_dir, seq++, ext);
    tu_spit(path, data, len);
}

static uint32_t lcg_next(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

static void fill_random(uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)lcg_next(&seed);
}

/* A test picture: gradients, hard edges (a checkerboard) and some noise, so that JPEG's colour
 * conversion, upsampling and entropy coding all have work to do. */
static void make_pattern(fmt_image *img, uint32_t w, uint32_t h, uint32_t ch, uint32_t seed)
{
    ck_assert_int_eq(fmt_image_alloc(img, w, h, ch), 0);
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            for (uint32_t c = 0; c < ch; c++) {
                uint32_t v = (x * 255 / w) * (c + 1) / 3 + (y * 255 / h) * (3 - c) / 3;
                if (((x / 8) + (y / 8)) % 2)
                    v += 60;
                v = (v + lcg_next(&seed) % 24) % 511;
                img->pixels[((size_t)y * w + x) * ch + c] = (uint8_t)(v > 255 ? 510 - v : v);
            }
}

static void assert_pixels_eq(const uint8_t *got, const uint8_t *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i])
            ck_abort_msg("%s: first difference at byte %zu: %u, reference %u", what, i, got[i],
                         want[i]);
}

/* ---- PNM and the reference decoders ---- */

static int pnm_int(const uint8_t *buf, size_t len, size_t *pos)
{
    while (*pos < len) {
        if (buf[*pos] == '#') {
            while (*pos < len && buf[*pos] != '\n')
                (*pos)++;
        } else if (buf[*pos] == ' ' || buf[*pos] == '\n' || buf[*pos] == '\r' ||
                   buf[*pos] == '\t') {
            (*pos)++;
        } else {
            break;
        }
    }
    int v = 0, digits = 0;
    while (*pos < len && buf[*pos] >= '0' && buf[*pos] <= '9') {
        v = v * 10 + (buf[*pos] - '0');
        (*pos)++;
        digits++;
    }
    ck_assert_msg(digits > 0, "bad PNM header");
    return v;
}

/* Parse a binary P5/P6 image with maxval 255 into img (channels 1 or 3). */
static void parse_pnm(const uint8_t *buf, size_t len, fmt_image *img)
{
    ck_assert_msg(len > 2 && buf[0] == 'P' && (buf[1] == '5' || buf[1] == '6'), "not a PNM");
    uint32_t ch = buf[1] == '6' ? 3 : 1;
    size_t pos = 2;
    int w = pnm_int(buf, len, &pos), h = pnm_int(buf, len, &pos), maxval = pnm_int(buf, len, &pos);
    ck_assert_int_eq(maxval, 255);
    pos++; /* the single whitespace after maxval */
    ck_assert_int_eq(fmt_image_alloc(img, (uint32_t)w, (uint32_t)h, ch), 0);
    size_t n = (size_t)w * h * ch;
    ck_assert_uint_eq(len - pos, n);
    memcpy(img->pixels, buf + pos, n);
}

/* Decode a JPEG with djpeg (libjpeg-turbo's command-line decoder). */
static void djpeg(const uint8_t *jpg, size_t len, const char *args, fmt_image *img)
{
    char path[1300], cmd[1600];
    temp_file(path, sizeof path, "jpg", jpg, len);
    snprintf(cmd, sizeof cmd, "djpeg %s -pnm '%s'", args, path);
    size_t n;
    int st;
    uint8_t *out = tu_run_capture(cmd, &n, &st);
    ck_assert_msg(st == 0, "%s failed (status %d)", cmd, st);
    parse_pnm(out, n, img);
    free(out);
    unlink(path);
}

static void gray_to_rgb(const fmt_image *g, fmt_image *rgb)
{
    ck_assert_int_eq(fmt_image_alloc(rgb, g->width, g->height, 3), 0);
    for (size_t i = 0; i < (size_t)g->width * g->height; i++)
        rgb->pixels[3 * i] = rgb->pixels[3 * i + 1] = rgb->pixels[3 * i + 2] = g->pixels[i];
}

/* Pillow 9.4's convert('L'), written out independently of the library's copy. */
static uint8_t ref_luma(const uint8_t *p)
{
    return (uint8_t)((p[0] * 19595u + p[1] * 38470u + p[2] * 7471u + 0x8000u) >> 16);
}

static void rgb_to_luma(const fmt_image *rgb, fmt_image *g)
{
    ck_assert_int_eq(fmt_image_alloc(g, rgb->width, rgb->height, 1), 0);
    for (size_t i = 0; i < (size_t)rgb->width * rgb->height; i++)
        g->pixels[i] = ref_luma(rgb->pixels + 3 * i);
}

/* Decode a file with Pillow: Image.open(path).convert(mode).tobytes(). */
static uint8_t *pillow_decode(const char *py, const uint8_t *data, size_t len, const char *mode,
                              size_t *out_len)
{
    char path[1300], cmd[2000];
    temp_file(path, sizeof path, "img", data, len);
    snprintf(cmd, sizeof cmd,
             "%s -c 'import sys; from PIL import Image; "
             "sys.stdout.buffer.write(Image.open(sys.argv[1]).convert(sys.argv[2]).tobytes())' "
             "'%s' %s",
             py, path, mode);
    int st;
    uint8_t *out = tu_run_capture(cmd, out_len, &st);
    ck_assert_msg(st == 0, "%s failed (status %d)", cmd, st);
    unlink(path);
    return out;
}

static void decode_ok(const uint8_t *buf, size_t len, const fmt_decode_opts *o, fmt_image *img)
{
    fmt_msg msg = {{0}};
    int rc = fmt_image_decode(buf, len, o, img, &msg);
    ck_assert_msg(rc == 0, "decode failed: %s (%s)", fmt_reason(&msg, rc), fmt_strerror(rc));
}

/* Decode must fail with rc, write a message containing want (if not NULL), own nothing. */
static void decode_fails(const void *buf, size_t len, const fmt_decode_opts *o, int rc_want,
                         const char *want)
{
    fmt_msg msg = {{0}};
    fmt_image img;
    memset(&img, 0xab, sizeof img);
    int rc = fmt_image_decode(buf, len, o, &img, &msg);
    ck_assert_msg(rc == rc_want, "decode of %zu bytes: got %d (%s: %s), want %d (%s)", len, rc,
                  fmt_strerror(rc), msg.text, rc_want, fmt_strerror(rc_want));
    ck_assert_ptr_null(img.pixels);
    ck_assert_uint_eq(img.width, 0);
    ck_assert_uint_eq(img.height, 0);
    ck_assert_msg(msg.text[0] != '\0', "no message for %s", fmt_strerror(rc));
    if (want)
        ck_assert_msg(strstr(msg.text, want) != NULL, "message '%s' lacks '%s'", msg.text, want);
}

/* An image of `pixels` pixels, `side` on its longer side, against limits: a max_side of
 * small_side refuses it (FMT_ETOOBIG, saying side_msg), then at max_side side one pixel too few
 * refuses it (pixels_msg), and the exact count decodes it; o keeps the last limits. */
static void check_limits(const void *buf, size_t len, fmt_decode_opts *o, uint32_t small_side,
                         uint32_t side, uint64_t pixels, const char *side_msg,
                         const char *pixels_msg)
{
    fmt_image img;
    o->limits.max_side = small_side;
    decode_fails(buf, len, o, FMT_ETOOBIG, side_msg);
    o->limits.max_side = side;
    o->limits.max_pixels = pixels - 1;
    decode_fails(buf, len, o, FMT_ETOOBIG, pixels_msg);
    o->limits.max_pixels = pixels;
    decode_ok(buf, len, o, &img);
    fmt_image_free(&img);
}

/* Decode must succeed with a warning in msg containing want. */
static void decode_warns(const void *buf, size_t len, const fmt_decode_opts *o, fmt_image *img,
                         const char *want)
{
    fmt_msg msg = {{0}};
    int rc = fmt_image_decode(buf, len, o, img, &msg);
    ck_assert_msg(rc == 0, "decode failed: %s (%s)", fmt_reason(&msg, rc), fmt_strerror(rc));
    ck_assert_msg(strstr(msg.text, want) != NULL, "warning '%s' lacks '%s'", msg.text, want);
}

static void encode_jpeg(const fmt_image *img, const fmt_jpeg_opts *o, uint8_t **buf, size_t *len)
{
    int rc = fmt_jpeg_encode(img, o, buf, len);
    ck_assert_msg(rc == 0, "jpeg encode: %s", fmt_strerror(rc));
    ck_assert_uint_gt(*len, 100);
    ck_assert_uint_eq((*buf)[0], 0xff);
    ck_assert_uint_eq((*buf)[1], 0xd8);
}

/* Offset of the first marker 0xFF code in the header part of a JPEG (before the first SOS,
 * whose marker is 0xDA), or 0. */
static size_t jpeg_find_marker(const uint8_t *b, size_t len, uint8_t code)
{
    size_t pos = 2;
    while (pos + 4 <= len && b[pos] == 0xff) {
        if (b[pos + 1] == code)
            return pos;
        if (b[pos + 1] == 0xda)
            return 0;
        pos += 2 + ((size_t)b[pos + 2] << 8 | b[pos + 3]);
    }
    return 0;
}

/* Offset of the first byte of entropy-coded data (after the first SOS header). */
static size_t jpeg_scan_start(const uint8_t *b, size_t len)
{
    size_t pos = 2;
    while (pos + 4 <= len && b[pos] == 0xff) {
        size_t seg = (size_t)b[pos + 2] << 8 | b[pos + 3];
        if (b[pos + 1] == 0xda)
            return pos + 2 + seg;
        pos += 2 + seg;
    }
    ck_abort_msg("no SOS marker");
    return 0;
}

/* ---- JPEG ---- */

static const struct jvariant {
    const char *name;
    fmt_jpeg_opts o;
    uint8_t sof;      /* 0xC0 baseline, 0xC2 progressive */
    uint8_t sampling; /* of the first component, as stored in SOF */
} jvariants[] = {
    {"baseline 4:2:0 q90", {0}, 0xc0, 0x22},
    {"baseline 4:2:2 q75", {.quality = 75, .subsampling = 422}, 0xc0, 0x21},
    {"baseline 4:4:4 q95", {.quality = 95, .subsampling = 444}, 0xc0, 0x11},
    {"baseline 4:4:4 q100", {.quality = 100, .subsampling = 444}, 0xc0, 0x11},
    {"progressive 4:2:0", {.progressive = 1}, 0xc2, 0x22},
    {"progressive 4:4:4 q50", {.progressive = 1, .subsampling = 444, .quality = 50}, 0xc2, 0x11},
    {"restart 4:2:0", {.restart_rows = 1}, 0xc0, 0x22},
    {"progressive restart 4:2:2", {.progressive = 1, .restart_rows = 2, .subsampling = 422},
     0xc2, 0x21},
};

static const uint32_t jsizes[][2] = {{1, 1}, {8, 8}, {37, 23}, {1, 40}, {61, 2}, {500, 375}};

/* The encoder wrote what the options asked for: the right SOF type, sampling, restart marker. */
static void check_jpeg_layout(const uint8_t *b, size_t len, const struct jvariant *v, uint32_t ch)
{
    size_t sof = jpeg_find_marker(b, len, v->sof);
    ck_assert_msg(sof != 0, "%s: no SOF 0x%02x", v->name, v->sof);
    ck_assert_uint_eq(b[sof + 9], ch);
    if (ch == 3)
        ck_assert_msg(b[sof + 11] == v->sampling, "%s: sampling 0x%02x", v->name, b[sof + 11]);
    ck_assert_msg((jpeg_find_marker(b, len, 0xdd) != 0) == (v->o.restart_rows != 0),
                  "%s: DRI marker presence", v->name);
}

START_TEST(test_jpeg_vs_djpeg)
{
    const uint32_t *sz = jsizes[_i];
    for (uint32_t ch = 1; ch <= 3; ch += 2) {
        fmt_image src;
        make_pattern(&src, sz[0], sz[1], ch, 7 + _i);
        for (size_t v = 0; v < sizeof jvariants / sizeof jvariants[0]; v++) {
            uint8_t *jpg;
            size_t len;
            encode_jpeg(&src, &jvariants[v].o, &jpg, &len);
            check_jpeg_layout(jpg, len, &jvariants[v], ch);

            fmt_image ref, ref_gray, got, got_gray;
            djpeg(jpg, len, "", &ref);
            ck_assert_uint_eq(ref.channels, ch);
            if (ch == 1) {
                ref_gray = ref;
                gray_to_rgb(&ref_gray, &ref);
            } else {
                djpeg(jpg, len, "-grayscale", &ref_gray);
            }
            fmt_decode_opts o = {.channels = 3};
            decode_ok(jpg, len, &o, &got);
            ck_assert_uint_eq(got.width, sz[0]);
            ck_assert_uint_eq(got.height, sz[1]);
            ck_assert_uint_eq(got.channels, 3);
            assert_pixels_eq(got.pixels, ref.pixels, (size_t)sz[0] * sz[1] * 3, jvariants[v].name);
            o.channels = 1;
            decode_ok(jpg, len, &o, &got_gray);
            ck_assert_uint_eq(got_gray.channels, 1);
            assert_pixels_eq(got_gray.pixels, ref_gray.pixels, (size_t)sz[0] * sz[1],
                             jvariants[v].name);
            fmt_image_free(&ref);
            fmt_image_free(&ref_gray);
            fmt_image_free(&got);
            fmt_image_free(&got_gray);
            free(jpg);
        }
        fmt_image_free(&src);
    }
}
END_TEST

/* Shrink-on-load picks the smallest DCT scale that still covers the target; the output equals
 * djpeg's at that scale. */
START_TEST(test_jpeg_shrink_on_load)
{
    static const struct {
        uint32_t w, h, min_w, min_h, denom;
    } cases[] = {
        {500, 375, 60, 40, 8},    /* 63x47 */
        {500, 375, 63, 47, 8},    /* exactly 1/8 */
        {500, 375, 64, 47, 4},    /* 1/8 is one column short: 125x94 */
        {500, 375, 100, 94, 4},
        {500, 375, 100, 95, 2},   /* 250x188 */
        {500, 375, 250, 188, 2},
        {500, 375, 251, 100, 1},
        {500, 375, 1000, 1000, 1}, /* upscaling target: full size */
        {500, 375, 0, 100, 1},    /* one zero: no shrinking */
        {37, 23, 5, 3, 8},        /* 5x3 */
        {37, 23, 10, 3, 4},       /* 10x6 */
        {37, 23, 10, 7, 2},       /* 19x12 */
        {37, 23, 20, 1, 1},
    };
    static const fmt_jpeg_opts encs[] = {
        {0}, {.progressive = 1, .subsampling = 422}, {.subsampling = 444, .restart_rows = 1}};
    for (size_t e = 0; e < sizeof encs / sizeof encs[0]; e++) {
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            fmt_image src;
            make_pattern(&src, cases[i].w, cases[i].h, 3, 99);
            uint8_t *jpg;
            size_t len;
            encode_jpeg(&src, &encs[e], &jpg, &len);
            uint32_t d = cases[i].denom;
            uint32_t ow = (cases[i].w + d - 1) / d, oh = (cases[i].h + d - 1) / d;
            /* the table's own consistency: d covers the target, d * 2 would not */
            if (cases[i].min_w && cases[i].min_h && d > 1) {
                ck_assert(ow >= cases[i].min_w && oh >= cases[i].min_h);
                if (d < 8) {
                    uint32_t d2 = d * 2;
                    ck_assert(cases[i].min_w > (cases[i].w + d2 - 1) / d2 ||
                              cases[i].min_h > (cases[i].h + d2 - 1) / d2);
                }
            } else if (cases[i].min_w && cases[i].min_h) {
                ck_assert(cases[i].min_w > (cases[i].w + 1) / 2 ||
                          cases[i].min_h > (cases[i].h + 1) / 2);
            }
            for (uint32_t ch = 1; ch <= 3; ch += 2) {
                fmt_decode_opts o = {.channels = ch, .min_width = cases[i].min_w,
                                     .min_height = cases[i].min_h};
                fmt_image got, ref;
                decode_ok(jpg, len, &o, &got);
                ck_assert_msg(got.width == ow && got.height == oh,
                              "%ux%u min %ux%u: got %ux%u, want 1/%u = %ux%u", cases[i].w,
                              cases[i].h, cases[i].min_w, cases[i].min_h, got.width, got.height,
                              d, ow, oh);
                char args[64];
                snprintf(args, sizeof args, "-scale 1/%u%s", d, ch == 1 ? " -grayscale" : "");
                djpeg(jpg, len, args, &ref);
                ck_assert_uint_eq(ref.width, ow);
                ck_assert_uint_eq(ref.height, oh);
                ck_assert_uint_eq(ref.channels, ch);
                assert_pixels_eq(got.pixels, ref.pixels, (size_t)ow * oh * ch, args);
                fmt_image_free(&got);
                fmt_image_free(&ref);
            }
            free(jpg);
            fmt_image_free(&src);
        }
    }
}
END_TEST

/* Full-size decodes equal Pillow's (the product's reference), RGB and gray. */
START_TEST(test_jpeg_vs_pillow)
{
    const char *py = tu_python_or_skip("PIL.Image", "Pillow comparison (no python3 with PIL)");
    if (!py)
        return;
    fmt_image src;
    make_pattern(&src, 500, 375, 3, 5);
    static const fmt_jpeg_opts encs[] = {{0}, {.progressive = 1, .subsampling = 444}};
    for (size_t e = 0; e < 2; e++) {
        uint8_t *jpg;
        size_t len;
        encode_jpeg(&src, &encs[e], &jpg, &len);
        fmt_image got;
        fmt_decode_opts o = {.channels = 3};
        decode_ok(jpg, len, &o, &got);
        size_t n;
        uint8_t *ref = pillow_decode(py, jpg, len, "RGB", &n);
        ck_assert_uint_eq(n, 500 * 375 * 3);
        assert_pixels_eq(got.pixels, ref, n, "RGB vs Pillow");
        free(ref);
        fmt_image_free(&got);
        free(jpg);
    }
    fmt_image_free(&src);
}
END_TEST

/* CMYK and YCCK (Adobe, inverted): RGB and gray equal Pillow's convert('RGB') / convert('L'),
 * and come out close to the RGB the encoder started from. */
START_TEST(test_jpeg_cmyk)
{
    const char *py = tu_python("PIL.Image");
    if (!py)
        tu_skip("CMYK comparison with Pillow (no python3 with PIL); checking closeness to the "
                "source only");
    static const uint32_t sizes[][2] = {{37, 23}, {500, 375}};
    for (size_t s = 0; s < 2; s++) {
        uint32_t w = sizes[s][0], h = sizes[s][1];
        fmt_image src;
        make_pattern(&src, w, h, 3, 11);
        for (int mode = 1; mode <= 2; mode++) {
            fmt_jpeg_opts eo = {.cmyk = mode, .quality = 95, .subsampling = 444};
            uint8_t *jpg;
            size_t len;
            encode_jpeg(&src, &eo, &jpg, &len);
            ck_assert_msg(jpeg_find_marker(jpg, len, 0xee) != 0, "no Adobe marker");
            size_t adobe = jpeg_find_marker(jpg, len, 0xee);
            ck_assert_mem_eq(jpg + adobe + 4, "Adobe", 5);
            ck_assert_uint_eq(jpg[adobe + 15], mode == 1 ? 0 : 2); /* transform: CMYK / YCCK */

            fmt_image_info info;
            fmt_msg msg = {{0}};
            ck_assert_int_eq(fmt_image_probe(jpg, len, &info, &msg), 0);
            ck_assert_uint_eq(info.channels, 4);

            fmt_image got, gray;
            fmt_decode_opts o = {.channels = 3};
            decode_ok(jpg, len, &o, &got);
            o.channels = 1;
            decode_ok(jpg, len, &o, &gray);
            /* near the source: the test that the K arithmetic is the right way round */
            uint64_t err = 0;
            for (size_t i = 0; i < (size_t)w * h * 3; i++)
                err += (uint64_t)abs((int)got.pixels[i] - (int)src.pixels[i]);
            ck_assert_msg(err < (uint64_t)w * h * 3 * 4, "CMYK decode far from source: %.2f",
                          (double)err / ((double)w * h * 3));
            fmt_image luma;
            rgb_to_luma(&got, &luma);
            assert_pixels_eq(gray.pixels, luma.pixels, (size_t)w * h, "CMYK gray = luma(RGB)");
            if (py) {
                size_t n;
                uint8_t *ref = pillow_decode(py, jpg, len, "RGB", &n);
                ck_assert_uint_eq(n, (size_t)w * h * 3);
                assert_pixels_eq(got.pixels, ref, n,
                                 mode == 1 ? "CMYK vs Pillow" : "YCCK vs Pillow");
                free(ref);
                ref = pillow_decode(py, jpg, len, "L", &n);
                ck_assert_uint_eq(n, (size_t)w * h);
                assert_pixels_eq(gray.pixels, ref, n, "CMYK gray vs Pillow");
                free(ref);
            }
            /* shrink-on-load works for 4 components too */
            o.channels = 3;
            o.min_width = (w + 3) / 4;
            o.min_height = (h + 3) / 4;
            fmt_image small;
            decode_ok(jpg, len, &o, &small);
            ck_assert_uint_eq(small.width, (w + 3) / 4);
            fmt_image_free(&small);
            fmt_image_free(&luma);
            fmt_image_free(&got);
            fmt_image_free(&gray);
            free(jpg);
        }
        fmt_image_free(&src);
    }
}
END_TEST

START_TEST(test_jpeg_truncated)
{
    fmt_image src;
    make_pattern(&src, 200, 150, 3, 3);
    static const fmt_jpeg_opts encs[] = {{0}, {.progressive = 1}, {.restart_rows = 1}};
    for (size_t e = 0; e < 3; e++) {
        uint8_t *jpg;
        size_t len;
        encode_jpeg(&src, &encs[e], &jpg, &len);
        size_t scan = jpeg_scan_start(jpg, len);
        const size_t cuts[] = {2, 3, 20, scan - 1, scan, scan + 10, len / 2, len - 100, len - 3,
                               len - 2, len - 1};
        for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
            fmt_decode_opts o = {.channels = 3};
            decode_fails(jpg, cuts[c], &o, FMT_ETRUNC, "premature end of JPEG file");
            o.channels = 1;
            o.min_width = o.min_height = 10;
            decode_fails(jpg, cuts[c], &o, FMT_ETRUNC, "premature end of JPEG file");
        }
        /* the whole file decodes, and trailing bytes after EOI do not matter */
        fmt_image img;
        fmt_decode_opts o = {.channels = 3};
        decode_ok(jpg, len, &o, &img);
        fmt_image_free(&img);
        uint8_t *longer = malloc(len + 7);
        memcpy(longer, jpg, len);
        memcpy(longer + len, "garbage", 7);
        decode_ok(longer, len + 7, &o, &img);
        fmt_image_free(&img);
        free(longer);
        free(jpg);
    }
    fmt_image_free(&src);
}
END_TEST

/* Damaged entropy-coded data. What libjpeg can notice must fail; the rest is asserted as it is
 * (libjpeg decodes some flipped bits into other valid codes). */
START_TEST(test_jpeg_corrupt)
{
    fmt_image src;
    make_pattern(&src, 200, 150, 3, 4);
    uint8_t *jpg;
    size_t len;
    encode_jpeg(&src, &(fmt_jpeg_opts){0}, &jpg, &len);
    size_t mid = jpeg_scan_start(jpg, len) + (len - jpeg_scan_start(jpg, len)) / 2;
    uint8_t *bad = malloc(len);
    fmt_decode_opts o = {.channels = 3};

    /* libjpeg's "corrupt JPEG data" is a warning: Pillow decodes such files, so do we, and the
     * warning comes back in msg. A restart marker in a file without restart intervals: */
    fmt_image w;
    memcpy(bad, jpg, len);
    bad[mid] = 0xff;
    bad[mid + 1] = 0xd3;
    decode_warns(bad, len, &o, &w, "corrupt JPEG data");
    fmt_image_free(&w);

    /* a run of 0xFF 0x00 (stuffed 0xFF bytes: all-ones bits, an invalid Huffman code) */
    memcpy(bad, jpg, len);
    for (size_t i = 0; i < 32; i += 2) {
        bad[mid + i] = 0xff;
        bad[mid + i + 1] = 0x00;
    }
    decode_warns(bad, len, &o, &w, "corrupt JPEG data");
    fmt_image_free(&w);

    /* junk before a marker in the header; the end of the file is still an error (Pillow: the
     * file is truncated) */
    size_t dqt = jpeg_find_marker(jpg, len, 0xdb);
    ck_assert_uint_ne(dqt, 0);
    uint8_t *junk = malloc(len + 3);
    memcpy(junk, jpg, dqt);
    memcpy(junk + dqt, "\x01\x02\x03", 3);
    memcpy(junk + dqt + 3, jpg + dqt, len - dqt);
    decode_warns(junk, len + 3, &o, &w, "3 extraneous bytes before marker 0xdb");
    fmt_image clean0;
    decode_ok(jpg, len, &o, &clean0);
    assert_pixels_eq(w.pixels, clean0.pixels, (size_t)200 * 150 * 3, "junk before DQT");
    fmt_image_free(&clean0);
    fmt_image_free(&w);
    free(junk);
    decode_fails(jpg, len - 2, &o, FMT_ETRUNC, "premature end");

    /* a broken Huffman table */
    memcpy(bad, jpg, len);
    size_t dht = jpeg_find_marker(bad, len, 0xc4);
    ck_assert_uint_ne(dht, 0);
    memset(bad + dht + 5, 0xff, 16); /* code counts that overflow the code space */
    decode_fails(bad, len, &o, FMT_ECORRUPT, "Huffman");

    /* Single flipped bytes at fixed places. Huffman decoding resynchronises after most of them:
     * libjpeg then only notices when the scan ends with unread bytes ("extraneous bytes before
     * marker"), and otherwise returns a changed image without any warning. JPEG has no checksum,
     * so nothing can notice those. The outcome is deterministic for this libjpeg-turbo; if an
     * encoder upgrade changes the bytes, re-derive the table. */
    static const int noticed[16] = {1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    fmt_image clean;
    decode_ok(jpg, len, &o, &clean);
    for (size_t i = 0; i < 16; i++) {
        memcpy(bad, jpg, len);
        bad[jpeg_scan_start(jpg, len) + i * 97] ^= 0x5a;
        fmt_image img;
        if (noticed[i])
            decode_warns(bad, len, &o, &img, "extraneous bytes before marker");
        else
            decode_ok(bad, len, &o, &img);
        ck_assert_uint_eq(img.width, 200);
        ck_assert_uint_eq(img.height, 150);
        ck_assert_msg(memcmp(img.pixels, clean.pixels, 200 * 150 * 3) != 0,
                      "flip %zu: same pixels as the intact file", i);
        fmt_image_free(&img);
    }
    fmt_image_free(&clean);
    free(bad);
    free(jpg);
    fmt_image_free(&src);
}
END_TEST

/* A progressive gray JPEG written by libjpeg with its own scan script: the DC scan, then for
 * each of the 63 AC coefficients either one scan (refinements 0) or a first scan at Al = 8 and 8
 * refinement scans (refinements 8). */
static uint8_t *jpeg_with_scans(int refinements, int *nscans, size_t *len)
{
    static jpeg_scan_info script[1 + 63 * 9];
    int n = 0;
    script[n++] = (jpeg_scan_info){1, {0}, 0, 0, 0, 0};
    for (int k = 1; k < 64; k++) {
        script[n++] = (jpeg_scan_info){1, {0}, k, k, 0, refinements};
        for (int a = refinements; a > 0; a--)
            script[n++] = (jpeg_scan_info){1, {0}, k, k, a, a - 1};
    }
    *nscans = n;
    fmt_image src;
    make_pattern(&src, 40, 24, 1, 3);
    struct jpeg_compress_struct cinfo;
    struct jpeg_error_mgr jerr;
    cinfo.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&cinfo);
    unsigned char *out = NULL;
    unsigned long out_len = 0;
    jpeg_mem_dest(&cinfo, &out, &out_len);
    cinfo.image_width = src.width;
    cinfo.image_height = src.height;
    cinfo.input_components = 1;
    cinfo.in_color_space = JCS_GRAYSCALE;
    jpeg_set_defaults(&cinfo);
    cinfo.scan_info = script;
    cinfo.num_scans = n;
    jpeg_start_compress(&cinfo, TRUE);
    while (cinfo.next_scanline < cinfo.image_height) {
        JSAMPROW row = src.pixels + (size_t)cinfo.next_scanline * src.width;
        jpeg_write_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_compress(&cinfo);
    jpeg_destroy_compress(&cinfo);
    fmt_image_free(&src);
    *len = out_len;
    return out;
}

/* A progressive file with hundreds of scans (each one a pass over all coefficients) is refused;
 * one with a long but sane script decodes as djpeg does. */
/* APP13 Photoshop and APP2 MPF segments that make Pillow 9.4 refuse a JPEG at open. */
static uint8_t *jpeg_with_app(const uint8_t *jpg, size_t len, int marker, const void *p, size_t n,
                              size_t *out_len)
{
    uint8_t *o = malloc(len + 4 + n);
    memcpy(o, jpg, 2);
    o[2] = 0xff;
    o[3] = (uint8_t)marker;
    o[4] = (uint8_t)((n + 2) >> 8);
    o[5] = (uint8_t)(n + 2);
    memcpy(o + 6, p, n);
    memcpy(o + 6 + n, jpg + 2, len - 2);
    *out_len = len + 4 + n;
    return o;
}

START_TEST(test_jpeg_pillow_segments)
{
    fmt_image src, img;
    make_pattern(&src, 32, 16, 3, 4);
    uint8_t *jpg, *f;
    size_t len, n;
    encode_jpeg(&src, &(fmt_jpeg_opts){0}, &jpg, &len);
    fmt_decode_opts o = {.channels = 3};
    static const char ps_ok[] = "Photoshop 3.0\0" "8BIM\x04\x04\0\0\0\0\0\x02xy";
    f = jpeg_with_app(jpg, len, 0xed, ps_ok, sizeof ps_ok - 1, &n);
    decode_ok(f, n, &o, &img);
    fmt_image_free(&img);
    free(f);
    static const char ps_cut[] = "Photoshop 3.0\0" "8BIM\x04\x04\0\0\0\0\0\x02xy" "8BIM\x04\x04";
    f = jpeg_with_app(jpg, len, 0xed, ps_cut, sizeof ps_cut - 1, &n);
    decode_fails(f, n, &o, FMT_ECORRUPT, "8BIM resource 0x0404 cut after its ID");
    fmt_image_info info;
    fmt_msg msg = {{0}};
    ck_assert_int_eq(fmt_image_probe(f, n, &info, &msg), FMT_ECORRUPT);
    free(f);
    /* cut inside the size field: Pillow stops reading the resources */
    f = jpeg_with_app(jpg, len, 0xed, ps_cut, sizeof ps_cut - 1 - 8, &n);
    decode_ok(f, n, &o, &img);
    fmt_image_free(&img);
    free(f);

    /* MPF: 3 images, entries for 2 */
    uint8_t mpf[4 + 8 + 2 + 24 + 4 + 32] = "MPF\0MM\0\x2a\0\0\0\x08\0\x02";
    uint8_t *e = mpf + 14;
    memcpy(e, "\xb0\x01\0\x04\0\0\0\x01\0\0\0\x03", 12);
    memcpy(e + 12, "\xb0\x02\0\x07\0\0\0\x20\0\0\0\x26", 12);
    memset(e + 24, 0, 4 + 32);
    f = jpeg_with_app(jpg, len, 0xe2, mpf, sizeof mpf, &n);
    decode_fails(f, n, &o, FMT_ECORRUPT, "MPF segment: 3 images but MP entries for 2");
    free(f);
    e[11] = 2; /* 2 images: fine */
    f = jpeg_with_app(jpg, len, 0xe2, mpf, sizeof mpf, &n);
    decode_ok(f, n, &o, &img);
    fmt_image_free(&img);
    free(f);
    e[11] = 3;
    e[15] = 4; /* MPEntry as LONGs: a TypeError, which Pillow catches */
    f = jpeg_with_app(jpg, len, 0xe2, mpf, sizeof mpf, &n);
    decode_ok(f, n, &o, &img);
    fmt_image_free(&img);
    free(f);
    free(jpg);
    fmt_image_free(&src);
}
END_TEST

START_TEST(test_jpeg_scan_limit)
{
    int nscans;
    size_t len;
    uint8_t *jpg = jpeg_with_scans(0, &nscans, &len);
    ck_assert_int_eq(nscans, 64);
    fmt_image got, ref;
    decode_ok(jpg, len, &(fmt_decode_opts){.channels = 1}, &got);
    djpeg(jpg, len, "", &ref);
    assert_pixels_eq(got.pixels, ref.pixels, 40 * 24, "64 scans");
    fmt_image_free(&got);
    fmt_image_free(&ref);
    free(jpg);

    jpg = jpeg_with_scans(8, &nscans, &len);
    ck_assert_int_eq(nscans, 568);
    decode_fails(jpg, len, &(fmt_decode_opts){.channels = 1}, FMT_ECORRUPT,
                 "JPEG has more than 500 scans");
    free(jpg);
}
END_TEST

/* A JPEG whose SOF claims w x h (patched into a real file). */
static uint8_t *jpeg_with_size(uint16_t w, uint16_t h, size_t *len)
{
    fmt_image src;
    make_pattern(&src, 16, 16, 3, 1);
    uint8_t *jpg;
    encode_jpeg(&src, &(fmt_jpeg_opts){0}, &jpg, len);
    fmt_image_free(&src);
    size_t sof = jpeg_find_marker(jpg, *len, 0xc0);
    ck_assert_uint_ne(sof, 0);
    jpg[sof + 5] = (uint8_t)(h >> 8);
    jpg[sof + 6] = (uint8_t)h;
    jpg[sof + 7] = (uint8_t)(w >> 8);
    jpg[sof + 8] = (uint8_t)w;
    return jpg;
}

START_TEST(test_jpeg_limits)
{
    size_t len;
    uint8_t *jpg = jpeg_with_size(60000, 60000, &len);
    fmt_decode_opts o = {.channels = 3};
    decode_fails(jpg, len, &o, FMT_ETOOBIG, "image 60000x60000 exceeds limit of 178956970 pixels");
    fmt_image_info info;
    fmt_msg msg = {{0}};
    ck_assert_int_eq(fmt_image_probe(jpg, len, &info, &msg), 0); /* probe reports, not judges */
    ck_assert_uint_eq(info.width, 60000);
    ck_assert_uint_eq(info.height, 60000);
    free(jpg);
    jpg = jpeg_with_size(40000, 10, &len);
    decode_fails(jpg, len, &o, FMT_ETOOBIG,
                 "image 40000x10 exceeds limit of 32768 pixels per side");
    free(jpg);

    fmt_image src, img;
    make_pattern(&src, 120, 80, 3, 2);
    encode_jpeg(&src, &(fmt_jpeg_opts){0}, &jpg, &len);
    check_limits(jpg, len, &o, 119, 120, 120 * 80, "exceeds limit of 119 pixels per side",
                 "exceeds limit of 9599 pixels");
    /* the limit is on the file, not on the shrunk output */
    o.min_width = o.min_height = 10;
    o.limits.max_pixels = 120 * 80 - 1;
    decode_fails(jpg, len, &o, FMT_ETOOBIG, "exceeds limit of 9599 pixels");
    o.limits.max_pixels = 120 * 80;
    decode_ok(jpg, len, &o, &img);
    fmt_image_free(&img);
    free(jpg);
    fmt_image_free(&src);
}
END_TEST

START_TEST(test_jpeg_encode_args)
{
    fmt_image src;
    make_pattern(&src, 8, 8, 3, 1);
    uint8_t *out = (uint8_t *)1;
    size_t len = 1;
    ck_assert_int_eq(fmt_jpeg_encode(&src, &(fmt_jpeg_opts){.quality = 101}, &out, &len),
                     FMT_EINVAL);
    ck_assert_ptr_null(out);
    ck_assert_uint_eq(len, 0);
    ck_assert_int_eq(fmt_jpeg_encode(&src, &(fmt_jpeg_opts){.subsampling = 411}, &out, &len),
                     FMT_EINVAL);
    ck_assert_int_eq(fmt_jpeg_encode(&src, &(fmt_jpeg_opts){.cmyk = 3}, &out, &len), FMT_EINVAL);
    fmt_image bad = src;
    bad.channels = 4;
    ck_assert_int_eq(fmt_jpeg_encode(&bad, NULL, &out, &len), FMT_EINVAL);
    /* NULL options: quality 90, 4:2:0 */
    ck_assert_int_eq(fmt_jpeg_encode(&src, NULL, &out, &len), 0);
    size_t sof = jpeg_find_marker(out, len, 0xc0);
    ck_assert_uint_ne(sof, 0);
    ck_assert_uint_eq(out[sof + 11], 0x22);
    free(out);
    fmt_image_free(&src);
}
END_TEST

/* ---- PNG ---- */

struct membuf {
    uint8_t *p;
    size_t len, cap, pos;
};

static void mem_write(png_structp png, png_bytep data, size_t n)
{
    struct membuf *m = png_get_io_ptr(png);
    if (m->len + n > m->cap) {
        m->cap = (m->len + n) * 2;
        m->p = realloc(m->p, m->cap);
        if (!m->p)
            png_error(png, "out of memory");
    }
    memcpy(m->p + m->len, data, n);
    m->len += n;
}

static void mem_flush(png_structp png)
{
}

static void mem_read(png_structp png, png_bytep data, size_t n)
{
    struct membuf *m = png_get_io_ptr(png);
    if (n > m->len - m->pos)
        png_error(png, "read past end");
    memcpy(data, m->p + m->pos, n);
    m->pos += n;
}

struct pngcase {
    const char *name;
    int color_type, depth, interlace;
    int trns; /* write a tRNS chunk */
};

static const struct pngcase pngcases[] = {
    {"palette 8", PNG_COLOR_TYPE_PALETTE, 8, 0, 0},
    {"palette 8 tRNS", PNG_COLOR_TYPE_PALETTE, 8, 0, 1},
    {"palette 4 interlaced", PNG_COLOR_TYPE_PALETTE, 4, 1, 0},
    {"palette 2", PNG_COLOR_TYPE_PALETTE, 2, 0, 1},
    {"palette 1", PNG_COLOR_TYPE_PALETTE, 1, 0, 0},
    {"gray 1", PNG_COLOR_TYPE_GRAY, 1, 0, 0},
    {"gray 2", PNG_COLOR_TYPE_GRAY, 2, 0, 0},
    {"gray 4", PNG_COLOR_TYPE_GRAY, 4, 0, 0},
    {"gray 4 interlaced", PNG_COLOR_TYPE_GRAY, 4, 1, 0},
    {"gray 8", PNG_COLOR_TYPE_GRAY, 8, 0, 0},
    {"gray 8 tRNS", PNG_COLOR_TYPE_GRAY, 8, 0, 1},
    {"gray 16", PNG_COLOR_TYPE_GRAY, 16, 0, 0},
    {"gray 16 interlaced", PNG_COLOR_TYPE_GRAY, 16, 1, 0},
    {"gray+alpha 8", PNG_COLOR_TYPE_GRAY_ALPHA, 8, 0, 0},
    {"gray+alpha 16", PNG_COLOR_TYPE_GRAY_ALPHA, 16, 0, 0},
    {"rgb 8", PNG_COLOR_TYPE_RGB, 8, 0, 0},
    {"rgb 8 tRNS", PNG_COLOR_TYPE_RGB, 8, 0, 1},
    {"rgb 8 interlaced", PNG_COLOR_TYPE_RGB, 8, 1, 0},
    {"rgb 16", PNG_COLOR_TYPE_RGB, 16, 0, 0},
    {"rgba 8", PNG_COLOR_TYPE_RGB_ALPHA, 8, 0, 0},
    {"rgba 8 interlaced", PNG_COLOR_TYPE_RGB_ALPHA, 8, 1, 0},
    {"rgba 16", PNG_COLOR_TYPE_RGB_ALPHA, 16, 0, 0},
};

static const uint32_t pngsizes[][2] = {{37, 23}, {1, 1}, {9, 5}, {1, 9}, {130, 3}};

static int png_case_channels(int color_type)
{
    switch (color_type) {
    case PNG_COLOR_TYPE_GRAY_ALPHA:
        return 2;
    case PNG_COLOR_TYPE_RGB:
        return 3;
    case PNG_COLOR_TYPE_RGB_ALPHA:
        return 4;
    default:
        return 1;
    }
}

/* Write a PNG with libpng: random samples (random palette too). */
static uint8_t *libpng_write(const struct pngcase *c, uint32_t w, uint32_t h, uint32_t seed,
                             size_t *len)
{
    struct membuf m = {0};
    size_t rowbytes = ((size_t)w * png_case_channels(c->color_type) * c->depth + 7) / 8;
    uint8_t *pix = malloc(rowbytes * h);
    png_bytep *rows = malloc(h * sizeof *rows);
    fill_random(pix, rowbytes * h, seed);
    for (uint32_t y = 0; y < h; y++)
        rows[y] = pix + y * rowbytes;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    ck_assert_ptr_nonnull(info);
    if (setjmp(png_jmpbuf(png)))
        ck_abort_msg("libpng write error for %s", c->name);
    png_set_write_fn(png, &m, mem_write, mem_flush);
    png_set_IHDR(png, info, w, h, c->depth, c->color_type,
                 c->interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_color plte[256];
    uint8_t alpha[256];
    fill_random(alpha, sizeof alpha, seed + 1);
    if (c->color_type == PNG_COLOR_TYPE_PALETTE) {
        uint8_t rgb[256 * 3];
        fill_random(rgb, sizeof rgb, seed + 2);
        for (int i = 0; i < 256; i++) {
            plte[i].red = rgb[3 * i];
            plte[i].green = rgb[3 * i + 1];
            plte[i].blue = rgb[3 * i + 2];
        }
        png_set_PLTE(png, info, plte, 1 << c->depth);
        if (c->trns)
            png_set_tRNS(png, info, alpha, 1 << c->depth, NULL);
    } else if (c->trns) {
        /* a colour key that some pixels do match: the first pixel's value */
        png_color_16 key = {0};
        if (c->color_type == PNG_COLOR_TYPE_GRAY) {
            key.gray = pix[0];
        } else {
            key.red = pix[0];
            key.green = pix[1];
            key.blue = pix[2];
        }
        png_set_tRNS(png, info, NULL, 0, &key);
    }
    png_write_info(png, info);
    png_write_image(png, rows);
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    free(rows);
    free(pix);
    *len = m.len;
    return m.p;
}

/* The second decoder: libpng to 8-bit RGB (palette expanded, gray expanded and replicated, alpha
 * stripped, 16-bit reduced to the high byte, but 16-bit gray clipped to 0..255 as Pillow's mode I
 * conversion does). */
static void libpng_read_rgb(const uint8_t *buf, size_t len, fmt_image *img)
{
    struct membuf m = {(uint8_t *)buf, len, len, 0};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    ck_assert_ptr_nonnull(info);
    png_bytep *rows = NULL;
    if (setjmp(png_jmpbuf(png)))
        ck_abort_msg("libpng read error");
    png_set_read_fn(png, &m, mem_read);
    png_read_info(png, info);
    uint32_t w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    int ct = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
    if (ct == PNG_COLOR_TYPE_GRAY && depth == 16) {
        png_set_interlace_handling(png);
        png_read_update_info(png, info);
        ck_assert_uint_eq(png_get_rowbytes(png, info), (size_t)w * 2);
        uint8_t *g16 = malloc((size_t)w * h * 2);
        rows = malloc(h * sizeof *rows);
        for (uint32_t y = 0; y < h; y++)
            rows[y] = g16 + (size_t)y * w * 2;
        png_read_image(png, rows);
        png_read_end(png, NULL);
        png_destroy_read_struct(&png, &info, NULL);
        ck_assert_int_eq(fmt_image_alloc(img, w, h, 3), 0);
        for (size_t i = 0; i < (size_t)w * h; i++) {
            unsigned v = (unsigned)g16[2 * i] << 8 | g16[2 * i + 1];
            memset(img->pixels + 3 * i, v > 255 ? 255 : (int)v, 3);
        }
        free(g16);
        free(rows);
        return;
    }
    if (depth == 16)
        png_set_strip_16(png);
    if (ct == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if ((ct == PNG_COLOR_TYPE_GRAY || ct == PNG_COLOR_TYPE_GRAY_ALPHA) && depth < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    png_set_strip_alpha(png);
    if (ct == PNG_COLOR_TYPE_GRAY || ct == PNG_COLOR_TYPE_GRAY_ALPHA)
        png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    ck_assert_uint_eq(png_get_rowbytes(png, info), (size_t)w * 3);
    ck_assert_int_eq(fmt_image_alloc(img, w, h, 3), 0);
    rows = malloc(h * sizeof *rows);
    for (uint32_t y = 0; y < h; y++)
        rows[y] = img->pixels + (size_t)y * w * 3;
    png_read_image(png, rows);
    png_read_end(png, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    free(rows);
}

START_TEST(test_png_vs_libpng)
{
    const struct pngcase *c = &pngcases[_i];
    for (size_t s = 0; s < sizeof pngsizes / sizeof pngsizes[0]; s++) {
        uint32_t w = pngsizes[s][0], h = pngsizes[s][1];
        size_t len;
        uint8_t *png = libpng_write(c, w, h, 1000 + (uint32_t)(_i * 10 + s), &len);
        fmt_image ref, ref_gray, got, got_gray;
        libpng_read_rgb(png, len, &ref);
        rgb_to_luma(&ref, &ref_gray);
        fmt_decode_opts o = {.channels = 3};
        decode_ok(png, len, &o, &got);
        ck_assert_uint_eq(got.width, w);
        ck_assert_uint_eq(got.height, h);
        ck_assert_uint_eq(got.channels, 3);
        assert_pixels_eq(got.pixels, ref.pixels, (size_t)w * h * 3, c->name);
        o.channels = 1;
        decode_ok(png, len, &o, &got_gray);
        ck_assert_uint_eq(got_gray.channels, 1);
        assert_pixels_eq(got_gray.pixels, ref_gray.pixels, (size_t)w * h, c->name);

        fmt_image_info info;
        fmt_msg msg = {{0}};
        ck_assert_int_eq(fmt_image_probe(png, len, &info, &msg), 0);
        ck_assert_int_eq(info.type, FMT_IMG_PNG);
        ck_assert_uint_eq(info.width, w);
        ck_assert_uint_eq(info.height, h);
        ck_assert_uint_eq(info.channels, c->color_type == PNG_COLOR_TYPE_PALETTE
                                             ? 3u
                                             : (uint32_t)png_case_channels(c->color_type));
        fmt_image_free(&ref);
        fmt_image_free(&ref_gray);
        fmt_image_free(&got);
        fmt_image_free(&got_gray);
        free(png);
    }
}
END_TEST

/* Gray from colour matches Pillow's convert('L') (our reference formula is checked here). */
START_TEST(test_png_gray_vs_pillow)
{
    const char *py = tu_python_or_skip("PIL.Image",
                                       "PNG gray comparison with Pillow (no python3 with PIL)");
    if (!py)
        return;
    static const struct pngcase rgb8 = {"rgb 8", PNG_COLOR_TYPE_RGB, 8, 0, 0};
    size_t len, n;
    uint8_t *png = libpng_write(&rgb8, 256, 256, 77, &len);
    fmt_image got;
    decode_ok(png, len, &(fmt_decode_opts){.channels = 1}, &got);
    uint8_t *ref = pillow_decode(py, png, len, "L", &n);
    ck_assert_uint_eq(n, 256 * 256);
    assert_pixels_eq(got.pixels, ref, n, "gray vs Pillow");
    free(ref);
    fmt_image_free(&got);
    free(png);
}
END_TEST

static uint32_t crc32_ref(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
    }
    return c ^ 0xffffffffu;
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint32_t get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Offset of the chunk of the given type (its length field), or 0. */
static size_t png_find_chunk(const uint8_t *p, size_t len, const char *type)
{
    size_t pos = 8;
    while (pos + 12 <= len) {
        if (memcmp(p + pos + 4, type, 4) == 0)
            return pos;
        pos += 12 + get_be32(p + pos);
    }
    return 0;
}

/* A copy of png (malloc'd, *out_len) with chunks inserted: `before` ahead of the first IDAT,
 * `after` after the last one. Each is a list of {type, data, n}, type NULL ending it. */
struct tchunk {
    const char *type;
    const void *data;
    size_t n;
};

static size_t put_chunks(uint8_t *dst, const struct tchunk *c)
{
    size_t k = 0;
    for (; c && c->type; c++) {
        put_be32(dst + k, (uint32_t)c->n);
        memcpy(dst + k + 4, c->type, 4);
        if (c->n)
            memcpy(dst + k + 8, c->data, c->n);
        put_be32(dst + k + 8 + c->n, (uint32_t)crc32(0, dst + k + 4, (uInt)(c->n + 4)));
        k += 12 + c->n;
    }
    return k;
}

static uint8_t *png_with_chunks(const uint8_t *png, size_t len, const struct tchunk *before,
                                const struct tchunk *after, size_t *out_len)
{
    size_t extra = 0;
    for (const struct tchunk *c = before; c && c->type; c++)
        extra += 12 + c->n;
    for (const struct tchunk *c = after; c && c->type; c++)
        extra += 12 + c->n;
    size_t idat = png_find_chunk(png, len, "IDAT"), iend = png_find_chunk(png, len, "IEND");
    ck_assert(idat && iend);
    uint8_t *o = malloc(len + extra);
    size_t k = 0;
    memcpy(o, png, idat);
    k = idat + put_chunks(o + idat, before);
    memcpy(o + k, png + idat, iend - idat);
    k += iend - idat;
    k += put_chunks(o + k, after);
    memcpy(o + k, png + iend, len - iend);
    *out_len = k + len - iend;
    return o;
}

/* buf sniffs as an image of type and probes as one, w x h with ch channels. */
static void assert_probe(const uint8_t *buf, size_t len, fmt_image_type type, uint32_t w,
                         uint32_t h, uint32_t ch)
{
    fmt_image_info info;
    fmt_msg msg = {{0}};
    ck_assert_int_eq(fmt_image_sniff(buf, len), type);
    ck_assert_int_eq(fmt_image_probe(buf, len, &info, &msg), 0);
    ck_assert_int_eq(info.type, type);
    ck_assert_uint_eq(info.width, w);
    ck_assert_uint_eq(info.height, h);
    ck_assert_uint_eq(info.channels, ch);
}

/* png with the chunks before and after it (png_with_chunks): decoded where rc is 0, else refused
 * with rc, saying want. */
static void chunks_decode(const uint8_t *png, size_t len, const struct tchunk *before,
                          const struct tchunk *after, const fmt_decode_opts *o, int rc,
                          const char *want)
{
    size_t n;
    uint8_t *f = png_with_chunks(png, len, before, after, &n);
    if (rc == 0) {
        fmt_image img;
        decode_ok(f, n, o, &img);
        fmt_image_free(&img);
    } else {
        decode_fails(f, n, o, rc, want);
    }
    free(f);
}

/* Files spng reads and Pillow 9.4 refuses (PngImagePlugin's chunk handlers), and a few that
 * look alike and Pillow opens. */
START_TEST(test_png_pillow_refuses)
{
    fmt_image src;
    make_pattern(&src, 20, 10, 3, 9);
    uint8_t *png, *f;
    size_t len, n;
    ck_assert_int_eq(fmt_png_encode(&src, 6, &png, &len), 0);
    fmt_decode_opts o = {.channels = 3};
    fmt_image img;
    uint8_t actl[8] = {0, 0, 0, 2}, actl1[8] = {0, 0, 0, 1}, fctl0[26], fctl1[26], fctl5[26];
    memset(fctl0, 0, sizeof fctl0);
    put_be32(fctl0 + 4, 20);
    put_be32(fctl0 + 8, 10);
    memcpy(fctl1, fctl0, 26);
    put_be32(fctl1, 1);
    memcpy(fctl5, fctl0, 26);
    put_be32(fctl5, 5);
    uint8_t fdat2[4] = {0, 0, 0, 2}, fdat4[4] = {0, 0, 0, 4};

    /* APNG: frame 0 good; a bad number after the next fcTL is not read by Pillow */
    f = png_with_chunks(png, len, (struct tchunk[]){{"acTL", actl, 8}, {"fcTL", fctl0, 26}, {0}},
                        (struct tchunk[]){{"fcTL", fctl5, 26}, {"fdAT", fdat4, 4}, {0}}, &n);
    decode_ok(f, n, &o, &img);
    assert_pixels_eq(img.pixels, src.pixels, (size_t)20 * 10 * 3, "APNG frame 0");
    fmt_image_free(&img);
    free(f);
    /* the first fcTL numbered 1 */
    chunks_decode(png, len, (struct tchunk[]){{"acTL", actl, 8}, {"fcTL", fctl1, 26}, {0}}, NULL,
                  &o, FMT_ECORRUPT, "fcTL chunk with sequence number 1, expected 0");
    /* one frame: Pillow reads on to IEND, where an fdAT is out of sequence */
    f = png_with_chunks(png, len, (struct tchunk[]){{"acTL", actl1, 8}, {"fcTL", fctl0, 26}, {0}},
                        (struct tchunk[]){{"fdAT", fdat4, 4}, {0}}, &n);
    decode_fails(f, n, &o, FMT_ECORRUPT, "APNG contains frame sequence errors");
    fmt_image_info info;
    fmt_msg msg = {{0}};
    ck_assert_int_eq(fmt_image_probe(f, n, &info, &msg), FMT_ECORRUPT);
    free(f);
    chunks_decode(png, len, NULL, (struct tchunk[]){{"fdAT", fdat2, 4}, {0}},
                  &o, FMT_ECORRUPT, "fdAT chunk before any fcTL");
    chunks_decode(png, len, (struct tchunk[]){{"fcTL", fctl0, 20}, {0}}, NULL,
                  &o, FMT_ECORRUPT, "fcTL chunk of 20 bytes truncated");
    put_be32(fctl1 + 4, 21);
    chunks_decode(png, len, NULL, (struct tchunk[]){{"fcTL", fctl0, 26}, {"fcTL", fctl1, 26}, {0}},
                  &o, FMT_ECORRUPT, "APNG contains invalid frames");

    /* text: 1 MiB inflated is fine, one byte more is not, nor 65 MiB of text */
    size_t big = 1024 * 1024 + 1;
    uint8_t *a = malloc(big), *z = malloc(big);
    memset(a, 'a', big);
    uLongf zn = big;
    ck_assert_int_eq(compress2(z + 3, &zn, a, big, 9), Z_OK);
    ck_assert_uint_lt(zn, big - 3);
    memcpy(z, "k\0\0", 3);
    chunks_decode(png, len, (struct tchunk[]){{"zTXt", z, zn + 3}, {0}}, NULL,
                  &o, FMT_ETOOBIG, "Decompressed Data Too Large");
    chunks_decode(png, len, NULL, (struct tchunk[]){{"iCCP", z, zn + 3}, {0}},
                  &o, FMT_ETOOBIG, "iCCP chunk inflates to more than 1048576 bytes");
    zn = big;
    ck_assert_int_eq(compress2(z + 3, &zn, a, big - 1, 9), Z_OK);
    chunks_decode(png, len, (struct tchunk[]){{"zTXt", z, zn + 3}, {0}}, NULL, &o, 0, NULL);
    struct tchunk many[66];
    for (int i = 0; i < 65; i++)
        many[i] = (struct tchunk){"zTXt", z, zn + 3};
    many[65] = (struct tchunk){0};
    chunks_decode(png, len, many, NULL, &o, FMT_ETOOBIG, "MAX_TEXT_MEMORY");
    z[0] = 0; /* no keyword: Pillow does not count the text */
    chunks_decode(png, len, many + 1, NULL, &o, 0, NULL);

    /* compression methods: zTXt's is checked, iCCP's is not (Pillow reads the NUL before it) */
    chunks_decode(png, len, (struct tchunk[]){{"zTXt", "k\0\1x", 4}, {0}}, NULL,
                  &o, FMT_ECORRUPT, "zTXt chunk with unknown compression method 1");
    chunks_decode(png, len, (struct tchunk[]){{"iCCP", "p\0\1x", 4}, {0}}, NULL, &o, 0, NULL);
    chunks_decode(png, len, (struct tchunk[]){{"iCCP", "pppp", 4}, {0}}, NULL,
                  &o, FMT_ECORRUPT, "iCCP chunk without a NUL");
    /* IHDR compression method 1: Pillow ignores it, so do we */
    f = malloc(len);
    memcpy(f, png, len);
    f[26] = 1;
    put_be32(f + 29, (uint32_t)crc32(0, f + 12, 17));
    decode_ok(f, len, &o, &img);
    assert_pixels_eq(img.pixels, src.pixels, (size_t)20 * 10 * 3, "IHDR compression 1");
    fmt_image_free(&img);
    f[27] = 1; /* filter method: refused */
    put_be32(f + 29, (uint32_t)crc32(0, f + 12, 17));
    decode_fails(f, len, &o, FMT_ECORRUPT, "filter method");
    free(f);
    free(a);
    free(z);
    free(png);
    fmt_image_free(&src);
}
END_TEST

START_TEST(test_png_roundtrip)
{
    static const uint32_t sizes[][2] = {{37, 23}, {1, 1}, {300, 2}};
    for (size_t s = 0; s < 3; s++) {
        for (uint32_t ch = 1; ch <= 3; ch += 2) {
            for (int level = 0; level <= 9; level += 3) {
                fmt_image src, got, ref;
                make_pattern(&src, sizes[s][0], sizes[s][1], ch, 5);
                uint8_t *png;
                size_t len;
                ck_assert_int_eq(fmt_png_encode(&src, level, &png, &len), 0);
                size_t raw = (size_t)src.width * src.height * ch;
                if (level == 0) {
                    /* stored: rows + filter bytes + headers, no compression */
                    ck_assert_uint_gt(len, raw + src.height);
                    /* a stored deflate block (BTYPE 00) holding the first rows verbatim, each
                     * behind filter type 0 */
                    size_t idat = png_find_chunk(png, len, "IDAT");
                    ck_assert_uint_ne(idat, 0);
                    const uint8_t *z = png + idat + 8;
                    ck_assert_uint_eq(z[2] & 0x06, 0);
                    size_t row = (size_t)src.width * ch;
                    ck_assert_uint_eq(z[7], 0);
                    ck_assert_mem_eq(z + 8, src.pixels, row);
                    if (src.height > 1) {
                        ck_assert_uint_eq(z[8 + row], 0);
                        ck_assert_mem_eq(z + 9 + row, src.pixels + row, row);
                    }
                }
                decode_ok(png, len, &(fmt_decode_opts){.channels = ch}, &got);
                ck_assert_uint_eq(got.channels, ch);
                assert_pixels_eq(got.pixels, src.pixels, raw, "png round trip");
                /* a standard PNG: libpng reads the same pixels */
                libpng_read_rgb(png, len, &ref);
                fmt_image want;
                if (ch == 1) {
                    gray_to_rgb(&src, &want);
                } else {
                    ck_assert_int_eq(fmt_image_alloc(&want, src.width, src.height, 3), 0);
                    memcpy(want.pixels, src.pixels, raw);
                }
                assert_pixels_eq(ref.pixels, want.pixels, (size_t)src.width * src.height * 3,
                                 "libpng reading our PNG");
                fmt_image_free(&want);
                fmt_image_free(&ref);
                fmt_image_free(&got);
                fmt_image_free(&src);
                free(png);
            }
        }
    }
    fmt_image src;
    make_pattern(&src, 4, 4, 3, 1);
    uint8_t *png = (uint8_t *)1;
    size_t len = 1;
    ck_assert_int_eq(fmt_png_encode(&src, 10, &png, &len), FMT_EINVAL);
    ck_assert_ptr_null(png);
    ck_assert_int_eq(fmt_png_encode(&src, -1, &png, &len), FMT_EINVAL);
    fmt_image_free(&src);
}
END_TEST

START_TEST(test_png_damaged)
{
    fmt_image src;
    make_pattern(&src, 100, 60, 3, 8);
    uint8_t *png;
    size_t len;
    ck_assert_int_eq(fmt_png_encode(&src, 6, &png, &len), 0);
    size_t idat = png_find_chunk(png, len, "IDAT");
    ck_assert_uint_ne(idat, 0);
    size_t idat_len = get_be32(png + idat);
    ck_assert_uint_gt(idat_len, 100);
    fmt_decode_opts o = {.channels = 3};
    uint8_t *bad = malloc(len);

    memcpy(bad, png, len);
    bad[idat + 8 + idat_len / 2] ^= 0x01;
    decode_fails(bad, len, &o, FMT_ECORRUPT, "PNG CRC error");
    /* a damaged IHDR is caught by probe too */
    memcpy(bad, png, len);
    bad[8 + 8 + 3] ^= 0x40; /* width */
    fmt_image_info info;
    fmt_msg msg = {{0}};
    ck_assert_int_eq(fmt_image_probe(bad, len, &info, &msg), FMT_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(msg.text, "PNG CRC error"));
    decode_fails(bad, len, &o, FMT_ECORRUPT, "PNG CRC error");

    /* truncation inside the header, inside IDAT, before IEND */
    /* a damaged CRC of the last IDAT, after all pixel data is in */
    memcpy(bad, png, len);
    bad[idat + 8 + idat_len + 3] ^= 0x01;
    decode_fails(bad, len, &o, FMT_ECORRUPT, "PNG CRC error");
    /* truncation inside the header, inside IDAT, in the last CRC, before IEND, inside IEND's
     * type (spng does not read IEND's own CRC, the file's last 4 bytes) */
    const size_t cuts[] = {4, 8, 20, 33, idat + 4, idat + 8 + idat_len / 2, idat + 8 + idat_len,
                           idat + 8 + idat_len + 3, len - 12, len - 6};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++)
        decode_fails(png, cuts[c], &o, FMT_ETRUNC, "PNG truncated");
    free(bad);
    free(png);
    fmt_image_free(&src);
}
END_TEST

/* A PNG with IHDR w x h and an IDAT of a few rows of zlib data; CRCs correct. */
static uint8_t *png_with_size(uint32_t w, uint32_t h, size_t *len)
{
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
    /* zlib stored block of 4 zero bytes */
    static const uint8_t z[] = {0x78, 0x01, 0x01, 0x04, 0x00, 0xfb, 0xff, 0, 0, 0, 0,
                                0x00, 0x04, 0x00, 0x01};
    uint8_t *p = calloc(1, 8 + 25 + 12 + sizeof z + 12);
    memcpy(p, sig, 8);
    uint8_t *c = p + 8;
    put_be32(c, 13);
    memcpy(c + 4, "IHDR", 4);
    put_be32(c + 8, w);
    put_be32(c + 12, h);
    c[16] = 8; /* depth */
    c[17] = 2; /* RGB */
    put_be32(c + 21, crc32_ref(c + 4, 17));
    c += 25;
    put_be32(c, sizeof z);
    memcpy(c + 4, "IDAT", 4);
    memcpy(c + 8, z, sizeof z);
    put_be32(c + 8 + sizeof z, crc32_ref(c + 4, 4 + sizeof z));
    c += 12 + sizeof z;
    memcpy(c + 4, "IEND", 4);
    put_be32(c + 8, crc32_ref(c + 4, 4));
    *len = (size_t)(c + 12 - p);
    return p;
}

START_TEST(test_png_limits)
{
    size_t len;
    fmt_decode_opts o = {.channels = 3};
    uint8_t *png = png_with_size(60000, 60000, &len);
    decode_fails(png, len, &o, FMT_ETOOBIG, "image 60000x60000 exceeds limit of 178956970 pixels");
    fmt_image_info info;
    fmt_msg msg = {{0}};
    ck_assert_int_eq(fmt_image_probe(png, len, &info, &msg), 0);
    ck_assert_uint_eq(info.width, 60000);
    ck_assert_uint_eq(info.channels, 3);
    free(png);
    /* within spng's side limit, above the pixel limit: our own check after IHDR */
    png = png_with_size(20000, 20000, &len);
    decode_fails(png, len, &o, FMT_ETOOBIG, "image 20000x20000 exceeds limit of 178956970 pixels");
    free(png);
    png = png_with_size(40000, 3, &len);
    decode_fails(png, len, &o, FMT_ETOOBIG, "image 40000x3 exceeds limit of 32768 pixels per side");
    free(png);

    fmt_image src;
    make_pattern(&src, 120, 80, 1, 2);
    ck_assert_int_eq(fmt_png_encode(&src, 1, &png, &len), 0);
    check_limits(png, len, &o, 100, 120, 9600, "image 120x80 exceeds limit of 100 pixels per side",
                 "exceeds limit of 9599 pixels");
    free(png);
    fmt_image_free(&src);
}
END_TEST

/* ---- BMP ---- */

/* A BMP with a 40-byte info header: palette (BGRA entries) and the pixel array as given. */
static uint8_t *bmp_build(int32_t w, int32_t h, uint16_t bpp, uint32_t compression,
                          const uint8_t *palette, uint32_t npal, const uint8_t *pixels,
                          size_t pixlen, size_t *len)
{
    size_t off = 14 + 40 + 4 * (size_t)npal;
    *len = off + pixlen;
    uint8_t *b = calloc(1, *len);
    b[0] = 'B';
    b[1] = 'M';
    b[2] = (uint8_t)*len;
    b[3] = (uint8_t)(*len >> 8);
    b[10] = (uint8_t)off;
    b[11] = (uint8_t)(off >> 8);
    b[14] = 40;
    memcpy(b + 18, &w, 4); /* little-endian host */
    memcpy(b + 22, &h, 4);
    b[26] = 1;
    b[28] = (uint8_t)bpp;
    b[30] = (uint8_t)compression;
    b[46] = (uint8_t)npal;
    b[47] = (uint8_t)(npal >> 8);
    if (npal)
        memcpy(b + 54, palette, 4 * npal);
    memcpy(b + off, pixels, pixlen);
    return b;
}

static void bmp_expect(const uint8_t *bmp, size_t len, uint32_t w, uint32_t h,
                       const uint8_t *rgb, const char *what)
{
    fmt_image img;
    decode_ok(bmp, len, &(fmt_decode_opts){.channels = 3}, &img);
    ck_assert_uint_eq(img.width, w);
    ck_assert_uint_eq(img.height, h);
    ck_assert_uint_eq(img.channels, 3);
    assert_pixels_eq(img.pixels, rgb, (size_t)w * h * 3, what);
    fmt_image_free(&img);
    decode_ok(bmp, len, &(fmt_decode_opts){.channels = 1}, &img);
    ck_assert_uint_eq(img.channels, 1);
    for (size_t i = 0; i < (size_t)w * h; i++)
        ck_assert_uint_eq(img.pixels[i], ref_luma(rgb + 3 * i));
    fmt_image_free(&img);
}

static const uint8_t pal4[16] = {
    0, 0, 255, 0,     /* 0: red (BGRA) */
    0, 255, 0, 0,     /* 1: green */
    255, 0, 0, 0,     /* 2: blue */
    40, 80, 120, 0,   /* 3: (120, 80, 40) */
};

START_TEST(test_bmp_known_pixels)
{
    size_t len;
    uint8_t *b;
    /* 8-bit palette, 5x3, bottom-up: rows stored last row first, each padded to 8 bytes */
    static const uint8_t px8[] = {
        3, 2, 1, 0, 3, 0, 0, 0, /* image row 2 */
        1, 1, 1, 1, 1, 0, 0, 0, /* row 1 */
        0, 1, 2, 3, 0, 0, 0, 0, /* row 0 */
    };
    static const uint8_t want8[] = {
        255, 0, 0, 0, 255, 0, 0, 0, 255, 120, 80, 40, 255, 0, 0,
        0, 255, 0, 0, 255, 0, 0, 255, 0, 0, 255, 0, 0, 255, 0,
        120, 80, 40, 0, 0, 255, 0, 255, 0, 255, 0, 0, 120, 80, 40,
    };
    b = bmp_build(5, 3, 8, 0, pal4, 4, px8, sizeof px8, &len);
    bmp_expect(b, len, 5, 3, want8, "8-bit palette");
    free(b);

    /* 4-bit palette, 3x2, top-down */
    static const uint8_t px4[] = {0x01, 0x20, 0, 0, 0x33, 0x10, 0, 0};
    static const uint8_t want4[] = {255, 0, 0, 0, 255, 0, 0, 0, 255,
                                    120, 80, 40, 120, 80, 40, 0, 255, 0};
    b = bmp_build(3, -2, 4, 0, pal4, 4, px4, sizeof px4, &len);
    bmp_expect(b, len, 3, 2, want4, "4-bit palette top-down");
    free(b);

    /* 1-bit, 10x1: bits MSB first */
    static const uint8_t px1[] = {0xa5, 0x80, 0, 0};
    static const uint8_t want1[] = {0, 255, 0, 255, 0, 0, 0, 255, 0, 255, 0, 0, 255, 0, 0,
                                    0, 255, 0, 255, 0, 0, 0, 255, 0, 0, 255, 0, 255, 0, 0};
    b = bmp_build(10, 1, 1, 0, pal4, 2, px1, sizeof px1, &len);
    bmp_expect(b, len, 10, 1, want1, "1-bit palette");
    free(b);

    /* 24-bit, odd width 3x2, bottom-up: 9 bytes of BGR + 3 of padding a row */
    static const uint8_t px24[] = {
        10, 20, 30, 40, 50, 60, 70, 80, 90, 0xee, 0xee, 0xee, /* row 1 (padding ignored) */
        1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 0, 0,                   /* row 0 */
    };
    static const uint8_t want24[] = {3, 2, 1, 6, 5, 4, 9, 8, 7, 30, 20, 10, 60, 50, 40, 90, 80, 70};
    b = bmp_build(3, 2, 24, 0, NULL, 0, px24, sizeof px24, &len);
    bmp_expect(b, len, 3, 2, want24, "24-bit bottom-up");
    free(b);
    /* the same rows top-down */
    static const uint8_t want24td[] = {30, 20, 10, 60, 50, 40, 90, 80, 70,
                                       3, 2, 1, 6, 5, 4, 9, 8, 7};
    b = bmp_build(3, -2, 24, 0, NULL, 0, px24, sizeof px24, &len);
    bmp_expect(b, len, 3, 2, want24td, "24-bit top-down");
    free(b);

    /* 32-bit BGRA (alpha dropped), 2x2 top-down and bottom-up */
    static const uint8_t px32[] = {1, 2, 3, 0, 4, 5, 6, 128, 7, 8, 9, 255, 10, 11, 12, 0};
    static const uint8_t want32td[] = {3, 2, 1, 6, 5, 4, 9, 8, 7, 12, 11, 10};
    static const uint8_t want32bu[] = {9, 8, 7, 12, 11, 10, 3, 2, 1, 6, 5, 4};
    b = bmp_build(2, -2, 32, 0, NULL, 0, px32, sizeof px32, &len);
    bmp_expect(b, len, 2, 2, want32td, "32-bit top-down");
    fmt_image_info info;
    fmt_msg msg = {{0}};
    ck_assert_int_eq(fmt_image_probe(b, len, &info, &msg), 0);
    ck_assert_int_eq(info.type, FMT_IMG_BMP);
    ck_assert_uint_eq(info.width, 2);
    ck_assert_uint_eq(info.height, 2);
    ck_assert_uint_eq(info.channels, 4);
    free(b);
    b = bmp_build(2, 2, 32, 0, NULL, 0, px32, sizeof px32, &len);
    bmp_expect(b, len, 2, 2, want32bu, "32-bit bottom-up");
    free(b);
}
END_TEST

START_TEST(test_bmp_roundtrip)
{
    static const uint32_t sizes[][2] = {{37, 23}, {1, 1}, {2, 5}, {3, 3}, {64, 4}};
    for (size_t s = 0; s < 5; s++) {
        for (uint32_t ch = 1; ch <= 3; ch += 2) {
            fmt_image src, got;
            make_pattern(&src, sizes[s][0], sizes[s][1], ch, 9);
            uint8_t *bmp;
            size_t len;
            ck_assert_int_eq(fmt_bmp_encode(&src, &bmp, &len), 0);
            size_t row = ((size_t)src.width * ch + 3) & ~(size_t)3;
            ck_assert_uint_eq(len, 54 + (ch == 1 ? 1024 : 0) + row * src.height);
            ck_assert_uint_eq(bmp[28], ch == 3 ? 24 : 8);
            fmt_image_info info;
            fmt_msg msg = {{0}};
            ck_assert_int_eq(fmt_image_probe(bmp, len, &info, &msg), 0);
            ck_assert_uint_eq(info.width, src.width);
            ck_assert_uint_eq(info.height, src.height);
            decode_ok(bmp, len, &(fmt_decode_opts){.channels = ch}, &got);
            ck_assert_uint_eq(got.channels, ch);
            assert_pixels_eq(got.pixels, src.pixels, (size_t)src.width * src.height * ch,
                             "bmp round trip");
            fmt_image_free(&got);
            if (ch == 1) { /* gray palette: gray to RGB replicates */
                decode_ok(bmp, len, &(fmt_decode_opts){.channels = 3}, &got);
                for (size_t i = 0; i < (size_t)src.width * src.height; i++)
                    ck_assert(got.pixels[3 * i] == src.pixels[i] &&
                              got.pixels[3 * i + 2] == src.pixels[i]);
                fmt_image_free(&got);
            }
            fmt_image_free(&src);
            free(bmp);
        }
    }
}
END_TEST

START_TEST(test_bmp_bad)
{
    static const uint8_t px24[12] = {1, 2, 3, 4, 5, 6, 0, 0, 7, 8, 9, 0};
    size_t len;
    fmt_decode_opts o = {.channels = 3};
    uint8_t *b = bmp_build(2, 2, 24, 0, NULL, 0, px24, sizeof px24, &len);
    /* 24-bit 2x2: rows of 8 bytes, the last one's padding not needed (Pillow): 14; given 12 */
    decode_fails(b, len, &o, FMT_ETRUNC,
                 "BMP pixel data truncated (expected 14 bytes, file has 12)");
    decode_fails(b, 20, &o, FMT_ETRUNC, "BMP header truncated");
    decode_fails(b, 10, &o, FMT_ETRUNC, "BMP header truncated");
    free(b);

    static const uint8_t px8[4] = {0, 1, 2, 3};
    b = bmp_build(2, 2, 8, 0, pal4, 3, px8, sizeof px8, &len);
    ck_assert_uint_eq(len, 14 + 40 + 12 + 4);
    /* 2x2 8-bit: rows of 4 bytes, 6 expected */
    decode_fails(b, len, &o, FMT_ETRUNC, "expected 6 bytes, file has 4");
    free(b);
    static const uint8_t px8b[8] = {0, 1, 0, 0, 2, 3, 0, 0};
    b = bmp_build(2, 2, 8, 0, pal4, 3, px8b, sizeof px8b, &len);
    /* an index past the palette: Pillow's grey ramp (gray 3), and a warning */
    fmt_image img;
    decode_warns(b, len, &o, &img, "palette entry 3 of 3");
    static const uint8_t want_past[12] = {0, 0, 255, 3, 3, 3, 255, 0, 0, 0, 255, 0};
    assert_pixels_eq(img.pixels, want_past, sizeof want_past, "index past the palette");
    fmt_image_free(&img);
    free(b);
    b = bmp_build(2, 2, 8, 0, pal4, 4, px8b, sizeof px8b, &len);
    decode_ok(b, len, &o, &img); /* with the 4th entry it is fine */
    fmt_image_free(&img);
    b[30] = 1; /* RLE8: (0, 1) is the end of the bitmap, after no pixels */
    decode_fails(b, len, &o, FMT_ETRUNC, "RLE data ends after 0 of 4 pixels");
    b[30] = 0;
    b[28] = 7; /* bit depth */
    decode_fails(b, len, &o, FMT_EUNSUPPORTED, "bit depth 7");
    free(b);

    /* 60000x60000 24-bit, header only */
    b = bmp_build(60000, 60000, 24, 0, NULL, 0, px24, sizeof px24, &len);
    decode_fails(b, len, &o, FMT_ETOOBIG, "image 60000x60000 exceeds limit of 178956970 pixels");
    free(b);
    b = bmp_build(60000, -60000, 24, 0, NULL, 0, px24, sizeof px24, &len);
    decode_fails(b, len, &o, FMT_ETOOBIG, "image 60000x60000 exceeds limit");
    free(b);
    /* Pillow reads the width unsigned, and takes a height as top-down only when its high byte is
     * 0xFF: both of these are more than 4 billion pixels */
    b = bmp_build(-5, 2, 24, 0, NULL, 0, px24, sizeof px24, &len);
    decode_fails(b, len, &o, FMT_ETOOBIG, "image 4294967291x2 exceeds limit");
    free(b);
    b = bmp_build(2, INT32_MIN, 24, 0, NULL, 0, px24, sizeof px24, &len);
    decode_fails(b, len, &o, FMT_ETOOBIG, "image 2x2147483648 exceeds limit");
    free(b);
    b = bmp_build(0, 2, 24, 0, NULL, 0, px24, sizeof px24, &len);
    decode_fails(b, len, &o, FMT_ECORRUPT, "BMP size 0x2 invalid");
    free(b);

    /* limits when set small */
    static const uint8_t px16[16] = {0};
    b = bmp_build(2, 2, 24, 0, NULL, 0, px16, sizeof px16, &len);
    check_limits(b, len, &o, 1, 2, 4, "image 2x2 exceeds limit of 1 pixels per side",
                 "image 2x2 exceeds limit of 3 pixels");
    free(b);
}
END_TEST

/* The variants Pillow reads that stb_image did not, and the ones Pillow refuses (each checked
 * against Pillow 9.4 by tests/e2e_parity.sh; the pixels here are worked out by hand). */
START_TEST(test_bmp_pillow_variants)
{
    static const uint8_t R[3] = {255, 0, 0}, G[3] = {0, 255, 0}, B[3] = {0, 0, 255},
                         C[3] = {120, 80, 40};
    fmt_decode_opts o = {.channels = 3};
    size_t len;
    uint8_t want[3 * 12];
#define PUT(i, c) memcpy(want + 3 * (i), (c), 3)

    /* RLE8, 4x3, bottom-up. Stream row 0: a run of 3 (green), end of line (pads red). Row 1:
     * absolute 2 3 0 (one pad byte to an even file offset), a run of one 3. Row 2: a delta (two
     * bytes Pillow 9.4 drops, then right 1, up 0), a run of 5 cut to the 3 left in the row. */
    static const uint8_t rle8[] = {3, 1, 0, 0, 0, 3, 2, 3, 0, 0, 1, 3,
                                   0, 2, 9, 9, 1, 0, 5, 1};
    uint8_t *b = bmp_build(4, 3, 8, 1, pal4, 4, rle8, sizeof rle8, &len);
    PUT(0, R); PUT(1, G); PUT(2, G); PUT(3, G);
    PUT(4, B); PUT(5, C); PUT(6, R); PUT(7, C);
    PUT(8, G); PUT(9, G); PUT(10, G); PUT(11, R);
    bmp_expect(b, len, 4, 3, want, "RLE8");
    /* cut short: the stream must fill the image */
    decode_fails(b, len - 2, &o, FMT_ETRUNC, "RLE data ends after 9 of 12 pixels");
    free(b);

    /* RLE4, 4x2, top-down: a run of 4 alternating 1 and 2, then absolute 3 0 2 1 */
    static const uint8_t rle4[] = {4, 0x12, 0, 4, 0x30, 0x21};
    b = bmp_build(4, -2, 4, 2, pal4, 4, rle4, sizeof rle4, &len);
    PUT(0, G); PUT(1, B); PUT(2, G); PUT(3, B);
    PUT(4, C); PUT(5, R); PUT(6, B); PUT(7, G);
    bmp_expect(b, len, 4, 2, want, "RLE4 top-down");
    /* RLE with 24 bits per pixel: Pillow has no raw mode for it */
    b[28] = 24;
    decode_fails(b, len, &o, FMT_EUNSUPPORTED, "RLE-compressed BMP with 24 bits");
    b[28] = 4;

    /* the same file as a DIB (no file header): pixels right after the palette */
    fmt_image img;
    decode_ok(b + 14, len - 14, &o, &img);
    assert_pixels_eq(img.pixels, want, 4 * 2 * 3, "DIB");
    fmt_image_free(&img);
    ck_assert_int_eq(fmt_image_sniff(b + 14, len - 14), FMT_IMG_BMP);
    free(b);

    /* 8-bit, 2x2: planes 0 (ignored), then a gap of 5 bytes before the pixels (bfOffBits) */
    static const uint8_t px8[13] = {9, 9, 9, 9, 9, 3, 2, 0, 0, 1, 0, 0, 0};
    b = bmp_build(2, 2, 8, 0, pal4, 4, px8, sizeof px8, &len);
    b[26] = 0;
    b[10] += 5;
    PUT(0, G); PUT(1, R); PUT(2, C); PUT(3, B);
    bmp_expect(b, len, 2, 2, want, "planes 0 and a gap before the pixels");
    /* bfOffBits 0: the pixels follow the palette (index 9 is past it: gray 9) */
    b[10] = 0;
    static const uint8_t N[3] = {9, 9, 9};
    PUT(0, N); PUT(1, C); PUT(2, N); PUT(3, N);
    bmp_expect(b, len, 2, 2, want, "bfOffBits 0");
    free(b);

    /* OS/2 1.x: 12-byte header, 16-bit sizes, 3-byte palette entries; 2x1, 8 bits */
    static const uint8_t os2[] = {'B', 'M', 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0, 0,
                                  12, 0, 0, 0, 2, 0, 1, 0, 1, 0, 8, 0,
                                  0, 0, 255, 40, 80, 120, 1, 0, 0, 0};
    PUT(0, C); PUT(1, R);
    bmp_expect(os2, sizeof os2, 2, 1, want, "OS/2 1.x 8-bit");
    uint8_t os2b[sizeof os2];
    memcpy(os2b, os2, sizeof os2);
    os2b[10] = 0; /* bfOffBits 0: pixels after the 256 entries Pillow reads: none left */
    decode_fails(os2b, sizeof os2b, &o, FMT_ETRUNC, "pixel data truncated");
    os2b[10] = 26; /* bfOffBits at the palette: 4 * 256 bytes further, past the end */
    decode_fails(os2b, sizeof os2b, &o, FMT_ETRUNC, "pixel data truncated");

    /* palette sizes Pillow refuses (issue: biClrUsed 300 or 2^31); a grey palette of 300 is
     * read as gray, as Pillow does */
    static uint8_t pal300[4 * 300], px2[4] = {7, 200, 0, 0};
    for (int i = 0; i < 300; i++)
        memset(pal300 + 4 * i, i * 37 % 256, 3);
    b = bmp_build(2, 1, 8, 0, pal300, 300, px2, sizeof px2, &len);
    decode_fails(b, len, &o, FMT_EUNSUPPORTED, "palette of 300 entries not supported");
    b[46] = b[47] = 0;
    b[49] = 0x80; /* 2^31 */
    decode_fails(b, len, &o, FMT_EUNSUPPORTED, "palette size 2147483648 not supported");
    free(b);
    for (int i = 0; i < 300; i++)
        memset(pal300 + 4 * i, i & 255, 3);
    b = bmp_build(2, 1, 8, 0, pal300, 300, px2, sizeof px2, &len);
    memset(want, 7, 3);
    memset(want + 3, 200, 3);
    bmp_expect(b, len, 2, 1, want, "grey palette of 300");
    free(b);

    /* bitfields: 32-bit layouts Pillow calls unsupported */
    static const uint8_t px32[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint8_t bf[14 + 40 + 12 + 8] = {0};
    b = bmp_build(2, 1, 32, 3, NULL, 0, px32, sizeof px32, &len);
    memcpy(bf, b, 54);
    free(b);
    bf[10] = 66;
    static const uint32_t odd[3] = {0x3FF00000, 0xFFC00, 0x3FF}, rgba[3] = {0xFF, 0xFF00, 0xFF0000},
                          bgr[3] = {0xFF0000, 0xFF00, 0xFF};
    memcpy(bf + 66, px32, 8);
    memcpy(bf + 54, odd, 12);
    decode_fails(bf, sizeof bf, &o, FMT_EUNSUPPORTED, "bitfields layout");
    memcpy(bf + 54, rgba, 12); /* RGBA needs the alpha mask a 40-byte header has not */
    decode_fails(bf, sizeof bf, &o, FMT_EUNSUPPORTED, "bitfields layout");
    memcpy(bf + 54, bgr, 12);
    static const uint8_t want32[6] = {3, 2, 1, 7, 6, 5};
    bmp_expect(bf, sizeof bf, 2, 1, want32, "32-bit BGRX bitfields");
    /* header sizes Pillow does not read */
    bf[14] = 56;
    decode_fails(bf, sizeof bf, &o, FMT_EUNSUPPORTED, "header size 56");
#undef PUT
}
END_TEST

/* ---- all formats ---- */

START_TEST(test_bad_input)
{
    fmt_decode_opts o = {.channels = 3};
    fmt_image_info info;
    fmt_msg msg = {{0}};
    decode_fails("", 0, &o, FMT_EEMPTY, "empty file");
    decode_fails(NULL, 0, NULL, FMT_EEMPTY, "empty file");
    ck_assert_int_eq(fmt_image_probe("", 0, &info, &msg), FMT_EEMPTY);
    ck_assert_str_eq(msg.text, "empty file");

    /* a text file named .jpg, read from disk as the compiler does */
    char path[1300];
    static const char text[] = "this is not an image\n";
    temp_file(path, sizeof path, "jpg", text, sizeof text - 1);
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(fmt_read_file(path, 1 << 20, &buf, &len), 0);
    decode_fails(buf, len, &o, FMT_EFORMAT, "not a JPEG, PNG or BMP file");
    ck_assert_int_eq(fmt_image_probe(buf, len, &info, &msg), FMT_EFORMAT);
    free(buf);
    /* "BM" text is not a BMP */
    decode_fails("BMW and Audi are cars", 21, &o, FMT_EFORMAT, "not a JPEG, PNG or BMP file");
    decode_fails("x", 1, &o, FMT_EFORMAT, NULL);
    /* channels other than 1 and 3 */
    static const uint8_t jpeg_start[] = {0xff, 0xd8, 0xff, 0xe0};
    o.channels = 2;
    decode_fails(jpeg_start, sizeof jpeg_start, &o, FMT_EINVAL, "channels");
    o.channels = 3;
    decode_fails(jpeg_start, sizeof jpeg_start, &o, FMT_ETRUNC, NULL);
}
END_TEST

START_TEST(test_sniff_and_probe)
{
    ck_assert_str_eq(fmt_image_type_name(FMT_IMG_JPEG), "jpeg");
    ck_assert_str_eq(fmt_image_type_name(FMT_IMG_PNG), "png");
    ck_assert_str_eq(fmt_image_type_name(FMT_IMG_BMP), "bmp");
    ck_assert_str_eq(fmt_image_type_name(FMT_IMG_UNKNOWN), "unknown");
    ck_assert_int_eq(fmt_image_sniff(NULL, 0), FMT_IMG_UNKNOWN);

    fmt_image src3, src1;
    make_pattern(&src3, 37, 23, 3, 1);
    make_pattern(&src1, 37, 23, 1, 1);
    uint8_t *buf;
    size_t len;
    fmt_image_info info;
    fmt_msg msg = {{0}};

    ck_assert_int_eq(fmt_jpeg_encode(&src3, NULL, &buf, &len), 0);
    assert_probe(buf, len, FMT_IMG_JPEG, 37, 23, 3);
    ck_assert_int_eq(fmt_image_probe(buf, 100, &info, &msg), FMT_ETRUNC);
    free(buf);
    ck_assert_int_eq(fmt_jpeg_encode(&src1, NULL, &buf, &len), 0);
    assert_probe(buf, len, FMT_IMG_JPEG, 37, 23, 1);
    free(buf);

    ck_assert_int_eq(fmt_png_encode(&src3, 0, &buf, &len), 0);
    ck_assert_int_eq(fmt_image_sniff(buf, 5), FMT_IMG_PNG); /* cut inside the signature */
    assert_probe(buf, len, FMT_IMG_PNG, 37, 23, 3);
    ck_assert_int_eq(fmt_image_probe(buf, 5, &info, &msg), FMT_ETRUNC);
    free(buf);
    ck_assert_int_eq(fmt_png_encode(&src1, 6, &buf, &len), 0);
    assert_probe(buf, len, FMT_IMG_PNG, 37, 23, 1);
    free(buf);

    ck_assert_int_eq(fmt_bmp_encode(&src3, &buf, &len), 0);
    assert_probe(buf, len, FMT_IMG_BMP, 37, 23, 3);
    free(buf);
    fmt_image_free(&src3);
    fmt_image_free(&src1);

    fmt_image img;
    ck_assert_int_eq(fmt_image_alloc(&img, 0, 5, 3), FMT_EINVAL);
    ck_assert_ptr_null(img.pixels);
    ck_assert_int_eq(fmt_image_alloc(&img, 5, 5, 2), FMT_EINVAL);
    ck_assert_int_eq(fmt_image_alloc(&img, 5, 5, 1), 0);
    ck_assert_ptr_nonnull(img.pixels);
    fmt_image_free(&img);
    ck_assert_ptr_null(img.pixels);
    fmt_image_free(&img); /* a zeroed image is fine */
}
END_TEST

static Suite *image_suite(void)
{
    TCase *tc;
    Suite *s = tu_temp_suite("image", "image", 300, &tc);
    tcase_add_loop_test(tc, test_jpeg_vs_djpeg, 0, (int)(sizeof jsizes / sizeof jsizes[0]));
    TU_ADD_TESTS(tc, test_jpeg_shrink_on_load, test_jpeg_vs_pillow, test_jpeg_cmyk,
                 test_jpeg_truncated, test_jpeg_corrupt, test_jpeg_scan_limit, test_jpeg_limits,
                 test_jpeg_encode_args);
    tcase_add_loop_test(tc, test_png_vs_libpng, 0, (int)(sizeof pngcases / sizeof pngcases[0]));
    TU_ADD_TESTS(tc, test_png_gray_vs_pillow, test_png_roundtrip, test_png_pillow_refuses,
                 test_jpeg_pillow_segments, test_png_damaged, test_png_limits,
                 test_bmp_known_pixels, test_bmp_roundtrip, test_bmp_bad, test_bmp_pillow_variants,
                 test_bad_input, test_sniff_and_probe);
    return s;
}

int main(void)
{
    return tu_run(image_suite());
}
