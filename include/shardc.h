/* shardc.h - the compiler library (libshardcomp): build a dataset directory out of image files,
 * as `shardc build` does, and merge the parts of a build made in parts.
 *
 *     shc_build_opts *o = shc_build_opts_new();
 *     shc_msg why;
 *     if (!o) { ... out of memory ... }
 *     shc_build_sources(o, srcs, nsrc);    // class folders, archives, ... (the SRCs)
 *     if (shc_build_set(o, "output", "ds", &why) || shc_build_set(o, "size", "224", &why) ||
 *         shc_build_set(o, "strict", NULL, &why) || shc_build_check(o, &why)) {
 *         fprintf(stderr, "%s\n", why.text); ...
 *     }
 *     int rc = shc_build(o, &callbacks);   // 0, SHC_EREJECTS, SHC_EINPUT, ...
 *     shc_build_opts_free(o);
 *
 * Options. A build's options are an opaque handle, set one at a time by the name of their
 * `shardc build` flag without the dashes ("size", "short-side", "compress", "strict") and the
 * flag's argument as the command line gives it (NULL for a flag that takes none): the same
 * syntax, the same defaults, the same refusals in the same words ("bad --size 'x' (expected WxH
 * or N, e.g. 224x224 or 224)"). shc_build_check then makes the checks between flags
 * ("--size and --short-side exclude each other"). The flags are listed once, in the library
 * (one table in its sources); shc_build_flags hands that list out, so that a front end
 * (shardc's command line, the Python writer) takes every flag without naming it. What is not a
 * flag (the sources, a stream, a driver's control block, the cache root, crash tests) has its
 * own setter. The library reads no environment: a program passes what it takes from there.
 *
 * Errors: functions return 0, a positive errno value, a negative code of the storage layer
 * (the values of shardread.h's SHR_EFORMAT .. SHR_EEMPTY), or one of the SHC_E* codes below;
 * shc_strerror names any of them. A call that can say more takes a shc_msg * (NULL: no detail
 * wanted), which a failure fills with one line. The library never prints or exits; everything
 * a build has to say comes through shc_build_cb.
 *
 * This header needs system headers only.
 */
#ifndef SHARDC_H
#define SHARDC_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The one message type of the project's libraries (shardread.h names it shr_msg). */
#ifndef SHARDC_MSG_DEFINED
#define SHARDC_MSG_DEFINED
struct shardc_msg {
    char text[512];
};
#endif
typedef struct shardc_msg shc_msg;

/* ---- codes ---- */

/* Exit codes of the CLI contract (shc_build_exit and shc_merge_exit map the calls' codes). */
enum { SHC_EXIT_OK = 0, SHC_EXIT_REJECTS = 1, SHC_EXIT_USAGE = 2, SHC_EXIT_IO = 3 };

/* shc_build's own codes, beside errno values and the storage layer's: the project's one list of
 * codes names them (shc_strerror), and the library checks this enum against it. */
enum {
    SHC_EREJECTS = -30600,  /* the build finished, but inputs were rejected (rejects.tsv); or
                             * --strict stopped it at the first reject */
    SHC_EINPUT,             /* refused before any work: a bad option or pair of options,
                             * unreadable sources, no images, a bad list file, an output
                             * directory that is not ours to write (or that another build is
                             * writing) */
    SHC_ESTOPPED,           /* stopped through shc_build_ctl or the stream's cancel (no
                             * manifest) */
    SHC_EEND,               /* a streamed build's inputs ended (internal) */
    SHC_ELAST
};

/* shc_merge's codes besides errno values of I/O (those leave no manifest either): the
 * project's list (SHC_MERGE_ERRORS) names them as well. */
enum {
    SHC_MERGE_ENOPARTS = -30590, /* OUT/parts missing or empty */
    SHC_MERGE_EMISSING,         /* parts missing or unfinished (msg lists them) */
    SHC_MERGE_EMISMATCH,        /* a part disagrees with the others or is damaged (msg names it) */
    SHC_MERGE_EBUSY,            /* another merge or build holds OUT's lock (nothing written) */
    SHC_MERGE_ELAST
};

/* Name of a code: SHC_E*, the storage layer's or errno. Never NULL; static storage. */
const char *shc_strerror(int rc);

