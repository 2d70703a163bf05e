/* resample.h - image resampling that gives Pillow's Image.resize bytes.
 *
 * What it computes: for 8-bit images of 1 to 4 interleaved channels, exactly the pixels of
 * Pillow's `Image.resize((dst_w, dst_h), filter, box)` (Pillow 9.x, modes L and RGB; every
 * channel is filtered on its own, so 2 and 4 channels behave like RGB's bands):
 *   - a separable convolution, horizontal pass first, then vertical; each axis has its own table;
 *   - for output sample i the filter is centred on box0 + (i + 0.5) * scale in source
 *     coordinates, scale = (box1 - box0) / out_len; when downscaling (scale > 1) the filter's
 *     support is stretched by scale (antialiasing), when upscaling it is not;
 *   - the taps are clipped to the image (never to the box: pixels just outside a sub-pixel box
 *     contribute, as in Pillow), normalised to sum 1, then held as 22-bit fixed point
 *     integers; each output is (sum(pixel * coeff) + 2^21) >> 22 clamped to 0..255 (32-bit
 *     integer arithmetic, so every code path gives the same bytes);
 *   - the horizontal pass only computes the source rows the vertical pass will read; a pass
 *     whose axis keeps its size with the whole image as box is skipped; same size and whole box
 *     is a copy;
 *   - FMT_FILTER_NEAREST is Pillow's affine nearest neighbour: source index floor(box0 +
 *     (i + 0.5) * scale), accumulated in double precision as Pillow does.
 * Box coordinates are single-precision floats, as Pillow parses them, and all arithmetic on
 * them follows Pillow's types, so fractional boxes give Pillow's bytes too.
 *
 * Coefficient tables depend only on (input length, box edges, output length, filter). A
 * fmt_rs_cache shares them between images and threads: build one per process (or per reader),
 * hand it to every fmt_rs_scratch, and tables are computed once per distinct geometry. Tables
 * in the cache are immutable once published and live until the cache is freed; the cache stops
 * growing at FMT_RS_CACHE_MAX_BYTES, after which a scratch keeps the tables it needs for itself.
 *
 * Speed: the inner loops exist as SSE4.1 and AVX2 code (chosen at run time from the CPU) and as
 * plain C; all give the same bytes. A scratch takes the best path the CPU offers when it is
 * created, or the plain one where the switch of simd.h is off then (fmt_simd_set(0): the
 * programs' SHARDC_RESAMPLE=plain or SHARDREAD_SIMD=0); fmt_rs_scratch_set_path() forces a
 * path, for tests and comparisons.
 *
 * Memory: a scratch holds the intermediate (horizontally resized) rows and private tables; it
 * grows to the largest geometry seen and is reused, so resizing allocates nothing in steady
 * state except when a new geometry's tables are built.
 *
 * Thread-safety: a fmt_rs_cache may be shared by any number of threads. A fmt_rs_scratch is
 * used by one thread at a time. No global state.
 */
#ifndef FMT_RESAMPLE_H
#define FMT_RESAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "fmt.h"

/* Zero is bilinear, torchvision's default, so zero-initialised options get it. */
typedef enum {
    FMT_FILTER_BILINEAR = 0,
    FMT_FILTER_NEAREST,
    FMT_FILTER_BOX,
    FMT_FILTER_HAMMING,
    FMT_FILTER_BICUBIC,
    FMT_FILTER_LANCZOS,
    FMT_FILTER_COUNT
} fmt_filter;

/* "nearest", "box", "bilinear", "hamming", "bicubic", "lanczos"; "unknown" otherwise. */
const char *fmt_filter_name(fmt_filter f);
/* Parse a name as above. Returns 0 or FMT_EINVAL. */
int fmt_filter_parse(const char *name, fmt_filter *f);

/* A source rectangle in source pixel coordinates, edges may be fractional:
 * 0 <= x0 <= x1 <= width, 0 <= y0 <= y1 <= height (Pillow's `box`). */
typedef struct {
    float x0, y0, x1, y1;
} fmt_rs_box;

/* An 8-bit interleaved image that the resampler reads or writes; stride in bytes
 * (>= width * channels). */
typedef struct {
    uint8_t *pixels;
    uint32_t width, height, channels;
    size_t stride;
} fmt_rs_view;

