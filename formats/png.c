/* png.c - PNG probe, decode and encode through libspng.
 *
 * Every colour type and bit depth is decoded by spng to 8-bit RGB (SPNG_FMT_RGB8: palette
 * expanded, gray replicated, alpha and tRNS ignored, 16-bit samples reduced to their high byte),
 * or to 8-bit gray (SPNG_FMT_G8) when the file is gray of depth <= 8 and gray is wanted; two
 * cases follow Pillow instead of spng: 16-bit gray is clipped to 0..255 (png_gray16) and a
 * palette index past the palette is gray (png_short_palette, with a warning). A colour
 * file decoded to gray goes through RGB and fmt_luma. No ancillary chunk (gAMA, sBIT, ...) changes
 * the pixels. CRCs of all chunks are checked (spng's default) and the file is read up to IEND: a
 * damaged or cut file is an error even where the pixels came out complete. What Pillow refuses
 * and spng reads (APNG sequence errors, text chunks inflating past Pillow's limits, a zTXt
 * compression method) is found by a walk of our own over the chunks (png_pillow_chunks); an IHDR
 * compression or interlace method Pillow ignores is normalised before spng sees it.
 */
#include "codec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <spng.h>
#include <zlib.h>

/* Limits on the chunks spng keeps in memory (text, ICC profiles, EXIF, unknown chunks), which are
 * otherwise only bounded by the file: far above what real files carry. */
#define PNG_CHUNK_SIZE_LIMIT (64u * 1024 * 1024)
#define PNG_CHUNK_CACHE_LIMIT (128u * 1024 * 1024)
#define PNG_SPNG_MAX_SIDE 0x7fffffffu /* spng refuses larger limits (PNG's own maximum) */

static int png_rc(int err)
{
    switch (err) {
    case SPNG_EMEM:
        return ENOMEM;
    case SPNG_IO_EOF:
    case SPNG_EOF:
        return FMT_ETRUNC;
    case SPNG_EUSER_WIDTH:
    case SPNG_EUSER_HEIGHT:
    case SPNG_ECHUNK_LIMITS:
        return FMT_ETOOBIG;
    default:
        return FMT_ECORRUPT;
    }
}

static int png_fail(fmt_msg *msg, int err)
{
    int rc = png_rc(err);
    if (err == SPNG_ECHUNK_CRC)
        return fmt_fail(msg, rc, "PNG CRC error (%s)", spng_strerror(err));
    if (rc == FMT_ETRUNC)
        return fmt_fail(msg, rc, "PNG truncated (%s)", spng_strerror(err));
    if (rc == ENOMEM)
        return fmt_fail(msg, rc, "out of memory decoding PNG");
    if (err == SPNG_ECHUNK_LIMITS)
        return fmt_fail(msg, rc, "PNG chunk exceeds limit of %u bytes (%s)",
                        PNG_CHUNK_SIZE_LIMIT, spng_strerror(err));
    if (rc == FMT_ETOOBIG)
        return fmt_fail(msg, rc, "PNG %s", spng_strerror(err));
    return fmt_fail(msg, rc, "corrupt PNG (%s)", spng_strerror(err));
}

