/* bench.h - what the files of shardbench share: its types, the option table and the helpers one
 * command borrows from another.
 *
 * Errors: a function here that fails prints its one line on stderr ("shardbench: ...", naming the
 * dataset and the reason) and returns an error code; its caller prints nothing more and passes
 * the failure on as an exit status. The exceptions print nothing and leave it to the caller: the
 * parsers (sb_parse_*: -1, and the caller's usage error), sb_folder_order, the fill functions
 * (sb_fill_fn: a code and a shr_msg, counted by the pool) and the batch sources' next (the caller
 * prints their code or last_error). */
#ifndef SB_BENCH_H
#define SB_BENCH_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "shardread.h"
#include "step.h"
#include "shardc.h"
#include <xxhash.h>

#define SB_EXIT_OK 0
#define SB_EXIT_FAIL 1
#define SB_EXIT_USAGE 2
#define SB_PAGE 4096u
#define SB_QUASI_BLOCK 1024u            /* folder quasi order: files per stand-in "shard" */
#define SB_QUASI_WINDOW 4u              /* blocks shuffled together, as the reader's default */
/* ResNet-50 training on an A100: 11.7 ms per batch of 256. The default step keeps that rate
 * (about 21,900 images/s) whatever the batch size. */
#define SB_DEFAULT_STEP_MS 11.7
#define SB_DEFAULT_STEP_BATCH 256.0
#define SB_MAX_DEPTH 64                 /* eviction walk: deeper trees are not datasets */
#define SB_MANIFEST "manifest.json"     /* a shardc dataset's, in its directory (docs/FORMATS.md) */

typedef struct {
    double wall, cpu;           /* seconds: monotonic clock; user + system of the whole process */
} sb_mark;

typedef struct {
    double wall_s, cpu_s;
    uint64_t images, bytes;     /* images delivered and their pixel bytes */
} sb_span;

typedef enum { SB_SHARDS, SB_FOLDER } sb_kind;

/* The reader's read-time transforms, as read and train take them (transform.c). */
typedef struct {
    int rrc;                    /* --rrc */
    double scale[2], ratio[2];
    int flip;                   /* --flip[=P] */
    double flip_p;
    shr_filter filter;          /* --interpolation */
    shr_dtype dtype;            /* --dtype */
    int dtype_given;
    shr_layout layout;          /* --layout */
    shr_norm normalize;         /* --normalize */
    float mean[4], std[4];
    /* the augmentations (--color-jitter .. --cutmix): their shr_options fields, from
     * shr_options_init and the options given; augment counts the options given */
    shr_options aug;
    int augment;
} sb_tf_opts;

#define SB_TF_USAGE                                                                              \
    "      --rrc [SMIN:SMAX[:RMIN:RMAX]]\n"                                                       \
    "                      torchvision's RandomResizedCrop, drawn per sample and epoch: area\n"   \
    "                      fraction SMIN..SMAX (default 0.08:1), aspect ratio RMIN..RMAX\n"       \
    "                      (default 0.75:1.3333), resized to --size (shardc datasets only)\n"    \
    "      --interpolation F  its filter: nearest, box, bilinear (default), hamming, bicubic,\n" \
    "                      lanczos\n"                                                              \
    "      --flip[=P]      mirror with probability P (default 0.5)\n"                             \
    "      --dtype T       delivered pixels: u8 (default), f32 or f16\n"                          \
    "      --layout L      nhwc (default) or nchw\n"                                              \
    "      --normalize [dataset|M,M,M/S,S,S]\n"                                                   \
    "                      (x - mean) / std per channel on the 0..255 scale, with the dataset's\n" \
    "                      statistics (default) or the given ones; implies --dtype f32 unless\n" \
    "                      f16 is asked for\n"                                                   \
    "    augmentations, exact to torchvision (see shardread.h, \"Augmentations\"):\n"           \
    "      --color-jitter B,C,S,H  ColorJitter(B, C, S, H) (each 0 for off)\n"                   \
    "      --grayscale P   RandomGrayscale(P)\n"                                                 \
    "      --rotation D    RandomRotation(D)\n"                                                  \
    "      --affine D[,T[,SMIN,SMAX[,SH]]]  RandomAffine(D, translate (T, T), scale (SMIN,\n"   \
    "                      SMAX), shear SH)\n"                                                   \
    "      --auto-augment P  ta_wide (TrivialAugmentWide), rand_augment (RandAugment(2, 9))\n" \
    "                      or imagenet (AutoAugment)\n"                                          \
    "      --erase P       RandomErasing(P) on the delivered values\n"                           \
    "      --mixup A, --cutmix A  MixUp(A) / CutMix(A) per batch (one of the two when both;\n"  \
    "                      needs a float --dtype or --normalize)\n"

