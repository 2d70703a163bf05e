/* test_mksample.c - the sample-data generator: plans, determinism, files on disk that decode (or,
 * for the broken ones, fail with the right error), list files, and classes a simple model can
 * tell apart. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image.h"
#include "mksample.h"
#include "testutil.h"

/* ---- helpers ------------------------------------------------------------------------------- */

static mks_opts small_opts(void)
{
    mks_opts o;
    mks_opts_init(&o);
    o.classes = 4;
    o.per_class = 12;
    o.min_side = 32;
    o.max_side = 80;
    return o;
}

/* ---- plans and classes --------------------------------------------------------------------- */

START_TEST(test_defaults_and_errors)
{
    mks_opts o;
    mks_opts_init(&o);
    ck_assert_uint_eq(o.classes, 4);
    ck_assert_uint_eq(o.per_class, 24);
    ck_assert_uint_eq(o.seed, 1);
    ck_assert_uint_eq(o.min_side, 48);
    ck_assert_uint_eq(o.max_side, 160);
    ck_assert_int_eq(o.broken, 1);
    ck_assert_int_eq(o.photo, 0);
    ck_assert_ptr_null(o.list_path);
    ck_assert_ptr_null(mks_opts_error(&o));

    mks_opts bad = o;
    bad.classes = 0;
    ck_assert_ptr_nonnull(mks_opts_error(&bad));
    bad.classes = 17;
    ck_assert_ptr_nonnull(mks_opts_error(&bad));
    bad = o;
    bad.per_class = 0;
    ck_assert_ptr_nonnull(mks_opts_error(&bad));
    bad = o;
    bad.min_side = 100;
    bad.max_side = 99;
    ck_assert_ptr_nonnull(mks_opts_error(&bad));
    bad = o;
    bad.min_side = 4;
    ck_assert_ptr_nonnull(mks_opts_error(&bad));
    bad.photo = 1; /* photo sizes are fixed: the side options do not matter */
    ck_assert_ptr_null(mks_opts_error(&bad));

    mks_report r;
    bad = o;
    bad.classes = 0;
    ck_assert_int_eq(mks_generate("/nonexistent/never", &bad, &r), FMT_EINVAL);
    ck_assert_str_eq(r.msg.text, mks_opts_error(&bad));

    mks_item it;
    ck_assert_int_eq(mks_plan(&o, 4, 0, &it), FMT_EINVAL);
    ck_assert_int_eq(mks_plan(&o, 0, 24, &it), FMT_EINVAL);

    fmt_image img;
    ck_assert_int_eq(mks_render(0, 0, 1, 16, 16, 2, &img), FMT_EINVAL);
    ck_assert_ptr_null(img.pixels);
    ck_assert_int_eq(mks_render(16, 0, 1, 16, 16, 3, &img), FMT_EINVAL);
    ck_assert_int_eq(mks_render(0, 0, 1, 0, 16, 3, &img), FMT_EINVAL);
}
END_TEST

START_TEST(test_class_names_and_labels)
{
    /* labels are ranks in strcmp order, as shardc assigns them to class folders */
    ck_assert_str_eq(mks_class_name(0), "circle");
    ck_assert_str_eq(mks_class_name(1), "square");
    ck_assert_str_eq(mks_class_name(2), "stripes");
    ck_assert_str_eq(mks_class_name(3), "checker");
    ck_assert_ptr_null(mks_class_name(MKS_MAX_CLASSES));
    ck_assert_int_eq(mks_class_label(3, 4), 0); /* checker */
    ck_assert_int_eq(mks_class_label(0, 4), 1); /* circle */
    ck_assert_int_eq(mks_class_label(1, 4), 2); /* square */
    ck_assert_int_eq(mks_class_label(2, 4), 3); /* stripes */
    ck_assert_int_eq(mks_class_label(4, 4), -1);
    ck_assert_int_eq(mks_class_label(0, 17), -1);

    for (unsigned n = 1; n <= MKS_MAX_CLASSES; n++) {
        int seen[MKS_MAX_CLASSES] = { 0 };
        for (unsigned c = 0; c < n; c++) {
            int l = mks_class_label(c, n);
            ck_assert_int_ge(l, 0);
            ck_assert_int_lt(l, (int)n);
            seen[l]++;
            for (unsigned d = 0; d < n; d++)
                if (d != c)
                    ck_assert_int_eq(strcmp(mks_class_name(c), mks_class_name(d)) < 0,
                                     l < mks_class_label(d, n));
        }
        for (unsigned l = 0; l < n; l++)
            ck_assert_int_eq(seen[l], 1);
    }
    /* names are usable folder names */
    for (unsigned c = 0; c < MKS_MAX_CLASSES; c++)
        ck_assert_uint_eq(strspn(mks_class_name(c), "abcdefghijklmnopqrstuvwxyz"),
                          strlen(mks_class_name(c)));
}
END_TEST

