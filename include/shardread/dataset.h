/* shardread/dataset.h - single samples without a reader (shr_dataset: a map-style dataset, its
 * targets, masks, label maps and fields), and what a program that fills batches itself takes
 * from the reader (host buffers, an epoch's order).
 * A part of shardread.h, which includes it: a program includes shardread.h alone. */
#ifndef SHARDREAD_H
#error "include shardread.h, not its parts"
#endif
#ifndef SHARDREAD_DATASET_H
#define SHARDREAD_DATASET_H

/* ---- Single samples: random access to a dataset, without a reader ----
 *
 * A shr_dataset is a dataset directory opened for access sample by sample (a map-style dataset:
 * sample i, its label and shape), together with what its manifest records. It has no threads and
 * no ring; each read copies one sample's stored pixels, uncropped, into the caller's buffer.
 *
 *     shr_dataset *d;
 *     shr_msg why;
 *     if (shr_dataset_open(&d, "ds", SHR_ACCESS_MMAP, &why)) { fprintf(stderr, "%s\n",
 *                                                             why.text); ... }
 *     shr_sample s;
 *     shr_dataset_sample(d, i, &s);                   // label and shape of sample i
 *     uint8_t *px = malloc(s.bytes);
 *     shr_dataset_read(d, i, px, s.bytes, NULL, &why); // its pixels, uint8 HWC
 *     shr_dataset_close(d);
 *
 * Thread-safety: after open, every function below except close may be called from any number of
 * threads at once (each with its own shr_msg). Errors: as shr_open; the message of a failed
 * call (naming the file, the sample and why) is written to the msg it was given. */
typedef struct shr_dataset shr_dataset;

/* One stored sample's metadata. */
typedef struct {
    int64_t label;
    uint32_t height, width, channels;   /* as stored */
    uint64_t source;                    /* position of its source image among the build's inputs */
    uint64_t bytes;                     /* height * width * channels: its pixels, uint8 HWC */
} shr_sample;

/* What the manifest says about the dataset. Every string is owned by the dataset and valid until
 * shr_dataset_close; none is NULL. */
typedef struct {
    const char *format;                 /* storage backend: "raw", "hdf5", "lmdb", "png0", ... */
    const char *tool;                   /* the program that wrote it, e.g. "shardc 0.1.0" */
    uint64_t samples;                   /* samples in the dataset */
    uint64_t inputs, rejects;           /* input images the build listed, and skipped */
    uint32_t classes;                   /* class count; names from shr_dataset_class */
    uint32_t channels;                  /* 1 or 3 */
    uint32_t width, height;             /* every sample's size when all share one, else 0 x 0 */
    /* the build's geometry: mode "keep", "size" or "short-side"; fit "crop", "pad" or
     * "stretch" (used by "size"); the sizes the mode uses (0 where unused) */
    const char *geom_mode, *geom_fit;
    uint32_t geom_width, geom_height, geom_short_side, geom_max_side;
    double mean[3], std[3];             /* per-channel stats of the stored pixels (0..255) */
    uint32_t augment;                   /* pre-augmented variants per source image, 0: none */
    const char *aug_spec;               /* the augmentation spec ("" when augment is 0) */
    uint64_t seed;                      /* seed of the augmentation draws */
    int targets;                        /* 1: a detection dataset (shr_dataset_target) */
} shr_dataset_info;

/* Open the dataset in dir (access as in shr_options; SHR_ACCESS_MMAP is the usual choice). On
 * failure *d is NULL and msg names the file at fault. Errors: SHR_EINVAL (NULL
 * arguments, unknown access mode), ENOENT without a manifest, SHR_ETRUNC / SHR_ECORRUPT /
 * SHR_EFORMAT / ... for a damaged manifest or shard, SHR_EUNSUPPORTED, ENOMEM. */
SHR_API int shr_dataset_open(shr_dataset **d, const char *dir, shr_access access,
                             shr_msg *msg);