/* The exit status of the CLI contract for a result of shc_build: 0 -> SHC_EXIT_OK, SHC_EREJECTS
 * -> SHC_EXIT_REJECTS, SHC_EINPUT -> SHC_EXIT_USAGE, anything else -> SHC_EXIT_IO. */
int shc_build_exit(int rc);

/* The same for a result of shc_merge: a merge refused (the SHC_MERGE_* codes, or an OUT that
 * cannot be written) SHC_EXIT_USAGE, any other failure SHC_EXIT_IO. */
int shc_merge_exit(int rc);

/* ---- the syntax of the options' values, for a front end that takes more of them ---- */

/* A byte size: digits with an optional suffix k/K/KB (1000), KiB (1024), M/MB, MiB, G/GB, GiB,
 * T/TB, TiB; "1GiB", "512M", "4096". Overflow-checked. 0, or -1 for anything else. */
int shc_parse_size(const char *s, uint64_t *out);

/* An unsigned decimal integer in [min, max]. 0, or -1 for anything else. */
int shc_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* "1.5 GiB" style, into buf. Returns buf. */
char *shc_human_size(uint64_t bytes, char *buf, size_t len);

/* ---- what a program takes from its environment (the library reads none) ---- */

/* The vector kernels off for the whole process when the environment, read through get (getenv,
 * or a stand-in), asks for the plain C paths (SHARDREAD_SIMD=0, SHARDC_RESAMPLE=plain or
 * SHARDC_TRANSFORM=plain). */
void shc_simd_from_env(char *(*get)(const char *));

/* SHARDC_UPLOAD_PART_SIZE through get into *size (0 when unset): 0, or the storage layer's
 * "invalid argument" code (shardread.h's SHR_EFMT_INVAL) with the refusal in msg for a value
 * that is not a size. The programs' and the Python writer's default of "upload-part-size". */
int shc_part_size_from_env(char *(*get)(const char *), uint64_t *size, shc_msg *msg);

/* Crash tests: kill the build (SIGKILL) at its at-th crash point, or at its after-th sample
 * point (0: never); report 1 says how many points the build passed when it ends, 2 also each
 * point as it is passed. */
typedef struct {
    uint64_t at, after, report;
} shc_crash_opts;

/* SHARDC_CRASH_AT, SHARDC_CRASH_AFTER and SHARDC_CRASH_POINTS through get (getenv, or a stand-in)
 * into *c: each a whole number >= 1, anything else leaving its field 0. */
void shc_crash_from_env(char *(*get)(const char *), shc_crash_opts *c);

/* ---- building in parts: --part I/N, then shc_merge ---- */

#define SHC_PARTS_DIR "parts"
#define SHC_PART_MAX 99999u             /* five digits in the folder name */
#define SHC_PART_NAME_LEN 15            /* "IIIII-of-NNNNN" and its NUL */

/* Part index of count (0 <= index < count): the contiguous slice [floor(n*I/N),
 * floor(n*(I+1)/N)) of the n sorted inputs, built into OUT/parts/IIIII-of-NNNNN. */
typedef struct {
    uint32_t index, count;              /* count 0: no part, the whole input list */
} shc_part;

/* "I/N" (0 <= I < N <= SHC_PART_MAX). EINVAL with the reason in msg. */
int shc_part_parse(const char *arg, shc_part *p, shc_msg *msg);

/* --part auto: I and N from the environment through getenv_fn, trying in turn
 *   a Slurm job array: SLURM_ARRAY_TASK_ID with SLURM_ARRAY_TASK_MIN (default 0),
 *     SLURM_ARRAY_TASK_STEP (default 1) and SLURM_ARRAY_TASK_COUNT or SLURM_ARRAY_TASK_MAX;
 *     I = (ID - MIN) / STEP, so --array=0-7 and --array=1-8 both give parts 0..7 of 8
 *   Open MPI: OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE
 *   MPICH, Intel MPI (Hydra): PMI_RANK, PMI_SIZE
 *   MVAPICH2: MV2_COMM_WORLD_RANK, MV2_COMM_WORLD_SIZE
 *   srun tasks: SLURM_PROCID, SLURM_NTASKS
 * getenv_fn is getenv, or a stand-in for tests. *from names the variables used (static string).
 * ENOENT when none is set, EINVAL when the values are inconsistent (msg says why in both). */
