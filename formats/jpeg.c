/* jpeg.c - JPEG probe, decode and encode through the libjpeg API of libjpeg-turbo.
 *
 * Decoding uses libjpeg's defaults (JDCT_ISLOW, fancy upsampling), so a full-size decode equals
 * `djpeg -ppm` and Pillow byte for byte. libjpeg reports trouble in two ways: error_exit for fatal
 * errors (a longjmp out of the decode here) and emit_message(-1) for "corrupt data" warnings,
 * after which it carries on. Pillow ignores the warnings and keeps what libjpeg decoded, so a
 * warning is not an error here either: the image is decoded to the end with the same pixels and
 * the first warning is handed back in msg (image.h). The one exception is the end of the data
 * (JWRN_JPEG_EOF): libjpeg's memory source then pretends an EOI and fills the rest with gray,
 * where Pillow's reader finds the file truncated and refuses it; so do we.
 *
 * setjmp discipline: each setjmp lives in a small *_run function whose state is entirely in a
 * struct owned by its caller, so nothing read after the longjmp is an automatic variable of the
 * function that called setjmp (whose values would be indeterminate). The caller releases what
 * the struct holds, whichever way *_run returned.
 */
#include "codec.h"

#include <errno.h>
#include <setjmp.h>
#include <stdio.h> /* jpeglib.h needs FILE */
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

/* libjpeg's own memory cap (used for the whole-image coefficient buffers of progressive and
 * multi-scan files, the allocations a small hostile file can make large). Above what any image
 * within the default pixel limit needs: 4 full-resolution components of 178956970 pixels at 2
 * bytes per coefficient is 1.43 GB. */
#define JPEG_MAX_MEMORY (2048L * 1024 * 1024)
/* A progressive file may hold any number of scans, each a full pass over the coefficients: a CPU
 * bomb. Real encoders write about 10; libjpeg-turbo's own fuzzers stop at 500. */
#define JPEG_MAX_SCANS 500
#define JPEG_FIRST_BUFFER_MAX (64u * 1024 * 1024) /* encoder output, before it grows */

struct jpeg_err {
    struct jpeg_error_mgr pub; /* first: libjpeg sees a struct jpeg_error_mgr * */
    jmp_buf jump;
    int rc;
    char text[JMSG_LENGTH_MAX];
    char warn[JMSG_LENGTH_MAX]; /* the first warning, "" if none */
    long nwarn;                 /* warnings counted in warn (JWRN_JFIF_MAJOR is not) */
};

/* libjpeg's message for the current msg_code, with a lowercase first letter (our style). */
static void jerr_output_message(j_common_ptr cinfo)
{
    struct jpeg_err *e = (struct jpeg_err *)cinfo->err;
    e->pub.format_message(cinfo, e->text);
    if (e->text[0] >= 'A' && e->text[0] <= 'Z' && !(e->text[1] >= 'A' && e->text[1] <= 'Z'))
        e->text[0] = (char)(e->text[0] - 'A' + 'a');
}

static int jerr_rc(int code)
{
    switch (code) {
    case JERR_OUT_OF_MEMORY:
        return ENOMEM;
    case JERR_NO_BACKING_STORE: /* the memory cap above was reached */
    case JERR_IMAGE_TOO_BIG:
    case JERR_WIDTH_OVERFLOW:
        return FMT_ETOOBIG;
    case JERR_BAD_PRECISION:
    case JERR_CONVERSION_NOTIMPL:
    case JERR_SOF_UNSUPPORTED:
    case JERR_NOT_COMPILED:
    case JERR_ARITH_NOTIMPL:
        return FMT_EUNSUPPORTED;
    case JERR_INPUT_EMPTY:
    case JERR_INPUT_EOF:
        return FMT_ETRUNC;
    default:
        return FMT_ECORRUPT;
    }
}

static void jerr_error_exit(j_common_ptr cinfo)
{
    struct jpeg_err *e = (struct jpeg_err *)cinfo->err;
    jerr_output_message(cinfo);
    if (e->pub.msg_code == JERR_NO_BACKING_STORE)
        snprintf(e->text, sizeof e->text, "JPEG needs more than %ld MiB to decode",
                 JPEG_MAX_MEMORY / (1024 * 1024));
    e->rc = jerr_rc(e->pub.msg_code);
    longjmp(e->jump, 1);
}