/* shr_dataset_open with flags: SHR_DATASET_VERIFY makes shr_dataset_read hash every sample it
 * reads (XXH3-64, as shr_options.verify_samples) and fail with SHR_EHASH, naming the shard and
 * the sample, when the pixels do not match their stored hash. Unknown flags: SHR_EINVAL. */
#define SHR_DATASET_VERIFY 1u
SHR_API int shr_dataset_open_flags(shr_dataset **d, const char *dir, shr_access access,
                                   unsigned flags, shr_msg *msg);

/* shr_dataset_open_flags of the dataset at url (s3://, http(s)://; see "Datasets at URLs") in
 * the cache root cache (NULL: the default). cache_limit 0: as shr_dataset_open_flags (the whole
 * dataset made complete in the cache before the open returns). cache_limit > 0: read on demand
 * through a bounded cache: the open fetches the manifest (and, where samples vary in size or
 * carry targets, each raw shard's header and index, as shr_open does), and a read of a sample
 * whose shard is not in the cache downloads that shard (checked against the manifest before any
 * use), keeping the dataset's shards in its cache folder within cache_limit bytes: shards no
 * call is using are evicted, least recently used first, with the locks that let readers of other
 * processes (shr_open's among them) share the folder. A limit below the largest shard is refused
 * at open (SHR_EINVAL), naming the minimum. A shard that cannot be had (after the retries, or
 * failing its check) fails the reads of its samples, naming the object. Pointers a call returns
 * into the dataset's memory (targets, fields, keypoints) stay valid until the next call on d
 * from any thread, or while the caller holds their sample's shard (shr_dataset_hold); where the
 * open read the shards' skeletons (shr_dataset_meta_resident), those calls answer from them,
 * download nothing, and their pointers stay valid until shr_dataset_close. */
SHR_API int shr_dataset_open_remote(shr_dataset **d, const char *url, const char *cache,
                                    uint64_t cache_limit, shr_access access, unsigned flags,
                                    shr_msg *msg);

/* Keep the shard of sample idx in memory (and, for a dataset read on demand, in its cache,
 * downloading it first if need be) until the matching shr_dataset_unhold; calls on its samples
 * in between do not wait, and their pointers stay valid. Holds nest. 0, or the error (the
 * object that could not be had named in msg); SHR_EINVAL for idx >= samples.
 * For a local dataset, 0 and nothing to do. */
SHR_API int shr_dataset_hold(const shr_dataset *d, uint64_t idx, shr_msg *msg);
SHR_API void shr_dataset_unhold(const shr_dataset *d, uint64_t idx);

/* 1 when d answers every sample's target, fields and keypoints from memory it keeps until
 * shr_dataset_close, so that those calls download nothing and need no shr_dataset_hold: a local
 * dataset, or one read on demand whose open read its shards' skeletons (samples of varying
 * sizes or with targets, shards whose metadata can be read apart); else 0. */
SHR_API int shr_dataset_meta_resident(const shr_dataset *d);

/* The dataset's folder: its directory, or for a dataset at a URL its folder in the cache (holding
 * manifest.json). Valid until shr_dataset_close. */
SHR_API const char *shr_dataset_dir(const shr_dataset *d);

/* Close the dataset. Accepts NULL. Must not run concurrently with any other call on d. */
SHR_API void shr_dataset_close(shr_dataset *d);

/* The manifest's facts (see shr_dataset_info); d must not be NULL. */
SHR_API void shr_dataset_get_info(const shr_dataset *d, shr_dataset_info *info);

/* The manifest's shard k (k < shr_dataset_shard_count): its file (relative to the dataset's
 * folder; valid until shr_dataset_close), its first sample, its samples and its bytes on disk.
 * Returns 0, or SHR_EINVAL when k is out of range (or d or s NULL). */
typedef struct {
    const char *file;
    uint64_t first, samples, bytes;
} shr_dataset_shard_info;
SHR_API uint32_t shr_dataset_shard_count(const shr_dataset *d);
SHR_API int shr_dataset_shard(const shr_dataset *d, uint32_t k, shr_dataset_shard_info *s);