int shc_part_from_env(char *(*getenv_fn)(const char *), shc_part *p, const char **from,
                      shc_msg *msg);

/* "IIIII-of-NNNNN" into name (SHC_PART_NAME_LEN bytes). */
void shc_part_name(const shc_part *p, char name[SHC_PART_NAME_LEN]);

typedef struct {
    uint32_t parts;
    uint64_t samples, inputs, rejects, shards, bytes;
} shc_merge_result;

/* For an s3:// out: the folder the parts' tables are downloaded into (NULL: "upload" under the
 * cache root, cache, NULL for ~/.cache/shardread), and the part size of multipart uploads (0:
 * 64 MiB). */
typedef struct {
    const char *staging, *cache;
    uint64_t part_size;
} shc_merge_opts;

/* Join the parts in out (OUT/parts/IIIII-of-NNNNN, built with "part") into the dataset a
 * one-machine build gives; nothing is written when a check fails. 0, SHC_MERGE_* or an errno
 * value; msg (may be NULL) says what and names the parts at fault (a list of missing parts too
 * long for it ends in "..."). o and res may be NULL (o: the defaults). */
int shc_merge(const char *out, const shc_merge_opts *o, shc_merge_result *res, shc_msg *msg);

/* ---- a build's options ---- */

typedef struct shc_build_opts shc_build_opts;
typedef struct shc_stream shc_stream;   /* a streamed build's inputs (the Python writer):
                                         * its producer's calls end this header */

/* A driver's view of a running build (shardc-mpi): it may stop the build from another thread
 * (the build ends at the next input with SHC_ESTOPPED and no manifest) and watch its progress. */
typedef struct {
    atomic_int stop;            /* set non-zero to stop the build */
    atomic_uint_fast64_t done;  /* inputs of this build (or part) handled so far */
    atomic_uint_fast64_t total; /* inputs of this build (or part), once known */
} shc_build_ctl;

/* New options holding the defaults of `shardc build` (raw format, 3 channels, each image's own
 * size, the default decode limits, 1 GiB input files and shards at most, JPEG quality 90, one
 * thread), or NULL when out of memory. Free with shc_build_opts_free (NULL: nothing). Strings
 * given to the setters are not copied: they must outlive the options. */
shc_build_opts *shc_build_opts_new(void);
void shc_build_opts_free(shc_build_opts *o);

/* Set the option of `shardc build`'s flag --name (without the dashes: "size", "short-side",
 * "output") to value, the flag's argument as the command line takes it (NULL for a flag
 * without one, such as "strict"). 0, or SHC_EINPUT with the refusal in msg, worded as shardc
 * words it ("bad --size 'x' (expected WxH or N, e.g. 224x224 or 224)", "unknown option
 * '--name'", "--strict takes no value"). A later call for the same flag replaces the earlier
 * value. "part" takes "I/N" (a program resolves "auto" with shc_part_from_env first). */
int shc_build_set(shc_build_opts *o, const char *name, const char *value, shc_msg *msg);

/* The checks between flags that a build makes before any work (shc_build makes the ones on its
 * inputs): 0, or SHC_EINPUT with the first failure in msg, worded as shardc words it ("--size
 * and --short-side exclude each other", "no SRC given"). */
int shc_build_check(const shc_build_opts *o, shc_msg *msg);

/* The flags shc_build_set takes, in the table's order: shc_build_flags(&n) returns the array
 * and its length. has_value: the flag takes an argument; short_name: its one-letter form, or 0;
 * alias_of: NULL, or the flag this one is another name of ("grey" for "gray"). */
typedef struct {
    const char *name;
    char short_name;
    int has_value;
    const char *alias_of;
} shc_build_flag;
const shc_build_flag *shc_build_flags(size_t *n);