static void jerr_emit_message(j_common_ptr cinfo, int msg_level)
{
    struct jpeg_err *e = (struct jpeg_err *)cinfo->err;
    if (msg_level >= 0) /* trace messages */
        return;
    e->pub.num_warnings++;
    /* The one warning that says nothing about the pixels: a JFIF header from a newer revision. */
    if (e->pub.msg_code == JWRN_JFIF_MAJOR)
        return;
    if (e->pub.msg_code == JWRN_JPEG_EOF) {
        jerr_output_message(cinfo);
        e->rc = FMT_ETRUNC;
        longjmp(e->jump, 1);
    }
    /* Only the first is formatted: a damaged scan can warn once per MCU. */
    if (e->nwarn++ == 0) {
        jerr_output_message(cinfo);
        memcpy(e->warn, e->text, sizeof e->warn);
        e->text[0] = '\0'; /* text is for an error only */
    }
}

static void jerr_init(struct jpeg_err *e)
{
    memset(e, 0, sizeof *e);
    jpeg_std_error(&e->pub);
    e->pub.error_exit = jerr_error_exit;
    e->pub.emit_message = jerr_emit_message;
    e->pub.output_message = jerr_output_message;
}

static void jpeg_progress(j_common_ptr cinfo)
{
    if (!cinfo->is_decompressor)
        return;
    j_decompress_ptr d = (j_decompress_ptr)cinfo;
    if (d->input_scan_number > JPEG_MAX_SCANS) {
        struct jpeg_err *e = (struct jpeg_err *)cinfo->err;
        snprintf(e->text, sizeof e->text, "JPEG has more than %d scans", JPEG_MAX_SCANS);
        e->rc = FMT_ECORRUPT;
        longjmp(e->jump, 1);
    }
}

/* ---- decoding ---- */

struct jpeg_dec {
    struct jpeg_decompress_struct cinfo;
    struct jpeg_err err;
    struct jpeg_progress_mgr progress;
    int created;
    uint8_t *row; /* one CMYK output row */
};

/* Adobe CMYK as Pillow decodes it: Pillow reads every 4-component JPEG as "CMYK;I" (Adobe's
 * inverted polarity: ink = 255 - stored), then converts CMYK to RGB as in Pillow 9.4 Convert.c
 * cmyk2rgb: R = nk - MULDIV255(C, nk), nk = 255 - K, MULDIV255(a, b) = (t + (t >> 8)) >> 8 with
 * t = a * b + 128. In stored values: nk = K', C = 255 - C'. */
static void cmyk_inverted_to_rgb(const uint8_t *src, uint8_t *dst, size_t npix)
{
    for (size_t i = 0; i < npix; i++, src += 4, dst += 3) {
        uint32_t nk = src[3];
        for (int c = 0; c < 3; c++) {
            uint32_t t = (255u - src[c]) * nk + 128u;
            dst[c] = (uint8_t)(nk - ((t + (t >> 8)) >> 8)); /* <= nk: never negative */
        }
    }
}

static void cmyk_inverted_to_gray(const uint8_t *src, uint8_t *dst, size_t npix)
{
    for (size_t i = 0; i < npix; i++) {
        uint8_t rgb[3];
        cmyk_inverted_to_rgb(src + 4 * i, rgb, 1);
        dst[i] = fmt_luma(rgb[0], rgb[1], rgb[2]);
    }
}

static void jpeg_dec_init(struct jpeg_dec *d)
{
    memset(d, 0, sizeof *d);
    jerr_init(&d->err);
    d->cinfo.err = &d->err.pub;
}

/* A Photoshop APP13 ("Photoshop 3.0\0" and 8BIM resource blocks), walked as Pillow 9.4's APP
 * handler walks it: a block cut short stops the walk (struct.error, caught), except one that ends
 * right after its 2-byte resource ID, whose name length Pillow then indexes past the end
 * (IndexError, which Image.open turns into "cannot identify image file"). A ResolutionInfo
 * (0x03ED) block of fewer than 14 bytes also stops the walk. 0 or FMT_ECORRUPT. */
