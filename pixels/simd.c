/* simd.c - the CPU probe and the switch of simd.h. */
#include "simd.h"

#include <stdlib.h>
#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <cpuid.h>
#endif

/* the features, probed once (~0u: not yet) */
static unsigned g_cpu = ~0u;
/* the switch: fmt_simd_set's choice (on until it is called) */
static int g_on = 1;

unsigned fmt_cpu(void)
{
    unsigned v = __atomic_load_n(&g_cpu, __ATOMIC_RELAXED);
    if (v == ~0u) {
        v = 0;
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
        __builtin_cpu_init();
        if (__builtin_cpu_supports("sse4.1"))
            v |= FMT_CPU_SSE41;
        if (__builtin_cpu_supports("avx2"))
            v |= FMT_CPU_AVX2;
        /* F16C from CPUID (clang's __builtin_cpu_supports has no "f16c"); it needs the AVX
         * state the OS saves, which the avx2 probe has checked */
        unsigned a, b, c, d;
        if ((v & FMT_CPU_AVX2) && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C))
            v |= FMT_CPU_F16C;
        /* the probe checks the OS's saving of the AVX-512 state too */
        if ((v & FMT_CPU_AVX2) && __builtin_cpu_supports("avx512f") &&
            __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vbmi"))
            v |= FMT_CPU_AVX512;
#endif
        __atomic_store_n(&g_cpu, v, __ATOMIC_RELAXED);
    }
    return v;
}

int fmt_simd(void)
{
#ifdef FMT_AVX2
    return __atomic_load_n(&g_on, __ATOMIC_RELAXED) && (fmt_cpu() & FMT_CPU_AVX2);
#else
    return 0;
#endif
}

unsigned fmt_simd_features(void)
{
    return __atomic_load_n(&g_on, __ATOMIC_RELAXED) ? fmt_cpu() : 0;
}

int fmt_simd_set(int on)
{
    __atomic_store_n(&g_on, on ? 1 : 0, __ATOMIC_RELAXED);
    return fmt_simd();
}

static int is(const char *v, const char *value)
{
    return v && strcmp(v, value) == 0;
}

int fmt_simd_env_plain(char *(*get)(const char *))
{
    return is(get("SHARDREAD_SIMD"), "0") || is(get("SHARDC_RESAMPLE"), "plain") ||
           is(get("SHARDC_TRANSFORM"), "plain");
}

/* fmt_simd_avx512_set(0): the AVX-512 kernels left out (for the tests) */
static int g_avx512_off;

int fmt_simd_avx512(void)
{
#ifdef FMT_AVX512
    return !__atomic_load_n(&g_avx512_off, __ATOMIC_RELAXED) && fmt_simd() &&
           (fmt_cpu() & FMT_CPU_AVX512);
#else
    return 0;
#endif
}

int fmt_simd_avx512_set(int on)
{
    __atomic_store_n(&g_avx512_off, !on, __ATOMIC_RELAXED);
    return fmt_simd_avx512();
}
