/* backend.c - the table of storage backends, and what every backend checks and computes per
 * sample. */
#include <assert.h>
#include <inttypes.h>
#include <pthread.h>
#include <string.h>

#include "backend.h"

static const fmt_backend *const backends[] = {
    &fmt_backend_raw,  &fmt_backend_hdf5, &fmt_backend_lmdb,
    &fmt_backend_png0, &fmt_backend_bmp,  &fmt_backend_jpeg,
};

#define NBACKENDS (sizeof backends / sizeof *backends)

/* the names in table order, taken from the table once, so the list is spelled out only there */
static const char *names[NBACKENDS + 1];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static void names_fill(void)
{
    for (size_t i = 0; i < NBACKENDS; i++)
        names[i] = backends[i]->name;
}

const fmt_backend *fmt_backend_find(const char *name)
{
    for (size_t i = 0; i < NBACKENDS; i++)
        if (strcmp(backends[i]->name, name) == 0)
            return backends[i];
    return NULL;
}

const char *const *fmt_backend_names(void)
{
    pthread_once(&names_once, names_fill);
    return names;
}

int fmt_shape_bytes(uint64_t height, uint64_t width, uint64_t channels, uint64_t *out)
{
    uint64_t hw;
    return __builtin_mul_overflow(height, width, &hw) || __builtin_mul_overflow(hw, channels, out);
}

int fmt_sample_meta_check(const fmt_sample_meta *m)
{
    if (!m || (m->channels != 1 && m->channels != 3) || !m->height || !m->width || m->label < -1 ||
        (!m->aux && m->aux_len))
        return FMT_EINVAL;
    return 0;
}

int fmt_sample_shape_check(const char *what, uint64_t i, uint32_t height, uint32_t width,
                           uint32_t channels, int32_t label, fmt_msg *msg)
{
    if (channels != 1 && channels != 3)
        return fmt_fail(msg, FMT_ECORRUPT, "%s %" PRIu64 ": bad channel count %" PRIu32, what, i,
                        channels);
    if (!height || !width)
        return fmt_fail(msg, FMT_ECORRUPT, "%s %" PRIu64 ": zero height or width", what, i);
    if (label < -1)
        return fmt_fail(msg, FMT_ECORRUPT, "%s %" PRIu64 ": bad label %" PRId32, what, i, label);
    return 0;
}

/* Bytes are accumulated into 48 uint32 lanes (48 is a multiple of 1, 2 and 3 channels, so lane j
 * always holds channel j % channels), which the compiler turns into wide vector adds; the lanes are
 * folded into the uint64 totals once per chunk. A lane takes at most 65536 values per chunk, and
 * 65536 * 255^2 < 2^32, so the squares cannot overflow. */
#define SUM_LANES 48
#define SUM_PER_LANE 65536

void fmt_pixel_sums(const uint8_t *pixels, size_t npixels, uint32_t channels,
                    uint64_t sum[3], uint64_t sumsq[3])
{
    assert(channels >= 1 && channels <= 3);
    size_t bytes = npixels * channels, i = 0;
    while (bytes - i >= SUM_LANES) {
        uint32_t ls[SUM_LANES] = {0}, lq[SUM_LANES] = {0};
        size_t end = bytes - i > (size_t)SUM_LANES * SUM_PER_LANE ?
                     i + (size_t)SUM_LANES * SUM_PER_LANE : bytes;
        for (; end - i >= SUM_LANES; i += SUM_LANES) {
            const uint8_t *p = pixels + i;
            for (int j = 0; j < SUM_LANES; j++) {
                uint32_t v = p[j];
                ls[j] += v;
                lq[j] += v * v;
            }
        }
        for (int j = 0; j < SUM_LANES; j++) {
            sum[j % channels] += ls[j];
            sumsq[j % channels] += lq[j];
        }
    }
    /* i is a multiple of 48, hence of channels: byte i belongs to channel i % channels */
    for (; i < bytes; i++) {
        uint64_t v = pixels[i];
        sum[i % channels] += v;
        sumsq[i % channels] += v * v;
    }
}

void fmt_writer_stats_add(fmt_writer_stats *st, const fmt_sample_meta *m)
{
    if (st->count == 0) {
        st->fixed = 1;
        st->h = m->height;
        st->w = m->width;
        st->c = m->channels;
    } else if (m->height != st->h || m->width != st->w || m->channels != st->c) {
        st->fixed = 0;
    }
    for (int c = 0; c < 3; c++) {
        st->sum[c] += m->sum[c];
        st->sumsq[c] += m->sumsq[c];
    }
    st->count++;
}
