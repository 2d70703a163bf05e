/* shardread.h - libshardread: stream batches out of a dataset directory written by shardc.
 *
 * A reader opens a dataset, plans each epoch's sample order (sequential, random or quasi-random,
 * partitioned across ranks) and fills batches ahead of the consumer with worker threads, into a
 * bounded ring of buffers (pinned host memory when a CUDA device is present, page-aligned memory
 * otherwise). The consumer takes a batch with shr_next, uses it, and gives it back with
 * shr_release.
 *
 *     shr_options o;
 *     shr_options_init(&o);
 *     o.batch_size = 256; o.order = SHR_ORDER_RANDOM; o.seed = 42; o.threads = 4;
 *     shr_reader *r;
 *     shr_msg why;
 *     int rc = shr_open(&r, "ds", &o, &why);
 *     if (rc) { fprintf(stderr, "%s\n", why.text); ... }
 *     for (int epoch = 0; epoch < 10; epoch++) {
 *         const shr_batch *b;
 *         while ((rc = shr_next(r, &b)) == 0) {
 *             train(b->data, b->labels, b->n);
 *             shr_release(r, b);
 *         }
 *         if (rc != SHR_EEND) { error... }      // SHR_EEND: the epoch is over
 *     }
 *     shr_close(r);
 *
 * Determinism and resumption: the batches of an epoch, their samples and their order depend only
 * on (dataset, options, seed, epoch), never on the thread count or timing. The state
 * (seed, epoch, cursor) returned by shr_get_state is the whole state: a reader opened with it
 * yields exactly the batches that were left.
 *
 * Errors: functions return 0 on success, a positive errno value for system errors, or a negative
 * SHR_E* code (those of the storage layer underneath among them, SHR_EFORMAT .. SHR_EEMPTY
 * below); shr_strerror names any of them. A call that can say more than its code (the file,
 * object, sample or option at fault, and why) takes a shr_msg * last: the caller's buffer, which
 * a failure fills with one line (NULL: no detail wanted). Nothing is kept per thread or in static
 * storage. A reader's own failures, which its workers meet while the consumer is elsewhere, are
 * kept with the reader (shr_last_error). The library never prints or exits.
 *
 * Memory: the ring holds `prefetch` batches of batch_size * height * width * channels elements
 * of the output dtype (plus labels, indices and parameters); nothing else grows with the number
 * of epochs. The open dataset costs
 * a little per sample: in every access mode the raw and hdf5 indexes (raw: 64 bytes per sample
 * plus the augmentation records) are held in memory.
 *
 * Files that change under a reader. In SHR_ACCESS_MMAP mode the shards are mapped, and a shard
 * truncated (or rewritten smaller) while the reader is open raises SIGBUS in the thread that next
 * touches a page past the new end of the file: the process dies, as with LMDB or any other reader
 * that maps its files. SHR_ACCESS_PREAD and SHR_ACCESS_DIRECT are the safe choice for files that
 * may change (shared or network filesystems, datasets rebuilt in place): raw and hdf5 shards are
 * then never mapped, and a shard truncated after open makes shr_next fail cleanly with SHR_ETRUNC,
 * shr_last_error naming the shard file and the sample. LMDB shards are mapped in every mode (LMDB
 * reads only through its map), so they are not protected. A shard replaced by rename is safe in
 * every mode: the reader keeps the file it opened. A shard rewritten in place without shrinking
 * is safe in every mode: the index a reader uses is its own copy, checked at open, so only
 * pixels can change under it, and verify_samples reports each changed sample (see "Read-time
 * recovery").
 *
 * A program includes this header alone. Its declarations are in three files: this one (the
 * codes, opening a reader, datasets at URLs, mixtures, batches, the reader's facts and
 * statistics, targets), shardread/options.h (what a reader is opened with: shr_options and its
 * table, the augmentations, a batch's layout), which it includes first, and shardread/dataset.h
 * (single samples without a reader, and what a program that fills batches itself takes from
 * the reader), which it includes last.
 */
#ifndef SHARDREAD_H
#define SHARDREAD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the shared library exports: the functions declared here and nothing else (it is built with
 * -fvisibility=hidden). */
#if defined(__GNUC__)
#define SHR_API __attribute__((visibility("default")))
#else
#define SHR_API
#endif

/* The detail of a failure: one line, no trailing newline, written by the call that failed into
 * the caller's buffer ("" when the call had nothing to add to shr_strerror of its code). A call
 * that succeeds leaves it as it was. The same message type as the rest of the project's
 * libraries (the compiler's, the storage layer's). */
