/* raw.h - the raw shard format (spec: formats/raw.md): a streaming writer and a reader that maps
 * the file, or reads it with pread only (FMT_RAW_OPEN_NOMAP).
 *
 * Thread-safety: a writer is used by one thread at a time. A reader (fmt_raw_shard) is immutable
 * after fmt_raw_open and may be shared by any number of threads.
 */
#ifndef FMT_RAW_H
#define FMT_RAW_H

#include "sample.h"

#define FMT_RAW_HEADER_SIZE 256u
#define FMT_RAW_ENTRY_SIZE 64u
#define FMT_RAW_DEFAULT_ALIGN 4096u
#define FMT_RAW_MIN_ALIGN 256u          /* the header must fit in front of the first payload */
#define FMT_RAW_MAX_ALIGN (1u << 20)
#define FMT_RAW_FLAG_FIXED 1u
#define FMT_RAW_ENTRY_AUX 1u
/* Version 2 (packed layout, written when no alignment is asked for): payloads smaller than
 * FMT_RAW_RUN_BYTES are packed back to back in runs that start at multiples of the alignment and
 * never straddle a run; larger payloads start at a multiple of the alignment (raw.md "Layout"). */
#define FMT_RAW_RUN_BYTES (64u << 10)
/* How a payload is stored (version 2 entries; version 1 stores every payload as pixels): the
 * codec numbers of compress.h. */
enum {
    FMT_RAW_CODEC_NONE = 0,     /* the pixels themselves */
    FMT_RAW_CODEC_LZ4 = 1,      /* one LZ4 block of the pixels */
    FMT_RAW_CODEC_ZSTD = 2,     /* one Zstandard frame of the pixels */
    FMT_RAW_CODEC_JPEG = 3,     /* a JPEG file (lossy: the hash is that of its decoded pixels) */
    FMT_RAW_CODEC_LAST          /* first value this reader does not know */
};

/* The mixed mode's rule: the sample at dataset index `index` is stored as JPEG iff
 * XXH3-64(index as 8 little-endian bytes, seed 0x6a706567) / 2^64 < fraction (as a double: the
 * hash's top 53 bits times 2^-53). Deterministic, independent of threads and shard sizes. */
int fmt_raw_jpeg_pick(uint64_t index, double fraction);

/* A shard's header, decoded. */
typedef struct {
    uint16_t version_major, version_minor;
    uint64_t sample_count, first_index;
    uint64_t index_offset, aux_offset, aux_size, file_size;
    uint32_t align, flags;
    uint32_t fixed_height, fixed_width, fixed_channels;
    uint64_t stride;
    uint64_t fingerprint, input_end;
    uint64_t channel_sum[3], channel_sumsq[3];
    uint64_t index_hash, header_hash;
    uint64_t data_offset;       /* start of the payload area: version 1 align, version 2 recorded */
} fmt_raw_header;

/* One index entry, decoded. */
typedef struct {
    uint64_t offset, length, hash;
    int32_t label;
    uint32_t height, width, channels;
    uint32_t flags;
    uint64_t source;
    uint64_t aux_off;
    uint32_t aux_len;
    uint32_t codec;             /* FMT_RAW_CODEC_*: how the payload is stored (version 2) */
    uint64_t stored;            /* payload bytes in the file: length when codec is NONE */
} fmt_raw_entry;

/* ---- writing ---- */

typedef struct fmt_raw_writer fmt_raw_writer;

typedef struct {
    /* 0: version 2, the packed layout (runs aligned to FMT_RAW_DEFAULT_ALIGN, payloads from
     * FMT_RAW_RUN_BYTES up page-aligned); else a power of two in 256..1 MiB: version 1, every
     * payload at a multiple of align and padded to one. */
    uint32_t align;
    uint64_t first_index;
    uint64_t fingerprint;
    /* FMT_RAW_CODEC_NONE (0), or LZ4 / ZSTD: each payload is compressed on its own at level
     * `level` (compress.h; 0 = the codec's default) and stored compressed where that is smaller
     * (version 2; align, if given, is then the run alignment). */
    int codec, level;
    /* Mixed mode (version 2): the samples fmt_raw_jpeg_pick selects are stored as a JPEG at
     * `quality` (1..100, 0 = 90; 4:2:0), where that is smaller than their pixels; 0 = none. */
    double jpeg_fraction;
    int quality;
} fmt_raw_writer_opts;

/* Start a shard that will be named path; bytes go to "path.tmp" (created or truncated). opts may be
 * NULL (defaults). Errors: FMT_EINVAL (bad align), errno values. The writer never prints. */
int fmt_raw_writer_open(fmt_raw_writer **w, const char *path, const fmt_raw_writer_opts *opts);

