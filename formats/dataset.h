/* dataset.h - read access to a dataset directory written by shardc: its manifest and shards.
 *
 * fmt_dataset_open reads and validates the manifest, then opens every shard through the backend
 * the manifest names (formats/backend.h) and checks that each matches its manifest entry (sample
 * count, first index, size, content hash, fingerprint), and every sample's shape, channels,
 * label and augmentation record against the manifest (fmt_manifest_check_sample). Before a
 * backend whose shards a third-party library parses (hdf5, lmdb) opens a shard, the bytes that
 * library trusts are checked by our own code against the manifest's pin (backend.h,
 * r_precheck), so damage there is reported and never reaches the library. Samples are then addressed by dataset-wide index.
 *
 * Access paths. The mode decides how payload bytes are read by fmt_dataset_read: FMT_ACCESS_MMAP
 * copies them out of a mapping of the shard; FMT_ACCESS_PREAD reads them with pread(2) and
 * FMT_ACCESS_DIRECT with pread(2) on a second descriptor opened with O_DIRECT (page cache
 * bypassed). In those two modes raw and hdf5 shards are not mapped at all and fmt_sample.pixels is
 * NULL. In every mode their index (raw: 64 bytes per sample plus the aux area) is read into
 * memory at open and checked there, and aux points into that copy: a shard rewritten in place
 * under an open dataset changes payload bytes only, never the offsets, lengths or hashes the
 * accessors use (so fmt_dataset_check, and a reader's verify_samples, report the changed
 * samples in every mode, and a mapped reader never addresses past its mapping). LMDB shards are
 * mapped in every mode (LMDB reads only through its map); per-image sets never are.
 *
 * Thread-safety: after open, a dataset is immutable; fmt_dataset_get, fmt_dataset_read,
 * fmt_dataset_read_buf (each thread with its own scratch), fmt_dataset_check and fmt_dataset_advise
 * may be called from any number of threads at once.
 *
 * Mapped files must not be truncated while the dataset is open: touching a page past the new end
 * of a mapping raises SIGBUS (as with any mmap reader, LMDB included). For files that may change
 * under a reader, use FMT_ACCESS_PREAD or FMT_ACCESS_DIRECT with raw or hdf5 shards: a shard
 * truncated after open then makes fmt_dataset_read return FMT_ETRUNC (or the pread error) for the
 * samples it lost, and never faults.
 */
#ifndef FMT_DATASET_H
#define FMT_DATASET_H

#include "manifest.h"
#include "sample.h"
#include "target.h"

typedef struct fmt_dataset fmt_dataset;

/* Sample s (s->index dataset-wide) against what manifest m says of every sample: its channel
 * count, the fixed sample size when there is one, a label within the classes (or -1), an
 * augmentation record exactly when the dataset is augmented. 0, or FMT_ECORRUPT with msg naming
 * the manifest field. fmt_dataset_open applies it to every sample, so that no access mode
 * delivers what the manifest misdescribes; shardc verify applies it too. */
int fmt_manifest_check_sample(const fmt_manifest *m, const fmt_sample *s, fmt_msg *msg);

/* Open the dataset in dir. Errors: those of fmt_manifest_read (ENOENT: no manifest), of
 * fmt_raw_open for a shard, FMT_ECORRUPT when a shard disagrees with the manifest,
 * FMT_EUNSUPPORTED for a backend this build cannot read. msg names the file at fault. */
int fmt_dataset_open(fmt_dataset **d, const char *dir, fmt_msg *msg);
void fmt_dataset_close(fmt_dataset *d);                 /* accepts NULL */

/* fmt_dataset_open with an access mode (fmt_dataset_open is FMT_ACCESS_MMAP). FMT_ACCESS_DIRECT
 * opens each shard a second time with O_DIRECT; where the filesystem refuses O_DIRECT (EINVAL, e.g.
 * an old tmpfs) that shard is read with plain pread instead (fmt_dataset_direct_shards counts the
 * shards that really use O_DIRECT). Further errors: FMT_EINVAL for an unknown mode, errno values
 * of the second open, FMT_ECORRUPT if the file was replaced between the two opens. */
int fmt_dataset_open_ex(fmt_dataset **d, const char *dir, fmt_access access, fmt_msg *msg);

/* fmt_dataset_open_ex with flags (0: the same). FMT_OPEN_TOLERANT: a shard that cannot be opened,
 * or does not match the manifest, does not fail the open; it stays closed and its samples are
 * unavailable: fmt_dataset_get, _read, _read_buf, _extent and _check return that shard's error
 * for them (FMT_ETRUNC, FMT_ECORRUPT, ENOENT, ...), and fmt_dataset_sample_error says why. The
 * open still fails when the manifest cannot be read, on ENOMEM, and when no shard opens at all.
 * For readers that skip or replace what they cannot read (shardread's on_error). */
#define FMT_OPEN_TOLERANT 1u
/* FMT_OPEN_STAGED: the manifest is dir/manifest.json.tmp, staged by a writer that opens what it
 * wrote before it publishes it (fmt_manifest_stage, fmt_manifest_publish). */
