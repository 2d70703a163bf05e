/* resize-compare.c - the resampler alone, timed per image: the measuring half of
 * scripts/resize-compare.sh (which builds this, times Pillow's resize on the same decoded
 * images and checks the bytes). Not part of the Makefile build.
 *
 *   resize-compare OUTDIR REPS SIZE FILE...
 *
 * Each FILE is decoded to RGB with shardc's decoder, then resized as torchvision's Resize(SIZE)
 * would (short side SIZE, long side int(SIZE * long / short), bilinear) REPS times per code
 * path on one thread. Writes OUTDIR/N.rgb (the result) and prints per file:
 *   N W H NW NH first_ms simd_ms plain_ms
 * first_ms is the first resize on a fresh scratch without a cache (coefficient tables built),
 * simd_ms and plain_ms the medians of the warm repetitions on the best vector path and on the
 * plain C path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "image.h"
#include "resample.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double timed(fmt_rs_scratch *s, const fmt_rs_view *sv, const fmt_rs_view *dv, int reps,
                    double *t)
{
    for (int r = 0; r < reps; r++) {
        double t0 = now_ms();
        if (fmt_resample(s, sv, NULL, FMT_FILTER_BILINEAR, dv, NULL) != 0)
            return -1;
        t[r] = now_ms() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_dbl);
    return t[reps / 2];
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: resize-compare OUTDIR REPS SIZE FILE...\n");
        return 2;
    }
    const char *outdir = argv[1];
    int reps = atoi(argv[2]);
    uint32_t size = (uint32_t)atoi(argv[3]);
    if (reps < 1 || size < 1)
        return 2;
    double *t = malloc(sizeof *t * (size_t)reps);
    fmt_rs_scratch *simd, *plain;
    if (!t || fmt_rs_scratch_create(NULL, &simd) || fmt_rs_scratch_create(NULL, &plain) ||
        fmt_rs_scratch_set_path(plain, FMT_RS_PATH_PLAIN))
        return 1;
    for (int i = 4; i < argc; i++) {
        uint8_t *buf = NULL;
        size_t len = 0;
        fmt_image img = {0};
        fmt_decode_opts o = {.channels = 3};
        if (fmt_read_file(argv[i], (size_t)1 << 30, &buf, &len) ||
            fmt_image_decode(buf, len, &o, &img, NULL)) {
            fprintf(stderr, "resize-compare: cannot decode %s\n", argv[i]);
            return 1;
        }
        uint32_t w = img.width, h = img.height, sh = w <= h ? w : h, lg = w <= h ? h : w;
        uint32_t nl = (uint32_t)((double)((uint64_t)size * lg) / sh);
        uint32_t nw = w <= h ? size : nl, nh = w <= h ? nl : size;
        uint8_t *out = malloc((size_t)nw * nh * 3);
        if (!out)
            return 1;
        fmt_rs_view sv = {img.pixels, w, h, 3, (size_t)w * 3}, dv = {out, nw, nh, 3, (size_t)nw * 3};
        fmt_rs_scratch *fresh;
        if (fmt_rs_scratch_create(NULL, &fresh))
            return 1;
        double t0 = now_ms();
        int rc = fmt_resample(fresh, &sv, NULL, FMT_FILTER_BILINEAR, &dv, NULL);
        double first = now_ms() - t0;
        fmt_rs_scratch_free(fresh);
        double ts = timed(simd, &sv, &dv, reps, t), tp = timed(plain, &sv, &dv, reps, t);
        if (rc || ts < 0 || tp < 0)
            return 1;
        char path[4096];
        snprintf(path, sizeof path, "%s/%d.rgb", outdir, i - 4);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(out, 1, (size_t)nw * nh * 3, f) != (size_t)nw * nh * 3 || fclose(f))
            return 1;
        printf("%d %u %u %u %u %.4f %.4f %.4f\n", i - 4, w, h, nw, nh, first, ts, tp);
        free(out);
        fmt_image_free(&img);
        free(buf);
    }
    printf("path %s\n", fmt_rs_path_name(fmt_rs_scratch_path(simd)));
    fmt_rs_scratch_free(simd);
    fmt_rs_scratch_free(plain);
    free(t);
    return 0;
}
