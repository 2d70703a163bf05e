/* raw.c - the raw shard format (spec: formats/raw.md): header and entry codecs and the reader
 * (mapped, or pread only); the streaming writer is raw_write.c. The raw backend of backend.h,
 * with its mapped, pread and O_DIRECT read paths, is rawbackend.c, which uses this file through
 * raw.h and raw_int.h.
 *
 * The reader trusts nothing before it has checked it: every offset in the header and the index is
 * validated with overflow-checked arithmetic before fmt_raw_open returns, after which the accessors
 * can address the mapping without further checks. That holds only because what was checked cannot
 * change: the header is decoded once, and the tail of the file (index and aux area) is read into
 * private memory at open, in every mode, and validated there; entries are decoded from that copy
 * (explicit little-endian loads, no struct casts of unaligned memory). A shard rewritten in place
 * under an open reader therefore changes payload bytes only, which the index's hashes (pinned by
 * the header hash, which the manifest pins) still describe as they were.
 *
 * Without a mapping (FMT_RAW_OPEN_NOMAP) the header is read with pread too, so no later access
 * can fault on a page of a file that was truncated after open, and payloads are read with pread by
 * whoever needs them (fmt_raw_check_sample included).
 */
#include "raw.h"
#include "raw_int.h"
#include "backend.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "compress.h"
#include "fdcache.h"
#include "image.h"
#include "le.h"

_Static_assert((int)FMT_RAW_CODEC_LZ4 == (int)FMT_CODEC_LZ4 &&
               (int)FMT_RAW_CODEC_ZSTD == (int)FMT_CODEC_ZSTD &&
               (int)FMT_RAW_CODEC_JPEG == (int)FMT_CODEC_COUNT, "raw codecs are compress.h's");

/* ---- header and entry codecs ---- */

void fmt_raw_encode_header(const fmt_raw_header *h, uint8_t out[FMT_RAW_HEADER_SIZE])
{
    memset(out, 0, FMT_RAW_HEADER_SIZE);
    memcpy(out, RAW_MAGIC, 8);
    fmt_le_put16(out + 8, h->version_major);
    fmt_le_put16(out + 10, h->version_minor);
    fmt_le_put32(out + 12, FMT_RAW_HEADER_SIZE);
    fmt_le_put64(out + 16, h->sample_count);
    fmt_le_put64(out + 24, h->first_index);
    fmt_le_put64(out + 32, h->index_offset);
    fmt_le_put64(out + 40, h->aux_offset);
    fmt_le_put64(out + 48, h->aux_size);
    fmt_le_put64(out + 56, h->file_size);
    fmt_le_put32(out + 64, h->align);
    fmt_le_put32(out + 68, h->flags);
    fmt_le_put32(out + 72, h->fixed_height);
    fmt_le_put32(out + 76, h->fixed_width);
    fmt_le_put32(out + 80, h->fixed_channels);
    fmt_le_put64(out + 88, h->stride);
    fmt_le_put64(out + 96, h->fingerprint);
    fmt_le_put64(out + 104, h->input_end);
    for (int c = 0; c < 3; c++) {
        fmt_le_put64(out + 112 + 8 * c, h->channel_sum[c]);
        fmt_le_put64(out + 136 + 8 * c, h->channel_sumsq[c]);
    }
    fmt_le_put64(out + 160, h->index_hash);
    if (h->version_major >= RAW_V2)
        fmt_le_put64(out + 168, h->data_offset);
    fmt_le_put64(out + RAW_HASHED_BYTES, XXH3_64bits(out, RAW_HASHED_BYTES));
}