static uint32_t png_channels(uint8_t color_type)
{
    switch (color_type) {
    case SPNG_COLOR_TYPE_GRAYSCALE:
        return 1;
    case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA:
        return 2;
    case SPNG_COLOR_TYPE_TRUECOLOR_ALPHA:
        return 4;
    default: /* truecolor; indexed: a palette of RGB colours */
        return 3;
    }
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* ---- what Pillow refuses that spng reads ----
 *
 * Pillow 9.4's PngImagePlugin runs a handler for each chunk up to the first IDAT or fdAT when it
 * opens a file and, once the image data is decoded, for each chunk after it up to IEND (load_end;
 * in an animated file only up to the next fcTL). spng ignores the APNG chunks and does not
 * inflate text it is not asked for, so the handlers that raise are mirrored by a walk of our own
 * over the file bytes. Truncation, bad CRCs and bad chunk names are left to spng. */

#define PNG_PIL_TEXT_CHUNK (1024u * 1024)              /* MAX_TEXT_CHUNK (ImageFile.SAFEBLOCK) */
#define PNG_PIL_TEXT_MEMORY (64u * PNG_PIL_TEXT_CHUNK) /* MAX_TEXT_MEMORY */

struct png_walk {
    uint32_t width, height; /* IHDR's */
    int64_t seq;            /* the last APNG sequence number; -1 before the first fcTL */
    uint32_t frames;        /* acTL's frame count, 0 while there is none (Pillow's None) */
    int bbox;               /* an fcTL was seen (Pillow's info["bbox"]) */
    uint32_t bx, by, bw, bh;
    uint64_t text;          /* Pillow's text_memory */
    uint8_t *z;             /* inflate output, PNG_PIL_TEXT_CHUNK bytes, allocated when needed */
};

/* Python's zlib.decompressobj().decompress(in, MAX_TEXT_CHUNK) as Pillow's _safe_zlib_decompress
 * uses it: 1 when it raises "Decompressed Data Too Large" (the output limit reached with input
 * left over), 0 otherwise, with the output in w->z and its length in *out, or *out = SIZE_MAX for
 * a zlib error (which Pillow catches). -1 when out of memory. */
static int png_pil_inflate(struct png_walk *w, const uint8_t *in, size_t n, size_t *out)
{
    if (!w->z && !(w->z = malloc(PNG_PIL_TEXT_CHUNK)))
        return -1;
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit(&z) != Z_OK)
        return -1;
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)n; /* a chunk is at most 2^31 - 1 bytes */
    z.next_out = w->z;
    z.avail_out = PNG_PIL_TEXT_CHUNK;
    int err;
    do
        err = inflate(&z, Z_SYNC_FLUSH);
    while (err == Z_OK && z.avail_out > 0 && z.avail_in > 0);
    int rc = 0;
    *out = PNG_PIL_TEXT_CHUNK - z.avail_out;
    if (err == Z_MEM_ERROR)
        rc = -1;
    else if (err != Z_OK && err != Z_BUF_ERROR && err != Z_STREAM_END)
        *out = SIZE_MAX;
    else if (err != Z_STREAM_END && z.avail_out == 0 && z.avail_in > 0)
        rc = 1;
    inflateEnd(&z);
    return rc;
}

/* Python's strict UTF-8 decoder: 1 if p[0..n) decodes, with the code points counted in *count. */
static int png_utf8(const uint8_t *p, size_t n, uint64_t *count)
{
    uint64_t c = 0;
    for (size_t i = 0; i < n; c++) {
        int k = fmt_utf8_len(p + i, n - i);
        if (k == 0)
            return 0;
        i += (size_t)k;
    }
    *count = c;
    return 1;
}

static const uint8_t *png_nul(const uint8_t *p, size_t n)
{
    return memchr(p, 0, n);
}

/* The text handlers (tEXt, zTXt, iTXt) and iCCP: Pillow refuses a compression method other than
 * 0 in zTXt (iTXt skips the chunk; iCCP reads the byte before it, the name's NUL, so only an
 * iCCP without a NUL is refused, when its last byte is not 0), a compressed field that inflates
 * past 1 MiB, and more than 64 MiB of text in all. */
