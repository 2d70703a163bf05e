/* Pre-augmentation: SPEC parsing, the draws (ranges, distributions, determinism), exact
 * application (flip mirrors, colour arithmetic), the aux record. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "augment.h"
#include "le.h"
#include "testutil.h"

/* s is written as want (any text for NULL), which parses back to s. */
static void formats_back(const fmt_aug_spec *s, const char *want)
{
    char buf[256];
    fmt_aug_spec again;
    fmt_msg msg;
    fmt_aug_format(s, buf, sizeof buf);
    if (want)
        ck_assert_str_eq(buf, want);
    ck_assert_int_eq(fmt_aug_parse(buf, &again, &msg), 0);
    ck_assert_mem_eq(s, &again, sizeof *s);
}

START_TEST(parse_spec)
{
    fmt_aug_spec s;
    fmt_msg msg = {{0}};
    ck_assert_int_eq(fmt_aug_parse(FMT_AUG_DEFAULT_SPEC, &s, &msg), 0);
    ck_assert(s.rrc);
    ck_assert_double_eq_tol(s.scale_min, 0.08, 1e-12);
    ck_assert_double_eq_tol(s.scale_max, 1, 1e-12);
    ck_assert_double_eq_tol(s.ratio_min, 0.75, 1e-12);
    ck_assert_double_eq_tol(s.flip_p, 0.5, 1e-12);
    ck_assert_double_eq_tol(s.brightness, 0.4, 1e-12);
    ck_assert_double_eq_tol(s.saturation, 0.4, 1e-12);
    ck_assert_int_eq(fmt_aug_parse("rrc=0.5:0.9,flip", &s, &msg), 0);
    ck_assert_double_eq_tol(s.ratio_max, 4.0 / 3.0, 1e-12);
    ck_assert_double_eq_tol(s.flip_p, 0.5, 1e-12);
    ck_assert(s.contrast == 0);
    ck_assert_int_eq(fmt_aug_parse("contrast=0.2,flip=1", &s, &msg), 0);
    ck_assert(!s.rrc);
    ck_assert_double_eq_tol(s.contrast, 0.2, 1e-12);
    ck_assert(s.brightness == 0);
    ck_assert_int_eq(fmt_aug_parse("none", &s, &msg), 0);
    char buf[256];
    fmt_aug_format(&s, buf, sizeof buf);
    ck_assert_str_eq(buf, "none");
    ck_assert_int_eq(fmt_aug_parse("rrc=0.25:1:0.5:2,flip=0.3,jitter=0.1", &s, &msg), 0);
    formats_back(&s, "rrc=0.25:1:0.5:2,flip=0.3,brightness=0.1,contrast=0.1,saturation=0.1");
    /* hue and gray: not part of jitter (whose meaning is older than them) */
    ck_assert(s.hue == 0 && s.gray_p == 0);
    ck_assert_int_eq(fmt_aug_parse("hue=0.1,gray", &s, &msg), 0);
    ck_assert_double_eq_tol(s.hue, 0.1, 1e-12);
    ck_assert_double_eq_tol(s.gray_p, 0.1, 1e-12); /* RandomGrayscale's default p */
    ck_assert_int_eq(fmt_aug_parse("flip,hue=0.5,gray=0.25", &s, &msg), 0);
    formats_back(&s, "flip=0.5,hue=0.5,gray=0.25");
    ck_assert_int_eq(fmt_aug_parse("rotate=15", &s, &msg), 0);
    ck_assert(s.rotate == 15 && !s.rotate_bilinear);
    fmt_aug_format(&s, buf, sizeof buf);
    ck_assert_str_eq(buf, "rotate=15");
    ck_assert_int_eq(fmt_aug_parse("rotate=180:bilinear,flip", &s, &msg), 0);
    ck_assert(s.rotate == 180 && s.rotate_bilinear);
    formats_back(&s, "flip=0.5,rotate=180:bilinear");
    ck_assert_int_eq(fmt_aug_parse("rotate=7.5:nearest", &s, &msg), 0);
    ck_assert(s.rotate == 7.5 && !s.rotate_bilinear);
    ck_assert_int_eq(fmt_aug_parse("affine=15:0.1:0.9:1.1:10", &s, &msg), 0);
    ck_assert(s.affine && s.affine_degrees == 15 && s.affine_translate == 0.1 &&
              s.affine_scale_min == 0.9 && s.affine_scale_max == 1.1 && s.affine_shear == 10 &&
              !s.rotate_bilinear && s.rotate == 0);
    ck_assert_uint_eq(fmt_aug_record_size(&s), FMT_AUG_RECORD_SIZE_AFFINE);
    fmt_aug_format(&s, buf, sizeof buf);
    ck_assert_str_eq(buf, "affine=15:0.1:0.9:1.1:10");
    ck_assert_int_eq(fmt_aug_parse("flip,affine=0:0:1:1:0:bilinear,hue=0.1", &s, &msg), 0);
    ck_assert(s.affine && s.rotate_bilinear && s.affine_scale_min == 1);
    formats_back(&s, "flip=0.5,affine=0:0:1:1:0:bilinear,hue=0.1");
    ck_assert_int_eq(fmt_aug_parse("rotate=15", &s, &msg), 0);
    ck_assert_uint_eq(fmt_aug_record_size(&s), FMT_AUG_RECORD_SIZE);
    /* rotate=0 rotates nothing: its interpolation is dropped, so the canonical text (which
     * omits rotate=0) reads back to the same spec, and an affine's interpolation stands */
    ck_assert_int_eq(fmt_aug_parse("rotate=0:bilinear", &s, &msg), 0);
    ck_assert(s.rotate == 0 && !s.rotate_bilinear);
    formats_back(&s, NULL);
    ck_assert_int_eq(fmt_aug_parse("affine=5:0:1:1:0:bilinear,rotate=0", &s, &msg), 0);
    ck_assert(s.affine && s.rotate_bilinear);

    const char *bad[] = {"", "rrc", "rrc=0.5", "rrc=0:1", "rrc=0.9:0.5", "rrc=0.5:1.5",
                         "rrc=0.5:1:2:1", "rrc=a:b", "rrc=0.5:1:0.75", "flip=2", "flip=x",
                         "jitter", "jitter=-0.1", "jitter=1.5", "blur=3", "flip,,rrc=0.1:1x",
                         "hue", "hue=0.6", "hue=-0.1", "gray=1.5", "gray=x", "rotate",
                         "rotate=181", "rotate=-5", "rotate=10:bicubic", "rotate=10:",
                         "rotate=:bilinear", "affine", "affine=15", "affine=15:0.1:0.9:1.1",
                         "affine=15:0.1:0.9:1.1:10:12", "affine=181:0:1:1:0",
                         "affine=15:1.5:1:1:0", "affine=15:0.1:1.2:1.1:0",
                         "affine=15:0.1:0:1:0", "affine=15:0.1:1:11:0", "affine=15:0.1:1:1:90",
                         "affine=15:0.1:1:1:-1", "affine=15:0.1:1:1:5:bicubic",
                         "rotate=10,affine=15:0.1:1:1:5"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        memset(&msg, 0, sizeof msg);
        ck_assert_msg(fmt_aug_parse(bad[i], &s, &msg) == FMT_EINVAL, "'%s' accepted", bad[i]);
        ck_assert_msg(msg.text[0] != '\0', "'%s' gave no reason", bad[i]);
    }
}
END_TEST

