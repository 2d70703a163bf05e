/* common.c - scratch directory and small helpers of the fuzz targets (see common.h). */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char fz_root[4096];

/* A sanitizer report ends the process without atexit handlers; the sanitizers' runtime calls this
 * one instead (weak: absent from builds without a sanitizer). */
void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

static void fz_cleanup(void);

void fz_fail(const char *file, int line, const char *what)
{
    fprintf(stderr, "%s:%d: invariant broken: %s\n", file, line, what);
    fz_cleanup();
    abort();
}

static int fz_rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (type == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

static void fz_cleanup(void)
{
    if (fz_root[0])
        nftw(fz_root, fz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *fz_dir(void)
{
    if (fz_root[0])
        return fz_root;
    const char *tmp = getenv("TMPDIR");
    char tmpl[4096];
    int n = snprintf(tmpl, sizeof tmpl, "%s/shardc-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (n < 0 || (size_t)n >= sizeof tmpl || !mkdtemp(tmpl) || !realpath(tmpl, fz_root)) {
        perror("fuzz: cannot make a scratch directory");
        abort();
    }
    atexit(fz_cleanup);
    if (__sanitizer_set_death_callback)
        __sanitizer_set_death_callback(fz_cleanup);
    return fz_root;
}

void fz_path(char *buf, size_t len, const char *rel)
{
    int n = snprintf(buf, len, "%s/%s", fz_dir(), rel);
    if (n < 0 || (size_t)n >= len) {
        fprintf(stderr, "fuzz: path too long: %s\n", rel);
        abort();
    }
}

void fz_mkdir(const char *rel)
{
    char path[4096];
    fz_path(path, sizeof path, rel);
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
        perror(path);
        abort();
    }
}

void fz_write(const char *rel, const void *data, size_t len, char *buf, size_t buflen)
{
    fz_path(buf, buflen, rel);
    int fd = open(buf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        perror(buf);
        abort();
    }
    const uint8_t *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            perror(buf);
            abort();
        }
        p += w;
        len -= (size_t)w;
    }
    close(fd);
}

uint64_t fz_touch(const void *p, size_t len)
{
    const uint8_t *b = p;
    uint64_t s = 0;
    for (size_t i = 0; i < len; i++)
        s = s * 31 + b[i];
    return s;
}

void fz_trace(const char *what, int rc, const fmt_msg *msg)
{
    static int on = -1;
    if (on < 0)
        on = getenv("FUZZ_TRACE") != NULL;
    if (on)
        fprintf(stderr, "  %s: %s\n", what, rc && msg ? fmt_reason(msg, rc) : fmt_strerror(rc));
}

uint32_t fz_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint64_t fz_get64(const uint8_t *p)
{
    return (uint64_t)fz_get32(p) | (uint64_t)fz_get32(p + 4) << 32;
}

