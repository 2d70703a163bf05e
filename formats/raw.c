/* raw.c - the raw shard format (spec: formats/raw.md): streaming writer, mmap reader, pixel sums.
 *
 * The writer streams payloads straight to PATH.tmp and keeps only the 64-byte index entries and the
 * aux records in memory, so a shard of any size costs O(samples) heap, not O(bytes). The header,
 * which covers everything through index_hash, goes in last, so a file that has its final name and a
 * valid header hash is complete.
 *
 * The reader trusts nothing before it has checked it: every offset in the header and the index is
 * validated with overflow-checked arithmetic before fmt_raw_open returns, after which the accessors
 * can address the mapping without further checks. Entries are decoded from the mapping on demand
 * (explicit little-endian loads, no struct casts of unaligned memory).
 *
 * Without a mapping (FMT_RAW_OPEN_NOMAP) the header and the tail of the file (index and aux area)
 * are read with pread into memory and validated there; the accessors then decode the copy, so no
 * later access can fault on a page of a file that was truncated after open, and payloads are
 * read with pread by whoever needs them (fmt_raw_check_sample included).
 */
#include "raw.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

#define RAW_MAGIC "SHARDRAW"
#define RAW_VERSION_MAJOR 1u
#define RAW_VERSION_MINOR 0u
#define RAW_HASHED_BYTES 248u   /* header_hash covers header bytes 0..247 */

/* ---- little-endian helpers ---- */

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static int align_ok(uint32_t align)
{
    return align >= FMT_RAW_MIN_ALIGN && align <= FMT_RAW_MAX_ALIGN && (align & (align - 1)) == 0;
}

/* x rounded up to a power of two a; 0 on overflow (x > 0 never rounds to 0 otherwise). */
static uint64_t round_up(uint64_t x, uint64_t a)
{
    uint64_t r;
    if (__builtin_add_overflow(x, a - 1, &r))
        return 0;
    return r & ~(a - 1);
}

/* height * width * channels; nonzero if it overflows. */
static int shape_bytes(uint32_t h, uint32_t w, uint32_t c, uint64_t *out)
{
    return __builtin_mul_overflow((uint64_t)h * w, (uint64_t)c, out);
}

/* ---- pixel sums ---- */

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

/* ---- header and entry codecs ---- */

void fmt_raw_encode_header(const fmt_raw_header *h, uint8_t out[FMT_RAW_HEADER_SIZE])
{
    memset(out, 0, FMT_RAW_HEADER_SIZE);
    memcpy(out, RAW_MAGIC, 8);
    put16(out + 8, h->version_major);
    put16(out + 10, h->version_minor);
    put32(out + 12, FMT_RAW_HEADER_SIZE);
    put64(out + 16, h->sample_count);
    put64(out + 24, h->first_index);
    put64(out + 32, h->index_offset);
    put64(out + 40, h->aux_offset);
    put64(out + 48, h->aux_size);
    put64(out + 56, h->file_size);
    put32(out + 64, h->align);
    put32(out + 68, h->flags);
    put32(out + 72, h->fixed_height);
    put32(out + 76, h->fixed_width);
    put32(out + 80, h->fixed_channels);
    put64(out + 88, h->stride);
    put64(out + 96, h->fingerprint);
    put64(out + 104, h->input_end);
    for (int c = 0; c < 3; c++) {
        put64(out + 112 + 8 * c, h->channel_sum[c]);
        put64(out + 136 + 8 * c, h->channel_sumsq[c]);
    }
    put64(out + 160, h->index_hash);
    put64(out + RAW_HASHED_BYTES, XXH3_64bits(out, RAW_HASHED_BYTES));
}