#ifndef SHARDC_MSG_DEFINED
#define SHARDC_MSG_DEFINED
struct shardc_msg {
    char text[512];
};
#endif
typedef struct shardc_msg shr_msg;

/* 0.3: the calls that fail with a reason take the caller's shr_msg (shr_last_error(NULL), a
 * thread-local message, is gone) */
#define SHR_VERSION_MAJOR 0
#define SHR_VERSION_MINOR 3

enum {
    SHR_EEND = -30700,      /* not an error: the current epoch has no more batches */
    SHR_EINVAL,             /* bad option or argument */
    SHR_ESHAPE,             /* samples vary in size and no output size was given */
    SHR_ESTATE,             /* the reader has failed (a worker hit an error); only close */
    SHR_ELAST
};

/* The codes of the storage layer underneath (the decoders and the shard formats), which these
 * functions pass through unchanged; declared here so that a program needs this header only. */
enum {
    SHR_EFORMAT = -30900,   /* not a format we know (unrecognised magic bytes) */
    SHR_ECORRUPT,           /* data is damaged or inconsistent */
    SHR_ETRUNC,             /* data ends early (a truncated file) */
    SHR_ETOOBIG,            /* exceeds a size limit */
    SHR_EUNSUPPORTED,       /* valid, but a variant this build cannot read */
    SHR_EFMT_INVAL,         /* bad argument, found by the storage layer */
    SHR_EHASH,              /* content hash does not match the recorded one */
    SHR_EVERSION,           /* written by an incompatible version */
    SHR_EFMT_STATE,         /* an object of the storage layer has failed */
    SHR_EEMPTY              /* zero-length input */
};

#include "shardread/options.h"

/* Open the dataset in dir and start the workers. o may be NULL (defaults). On failure *r is NULL
 * and msg (may be NULL) describes the error, naming the file at fault. Errors: SHR_EINVAL (bad
 * options, with the reason in the message: also combinations that cannot work, such as rrc
 * without width and height or with random_crop, normalisation to uint8, dataset statistics the
 * manifest does not have; an epoch without batches, and a cursor past the epoch), SHR_ESHAPE,
 * the dataset's errors (ENOENT without a manifest, SHR_ETRUNC / SHR_ECORRUPT / SHR_EHASH /
 * SHR_EFORMAT for a damaged shard, ...), ENOMEM, and pthread_create's errors. Thread-safe. */
SHR_API int shr_open(shr_reader **r, const char *dir, const shr_options *o, shr_msg *msg);

/* ---- Datasets at URLs ----
 *
 * shr_open and shr_dataset_open take, in place of a directory, s3://BUCKET/PREFIX (the prefix
 * holds manifest.json and the shards; credentials, region and endpoint as the AWS tools read
 * them: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, AWS_PROFILE,
 * AWS_ENDPOINT_URL_S3, AWS_CA_BUNDLE, AWS_NO_SIGN_REQUEST: the one setting the library takes
 * from the environment, as the AWS SDKs do, so that credentials never pass through options or
 * messages) or http(s)://BASE. Before the open,
 * the dataset is made complete in a local cache (shr_options.cache, else ~/.cache/shardread):
 * the manifest is fetched, and every shard the cache lacks is downloaded,
 * checked against the manifest (every sample's hash) and only then renamed into place; the
 * reader then reads the cached files. Raw, hdf5 and lmdb datasets, and per-image sets (png0,
 * bmp, jpeg: each shard's index and the image files it names).
 * shr_open of a single dataset, and each stream of shr_open_mixture, (raw; hdf5 with samples
 * of one size and no targets, or whose manifest pins its shards; lmdb with samples of one size
 * and no targets) returns once the
 * manifest is fetched instead (and, where samples vary in size or carry targets, each shard's
 * metadata: a raw shard's header and index, an hdf5 shard's bytes before and after its pixels,
 * fetched with Range requests and checked): a
 * thread downloads the shards in the order the sampler reads them (prefetch_shards ahead), a
 * worker needing a shard not yet there waits for it, and with cache_limit the folder stays
 * within the limit (shared safely by processes using one cache; a mixture's streams at URLs
 * share it: each its minimum, the rest by their sizes). A shard that stays unavailable follows
 * on_error like a damaged local one. */

/* What the cache of a reader over a dataset at a URL read as its shards arrive has done
 * (a mixture's: the sums over its streams read so): shr_cache_stats. All zero for other
 * readers. */
