/* bmp.c - BMP probe and decode (stb_image, behind our own header checks) and a 24-bit / 8-bit
 * gray BMP encoder.
 *
 * stb_image (v2.27 here) decodes BMP well but trusts the file: it reads past a short pixel array
 * as zeros, and reads palette entries it never filled for pixel values beyond the palette. So the
 * header is parsed here first, and a file goes to stb only when its dimensions are within the
 * limits, it is a variant stb reads, it holds every byte of the pixel array the header implies,
 * and (for palette images) no pixel names an entry stb did not read.
 */
#include "codec.h"
#include "le.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <stb_image.h>

#define BMP_FILE_HEADER 14
#define BMP_INFO_HEADER 40
#define BMP_RGB 0u
#define BMP_RLE8 1u
#define BMP_RLE4 2u
#define BMP_BITFIELDS 3u

struct bmp_header {
    uint32_t offset;      /* of the pixel array */
    uint32_t hsz;         /* DIB header size */
    uint32_t width, height; /* height without the sign that marks top-down rows */
    uint32_t bpp, compression;
    uint32_t header_end;  /* file header + DIB header + BITFIELDS masks */
    uint32_t palette;     /* entries stb reads, for bpp <= 8 */
    uint64_t row_bytes, data_bytes;
};

/* Parse and check the headers. limits NULL: probe (no size limit, no pixel-array checks). */
static int bmp_parse(const uint8_t *p, size_t len, const fmt_limits *limits, struct bmp_header *h,
                     fmt_msg *msg)
{
    memset(h, 0, sizeof *h);
    if (len < BMP_FILE_HEADER + 4)
        return fmt_fail(msg, FMT_ETRUNC, "BMP header truncated (file has %zu bytes)", len);
    h->offset = fmt_le_get32(p + 10);
    h->hsz = fmt_le_get32(p + 14);
    if (h->hsz != 12 && h->hsz != 40 && h->hsz != 56 && h->hsz != 108 && h->hsz != 124)
        return fmt_fail(msg, FMT_EUNSUPPORTED, "BMP header size %u not supported", h->hsz);
    if (len < BMP_FILE_HEADER + (size_t)h->hsz)
        return fmt_fail(msg, FMT_ETRUNC, "BMP header truncated (file has %zu bytes)", len);

    uint32_t planes;
    if (h->hsz == 12) { /* OS/2 1.x: unsigned 16-bit sizes, always bottom-up */
        h->width = fmt_le_get16(p + 18);
        h->height = fmt_le_get16(p + 20);
        planes = fmt_le_get16(p + 22);
        h->bpp = fmt_le_get16(p + 24);
        h->compression = BMP_RGB;
        if (h->width == 0 || h->height == 0)
            return fmt_fail(msg, FMT_ECORRUPT, "BMP size %ux%u invalid", h->width, h->height);
    } else {
        int32_t w = (int32_t)fmt_le_get32(p + 18), ht = (int32_t)fmt_le_get32(p + 22);
        planes = fmt_le_get16(p + 26);
        h->bpp = fmt_le_get16(p + 28);
        h->compression = fmt_le_get32(p + 30);
        if (w <= 0)
            return fmt_fail(msg, FMT_ECORRUPT, "BMP width %d invalid", (int)w);
        if (ht == 0 || ht == INT32_MIN)
            return fmt_fail(msg, FMT_ECORRUPT, "BMP height %d invalid", (int)ht);
        h->width = (uint32_t)w;
        h->height = ht < 0 ? (uint32_t)-ht : (uint32_t)ht;
    }
    if (planes != 1)
        return fmt_fail(msg, FMT_ECORRUPT, "BMP plane count %u invalid", planes);
    if (limits) {
        int rc = fmt_limits_check(limits, h->width, h->height, msg);
        if (rc)
            return rc;
    }

    switch (h->bpp) {
    case 1: case 4: case 8: case 16: case 24: case 32:
        break;
    default:
        return fmt_fail(msg, FMT_EUNSUPPORTED, "BMP bit depth %u not supported", h->bpp);
    }
    if (h->compression == BMP_RLE8 || h->compression == BMP_RLE4)
        return fmt_fail(msg, FMT_EUNSUPPORTED, "RLE-compressed BMP not supported");
    if (h->compression == BMP_BITFIELDS && h->bpp != 16 && h->bpp != 32)
        return fmt_fail(msg, FMT_ECORRUPT, "BMP bitfields with %u bits per pixel", h->bpp);
    if (h->compression != BMP_RGB && h->compression != BMP_BITFIELDS)
        return fmt_fail(msg, FMT_EUNSUPPORTED, "BMP compression %u not supported",
                        h->compression);
    /* stb reads no palette behind an OS/2 1.x header correctly, nor masks for 16/32 bits */
    if (h->hsz == 12 && h->bpp != 24)
        return fmt_fail(msg, FMT_EUNSUPPORTED, "OS/2 1.x BMP with %u bits per pixel not supported",
                        h->bpp);
    /* stb looks for a 56-byte header's masks behind it, where the pixels are */
    if (h->hsz == 56 && h->compression == BMP_BITFIELDS)
        return fmt_fail(msg, FMT_EUNSUPPORTED,
                        "BMP with a 56-byte header and bitfields not supported");

    /* A 40-byte header is followed by the three masks; later headers hold them inside. */
    h->header_end = BMP_FILE_HEADER + h->hsz +
                    (h->hsz == 40 && h->compression == BMP_BITFIELDS ? 12u : 0u);
    if (len < h->header_end)
        return fmt_fail(msg, FMT_ETRUNC, "BMP header truncated (file has %zu bytes)", len);
    if (h->offset < h->header_end)
        return fmt_fail(msg, FMT_ECORRUPT, "BMP pixel offset %u inside the header", h->offset);
    uint32_t gap = h->offset - h->header_end;
    if (h->bpp <= 8) {
        /* stb takes the whole gap as the palette (4 bytes an entry) */
        h->palette = gap / 4;
        if (h->palette == 0)
            return fmt_fail(msg, FMT_ECORRUPT, "BMP with %u bits per pixel has no palette",
                            h->bpp);
        if (h->palette > 256)
            return fmt_fail(msg, FMT_EUNSUPPORTED,
                            "BMP with %u bytes between header and pixels not supported", gap);
    } else if (gap) {
        return fmt_fail(msg, FMT_EUNSUPPORTED,
                        "BMP with %u bytes between header and pixels not supported", gap);
    }
    h->row_bytes = ((uint64_t)h->width * h->bpp + 31) / 32 * 4;
    h->data_bytes = h->row_bytes * h->height;
    return 0;
}

