/* bmp.c - BMP and DIB probe and decode, and a 24-bit / 8-bit gray BMP encoder.
 *
 * The decoder is our own, written to Pillow's semantics (Pillow 9.4 BmpImagePlugin.py, its
 * BmpRleDecoder and the raw unpackers behind them): shardc stores a file exactly when
 * Image.open(f).convert("RGB") succeeds, with the same pixels. No maintained C library decodes
 * BMP that way (stb_image, libnsbmp, SDL and libbmp each differ from Pillow on palettes past their
 * end, bfOffBits, OS/2 headers, RLE row overflow or the bitfield layouts refused), and the format
 * is small. What Pillow does, and so what is done here:
 *   - Headers of 12 (OS/2 1.x: 16-bit sizes, 3-byte palette entries, always bottom-up), 40, 64
 *     (OS/2 2.x, read as 40), 108 and 124 bytes; others are refused. biPlanes is ignored. A file
 *     that starts with the header itself (a .dib: no "BM" file header) is read the same way, its
 *     pixels right behind the palette.
 *   - Height: top-down when the high byte of the height field is 0xFF (height = 2^32 - field).
 *   - The palette of 1/4/8-bit images: biClrUsed entries (0: 1 << bits), read right after the
 *     header (and a 40-byte header's masks), cut short by the end of the file; more than 65536
 *     refused, and more than 256 once read refused too (a non-grey palette). A palette that is
 *     exactly the grey ramp (black and white for two entries) makes a gray image, whose samples
 *     are read at 8 bits (1 for black and white) whatever the file's bit depth: Pillow unpacks
 *     such a file with the gray layout, and so does this decoder. A pixel naming an entry past
 *     the palette gets Pillow's fallback, the grey ramp (index i: gray level i), and a warning.
 *   - The pixels start at bfOffBits, or right after the palette when bfOffBits is 0, or
 *     bfOffBits + 4 * colours when bfOffBits points at the palette of a palette image. Rows are
 *     padded to 4 bytes; the last row's padding may be missing.
 *   - BI_BITFIELDS: 16-bit 5-6-5 and 5-5-5, 24-bit 8-8-8 in BGR order, and the 32-bit layouts
 *     BGRX, XBGR, ABGR, RGBA, BGRA (and all-zero masks: BGRA); any other layout is refused. Alpha
 *     is dropped. 16-bit fields are scaled, v * 255 / max, rounding down.
 *   - RLE8 and RLE4 (BmpRleDecoder): the pixel stream is one run of width * height indices; a run
 *     that passes the end of a row is cut there, absolute mode is not (its pixels run on into the
 *     next row; RLE4 absolute mode keeps count / 2 bytes, two pixels each), end of line pads the
 *     stream to a row boundary, delta skips right + up * width pixels (after two bytes that
 *     Pillow 9.4 reads and drops), absolute runs are aligned to even file offsets. Pixels never
 *     written are index 0. The stream must fill the image, or the file is refused.
 * Limits: the size is checked against fmt_limits before anything is allocated; every read is
 * bounded by the buffer.
 */
#include "codec.h"
#include "le.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define BMP_FILE_HEADER 14
#define BMP_INFO_HEADER 40
#define BMP_RGB 0u
#define BMP_RLE8 1u
#define BMP_RLE4 2u
#define BMP_BITFIELDS 3u
#define BMP_MAX_COLORS 65536u  /* Pillow: "Unsupported BMP Palette size" above */

/* How the pixels are laid out, after Pillow's choice of mode and raw mode. */
enum bmp_layout {
    BMP_INDEXED,    /* 1/4/8-bit indices (or gray levels) through the 256-entry table */
    BMP_BGR15,      /* 16-bit 5-5-5 */
    BMP_BGR16,      /* 16-bit 5-6-5 */
    BMP_BYTES       /* 24 or 32 bits: R, G, B at byte offsets rgb_at[] of each pixel */
};