typedef struct {
    uint64_t limit;             /* cache_limit (0: none) */
    uint64_t peak_bytes;        /* the cache folder's largest size seen by the download thread,
                                 * counted before and after each download (a download in
                                 * progress counts at its shard's full size) */
    uint64_t fetched;           /* shards downloaded */
    uint64_t cached;            /* shards found in the cache, checked, and used */
    uint64_t evicted;           /* shards removed to stay within the limit */
    uint64_t bytes;             /* bytes received */
    uint64_t retries;           /* attempts repeated after a transient failure */
    const char *dir;            /* the dataset's cache folder (valid while r is open), or NULL
                                 * (a mixture: shr_stream_info.dir) */
} shr_cache_info;
SHR_API int shr_cache_stats(const shr_reader *r, shr_cache_info *info);

/* The cached local directory of the dataset at url, made complete as above, into dir (len
 * bytes, NUL-terminated). cache: NULL for the default. 0, or the error (the message, naming the
 * object, the endpoint and the server's error code, in msg): EACCES (refused),
 * ENOENT (no such object), ECONNREFUSED, ETIMEDOUT, EIO, SHR_EHASH / SHR_ECORRUPT (an object
 * that fails its check), SHR_EINVAL (a bad URL, no credentials), ERANGE (len too small). */
SHR_API int shr_remote_resolve(const char *url, const char *cache, char *dir, size_t len,
                               shr_msg *msg);

/* ---- Mixtures: several datasets read as one, by proportion ----
 *
 * Each stream is a dataset opened as shr_open opens one (its path goes through the same open,
 * so whatever shr_open takes, a stream takes) and contributes m_s samples to every epoch:
 *   weight > 0 (on every stream): shares of samples_per_epoch (0: the streams' samples added
 *     up), split by largest remainders;
 *   otherwise (on no stream) choose > 0: that many samples an epoch, or repeat: round(repeat *
 *     samples) (0 means 1: each sample once). choose below the stream's size draws distinct
 *     samples, anew each epoch; above it, whole passes and then a part.
 * The epoch is one sequence of M = sum m_s positions in which the streams are interleaved by a
 * fixed deterministic rule (stream s's k-th item at (k + 1/2) / m_s, all items in that order,
 * the lower stream first on a tie). Tolerance, for every window of w consecutive positions and
 * every stream s of share p = m_s / M, with S streams: the window holds stream s within
 * 1 + p (S - 2) of w p; two streams: within +-1, i.e. floor(w p) or ceil(w p) items. Each rank's
 * batch is one such window (rank r of W takes positions [g + r B, g + (r + 1) B) of each group
 * of W B positions g; the last group is split evenly, with SHR_UNEVEN_PAD wrapping to the
 * epoch's start), so every batch of every rank holds each stream's share within the tolerance,
 * ranks read disjoint positions, and the positions consumed after c batches of every rank are
 * [0, c B W) whatever W: shr_state.consumed resumes a mixture on any world size as it does one
 * dataset. A stream's samples come in the options' order: random (a fresh permutation of the
 * stream per epoch and per pass, keyed by seed, epoch, stream) or sequential (going on where
 * the last epoch stopped); quasi is refused.
 * Samples are named by global index: stream s's sample i is g = first_s + i (first_s the
 * samples of the streams before it); the per-sample draws (augmentations, substitutes) are
 * those of shr_mix(seed, epoch, g, ...), so threads and resuming never change a batch. Batches
 * report each sample's stream (shr_batch.streams) and its index in that stream (indices).
 * Labels are kept as stored, or with offset_labels each stream's are shifted by the classes of
 * the streams before it (shr_stream_info.label_offset; detection category ids are kept).
 * Geometry: every stream must give the same channels and be of the same kind (classification
 * or detection), and without width and height every stream must have the one size of stream 0
 * (SHR_EINVAL or SHR_ESHAPE naming the stream and why otherwise). Every scale op works:
 * multi-scale and natural sizes take the canvas from the largest image of every stream (and a
 * canvas too small for some stream's largest image is refused naming it). on_error applies per stream (SHR_STREAM_ON_ERROR_DEFAULT: the options');
 * a substitute comes from the same stream. DIRECT access reads each batch with the O_DIRECT
 * batch engine, every stream's samples in one set of requests. shr_get_info reports samples = M and classes = the
 * mixture's (the sum with offset_labels, else the largest). */
#define SHR_STREAM_ON_ERROR_DEFAULT (-1)
typedef struct {
    const char *path;           /* the dataset, as shr_open takes it */
    double weight;              /* > 0: a share of the epoch (all streams, or none) */
    double repeat;              /* > 0 (no weight): round(repeat * samples) an epoch */
    uint64_t choose;            /* > 0 (no weight, no repeat): this many an epoch */
    int on_error;               /* a shr_on_error, or SHR_STREAM_ON_ERROR_DEFAULT */
} shr_stream;

