/* pinned.c - batch host buffers: cudaHostAlloc through a run-time loaded CUDA runtime, else
 * posix_memalign. Nothing here links against CUDA.
 *
 * What the loader found is kept as text (shr_cuda_status), a fact of the process fixed by its
 * one probe; a failed cudaHostAlloc is told to the caller who asked for the memory (its why):
 * a machine where pinned memory was expected and ordinary memory was used must be able to say
 * why (no runtime, no driver, a driver too old, no device, a failed cudaHostAlloc), not only
 * that. */
#include "fmt.h"
#include "pinned.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUDA_HOST_ALLOC_PORTABLE 1u     /* cudaHostAllocPortable */

/* cudaError_t is an enum: int-sized, 0 is cudaSuccess */
typedef int (*cuda_device_count_fn)(int *count);
typedef int (*cuda_host_alloc_fn)(void **p, size_t n, unsigned int flags);
typedef int (*cuda_free_host_fn)(void *p);
typedef int (*cuda_set_device_fn)(int dev);
typedef int (*cuda_version_fn)(int *v);
typedef const char *(*cuda_error_string_fn)(int e);
typedef int (*cuda_get_last_error_fn)(void);
typedef int (*cu_ctx_get_current_fn)(void **ctx);     /* driver API: CUresult, CUcontext * */

/* Written once under pthread_once, read-only afterwards: no lock needed to read them. */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_available, g_count;
static cuda_host_alloc_fn g_host_alloc;
static cuda_free_host_fn g_free_host;
static cuda_set_device_fn g_set_device;
static cuda_error_string_fn g_error_string;
static cuda_get_last_error_fn g_clear_error;
static cu_ctx_get_current_fn g_ctx_current;
static char g_status[768];

static const char *err_string(cuda_error_string_fn f, int e)
{
    const char *s = f ? f(e) : NULL;
    return s ? s : "unknown CUDA error";
}

/* A runtime the process has already: dlopen with RTLD_NOLOAD matches a loaded object's soname.
 * Else the versioned names first: the unversioned one is a development link, absent from
 * runtime-only installs and possibly of another version than the one a framework loaded. */
static void *open_runtime(const char **name, fmt_msg *why)
{
    static const char *const loaded[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11"};
    static const char *const names[] = {
        "libcudart.so.13", "libcudart.so.12", "libcudart.so", "libcudart.so.11",
    };
    for (size_t i = 0; i < sizeof loaded / sizeof loaded[0]; i++) {
        void *lib = dlopen(loaded[i], RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        if (lib) {
            *name = loaded[i];
            return lib;
        }
    }
    why->text[0] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib) {
            *name = names[i];
            return lib;
        }
        /* the first name's failure: it says the most about what a user should install */
        const char *e = dlerror();
        if (!why->text[0])
            fmt_fail(why, 0, "%s", e ? e : names[i]);
    }
    return NULL;
}

