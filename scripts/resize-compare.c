/* resize-compare.c - time one resize method on one image: the measuring half of
 * scripts/resize-compare.sh (which builds this by hand, generates the images, computes the
 * Pillow reference and the PSNR). Not part of the Makefile build.
 *
 *   resize-compare METHOD IN.ppm X Y W H OUT_W OUT_H OUT.ppm RUNS
 *
 * Reads a binary P6 (RGB) or P5 (gray) image, resizes the box (X, Y, W, H) to OUT_W x OUT_H with
 * METHOD RUNS times on one thread, writes the last result and prints one line:
 *   METHOD median_ms min_ms init_ms
 * where init_ms is the median cost of creating the scaler context (swscale; 0 for stb, which
 * has none), i.e. what a resize costs on top when the source size changes from image to image.
 * METHOD "list" prints the method names.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libswscale/swscale.h>
#include <libavutil/log.h>
#include <stb_image_resize.h>

#ifdef WITH_SHARDC
#include "geometry.h"
#endif

#define SWS_EXACT (SWS_BITEXACT | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT | SWS_FULL_CHR_H_INP)

typedef struct {
    const char *name;
    int kind;           /* 0 sws packed, 1 sws GBRP, 2 sws per-channel GRAY8, 3 stb, 4 shardc */
    int sws_flags;
    stbir_filter filter;
    stbir_colorspace space;
} method;

static const method methods[] = {
    {"sws-rgb24-area", 0, SWS_AREA | SWS_EXACT, 0, 0},
    {"sws-rgb24-bicubic", 0, SWS_BICUBIC | SWS_EXACT, 0, 0},
    {"sws-rgb24-lanczos", 0, SWS_LANCZOS | SWS_EXACT, 0, 0},
    {"sws-rgb24-area-fast", 0, SWS_AREA, 0, 0},
    {"sws-gbrp-area", 1, SWS_AREA | SWS_EXACT, 0, 0},
    {"sws-gbrp-bicubic", 1, SWS_BICUBIC | SWS_EXACT, 0, 0},
    {"sws-gbrp-lanczos", 1, SWS_LANCZOS | SWS_EXACT, 0, 0},
    {"sws-gray-area", 2, SWS_AREA | SWS_BITEXACT | SWS_ACCURATE_RND, 0, 0},
    {"sws-gray-bicubic", 2, SWS_BICUBIC | SWS_BITEXACT | SWS_ACCURATE_RND, 0, 0},
    {"sws-gray-lanczos", 2, SWS_LANCZOS | SWS_BITEXACT | SWS_ACCURATE_RND, 0, 0},
    {"sws-gray-area-fast", 2, SWS_AREA, 0, 0},
    {"sws-gray-lanczos-fast", 2, SWS_LANCZOS, 0, 0},
    {"stb-box-linear", 3, 0, STBIR_FILTER_BOX, STBIR_COLORSPACE_LINEAR},
    {"stb-triangle-linear", 3, 0, STBIR_FILTER_TRIANGLE, STBIR_COLORSPACE_LINEAR},
    {"stb-catmullrom-linear", 3, 0, STBIR_FILTER_CATMULLROM, STBIR_COLORSPACE_LINEAR},
    {"stb-mitchell-linear", 3, 0, STBIR_FILTER_MITCHELL, STBIR_COLORSPACE_LINEAR},
    {"stb-bspline-linear", 3, 0, STBIR_FILTER_CUBICBSPLINE, STBIR_COLORSPACE_LINEAR},
    {"stb-catmullrom-srgb", 3, 0, STBIR_FILTER_CATMULLROM, STBIR_COLORSPACE_SRGB},
    {"stb-mitchell-srgb", 3, 0, STBIR_FILTER_MITCHELL, STBIR_COLORSPACE_SRGB},
#ifdef WITH_SHARDC
    {"shardc-fmt_resize", 4, 0, 0, 0},
#endif
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint8_t *read_pnm(const char *path, int *w, int *h, int *ch)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char magic[3] = {0};
    int maxval = 0;
    uint8_t *px = NULL;
    if (fscanf(f, "%2s %d %d %d", magic, w, h, &maxval) != 4 || maxval != 255)
        goto leave;
    fgetc(f);
    *ch = strcmp(magic, "P6") == 0 ? 3 : strcmp(magic, "P5") == 0 ? 1 : 0;
    if (!*ch)
        goto leave;
    size_t n = (size_t)*w * *h * *ch;
    px = malloc(n);
    if (px && fread(px, 1, n, f) != n) {
        free(px);
        px = NULL;
    }
leave:
    fclose(f);
    return px;
}

static int write_pnm(const char *path, const uint8_t *px, int w, int h, int ch)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    fprintf(f, "P%d\n%d %d\n255\n", ch == 3 ? 6 : 5, w, h);
    fwrite(px, 1, (size_t)w * h * ch, f);
    return fclose(f);
}