/* What is not a flag. */
void shc_build_sources(shc_build_opts *o, char *const *srcs, size_t n);   /* the SRCs */
void shc_build_set_part(shc_build_opts *o, const shc_part *p);  /* as "part" (count 0: none) */
void shc_build_set_ctl(shc_build_opts *o, shc_build_ctl *ctl);  /* NULL: none */
void shc_build_set_cache(shc_build_opts *o, const char *cache); /* NULL: ~/.cache/shardread */
void shc_build_set_crash(shc_build_opts *o, const shc_crash_opts *c);
/* The inputs are the items added to stream while the build runs (not the sources): not with
 * list, wds, coco/yolo, part, resume or dry-run. */
void shc_build_set_stream(shc_build_opts *o, shc_stream *stream);

/* What a program reads back of the options it set. */
typedef struct {
    const char *out;            /* "output", or NULL */
    int remote_out;             /* out is a URL (s3://): the upload's defaults apply (the cache
                                 * root, "upload-part-size") */
    int strict, dry_run;
    int progress, json;         /* the command line's flags: shc_build reads neither */
    double jpeg_fraction;
    shc_part part;
    shc_merge_opts merge;       /* "staging", the cache root and "upload-part-size": a merge of
                                 * the parts this build writes */
} shc_build_view;
void shc_build_view_get(const shc_build_opts *o, shc_build_view *v);

/* ---- running a build ---- */

/* Where the writer is (progress calls come at most every 0.25 s, and once more at the end). */
typedef struct {
    uint64_t done, total;       /* inputs written this run, of those this run has to write */
    uint64_t rejects;           /* rejects so far (a resumed build's earlier ones included) */
    double seconds;             /* since the build started */
    int final;                  /* the last call: every input is written */
    int uploading;              /* an s3:// OUT: the counts below are meaningful */
    uint64_t sent, to_send;     /* bytes uploaded, of those of the shards finished so far */
} shc_progress;

/* A finished build (or part). */
typedef struct {
    uint64_t samples;
    size_t classes, shards;
    uint64_t bytes;             /* of the shards */
    size_t inputs;              /* inputs of this build or part, skipped entries included */
    size_t rejects;             /* in rejects.tsv (skipped entries included) */
    size_t warnings;            /* stored with a decoder warning, in warnings.tsv */
    double seconds, images_per_s;   /* this run: inputs it wrote per second */
    unsigned threads;
    const char *out;
    int targets;                /* a detection build: the counts below are meaningful */
    uint64_t boxes;             /* boxes stored, over the whole dataset */
    uint64_t boxes_dropped;     /* boxes the geometry left without area (not stored) */
    uint64_t skipped_empty;     /* images left out for having no box (--skip-empty) */
} shc_summary;

/* What a dry run projects (nothing is written). */
typedef struct {
    size_t inputs, classes, skipped;    /* listed, classes, entries skipped while listing */
    uint64_t samples, unreadable;       /* samples that would be stored; inputs that cannot be */
    uint64_t bytes, shards, shard_bytes;    /* the projected output, its shards alone */
    uint64_t input_bytes;
    uint64_t encoded;           /* inputs really encoded to measure the stored size (0: none) */
    double scale;               /* measured / estimated stored size over those */
} shc_projection;

/* How a build reports. Every member may be NULL (a NULL table: a silent build); calls come from
 * the thread that called shc_build, in the order of events. Texts are one line, without the
 * program's name or a newline, valid during the call. */
typedef struct {
    void *ctx;
    /* errors, warnings and notes: "cannot create OUT: reason", "warning: ...", "resuming: ..." */
    void (*message)(void *ctx, const char *text);
    /* an input that could not be decoded: rejected (or, with strict, the build stops here) */
    void (*reject)(void *ctx, const char *path, const char *reason);
    /* an input stored although its decoder warned; with strict it is a reject instead */
    void (*warning)(void *ctx, const char *path, const char *text);
    void (*progress)(void *ctx, const shc_progress *p);
    void (*summary)(void *ctx, const shc_summary *s);       /* the build finished */
    void (*projection)(void *ctx, const shc_projection *p); /* the dry run finished */
} shc_build_cb;

/* Run a build (with a part, one part of it); cb (may be NULL) hears about it. Returns 0;
 * SHC_EREJECTS (finished with rejects, or strict stopped it); SHC_EINPUT (bad inputs or output
 * directory, found before any work; cb->message says which); SHC_ESTOPPED; or an errno value
 * or a storage layer's code for a fatal I/O error (no manifest written; cb->message names the
 * file). Options that shc_build_check refuses make an undefined build: check them first. */
