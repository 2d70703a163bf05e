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

typedef enum {
    SHR_ORDER_SEQUENTIAL = 0,   /* dataset order */
    SHR_ORDER_RANDOM,           /* a fresh permutation per epoch, from seed and epoch */
    SHR_ORDER_QUASI             /* shard order shuffled, samples shuffled within a window of
                                 * `quasi_window` shards at a time: for data larger than RAM */
} shr_order;

typedef enum {
    SHR_UNEVEN_PAD = 0,     /* ranks whose share is short repeat samples from the epoch's start */
    SHR_UNEVEN_DROP         /* drop the epoch's last samples so every rank has the same count */
} shr_uneven;

typedef enum {
    SHR_ACCESS_MMAP = 0,    /* map the shards (default); a shard truncated while mapped raises
                             * SIGBUS (see "Files that change" above) */
    SHR_ACCESS_PREAD,       /* pread into the batch buffer: cold data, network filesystems, files
                             * that may change (a truncated shard is a clean SHR_ETRUNC) */
    SHR_ACCESS_DIRECT       /* O_DIRECT (page cache bypassed) where the filesystem allows it,
                             * else plain pread. For raw shards read at their stored size, each
                             * worker issues a whole batch's reads at once, many in flight
                             * (io_uring, else pread), merged into runs where samples lie
                             * together, straight into the batch where the alignment allows */
} shr_access;

typedef enum {
    SHR_ON_ERROR_FAIL = 0,      /* a sample that cannot be read fails the batch (default) */
    SHR_ON_ERROR_SKIP,          /* it is left out: a shorter batch */
    SHR_ON_ERROR_SUBSTITUTE     /* a deterministic other sample takes its place */
} shr_on_error;

typedef enum {
    SHR_PIN_AUTO = 0,       /* pinned (cudaHostAlloc) when a CUDA device is present */
    SHR_PIN_OFF             /* always page-aligned ordinary memory */
} shr_pin;

/* Element type and layout of the delivered pixels (see "Output" below). */
typedef enum {
    SHR_DTYPE_U8 = 0,       /* uint8, the stored values */
    SHR_DTYPE_F32,          /* float32 */
    SHR_DTYPE_F16           /* IEEE half (uint16_t bit patterns) */
} shr_dtype;

typedef enum {
    SHR_LAYOUT_NHWC = 0,    /* batch, row, column, channel (interleaved) */
    SHR_LAYOUT_NCHW         /* batch, channel, row, column (planar), as torch models take */
} shr_layout;

typedef enum {
    SHR_NORM_NONE = 0,      /* values as stored (0..255), converted to the dtype */
    SHR_NORM_GIVEN,         /* (x - mean[c]) / std[c] with the options' mean and std */
    SHR_NORM_DATASET        /* the same with the dataset's own per-channel statistics, from
                             * its manifest (shr_info.mean, .std) */
} shr_norm;

/* Resampling filters of the RandomResizedCrop, Pillow's (and torchvision's InterpolationMode). */
typedef enum {
    SHR_FILTER_NEAREST = 0,
    SHR_FILTER_BOX,
    SHR_FILTER_BILINEAR,    /* torchvision's default */
    SHR_FILTER_HAMMING,
    SHR_FILTER_BICUBIC,
    SHR_FILTER_LANCZOS
} shr_filter;

/* Automatic augmentation policies (shr_options.auto_augment). */
typedef enum {
    SHR_AUTO_AUGMENT_NONE = 0,
    SHR_AUTO_AUGMENT_TRIVIAL_WIDE,  /* TrivialAugmentWide(num_magnitude_bins) */
    SHR_AUTO_AUGMENT_RAND,          /* RandAugment(num_ops, magnitude, num_magnitude_bins) */
    SHR_AUTO_AUGMENT_IMAGENET       /* AutoAugment(AutoAugmentPolicy.IMAGENET) */
} shr_auto_augment;

/* The ops of TrivialAugmentWide and RandAugment, in the order of torchvision's
 * _augmentation_space (the op index both draw); shr_params.aa_op holds them. */
typedef enum {
    SHR_AA_IDENTITY = 0,
    SHR_AA_SHEAR_X,
    SHR_AA_SHEAR_Y,
    SHR_AA_TRANSLATE_X,
    SHR_AA_TRANSLATE_Y,
    SHR_AA_ROTATE,
    SHR_AA_BRIGHTNESS,
    SHR_AA_COLOR,
    SHR_AA_CONTRAST,
    SHR_AA_SHARPNESS,
    SHR_AA_POSTERIZE,
    SHR_AA_SOLARIZE,
    SHR_AA_AUTOCONTRAST,
    SHR_AA_EQUALIZE,
    SHR_AA_OPS,                     /* the count, 14 */
    SHR_AA_INVERT                   /* 15: AutoAugment's Invert (not among the 14 above) */
} shr_aa_op;

#define SHR_AA_MAX_OPS 4            /* RandAugment's num_ops at most */

/* Read-time detection geometry (shr_options.scale; see "Scale" below). */
typedef enum {
    SHR_SCALE_NONE = 0,
    SHR_SCALE_MULTI,        /* RandomShortestSize(scale_sizes, scale_max): each image its size */
    SHR_SCALE_JITTER,       /* ScaleJitter((height, width), scale_range) + FixedSizeCrop */
    SHR_SCALE_LETTERBOX,    /* resize to fit width x height keeping the aspect, pad centered */
    SHR_SCALE_NATURAL,      /* no resize: each image its stored size, placed as MULTI places it */
    SHR_SCALE_RESIZE        /* Resize(scale_sizes[0][, max_size=scale_max]) + CenterCrop */
} shr_scale;

#define SHR_SCALE_MAX_SIZES 16

/* The largest output a reader makes: each side of a delivered sample (width, height, or the
 * multi-scale canvas) at most SHR_MAX_SIDE pixels, and width x height at most SHR_MAX_PIXELS
 * (16384 x 16384; one such RGB float32 sample is 3 GiB). Larger sizes are refused at open with
 * SHR_EINVAL and a message naming the option and the limit, before anything is allocated. */
#define SHR_MAX_SIDE 65536u
#define SHR_MAX_PIXELS (1u << 28)