/* The build's geometry as the chain of torchvision transforms it equals, e.g. "Resize(256,
 * bilinear) | CenterCrop((224, 224))", NUL-terminated into buf (len bytes; cut short where it
 * does not fit), as `shardc info` prints it. */
SHR_API void shr_dataset_transform(const shr_dataset *d, char *buf, size_t len);

/* What the manifest says of a detection dataset's targets (all 0 without targets): its
 * categories, the version of its target records (1: boxes; 2: with masks, keypoints or label
 * maps), a label map's ignore index, the keypoints per instance, and the skeleton: `edges`
 * pairs of keypoint numbers, 1-based as COCO's (NULL without; valid until shr_dataset_close). */
typedef struct {
    uint32_t categories;
    uint32_t record_version;
    uint32_t ignore_index;
    uint32_t num_keypoints;
    uint32_t edges;
    const uint32_t *skeleton;
} shr_dataset_targets;
SHR_API void shr_dataset_get_targets(const shr_dataset *d, shr_dataset_targets *t);

/* Name of class `label` (the class folder, or the list file's label), NULL if label >= classes.
 * Valid until shr_dataset_close. */
SHR_API const char *shr_dataset_class(const shr_dataset *d, uint32_t label);

/* Metadata of sample idx. Returns 0, SHR_EINVAL if idx >= samples, or (a dataset read on demand
 * whose shards carry no skeleton) the error of the download of its shard, named in msg. */
SHR_API int shr_dataset_sample(const shr_dataset *d, uint64_t idx, shr_sample *s, shr_msg *msg);

/* Copy sample idx's stored pixels (s.bytes of them, uint8 HWC) into dst, which has room for len
 * bytes; meta (may be NULL) receives its metadata. Returns 0; SHR_EINVAL (idx >= samples, or len
 * smaller than the sample: nothing is written); the read's errors (errno values of pread,
 * SHR_ETRUNC for a shard truncated after open in SHR_ACCESS_PREAD / DIRECT mode), with
 * msg naming the shard file and the sample. */
SHR_API int shr_dataset_read(const shr_dataset *d, uint64_t idx, void *dst, size_t len,
                             shr_sample *meta, shr_msg *msg);

/* Sample idx's stored target (boxes in the stored sample's pixels, as the build left them; no
 * read-time geometry): pointers into the dataset's memory (never NULL), read-only, valid until
 * shr_dataset_close; dropped counts the boxes the build's geometry dropped. Every record was
 * checked at open. 0; SHR_EINVAL (d or t NULL, idx >= samples, or a dataset without targets),
 * with msg saying which. */
SHR_API int shr_dataset_target(const shr_dataset *d, uint64_t idx, shr_target *t, shr_msg *msg);

/* Sample idx's instance masks and keypoints (a dataset of target record version 2: the raw
 * format's specification, "Target record, version 2"), as the build stored them, in the order of
 * shr_dataset_target's boxes. *num_keypoints: K (0 without keypoints); *keypoints: count * K * 3
 * floats x, y, v (NULL without), valid until shr_dataset_close; *has_masks: whether the dataset
 * stores masks; *width, *height: the stored sample's size. masks (may be NULL; cap bytes): the
 * masks decoded, count * height * width bytes of 0 or 1, row-major. Any pointer argument but d
 * may be NULL. 0; SHR_EINVAL (as shr_dataset_target, or cap too small), with msg saying which. */
SHR_API int shr_dataset_segm(const shr_dataset *d, uint64_t idx, uint32_t *num_keypoints,
                             const float **keypoints, int *has_masks, uint32_t *width,
                             uint32_t *height, uint8_t *masks, size_t cap, shr_msg *msg);

/* 1 when the dataset's targets are label maps (shardc build --masks), from its manifest; 0
 * otherwise (and for d NULL). */
SHR_API int shr_dataset_has_label_maps(const shr_dataset *d);