int fmt_raw_decode_header(const uint8_t in[FMT_RAW_HEADER_SIZE], fmt_raw_header *h, fmt_msg *msg)
{
    memset(h, 0, sizeof *h);
    if (memcmp(in, RAW_MAGIC, 8) != 0)
        return fmt_fail(msg, FMT_EFORMAT, "bad magic (not a raw shard)");
    h->version_major = fmt_le_get16(in + 8);
    h->version_minor = fmt_le_get16(in + 10);
    uint32_t header_size = fmt_le_get32(in + 12);
    h->sample_count = fmt_le_get64(in + 16);
    h->first_index = fmt_le_get64(in + 24);
    h->index_offset = fmt_le_get64(in + 32);
    h->aux_offset = fmt_le_get64(in + 40);
    h->aux_size = fmt_le_get64(in + 48);
    h->file_size = fmt_le_get64(in + 56);
    h->align = fmt_le_get32(in + 64);
    h->flags = fmt_le_get32(in + 68);
    h->fixed_height = fmt_le_get32(in + 72);
    h->fixed_width = fmt_le_get32(in + 76);
    h->fixed_channels = fmt_le_get32(in + 80);
    h->stride = fmt_le_get64(in + 88);
    h->fingerprint = fmt_le_get64(in + 96);
    h->input_end = fmt_le_get64(in + 104);
    for (int c = 0; c < 3; c++) {
        h->channel_sum[c] = fmt_le_get64(in + 112 + 8 * c);
        h->channel_sumsq[c] = fmt_le_get64(in + 136 + 8 * c);
    }
    h->index_hash = fmt_le_get64(in + 160);
    h->header_hash = fmt_le_get64(in + RAW_HASHED_BYTES);
    int v2 = h->version_major == RAW_V2;
    h->data_offset = v2 ? fmt_le_get64(in + 168) : h->align;

    /* the version comes before the hash: another major version may hash differently */
    if (h->version_major != RAW_V1 && !v2)
        return fmt_fail(msg, FMT_EVERSION, "unsupported version %u.%u (this reader knows 1.x "
                        "and 2.x)", h->version_major, h->version_minor);
    if (XXH3_64bits(in, RAW_HASHED_BYTES) != h->header_hash)
        return fmt_fail(msg, FMT_EHASH, "bad header hash");
    if (header_size != FMT_RAW_HEADER_SIZE)
        return fmt_fail(msg, FMT_ECORRUPT, "bad header size %" PRIu32, header_size);
    if (!fmt_raw_align_ok(h->align))
        return fmt_fail(msg, FMT_ECORRUPT, "bad alignment %" PRIu32, h->align);
    if (v2 && h->data_offset < FMT_RAW_HEADER_SIZE)
        return fmt_fail(msg, FMT_ECORRUPT, "bad data offset %" PRIu64, h->data_offset);
    if (h->index_offset < h->data_offset || h->index_offset % FMT_RAW_ENTRY_SIZE != 0)
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
        /* version 2: FIXED states the shape only (payloads are found through the index) */
        if ((h->fixed_channels != 1 && h->fixed_channels != 3) || !h->fixed_height ||
            !h->fixed_width ||
            fmt_shape_bytes(h->fixed_height, h->fixed_width, h->fixed_channels, &len))
            return fmt_fail(msg, FMT_ECORRUPT, "bad fixed shape %" PRIu32 "x%" PRIu32 "x%" PRIu32,
                            h->fixed_height, h->fixed_width, h->fixed_channels);
        if (v2)
            return 0;
        if (h->stride != fmt_raw_round_up(len, h->align) || h->stride == 0)
            return fmt_fail(msg, FMT_ECORRUPT, "bad stride %" PRIu64, h->stride);
        if (__builtin_mul_overflow(h->sample_count, h->stride, &data_bytes) ||
            __builtin_add_overflow((uint64_t)h->align, data_bytes, &data_end) ||
            data_end > h->index_offset)
            return fmt_fail(msg, FMT_ECORRUPT, "fixed payloads extend past the index");
    }
    return 0;
}

/* Entry flag bits 8..11 of a version 2 entry: the payload's codec. */
#define RAW_CODEC_SHIFT 8
#define RAW_CODEC_MASK 0xfu

void fmt_raw_encode_entry(const fmt_raw_entry *e, uint8_t *out, unsigned version)
{
    memset(out, 0, FMT_RAW_ENTRY_SIZE);
    fmt_le_put64(out, e->offset);
    fmt_le_put64(out + 8, e->length);
    fmt_le_put64(out + 16, e->hash);
    fmt_le_put32(out + 24, (uint32_t)e->label);
    fmt_le_put32(out + 28, e->height);
    fmt_le_put32(out + 32, e->width);
    fmt_le_put16(out + 36, (uint16_t)e->channels);
    uint32_t flags = e->flags;
    if (version >= RAW_V2 && e->codec) {
        flags |= e->codec << RAW_CODEC_SHIFT;
        fmt_le_put32(out + 60, (uint32_t)e->stored);
    }
    fmt_le_put16(out + 38, (uint16_t)flags);
    fmt_le_put64(out + 40, e->source);
    fmt_le_put64(out + 48, e->aux_off);
    fmt_le_put32(out + 56, e->aux_len);
}

