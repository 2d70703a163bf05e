/* cuda_step.cu - the GPU training step of shardbench train: libshardbench-gpu.so, the
 * benchmark's own library (not a library of the project's: no header installed, no user links
 * it), which shardbench opens at run time (gpu_api.h). It links the CUDA feed's libshardgpu.so
 * for the device probe (shr_feed_available) and shares launch helpers with it (cuda_common.h).
 *
 * What this file does
 * -------------------
 * It is the device half of step.h. The consumer thread of a training loop hands us one batch at
 * a time (sb_step_run); each batch lies in a host buffer of libshardread's ring, usually pinned
 * (cudaHostAlloc), and goes back to the ring as soon as we return. We copy it to the device, run
 * one training step on it there, and return as early as that allows, so that the host keeps
 * reading while the device computes.
 *
 * Two streams, K device buffers, three kinds of events
 * ---------------------------------------------------
 * A copy stream carries the host-to-device copies and a compute stream the steps; both are
 * non-blocking streams, so nothing else in the process (the legacy default stream) serialises
 * them. Batch r goes to device slot k = r mod K (K = 2 by default: double buffering), a device
 * buffer for its pixels and one for its labels. Per slot there are events:
 *
 *     copy_done[k]   recorded on the copy stream after batch r's copy into slot k
 *     step_done[k]   recorded on the compute stream after batch r's step, which read slot k
 *
 * and the order they impose is:
 *
 *     copy stream:     wait step_done[k] (of batch r - K) -> copy r into k -> record copy_done[k]
 *     compute stream:  wait copy_done[k] -> step r on k -> record step_done[k]
 *     host:            enqueue both, then cudaEventSynchronize(copy_done[k]), then return
 *
 * So (1) a step never reads a device buffer before its copy has landed (the compute stream
 * waits for copy_done), (2) a device buffer is never overwritten while an earlier step still
 * reads it (the copy stream waits for that step's step_done), and (3) the host buffer can be
 * released and refilled when sb_step_run returns, because the DMA from it has finished. While
 * step r runs on slot k, the copy of batch r + 1 into the other slot proceeds in parallel: that
 * overlap is what double buffering buys. The host is throttled in the right place too: the
 * copy of batch r waits for step r - K, and the host waits for that copy, so a consumer can be
 * at most K steps ahead of the device and never queues unbounded work.
 *
 * The waits are device-side (cudaStreamWaitEvent): the host never blocks on a step, only on the
 * copy of its own batch. copy_done events use cudaEventBlockingSync, so that wait sleeps instead
 * of spinning a core the reader's workers could use.
 *
 * The labels of a model step are converted to int32 into a small pinned staging array per slot
 * before they are copied, which also makes that copy a true async DMA whatever memory the
 * reader's labels sit in. The staging array of slot k is reused only K runs later, after the
 * host has already waited for the copy out of it.
 *
 * Timing
 * ------
 * h2d_s is measured with events around each copy (the copy stream records its start after the
 * wait on step_done, so the time is the transfer's alone); it is read right after the host
 * waited for copy_done. busy_s is the device time between events recorded around each step on
 * the compute stream. Those cannot be read at once without waiting for the step, so they go to
 * a ring of 64 event pairs and are collected when a pair is reused (by then long finished) and
 * at sync.
 *
 * The steps
 * ---------
 * Emulated: one thread spins on the device's %globaltimer for step_ms (sleeping 0.5 us per turn
 * with __nanosleep). Model: a downsample kernel turns uint8 NHWC into normalised float NCHW at
 * model_side x model_side (box average over each output cell), column j of a D x n matrix X
 * (D = channels * side * side, cuBLAS's column-major view of one sample per row). Then softmax
 * regression (Z = W X + b) or a 2-layer MLP (H = relu(W1 X + b1), Z = W2 H + b2), all products
 * cublasSgemm on the compute stream; a loss kernel (a warp per sample) computes the softmax
 * cross-entropy, the gradient (P - Y) / n and whether the argmax was right, accumulating the
 * batch's mean loss and the correct count in device memory; SGD updates the weights in place by
 * sgemm with beta = 1 (W += -lr G X^T) and small bias kernels. The counters are read back at
 * sync only, so a run never waits for the device.
 *
 * The model is the CPU step's (step_cpu.c) to the bit where it can be: the same weight layout
 * (row-major out x in, which cuBLAS sees as the transposed, column-major in x out matrix, hence
 * the OP_T / OP_N pairs below), the same splitmix64 stream from the seed drawn in the same order
 * (W1 He-uniform, then W2 Glorot-uniform, biases 0) when the first batch fixes the channel count,
 * the same box bounds and normalisation. The two differ only by float rounding (summation
 * order, expf), so the same batches give the same losses to a few decimals on either.
 *
 * Errors
 * ------
 * A bad option or batch is refused before anything is queued (SHR_EINVAL), leaving the step as
 * it was. A CUDA or cuBLAS failure leaves device state unknown: the step is then failed, every
 * later call returns the same code (ENOMEM, ENODEV or EIO) and step_error says what failed.
 */
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <errno.h>
#include <math.h>
#include <mutex>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "cuda_feed.h"
#include "gpu_api.h"
}
#include "cuda_common.h"