#define FMT_OPEN_STAGED 2u
int fmt_dataset_open_flags(fmt_dataset **d, const char *dir, fmt_access access, unsigned flags,
                           fmt_msg *msg);

/* Bytes [from, to) of the file of manifest shard `shard`, into buf (to - from bytes). */
typedef struct {
    size_t shard;
    uint64_t from, to;
    uint8_t *buf;
    int fresh;                  /* asked again: not from a local copy (it failed its check) */
    int local;                  /* set by the source: the bytes came from a local copy */
} fmt_span;

/* Where the parts of shards that have not arrived come from (remote/remote.h rmt_lazy_spans):
 * read fills every span (several at once where it can), 0 or the error with msg naming what
 * could not be read; base names the shards' files in messages ("BASE/FILE"). */
typedef struct {
    int (*read)(void *ctx, fmt_span *spans, size_t n, fmt_msg *msg);
    void *ctx;
    const char *base;
} fmt_lazy_source;

/* A dataset whose shards arrive after the open (a dataset at a URL, read through a bounded
 * cache: remote/remote.h): the manifest (len bytes of JSON) is parsed, no shard is opened.
 * Shard i is opened by fmt_dataset_shard_load once its file is in dir, and closed again by
 * fmt_dataset_shard_unload; until then its samples return EAGAIN (or the error
 * unload recorded). Samples of one size (the manifest's sample_width and sample_height:
 * fmt_dataset_max_length comes from them) without targets need nothing more. Otherwise (sizes
 * that vary, targets) the open needs every shard's metadata: with src and a backend that reads
 * it apart from the payloads (backend.h r_tail: raw; hdf5 whose manifest pins it), each
 * shard's header and index with its aux records (its *skeleton*; hdf5: its bytes before and
 * after the pixels) is read through src (every shard's header at once, then every index),
 * checked as a shard's open checks them (the header against the manifest, the index hash, every
 * entry, every sample against the manifest: a dataset a local open refuses is refused here) and
 * kept; a part src read from a local copy that fails is read again fresh; one that still fails
 * is FMT_EHASH / FMT_ETRUNC / FMT_ECORRUPT, naming BASE/FILE. fmt_dataset_get of a sample whose
 * shard is not loaded (and has not failed) then answers from the skeleton (pixels NULL), and
 * fmt_dataset_target and fmt_dataset_fields_record always do (the same bytes, checked against
 * the manifest, kept until the close, where a loaded shard's go with its unload); reads and
 * checks still need the shard loaded. Without src, or another backend:
 * FMT_EUNSUPPORTED. The caller keeps shards it reads from loaded (load and unload are
 * serialised; reads of a loaded shard are as thread-safe as ever). */
#define FMT_OPEN_LAZY 4u
int fmt_dataset_open_lazy(fmt_dataset **d, const char *dir, const char *manifest, size_t len,
                          fmt_access access, unsigned flags, const fmt_lazy_source *src,
                          fmt_msg *msg);
/* Non-zero when fmt_dataset_open_lazy read the shards' skeletons. */
int fmt_dataset_skeletons(const fmt_dataset *d);
/* 0 once shard i is open (the checks of fmt_dataset_open_flags applied to it), or the error with
 * msg naming its file. */
int fmt_dataset_shard_load(fmt_dataset *d, size_t i, fmt_msg *msg);
/* Close shard i; its samples then return rc (0: EAGAIN) with why (NULL: kept). */
void fmt_dataset_shard_unload(fmt_dataset *d, size_t i, int rc, const char *why);

/* Shards that FMT_OPEN_TOLERANT left closed (0 without it). */
size_t fmt_dataset_unavailable(const fmt_dataset *d);

/* Manifest shard i: 0 when it is open, else the error that left it closed, with *why (if not
 * NULL) the reason in words, without the path; *path (if not NULL) its path. FMT_EINVAL for i
 * past the last shard. Strings valid until close. */
int fmt_dataset_shard_status(const fmt_dataset *d, size_t i, const char **path, const char **why);

/* Why the shard of sample idx could not be opened (the reason, without the path), NULL when it is
 * open or idx >= count. Valid until close. */
const char *fmt_dataset_sample_error(const fmt_dataset *d, uint64_t idx);

fmt_access fmt_dataset_access(const fmt_dataset *d);   /* the mode given to open */

/* Open the dataset in dir the way a reader does (FMT_ACCESS_PREAD: the manifest, every shard's
 * header and index, every sample's metadata against the manifest; no payload is read), then
 * close it. What a writer calls on what it has just written, before it reports success: a
 * dataset its own reader would refuse is an error of the writer, not a surprise for the reader.
 * 0, or the error of fmt_dataset_open_ex with msg naming the file. */
int fmt_dataset_probe(const char *dir, fmt_msg *msg);

/* Bytes of the largest sample (0 for an empty dataset): what a buffer must hold to read any
 * sample. Computed at open (O(1) per fixed-shape shard, one pass over the index otherwise). */