struct bmp_header {
    uint32_t base;        /* 14 for a BMP file, 0 for a DIB */
    uint32_t hsz;         /* DIB header size */
    uint32_t width, height;
    int top_down;
    uint32_t bits, compression;
    enum bmp_layout layout;
    uint32_t unpack_bits; /* bits per pixel read from a row (BMP_INDEXED: 1, 4 or 8) */
    uint8_t rgb_at[3];    /* BMP_BYTES */
    uint64_t offset;      /* of the pixel data */
    uint64_t stride;      /* bytes per row in the file, from the file's bit depth */
    uint8_t table[256][3]; /* BMP_INDEXED: index -> RGB */
    uint32_t entries;     /* palette entries the file gave (BMP_INDEXED, not gray) */
    int gray;             /* the palette is the grey ramp: no palette lookup, no warning */
};

static int bmp_is_header_size(uint32_t hsz)
{
    return hsz == 12 || hsz == 40 || hsz == 64 || hsz == 108 || hsz == 124;
}

/* The 32-bit BI_BITFIELDS layouts Pillow reads: masks R, G, B, A and where R, G, B sit. */
static const struct {
    uint32_t m[4];
    uint8_t at[3];
} bmp_layouts32[] = {
    {{0xFF0000, 0xFF00, 0xFF, 0}, {2, 1, 0}},                  /* BGRX */
    {{0xFF000000, 0xFF0000, 0xFF00, 0}, {3, 2, 1}},            /* XBGR */
    {{0xFF000000, 0xFF0000, 0xFF00, 0xFF}, {3, 2, 1}},         /* ABGR */
    {{0xFF, 0xFF00, 0xFF0000, 0xFF000000}, {0, 1, 2}},         /* RGBA */
    {{0xFF0000, 0xFF00, 0xFF, 0xFF000000}, {2, 1, 0}},         /* BGRA */
    {{0, 0, 0, 0}, {2, 1, 0}},                                 /* BGRA */
};

static int bmp_masks(const uint8_t *p, size_t len, struct bmp_header *h, uint64_t *pos,
                     fmt_msg *msg)
{
    uint32_t m[4] = {0};
    if (h->hsz >= 56) {
        for (int c = 0; c < 4; c++)
            m[c] = fmt_le_get32(p + h->base + BMP_INFO_HEADER + 4 * c);
    } else {
        /* a 40-byte header is followed by three masks */
        if (len < *pos + 12)
            return fmt_fail(msg, FMT_ETRUNC, "BMP bitfield masks truncated (file has %zu bytes)",
                            len);
        for (int c = 0; c < 3; c++)
            m[c] = fmt_le_get32(p + *pos + 4 * c);
        *pos += 12;
    }
    if (h->bits == 32) {
        for (size_t i = 0; i < sizeof bmp_layouts32 / sizeof bmp_layouts32[0]; i++) {
            if (memcmp(m, bmp_layouts32[i].m, sizeof m) == 0) {
                h->layout = BMP_BYTES;
                memcpy(h->rgb_at, bmp_layouts32[i].at, 3);
                return 0;
            }
        }
    } else if (h->bits == 24 && m[0] == 0xFF0000 && m[1] == 0xFF00 && m[2] == 0xFF) {
        return 0;
    } else if (h->bits == 16 && m[0] == 0xF800 && m[1] == 0x7E0 && m[2] == 0x1F) {
        h->layout = BMP_BGR16;
        return 0;
    } else if (h->bits == 16 && m[0] == 0x7C00 && m[1] == 0x3E0 && m[2] == 0x1F) {
        return 0;
    }
    if (h->bits == 32)
        return fmt_fail(msg, FMT_EUNSUPPORTED, "BMP bitfields layout %08x/%08x/%08x/%08x not "
                        "supported", m[0], m[1], m[2], m[3]);
    return fmt_fail(msg, FMT_EUNSUPPORTED, "BMP bitfields layout %x/%x/%x with %u bits per pixel "
                    "not supported", m[0], m[1], m[2], h->bits);
}