#define EXPORT extern "C" __attribute__((visibility("default")))

#define MAX_SLOTS 16u
#define TIMING_RING 64u
#define CHECKSUM_RUNS 4096u         /* runs whose checksums SB_GPU_CHECKSUMS keeps */
#define MAX_CLASSES 65536u
#define MAX_SIDE 512u
#define MAX_HIDDEN 65536u

/* ---- kernels ---- */

__device__ static inline unsigned long long global_ns(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void spin_kernel(unsigned long long ns)
{
    unsigned long long t0 = global_ns();
    while (global_ns() - t0 < ns)
        __nanosleep(500);
}

/* sb_gpu_checksum, in parallel: each thread sums a strided share, a warp adds its lanes, one
 * atomic per warp. */
__global__ void checksum_kernel(const uint8_t *p, size_t n, unsigned long long *out)
{
    unsigned long long sum = 0;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        sum += (unsigned long long)(p[i] + 1u) * (((uint32_t)i * 2654435761u) | 1u);
    for (int off = 16; off > 0; off /= 2)
        sum += __shfl_down_sync(0xffffffffu, sum, off);
    if ((threadIdx.x & 31) == 0)
        atomicAdd(out, sum);
}

typedef struct {
    float mean[3], inv_std[3];
} norm3;


/* uint8 NHWC (h x w x c) -> column j of X (D x n), laid out c x side x side: the box average of
 * the source cell [y*h/side, (y+1)*h/side) x [x*w/side, (x+1)*w/side) (at least one pixel, so
 * sources smaller than side repeat pixels), normalised. */
__global__ void downsample_kernel(const uint8_t *src, uint32_t n, uint32_t h, uint32_t w,
                                  uint32_t c, uint32_t side, norm3 nm, float *x)
{
    size_t per = (size_t)c * side * side;
    size_t total = per * n;
    for (size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (size_t)gridDim.x * blockDim.x) {
        size_t j = t / per, r = t % per;
        uint32_t ch = (uint32_t)(r / ((size_t)side * side));
        uint32_t oy = (uint32_t)(r / side % side), ox = (uint32_t)(r % side);
        uint32_t y0 = (uint32_t)((uint64_t)oy * h / side), y1 = (uint32_t)((uint64_t)(oy + 1) * h / side);
        uint32_t x0 = (uint32_t)((uint64_t)ox * w / side), x1 = (uint32_t)((uint64_t)(ox + 1) * w / side);
        if (y1 <= y0)
            y1 = y0 + 1;
        if (x1 <= x0)
            x1 = x0 + 1;
        const uint8_t *img = src + j * h * w * c;
        unsigned long long sum = 0;     /* a cell may hold millions of pixels at side 1 */
        for (uint32_t yy = y0; yy < y1; yy++)
            for (uint32_t xx = x0; xx < x1; xx++)
                sum += img[((size_t)yy * w + xx) * c + ch];
        float avg = (float)sum / (float)((y1 - y0) * (x1 - x0));
        float m = pick4(nm.mean[0], nm.mean[1], nm.mean[2], 0, ch);
        float is = pick4(nm.inv_std[0], nm.inv_std[1], nm.inv_std[2], 1, ch);
        x[t] = (avg - m) * is;
    }
}

/* h (rows x n, column-major) += b per row, then ReLU, in place. */
__global__ void bias_relu_kernel(float *hm, const float *b, uint32_t rows, uint32_t n)
{
    size_t total = (size_t)rows * n;
    for (size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (size_t)gridDim.x * blockDim.x)
        hm[t] = fmaxf(hm[t] + b[t % rows], 0.0f);
}

typedef struct {
    double loss;                    /* sum of per-batch mean losses */
    unsigned long long correct;
} accum;

/* Softmax cross-entropy of column j of z + b against labels[j], one warp per sample. Writes the
 * gradient (p - onehot) / n into g, adds loss / n to acc->loss and a right argmax (first of equal
 * maxima) to acc->correct. */
__global__ void loss_kernel(const float *z, const float *b, const int32_t *labels, uint32_t k,
                            uint32_t n, float *g, accum *acc)
{
    uint32_t lane = threadIdx.x & 31;
    uint32_t j = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (j >= n)
        return;
    const float *col = z + (size_t)j * k;
    float *gcol = g + (size_t)j * k;
    float best = -INFINITY;
    uint32_t arg = 0;
    for (uint32_t i = lane; i < k; i += 32) {
        float v = col[i] + b[i];
        if (v > best) {
            best = v;
            arg = i;
        }
    }
    for (int off = 16; off > 0; off /= 2) {
        float ov = __shfl_down_sync(0xffffffffu, best, off);
        uint32_t oa = __shfl_down_sync(0xffffffffu, arg, off);
        if (ov > best || (ov == best && oa < arg)) {
            best = ov;
            arg = oa;
        }
    }
    best = __shfl_sync(0xffffffffu, best, 0);
    arg = __shfl_sync(0xffffffffu, arg, 0);
    float sum = 0.0f;
    for (uint32_t i = lane; i < k; i += 32)
        sum += expf(col[i] + b[i] - best);
    for (int off = 16; off > 0; off /= 2)
        sum += __shfl_down_sync(0xffffffffu, sum, off);
    sum = __shfl_sync(0xffffffffu, sum, 0);
    uint32_t y = (uint32_t)labels[j];
    float inv = 1.0f / sum, inv_n = 1.0f / (float)n;
    for (uint32_t i = lane; i < k; i += 32) {
        float p = expf(col[i] + b[i] - best) * inv;
        gcol[i] = (p - (i == y ? 1.0f : 0.0f)) * inv_n;
    }
    if (lane == 0) {
        float loss = logf(sum) + best - (col[y] + b[y]);
        atomicAdd(&acc->loss, (double)loss / n);
        if (arg == y)
            atomicAdd(&acc->correct, 1ull);
    }
}

/* b[i] -= lr * sum_j g[i + j * rows]: the bias step (g already holds the batch mean's share). */
__global__ void bias_step_kernel(float *b, const float *g, uint32_t rows, uint32_t n, float lr)
{
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows)
        return;
    float s = 0.0f;
    for (uint32_t j = 0; j < n; j++)
        s += g[i + (size_t)j * rows];
    b[i] -= lr * s;
}