typedef struct {
    uint32_t threads, batch, epochs;
    shr_order order;
    shr_access access;
    uint64_t seed;
    uint32_t width, height, channels;   /* folder output; for shardc datasets only with --size */
    int have_size;
    int cold, memcpy_baseline, json;
    int checksum;               /* digest the delivered batches (indices, labels, pixels) */
    sb_tf_opts tf;              /* read-time transforms (shardc datasets) */
    shr_on_error on_error;      /* --on-error: what a sample that cannot be read does */
    int verify_samples;         /* --verify-samples */
} sb_read_opts;

/* One row of the report. */
typedef struct {
    const char *dataset;
    char format[32];            /* "raw" (the manifest's backend), "folder", "memcpy" */
    uint32_t width, height, channels;
    uint32_t epochs;
    sb_span *spans;             /* one per epoch */
    uint64_t errors;            /* folder files that failed to decode (skipped) */
    shr_recovery recovery;      /* samples the reader replaced or skipped (--on-error) */
    double resident;            /* --cold: largest fraction of pages found cached after eviction */
    XXH3_state_t *digest;       /* --checksum: over the batch stream, in delivery order */
    uint64_t checksum;
    int have_ring;              /* libshardread rows: its ring's memory, as shr_info gives it */
    int pinned;
    uint64_t ring_bytes;
} sb_row;

/* The dataset order the reader delivered, per epoch, for the memcpy baseline to replay. */
typedef struct {
    uint64_t per_epoch;         /* shr_samples_per_epoch */
    uint64_t *idx;              /* epochs * per_epoch indices */
    uint64_t *count;            /* per epoch: how many were recorded */
} sb_trace;

typedef struct sb_job sb_job;

typedef int (*sb_fill_fn)(sb_job *job, size_t worker, size_t item, uint8_t *dst, shr_msg *msg);

struct sb_job {
    size_t n;                   /* items this epoch */
    uint32_t batch;
    size_t slot;                /* bytes per sample in a batch buffer */
    sb_fill_fn fill;
    atomic_size_t next_batch;
    atomic_uint_fast64_t images, bytes, errors;
    pthread_mutex_t mu;         /* guards first_error */
    char first_error[512];
    /* folder */
    const shc_input_list *in;
    const size_t *order;
    shc_renderer **rz;          /* one per worker */
    /* memcpy */
    const shr_dataset *ds;
    const uint64_t *idx;
};

typedef struct sb_pool sb_pool;

typedef struct {
    sb_pool *pool;
    size_t id;
    uint8_t *buf;               /* batch * slot bytes */
    uint64_t sink;
    pthread_t tid;
} sb_worker;

/* Threads that live for a whole run, as the reader's workers do, so that thread start-up is not
 * charged to every epoch: the main thread publishes an epoch by bumping `generation` and waits
 * until `busy` drops to zero. */
struct sb_pool {
    sb_job *job;
    sb_worker *ws;
    uint32_t started;
    pthread_mutex_t mu;
    pthread_cond_t go, idle;
    uint64_t generation;
    uint32_t busy;
    int quit;
};

typedef struct {
    int json;
    int name_width;
    int header_done;
    double first_rate;          /* images/s of the first row, for "vs first" */
    int have_first;
} sb_report;

