/* cuda_feed.cu - the CUDA feed (cuda_feed.h): uint8 NHWC batches, as libshardread delivers
 * them, to normalised float32 or float16 NCHW on the device. A library feature of libshardgpu.so.
 *
 * The kernel is one thread per output element (a grid-stride loop), a template for float and half
 * outputs; every argument is checked on the host before anything is queued. A failure's reason
 * goes to the caller's shr_msg.
 */
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <errno.h>
#include <math.h>
#include <mutex>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "cuda_feed.h"
}
#include "cuda_common.h"

#define EXPORT extern "C" __attribute__((visibility("default")))

__device__ static inline void store_out(float *p, size_t i, float v)
{
    p[i] = v;
}

__device__ static inline void store_out(__half *p, size_t i, float v)
{
    p[i] = __float2half_rn(v);
}

typedef struct {
    uint32_t n, h, w, c, oh, ow, cx, cy;
    const uint32_t *crop_xy;
    const uint8_t *flip;
    float mean[4], inv_std[4];
} norm_args;

template <typename T>
__global__ void normalize_kernel(norm_args a, const uint8_t *src, T *dst)
{
    size_t plane = (size_t)a.oh * a.ow;
    size_t total = (size_t)a.n * a.c * plane;
    for (size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (size_t)gridDim.x * blockDim.x) {
        size_t i = t / (plane * a.c);
        uint32_t ch = (uint32_t)(t / plane % a.c);
        uint32_t y = (uint32_t)(t % plane / a.ow), x = (uint32_t)(t % a.ow);
        uint32_t cx = a.cx, cy = a.cy;
        if (a.crop_xy) {
            cx = min(a.crop_xy[2 * i], a.w - a.ow);
            cy = min(a.crop_xy[2 * i + 1], a.h - a.oh);
        }
        uint32_t sx = a.flip && a.flip[i] ? cx + a.ow - 1 - x : cx + x;
        uint32_t sy = cy + y;
        uint8_t v = src[((i * a.h + sy) * a.w + sx) * a.c + ch];
        float m = pick4(a.mean[0], a.mean[1], a.mean[2], a.mean[3], ch);
        float is = pick4(a.inv_std[0], a.inv_std[1], a.inv_std[2], a.inv_std[3], ch);
        store_out(dst, t, ((float)v - m) * is);
    }
}

/* ---- availability ---- */

static std::once_flag g_avail_once;
static int g_avail;
static char g_avail_status[512];

static void probe_device(void)
{
    int n = 0, drv = 0, rt = 0, dev = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    char versions[96];
    snprintf(versions, sizeof versions, "runtime %d.%d, driver %d.%d", rt / 1000, rt % 1000 / 10,
             drv / 1000, drv % 1000 / 10);
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        cudaGetLastError();
        snprintf(g_avail_status, sizeof g_avail_status, "cudaGetDeviceCount: %s (%s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "no device", versions);
        return;
    }
    /* a device this object has no code for (SASS for sm_90, PTX for compute_90: older GPUs) is
     * as good as none; asking for a kernel's attributes loads the module and says so */
    cudaFuncAttributes fa;
    cudaDeviceProp prop;
    cudaGetDevice(&dev);
    if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        cudaGetLastError();
        snprintf(prop.name, sizeof prop.name, "?");
        prop.major = prop.minor = 0;
    }
    e = cudaFuncGetAttributes(&fa, normalize_kernel<float>);
    if (e != cudaSuccess) {
        cudaGetLastError();
        snprintf(g_avail_status, sizeof g_avail_status,
                 "device %d (%s, sm_%d%d): cannot load the kernels: %s (%s)", dev, prop.name,
                 prop.major, prop.minor, cudaGetErrorString(e), versions);
        return;
    }
    snprintf(g_avail_status, sizeof g_avail_status, "device %d of %d: %s, sm_%d%d (%s)", dev, n,
             prop.name, prop.major, prop.minor, versions);
    g_avail = 1;
}

EXPORT int shr_feed_available(void)
{
    std::call_once(g_avail_once, probe_device);
    return g_avail;
}

EXPORT const char *shr_feed_status(void)
{
    std::call_once(g_avail_once, probe_device);
    return g_avail_status;
}

/* ---- the feed kernel ---- */

static int feed_say(shr_msg *msg, int rc, const char *what)
{
    if (msg)
        snprintf(msg->text, sizeof msg->text, "%s", what);
    return rc;
}

static int feed_fail(shr_msg *msg, int rc, const char *what, cudaError_t e)
{
    if (msg)
        snprintf(msg->text, sizeof msg->text, "%s: %s", what, cudaGetErrorString(e));
    return rc;
}