typedef struct {
    /* The size of shr_options as the caller's header declares it: shr_options_init sets it (a
     * macro passing sizeof), so that fields added to a later release keep their defaults for a
     * caller built against an earlier shardread.h, and the library never reads or writes past
     * the caller's struct. Always first. shr_open refuses (SHR_EINVAL, with the reason) 0 (the
     * options were not initialised) and a size larger than the library's own (a caller built
     * against a newer header). */
    uint32_t size;
    uint32_t batch_size;        /* samples per batch (default 256) */
    shr_order order;            /* default SHR_ORDER_SEQUENTIAL */
    uint64_t seed;              /* for orders and augmentation (default 0) */
    uint32_t quasi_window;      /* shards per window for SHR_ORDER_QUASI (default 4) */
    uint32_t rank, world;       /* this process's share: rank in [0, world) (default 0 of 1) */
    shr_uneven uneven;          /* default SHR_UNEVEN_PAD */
    int drop_last;              /* non-zero: drop the epoch's last partial batch */
    /* Output size. 0 x 0: the dataset's own size, which every sample must share (SHR_ESHAPE
     * otherwise; where the manifest records no size, as for a build without --size, shr_open
     * looks in the index once whether every sample has the same one). Else every sample is center-cropped where larger and zero-padded (centered)
     * where smaller to width x height: each side at most SHR_MAX_SIDE, width x height at most
     * SHR_MAX_PIXELS (shr_open refuses more with SHR_EINVAL, naming the limit). */
    uint32_t width, height;
    int random_crop;            /* crop at a random offset instead of the center (where larger) */
    int flip;                   /* mirror horizontally, with probability flip_p */
    double flip_p;              /* 0..1 (default 0.5) */
    /* The draws are reproducible per sample (see SHR_SALT_FLIP) and do not depend on the rank. */
    /* RandomResizedCrop (see "RandomResizedCrop" below): non-zero rrc replaces the crop/pad:
     * every sample's box is drawn as torchvision draws it and resized to width x height, which
     * must be given. Excludes random_crop. */
    int rrc;
    double rrc_scale[2];        /* area fraction [min, max], 0 < min <= max <= 1 (0.08, 1) */
    double rrc_ratio[2];        /* aspect ratio w/h [min, max], 0 < min <= max (3/4, 4/3) */
    shr_filter filter;          /* the resize's filter (default SHR_FILTER_BILINEAR) */
    /* Output (see "Output" below). */
    shr_dtype dtype;            /* default SHR_DTYPE_U8 */
    shr_layout layout;          /* default SHR_LAYOUT_NHWC */
    shr_norm normalize;         /* default SHR_NORM_NONE; needs a float dtype */
    float mean[4], std[4];      /* SHR_NORM_GIVEN: per channel, on the 0..255 scale; std > 0 */
    uint32_t threads;           /* worker threads, 1..1024 (default 2) */
    uint32_t prefetch;          /* batches in the ring, 2..65536; 0 (the default): threads + 2 */
    shr_access access;          /* default SHR_ACCESS_MMAP */
    shr_pin pin;                /* default SHR_PIN_AUTO */
    /* Where to start: epoch and batch within it (default 0, 0). cursor may equal the epoch's
     * batch count: the epoch is then consumed and the first shr_next returns its SHR_EEND. */
    uint64_t epoch, cursor;
    /* Samples that cannot be read (see "Read-time recovery" below). */
    shr_on_error on_error;      /* default SHR_ON_ERROR_FAIL */
    int verify_samples;         /* non-zero: hash every sample as it is read (XXH3-64 against
                                 * the hash stored with it); a mismatch is SHR_EHASH */
    /* Elastic resumption (see "Resuming on another world size" below): positions of epoch
     * `epoch`'s global sequence already consumed by all ranks together, shr_state.consumed of
     * the reader that saved the state, on any world size. Non-zero needs cursor 0. */
    uint64_t consumed;
    /* Augmentations after the crop/RandomResizedCrop and the flip (see "Augmentations" below),
     * in this order: RandomRotation, RandomAffine, TrivialAugmentWide or RandAugment (fields at
     * the end), ColorJitter, RandomGrayscale on the uint8 pixels, then the conversion to
     * dtype (and normalisation), then RandomErasing on the delivered values. All off by default.
     * ColorJitter's factor ranges [min, max], as torchvision's ColorJitter holds them after its
     * argument check (a number b means [max(0, 1 - b), 1 + b] for brightness, contrast and
     * saturation and [-h, h] for hue; a pair (v, v) fixes the factor). A range equal to the
     * op's identity, (1, 1) or for hue (0, 0), turns that op off (torchvision's None). */
    double jitter_brightness[2];    /* 0 <= min <= max (default 1, 1) */
    double jitter_contrast[2];      /* 0 <= min <= max (default 1, 1) */
    double jitter_saturation[2];    /* 0 <= min <= max (default 1, 1) */
    double jitter_hue[2];           /* -0.5 <= min <= max <= 0.5 (default 0, 0) */
    double grayscale_p;             /* RandomGrayscale(p), 0..1 (default 0: off) */
    double erase_p;                 /* RandomErasing(p), 0..1 (default 0: off) */
    double erase_scale[2];          /* erased area fraction, 0 <= min <= max <= 1 (0.02, 0.33) */
    double erase_ratio[2];          /* aspect ratio h/w of the box, 0 < min <= max (0.3, 3.3) */
    /* The value written into the erased box, per channel, in the delivered units (after
     * normalisation, as torchvision erases the normalised tensor; default 0). With the uint8
     * dtype each must be a whole number 0..255. */
    float erase_value[4];
    /* RandomRotation and RandomAffine (see "Augmentations"), after the flip: rotation first,
     * then the affine transform, each where it is on. Both use aug_interpolation and aug_fill,
     * as do the geometric ops of auto_augment. */
    int rotation;                   /* non-zero: RandomRotation(rotation_degrees) */
    double rotation_degrees[2];     /* the angle's range [min, max] in degrees, counter-clockwise
                                     * (torchvision's (-d, d) for a number d; default 0, 0) */
    int affine;                     /* non-zero: RandomAffine with the four below */
    double affine_degrees[2];       /* [min, max] (default 0, 0) */
    /* the largest horizontal and vertical shifts as fractions of the width and height, 0..1;
     * (0, 0), the default, is torchvision's translate=None (nothing drawn) */
    double affine_translate[2];
    /* the scale's range, 0 < min <= max; (1, 1), the default, is scale=None */
    double affine_scale[2];
    /* shear ranges in degrees: x [0], [1] and y [2], [3], as torchvision holds them after its
     * argument check (a number s: (-s, s, 0, 0); a pair: x only; four values: x and y). All
     * zero, the default, is shear=None; y (0, 0) is the two-value form (no y draw). */
    double affine_shear[4];
    /* SHR_FILTER_NEAREST (default, torchvision's) or SHR_FILTER_BILINEAR */
    shr_filter aug_interpolation;
    uint8_t aug_fill[4];            /* the fill colour of uncovered pixels, per channel (0) */
    /* TrivialAugmentWide, RandAugment or AutoAugment(IMAGENET) (see "Augmentations"), after the
     * affine transform and before ColorJitter; SHR_AUTO_AUGMENT_NONE by default (aa_num_ops,
     * aa_magnitude and aa_bins are not used by AutoAugment, whose table has 10 bins). */
    shr_auto_augment auto_augment;
    uint32_t aa_num_ops;            /* RandAugment's num_ops, 1..SHR_AA_MAX_OPS (default 2) */
    uint32_t aa_magnitude;          /* RandAugment's magnitude, < aa_bins (default 9) */
    uint32_t aa_bins;               /* num_magnitude_bins, 2..1024 (default 31) */
    /* Detection datasets (see "Targets" below): a moved box is kept only when at least this
     * fraction of its area is left inside the output after the clip, 0..1 (default 0: any box
     * with area is kept). Ignored for classification datasets. */
    double min_box_area_fraction;
    /* MixUp and CutMix on each finished batch (see "MixUp and CutMix" below): lambda ~
     * Beta(alpha, alpha); 0 (the default) turns that op off; with both on, one of the two per
     * batch. They need a float dtype and a classification dataset (labels in [0, num_classes));
     * batches then carry soft labels (shr_batch.soft_labels). */
    double mixup_alpha;             /* > 0: MixUp(alpha) (torchvision's recipe: 0.2) */
    double cutmix_alpha;            /* > 0: CutMix(alpha) (torchvision's recipe: 1.0) */
    uint32_t num_classes;           /* soft label columns; 0 (default): the dataset's classes */
    /* RandomErasing's value="random": non-zero erases with standard normal noise per value
     * (from the reader's words, see SHR_SALT_ERASE_NOISE) instead of erase_value. */
    int erase_random;
    /* Detection geometry at read time (see "Scale" below), in place of the crop/pad: off
     * (SHR_SCALE_NONE) by default. Excludes rrc and random_crop; uses `filter`. */
    shr_scale scale;
    uint32_t scale_sizes[SHR_SCALE_MAX_SIZES];  /* SHR_SCALE_MULTI: the shortest sides drawn */
    uint32_t scale_nsizes;          /* SHR_SCALE_MULTI: 1..SHR_SCALE_MAX_SIZES of them */
    /* SHR_SCALE_MULTI: the longest side's bound, >= 1; without width and height the canvas
     * is scale_max x scale_max, so it is then within the output limits (at most 16384).
     * SHR_SCALE_RESIZE: Resize's max_size, 0 for none */
    uint32_t scale_max;
    double scale_range[2];          /* SHR_SCALE_JITTER: 0 < min <= max <= 16 (0.1, 2.0) */
    /* SHR_SCALE_MULTI and SHR_SCALE_NATURAL: non-zero stores each image dense (image_h x image_w, in layout) at the
     * start of its sample's place in the batch instead of in a zero-padded canvas; the bytes
     * after it are unspecified. For consumers that take one tensor per image. */
    int scale_dense;
    /* A dataset at a URL (see "Datasets at URLs"): the cache folder its files are downloaded
     * to; NULL (the default): ~/.cache/shardread, HOME being the user's home (the library takes
     * no setting from the environment: $SHARDREAD_CACHE is the programs' and the Python
     * package's default). Not copied: it must
     * stay valid during shr_open. */
    const char *cache;
    /* Float dtypes: each stored value x becomes ((float)x / unit - mean) / std, both steps in
     * float32 as torchvision's ToTensor then Normalize compute them (unit 255: values 0..1 and
     * mean and std on that scale). 0 (the default) or 1: no division (0..255). */
    float unit;
    /* Threads that size themselves (see "Pipeline statistics and auto threads" below):
     * non-zero makes `threads` the most workers; the reader starts min(2, threads) of them and
     * adds or parks workers to keep the ring ahead of the consumer with the fewest. The
     * batches are the same bytes, in the same order, as with any fixed thread count. */
    int threads_auto;
    /* A dataset at a URL, read by shr_open (see "Datasets at URLs"): the most bytes its cache
     * folder holds (0, the default: no limit). Shards the reader has finished with are evicted,
     * least recently used first; a limit below what the readers and the prefetch window need at
     * once is refused at open, naming the minimum. */
    uint64_t cache_limit;
    /* ... and how many distinct shards, in the order the sampler reads them, are downloaded
     * ahead of the batches being filled (0: the default, 8, within cache_limit). */
    uint32_t prefetch_shards;
    /* A dataset with keypoints (see "Masks and keypoints"): the horizontal flip's left/right
     * swap, num_flip_indices (= the dataset's K) entries each < K: a flipped sample's keypoint j
     * is the stored keypoint flip_indices[j], mirrored. NULL (the default): a flip of a
     * keypoint dataset is refused. Copied by shr_open. */
    const uint32_t *flip_indices;
    uint32_t num_flip_indices;
    /* A label-map dataset (see "Masks and keypoints"): the bytes of each delivered label value,
     * 1 (uint8, the default; 0 means 1: a label above 255 fails its batch) or 2 (uint16, host
     * order: any label a build stores, 0 .. 65535). 64 bits wide so that the struct grows by
     * it: a 32-bit field would sit in the tail padding, and size could not tell an older
     * caller's struct (its padding read as this field) from a newer one. */
    uint64_t label_map_bytes;
    /* 1: a detection or segmentation dataset read for its images alone: its targets (boxes,
     * masks, keypoints, label maps) are neither moved nor delivered, and its batches are a
     * classification dataset's (labels -1). 0 (the default): they are. */
    uint64_t skip_targets;
    /* SHR_ACCESS_DIRECT: 1 reads with pread rather than io_uring, to measure or test that path
     * (0, the default: io_uring where the kernel allows it, else pread). The same bytes either
     * way. 64 bits wide for the reason label_map_bytes is. */
    uint64_t direct_pread;
    /* The device a thread with no CUDA context pins the ring's memory on (cudaHostAlloc makes
     * that thread's context there): d + 1 for device d (modulo the device count), 0 (the
     * default) for the runtime's current one. A context already current on the thread is kept.
     * At most 65536 (SHR_EINVAL beyond). The Python package passes LOCAL_RANK + 1 (torchrun's
     * variable) where it is set, so the ranks of a node do not all make a context on GPU 0. */
    uint64_t pin_device;
} shr_options;

