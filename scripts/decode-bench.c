/* decode-bench - the baseline of the build benchmark: decode every image file named on the command
 * line with the same codecs shardc uses, one thread, nothing else (no resize, no write).
 *
 *   decode-bench [--reps N] [--min WxH] FILE...
 *   decode-bench [--reps N] --size WxH FILE...
 *
 * Files are read into memory first, so the figure is decode time alone. --min passes a
 * shrink-on-load hint as shardc does for that output size. Prints images/s (median of N reps).
 * --size measures what a build of --size WxH does per image besides writing: in each rep, one
 * after the other, the full decode alone, the full decode + the resize/crop, and the decode of
 * the region the resize reads (fmt_resize_source_rect) + the same resize; prints the three
 * medians and checks that both resizes gave the same bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "benchutil.h"
#include "geometry.h"
#include "image.h"

/* The plan of g for the image in buf; -1 when it cannot be probed or planned. */
static int plan_of(const fmt_geom *g, const uint8_t *buf, size_t len, fmt_image_info *info,
                   fmt_geom_plan *p)
{
    return fmt_image_probe(buf, len, info, NULL) || fmt_geom_plan_for(g, info->width,
                                                                      info->height, p) ? -1 : 0;
}

/* Ask the decoder for the region p's resize reads (fmt_resize_source_rect); its pixel count. */
static uint64_t set_roi(fmt_resizer *rz, const fmt_geom_plan *p, const fmt_image_info *info,
                        fmt_decode_opts *o)
{
    uint32_t rect[4];
    fmt_resize_source_rect(rz, p, info->width, info->height, rect);
    o->roi_x = rect[0];
    o->roi_y = rect[1];
    o->roi_w = rect[2];
    o->roi_h = rect[3];
    return (uint64_t)rect[2] * rect[3];
}

/* --size: decode alone, full decode + resize, region decode + resize (see the top). */
static int bench_size(uint8_t **bufs, const size_t *lens, int n, int reps, unsigned w, unsigned h)
{
    fmt_geom g = {.mode = FMT_GEOM_SIZE, .fit = FMT_FIT_CROP, .width = w, .height = h};
    fmt_resizer *rz;
    if (fmt_resizer_create(&rz))
        return 1;
    double *rate[3];
    for (int m = 0; m < 3; m++)
        if (!(rate[m] = calloc((size_t)reps, sizeof **rate)))
            return 1;
    fmt_image dec = {0}, out = {0}, ref = {0};
    uint64_t region_px = 0, image_px = 0;
    for (int r = 0; r < reps; r++) {
        for (int m = 0; m < 3; m++) {
            double t0 = now();
            for (int i = 0; i < n; i++) {
                fmt_image_info info;
                fmt_geom_plan p;
                if (plan_of(&g, bufs[i], lens[i], &info, &p))
                    continue;
                fmt_decode_opts o = {.channels = 3};
                if (m == 2) {
                    uint64_t px = set_roi(rz, &p, &info, &o);
                    if (r == 0) {
                        region_px += px;
                        image_px += (uint64_t)info.width * info.height;
                    }
                }
                if (fmt_image_decode_into(bufs[i], lens[i], &o, &dec, NULL) || m == 0)
                    continue;
                fmt_resize_into(rz, &dec, &p, &out, NULL);
            }
            rate[m][r] = n / (now() - t0);
        }
    }
    /* the byte check, image by image, outside the timed loops */
    int differ = 0;
    for (int i = 0; i < n; i++) {
        fmt_image_info info;
        fmt_geom_plan p;
        fmt_decode_opts o = {.channels = 3};
        if (plan_of(&g, bufs[i], lens[i], &info, &p) ||
            fmt_image_decode_into(bufs[i], lens[i], &o, &dec, NULL) ||
            fmt_resize_into(rz, &dec, &p, &ref, NULL))
            continue;
        set_roi(rz, &p, &info, &o);
        if (fmt_image_decode_into(bufs[i], lens[i], &o, &dec, NULL) ||
            fmt_resize_into(rz, &dec, &p, &out, NULL) ||
            memcmp(ref.pixels, out.pixels, (size_t)w * h * 3) != 0)
            differ++;
    }
    double med[3];
    for (int m = 0; m < 3; m++) {
        qsort(rate[m], (size_t)reps, sizeof **rate, cmp_dbl);
        med[m] = rate[m][reps / 2];
        free(rate[m]);
    }
    printf("{\"files\": %d, \"decode_per_s\": %.1f, \"decode_resize_per_s\": %.1f, "
           "\"roi_decode_resize_per_s\": %.1f, \"roi_speedup\": %.3f, "
           "\"region_fraction\": %.3f, \"differ\": %d}\n",
           n, med[0], med[1], med[2], med[2] / med[1],
           image_px ? (double)region_px / (double)image_px : 1.0, differ);
    fmt_image_free(&dec);
    fmt_image_free(&out);
    fmt_image_free(&ref);
    fmt_resizer_free(rz);
    return differ ? 1 : 0;
}

int main(int argc, char **argv)
{
    int reps = 3, first = 1;
    unsigned mw = 0, mh = 0, sw = 0, sh = 0;
    while (first < argc && argv[first][0] == '-') {
        if (strcmp(argv[first], "--reps") == 0 && first + 1 < argc) {
            reps = atoi(argv[first + 1]);
            first += 2;
        } else if (strcmp(argv[first], "--size") == 0 && first + 1 < argc &&
                   sscanf(argv[first + 1], "%ux%u", &sw, &sh) == 2 && sw && sh) {
            first += 2;
        } else if (strcmp(argv[first], "--min") == 0 && first + 1 < argc &&
                   sscanf(argv[first + 1], "%ux%u", &mw, &mh) == 2) {
            first += 2;
        } else {
            fprintf(stderr, "usage: decode-bench [--reps N] [--min WxH | --size WxH] FILE...\n");
            return 2;
        }
    }
    int n = argc - first;
    if (n <= 0 || reps < 1 || reps > 100) {
        fprintf(stderr, "usage: decode-bench [--reps N] [--min WxH | --size WxH] FILE...\n");
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
    if (sw)
        return bench_size(bufs, lens, n, reps, sw, sh);
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