START_TEST(test_plan_mix)
{
    mks_opts o;
    mks_opts_init(&o);
    o.classes = 16;
    o.per_class = 40;
    unsigned n = 0, jpeg = 0, png = 0, bmp = 0, gray_jpeg = 0, cmyk = 0, prog = 0, restart = 0;
    unsigned s444 = 0, s422 = 0, s420 = 0, landscape = 0, portrait = 0, gray_other = 0;
    unsigned same_size = 0;
    for (unsigned c = 0; c < o.classes; c++) {
        for (unsigned i = 0; i < o.per_class; i++) {
            mks_item it, it2;
            ck_assert_int_eq(mks_plan(&o, c, i, &it), 0);
            n++;
            ck_assert_uint_ge(it.width, o.min_side);
            ck_assert_uint_le(it.width, o.max_side);
            ck_assert_uint_ge(it.height, o.min_side);
            ck_assert_uint_le(it.height, o.max_side);
            landscape += it.width > it.height;
            portrait += it.width < it.height;
            ck_assert(it.channels == 1 || it.channels == 3);
            char want[32];
            const char *ext = it.type == FMT_IMG_JPEG ? "jpg" : it.type == FMT_IMG_PNG ? "png" : "bmp";
            snprintf(want, sizeof want, "%05u.%s", i, ext);
            ck_assert_str_eq(it.name, want);
            if (it.type == FMT_IMG_JPEG) {
                jpeg++;
                ck_assert_int_ge(it.jpeg.quality, 50);
                ck_assert_int_le(it.jpeg.quality, 100);
                gray_jpeg += it.channels == 1;
                cmyk += it.jpeg.cmyk != 0;
                prog += it.jpeg.progressive != 0;
                restart += it.jpeg.restart_rows != 0;
                if (it.channels == 3) {
                    s444 += it.jpeg.subsampling == 444;
                    s422 += it.jpeg.subsampling == 422;
                    s420 += it.jpeg.subsampling == 420;
                }
            } else {
                png += it.type == FMT_IMG_PNG;
                bmp += it.type == FMT_IMG_BMP;
                ck_assert(it.type == FMT_IMG_PNG || it.type == FMT_IMG_BMP);
                if (it.type == FMT_IMG_PNG)
                    ck_assert_int_eq(it.png_level, 6);
                gray_other += it.channels == 1;
            }
            /* the kind of file does not depend on the seed, the size does */
            mks_opts o2 = o;
            o2.seed = 2;
            ck_assert_int_eq(mks_plan(&o2, c, i, &it2), 0);
            ck_assert_str_eq(it.name, it2.name);
            ck_assert_int_eq(it.jpeg.subsampling, it2.jpeg.subsampling);
            same_size += it.width == it2.width && it.height == it2.height;
        }
    }
    /* 60 / 25 / 15 percent exactly, as 40 images per class cover the 20-slot mix twice */
    ck_assert_uint_eq(jpeg, n * 60 / 100);
    ck_assert_uint_eq(png, n * 25 / 100);
    ck_assert_uint_eq(bmp, n * 15 / 100);
    ck_assert_uint_eq(cmyk, 1);
    ck_assert_uint_gt(gray_jpeg, 0);
    ck_assert_uint_lt(gray_jpeg, jpeg / 4);
    ck_assert_uint_gt(gray_other, 0);
    ck_assert_uint_gt(prog, 0);
    ck_assert_uint_gt(restart, 0);
    ck_assert_uint_gt(s444, 0);
    ck_assert_uint_gt(s422, 0);
    ck_assert_uint_gt(s420, s444);
    ck_assert_uint_gt(landscape, n / 3);
    ck_assert_uint_gt(portrait, n / 3);
    ck_assert_uint_lt(same_size, n / 10);

    /* the default 4 x 24 dataset still has every JPEG variant */
    mks_opts_init(&o);
    unsigned kinds = 0;
    for (unsigned c = 0; c < o.classes; c++)
        for (unsigned i = 0; i < o.per_class; i++) {
            mks_item it;
            ck_assert_int_eq(mks_plan(&o, c, i, &it), 0);
            if (it.type != FMT_IMG_JPEG)
                continue;
            kinds |= it.channels == 1 ? 1u : 0u;
            kinds |= it.jpeg.cmyk ? 2u : 0u;
            kinds |= it.jpeg.progressive ? 4u : 0u;
            kinds |= it.jpeg.restart_rows ? 8u : 0u;
            kinds |= it.channels == 3 && it.jpeg.subsampling == 444 ? 16u : 0u;
            kinds |= it.channels == 3 && it.jpeg.subsampling == 422 ? 32u : 0u;
        }
    ck_assert_uint_eq(kinds, 63);

    /* photo plans: every image its own size in the photo range, quality 90, 4:2:0, RGB JPEG */
    mks_opts_init(&o);
    o.photo = 1;
    o.per_class = 30;
    unsigned ph_portrait = 0, distinct = 0, np = 0;
    uint32_t seen[4 * 30][2];
    for (unsigned c = 0; c < o.classes; c++)
        for (unsigned i = 0; i < o.per_class; i++) {
            mks_item it;
            ck_assert_int_eq(mks_plan(&o, c, i, &it), 0);
            ck_assert_int_eq(it.type, FMT_IMG_JPEG);
            ck_assert_uint_eq(it.channels, 3);
            ck_assert_int_eq(it.jpeg.quality, 90);
            ck_assert_int_eq(it.jpeg.subsampling, 420);
            ck_assert_int_eq(it.jpeg.cmyk, 0);
            ck_assert_int_eq(it.jpeg.progressive, 0);
            uint32_t lng = it.width > it.height ? it.width : it.height;
            uint32_t shrt = it.width > it.height ? it.height : it.width;
            ck_assert(lng >= MKS_PHOTO_MIN_LONG && lng <= MKS_PHOTO_MAX_LONG);
            ck_assert(shrt * 3 >= lng * 2 - 3 && shrt <= lng);  /* aspect 1..1.5 */
            ph_portrait += it.height > it.width;
            int dup = 0;
            for (unsigned k = 0; k < np; k++)
                dup |= seen[k][0] == it.width && seen[k][1] == it.height;
            distinct += !dup;
            seen[np][0] = it.width;
            seen[np][1] = it.height;
            np++;
        }
    ck_assert_uint_ge(distinct, np * 9 / 10);
    ck_assert_uint_gt(ph_portrait, np / 5);
    ck_assert_uint_lt(ph_portrait, np / 2);
}
END_TEST