uint64_t fmt_dataset_max_length(const fmt_dataset *d);
size_t fmt_dataset_direct_shards(const fmt_dataset *d); /* shards read with O_DIRECT */

const fmt_manifest *fmt_dataset_manifest(const fmt_dataset *d);   /* valid until close */
uint64_t fmt_dataset_count(const fmt_dataset *d);

/* Sample idx's metadata, and its pixels where the backend maps them (see fmt_sample). Returns 0,
 * or FMT_EINVAL if idx >= count. */
int fmt_dataset_get(const fmt_dataset *d, uint64_t idx, fmt_sample *s);

/* Copy sample idx's pixels (meta.length bytes, meta.height * meta.width * meta.channels) into dst,
 * the way the access mode says. meta (may be NULL) receives what fmt_dataset_get gives, except
 * meta->pixels, which is NULL (aux is as fmt_dataset_get gives it).
 *
 * FMT_ACCESS_DIRECT needs a bounce buffer, since O_DIRECT reads whole aligned blocks into aligned
 * memory while dst is neither: fmt_dataset_read_buf takes the caller's scratch (address and
 * scratch_len multiples of FMT_DIRECT_ALIGN, scratch_len > 0; any size works, larger means fewer
 * system calls: 1 MiB is plenty), and reads the sample in scratch-sized chunks. When dst and the
 * payload's file offset are congruent modulo FMT_DIRECT_ALIGN (e.g. dst page-aligned: payloads
 * are aligned in the shard), the whole blocks go straight into dst and only a partial last block
 * passes through scratch. fmt_dataset_read is fmt_dataset_read_buf without scratch: in DIRECT mode
 * it allocates a bounce buffer per call, which is fine for occasional reads but not for a hot loop.
 * In MMAP and PREAD mode scratch is not used (may be NULL).
 *
 * Returns 0; FMT_EINVAL (idx >= count, bad scratch); errno values of pread; FMT_ETRUNC when the
 * file ends before the payload does (it was truncated after open). Thread-safe. */
int fmt_dataset_read(const fmt_dataset *d, uint64_t idx, void *dst, fmt_sample *meta);
int fmt_dataset_read_buf(const fmt_dataset *d, uint64_t idx, void *dst, fmt_sample *meta,
                         void *scratch, size_t scratch_len);

/* Where sample idx's bytes lie for O_DIRECT requests of the caller's own (sample.h): 0, or
 * FMT_EINVAL (idx >= count), FMT_EUNSUPPORTED (a backend without them, or a shard not read with
 * O_DIRECT: the dataset was not opened with FMT_ACCESS_DIRECT, or the filesystem refused it),
 * EBUSY (the descriptor cache is full of pinned descriptors: read the sample with
 * fmt_dataset_read_buf instead), errno values of reopening the shard. The extent's descriptors
 * stay open until fmt_extent_release(x), which every successful call needs. Thread-safe. */
int fmt_dataset_extent(const fmt_dataset *d, uint64_t idx, fmt_extent *x);

/* Sample idx's target (a dataset whose manifest has "targets"; target.h): the arrays point into
 * the dataset's own memory (the backend's copy of the index and aux area, or an aligned copy
 * made at open), read-only and valid until fmt_dataset_close. Every record was checked at open
 * (fmt_manifest_check_sample: well formed, boxes inside the sample, categories the manifest
 * names). 0; FMT_EINVAL (no targets, idx >= count); the error of a shard FMT_OPEN_TOLERANT left
 * closed. Thread-safe. */
int fmt_dataset_target(const fmt_dataset *d, uint64_t idx, fmt_target *t, fmt_msg *msg);

/* Sample idx's fields record (fields.h) as stored: the aux record, or the fields part of its
 * pair record when the dataset has targets too; *rec points into the backend's storage (no
 * alignment). 0; FMT_EINVAL without fields or out of range; FMT_ECORRUPT for a bad pair. */
int fmt_dataset_fields_record(const fmt_dataset *d, uint64_t idx, const uint8_t **rec,
                              size_t *len, fmt_msg *msg);

/* Name of the dataset's backend ("raw", "hdf5", ...). */
const char *fmt_dataset_backend(const fmt_dataset *d);

/* Path of the shard file holding sample idx (for messages), NULL if idx >= count. Valid until
 * close. */
const char *fmt_dataset_sample_file(const fmt_dataset *d, uint64_t idx);

/* Tell the kernel how samples will be read: madvise(2) on every shard mapping in MMAP mode,
 * posix_fadvise(2) on every shard in PREAD mode, nothing in DIRECT mode (no page cache). A hint
 * only: the data read is the same whatever the advice. Returns 0 or the first errno. */
int fmt_dataset_advise(const fmt_dataset *d, fmt_advice advice);

/* Re-hash sample idx: 0 if it matches its recorded hash, FMT_EHASH if not, FMT_EINVAL bad idx;
 * where the mode reads with pread, also the read errors of fmt_dataset_read. */
int fmt_dataset_check(const fmt_dataset *d, uint64_t idx);

#endif