int fmt_raw_decode_header(const uint8_t in[FMT_RAW_HEADER_SIZE], fmt_raw_header *h, fmt_msg *msg)
{
    memset(h, 0, sizeof *h);
    if (memcmp(in, RAW_MAGIC, 8) != 0)
        return fmt_fail(msg, FMT_EFORMAT, "bad magic (not a raw shard)");
    h->version_major = get16(in + 8);
    h->version_minor = get16(in + 10);
    uint32_t header_size = get32(in + 12);
    h->sample_count = get64(in + 16);
    h->first_index = get64(in + 24);
    h->index_offset = get64(in + 32);
    h->aux_offset = get64(in + 40);
    h->aux_size = get64(in + 48);
    h->file_size = get64(in + 56);
    h->align = get32(in + 64);
    h->flags = get32(in + 68);
    h->fixed_height = get32(in + 72);
    h->fixed_width = get32(in + 76);
    h->fixed_channels = get32(in + 80);
    h->stride = get64(in + 88);
    h->fingerprint = get64(in + 96);
    h->input_end = get64(in + 104);
    for (int c = 0; c < 3; c++) {
        h->channel_sum[c] = get64(in + 112 + 8 * c);
        h->channel_sumsq[c] = get64(in + 136 + 8 * c);
    }
    h->index_hash = get64(in + 160);
    h->header_hash = get64(in + RAW_HASHED_BYTES);

    /* the version comes before the hash: another major version may hash differently */
    if (h->version_major != RAW_VERSION_MAJOR)
        return fmt_fail(msg, FMT_EVERSION, "unsupported version %u.%u (this reader knows %u.x)",
                        h->version_major, h->version_minor, RAW_VERSION_MAJOR);
    if (XXH3_64bits(in, RAW_HASHED_BYTES) != h->header_hash)
        return fmt_fail(msg, FMT_EHASH, "bad header hash");
    if (header_size != FMT_RAW_HEADER_SIZE)
        return fmt_fail(msg, FMT_ECORRUPT, "bad header size %" PRIu32, header_size);
    if (!align_ok(h->align))
        return fmt_fail(msg, FMT_ECORRUPT, "bad alignment %" PRIu32, h->align);
    if (h->index_offset < h->align || h->index_offset % FMT_RAW_ENTRY_SIZE != 0)
        return fmt_fail(msg, FMT_ECORRUPT, "bad index offset %" PRIu64, h->index_offset);

    uint64_t index_bytes, index_end, aux_end;
    if (__builtin_mul_overflow(h->sample_count, (uint64_t)FMT_RAW_ENTRY_SIZE, &index_bytes) ||
        __builtin_add_overflow(h->index_offset, index_bytes, &index_end) ||
        index_end > h->file_size)
        return fmt_fail(msg, FMT_ECORRUPT, "index extends past end of file");
    if (h->aux_offset != index_end)
        return fmt_fail(msg, FMT_ECORRUPT, "aux area does not follow the index");
    if (__builtin_add_overflow(h->aux_offset, h->aux_size, &aux_end) || aux_end != h->file_size)
        return fmt_fail(msg, FMT_ECORRUPT, "aux area does not end at end of file");

    if (h->flags & FMT_RAW_FLAG_FIXED) {
        uint64_t len, data_bytes, data_end;
        if ((h->fixed_channels != 1 && h->fixed_channels != 3) || !h->fixed_height ||
            !h->fixed_width ||
            shape_bytes(h->fixed_height, h->fixed_width, h->fixed_channels, &len))
            return fmt_fail(msg, FMT_ECORRUPT, "bad fixed shape %" PRIu32 "x%" PRIu32 "x%" PRIu32,
                            h->fixed_height, h->fixed_width, h->fixed_channels);
        if (h->stride != round_up(len, h->align) || h->stride == 0)
            return fmt_fail(msg, FMT_ECORRUPT, "bad stride %" PRIu64, h->stride);
        if (__builtin_mul_overflow(h->sample_count, h->stride, &data_bytes) ||
            __builtin_add_overflow((uint64_t)h->align, data_bytes, &data_end) ||
            data_end > h->index_offset)
            return fmt_fail(msg, FMT_ECORRUPT, "fixed payloads extend past the index");
    }
    return 0;
}