/* Draws stay inside the spec's ranges and fill them: a fixed seed, many sources. */
START_TEST(draw_ranges_and_distribution)
{
    fmt_aug_spec s;
    ck_assert_int_eq(fmt_aug_parse("rrc=0.2:0.8:0.5:2,flip=0.3,jitter=0.25,hue=0.2,gray=0.2,"
                                   "rotate=30:bilinear", &s, NULL), 0);
    const uint32_t W = 400, H = 300;
    fmt_geom_plan base = {.src_w = W, .src_h = H};
    int n = 20000, flips = 0, fallback = 0, grays = 0;
    double bmin = 9, bmax = -9, bsum = 0, amin = 9, amax = 0, hmin = 9, hmax = -9, hsum = 0;
    double rmin = 999, rmax = -999;
    for (int i = 0; i < n; i++) {
        fmt_aug_params p;
        fmt_aug_draw(&s, 7, (uint64_t)i / 4, (uint32_t)(i % 4), W, H, &base, &p);
        ck_assert_uint_le(p.crop_x + p.crop_w, W);
        ck_assert_uint_le(p.crop_y + p.crop_h, H);
        ck_assert_uint_ge(p.crop_w, 1);
        double area = (double)p.crop_w * p.crop_h / (W * H);
        double ratio = (double)p.crop_w / p.crop_h;
        /* rounding w and h to integers moves area and ratio a little */
        if (area < 0.2 * 0.97 || area > 0.8 * 1.03 || ratio < 0.5 * 0.97 || ratio > 2 * 1.03)
            fallback++;
        amin = fmin(amin, area);
        amax = fmax(amax, area);
        flips += (int)p.flip;
        ck_assert(p.brightness >= 0.75f && p.brightness <= 1.25f);
        ck_assert(p.contrast >= 0.75f && p.contrast <= 1.25f);
        ck_assert(p.saturation >= 0.75f && p.saturation <= 1.25f);
        bmin = fmin(bmin, p.brightness);
        bmax = fmax(bmax, p.brightness);
        bsum += p.brightness;
        ck_assert(p.hue_on && p.hue >= -0.2f && p.hue <= 0.2f);
        hmin = fmin(hmin, p.hue);
        hmax = fmax(hmax, p.hue);
        hsum += p.hue;
        grays += (int)p.gray;
        ck_assert(p.angle >= -30.0f && p.angle <= 30.0f && p.rotate_bilinear);
        rmin = fmin(rmin, p.angle);
        rmax = fmax(rmax, p.angle);
    }
    ck_assert_int_eq(fallback, 0);          /* every draw found a fitting crop here */
    ck_assert(amin < 0.21 && amax > 0.79);  /* the range is covered */
    /* flip frequency 0.3: 6000 of 20000 expected, sd ~65 */
    ck_assert_int_ge(flips, 6000 - 400);
    ck_assert_int_le(flips, 6000 + 400);
    ck_assert(bmin < 0.76 && bmax > 1.24);
    ck_assert_double_eq_tol(bsum / n, 1.0, 0.01);
    ck_assert(hmin < -0.19 && hmax > 0.19);
    ck_assert(rmin < -29.5 && rmax > 29.5);
    ck_assert_double_eq_tol(hsum / n, 0.0, 0.005);
    /* gray and flip use their own draws: 4000 of 20000 expected, sd ~57 */
    ck_assert_int_ge(grays, 4000 - 400);
    ck_assert_int_le(grays, 4000 + 400);
}
END_TEST