/* Open a reader over n streams (1 .. 256) with options o (as shr_open; in quasi order each
 * stream is read in its own quasi order over its shards). Errors as shr_open's, the message
 * naming the stream; SHR_EINVAL for streams that cannot be mixed (see above). */
SHR_API int shr_open_mixture(shr_reader **r, const shr_stream *streams, uint32_t n,
                             uint64_t samples_per_epoch, int offset_labels, const shr_options *o,
                             shr_msg *msg);

typedef struct {
    const char *path;           /* valid until shr_close */
    uint64_t samples;           /* in the stream's dataset */
    uint64_t per_epoch;         /* m_s: its positions in each epoch */
    uint32_t classes;           /* its class count */
    int64_t label_offset;       /* added to its labels */
    shr_on_error on_error;
    const char *dir;            /* where its manifest.json lies: path, or for a URL its folder
                                 * in the cache (valid until shr_close) */
} shr_stream_info;

/* Streams of a mixture reader (0 for one dataset), and stream s's facts: 0 or SHR_EINVAL. */
SHR_API uint32_t shr_stream_count(const shr_reader *r);
SHR_API int shr_get_stream_info(const shr_reader *r, uint32_t s, shr_stream_info *info);

/* Stop the workers and free everything, including batches not released. Accepts NULL. Must not
 * run concurrently with any other call on r. */
SHR_API void shr_close(shr_reader *r);

/* The next batch, in order; blocks until it is ready. Returns 0 and sets *b, or SHR_EEND at the
 * end of the epoch (then the next call starts the next epoch), or an error a worker met filling
 * this batch (I/O error, damaged shard: shr_last_error(r) names the file), after which the reader
 * is failed: SHR_ESTATE from then on. Batches before the failed one are delivered normally.
 * SHR_EINVAL when the caller holds all prefetch batches (nothing changes; release one). One
 * consumer thread at a time: shr_next, shr_get_state and shr_last_error(r) belong to it. */
SHR_API int shr_next(shr_reader *r, const shr_batch **b);

/* Give a batch back so its buffer can be refilled. Batches may be released in any order and from
 * any thread (e.g. once a device copy has finished); a consumer may hold up to prefetch - 1
 * batches at once (holding all of them would block shr_next forever, so it returns SHR_EINVAL
 * instead). NULL, a pointer that is not one of r's batches, and a second release of the same
 * batch are ignored. */
SHR_API void shr_release(shr_reader *r, const shr_batch *b);

/* Where the next shr_next continues: the epoch and the number of its next batch (equal to
 * shr_batches_in_epoch when the epoch's SHR_EEND is next), and the positions of the epoch's
 * sequence consumed by all ranks. r may be NULL (zeros). */
SHR_API shr_state shr_get_state(const shr_reader *r);

/* Batches per epoch for this rank, and samples per epoch for this rank (with padding). */
SHR_API uint64_t shr_batches_per_epoch(const shr_reader *r);
SHR_API uint64_t shr_samples_per_epoch(const shr_reader *r);
/* Batches of one epoch for this rank: shr_batches_per_epoch, except in an epoch resumed with
 * shr_options.consumed, which has those of what was left. */
SHR_API uint64_t shr_batches_in_epoch(const shr_reader *r, uint64_t epoch);

/* Counts of read-time recovery so far (zeros for NULL). The consumer's thread. */
SHR_API shr_recovery shr_get_recovery(const shr_reader *r);

/* The dataset: sample count, classes, and the batch geometry. */
typedef struct {
    uint64_t samples;
    uint32_t classes;
    uint32_t height, width, channels;   /* batch geometry */
    double mean[3], std[3];             /* per-channel stats of the stored pixels (0..255) */
    shr_dtype dtype;                    /* of the delivered pixels */
    shr_layout layout;
    uint64_t batch_bytes;               /* bytes of one batch's pixels (at the dtype) */
    uint64_t ring_bytes;                /* all buffers the ring holds (pixels, labels,
                                         * indices, sources, parameters). Workers add a
                                         * constant on top: per worker an index array, 1 MiB
                                         * with PREAD or DIRECT access, and the largest stored
                                         * sample when PREAD or DIRECT samples are cropped,
                                         * padded, resized or converted; with rrc, scale or a conversion, a
                                         * uint8 sample at the output size (two with rotation,
                                         * affine or auto_augment) and the resampler's
                                         * rows (width x channels x the tallest stored
                                         * sample); with rrc, once per reader, the resampler's
                                         * coefficient tables for every box side up to the
                                         * largest stored width and height (a few KiB each,
                                         * 64 MiB at most); with mixup or cutmix, per worker
                                         * one sample at the output dtype */
    int pinned;                         /* 1 if every batch buffer of the ring is CUDA pinned
                                         * host memory, 0 if any is ordinary memory (SHR_PIN_OFF,
                                         * no device, or a failed cudaHostAlloc) */
    int targets;                        /* 1: a detection dataset, whose batches carry targets
                                         * (shr_batch.target_*); their box arrays are not in
                                         * ring_bytes: per slot they grow to the most boxes a
                                         * batch has had, 29 bytes a box */
} shr_info;
SHR_API void shr_get_info(const shr_reader *r, shr_info *info);

