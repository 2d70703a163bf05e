/* raw_write.c - the raw shard format's streaming writer (spec: formats/raw.md; the codecs and
 * the reader are raw.c).
 *
 * The writer streams payloads straight to PATH.tmp and keeps only the 64-byte index entries and the
 * aux records in memory, so a shard of any size costs O(samples) heap, not O(bytes). The header,
 * which covers everything through index_hash, goes in last, so a file that has its final name and a
 * valid header hash is complete. Mixed mode stores the samples fmt_raw_jpeg_pick selects as JPEG.
 */
#include "raw.h"
#include "raw_int.h"
#include "backend.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

#include "compress.h"
#include "image.h"
#include "le.h"

#define RAW_JPEG_SEED 0x6a706567u   /* "jpeg" */

int fmt_raw_jpeg_pick(uint64_t index, double fraction)
{
    uint8_t le[8];
    fmt_le_put64(le, index);
    uint64_t h = XXH3_64bits_withSeed(le, sizeof le, RAW_JPEG_SEED);
    return (double)(h >> 11) * 0x1.0p-53 < fraction;
}

int fmt_raw_jpeg_encode(const void *pixels, uint32_t h, uint32_t w, uint32_t c, int quality,
                        uint8_t **jpeg, size_t *len, uint64_t *hash)
{
    fmt_image img = {.pixels = (uint8_t *)pixels, .width = w, .height = h, .channels = c};
    fmt_jpeg_opts jo = {.quality = quality ? quality : 90, .subsampling = 420};
    int rc = fmt_jpeg_encode(&img, &jo, jpeg, len);
    if (rc)
        return rc;
    fmt_decode_opts dopt = {.channels = c, .limits = {h > w ? h : w, (uint64_t)h * w}};
    fmt_image back;
    rc = fmt_image_decode(*jpeg, *len, &dopt, &back, NULL);
    if (rc == 0 && (back.width != w || back.height != h || back.channels != c))
        rc = FMT_ECORRUPT;
    if (rc == 0)
        *hash = fmt_hash64(back.pixels, (size_t)h * w * c);
    fmt_image_free(&back);
    if (rc) {
        free(*jpeg);
        *jpeg = NULL;
    }
    return rc;
}


/* ---- writer ---- */

struct fmt_raw_writer {
    int fd;
    int err;                    /* first I/O error; nonzero puts the writer in the failed state */
    char *path, *tmp;
    uint32_t align;
    unsigned version;           /* RAW_V1 (an alignment was given) or RAW_V2 (packed) */
    uint64_t first_index, fingerprint;
    uint64_t pos;               /* v1: end of the last padded payload, where the next one goes;
                                 * v2: end of the last payload */
    uint64_t run_start;         /* v2: start of the current run */
    fmt_writer_stats st;        /* count, sums, one shape */
    uint8_t *index;             /* st.count encoded entries */
    size_t index_cap;
    uint8_t *aux;
    size_t aux_len, aux_cap;
    uint8_t *zeros;             /* align zero bytes, the source of all padding */
    fmt_codec_spec codec;       /* compression of the payloads, or FMT_CODEC_NONE */
    double jpeg_fraction;       /* mixed mode: samples fmt_raw_jpeg_pick selects are JPEG */
    int quality;
    uint8_t *cbuf;              /* compressed payload */
    uint8_t *jbuf;              /* the last JPEG payload */
    size_t cbuf_cap;
};