/* RandomAffine's draws: ranges covered, translations whole pixels bounded by the output size */
START_TEST(affine_draws)
{
    fmt_aug_spec s;
    ck_assert_int_eq(fmt_aug_parse("affine=20:0.25:0.8:1.2:12", &s, NULL), 0);
    fmt_geom_plan base = {.src_w = 400, .src_h = 300, .out_w = 64, .out_h = 40};
    double amin = 99, amax = -99, smin = 99, smax = -99, hmin = 99, hmax = -99;
    int32_t xmin = 99, xmax = -99, ymin = 99, ymax = -99;
    for (int i = 0; i < 20000; i++) {
        fmt_aug_params p;
        fmt_aug_draw(&s, 3, (uint64_t)i, 0, 400, 300, &base, &p);
        ck_assert(p.affine && !p.rotate_bilinear && p.affine_shear_y == 0.0f);
        ck_assert(p.angle >= -20.0f && p.angle <= 20.0f);
        ck_assert(p.affine_scale >= 0.8f && p.affine_scale <= 1.2f);
        ck_assert(p.affine_shear_x >= -12.0f && p.affine_shear_x <= 12.0f);
        ck_assert_int_le(abs(p.affine_tx), 16);     /* 0.25 x 64 */
        ck_assert_int_le(abs(p.affine_ty), 10);     /* 0.25 x 40 */
        amin = fmin(amin, p.angle), amax = fmax(amax, p.angle);
        smin = fmin(smin, p.affine_scale), smax = fmax(smax, p.affine_scale);
        hmin = fmin(hmin, p.affine_shear_x), hmax = fmax(hmax, p.affine_shear_x);
        xmin = p.affine_tx < xmin ? p.affine_tx : xmin;
        xmax = p.affine_tx > xmax ? p.affine_tx : xmax;
        ymin = p.affine_ty < ymin ? p.affine_ty : ymin;
        ymax = p.affine_ty > ymax ? p.affine_ty : ymax;
    }
    ck_assert(amin < -19.9 && amax > 19.9 && smin < 0.81 && smax > 1.19);
    ck_assert(hmin < -11.9 && hmax > 11.9);
    ck_assert(xmin == -16 && xmax == 16 && ymin == -10 && ymax == 10);
}
END_TEST