/* The palette of an indexed image, at pos, and the table it makes (see the top of the file). */
static int bmp_palette(const uint8_t *p, size_t len, uint32_t colors, uint32_t entry_size,
                       struct bmp_header *h, uint64_t *pos, fmt_msg *msg)
{
    if (colors == 0 || colors > BMP_MAX_COLORS)
        return fmt_fail(msg, FMT_EUNSUPPORTED, "BMP palette size %u not supported", colors);
    uint64_t want = (uint64_t)entry_size * colors;
    uint64_t have = len > *pos ? len - *pos : 0;
    uint64_t got = want < have ? want : have;
    const uint8_t *pal = p + *pos;
    *pos += got;
    /* the grey ramp: entry i is (i, i, i) (i taken modulo 256), or black and white for two */
    int gray = 1;
    for (uint32_t i = 0; i < colors && gray; i++) {
        uint32_t v = colors == 2 ? (i ? 255u : 0u) : (i & 255u);
        uint64_t at = (uint64_t)i * entry_size;
        gray = at + 3 <= got && pal[at] == v && pal[at + 1] == v && pal[at + 2] == v;
    }
    for (uint32_t i = 0; i < 256; i++)
        h->table[i][0] = h->table[i][1] = h->table[i][2] = (uint8_t)i;
    if (gray) {
        h->gray = 1;
        h->unpack_bits = colors == 2 ? 1 : 8;
        if (colors == 2) /* black and white: one bit a pixel, 1 is white */
            h->table[1][0] = h->table[1][1] = h->table[1][2] = 255;
        return 0;
    }
    uint64_t entries = got / entry_size;
    if (entries > 256)
        return fmt_fail(msg, FMT_EUNSUPPORTED, "BMP palette of %llu entries not supported "
                        "(256 at most)", (unsigned long long)entries);
    h->entries = (uint32_t)entries;
    for (uint32_t i = 0; i < h->entries; i++) {
        h->table[i][0] = pal[i * entry_size + 2];
        h->table[i][1] = pal[i * entry_size + 1];
        h->table[i][2] = pal[i * entry_size];
    }
    return 0;
}

