/* png.c - PNG probe, decode and encode through libspng.
 *
 * Every colour type and bit depth is decoded by spng to 8-bit RGB (SPNG_FMT_RGB8: palette
 * expanded, gray replicated, alpha and tRNS ignored, 16-bit samples reduced to their high byte),
 * or to 8-bit gray (SPNG_FMT_G8) when the file is gray of depth <= 8 and gray is wanted; two
 * cases follow Pillow instead of spng: 16-bit gray is clipped to 0..255 (png_gray16) and a
 * palette index past the palette is gray (png_short_palette, with a warning). A colour
 * file decoded to gray goes through RGB and fmt_luma. No ancillary chunk (gAMA, sBIT, ...) changes
 * the pixels. CRCs of all chunks are checked (spng's default) and the file is read up to IEND: a
 * damaged or cut file is an error even where the pixels came out complete.
 */
#include "codec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <spng.h>

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

int fmt_png_probe(const uint8_t *buf, size_t len, fmt_image_info *info, fmt_msg *msg)
{
    spng_ctx *ctx = spng_ctx_new(0);
    if (!ctx)
        return fmt_fail(msg, ENOMEM, "out of memory decoding PNG");
    struct spng_ihdr ihdr;
    int rc = 0;
    int err = spng_set_chunk_limits(ctx, PNG_CHUNK_SIZE_LIMIT, PNG_CHUNK_CACHE_LIMIT);
    if (!err)
        err = spng_set_png_buffer(ctx, buf, len);
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
    info->width = ihdr.width;
    info->height = ihdr.height;
    info->channels = png_channels(ihdr.color_type);
leave:
    spng_ctx_free(ctx);
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
    int rc = 0, err;
    uint32_t side = opts->limits.max_side < PNG_SPNG_MAX_SIDE ? opts->limits.max_side
                                                              : PNG_SPNG_MAX_SIDE;
    struct spng_ihdr ihdr;
    if ((err = spng_set_image_limits(ctx, side, side)) ||
        (err = spng_set_chunk_limits(ctx, PNG_CHUNK_SIZE_LIMIT, PNG_CHUNK_CACHE_LIMIT)) ||
        (err = spng_set_png_buffer(ctx, buf, len)))
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
    if (rc)
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
    int rc = 0, err;
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