static int jpeg_pillow_photoshop(const uint8_t *s, size_t n, fmt_msg *msg)
{
    uint64_t off = 14;
    while (off + 4 <= n && memcmp(s + off, "8BIM", 4) == 0) {
        off += 4;
        if (off + 2 > n)
            break;
        unsigned code = (unsigned)s[off] << 8 | s[off + 1];
        off += 2;
        if (off == n)
            return fmt_fail(msg, FMT_ECORRUPT, "JPEG Photoshop segment: 8BIM resource 0x%04x cut "
                            "after its ID (Pillow cannot identify the file)", code);
        off += 1 + (uint64_t)s[off];
        off += off & 1;
        if (off + 4 > n)
            break;
        uint64_t size = (uint64_t)s[off] << 24 | (uint64_t)s[off + 1] << 16 |
                        (uint64_t)s[off + 2] << 8 | s[off + 3];
        off += 4;
        if (code == 0x03ED && (off >= n || n - off < 14 || size < 14))
            break;
        off += size;
        off += off & 1;
    }
    return 0;
}

/* The 4 bytes at t open a TIFF header (classic or BigTIFF, either byte order) as Pillow's
 * TiffImagePlugin prefixes list them. */
static int jpeg_tiff_magic(const uint8_t *t)
{
    static const char *const prefixes[] = {"MM\x00\x2A", "II\x2A\x00", "MM\x2A\x00",
                                           "II\x00\x2A", "MM\x00\x2B", "II\x2B\x00"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (memcmp(t, prefixes[i], 4) == 0)
            return 1;
    return 0;
}

static uint32_t jpeg_tiff_u(const uint8_t *p, int big, int bytes)
{
    uint32_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint32_t)p[i] << (8 * (big ? bytes - 1 - i : i));
    return v;
}

/* An MPF APP2 ("MPF\0", then a TIFF header and one IFD), read as Pillow 9.4's _getmp reads it
 * when it opens a JPEG: every failure inside it is a warning (the file is read as a plain JPEG)
 * but one: when NumberOfImages (0xB001) is an integer N >= 1 (its first value: Pillow's
 * TiffTags declares one) and MPEntry (0xB002) a byte string (BYTE or UNDEFINED) shorter than the
 * N 16-byte entries, struct.unpack_from raises struct.error, which
 * escapes and makes Image.open refuse the file. The walk stops where Pillow's does: the first
 * entry with an image format other than JPEG is a SyntaxError (a warning). Pillow keeps the
 * tags read before a truncated IFD and stops at a tag whose data lies past the segment.
 * 0 or FMT_ECORRUPT. */