START_TEST(draws_are_keyed)
{
    fmt_aug_spec s;
    ck_assert_int_eq(fmt_aug_parse(FMT_AUG_DEFAULT_SPEC, &s, NULL), 0);
    fmt_geom_plan base = {.src_w = 640, .src_h = 480};
    fmt_aug_params a, b, c, d;
    fmt_aug_draw(&s, 1, 10, 2, 640, 480, &base, &a);
    fmt_aug_draw(&s, 1, 10, 2, 640, 480, &base, &b);
    ck_assert_mem_eq(&a, &b, sizeof a);
    fmt_aug_draw(&s, 2, 10, 2, 640, 480, &base, &c);   /* other seed */
    fmt_aug_draw(&s, 1, 10, 3, 640, 480, &base, &d);   /* other variant */
    ck_assert(memcmp(&a.crop_x, &c.crop_x, 16) != 0 || a.brightness != c.brightness);
    ck_assert(memcmp(&a.crop_x, &d.crop_x, 16) != 0 || a.brightness != d.brightness);
    ck_assert_double_ne(fmt_aug_uniform(1, 10, 2, 0), fmt_aug_uniform(1, 11, 2, 0));
}
END_TEST

/* A source too thin for any crop of the ratio range falls back to the clamped center crop. */
START_TEST(draw_fallback)
{
    fmt_aug_spec s;
    ck_assert_int_eq(fmt_aug_parse("rrc=0.9:1:1:1", &s, NULL), 0);
    fmt_geom_plan base = {.src_w = 1000, .src_h = 10};
    fmt_aug_params p;
    fmt_aug_draw(&s, 3, 0, 0, 1000, 10, &base, &p);
    ck_assert_uint_eq(p.crop_w, 10);
    ck_assert_uint_eq(p.crop_h, 10);
    ck_assert_uint_eq(p.crop_x, 495);
    ck_assert_uint_eq(p.crop_y, 0);
}
END_TEST

static fmt_image pattern(uint32_t w, uint32_t h, uint32_t c)
{
    fmt_image im;
    ck_assert_int_eq(fmt_image_alloc(&im, w, h, c), 0);
    for (size_t i = 0; i < (size_t)w * h * c; i++)
        im.pixels[i] = (uint8_t)(i * 37 + (i / 7) * 11);
    return im;
}

START_TEST(flip_mirrors_exactly)
{
    fmt_resizer *rz;
    ck_assert_int_eq(fmt_resizer_create(&rz), 0);
    for (uint32_t c = 1; c <= 3; c += 2) {
        fmt_image src = pattern(17, 9, c), a, b;
        fmt_aug_params p = {.src_w = 17, .src_h = 9, .crop_w = 17, .crop_h = 9,
                            .brightness = 1, .contrast = 1, .saturation = 1};
        ck_assert_int_eq(fmt_aug_apply(rz, &src, &p, 17, 9, &a, NULL), 0);
        ck_assert_mem_eq(a.pixels, src.pixels, (size_t)17 * 9 * c); /* identity */
        p.flip = 1;
        ck_assert_int_eq(fmt_aug_apply(rz, &src, &p, 17, 9, &b, NULL), 0);
        for (uint32_t y = 0; y < 9; y++)
            for (uint32_t x = 0; x < 17; x++)
                for (uint32_t k = 0; k < c; k++)
                    ck_assert_uint_eq(b.pixels[(y * 17 + x) * c + k],
                                      src.pixels[(y * 17 + (16 - x)) * c + k]);
        fmt_image_free(&src);
        fmt_image_free(&a);
        fmt_image_free(&b);
    }
    fmt_resizer_free(rz);
}
END_TEST