/* Read-time recovery. A sample that cannot be read (an I/O error, a truncated or damaged shard,
 * an image file of a per-image set that no longer decodes) or, with verify_samples, whose pixels
 * do not match their stored hash, is handled as on_error says:
 *   SHR_ON_ERROR_FAIL        the batch fails: shr_next returns the error, the reader is failed
 *                            (SHR_ESTATE from then on). The default, and the only behaviour
 *                            before these options existed.
 *   SHR_ON_ERROR_SKIP        the sample is left out: the batch is shorter (n smaller; its
 *                            other samples keep their order).
 *   SHR_ON_ERROR_SUBSTITUTE  another sample takes its place, same position, same shape: the
 *                            first of candidates c_a = shr_mix(seed, epoch, index,
 *                            SHR_SALT_SUBSTITUTE + a) % samples, a = 0, 1, ... 15, that is not
 *                            the sample itself and reads cleanly (verified too, with
 *                            verify_samples); labels, indices, sources and params describe the
 *                            substitute. If all 16 fail, the batch fails as with FAIL.
 * Either way the run goes on and nothing is hidden: the batch lists what was not delivered as
 * planned (shr_batch.nbad, bad_indices, bad_errors, bad_positions), shr_get_recovery counts it
 * for the reader's life, and shr_last_error(r) holds the message of the latest one (naming the
 * file and the sample). The choice depends only on (seed, epoch, index), so it is the same at
 * every thread count and after a resume. verify_samples costs one XXH3-64 pass over each stored
 * sample (the project's benchmark notes give the measured cost). With SHR_ACCESS_DIRECT both keep the
 * batch-wide O_DIRECT reads (samples are verified in the batch); only a batch in which a sample
 * fails is read again sample by sample, to find and replace or skip it.
 * With SKIP or SUBSTITUTE a shard that cannot be opened (missing, truncated, damaged, not the
 * shard the manifest pins) does not refuse the dataset: shr_open succeeds with that shard
 * closed, shr_last_error names each such shard once with why and how many samples it holds,
 * and its samples are skipped or replaced as above (each one counted in shr_get_recovery, its
 * message naming the file). shr_open still fails when no shard opens. With FAIL the open
 * fails, naming the file.
 * Shards changed under an open reader: the index of a raw or hdf5 shard is read into memory and
 * checked at open, in every access mode, so a shard rewritten in place (bytes flipped, another
 * shard copied over it) can change only the pixels read, never where they are read from: with
 * verify_samples every changed sample is SHR_EHASH (or a read error) in every mode. Truncating a
 * mapped file (SHR_ACCESS_MMAP) still raises SIGBUS when a page past the new end is touched, as
 * for any mmap reader; SHR_ACCESS_PREAD and SHR_ACCESS_DIRECT report it as SHR_ETRUNC. */