static int jpeg_pillow_mpf(const uint8_t *s, size_t n, fmt_msg *msg)
{
    const uint8_t *t = s + 4;
    size_t tl = n - 4;
    if (tl < 8 || !jpeg_tiff_magic(t) || t[2] == 0x2B) /* Pillow's BigTIFF test (only "II+\0" passes it) fails: a warning */
        return 0;
    int big = t[0] == 'M';
    int entries_big = memcmp(t, "MM\x00\x2A", 4) == 0; /* _getmp's own endianness test */
    uint64_t ifd = jpeg_tiff_u(t + 4, big, 4);
    if (ifd + 2 > tl)
        return 0;
    /* unit sizes of the TIFF types Pillow loads (0: skipped) */
    static const uint8_t unit[17] = {0, 1, 1, 2, 4, 8, 1, 1, 2, 4, 8, 4, 8, 4, 0, 0, 8};
    unsigned count = jpeg_tiff_u(t + ifd, big, 2);
    int quant_int = 0, have_quant = 0, have_entries = 0, entries_bytes = 0;
    int64_t quant = 0;
    const uint8_t *ent = NULL;
    uint64_t ent_len = 0;
    for (unsigned i = 0; i < count; i++) {
        uint64_t e = ifd + 2 + 12 * (uint64_t)i;
        if (e + 12 > tl)
            break;
        unsigned tag = jpeg_tiff_u(t + e, big, 2), type = jpeg_tiff_u(t + e + 2, big, 2);
        uint64_t cnt = jpeg_tiff_u(t + e + 4, big, 4);
        if (type > 16 || unit[type] == 0)
            continue;
        uint64_t size = cnt * unit[type];
        const uint8_t *data = t + e + 8;
        if (size > 4) {
            uint64_t off = jpeg_tiff_u(t + e + 8, big, 4);
            if (off > tl || size > tl - off)
                break; /* _safe_read fails: Pillow stops loading here */
            data = t + off;
        }
        if (size == 0)
            continue;
        if (tag == 0xB001) { /* TiffTags gives it one value: the first is kept */
            have_quant = 1;
            quant_int = type != 1 && type != 2 && type != 5 && type != 7 && type != 10 &&
                        type != 11 && type != 12;
            if (quant_int) {
                uint64_t v = jpeg_tiff_u(data, big, unit[type] > 4 ? 4 : unit[type]);
                if (unit[type] == 8) /* LONG8: the high half first when big-endian */
                    v = big ? (uint64_t)jpeg_tiff_u(data, 1, 4) << 32 | jpeg_tiff_u(data + 4, 1, 4)
                            : (uint64_t)jpeg_tiff_u(data + 4, 0, 4) << 32 | jpeg_tiff_u(data, 0, 4);
                int sbits = type == 6 ? 8 : type == 8 ? 16 : type == 9 ? 32 : 0;
                if (sbits && (v >> (sbits - 1)) & 1)
                    quant = -1; /* negative: no entries */
                else
                    quant = v > INT64_MAX ? INT64_MAX : (int64_t)v;
            }
        } else if (tag == 0xB002) {
            have_entries = 1;
            entries_bytes = type == 1 || type == 7;
            ent = data;
            ent_len = size;
        }
    }
    if (!have_quant || !quant_int || !have_entries || !entries_bytes)
        return 0;
    for (int64_t i = 0; i < quant; i++) {
        if ((uint64_t)i * 16 + 16 > ent_len)
            return fmt_fail(msg, FMT_ECORRUPT, "JPEG MPF segment: %lld images but MP entries for "
                            "%llu (Pillow cannot identify the file)", (long long)quant,
                            (unsigned long long)(ent_len / 16));
        if ((jpeg_tiff_u(ent + 16 * i, entries_big, 4) >> 24 & 7) != 0)
            return 0;
    }
    return 0;
}

/* Pillow parses the APP segments itself before libjpeg sees the file, and refuses a file where
 * that parsing fails outside its error handling (Pillow 9.4 JpegImagePlugin.APP): a JFIF APP0
 * or an Adobe APP14 shorter than 7 bytes, and an Exif APP1 whose TIFF header cannot be read
 * (fewer than 8 bytes, or BigTIFF), when Pillow reads it to look for a resolution: while no
 * earlier segment gave one; a Photoshop APP13 or an MPF APP2 that Pillow cannot parse (above).
 * libjpeg saves those segments for us; 0 or FMT_ECORRUPT. */
static int jpeg_pillow_app(j_decompress_ptr cinfo, fmt_msg *msg)
{
    int dpi = 0;
    const uint8_t *exif = NULL, *mpf = NULL;
    unsigned exif_len = 0, mpf_len = 0;
    for (jpeg_saved_marker_ptr m = cinfo->marker_list; m; m = m->next) {
        const uint8_t *s = m->data;
        unsigned n = m->data_length;
        if (m->marker == JPEG_APP0 && n >= 4 && memcmp(s, "JFIF", 4) == 0) {
            if (n < 7)
                return fmt_fail(msg, FMT_ECORRUPT, "JPEG JFIF segment of %u bytes too short", n);
            if (n >= 12 && s[7] == 1)
                dpi = 1;
        } else if (m->marker == JPEG_APP0 + 1 && n >= 5 && memcmp(s, "Exif", 5) == 0 && !exif) {
            exif = s;
            exif_len = n;
        } else if (m->marker == JPEG_APP0 + 14 && n >= 5 && memcmp(s, "Adobe", 5) == 0 && n < 7) {
            return fmt_fail(msg, FMT_ECORRUPT, "JPEG Adobe segment of %u bytes too short", n);
        } else if (m->marker == JPEG_APP0 + 13 && n >= 14 &&
                   memcmp(s, "Photoshop 3.0\0", 14) == 0) {
            int rc = jpeg_pillow_photoshop(s, n, msg);
            if (rc)
                return rc;
        } else if (m->marker == JPEG_APP0 + 2 && n >= 4 && memcmp(s, "MPF\0", 4) == 0) {
            mpf = s; /* Pillow keeps the last one */
            mpf_len = n;
        }
        if (dpi || !exif)
            continue;
        /* the resolution from Exif: any failure but these makes it 72 dpi */
        dpi = 1;
        const uint8_t *t = exif;
        unsigned tl = exif_len;
        if (tl >= 6 && t[5] == 0) {
            t += 6;
            tl -= 6;
        }
        if (tl >= 4 && jpeg_tiff_magic(t) && (tl < 8 || t[2] == 0x2B))
            return fmt_fail(msg, FMT_ECORRUPT, "JPEG Exif segment with a truncated TIFF header");
    }
    return mpf ? jpeg_pillow_mpf(mpf, mpf_len, msg) : 0;
}

