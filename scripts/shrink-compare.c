/* shrink-compare.c - the measuring half of scripts/shrink-compare.sh: JPEG shrink-on-load at any
 * k/8 DCT scale against the power-of-two scales shardc uses and against full-size decoding, for
 * one FMT_FIT_CROP output size. Not part of the Makefile build.
 *
 *   shrink-compare W H RUNS OUTDIR FILE...
 *
 * For each file and each method it does what shardc build does (the fmt_geom_min_decode hint, a
 * decode, fmt_geom_plan_decoded, fmt_resize) with the decoder picking its scale as
 *   full     no hint: full-size decode (what a W x H crop gets today when no power-of-two
 *            scale covers the hint)
 *   pow2     the smallest of 1/8, 1/4, 1/2 that covers the hint (shardc's shrink-on-load)
 *   eighths  the smallest k/8, k = 1..8, that covers the hint (libjpeg-turbo's
 *            scale_num/scale_denom; formats/jpeg.c does not offer it)
 * writes the W x H result to OUTDIR/METHOD/INDEX.ppm (and a reduced decode itself to
 * OUTDIR/METHOD/INDEX-dec.ppm) and prints one line per file and method:
 *   METHOD INDEX DEC_W DEC_H BOX_X BOX_Y BOX_W BOX_H DECODE_MS DECODE_RESIZE_MS
 *   DECODE_RESIZE_NEWCTX_MS
 * where BOX is the plan's source rectangle on the decoded image (fmt_geom_plan_decoded) and
 * the times are each the median of RUNS repetitions on one thread, the file already in memory. DECODE_RESIZE_MS
 * reuses one resizer (its scaler context cached, as when consecutive images share a size);
 * DECODE_RESIZE_NEWCTX_MS creates a fresh resizer each time (as when every image has its own
 * size). The methods take turns per file, so drift on a shared machine hits them alike.
 *
 * All three methods use the same small libjpeg decoder below (libjpeg's defaults, RGB out, the
 * calls formats/jpeg.c makes), so they differ only in the scale; for full and pow2 its pixels are
 * checked to equal fmt_image_decode's, so the figures are those of shardc's own decoder. */
#include <stdio.h> /* before jpeglib.h */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <jpeglib.h>

#include "geometry.h"
#include "image.h"

enum { M_FULL, M_POW2, M_EIGHTHS, M_COUNT };
static const char *const method_names[M_COUNT] = {"full", "pow2", "eighths"};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int write_ppm(const char *path, const fmt_image *img)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    fprintf(f, "P%c\n%u %u\n255\n", img->channels == 3 ? '6' : '5', img->width, img->height);
    size_t n = (size_t)img->width * img->height * img->channels;
    int bad = fwrite(img->pixels, 1, n, f) != n;
    return fclose(f) != 0 || bad ? -1 : 0;
}

/* Decode buf at the scale method m picks for a min_w x min_h hint, into 3-channel dec. libjpeg's
 * default error manager prints and exits on a fatal error: good enough for a measuring tool. */
static int jpeg_decode_scaled(int m, const uint8_t *buf, size_t len, uint32_t min_w,
                              uint32_t min_h, fmt_image *dec)
{
    struct jpeg_decompress_struct cinfo;
    struct jpeg_error_mgr jerr;
    cinfo.err = jpeg_std_error(&jerr);
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, buf, (unsigned long)len);
    jpeg_read_header(&cinfo, TRUE);
    cinfo.out_color_space = JCS_RGB;
    /* numerators over 8: 1/8, 1/4, 1/2 for pow2, every k/8 for eighths, as jpeg.c picks */
    static const unsigned pow2[] = {1, 2, 4, 8}, all[] = {1, 2, 3, 4, 5, 6, 7, 8};
    const unsigned *nums = m == M_POW2 ? pow2 : all;
    size_t n = m == M_FULL ? 0 : m == M_POW2 ? 4 : 8;
    cinfo.scale_num = 1;
    cinfo.scale_denom = 1;
    for (size_t i = 0; i < n && min_w && min_h; i++) {
        cinfo.scale_num = nums[i];
        cinfo.scale_denom = 8;
        jpeg_calc_output_dimensions(&cinfo);
        if (cinfo.output_width >= min_w && cinfo.output_height >= min_h)
            break;
    }
    jpeg_start_decompress(&cinfo);
    int rc = fmt_image_alloc(dec, cinfo.output_width, cinfo.output_height, 3);
    while (rc == 0 && cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW row = dec->pixels + (size_t)cinfo.output_scanline * dec->width * 3;
        jpeg_read_scanlines(&cinfo, &row, 1);
    }
    if (rc == 0)
        jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    return rc;
}

/* Decode with method m, and resize with rz unless rz is NULL; dst gets the result (the decoded
 * image when rz is NULL). Returns 0 or an error code. */
static int run_once(int m, const uint8_t *buf, size_t len, const fmt_geom *g,
                    const fmt_image_info *info, fmt_resizer *rz, fmt_image *dst)
{
    uint32_t min_w = 0, min_h = 0;
    fmt_geom_min_decode(g, info->width, info->height, &min_w, &min_h);
    fmt_image dec = {0};
    int rc = jpeg_decode_scaled(m, buf, len, min_w, min_h, &dec);
    if (rc || !rz) {
        *dst = dec;
        return rc;
    }
    fmt_geom_plan p;
    fmt_msg msg = {{0}};
    rc = fmt_geom_plan_decoded(g, info->width, info->height, dec.width, dec.height, &p);
    if (rc == 0)
        rc = fmt_resize(rz, &dec, &p, dst, &msg);
    fmt_image_free(&dec);
    return rc;
}