static void decode_entry(const uint8_t *in, fmt_raw_entry *e, unsigned version)
{
    e->offset = fmt_le_get64(in);
    e->length = fmt_le_get64(in + 8);
    e->hash = fmt_le_get64(in + 16);
    e->label = (int32_t)fmt_le_get32(in + 24);
    e->height = fmt_le_get32(in + 28);
    e->width = fmt_le_get32(in + 32);
    e->channels = fmt_le_get16(in + 36);
    e->flags = fmt_le_get16(in + 38);
    e->source = fmt_le_get64(in + 40);
    e->aux_off = fmt_le_get64(in + 48);
    e->aux_len = fmt_le_get32(in + 56);
    e->codec = version >= RAW_V2 ? (e->flags >> RAW_CODEC_SHIFT) & RAW_CODEC_MASK : 0;
    e->stored = e->codec ? fmt_le_get32(in + 60) : e->length;
}

/* Packed layout: the padding a run of samples of payload_len bytes costs each of them. Payloads
 * of FMT_RAW_RUN_BYTES or more are runs of their own; smaller ones share a run, k of them. */
static uint64_t packed_padded(uint64_t payload_len)
{
    if (payload_len == 0)
        return 0;
    if (payload_len >= FMT_RAW_RUN_BYTES)
        return fmt_raw_round_up(payload_len, FMT_RAW_DEFAULT_ALIGN);
    uint64_t k = FMT_RAW_RUN_BYTES / payload_len;
    uint64_t run = fmt_raw_round_up(k * payload_len, FMT_RAW_DEFAULT_ALIGN);
    return (run + k - 1) / k;
}

uint64_t fmt_raw_sample_cost(uint64_t payload_len, uint32_t aux_len, uint32_t align)
{
    uint64_t padded = align ? fmt_raw_round_up(payload_len, align) : packed_padded(payload_len), cost;
    if ((padded == 0 && payload_len != 0) ||
        __builtin_add_overflow(padded, (uint64_t)FMT_RAW_ENTRY_SIZE + aux_len, &cost))
        return UINT64_MAX;
    return cost;
}

/* ---- reader ---- */

struct fmt_raw_shard {
    int fd;                     /* while opening; afterwards -1 (a mapping needs none) */
    fmt_fdfile *file;           /* FMT_RAW_OPEN_NOMAP: the descriptor, from the cache */
    const uint8_t *base;        /* the mapping, MAP_FAILED without one */
    size_t size;
    uint8_t *tail;              /* private copy of the bytes from index_offset on */
    const uint8_t *index;       /* the index (tail); the aux area follows */
    fmt_raw_header h;
};

/* Check every index entry against raw.md "What a reader checks on open", items 4 and 5. */
static int check_entries(const fmt_raw_shard *s, fmt_msg *msg)
{
    const fmt_raw_header *h = &s->h;
    const uint8_t *index = s->index;
    int fixed = (h->flags & FMT_RAW_FLAG_FIXED) != 0, v2 = h->version_major >= RAW_V2;
    uint64_t prev_end = h->data_offset;
    for (uint64_t i = 0; i < h->sample_count; i++) {
        fmt_raw_entry e;
        decode_entry(index + i * FMT_RAW_ENTRY_SIZE, &e, h->version_major);
        uint64_t len, end, aux_end;
        int rc = fmt_sample_shape_check("entry", i, e.height, e.width, e.channels, e.label, msg);
        if (rc)
            return rc;
        if (fmt_shape_bytes(e.height, e.width, e.channels, &len) || len != e.length)
            return fmt_fail(msg, FMT_ECORRUPT, "entry %" PRIu64 ": length does not match shape",
                            i);
        if (e.codec >= FMT_RAW_CODEC_LAST)
            return fmt_fail(msg, FMT_EUNSUPPORTED, "entry %" PRIu64 ": unknown codec %" PRIu32,
                            i, e.codec);
        if (e.codec && !e.stored)
            return fmt_fail(msg, FMT_ECORRUPT, "entry %" PRIu64 ": empty payload", i);
        /* no codec expands a block further than this (LZ4 under 255:1, a Zstandard RLE block
         * 4 bytes for 128 KiB): a reader never sizes a buffer by a length no payload can have */
        if (e.codec && e.length / e.stored >= (e.codec == FMT_RAW_CODEC_LZ4 ? 256u : 65536u))
            return fmt_fail(msg, FMT_ECORRUPT, "entry %" PRIu64 ": %" PRIu64 " stored bytes "
                            "cannot decode to %" PRIu64, i, e.stored, e.length);
        if (!v2 && e.offset % h->align != 0)
            return fmt_fail(msg, FMT_ECORRUPT, "entry %" PRIu64 ": payload offset not aligned", i);
        if (e.offset < prev_end)
            return fmt_fail(msg, FMT_ECORRUPT, i == 0 ?
                            "entry %" PRIu64 ": payload starts before the data area" :
                            "entry %" PRIu64 ": payload overlaps the previous one", i);
        if (__builtin_add_overflow(e.offset, e.stored, &end) || end > h->index_offset)
            return fmt_fail(msg, FMT_ECORRUPT, "entry %" PRIu64 ": payload extends past the data "
                            "area", i);
        if ((e.flags & FMT_RAW_ENTRY_AUX) &&
            (__builtin_add_overflow(e.aux_off, (uint64_t)e.aux_len, &aux_end) ||
             aux_end > h->aux_size))
            return fmt_fail(msg, FMT_ECORRUPT, "entry %" PRIu64 ": aux record outside the aux "
                            "area", i);
        if (fixed && (e.height != h->fixed_height || e.width != h->fixed_width ||
                      e.channels != h->fixed_channels ||
                      (!v2 && e.offset != h->align + i * h->stride)))
            return fmt_fail(msg, FMT_ECORRUPT, "entry %" PRIu64 ": does not match the fixed "
                            "layout", i);
        prev_end = end;
    }
    return 0;
}

