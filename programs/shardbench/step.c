/* step.c - the training step's dispatcher: the GPU implementation (libshardbench-gpu.so, opened
 * at run time, see gpu_api.h) where a device is usable, else the CPU one (step_cpu.c).
 *
 * The GPU library is looked for once per process. The CUDA runtime is asked first (pinned.c,
 * which loads only libcudart): on a machine without a device that is all it costs, and the CUDA
 * libraries proper (cuBLAS alone maps more than half a gigabyte) are never loaded.
 */
#include "gpu_api.h"
#include "bench.h"
#include "step_cpu.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GPU_LIB_NAME "libshardbench-gpu.so"

struct sb_step {
    const sb_gpu_api *gpu;     /* NULL: the CPU implementation */
    void *impl;
};

/* Written once under pthread_once, read-only afterwards. */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static const sb_gpu_api *g_api;
static char g_status[1024];

int sb_gpu_open(const char *path, const sb_gpu_api **api, shr_msg *why)
{
    *api = NULL;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        return sb_fail(why, ENOENT, "%s", e ? e : path);
    }
    /* POSIX guarantees that a function pointer survives the round trip through void * */
    const sb_gpu_api *(*get)(void) =
        (const sb_gpu_api *(*)(void))dlsym(lib, SB_GPU_API_SYMBOL);
    const sb_gpu_api *t = get ? get() : NULL;
    if (!t) {
        dlclose(lib);
        return sb_fail(why, ENOEXEC, "%s: no %s symbol", path, SB_GPU_API_SYMBOL);
    }
    if (t->abi != SB_GPU_ABI || t->opts_size != sizeof(sb_step_opts) ||
        t->batch_size != sizeof(shr_batch) || t->stats_size != sizeof(sb_step_stats)) {
        /* the table lives in the library: read it before the library goes */
        char what[160];
        snprintf(what, sizeof what, "ABI %u, this library %u; sb_step_opts %zu bytes, here %zu; "
                 "shr_batch %zu, here %zu; sb_step_stats %zu, here %zu", t->abi,
                 (unsigned)SB_GPU_ABI, (size_t)t->opts_size, sizeof(sb_step_opts),
                 (size_t)t->batch_size, sizeof(shr_batch), (size_t)t->stats_size,
                 sizeof(sb_step_stats));
        dlclose(lib);
        return sb_fail(why, ENOEXEC, "%s: built from another version (%s)", path, what);
    }
    /* never closed: steps and kernels of the table may be in use until the process ends */
    *api = t;
    return 0;
}

/* dirname of path into out ("." where there is no slash). */
static void dir_of(const char *path, char *out, size_t n)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(out, n, ".");
    else
        snprintf(out, n, "%.*s", (int)(slash - path), path);
}

static void gpu_load(void)
{
    if (!shr_cuda_available()) {
        char why[sizeof g_status - 32];
        snprintf(g_status, sizeof g_status, "no CUDA device: %s",
                 shr_cuda_status(why, sizeof why));
        return;
    }
    char cand[4][PATH_MAX + 64];
    size_t nc = 0;
    const char *env = getenv("SHARDBENCH_GPU_LIB");
    if (env && *env) {
        snprintf(cand[nc++], sizeof cand[0], "%s", env);
    } else {
        char exe[PATH_MAX], dir[PATH_MAX];
        ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (len > 0) {
            exe[len] = '\0';
            dir_of(exe, dir, sizeof dir);
            snprintf(cand[nc++], sizeof cand[0], "%s/../lib/" GPU_LIB_NAME, dir);
            snprintf(cand[nc++], sizeof cand[0], "%s/../lib/shardbench/" GPU_LIB_NAME, dir);
        }
        snprintf(cand[nc++], sizeof cand[0], GPU_LIB_NAME);
    }
    /* report the failure of the first candidate that exists: a library that is there but does
     * not load (a missing libcublas) says more than "not found" */
    shr_msg why;
    char first[sizeof g_status] = "";
    const sb_gpu_api *api = NULL;
    size_t found = 0;
    for (size_t i = 0; i < nc && !api; i++) {
        int exists = strchr(cand[i], '/') == NULL || access(cand[i], F_OK) == 0;
        if (!exists && !(env && *env))
            continue;
        if (sb_gpu_open(cand[i], &api, &why) != 0 && !first[0])
            snprintf(first, sizeof first, "%s", why.text);
        found = i;
    }
    if (!api)
        snprintf(g_status, sizeof g_status, "%s", first[0] ? first : GPU_LIB_NAME " not found");
    else if (!api->available())
        snprintf(g_status, sizeof g_status, "no CUDA device that %.500s can use: %.480s",
                 cand[found], api->status());
    else
        snprintf(g_status, sizeof g_status, "%.500s (%.480s)", cand[found], api->status());
    if (api && api->available())
        g_api = api;
}

const sb_gpu_api *sb_gpu_table(void)
{
    pthread_once(&g_once, gpu_load);
    return g_api;
}

const char *sb_gpu_status(void)
{
    pthread_once(&g_once, gpu_load);
    return g_status;
}

int sb_step_gpu_available(void)
{
    return sb_gpu_table() != NULL;
}

int sb_step_create(sb_step **s, const sb_step_opts *o)
{
    int rc = 0;
    sb_step *st = NULL;
    const sb_gpu_api *api = NULL;
    if (!s)
        return SHR_EINVAL;
    *s = NULL;
    if (!o || (o->device != SB_DEVICE_AUTO && o->device != SB_DEVICE_CPU &&
               o->device != SB_DEVICE_GPU))
        return SHR_EINVAL;
    if (o->device != SB_DEVICE_CPU) {
        api = sb_gpu_table();
        if (!api && o->device == SB_DEVICE_GPU)
            return ENODEV;
    }
    st = calloc(1, sizeof *st);
    if (!st)
        return ENOMEM;
    st->gpu = api;
    rc = api ? api->step_create(&st->impl, o, NULL) : sb_cpu_step_create(&st->impl, o);
    if (rc)
        goto leave;
    *s = st;
    st = NULL;
leave:
    free(st);
    return rc;
}

void sb_step_free(sb_step *s)
{
    if (!s)
        return;
    if (s->gpu)
        s->gpu->step_free(s->impl);
    else
        sb_cpu_step_free(s->impl);
    free(s);
}

int sb_step_run(sb_step *s, const shr_batch *b)
{
    if (!s)
        return SHR_EINVAL;
    /* the GPU step copies uint8 NHWC and normalises on the device */
    if (s->gpu && b && (b->dtype != SHR_DTYPE_U8 || (b->layout == SHR_LAYOUT_NCHW &&
                                                     b->channels > 1)))
        return SHR_EINVAL;
    return s->gpu ? s->gpu->step_run(s->impl, b) : sb_cpu_step_run(s->impl, b);
}

int sb_step_sync(sb_step *s, sb_step_stats *st)
{
    if (!s)
        return SHR_EINVAL;
    return s->gpu ? s->gpu->step_sync(s->impl, st) : sb_cpu_step_sync(s->impl, st);
}

const char *sb_step_last_error(const sb_step *s)
{
    return s && s->gpu ? s->gpu->step_error(s->impl) : "";
}

const sb_gpu_api *sb_step_gpu(const sb_step *s, void **impl)
{
    if (impl)
        *impl = s && s->gpu ? s->impl : NULL;
    return s ? s->gpu : NULL;
}
