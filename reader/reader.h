/* reader.h - the reader's state, shared by the files of the reader (internal, not installed):
 * shardread.c (open and close, the ring, consuming: the design essay is there), options.c (the
 * options' defaults and checks), info.c (state, counts and info of an open reader, a batch's
 * targets), assemble.c (what a worker does to fill a batch, no lock held) and random_access.c
 * (shr_dataset, which shares none of it).
 */
#ifndef SHR_READER_H
#define SHR_READER_H

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "shardread.h"
#include "augment_read.h"
#include "boxes.h"
#include "dataset.h"
#include "direct.h"
#include "mix.h"
#include "mixture.h"
#include "remote.h"
#include "resample.h"
#include "ring.h"
#include "sampler.h"
#include "stats.h"
#include "transform.h"
#include "tune.h"

/* the target sections the reader moves with the pixels: masks, keypoints, label maps */
#define SEGM_EXT (FMT_TARGET_EXT_MASKS | FMT_TARGET_EXT_KEYPOINTS | FMT_TARGET_EXT_MAP)
#define SHR_BOUNCE_BYTES (1u << 20)     /* per worker: O_DIRECT bounce buffer, compressed bytes */
#define SHR_MAX_PREFETCH 65536u         /* the most slots a ring has */

/* A dataset at a URL read as its shards arrive (remote_open.c): the reader's one dataset, or a
 * stream of a mixture; its samples are the reader's global indices [first, end). */
typedef struct shr_lazy_part {
    rmt_lazy *z;
    fmt_dataset *ds;            /* r->ds, or the stream's mx->ds[s] */
    uint64_t first, end;
    shr_on_error on_error;
    size_t cap;                 /* most distinct shards of it one batch touches */
    uint64_t *plan_idx;         /* its download thread's batch scratch (batch_size) */
    struct shr_reader *r;
} shr_lazy_part;

typedef struct {
    uint32_t part;              /* r->lz[part] */
    size_t shard;
} shr_held;

typedef struct {
    shr_batch b;                /* first member: shr_release maps a batch back to its slot */
    void *data;                 /* from shr_host_alloc, b.pinned says how */
    int64_t *arrays;            /* labels, indices, sources: 3 * batch_size, pinned as data is
                                 * (so labels.cuda(non_blocking=True) is asynchronous too) */
    int arrays_pinned;
    shr_params *params;         /* batch_size */
    int64_t *bad_idx;           /* batch_size: b.bad_indices */
    int32_t *bad_err, *bad_pos; /* batch_size each: b.bad_errors, b.bad_positions */
    int rc;                     /* filled: result of the fill */
    fmt_msg msg;                /* filled with rc != 0: what failed */
    /* detection datasets: the per-sample arrays (batch_size each; offsets batch_size + 1) and
     * the per-box ones, which the filling worker grows to the batch's boxes (tcap of them) */
    int64_t *t_off, *t_image;
    uint32_t *t_dropped, *t_orig;
    fmt_target *t_stored;       /* the batch's stored records, read once per fill */
    float *t_boxes, *t_area;
    int64_t *t_labels;
    uint8_t *t_crowd;
    size_t tcap;
    /* segmentation datasets: the kept boxes' stored positions and keypoints (tcap of them),
     * the masks (mcap bytes), their offsets (batch_size + 1) and sizes (2 batch_size), the
     * scratch (scap bytes: a decoded stored 16-bit map, and the warps' room) and the warp's
     * tables (xycap entries) */
    uint32_t *t_kept;
    float *t_kp;
    uint8_t *t_masks, *t_scratch;
    int64_t *t_moff;
    uint32_t *t_msize;
    int32_t *t_xy;
    size_t mcap, scap, xycap;
    float *soft;                /* MixUp / CutMix: batch_size * num_classes soft labels */
    int64_t *streams;           /* a mixture: batch_size, each sample's stream */
} shr_slot;

typedef struct {
    struct shr_reader *r;
    pthread_t thread;
    uint64_t *idx;              /* the batch's dataset indices, batch_size */
    void *bounce;               /* PREAD, DIRECT: FMT_DIRECT_ALIGN-aligned scratch (the O_DIRECT
                                 * bounce buffer; where compressed payloads are read) */
    uint8_t *sample;            /* PREAD/DIRECT crop/pad: room for the largest stored sample */
    size_t sample_cap;
    uint8_t *staged;            /* a uint8 HWC sample at the output size, before conversion */
    fmt_rs_scratch *rs;         /* rrc: the resampler's per-thread state */
    shr_direct *direct;         /* DIRECT, samples at the output size: the batch's reads at once */
    shr_direct_item *items;     /* batch_size */
    void *mix_keep;             /* MixUp / CutMix: one sample at the output dtype */
    uint32_t id;                /* 0 .. threads - 1: the ring parks the highest first */
    shr_wstats st;              /* its counts (stats.h) */
    shr_held *held;             /* a dataset at a URL: the shards the batch holds */
    size_t nheld, held_cap;
} shr_worker;