int shc_build(const shc_build_opts *o, const shc_build_cb *cb);

/* ---- for a program that takes a build's syntax on its own command line ---- */

/* "WxH" (both 1..65535), or "N" for NxN (torchvision's int size): the syntax of "size", as a
 * program that asks for an output size (shardbench's --size) takes it. 0, or -1 for anything
 * else (*w and *h then untouched). */
int shc_parse_wxh(const char *s, uint32_t *w, uint32_t *h);

/* The storage formats a build writes, the values "format" takes: every one compiled in, in the
 * order shardc lists them ("raw" first, then "hdf5", "lmdb", "png0", ... as built), ending in
 * NULL. Static storage; any thread. */
const char *const *shc_build_formats(void);

/* ---- single inputs as a build reads them: a benchmark's decode path ---- */

/* The inputs of SRC class folders as a build lists them: the image files of each class folder,
 * classes in sorted order, label = the class's position. */
typedef struct shc_input_list shc_input_list;

/* 0 with *out the list (free with shc_input_list_free); the errno value of a SRC that cannot be
 * read (msg names it) or ENOMEM, *out NULL then. An empty list is not an error. */
int shc_input_list_dirs(char *const *srcs, size_t nsrc, shc_input_list **out, shc_msg *msg);
void shc_input_list_free(shc_input_list *l);            /* accepts NULL */
size_t shc_input_list_count(const shc_input_list *l);
size_t shc_input_list_classes(const shc_input_list *l);     /* class folders listed */
/* Input i's path (valid until the list is freed) and label; i below the count. */
const char *shc_input_list_path(const shc_input_list *l, size_t i);
int32_t shc_input_list_label(const shc_input_list *l, size_t i);

/* What a build with options o stores for one input file, done the way its workers do it: read
 * the file (at most the input size limit), decode it (shrink-on-load where the geometry
 * allows), apply o's geometry and channels; the plain sample (augmentation options are not
 * applied). A renderer holds the resampler's state for one thread at a time. */
typedef struct shc_renderer shc_renderer;

/* A renderer of o's geometry, channels and limits (copied: o may be freed after), or NULL when
 * out of memory. Free with shc_renderer_free (NULL: nothing). */
shc_renderer *shc_renderer_new(const shc_build_opts *o);
void shc_renderer_free(shc_renderer *r);

/* Render the file at path, input number index of the build (what a build draws per input is
 * keyed by it), into dst (len bytes): 0 with *w, *h and *c (may be NULL) the sample's size, its
 * w * h * c bytes of uint8 HWC pixels in dst; EMSGSIZE when they do not fit in len (nothing
 * written); the storage layer's or an errno code for an input a build would reject (msg says
 * why, in the words of rejects.tsv). */
int shc_render_file(shc_renderer *r, const char *path, uint64_t index, void *dst, size_t len,
                    uint32_t *w, uint32_t *h, uint32_t *c, shc_msg *msg);

/* ---- looking into a built dataset: `shardc info`, `verify`, `cat` ----
 * (a dataset's samples, targets and manifest facts are read through shardread.h's shr_dataset
 * calls; what the compiler owns is here: the whole check of verify, a sample's build record and
 * replay, the image writer, URLs, the JSON strings) */

/* The augmentation --augment draws when --aug is not given (its syntax: shardc build --help). */
#define SHC_AUG_DEFAULT_SPEC "rrc=0.08:1:0.75:1.3333,flip=0.5,jitter=0.4"

/* str as a JSON string (quoted, escaped; bytes that are not UTF-8 as the lone surrogates
 * \udcXX of Python's "surrogateescape"; NULL as null) written to f, as the JSON of shardc's
 * summaries writes its strings; shc_json_bytes the same for len bytes at data (NUL bytes among
 * them as \u0000). 0, or EOF when a write to f fails. */
int shc_json_string(FILE *f, const char *str);
int shc_json_bytes(FILE *f, const void *data, size_t len);

/* 1 when path is a dataset's URL (s3://, http://, https://) rather than a directory. */
int shc_is_url(const char *path);