/* 1 if every batch buffer of r's ring is CUDA pinned host memory (shr_info.pinned); else 0, and
 * why (NULL: not wanted) says why the host-to-device copies will be staged: "pinned memory is
 * off (pin)", "no CUDA device: " and what the probe of the CUDA runtime found (no runtime, a
 * driver too old, no device), or the failed allocation ("cudaHostAlloc of N bytes: out of
 * memory", the locked-memory limit, say). 0 for NULL. Any thread. */
SHR_API int shr_pinned(const shr_reader *r, shr_msg *why);

/* Pipeline statistics and auto threads.
 *
 * Every worker counts, always, the batches and samples it filled, the wall time it spent filling
 * them (CLOCK_MONOTONIC) and the CPU time of that work (CLOCK_THREAD_CPUTIME_ID): four clock
 * reads per batch. The consumer counts the batches shr_next delivered and the time it waited
 * for them. Stage timing, off by default (shr_stats_enable), adds a CLOCK_MONOTONIC read at
 * each stage boundary of each sample (a few per sample: the project's benchmark notes give the measured
 * cost) and sums, per worker, the time of each stage below, with how many samples (or
 * batches, for the batch stages) ran it; and keeps each worker's last SHR_STATS_EVENTS batch
 * fills (stream batch, start and end times) for timelines. Workers switch at their next batch.
 *
 * The stages, in the order a sample meets them: */
typedef enum {
    SHR_STAGE_READ,             /* the stored pixels fetched (and verified): index lookup, page
                                 * faults or pread, decompression, a plain copy into the batch */
    SHR_STAGE_RESIZE,           /* crop or pad, RandomResizedCrop's resize, the scale ops */
    SHR_STAGE_FLIP,             /* a separate mirror pass (it is fused into the copy or the output
                                 * conversion where it can be) */
    SHR_STAGE_ROTATE,           /* RandomRotation */
    SHR_STAGE_AFFINE,           /* RandomAffine */
    SHR_STAGE_AUTO_AUGMENT,     /* TrivialAugmentWide, RandAugment, AutoAugment */
    SHR_STAGE_JITTER,           /* ColorJitter */
    SHR_STAGE_GRAYSCALE,        /* RandomGrayscale */
    SHR_STAGE_CONVERT,          /* the output kernel: dtype, layout, normalisation (and the
                                 * fused mirror), written into the batch buffer, which is
                                 * pinned memory where the ring is: the copy into pinned memory */
    SHR_STAGE_ERASE,            /* RandomErasing */
    SHR_STAGE_MIX,              /* MixUp / CutMix, per batch */
    SHR_STAGE_TARGETS,          /* detection targets moved, per batch */
    SHR_STAGE_COUNT
} shr_stage;

#define SHR_STATS_EVENTS 512    /* batch fills kept per worker for timelines */

/* One worker's counts since the reader was opened (times in nanoseconds). */
typedef struct {
    uint64_t batches, samples;  /* filled */
    uint64_t fill_ns;           /* wall time filling them */
    uint64_t cpu_ns;            /* this thread's CPU time filling them */
    uint64_t stage_ns[SHR_STAGE_COUNT];     /* with stage timing on: time per stage */
    uint64_t stage_calls[SHR_STAGE_COUNT];  /* samples (batches: MIX, TARGETS) that ran it */
    uint64_t timed_samples;     /* samples filled with stage timing on */
    uint64_t timed_fill_ns;     /* wall time of the batches filled with stage timing on */
    int active;                 /* 1: may claim batches; 0: parked (threads_auto) */
} shr_thread_stats;

/* A batch fill, for timelines: stream batch k filled by a worker from start_ns to end_ns
 * (CLOCK_MONOTONIC, as Python's time.monotonic_ns()). */