/* Append one sample (pixels: m->height * m->width * m->channels bytes; m->aux is copied, m->aux_len
 * bytes, none if aux is NULL or aux_len is 0). m->hash and m->sum/sumsq are stored as given.
 * Bad metadata (channels not 1 or 3, zero height or width, label < -1, aux NULL with aux_len > 0)
 * returns FMT_EINVAL, a shard that would pass 2^63 bytes FMT_ETOOBIG, a failed allocation ENOMEM;
 * after these nothing was written and the writer stays usable. On an I/O error (ENOSPC, EIO, EFBIG,
 * ...) the writer enters a failed state: later adds return FMT_ESTATE and finish returns the
 * original error. */
int fmt_raw_writer_add(fmt_raw_writer *w, const fmt_sample_meta *m, const void *pixels);

/* Samples added so far, and the size the file would have if finished now (bounds --shard-size).
 * With an alignment that is align + the sum of fmt_raw_sample_cost over the samples added; in the
 * packed layout the sum of the costs is close to it (see fmt_raw_sample_cost). */
uint64_t fmt_raw_writer_count(const fmt_raw_writer *w);
uint64_t fmt_raw_writer_size(const fmt_raw_writer *w);

/* Bytes one sample adds to a shard: its payload with padding, plus its index entry and its aux
 * record (aux_len). With align > 0 (version 1) the payload rounded up to align, exactly. With
 * align 0 (packed layout) the padding of a run shared among the samples it holds: exact for a
 * shard of one shape (rounded up to a whole byte), an estimate when shapes vary. UINT64_MAX if
 * the sum overflows. */
uint64_t fmt_raw_sample_cost(uint64_t payload_len, uint32_t aux_len, uint32_t align);

/* Write index, aux area and header, fsync, rename path.tmp -> path, fsync the directory, free w.
 * input_end is stored in the header. On success *hdr (if not NULL) receives the final header.
 * On failure the temp file is removed and w is freed all the same; the one exception is a failed
 * directory fsync after the rename, which returns its error with the complete shard in place. */
int fmt_raw_writer_finish(fmt_raw_writer *w, uint64_t input_end, fmt_raw_header *hdr);

/* Drop an unfinished shard: remove path.tmp, free w. Accepts NULL (also after a failed state). */
void fmt_raw_writer_abort(fmt_raw_writer *w);

/* ---- reading ---- */

typedef struct fmt_raw_shard fmt_raw_shard;

/* Map path read-only and validate header and index as formats/raw.md says (no payload hashing).
 * Errors: errno values, FMT_ETRUNC (file shorter than 256 bytes or than file_size), FMT_ECORRUPT,
 * FMT_EVERSION, FMT_EHASH (header or index hash), FMT_EFORMAT (bad magic); msg says which check
 * failed. The whole file is mapped (MAP_SHARED, no access-pattern advice: madvise on
 * fmt_raw_base is up to the caller) for the payloads; the index and aux area are read into
 * private memory at open (64 bytes per sample plus the aux area) and checked there, so that what
 * the accessors decode is what was checked: a shard rewritten in place while open changes no
 * entry (offsets stay inside the mapping, hashes stay those of the pixels written by the build),
 * and fmt_raw_check_sample then reports the payloads that changed. The file must not be truncated
 * while open: touching a mapped page past the new end of the file raises SIGBUS.
 * fmt_raw_open_ex(s, path, 0, msg). */
int fmt_raw_open(fmt_raw_shard **s, const char *path, fmt_msg *msg);

/* Open without a mapping: header, index and aux area are read with pread at open (the same checks
 * as fmt_raw_open, and a file that shrinks while being read is FMT_ETRUNC), and kept in memory:
 * 64 bytes per sample plus the aux area. Nothing is read through a mapping afterwards, so a file
 * truncated or rewritten while open can never fault: fmt_raw_pixels and fmt_raw_base return NULL,
 * payloads are read with pread on fmt_raw_fd_get's descriptor (a short read meaning the file was truncated), and
 * fmt_raw_check_sample reads them the same way. */
#define FMT_RAW_OPEN_NOMAP 1u

/* fmt_raw_open with flags: 0 or FMT_RAW_OPEN_NOMAP. Unknown flag bits are ignored. */
int fmt_raw_open_ex(fmt_raw_shard **s, const char *path, unsigned flags, fmt_msg *msg);
/* A shard's header and index without its payloads (a shard that has not arrived yet): head, the
 * file's first 256 bytes, and tail, its bytes from index_offset to file_size (tail_len of them),
 * checked as fmt_raw_open checks a file's (header, index hash, every entry), the file's size
 * being what the header says. Its entries and aux records read as an open shard's; it has no
 * payloads: fmt_raw_pixels, fmt_raw_stored and fmt_raw_base give NULL, fmt_raw_fd_get (and so
 * fmt_raw_check_sample) FMT_EUNSUPPORTED. */
