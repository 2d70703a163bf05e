/* build.h - `shardc build`: list inputs, decode/resize them in worker threads, write shards in
 * input order, then rejects.tsv, warnings.tsv and (last) manifest.json.
 *
 * Output bytes depend only on the inputs and the options, never on the thread count or timing:
 * workers finish out of order, the writer consumes results strictly by input position.
 */
#ifndef SHC_BUILD_H
#define SHC_BUILD_H

#include <stdatomic.h>
#include <stdint.h>

#include "backend.h"
#include "compress.h"
#include "inputs.h"
#include "annot.h"
#include "part.h"
#include "render.h"

#define SHC_UPLOAD_THREADS 4    /* shards uploaded at once by default (upload_threads) */

/* Exit codes of the CLI contract (the CLIs map shc_build's codes to them: shc_build_exit). */
enum { SHC_EXIT_OK = 0, SHC_EXIT_REJECTS = 1, SHC_EXIT_USAGE = 2, SHC_EXIT_IO = 3 };

/* shc_build's own codes, beside errno values and FMT_E*: the project's list (fmt.h, SHC_ERRORS)
 * names them, and build.c checks this enum against it. */
enum {
    SHC_EREJECTS = -30600,  /* the build finished, but inputs were rejected (rejects.tsv); or
                             * --strict stopped it at the first reject */
    SHC_EINPUT,             /* refused before any work: unreadable sources, no images, a bad list
                             * file, an output directory that is not ours to write (or that
                             * another build is writing) */
    SHC_ESTOPPED,           /* stopped through shc_build_ctl or shc_stream_cancel (no manifest) */
    SHC_EEND,               /* a streamed build's inputs ended (internal: stream.h) */
    SHC_ELAST
};

/* Name of a code: SHC_E*, FMT_E* or errno (fmt_strerror). Never NULL; static storage. */
const char *shc_strerror(int rc);

/* The exit status of the CLI contract for a result of shc_build: 0 -> SHC_EXIT_OK, SHC_EREJECTS
 * -> SHC_EXIT_REJECTS, SHC_EINPUT -> SHC_EXIT_USAGE, anything else -> SHC_EXIT_IO. */
int shc_build_exit(int rc);

/* For a program that runs builds itself (shardc-mpi): it may stop a build from another thread
 * (the build ends at the next input with SHC_EXIT_IO and no manifest) and watch its progress. */
typedef struct {
    atomic_int stop;            /* set non-zero to stop the build */
    atomic_uint_fast64_t done;  /* inputs of this build (or part) handled so far */
    atomic_uint_fast64_t total; /* inputs of this build (or part), once known */
} shc_build_ctl;

typedef struct shc_stream shc_stream;   /* stream.h */

/* Crash tests (the points are listed at the top of build.c): kill the build (SIGKILL) at its
 * at-th crash point, or at its after-th sample point (0: never); report 1 says how many points
 * the build passed when it ends, 2 also each point as it is passed. shardc and the Python writer
 * take them from their environment (shc_crash_from_env); the library reads none. */
typedef struct {
    uint64_t at, after, report;
} shc_crash_opts;

/* The vector kernels off for the whole process when the environment, read through get (getenv,
 * or a stand-in), asks for the plain C paths (SHARDREAD_SIMD=0, SHARDC_RESAMPLE=plain or
 * SHARDC_TRANSFORM=plain: pixels/simd.h); the library reads no environment itself. */
void shc_simd_from_env(char *(*get)(const char *));

/* SHARDC_UPLOAD_PART_SIZE through get into *size (0 when unset): 0, or FMT_EINVAL with the
 * refusal in msg for a value that is not a size. The programs' and the Python writer's default. */
int shc_part_size_from_env(char *(*get)(const char *), uint64_t *size, fmt_msg *msg);

/* SHARDC_CRASH_AT, SHARDC_CRASH_AFTER and SHARDC_CRASH_POINTS through get (getenv, or a stand-in)
 * into *c: each a whole number >= 1, anything else leaving its field 0. */
void shc_crash_from_env(char *(*get)(const char *), shc_crash_opts *c);