/* What shc_resolve_url did: shards in the manifest, those downloaded, the bytes received. */
typedef struct {
    uint64_t shards, fetched, bytes;
} shc_fetch_stats;

/* The dataset at url made complete and checked in the local cache under the root cache (NULL:
 * ~/.cache/shardread), as shardread.h's shr_remote_resolve does: *dir (malloc'd) is its folder
 * there. progress (may be NULL) is called while shards download, at most every 0.25 s and once
 * at the end (final 1), with the bytes received of those of the shards not found cached. st may
 * be NULL. 0, or the error with msg saying what (naming the object): an errno value, or the
 * storage layer's SHR_EHASH / SHR_ECORRUPT / SHR_ETRUNC for a shard that fails its check. */
int shc_resolve_url(const char *url, const char *cache,
                    void (*progress)(void *ctx, uint64_t got, uint64_t total, int final),
                    void *progress_ctx, char **dir, shc_fetch_stats *st, shc_msg *msg);

/* The parameters a pre-augmented sample (--augment) was drawn with, as its record stores them:
 * the torchvision calls that give its pixels from its source (`shardc info --sample`). */
typedef struct {
    uint32_t variant;                   /* 0 .. K-1 */
    uint32_t src_w, src_h;              /* the decoded source the crop refers to */
    uint32_t crop_x, crop_y, crop_w, crop_h;   /* the source rectangle resized to the output */
    uint32_t flip;                      /* 1: mirrored */
    float angle;                        /* the rotation (or the affine's angle) in degrees */
    uint32_t rotate_bilinear;           /* the warp's filter: 0 nearest, 1 bilinear */
    uint32_t affine;                    /* 1: F.affine with angle and the four below */
    int32_t affine_tx, affine_ty;       /* its translation in pixels */
    float affine_scale;
    float affine_shear_x, affine_shear_y;      /* in degrees */
    float brightness, contrast, saturation;    /* factors (1: unchanged) */
    uint32_t hue_on;                    /* 1: adjust_hue applied, with factor hue */
    float hue;
    uint32_t gray;                      /* 1: converted to grayscale */
} shc_aug_record;

/* What `shardc info --sample` tells of sample idx beyond shardread.h's shr_dataset_sample: the
 * hash of its pixels, its source file (from DIR/inputs.tsv), and for a pre-augmented sample
 * the parameters drawn for it. */
typedef struct {
    uint64_t hash;              /* XXH3-64 of its stored pixels */
    char *path;                 /* malloc'd; NULL when inputs.tsv does not name its source */
    int augmented;              /* aug is its record */
    shc_aug_record aug;
} shc_sample_record;

/* Sample idx of the dataset in dir into *r (free it with shc_sample_record_free). 0; the
 * dataset's open errors (msg: "cannot open dataset DIR: why"); for idx out of range the storage
 * layer's "invalid argument" code (shardread.h's SHR_EFMT_INVAL) with msg "DIR has N samples;
 * no sample I". */
int shc_sample_record_get(const char *dir, uint64_t idx, shc_sample_record *r, shc_msg *msg);
void shc_sample_record_free(shc_sample_record *r);

/* A sample rendered again from its source file: `shardc cat --replay`. */
typedef struct {
    uint8_t *pixels;            /* width * height * channels, HWC (malloc'd) */
    uint32_t width, height, channels;
    char *path;                 /* the source file (malloc'd) */
} shc_replayed;

/* Render sample idx of the dataset in dir again from its source file (DIR/inputs.tsv names
 * it): a pre-augmented sample by applying its recorded parameters to the decoded source, any
 * other through the build's own render path, with the options the manifest records. 0, or the
 * error with msg saying what: "DIR/inputs.tsv does not name source S: why", "cannot replay
 * sample I from PATH: why", or those of shc_sample_record_get. Free *out with shc_replayed_free (a
 * failed call leaves nothing to free). */
int shc_replay_sample(const char *dir, uint64_t idx, shc_replayed *out, shc_msg *msg);
void shc_replayed_free(shc_replayed *r);

/* An image of w x h pixels of ch channels (1 gray, 3 RGB; HWC) written to path atomically
 * (a temporary file renamed over it): PNG (zlib level 6) when path ends in ".png" (any case),
 * else binary PPM (P6; P5 for gray), as `shardc cat -o` writes. 0, or the error (shc_strerror
 * names it). */