/* The first min(size, 256) bytes of the file into head, with pread. The file may have shrunk
 * since fstat: a short read is FMT_ETRUNC. */
static int load_unmapped(fmt_raw_shard *s, uint8_t head[FMT_RAW_HEADER_SIZE], fmt_msg *msg)
{
    size_t want = s->size < FMT_RAW_HEADER_SIZE ? s->size : FMT_RAW_HEADER_SIZE, got;
    int rc = fmt_pread_full(s->fd, head, want, 0, &got);
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
    int rc = fmt_pread_full(s->fd, s->tail, len, s->h.index_offset, &got);
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
    struct stat st;
    rc = fmt_open_regular(path, &s->fd, &st, msg);
    if (rc)
        goto leave;
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
    /* The index is always a private copy, mapped or not: checked once here (hash, then every
     * entry), it cannot change under the reader afterwards. Entries decoded from the mapping
     * itself would follow a shard rewritten in place (an offset past the mapping: SIGSEGV; another
     * shard's index: its hashes, so verification would pass other pixels). */
    if ((rc = load_tail(s, msg)))
        goto leave;
    /* decode_header proved index_offset <= file_size == size */
    if (XXH3_64bits(s->index, s->size - (size_t)s->h.index_offset) != s->h.index_hash) {
        rc = fmt_fail(msg, FMT_EHASH, "bad index hash");
        goto leave;
    }
    rc = check_entries(s, msg);
    /* a mapping needs no descriptor, and preads take theirs from the bounded cache: an open
     * shard holds no descriptor of its own (any number of shards fit in `ulimit -n`) */
    if (rc == 0 && s->base != MAP_FAILED) {
        close(s->fd);
        s->fd = -1;
    } else if (rc == 0) {
        rc = fmt_fdfile_new(&s->file, path, O_RDONLY, s->fd);
        s->fd = -1;
    }
leave:
    if (rc)
        fmt_raw_close(s);
    else
        *out = s;
    return rc;
}