typedef struct {
    uint64_t k, start_ns, end_ns;
} shr_fill_event;

/* The consumer's side: batches shr_next delivered, and the time it spent waiting for them. */
typedef struct {
    uint64_t batches;
    uint64_t wait_ns;
    uint32_t active;            /* workers allowed to claim now (threads unless threads_auto) */
    uint32_t threads;           /* workers started */
    uint32_t auto_changes;      /* threads_auto: workers added or parked so far */
} shr_consumer_stats;

/* Stage timing on (non-zero) or off for r's workers, from their next batch. Returns the previous
 * setting; 0 for NULL. Any thread. */
SHR_API int shr_stats_enable(shr_reader *r, int on);

/* Worker i's counts (i < shr_consumer_stats.threads): 0, or SHR_EINVAL for a bad i or NULL.
 * Any thread; the counts are a consistent-enough snapshot of counters still moving. */
SHR_API int shr_get_thread_stats(const shr_reader *r, uint32_t i, shr_thread_stats *s);

/* The consumer's counts (zeros for NULL). Any thread. */
SHR_API void shr_get_consumer_stats(const shr_reader *r, shr_consumer_stats *s);

/* Worker i's last fills made with stage timing on, oldest first, at most max of them, into
 * out; returns how many, or SHR_EINVAL for a bad i or NULL. Any thread. */
SHR_API int shr_get_fill_events(const shr_reader *r, uint32_t i, shr_fill_event *out,
                                uint32_t max);

/* The stage's name ("read", "resize", "flip", "rotate", "affine", "auto_augment", "jitter",
 * "grayscale", "convert", "erase", "mix", "targets"), or NULL past the last. */
SHR_API const char *shr_stage_name(int stage);

/* threads_auto: the rule. After each batch it delivers, shr_next looks at the last window of
 * batches (at least max(8, 4 x active) of them and 50 ms): the share of the window it spent
 * waiting (the stall), the consumer's own time per batch C, the workers' mean fill time per
 * batch F and their CPU time over that fill time. A stall above 5%, with the active workers
 * busy more than half the window, adds a worker (up to threads; beyond the CPUs the process may
 * run on only while the workers' time is less than 75% CPU, that is, they wait on reads). The
 * worker is judged over a window twice as long, starting once it had time for a first fill:
 * from k workers and a stall s, one more could raise the delivery rate by at most
 * min((k + 1) / k, 1 / (1 - s)); if the rate rose by less than half of that while the consumer
 * still stalls, the worker is parked again and the count capped there (the cap is lifted after
 * 20 windows, doubled after each failed probe up to 320, to probe again). A stall below 1% with
 * more workers than ceil(1.1 F / C) parks one. A parked worker finishes the batch in hand and
 * waits, using no CPU, until it is needed. */