static int bmp_probe_channels(const struct bmp_header *h)
{
    return h->bpp == 32 ? 4 : 3;
}

int fmt_bmp_probe(const uint8_t *buf, size_t len, fmt_image_info *info, fmt_msg *msg)
{
    struct bmp_header h;
    int rc = bmp_parse(buf, len, NULL, &h, msg);
    if (rc)
        return rc;
    info->width = h.width;
    info->height = h.height;
    info->channels = (uint32_t)bmp_probe_channels(&h);
    return 0;
}

/* 0 if every pixel of a palette image names an entry stb read. */
static int bmp_check_indices(const uint8_t *buf, const struct bmp_header *h, fmt_msg *msg)
{
    if (h->palette >= (1u << h->bpp))
        return 0;
    const uint8_t *row = buf + h->offset;
    uint32_t per_byte = 8 / h->bpp, mask = (1u << h->bpp) - 1;
    for (uint32_t y = 0; y < h->height; y++, row += h->row_bytes) {
        for (uint32_t x = 0; x < h->width; x++) {
            uint32_t shift = 8 - h->bpp * (x % per_byte + 1);
            uint32_t v = (uint32_t)(row[x / per_byte] >> shift) & mask;
            if (v >= h->palette)
                return fmt_fail(msg, FMT_ECORRUPT,
                                "BMP pixel uses palette entry %u of %u", v, h->palette);
        }
    }
    return 0;
}