/* ReLU backward in place (dh = 0 where the activation h was 0) and the hidden bias step. */
__global__ void relu_back_bias_kernel(float *dh, const float *hm, float *b, uint32_t rows,
                                      uint32_t n, float lr)
{
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows)
        return;
    float s = 0.0f;
    for (uint32_t j = 0; j < n; j++) {
        size_t t = i + (size_t)j * rows;
        float v = hm[t] > 0.0f ? dh[t] : 0.0f;
        dh[t] = v;
        s += v;
    }
    b[i] -= lr * s;
}


/* ---- host side: helpers ---- */


static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* n weights uniform in [-a, a), continuing the stream in *state (as step_cpu.c draws them). */
static void init_uniform(float *w, size_t n, float a, uint64_t *state)
{
    for (size_t i = 0; i < n; i++) {
        double u = (double)(splitmix64(state) >> 11) * (1.0 / 9007199254740992.0);
        w[i] = (float)((2.0 * u - 1.0) * a);
    }
}


/* ---- the step ---- */

typedef struct {
    cudaEvent_t start, end;
    int used;
} timing_pair;

typedef struct gpu_step {
    sb_step_opts o;
    uint32_t flags, slots;
    int dev;
    int failed;                     /* the rc every call returns once a CUDA call failed */
    char msg[256];
    cudaStream_t copy, compute;
    cublasHandle_t blas;

    /* slots */
    uint8_t *d_in[MAX_SLOTS];
    int32_t *d_lab[MAX_SLOTS], *h_lab[MAX_SLOTS];
    cudaEvent_t copy_start[MAX_SLOTS], copy_done[MAX_SLOTS], step_done[MAX_SLOTS];
    size_t in_cap;                  /* bytes of each d_in */
    uint32_t lab_cap;               /* labels of each d_lab / h_lab */
    uint64_t runs;
    size_t last_bytes;
    uint32_t last_slot;

    timing_pair ring[TIMING_RING];
    uint32_t ring_next;

    /* counters since the last sync */
    double busy_s, h2d_s;
    uint64_t h2d_bytes, loss_batches, seen;
    accum *d_acc;

    unsigned long long *d_sums;     /* 2 per run: at start, at end */

    /* model: fixed by the first batch */
    uint32_t side, hidden, classes, ch, dim;
    uint32_t in2;                   /* input of the output layer: hidden (MLP) or dim */
    float lr;
    norm3 nm;
    float *w1, *b1;                 /* MLP only: hidden x dim (row-major), hidden */
    float *w2, *b2;                 /* classes x in2 (row-major), classes */
    float *x, *hm, *z, *g, *dh;     /* activations, column j for sample j, up to max_n */
    uint32_t max_n;
} gpu_step;

static int step_fail(gpu_step *s, int rc, const char *what, const char *why)
{
    snprintf(s->msg, sizeof s->msg, "%s: %s", what, why);
    s->failed = rc;
    return rc;
}

static int cuda_fail(gpu_step *s, cudaError_t e, const char *what)
{
    return step_fail(s, rc_of_cuda(e), what, cudaGetErrorString(e));
}

static int blas_fail(gpu_step *s, cublasStatus_t st, const char *what)
{
    return step_fail(s, st == CUBLAS_STATUS_ALLOC_FAILED ? ENOMEM : EIO, what,
                     cublasGetStatusString(st));
}

#define CU(call)                                                                                  \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess) {                                                                  \
            rc = cuda_fail(s, e_, #call);                                                         \
            goto leave;                                                                           \
        }                                                                                         \
    } while (0)