START_TEST(colour_arithmetic)
{
    fmt_resizer *rz;
    ck_assert_int_eq(fmt_resizer_create(&rz), 0);
    fmt_image src, out;
    ck_assert_int_eq(fmt_image_alloc(&src, 2, 1, 3), 0);
    const uint8_t px[6] = {200, 100, 50, 10, 20, 250};
    memcpy(src.pixels, px, 6);
    fmt_aug_params p = {.src_w = 2, .src_h = 1, .crop_w = 2, .crop_h = 1,
                        .brightness = 1.5f, .contrast = 1, .saturation = 1};
    ck_assert_int_eq(fmt_aug_apply(rz, &src, &p, 2, 1, &out, NULL), 0);
    const uint8_t bright[6] = {255, 150, 75, 15, 30, 255};
    ck_assert_mem_eq(out.pixels, bright, 6);
    fmt_image_free(&out);

    /* saturation 0: every channel becomes the pixel's luma (Pillow's convert('L') weights) */
    p.brightness = 1;
    p.saturation = 0;
    ck_assert_int_eq(fmt_aug_apply(rz, &src, &p, 2, 1, &out, NULL), 0);
    uint32_t l0 = (200 * 19595u + 100 * 38470u + 50 * 7471u + 0x8000u) >> 16;
    uint32_t l1 = (10 * 19595u + 20 * 38470u + 250 * 7471u + 0x8000u) >> 16;
    const uint8_t gray[6] = {(uint8_t)l0, (uint8_t)l0, (uint8_t)l0, (uint8_t)l1, (uint8_t)l1,
                             (uint8_t)l1};
    ck_assert_mem_eq(out.pixels, gray, 6);
    fmt_image_free(&out);

    /* contrast 0: every value becomes the mean luma */
    p.saturation = 1;
    p.contrast = 0;
    ck_assert_int_eq(fmt_aug_apply(rz, &src, &p, 2, 1, &out, NULL), 0);
    uint8_t m = (uint8_t)((l0 + l1 + 1) / 2);
    for (int i = 0; i < 6; i++)
        ck_assert_uint_eq(out.pixels[i], m);
    fmt_image_free(&out);

    /* gray: Pillow's L in all three channels */
    p.contrast = 1;
    p.gray = 1;
    ck_assert_int_eq(fmt_aug_apply(rz, &src, &p, 2, 1, &out, NULL), 0);
    ck_assert_mem_eq(out.pixels, gray, 6);
    fmt_image_free(&out);

    /* hue: Pillow's HSV round trip with the hue byte moved by np.uint8(f * 255). (200, 100, 50)
     * is h 14, s 191, v 200 (fmt_rgb2hsv: 14.45 truncated); 0.25 * 255 = 63.75 -> 63, h 77:
     * hsv2rgb's sector 1 (77 * 6 / 255 = 1.81), f 0.8118, p = round(200 * (1 - 191/255)) = 50,
     * q = round(200 * (1 - 0.749 * 0.8118)) = 78, so (q, v, p) = (78, 200, 50). */
    p.gray = 0;
    p.hue_on = 1;
    p.hue = 0.25f;
    ck_assert_int_eq(fmt_aug_apply(rz, &src, &p, 2, 1, &out, NULL), 0);
    ck_assert_uint_eq(out.pixels[0], 78);
    ck_assert_uint_eq(out.pixels[1], 200);
    ck_assert_uint_eq(out.pixels[2], 50);
    const uint8_t second[3] = {250, 11, 146};  /* Pillow gives the same for (10, 20, 250) */
    ck_assert_mem_eq(out.pixels + 3, second, 3);
    fmt_image_free(&out);
    fmt_image_free(&src);
    fmt_resizer_free(rz);
}
END_TEST

START_TEST(apply_rejects_bad_params)
{
    fmt_resizer *rz;
    ck_assert_int_eq(fmt_resizer_create(&rz), 0);
    fmt_image src = pattern(10, 10, 3), out;
    fmt_aug_params p = {.src_w = 10, .src_h = 10, .crop_x = 5, .crop_w = 6, .crop_h = 10,
                        .brightness = 1, .contrast = 1, .saturation = 1};
    ck_assert_int_eq(fmt_aug_apply(rz, &src, &p, 4, 4, &out, NULL), FMT_EINVAL);
    p.crop_x = 0;
    p.src_w = 11;
    ck_assert_int_eq(fmt_aug_apply(rz, &src, &p, 4, 4, &out, NULL), FMT_EINVAL);
    fmt_image_free(&src);
    fmt_resizer_free(rz);
}
END_TEST

/* The n-byte record rec decodes to p itself, byte for byte. */
static void decodes_to_itself(const fmt_aug_params *p, const uint8_t *rec, size_t n)
{
    fmt_aug_params q;
    ck_assert_int_eq(fmt_aug_decode(rec, n, &q), 0);
    ck_assert_mem_eq(p, &q, sizeof *p);
}

/* p encodes as a version-2 record whose flags byte is flags. */
static void encodes_v2(const fmt_aug_params *p, uint8_t *rec, unsigned flags)
{
    fmt_aug_encode(p, rec);
    ck_assert_mem_eq(rec, "AUG2", 4);
    ck_assert_uint_eq(rec[40], flags);
}