/* The options of every command, in one table (options.c): long-only options are numbered from
 * 256; each command takes the ones its SB_CMD_* bit names. */
enum {
    OPT_ORDER = 256, OPT_SEED, OPT_COLD, OPT_SIZE, OPT_ACCESS, OPT_MEMCPY, OPT_JSON, OPT_CHECKSUM,
    OPT_MODEL, OPT_STEP_MS, OPT_SIDE, OPT_HIDDEN, OPT_LR, OPT_DEVICE, OPT_PREFETCH, OPT_TIMELINE,
    OPT_PLOT, OPT_RRC, OPT_FLIP, OPT_INTERP, OPT_DTYPE, OPT_LAYOUT, OPT_NORMALIZE, OPT_ON_ERROR,
    OPT_VERIFY, OPT_JITTER, OPT_GRAYSCALE, OPT_ROTATION, OPT_AFFINE, OPT_AUTO_AUGMENT, OPT_ERASE,
    OPT_MIXUP, OPT_CUTMIX
};
enum { SB_CMD_READ = 1, SB_CMD_TRAIN = 2, SB_CMD_COMPARE = 4 };

typedef struct {
    char *path;
    sb_kind kind;
} sb_target;

/* Where batches come from: libshardread, or the folder feed below. */
typedef struct {
    int (*next)(void *ctx, const shr_batch **b);
    void (*release)(void *ctx, const shr_batch *b);
    const char *(*last_error)(void *ctx);
    void *ctx;
} sb_source;

typedef struct {
    shr_batch b;
    int state;                  /* SB_SLOT_* (feed.c), under the queue's lock */
} sb_slot;

/* The folder feed's queue (feed.c): the decoders claim stream batches in order, each into a free
 * slot, and the consumer takes them in the same order, as a DataLoader's workers and its
 * iterator do. Every field under mu. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t room;        /* workers: a free slot, a higher limit, or stop */
    pthread_cond_t ready;       /* the consumer: its next batch filled */
    int live;                   /* mu and the conditions are initialised */
    uint32_t *free_slots, nfree;
    uint32_t *pending;          /* pending[k % depth]: the slot of claimed, undelivered batch k */
    uint64_t next_claim, next_deliver;
    uint64_t limit;             /* batches below it may be claimed */
    uint32_t held;              /* slots the consumer holds */
    int stop;
} sb_queue;

typedef struct sb_feed sb_feed;

typedef struct {
    sb_feed *feed;
    size_t id;
    pthread_t tid;
} sb_feed_worker;

struct sb_feed {
    sb_job job;                 /* sb_fill_decode's context */
    shc_input_list *in;
    size_t *order;
    shc_renderer **rz;
    shr_order kind;
    uint64_t seed;
    sb_slot *slots;
    uint32_t depth;
    sb_feed_worker *ws;
    uint32_t nthreads, started;
    sb_queue q;                 /* queue slot i is slots[i]; stream batch k: feed.c */
    int pinned;                 /* every slot's pixels are CUDA pinned memory (shr_host_alloc) */
    shr_msg unpinned;           /* why not, where an allocation fell back: its reason */
    uint64_t ring_bytes;        /* the slots' buffers: pixels, labels, indices, sources */
    /* consumer side: touched only by the thread calling sb_feed_next */
    uint64_t epoch, nb;         /* the current epoch; batches per epoch */
    uint64_t take;              /* batches of the epoch delivered */
    int open;                   /* the epoch's order is drawn: workers may claim */
    shr_msg error;              /* why sb_feed_next failed (sb_feed_error) */
};

typedef struct {
    uint32_t threads, batch, epochs, prefetch;
    shr_order order;
    uint64_t seed;
    uint32_t width, height;
    int have_size;
    sb_step_opts step;
    const char *timeline;
    int json;
    sb_tf_opts tf;              /* read-time transforms (shardc datasets) */
    shr_on_error on_error;      /* --on-error */
    int verify_samples;         /* --verify-samples */
} sb_train_opts;