int shc_write_image(const char *path, const uint8_t *px, uint32_t w, uint32_t h, uint32_t ch);

/* What shc_verify found. */
typedef struct {
    int opened;                 /* the manifest was read and its backend is supported */
    uint64_t checked;           /* samples re-hashed */
    uint64_t damaged;           /* samples damaged (a shard unusable as a whole: all of its) */
    size_t mismatches;          /* disagreements with the manifest */
    size_t shards;              /* shards in the manifest */
} shc_verify_result;

/* `shardc verify`: every shard of the dataset in dir checked before any library parses it (size
 * and whole-file hash against the manifest, then the backend's own pre-check), then opened and
 * compared with its manifest entry, every sample checked against the manifest's description
 * and re-hashed; then the manifest's fields against each other and against the shards and the
 * build's tables (channel stats, inputs and rejects counts, the build fingerprint). Each problem
 * is one call of report(ctx, line), line one line without a newline: "damaged: sample I (FILE):
 * why", "damaged: samples A-B (SHARD): why", "damaged: SHARD: why" or "mismatch: what", in the
 * order of the shards. res (required) counts them. Returns 0 when every shard was looked at,
 * whatever it found; else the error: before the check (res->opened 0; msg says what: ENOENT
 * for a dataset without a manifest, "cannot read the manifest of DIR: why"; SHR_EUNSUPPORTED
 * for a backend or version this build cannot read), or ENOMEM during it. */
int shc_verify(const char *dir, void (*report)(void *ctx, const char *line), void *ctx,
               shc_verify_result *res, shc_msg *msg);

/* ---- a streamed build: inputs handed to a running build one at a time (the Python writer,
 * shardread.build) ----
 *
 *     shc_stream *st;
 *     shc_stream_create(window, budget, classes, nclasses, &st);
 *     shc_build_set_stream(o, st);             // then shc_build(o, cb) in a thread of its own
 *     shc_item it = {.kind = SHC_ITEM_PATH, .name = strdup("a.jpg"), .label = 0};
 *     shc_stream_add(st, &it);                 // the stream owns it.name now
 *     ...
 *     shc_stream_close(st);                    // no more items: the build finishes
 *     (join the build's thread) shc_stream_free(st);
 *
 * A producer adds items at positions 0, 1, 2, ... while the build runs; the build's workers
 * take them by position, in any order, and its writer finishes them in order. Memory: at most
 * `window` items are held (added, not yet finished by the writer), and their bytes stay within
 * `budget` unless only one is held, so the producer blocks in shc_stream_add while the build is
 * that far behind. The item at the lowest position held is always admitted, so a build always
 * makes progress. Thread-safety: every call from any thread; shc_stream_free once nothing else
 * uses the stream (the build has returned). */

typedef enum {
    SHC_ITEM_PATH = 0,      /* name is the file to read (as a build reads its inputs) */
    SHC_ITEM_ENCODED,       /* data: the bytes of an image file (JPEG, PNG, BMP, ...) */
    SHC_ITEM_PIXELS,        /* data: height rows of width * channels (1, 3 or 4) bytes */
    SHC_ITEM_REJECT         /* refused before the build saw it: data is the reason (len bytes,
                             * a C string), listed as the reject of its position */
} shc_item_kind;

typedef struct {
    int kind;               /* shc_item_kind */
    char *name;             /* malloc'd: the path, or what inputs.tsv and rejects.tsv record */
    int32_t label;          /* 0..SHC_ITEM_MAX_LABEL (below the class count when classes are
                             * given); -1 with targets */
    uint8_t *data;          /* ENCODED, PIXELS, REJECT: malloc'd */
    size_t len;
    uint32_t width, height, channels;   /* PIXELS */
    uint8_t *fields;        /* the item's fields record (the raw format's "Fields record",
                             * malloc'd, at most SHC_FIELDS_MAX_RECORD bytes), or NULL: with a
                             * schema set (shc_stream_set_fields) every item but a reject has
                             * one */
    uint32_t fields_len;
    uint8_t *target;        /* the item's detection target in source pixels (malloc'd; the
                             * SHC_SRC_TARGET layout), or NULL: with shc_stream_set_targets every
                             * item but a reject has one, and label -1 */
    uint32_t target_len;
} shc_item;