/* Checks p and fills the kernel's arguments (EINVAL, with the reason in msg). */
static int feed_args(const shr_feed_norm *p, norm_args *a, shr_msg *msg)
{
    memset(a, 0, sizeof *a);
    if (!p || p->n == 0 || p->height == 0 || p->width == 0)
        return feed_say(msg, EINVAL, "no batch, or a batch of size 0");
    if (p->channels < 1 || p->channels > 4)
        return feed_say(msg, EINVAL, "channels must be 1..4");
    if (p->dtype != SHR_FEED_F32 && p->dtype != SHR_FEED_F16)
        return feed_say(msg, EINVAL, "unknown output dtype");
    a->n = p->n;
    a->h = p->height;
    a->w = p->width;
    a->c = p->channels;
    a->oh = p->out_height ? p->out_height : p->height;
    a->ow = p->out_width ? p->out_width : p->width;
    if (a->oh > a->h || a->ow > a->w)
        return feed_say(msg, EINVAL, "the crop is larger than the source");
    if (!p->crop_xy && ((uint64_t)p->crop_x + a->ow > a->w || (uint64_t)p->crop_y + a->oh > a->h))
        return feed_say(msg, EINVAL, "the crop window leaves the source");
    a->cx = p->crop_x;
    a->cy = p->crop_y;
    a->crop_xy = p->crop_xy;
    a->flip = p->flip;
    for (uint32_t c = 0; c < a->c; c++) {
        if (!isfinite(p->std[c]) || p->std[c] < 0 || !isfinite(p->mean[c]))
            return feed_say(msg, EINVAL, "a mean or std that is not finite, or a negative std");
        a->mean[c] = p->mean[c];
        a->inv_std[c] = p->std[c] > 0 ? 1.0f / p->std[c] : 1.0f;
    }
    return 0;
}

EXPORT uint64_t shr_feed_out_bytes(const shr_feed_norm *p)
{
    norm_args a;
    if (feed_args(p, &a, NULL) != 0)
        return 0;
    return (uint64_t)a.n * a.c * a.oh * a.ow * (p->dtype == SHR_FEED_F16 ? 2u : 4u);
}

static int feed_launch(const norm_args *a, shr_feed_dtype dtype, const uint8_t *src, void *dst,
                       cudaStream_t st, shr_msg *msg)
{
    size_t total = (size_t)a->n * a->c * a->oh * a->ow;
    if (dtype == SHR_FEED_F16)
        normalize_kernel<__half><<<grid_for(total, 256), 256, 0, st>>>(*a, src, (__half *)dst);
    else
        normalize_kernel<float><<<grid_for(total, 256), 256, 0, st>>>(*a, src, (float *)dst);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : feed_fail(msg, rc_of_cuda(e), "normalize kernel", e);
}

/* the checks both entries make before any CUDA call */
static int feed_ready(const shr_feed_norm *p, const uint8_t *src, void *dst, norm_args *a,
                      shr_msg *msg)
{
    if (!src || !dst)
        return feed_say(msg, EINVAL, "no source or destination");
    int rc = feed_args(p, a, msg);
    if (rc)
        return rc;
    if (!shr_feed_available())
        return feed_say(msg, ENODEV, shr_feed_status());
    return 0;
}

EXPORT int shr_feed_normalize(const shr_feed_norm *p, const uint8_t *src, void *dst, void *stream,
                              shr_msg *msg)
{
    norm_args a;
    int rc = feed_ready(p, src, dst, &a, msg);
    return rc ? rc : feed_launch(&a, p->dtype, src, dst, (cudaStream_t)stream, msg);
}

#define FEED_CU(call)                                                                             \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess) {                                                                  \
            rc = feed_fail(msg, rc_of_cuda(e_), #call, e_);                                       \
            goto leave;                                                                           \
        }                                                                                         \
    } while (0)

EXPORT int shr_feed_normalize_host(const shr_feed_norm *p, const uint8_t *src, void *dst,
                                   shr_msg *msg)
{
    norm_args a;
    int rc = 0;
    uint8_t *d_src = NULL, *d_flip = NULL;
    uint32_t *d_xy = NULL;
    void *d_dst = NULL;
    size_t in_bytes = 0, out_bytes = 0;
    if ((rc = feed_ready(p, src, dst, &a, msg)) != 0)
        return rc;
    in_bytes = (size_t)a.n * a.h * a.w * a.c;
    out_bytes = (size_t)shr_feed_out_bytes(p);
    FEED_CU(cudaMalloc((void **)&d_src, in_bytes));
    FEED_CU(cudaMalloc(&d_dst, out_bytes));
    FEED_CU(cudaMemcpy(d_src, src, in_bytes, cudaMemcpyHostToDevice));
    if (p->crop_xy) {
        FEED_CU(cudaMalloc((void **)&d_xy, (size_t)a.n * 2 * sizeof(uint32_t)));
        FEED_CU(cudaMemcpy(d_xy, p->crop_xy, (size_t)a.n * 2 * sizeof(uint32_t),
                           cudaMemcpyHostToDevice));
        a.crop_xy = d_xy;
    }
    if (p->flip) {
        FEED_CU(cudaMalloc((void **)&d_flip, a.n));
        FEED_CU(cudaMemcpy(d_flip, p->flip, a.n, cudaMemcpyHostToDevice));
        a.flip = d_flip;
    }
    if ((rc = feed_launch(&a, p->dtype, d_src, d_dst, 0, msg)) != 0)
        goto leave;
    FEED_CU(cudaMemcpy(dst, d_dst, out_bytes, cudaMemcpyDeviceToHost));
leave:
    cudaFree(d_src);
    cudaFree(d_dst);
    cudaFree(d_xy);
    cudaFree(d_flip);
    return rc;
}

/* ---- the table ---- */

static const shr_feed_api g_feed_api = {
    SHR_FEED_ABI,
    (uint32_t)sizeof(shr_feed_norm),
    shr_feed_available,
    shr_feed_status,
    shr_feed_out_bytes,
    shr_feed_normalize,
    shr_feed_normalize_host,
};

EXPORT const shr_feed_api *shr_feed_api_get(void)
{
    return &g_feed_api;
}