/* Parse and check the headers and the palette. limits NULL: probe (no size limit). */
static int bmp_parse(const uint8_t *p, size_t len, const fmt_limits *limits, struct bmp_header *h,
                     fmt_msg *msg)
{
    memset(h, 0, sizeof *h);
    h->base = len >= 2 && p[0] == 'B' && p[1] == 'M' ? BMP_FILE_HEADER : 0;
    if (len < h->base + 4)
        return fmt_fail(msg, FMT_ETRUNC, "BMP header truncated (file has %zu bytes)", len);
    uint64_t file_offset = h->base ? fmt_le_get32(p + 10) : 0;
    h->hsz = fmt_le_get32(p + h->base);
    if (!bmp_is_header_size(h->hsz))
        return fmt_fail(msg, FMT_EUNSUPPORTED, "BMP header size %u not supported", h->hsz);
    if (len < h->base + (size_t)h->hsz)
        return fmt_fail(msg, FMT_ETRUNC, "BMP header truncated (file has %zu bytes)", len);
    const uint8_t *d = p + h->base + 4; /* the header after its size field */
    uint32_t colors = 0, entry_size;
    if (h->hsz == 12) {
        h->width = fmt_le_get16(d);
        h->height = fmt_le_get16(d + 2);
        h->bits = fmt_le_get16(d + 6);
        h->compression = BMP_RGB;
        entry_size = 3;
    } else {
        h->top_down = d[7] == 0xFF;
        h->width = fmt_le_get32(d);
        h->height = fmt_le_get32(d + 4);
        if (h->top_down)
            h->height = (uint32_t)(0x100000000ull - h->height);
        h->bits = fmt_le_get16(d + 10);
        h->compression = fmt_le_get32(d + 12);
        colors = fmt_le_get32(d + 28);
        entry_size = 4;
    }
    if (h->width == 0 || h->height == 0)
        return fmt_fail(msg, FMT_ECORRUPT, "BMP size %ux%u invalid", h->width, h->height);
    if (limits) {
        int rc = fmt_limits_check(limits, h->width, h->height, msg);
        if (rc)
            return rc;
    }
    uint64_t pos = h->base + h->hsz;
    if (h->bits == 0 || h->bits > 32)
        return fmt_fail(msg, FMT_EUNSUPPORTED, "BMP bit depth %u not supported", h->bits);
    if (!colors)
        colors = h->bits >= 32 ? 0 : 1u << h->bits; /* only used below 16 bits */
    if (file_offset == BMP_FILE_HEADER + (uint64_t)h->hsz && h->bits <= 8)
        file_offset += 4ull * colors;
    switch (h->bits) {
    case 1: case 4: case 8:
        h->layout = BMP_INDEXED;
        h->unpack_bits = h->bits;
        break;
    case 16:
        h->layout = BMP_BGR15;
        break;
    case 24:
        h->layout = BMP_BYTES;
        memcpy(h->rgb_at, (uint8_t[3]){2, 1, 0}, 3);
        break;
    case 32:
        h->layout = BMP_BYTES;
        memcpy(h->rgb_at, (uint8_t[3]){2, 1, 0}, 3);
        break;
    default:
        return fmt_fail(msg, FMT_EUNSUPPORTED, "BMP bit depth %u not supported", h->bits);
    }
    int rc;
    if (h->compression == BMP_BITFIELDS) {
        if (h->bits <= 8)
            return fmt_fail(msg, FMT_EUNSUPPORTED, "BMP bitfields with %u bits per pixel not "
                            "supported", h->bits);
        if ((rc = bmp_masks(p, len, h, &pos, msg)))
            return rc;
    } else if (h->compression == BMP_RLE8 || h->compression == BMP_RLE4) {
        if (h->bits > 8)
            return fmt_fail(msg, FMT_EUNSUPPORTED, "RLE-compressed BMP with %u bits per pixel "
                            "not supported", h->bits);
    } else if (h->compression != BMP_RGB) {
        return fmt_fail(msg, FMT_EUNSUPPORTED, "BMP compression %u not supported",
                        h->compression);
    }
    if (h->layout == BMP_INDEXED) {
        if ((rc = bmp_palette(p, len, colors, entry_size, h, &pos, msg)))
            return rc;
        if (h->compression != BMP_RGB && h->gray && colors == 2)
            return fmt_fail(msg, FMT_EUNSUPPORTED, "RLE-compressed black and white BMP not "
                            "supported");
    }
    h->offset = file_offset ? file_offset : pos;
    if (h->compression != BMP_RLE8 && h->compression != BMP_RLE4)
        h->stride = ((uint64_t)h->width * h->bits + 31) / 32 * 4;
    return 0;
}

int fmt_bmp_probe(const uint8_t *buf, size_t len, fmt_image_info *info, fmt_msg *msg)
{
    struct bmp_header h;
    int rc = bmp_parse(buf, len, NULL, &h, msg);
    if (rc)
        return rc;
    info->width = h.width;
    info->height = h.height;
    info->channels = h.bits == 32 ? 4 : 3;
    return 0;
}

/* ---- pixels ---- */

