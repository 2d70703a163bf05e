/* codec.h - internal interface between image.c and the per-format codecs (jpeg.c, png.c, bmp.c).
 * Not part of the library's public API.
 *
 * The per-format probe/decode functions are only called by image.c, after it has checked that
 * len > 0, that the magic bytes match, and resolved the options: opts is never NULL, channels is 1
 * or 3 and both limits are non-zero. out may arrive holding a buffer to reuse: codecs size it
 * with fmt_image_reserve. They follow the contract of fmt_image_decode: on error *out is zeroed and
 * owns nothing (image.c releases what is left), and msg (which may be NULL) says why.
 */
#ifndef FMT_CODEC_H
#define FMT_CODEC_H

#include "image.h"
#include "enhance.h"

/* Limits with zero fields replaced by the defaults. l may be NULL (all defaults). */
fmt_limits fmt_limits_resolve(const fmt_limits *l);

/* 0 if a width x height image is within the (resolved) limits, else FMT_ETOOBIG with a message.
 * Zero sizes are not checked here: each codec rejects them as corrupt. */
int fmt_limits_check(const fmt_limits *l, uint32_t width, uint32_t height, fmt_msg *msg);

/* Convert npix RGB pixels to gray. gray may equal rgb (converted in place, front to back). */
void fmt_rgb_to_gray(const uint8_t *rgb, uint8_t *gray, size_t npix);

/* Replace the RGB pixels of img (channels 3) by their luma and shrink the buffer: img->channels
 * becomes 1. Never fails (a failed shrinking realloc keeps the larger buffer). */
void fmt_image_rgb_to_gray_inplace(fmt_image *img);

int fmt_jpeg_probe(const uint8_t *buf, size_t len, fmt_image_info *info, fmt_msg *msg);
int fmt_jpeg_decode(const uint8_t *buf, size_t len, const fmt_decode_opts *opts, fmt_image *out,
                    fmt_msg *msg);
int fmt_png_probe(const uint8_t *buf, size_t len, fmt_image_info *info, fmt_msg *msg);
int fmt_png_decode(const uint8_t *buf, size_t len, const fmt_decode_opts *opts, fmt_image *out,
                   fmt_msg *msg);
int fmt_bmp_probe(const uint8_t *buf, size_t len, fmt_image_info *info, fmt_msg *msg);
int fmt_bmp_decode(const uint8_t *buf, size_t len, const fmt_decode_opts *opts, fmt_image *out,
                   fmt_msg *msg);

#endif