int fmt_raw_open_parts(fmt_raw_shard **out, const uint8_t head[FMT_RAW_HEADER_SIZE],
                       const uint8_t *tail, size_t tail_len, fmt_msg *msg)
{
    *out = NULL;
    if (msg)
        msg->text[0] = '\0';
    fmt_raw_shard *s = calloc(1, sizeof *s);
    if (!s)
        return ENOMEM;
    s->fd = -1;
    s->base = MAP_FAILED;
    int rc = fmt_raw_decode_header(head, &s->h, msg);
    if (rc)
        goto leave;
    if (s->h.file_size - s->h.index_offset != (uint64_t)tail_len) {
        rc = fmt_fail(msg, FMT_ETRUNC, "index and aux area of %zu bytes, the header says %"
                      PRIu64, tail_len, s->h.file_size - s->h.index_offset);
        goto leave;
    }
    s->size = (size_t)s->h.file_size;
    if (!(s->tail = malloc(tail_len ? tail_len : 1))) {
        rc = fmt_fail(msg, ENOMEM, "no memory for an index of %zu bytes", tail_len);
        goto leave;
    }
    memcpy(s->tail, tail, tail_len);
    s->index = s->tail;
    if (XXH3_64bits(s->index, tail_len) != s->h.index_hash) {
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
    fmt_fdfile_free(s->file);
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
    decode_entry(s->index + i * FMT_RAW_ENTRY_SIZE, e, s->h.version_major);
}

const uint8_t *fmt_raw_pixels(const fmt_raw_shard *s, uint64_t i)
{
    assert(i < s->h.sample_count);
    if (s->base == MAP_FAILED)
        return NULL;
    if ((s->h.flags & FMT_RAW_FLAG_FIXED) && s->h.version_major == RAW_V1)
        return s->base + s->h.align + i * s->h.stride;
    fmt_raw_entry e;
    fmt_raw_get_entry(s, i, &e);
    return e.codec == FMT_RAW_CODEC_NONE ? s->base + e.offset : NULL;
}

const uint8_t *fmt_raw_stored(const fmt_raw_shard *s, uint64_t i)
{
    assert(i < s->h.sample_count);
    if (s->base == MAP_FAILED)
        return NULL;
    return s->base + fmt_le_get64(s->index + i * FMT_RAW_ENTRY_SIZE);
}

static const char *raw_codec_name(uint32_t codec)
{
    return codec == FMT_RAW_CODEC_JPEG ? "jpeg" : fmt_codec_name((int)codec);
}

int fmt_raw_decode(const fmt_raw_entry *e, const void *src, void *dst, fmt_msg *msg)
{
    if (e->codec == FMT_RAW_CODEC_NONE) {
        memcpy(dst, src, (size_t)e->length);
        return 0;
    }
    int rc;
    if (e->codec == FMT_RAW_CODEC_JPEG) {
        /* exactly the stored shape: the limits refuse a JPEG of any other size before decoding */
        fmt_decode_opts o = {.channels = e->channels,
                             .limits = {e->height > e->width ? e->height : e->width,
                                        (uint64_t)e->height * e->width}};
        fmt_image img;
        fmt_msg why = {{0}};
        rc = fmt_image_decode(src, (size_t)e->stored, &o, &img, &why);
        if (rc == 0 && (img.width != e->width || img.height != e->height ||
                        img.channels != e->channels))
            rc = FMT_ECORRUPT;
        if (rc == 0)
            memcpy(dst, img.pixels, (size_t)e->length);
        fmt_image_free(&img);
        if (rc && rc != ENOMEM)
            return fmt_fail(msg, FMT_ECORRUPT, "damaged jpeg payload (%s)", fmt_reason(&why, rc));
    } else {
        rc = fmt_decompress((int)e->codec, src, (size_t)e->stored, dst, (size_t)e->length);
    }
    if (rc == FMT_ECORRUPT)
        return fmt_fail(msg, rc, "damaged %s block (%" PRIu64 " bytes do not decode to %" PRIu64
                        ")", raw_codec_name(e->codec), e->stored, e->length);
    if (rc)
        return fmt_fail(msg, rc, "cannot decode: %s", fmt_strerror(rc));
    if (XXH3_64bits(dst, (size_t)e->length) != e->hash)
        return fmt_fail(msg, FMT_EHASH, "damaged %s block (decodes to pixels that do not match "
                        "their hash)", raw_codec_name(e->codec));
    return 0;
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
        if ((rc = fmt_pread_full(fd, buf, want, off + done, &got)))
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
    if (e.codec != FMT_RAW_CODEC_NONE) {
        /* decode, then the same hash check fmt_raw_decode makes */
        uint8_t *enc = NULL, *px = malloc(e.length ? (size_t)e.length : 1);
        const uint8_t *src = fmt_raw_stored(s, i);
        int rc = px ? 0 : ENOMEM;
        if (!rc && !src) {
            int fd;
            enc = malloc((size_t)e.stored);
            rc = enc ? fmt_raw_fd_get(s, 0, &fd) : ENOMEM;
            if (!rc) {
                rc = fmt_pread_exact(fd, enc, (size_t)e.stored, e.offset);
                fmt_raw_fd_put(s);
            }
            src = enc;
        }
        if (!rc)
            rc = fmt_raw_decode(&e, src, px, NULL);
        free(enc);
        free(px);
        return rc;
    }
    if (s->base != MAP_FAILED) {
        hash = XXH3_64bits(s->base + e.offset, e.length);
    } else {
        int fd, rc = fmt_raw_fd_get(s, 0, &fd);
        if (rc)
            return rc;
        rc = hash_unmapped(fd, e.offset, e.length, &hash);
        fmt_raw_fd_put(s);
        if (rc)
            return rc;
    }
    return hash == e.hash ? 0 : FMT_EHASH;
}

int fmt_raw_fd_get(const fmt_raw_shard *s, int bounded, int *fd)
{
    if (!s->file) {
        *fd = -1;
        return FMT_EUNSUPPORTED;
    }
    return fmt_fdfile_get(s->file, bounded, fd);
}

void fmt_raw_fd_put(const fmt_raw_shard *s)
{
    if (s->file)
        fmt_fdfile_put(s->file);
}

const uint8_t *fmt_raw_base(const fmt_raw_shard *s)
{
    return s->base != MAP_FAILED ? s->base : NULL;
}