START_TEST(test_render)
{
    fmt_image a, b, g;
    ck_assert_int_eq(mks_render(5, 3, 7, 61, 47, 3, &a), 0);
    ck_assert_uint_eq(a.width, 61);
    ck_assert_uint_eq(a.height, 47);
    ck_assert_uint_eq(a.channels, 3);
    ck_assert_int_eq(mks_render(5, 3, 7, 61, 47, 3, &b), 0);
    ck_assert_mem_eq(a.pixels, b.pixels, 61 * 47 * 3);
    fmt_image_free(&b);
    /* another index, seed or class draws another picture */
    ck_assert_int_eq(mks_render(5, 4, 7, 61, 47, 3, &b), 0);
    ck_assert(memcmp(a.pixels, b.pixels, 61 * 47 * 3) != 0);
    fmt_image_free(&b);
    ck_assert_int_eq(mks_render(5, 3, 8, 61, 47, 3, &b), 0);
    ck_assert(memcmp(a.pixels, b.pixels, 61 * 47 * 3) != 0);
    fmt_image_free(&b);
    /* gray is the ITU-R 601 luma of the same RGB picture */
    ck_assert_int_eq(mks_render(5, 3, 7, 61, 47, 1, &g), 0);
    ck_assert_uint_eq(g.channels, 1);
    for (size_t i = 0; i < 61 * 47; i++) {
        const uint8_t *p = a.pixels + 3 * i;
        unsigned y = (19595u * p[0] + 38470u * p[1] + 7471u * p[2] + 32768u) >> 16;
        ck_assert_uint_eq(g.pixels[i], y);
    }
    fmt_image_free(&g);
    /* the picture is not flat: a shape over a background, with noise */
    unsigned lo = 255, hi = 0;
    for (size_t i = 0; i < 61 * 47 * 3; i++) {
        lo = a.pixels[i] < lo ? a.pixels[i] : lo;
        hi = a.pixels[i] > hi ? a.pixels[i] : hi;
    }
    ck_assert_uint_gt(hi - lo, 60);
    fmt_image_free(&a);

    ck_assert_int_eq(mks_render_photo(2, 0, 1, 500, 375, &a), 0);
    ck_assert_int_eq(mks_render_photo(2, 0, 1, 500, 375, &b), 0);
    ck_assert_uint_eq(a.channels, 3);
    ck_assert_mem_eq(a.pixels, b.pixels, 500 * 375 * 3);
    fmt_image_free(&a);
    fmt_image_free(&b);
}
END_TEST