#define BL(call)                                                                                  \
    do {                                                                                          \
        cublasStatus_t b_ = (call);                                                               \
        if (b_ != CUBLAS_STATUS_SUCCESS) {                                                        \
            rc = blas_fail(s, b_, #call);                                                         \
            goto leave;                                                                           \
        }                                                                                         \
    } while (0)

static int valid_opts(const sb_step_opts *o)
{
    if (o->kind != SB_STEP_EMULATED && o->kind != SB_STEP_MODEL)
        return 0;
    if (o->kind == SB_STEP_EMULATED)
        return isfinite(o->step_ms) && o->step_ms >= 0 && o->step_ms <= 3600e3;
    if (o->model != SB_MODEL_SOFTMAX && o->model != SB_MODEL_MLP)
        return 0;
    if (o->classes == 0 || o->classes > MAX_CLASSES || o->model_side > MAX_SIDE ||
        o->hidden > MAX_HIDDEN || !isfinite(o->lr) || o->lr < 0)
        return 0;
    for (int c = 0; c < 3; c++)
        if (!isfinite(o->std[c]) || o->std[c] < 0 || !isfinite(o->mean[c]))
            return 0;
    return 1;
}

static void gpu_step_free(void *p)
{
    gpu_step *s = (gpu_step *)p;
    if (!s)
        return;
    cudaSetDevice(s->dev);
    /* nothing may be freed while queued work still uses it */
    if (s->copy)
        cudaStreamSynchronize(s->copy);
    if (s->compute)
        cudaStreamSynchronize(s->compute);
    if (s->blas)
        cublasDestroy(s->blas);
    cudaEvent_t *evs[] = {s->copy_start, s->copy_done, s->step_done};
    for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
        for (uint32_t k = 0; k < MAX_SLOTS; k++)
            if (evs[i][k])
                cudaEventDestroy(evs[i][k]);
    for (uint32_t t = 0; t < TIMING_RING; t++) {
        if (s->ring[t].start)
            cudaEventDestroy(s->ring[t].start);
        if (s->ring[t].end)
            cudaEventDestroy(s->ring[t].end);
    }
    for (uint32_t k = 0; k < MAX_SLOTS; k++) {
        cudaFree(s->d_in[k]);
        cudaFree(s->d_lab[k]);
        cudaFreeHost(s->h_lab[k]);
    }
    float *bufs[] = {s->w1, s->b1, s->w2, s->b2, s->x, s->hm, s->z, s->g, s->dh};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        cudaFree(bufs[i]);
    cudaFree(s->d_acc);
    cudaFree(s->d_sums);
    if (s->copy)
        cudaStreamDestroy(s->copy);
    if (s->compute)
        cudaStreamDestroy(s->compute);
    /* a failed call leaves its error for the next caller of cudaGetLastError: not ours to pass on */
    cudaGetLastError();
    free(s);
}

static int gpu_step_create(void **out, const sb_step_opts *o, const sb_gpu_config *c)
{
    int rc = 0;
    gpu_step *s = NULL;
    *out = NULL;
    if (!o || !valid_opts(o) || (c && (c->slots == 1 || c->slots > MAX_SLOTS)))
        return SHR_EINVAL;
    if (!shr_feed_available())
        return ENODEV;
    s = (gpu_step *)calloc(1, sizeof *s);
    if (!s)
        return ENOMEM;
    s->o = *o;
    s->flags = c ? c->flags : 0;
    s->slots = c && c->slots ? c->slots : 2;
    s->side = o->model_side ? o->model_side : 16;
    s->hidden = o->hidden ? o->hidden : 128;
    s->classes = o->classes;
    s->lr = o->lr > 0 ? o->lr : 0.05f;
    for (int k = 0; k < 3; k++) {
        s->nm.mean[k] = (float)o->mean[k];
        s->nm.inv_std[k] = o->std[k] > 0 ? (float)(1.0 / o->std[k]) : 1.0f;
    }
    CU(cudaGetDevice(&s->dev));
    /* handles left NULL (calloc) are the ones free must not destroy */
    CU(cudaStreamCreateWithFlags(&s->copy, cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&s->compute, cudaStreamNonBlocking));
    for (uint32_t k = 0; k < s->slots; k++) {
        CU(cudaEventCreateWithFlags(&s->copy_start[k], cudaEventDefault));
        CU(cudaEventCreateWithFlags(&s->copy_done[k], cudaEventBlockingSync));
        CU(cudaEventCreateWithFlags(&s->step_done[k], cudaEventDisableTiming));
    }
    for (uint32_t t = 0; t < TIMING_RING; t++) {
        CU(cudaEventCreateWithFlags(&s->ring[t].start, cudaEventDefault));
        CU(cudaEventCreateWithFlags(&s->ring[t].end, cudaEventBlockingSync));
    }
    CU(cudaMalloc((void **)&s->d_acc, sizeof(accum)));
    CU(cudaMemsetAsync(s->d_acc, 0, sizeof(accum), s->compute));
    if (s->flags & SB_GPU_CHECKSUMS) {
        CU(cudaMalloc((void **)&s->d_sums, 2 * CHECKSUM_RUNS * sizeof(unsigned long long)));
        CU(cudaMemsetAsync(s->d_sums, 0, 2 * CHECKSUM_RUNS * sizeof(unsigned long long),
                           s->compute));
    }
    if (o->kind == SB_STEP_MODEL) {
        BL(cublasCreate(&s->blas));
        BL(cublasSetStream(s->blas, s->compute));
        BL(cublasSetPointerMode(s->blas, CUBLAS_POINTER_MODE_HOST));
    }
    CU(cudaStreamSynchronize(s->compute));
    *out = s;
    s = NULL;
leave:
    gpu_step_free(s);
    return rc;
}

/* Device buffers big enough for a batch of n samples and `bytes` pixel bytes. Growing waits for
 * all queued work, which reads the old buffers; in steady state nothing grows. */
static int ensure_room(gpu_step *s, uint32_t n, size_t bytes)
{
    int rc = 0;
    if (bytes <= s->in_cap && n <= s->lab_cap)
        return 0;
    CU(cudaStreamSynchronize(s->copy));
    CU(cudaStreamSynchronize(s->compute));
    if (bytes > s->in_cap) {
        for (uint32_t k = 0; k < s->slots; k++) {
            CU(cudaFree(s->d_in[k]));
            s->d_in[k] = NULL;
        }
        s->in_cap = 0;
        for (uint32_t k = 0; k < s->slots; k++)
            CU(cudaMalloc((void **)&s->d_in[k], bytes));
        s->in_cap = bytes;
    }
    if (n > s->lab_cap) {
        for (uint32_t k = 0; k < s->slots; k++) {
            CU(cudaFree(s->d_lab[k]));
            CU(cudaFreeHost(s->h_lab[k]));
            s->d_lab[k] = s->h_lab[k] = NULL;
        }
        s->lab_cap = 0;
        for (uint32_t k = 0; k < s->slots; k++) {
            CU(cudaMalloc((void **)&s->d_lab[k], (size_t)n * sizeof(int32_t)));
            CU(cudaHostAlloc((void **)&s->h_lab[k], (size_t)n * sizeof(int32_t),
                             cudaHostAllocDefault));
        }
        s->lab_cap = n;
    }
leave:
    return rc;
}

/* The model's weights, when the first batch gives the channel count, and activations for n
 * samples. */
static int ensure_model(gpu_step *s, uint32_t channels, uint32_t n)
{
    int rc = 0;
    float *host = NULL;
    if (!s->ch) {
        uint32_t k = s->classes, d = channels * s->side * s->side, hd = s->hidden;
        int mlp = s->o.model == SB_MODEL_MLP;
        uint32_t in2 = mlp ? hd : d;
        size_t n1 = mlp ? (size_t)hd * d : 0, n2 = (size_t)k * in2;
        uint64_t state = s->o.seed;
        host = (float *)malloc((n1 > n2 ? n1 : n2) * sizeof(float));
        if (!host) {
            rc = step_fail(s, ENOMEM, "weights", "out of host memory");
            goto leave;
        }
        /* on the compute stream, not the legacy one: the non-blocking compute stream would not
         * wait for a legacy copy; and the host array is reused right after, hence the syncs */
        if (mlp) {
            CU(cudaMalloc((void **)&s->w1, n1 * sizeof(float)));
            CU(cudaMalloc((void **)&s->b1, hd * sizeof(float)));
            CU(cudaMemsetAsync(s->b1, 0, hd * sizeof(float), s->compute));
            init_uniform(host, n1, sqrtf(6.0f / (float)d), &state);
            CU(cudaMemcpyAsync(s->w1, host, n1 * sizeof(float), cudaMemcpyHostToDevice,
                               s->compute));
            CU(cudaStreamSynchronize(s->compute));
        }
        CU(cudaMalloc((void **)&s->w2, n2 * sizeof(float)));
        CU(cudaMalloc((void **)&s->b2, k * sizeof(float)));
        CU(cudaMemsetAsync(s->b2, 0, k * sizeof(float), s->compute));
        init_uniform(host, n2, sqrtf(6.0f / (float)((size_t)in2 + k)), &state);
        CU(cudaMemcpyAsync(s->w2, host, n2 * sizeof(float), cudaMemcpyHostToDevice, s->compute));
        CU(cudaStreamSynchronize(s->compute));
        s->ch = channels;
        s->dim = d;
        s->in2 = in2;
    }
    if (n > s->max_n) {
        CU(cudaStreamSynchronize(s->compute));
        float **bufs[] = {&s->x, &s->hm, &s->z, &s->g, &s->dh};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
            CU(cudaFree(*bufs[i]));
            *bufs[i] = NULL;
        }
        s->max_n = 0;
        CU(cudaMalloc((void **)&s->x, (size_t)s->dim * n * sizeof(float)));
        CU(cudaMalloc((void **)&s->z, (size_t)s->classes * n * sizeof(float)));
        CU(cudaMalloc((void **)&s->g, (size_t)s->classes * n * sizeof(float)));
        if (s->o.model == SB_MODEL_MLP) {
            CU(cudaMalloc((void **)&s->hm, (size_t)s->hidden * n * sizeof(float)));
            CU(cudaMalloc((void **)&s->dh, (size_t)s->hidden * n * sizeof(float)));
        }
        s->max_n = n;
    }
leave:
    free(host);
    return rc;
}