/* 16 bits per pixel: stb widens each 5- or 6-bit field by bit replication, Pillow (what the
 * README promises) scales it, v * 255 / max, rounding down: one level apart on a third of the
 * values. So the pixels stb decoded (rows top-down, RGB) are replaced by Pillow's values here.
 * Pillow reads the layouts 5-5-5 (BI_RGB, or those masks) and 5-6-5 and refuses any other; so do
 * we. */
static int bmp_masks16(const uint8_t *buf, const struct bmp_header *h, uint32_t m[3], fmt_msg *msg)
{
    if (h->compression != BMP_BITFIELDS) {
        m[0] = 0x7C00;
        m[1] = 0x03E0;
        m[2] = 0x001F;
        return 0;
    }
    for (int c = 0; c < 3; c++)
        m[c] = fmt_le_get32(buf + BMP_FILE_HEADER + BMP_INFO_HEADER + 4 * c);
    if (m[2] == 0x001F && ((m[0] == 0xF800 && m[1] == 0x07E0) || (m[0] == 0x7C00 && m[1] == 0x03E0)))
        return 0;
    return fmt_fail(msg, FMT_EUNSUPPORTED, "16-bit BMP with masks %04x/%04x/%04x not supported "
                    "(only 5-5-5 and 5-6-5)", m[0], m[1], m[2]);
}

static void bmp_pillow16(const uint8_t *buf, const struct bmp_header *h, const uint32_t m[3],
                         uint8_t *px)
{
    int top_down = h->hsz != 12 && (int32_t)fmt_le_get32(buf + BMP_FILE_HEADER + 8) < 0;
    unsigned shift[3], max[3];
    for (int c = 0; c < 3; c++) {
        shift[c] = (unsigned)__builtin_ctz(m[c]);
        max[c] = m[c] >> shift[c];
    }
    for (uint32_t y = 0; y < h->height; y++) {
        const uint8_t *row = buf + h->offset + (top_down ? y : h->height - 1 - y) * h->row_bytes;
        uint8_t *o = px + (size_t)y * h->width * 3;
        for (uint32_t x = 0; x < h->width; x++) {
            uint32_t v = fmt_le_get16(row + 2 * (size_t)x);
            for (int c = 0; c < 3; c++)
                o[3 * x + c] = (uint8_t)(((v & m[c]) >> shift[c]) * 255u / max[c]);
        }
    }
}

int fmt_bmp_decode(const uint8_t *buf, size_t len, const fmt_decode_opts *opts, fmt_image *out,
                   fmt_msg *msg)
{
    struct bmp_header h;
    uint8_t *px = NULL;
    int rc = bmp_parse(buf, len, &opts->limits, &h, msg);
    if (rc)
        goto leave;
    size_t avail = len > h.offset ? len - h.offset : 0;
    if (avail < h.data_bytes) {
        rc = fmt_fail(msg, FMT_ETRUNC,
                      "BMP pixel data truncated (expected %llu bytes, file has %zu)",
                      (unsigned long long)h.data_bytes, avail);
        goto leave;
    }
    uint64_t used = (uint64_t)h.offset + h.data_bytes; /* what stb may read; ignore the rest */
    if (used > INT_MAX) {
        rc = fmt_fail(msg, FMT_ETOOBIG, "BMP of %llu bytes too large to decode",
                      (unsigned long long)used);
        goto leave;
    }
    if (h.bpp <= 8 && (rc = bmp_check_indices(buf, &h, msg)))
        goto leave;
    uint32_t masks16[3];
    if (h.bpp == 16 && (rc = bmp_masks16(buf, &h, masks16, msg)))
        goto leave;

    int w = 0, ht = 0, comp = 0;
    px = stbi_load_from_memory(buf, (int)used, &w, &ht, &comp, 3);
    if (!px) {
        const char *why = stbi_failure_reason();
        if (why && strcmp(why, "outofmem") == 0)
            rc = fmt_fail(msg, ENOMEM, "out of memory decoding BMP");
        else
            rc = fmt_fail(msg, FMT_ECORRUPT, "corrupt BMP (%s)", why ? why : "unknown reason");
        goto leave;
    }
    if ((uint32_t)w != h.width || (uint32_t)ht != h.height) {
        rc = fmt_fail(msg, FMT_ECORRUPT, "BMP decoded as %dx%d, header says %ux%u", w, ht,
                      h.width, h.height);
        goto leave;
    }
    rc = fmt_image_reserve(out, h.width, h.height, opts->channels);
    if (rc) {
        fmt_fail(msg, rc, "cannot allocate %ux%u image", h.width, h.height);
        goto leave;
    }
    size_t npix = (size_t)h.width * h.height;
    if (h.bpp == 16)
        bmp_pillow16(buf, &h, masks16, px);
    if (opts->channels == 3)
        memcpy(out->pixels, px, npix * 3);
    else
        fmt_rgb_to_gray(px, out->pixels, npix);
leave:
    stbi_image_free(px);
    if (rc)
        fmt_image_free(out);
    return rc;
}