/* Largest side the resampler accepts (Pillow works in int). */
#define FMT_RS_MAX_SIDE (1u << 24)
#define FMT_RS_CACHE_MAX_BYTES ((size_t)64 << 20)

typedef struct fmt_rs_cache fmt_rs_cache;
typedef struct fmt_rs_scratch fmt_rs_scratch;

/* Returns 0, FMT_EINVAL (c NULL) or ENOMEM. */
int fmt_rs_cache_create(fmt_rs_cache **c);
/* Frees the cache and its tables; no scratch created with it may be used afterwards. NULL ok. */
void fmt_rs_cache_free(fmt_rs_cache *c);
/* Number of tables in the cache (for tests and statistics). */
size_t fmt_rs_cache_count(fmt_rs_cache *c);

/* A per-thread scratch. cache may be NULL (tables are then kept per scratch, the last few
 * geometries); otherwise it must outlive the scratch. Returns 0, FMT_EINVAL or ENOMEM. */
int fmt_rs_scratch_create(fmt_rs_cache *cache, fmt_rs_scratch **s);
void fmt_rs_scratch_free(fmt_rs_scratch *s);      /* accepts NULL */

typedef enum {
    FMT_RS_PATH_AUTO = 0,   /* the best the CPU has */
    FMT_RS_PATH_PLAIN,      /* portable C */
    FMT_RS_PATH_SSE41,
    FMT_RS_PATH_AVX2,
    FMT_RS_PATH_AVX512      /* AVX2, and the passes with AVX-512 F, BW and VBMI */
} fmt_rs_path;

/* Choose the code path of s. Returns 0, or FMT_EUNSUPPORTED when the CPU lacks it (s keeps its
 * path). */
int fmt_rs_scratch_set_path(fmt_rs_scratch *s, fmt_rs_path path);
/* The path s uses (never AUTO), and its name ("plain", "sse4.1", "avx2", "avx512"). */
fmt_rs_path fmt_rs_scratch_path(const fmt_rs_scratch *s);
const char *fmt_rs_path_name(fmt_rs_path p);

/* Resize the box of src (NULL: the whole image) to the whole of dst with filter f. dst's
 * width and height are the output size; its channels must equal src's (1..4). src and dst must
 * not overlap. Returns 0; FMT_EINVAL for a bad argument, box or filter (msg says which);
 * FMT_ETOOBIG beyond FMT_RS_MAX_SIDE; ENOMEM. On error dst's pixels are unspecified. */
int fmt_resample(fmt_rs_scratch *s, const fmt_rs_view *src, const fmt_rs_box *box,
                 fmt_filter f, const fmt_rs_view *dst, fmt_msg *msg);

/* The window (win_x, win_y, dst->width, dst->height) of the out_w x out_h resize that
 * fmt_resample would give: the same bytes as resizing fully and cropping (torchvision's
 * Resize then CenterCrop), computing only what the window needs. Errors as fmt_resample, plus
 * FMT_EINVAL for a window outside out_w x out_h. */
int fmt_resample_window(fmt_rs_scratch *s, const fmt_rs_view *src, const fmt_rs_box *box,
                        fmt_filter f, uint32_t out_w, uint32_t out_h, uint32_t win_x,
                        uint32_t win_y, const fmt_rs_view *dst, fmt_msg *msg);

/* The source pixels fmt_resample_window(s, view of a sw x sh image, box, f, out_w, out_h,
 * win_x, win_y, dw x dh dst) reads: columns rect[0] .. rect[0] + rect[2] - 1 and rows
 * rect[1] .. rect[1] + rect[3] - 1 (the union of the taps of the window's pixels; the vector
 * paths may load a few bytes beyond it within a row, and never use them). A decoder may leave
 * every other pixel unset and the window's bytes stay the same. The whole image for the
 * nearest filter. Returns 0; the errors of fmt_resample_window for bad arguments (rect is then
 * the whole image). */
int fmt_resample_source_rect(fmt_rs_scratch *s, uint32_t sw, uint32_t sh, const fmt_rs_box *box,
                             fmt_filter f, uint32_t out_w, uint32_t out_h, uint32_t win_x,
                             uint32_t win_y, uint32_t dw, uint32_t dh, uint32_t rect[4]);

#endif
