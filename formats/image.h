/* image.h - image codecs: JPEG (libjpeg-turbo), PNG (libspng), BMP and DIB (our own, bmp.c)
 * decode, and the encoders the sample generator and the per-image dataset sets use.
 *
 * Pixels are always 8-bit, interleaved HWC, rows packed (stride = width * channels), with 1 (gray)
 * or 3 (RGB) channels. Decoding converts every source layout to the channel count asked for:
 * gray -> RGB by replication, RGB -> gray by ITU-R 601 luma (JPEG: the decoder's own Y channel),
 * alpha is dropped (not composited), 16-bit samples keep their high byte (but 16-bit gray PNGs
 * are clipped to 0..255, as Pillow's mode I conversion does), CMYK/YCCK JPEGs are
 * converted to RGB with the same arithmetic as Pillow's CMYK->RGB conversion.
 *
 * All functions are thread-safe on distinct objects; none keeps global state.
 */
#ifndef FMT_IMAGE_H
#define FMT_IMAGE_H

#include "fmt.h"

typedef enum {
    FMT_IMG_UNKNOWN = 0,
    FMT_IMG_JPEG,
    FMT_IMG_PNG,
    FMT_IMG_BMP
} fmt_image_type;

/* Limits against decompression bombs, checked from the header before any pixel allocation.
 * A zero field means the default. */
typedef struct {
    uint32_t max_side;      /* default FMT_DEFAULT_MAX_SIDE */
    uint64_t max_pixels;    /* width * height; default FMT_DEFAULT_MAX_PIXELS */
} fmt_limits;

#define FMT_DEFAULT_MAX_SIDE   32768u
#define FMT_DEFAULT_MAX_PIXELS 178956970ull   /* Pillow's hard limit (2 x MAX_IMAGE_PIXELS) */

typedef struct {
    uint8_t *pixels;        /* HWC; owned by the image, released by fmt_image_free */
    uint32_t width, height;
    uint32_t channels;      /* 1 or 3 */
    size_t cap;             /* bytes allocated at pixels, for reuse; 0 = exactly the pixels */
} fmt_image;

typedef struct {
    fmt_image_type type;
    uint32_t width, height; /* as stored in the file */
    uint32_t channels;      /* channels in the file: 1 gray, 2 gray+alpha, 3, 4 (RGBA or CMYK);
                             * palette images (PNG, BMP) report 3, 32-bit BMPs 4 */
} fmt_image_info;

typedef struct {
    uint32_t channels;      /* 1 or 3 */
    /* Shrink-on-load: when both are non-zero, a JPEG is decoded at the smallest DCT scale
     * (1/8, 1/4, 1/2, else full) whose output is still >= min_width x min_height. Other formats
     * ignore them. With zeros the image is decoded at full size. */
    uint32_t min_width, min_height;
    fmt_limits limits;
    /* Region of interest: with roi_w and roi_h non-zero, only the pixels of columns roi_x ..
     * roi_x + roi_w - 1 and rows roi_y .. roi_y + roi_h - 1 are needed (fmt_resize_source_rect
     * says which): the image is still width x height, but a JPEG decoded at full scale (not
     * CMYK) leaves the other pixels unset, skipping their IDCT, upsampling and colour
     * conversion (the entropy decoding of every row still runs, so a damaged file fails as it
     * would). The needed pixels are the bytes of a full decode. Other formats and scales
     * ignore it. */
    uint32_t roi_x, roi_y, roi_w, roi_h;
} fmt_decode_opts;

/* Identify the format by its magic bytes (FMT_IMG_UNKNOWN if none matches). */
fmt_image_type fmt_image_sniff(const void *buf, size_t len);
const char *fmt_image_type_name(fmt_image_type t);   /* "jpeg", "png", "bmp", "unknown" */

/* Read only the header: format, size and channels. Cheap; used by --dry-run and limits.
 * Reports the size as stored, without applying any limit.
 * On success msg may hold a warning, as after fmt_image_decode.
 * Errors: FMT_EEMPTY, FMT_EFORMAT, FMT_ETRUNC, FMT_ECORRUPT, FMT_EUNSUPPORTED. */
int fmt_image_probe(const void *buf, size_t len, fmt_image_info *info, fmt_msg *msg);

