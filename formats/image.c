/* image.c - format sniffing, probe/decode dispatch, image buffers and channel conversions. */
#include "codec.h"
#include "le.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t png_magic[8] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
static const uint8_t jpeg_magic[3] = {0xff, 0xd8, 0xff};

/* A prefix of a signature counts as a match, so that a file cut short inside its magic is reported
 * as truncated by its codec rather than as an unknown format. At least two bytes are required. */
static int prefix_match(const uint8_t *p, size_t len, const uint8_t *magic, size_t mlen)
{
    if (len < 2)
        return 0;
    return memcmp(p, magic, len < mlen ? len : mlen) == 0;
}

/* "BM" alone is also how plain text may start ("BMW ..."), so the DIB header size must be one
 * that a BMP writer uses. */
static int bmp_match(const uint8_t *p, size_t len)
{
    if (len < 2 || p[0] != 'B' || p[1] != 'M')
        return 0;
    if (len < 18)
        return 1;
    switch (fmt_le_get32(p + 14)) {
    case 12: case 16: case 40: case 52: case 56: case 64: case 108: case 124:
        return 1;
    default:
        return 0;
    }
}

/* A DIB (.dib, a BMP without its file header) starts with the size of its header: the sizes
 * Pillow's DIB reader accepts (Pillow opens such a file whatever its name). Eight bytes at
 * least, so that a tiny file of something else is reported as not an image. */
static int dib_match(const uint8_t *p, size_t len)
{
    if (len < 8)
        return 0;
    switch (fmt_le_get32(p)) {
    case 12: case 40: case 64: case 108: case 124:
        return 1;
    default:
        return 0;
    }
}

fmt_image_type fmt_image_sniff(const void *buf, size_t len)
{
    const uint8_t *p = buf;
    if (!p)
        return FMT_IMG_UNKNOWN;
    if (prefix_match(p, len, jpeg_magic, sizeof jpeg_magic))
        return FMT_IMG_JPEG;
    if (prefix_match(p, len, png_magic, sizeof png_magic))
        return FMT_IMG_PNG;
    if (bmp_match(p, len) || dib_match(p, len))
        return FMT_IMG_BMP;
    return FMT_IMG_UNKNOWN;
}

const char *fmt_image_type_name(fmt_image_type t)
{
    static const char *const names[] = {[FMT_IMG_JPEG] = "jpeg", [FMT_IMG_PNG] = "png",
                                        [FMT_IMG_BMP] = "bmp"};
    return FMT_NAME_IN(names, t, "unknown");
}

fmt_limits fmt_limits_resolve(const fmt_limits *l)
{
    fmt_limits r = {FMT_DEFAULT_MAX_SIDE, FMT_DEFAULT_MAX_PIXELS};
    if (l && l->max_side)
        r.max_side = l->max_side;
    if (l && l->max_pixels)
        r.max_pixels = l->max_pixels;
    return r;
}

int fmt_limits_check(const fmt_limits *l, uint32_t width, uint32_t height, fmt_msg *msg)
{
    fmt_limits r = fmt_limits_resolve(l);
    if ((uint64_t)width * height > r.max_pixels)
        return fmt_fail(msg, FMT_ETOOBIG, "image %ux%u exceeds limit of %llu pixels", width,
                        height, (unsigned long long)r.max_pixels);
    if (width > r.max_side || height > r.max_side)
        return fmt_fail(msg, FMT_ETOOBIG, "image %ux%u exceeds limit of %u pixels per side",
                        width, height, r.max_side);
    return 0;
}

void fmt_rgb_to_gray(const uint8_t *rgb, uint8_t *gray, size_t npix)
{
    for (size_t i = 0; i < npix; i++, rgb += 3)
        gray[i] = fmt_luma(rgb[0], rgb[1], rgb[2]);
}

void fmt_image_rgb_to_gray_inplace(fmt_image *img)
{
    size_t npix = (size_t)img->width * img->height;
    fmt_rgb_to_gray(img->pixels, img->pixels, npix);
    uint8_t *p = realloc(img->pixels, npix ? npix : 1);
    if (p)
        img->pixels = p;
    img->channels = 1;
    img->cap = p ? (npix ? npix : 1) : 0;
}