static void encode_entry(const fmt_raw_entry *e, uint8_t *out)
{
    memset(out, 0, FMT_RAW_ENTRY_SIZE);
    put64(out, e->offset);
    put64(out + 8, e->length);
    put64(out + 16, e->hash);
    put32(out + 24, (uint32_t)e->label);
    put32(out + 28, e->height);
    put32(out + 32, e->width);
    put16(out + 36, (uint16_t)e->channels);
    put16(out + 38, (uint16_t)e->flags);
    put64(out + 40, e->source);
    put64(out + 48, e->aux_off);
    put32(out + 56, e->aux_len);
}

static void decode_entry(const uint8_t *in, fmt_raw_entry *e)
{
    e->offset = get64(in);
    e->length = get64(in + 8);
    e->hash = get64(in + 16);
    e->label = (int32_t)get32(in + 24);
    e->height = get32(in + 28);
    e->width = get32(in + 32);
    e->channels = get16(in + 36);
    e->flags = get16(in + 38);
    e->source = get64(in + 40);
    e->aux_off = get64(in + 48);
    e->aux_len = get32(in + 56);
}

uint64_t fmt_raw_sample_cost(uint64_t payload_len, uint32_t aux_len, uint32_t align)
{
    if (align == 0)
        align = FMT_RAW_DEFAULT_ALIGN;
    uint64_t padded = round_up(payload_len, align), cost;
    if ((padded == 0 && payload_len != 0) ||
        __builtin_add_overflow(padded, (uint64_t)FMT_RAW_ENTRY_SIZE + aux_len, &cost))
        return UINT64_MAX;
    return cost;
}

/* ---- writer ---- */