/* One SGD step on slot k's batch, queued on the compute stream. */
static int queue_model(gpu_step *s, uint32_t k, const shr_batch *b)
{
    int rc = 0;
    const float one = 1.0f, zero = 0.0f, neg_lr = -s->lr;
    uint32_t n = b->n, kc = s->classes, d = s->dim, hd = s->hidden, in2 = s->in2;
    cudaStream_t st = s->compute;
    size_t total = (size_t)d * n;
    downsample_kernel<<<grid_for(total, 256), 256, 0, st>>>(s->d_in[k], n, b->height, b->width,
                                                            b->channels, s->side, s->nm, s->x);
    /* cuBLAS is column-major: a row-major out x in weight matrix W is, to it, the in x out
     * matrix W^T with leading dimension in; so W X is gemm(T, N) and the update W -= lr G A^T
     * becomes W^T -= lr A G^T, gemm(N, T) with beta 1. */
    const float *a = s->x;         /* the output layer's input, in2 x n */
    if (s->o.model == SB_MODEL_MLP) {
        BL(cublasSgemm(s->blas, CUBLAS_OP_T, CUBLAS_OP_N, hd, n, d, &one, s->w1, d, s->x, d,
                       &zero, s->hm, hd));
        bias_relu_kernel<<<grid_for((size_t)hd * n, 256), 256, 0, st>>>(s->hm, s->b1, hd, n);
        a = s->hm;
    }
    BL(cublasSgemm(s->blas, CUBLAS_OP_T, CUBLAS_OP_N, kc, n, in2, &one, s->w2, in2, a, in2, &zero,
                   s->z, kc));
    loss_kernel<<<(n + 3) / 4, 128, 0, st>>>(s->z, s->b2, s->d_lab[k], kc, n, s->g, s->d_acc);
    if (s->o.model == SB_MODEL_MLP)
        /* dH = W2^T G needs W2 as the forward pass used it: before its update */
        BL(cublasSgemm(s->blas, CUBLAS_OP_N, CUBLAS_OP_N, hd, n, kc, &one, s->w2, hd, s->g, kc,
                       &zero, s->dh, hd));
    BL(cublasSgemm(s->blas, CUBLAS_OP_N, CUBLAS_OP_T, in2, kc, n, &neg_lr, a, in2, s->g, kc, &one,
                   s->w2, in2));
    bias_step_kernel<<<(kc + 127) / 128, 128, 0, st>>>(s->b2, s->g, kc, n, s->lr);
    if (s->o.model == SB_MODEL_MLP) {
        relu_back_bias_kernel<<<(hd + 127) / 128, 128, 0, st>>>(s->dh, s->hm, s->b1, hd, n,
                                                                 s->lr);
        BL(cublasSgemm(s->blas, CUBLAS_OP_N, CUBLAS_OP_T, d, hd, n, &neg_lr, s->x, d, s->dh, hd,
                       &one, s->w1, d));
    }
leave:
    return rc;
}