typedef struct {
    char *const *srcs;
    size_t nsrc;
    const char *list;           /* list file, or NULL for class folders */
    int wds;                    /* SRCs are WebDataset shards (inputs.h: fmt_inputs_from_wds) */
    const char *wds_label;      /* their label member: NULL ("cls"), "txt", "json:FIELD" */
    uint64_t archive_buffer;    /* bytes of archive members read ahead at most (feed.h) */
    const char *out;
    const fmt_backend *backend; /* storage format */
    int quality;                /* --format jpeg: 1..100 */
    shc_render_opts r;          /* geometry, channels, limits, augmentation */
    unsigned threads;           /* worker threads (>= 1) */
    uint64_t shard_bytes;       /* bound on a shard's file size (a single larger sample still fits) */
    uint64_t shard_samples;     /* 0 = no bound */
    uint32_t align;
    fmt_codec_spec compress;    /* --compress (raw): per-sample payload compression */
    double jpeg_fraction;       /* --jpeg-fraction (raw): share of samples stored as JPEG */
    int strict, resume, force, dry_run;
    int progress;               /* the CLI's --progress / --json (shc_build itself reads neither: */
    int json;                   /* it reports through shc_build_cb) */
    shc_part part;              /* build this slice only, into OUT/parts/ (count 0: all of it) */
    shc_build_ctl *ctl;         /* NULL, or a driver's view of the build (shardc-mpi) */
    /* Detection (annot.h): COCO instances JSON or a YOLO labels folder (with the names file);
     * the one SRC is then the image folder. NULL, NULL: a classification build. */
    const char *coco, *yolo, *names;
    int skip_empty;             /* leave out images without a box */
    uint32_t kpt_k, kpt_d;      /* YOLO pose (--kpt-shape K,D); 0: boxes or polygons */
    /* Semantic segmentation (--masks DIR, annot.h): label maps paired with the one SRC's images;
     * mask_suffix "A:B" or NULL; ignore_index the label of padding (shc_build_opts_init: 255). */
    const char *masks, *mask_suffix;
    uint32_t ignore_index;
    uint64_t target_hash;       /* the annotations' hash (shc_fingerprint covers it when not 0;
                                 * shc_build sets it from the annotations it loads) */
    /* --fields FILE.jsonl (fieldsin.h): each input's fields, stored as its aux record; not with
     * augment, coco/yolo or a stream (whose items carry their own: stream.h). fields_hash: what
     * shc_fingerprint covers (shc_build sets it from the file it loads; 0: no fields). */
    const char *fields;
    uint64_t fields_hash;
    /* A streamed build (stream.h; the Python writer): the inputs are the items added to the
     * stream while the build runs, not srcs. It ends when the stream is closed (the items so far
     * are the dataset) or cancelled (SHC_ESTOPPED, and nothing of it is left in out). Not with
     * list, wds, coco/yolo, part, resume or dry_run. The manifest's build record says "source":
     * "stream", and the fingerprint is shc_fingerprint(o, NULL). */
    shc_stream *stream;
    /* An s3:// OUT (publish.h): the local folder the shards wait in before their upload (NULL:
     * "upload" under the cache root: cache, NULL for ~/.cache/shardread; shardc's and the
     * Python writer's is $SHARDREAD_CACHE), the part size of multipart uploads (0: 64 MiB;
     * their default is $SHARDC_UPLOAD_PART_SIZE) and the shards uploaded at once, each on its
     * own connection (0: SHC_UPLOAD_THREADS; at most 16). */
    const char *staging, *cache;
    uint64_t upload_part_size;
    unsigned upload_threads;
    shc_crash_opts crash;       /* crash tests (none: all 0) */
    /* Internal (publish.c): called once each shard is finished and renamed into place in dir (its
     * rejects on disk in the journal); non-zero stops the build with that error. Set, the build
     * does not reopen what it wrote before publishing it (the shards have gone to their upload). */
    int (*shard_done)(void *ctx, const char *dir, const char *name);
    void *shard_ctx;
} shc_build_opts;

/* The defaults of `shardc build`: raw format, 3 channels, the image's own size (geometry KEEP),
 * the default decode limits, 1 GiB input files and shards at most, JPEG quality 90, one thread. */
void shc_build_opts_init(shc_build_opts *o);

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
    /* an input stored although its decoder warned (fmt_image_decode); with strict it is a reject
     * instead */
    void (*warning)(void *ctx, const char *path, const char *text);
    void (*progress)(void *ctx, const shc_progress *p);
    void (*summary)(void *ctx, const shc_summary *s);       /* the build finished */
    void (*projection)(void *ctx, const shc_projection *p); /* the dry run finished */
} shc_build_cb;

/* Run a build (with o->part.count, one part of it: part.h); cb (may be NULL) hears about it. The
 * library prints nothing. Returns 0; SHC_EREJECTS (finished with rejects, or --strict stopped
 * it); SHC_EINPUT (bad inputs or output directory, found before any work; cb->message says
 * which); SHC_ESTOPPED; or an errno value / FMT_E* code for a fatal I/O error (no manifest
 * written; cb->message names the file). */
int shc_build(const shc_build_opts *o, const shc_build_cb *cb);

/* The build fingerprint of options o over inputs in (every shard records it; --resume and
 * shardc verify compare it): geometry, channels, limits, shard bounds, augmentation, seed,
 * class names and every input's path and label. in NULL: a streamed build's, which cannot
 * know its inputs when its first shard is written: the options alone, tagged as a stream. */
uint64_t shc_fingerprint(const shc_build_opts *o, const fmt_inputs *in);

#endif