/* Sample idx's label map (a semantic segmentation dataset: shardc build --masks), as the build
 * stored it, at the stored sample's size: *width, *height and *max_value (its largest value, the
 * ignore index included) always (each may be NULL); out (may be NULL; cap bytes) receives
 * width * height values of elem bytes each, row-major: elem 1 (uint8: SHR_EINVAL when
 * *max_value > 255), 2 (uint16) or 8 (int64). 0; SHR_EINVAL (d NULL, idx >= samples, a dataset
 * without label maps, another elem, cap too small), with msg saying which. */
SHR_API int shr_dataset_label_map(const shr_dataset *d, uint64_t idx, uint32_t *width,
                                  uint32_t *height, uint32_t *max_value, void *out, size_t cap,
                                  int elem, shr_msg *msg);

/* Fields (datasets written with fields: shardread.Writer(fields=...), shardc build --fields):
 * every sample carries the same named values beyond its label (the raw format's specification, "Fields record";
 * the schema is the manifest's "fields"). Types: */
#define SHR_FIELD_INT 1                 /* int64 values */
#define SHR_FIELD_FLOAT 2               /* float64 values */
#define SHR_FIELD_STR 3                 /* UTF-8 text, count bytes, not NUL-terminated */
#define SHR_FIELD_BYTES 4               /* opaque bytes, count of them */

typedef struct {
    uint32_t type;                      /* SHR_FIELD_* */
    uint32_t count;                     /* values (a scalar: 1) or bytes */
    const void *data;                   /* little-endian values, NOT necessarily aligned (read
                                         * them with memcpy) */
} shr_field;

/* Field k of the dataset's schema: its name (valid until shr_dataset_close), type and count (int
 * and float: 0 for a scalar, N for a vector of N; str and bytes: 0). Returns 0, or SHR_EINVAL when
 * k is not below the number of fields (0 for a dataset without fields); *name etc. may be NULL. */
SHR_API int shr_dataset_field_def(const shr_dataset *d, uint32_t k, const char **name,
                                  uint32_t *type, uint32_t *count);

/* Sample idx's fields, in schema order, into out[0..cap) (cap at least the number of fields; 64
 * always suffices): pointers into the dataset's memory, valid until shr_dataset_close. Every
 * record was checked against the schema at open. 0; SHR_EINVAL (NULL arguments, idx >= samples,
 * cap too small, or a dataset without fields), with msg saying which. */
SHR_API int shr_dataset_fields(const shr_dataset *d, uint64_t idx, shr_field *out, uint32_t cap,
                               shr_msg *msg);

/* ---- for a program that fills batches itself: the reader's host buffers and sample order ----
 *
 * What a program feeding its own batches (a benchmark's folder baseline, a DataLoader stand-in)
 * takes from the reader so that its batches live in the same memory and come in the same order
 * as a reader's. */

/* Host memory as the reader allocates its batches' pixels: n bytes (n > 0), aligned to 4096.
 * With SHR_PIN_AUTO and a CUDA device present, pinned (cudaHostAlloc with
 * cudaHostAllocPortable); where the calling thread has no CUDA context and device >= 0, device
 * (modulo the device count) is made current on the thread first, and left current (the reader
 * passes shr_options.pin_device - 1; -1: the thread's current device). The CUDA runtime is
 * looked up at run time, never linked. A failed cudaHostAlloc (the locked-memory limit, say) is
 * not a failure: the memory is ordinary, and why (NULL: not wanted) says "cudaHostAlloc of N
 * bytes: reason". *pinned says which it got (1 pinned, 0 ordinary); pass it back to
 * shr_host_free. Returns 0; EINVAL (p or pinned NULL, n 0, a mode that is not a shr_pin: *p
 * NULL then, when p is not NULL); ENOMEM. The memory is not initialised. Any thread. */
SHR_API int shr_host_alloc(size_t n, void **p, int *pinned, shr_pin mode, int device,
                           shr_msg *why);