static void cuda_load(void)
{
    const char *name = NULL;
    fmt_msg why;
    void *lib = open_runtime(&name, &why);
    if (!lib) {
        snprintf(g_status, sizeof g_status, "cannot load the CUDA runtime: %s", why.text);
        return;
    }
    cuda_device_count_fn count = (cuda_device_count_fn)dlsym(lib, "cudaGetDeviceCount");
    cuda_host_alloc_fn host_alloc = (cuda_host_alloc_fn)dlsym(lib, "cudaHostAlloc");
    cuda_free_host_fn free_host = (cuda_free_host_fn)dlsym(lib, "cudaFreeHost");
    cuda_set_device_fn set_device = (cuda_set_device_fn)dlsym(lib, "cudaSetDevice");
    cuda_version_fn drv_version = (cuda_version_fn)dlsym(lib, "cudaDriverGetVersion");
    cuda_version_fn rt_version = (cuda_version_fn)dlsym(lib, "cudaRuntimeGetVersion");
    cuda_error_string_fn error_string = (cuda_error_string_fn)dlsym(lib, "cudaGetErrorString");
    cuda_get_last_error_fn clear_error = (cuda_get_last_error_fn)dlsym(lib, "cudaGetLastError");
    if (!count || !host_alloc || !free_host || !set_device || !clear_error) {
        snprintf(g_status, sizeof g_status, "%s: not a usable CUDA runtime (a symbol is missing)",
                 name);
        dlclose(lib);
        return;
    }
    int drv = 0, rt = 0;
    if (drv_version)
        drv_version(&drv);      /* 0 where no driver is installed */
    if (rt_version)
        rt_version(&rt);
    char versions[160];
    snprintf(versions, sizeof versions, "%s, runtime %d.%d, driver %d.%d%s", name, rt / 1000,
             rt % 1000 / 10, drv / 1000, drv % 1000 / 10,
             drv == 0 ? ": none installed" : drv < rt ? ": older than the runtime" : "");
    int n = 0;
    int e = count(&n);
    /* a runtime shared with a framework must not keep our error for its next check */
    clear_error();
    /* without a driver cudaGetDeviceCount fails (cudaErrorNoDevice / InsufficientDriver): the
     * runtime is then of no use and is unloaded again */
    if (e != 0 || n <= 0) {
        if (e != 0)
            snprintf(g_status, sizeof g_status, "cudaGetDeviceCount: %s (%s)",
                     err_string(error_string, e), versions);
        else
            snprintf(g_status, sizeof g_status, "no CUDA device (%s)", versions);
        dlclose(lib);
        return;
    }
    /* libcudart has loaded the driver library: cuCtxGetCurrent tells whether the caller has a
     * context (the runtime's cudaGetDevice cannot: it answers 0 either way) */
    void *drvlib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (drvlib)
        g_ctx_current = (cu_ctx_get_current_fn)dlsym(drvlib, "cuCtxGetCurrent");
    snprintf(g_status, sizeof g_status, "%d CUDA device(s) (%s)", n, versions);
    /* lib stays loaded for the life of the process: pinned buffers may outlive any reader */
    g_host_alloc = host_alloc;
    g_free_host = free_host;
    g_set_device = set_device;
    g_error_string = error_string;
    g_clear_error = clear_error;
    g_count = n;
    g_available = 1;
}

int shr_cuda_available(void)
{
    pthread_once(&g_once, cuda_load);
    return g_available;
}

const char *shr_cuda_status(char *buf, size_t len)
{
    pthread_once(&g_once, cuda_load);
    if (!buf || len == 0)
        return "";
    snprintf(buf, len, "%s", g_status);
    return buf;
}

/* The device cudaHostAlloc makes its context on (pinned.h): the caller's current context if it
 * has one, else the device asked for (>= 0), else the runtime's default. */
static void choose_device(int device)
{
    void *ctx = NULL;
    if (g_ctx_current && g_ctx_current(&ctx) == 0 && ctx)
        return;
    if (device >= 0 && g_set_device(device % g_count) != 0)
        g_clear_error();                /* a failure leaves the default device */
}

int shr_host_alloc(size_t n, void **p, int *pinned, shr_pin mode, int device, fmt_msg *why)
{
    if (p)
        *p = NULL;
    if (pinned)
        *pinned = 0;
    if (!p || !pinned || n == 0 || (mode != SHR_PIN_AUTO && mode != SHR_PIN_OFF))
        return EINVAL;
    if (mode == SHR_PIN_AUTO && shr_cuda_available()) {
        void *q = NULL;
        choose_device(device);
        int e = g_host_alloc(&q, n, CUDA_HOST_ALLOC_PORTABLE);
        if (e == 0 && q) {
            *p = q;
            *pinned = 1;
            return 0;
        }
        /* pinning can fail where plain memory does not (RLIMIT_MEMLOCK, fragmentation): the
         * batch still works, only its device copy is slower; the reason is kept */
        g_clear_error();
        if (why)
            snprintf(why->text, sizeof why->text, "cudaHostAlloc of %zu bytes: %s", n,
                     err_string(g_error_string, e));
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
