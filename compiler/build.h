/* build.h - `shardc build`: list inputs, decode/resize them in worker threads, write shards in
 * input order, then rejects.tsv, warnings.tsv and (last) manifest.json.
 *
 * Output bytes depend only on the inputs and the options, never on the thread count or timing:
 * workers finish out of order, the writer consumes results strictly by input position.
 */
#ifndef SHC_BUILD_H
#define SHC_BUILD_H

#include <stdint.h>

#include "backend.h"
#include "compress.h"
#include "inputs.h"
#include "annot.h"
#include "part.h"
#include "render.h"
#include "shardc.h"

#define SHC_UPLOAD_THREADS 4    /* shards uploaded at once by default (upload_threads) */

/* The public part (codes, callbacks, the options' setters, shc_build) is include/shardc.h; this
 * is the options' struct behind its handle, which the library's own code fills and reads
 * directly. The crash points of shc_crash_opts (shardc.h) are listed at the top of build.c. */

struct shc_build_opts {
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
    /* What shc_build_set was given, for shc_build_check (build_options.c): the flags that set
     * the geometry, and --aug's spec (its parse into r.aug is checked again there, so that the
     * refusals come in the command line's order). */
    struct {
        int size, short_side, fit;
        const char *aug;
    } given;
};

/* The defaults of `shardc build`: raw format, 3 channels, the image's own size (geometry KEEP),
 * the default decode limits, 1 GiB input files and shards at most, JPEG quality 90, one thread. */
void shc_build_opts_init(shc_build_opts *o);

/* The build fingerprint of options o over inputs in (every shard records it; --resume and
 * shardc verify compare it): geometry, channels, limits, shard bounds, augmentation, seed,
 * class names and every input's path and label. in NULL: a streamed build's, which cannot
 * know its inputs when its first shard is written: the options alone, tagged as a stream. */
uint64_t shc_fingerprint(const shc_build_opts *o, const fmt_inputs *in);

#endif