static int png_pil_text(struct png_walk *w, const uint8_t *t, const uint8_t *d, size_t n,
                        fmt_msg *msg)
{
    const uint8_t *nul = png_nul(d, n), *v = nul ? nul + 1 : d + n;
    size_t klen = (size_t)(v - d) - (nul != NULL), vn = n - (size_t)(v - d), zn;
    uint64_t add = 0;
    int z = 0;
    if (!memcmp(t, "tEXt", 4)) {
        add = klen ? vn : 0;
    } else if (!memcmp(t, "zTXt", 4)) {
        if (vn && v[0] != 0)
            return fmt_fail(msg, FMT_ECORRUPT, "PNG zTXt chunk with unknown compression method %u "
                            "(Pillow refuses it)", v[0]);
        if ((z = png_pil_inflate(w, v + !!vn, vn - !!vn, &zn)) == 0 && klen && zn != SIZE_MAX)
            add = zn;
    } else if (!memcmp(t, "iTXt", 4)) {
        if (!nul || vn < 2)
            return 0;
        uint8_t cf = v[0], cm = v[1];
        const uint8_t *lang = v + 2, *e1 = png_nul(lang, vn - 2);
        if (!e1)
            return 0;
        const uint8_t *tk = e1 + 1, *e2 = png_nul(tk, (size_t)(d + n - tk));
        if (!e2)
            return 0;
        const uint8_t *txt = e2 + 1;
        size_t tn = (size_t)(d + n - txt);
        if (cf != 0) {
            if (cm != 0)
                return 0;
            if ((z = png_pil_inflate(w, txt, tn, &zn)) != 0)
                goto inflated;
            if (zn == SIZE_MAX)
                return 0;
            txt = w->z;
            tn = zn;
        }
        uint64_t c;
        if (png_utf8(lang, (size_t)(e1 - lang), &c) && png_utf8(tk, (size_t)(e2 - tk), &c) &&
            png_utf8(txt, tn, &c))
            add = c;
    } else { /* iCCP */
        if (n == 0)
            return fmt_fail(msg, FMT_ECORRUPT, "PNG iCCP chunk is empty (Pillow refuses it)");
        uint8_t cm = nul ? 0 : d[n - 1];
        if (cm != 0)
            return fmt_fail(msg, FMT_ECORRUPT, "PNG iCCP chunk without a NUL after the profile "
                            "name: Pillow reads compression method %u and refuses it", cm);
        size_t skip = nul ? (size_t)(nul - d) + 2 : 1;
        z = png_pil_inflate(w, d + (skip < n ? skip : n), skip < n ? n - skip : 0, &zn);
    }
inflated:
    if (z < 0)
        return fmt_fail(msg, ENOMEM, "out of memory decoding PNG");
    if (z > 0)
        return fmt_fail(msg, FMT_ETOOBIG, "PNG %.4s chunk inflates to more than %u bytes "
                        "(Pillow: Decompressed Data Too Large)", (const char *)t,
                        PNG_PIL_TEXT_CHUNK);
    w->text += add;
    if (w->text > PNG_PIL_TEXT_MEMORY)
        return fmt_fail(msg, FMT_ETOOBIG, "PNG text chunks hold more than %u bytes of text "
                        "(Pillow's MAX_TEXT_MEMORY)", PNG_PIL_TEXT_MEMORY);
    return 0;
}

/* acTL, fcTL and fdAT as Pillow checks them: each long enough for its fields, sequence numbers
 * 0, 1, 2, ... over fcTL and fdAT (an fdAT before any fcTL is out of sequence), and each frame
 * region inside the image. */
static int png_pil_apng(struct png_walk *w, const uint8_t *t, const uint8_t *d, size_t n,
                        fmt_msg *msg)
{
    static const struct {
        char type[5];
        size_t min;
    } need[] = {{"acTL", 8}, {"fcTL", 26}, {"fdAT", 4}};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (!memcmp(t, need[i].type, 4) && n < need[i].min)
            return fmt_fail(msg, FMT_ECORRUPT, "PNG %s chunk of %zu bytes truncated (Pillow "
                            "refuses it)", need[i].type, n);
    if (!memcmp(t, "acTL", 4)) {
        uint32_t f = be32(d);
        if (w->frames) /* a second acTL: Pillow forgets the animation */
            w->frames = 0;
        else if (f != 0 && f <= 0x80000000u)
            w->frames = f;
        return 0;
    }
    int64_t seq = be32(d);
    if (w->seq < 0 && !memcmp(t, "fdAT", 4))
        return fmt_fail(msg, FMT_ECORRUPT, "PNG fdAT chunk before any fcTL (Pillow: APNG "
                        "contains frame sequence errors)");
    if (seq != w->seq + 1)
        return fmt_fail(msg, FMT_ECORRUPT, "PNG %.4s chunk with sequence number %lld, expected "
                        "%lld (Pillow: APNG contains frame sequence errors)", (const char *)t,
                        (long long)seq, (long long)(w->seq + 1));
    w->seq = seq;
    if (!memcmp(t, "fcTL", 4)) {
        uint32_t fw = be32(d + 4), fh = be32(d + 8), fx = be32(d + 12), fy = be32(d + 16);
        if ((uint64_t)fx + fw > w->width || (uint64_t)fy + fh > w->height)
            return fmt_fail(msg, FMT_ECORRUPT, "PNG fcTL chunk: frame %ux%u at (%u, %u) outside "
                            "the %ux%u image (Pillow: APNG contains invalid frames)", fw, fh, fx,
                            fy, w->width, w->height);
        w->bbox = 1;
        w->bx = fx, w->by = fy, w->bw = fw, w->bh = fh;
    }
    return 0;
}