void fz_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Option byte of the image targets:
 *   bit 0      decode to 1 channel (else 3)
 *   bits 1-2   shrink hint k (JPEG shrink-on-load): 0 none, else min size = stored size >> k,
 *   bit 3        plus one pixel (just above a DCT scale's threshold)
 *   bits 4-5   limits: 0 max_pixels 4Mi; 1 max_pixels exactly the stored size; 2 one pixel less;
 *              3 max_side one less than the longer stored side
 * Whatever the options, probe and decode must agree: a file probe refuses is not decoded, a
 * decoded image has the channels asked for, the stored size (or, for a JPEG with a shrink hint, a
 * DCT-scaled size no smaller than the hint), fits the limits, and every pixel byte is readable. */
void fz_image(fmt_image_type want, const uint8_t *data, size_t size)
{
    if (size < 1)
        return;
    uint8_t opt = data[0];
    const uint8_t *file = data + 1;
    size_t len = size - 1;
    if (fmt_image_sniff(file, len) != want)
        return;

    fmt_image_info info;
    fmt_msg msg;
    int prc = fmt_image_probe(file, len, &info, &msg);
    fmt_msg pmsg = msg;
    fmt_decode_opts o = {.channels = (opt & 1) ? 1 : 3};
    o.limits.max_pixels = FZ_IMAGE_MAX_PIXELS;
    if (prc == 0) {
        FZ_ASSERT(info.type == want);
        uint32_t k = (opt >> 1) & 3, plus = (opt >> 3) & 1;
        if (k) {
            o.min_width = (info.width >> k) + plus;
            o.min_height = (info.height >> k) + plus;
            if (!o.min_width || !o.min_height)
                o.min_width = o.min_height = 1;
        }
        uint64_t area = (uint64_t)info.width * info.height;
        switch ((opt >> 4) & 3) {
        case 1:
            if (area && area <= FZ_IMAGE_MAX_PIXELS)
                o.limits.max_pixels = area;
            break;
        case 2:
            if (area > 1 && area <= FZ_IMAGE_MAX_PIXELS)
                o.limits.max_pixels = area - 1;
            break;
        case 3:
            if (info.width > 1 || info.height > 1)
                o.limits.max_side = (info.width > info.height ? info.width : info.height) - 1;
            break;
        }
    }

    fmt_image img;
    fz_trace("probe", prc, &pmsg);
    int drc = fmt_image_decode(file, len, &o, &img, &msg);
    fz_trace("decode", drc, &msg);
    if (drc) {
        FZ_ASSERT(img.pixels == NULL);
        return;
    }
    FZ_ASSERT(prc == 0);
    FZ_ASSERT(img.channels == o.channels);
    FZ_ASSERT(img.width >= 1 && img.height >= 1);
    FZ_ASSERT((uint64_t)info.width * info.height <= o.limits.max_pixels);
    if (o.limits.max_side)
        FZ_ASSERT(info.width <= o.limits.max_side && info.height <= o.limits.max_side);
    if (img.width != info.width || img.height != info.height) {
        FZ_ASSERT(want == FMT_IMG_JPEG && o.min_width);
        FZ_ASSERT(img.width >= o.min_width && img.height >= o.min_height);
        FZ_ASSERT(img.width <= info.width && img.height <= info.height);
    }
    fz_touch(img.pixels, (size_t)img.width * img.height * img.channels);
    fmt_image_free(&img);
}

int fz_backend(const fmt_backend *b, const char *dir, const char *path, fmt_access access)
{
    return fz_backend_hook(b, dir, path, access, NULL);
}

int fz_backend_hook(const fmt_backend *b, const char *dir, const char *path, fmt_access access,
                    fz_sample_hook *hook)
{
    void *s;
    fmt_msg msg;
    int rc = b->r_open(&s, dir, path, access, &msg);
    fz_trace(b->name, rc, &msg);
    if (rc)
        return rc;
    const fmt_shard_info *info = b->r_info(s);
    for (uint64_t i = 0; i < info->samples; i++) {
        fmt_sample smp;
        FZ_ASSERT(b->r_get(s, i, &smp) == 0);
        FZ_ASSERT(smp.index == i);
        FZ_ASSERT(smp.channels == 1 || smp.channels == 3);
        FZ_ASSERT(smp.height >= 1 && smp.width >= 1 && smp.label >= -1);
        FZ_ASSERT(smp.length == (uint64_t)smp.height * smp.width * smp.channels);
        if (smp.pixels)
            fz_touch(smp.pixels, (size_t)smp.length);
        if (smp.aux)
            fz_touch(smp.aux, smp.aux_len);
        if (hook)
            hook(b, s, i, &smp, 0);
        /* raw, hdf5 and lmdb bound the length by the file at open; a per-image set records any
         * shape and its read fails later on a file that cannot hold it, so huge recorded shapes
         * are not worth a buffer here */
        if (smp.length <= ((uint64_t)1 << 28)) {
            uint8_t *dst = malloc(smp.length ? (size_t)smp.length : 1);
            FZ_ASSERT(dst != NULL);
            rc = b->r_read(s, i, dst, NULL, 0);
            free(dst);
            if (i < 4)
                fz_trace("  read", rc, NULL);
        }
        rc = b->r_check(s, i);
        if (i < 4)
            fz_trace("  check", rc, NULL);
        if (b->r_sample_path) {
            char p[4096];
            b->r_sample_path(s, i, p, sizeof p);
        }
        if (hook)
            hook(b, s, i, &smp, 1);
    }
    fmt_sample smp;
    FZ_ASSERT(b->r_get(s, info->samples, &smp) == FMT_EINVAL);
    if (b->r_advise)
        b->r_advise(s, FMT_ADVICE_RANDOM);
    b->r_close(s);
    return 0;
}