/* jpeg_create_decompress, jpeg_mem_src, jpeg_read_header. Only called from a *_run function that
 * has called setjmp(d->err.jump). */
static void jpeg_dec_header(struct jpeg_dec *d, const uint8_t *buf, size_t len)
{
    jpeg_create_decompress(&d->cinfo);
    d->created = 1;
    d->cinfo.mem->max_memory_to_use = JPEG_MAX_MEMORY;
    d->progress.progress_monitor = jpeg_progress;
    d->cinfo.progress = &d->progress;
    jpeg_mem_src(&d->cinfo, buf, (unsigned long)len);
    jpeg_save_markers(&d->cinfo, JPEG_APP0, 0xffff);
    jpeg_save_markers(&d->cinfo, JPEG_APP0 + 1, 0xffff);
    jpeg_save_markers(&d->cinfo, JPEG_APP0 + 2, 0xffff);
    jpeg_save_markers(&d->cinfo, JPEG_APP0 + 13, 0xffff);
    jpeg_save_markers(&d->cinfo, JPEG_APP0 + 14, 0xffff);
    jpeg_read_header(&d->cinfo, TRUE);
}

static void jpeg_dec_release(struct jpeg_dec *d, int rc, fmt_msg *msg)
{
    if (d->created)
        jpeg_destroy_decompress(&d->cinfo);
    free(d->row);
    d->row = NULL;
    if (rc && d->err.text[0])
        fmt_fail(msg, rc, "%s", d->err.text);
    else if (!rc && d->err.nwarn == 1)
        fmt_fail(msg, 0, "%s", d->err.warn);
    else if (!rc && d->err.nwarn > 1)
        fmt_fail(msg, 0, "%s (and %ld more libjpeg warnings)", d->err.warn, d->err.nwarn - 1);
}

static int jpeg_probe_run(struct jpeg_dec *d, const uint8_t *buf, size_t len,
                          fmt_image_info *info, fmt_msg *msg)
{
    if (setjmp(d->err.jump))
        return d->err.rc;
    jpeg_dec_header(d, buf, len);
    int rc = jpeg_pillow_app(&d->cinfo, msg);
    if (rc)
        return rc;
    info->width = d->cinfo.image_width;
    info->height = d->cinfo.image_height;
    info->channels = (uint32_t)d->cinfo.num_components;
    return 0;
}

int fmt_jpeg_probe(const uint8_t *buf, size_t len, fmt_image_info *info, fmt_msg *msg)
{
    struct jpeg_dec d;
    jpeg_dec_init(&d);
    int rc = jpeg_probe_run(&d, buf, len, info, msg);
    jpeg_dec_release(&d, rc, msg);
    return rc;
}

/* Shrink-on-load: the smallest DCT scale (1/8, 1/4, 1/2) whose output still covers min_w x min_h
 * on both axes, else full size. Leaves the output dimensions computed. */
static void jpeg_pick_scale(j_decompress_ptr cinfo, uint32_t min_w, uint32_t min_h)
{
    static const unsigned denoms[] = {8, 4, 2};
    if (min_w && min_h) {
        for (size_t i = 0; i < sizeof denoms / sizeof denoms[0]; i++) {
            cinfo->scale_num = 1;
            cinfo->scale_denom = denoms[i];
            jpeg_calc_output_dimensions(cinfo);
            if (cinfo->output_width >= min_w && cinfo->output_height >= min_h)
                return;
        }
    }
    cinfo->scale_num = 1;
    cinfo->scale_denom = 1;
    jpeg_calc_output_dimensions(cinfo);
}

