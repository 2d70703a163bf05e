/* mksample_coco.c - shardc-mksample's detection samples (--coco, mksample_coco.h): PNGs of
 * shapes on a noisy background and their boxes (with --polygons their outlines too) as COCO
 * instances JSON, for the detection and instance-segmentation paths (shardc --coco). Linked into the program only; the class-folder generator is mksample.c, the
 * command line mksample_main.c.
 */
#include "mksample_coco.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "image.h"
#include "mksample.h"

static uint32_t det_range(uint64_t *st, uint32_t lo, uint32_t hi)
{
    return lo + (uint32_t)(mks_splitmix(st) % ((uint64_t)hi - lo + 1));
}

static const char *const det_names[] = {"rectangle", "ellipse", "frame", "cross"};

/* One axis-aligned bar [x0, x1] x [y0, y1] as a COCO polygon (pixel corners). */
static void det_bar(FILE *f, int first, double x0, double y0, double x1, double y1)
{
    fprintf(f, "%s[%.2f, %.2f, %.2f, %.2f, %.2f, %.2f, %.2f, %.2f]", first ? "" : ", ", x0, y0, x1,
            y0, x1, y1, x0, y1);
}

/* The outline of shape cat drawn in the box (x, y, bw, bh), as the pixels test it (u, v in
 * -0.5 .. 0.5 across the box): ", \"segmentation\": [...]" */
static void det_polygons(FILE *f, uint32_t cat, uint32_t x, uint32_t y, uint32_t bw, uint32_t bh)
{
    double X = x, Y = y, W = bw, H = bh;
    fputs(", \"segmentation\": [", f);
    if (cat == 1) {
        det_bar(f, 1, X, Y, X + W, Y + H);
    } else if (cat == 2) {
        fputc('[', f);
        for (int k = 0; k < 24; k++) {
            double a = 2 * M_PI * k / 24;
            fprintf(f, "%s%.2f, %.2f", k ? ", " : "", X + W * (0.5 + 0.5 * cos(a)),
                    Y + H * (0.5 + 0.5 * sin(a)));
        }
        fputc(']', f);
    } else if (cat == 3) {      /* |u| > 0.35 or |v| > 0.35: four bars */
        det_bar(f, 1, X, Y, X + W, Y + 0.15 * H);
        det_bar(f, 0, X, Y + 0.85 * H, X + W, Y + H);
        det_bar(f, 0, X, Y + 0.15 * H, X + 0.15 * W, Y + 0.85 * H);
        det_bar(f, 0, X + 0.85 * W, Y + 0.15 * H, X + W, Y + 0.85 * H);
    } else {                    /* |u| < 0.12 or |v| < 0.12: two bars */
        det_bar(f, 1, X + 0.38 * W, Y, X + 0.62 * W, Y + H);
        det_bar(f, 0, X, Y + 0.38 * H, X + W, Y + 0.62 * H);
    }
    fputc(']', f);
}

