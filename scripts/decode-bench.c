/* decode-bench - the baseline of the build benchmark: decode every image file named on the command
 * line with the same codecs shardc uses, one thread, nothing else (no resize, no write).
 *
 *   decode-bench [--reps N] [--min WxH] FILE...
 *
 * Files are read into memory first, so the figure is decode time alone. --min passes a
 * shrink-on-load hint as shardc does for that output size. Prints images/s (median of N reps). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "image.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int reps = 3, first = 1;
    unsigned mw = 0, mh = 0;
    while (first < argc && argv[first][0] == '-') {
        if (strcmp(argv[first], "--reps") == 0 && first + 1 < argc) {
            reps = atoi(argv[first + 1]);
            first += 2;
        } else if (strcmp(argv[first], "--min") == 0 && first + 1 < argc &&
                   sscanf(argv[first + 1], "%ux%u", &mw, &mh) == 2) {
            first += 2;
        } else {
            fprintf(stderr, "usage: decode-bench [--reps N] [--min WxH] FILE...\n");
            return 2;
        }
    }
    int n = argc - first;
    if (n <= 0 || reps < 1 || reps > 100) {
        fprintf(stderr, "usage: decode-bench [--reps N] [--min WxH] FILE...\n");
        return 2;
    }
    uint8_t **bufs = calloc((size_t)n, sizeof *bufs);
    size_t *lens = calloc((size_t)n, sizeof *lens);
    double *rates = calloc((size_t)reps, sizeof *rates);
    if (!bufs || !lens || !rates)
        return 1;
    for (int i = 0; i < n; i++) {
        int rc = fmt_read_file(argv[first + i], (size_t)1 << 30, &bufs[i], &lens[i]);
        if (rc) {
            fprintf(stderr, "decode-bench: cannot read %s: %s\n", argv[first + i], fmt_strerror(rc));
            return 1;
        }
    }
    int ok = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        ok = 0;
        for (int i = 0; i < n; i++) {
            fmt_decode_opts o = {.channels = 3};
            if (mw && mh) {
                /* the short-side-crop hint shardc computes: the source scaled to cover mw x mh */
                fmt_image_info info;
                if (fmt_image_probe(bufs[i], lens[i], &info, NULL) == 0) {
                    double s = (double)mw / info.width > (double)mh / info.height
                                   ? (double)mw / info.width : (double)mh / info.height;
                    o.min_width = (uint32_t)(info.width * s + 0.5);
                    o.min_height = (uint32_t)(info.height * s + 0.5);
                }
            }
            fmt_image img;
            if (fmt_image_decode(bufs[i], lens[i], &o, &img, NULL) == 0) {
                ok++;
                fmt_image_free(&img);
            }
        }
        rates[r] = n / (now() - t0);
    }
    qsort(rates, (size_t)reps, sizeof *rates, cmp_dbl);
    printf("{\"files\": %d, \"decoded\": %d, \"images_per_s\": %.1f}\n", n, ok, rates[reps / 2]);
    for (int i = 0; i < n; i++)
        free(bufs[i]);
    free(bufs);
    free(lens);
    free(rates);
    return 0;
}