static int jpeg_decode_run(struct jpeg_dec *d, const uint8_t *buf, size_t len,
                           const fmt_decode_opts *opts, fmt_image *out, fmt_msg *msg)
{
    if (setjmp(d->err.jump))
        return d->err.rc;
    jpeg_dec_header(d, buf, len);
    j_decompress_ptr cinfo = &d->cinfo;

    int rc = jpeg_pillow_app(cinfo, msg);
    if (rc)
        return rc;
    rc = fmt_limits_check(&opts->limits, cinfo->image_width, cinfo->image_height, msg);
    if (rc)
        return rc;
    /* libjpeg assumes CMYK for every 4-component file (YCCK when the Adobe marker says so) and
     * converts YCCK to CMYK itself; CMYK to RGB is ours, the way Pillow does it. */
    int cmyk = cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK;
    if (cmyk)
        cinfo->out_color_space = JCS_CMYK;
    else
        cinfo->out_color_space = opts->channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_pick_scale(cinfo, opts->min_width, opts->min_height);
    jpeg_start_decompress(cinfo);

    rc = fmt_image_reserve(out, cinfo->output_width, cinfo->output_height, opts->channels);
    if (rc)
        return fmt_fail(msg, rc, "cannot allocate %ux%u image", cinfo->output_width,
                        cinfo->output_height);
    size_t stride = (size_t)out->width * out->channels;
    if (cmyk) {
        d->row = malloc((size_t)out->width * 4);
        if (!d->row)
            return fmt_fail(msg, ENOMEM, "cannot allocate a JPEG row");
    }
    /* Region of interest (image.h): the needed columns only, from the first needed row.
     * libjpeg-turbo's fancy upsampling treats the edges of a cropped region as image edges, so
     * the region is widened by a pixel on each side (jpeg_crop_scanline then widens it to
     * whole iMCUs); the rows after it are still read, cropped, so that damage anywhere in the
     * file fails or warns as in a full decode. */
    size_t xoff_bytes = 0;
    JDIMENSION roi_end = cinfo->output_height;
    if (!cmyk && opts->roi_w && opts->roi_h && cinfo->output_width == cinfo->image_width &&
        cinfo->output_height == cinfo->image_height &&
        (uint64_t)opts->roi_x + opts->roi_w <= out->width &&
        (uint64_t)opts->roi_y + opts->roi_h <= out->height) {
        JDIMENSION x0 = opts->roi_x ? opts->roi_x - 1 : 0;
        JDIMENSION x1 = opts->roi_x + opts->roi_w < out->width ? opts->roi_x + opts->roi_w + 1
                                                               : out->width;
        JDIMENSION y0 = opts->roi_y ? opts->roi_y - 1 : 0;
        if (x0 > 0 || x1 < out->width) {
            JDIMENSION xoff = x0, cw = x1 - x0;
            jpeg_crop_scanline(cinfo, &xoff, &cw);
            xoff_bytes = (size_t)xoff * out->channels;
        }
        if (y0 > 0 && jpeg_skip_scanlines(cinfo, y0) != y0)
            return fmt_fail(msg, FMT_ECORRUPT, "JPEG decoder skipped fewer scanlines");
        roi_end = opts->roi_y + opts->roi_h < out->height ? opts->roi_y + opts->roi_h + 1
                                                          : out->height;
    }
    while (cinfo->output_scanline < cinfo->output_height) {
        if (cinfo->output_scanline == roi_end && roi_end + 1 < cinfo->output_height) {
            /* below the region: skipped rows are still entropy-decoded (damage there fails or
             * warns as in a full decode); skipping to the very end would not be, so the last
             * row is read */
            JDIMENSION n = cinfo->output_height - 1 - roi_end;
            if (jpeg_skip_scanlines(cinfo, n) != n)
                return fmt_fail(msg, FMT_ECORRUPT, "JPEG decoder skipped fewer scanlines");
            continue;
        }
        uint8_t *dst = out->pixels + (size_t)cinfo->output_scanline * stride + xoff_bytes;
        JSAMPROW row = cmyk ? d->row : dst;
        if (jpeg_read_scanlines(cinfo, &row, 1) != 1)
            return fmt_fail(msg, FMT_ECORRUPT, "JPEG decoder returned no scanline");
        if (cmyk && out->channels == 3)
            cmyk_inverted_to_rgb(d->row, dst, out->width);
        else if (cmyk)
            cmyk_inverted_to_gray(d->row, dst, out->width);
    }
    /* Reads up to EOI, so damage after the last scanline still counts. */
    jpeg_finish_decompress(cinfo);
    return 0;
}

