/* test_affine.c - the reader's RandomRotation, RandomAffine, TrivialAugmentWide and RandAugment
 * against torchvision 0.14 and Pillow 9.4, byte for byte:
 *   - F.affine and F.rotate (Pillow's Image.transform: its scale, 16.16 fixed-point and double
 *     nearest paths and its bilinear filter; Image.rotate's quarter and half turns) and every
 *     op of autoaugment._apply_op, on images of many sizes, odd ones included, RGB and L;
 *   - the draws: RandomRotation and RandomAffine.get_params, TrivialAugmentWide's and
 *     RandAugment's op, magnitude and sign draws (their tables included) fed the reader's words;
 *   - whole samples from the reader (RandomResizedCrop + flip + rotation + affine + policy +
 *     ColorJitter) equal torchvision's pipeline on the stored image with the reported
 *     parameters; the same batches at 1 and 4 threads; EINVAL for bad options.
 * The reference runs in a python3 with torch, torchvision, numpy and Pillow (its script is
 * tests/ref/affine_check.py); without one those checks are skipped with a note. */
#include "affine.h"
#include "autoaugment.h"
#include "shardread.h"
#include "simd.h"
#include "transform.h"

#define AUGTEST_NAME "test_affine"
#define AUGTEST_SEED 0x2545f4914f6cdd1dULL
#define AUGTEST_SCRIPT "affine_check.py"
#include "augtest.h"

/* ---- fixtures and the recorded batches: tests/augtest.h ---- */

/* A test image: smooth gradients with noise, a few flat runs and saturated values (kind 0..3),
 * so that histograms, edges and interpolation all have something to do. */