/* ---- generated datasets -------------------------------------------------------------------- */

/* Each of the first `classes` class folders of the generated dataset root holds `entries`
 * entries. */
static void assert_class_entries(const char *root, unsigned classes, unsigned entries)
{
    for (unsigned c = 0; c < classes; c++) {
        char dir[1100];
        snprintf(dir, sizeof dir, "%s/%s", root, mks_class_name(c));
        ck_assert_uint_eq(tu_dir_entries(dir, NULL, NULL), entries);
    }
}

/* The file mks_plan(o, c, i) names in its class folder dir: its plan into it, its path into path,
 * its bytes returned (len of them). */
static uint8_t *slurp_planned(const mks_opts *o, unsigned c, unsigned i, const char *dir,
                              mks_item *it, char *path, size_t n, size_t *len)
{
    ck_assert_int_eq(mks_plan(o, c, i, it), 0);
    snprintf(path, n, "%s/%s", dir, it->name);
    return tu_slurp(path, len);
}

/* Compare every file of dir a with the file of the same relative path under dir b (a class
 * folder, in_class, whose entry count must be b's too, or the dataset's folder of them); returns
 * the number of files compared. */
static unsigned compare_dir(const char *a, const char *b, int in_class, int *all_equal)
{
    unsigned n = 0;
    DIR *d = opendir(a);
    ck_assert_ptr_nonnull(d);
    if (in_class)
        ck_assert_uint_eq(tu_dir_entries(a, NULL, NULL), tu_dir_entries(b, NULL, NULL));
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char pa[2048], pb[2048];
        snprintf(pa, sizeof pa, "%s/%s", a, e->d_name);
        snprintf(pb, sizeof pb, "%s/%s", b, e->d_name);
        if (!in_class) {
            n += compare_dir(pa, pb, 1, all_equal);
            continue;
        }
        size_t la, lb;
        uint8_t *ba = tu_slurp(pa, &la), *bb = tu_slurp(pb, &lb);
        if (la != lb || memcmp(ba, bb, la) != 0)
            *all_equal = 0;
        free(ba);
        free(bb);
        n++;
    }
    closedir(d);
    return n;
}

/* compare_dir over two generated datasets: their class folders one level deep. */
static unsigned compare_trees(const char *a, const char *b, int *all_equal)
{
    *all_equal = 1;
    return compare_dir(a, b, 0, all_equal);
}

START_TEST(test_deterministic)
{
    const char *root = g_dir;
    char a[1024], b[1024], c[1024], la[1024], lb[1024];
    snprintf(a, sizeof a, "%s/a", root);
    snprintf(b, sizeof b, "%s/b/nested", root); /* parents are created too */
    snprintf(c, sizeof c, "%s/c", root);
    snprintf(la, sizeof la, "%s/a.txt", root);
    snprintf(lb, sizeof lb, "%s/b.txt", root);
    mks_opts o = small_opts();
    mks_report ra, rb, rc;
    o.list_path = la;
    ck_assert_int_eq(mks_generate(a, &o, &ra), 0);
    o.list_path = lb;
    ck_assert_int_eq(mks_generate(b, &o, &rb), 0);
    ck_assert_uint_eq(ra.images, 48);
    ck_assert_uint_eq(ra.broken, MKS_BROKEN_FILES);
    ck_assert_uint_eq(ra.bytes, rb.bytes);
    int equal;
    ck_assert_uint_eq(compare_trees(a, b, &equal), 48 + MKS_BROKEN_FILES);
    ck_assert_msg(equal, "two runs with the same options differ");
    tu_assert_same_file(la, lb);

    /* another seed: same names, other bytes */
    o.list_path = NULL;
    o.seed = 99;
    ck_assert_int_eq(mks_generate(c, &o, &rc), 0);
    ck_assert_uint_eq(compare_trees(a, c, &equal), 48 + MKS_BROKEN_FILES);
    ck_assert(!equal);

}
END_TEST