int fmt_jpeg_decode(const uint8_t *buf, size_t len, const fmt_decode_opts *opts, fmt_image *out,
                    fmt_msg *msg)
{
    struct jpeg_dec d;
    jpeg_dec_init(&d);
    int rc = jpeg_decode_run(&d, buf, len, opts, out, msg);
    jpeg_dec_release(&d, rc, msg);
    if (rc)
        fmt_image_free(out);
    return rc;
}

/* ---- encoding ---- */

/* Destination manager writing into a malloc'd buffer that grows by doubling. jpeg_mem_dest would
 * do the same, but after an error its current buffer is out of our reach (it only stores it to
 * the caller's pointer at the end), so an error path would leak it. */
struct mem_dest {
    struct jpeg_destination_mgr pub; /* first: libjpeg sees a struct jpeg_destination_mgr * */
    uint8_t *buf;
    size_t cap;
    size_t len;
};

static void mem_dest_init(j_compress_ptr cinfo)
{
    struct mem_dest *m = (struct mem_dest *)cinfo->dest;
    m->pub.next_output_byte = m->buf;
    m->pub.free_in_buffer = m->cap;
}

static boolean mem_dest_empty(j_compress_ptr cinfo)
{
    /* Called when the whole buffer is full. */
    struct mem_dest *m = (struct mem_dest *)cinfo->dest;
    size_t ncap = m->cap * 2;
    uint8_t *p = ncap > m->cap ? realloc(m->buf, ncap) : NULL;
    if (!p)
        ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 0);
    m->buf = p;
    m->pub.next_output_byte = p + m->cap;
    m->pub.free_in_buffer = ncap - m->cap;
    m->cap = ncap;
    return TRUE;
}

static void mem_dest_term(j_compress_ptr cinfo)
{
    struct mem_dest *m = (struct mem_dest *)cinfo->dest;
    m->len = m->cap - m->pub.free_in_buffer;
}

struct jpeg_enc {
    struct jpeg_compress_struct cinfo;
    struct jpeg_err err;
    struct mem_dest dest;
    int created;
    uint8_t *row; /* one CMYK input row */
};

/* RGB to the Adobe (inverted) CMYK that cmyk_inverted_to_rgb turns back into about the same RGB,
 * with full gray component replacement so that K varies and the decoder's K arithmetic is
 * exercised: K = 255 - max(R, G, B), C = 255 * (max - R) / max (0 for black), stored inverted
 * (C' = 255 - C, K' = 255 - K = max). */
static void rgb_to_cmyk_inverted(const fmt_image *img, uint32_t y, uint8_t *dst)
{
    const uint8_t *src = img->pixels + (size_t)y * img->width * img->channels;
    for (uint32_t x = 0; x < img->width; x++, dst += 4) {
        uint32_t rgb[3];
        for (int c = 0; c < 3; c++)
            rgb[c] = src[(size_t)x * img->channels + (img->channels == 3 ? (size_t)c : 0)];
        uint32_t mx = rgb[0] > rgb[1] ? rgb[0] : rgb[1];
        mx = mx > rgb[2] ? mx : rgb[2];
        for (int c = 0; c < 3; c++) {
            uint32_t ink = mx ? (255u * (mx - rgb[c]) + mx / 2) / mx : 0;
            dst[c] = (uint8_t)(255u - ink);
        }
        dst[3] = (uint8_t)mx;
    }
}

