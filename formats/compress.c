/* compress.c - LZ4 and Zstandard payload codecs (compress.h). */
#include "compress.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lz4.h>
#include <lz4hc.h>
#include <zstd.h>
#include <zstd_errors.h>

#define ZSTD_DEFAULT_LEVEL 1     /* codec-bench on photos: 4x the compress rate of 3 for 4% more bytes */
#define ZSTD_FASTEST_LEVEL (-7)
#define ZSTD_BEST_LEVEL 19

const char *fmt_codec_name(int codec)
{
    static const char *const names[] = {[FMT_CODEC_NONE] = "none", [FMT_CODEC_LZ4] = "lz4",
                                        [FMT_CODEC_ZSTD] = "zstd"};
    return FMT_NAME_IN(names, codec, "unknown");
}

static int level_ok(int codec, int level)
{
    if (codec == FMT_CODEC_LZ4)
        return level >= 0 && level <= LZ4HC_CLEVEL_MAX;
    if (codec == FMT_CODEC_ZSTD)
        return level >= ZSTD_FASTEST_LEVEL && level <= ZSTD_BEST_LEVEL;
    return level == 0;
}

int fmt_codec_check(const fmt_codec_spec *spec)
{
    return spec->codec >= 0 && spec->codec < FMT_CODEC_COUNT && level_ok(spec->codec, spec->level)
               ? 0
               : FMT_EINVAL;
}

int fmt_codec_parse(const char *text, fmt_codec_spec *spec, fmt_msg *msg)
{
    spec->codec = FMT_CODEC_NONE;
    spec->level = 0;
    const char *colon = strchr(text, ':');
    size_t n = colon ? (size_t)(colon - text) : strlen(text);
    int codec;
    if (n == 4 && strncmp(text, "none", 4) == 0 && !colon)
        return 0;
    if (n == 3 && strncmp(text, "lz4", 3) == 0)
        codec = FMT_CODEC_LZ4;
    else if (n == 4 && strncmp(text, "zstd", 4) == 0)
        codec = FMT_CODEC_ZSTD;
    else
        return fmt_fail(msg, FMT_EINVAL, "unknown codec '%.*s' (lz4, zstd)", (int)n, text);
    int level = 0;
    if (colon) {
        char *end;
        errno = 0;
        long v = strtol(colon + 1, &end, 10);
        if (errno || end == colon + 1 || *end || v == 0 || v < INT_MIN || v > INT_MAX ||
            !level_ok(codec, (int)v))
            return fmt_fail(msg, FMT_EINVAL, "bad %s level '%s' (%s)", fmt_codec_name(codec),
                            colon + 1, codec == FMT_CODEC_LZ4 ? "1..12" : "-7..-1 or 1..19");
        level = (int)v;
    }
    spec->codec = codec;
    spec->level = level;
    return 0;
}

void fmt_codec_format(const fmt_codec_spec *spec, char *buf, size_t len)
{
    if (spec->level)
        snprintf(buf, len, "%s:%d", fmt_codec_name(spec->codec), spec->level);
    else
        snprintf(buf, len, "%s", fmt_codec_name(spec->codec));
}

size_t fmt_compress_bound(int codec, size_t len)
{
    if (codec == FMT_CODEC_LZ4)
        return len > LZ4_MAX_INPUT_SIZE ? 0 : (size_t)LZ4_compressBound((int)len);
    if (codec == FMT_CODEC_ZSTD) {
        size_t b = ZSTD_compressBound(len);
        return ZSTD_isError(b) ? 0 : b;
    }
    return 0;
}

int fmt_compress(const fmt_codec_spec *spec, const void *src, size_t len, void *dst, size_t cap,
                 size_t *out)
{
    *out = 0;
    if (!level_ok(spec->codec, spec->level) || spec->codec == FMT_CODEC_NONE)
        return FMT_EINVAL;
    size_t bound = fmt_compress_bound(spec->codec, len);
    if (!bound)
        return FMT_ETOOBIG;
    if (cap < bound)
        return FMT_EINVAL;
    if (spec->codec == FMT_CODEC_LZ4) {
        int r;
        if (cap > INT_MAX)
            cap = INT_MAX;
        if (spec->level <= 1) {
            r = LZ4_compress_default(src, dst, (int)len, (int)cap);
        } else {
            void *state = malloc((size_t)LZ4_sizeofStateHC());
            if (!state)
                return ENOMEM;
            r = LZ4_compress_HC_extStateHC(state, src, dst, (int)len, (int)cap, spec->level);
            free(state);
        }
        if (r <= 0 && len > 0)
            return FMT_EINVAL;
        *out = (size_t)r;
        return 0;
    }
    size_t r = ZSTD_compress(dst, cap, src, len, spec->level ? spec->level : ZSTD_DEFAULT_LEVEL);
    if (ZSTD_isError(r))
        return ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation ? ENOMEM : FMT_EINVAL;
    *out = r;
    return 0;
}

/* ---- per-thread Zstandard decoding context ---- */

static pthread_once_t g_dctx_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_dctx_key;
static int g_dctx_key_ok;

static void dctx_free(void *p)
{
    ZSTD_freeDCtx(p);
}

static void dctx_key_make(void)
{
    g_dctx_key_ok = pthread_key_create(&g_dctx_key, dctx_free) == 0;
}

/* This thread's context, made on first use; NULL without memory. */
static ZSTD_DCtx *thread_dctx(void)
{
    pthread_once(&g_dctx_once, dctx_key_make);
    if (!g_dctx_key_ok)
        return NULL;
    ZSTD_DCtx *d = pthread_getspecific(g_dctx_key);
    if (!d) {
        d = ZSTD_createDCtx();
        if (d && pthread_setspecific(g_dctx_key, d) != 0) {
            ZSTD_freeDCtx(d);
            d = NULL;
        }
    }
    return d;
}

int fmt_decompress(int codec, const void *src, size_t stored, void *dst, size_t len)
{
    if (codec == FMT_CODEC_LZ4) {
        if (stored > INT_MAX || len > INT_MAX)
            return FMT_ECORRUPT;
        int r = LZ4_decompress_safe(src, dst, (int)stored, (int)len);
        return r >= 0 && (size_t)r == len ? 0 : FMT_ECORRUPT;
    }
    if (codec == FMT_CODEC_ZSTD) {
        ZSTD_DCtx *d = thread_dctx();
        if (!d) {
            /* a one-off context rather than a failure */
            size_t r = ZSTD_decompress(dst, len, src, stored);
            if (ZSTD_isError(r))
                return ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation ? ENOMEM
                                                                             : FMT_ECORRUPT;
            return r == len ? 0 : FMT_ECORRUPT;
        }
        size_t r = ZSTD_decompressDCtx(d, dst, len, src, stored);
        if (ZSTD_isError(r))
            return ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation ? ENOMEM : FMT_ECORRUPT;
        return r == len ? 0 : FMT_ECORRUPT;
    }
    return FMT_EINVAL;
}