/* Targets (detection datasets: shr_info.targets, shr_dataset_info.targets). Every sample of such
 * a dataset carries a target: boxes (x1, y1, x2, y2 pixel edges of the stored sample), category
 * ids, areas, iscrowd flags, the source image's id and size (stored as the raw format's
 * specification, "Target record", documents).
 * The reader moves each delivered sample's boxes with its pixels, using the parameters it reports
 * (shr_params x, y, w, h, flip) and the output width W and height H, in double precision:
 *     crop or pad:       x' = x - p.x + (W - p.w) / 2    (integer division: the offset at which
 *                        y' = y - p.y + (H - p.h) / 2     the pixels are placed; 0 where cropped)
 *     RandomResizedCrop: x' = (x - p.x) * W / p.w,  y' = (y - p.y) * H / p.h
 *     the scale ops:     shardread/options.h's "Scale" (their own clip rectangle and mirror
 *                        width)
 * then clipped to [0, W] x [0, H], then, where the sample is mirrored, x1' = W - x2,
 * x2' = W - x1, then rounded to float32. A box is dropped when the float32 box has no area
 * (x1 >= x2 or y1 >= y2) or, with min_box_area_fraction f > 0, when its clipped area is less
 * than f times its area before the clip (both in output pixels, double precision); the drops
 * are counted per sample (target_dropped). Kept boxes keep their stored order. The area is the
 * stored one times the resize's scales, area * (W / p.w) * (H / p.h) with RandomResizedCrop and
 * unchanged by a crop or pad (as the build scales it: the annotation's area, never reduced by
 * the clip), rounded to float32. Labels, iscrowd, image ids and sizes are copied. The colour
 * ops, RandomGrayscale and RandomErasing leave the boxes alone.
 * The warps (RandomRotation, RandomAffine, and auto_augment's ShearX, ShearY, TranslateX,
 * TranslateY and Rotate) move the boxes after the flip, in the order the pixels get them:
 * rotation, affine, then the ops of aa_op in order. Each is a forward affine map of the w x h
 * frame it warps (the output; with SHR_SCALE_MULTI the image, w x h = image_w x image_h), in
 * the pixel-edge coordinates of the boxes (pixel (i, j) is the square [i, i + 1] x [j, j + 1],
 * y down), with (cx, cy) = (w / 2, h / 2), angles in degrees:
 *     rotation by a (rotate_angle; Rotate: a = magnitude), counter-clockwise:
 *         x' = cx + (x - cx) cos a + (y - cy) sin a,  y' = cy - (x - cx) sin a + (y - cy) cos a
 *         (cos a and sin a rounded to 15 decimals, as the pixels' matrix has them)
 *     affine (affine_angle a, affine_tx, affine_ty, affine_scale s, affine_shear_x u,
 *         affine_shear_y v; torchvision's forward matrix, a turning clockwise):
 *         x' = cx + tx + s (A (x - cx) + B (y - cy)),  y' = cy + ty + s (C (x - cx) + D (y - cy))
 *         A = cos(a - v) / cos v, B = -cos(a - v) tan u / cos v - sin a,
 *         C = sin(a - v) / cos v, D = -sin(a - v) tan u / cos v + cos a
 *     ShearX, ShearY (magnitude m, about the origin (0, 0)): x' = x - m y;  y' = y - m x
 *     TranslateX, TranslateY (magnitude m): x' = x + trunc(m);  y' = y + trunc(m)
 * These are the inverses of the matrices the pixels are sampled with (each output pixel's
 * centre mapped back), so an output pixel copied from a stored pixel has its centre inside that
 * pixel's mapped square: the box of one bright pixel encloses where it lands (NEAREST; BILINEAR
 * spreads it up to one pixel more). Each warp replaces a box with the axis-aligned box
 * enclosing its 4 mapped corners, clipped to [0, w] x [0, h] (the whole output for the other
 * scale ops: the warp moves the image into the padding); a box left without area by a clip
 * (x1 >= x2 or y1 >= y2 in double) is dropped there. For min_box_area_fraction the box before
 * the clips is moved through the same warps, unclipped, and the kept box's area compared with
 * its area. The area is multiplied by |det| of each warp's linear part (affine_scale^2 for the
 * affine map, 1 for the others): the annotation's area scales so under an affine map, whatever
 * the enclosing box does (torchvision.transforms.v2 leaves it as it was). The boxes depend on
 * (seed, epoch, index) as the pixels do: the same at every thread count and after a resume. */
typedef struct {
    uint32_t count;             /* boxes */
    /* batch: boxes the read-time geometry dropped; shr_dataset_target: boxes the build's
     * geometry dropped (the stored record's count) */
    uint32_t dropped;
    int64_t image_id;
    uint32_t orig_width, orig_height;   /* the source image's size, before any geometry */
    const float *boxes;         /* count * 4: x1, y1, x2, y2 */
    const int64_t *labels;      /* count */
    const float *area;          /* count */
    const uint8_t *iscrowd;     /* count */
} shr_target;

/* Sample i's target in batch b: pointers into b's arrays (never NULL, also for count 0), valid
 * as long as b is (until shr_release or shr_close). 0; SHR_EINVAL (b or t NULL, i >= b->n, or a
 * dataset without targets). Any thread holding b. */
SHR_API int shr_batch_target(const shr_batch *b, uint32_t i, shr_target *t);