static void fill_image(uint8_t *p, uint32_t w, uint32_t h, uint32_t c, int kind)
{
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            for (uint32_t k = 0; k < c; k++) {
                int v = (int)((x * (37 + 11 * k) + y * (23 + 7 * k)) % 256);
                int noise = (int)(rnd() % 41) - 20;
                switch (kind) {
                case 0:
                    v += noise;
                    break;
                case 1:
                    v = (int)(rnd() % 256);
                    break;
                case 2:
                    v = 60 + (v + noise) / 4;       /* a narrow range: autocontrast stretches */
                    break;
                default:
                    v = (x / 3 + y / 2) % 2 ? 250 : (int)(rnd() % 7);
                    break;
                }
                p[((size_t)y * w + x) * c + k] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
}

/* ---- the functional ops against Pillow ---- */

typedef struct {
    char kind;                  /* 'a' affine, 'r' rotate, 'o' an _apply_op op */
    double v[8];                /* affine: angle tx ty scale shx shy cx cy (cx NAN: default) */
    int op;
    int interp;                 /* 0 nearest, 1 bilinear */
    int fill;                   /* 0 black, 1 a colour */
} op_case;

static const uint8_t g_fills[2][4] = {{0, 0, 0, 0}, {10, 200, 30, 0}};

static void run_case(const op_case *k, const uint8_t *src, size_t sstride, uint8_t *dst,
                     uint32_t w, uint32_t h, uint32_t c, uint8_t *scratch)
{
    shr_filter f = k->interp ? SHR_FILTER_BILINEAR : SHR_FILTER_NEAREST;
    const uint8_t *fill = g_fills[k->fill];
    if (k->kind == 'a') {
        double center[2] = {k->v[6], k->v[7]};
        shr_affine_apply(src, sstride, dst, (size_t)w * c, w, h, c, k->v[0], k->v[1], k->v[2],
                         k->v[3], k->v[4], k->v[5], isnan(k->v[6]) ? NULL : center, f, fill);
    } else if (k->kind == 'r') {
        shr_affine_rotate(src, sstride, dst, (size_t)w * c, w, h, c, k->v[0], f, fill);
    } else {
        for (uint32_t y = 0; y < h; y++)
            memcpy(dst + (size_t)y * w * c, src + y * sstride, (size_t)w * c);
        shr_aa_apply_op(k->op, k->v[0], f, fill, dst, w, h, c, (size_t)w * c, scratch);
    }
}

static void put_case(FILE *f, const op_case *k)
{
    const uint8_t *fill = g_fills[k->fill];
    if (k->kind == 'a') {
        fprintf(f, "affine %a %a %a %a %a %a %d %u %u %u", k->v[0], k->v[1], k->v[2], k->v[3],
                k->v[4], k->v[5], k->interp, fill[0], fill[1], fill[2]);
        if (isnan(k->v[6]))
            fprintf(f, " none\n");
        else
            fprintf(f, " %a %a\n", k->v[6], k->v[7]);
    } else if (k->kind == 'r') {
        fprintf(f, "rotate %a %d %u %u %u\n", k->v[0], k->interp, fill[0], fill[1], fill[2]);
    } else {
        fprintf(f, "aa %d %a %d %u %u %u\n", k->op, k->v[0], k->interp, fill[0], fill[1],
                fill[2]);
    }
}

START_TEST(test_ops_pillow)
{
    char dir[1200];
    make_dir(dir, sizeof dir, "ops");
    static const double affines[][8] = {
        {0, 0, 0, 1, 0, 0, NAN, 0},             /* the identity: Pillow's scale path */
        {0, 3, -2, 1, 0, 0, NAN, 0},            /* a translation: the scale path */
        {0, 0, 0, 1.3, 0, 0, NAN, 0},
        {0, -1, 4, 0.7, 0, 0, NAN, 0},
        {30.5, 2, 1, 0.9, 10, -5, NAN, 0},      /* the fixed-point path */
        {-45, 0, 0, 1, 0, 0, NAN, 0},
        {90, 0, 0, 1, 0, 0, NAN, 0},
        {12.300000190734863, -4, 5, 1.7000000476837158, -20, 15, NAN, 0},
        {0, 0, 0, 1, 35, 0, 0, 0},              /* ShearX's centre (0, 0) */
        {0, 0, 0, 1, 0, -26.5, 0, 0},
        {170, 1, 1, 0.5, 0, 40, NAN, 0},
        {5, 0, 0, 0.002, 0, 0, NAN, 0},         /* corners past 32768: the double path */
        {-3, 1, 0, 0.004, 2, 0, 3.5, 7},
    };
    static const double angles[] = {-30.5, 0, 90, 180, 270, -90, 45, 123.4000015258789, 375,
                                    0.001, -180, 720.25};
    const uint32_t sizes[][2] = {{1, 1}, {2, 3}, {7, 5}, {17, 13}, {33, 33}, {64, 48},
                                 {97, 65}, {224, 224}};
    op_case *cases = NULL;
    size_t ncases = 0;
#define ADD(...)                                                                           \
    do {                                                                                   \
        cases = realloc(cases, (ncases + 1) * sizeof *cases);                              \
        cases[ncases++] = (op_case){__VA_ARGS__};                                          \
    } while (0)
    for (int in = 0; in < 2; in++)
        for (int fl = 0; fl < 2; fl++) {
            for (size_t a = 0; a < sizeof affines / sizeof affines[0]; a++) {
                op_case k = {.kind = 'a', .interp = in, .fill = fl};
                memcpy(k.v, affines[a], sizeof k.v);
                cases = realloc(cases, (ncases + 1) * sizeof *cases);
                cases[ncases++] = k;
            }
            for (size_t a = 0; a < sizeof angles / sizeof angles[0]; a++)
                ADD(.kind = 'r', .v = {angles[a]}, .interp = in, .fill = fl);
        }
    /* every op of both policies, magnitudes from both tables, both signs */
    const uint32_t bins[] = {0, 1, 9, 17, 30};
    for (int op = 0; op < SHR_AA_OPS; op++)
        for (int rand = 0; rand < 2; rand++)
            for (size_t b = 0; b < sizeof bins / sizeof bins[0]; b++) {
                double m = shr_aa_magnitude(op, rand, 31, bins[b], 64, 48);
                int in = (int)((b + rand) % 2);
                ADD(.kind = 'o', .op = op, .v = {m}, .interp = in, .fill = (int)(b % 2));
                if (op >= SHR_AA_SHEAR_X && op <= SHR_AA_SHARPNESS && m != 0)
                    ADD(.kind = 'o', .op = op, .v = {-m}, .interp = 1 - in, .fill = 0);
                if (op == SHR_AA_IDENTITY || op >= SHR_AA_AUTOCONTRAST)
                    break;
            }
#undef ADD
    FILE *list = open_list(dir, "ops.tsv");
    int n = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (uint32_t c = 1; c <= 3; c += 2) {
            uint32_t w = sizes[si][0], h = sizes[si][1];
            size_t bytes = (size_t)w * h * c;
            uint8_t *img = malloc(bytes);
            fill_image(img, w, h, c, (int)(si % 4));
            char in[1400];
            snprintf(in, sizeof in, "%s/in-%zu-%u.raw", dir, si, c);
            write_file(in, img, bytes);
            free(img);
            for (size_t k = 0; k < ncases; k++) {
                /* the largest images take every other case: the runtime stays short */
                if (w * h > 10000 && (k + c) % 2)
                    continue;
                fprintf(list, "%u %u %u %s %s/want-%zu-%u-%zu.raw ", w, h, c, in, dir, si, c, k);
                put_case(list, &cases[k]);
                n++;
            }
        }
    ck_assert_int_eq(fclose(list), 0);
    if (!run_check("ops", dir)) {
        free(cases);
        return;
    }
    int bad = 0;
    char first[512] = "";
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (uint32_t c = 1; c <= 3; c += 2) {
            uint32_t w = sizes[si][0], h = sizes[si][1];
            size_t bytes = (size_t)w * h * c;
            char in[1400], out[1400];
            snprintf(in, sizeof in, "%s/in-%zu-%u.raw", dir, si, c);
            uint8_t *img = read_file(in, bytes);
            /* through a source stride wider than the row, to catch stride mistakes */
            size_t stride = (size_t)w * c + 5;
            uint8_t *src = calloc(stride * h, 1), *got = malloc(bytes), *scratch = malloc(bytes);
            for (uint32_t y = 0; y < h; y++)
                memcpy(src + y * stride, img + (size_t)y * w * c, (size_t)w * c);
            for (size_t k = 0; k < ncases; k++) {
                if (w * h > 10000 && (k + c) % 2)
                    continue;
                snprintf(out, sizeof out, "%s/want-%zu-%u-%zu.raw", dir, si, c, k);
                uint8_t *want = read_file(out, bytes);
                /* the plain and the vector paths (simd.h) */
                for (int vec = 0; vec < 2; vec++) {
                    fmt_simd_set(vec);
                    run_case(&cases[k], src, stride, got, w, h, c, scratch);
                    if (memcmp(got, want, bytes) != 0 && !bad++) {
                        size_t b = 0;
                        while (got[b] == want[b])
                            b++;
                        snprintf(first, sizeof first, "case %zu (%c op %d v0 %g) on %ux%ux%u, "
                                 "%s path: byte %zu is %u, torchvision %u", k, cases[k].kind,
                                 cases[k].op, cases[k].v[0], w, h, c, vec ? "vector" : "plain",
                                 b, got[b], want[b]);
                    }
                }
                fmt_simd_set(1);
                free(want);
            }
            free(img);
            free(src);
            free(got);
            free(scratch);
        }
    free(cases);
    ck_assert_msg(bad == 0, "%d of %d images differ from torchvision's; first: %s", bad, n, first);
    fprintf(stderr, "test_affine: %d op images equal torchvision's\n", n);
}
END_TEST

/* torch.linspace in float32, as the policies' tables use it */
START_TEST(test_linspace)
{
    /* the ends and the middle are exact; the table is increasing */
    for (uint32_t steps = 2; steps < 70; steps++) {
        ck_assert_float_eq(shr_aa_linspace(0.0f, 0.99f, steps, 0), 0.0f);
        ck_assert_float_eq(shr_aa_linspace(0.0f, 0.99f, steps, steps - 1), 0.99f);
        for (uint32_t i = 1; i < steps; i++)
            ck_assert(shr_aa_linspace(0.0f, 135.0f, steps, i) >
                      shr_aa_linspace(0.0f, 135.0f, steps, i - 1));
    }
}
END_TEST

/* ---- the draws ---- */

/* The options a draw case starts from: its seed and its output size. */
static void draw_options(shr_options *o, uint64_t seed, const uint32_t dim[2])
{
    shr_options_init(o);
    o->seed = seed;
    o->width = dim[0];
    o->height = dim[1];
}

START_TEST(test_draws_torchvision)
{
    char dir[1200];
    FILE *f = open_case(dir, sizeof dir, "draws", "draws.tsv");
    const uint32_t dims[][2] = {{32, 24}, {224, 224}, {7, 5}, {33, 17}};
    const double rot[][2] = {{-30, 30}, {0, 0}, {-180, 180}, {10, 20.5}};
    for (size_t k = 0; k < 4; k++) {
        shr_options o;
        shr_options_init(&o);
        o.seed = 700 + k;
        o.width = 32;
        o.height = 24;
        o.rotation = 1;
        memcpy(o.rotation_degrees, rot[k], sizeof o.rotation_degrees);
        for (uint64_t i = 0; i < 300; i++) {
            shr_params p;
            ck_assert_int_eq(shr_draw_params(&o, i % 2, i, 50, 40, &p), 0);
            ck_assert_uint_eq(p.rotate, 1);
            fprintf(f, "rotate %.17g %.17g %a", rot[k][0], rot[k][1], (double)p.rotate_angle);
            put_words(f, o.seed, i % 2, i, SHR_SALT_ROTATE, 1);
        }
    }
    const double aff[][10] = {
        {-10, 10, 0, 0, 1, 1, 0, 0, 0, 0},
        {-30, 30, 0.1, 0.2, 0.8, 1.2, -10, 10, 0, 0},
        {0, 0, 0.5, 0, 1, 1, -5, 5, -7, 7},
        {-180, 180, 0.3, 0.3, 0.5, 1.5, 0, 0, -3, 3},
        {5, 5, 1, 1, 2, 2, 20, 20, 0, 0},
    };
    for (size_t k = 0; k < 5; k++)
        for (size_t d = 0; d < 4; d++) {
            shr_options o;
            draw_options(&o, 800 + k, dims[d]);
            o.affine = 1;
            memcpy(o.affine_degrees, aff[k], 2 * sizeof(double));
            memcpy(o.affine_translate, aff[k] + 2, 2 * sizeof(double));
            memcpy(o.affine_scale, aff[k] + 4, 2 * sizeof(double));
            memcpy(o.affine_shear, aff[k] + 6, 4 * sizeof(double));
            for (uint64_t i = 0; i < 150; i++) {
                shr_params p;
                ck_assert_int_eq(shr_draw_params(&o, 1, i, 300, 200, &p), 0);
                fprintf(f, "affine");
                for (int j = 0; j < 10; j++)
                    fprintf(f, " %.17g", aff[k][j]);
                fprintf(f, " %u %u %a %d %d %a %a %a", o.width, o.height,
                        (double)p.affine_angle, p.affine_tx, p.affine_ty,
                        (double)p.affine_scale, (double)p.affine_shear_x,
                        (double)p.affine_shear_y);
                put_words(f, o.seed, 1, i, SHR_SALT_AFFINE, 3);
            }
        }
    const uint32_t pol[][4] = {
        /* policy, bins, num_ops, magnitude */
        {SHR_AUTO_AUGMENT_TRIVIAL_WIDE, 31, 0, 0},
        {SHR_AUTO_AUGMENT_TRIVIAL_WIDE, 7, 0, 0},
        {SHR_AUTO_AUGMENT_RAND, 31, 2, 9},
        {SHR_AUTO_AUGMENT_RAND, 31, 1, 0},
        {SHR_AUTO_AUGMENT_RAND, 31, 4, 30},
        {SHR_AUTO_AUGMENT_RAND, 11, 3, 5},
    };
    uint32_t ops_seen[SHR_AA_OPS] = {0};
    for (size_t k = 0; k < 6; k++)
        for (size_t d = 0; d < 4; d++) {
            shr_options o;
            draw_options(&o, 900 + k, dims[d]);
            o.auto_augment = (shr_auto_augment)pol[k][0];
            o.aa_bins = pol[k][1];
            if (pol[k][2]) {
                o.aa_num_ops = pol[k][2];
                o.aa_magnitude = pol[k][3];
            }
            for (uint64_t i = 0; i < 200; i++) {
                shr_params p;
                ck_assert_int_eq(shr_draw_params(&o, 2, i, 300, 200, &p), 0);
                fprintf(f, "%s %u %u %u %u %u %u", pol[k][0] == SHR_AUTO_AUGMENT_RAND ? "ra" : "ta",
                        o.aa_bins, o.aa_num_ops, o.aa_magnitude, o.width, o.height, p.aa_ops);
                for (uint32_t j = 0; j < p.aa_ops; j++) {
                    fprintf(f, " %u %a", p.aa_op[j], (double)p.aa_magnitude[j]);
                    ops_seen[p.aa_op[j]]++;
                }
                put_words(f, o.seed, 2, i, SHR_SALT_AUTO_AUGMENT, 4);
            }
        }
    ck_assert_int_eq(fclose(f), 0);
    for (int op = 0; op < SHR_AA_OPS; op++)
        ck_assert_msg(ops_seen[op] > 100, "op %d drawn %u times", op, ops_seen[op]);
    run_check("draws", dir);
}
END_TEST

/* ---- whole samples through the reader ---- */

typedef struct {
    const char *dir;
    shr_options o;
} reader_case;

static int reader_cases(reader_case *c)
{
    int n = 0;
    /* RandomRotation, bilinear, a fill colour */
    c[n] = (reader_case){g_rgb, reader_options(11, 48, 36)};
    c[n].o.rotation = 1;
    c[n].o.rotation_degrees[0] = -30;
    c[n].o.rotation_degrees[1] = 30;
    c[n].o.aug_interpolation = SHR_FILTER_BILINEAR;
    memcpy(c[n].o.aug_fill, g_fills[1], 4);
    n++;
    /* RandomAffine, nearest, with ColorJitter after it */
    c[n] = (reader_case){g_rgb, reader_options(12, 33, 17)};
    c[n].o.affine = 1;
    c[n].o.affine_degrees[0] = -20;
    c[n].o.affine_degrees[1] = 20;
    c[n].o.affine_translate[0] = 0.1;
    c[n].o.affine_translate[1] = 0.2;
    c[n].o.affine_scale[0] = 0.8;
    c[n].o.affine_scale[1] = 1.2;
    c[n].o.affine_shear[0] = -10;
    c[n].o.affine_shear[1] = 10;
    c[n].o.jitter_brightness[0] = c[n].o.jitter_saturation[0] = 0.6;
    c[n].o.jitter_brightness[1] = c[n].o.jitter_saturation[1] = 1.4;
    c[n].o.jitter_hue[0] = -0.1;
    c[n].o.jitter_hue[1] = 0.1;
    n++;
    /* TrivialAugmentWide, nearest (torchvision's recipe) */
    c[n] = (reader_case){g_rgb, reader_options(13, 40, 40)};
    c[n].o.auto_augment = SHR_AUTO_AUGMENT_TRIVIAL_WIDE;
    n++;
    /* RandAugment on L images, bilinear, after rotation and affine */
    c[n] = (reader_case){g_gray, reader_options(14, 31, 29)};
    c[n].o.auto_augment = SHR_AUTO_AUGMENT_RAND;
    c[n].o.aug_interpolation = SHR_FILTER_BILINEAR;
    c[n].o.rotation = 1;
    c[n].o.rotation_degrees[0] = -10;
    c[n].o.rotation_degrees[1] = 10;
    c[n].o.affine = 1;
    c[n].o.affine_scale[0] = 0.9;
    c[n].o.affine_scale[1] = 1.1;
    n++;
    /* RandomRotation then RandomAffine on RGB (the warps ping-pong), bilinear, then a hue jitter */
    c[n] = (reader_case){g_rgb, reader_options(17, 45, 37)};
    c[n].o.rotation = 1;
    c[n].o.rotation_degrees[0] = -45;
    c[n].o.rotation_degrees[1] = 45;
    c[n].o.affine = 1;
    c[n].o.affine_degrees[0] = -15;
    c[n].o.affine_degrees[1] = 15;
    c[n].o.affine_shear[0] = -8;
    c[n].o.affine_shear[1] = 8;
    c[n].o.aug_interpolation = SHR_FILTER_BILINEAR;
    c[n].o.jitter_hue[0] = -0.2;
    c[n].o.jitter_hue[1] = 0.2;
    memcpy(c[n].o.aug_fill, g_fills[1], 4);
    n++;
    /* TrivialAugmentWide at 224, bilinear, a fill colour */
    c[n] = (reader_case){g_rgb, reader_options(15, 224, 224)};
    c[n].o.auto_augment = SHR_AUTO_AUGMENT_TRIVIAL_WIDE;
    c[n].o.aug_interpolation = SHR_FILTER_BILINEAR;
    memcpy(c[n].o.aug_fill, g_fills[1], 4);
    n++;
    /* RandAugment(2, 9) with a float output: the uint8 ops come before the conversion */
    c[n] = (reader_case){g_rgb, reader_options(16, 64, 48)};
    c[n].o.auto_augment = SHR_AUTO_AUGMENT_RAND;
    n++;
    return n;
}

START_TEST(test_reader_pixels)
{
    char dir[1200];
    FILE *list = open_case(dir, sizeof dir, "pixels", "samples.tsv");
    reader_case cases[8];
    int ncases = reader_cases(cases);
    shr_dataset *ds[2];
    ck_assert_int_eq(shr_dataset_open(&ds[0], g_rgb, SHR_ACCESS_MMAP, tu_fresh()), 0);
    ck_assert_int_eq(shr_dataset_open(&ds[1], g_gray, SHR_ACCESS_MMAP, tu_fresh()), 0);
    rec *all[8];
    size_t nall[8], one[8];
    int n = 0, geo_flip = 0, aa_seen[SHR_AA_OPS] = {0};
    for (int k = 0; k < ncases; k++) {
        const shr_options *o = &cases[k].o;
        all[k] = record(cases[k].dir, o, 1, &nall[k], &one[k]);
        shr_dataset *d = ds[cases[k].dir == g_gray];
        for (size_t i = 0; i < nall[k]; i++)
            for (uint32_t j = 0; j < all[k][i].n; j++) {
                shr_sample st;
                ck_assert_int_eq(
                    shr_dataset_sample(d, (uint64_t)all[k][i].idx[j], &st, tu_fresh()), 0);
                uint8_t *px = malloc(st.bytes);
                ck_assert_int_eq(shr_dataset_read(d, (uint64_t)all[k][i].idx[j], px, st.bytes,
                                                  NULL, tu_fresh()), 0);
                char stored[1400], out[1400];
                snprintf(stored, sizeof stored, "%s/stored-%d-%zu-%u.raw", dir, k, i, j);
                snprintf(out, sizeof out, "%s/want-%d-%zu-%u.raw", dir, k, i, j);
                write_file(stored, px, st.bytes);
                free(px);
                const shr_params *p = &all[k][i].params[j];
                const uint8_t *fill = o->aug_fill;
                fprintf(list, "%u %u %u %d %u %u %u %u %u %u %u %d %u %u %u %u %a %u %a %d %d "
                        "%a %a %a %u", st.width, st.height, st.channels, (int)o->filter,
                        o->width, o->height, p->x, p->y, p->w, p->h, p->flip,
                        o->aug_interpolation == SHR_FILTER_BILINEAR, fill[0], fill[1], fill[2],
                        p->rotate, (double)p->rotate_angle, p->affine, (double)p->affine_angle,
                        p->affine_tx, p->affine_ty, (double)p->affine_scale,
                        (double)p->affine_shear_x, (double)p->affine_shear_y, p->aa_ops);
                for (uint32_t a = 0; a < p->aa_ops; a++) {
                    fprintf(list, " %u %a", p->aa_op[a], (double)p->aa_magnitude[a]);
                    aa_seen[p->aa_op[a]]++;
                    geo_flip += p->flip && shr_aa_op_geometric(p->aa_op[a]);
                }
                fprintf(list, " %u %u %u %u %u %a %a %a %a %u %s %s\n", p->jitter,
                        p->jitter_order[0], p->jitter_order[1], p->jitter_order[2],
                        p->jitter_order[3], (double)p->brightness, (double)p->contrast,
                        (double)p->saturation, (double)p->hue, p->gray, stored, out);
                geo_flip += p->flip && (p->rotate || p->affine);
                n++;
            }
    }
    ck_assert_int_eq(fclose(list), 0);
    ck_assert_msg(geo_flip > 0, "some mirrored sample should have a geometric op");
    int kinds = 0;
    for (int op = 0; op < SHR_AA_OPS; op++)
        kinds += aa_seen[op] > 0;
    ck_assert_msg(kinds >= 10, "only %d of the 14 ops ran on the reader's samples", kinds);
    if (run_check("reader", dir)) {
        int bad = 0;
        char first[512] = "";
        for (int k = 0; k < ncases; k++)
            for (size_t i = 0; i < nall[k]; i++)
                for (uint32_t j = 0; j < all[k][i].n; j++) {
                    char out[1400];
                    snprintf(out, sizeof out, "%s/want-%d-%zu-%u.raw", dir, k, i, j);
                    uint8_t *want = read_file(out, one[k]);
                    const uint8_t *got = all[k][i].data + one[k] * j;
                    if (memcmp(got, want, one[k]) != 0 && !bad++) {
                        const shr_params *p = &all[k][i].params[j];
                        snprintf(first, sizeof first, "case %d, batch %zu, sample %u (index %"
                                 PRId64 ", flip %u rotate %u affine %u aa %u op0 %u)", k, i, j,
                                 all[k][i].idx[j], p->flip, p->rotate, p->affine, p->aa_ops,
                                 p->aa_op[0]);
                    }
                    free(want);
                }
        ck_assert_msg(bad == 0, "%d of %d reader samples differ from torchvision's; first: %s",
                      bad, n, first);
        fprintf(stderr, "test_affine: %d reader samples equal torchvision's\n", n);
    }
    for (int k = 0; k < ncases; k++)
        free_recs(all[k], nall[k]);
    shr_dataset_close(ds[0]);
    shr_dataset_close(ds[1]);
}
END_TEST

/* the same batches at 1 and 4 threads; float32 NCHW the uint8 sample converted */
START_TEST(test_threads_and_float)
{
    reader_case cases[8];
    int ncases = reader_cases(cases);
    for (int k = 0; k < ncases; k++) {
        shr_options o = cases[k].o;
        o.threads = 1;
        size_t n1, n4, one1, one4, nf, onef;
        rec *a = record(cases[k].dir, &o, 1, &n1, &one1);
        o.threads = 4;
        rec *b = record(cases[k].dir, &o, 1, &n4, &one4);
        o.dtype = SHR_DTYPE_F32;
        o.layout = SHR_LAYOUT_NCHW;
        rec *fl = record(cases[k].dir, &o, 1, &nf, &onef);
        ck_assert_uint_eq(n1, n4);
        ck_assert_uint_eq(n1, nf);
        uint32_t C = cases[k].dir == g_gray ? 1 : 3, W = o.width, H = o.height;
        int bad = 0;
        for (size_t i = 0; i < n1; i++) {
            ck_assert_uint_eq(a[i].n, b[i].n);
            bad += memcmp(a[i].data, b[i].data, one1 * a[i].n) != 0;
            bad += memcmp(a[i].params, b[i].params, sizeof(shr_params) * a[i].n) != 0;
            for (uint32_t j = 0; j < a[i].n; j++) {
                const uint8_t *u = a[i].data + one1 * j;
                const float *f = (const float *)(fl[i].data + onef * j);
                for (uint32_t c = 0; c < C; c++)
                    for (size_t e = 0; e < (size_t)W * H; e++)
                        bad += f[c * (size_t)W * H + e] != (float)u[e * C + c];
            }
        }
        ck_assert_msg(bad == 0, "case %d: %d differences between 1 and 4 threads or uint8 and "
                      "float32", k, bad);
        free_recs(a, n1);
        free_recs(b, n4);
        free_recs(fl, nf);
    }
}
END_TEST

START_TEST(test_bad_options)
{
    shr_options o;
    int n = 0;
#define EXPECT_EINVAL(stmt)                                                                \
    do {                                                                                   \
        shr_options_init(&o);                                                              \
        o.width = 32;                                                                      \
        o.height = 24;                                                                     \
        stmt;                                                                              \
        shr_params p;                                                                      \
        ck_assert_msg(shr_draw_params(&o, 0, 0, 50, 40, &p) == SHR_EINVAL, "%s", #stmt);   \
        shr_reader *r = NULL;                                                              \
        ck_assert_int_eq(shr_open(&r, g_rgb, &o, tu_fresh()), SHR_EINVAL);                   \
        ck_assert_ptr_null(r);                                                             \
        n++;                                                                               \
    } while (0)
    EXPECT_EINVAL((o.rotation = 1, o.rotation_degrees[0] = 10, o.rotation_degrees[1] = -10));
    EXPECT_EINVAL((o.rotation = 1, o.rotation_degrees[1] = NAN));
    EXPECT_EINVAL((o.affine = 1, o.affine_scale[0] = 0));
    EXPECT_EINVAL((o.affine = 1, o.affine_translate[0] = 1.5));
    EXPECT_EINVAL((o.affine = 1, o.affine_shear[2] = 5, o.affine_shear[3] = -5));
    EXPECT_EINVAL((o.rotation = 1, o.aug_interpolation = SHR_FILTER_BICUBIC));
    EXPECT_EINVAL((o.auto_augment = (shr_auto_augment)7));
    EXPECT_EINVAL((o.auto_augment = SHR_AUTO_AUGMENT_RAND, o.aa_num_ops = 5));
    EXPECT_EINVAL((o.auto_augment = SHR_AUTO_AUGMENT_RAND, o.aa_num_ops = 0));
    EXPECT_EINVAL((o.auto_augment = SHR_AUTO_AUGMENT_RAND, o.aa_magnitude = 31));
    EXPECT_EINVAL((o.auto_augment = SHR_AUTO_AUGMENT_TRIVIAL_WIDE, o.aa_bins = 1));
#undef EXPECT_EINVAL
    ck_assert_int_eq(n, 11);
    /* the defaults: all off, RandAugment's num_ops 2, magnitude 9, 31 bins, nearest, black */
    shr_options_init(&o);
    ck_assert_int_eq(o.rotation, 0);
    ck_assert_int_eq(o.affine, 0);
    ck_assert_int_eq(o.auto_augment, SHR_AUTO_AUGMENT_NONE);
    ck_assert_uint_eq(o.aa_num_ops, 2);
    ck_assert_uint_eq(o.aa_magnitude, 9);
    ck_assert_uint_eq(o.aa_bins, 31);
    ck_assert_int_eq(o.aug_interpolation, SHR_FILTER_NEAREST);
    ck_assert(o.affine_scale[0] == 1 && o.affine_scale[1] == 1);
}
END_TEST

static Suite *affine_suite(void)
{
    return TU_SUITE("affine", "core", 300, test_ops_pillow, test_linspace, test_draws_torchvision,
                    test_reader_pixels, test_threads_and_float, test_bad_options);
}

int main(void)
{
    int rc = build_fixtures();
    return tu_run_fixtures(rc, affine_suite());
}
