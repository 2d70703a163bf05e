/* pinned.h - host buffers for batches: CUDA pinned memory when a device is present, page-aligned
 * ordinary memory otherwise.
 *
 * The CUDA runtime is never linked: it is looked up at run time, once per process, so the library
 * loads and works on machines with neither a driver nor the runtime. A runtime the process has
 * loaded already (torch's, for one) is used first: dlopen with RTLD_NOLOAD of the sonames
 * libcudart.so.13, .12, .11; else the first of libcudart.so.13, libcudart.so.12, libcudart.so,
 * libcudart.so.11 that loads. Pinned (page-locked) memory lets cudaMemcpyAsync run as a true DMA
 * transfer overlapping compute; ordinary memory would be staged by the driver.
 *
 * Which device. cudaHostAlloc creates the calling thread's CUDA context if it has none, on the
 * thread's current device (0 unless set). So that the ranks of one node do not all create a
 * context on GPU 0, the allocation keeps a context already current on the calling thread (torch
 * after torch.cuda.set_device, say); where none is, and the caller names a device (the reader:
 * shr_options.pin_device, which the Python package takes from LOCAL_RANK), it makes that device
 * (modulo the device count) current on the calling thread first, and leaves it current. The
 * memory is allocated portable (cudaHostAllocPortable): pinned for every context of the process,
 * whichever device made it.
 *
 * Thread-safety: every function may be called from any thread.
 */
#ifndef SHR_PINNED_H
#define SHR_PINNED_H

#include <stddef.h>

#include "fmt.h"
#include "shardread.h"

/* Alignment of every buffer shr_host_alloc returns (pinned memory is page-aligned as well). */
#define SHR_HOST_ALIGN 4096u

/* shr_host_alloc, shr_host_free, shr_cuda_available and shr_cuda_status are public: shardread.h
 * declares them (the choice of device above is theirs). */
#endif