#define SHR_SALT_SUBSTITUTE 0x73756230u /* "sub0": + attempt 0 .. 15 */

/* Resuming on another world size. An epoch's order is one global sequence; rank r of world W
 * reads positions r, r + W, r + 2W, ... of it. When every rank has consumed c
 * batches, the positions consumed are exactly [0, min(n, c * batch_size * W)), whatever W: this
 * is shr_state.consumed. A reader opened with options epoch = state.epoch, consumed =
 * state.consumed (cursor 0) on any world size W' reads positions consumed + r', consumed + r' +
 * W', ... of the same sequence: every sample of the epoch not consumed before is read exactly
 * once over the W' ranks, plus, with SHR_UNEVEN_PAD, the declared padding (positions past the
 * end wrap to the epoch's start so every rank has the same count; SHR_UNEVEN_DROP drops the
 * tail instead). That resumed epoch may have fewer batches than the others
 * (shr_batches_in_epoch); later epochs are whole. Save a state when every rank has consumed the
 * same number of batches (synchronous data parallel training does): consumed is computed from
 * this rank's cursor. */

/* On-the-fly augmentation, exactly: with shr_mix(seed, epoch, index, salt) (declared below) and
 * `index` the sample's dataset index, the sample is
 * mirrored iff flip is set and (shr_mix(.., SHR_SALT_FLIP) & 0xffffff) * 2^-24 < (float)flip_p
 * (torch.rand(1) < p, on the low 24 bits as torch takes them); where a stored width W exceeds
 * the output width w, random_crop starts the crop at column shr_mix(.., SHR_SALT_CROP_X) %
 * (W - w + 1), and likewise the row with SHR_SALT_CROP_Y; without random_crop at (W - w) / 2.
 * Where the stored size is smaller, the sample sits at (w - W) / 2 in a zero border. The flip
 * mirrors the finished (cropped, padded or resized) output.
 *
 * RandomResizedCrop. With rrc set, the box of a sample stored at W x H is what torchvision
 * 0.14's RandomResizedCrop.get_params(img, scale, ratio) returns, computed with the same
 * arithmetic, but with the words below in place of torch's generator. torch draws 32-bit words;
 * here word k of a sample is the low (k even) or high (k odd) half of
 * shr_mix(seed, epoch, index, SHR_SALT_RRC + k / 2). Attempt a = 0..9 uses words 4a..4a+3:
 *     area   = W * H * (double)u(4a; scale)            u(k; [lo, hi]) is torch's float32
 *     aspect = (double)exp_f32(u(4a + 1; log_ratio))   uniform_: fma_f32(x, hi - lo, lo) with
 *     w = round(sqrt(area * aspect))                   x = (word & 0xffffff) * 2^-24 and lo,
 *     h = round(sqrt(area / aspect))                   hi cast to float32; log_ratio = log_f32
 *     if 0 < w <= W and 0 < h <= H:                    of the float32 ratio bounds; exp_f32 and
 *         y = word(4a + 2) % (H - h + 1)               log_f32 are torch's float32 exp and log
 *         x = word(4a + 3) % (W - w + 1)               (bit for bit); round() is Python's
 *         done                                         (halves to even); sqrt in double.
 * After 10 failures, torchvision's center crop: with r = W / H, w = W, h = round(W / min_ratio)
 * if r < min_ratio, h = H, w = round(H * max_ratio) if r > max_ratio, else the whole image; at
 * ((W - w) / 2, (H - h) / 2). The box is then cropped out and resized to width x height with
 * Pillow's algorithm for `filter` (libshardread's resampler gives Pillow's bytes), so a sample
 * equals torchvision's F.resized_crop(img, y, x, h, w, [height, width], filter) of the stored
 * image, mirrored when the flip says so. shr_draw_params computes any sample's parameters. */
#define SHR_SALT_FLIP 0x666c6970u       /* "flip" */
#define SHR_SALT_CROP_X 0x63726f78u     /* "crox" */
#define SHR_SALT_CROP_Y 0x63726f79u     /* "croy" */

/* Deterministic per-sample random bits: a hash of (seed, epoch, index, salt), the same on every
 * machine. With the salts above it gives the reader's flip and crop draws. Thread-safe. */
SHR_API uint64_t shr_mix(uint64_t seed, uint64_t epoch, uint64_t index, uint64_t salt);
#define SHR_SALT_RRC 0x72726300u        /* "rrc\0": SHR_SALT_RRC + 0 .. SHR_SALT_RRC + 19 */