/* A streamed item's target as the producer gives it (native byte order, in-process only): u32
 * n, u32 0, i64 image_id, f64[n][4] boxes (x1, y1, x2, y2 in the source's pixels, edges), i64[n]
 * category ids, f64[n] areas (NaN: the box's area), u8[n] iscrowd (0 or 1). n is at most
 * SHC_TARGET_MAX_BOXES, the boxes a stored target holds at most. */
#define SHC_ITEM_MAX_LABEL 1000000     /* an item's largest label, as in a list file */

#define SHC_SRC_TARGET_SIZE(n) (16u + 49u * (uint64_t)(n))
#define SHC_TARGET_MAX_BOXES 65536u

/* A streamed build's fields: the schema every item's fields record follows (the manifest's
 * "fields"). Types, the values of shardread.h's SHR_FIELD_*: */
#define SHC_FIELD_INT 1         /* int64 values */
#define SHC_FIELD_FLOAT 2       /* float64 values */
#define SHC_FIELD_STR 3         /* UTF-8 text (count 0: each sample's own length) */
#define SHC_FIELD_BYTES 4       /* opaque bytes (count 0) */
#define SHC_FIELDS_MAX 64u      /* fields in a schema */
#define SHC_FIELDS_MAX_RECORD (1u << 20)    /* bytes of one item's fields record */

/* One field of the schema. name: 1..64 bytes of letters, digits, '_', '-' and '.', not starting
 * with a digit or '.'; count: int and float 0 for a scalar, N (1..65536) for a vector of N
 * values; str and bytes 0. */
typedef struct {
    const char *name;
    uint32_t type;          /* SHC_FIELD_* */
    uint32_t count;
} shc_field_def;

/* A detection category of a build with targets: its id as the targets give it, its name. */
typedef struct {
    int64_t id;
    const char *name;
} shc_category;

/* window: items held at most (>= 1; 0 is taken as 1); budget: their bytes (0: no bound but the
 * window); classes: the class names (copied; labels must then be below nclasses), or NULL, 0
 * for none (the manifest then names class L "L", as for a list file). 0 or ENOMEM. */
int shc_stream_create(size_t window, uint64_t budget, const char *const *classes,
                      size_t nclasses, shc_stream **out);

/* Add the next item, waiting while the window or the budget is full. On success the stream
 * owns it->name, it->data, it->fields and it->target (set to NULL here). 0; EINVAL for a label
 * out of range or a malformed item, a fields record missing, present without a schema or not
 * of the schema, a target missing, present without shc_stream_set_targets or malformed;
 * ECANCELED once the stream is cancelled or closed (the item stays the caller's). */
int shc_stream_add(shc_stream *st, shc_item *it);

/* Before the first item: every item carries a fields record of this schema (copied; defs[0..n),
 * 1..SHC_FIELDS_MAX fields of distinct names). 0; the storage layer's "invalid argument" code
 * (shardread.h's SHR_EFMT_INVAL) for a bad schema, msg naming the field; EBUSY once items were
 * added or a schema was set; ENOMEM. */
int shc_stream_set_fields(shc_stream *st, const shc_field_def *defs, size_t n, shc_msg *msg);

/* Before the first item: every item carries a detection target (a detection build: the
 * manifest gets "targets", source "stream"). 0, or EBUSY once items were added. */
int shc_stream_set_targets(shc_stream *st);

/* Before shc_stream_close of a build with targets: the categories the manifest names (copied;
 * sorted by id and distinct, else EINVAL; every item's ids must be among them, which the build's
 * check of the staged dataset holds it to). A later call replaces them. 0, EINVAL, ENOMEM. */
int shc_stream_set_categories(shc_stream *st, const shc_category *cats, size_t n);

/* No more items: the build finishes those added. */
void shc_stream_close(shc_stream *st);

/* Stop: a waiting producer gets ECANCELED, the build SHC_ESTOPPED. */
void shc_stream_cancel(shc_stream *st);

/* Items added so far. */
uint64_t shc_stream_added(shc_stream *st);

void shc_stream_free(shc_stream *st);   /* accepts NULL */

#endif
