/* cuda_common.h - what the CUDA feed (cuda_feed.cu) and the benchmark's GPU step
 * (bench/cuda_step.cu) share inside libshardgpu.so: error mapping, launch sizes, the device probe.
 * Internal: nothing here is exported (the object is built with -fvisibility=hidden).
 */
#ifndef SHR_CUDA_COMMON_H
#define SHR_CUDA_COMMON_H

#include <cuda_runtime.h>
#include <errno.h>
#include <stdint.h>

/* One of four values by selects: indexing a kernel parameter's array with a run-time index
 * would copy the array to local memory in every thread. */
__device__ static inline float pick4(float a, float b, float c, float d, uint32_t i)
{
    return i == 0 ? a : i == 1 ? b : i == 2 ? c : d;
}

static inline unsigned grid_for(size_t total, unsigned block)
{
    size_t g = (total + block - 1) / block;
    return g == 0 ? 1u : g > 65535u * 8u ? 65535u * 8u : (unsigned)g;
}

static inline int rc_of_cuda(cudaError_t e)
{
    switch (e) {
    case cudaErrorMemoryAllocation:
        return ENOMEM;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorInvalidDevice:
        return ENODEV;
    default:
        return EIO;
    }
}

/* 1 if a device is usable: present, and able to run this object's kernels (probed once). */
int shr_cuda_usable(void);

/* Why shr_cuda_usable is 0 (the CUDA call that failed and its error, with the driver and
 * runtime versions), or which device it found; never NULL, static, fixed after the probe. */
const char *shr_cuda_usable_status(void);

#endif