struct fmt_raw_writer {
    int fd;
    int err;                    /* first I/O error; nonzero puts the writer in the failed state */
    char *path, *tmp;
    uint32_t align;
    uint64_t first_index, fingerprint;
    uint64_t pos;               /* end of the last padded payload: where the next one goes */
    uint64_t count;
    uint8_t *index;             /* count encoded entries */
    size_t index_cap;
    uint8_t *aux;
    size_t aux_len, aux_cap;
    uint8_t *zeros;             /* align zero bytes, the source of all padding */
    int fixed;
    uint32_t fixed_h, fixed_w, fixed_c;
    uint64_t sum[3], sumsq[3];
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

/* Make room for `more` bytes after `used` in *buf (capacity *cap), doubling. */
static int grow(uint8_t **buf, size_t *cap, size_t used, size_t more)
{
    size_t need;
    if (__builtin_add_overflow(used, more, &need))
        return ENOMEM;
    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap : 4096;
    while (ncap < need) {
        if (__builtin_mul_overflow(ncap, (size_t)2, &ncap))
            return ENOMEM;
    }
    uint8_t *p = realloc(*buf, ncap);
    if (!p)
        return ENOMEM;
    *buf = p;
    *cap = ncap;
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
    free(w);
}

int fmt_raw_writer_open(fmt_raw_writer **out, const char *path, const fmt_raw_writer_opts *opts)
{
    *out = NULL;
    uint32_t align = opts && opts->align ? opts->align : FMT_RAW_DEFAULT_ALIGN;
    if (!align_ok(align))
        return FMT_EINVAL;
    int rc = 0;
    fmt_raw_writer *w = calloc(1, sizeof *w);
    if (!w)
        return ENOMEM;
    w->fd = -1;
    w->align = align;
    w->pos = align;
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
    if ((m->channels != 1 && m->channels != 3) || !m->height || !m->width || m->label < -1 ||
        (!m->aux && m->aux_len))
        return FMT_EINVAL;
    uint32_t aux_len = m->aux ? m->aux_len : 0;
    uint64_t len, padded, new_pos, new_size;
    if (shape_bytes(m->height, m->width, m->channels, &len) || len > SIZE_MAX)
        return FMT_ETOOBIG;
    padded = round_up(len, w->align);
    if (!padded || __builtin_add_overflow(w->pos, padded, &new_pos) ||
        __builtin_add_overflow(fmt_raw_writer_size(w), fmt_raw_sample_cost(len, aux_len, w->align),
                               &new_size) ||
        new_size > INT64_MAX)
        return FMT_ETOOBIG;

    /* memory first: a failed allocation leaves nothing half-done, so the writer stays usable */
    if (grow(&w->index, &w->index_cap, (size_t)w->count * FMT_RAW_ENTRY_SIZE, FMT_RAW_ENTRY_SIZE) ||
        grow(&w->aux, &w->aux_cap, w->aux_len, aux_len))
        return ENOMEM;

    struct iovec iov[2] = {
        { .iov_base = (void *)pixels, .iov_len = (size_t)len },
        { .iov_base = w->zeros, .iov_len = (size_t)(padded - len) },
    };
    int rc = pwritev_all(w->fd, iov, 2, w->pos);
    if (rc) {
        w->err = rc;
        return rc;
    }

    fmt_raw_entry e = {
        .offset = w->pos, .length = len, .hash = m->hash, .label = m->label,
        .height = m->height, .width = m->width, .channels = m->channels,
        .flags = aux_len ? FMT_RAW_ENTRY_AUX : 0, .source = m->source,
        .aux_off = aux_len ? w->aux_len : 0, .aux_len = aux_len,
    };
    encode_entry(&e, w->index + (size_t)w->count * FMT_RAW_ENTRY_SIZE);
    if (aux_len) {
        memcpy(w->aux + w->aux_len, m->aux, aux_len);
        w->aux_len += aux_len;
    }
    if (w->count == 0) {
        w->fixed = 1;
        w->fixed_h = m->height;
        w->fixed_w = m->width;
        w->fixed_c = m->channels;
    } else if (m->height != w->fixed_h || m->width != w->fixed_w || m->channels != w->fixed_c) {
        w->fixed = 0;
    }
    for (int c = 0; c < 3; c++) {
        w->sum[c] += m->sum[c];
        w->sumsq[c] += m->sumsq[c];
    }
    w->pos = new_pos;
    w->count++;
    return 0;
}

uint64_t fmt_raw_writer_count(const fmt_raw_writer *w)
{
    return w->count;
}

uint64_t fmt_raw_writer_size(const fmt_raw_writer *w)
{
    return w->pos + w->count * FMT_RAW_ENTRY_SIZE + w->aux_len;
}

int fmt_raw_writer_finish(fmt_raw_writer *w, uint64_t input_end, fmt_raw_header *hdr)
{
    int rc = w->err;
    if (rc)
        goto leave;

    fmt_raw_header h = {
        .version_major = RAW_VERSION_MAJOR, .version_minor = RAW_VERSION_MINOR,
        .sample_count = w->count, .first_index = w->first_index,
        .index_offset = w->pos, .aux_offset = w->pos + w->count * FMT_RAW_ENTRY_SIZE,
        .aux_size = w->aux_len, .file_size = fmt_raw_writer_size(w),
        .align = w->align, .fingerprint = w->fingerprint, .input_end = input_end,
    };
    if (w->fixed) {
        h.flags |= FMT_RAW_FLAG_FIXED;
        h.fixed_height = w->fixed_h;
        h.fixed_width = w->fixed_w;
        h.fixed_channels = w->fixed_c;
        h.stride = round_up((uint64_t)w->fixed_h * w->fixed_w * w->fixed_c, w->align);
    }
    memcpy(h.channel_sum, w->sum, sizeof h.channel_sum);
    memcpy(h.channel_sumsq, w->sumsq, sizeof h.channel_sumsq);

    size_t index_bytes = (size_t)w->count * FMT_RAW_ENTRY_SIZE;
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

    struct iovec tail[2] = {
        { .iov_base = w->index, .iov_len = index_bytes },
        { .iov_base = w->aux, .iov_len = w->aux_len },
    };
    rc = pwritev_all(w->fd, tail, 2, h.index_offset);
    if (rc)
        goto leave;

    /* the header goes in last: it vouches for everything before it */
    uint8_t head[FMT_RAW_HEADER_SIZE];
    fmt_raw_encode_header(&h, head);
    h.header_hash = get64(head + RAW_HASHED_BYTES);
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

/* ---- reader ---- */

struct fmt_raw_shard {
    int fd;
    const uint8_t *base;        /* the mapping, MAP_FAILED without one */
    size_t size;
    uint8_t *tail;              /* FMT_RAW_OPEN_NOMAP: copy of the bytes from index_offset on */
    const uint8_t *index;       /* the index: in the mapping or in tail; the aux area follows */
    fmt_raw_header h;
};

/* Check every index entry against raw.md "What a reader checks on open", items 4 and 5. */
static int check_entries(const fmt_raw_shard *s, fmt_msg *msg)
{
    const fmt_raw_header *h = &s->h;
    const uint8_t *index = s->index;
    int fixed = (h->flags & FMT_RAW_FLAG_FIXED) != 0;
    uint64_t prev_end = h->align;
    for (uint64_t i = 0; i < h->sample_count; i++) {
        fmt_raw_entry e;
        decode_entry(index + i * FMT_RAW_ENTRY_SIZE, &e);
        uint64_t len, end, aux_end;
        if (e.channels != 1 && e.channels != 3)
            return fmt_fail(msg, FMT_ECORRUPT, "entry %" PRIu64 ": bad channel count %" PRIu32,
                            i, e.channels);
        if (!e.height || !e.width)
            return fmt_fail(msg, FMT_ECORRUPT, "entry %" PRIu64 ": zero height or width", i);
        if (e.label < -1)
            return fmt_fail(msg, FMT_ECORRUPT, "entry %" PRIu64 ": bad label %" PRId32, i,
                            e.label);
        if (shape_bytes(e.height, e.width, e.channels, &len) || len != e.length)
            return fmt_fail(msg, FMT_ECORRUPT, "entry %" PRIu64 ": length does not match shape",
                            i);
        if (e.offset % h->align != 0)
            return fmt_fail(msg, FMT_ECORRUPT, "entry %" PRIu64 ": payload offset not aligned", i);
        if (e.offset < prev_end)
            return fmt_fail(msg, FMT_ECORRUPT, i == 0 ?
                            "entry %" PRIu64 ": payload starts before the data area" :
                            "entry %" PRIu64 ": payload overlaps the previous one", i);
        if (__builtin_add_overflow(e.offset, e.length, &end) || end > h->index_offset)
            return fmt_fail(msg, FMT_ECORRUPT, "entry %" PRIu64 ": payload extends past the data "
                            "area", i);
        if ((e.flags & FMT_RAW_ENTRY_AUX) &&
            (__builtin_add_overflow(e.aux_off, (uint64_t)e.aux_len, &aux_end) ||
             aux_end > h->aux_size))
            return fmt_fail(msg, FMT_ECORRUPT, "entry %" PRIu64 ": aux record outside the aux "
                            "area", i);
        if (fixed && (e.height != h->fixed_height || e.width != h->fixed_width ||
                      e.channels != h->fixed_channels || e.offset != h->align + i * h->stride))
            return fmt_fail(msg, FMT_ECORRUPT, "entry %" PRIu64 ": does not match the fixed "
                            "layout", i);
        prev_end = end;
    }
    return 0;
}

/* Read up to len bytes at off, retrying after signals and partial transfers; *got is what was
 * read (less than len only at end of file). */
static int pread_full(int fd, void *buf, size_t len, uint64_t off, size_t *got)
{
    size_t done = 0;
    int rc = 0;
    while (done < len) {
        ssize_t r = pread(fd, (uint8_t *)buf + done, len - done, (off_t)(off + done));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            rc = errno;
            break;
        }
        if (r == 0)
            break;
        done += (size_t)r;
    }
    *got = done;
    return rc;
}

/* The first min(size, 256) bytes of the file into head, with pread. The file may have shrunk
 * since fstat: a short read is FMT_ETRUNC. */
static int load_unmapped(fmt_raw_shard *s, uint8_t head[FMT_RAW_HEADER_SIZE], fmt_msg *msg)
{
    size_t want = s->size < FMT_RAW_HEADER_SIZE ? s->size : FMT_RAW_HEADER_SIZE, got;
    int rc = pread_full(s->fd, head, want, 0, &got);
    if (rc)
        return fmt_fail(msg, rc, "cannot read the header: %s", fmt_strerror(rc));
    if (got < want)
        return fmt_fail(msg, FMT_ETRUNC, "file shrank to %zu bytes while opening", got);
    return 0;
}

/* The file's tail (index and aux area) into s->tail, with pread; a short read is FMT_ETRUNC. */
static int load_tail(fmt_raw_shard *s, fmt_msg *msg)
{
    /* decode_header and the size check proved index_offset <= file_size == size */
    size_t len = s->size - (size_t)s->h.index_offset, got;
    s->tail = malloc(len ? len : 1);
    if (!s->tail)
        return fmt_fail(msg, ENOMEM, "no memory for an index of %zu bytes", len);
    int rc = pread_full(s->fd, s->tail, len, s->h.index_offset, &got);
    if (rc)
        return fmt_fail(msg, rc, "cannot read the index: %s", fmt_strerror(rc));
    if (got < len)
        return fmt_fail(msg, FMT_ETRUNC, "file shrank while its index was read");
    s->index = s->tail;
    return 0;
}

int fmt_raw_open(fmt_raw_shard **out, const char *path, fmt_msg *msg)
{
    return fmt_raw_open_ex(out, path, 0, msg);
}

int fmt_raw_open_ex(fmt_raw_shard **out, const char *path, unsigned flags, fmt_msg *msg)
{
    *out = NULL;
    if (msg)
        msg->text[0] = '\0';
    int rc = 0;
    fmt_raw_shard *s = calloc(1, sizeof *s);
    if (!s)
        return ENOMEM;
    s->base = MAP_FAILED;
    s->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (s->fd < 0) {
        rc = errno;
        goto leave;
    }
    struct stat st;
    if (fstat(s->fd, &st) != 0) {
        rc = errno;
        goto leave;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = fmt_fail(msg, S_ISDIR(st.st_mode) ? EISDIR : EINVAL, "not a regular file");
        goto leave;
    }
    if (st.st_size == 0) {
        rc = fmt_fail(msg, FMT_ETRUNC, "empty file");
        goto leave;
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        rc = fmt_fail(msg, FMT_ETOOBIG, "file too large to map");
        goto leave;
    }
    s->size = (size_t)st.st_size;
    uint8_t copy[FMT_RAW_HEADER_SIZE];
    const uint8_t *head = copy;
    if (flags & FMT_RAW_OPEN_NOMAP) {
        rc = load_unmapped(s, copy, msg);
        if (rc)
            goto leave;
    } else {
        void *map = mmap(NULL, s->size, PROT_READ, MAP_SHARED, s->fd, 0);
        if (map == MAP_FAILED) {
            rc = errno;
            goto leave;
        }
        s->base = map;
        head = s->base;
    }

    if (s->size < FMT_RAW_HEADER_SIZE) {
        size_t n = s->size < 8 ? s->size : 8;
        if (memcmp(head, RAW_MAGIC, n) != 0)
            rc = fmt_fail(msg, FMT_EFORMAT, "bad magic (not a raw shard)");
        else
            rc = fmt_fail(msg, FMT_ETRUNC, "file is %zu bytes, shorter than the header", s->size);
        goto leave;
    }
    rc = fmt_raw_decode_header(head, &s->h, msg);
    if (rc)
        goto leave;
    if (s->h.file_size != (uint64_t)s->size) {
        rc = fmt_fail(msg, s->size < s->h.file_size ? FMT_ETRUNC : FMT_ECORRUPT,
                      "file is %zu bytes, header says %" PRIu64, s->size, s->h.file_size);
        goto leave;
    }
    if (s->base != MAP_FAILED)
        s->index = s->base + s->h.index_offset;
    else if ((rc = load_tail(s, msg)))
        goto leave;
    /* decode_header proved index_offset <= file_size == size */
    if (XXH3_64bits(s->index, s->size - (size_t)s->h.index_offset) != s->h.index_hash) {
        rc = fmt_fail(msg, FMT_EHASH, "bad index hash");
        goto leave;
    }
    rc = check_entries(s, msg);
leave:
    if (rc)
        fmt_raw_close(s);
    else
        *out = s;
    return rc;
}

void fmt_raw_close(fmt_raw_shard *s)
{
    if (!s)
        return;
    if (s->base != MAP_FAILED)
        munmap((void *)s->base, s->size);
    if (s->fd >= 0)
        close(s->fd);
    free(s->tail);
    free(s);
}

const fmt_raw_header *fmt_raw_get_header(const fmt_raw_shard *s)
{
    return &s->h;
}

uint64_t fmt_raw_count(const fmt_raw_shard *s)
{
    return s->h.sample_count;
}

void fmt_raw_get_entry(const fmt_raw_shard *s, uint64_t i, fmt_raw_entry *e)
{
    assert(i < s->h.sample_count);
    decode_entry(s->index + i * FMT_RAW_ENTRY_SIZE, e);
}

const uint8_t *fmt_raw_pixels(const fmt_raw_shard *s, uint64_t i)
{
    assert(i < s->h.sample_count);
    if (s->base == MAP_FAILED)
        return NULL;
    if (s->h.flags & FMT_RAW_FLAG_FIXED)
        return s->base + s->h.align + i * s->h.stride;
    return s->base + get64(s->index + i * FMT_RAW_ENTRY_SIZE);
}

const uint8_t *fmt_raw_aux(const fmt_raw_shard *s, uint64_t i, uint32_t *len)
{
    fmt_raw_entry e;
    fmt_raw_get_entry(s, i, &e);
    if (!(e.flags & FMT_RAW_ENTRY_AUX)) {
        *len = 0;
        return NULL;
    }
    *len = e.aux_len;
    /* the aux area follows the index, in the mapping as in the copy */
    return s->index + (s->h.aux_offset - s->h.index_offset) + e.aux_off;
}

/* Hash [off, off + len) of the file, read with pread in chunks of at most 1 MiB. */
static int hash_unmapped(int fd, uint64_t off, uint64_t len, uint64_t *hash)
{
    size_t chunk = len < ((size_t)1 << 20) ? (size_t)len : (size_t)1 << 20;
    uint8_t *buf = malloc(chunk ? chunk : 1);
    XXH3_state_t *st = XXH3_createState();
    int rc = 0;
    if (!buf || !st) {
        rc = ENOMEM;
        goto leave;
    }
    XXH3_64bits_reset(st);
    for (uint64_t done = 0; done < len;) {
        size_t want = len - done < chunk ? (size_t)(len - done) : chunk, got;
        if ((rc = pread_full(fd, buf, want, off + done, &got)))
            goto leave;
        if (got < want) {
            rc = FMT_ETRUNC;
            goto leave;
        }
        XXH3_64bits_update(st, buf, want);
        done += want;
    }
    *hash = XXH3_64bits_digest(st);
leave:
    XXH3_freeState(st);
    free(buf);
    return rc;
}

int fmt_raw_check_sample(const fmt_raw_shard *s, uint64_t i)
{
    if (i >= s->h.sample_count)
        return FMT_EINVAL;
    fmt_raw_entry e;
    fmt_raw_get_entry(s, i, &e);
    uint64_t hash;
    if (s->base != MAP_FAILED) {
        hash = XXH3_64bits(s->base + e.offset, e.length);
    } else {
        int rc = hash_unmapped(s->fd, e.offset, e.length, &hash);
        if (rc)
            return rc;
    }
    return hash == e.hash ? 0 : FMT_EHASH;
}

int fmt_raw_fd(const fmt_raw_shard *s)
{
    return s->fd;
}

const uint8_t *fmt_raw_base(const fmt_raw_shard *s)
{
    return s->base != MAP_FAILED ? s->base : NULL;
}