struct shr_reader {
    shr_options o;              /* validated, prefetch resolved */
    fmt_dataset *ds;
    shr_sampler *sampler;
    shr_mixture *mx;            /* a mixture (shr_open_mixture): its streams; NULL for one dataset */
    uint32_t height, width, channels;
    size_t sample_bytes, batch_bytes;   /* at the output dtype */
    size_t staged_bytes;        /* one uint8 HWC sample at the output size */
    size_t sample_max;          /* largest stored sample */
    uint32_t src_w, src_h;      /* every stored sample's size where all share one (the
                                 * manifest's, or found in the index at open), else 0 x 0 */
    int uniform;                /* every sample is stored at the output size */
    int convert;                /* the output is not uint8 NHWC: samples go through out */
    int recovers;               /* on_error skip or substitute (a mixture's: of some stream) */
    size_t direct_shards;       /* shards read with O_DIRECT (a mixture's: of every stream) */
    shr_tf_rrc rrc;             /* o.rrc: the ranges */
    fmt_rs_cache *rs_cache;     /* o.rrc: coefficient tables shared by the workers */
    uint32_t max_w, max_h;      /* o.rrc: the largest stored width and height */
    shr_tf_out out;             /* dtype, layout, normalisation */
    shr_aug aug;                /* the augmentations after the crop and flip */
    int targets;                /* a detection dataset: batches carry moved targets */
    shr_box_geom boxes;         /* how they are moved */
    uint32_t segm_ext;          /* FMT_TARGET_EXT_MASKS | _KEYPOINTS, or _MAP, the batches
                                 * carry (SEGM_EXT: those bits) */
    uint32_t segm_k;            /* keypoints per instance */
    uint16_t ignore_index;      /* FMT_TARGET_EXT_MAP: the label maps' padding */
    uint32_t map_bytes;         /* FMT_TARGET_EXT_MAP: 1 or 2 bytes a delivered label */
    uint32_t *flip_idx;         /* segm_k entries: the flip's left/right swap (or NULL) */
    shr_mixer mix;              /* MixUp / CutMix on finished batches */
    uint64_t nb;                /* batches per epoch (but the resumed one: sampler.h) */
    uint64_t e0, c0;            /* stream batch 0 is batch c0 of epoch e0 (c0 < nb0) */
    uint64_t nb0;               /* batches of epoch e0 */
    shr_lazy_part *lz;          /* datasets at URLs read as their shards arrive (one dataset's,
                                 * or a mixture's streams at URLs), else NULL */
    uint32_t nlz;

    shr_ring ring;              /* who owns which slot; the only state the threads share */
    shr_slot *slots;            /* ring slot i is slots[i] */
    uint32_t nslots;

    shr_worker *workers;
    uint32_t nworkers;          /* started */

    /* consumer side: touched only by the thread calling shr_next */
    uint64_t epoch, cursor;
    int failed;
    shr_recovery recovery;
    fmt_msg err;                /* shr_last_error(r) */
    fmt_msg unpinned;           /* why a batch buffer is ordinary memory (shr_pinned): the
                                 * first failed cudaHostAlloc of the open; "" otherwise */
    fmt_msg *why;               /* during shr_open_with only: its message, until the caller's
                                 * msg is given it on failure */
    uint64_t c_batches, c_wait_ns;      /* delivered, and waited for (stats.h: relaxed) */
    shr_tune tune;              /* threads_auto (tune.h) */
    int stats_on;               /* stage timing (shr_stats_enable; relaxed) */
};

/* remote_open.c: shr_dataset_open_flags of a dataset at a URL (rmt_is_url): the URL resolved
 * to its cached directory (remote.h), which it then opens; shr_open and every stream of a
 * mixture resolve theirs in shr_open_source */
int shr_dataset_open_url(shr_dataset **out, const char *url, shr_access access, unsigned flags,
                         fmt_msg *msg);
/* ... in the cache root cache (NULL: the default): shr_dataset_open_remote without a limit */
int shr_dataset_open_url_cache(shr_dataset **out, const char *url, const char *cache,
                               shr_access access, unsigned flags, fmt_msg *msg);

/* options.c: o (NULL: the defaults) as this library's full shr_options: the caller's o->size
 * bytes over the defaults. SHR_EINVAL, with the reason in why, for a size of 0 or one larger than
 * ours. */