/* Everything one method needs between runs. */
typedef struct {
    const method *m;
    const uint8_t *src;
    int sw, sh, ch, bx, by, bw, bh, ow, oh;
    uint8_t *dst;
    struct SwsContext *sws;
    uint8_t *planes_in, *planes_out;    /* planar scratch, 64-byte aligned strides */
    int in_stride, out_stride;
#ifdef WITH_SHARDC
    fmt_resizer *rz;
#endif
} job;

static int stride64(int w)
{
    return (w + 63) & ~63;
}

static int make_context(job *j)
{
    enum AVPixelFormat fmt;
    if (j->m->kind == 0)
        fmt = j->ch == 3 ? AV_PIX_FMT_RGB24 : AV_PIX_FMT_GRAY8;
    else if (j->m->kind == 1)
        fmt = j->ch == 3 ? AV_PIX_FMT_GBRP : AV_PIX_FMT_GRAY8;
    else
        fmt = AV_PIX_FMT_GRAY8;
    j->sws = sws_getCachedContext(NULL, j->bw, j->bh, fmt, j->ow, j->oh, fmt, j->m->sws_flags,
                                  NULL, NULL, NULL);
    return j->sws ? 0 : -1;
}

/* Copy the box into 64-aligned planes (one per channel). */
static void split(job *j)
{
    for (int c = 0; c < j->ch; c++) {
        uint8_t *plane = j->planes_in + (size_t)c * j->in_stride * j->bh;
        for (int y = 0; y < j->bh; y++) {
            const uint8_t *s = j->src + ((size_t)(j->by + y) * j->sw + j->bx) * j->ch + c;
            uint8_t *d = plane + (size_t)y * j->in_stride;
            for (int x = 0; x < j->bw; x++)
                d[x] = s[(size_t)x * j->ch];
        }
    }
}

static void merge(job *j)
{
    for (int c = 0; c < j->ch; c++) {
        const uint8_t *plane = j->planes_out + (size_t)c * j->out_stride * j->oh;
        for (int y = 0; y < j->oh; y++) {
            const uint8_t *s = plane + (size_t)y * j->out_stride;
            uint8_t *d = j->dst + (size_t)y * j->ow * j->ch + c;
            for (int x = 0; x < j->ow; x++)
                d[(size_t)x * j->ch] = s[x];
        }
    }
}

