/* cuda_feed.h - the normalize kernel of the CUDA feed, for code that trains on its own device
 * buffers: uint8 NHWC batches (as libshardread delivers them) to normalised float32 or float16
 * NCHW, with a crop window and a horizontal flip per sample.
 *
 * Defined in libshardgpu.so (built with nvcc where the CUDA Toolkit is present, installed next to
 * libshardread; it holds the CUDA feed and nothing else). Link with -lshardgpu, or, to run where
 * CUDA may be missing, open it at run time and reach it through one exported symbol,
 * shr_feed_api_get (SHR_FEED_API_SYMBOL), returning a table of plain C function pointers: see
 * shr_feed_api below. For output sample i,
 * channel c, row y, column x of an out_height x out_width crop:
 *
 *     sx = flip[i] ? crop_x + out_width - 1 - x : crop_x + x        (crop_x, crop_y: per sample
 *     sy = crop_y + y                                                 from crop_xy, else common)
 *     dst[((i * channels + c) * out_height + y) * out_width + x]
 *         = (src[((i * height + sy) * width + sx) * channels + c] - mean[c]) / std[c]
 *
 * computed in float32 (a std of 0 divides by 1) and, for float16, rounded to nearest. The flip
 * mirrors the crop, as the reader's flip mirrors its output.
 *
 * Errors: 0, EINVAL (a window outside the source, n or a size 0, channels not 1..4, NULL
 * pointers, a negative or non-finite std), ENOMEM, ENODEV (no device), EIO (another CUDA error),
 * each with its reason in the caller's shr_msg (may be NULL): the CUDA call and its error, or the
 * argument at fault. Thread-safety: every function may be called from any thread.
 */
#ifndef SHR_CUDA_FEED_H
#define SHR_CUDA_FEED_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A failure's reason, in the caller's buffer: the same struct as shardread.h's shr_msg. */
#ifndef SHARDC_MSG_DEFINED
#define SHARDC_MSG_DEFINED
struct shardc_msg {
    char text[512];
};
#endif
typedef struct shardc_msg shr_msg;

typedef enum { SHR_FEED_F32 = 0, SHR_FEED_F16 } shr_feed_dtype;

typedef struct {
    uint32_t n, height, width, channels;    /* the source: n samples of uint8 HWC */
    uint32_t out_height, out_width;         /* the crop (0: the source's size) */
    uint32_t crop_x, crop_y;                /* its origin, for every sample ... */
    const uint32_t *crop_xy;                /* ... or, if not NULL, per sample: device memory
                                             * (host memory for shr_feed_normalize_host) holding
                                             * n (x, y) pairs; an origin past width - out_width
                                             * (height - out_height) is clamped to it */
    const uint8_t *flip;                    /* NULL, or n flags (same memory as crop_xy): mirror
                                             * sample i where flip[i] is non-zero */
    float mean[4], std[4];                  /* per channel, in pixel units (0..255) */
    shr_feed_dtype dtype;
} shr_feed_norm;

/* Bytes of the output: n * channels * out_height * out_width * (4 or 2). 0 for bad sizes. */
uint64_t shr_feed_out_bytes(const shr_feed_norm *p);

/* Queue the kernel on stream (a cudaStream_t; NULL: the legacy default stream). src and dst are
 * device pointers (dst: shr_feed_out_bytes, float or half aligned); crop_xy and flip, if set,
 * must stay valid until the kernel has run. Returns as soon as it is queued; a kernel failure
 * shows in a later CUDA call on the stream. */
int shr_feed_normalize(const shr_feed_norm *p, const uint8_t *src, void *dst, void *stream,
                       shr_msg *msg);

/* The same on host memory, synchronously: src (n * height * width * channels bytes), crop_xy and
 * flip are copied to the device, the kernel runs, the result comes back to dst. For tests and
 * tools; a training loop keeps its batches on the device and uses shr_feed_normalize. */
int shr_feed_normalize_host(const shr_feed_norm *p, const uint8_t *src, void *dst, shr_msg *msg);

/* 1 if a device is usable: present, and able to run this library's kernels (probed once per
 * process; a device the library has no code for counts as none). */
int shr_feed_available(void);

/* Why shr_feed_available is 0 (the CUDA call that failed and its error, with the driver and
 * runtime versions), or which device it found. Never NULL; static, fixed after the probe. */
const char *shr_feed_status(void);

/* ---- the table, for callers that open libshardgpu.so at run time (dlopen) ----
 * A caller compiled against this header checks abi and norm_size before using the rest: a table
 * whose numbers differ comes from another version and must be treated as absent. */
#define SHR_FEED_ABI 2         /* 2: the reason in the caller's shr_msg (no per-thread error) */

typedef struct {
    uint32_t abi;               /* SHR_FEED_ABI */
    uint32_t norm_size;         /* sizeof(shr_feed_norm) */
    int (*available)(void);
    const char *(*status)(void);
    uint64_t (*out_bytes)(const shr_feed_norm *p);
    int (*normalize)(const shr_feed_norm *p, const uint8_t *src, void *dst, void *stream,
                     shr_msg *msg);
    int (*normalize_host)(const shr_feed_norm *p, const uint8_t *src, void *dst, shr_msg *msg);
} shr_feed_api;

const shr_feed_api *shr_feed_api_get(void);
#define SHR_FEED_API_SYMBOL "shr_feed_api_get"

#ifdef __cplusplus
}
#endif

#endif
