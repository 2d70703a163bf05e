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

/* Allocate n bytes (n > 0). With SHR_PIN_AUTO and a CUDA device present, the memory is pinned
 * with cudaHostAlloc(cudaHostAllocPortable) on the device chosen as above; if that fails (e.g.
 * the locked-memory limit) it falls back to ordinary memory and writes why in why (NULL: not
 * wanted), "cudaHostAlloc of N bytes: out of memory"; the fallback is not a failure, so the
 * call still returns 0. *pinned says which it got; pass it back to shr_host_free. device: the
 * device to make current on a thread without a context (-1: none). Returns 0, EINVAL (n == 0,
 * bad mode), ENOMEM. The memory is not initialised. */
int shr_host_alloc(size_t n, void **p, int *pinned, shr_pin mode, int device, fmt_msg *why);

/* Free what shr_host_alloc returned, with the pinned flag it set. Accepts NULL. */
void shr_host_free(void *p, int pinned);

/* 1 if the CUDA runtime could be loaded and reports at least one device, else 0 (cached after the
 * first call). */
int shr_cuda_available(void);

/* Why shr_cuda_available is 0, or what it found where it is 1, for messages: e.g.
 * "cannot load the CUDA runtime: libcudart.so.13: cannot open shared object file: No such file
 * or directory", "cudaGetDeviceCount: CUDA driver version is insufficient for CUDA runtime
 * version (libcudart.so.13, runtime 13.0, driver 0.0: none installed)", "2 CUDA device(s)
 * (libcudart.so.13, runtime 13.0, driver 13.0)": what the one probe found, the same for the
 * whole process (a failed cudaHostAlloc is told to its caller: shr_host_alloc's why). The text
 * is copied into buf (len bytes, truncated) and buf returned; "" where buf is NULL or len 0. */
const char *shr_cuda_status(char *buf, size_t len);

#endif