/* Augmentations, exactly. Word k of a sample's stream S is the low (k even) or high (k odd)
 * half of shr_mix(seed, epoch, index, S + k / 2); u(k; [lo, hi]) is torch's float32 uniform_ of
 * word k (as for RandomResizedCrop above), rand(k) < p is (word & 0xffffff) * 2^-24 < (float)p.
 * Each op is torchvision 0.14's transform with these words in place of torch's generator,
 * consumed in the order torchvision consumes its draws:
 *   ColorJitter (stream SHR_SALT_JITTER): fn_idx = torch.randperm(4), which is r = (0, 1, 2, 3)
 *     then for i = 0, 1, 2: swap r[i] and r[i + word(i) % (4 - i)]; then, for each op that is
 *     on, in the order brightness, contrast, saturation, hue, its factor u(k; range) with the
 *     next word k = 3, 4, ... . The ops run in fn_idx order: F.adjust_brightness,
 *     adjust_contrast, adjust_saturation, adjust_hue on the PIL image, whose bytes these are
 *     (Pillow's ImageEnhance blends with its float arithmetic and clipping, the contrast's mean
 *     of the L image rounded as int(mean + 0.5), the hue through Pillow's RGB -> HSV -> RGB with
 *     the hue byte shifted by np.uint8(hue * 255)). One-channel samples are "L" images: only
 *     brightness and contrast change them (the draws are the same).
 *   RandomGrayscale (stream SHR_SALT_GRAY): rand(0) < grayscale_p: Pillow's L of each pixel,
 *     (r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16, in the three channels.
 *   RandomErasing (stream SHR_SALT_ERASE), on the output sample of height x width: rand(0) <
 *     erase_p, then attempts a = 0..9: area = height * width * (double)u(1 + 2a; scale),
 *     aspect = exp_f32(u(2 + 2a; log_f32 ratio)), eh = round(sqrt(area * aspect)),
 *     ew = round(sqrt(area / aspect)); the first with eh < height and ew < width erases rows
 *     y = word(3 + 2a) % (height - eh + 1) and columns x = word(4 + 2a) % (width - ew + 1)
 *     (torchvision's i and j); none: nothing erased. */
#define SHR_SALT_JITTER 0x6a697400u     /* "jit\0": + 0 .. 3 */
#define SHR_SALT_GRAY 0x67726179u       /* "gray" */
#define SHR_SALT_ERASE 0x65727300u      /* "ers\0": + 0 .. 11 */
/* RandomErasing with erase_random (torchvision's value="random", whose box torch fills with
 * torch.empty([C, eh, ew]).normal_()): value j of that [C, eh, ew] block (channel, then row, then
 * column of the box) is a standard normal of the word g = shr_mix(seed, epoch, index,
 * SHR_SALT_ERASE_NOISE << 32 | j / 2): with u1 = ((g >> 32) + 0.5) * 2^-32 and
 * u2 = ((g & 0xffffffff) + 0.5) * 2^-32, sqrt(-2 ln u1) * cos(2 pi u2) for even j and
 * sin(2 pi u2) for odd j, in double, rounded to float32 (and to half for float16). The values
 * are in the delivered (normalised) units, as torchvision's; the distribution is torch's, the
 * values the reader's own (deterministic per seed, epoch and index). Needs a float dtype. */
#define SHR_SALT_ERASE_NOISE 0x65726e00u    /* "ern\0" */

/* RandomRotation, RandomAffine and the automatic augmentations, with the words above (torch's
 * randint(n) of word k is word(k) % n):
 *   RandomRotation (stream SHR_SALT_ROTATE): angle = u(0; rotation_degrees).
 *   RandomAffine (stream SHR_SALT_AFFINE), get_params with img_size = [width, height] of the
 *     output: angle = u(k; degrees) with k = 0, then, each only where the option is not
 *     torchvision's None and taking the next word: tx = round(u(k; [-dx, dx])) and
 *     ty = round(u(k; [-dy, dy])) with dx = translate[0] * width, dy = translate[1] * height
 *     (doubles cast to float32; round() halves to even), scale = u(k; scale), shear_x =
 *     u(k; shear[0..1]) and, with the y range, shear_y = u(k; shear[2..3]).
 *   The pixels are F.rotate(img, angle, interpolation, fill=fill) and F.affine(img, angle,
 *     [tx, ty], scale, [shear_x, shear_y], interpolation, fill) on the PIL image: Pillow's
 *     Image.rotate and Image.transform(AFFINE) with torchvision's inverse matrix, whose bytes
 *     these are.
 *   TrivialAugmentWide (stream SHR_SALT_AUTO_AUGMENT): op = word(0) % 14; for an op with
 *     magnitudes, bin = word(1) % bins and the magnitude is torchvision's table at bin; for a
 *     signed op the next word w gives -magnitude where w % 2 is 1.
 *   RandAugment (the same stream): for each of num_ops ops, op = word(k) % 14 then, for a
 *     signed op, the sign from the next word; the magnitude is the table at aa_magnitude
 *     (TranslateX and TranslateY from the output width and height, as torchvision's
 *     image_size).
 *   AutoAugment(IMAGENET) (the same stream): torchvision 0.14's get_params in its order:
 *     policy = word(0) % 25 (its IMAGENET table of 25 sub-policies, two ops each); op i = 0, 1
 *     of the sub-policy runs where rand(1 + i) <= (float)p_i, i.e. (word(1 + i) & 0xffffff) *
 *     2^-24 <= its probability in float32; a signed op is negated where word(3 + i) % 2 == 0;
 *     the magnitude is the table entry at the sub-policy's bin of _augmentation_space(10,
 *     (height, width)) (RandAugment's tables with 10 bins). Invert is ImageOps.invert, 255 - x.
 *     shr_params records the ops that ran (0, 1 or 2), in order.
 *   These run on the flipped sample (the flip is torchvision's RandomHorizontalFlip before
 *     them), so a mirrored sample with a geometric op is mirrored first; the colour ops commute
 *     with the mirror.
 *   Each op is torchvision's _apply_op on the PIL image (ShearX/Y through F.affine with
 *     center [0, 0], TranslateX/Y through F.affine, Rotate through F.rotate, Brightness, Color,
 *     Contrast, Sharpness through ImageEnhance with 1 + magnitude, Posterize, Solarize,
 *     AutoContrast and Equalize through ImageOps), byte for byte. */
#define SHR_SALT_ROTATE 0x726f7400u     /* "rot\0": + 0 */
#define SHR_SALT_AFFINE 0x61666600u     /* "aff\0": + 0 .. 2 */
#define SHR_SALT_AUTO_AUGMENT 0x61756700u   /* "aug\0": + 0 .. 3 */