int fmt_image_alloc(fmt_image *img, uint32_t width, uint32_t height, uint32_t channels)
{
    if (!img)
        return FMT_EINVAL;
    memset(img, 0, sizeof *img);
    if (width == 0 || height == 0 || (channels != 1 && channels != 3))
        return FMT_EINVAL;
    uint64_t npix = (uint64_t)width * height; /* < 2^64 */
    if (npix > SIZE_MAX / channels)
        return ENOMEM;
    img->pixels = malloc((size_t)npix * channels);
    if (!img->pixels)
        return ENOMEM;
    img->width = width;
    img->height = height;
    img->channels = channels;
    img->cap = (size_t)npix * channels;
    return 0;
}

int fmt_image_reserve(fmt_image *img, uint32_t width, uint32_t height, uint32_t channels)
{
    if (!img || width == 0 || height == 0 || channels < 1 || channels > 4)
        return FMT_EINVAL;
    uint64_t npix = (uint64_t)width * height;
    if (npix > SIZE_MAX / channels)
        return ENOMEM;
    size_t need = (size_t)npix * channels;
    size_t have = img->cap ? img->cap : (size_t)img->width * img->height * img->channels;
    if (!img->pixels || have < need) {
        uint8_t *p = malloc(need);
        if (!p)
            return ENOMEM;
        free(img->pixels);
        img->pixels = p;
        img->cap = need;
    } else {
        img->cap = have;
    }
    img->width = width;
    img->height = height;
    img->channels = channels;
    return 0;
}

void fmt_image_free(fmt_image *img)
{
    if (!img)
        return;
    free(img->pixels);
    memset(img, 0, sizeof *img);
}

int fmt_image_probe(const void *buf, size_t len, fmt_image_info *info, fmt_msg *msg)
{
    if (msg)
        msg->text[0] = '\0';
    if (!info || (!buf && len))
        return fmt_fail(msg, FMT_EINVAL, "invalid argument");
    memset(info, 0, sizeof *info);
    if (len == 0)
        return fmt_fail(msg, FMT_EEMPTY, "empty file");
    fmt_image_type t = fmt_image_sniff(buf, len);
    int rc;
    switch (t) {
    case FMT_IMG_JPEG:
        rc = fmt_jpeg_probe(buf, len, info, msg);
        break;
    case FMT_IMG_PNG:
        rc = fmt_png_probe(buf, len, info, msg);
        break;
    case FMT_IMG_BMP:
        rc = fmt_bmp_probe(buf, len, info, msg);
        break;
    default:
        return fmt_fail(msg, FMT_EFORMAT, "not a JPEG, PNG or BMP file");
    }
    if (rc)
        memset(info, 0, sizeof *info);
    else
        info->type = t;
    return rc;
}

int fmt_image_decode(const void *buf, size_t len, const fmt_decode_opts *opts, fmt_image *out,
                     fmt_msg *msg)
{
    if (out)
        memset(out, 0, sizeof *out);
    return fmt_image_decode_into(buf, len, opts, out, msg);
}

int fmt_image_decode_into(const void *buf, size_t len, const fmt_decode_opts *opts,
                          fmt_image *out, fmt_msg *msg)
{
    if (msg)
        msg->text[0] = '\0';
    if (!out)
        return fmt_fail(msg, FMT_EINVAL, "invalid argument");
    if (!buf && len)
        return fmt_fail(msg, FMT_EINVAL, "invalid argument");
    fmt_decode_opts o = {.channels = 3};
    if (opts)
        o = *opts;
    if (o.channels != 1 && o.channels != 3)
        return fmt_fail(msg, FMT_EINVAL, "cannot decode to %u channels (1 or 3)", o.channels);
    o.limits = fmt_limits_resolve(&o.limits);
    if (len == 0)
        return fmt_fail(msg, FMT_EEMPTY, "empty file");
    int rc;
    switch (fmt_image_sniff(buf, len)) {
    case FMT_IMG_JPEG:
        rc = fmt_jpeg_decode(buf, len, &o, out, msg);
        break;
    case FMT_IMG_PNG:
        rc = fmt_png_decode(buf, len, &o, out, msg);
        break;
    case FMT_IMG_BMP:
        rc = fmt_bmp_decode(buf, len, &o, out, msg);
        break;
    default:
        return fmt_fail(msg, FMT_EFORMAT, "not a JPEG, PNG or BMP file");
    }
    if (rc)
        fmt_image_free(out);
    return rc;
}