/* Indices in raster order (row 0 first in the stream), one byte each, for an indexed image. */
static int bmp_rle(const uint8_t *p, size_t len, const struct bmp_header *h, uint8_t *idx,
                   fmt_msg *msg)
{
    const uint64_t xs = h->width, total = (uint64_t)h->width * h->height;
    const int rle4 = h->compression == BMP_RLE4;
    uint64_t pos = h->offset, n = 0, x = 0;
#define RLE_PUT(v) do { if (n < total) idx[n] = (uint8_t)(v); n++; } while (0)
    while (n < total) {
        if (pos + 2 > len)
            break;
        uint32_t count = p[pos], code = p[pos + 1];
        pos += 2;
        if (count) { /* a run, cut at the end of the row */
            if (x + count > xs)
                count = x < xs ? (uint32_t)(xs - x) : 0;
            for (uint32_t i = 0; i < count; i++)
                RLE_PUT(rle4 ? (i % 2 ? code & 15 : code >> 4) : code);
            x += count;
        } else if (code == 0) { /* end of line */
            n = (n + xs - 1) / xs * xs;
            x = 0;
        } else if (code == 1) { /* end of bitmap */
            break;
        } else if (code == 2) { /* delta: Pillow 9.4 drops two bytes before right and up */
            if (pos + 2 > len)
                break;
            pos += 2;
            if (pos + 2 > len)
                return fmt_fail(msg, FMT_ETRUNC, "BMP RLE delta truncated");
            n += p[pos] + (uint64_t)p[pos + 1] * xs;
            pos += 2;
            x = n % xs;
        } else { /* absolute mode */
            uint64_t nbytes = rle4 ? code / 2 : code;
            uint64_t got = len - pos < nbytes ? len - pos : nbytes;
            for (uint64_t i = 0; i < got; i++) {
                if (rle4) {
                    RLE_PUT(p[pos + i] >> 4);
                    RLE_PUT(p[pos + i] & 15);
                } else {
                    RLE_PUT(p[pos + i]);
                }
            }
            pos += got;
            if (got < nbytes)
                break;
            x += code;
            pos += pos % 2; /* even file offsets */
        }
    }
#undef RLE_PUT
    if (n < total)
        return fmt_fail(msg, FMT_ETRUNC, "BMP RLE data ends after %llu of %llu pixels",
                        (unsigned long long)n, (unsigned long long)total);
    return 0;
}

static void bmp_put(const struct bmp_header *h, uint32_t v, uint8_t *o, uint32_t *past)
{
    if (!h->gray && v >= h->entries)
        *past = v;
    memcpy(o, h->table[v], 3);
}

/* One file row (or RLE stream row) to RGB. */
static void bmp_row(const struct bmp_header *h, const uint8_t *row, uint8_t *o, uint32_t *past)
{
    uint32_t w = h->width;
    switch (h->layout) {
    case BMP_INDEXED:
        if (h->compression == BMP_RLE8 || h->compression == BMP_RLE4) {
            for (uint32_t x = 0; x < w; x++)
                bmp_put(h, row[x], o + 3 * (size_t)x, past);
            break;
        }
        for (uint32_t x = 0; x < w; x++) {
            uint32_t b = h->unpack_bits, per = 8 / b;
            uint32_t v = (row[x / per] >> (8 - b * (x % per + 1))) & ((1u << b) - 1);
            bmp_put(h, v, o + 3 * (size_t)x, past);
        }
        break;
    case BMP_BGR15:
    case BMP_BGR16:
        for (uint32_t x = 0; x < w; x++) {
            uint32_t v = fmt_le_get16(row + 2 * (size_t)x);
            uint8_t *q = o + 3 * (size_t)x;
            if (h->layout == BMP_BGR15) {
                q[0] = (uint8_t)(((v >> 10) & 31) * 255u / 31);
                q[1] = (uint8_t)(((v >> 5) & 31) * 255u / 31);
            } else {
                q[0] = (uint8_t)(((v >> 11) & 31) * 255u / 31);
                q[1] = (uint8_t)(((v >> 5) & 63) * 255u / 63);
            }
            q[2] = (uint8_t)((v & 31) * 255u / 31);
        }
        break;
    case BMP_BYTES: {
        size_t bpp = h->bits / 8;
        for (uint32_t x = 0; x < w; x++)
            for (int c = 0; c < 3; c++)
                o[3 * (size_t)x + c] = row[x * bpp + h->rgb_at[c]];
        break;
    }
    }
}

