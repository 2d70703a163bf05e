/* pinned.h - host buffers for batches: CUDA pinned memory when a device is present, page-aligned
 * ordinary memory otherwise.
 *
 * The CUDA runtime is never linked: it is looked up at run time with dlopen("libcudart.so", then
 * the .so.13/.12/.11 sonames), once per process, so the library loads and works on machines with
 * neither a driver nor the runtime. Pinned (page-locked) memory lets cudaMemcpyAsync run as a true
 * DMA transfer overlapping compute; ordinary memory would be staged by the driver.
 *
 * Thread-safety: every function may be called from any thread.
 */
#ifndef SHR_PINNED_H
#define SHR_PINNED_H

#include <stddef.h>

#include "shardread.h"

/* Alignment of every buffer shr_host_alloc returns (pinned memory is page-aligned as well). */
#define SHR_HOST_ALIGN 4096u

/* Allocate n bytes (n > 0). With SHR_PIN_AUTO and a CUDA device present, the memory is pinned
 * with cudaHostAlloc(cudaHostAllocPortable), so it counts as pinned for every CUDA context of the
 * process; if that fails (e.g. the locked-memory limit) it falls back to ordinary memory. *pinned
 * says which it got; pass it back to shr_host_free. Returns 0, EINVAL (n == 0, bad mode), ENOMEM.
 * The memory is not initialised. */
int shr_host_alloc(size_t n, void **p, int *pinned, shr_pin mode);

/* Free what shr_host_alloc returned, with the pinned flag it set. Accepts NULL. */
void shr_host_free(void *p, int pinned);

/* 1 if the CUDA runtime could be loaded and reports at least one device, else 0 (cached after the
 * first call). */
int shr_cuda_available(void);

#endif