/* Mean absolute difference between two images of the same geometry. */
static double mean_abs_diff(const fmt_image *x, const fmt_image *y)
{
    size_t n = (size_t)x->width * x->height * x->channels;
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += abs((int)x->pixels[i] - (int)y->pixels[i]);
    return s / (double)n;
}

typedef struct {
    const char *name;
    int rc;
} broken_case;

static const broken_case broken_cases[MKS_BROKEN_FILES] = {
    { "broken-zero-bytes.jpg", FMT_EEMPTY },
    { "broken-text-not-image.jpg", FMT_EFORMAT },
    { "broken-truncated-half.jpg", FMT_ETRUNC },
    { "broken-corrupt-scan.jpg", FMT_ECORRUPT },
    { "broken-truncated-half.png", FMT_ETRUNC },
    { "broken-bad-crc.png", FMT_ECORRUPT },
    { "broken-truncated-half.bmp", FMT_ETRUNC },
    { "broken-header-60000x60000.bmp", FMT_ETOOBIG },
    { "broken-header-60000x60000.png", FMT_ETOOBIG },
};

START_TEST(test_files_on_disk)
{
    const char *root = g_dir;
    char out[1024], list[1024];
    snprintf(out, sizeof out, "%s/data", root);
    snprintf(list, sizeof list, "%s/list.txt", root);
    mks_opts o;
    mks_opts_init(&o); /* the CLI's defaults: 4 classes x 24, 48..160 px, broken files */
    o.list_path = list;
    mks_report r;
    ck_assert_int_eq(mks_generate(out, &o, &r), 0);
    ck_assert_str_eq(r.msg.text, "");
    ck_assert_uint_eq(r.images, 96);
    ck_assert_uint_eq(r.classes, 4);
    ck_assert_uint_eq(r.broken, MKS_BROKEN_FILES);
    ck_assert_uint_eq(r.jpeg + r.png + r.bmp, 96);
    ck_assert_uint_ge(r.jpeg, 96 * 55 / 100);
    ck_assert_uint_le(r.jpeg, 96 * 65 / 100);
    ck_assert_uint_ge(r.png, 96 * 20 / 100);
    ck_assert_uint_ge(r.bmp, 96 * 10 / 100);
    ck_assert_uint_eq(tu_dir_entries(out, NULL, NULL), 4);

    unsigned jpeg = 0, png = 0, bmp = 0;
    uint64_t bytes = 0;
    for (unsigned c = 0; c < 4; c++) {
        char dir[1100];
        snprintf(dir, sizeof dir, "%s/%s", out, mks_class_name(c));
        unsigned nbroken = 0;
        for (unsigned k = 0; k < MKS_BROKEN_FILES; k++)
            nbroken += k % 4 == c;
        /* exactly the planned files and this class's broken files, nothing else */
        ck_assert_uint_eq(tu_dir_entries(dir, NULL, NULL), 24 + nbroken);
        for (unsigned i = 0; i < 24; i++) {
            mks_item it;
            char path[1200];
            size_t len;
            uint8_t *buf = slurp_planned(&o, c, i, dir, &it, path, sizeof path, &len);
            bytes += len;
            ck_assert_int_eq(fmt_image_sniff(buf, len), it.type);
            jpeg += it.type == FMT_IMG_JPEG;
            png += it.type == FMT_IMG_PNG;
            bmp += it.type == FMT_IMG_BMP;

            fmt_image_info info;
            ck_assert_int_eq(fmt_image_probe(buf, len, &info, NULL), 0);
            ck_assert_uint_eq(info.width, it.width);
            ck_assert_uint_eq(info.height, it.height);
            if (it.type == FMT_IMG_BMP && it.channels == 1)
                ck_assert(info.channels == 1 || info.channels == 3); /* a gray palette */
            else
                ck_assert_uint_eq(info.channels, (it.jpeg.cmyk ? 4 : it.channels));

            fmt_decode_opts dopts = { .channels = it.channels };
            fmt_image img;
            fmt_msg msg = { { 0 } };
            int rc = fmt_image_decode(buf, len, &dopts, &img, &msg);
            ck_assert_msg(rc == 0, "%s: %s", path, fmt_reason(&msg, rc));
            ck_assert_uint_eq(img.width, it.width);
            ck_assert_uint_eq(img.height, it.height);
            ck_assert_uint_eq(img.channels, it.channels);

            fmt_image ref;
            ck_assert_int_eq(mks_render(c, i, o.seed, it.width, it.height, it.channels, &ref), 0);
            if (it.type == FMT_IMG_JPEG) {
                /* lossy, but the same picture: small images at quality 60..95 stay close */
                double mad = mean_abs_diff(&img, &ref);
                ck_assert_msg(mad < 8.0, "%s: mean abs diff %.2f from the rendered image", path, mad);
            } else {
                /* PNG and BMP are lossless: the file holds exactly the rendered pixels */
                ck_assert_mem_eq(img.pixels, ref.pixels, (size_t)it.width * it.height * it.channels);
            }
            fmt_image_free(&ref);
            fmt_image_free(&img);
            free(buf);
        }
    }
    ck_assert_uint_eq(jpeg, r.jpeg);
    ck_assert_uint_eq(png, r.png);
    ck_assert_uint_eq(bmp, r.bmp);

    /* every broken file is where it should be and fails the way its name says */
    for (unsigned k = 0; k < MKS_BROKEN_FILES; k++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s/%s", out, mks_class_name(k % 4), broken_cases[k].name);
        size_t len;
        uint8_t *buf = tu_slurp(path, &len);
        bytes += len;
        if (k == 0)
            ck_assert_uint_eq(len, 0);
        else
            ck_assert_uint_gt(len, 0);
        fmt_decode_opts dopts = { .channels = 3 };
        fmt_image img;
        fmt_msg msg = { { 0 } };
        int rc = fmt_image_decode(buf, len, &dopts, &img, &msg);
        ck_assert_msg(rc == broken_cases[k].rc, "%s: got %d (%s), want %d (%s)", path, rc,
                      fmt_reason(&msg, rc), broken_cases[k].rc, fmt_strerror(broken_cases[k].rc));
        ck_assert_ptr_null(img.pixels);
        free(buf);
    }
    ck_assert_uint_eq(bytes, r.bytes);

    /* the list: every valid file once, labels by sorted class name, paths relative to out */
    FILE *f = fopen(list, "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    unsigned lines = 0, per_label[4] = { 0 };
    int last_label = -1;
    while (fgets(line, sizeof line, f)) {
        char rel[256];
        int label;
        char extra;
        ck_assert_msg(sscanf(line, "%255s %d %c", rel, &label, &extra) == 2, "list line '%s'", line);
        ck_assert_int_eq(line[strlen(line) - 1], '\n');
        ck_assert_int_ge(label, last_label); /* grouped by label */
        last_label = label;
        char *slash = strchr(rel, '/');
        ck_assert_ptr_nonnull(slash);
        *slash = '\0';
        int cls = -1;
        for (unsigned c = 0; c < 4; c++)
            if (strcmp(rel, mks_class_name(c)) == 0)
                cls = (int)c;
        ck_assert_int_ge(cls, 0);
        ck_assert_int_eq(label, mks_class_label((unsigned)cls, 4));
        ck_assert_msg(strncmp(slash + 1, "broken", 6) != 0, "broken file listed: %s", slash + 1);
        unsigned idx = (unsigned)atoi(slash + 1);
        mks_item it;
        ck_assert_int_eq(mks_plan(&o, (unsigned)cls, idx, &it), 0);
        ck_assert_str_eq(slash + 1, it.name);
        ck_assert_uint_eq(idx, per_label[label]); /* in index order, none skipped or repeated */
        per_label[label]++;
        char full[1400];
        *slash = '/';
        snprintf(full, sizeof full, "%s/%s", out, rel);
        ck_assert_msg(tu_is_file(full), "listed file %s missing", full);
        lines++;
    }
    fclose(f);
    ck_assert_uint_eq(lines, 96);
    for (unsigned l = 0; l < 4; l++)
        ck_assert_uint_eq(per_label[l], 24);

}
END_TEST

START_TEST(test_no_broken_and_photo)
{
    const char *root = g_dir;
    char out[1024], photo[1024];
    snprintf(out, sizeof out, "%s/plain", root);
    snprintf(photo, sizeof photo, "%s/photo", root);
    mks_opts o = small_opts();
    o.broken = 0;
    o.classes = 2;
    o.per_class = 3;
    mks_report r;
    ck_assert_int_eq(mks_generate(out, &o, &r), 0);
    ck_assert_uint_eq(r.images, 6);
    ck_assert_uint_eq(r.broken, 0);
    assert_class_entries(out, 2, 3);

    mks_opts_init(&o);
    o.photo = 1;
    o.classes = 2;
    o.per_class = 4; /* broken stays on: photo mode never writes broken files */
    ck_assert_int_eq(mks_generate(photo, &o, &r), 0);
    ck_assert_uint_eq(r.images, 8);
    ck_assert_uint_eq(r.jpeg, 8);
    ck_assert_uint_eq(r.broken, 0);
    for (unsigned c = 0; c < 2; c++) {
        char dir[1100];
        snprintf(dir, sizeof dir, "%s/%s", photo, mks_class_name(c));
        ck_assert_uint_eq(tu_dir_entries(dir, NULL, NULL), 4);
        for (unsigned i = 0; i < 4; i++) {
            mks_item it;
            char path[1200];
            size_t len;
            uint8_t *buf = slurp_planned(&o, c, i, dir, &it, path, sizeof path, &len);
            /* compressed about as well as a real photo of that size, not like flat art */
            ck_assert_msg(len > 25000 && len < 200000, "%s: %zu bytes", path, len);
            fmt_decode_opts dopts = { .channels = 3 };
            fmt_image img, ref;
            ck_assert_int_eq(fmt_image_decode(buf, len, &dopts, &img, NULL), 0);
            ck_assert_uint_eq(img.width, it.width);
            ck_assert_uint_eq(img.height, it.height);
            ck_assert_int_eq(mks_render_photo(c, i, o.seed, it.width, it.height, &ref), 0);
            double mad = mean_abs_diff(&img, &ref);
            ck_assert_msg(mad < 6.0, "%s: mean abs diff %.2f", path, mad);
            fmt_image_free(&img);
            fmt_image_free(&ref);
            free(buf);
        }
    }
}
END_TEST

START_TEST(test_write_errors)
{
    const char *root = g_dir;
    char file[1024], under[1100], out[1024], list[1100], want[1200];
    snprintf(file, sizeof file, "%s/a-file", root);
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    mks_opts o = small_opts();
    o.classes = 1;
    o.per_class = 1;
    o.broken = 0;
    mks_report r;
    /* OUT below a regular file */
    snprintf(under, sizeof under, "%s/sub", file);
    ck_assert_int_eq(mks_generate(under, &o, &r), ENOTDIR);
    ck_assert_ptr_nonnull(strstr(r.msg.text, "a-file"));
    ck_assert_ptr_nonnull(strstr(r.msg.text, ": not a directory"));
    /* OUT is a regular file */
    ck_assert_int_eq(mks_generate(file, &o, &r), ENOTDIR);
    snprintf(want, sizeof want, "cannot write %s: not a directory", file);
    ck_assert_str_eq(r.msg.text, want);
    /* list file in a missing folder: images are written, the list fails and is named */
    snprintf(out, sizeof out, "%s/data", root);
    snprintf(list, sizeof list, "%s/missing/list.txt", root);
    o.list_path = list;
    ck_assert_int_eq(mks_generate(out, &o, &r), ENOENT);
    snprintf(want, sizeof want, "cannot write %s: no such file or directory", list);
    ck_assert_str_eq(r.msg.text, want);
    ck_assert_uint_eq(r.images, 1);
}
END_TEST

/* ---- can a simple model learn the classes? ------------------------------------------------- */

/* Box-average an image to 8x8 RGB (192 features, 0..1). */
static void features_8x8(const fmt_image *img, double *feat)
{
    for (unsigned gy = 0; gy < 8; gy++)
        for (unsigned gx = 0; gx < 8; gx++) {
            uint32_t y0 = gy * img->height / 8, y1 = (gy + 1) * img->height / 8;
            uint32_t x0 = gx * img->width / 8, x1 = (gx + 1) * img->width / 8;
            double s[3] = { 0, 0, 0 };
            for (uint32_t y = y0; y < y1; y++)
                for (uint32_t x = x0; x < x1; x++)
                    for (int c = 0; c < 3; c++)
                        s[c] += img->pixels[((size_t)y * img->width + x) * 3 + (size_t)c];
            double n = (double)(y1 - y0) * (x1 - x0) * 255.0;
            for (int c = 0; c < 3; c++)
                feat[(gy * 8 + gx) * 3 + (unsigned)c] = s[c] / n;
        }
}

/* Nearest-centroid classifier on 8x8 thumbnails of images of random sizes: trained on the even
 * indices, evaluated on the odd ones. With `centered`, each thumbnail's mean brightness is
 * subtracted first (what a linear model learns to ignore by itself). Returns the accuracy. */
static double nearest_centroid_accuracy(unsigned classes, unsigned per_class, int photo, int centered)
{
    enum { F = 192 };
    double *feat = calloc((size_t)classes * per_class * F, sizeof *feat);
    double *cent = calloc((size_t)classes * F, sizeof *cent);
    ck_assert(feat && cent);
    mks_opts o;
    mks_opts_init(&o);
    o.classes = classes;
    o.per_class = per_class;
    o.photo = photo;
    o.seed = 12345;
    for (unsigned c = 0; c < classes; c++)
        for (unsigned i = 0; i < per_class; i++) {
            mks_item it;
            fmt_image img;
            ck_assert_int_eq(mks_plan(&o, c, i, &it), 0);
            int rc = photo ? mks_render_photo(c, i, o.seed, it.width, it.height, &img)
                           : mks_render(c, i, o.seed, it.width, it.height, 3, &img);
            ck_assert_int_eq(rc, 0);
            double *f = feat + ((size_t)c * per_class + i) * F;
            features_8x8(&img, f);
            fmt_image_free(&img);
            if (centered) {
                double mean = 0;
                for (unsigned k = 0; k < F; k++)
                    mean += f[k] / F;
                for (unsigned k = 0; k < F; k++)
                    f[k] -= mean;
            }
            if (i % 2 == 0)
                for (unsigned k = 0; k < F; k++)
                    cent[(size_t)c * F + k] += f[k] / ((per_class + 1) / 2);
        }
    unsigned right = 0, total = 0;
    for (unsigned c = 0; c < classes; c++)
        for (unsigned i = 1; i < per_class; i += 2) {
            const double *f = feat + ((size_t)c * per_class + i) * F;
            double best = INFINITY;
            unsigned guess = 0;
            for (unsigned d = 0; d < classes; d++) {
                double dist = 0;
                for (unsigned k = 0; k < F; k++) {
                    double t = f[k] - cent[(size_t)d * F + k];
                    dist += t * t;
                }
                if (dist < best) {
                    best = dist;
                    guess = d;
                }
            }
            right += guess == c;
            total++;
        }
    free(feat);
    free(cent);
    return (double)right / total;
}

START_TEST(test_classes_separable)
{
    /* the default four classes, raw thumbnails */
    double acc = nearest_centroid_accuracy(4, 80, 0, 0);
    ck_assert_msg(acc >= 0.9, "4 classes: nearest-centroid accuracy %.3f", acc);
    /* all sixteen, with each thumbnail's mean brightness removed: neighbouring hue bands are
     * close and the background brightness varies widely, which raw-pixel centroids cannot
     * discount (a trained linear model can) */
    acc = nearest_centroid_accuracy(16, 40, 0, 1);
    ck_assert_msg(acc >= 0.9, "16 classes: nearest-centroid accuracy %.3f", acc);
    /* photo mode: the class content over busy backgrounds */
    acc = nearest_centroid_accuracy(4, 20, 1, 0);
    ck_assert_msg(acc >= 0.9, "4 photo classes: nearest-centroid accuracy %.3f", acc);
}
END_TEST

int main(void)
{
    return tu_run(TU_TEMP_SUITE("mksample", "core", 120, test_defaults_and_errors,
                                test_class_names_and_labels, test_plan_mix, test_render,
                                test_deterministic, test_files_on_disk, test_no_broken_and_photo,
                                test_write_errors, test_classes_separable));
}