static int run_once(job *j)
{
    const uint8_t *box = j->src + ((size_t)j->by * j->sw + j->bx) * j->ch;
    int sstride = j->sw * j->ch, dstride = j->ow * j->ch;
    switch (j->m->kind) {
    case 0: {
        const uint8_t *in[4] = {box};
        int is[4] = {sstride};
        uint8_t *out[4] = {j->dst};
        int os[4] = {dstride};
        return sws_scale(j->sws, in, is, 0, j->bh, out, os) == j->oh ? 0 : -1;
    }
    case 1:
    case 2: {
        split(j);
        size_t ip = (size_t)j->in_stride * j->bh, op = (size_t)j->out_stride * j->oh;
        if (j->m->kind == 1 && j->ch == 3) {
            /* GBRP plane order is G, B, R */
            const uint8_t *in[4] = {j->planes_in + ip, j->planes_in + 2 * ip, j->planes_in};
            int is[4] = {j->in_stride, j->in_stride, j->in_stride};
            uint8_t *out[4] = {j->planes_out + op, j->planes_out + 2 * op, j->planes_out};
            int os[4] = {j->out_stride, j->out_stride, j->out_stride};
            if (sws_scale(j->sws, in, is, 0, j->bh, out, os) != j->oh)
                return -1;
        } else {
            for (int c = 0; c < j->ch; c++) {
                const uint8_t *in[4] = {j->planes_in + c * ip};
                int is[4] = {j->in_stride};
                uint8_t *out[4] = {j->planes_out + c * op};
                int os[4] = {j->out_stride};
                if (sws_scale(j->sws, in, is, 0, j->bh, out, os) != j->oh)
                    return -1;
            }
        }
        merge(j);
        return 0;
    }
    case 3:
        return stbir_resize_uint8_generic(box, j->bw, j->bh, sstride, j->dst, j->ow, j->oh,
                                          dstride, j->ch, STBIR_ALPHA_CHANNEL_NONE, 0,
                                          STBIR_EDGE_CLAMP, j->m->filter, j->m->space, NULL)
                   ? 0 : -1;
#ifdef WITH_SHARDC
    case 4: {
        fmt_image in = {(uint8_t *)j->src, (uint32_t)j->sw, (uint32_t)j->sh, (uint32_t)j->ch};
        fmt_geom_plan p = {(uint32_t)j->ow, (uint32_t)j->oh, (uint32_t)j->bx, (uint32_t)j->by,
                           (uint32_t)j->bw, (uint32_t)j->bh, 0, 0, (uint32_t)j->ow,
                           (uint32_t)j->oh};
        fmt_image out;
        if (fmt_resize(j->rz, &in, &p, &out, NULL) != 0)
            return -1;
        memcpy(j->dst, out.pixels, (size_t)dstride * j->oh);
        free(out.pixels);
        return 0;
    }
#endif
    }
    return -1;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "list") == 0) {
        for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
            printf("%s\n", methods[i].name);
        return 0;
    }
    if (argc != 11) {
        fprintf(stderr, "usage: resize-compare METHOD IN.ppm X Y W H OUT_W OUT_H OUT.ppm RUNS\n");
        return 2;
    }
    av_log_set_level(AV_LOG_ERROR); /* a benchmark may silence swscale; the library may not */
    job j = {0};
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (strcmp(methods[i].name, argv[1]) == 0)
            j.m = &methods[i];
    if (!j.m) {
        fprintf(stderr, "resize-compare: unknown method %s\n", argv[1]);
        return 2;
    }
    j.src = read_pnm(argv[2], &j.sw, &j.sh, &j.ch);
    if (!j.src) {
        fprintf(stderr, "resize-compare: cannot read %s\n", argv[2]);
        return 1;
    }
    j.bx = atoi(argv[3]);
    j.by = atoi(argv[4]);
    j.bw = atoi(argv[5]);
    j.bh = atoi(argv[6]);
    j.ow = atoi(argv[7]);
    j.oh = atoi(argv[8]);
    int runs = atoi(argv[10]);
    if (runs < 1 || j.bw < 1 || j.bh < 1 || j.bx + j.bw > j.sw || j.by + j.bh > j.sh ||
        j.ow < 1 || j.oh < 1) {
        fprintf(stderr, "resize-compare: bad geometry\n");
        return 2;
    }
    j.dst = malloc((size_t)j.ow * j.oh * j.ch);
    j.in_stride = stride64(j.bw);
    j.out_stride = stride64(j.ow);
    j.planes_in = aligned_alloc(64, (size_t)j.in_stride * j.bh * j.ch);
    j.planes_out = aligned_alloc(64, (size_t)j.out_stride * j.oh * j.ch);
    double *t = malloc(sizeof *t * runs), *ti = malloc(sizeof *ti * runs);
    if (!j.dst || !j.planes_in || !j.planes_out || !t || !ti)
        return 1;
    double init_ms = 0;
    if (j.m->kind <= 2) {
        for (int r = 0; r < runs; r++) {
            double t0 = now_ms();
            if (make_context(&j) != 0) {
                fprintf(stderr, "resize-compare: sws_getCachedContext failed\n");
                return 1;
            }
            ti[r] = now_ms() - t0;
            if (r + 1 < runs) {
                sws_freeContext(j.sws);
                j.sws = NULL;
            }
        }
        qsort(ti, runs, sizeof *ti, cmp_double);
        init_ms = ti[runs / 2];
    }
#ifdef WITH_SHARDC
    if (j.m->kind == 4) {
        /* the context cost for fmt_resize: a first resize on a fresh resizer, minus the
         * warm median measured below */
        for (int r = 0; r < runs; r++) {
            if (fmt_resizer_create(&j.rz) != 0)
                return 1;
            double t0 = now_ms();
            if (run_once(&j) != 0)
                return 1;
            ti[r] = now_ms() - t0;
            fmt_resizer_free(j.rz);
        }
        qsort(ti, runs, sizeof *ti, cmp_double);
        init_ms = ti[runs / 2];
        if (fmt_resizer_create(&j.rz) != 0)
            return 1;
    }
#endif
    for (int r = 0; r < runs; r++) {
        double t0 = now_ms();
        if (run_once(&j) != 0) {
            fprintf(stderr, "resize-compare: %s failed\n", j.m->name);
            return 1;
        }
        t[r] = now_ms() - t0;
    }
    qsort(t, runs, sizeof *t, cmp_double);
    if (j.m->kind == 4)
        init_ms = init_ms > t[runs / 2] ? init_ms - t[runs / 2] : 0;
    printf("%s %.4f %.4f %.4f\n", j.m->name, t[runs / 2], t[0], init_ms);
    if (write_pnm(argv[9], j.dst, j.ow, j.oh, j.ch) != 0) {
        fprintf(stderr, "resize-compare: cannot write %s: %s\n", argv[9], strerror(errno));
        return 1;
    }
    sws_freeContext(j.sws);
#ifdef WITH_SHARDC
    fmt_resizer_free(j.rz);
#endif
    free(j.dst);
    free(j.planes_in);
    free(j.planes_out);
    free(t);
    free(ti);
    free((void *)j.src);
    return 0;
}