SHR_INTERNAL int shr_options_full(const shr_options *o, shr_options *full, fmt_msg *why);

/* options.c: full options (shr_options_full) checked field by field, as shr_open and
 * shr_draw_params check them: SHR_EINVAL, with the reason in m, for the first one refused. */
SHR_INTERNAL int shr_check_options(const shr_options *o, fmt_msg *m);
/* One value of the scalar (or choice) row of options.def for field, checked alone, whatever the
 * row's condition: 0, or SHR_EINVAL with the row's refusal in m (naming `name`, NULL: the
 * row's). For options given again per part, as a mixture's streams give on_error. */
SHR_INTERNAL int shr_check_option_value(const char *field, const char *name, double v,
                                        fmt_msg *m);

/* Open the dataset at path as every reader opens one (a single dataset, or a stream of a
 * mixture): a URL through its cached directory (cache: NULL for the default, see
 * "Datasets at URLs"); with on_error skip or substitute, shards that do not open are left
 * closed. dir (NULL: not wanted): the local directory opened, malloc'd. */
SHR_INTERNAL int shr_open_source(fmt_dataset **ds, const char *path, const char *cache,
                                 shr_access access, shr_on_error on_error, char **dir,
                                 fmt_msg *msg);

/* shr_open over the mixture mx (NULL: the dataset dir), which it owns from the call on (freed
 * with the reader, or on failure); mx->ds[0] is the reader's dataset. */
SHR_INTERNAL int shr_open_with(shr_reader **out, const char *dir, const shr_options *opt,
                               shr_mixture *mx, fmt_msg *msg);

/* remote_open.c: datasets at URLs read as their shards arrive (r->lz: the reader's one dataset,
 * or each stream of a mixture at a URL). shr_lazy_open_url fetches url's manifest and opens *ds
 * without shards with the session *z (0), or returns 1 when the dataset cannot be read so and no
 * cache_limit asks for it (then it is made whole first: shr_open_source), or the error (msg).
 * shr_lazy_open does so for the reader's one dataset (the error in r->why), and shr_lazy_add
 * makes a session one of r->lz (0 or ENOMEM, z then the caller's).
 * shr_lazy_start (once the sampler exists) shares cache_limit among the parts and starts the
 * downloads; shr_lazy_later: some part's open read its shards' skeletons, which the downloads'
 * evictions may not race (started just before the workers then). A worker brackets each batch k
 * with shr_lazy_acquire (its shards present, checked, loaded and held; an unavailable one fails
 * the batch, or is left to its stream's on_error) and shr_lazy_release; shr_lazy_hold adds the
 * shard of a substitute candidate if the cache holds it now. shr_lazy_cancel wakes waiting
 * workers (before they are joined); shr_lazy_close stops the sessions (before the datasets
 * close). */
SHR_INTERNAL int shr_lazy_open_url(rmt_lazy **z, fmt_dataset **ds, const char *url,
                                   const char *cache, shr_access access, uint64_t cache_limit,
                                   fmt_msg *msg);
SHR_INTERNAL int shr_lazy_open(shr_reader *r, const char *url);
SHR_INTERNAL int shr_lazy_add(shr_reader *r, rmt_lazy *z, fmt_dataset *ds, uint64_t first,
                              shr_on_error on_error);
SHR_INTERNAL int shr_lazy_start(shr_reader *r);
SHR_INTERNAL int shr_lazy_later(const shr_reader *r);
SHR_INTERNAL int shr_lazy_acquire(shr_worker *w, uint64_t k, uint32_t n, fmt_msg *msg);
SHR_INTERNAL int shr_lazy_hold(shr_worker *w, uint64_t idx);
SHR_INTERNAL void shr_lazy_release(shr_worker *w, uint64_t k);
SHR_INTERNAL void shr_lazy_cancel(shr_reader *r);
SHR_INTERNAL void shr_lazy_close(shr_reader *r);

/* mixture.c: the streams' geometry against the reader's (after set_geometry: the same channels
 * and kind, each deliverable at the output size), the largest stored sample of all; and the
 * largest stored width and height of streams 1.. into *w, *h (RandomResizedCrop's tables). */
SHR_INTERNAL int shr_mixture_geometry(shr_reader *r, fmt_msg *m);
SHR_INTERNAL void shr_mixture_largest(const shr_reader *r, uint32_t *w, uint32_t *h);
/* mixture.c: the reader takes the sessions of the streams at URLs read as their shards arrive
 * (shr_lazy_add). 0, or ENOMEM with r->why set. */
SHR_INTERNAL int shr_mixture_lazy(shr_reader *r);

#endif