/* Scale: read-time geometry for detection (shr_options.scale), in place of the crop/pad, with
 * the words of stream SHR_SALT_SCALE (word k as above; rand(k) is torch.rand(1) of word k,
 * (word & 0xffffff) * 2^-24 in float32). Each op resizes the whole stored image (W x H) to
 * scale_w x scale_h with Pillow's algorithm for `filter`, keeps the window (crop_x, crop_y,
 * image_w, image_h) of the resize and places it at (pad_x, pad_y) of the output, zero around it
 * (shr_params reports every number, so F.resize(img, [scale_h, scale_w]) then F.crop and F.pad
 * reproduce the pixels of the PIL image). Sides are at least 1.
 *   SHR_SCALE_MULTI (torchvision's detection references' RandomShortestSize(scale_sizes,
 *     scale_max), the GeneralizedRCNNTransform scale): s = scale_sizes[word(0) % scale_nsizes]
 *     (torch.randint), r = min(s / min(W, H), scale_max / max(W, H)) in double,
 *     scale_w = floor(W * r), scale_h = floor(H * r) (Python's int(); so a side can land one
 *     pixel short of s, as in torchvision: it is not F.resize(img, s, max_size=...), whose
 *     long side is int(s * long / short)). No crop, no pad: image_w x image_h is the resize.
 *     Each sample keeps its own size: the batch is a canvas of width x height (default
 *     scale_max x scale_max), every image at its top left, the rest zero in the delivered
 *     units (GeneralizedRCNNTransform's batch_images pads bottom and right; normalisation
 *     leaves that zero), and shr_open refuses (SHR_EINVAL, naming a sample) a canvas that the
 *     largest size of some sample would not fit. With scale_dense each image is instead
 *     stored dense at the start of its sample (image_h * image_w * channels elements). The flip mirrors the image within its own
 *     width; RandomErasing draws its box inside the image.
 *   SHR_SCALE_NATURAL: no resize and no draw: scale_w x scale_h = image_w x image_h = W x H
 *     (scale_factor 1), each image stored and mirrored as SHR_SCALE_MULTI stores it, in a
 *     canvas of width x height (default the largest stored width x the largest stored height,
 *     found in the index at open; refused, as any output, past SHR_MAX_PIXELS), or dense with
 *     scale_dense: a detection dataset at its natural sizes, as a list of per-image tensors.
 *   SHR_SCALE_JITTER (ScaleJitter((height, width), scale_range) then FixedSizeCrop((height,
 *     width)), the large-scale jitter recipe): scale = lo + rand(0) * (hi - lo) and
 *     r = (float)min(height / H, width / W) * scale in float32, scale_w = int(W * r),
 *     scale_h = int(H * r) (float32 products, truncated). Then, where the resize is larger than
 *     the output on an axis, a crop at crop_x = int((scale_w - width) * r2), crop_y =
 *     int((scale_h - height) * r2) (0 on an axis that fits), r2 = rand(1), one draw for both
 *     axes as FixedSizeCrop has it; image_w = min(scale_w, width), likewise the height; padding
 *     bottom and right (pad_x = pad_y = 0). (torchvision's ScaleJitter reads its target_size as
 *     (width, height) in that formula; for the usual square target it is the same.)
 *   SHR_SCALE_LETTERBOX: the build's geometry of `shardc build --size W H --fit pad`:
 *     Resize(S), S the largest shortest side whose torchvision resize fits inside the output,
 *     then CenterCrop(height, width), which pads with zeros, left (width - scale_w) / 2 and top
 *     (height - scale_h) / 2.
 *   SHR_SCALE_RESIZE: torchvision's evaluation geometry Resize(S[, max_size=M]) then
 *     CenterCrop((height, width)), S = scale_sizes[0] (scale_nsizes 1), M = scale_max (0:
 *     none), no draw; the build's --short-side S [--max-side M] --crop WxH arithmetic
 *     (the build's short-side geometry): the short side becomes S, the long side
 *     int(S * long / short) (capped by M as torchvision caps it), the crop at
 *     int(round((scale - out) / 2)) on an axis the resize covers, zero padding of
 *     (out - scale) // 2 before and the rest after on one it does not.
 * The flip and the other ops then apply to the output as usual. The boxes follow with the same
 * numbers: x' = x * scale_w / W - crop_x + pad_x, y' = y * scale_h / H - crop_y + pad_y in
 * double, clipped to the image [pad_x, pad_x + image_w] x [pad_y, pad_y + image_h], mirrored
 * about the image's width with SHR_SCALE_MULTI and the output's otherwise, then as in "Targets";
 * the area is the stored one times (scale_w / W) * (scale_h / H). */
#define SHR_SALT_SCALE 0x73636c00u      /* "scl\0": + 0 */

/* Output. Samples are delivered as dtype in layout: n * height * width * channels elements,
 * each sample's at sample_index * height * width * channels. uint8 carries the stored values;
 * float32 the value x (0..255) as a float, or with normalisation ((float)x - mean[c]) / std[c]
 * computed in float32 (the CUDA feed's formula, so both give the same floats); float16 the
 * float32 value rounded to nearest even. The workers write the converted pixels straight into
 * the batch buffer. */

/* What was done to one sample, reported with the batch (shr_batch.params) for audits. */
typedef struct {
    uint32_t x, y, w, h;        /* the rectangle of the stored image used: the RandomResizedCrop
                                 * box, or the crop/pad's (the whole image where it was padded) */
    uint32_t flip;              /* 1: mirrored */
    uint32_t src_w, src_h;      /* the stored image's size */
    /* ColorJitter (see "Augmentations"): bit k of jitter is set where op k ran (0 brightness,
     * 1 contrast, 2 saturation, 3 hue: torchvision's fn_id), jitter_order its fn_idx (the
     * permutation, every entry even where an op is off) and the factors torchvision's
     * get_params returns (float32 values; 1, 1, 1, 0 where off). */
    uint32_t jitter;
    uint8_t jitter_order[4];
    float brightness, contrast, saturation, hue;
    uint32_t gray;              /* 1: RandomGrayscale converted it */
    /* RandomErasing: erase 1 where a box was erased: rows erase_y .. erase_y + erase_h - 1,
     * columns erase_x .. erase_x + erase_w - 1 of the delivered (mirrored) sample, torchvision's
     * (i, j, h, w) = (erase_y, erase_x, erase_h, erase_w) */
    uint32_t erase;
    uint32_t erase_x, erase_y, erase_w, erase_h;
    /* RandomRotation: rotate 1 where it ran, rotate_angle the angle get_params returned
     * (degrees; F.rotate(img, rotate_angle, interpolation, fill=fill) reproduces it) */
    uint32_t rotate;
    float rotate_angle;
    /* RandomAffine: affine 1 where it ran, and get_params' (angle, (tx, ty), scale,
     * (shear_x, shear_y)) for F.affine(img, angle, [tx, ty], scale, [shear_x, shear_y],
     * interpolation, fill) */
    uint32_t affine;
    float affine_angle;
    int32_t affine_tx, affine_ty;
    float affine_scale, affine_shear_x, affine_shear_y;
    /* TrivialAugmentWide / RandAugment / AutoAugment: aa_ops ops ran (0 without auto_augment;
     * AutoAugment: those of its sub-policy that passed their probability), op i being
     * aa_op[i] (shr_aa_op) with the signed magnitude torchvision hands _apply_op,
     * aa_magnitude[i] (0 for the ops without one) */
    uint32_t aa_ops;
    uint8_t aa_op[SHR_AA_MAX_OPS];
    float aa_magnitude[SHR_AA_MAX_OPS];
    /* Detection geometry (shr_options.scale; all 0 without it): the whole stored image resized
     * to scale_w x scale_h (F.resize(img, [scale_h, scale_w])), the window at (crop_x, crop_y)
     * of image_w x image_h of it placed at (pad_x, pad_y) of the output, the rest zero;
     * scale_factor is the drawn ratio r (see "Scale"). */
    uint32_t scale_w, scale_h, crop_x, crop_y, pad_x, pad_y, image_w, image_h;
    float scale_factor;
} shr_params;

