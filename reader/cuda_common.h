/* cuda_common.h - what the CUDA feed (cuda_feed.cu, libshardgpu.so) and the benchmark's GPU
 * step (bench/cuda_step.cu, libshardbench-gpu.so) share as source: error mapping, launch sizes.
 * Internal: nothing here is exported (both objects are built with -fvisibility=hidden); the
 * device probe is the feed's public shr_feed_available (cuda_feed.h), which the step calls.
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

#endif