/* Masks and keypoints (datasets of target record version 2, as the raw format specifies it). Each delivered
 * instance's mask is moved with the pixels by the sample's parameters: the output pixel (X, Y)
 * (the flip undone: X <- fw - 1 - X, fw the flip's width of "Targets") takes the stored pixel
 *     crop or pad:       (X - (W - p.w) / 2 + p.x, ...), 0 outside the placed rectangle
 *     RandomResizedCrop: (p.x + nearest(X, p.w, W), p.y + nearest(Y, p.h, H))
 *     the scale ops:     (nearest(X - pad_x + crop_x, src_w, scale_w), ...) inside the image
 *                        rectangle, 0 outside it
 * nearest(i, in, out) = i where in == out, i >> 1 where out == 2 in, else min(floor(i * s),
 * in - 1) with s = (float)in / out and the product in float32: torch's
 * interpolate(mode="nearest"), as torchvision.transforms.v2 resizes a Mask. The masks are W x H,
 * or image_w x image_h where the images are a dense list (scale_dense). An instance whose moved
 * mask has no pixel left is dropped with its box (counted in target_dropped), as is one whose
 * box is dropped. Keypoints (x, y, v) move as the boxes' edges do (x' = (x - p.x) sx + dx,
 * "Targets" and shardread/options.h's "Scale"), in double, rounded to float32; one stored with
 * v = 0 or moved outside
 * the image rectangle [x0, x1] x [y0, y1] (closed) is delivered as (0, 0, 0); where the sample is
 * flipped, x' = fw - x' and keypoint j is the moved stored keypoint flip_indices[j]. Then the
 * warps (rotation, affine, auto_augment's ShearX/Y, TranslateX/Y, Rotate), in the pixels' order,
 * on the frame the pixels turn (the output, or image_w x image_h at the top left for multiscale
 * and natural sizes): each mask through the pixels' own Pillow arithmetic (Image.rotate,
 * Image.transform(AFFINE) with torchvision's inverse matrix) with NEAREST sampling, 0 where a
 * position maps outside; each keypoint through the op's forward map ("Targets"), (0, 0, 0)
 * once outside the frame [0, gw] x [0, gh] (closed). A mask the warps leave empty drops its
 * instance as above. A flip of a keypoint dataset without flip_indices is refused by shr_open.
 * Label maps (shardc build --masks; b->label_map 1): each sample has one map, moved as a mask
 * is, the dataset's ignore index outside the placed rectangle and where a warp maps outside; no
 * boxes. Each value takes b->label_map_bytes (shr_options.label_map_bytes): with 1, a dataset
 * whose ignore index is above 255 is refused by shr_open, and a stored map with a label above
 * 255 fails its batch, naming the sample; with 2 every label is delivered (uint16), each warp
 * moving the map's two bytes as two planes with the same NEAREST sampling.
 * Sample i's: *num_keypoints K (0 without), *keypoints count * K * 3 floats (NULL without),
 * *masks count * height * width bytes of 0 or 1 (NULL without), or its label map's height *
 * width labels of b->label_map_bytes each, *width, *height their size; any output pointer may
 * be NULL. 0; SHR_EINVAL (b NULL, i >= b->n, or no targets). */
SHR_API int shr_batch_segm(const shr_batch *b, uint32_t i, uint32_t *num_keypoints,
                           const float **keypoints, const uint8_t **masks, uint32_t *width,
                           uint32_t *height);

/* The parameters the reader with options o (checked as shr_open checks them) draws for the sample
 * at dataset index `index`, stored at src_w x src_h, in epoch `epoch`: what shr_batch.params
 * reports for it. Returns 0, or SHR_EINVAL (bad options or sizes; no message). Thread-safe. */
SHR_API int shr_draw_params(const shr_options *o, uint64_t epoch, uint64_t index, uint32_t src_w,
                            uint32_t src_h, shr_params *p);

/* The vector kernels (AVX2, AVX-512) run wherever the CPU has them; their plain C paths give the
 * same bytes. shr_set_simd(0) turns them off for the whole process, shr_set_simd(1) back on (not
 * while readers run: a reader chooses its paths at open); returns whether they run now.
 * shr_simd_env_plain(get): 1 when the environment, read through get (getenv, or a stand-in),
 * asks for the plain paths (SHARDREAD_SIMD=0, SHARDC_RESAMPLE=plain or SHARDC_TRANSFORM=plain):
 * the programs and the Python package apply it; the library reads no environment. */
SHR_API int shr_set_simd(int on);
SHR_API int shr_simd_env_plain(char *(*get)(const char *));

/* shr_options.pin_device from torchrun's LOCAL_RANK, read through get (getenv, or a stand-in):
 * LOCAL_RANK + 1 for a whole number below 65536, else 0 (the current device). What the Python
 * package and shardbench apply; the library reads no environment. */
SHR_API uint64_t shr_pin_device_from_env(char *(*get)(const char *));

/* Name of an error code (SHR_E*, errno, or any code of the project's other libraries). Never
 * NULL; static storage. */
SHR_API const char *shr_strerror(int rc);

/* The message of r's last failed shr_next, or of its latest recovered sample; right after
 * shr_open with on_error skip or substitute, the shards that did not open ("" if none). Valid
 * until r's next shr_next. Never NULL ("" for r NULL: a failed open's message is in the msg it
 * was given). */
SHR_API const char *shr_last_error(const shr_reader *r);

#include "shardread/dataset.h"

#ifdef __cplusplus
}
#endif

#endif