/* Free what shr_host_alloc returned, with the pinned flag it set. Accepts NULL. */
SHR_API void shr_host_free(void *p, int pinned);

/* 1 if the CUDA runtime could be loaded and reports at least one device, else 0 (probed once per
 * process). */
SHR_API int shr_cuda_available(void);

/* What that probe found, for messages: why shr_cuda_available is 0 ("cannot load the CUDA
 * runtime: ...", "cudaGetDeviceCount: ...") or what it found ("2 CUDA device(s) (libcudart.so.13,
 * runtime 13.0, driver 13.0)"); copied into buf (len bytes, truncated), buf returned; "" when buf
 * is NULL or len 0. */
SHR_API const char *shr_cuda_status(char *buf, size_t len);

/* The dataset indices of one rank's epoch, in the order a reader with these options delivers
 * them (its batches laid end to end; drop_last aside, the batch size does not change it). */
typedef struct {
    uint64_t n;                 /* samples (shr_info.samples) */
    shr_order order;            /* shr_options.order, .seed, .rank, .world, .uneven */
    uint64_t seed;
    uint32_t rank, world;       /* world 0 is taken as 1 */
    shr_uneven uneven;
    /* SHR_ORDER_QUASI only: the samples of each shard in dataset order (shard s holds the
     * indices after those of shards 0..s-1; they sum to n), and shr_options.quasi_window (0: 1,
     * as the reader takes it). A program may group any n items into blocks of its choosing. */
    size_t nshards;
    const uint64_t *shard_counts;
    uint32_t window;
} shr_order_spec;

/* Epoch epoch's indices for s into out (NULL: only count them), *count (may be NULL) how many:
 * ceil(n / world) positions with SHR_UNEVEN_PAD (past the end the order wraps to its start),
 * floor(n / world) with SHR_UNEVEN_DROP. Returns 0; SHR_EINVAL (s NULL, rank >= world, an
 * unknown order or uneven mode, quasi without shard counts or with counts not summing to n),
 * with msg saying which; ENOMEM. Pure: the same answer from any thread, any number of times. */
SHR_API int shr_epoch_order(const shr_order_spec *s, uint64_t epoch, uint64_t *out,
                            uint64_t *count, shr_msg *msg);

/* What a dataset's manifest says of it, read from dir/manifest.json alone: no shard is opened,
 * so it is cheap, and a dataset whose shards are damaged still answers (shr_dataset_open checks
 * them). */
typedef struct {
    char format[32];            /* storage backend: "raw", "hdf5", "lmdb", "png0", ... */
    uint64_t samples;
    uint32_t channels;          /* 1 or 3 */
    uint32_t width, height;     /* every sample's size when all share one, else 0 x 0 */
} shr_manifest_summary;

/* 0 with *s filled; ENOENT when dir has no manifest.json; SHR_ECORRUPT, SHR_EVERSION or a read's
 * errno value for one that cannot be used, named in msg; SHR_EINVAL for NULL arguments. */
SHR_API int shr_manifest_peek(const char *dir, shr_manifest_summary *s, shr_msg *msg);

/* Sample idx's stored pixels where the dataset's shards hold them as they are and are mapped
 * (raw shards without compression, opened SHR_ACCESS_MMAP, within the mapping cap): a pointer
 * into the mapping in *px, read-only and valid until shr_dataset_close, and their length (the
 * sample's height * width * channels) in *len; no copy, no hash check (SHR_DATASET_VERIFY does
 * not apply: use shr_dataset_read for that). 0; SHR_EUNSUPPORTED where the pixels must be read
 * or decoded instead (another format, compressed shards, pread or O_DIRECT access, a dataset
 * read on demand): shr_dataset_read serves those; SHR_EINVAL for NULL arguments or idx >=
 * samples; a shard's error for a shard that did not open. *px NULL and *len 0 on failure; msg
 * says why. Any thread. */
SHR_API int shr_dataset_pixels(const shr_dataset *d, uint64_t idx, const void **px,
                               uint64_t *len, shr_msg *msg);

#endif