int mks_coco_generate(const char *out, const char *json_path, unsigned count, uint64_t seed,
                      unsigned min_side, unsigned max_side, unsigned max_shapes, int polygons,
                      fmt_msg *msg)
{
    if (mkdir(out, 0777) != 0 && errno != EEXIST)
        return fmt_fail(msg, errno, "cannot write %s: %s", out, strerror(errno));
    FILE *js = fopen(json_path, "w");
    if (!js)
        return fmt_fail(msg, errno, "cannot write %s: %s", json_path, strerror(errno));
    uint64_t st = seed ^ 0x636f636f;
    int rc = 0;
    unsigned ann = 0;
    char *anns = NULL, *imgs = NULL;
    size_t alen = 0, ilen = 0;
    FILE *fa = open_memstream(&anns, &alen), *fi = open_memstream(&imgs, &ilen);
    if (!fa || !fi) {
        rc = fmt_fail(msg, ENOMEM, "out of memory");
        goto leave;
    }
    for (unsigned i = 1; i <= count && rc == 0; i++) {
        uint32_t w = det_range(&st, min_side, max_side), h = det_range(&st, min_side, max_side);
        fmt_image img = {0};
        if ((rc = fmt_image_alloc(&img, w, h, 3)) != 0) {
            fmt_fail(msg, rc, "cannot hold a %ux%u image: %s", w, h, fmt_strerror(rc));
            break;
        }
        for (size_t k = 0; k < (size_t)w * h * 3; k++)
            img.pixels[k] = (uint8_t)(96 + mks_splitmix(&st) % 32);
        unsigned nshapes = i % 5 == 0 ? 0 : det_range(&st, 1, max_shapes ? max_shapes : 4);
        for (unsigned s = 0; s < nshapes; s++) {
            uint32_t cat = det_range(&st, 1, 4);
            uint32_t bw = det_range(&st, 4, w / 2 > 4 ? w / 2 : 4);
            uint32_t bh = det_range(&st, 4, h / 2 > 4 ? h / 2 : 4);
            uint32_t x = det_range(&st, 0, w - bw), y = det_range(&st, 0, h - bh);
            uint8_t col[3] = {(uint8_t)(cat & 1 ? 230 : 30), (uint8_t)(cat & 2 ? 220 : 40),
                              (uint8_t)(40 + 50 * cat)};
            for (uint32_t yy = y; yy < y + bh; yy++)
                for (uint32_t xx = x; xx < x + bw; xx++) {
                    double u = (xx + 0.5 - x) / bw - 0.5, v = (yy + 0.5 - y) / bh - 0.5;
                    int on = cat == 1 ? 1 : cat == 2 ? u * u + v * v <= 0.25 :
                             cat == 3 ? (fabs(u) > 0.35 || fabs(v) > 0.35) :
                             (fabs(u) < 0.12 || fabs(v) < 0.12);
                    if (on)
                        memcpy(img.pixels + ((size_t)yy * w + xx) * 3, col, 3);
                }
            fprintf(fa, "%s\n  {\"id\": %u, \"image_id\": %u, \"category_id\": %u, \"bbox\": "
                    "[%u, %u, %u, %u], \"area\": %u, \"iscrowd\": 0", ann ? "," : "", ann + 1, i,
                    cat, x, y, bw, bh, bw * bh);
            if (polygons)
                det_polygons(fa, cat, x, y, bw, bh);
            fputc('}', fa);
            ann++;
        }
        fprintf(fi, "%s\n  {\"id\": %u, \"file_name\": \"%06u.png\", \"width\": %u, \"height\": "
                "%u}", i > 1 ? "," : "", i, i, w, h);
        uint8_t *buf = NULL;
        size_t len = 0;
        char path[4096];
        snprintf(path, sizeof path, "%s/%06u.png", out, i);
        rc = fmt_png_encode(&img, 6, &buf, &len);
        fmt_image_free(&img);
        if (rc == 0)
            rc = fmt_write_file_atomic(path, buf, len);
        free(buf);
        if (rc)
            fmt_fail(msg, rc, "cannot write %s: %s", path, fmt_strerror(rc));
    }
leave:
    if (fa)
        fclose(fa);
    if (fi)
        fclose(fi);
    if (rc == 0) {
        fprintf(js, "{\"info\": {\"description\": \"shardc-mksample shapes\"},\n \"images\": [%s"
                "\n ],\n \"annotations\": [%s\n ],\n \"categories\": [", imgs ? imgs : "",
                anns ? anns : "");
        for (unsigned c = 0; c < 4; c++)
            fprintf(js, "%s\n  {\"id\": %u, \"name\": \"%s\"}", c ? "," : "", c + 1, det_names[c]);
        fputs("\n ]\n}\n", js);
    }
    free(anns);
    free(imgs);
    if (fclose(js) != 0 && rc == 0)
        rc = fmt_fail(msg, errno, "cannot write %s: %s", json_path, strerror(errno));
    return rc;
}