/* The bench decoder's full and pow2 decodes must be shardc's: same size, same bytes. */
static int same_as_shardc(int m, const uint8_t *buf, size_t len, const fmt_geom *g,
                          const fmt_image_info *info, const fmt_image *dec)
{
    fmt_decode_opts o = {.channels = 3};
    if (m == M_POW2)
        fmt_geom_min_decode(g, info->width, info->height, &o.min_width, &o.min_height);
    fmt_image ref;
    if (fmt_image_decode(buf, len, &o, &ref, NULL) != 0)
        return 0;
    int same = ref.width == dec->width && ref.height == dec->height &&
               memcmp(ref.pixels, dec->pixels, (size_t)ref.width * ref.height * 3) == 0;
    fmt_image_free(&ref);
    return same;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: shrink-compare W H RUNS OUTDIR FILE...\n");
        return 2;
    }
    fmt_geom g = {.mode = FMT_GEOM_SIZE, .fit = FMT_FIT_CROP};
    g.width = (uint32_t)atoi(argv[1]);
    g.height = (uint32_t)atoi(argv[2]);
    int runs = atoi(argv[3]);
    const char *outdir = argv[4];
    if (g.width == 0 || g.height == 0 || runs < 1 || runs > 1000) {
        fprintf(stderr, "shrink-compare: bad size or run count\n");
        return 2;
    }
    char path[4096];
    for (int m = 0; m < M_COUNT; m++) {
        snprintf(path, sizeof path, "%s/%s", outdir, method_names[m]);
        mkdir(path, 0777);
    }
    double *t_dec = malloc(sizeof(double) * (size_t)runs);
    double *t_dr = malloc(sizeof(double) * (size_t)runs);
    double *t_new = malloc(sizeof(double) * (size_t)runs);
    fmt_resizer *rz = NULL;
    if (!t_dec || !t_dr || !t_new || fmt_resizer_create(&rz) != 0)
        return 1;
    for (int i = 5; i < argc; i++) {
        uint8_t *buf;
        size_t len;
        fmt_image_info info;
        if (fmt_read_file(argv[i], (size_t)1 << 30, &buf, &len) != 0 ||
            fmt_image_probe(buf, len, &info, NULL) != 0) {
            fprintf(stderr, "shrink-compare: cannot read %s\n", argv[i]);
            return 1;
        }
        for (int m = 0; m < M_COUNT; m++) {
            fmt_image img, dec;
            /* the result, the decoded size, and a warm-up of the resizer's context */
            if (run_once(m, buf, len, &g, &info, NULL, &dec) != 0 ||
                run_once(m, buf, len, &g, &info, rz, &img) != 0) {
                fprintf(stderr, "shrink-compare: cannot process %s\n", argv[i]);
                return 1;
            }
            if (m != M_EIGHTHS && !same_as_shardc(m, buf, len, &g, &info, &dec)) {
                fprintf(stderr, "shrink-compare: %s: %s decode differs from fmt_image_decode\n",
                        argv[i], method_names[m]);
                return 1;
            }
            snprintf(path, sizeof path, "%s/%s/%d.ppm", outdir, method_names[m], i - 5);
            int bad = write_ppm(path, &img) != 0;
            if (!bad && dec.width < info.width) {
                snprintf(path, sizeof path, "%s/%s/%d-dec.ppm", outdir, method_names[m], i - 5);
                bad = write_ppm(path, &dec) != 0;
            }
            if (bad) {
                fprintf(stderr, "shrink-compare: cannot write %s\n", path);
                return 1;
            }
            fmt_geom_plan p;
            fmt_geom_plan_decoded(&g, info.width, info.height, dec.width, dec.height, &p);
            fmt_image_free(&img);
            for (int r = 0; r < runs; r++) {
                fmt_image t;
                double t0 = now_ms();
                run_once(m, buf, len, &g, &info, NULL, &t);
                double t1 = now_ms();
                fmt_image_free(&t);
                run_once(m, buf, len, &g, &info, rz, &t);
                double t2 = now_ms();
                fmt_image_free(&t);
                fmt_resizer *fresh = NULL;
                t = (fmt_image){0};
                double t3 = now_ms();
                if (fmt_resizer_create(&fresh) == 0)
                    run_once(m, buf, len, &g, &info, fresh, &t);
                fmt_resizer_free(fresh);
                double t4 = now_ms();
                fmt_image_free(&t);
                t_dec[r] = t1 - t0;
                t_dr[r] = t2 - t1;
                t_new[r] = t4 - t3;
            }
            printf("%s %d %u %u %u %u %u %u %.4f %.4f %.4f\n", method_names[m], i - 5, dec.width,
                   dec.height, p.src_x, p.src_y, p.src_w, p.src_h, median(t_dec, runs),
                   median(t_dr, runs), median(t_new, runs));
            fmt_image_free(&dec);
        }
        free(buf);
    }
    fmt_resizer_free(rz);
    free(t_dec);
    free(t_dr);
    free(t_new);
    return 0;
}