static int png_is_cid(const uint8_t *t)
{
    for (int i = 0; i < 4; i++)
        if (!((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= 'A' && t[i] <= 'Z') ||
              (t[i] >= '0' && t[i] <= '9') || t[i] == '_'))
            return 0;
    return 1;
}

/* 0, or the reason Pillow would refuse the file (FMT_ECORRUPT, FMT_ETOOBIG) or ENOMEM. */
static int png_pillow_chunks(const uint8_t *buf, size_t len, fmt_msg *msg)
{
    struct png_walk w = {.seq = -1};
    int rc = 0, image = 0, animated = 0;
    size_t pos = 8;
    while (rc == 0 && len >= pos && len - pos >= 12) {
        const uint8_t *t = buf + pos + 4, *d = buf + pos + 8;
        size_t n = be32(buf + pos);
        if (!png_is_cid(t) || n > len - pos - 12)
            break; /* spng's to refuse */
        pos += n + 12;
        if (!memcmp(t, "IEND", 4) || (image && animated && !memcmp(t, "fcTL", 4)))
            break;
        if (!memcmp(t, "IHDR", 4) && n >= 13) {
            w.width = be32(d);
            w.height = be32(d + 4);
        } else if (!memcmp(t, "acTL", 4) || !memcmp(t, "fcTL", 4) || !memcmp(t, "fdAT", 4)) {
            rc = png_pil_apng(&w, t, d, n, msg);
        } else if (!memcmp(t, "tEXt", 4) || !memcmp(t, "zTXt", 4) || !memcmp(t, "iTXt", 4) ||
                   !memcmp(t, "iCCP", 4)) {
            rc = png_pil_text(&w, t, d, n, msg);
        }
        if (rc || image || (memcmp(t, "IDAT", 4) && memcmp(t, "fdAT", 4)))
            continue;
        /* the first image data: Pillow's frame 0, drawn in the last fcTL's region */
        image = 1;
        animated = (w.frames ? w.frames : 1) + (w.frames && !w.bbox) > 1;
        if (w.bbox && (w.bx || w.by || w.bw != w.width || w.bh != w.height))
            rc = fmt_fail(msg, FMT_EUNSUPPORTED, "PNG fcTL chunk: first frame %ux%u at (%u, %u) "
                          "is not the whole %ux%u image", w.bw, w.bh, w.bx, w.by, w.width,
                          w.height);
    }
    free(w.z);
    return rc;
}

/* Pillow ignores IHDR's compression method and reads any non-zero interlace method as Adam7;
 * spng refuses both. When the IHDR is otherwise sound (its CRC right), a copy of the file with
 * the two bytes as spng wants them (and the CRC redone) is handed to spng instead: *copy is that
 * copy (the caller frees it), or NULL when the file is used as it is. Returns 0 or ENOMEM. */
