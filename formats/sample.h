/* sample.h - what every backend stores and hands back per sample, and the helpers the backends
 * share to check it. Included by backend.h (what a backend implements), dataset.h (what a reader
 * gets) and raw.h, so none of those needs another.
 */
#ifndef FMT_SAMPLE_H
#define FMT_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "fmt.h"

/* How fmt_dataset_read gets payload bytes (see the top of dataset.h). */
typedef enum {
    FMT_ACCESS_MMAP = 0,
    FMT_ACCESS_PREAD,
    FMT_ACCESS_DIRECT
} fmt_access;

/* Expected access pattern, passed to the kernel by fmt_dataset_advise. */
typedef enum {
    FMT_ADVICE_NORMAL = 0,
    FMT_ADVICE_SEQUENTIAL,      /* dataset order: read ahead aggressively */
    FMT_ADVICE_RANDOM           /* random order: read only what is touched, no read-ahead */
} fmt_advice;

/* Alignment of O_DIRECT transfers (buffer address, file offset and length): 4096 covers the
 * logical block size of every common device (512 or 4096 bytes). */
#define FMT_DIRECT_ALIGN 4096u

/* Where a sample's stored bytes lie, for a reader that issues its own O_DIRECT requests
 * (fmt_dataset_extent): [offset, offset + stored) of the file open as fd with O_DIRECT. A request
 * must start at a multiple of off_align, be a multiple of it long and land at an address that is
 * a multiple of mem_align; reading past the end of the file is fine (a short read). The payload
 * is the pixels themselves (codec 0, stored == length) or a compressed block to decode with
 * fmt_raw_decode (compress.h codecs; the decoded pixels must hash to `hash`). buffered_fd is the
 * same file without O_DIRECT, for a transfer the filesystem refuses with EINVAL. Both
 * descriptors stay open (pinned in the descriptor cache, fdcache.h) until fmt_extent_release:
 * every extent that fmt_dataset_extent fills must be released once its reads are done. */
typedef struct {
    int fd, buffered_fd;
    uint32_t mem_align, off_align;
    uint64_t offset, stored, length, hash;
    int codec;
    uint32_t height, width, channels;   /* the decoded shape */
    void (*release)(const void *owner); /* what fmt_extent_release calls (NULL: nothing) */
    const void *owner;
} fmt_extent;

/* Unpin x's descriptors (they may be closed afterwards); idempotent. */
static inline void fmt_extent_release(fmt_extent *x)
{
    if (x->release)
        x->release(x->owner);
    x->release = NULL;
}

/* One sample as stored. pixels points at the stored pixels where the backend maps them (raw and
 * contiguous hdf5 in MMAP mode, lmdb in every mode, each while the process-wide mapping cap of
 * fdcache.h allows): read-only, valid until fmt_dataset_close. It is NULL where the pixels must be
 * read or decoded (per-image sets, pread/direct modes of raw and hdf5, chunked hdf5, shards past
 * the mapping cap): use fmt_dataset_read then. aux: the sample's aux record (NULL if it has
 * none), valid until fmt_dataset_close. */
typedef struct {
    uint64_t index;             /* dataset-wide index */
    int32_t label;
    uint32_t height, width, channels;
    uint64_t source;            /* input position of the source image */
    uint64_t hash;              /* recorded hash of the pixels */
    const uint8_t *pixels;
    uint64_t length;
    const uint8_t *aux;
    uint32_t aux_len;
} fmt_sample;

/* What a writer is told about a sample; hash and channel sums are computed by the caller (in
 * parallel workers) with fmt_hash64 / fmt_pixel_sums, so the writer thread only copies bytes. */
typedef struct {
    uint32_t height, width, channels;
    int32_t label;
    uint64_t source;
    uint64_t hash;              /* fmt_hash64 of the pixels */
    uint64_t sum[3], sumsq[3];  /* fmt_pixel_sums of the pixels */
    const void *aux;            /* optional aux record (copied), NULL if none */
    uint32_t aux_len;
} fmt_sample_meta;

/* Per-channel sums of pixel values and of their squares, added to sum[] / sumsq[]. pixels holds
 * npixels * channels bytes, channels 1..3 (HWC); entries c >= channels are left untouched. */
void fmt_pixel_sums(const uint8_t *pixels, size_t npixels, uint32_t channels,
                    uint64_t sum[3], uint64_t sumsq[3]);

/* height * width * channels into *out; non-zero if it overflows. */
int fmt_shape_bytes(uint64_t height, uint64_t width, uint64_t channels, uint64_t *out);

/* What every writer checks before it adds a sample: channels 1 or 3, non-zero height and width,
 * label >= -1, no aux_len without aux. 0 or FMT_EINVAL. */
int fmt_sample_meta_check(const fmt_sample_meta *m);

/* What every reader checks of a stored sample's shape and label, in this order: channels 1 or 3,
 * non-zero height and width, label >= -1. 0, or FMT_ECORRUPT with msg naming it "WHAT I" (what:
 * "entry" or "sample") and the fault. */
int fmt_sample_shape_check(const char *what, uint64_t i, uint32_t height, uint32_t width,
                           uint32_t channels, int32_t label, fmt_msg *msg);

#endif