/* MixUp and CutMix. With mixup_alpha or cutmix_alpha set, each finished batch (its n delivered
 * samples, after every per-sample op, at the output dtype and layout) goes through one op of
 * torchvision's reference recipe (references/classification/transforms.py RandomMixup and
 * RandomCutmix with p = 1, one of the two per batch as RandomChoice picks; transforms.v2.MixUp
 * and CutMix compute the same), with the batch's words in place of torch's generator. The
 * batch's key is K = number * world + rank (its global position in the epoch; the batches of an
 * epoch resumed with `consumed` are counted from 0 again), and its word k is
 * g(k) = shr_mix(seed, epoch, K, SHR_SALT_MIX + k), 64 bits:
 *   op: CutMix where only cutmix_alpha is set, MixUp where only mixup_alpha is, and with both
 *     CutMix iff g(0) is odd.
 *   lambda ~ Beta(alpha, alpha) of that op's alpha: X / (X + Y) of Gamma(alpha) variates drawn
 *     by Marsaglia and Tsang's method from words 16.. (X) and 216.. (Y) (the distribution is
 *     torch's, the values are not).
 *   Partner: sample i mixes with sample i - 1, sample 0 with sample n - 1 (batch.roll(1, 0)).
 *   MixUp: x_i = x_i * lam + x_partner * (1 - lam), each product and the sum rounded to the
 *     dtype, computed in float32 with lam and 1 - lam as float32 (torch >= 2's mul_ and add_
 *     on the tensor; for float16 torch 1.x rounded the scalars to half first).
 *   CutMix: r_x = g(1) % width, r_y = g(2) % height, r = 0.5 * sqrt(1 - lam),
 *     r_w_half = (int)(r * width), r_h_half = (int)(r * height), x1 = max(r_x - r_w_half, 0),
 *     y1 = max(r_y - r_h_half, 0), x2 = min(r_x + r_w_half, width), y2 = min(r_y + r_h_half,
 *     height); rows y1 .. y2 - 1, columns x1 .. x2 - 1 of every sample are its partner's (taken
 *     before any change), and lam = 1 - (x2 - x1) * (y2 - y1) / (width * height) in double.
 *   Soft labels (float32, n x num_classes): row i is onehot(label_i) * (float)lam +
 *     onehot(label_partner) * (float)(1 - lam) in float32, the final lam.
 * shr_batch.mix records the op, both lambdas and the box. The draws depend only on (seed, epoch,
 * K): the same at every thread count and after a resume. A sample's label outside
 * [0, num_classes) fails the batch (SHR_EINVAL naming it). The dtype must be float32 or float16
 * and the dataset a classification one (not a detection dataset, and with classes or
 * num_classes): shr_open refuses the rest with SHR_EINVAL. */
#define SHR_SALT_MIX 0x6d697800u        /* "mix\0": + 0 .. 415 */

typedef enum {
    SHR_MIX_NONE = 0,           /* no mixing (MixUp and CutMix off) */
    SHR_MIX_MIXUP,
    SHR_MIX_CUTMIX
} shr_mix_op;

/* What MixUp / CutMix did to one batch (shr_batch.mix). */
typedef struct {
    shr_mix_op op;
    double lam_drawn;           /* the Beta(alpha, alpha) draw */
    double lam;                 /* the soft labels' weight of each sample's own label: lam_drawn
                                 * for MixUp, 1 - box area / image area for CutMix */
    uint32_t x1, y1, x2, y2;    /* CutMix: columns x1 .. x2 - 1, rows y1 .. y2 - 1 came from the
                                 * partner (x1 == x2 or y1 == y2: an empty box); MixUp: 0 */
} shr_mix_record;

/* One batch. Every pointer is owned by the reader and valid until the batch is passed to
 * shr_release (or the reader is closed). data has room for batch_size samples; in a short last
 * batch the bytes after the first n samples are unspecified. data is aligned to 4096 bytes. */
typedef struct {
    uint8_t *data;              /* n * height * width * channels elements of dtype, in layout
                                 * (uint8 NHWC by default; cast to float * or uint16_t *) */
    int64_t *labels;            /* n labels */
    int64_t *indices;           /* n dataset indices (positions in the dataset) */
    int64_t *sources;           /* n source indices (input image of each sample) */
    const shr_params *params;   /* n samples' transform parameters */
    uint32_t n;                 /* samples in this batch (batch_size, or fewer in the last) */
    uint32_t height, width, channels;
    shr_dtype dtype;
    shr_layout layout;
    uint64_t epoch;             /* epoch this batch belongs to */
    uint64_t number;            /* its position in the epoch (this rank's batches: 0, 1, ...) */
    int pinned;                 /* data is CUDA pinned host memory (labels, indices and sources
                                 * are pinned too wherever it can be had) */
    /* Samples of this batch's plan not delivered as planned (on_error skip or substitute; 0
     * with fail), nbad entries each, in plan order: */
    uint32_t nbad;
    const int64_t *bad_indices;     /* the dataset index that could not be read */
    const int32_t *bad_errors;      /* why: SHR_EHASH (verify_samples), SHR_ETRUNC, EIO, ... */
    const int32_t *bad_positions;   /* substitute: the position in this batch of the sample
                                     * that took its place; skip: -1 */
    /* Detection datasets (shr_info.targets; see "Targets" below): the target of each delivered
     * sample, its boxes moved by that sample's read-time geometry. NULL, all of them, for a
     * classification dataset. Sample i's boxes are entries target_offsets[i] ..
     * target_offsets[i + 1] - 1 of the flat arrays; target_offsets[n] boxes in all.
     * shr_batch_target gives one sample's view. */
    const int64_t *target_offsets;      /* n + 1, target_offsets[0] = 0 */
    const float *target_boxes;          /* 4 per box: x1, y1, x2, y2 in the delivered sample's
                                         * pixels (edges: 0 <= x1 < x2 <= width) */
    const int64_t *target_labels;       /* category ids, as stored */
    const float *target_area;           /* the stored area times the resize's sx * sy */
    const uint8_t *target_iscrowd;      /* 0 or 1 */
    const int64_t *target_image_ids;    /* n: each sample's image id */
    const uint32_t *target_dropped;     /* n: boxes of each sample the read-time geometry dropped */
    const uint32_t *target_orig_sizes;  /* 2 n: each source image's width and height */
    /* MixUp / CutMix (see "MixUp and CutMix" above): the soft labels, n * num_classes float32
     * (row i: sample i), and what was done; NULL, 0 and op SHR_MIX_NONE without them. labels
     * keeps each sample's own label. */
    const float *soft_labels;
    uint32_t num_classes;
    shr_mix_record mix;
    /* A mixture (shr_open_mixture): n entries, the stream each sample came from (indices are
     * then positions in that stream's dataset, bad_indices too); NULL for one dataset. */
    const int64_t *streams;
    /* Segmentation datasets (see "Masks and keypoints"): each delivered instance's mask and
     * keypoints, moved with the pixels; NULL where the dataset has none. shr_batch_segm gives
     * one sample's view. */
    const uint8_t *target_masks;        /* sample i's at byte target_mask_offsets[i] */
    const int64_t *target_mask_offsets; /* n + 1 */
    const uint32_t *target_mask_sizes;  /* 2 n: each sample's mask width and height */
    const float *target_keypoints;      /* num_keypoints * 3 per box (x, y, v), as the boxes */
    uint32_t num_keypoints;
    /* 1 for a semantic segmentation dataset (label maps, shardc build --masks): target_masks
     * then holds one label map per sample (labels of label_map_bytes each, the ignore index in
     * the padding) and there are no boxes. */
    uint32_t label_map;
    uint32_t label_map_bytes;           /* label_map: 1 (uint8) or 2 (uint16) a value */
} shr_batch;