typedef struct {
    uint64_t images;
    double wall_s, wait_s, step_s;      /* epoch; inside next; inside the step's run call */
    sb_step_stats st;                  /* busy_s, H2D and the learning counters */
} sb_epoch;

typedef struct {
    const char *format;         /* "source" or a shardc format */
    char *dir;
    uint64_t bytes;
    uint64_t images_per_epoch;  /* what an epoch delivered */
    double ips, cpu;            /* steady state: images/s, CPU-s per image */
    double cold_ips;            /* one epoch, every file evicted first: images/s */
    double per_sample, gib;     /* bytes per sample; GiB for ImageNet's 1.28M images so stored */
    double cores, saved, util;
} sb_cmp_row;

typedef struct {
    char *work;
    uint32_t width, height, threads, batch, epochs;
    double step_ms;
    int json;
    const char *plot;
} sb_cmp_opts;

/* options.c */
/* msg's text (NULL: none wanted) printed from fmt, and rc returned: how a fill or a source says
 * why it failed. */
int sb_fail(shr_msg *msg, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* msg's text, or shr_strerror(rc) where msg has none. */
const char *sb_reason(const shr_msg *msg, int rc);
int sb_usage_error(const char *usage, const char *fmt, const char *arg);
/* "shardbench: out of memory" on stderr; returns ENOMEM. */
int sb_no_memory(void);
int sb_wants_help(int argc, char **argv);
const char *sb_order_name(shr_order o);
const char *sb_access_name(shr_access a);
int sb_parse_double(const char *s, double min, double max, double *out);

/* A number flag for a scalar row of the options table: arg parsed (a whole number for an
 * integer row) and checked against the row (shr_option_check): 0 with *out the value; else a
 * usage error ("--threads (threads) must be in 1..1024, not 2000"). */
int sb_parse_row(const char *usage, const char *flag, const char *field, const char *arg,
                 double *out);
/* A choice flag through the options table (shr_option_choose): arg, after the flag's own short
 * forms (alias: pairs of a short form and the table's name, then NULL) and, with fold, in any
 * case, is one of the row's names: 0 with *out its value; else a usage error
 * ("--order (order) must be one of sequential, random, quasi, not 'x' (also seq)"). */
int sb_parse_choice(const char *usage, const char *flag, const char *field, const char *arg,
                    const char *const *alias, int fold, int *out);
void sb_report_recovery(const char *dir, shr_reader *r, uint32_t epochs);
const struct option *sb_longopts(unsigned cmd);

/* The options read, train and compare share, parsed in one place: where each goes in the
 * command's own options (NULL where the command has no such field: its option table never
 * offers it). */
typedef struct {
    uint32_t *threads, *batch, *epochs;     /* -j, -b, -e */
    uint32_t *width, *height;               /* --size WxH or N */
    int *have_size;                         /* set by --size when not NULL */
    int *json;                              /* --json */
    shr_order *order;                       /* --order */
    uint64_t *seed;                         /* --seed */
    shr_on_error *on_error;                 /* --on-error */
    int *verify_samples;                    /* --verify-samples */
    sb_tf_opts *tf;                         /* the read-time transforms (transform.c) */
} sb_common;

/* Parse option c (getopt_long's answer, with optarg) that is not the command's own: one of
 * sb_common's, or ':' (a value missing) or anything else (an unknown option). 0 when it was
 * taken; otherwise the usage error's exit status, the message printed. */
int sb_common_option(int c, int argc, char **argv, const char *usage, const sb_common *co);

/* The sb_common of read's and train's options (x: an sb_read_opts or sb_train_opts), which
 * hold every shared option under the same names. */
#define SB_COMMON_OF(x)                                                                          \
    ((sb_common){.threads = &(x).threads, .batch = &(x).batch, .epochs = &(x).epochs,            \
                 .width = &(x).width, .height = &(x).height, .have_size = &(x).have_size,        \
                 .json = &(x).json, .order = &(x).order, .seed = &(x).seed,                      \
                 .on_error = &(x).on_error, .verify_samples = &(x).verify_samples,               \
                 .tf = &(x).tf})

/* The default -j: every online core. */
uint32_t sb_default_threads(void);

/* transform.c */
void sb_tf_init(sb_tf_opts *t);
int sb_tf_option(sb_tf_opts *t, int opt, int argc, char **argv, const char *usage);
int sb_tf_any(const sb_tf_opts *t);
void sb_tf_apply(const sb_tf_opts *t, shr_options *o);
const char *sb_tf_describe(const sb_tf_opts *t, char *buf, size_t len);
size_t sb_elem_size(shr_dtype d);

/* report.c */
sb_mark sb_mark_now(void);
void sb_span_close(sb_span *s, sb_mark from, sb_mark to);
/* 0, or ENOMEM (printed) */
int sb_row_init(sb_row *row, const char *dataset, const char *format, uint32_t epochs);
void sb_row_free(sb_row *row);
sb_span sb_row_measured(const sb_row *row);
double sb_rate(double x, double s);
void sb_report_row(sb_report *rep, const sb_read_opts *ro, const sb_row *row);
void sb_warn_resident(const sb_row *row);
double sb_now_s(void);
void sb_print_json_double(double v, const char *fmt);
double sb_pct(double x, double of);

/* evict.c */
void sb_evict_dataset(const char *dir, sb_row *row);
/* fn(file, its lstat, ctx) for path, when a regular file, or for every regular file below it
 * (links not followed, SB_MAX_DEPTH levels at most); what cannot be read is passed over. */
void sb_walk_files(const char *path, void (*fn)(const char *file, const struct stat *st,
                                                void *ctx), void *ctx);

/* read.c */
extern const char sb_usage_read[];
uint64_t sb_touch(const uint8_t *p, size_t len);
const char *sb_open_reason(const char *msg, const char *dir, int rc);
int sb_run_reader(const char *dir, const sb_read_opts *ro, sb_row *row, sb_trace *trace);
int sb_classify(sb_target *t, sb_read_opts *ro);
void sb_backend_name(const char *dir, char *out, size_t len);
int sb_cmd_read(int argc, char **argv);

/* baselines.c */
int sb_run_memcpy(const char *dir, const sb_read_opts *ro, const sb_trace *trace, size_t slot,
               sb_row *row);
int sb_fill_decode(sb_job *job, size_t worker, size_t item, uint8_t *dst, shr_msg *msg);
/* job->fill of item k into dst by worker: 0, or its error counted in job->errors and, the
 * first time, kept in job->first_error naming the input ("sample" without a folder). */
int sb_job_fill(sb_job *job, size_t worker, size_t k, uint8_t *dst);
/* The folder dir's images, as shardc build lists them; prints its errors (no images: ENOENT). */
int sb_list_folder(char *dir, shc_input_list **in);
/* n renderers of what shardc build --size WxH (--gray for one channel) stores per input. */
int sb_renderers(uint32_t width, uint32_t height, uint32_t channels, uint32_t n,
                 shc_renderer **rz);
int sb_folder_order(size_t *order, size_t n, shr_order kind, uint64_t seed, uint64_t epoch);
int sb_run_folder(char *dir, const sb_read_opts *ro, sb_row *row);

/* feed.c */
void sb_feed_close(sb_feed *f);
int sb_feed_open(sb_feed *f, char *dir, uint32_t batch, uint32_t threads, uint32_t depth,
              shr_order kind, uint64_t seed, uint32_t width, uint32_t height, uint32_t channels,
              shr_pin pin);
int sb_feed_next(void *ctx, const shr_batch **b);
void sb_feed_release(void *ctx, const shr_batch *b);
const char *sb_feed_error(void *ctx);

/* train.c */
extern const char sb_usage_train[];
int sb_cmd_train(int argc, char **argv);

/* compare.c */
extern const char sb_usage_compare[];
int sb_cmd_compare(int argc, char **argv);

#endif