static int jpeg_encode_run(struct jpeg_enc *e, const fmt_image *img, const fmt_jpeg_opts *o,
                           int quality, int subsampling)
{
    if (setjmp(e->err.jump))
        return e->err.rc;
    j_compress_ptr cinfo = &e->cinfo;
    jpeg_create_compress(cinfo);
    e->created = 1;

    /* A first guess that fits most outputs, so that the buffer rarely grows. */
    e->dest.cap = (size_t)img->width * img->height * img->channels / 4 + 4096;
    if (e->dest.cap > JPEG_FIRST_BUFFER_MAX)
        e->dest.cap = JPEG_FIRST_BUFFER_MAX;
    e->dest.buf = malloc(e->dest.cap);
    if (!e->dest.buf)
        return ENOMEM;
    e->dest.pub.init_destination = mem_dest_init;
    e->dest.pub.empty_output_buffer = mem_dest_empty;
    e->dest.pub.term_destination = mem_dest_term;
    cinfo->dest = &e->dest.pub;

    cinfo->image_width = img->width;
    cinfo->image_height = img->height;
    if (o->cmyk) {
        cinfo->input_components = 4;
        cinfo->in_color_space = JCS_CMYK;
    } else {
        cinfo->input_components = (int)img->channels;
        cinfo->in_color_space = img->channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    }
    jpeg_set_defaults(cinfo);
    if (o->cmyk) /* libjpeg writes the Adobe marker for both */
        jpeg_set_colorspace(cinfo, o->cmyk == 2 ? JCS_YCCK : JCS_CMYK);
    jpeg_set_quality(cinfo, quality, TRUE);

    if (cinfo->jpeg_color_space == JCS_YCbCr || cinfo->jpeg_color_space == JCS_YCCK) {
        int h = subsampling == 444 ? 1 : 2, v = subsampling == 420 ? 2 : 1;
        cinfo->comp_info[0].h_samp_factor = h;
        cinfo->comp_info[0].v_samp_factor = v;
        for (int c = 1; c < cinfo->num_components; c++) {
            /* YCCK: K is sampled like Y, the chroma pair at the lowest rate */
            int full = cinfo->jpeg_color_space == JCS_YCCK && c == 3;
            cinfo->comp_info[c].h_samp_factor = full ? h : 1;
            cinfo->comp_info[c].v_samp_factor = full ? v : 1;
        }
    }
    if (o->progressive)
        jpeg_simple_progression(cinfo);
    cinfo->restart_in_rows = o->restart_rows;

    jpeg_start_compress(cinfo, TRUE);
    if (o->cmyk) {
        e->row = malloc((size_t)img->width * 4);
        if (!e->row)
            return ENOMEM;
    }
    size_t stride = (size_t)img->width * img->channels;
    while (cinfo->next_scanline < cinfo->image_height) {
        JSAMPROW row;
        if (o->cmyk) {
            rgb_to_cmyk_inverted(img, cinfo->next_scanline, e->row);
            row = e->row;
        } else {
            row = img->pixels + (size_t)cinfo->next_scanline * stride;
        }
        jpeg_write_scanlines(cinfo, &row, 1);
    }
    jpeg_finish_compress(cinfo);
    return 0;
}

int fmt_jpeg_encode(const fmt_image *img, const fmt_jpeg_opts *opts, uint8_t **out, size_t *out_len)
{
    if (!out || !out_len)
        return FMT_EINVAL;
    *out = NULL;
    *out_len = 0;
    fmt_jpeg_opts o = {0};
    if (opts)
        o = *opts;
    int quality = o.quality ? o.quality : 90;
    int subsampling = o.subsampling ? o.subsampling : 420;
    if (!img || !img->pixels || img->width == 0 || img->height == 0 ||
        (img->channels != 1 && img->channels != 3) || quality < 1 || quality > 100 ||
        (subsampling != 444 && subsampling != 422 && subsampling != 420) || o.restart_rows < 0 ||
        o.cmyk < 0 || o.cmyk > 2)
        return FMT_EINVAL;
    if (img->width > JPEG_MAX_DIMENSION || img->height > JPEG_MAX_DIMENSION)
        return FMT_ETOOBIG;

    struct jpeg_enc e;
    memset(&e, 0, sizeof e);
    jerr_init(&e.err);
    e.cinfo.err = &e.err.pub;
    int rc = jpeg_encode_run(&e, img, &o, quality, subsampling);
    if (e.created)
        jpeg_destroy_compress(&e.cinfo);
    free(e.row);
    if (rc) {
        free(e.dest.buf);
        return rc;
    }
    uint8_t *shrunk = realloc(e.dest.buf, e.dest.len ? e.dest.len : 1);
    *out = shrunk ? shrunk : e.dest.buf;
    *out_len = e.dest.len;
    return 0;
}
