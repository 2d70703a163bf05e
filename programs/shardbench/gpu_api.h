/* gpu_api.h - the C ABI between shardbench's training step (step.c) and libshardbench-gpu.so,
 * which holds the GPU half of that step (cuda_step.cu). That library is the benchmark's own: it
 * is built next to shardbench (build/lib/, installed only as shardbench's private plugin in
 * PREFIX/lib/shardbench/), no header of it is installed and no user links it. It links the
 * project's CUDA feed library, libshardgpu.so (include/cuda_feed.h, whose own run-time table is
 * shr_feed_api there), for the device probe.
 *
 * Neither libshardread nor shardbench links against CUDA: the GPU code lives in shared objects
 * built by nvcc and linked against libcudart and libcublas, which step.c opens with dlopen at run
 * time and reaches through one exported symbol, sb_gpu_api_get(), returning a table of plain C
 * function pointers. Where that object, the CUDA libraries, a driver or a device is missing, the
 * table is simply not used and the step runs on the CPU (SB_DEVICE_AUTO) or fails with ENODEV
 * (SB_DEVICE_GPU).
 *
 * Both sides are compiled from the same tree; the table carries an ABI number and the sizes of
 * the structs it passes, and a table whose numbers differ is refused (a stale library from
 * another build is treated as absent).
 *
 * Where libshardbench-gpu.so is looked for, first hit wins:
 *   1. $SHARDBENCH_GPU_LIB, if set: that path only
 *   2. next to the executable: <exe dir>/../lib/ (build/bin/shardbench, build/tests/test_*, a
 *      bundle's bin/) and <exe dir>/../lib/shardbench/ (PREFIX/bin/shardbench)
 *   3. plain "libshardbench-gpu.so": LD_LIBRARY_PATH and the ld.so cache
 * Before any of that, the CUDA runtime must report a device (shr_cuda_available in pinned.c):
 * without one, the large CUDA libraries are not even loaded.
 *
 * Errors on this interface: 0, EINVAL / SHR_EINVAL (bad options or batch, as the CPU step),
 * ENOMEM (host or device memory), ENODEV (no usable device), EIO (any other CUDA or cuBLAS
 * failure: the step is then failed and only free is allowed; step_error says what happened).
 */
#ifndef SB_GPU_API_H
#define SB_GPU_API_H

#include <stddef.h>
#include <stdint.h>


#include "step.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SB_GPU_ABI 4

/* step_create flags */
#define SB_GPU_CHECKSUMS 1u    /* record a checksum of each step's device input when the step
                                 * starts and when it ends (tests: proves that no device buffer
                                 * is written while a step reads it) */

typedef struct {
    uint32_t flags;             /* SB_GPU_* */
    uint32_t slots;             /* device input buffers, 2..16 (0: 2) */
} sb_gpu_config;

typedef struct {
    uint32_t abi;               /* SB_GPU_ABI */
    uint32_t opts_size;         /* sizeof(sb_step_opts) */
    uint32_t batch_size;        /* sizeof(shr_batch) */
    uint32_t stats_size;        /* sizeof(sb_step_stats) */

    /* 1 if a device is usable: present, and able to run the GPU code's kernels (the feed
     * library's probe, shr_feed_available: both are built for the same architectures). */
    int (*available)(void);
    /* A GPU step (see step.h), on the calling thread's current device. c may be NULL.
     * step_sync accepts st NULL (the counters are reset all the same), as the CPU step does. */
    int (*step_create)(void **s, const sb_step_opts *o, const sb_gpu_config *c);
    int (*step_run)(void *s, const shr_batch *b);
    int (*step_sync)(void *s, sb_step_stats *st);
    void (*step_free)(void *s);
    /* The last CUDA or cuBLAS failure of s, "" if none. Never NULL; valid until the next call
     * on s. */
    const char *(*step_error)(const void *s);

    /* Test hooks; both wait for the queued work first. step_input: copy the device buffer that
     * held the last run's batch pixels into dst (n bytes at most; *got: the batch's bytes).
     * step_checksums: the checksums recorded under SB_GPU_CHECKSUMS since creation (the first
     * 4096 runs), oldest first, of run i at start[i] and end[i], up to max runs; *count: how
     * many runs were recorded. sb_gpu_checksum is the host function computing the same value. */
    int (*step_input)(void *s, void *dst, size_t n, size_t *got);
    int (*step_checksums)(void *s, uint64_t *start, uint64_t *end, size_t max, size_t *count);

    /* Why available() is 0 (the failing CUDA call, its error, driver and runtime versions), or
     * the device it found. Never NULL; static. */
    const char *(*status)(void);
    /* The copy baseline the ring's transfers are judged against: on the calling thread's
     * current device, `reps` cudaMemcpyAsync host-to-device copies of `bytes` each on a stream
     * of their own, timed with events, from a buffer of cudaHostAlloc'd (pinned) memory and
     * from one of ordinary (pageable) memory, both allocated and faulted in here and freed
     * before returning. Writes GB/s (1e9 bytes/s) to *pinned_gbs and *pageable_gbs. Returns 0,
     * EINVAL (bytes or reps 0), ENOMEM, ENODEV, EIO, with the failing call in why (may be
     * NULL; "" where the call succeeded or the arguments were refused). */
    int (*h2d_baseline)(size_t bytes, uint32_t reps, double *pinned_gbs, double *pageable_gbs,
                        shr_msg *why);

} sb_gpu_api;

/* Exported by libshardbench-gpu.so. */
const sb_gpu_api *sb_gpu_api_get(void);
#define SB_GPU_API_SYMBOL "sb_gpu_api_get"

/* The checksum recorded by SB_GPU_CHECKSUMS over n bytes: the sum, modulo 2^64, of
 * (byte[i] + 1) * ((uint32_t)(i * 2654435761u) | 1). Order-sensitive, and any change of a byte
 * changes it; cheap to compute in parallel on the device. */
static inline uint64_t sb_gpu_checksum(const uint8_t *p, size_t n)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += (uint64_t)(p[i] + 1u) * ((uint32_t)((uint32_t)i * 2654435761u) | 1u);
    return sum;
}

/* ---- in the benchmark (step.c) ---- */

/* The table of the libshardbench-gpu.so found as described above, with a usable device; NULL if none
 * (loaded once per process; the reason is then in sb_gpu_status). */
const sb_gpu_api *sb_gpu_table(void);

/* Why sb_gpu_table is NULL, with the reason of the layer that failed ("no CUDA device: " and
 * shr_cuda_status's text, "libshardbench-gpu.so: cannot open shared object file: ...", "no CUDA
 * device that PATH can use: " and the library's status), or the library's path where it is not.
 * Never NULL; static storage. */
const char *sb_gpu_status(void);

/* Open the library at path (not cached, never closed): its table, whether or not a device is
 * usable. Returns 0, or ENOENT (dlopen failed), ENOEXEC (no sb_gpu_api_get symbol, or an ABI or
 * struct size that differs from this build's), with a reason in why (may be NULL). */
int sb_gpu_open(const char *path, const sb_gpu_api **api, shr_msg *why);

/* The CUDA or cuBLAS failure behind a GPU step's last error (e.g. "cudaMemcpyAsync(...): out of
 * memory"), "" if none or on the CPU. Never NULL; valid until the next call on s. */
const char *sb_step_last_error(const sb_step *s);

/* The table a step created by sb_step_create uses, and its implementation handle; NULL where
 * the step runs on the CPU. For tests and tools that need the hooks above. */
const sb_gpu_api *sb_step_gpu(const sb_step *s, void **impl);

#ifdef __cplusplus
}
#endif

#endif
