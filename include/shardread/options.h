/* shardread/options.h - what a reader is opened with and what it delivers: the orders, access
 * modes, dtypes and layouts, the augmentations (exact to torchvision), shr_options, the table of
 * its numeric options and choices, a batch and its parameters, the reader's state and recovery
 * counts. A part of shardread.h, which includes it: a program includes shardread.h alone. */
#ifndef SHARDREAD_H
#error "include shardread.h, not its parts"
#endif
#ifndef SHARDREAD_OPTIONS_H
#define SHARDREAD_OPTIONS_H

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
    /* A dataset with keypoints (shardread.h, "Masks and keypoints"): the horizontal flip's
     * left/right swap, num_flip_indices (= the dataset's K) entries each < K: a flipped sample's keypoint j
     * is the stored keypoint flip_indices[j], mirrored. NULL (the default): a flip of a
     * keypoint dataset is refused. Copied by shr_open. */
    const uint32_t *flip_indices;
    uint32_t num_flip_indices;
    /* A label-map dataset (shardread.h, "Masks and keypoints"): the bytes of each delivered
     * label value,
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
    /* Segmentation datasets (shardread.h, "Masks and keypoints"): each delivered instance's
     * mask and
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

#endif