int fmt_bmp_encode(const fmt_image *img, uint8_t **out, size_t *out_len)
{
    if (!out || !out_len)
        return FMT_EINVAL;
    *out = NULL;
    *out_len = 0;
    if (!img || !img->pixels || img->width == 0 || img->height == 0 ||
        (img->channels != 1 && img->channels != 3))
        return FMT_EINVAL;
    if (img->width > INT32_MAX || img->height > INT32_MAX)
        return FMT_ETOOBIG;
    uint32_t bpp = img->channels == 3 ? 24 : 8;
    uint32_t palette = img->channels == 3 ? 0 : 256;
    uint64_t row = ((uint64_t)img->width * bpp + 31) / 32 * 4;
    uint64_t data = row * img->height;
    uint64_t offset = BMP_FILE_HEADER + BMP_INFO_HEADER + 4ull * palette;
    uint64_t total = offset + data;
    if (total > UINT32_MAX)
        return FMT_ETOOBIG; /* the header's file size field is 32-bit */
    uint8_t *b = calloc(1, (size_t)total); /* zeroed: the row padding */
    if (!b)
        return ENOMEM;
    b[0] = 'B';
    b[1] = 'M';
    fmt_le_put32(b + 2, (uint32_t)total);
    fmt_le_put32(b + 10, (uint32_t)offset);
    fmt_le_put32(b + 14, BMP_INFO_HEADER);
    fmt_le_put32(b + 18, img->width);
    fmt_le_put32(b + 22, img->height); /* positive: bottom-up, the layout every reader handles */
    fmt_le_put16(b + 26, 1);
    fmt_le_put16(b + 28, bpp);
    fmt_le_put32(b + 30, BMP_RGB);
    fmt_le_put32(b + 34, (uint32_t)data);
    fmt_le_put32(b + 38, 2835); /* 72 dpi */
    fmt_le_put32(b + 42, 2835);
    fmt_le_put32(b + 46, palette);
    for (uint32_t i = 0; i < palette; i++) {
        uint8_t *e = b + BMP_FILE_HEADER + BMP_INFO_HEADER + 4 * i;
        e[0] = e[1] = e[2] = (uint8_t)i;
    }
    size_t stride = (size_t)img->width * img->channels;
    for (uint32_t y = 0; y < img->height; y++) {
        const uint8_t *src = img->pixels + (size_t)(img->height - 1 - y) * stride;
        uint8_t *dst = b + offset + y * row;
        if (img->channels == 1) {
            memcpy(dst, src, stride);
            continue;
        }
        for (uint32_t x = 0; x < img->width; x++, src += 3, dst += 3) {
            dst[0] = src[2];
            dst[1] = src[1];
            dst[2] = src[0];
        }
    }
    *out = b;
    *out_len = (size_t)total;
    return 0;
}