static int queue_checksum(gpu_step *s, uint32_t k, size_t bytes, uint64_t run, int end)
{
    int rc = 0;
    if (!(s->flags & SB_GPU_CHECKSUMS) || run >= CHECKSUM_RUNS)
        return 0;
    checksum_kernel<<<grid_for(bytes, 256) > 1024 ? 1024 : grid_for(bytes, 256), 256, 0,
                      s->compute>>>(s->d_in[k], bytes, s->d_sums + 2 * run + end);
    CU(cudaGetLastError());
leave:
    return rc;
}

/* Collect the busy time of ring entry t (its step has finished or is waited for here). */
static int collect_timing(gpu_step *s, uint32_t t)
{
    int rc = 0;
    float ms = 0;
    if (!s->ring[t].used)
        return 0;
    CU(cudaEventSynchronize(s->ring[t].end));
    CU(cudaEventElapsedTime(&ms, s->ring[t].start, s->ring[t].end));
    s->busy_s += ms / 1e3;
    s->ring[t].used = 0;
leave:
    return rc;
}

static int check_batch(const gpu_step *s, const shr_batch *b)
{
    if (!b || b->n == 0 || !b->data || b->height == 0 || b->width == 0 || b->channels < 1 ||
        b->channels > 3)
        return SHR_EINVAL;
    if (s->o.kind != SB_STEP_MODEL)
        return 0;
    if (!b->labels || (s->ch && b->channels != s->ch))
        return SHR_EINVAL;
    for (uint32_t j = 0; j < b->n; j++)
        if (b->labels[j] < 0 || b->labels[j] >= (int64_t)s->classes)
            return SHR_EINVAL;
    return 0;
}