int fmt_bmp_decode(const uint8_t *buf, size_t len, const fmt_decode_opts *opts, fmt_image *out,
                   fmt_msg *msg)
{
    struct bmp_header h;
    uint8_t *idx = NULL, *rgb = NULL, *row = NULL;
    size_t rowlen = 0;
    int rc = bmp_parse(buf, len, &opts->limits, &h, msg);
    if (rc)
        goto leave;
    size_t npix = (size_t)h.width * h.height;
    if (h.compression == BMP_RLE8 || h.compression == BMP_RLE4) {
        idx = calloc(npix ? npix : 1, 1);
        if (!idx) {
            rc = fmt_fail(msg, ENOMEM, "cannot allocate %ux%u image", h.width, h.height);
            goto leave;
        }
        if ((rc = bmp_rle(buf, len, &h, idx, msg)))
            goto leave;
    } else {
        /* every row, the last one without its padding (Pillow's raw decoder stops after the
         * last row's pixels); gray rows read at 8 bits may be longer than the file's rows: the
         * rows then overlap, as in Pillow's mapped read, which wants height whole rows */
        uint32_t ub = h.layout == BMP_INDEXED ? h.unpack_bits : h.bits;
        uint64_t bytes = ((uint64_t)h.width * ub + 7) / 8;
        uint64_t need = h.offset + (h.height - 1) * h.stride + bytes;
        if (bytes > h.stride) {
            /* Pillow maps the file: rows past its end read the zeros of the mapping's last page */
            need = h.offset + h.height * h.stride;
            rowlen = (size_t)bytes;
            if (need <= len && !(row = calloc(rowlen, 1))) {
                rc = fmt_fail(msg, ENOMEM, "cannot allocate a BMP row");
                goto leave;
            }
        }
        if (need > len) {
            rc = fmt_fail(msg, FMT_ETRUNC, "BMP pixel data truncated (expected %llu bytes, file "
                          "has %llu)", (unsigned long long)(need - h.offset),
                          (unsigned long long)(len > h.offset ? len - h.offset : 0));
            goto leave;
        }
    }
    rc = fmt_image_reserve(out, h.width, h.height, opts->channels);
    if (rc) {
        fmt_fail(msg, rc, "cannot allocate %ux%u image", h.width, h.height);
        goto leave;
    }
    if (opts->channels == 1 && !(rgb = malloc((size_t)h.width * 3))) {
        rc = fmt_fail(msg, ENOMEM, "cannot allocate a BMP row");
        goto leave;
    }
    uint32_t past = 0;
    int any_past = 0;
    for (uint32_t r = 0; r < h.height; r++) {
        const uint8_t *src = idx ? idx + (size_t)r * h.width : buf + h.offset + r * h.stride;
        if (row) { /* overlapping gray rows: the part inside the file, zeros after it */
            size_t at = (size_t)(h.offset + r * h.stride);
            size_t n = len - at < rowlen ? len - at : rowlen;
            memcpy(row, buf + at, n);
            memset(row + n, 0, rowlen - n);
            src = row;
        }
        uint32_t y = h.top_down ? r : h.height - 1 - r;
        uint8_t *o = opts->channels == 3 ? out->pixels + (size_t)y * h.width * 3 : rgb;
        uint32_t was = past;
        past = UINT32_MAX;
        bmp_row(&h, src, o, &past);
        if (past != UINT32_MAX)
            any_past = 1;
        else
            past = was;
        if (opts->channels == 1)
            fmt_rgb_to_gray(rgb, out->pixels + (size_t)y * h.width, h.width);
    }
    if (any_past)
        fmt_fail(msg, 0, "BMP pixel uses palette entry %u of %u (decoded as gray %u, as Pillow "
                 "does)", past, h.entries, past);
leave:
    free(idx);
    free(rgb);
    free(row);
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
