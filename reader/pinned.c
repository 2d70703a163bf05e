/* pinned.c - batch host buffers: cudaHostAlloc through a run-time loaded CUDA runtime, else
 * posix_memalign. Nothing here links against CUDA. */
#include "pinned.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#define CUDA_HOST_ALLOC_PORTABLE 1u     /* cudaHostAllocPortable */

/* cudaError_t is an enum: int-sized, 0 is cudaSuccess */
typedef int (*cuda_device_count_fn)(int *count);
typedef int (*cuda_host_alloc_fn)(void **p, size_t n, unsigned int flags);
typedef int (*cuda_free_host_fn)(void *p);

/* Written once under pthread_once, read-only afterwards: no lock needed to read them. */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_available;
static cuda_host_alloc_fn g_host_alloc;
static cuda_free_host_fn g_free_host;

static void cuda_load(void)
{
    static const char *const names[] = {
        "libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11",
    };
    void *lib = NULL;
    for (size_t i = 0; !lib && i < sizeof names / sizeof names[0]; i++)
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return;
    cuda_device_count_fn count = (cuda_device_count_fn)dlsym(lib, "cudaGetDeviceCount");
    cuda_host_alloc_fn host_alloc = (cuda_host_alloc_fn)dlsym(lib, "cudaHostAlloc");
    cuda_free_host_fn free_host = (cuda_free_host_fn)dlsym(lib, "cudaFreeHost");
    int n = 0;
    /* without a driver cudaGetDeviceCount fails (cudaErrorNoDevice / InsufficientDriver): the
     * runtime is then of no use and is unloaded again */
    if (!count || !host_alloc || !free_host || count(&n) != 0 || n <= 0) {
        dlclose(lib);
        return;
    }
    /* lib stays loaded for the life of the process: pinned buffers may outlive any reader */
    g_host_alloc = host_alloc;
    g_free_host = free_host;
    g_available = 1;
}

int shr_cuda_available(void)
{
    pthread_once(&g_once, cuda_load);
    return g_available;
}

int shr_host_alloc(size_t n, void **p, int *pinned, shr_pin mode)
{
    *p = NULL;
    *pinned = 0;
    if (n == 0 || (mode != SHR_PIN_AUTO && mode != SHR_PIN_OFF))
        return EINVAL;
    if (mode == SHR_PIN_AUTO && shr_cuda_available()) {
        void *q = NULL;
        if (g_host_alloc(&q, n, CUDA_HOST_ALLOC_PORTABLE) == 0 && q) {
            *p = q;
            *pinned = 1;
            return 0;
        }
        /* pinning can fail where plain memory does not (RLIMIT_MEMLOCK, fragmentation): the
         * batch still works, only its device copy is slower */
    }
    void *q = NULL;
    if (posix_memalign(&q, SHR_HOST_ALIGN, n) != 0)
        return ENOMEM;
    *p = q;
    return 0;
}

void shr_host_free(void *p, int pinned)
{
    if (!p)
        return;
    if (pinned) {
        pthread_once(&g_once, cuda_load);   /* makes g_free_host visible to this thread */
        g_free_host(p);
    } else {
        free(p);
    }
}