/* p with *field (one of its own) at each of the n values bad: every record refused. */
static void refuses_values(fmt_aug_params *p, float *field, const float *bad, size_t n,
                           uint8_t *rec)
{
    fmt_aug_params q;
    for (size_t i = 0; i < n; i++) {
        *field = bad[i];
        fmt_aug_encode(p, rec);
        ck_assert_int_eq(fmt_aug_decode(rec, FMT_AUG_RECORD_SIZE, &q), FMT_ECORRUPT);
    }
}

START_TEST(record_round_trip)
{
    fmt_aug_params p, q;
    memset(&p, 0, sizeof p); /* padding too, for the byte comparison below */
    p.source = 0x123456789ull;
    p.variant = 7;
    p.src_w = 640;
    p.src_h = 480;
    p.crop_x = 1;
    p.crop_y = 2;
    p.crop_w = 300;
    p.crop_h = 200;
    p.flip = 1;
    p.brightness = 0.8125f;
    p.contrast = 1.25f;
    p.saturation = 1.0f;
    uint8_t rec[FMT_AUG_RECORD_MAX];
    const size_t n64 = FMT_AUG_RECORD_SIZE;
    ck_assert_uint_eq(fmt_aug_encode(&p, rec), FMT_AUG_RECORD_SIZE);
    decodes_to_itself(&p, rec, n64);
    ck_assert_int_eq(fmt_aug_decode(rec, n64 - 1, &q), FMT_ECORRUPT);
    ck_assert_int_eq(fmt_aug_decode(rec, FMT_AUG_RECORD_SIZE_AFFINE, &q), FMT_ECORRUPT);
    rec[0] = 'X';
    ck_assert_int_eq(fmt_aug_decode(rec, n64, &q), FMT_ECORRUPT);
    fmt_aug_encode(&p, rec);
    ck_assert_mem_eq(rec, "AUG1", 4);       /* without hue or gray: the version-1 bytes */
    for (int i = 60; i < 64; i++)
        ck_assert_uint_eq(rec[i], 0);
    rec[40] = 2; /* a version-1 record's flip must be 0 or 1 */
    ck_assert_int_eq(fmt_aug_decode(rec, n64, &q), FMT_ECORRUPT);
    fmt_aug_encode(&p, rec);
    rec[61] = 1; /* nor has it a hue */
    ck_assert_int_eq(fmt_aug_decode(rec, n64, &q), FMT_ECORRUPT);

    /* hue and gray: version 2, flags in the flip word, the hue factor in the last four bytes */
    p.hue_on = 1;
    p.hue = -0.3125f;
    p.gray = 1;
    encodes_v2(&p, rec, 7);
    decodes_to_itself(&p, rec, n64);
    p.hue = 0.0f;   /* applied with a factor of 0 is not "not applied" */
    fmt_aug_encode(&p, rec);
    ck_assert_int_eq(fmt_aug_decode(rec, n64, &q), 0);
    ck_assert_uint_eq(q.hue_on, 1);
    p.hue_on = 0;
    p.gray = 1;
    fmt_aug_encode(&p, rec);
    ck_assert_mem_eq(rec, "AUG2", 4);
    decodes_to_itself(&p, rec, n64);
    const float bad_hue[] = {0.5001f, -0.75f, NAN, INFINITY};
    p.hue_on = 1;
    refuses_values(&p, &p.hue, bad_hue, sizeof bad_hue / sizeof *bad_hue, rec);
    p.hue = 0.25f;
    fmt_aug_encode(&p, rec);
    rec[40] = 3; /* a hue factor without the hue flag */
    ck_assert_int_eq(fmt_aug_decode(rec, n64, &q), FMT_ECORRUPT);
    rec[40] = 16; /* an unknown flag */
    ck_assert_int_eq(fmt_aug_decode(rec, n64, &q), FMT_ECORRUPT);

    /* rotation: the angle at 56 and the resize filter in the flags' second byte */
    memset(&p, 0, sizeof p);
    p.src_w = p.src_h = p.crop_w = p.crop_h = 10;
    p.brightness = p.contrast = p.saturation = 1.0f;
    p.filter = 4;
    p.angle = -12.5f;
    p.rotate_bilinear = 1;
    encodes_v2(&p, rec, 8);
    ck_assert_uint_eq(rec[41], 4);
    decodes_to_itself(&p, rec, n64);
    const float bad_angle[] = {180.5f, -200.0f, NAN, INFINITY};
    refuses_values(&p, &p.angle, bad_angle, sizeof bad_angle / sizeof *bad_angle, rec);
    p.angle = 30.0f;
    fmt_aug_encode(&p, rec);
    rec[41] = FMT_FILTER_COUNT; /* no such resize filter */
    ck_assert_int_eq(fmt_aug_decode(rec, n64, &q), FMT_ECORRUPT);
    fmt_aug_encode(&p, rec);
    memset(rec + 56, 0, 4); /* a bilinear rotation by no angle */
    ck_assert_int_eq(fmt_aug_decode(rec, n64, &q), FMT_ECORRUPT);

    /* the affine warp: version 3, 96 bytes, flag 16, its parameters from 64 on */
    memset(&p, 0, sizeof p);
    p.src_w = p.src_h = p.crop_w = p.crop_h = 10;
    p.brightness = p.contrast = p.saturation = 1.0f;
    p.filter = 1;
    p.affine = 1;
    p.angle = 0.0f;             /* an affine warp without rotation is still a warp */
    p.rotate_bilinear = 1;
    p.affine_tx = -7;
    p.affine_ty = 3;
    p.affine_scale = 1.125f;
    p.affine_shear_x = -9.5f;
    ck_assert_uint_eq(fmt_aug_encode(&p, rec), FMT_AUG_RECORD_SIZE_AFFINE);
    ck_assert_mem_eq(rec, "AUG3", 4);
    ck_assert_uint_eq(rec[40], 8 | 16);
    ck_assert_uint_eq(rec[41], 1);
    ck_assert_uint_eq(fmt_le_get32(rec + 64), (uint32_t)-7);
    ck_assert_uint_eq(fmt_le_get32(rec + 68), 3);
    float f;
    memcpy(&f, (uint32_t[]){fmt_le_get32(rec + 72)}, 4);
    ck_assert(f == 1.125f);
    memcpy(&f, (uint32_t[]){fmt_le_get32(rec + 76)}, 4);
    ck_assert(f == -9.5f);
    for (int i = 80; i < 96; i++)
        ck_assert_uint_eq(rec[i], 0);
    decodes_to_itself(&p, rec, FMT_AUG_RECORD_SIZE_AFFINE);
    ck_assert_int_eq(fmt_aug_decode(rec, FMT_AUG_RECORD_SIZE, &q), FMT_ECORRUPT);
    uint8_t keep[FMT_AUG_RECORD_MAX];
    memcpy(keep, rec, sizeof keep);
    /* each of these breaks one field: all refused */
    struct { int at; uint32_t v; } bad3[] = {
        {40, 8 | 1},                    /* AUG3 without the affine flag */
        {72, 0},                        /* scale 0 */
        {72, 0xbf800000u},              /* scale -1 */
        {72, 0x41300000u},              /* scale 11 */
        {72, 0x7fc00000u},              /* scale NaN */
        {76, 0x42b40000u},              /* shear 90 */
        {80, 0x7f800000u},              /* shear y infinite */
        {64, 0x7fffffffu},              /* translation far beyond any side */
        {84, 1},                        /* the reserved tail */
        {92, 0x01000000u},
    };
    for (size_t i = 0; i < sizeof bad3 / sizeof *bad3; i++) {
        memcpy(rec, keep, sizeof keep);
        fmt_le_put32(rec + bad3[i].at, bad3[i].v);
        ck_assert_msg(fmt_aug_decode(rec, FMT_AUG_RECORD_SIZE_AFFINE, &q) == FMT_ECORRUPT,
                      "case %zu accepted", i);
    }
    /* the affine flag in a version-2 record */
    p.affine = 0;
    p.angle = 5.0f;
    fmt_aug_encode(&p, rec);
    ck_assert_mem_eq(rec, "AUG2", 4);
    rec[40] |= 16;
    ck_assert_int_eq(fmt_aug_decode(rec, FMT_AUG_RECORD_SIZE, &q), FMT_ECORRUPT);
}
END_TEST

int main(void)
{
    Suite *s = TU_SUITE("augment", "core", 60, parse_spec, draw_ranges_and_distribution,
                        draws_are_keyed, affine_draws, draw_fallback, flip_mirrors_exactly,
                        colour_arithmetic, apply_rejects_bad_params, record_round_trip);
    return tu_run(s);
}