static int png_pillow_ihdr(const uint8_t *buf, size_t len, uint8_t **copy)
{
    *copy = NULL;
    if (len < 33 || be32(buf + 8) != 13 || memcmp(buf + 12, "IHDR", 4) ||
        (buf[26] == 0 && buf[28] <= 1) || crc32(0, buf + 12, 17) != be32(buf + 29))
        return 0;
    uint8_t *c = malloc(len);
    if (!c)
        return ENOMEM;
    memcpy(c, buf, len);
    c[26] = 0;
    c[28] = c[28] ? 1 : 0;
    uint32_t crc = (uint32_t)crc32(0, c + 12, 17);
    for (int i = 0; i < 4; i++)
        c[29 + i] = (uint8_t)(crc >> (24 - 8 * i));
    *copy = c;
    return 0;
}

int fmt_png_probe(const uint8_t *buf, size_t len, fmt_image_info *info, fmt_msg *msg)
{
    spng_ctx *ctx = spng_ctx_new(0);
    if (!ctx)
        return fmt_fail(msg, ENOMEM, "out of memory decoding PNG");
    struct spng_ihdr ihdr;
    uint8_t *copy;
    int rc = png_pillow_ihdr(buf, len, &copy);
    if (rc) {
        fmt_fail(msg, rc, "out of memory decoding PNG");
        goto leave;
    }
    int err = spng_set_chunk_limits(ctx, PNG_CHUNK_SIZE_LIMIT, PNG_CHUNK_CACHE_LIMIT);
    if (!err)
        err = spng_set_png_buffer(ctx, copy ? copy : buf, len);
    if (!err)
        err = spng_get_ihdr(ctx, &ihdr);
    /* spng checks a chunk's CRC when it reads the next chunk header: read on to the first IDAT,
     * so that a damaged IHDR is not reported as a valid size */
    if (!err)
        err = spng_decode_chunks(ctx);
    if (err) {
        rc = png_fail(msg, err);
        goto leave;
    }
    if ((rc = png_pillow_chunks(buf, len, msg)))
        goto leave;
    info->width = ihdr.width;
    info->height = ihdr.height;
    info->channels = png_channels(ihdr.color_type);
leave:
    spng_ctx_free(ctx);
    free(copy);
    return rc;
}

/* An indexed image whose palette has fewer entries than its bit depth can address: spng maps
 * an index past the palette to black, Pillow to its grey ramp (index i: gray level i); the PNG
 * specification calls it an error, Pillow opens the file. So the indices are decoded as they are
 * (SPNG_FMT_PNG: packed rows of bit_depth bits), the palette is applied here (what SPNG_FMT_RGB8
 * does: tRNS and gamma are not applied) with Pillow's fallback, and the first index past the
 * palette is named in a warning. out is allocated RGB by the caller. Returns an spng error or an
 * FMT code (*rc). */
static int png_short_palette(spng_ctx *ctx, const struct spng_ihdr *ih, const struct spng_plte *pl,
                             fmt_image *out, fmt_msg *msg, int *rc)
{
    size_t size;
    int err = spng_decoded_image_size(ctx, SPNG_FMT_PNG, &size);
    if (err)
        return err;
    uint8_t *idx = malloc(size ? size : 1);
    if (!idx) {
        *rc = fmt_fail(msg, ENOMEM, "out of memory decoding PNG");
        return 0;
    }
    if ((err = spng_decode_image(ctx, idx, size, SPNG_FMT_PNG, 0)) == 0) {
        unsigned depth = ih->bit_depth, mask = (1u << depth) - 1;
        size_t stride = ((size_t)ih->width * depth + 7) / 8;
        int past = 0;
        for (uint32_t y = 0; y < ih->height; y++) {
            const uint8_t *row = idx + (size_t)y * stride;
            uint8_t *px = out->pixels + (size_t)y * ih->width * 3;
            for (uint32_t x = 0; x < ih->width; x++) {
                size_t bit = (size_t)x * depth;
                unsigned v = (row[bit / 8] >> (8 - depth - bit % 8)) & mask;
                if (v >= pl->n_entries) {
                    if (!past++)
                        fmt_fail(msg, 0, "PNG palette index %u out of range (the palette has %u "
                                 "entries) at (%u, %u): decoded as gray %u, as Pillow does", v,
                                 pl->n_entries, x, y, v);
                    px[3 * x] = px[3 * x + 1] = px[3 * x + 2] = (uint8_t)v;
                    continue;
                }
                px[3 * x] = pl->entries[v].red;
                px[3 * x + 1] = pl->entries[v].green;
                px[3 * x + 2] = pl->entries[v].blue;
            }
        }
    }
    free(idx);
    return err;
}