int fmt_raw_open_parts(fmt_raw_shard **s, const uint8_t head[FMT_RAW_HEADER_SIZE],
                       const uint8_t *tail, size_t tail_len, fmt_msg *msg);
void fmt_raw_close(fmt_raw_shard *s);                       /* accepts NULL */

const fmt_raw_header *fmt_raw_get_header(const fmt_raw_shard *s);   /* valid until close */
uint64_t fmt_raw_count(const fmt_raw_shard *s);

/* Entry i decoded into *e. Precondition: i < fmt_raw_count(s) (asserted). */
void fmt_raw_get_entry(const fmt_raw_shard *s, uint64_t i, fmt_raw_entry *e);

/* Pointer to sample i's pixels (i < count) inside the mapping: read-only, valid until
 * fmt_raw_close. Version 1: a multiple of align away from fmt_raw_base (page-aligned); version 2:
 * wherever the layout put it (no alignment). NULL when the shard was opened with
 * FMT_RAW_OPEN_NOMAP, and for a sample stored compressed (use fmt_raw_stored and
 * fmt_raw_decode). */
const uint8_t *fmt_raw_pixels(const fmt_raw_shard *s, uint64_t i);

/* Sample i's payload as stored (e.stored bytes; the pixels when e.codec is NONE) inside the
 * mapping; NULL with FMT_RAW_OPEN_NOMAP. */
const uint8_t *fmt_raw_stored(const fmt_raw_shard *s, uint64_t i);

/* Decode e's stored payload (src, e->stored bytes) into dst (e->length bytes) and check the
 * decoded pixels against e->hash: 0, FMT_ECORRUPT (the block does not decode to e->length
 * bytes), FMT_EHASH (it decodes, to other pixels), ENOMEM; msg says which, naming the codec.
 * A plain payload is copied and not hashed. */
int fmt_raw_decode(const fmt_raw_entry *e, const void *src, void *dst, fmt_msg *msg);

/* Sample i's aux record (NULL, 0 if none): inside the private copy of the index and aux area
 * made at open (never in the mapping); valid until fmt_raw_close. */
const uint8_t *fmt_raw_aux(const fmt_raw_shard *s, uint64_t i, uint32_t *len);

/* Re-hash sample i's pixels (decoded first when stored compressed): 0 if they match the index,
 * FMT_EHASH if not, FMT_ECORRUPT if a compressed payload does not decode, FMT_EINVAL if
 * i >= count. With FMT_RAW_OPEN_NOMAP the pixels are read with pread: then also errno values,
 * ENOMEM, and FMT_ETRUNC when the file ends before the payload does. Thread-safe. */
int fmt_raw_check_sample(const fmt_raw_shard *s, uint64_t i);

/* A descriptor of the shard's file, for pread / O_DIRECT paths: only a shard opened with
 * FMT_RAW_OPEN_NOMAP has one (else FMT_EUNSUPPORTED: a mapped shard closes its descriptor right
 * after mapping). An open shard holds no descriptor of its own: get pins one from the bounded
 * process-wide cache (fdcache.h; reopening the file when the cache closed it, FMT_ECORRUPT if the
 * path now names another file, EBUSY with `bounded` when the cache is full of pinned ones), put
 * unpins it. Every get that returns 0 needs one put. Thread-safe. */
int fmt_raw_fd_get(const fmt_raw_shard *s, int bounded, int *fd);
void fmt_raw_fd_put(const fmt_raw_shard *s);

/* The mapping (NULL with FMT_RAW_OPEN_NOMAP). */
const uint8_t *fmt_raw_base(const fmt_raw_shard *s);

/* Pure header codecs (exposed for tests and fuzzing).
 * encode writes every field of *h except header_hash, which it computes over bytes 0..247 and
 * stores (the result is always a correctly hashed header); reserved bytes are zero.
 * decode fills *h with what the bytes say (also on failure, as far as they could be read) and
 * checks everything a header alone can tell, in this order: magic (FMT_EFORMAT), major version
 * (FMT_EVERSION), header_hash (FMT_EHASH), then field consistency (FMT_ECORRUPT): header_size,
 * align, index_offset, aux_offset and file_size arithmetic without overflow, fixed shape and
 * stride when FIXED. It cannot compare file_size with a real file: fmt_raw_open does. */
void fmt_raw_encode_header(const fmt_raw_header *h, uint8_t out[FMT_RAW_HEADER_SIZE]);
int fmt_raw_decode_header(const uint8_t in[FMT_RAW_HEADER_SIZE], fmt_raw_header *h, fmt_msg *msg);

#endif