static int gpu_step_run(void *p, const shr_batch *b)
{
    gpu_step *s = (gpu_step *)p;
    int rc = 0;
    uint32_t k = 0, t = 0;
    size_t bytes = 0, lab_bytes = 0;
    float ms = 0;
    int model = 0;
    if (!s)
        return SHR_EINVAL;
    if (s->failed)
        return s->failed;
    if ((rc = check_batch(s, b)) != 0)
        return rc;
    model = s->o.kind == SB_STEP_MODEL;
    bytes = (size_t)b->n * b->height * b->width * b->channels;
    lab_bytes = model ? (size_t)b->n * sizeof(int32_t) : 0;
    k = (uint32_t)(s->runs % s->slots);
    CU(cudaSetDevice(s->dev));
    if ((rc = ensure_room(s, b->n, bytes)) != 0)
        goto leave;
    if (model && (rc = ensure_model(s, b->channels, b->n)) != 0)
        goto leave;
    if (model)
        for (uint32_t j = 0; j < b->n; j++)
            s->h_lab[k][j] = (int32_t)b->labels[j];

    /* the copy: after the step that last read slot k, into slot k */
    CU(cudaStreamWaitEvent(s->copy, s->step_done[k], 0));
    CU(cudaEventRecord(s->copy_start[k], s->copy));
    CU(cudaMemcpyAsync(s->d_in[k], b->data, bytes, cudaMemcpyHostToDevice, s->copy));
    if (model)
        CU(cudaMemcpyAsync(s->d_lab[k], s->h_lab[k], lab_bytes, cudaMemcpyHostToDevice, s->copy));
    CU(cudaEventRecord(s->copy_done[k], s->copy));

    /* the step: after its copy */
    CU(cudaStreamWaitEvent(s->compute, s->copy_done[k], 0));
    t = s->ring_next;
    s->ring_next = (t + 1) % TIMING_RING;
    if ((rc = collect_timing(s, t)) != 0)
        goto leave;
    CU(cudaEventRecord(s->ring[t].start, s->compute));
    if ((rc = queue_checksum(s, k, bytes, s->runs, 0)) != 0)
        goto leave;
    if (model) {
        if ((rc = queue_model(s, k, b)) != 0)
            goto leave;
    } else if (s->o.step_ms > 0) {
        spin_kernel<<<1, 1, 0, s->compute>>>((unsigned long long)(s->o.step_ms * 1e6));
    }
    CU(cudaGetLastError());
    if ((rc = queue_checksum(s, k, bytes, s->runs, 1)) != 0)
        goto leave;
    CU(cudaEventRecord(s->ring[t].end, s->compute));
    s->ring[t].used = 1;
    CU(cudaEventRecord(s->step_done[k], s->compute));

    /* the host buffer is free once its copy is done */
    CU(cudaEventSynchronize(s->copy_done[k]));
    CU(cudaEventElapsedTime(&ms, s->copy_start[k], s->copy_done[k]));
    s->h2d_s += ms / 1e3;
    s->h2d_bytes += bytes + lab_bytes;
    if (model) {
        s->loss_batches++;
        s->seen += b->n;
    }
    s->last_bytes = bytes;
    s->last_slot = k;
    s->runs++;
leave:
    return rc;
}

static int gpu_step_sync(void *p, sb_step_stats *st)
{
    gpu_step *s = (gpu_step *)p;
    int rc = 0;
    accum acc = {0, 0};
    if (!s)
        return SHR_EINVAL;
    if (s->failed)
        return s->failed;
    CU(cudaSetDevice(s->dev));
    CU(cudaStreamSynchronize(s->copy));
    CU(cudaStreamSynchronize(s->compute));
    for (uint32_t t = 0; t < TIMING_RING; t++)
        if ((rc = collect_timing(s, t)) != 0)
            goto leave;
    if (s->o.kind == SB_STEP_MODEL) {
        CU(cudaMemcpy(&acc, s->d_acc, sizeof acc, cudaMemcpyDeviceToHost));
        CU(cudaMemsetAsync(s->d_acc, 0, sizeof acc, s->compute));
    }
    if (st) {
        memset(st, 0, sizeof *st);
        st->on_gpu = 1;
        st->busy_s = s->busy_s;
        st->h2d_s = s->h2d_s;
        st->h2d_bytes = s->h2d_bytes;
        st->loss_sum = acc.loss;
        st->loss_batches = s->loss_batches;
        st->correct = acc.correct;
        st->seen = s->seen;
    }
    s->busy_s = s->h2d_s = 0;
    s->h2d_bytes = s->loss_batches = s->seen = 0;
leave:
    return rc;
}

static const char *gpu_step_error(const void *p)
{
    const gpu_step *s = (const gpu_step *)p;
    return s ? s->msg : "";
}

static int gpu_step_input(void *p, void *dst, size_t n, size_t *got)
{
    gpu_step *s = (gpu_step *)p;
    int rc = 0;
    if (!s || !dst || !got)
        return SHR_EINVAL;
    *got = 0;
    if (s->failed)
        return s->failed;
    if (s->runs == 0)
        return SHR_EINVAL;
    CU(cudaSetDevice(s->dev));
    CU(cudaStreamSynchronize(s->copy));
    CU(cudaStreamSynchronize(s->compute));
    CU(cudaMemcpy(dst, s->d_in[s->last_slot], n < s->last_bytes ? n : s->last_bytes,
                  cudaMemcpyDeviceToHost));
    *got = s->last_bytes;
leave:
    return rc;
}