/* The whole reader state: open a reader with these in its options to continue exactly here. */
typedef struct {
    uint64_t seed, epoch, cursor;
    /* Positions of the epoch's global sequence consumed by all ranks together (see "Resuming on
     * another world size"): pass it as shr_options.consumed, with cursor 0, to resume on any
     * world size; cursor alone resumes on the same world size, as before. */
    uint64_t consumed;
} shr_state;

/* What read-time recovery did over the reader's life (counted as batches are delivered). */
typedef struct {
    uint64_t replaced;          /* samples replaced by a substitute */
    uint64_t skipped;           /* samples left out */
} shr_recovery;

typedef struct shr_reader shr_reader;

/* Defaults as documented in shr_options, for a struct of `size` bytes (the caller's
 * sizeof(shr_options)): writes only those bytes and sets o->size. Use the macro. */
SHR_API void shr_options_init_size(shr_options *o, size_t size);
#define shr_options_init(o) shr_options_init_size((o), sizeof *(o))

/* The numeric options of shr_options, scalars and [min, max] pairs, and its choices (enums),
 * one row each, as the library checks them: the default shr_options_init sets, the range or
 * the names shr_open accepts (a value outside them is SHR_EINVAL, the message naming `name`,
 * the field and the range or names), and the Python Loader's keyword for it. The rows are the
 * library's one description of these options: its defaults and checks are made from them, and
 * so is the options reference of its docs. */
typedef enum {
    SHR_OPT_RANGE,              /* lo <= v <= hi */
    SHR_OPT_AT_LEAST,           /* lo <= v */
    SHR_OPT_BELOW,              /* lo <= v < hi */
    SHR_OPT_ZERO_OR_RANGE,      /* v == 0 or lo <= v <= hi */
    SHR_OPT_ABOVE,              /* lo < v <= hi */
    SHR_OPT_OPEN,               /* lo < v < hi */
    SHR_OPT_CHOICE              /* an enum: a value whose name in `choices` is not "" */
} shr_opt_form;

typedef struct {
    const char *field;          /* the shr_options field */
    const char *name;           /* the public name: the Loader's keyword [and its key] */
    const char *python_default; /* the keyword's default as the Loader writes it, or NULL */
    int is_float;               /* a double field; else an unsigned integer (uint32_t, uint64_t) */
    /* 1: a scalar; 2: a double[2], each value in the range, and with `ordered` min <= max; 4:
     * a double[4], two such pairs (affine_shear: x, then y) */
    int count, ordered;
    shr_opt_form form;
    double def[2];              /* the default (def[1]: a pair's max, each pair's; a scalar's,
                                 * def[0]) */
    double lo, hi;              /* the range (hi unused by SHR_OPT_AT_LEAST) */
    const char *when;           /* when the range is checked, in words; "" always */
    const char *doc;            /* one line */
    /* SHR_OPT_CHOICE: the names of the enum's values 0 .. hi in order, "" for a value not
     * accepted, then NULL; else NULL */
    const char *const *choices;
} shr_option_info;

/* The rows, *count of them; the table is static and lives as long as the library. */
SHR_API const shr_option_info *shr_option_table(size_t *count);
/* The row of shr_options field `field` (its name in the struct, e.g. "color_brightness"), or
 * NULL when the table has none. */
SHR_API const shr_option_info *shr_option_find(const char *field);

/* Whether v (r->count values: a scalar or a choice's value, a pair's min and max, or two
 * pairs') is in row r's range: 0, or SHR_EINVAL with the refusal shr_open would make written
 * to msg (may be NULL), naming `name` in place of r->name where it is not NULL: a
 * front end's keyword that sets r's field under another name (the Python Loader's max_threads,
 * the threads of threads='auto') states the table's range in its own terms. The condition
 * under which shr_open checks r is not looked at. */
SHR_API int shr_option_check(const shr_option_info *r, const char *name, const double *v,
                             shr_msg *msg);

/* A choice row's value for the name `given` (exactly as r->choices writes it: a front end folds
 * case or converts its own forms first): 0 with *value set, or SHR_EINVAL with the refusal
 * written to msg (may be NULL), "NAME (FIELD) must be one of A, B, C, not 'GIVEN'",
 * naming `name` in place of r->name where it is not NULL. SHR_EINVAL for a row that is not a
 * choice. */
SHR_API int shr_option_choose(const shr_option_info *r, const char *name, const char *given,
                              int *value, shr_msg *msg);

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
 * reader then reads the cached files. Raw and hdf5 datasets.
 * shr_open of a single dataset (raw; hdf5 only with samples of one size and no targets)
 * returns once the manifest is fetched instead (and, where samples vary in size or carry
 * targets, each raw shard's header and index, fetched with Range requests and checked): a
 * thread downloads the shards in the order the sampler reads them (prefetch_shards ahead), a
 * worker needing a shard not yet there waits for it, and with cache_limit the folder stays
 * within the limit (shared safely by processes using one cache). A shard that stays
 * unavailable follows on_error like a damaged local one. */

/* What the cache of a reader over a dataset at a URL read as its shards arrive has done:
 * shr_cache_stats. All zero for other readers. */
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
    const char *dir;            /* the dataset's cache folder (valid while r is open), or NULL */
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
 *     the scale ops:     see "Scale" (their own clip rectangle and mirror width)
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
 * "Targets" and "Scale"), in double, rounded to float32; one stored with v = 0 or moved outside
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
 * from any thread, or while the caller holds their sample's shard (shr_dataset_hold). */
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

#ifdef __cplusplus
}
#endif

#endif