/* Decode buf into out (out->pixels newly malloc'd; on error out is zeroed and owns nothing).
 * The rule is Pillow's: a file decodes if and only if Pillow 9.4's Image.open(f).convert("RGB")
 * succeeds with its default settings, and then to the same pixels. So a truncated file is an
 * error, never a partially gray image (a JPEG is read up to EOI, a PNG up to IEND with its CRCs
 * checked, a BMP's pixel data must be all there), and a file Pillow reads with a complaint is
 * decoded with a warning: libjpeg's "corrupt JPEG data" warnings (junk before a marker, a bad
 * segment), a PNG or BMP pixel naming an entry past its palette. Files Pillow refuses at open
 * are refused here too, naming the chunk or segment: APNG frame-sequence errors, PNG text or ICC
 * chunks inflating past 1 MiB (or 64 MiB of text in all), a zTXt compression method other than 0,
 * JPEG Photoshop (APP13) and MPF (APP2) segments Pillow cannot parse. A JPEG may also be refused for
 * more than 500 scans (FMT_ECORRUPT) or needing more than 2 GiB inside libjpeg (FMT_ETOOBIG).
 * opts NULL: 3 channels, full size, default limits. msg is cleared first; on success it stays
 * empty unless the decode had a warning, which it then names (one line; the first warning, with
 * a count of the others). Callers that keep a strict policy treat a warning as an error.
 * Errors: those of probe, plus FMT_ETOOBIG (limits), FMT_EINVAL (channels not 1 or 3), ENOMEM. */
int fmt_image_decode(const void *buf, size_t len, const fmt_decode_opts *opts, fmt_image *out,
                     fmt_msg *msg);

/* The same into out's buffer (libspng style): out is a zeroed image or one whose pixels/cap came
 * from an earlier decode or fmt_image_reserve; the buffer is reused when large enough, else
 * replaced, so a loop decoding into the same image allocates nothing once it has seen its
 * largest image. On error out is zeroed and owns nothing (its buffer is released). */
int fmt_image_decode_into(const void *buf, size_t len, const fmt_decode_opts *opts,
                          fmt_image *out, fmt_msg *msg);

/* Allocate an image of the given geometry (pixels uninitialised). Returns 0 or ENOMEM/FMT_EINVAL. */
int fmt_image_alloc(fmt_image *img, uint32_t width, uint32_t height, uint32_t channels);

/* Give img the geometry, reusing its buffer when img->cap covers it, else replacing it (the
 * pixels are then uninitialised; kept ones are not preserved either way). Returns 0 or
 * ENOMEM/FMT_EINVAL; on error img is unchanged. */
int fmt_image_reserve(fmt_image *img, uint32_t width, uint32_t height, uint32_t channels);

/* Release img->pixels and zero img. Accepts a zeroed image. */
void fmt_image_free(fmt_image *img);

/* Encoders: *out is malloc'd (caller frees), *out_len its length; on error *out is NULL.
 * Return 0, FMT_EINVAL (bad image or options), FMT_ETOOBIG (beyond the format's size fields) or
 * ENOMEM. */
typedef struct {
    int quality;            /* 1..100; default (0) 90 */
    int progressive;        /* non-zero: progressive scan script */
    int restart_rows;       /* non-zero: a restart marker every this many MCU rows */
    int subsampling;        /* 444, 422 or 420 (default 420); ignored for gray and CMYK */
    int cmyk;               /* for decoder tests: 1 writes a 4-channel Adobe CMYK JPEG, 2 an
                             * Adobe YCCK one, from the RGB pixels with full gray component
                             * replacement (K = 255 - max(R,G,B), C = 255 (max - R) / max, ...),
                             * stored inverted as Adobe files are; decoding gives back about the
                             * same RGB. Subsampling applies to YCCK only. */
} fmt_jpeg_opts;

int fmt_jpeg_encode(const fmt_image *img, const fmt_jpeg_opts *opts, uint8_t **out, size_t *out_len);
/* 8-bit RGB or gray. level 0 = stored (no compression, no row filters), as in PNG-0 sets;
 * 1..9 zlib levels with spng's adaptive filtering. */
int fmt_png_encode(const fmt_image *img, int level, uint8_t **out, size_t *out_len);
/* 24-bit (RGB) or 8-bit gray-palette (gray) bottom-up BMP. */
int fmt_bmp_encode(const fmt_image *img, uint8_t **out, size_t *out_len);

#endif