/* 16-bit gray: Pillow 9.4 opens it as mode I (32-bit integers) and its conversion to RGB or L
 * clips each sample to 0..255, so every sample from 255 up is white. That is the rule here too
 * (where the other 16-bit layouts keep their high byte, as Pillow's do). out is RGB. */
static int png_gray16(spng_ctx *ctx, const struct spng_ihdr *ih, fmt_image *out, fmt_msg *msg,
                      int *rc)
{
    size_t size;
    int err = spng_decoded_image_size(ctx, SPNG_FMT_RAW, &size);
    if (err)
        return err;
    if (size != (size_t)ih->width * ih->height * 2) {
        *rc = fmt_fail(msg, FMT_ECORRUPT, "unexpected PNG output size %zu", size);
        return 0;
    }
    uint8_t *raw = malloc(size ? size : 1);
    if (!raw) {
        *rc = fmt_fail(msg, ENOMEM, "out of memory decoding PNG");
        return 0;
    }
    if ((err = spng_decode_image(ctx, raw, size, SPNG_FMT_RAW, 0)) == 0) {
        size_t npix = (size_t)ih->width * ih->height;
        for (size_t i = 0; i < npix; i++) {
            unsigned v = (unsigned)raw[2 * i] << 8 | raw[2 * i + 1]; /* big-endian */
            uint8_t g = v > 255 ? 255 : (uint8_t)v;
            out->pixels[3 * i] = out->pixels[3 * i + 1] = out->pixels[3 * i + 2] = g;
        }
    }
    free(raw);
    return err;
}

int fmt_png_decode(const uint8_t *buf, size_t len, const fmt_decode_opts *opts, fmt_image *out,
                   fmt_msg *msg)
{
    spng_ctx *ctx = spng_ctx_new(0);
    if (!ctx)
        return fmt_fail(msg, ENOMEM, "out of memory decoding PNG");
    int rc = 0, err = 0;
    uint32_t side = opts->limits.max_side < PNG_SPNG_MAX_SIDE ? opts->limits.max_side
                                                              : PNG_SPNG_MAX_SIDE;
    struct spng_ihdr ihdr;
    uint8_t *copy;
    if ((rc = png_pillow_ihdr(buf, len, &copy))) {
        fmt_fail(msg, rc, "out of memory decoding PNG");
        goto leave;
    }
    if ((err = spng_set_image_limits(ctx, side, side)) ||
        (err = spng_set_chunk_limits(ctx, PNG_CHUNK_SIZE_LIMIT, PNG_CHUNK_CACHE_LIMIT)) ||
        (err = spng_set_png_buffer(ctx, copy ? copy : buf, len)))
        goto leave;
    err = spng_get_ihdr(ctx, &ihdr);
    if ((err == SPNG_EUSER_WIDTH || err == SPNG_EUSER_HEIGHT) && len >= 24) {
        /* spng stopped at its copy of our side limit; name the size as the other codecs do */
        rc = fmt_limits_check(&opts->limits, be32(buf + 16), be32(buf + 20), msg);
        if (rc)
            goto leave;
    }
    /* on to the first IDAT: checks IHDR's CRC before its size is believed (see probe); only a
     * side above the limit is refused earlier, by spng itself */
    if (err || (err = spng_decode_chunks(ctx)))
        goto leave;
    rc = fmt_limits_check(&opts->limits, ihdr.width, ihdr.height, msg);
    if (rc || (rc = png_pillow_chunks(buf, len, msg)))
        goto leave;

    int fmt = SPNG_FMT_RGB8;
    if (opts->channels == 1 && ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE && ihdr.bit_depth <= 8)
        fmt = SPNG_FMT_G8;
    size_t size;
    if ((err = spng_decoded_image_size(ctx, fmt, &size)))
        goto leave;
    rc = fmt_image_reserve(out, ihdr.width, ihdr.height, fmt == SPNG_FMT_G8 ? 1 : 3);
    if (rc) {
        fmt_fail(msg, rc, "cannot allocate %ux%u image", ihdr.width, ihdr.height);
        goto leave;
    }
    if (size != (size_t)out->width * out->height * out->channels) {
        rc = fmt_fail(msg, FMT_ECORRUPT, "unexpected PNG output size %zu", size);
        goto leave;
    }
    struct spng_plte plte;
    if (ihdr.color_type == SPNG_COLOR_TYPE_INDEXED && fmt == SPNG_FMT_RGB8 &&
        spng_get_plte(ctx, &plte) == 0 && plte.n_entries < (1u << ihdr.bit_depth)) {
        if ((err = png_short_palette(ctx, &ihdr, &plte, out, msg, &rc)) || rc)
            goto leave;
    } else if (ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE && ihdr.bit_depth == 16) {
        if ((err = png_gray16(ctx, &ihdr, out, msg, &rc)) || rc)
            goto leave;
    } else if ((err = spng_decode_image(ctx, out->pixels, size, fmt, 0))) {
        goto leave;
    }
    /* spng stops once the image data is complete; the chunks after it (the last IDAT's CRC
     * included) are only read here, up to IEND */
    if ((err = spng_decode_chunks(ctx)))
        goto leave;
    if (opts->channels == 1 && out->channels == 3)
        fmt_image_rgb_to_gray_inplace(out);
leave:
    if (err && !rc)
        rc = png_fail(msg, err);
    if (rc)
        fmt_image_free(out);
    spng_ctx_free(ctx);
    free(copy);
    return rc;
}