static int gpu_step_checksums(void *p, uint64_t *start, uint64_t *end, size_t max,
                              size_t *count)
{
    gpu_step *s = (gpu_step *)p;
    int rc = 0;
    unsigned long long *h = NULL;
    size_t runs = 0;
    if (!s || !count || (max && (!start || !end)))
        return SHR_EINVAL;
    *count = 0;
    if (!(s->flags & SB_GPU_CHECKSUMS))
        return SHR_EINVAL;
    if (s->failed)
        return s->failed;
    runs = s->runs < CHECKSUM_RUNS ? (size_t)s->runs : CHECKSUM_RUNS;
    if (runs > max)
        runs = max;
    h = (unsigned long long *)malloc(2 * (runs ? runs : 1) * sizeof *h);
    if (!h)
        return ENOMEM;
    CU(cudaSetDevice(s->dev));
    CU(cudaStreamSynchronize(s->compute));
    CU(cudaMemcpy(h, s->d_sums, 2 * runs * sizeof *h, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < runs; i++) {
        start[i] = h[2 * i];
        end[i] = h[2 * i + 1];
    }
    *count = s->runs < CHECKSUM_RUNS ? (size_t)s->runs : CHECKSUM_RUNS;
leave:
    free(h);
    return rc;
}


/* ---- the copy baseline ---- */

/* printf into msg, if not NULL (sb_fail's job; this library links none of shardbench) */
static void why_set(shr_msg *msg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void why_set(shr_msg *msg, const char *fmt, ...)
{
    if (!msg)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg->text, sizeof msg->text, fmt, ap);
    va_end(ap);
}

#define BASE_CU(call)                                                                             \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess) {                                                                  \
            rc = rc_of_cuda(e_);                                                                  \
            why_set(why, "%s: %s", #call, cudaGetErrorString(e_));                                \
            goto leave;                                                                           \
        }                                                                                         \
    } while (0)

/* GB/s of reps copies from src to dst on st: one untimed copy first (the first touch of a
 * pageable buffer by the driver, and of the device buffer). */
static int time_copies(void *dst, const void *src, size_t bytes, uint32_t reps, cudaStream_t st,
                       cudaEvent_t a, cudaEvent_t b, double *gbs, shr_msg *why)
{
    int rc = 0;
    float ms = 0;
    BASE_CU(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, st));
    BASE_CU(cudaEventRecord(a, st));
    for (uint32_t i = 0; i < reps; i++)
        BASE_CU(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, st));
    BASE_CU(cudaEventRecord(b, st));
    BASE_CU(cudaEventSynchronize(b));
    BASE_CU(cudaEventElapsedTime(&ms, a, b));
    *gbs = ms > 0 ? (double)bytes * reps / (ms * 1e6) : 0;
leave:
    return rc;
}

static int gpu_h2d_baseline(size_t bytes, uint32_t reps, double *pinned_gbs, double *pageable_gbs,
                            shr_msg *why)
{
    int rc = 0;
    void *pinned = NULL, *pageable = NULL, *dev = NULL;
    cudaStream_t st = NULL;
    cudaEvent_t a = NULL, b = NULL;
    why_set(why, "%s", "");
    if (bytes == 0 || reps == 0 || !pinned_gbs || !pageable_gbs)
        return EINVAL;
    *pinned_gbs = *pageable_gbs = 0;
    if (!shr_feed_available()) {
        why_set(why, "%s", shr_feed_status());
        return ENODEV;
    }
    BASE_CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    BASE_CU(cudaEventCreate(&a));
    BASE_CU(cudaEventCreate(&b));
    BASE_CU(cudaMalloc(&dev, bytes));
    BASE_CU(cudaHostAlloc(&pinned, bytes, cudaHostAllocPortable));
    if (posix_memalign(&pageable, 4096, bytes) != 0) {
        pageable = NULL;
        why_set(why, "cannot allocate %zu bytes of host memory", bytes);
        rc = ENOMEM;
        goto leave;
    }
    /* faulted in before any clock runs, as the ring's buffers are */
    memset(pinned, 1, bytes);
    memset(pageable, 1, bytes);
    if ((rc = time_copies(dev, pinned, bytes, reps, st, a, b, pinned_gbs, why)) != 0)
        goto leave;
    rc = time_copies(dev, pageable, bytes, reps, st, a, b, pageable_gbs, why);
leave:
    if (st)
        cudaStreamSynchronize(st);
    cudaFree(dev);
    cudaFreeHost(pinned);
    free(pageable);
    if (a)
        cudaEventDestroy(a);
    if (b)
        cudaEventDestroy(b);
    if (st)
        cudaStreamDestroy(st);
    cudaGetLastError();
    return rc;
}


/* ---- the table ---- */

static const sb_gpu_api g_api = {
    SB_GPU_ABI,
    (uint32_t)sizeof(sb_step_opts),
    (uint32_t)sizeof(shr_batch),
    (uint32_t)sizeof(sb_step_stats),
    shr_feed_available,
    gpu_step_create,
    gpu_step_run,
    gpu_step_sync,
    gpu_step_free,
    gpu_step_error,
    gpu_step_input,
    gpu_step_checksums,
    shr_feed_status,
    gpu_h2d_baseline,
};

EXPORT const sb_gpu_api *sb_gpu_api_get(void)
{
    return &g_api;
}