/* pwritev everything in iov at off, resuming after short writes and EINTR. Modifies iov. */
static int pwritev_all(int fd, struct iovec *iov, int n, uint64_t off)
{
    while (n > 0) {
        ssize_t r = pwritev(fd, iov, n, (off_t)off);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        size_t left = (size_t)r;
        off += left;
        while (n > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            if (r == 0)
                return EIO; /* no progress on a non-empty write: do not spin */
            iov->iov_base = (uint8_t *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return 0;
}

static void writer_free(fmt_raw_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    free(w->path);
    free(w->tmp);
    free(w->index);
    free(w->aux);
    free(w->zeros);
    free(w->cbuf);
    free(w->jbuf);
    free(w);
}

int fmt_raw_writer_open(fmt_raw_writer **out, const char *path, const fmt_raw_writer_opts *opts)
{
    *out = NULL;
    fmt_codec_spec codec = {opts ? opts->codec : 0, opts ? opts->level : 0};
    double jpeg = opts ? opts->jpeg_fraction : 0;
    int quality = opts ? opts->quality : 0;
    unsigned version = opts && opts->align && !codec.codec && !(jpeg > 0) ? RAW_V1 : RAW_V2;
    uint32_t align = opts && opts->align ? opts->align : FMT_RAW_DEFAULT_ALIGN;
    if (!fmt_raw_align_ok(align) || fmt_codec_check(&codec) || !(jpeg >= 0 && jpeg <= 1) ||
        quality < 0 || quality > 100)
        return FMT_EINVAL;
    int rc = 0;
    fmt_raw_writer *w = calloc(1, sizeof *w);
    if (!w)
        return ENOMEM;
    w->fd = -1;
    w->align = align;
    w->version = version;
    w->codec = codec;
    w->jpeg_fraction = jpeg;
    w->quality = quality;
    w->pos = w->run_start = align;
    w->first_index = opts ? opts->first_index : 0;
    w->fingerprint = opts ? opts->fingerprint : 0;
    size_t plen = strlen(path);
    w->path = strdup(path);
    w->tmp = malloc(plen + 5);
    w->zeros = calloc(1, align);
    if (!w->path || !w->tmp || !w->zeros) {
        rc = ENOMEM;
        goto leave;
    }
    memcpy(w->tmp, path, plen);
    memcpy(w->tmp + plen, ".tmp", 5);
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0)
        rc = errno;
leave:
    if (rc)
        writer_free(w);
    else
        *out = w;
    return rc;
}

int fmt_raw_writer_add(fmt_raw_writer *w, const fmt_sample_meta *m, const void *pixels)
{
    if (w->err)
        return FMT_ESTATE;
    if (fmt_sample_meta_check(m))
        return FMT_EINVAL;
    uint32_t aux_len = m->aux ? m->aux_len : 0;
    uint64_t len, stored, start, end, new_pos, new_size;
    if (fmt_shape_bytes(m->height, m->width, m->channels, &len) || len > SIZE_MAX)
        return FMT_ETOOBIG;
    stored = len;
    const void *payload = pixels;
    int codec = FMT_CODEC_NONE;
    uint64_t hash = m->hash;
    uint8_t *jpeg = NULL;
    if (w->jpeg_fraction > 0 && fmt_raw_jpeg_pick(w->first_index + w->st.count, w->jpeg_fraction)) {
        size_t jlen;
        uint64_t jhash;
        int rc = fmt_raw_jpeg_encode(pixels, m->height, m->width, m->channels, w->quality, &jpeg,
                                     &jlen, &jhash);
        if (rc)
            return rc;
        /* the writer keeps the last JPEG until the next one: nothing to free on any return */
        free(w->jbuf);
        w->jbuf = jpeg;
        if (jlen < len && jlen <= UINT32_MAX) {
            stored = jlen;
            payload = jpeg;
            codec = FMT_RAW_CODEC_JPEG;
            hash = jhash;
        }
    }
    if (w->codec.codec && codec == FMT_CODEC_NONE) {
        /* stored compressed where that is smaller (and fits the entry's 32-bit length) */
        size_t bound = fmt_compress_bound(w->codec.codec, (size_t)len), clen;
        if (bound && bound <= UINT32_MAX) {
            if (fmt_grow((void **)&w->cbuf, &w->cbuf_cap, 0, bound))
                return ENOMEM;
            int rc = fmt_compress(&w->codec, pixels, (size_t)len, w->cbuf, w->cbuf_cap, &clen);
            if (rc)
                return rc;
            if (clen > 0 && clen < len) {
                stored = clen;
                payload = w->cbuf;
                codec = w->codec.codec;
            }
        }
    }
    /* where the payload goes: v1 at pos (a multiple of align); v2 after the previous payload,
     * unless it is large or would straddle the run, which then starts at the next aligned offset */
    start = w->pos;
    int new_run = w->version >= RAW_V2 &&
                  (stored >= FMT_RAW_RUN_BYTES || w->pos - w->run_start + stored > FMT_RAW_RUN_BYTES);
    if (new_run)
        start = fmt_raw_round_up(w->pos, w->align);
    if (!start || __builtin_add_overflow(start, stored, &end))
        return FMT_ETOOBIG;
    new_pos = w->version >= RAW_V2 ? end : fmt_raw_round_up(end, w->align);
    if (!new_pos || __builtin_add_overflow(new_pos, 64 * (w->st.count + 1) + 63, &new_size) ||
        __builtin_add_overflow(new_size, (uint64_t)w->aux_len + aux_len, &new_size) ||
        new_size > INT64_MAX)
        return FMT_ETOOBIG;

    /* memory first: a failed allocation leaves nothing half-done, so the writer stays usable */
    if (fmt_grow((void **)&w->index, &w->index_cap, (size_t)w->st.count * FMT_RAW_ENTRY_SIZE,
                 FMT_RAW_ENTRY_SIZE) ||
        fmt_grow((void **)&w->aux, &w->aux_cap, w->aux_len, aux_len))
        return ENOMEM;

    /* padding: v1 after the payload, v2 in front of it (up to the start of a new run) */
    struct iovec iov[3] = {
        { .iov_base = w->zeros, .iov_len = (size_t)(start - w->pos) },
        { .iov_base = (void *)payload, .iov_len = (size_t)stored },
        { .iov_base = w->zeros, .iov_len = (size_t)(new_pos - end) },
    };
    int rc = pwritev_all(w->fd, iov, 3, w->pos);
    if (rc) {
        w->err = rc;
        return rc;
    }

    fmt_raw_entry e = {
        .offset = start, .length = len, .stored = stored, .codec = (uint32_t)codec,
        .hash = hash, .label = m->label,
        .height = m->height, .width = m->width, .channels = m->channels,
        .flags = aux_len ? FMT_RAW_ENTRY_AUX : 0, .source = m->source,
        .aux_off = aux_len ? w->aux_len : 0, .aux_len = aux_len,
    };
    fmt_raw_encode_entry(&e, w->index + (size_t)w->st.count * FMT_RAW_ENTRY_SIZE, w->version);
    if (aux_len) {
        memcpy(w->aux + w->aux_len, m->aux, aux_len);
        w->aux_len += aux_len;
    }
    fmt_writer_stats_add(&w->st, m);
    if (new_run)
        w->run_start = start;
    w->pos = new_pos;
    return 0;
}

uint64_t fmt_raw_writer_count(const fmt_raw_writer *w)
{
    return w->st.count;
}

/* The index starts at the first multiple of 64 after the payloads (v1: pos already is one). */
static uint64_t index_start(const fmt_raw_writer *w)
{
    return fmt_raw_round_up(w->pos, FMT_RAW_ENTRY_SIZE);
}

uint64_t fmt_raw_writer_size(const fmt_raw_writer *w)
{
    return index_start(w) + w->st.count * FMT_RAW_ENTRY_SIZE + w->aux_len;
}

int fmt_raw_writer_finish(fmt_raw_writer *w, uint64_t input_end, fmt_raw_header *hdr)
{
    int rc = w->err;
    if (rc)
        goto leave;

    uint64_t ix = index_start(w);
    fmt_raw_header h = {
        .version_major = (uint16_t)w->version, .version_minor = RAW_VERSION_MINOR,
        .sample_count = w->st.count, .first_index = w->first_index, .data_offset = w->align,
        .index_offset = ix, .aux_offset = ix + w->st.count * FMT_RAW_ENTRY_SIZE,
        .aux_size = w->aux_len, .file_size = fmt_raw_writer_size(w),
        .align = w->align, .fingerprint = w->fingerprint, .input_end = input_end,
    };
    if (w->st.fixed) {
        h.flags |= FMT_RAW_FLAG_FIXED;
        h.fixed_height = w->st.h;
        h.fixed_width = w->st.w;
        h.fixed_channels = w->st.c;
        if (w->version == RAW_V1)
            h.stride = fmt_raw_round_up((uint64_t)w->st.h * w->st.w * w->st.c, w->align);
    }
    memcpy(h.channel_sum, w->st.sum, sizeof h.channel_sum);
    memcpy(h.channel_sumsq, w->st.sumsq, sizeof h.channel_sumsq);

    size_t index_bytes = (size_t)w->st.count * FMT_RAW_ENTRY_SIZE;
    XXH3_state_t *st = XXH3_createState();
    if (!st) {
        rc = ENOMEM;
        goto leave;
    }
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, w->index, index_bytes);
    XXH3_64bits_update(st, w->aux, w->aux_len);
    h.index_hash = XXH3_64bits_digest(st);
    XXH3_freeState(st);

    struct iovec tail[3] = {
        { .iov_base = w->zeros, .iov_len = (size_t)(ix - w->pos) },
        { .iov_base = w->index, .iov_len = index_bytes },
        { .iov_base = w->aux, .iov_len = w->aux_len },
    };
    rc = pwritev_all(w->fd, tail, 3, w->pos);
    if (rc)
        goto leave;

    /* the header goes in last: it vouches for everything before it */
    uint8_t head[FMT_RAW_HEADER_SIZE];
    fmt_raw_encode_header(&h, head);
    h.header_hash = fmt_le_get64(head + RAW_HASHED_BYTES);
    struct iovec front[2] = {
        { .iov_base = head, .iov_len = sizeof head },
        { .iov_base = w->zeros, .iov_len = w->align - FMT_RAW_HEADER_SIZE },
    };
    rc = pwritev_all(w->fd, front, 2, 0);
    if (rc)
        goto leave;
    if (fsync(w->fd) != 0) {
        rc = errno;
        goto leave;
    }
    int fd = w->fd;
    w->fd = -1;
    if (close(fd) != 0) {
        rc = errno;
        goto leave;
    }
    if (rename(w->tmp, w->path) != 0) {
        rc = errno;
        goto leave;
    }
    /* renamed: from here on there is no temp file to remove */
    rc = fmt_fsync_parent(w->path);
    if (!rc && hdr)
        *hdr = h;
    writer_free(w);
    return rc;
leave:
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
    }
    unlink(w->tmp);
    writer_free(w);
    return rc;
}

void fmt_raw_writer_abort(fmt_raw_writer *w)
{
    if (!w)
        return;
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
    }
    unlink(w->tmp);
    writer_free(w);
}