int fmt_png_encode(const fmt_image *img, int level, uint8_t **out, size_t *out_len)
{
    if (!out || !out_len)
        return FMT_EINVAL;
    *out = NULL;
    *out_len = 0;
    if (!img || !img->pixels || img->width == 0 || img->height == 0 ||
        (img->channels != 1 && img->channels != 3) || level < 0 || level > 9)
        return FMT_EINVAL;
    if (img->width > PNG_SPNG_MAX_SIDE || img->height > PNG_SPNG_MAX_SIDE)
        return FMT_ETOOBIG;
    spng_ctx *ctx = spng_ctx_new(SPNG_CTX_ENCODER);
    if (!ctx)
        return ENOMEM;
    struct spng_ihdr ihdr = {
        .width = img->width,
        .height = img->height,
        .bit_depth = 8,
        .color_type = img->channels == 3 ? SPNG_COLOR_TYPE_TRUECOLOR : SPNG_COLOR_TYPE_GRAYSCALE,
    };
    size_t size = (size_t)img->width * img->height * img->channels;
    int rc = 0, err = 0;
    if ((err = spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1)) ||
        (err = spng_set_ihdr(ctx, &ihdr)) ||
        (err = spng_set_option(ctx, SPNG_IMG_COMPRESSION_LEVEL, level)))
        goto leave;
    /* Level 0 files exist to measure reading without decompression work: no filters either, so
     * the IDAT payload is the raw rows (each behind its filter-type byte). */
    if (level == 0 && (err = spng_set_option(ctx, SPNG_FILTER_CHOICE, SPNG_DISABLE_FILTERING)))
        goto leave;
    if ((err = spng_encode_image(ctx, img->pixels, size, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE)))
        goto leave;
    size_t len = 0;
    uint8_t *png = spng_get_png_buffer(ctx, &len, &err); /* ours now: spng allocates with malloc */
    if (!png) {
        if (!err)
            err = SPNG_EINTERNAL;
        goto leave;
    }
    *out = png;
    *out_len = len;
leave:
    if (err)
        rc = err == SPNG_EMEM ? ENOMEM : FMT_EINVAL;
    spng_ctx_free(ctx);
    return rc;
}
