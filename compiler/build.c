/* build.c - the build pipeline.
 *
 * Threads: N workers and the calling thread as the writer. Input position i is processed by
 * whichever worker claims it (decode, resize, hash, channel sums) into slot i % W of a ring of W
 * slots; the writer takes slots strictly in input order, appends the sample to the current shard
 * and frees the slot. A worker may claim position i only while i < next_write + W, so memory is
 * bounded by W decoded images whatever the input size, and the bytes written depend only on the
 * inputs: the order of completion never reaches the file.
 *
 * Crash safety: shards are written under a temporary name, fsynced and renamed (formats/raw.c);
 * each reject is appended to OUT/.rejects.journal, which is fsynced before a shard is renamed, so
 * a finished shard's input range always has its rejects on disk. rejects.tsv and manifest.json
 * are written, atomically, only when every shard is finished; the manifest last.
 *
 * Warnings: an input that decodes with a warning (image.h: what Pillow reads with a complaint,
 * e.g. libjpeg's "corrupt JPEG data") is stored, and listed in warnings.tsv (written with
 * rejects.tsv) and counted in the summary; the journal keeps them as lines "W<pos>\tpath\ttext"
 * so a resumed build lists them too. With --strict a warning is a reject. A resumed build
 * keeps the finished shards whose fingerprint, position and sample hashes check out, and starts
 * again at the input position after the last one.
 *
 * Crash tests. A build passes "crash points", counted from 1 in an order fixed by the inputs and
 * options (never by -j or timing): one after each sample is handed to the shard writer (raw,
 * hdf5, per-image sets: written to a file; lmdb: put in the open transaction); one just before a
 * shard is finished (every sample handed over, nothing renamed, the journal not yet flushed) and
 * one just after (the shard renamed into place); then one before rejects.tsv is written, one
 * before inputs.tsv, one before manifest.json and one right after manifest.json's rename (the
 * journal still present). A build of S samples in H shards passes S + 2H + 4 of them. The build's
 * crash options (shc_build_opts.crash; shardc and the Python writer take them from the
 * environment variables named here):
 *   at (SHARDC_CRASH_AT=K)         kill the build (SIGKILL: no cleanup, no flush of stdio
 *                                  buffers) at the K-th crash point
 *   after (SHARDC_CRASH_AFTER=N)   kill it at the N-th sample point (right after the N-th
 *                                  sample), whatever the other points before it
 *   report (SHARDC_CRASH_POINTS=1) print "shardc: crash points: T" on stderr when the build ends
 *                                  (T: the points passed), so a test can draw points in range; 2
 *                                  also prints one line per point as it is passed ("shardc:
 *                                  crash point K: what")
 * A resumed build counts its own points from 1.
 *
 * This file is the build itself: the writer and shc_build. Its other parts are files of their
 * own: worker.c (the workers: an input decoded, rendered, hashed and summed into its slot),
 * journal.c (the reject journal, the crash-point hook), resume.c (the output directory: what is
 * ours, --force, --resume), tsv.c (rejects.tsv, warnings.tsv, inputs.tsv), dryrun.c (the
 * fingerprint, --dry-run), record.c (the manifest's fields, the staged check) and report.c
 * (messages through the caller's callbacks). */
#include "build.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fmt.h"
#include "image.h"
#include "inputs.h"
#include "manifest.h"
#include "backend.h"
#include "dataset.h"
#include "dryrun.h"
#include "feed.h"
#include "fieldsin.h"
#include "journal.h"
#include "raw.h"
#include "record.h"
#include "render.h"
#include "report.h"
#include "resume.h"
#include "simd.h"
#include "publish.h"
#include "remote.h"
#include "stream.h"
#include "tsv.h"
#include "util.h"
#include "worker.h"

/* ---- options and codes (build.h) ---- */

void shc_build_opts_init(shc_build_opts *o)
{
    memset(o, 0, sizeof *o);
    o->r.channels = 3;
    o->r.max_file_bytes = 1ull << 30;
    o->r.limits = (fmt_limits){FMT_DEFAULT_MAX_SIDE, FMT_DEFAULT_MAX_PIXELS};
    o->shard_bytes = 1ull << 30;
    o->backend = &fmt_backend_raw;
    o->quality = 90;
    o->threads = 1;
    o->archive_buffer = 512ull << 20;
    o->ignore_index = 255;
}

/* the compiler's codes are the project's list (fmt.h) */
SHC_ERRORS(FMT_ERROR_CHECK)
_Static_assert(SHC_ELAST == SHC_EEND + 1, "a code of build.h is not in fmt.h's list");

const char *shc_strerror(int rc)
{
    return fmt_strerror(rc);
}

int shc_part_size_from_env(char *(*get)(const char *), uint64_t *size, fmt_msg *msg)
{
    const char *ps = get("SHARDC_UPLOAD_PART_SIZE");
    *size = 0;
    if (!ps || !*ps || (shc_parse_size(ps, size) == 0 && *size > 0))
        return 0;
    *size = 0;
    return fmt_fail(msg, FMT_EINVAL, "SHARDC_UPLOAD_PART_SIZE: expected a size, e.g. 64MiB, not "
                    "'%s'", ps);
}

void shc_simd_from_env(char *(*get)(const char *))
{
    if (fmt_simd_env_plain(get))
        fmt_simd_set(0);
}

int shc_build_exit(int rc)
{
    return rc == 0 ? SHC_EXIT_OK : rc == SHC_EREJECTS ? SHC_EXIT_REJECTS :
           rc == SHC_EINPUT ? SHC_EXIT_USAGE : SHC_EXIT_IO;
}

/* ---- the writer side (the workers: worker.c) ---- */

/* The images keep their buffers: the next input rendered into the slot reuses them. */
static void slot_clear(shc_slot *s, uint32_t n)
{
    (void)n;
    s->done = 0;
    s->rc = 0;
    s->why.text[0] = '\0';
}

/* A detection build to a URL: where its shards' boxes are added up, each shard counted as it
 * leaves for its upload (record.h). */
typedef struct {
    int on, pairs;
    uint64_t *boxes, *dropped;
    const shc_build_cb *cb;
} shard_boxes;

/* Shard `name` of dir counted into c (when c->on), a failure said. 0 or the error. */
static int count_boxes(const shard_boxes *c, const fmt_backend *be, const char *dir,
                       const char *name)
{
    fmt_msg why = {{0}};
    int rc = c->on ? shc_count_shard_boxes(be, dir, name, c->pairs, c->boxes, c->dropped, &why)
                   : 0;
    if (rc)
        shc_say(c->cb, "cannot count the boxes of %s/%s: %s", dir, name, fmt_reason(&why, rc));
    return rc;
}

/* Finish the current shard: its rejects reach the disk first, then the backend completes it and
 * renames it into place. *w is consumed whatever happens. */
static int finish_shard(const shc_build_opts *o, const fmt_backend *be, void **w, FILE *journal,
                        uint64_t input_end, shc_shard_list *shards, const char *name,
                        shc_crash_hook *crash, const shard_boxes *count)
{
    fmt_shard_info h;
    int rc;
    shc_crash_point(crash, 0, "before finishing", name);
    if (fflush(journal) != 0 || fsync(fileno(journal)) != 0) {
        rc = errno;
        be->w_abort(*w);
    } else {
        rc = be->w_finish(*w, input_end, &h);
        if (rc == 0)
            rc = shc_shard_list_add(shards, name, &h);
    }
    *w = NULL;
    if (rc == 0)
        shc_crash_point(crash, 0, "after finishing", name);
    /* the shard leaves with its upload: its boxes are counted now (shc_check_staged counts a
     * dataset that stays) */
    if (rc == 0 && o->shard_done && (rc = count_boxes(count, be, o->out, name)) == 0)
        rc = o->shard_done(o->shard_ctx, o->out, name);
    return rc;
}

/* ---- the build ---- */

/* One build into o->out, what its phases share: the inputs, the output's state, the pipeline
 * and the shard being written. build_listed runs the phases in order and end_run releases what
 * they took. */
typedef struct {
    const shc_build_opts *o;    /* the caller's, or with_fields */
    const shc_build_cb *cb;
    const shc_annot *annot;
    shc_build_opts with_fields; /* o with the --fields hash */
    fmt_inputs in;
    shc_fields_in fin;
    const fmt_backend *be;
    uint64_t lo, hi;            /* the slice of the inputs this build writes */
    uint64_t fp, next_input, next_index;
    uint32_t align, nper;
    shc_reject_list rej, warn;
    shc_shard_list shards;
    shc_pipeline pl;
    int pl_sync;                /* pl's mutex and conditions made */
    pthread_t *tids;
    unsigned nthreads;
    void *w;                    /* the shard being written, or NULL */
    FILE *journal;
    char *jpath, *cur_name, *cur_path;
    double t0;
    shc_crash_hook crash;
    int lock_fd;
    int complete;               /* --resume found the dataset finished: nothing to do */
    int started, committed;     /* writing into out began; the manifest is in place */
    int condemned;              /* an archive failed its stream check or changed (feed.h) */
    uint64_t nboxes, ndropped;  /* detection builds: what the staged dataset holds */
} build_run;

/* Where finish_shard counts a shard's boxes: a detection build's (pair records when it has
 * fields), counted there only for a build to a URL (o->shard_done). */
static shard_boxes boxes_of(build_run *b)
{
    return (shard_boxes){.on = b->annot != NULL, .pairs = b->fin.recs != NULL,
                         .boxes = &b->nboxes, .dropped = &b->ndropped, .cb = b->cb};
}

/* The inputs into *in: a detection build's (listed, taken over), a stream's classes (its items
 * come later), or the listing of the sources. 0, or the build's error (said). */
static int list_inputs(const shc_build_opts *o, const shc_build_cb *cb, fmt_inputs *listed,
                       fmt_inputs *in)
{
    fmt_msg msg = {{0}};
    int rc = 0;
    if (listed) {
        *in = *listed;          /* ours from here on */
        memset(listed, 0, sizeof *listed);
    } else if (o->stream) {
        /* a streamed build: its items join in.items as the writer takes them; the classes are
         * the given names, or made from the labels once the stream ends */
        memset(in, 0, sizeof *in);
        size_t nc;
        const char *const *names = shc_stream_classes(o->stream, &nc);
        if (nc && !(in->classes = calloc(nc, sizeof *in->classes)))
            rc = ENOMEM;
        for (size_t c = 0; !rc && c < nc; c++, in->nclasses++)
            if (!(in->classes[c] = strdup(names[c])))
                rc = ENOMEM;
        if (rc) {
            fmt_inputs_free(in);
            shc_say(cb, "out of memory");
            return ENOMEM;
        }
    } else {
        rc = o->wds ? fmt_inputs_from_wds(o->srcs, o->nsrc, o->wds_label, in, &msg)
             : o->list ? fmt_inputs_from_list(o->list, o->srcs, o->nsrc, in, &msg)
                       : fmt_inputs_from_dirs(o->srcs, o->nsrc, in, &msg);
    }
    if (rc) {
        shc_say(cb, "%s", msg.text);
        return rc == ENOMEM ? ENOMEM : SHC_EINPUT;
    }
    for (size_t i = 0; i < in->nskipped; i++)
        shc_say(cb, "cannot read %s: %s (skipped)", in->skipped[i].path, in->skipped[i].reason);
    if (in->n == 0 && !o->stream && o->wds) {
        const char *lab = o->wds_label ? o->wds_label : "cls";
        int json = strncmp(lab, "json:", 5) == 0;
        shc_say(cb, "no samples found in %s%s (expected WebDataset shards whose samples hold a "
                ".jpg, .png or .bmp image and a usable .%s label%s%s of the same key)", o->srcs[0],
                o->nsrc > 1 ? " and the other SRCs" : "", json ? "json" : lab,
                json ? " with the field " : "", json ? lab + 5 : "");
        fmt_inputs_free(in);
        return SHC_EINPUT;
    }
    if (in->n == 0 && !o->stream) {
        shc_say(cb, "no images found in %s%s (expected class folders of .jpg, .png or .bmp files, "
                "or a --list)", o->srcs[0], o->nsrc > 1 ? " and the other SRCs" : "");
        fmt_inputs_free(in);
        return SHC_EINPUT;
    }
    return 0;
}

/* The output directory, made, locked and checked: empty, ours to replace (--force) or to
 * continue (--resume: the finished shards kept, b->next_input past them; b->complete when
 * there is nothing left to do). 0, or the build's error (said). */
static int open_output(build_run *b)
{
    const shc_build_opts *o = b->o;
    const shc_build_cb *cb = b->cb;
    int rc;
    if (mkdir(o->out, 0777) != 0 && errno != EEXIST) {
        rc = errno;
        shc_say(cb, "cannot create %s: %s", o->out, strerror(rc));
        return rc;
    }
    struct stat sb;
    errno = 0;
    if (stat(o->out, &sb) != 0 || !S_ISDIR(sb.st_mode) || access(o->out, W_OK | X_OK) != 0) {
        rc = errno ? errno : ENOTDIR;
        shc_say(cb, "cannot write to %s: %s", o->out, errno ? strerror(errno) : "not a directory");
        return rc;
    }
    /* one writer at a time: a second build, --force or --resume into OUT would mix shards */
    long holder;
    rc = shc_lock_dir(o->out, SHC_LOCK_NAME, &b->lock_fd, &holder);
    if (rc == EWOULDBLOCK) {
        if (holder > 0)
            shc_say(cb, "%s is being written by another shardc, pid %ld", o->out, holder);
        else
            shc_say(cb, "%s is being written by another shardc", o->out);
        return SHC_EINPUT;
    }
    if (rc) {
        shc_say(cb, "cannot lock %s/%s: %s", o->out, SHC_LOCK_NAME, strerror(rc));
        return rc;
    }
    const fmt_inputs *set_in = shc_is_set(b->be) ? &b->in : NULL;
    int contents = shc_dir_contents(o->out, set_in);
    if (contents == 2 && !o->force) {
        shc_say(cb, "%s is not empty and holds files that are not a shardc dataset (use --force to "
            "write into it anyway)", o->out);
        return SHC_EINPUT;
    }
    if (contents && o->resume) {
        fmt_manifest old;
        if (fmt_manifest_read(o->out, &old, NULL) == 0) {
            int same = old.fingerprint == b->fp;
            uint64_t n = old.samples, r = old.rejects;
            fmt_manifest_free(&old);
            if (same) {
                /* a build killed between the manifest's rename and its last cleanup */
                char *jp = fmt_path_join(o->out, SHC_JOURNAL_NAME, "");
                if (jp)
                    unlink(jp);
                free(jp);
                shc_say(cb, "%s is already complete (%" PRIu64 " samples, %" PRIu64 " rejected); "
                        "nothing to do", o->out, n, r);
                b->complete = 1;
                return r ? SHC_EREJECTS : 0;
            }
        }
        rc = shc_resume_scan(o, cb, &b->in, b->fp, b->lo, &b->shards, &b->next_input,
                             &b->next_index);
        /* a build to a URL counts its shards as they leave, the kept ones here */
        shard_boxes count = boxes_of(b);
        for (size_t k = 0; rc == 0 && o->shard_done && k < b->shards.n; k++)
            rc = count_boxes(&count, b->be, o->out, b->shards.v[k].file);
        if (rc == 0)
            rc = shc_journal_load(o->out, b->next_input, &b->rej, &b->warn);
        if (rc) {
            shc_say(cb, "cannot resume in %s: %s", o->out, strerror(rc));
            return rc;
        }
        if (b->shards.n)
            shc_say(cb, "resuming: kept %zu finished shard(s), %" PRIu64 " samples; continuing at "
                "input %" PRIu64 " of %" PRIu64, b->shards.n,
                    b->next_index, b->next_input - b->lo, b->hi - b->lo);
    } else if (contents) {
        if (!o->force) {
            shc_say(cb, "%s already holds a dataset (use --resume to continue it or --force to "
                "replace it)", o->out);
            return SHC_EINPUT;
        }
        if ((rc = shc_clear_output(o->out, -1, set_in))) {
            shc_say(cb, "cannot clear %s: %s", o->out, strerror(rc));
            return rc;
        }
    }
    return 0;
}

/* The reject journal, holding exactly the rejects and warnings below the resume point. */
static int open_journal(build_run *b)
{
    b->jpath = fmt_path_join(b->o->out, SHC_JOURNAL_NAME, "");
    b->journal = b->jpath ? fopen(b->jpath, "w") : NULL;
    if (!b->journal) {
        int rc = b->jpath ? errno : ENOMEM;
        shc_say(b->cb, "cannot write %s: %s", b->jpath ? b->jpath : b->o->out, strerror(rc));
        return rc;
    }
    b->started = 1;
    for (size_t i = 0; i < b->rej.n; i++)
        shc_journal_add(b->journal, 0, b->rej.v[i].pos, b->rej.v[i].path, b->rej.v[i].reason);
    for (size_t i = 0; i < b->warn.n; i++)
        shc_journal_add(b->journal, 1, b->warn.v[i].pos, b->warn.v[i].path,
                        b->warn.v[i].reason);
    return 0;
}

/* The slots, the archives' feed and the worker threads, claiming from b->next_input on. */
static int start_workers(build_run *b)
{
    const shc_build_opts *o = b->o;
    shc_pipeline *pl = &b->pl;
    int rc;
    b->nthreads = o->threads ? o->threads : 1;
    pl->o = o;
    pl->in = &b->in;
    pl->annot = b->annot;
    pl->stream = o->stream;
    pl->fields = b->fin.recs ? &b->fin : NULL;
    pl->nslots = 2 * (size_t)b->nthreads + 2;
    pl->next_claim = pl->next_write = (size_t)b->next_input;
    pl->end = o->stream ? SIZE_MAX : (size_t)b->hi;
    pl->slots = calloc(pl->nslots, sizeof *pl->slots);
    b->tids = calloc(b->nthreads, sizeof *b->tids);
    int slots_ok = pl->slots != NULL && fmt_rs_cache_create(&pl->cache) == 0;
    for (size_t k = 0; slots_ok && k < pl->nslots; k++) {
        shc_slot *sl = &pl->slots[k];
        sl->imgs = calloc(b->nper, sizeof *sl->imgs);
        sl->metas = calloc(b->nper, sizeof *sl->metas);
        sl->params = calloc(b->nper, sizeof *sl->params);
        sl->aux = calloc(b->nper, FMT_AUG_RECORD_MAX);
        slots_ok = sl->imgs && sl->metas && sl->params && sl->aux;
    }
    if (!slots_ok || !b->tids) {
        shc_say(b->cb, "out of memory");
        return ENOMEM;
    }
    if (b->in.narchives && (rc = shc_feed_start(&b->in, b->next_input, b->hi,
                                                o->r.max_file_bytes, o->archive_buffer,
                                                &pl->feed)) != 0) {
        shc_say(b->cb, "cannot start reading the archives: %s", strerror(rc));
        return rc;
    }
    pthread_mutex_init(&pl->mu, NULL);
    pthread_cond_init(&pl->space, NULL);
    pthread_cond_init(&pl->ready, NULL);
    b->pl_sync = 1;
    for (unsigned t = 0; t < b->nthreads; t++) {
        if (pthread_create(&b->tids[t], NULL, shc_worker, pl) != 0) {
            b->nthreads = t;
            break;
        }
    }
    if (b->nthreads == 0) {
        shc_say(b->cb, "cannot start worker threads");
        return EAGAIN;
    }
    return 0;
}

/* Input i's outcome before its samples are written: a decoder warning listed (or, with --strict,
 * made a reject), a reject listed and journaled. 0, or the build's error. */
static int take_outcome(build_run *b, size_t i, shc_slot *s)
{
    const shc_build_opts *o = b->o;
    const shc_build_cb *cb = b->cb;
    const char *path = b->in.items[i].path;
    if (s->rc == 0 && s->why.text[0] && o->strict) {
        /* --strict: a file the decoder warned about is refused like a damaged one */
        s->rc = FMT_ECORRUPT;
        size_t n = strlen(s->why.text);
        const char *tail = " (a decoder warning; --strict)";
        if (n + strlen(tail) < sizeof s->why.text)
            memcpy(s->why.text + n, tail, strlen(tail) + 1);
    } else if (s->rc == 0 && s->why.text[0]) {
        if (cb && cb->warning)
            cb->warning(cb->ctx, path, s->why.text);
        if (shc_reject_add(&b->warn, i, path, s->why.text) != 0)
            return ENOMEM;
        shc_journal_add(b->journal, 1, i, path, s->why.text);
    }
    if (s->rc) {
        if (cb && cb->reject)
            cb->reject(cb->ctx, path, s->why.text);
        if (shc_reject_add(&b->rej, i, path, s->why.text) != 0)
            return ENOMEM;
        shc_journal_add(b->journal, 0, i, path, s->why.text);
        if (o->strict)
            return SHC_EREJECTS;
    }
    return 0;
}

/* Input i's samples (all its variants) into the current shard, finishing it first when they
 * would not fit and opening the next. 0, or a write error (b->cur_path names the file). */
static int write_samples(build_run *b, size_t i, const shc_slot *s, uint64_t *shard_no)
{
    const shc_build_opts *o = b->o;
    const fmt_backend *be = b->be;
    int rc;
    /* a shard holds whole inputs (all variants of one), so input_end is exact */
    uint64_t cost = 0;
    for (uint32_t v = 0; v < b->nper; v++)
        cost += be->w_cost((uint64_t)s->imgs[v].width * s->imgs[v].height *
                                    s->imgs[v].channels, s->metas[v].aux_len, b->align);
    if (b->w && be->w_count(b->w) > 0 &&
        (be->w_size(b->w) + cost > o->shard_bytes ||
         (o->shard_samples && be->w_count(b->w) + b->nper > o->shard_samples))) {
        shard_boxes count = boxes_of(b);
        if ((rc = finish_shard(o, be, &b->w, b->journal, i, &b->shards, b->cur_name, &b->crash,
                               &count)))
            return rc;
        (*shard_no)++;
    }
    if (!b->w) {
        free(b->cur_name);
        free(b->cur_path);
        b->cur_name = shc_shard_name(be, *shard_no);
        b->cur_path = b->cur_name ? fmt_path_join(o->out, b->cur_name, "") : NULL;
        char *stem = shc_shard_stem(*shard_no);
        fmt_writer_opts wo = {.dir = o->out, .name = stem, .first_index = b->next_index,
                              .fingerprint = b->fp, .align = b->align, .quality = o->quality,
                              .codec = o->compress.codec, .level = o->compress.level,
                              .jpeg_fraction = o->jpeg_fraction,
                              .classes = (const char *const *)b->in.classes,
                              .nclasses = b->in.nclasses};
        rc = b->cur_path && stem ? be->w_open(&b->w, &wo) : ENOMEM;
        free(stem);
        if (rc)
            return rc;
    }
    for (uint32_t v = 0; v < b->nper; v++) {
        rc = be->w_add(b->w, &s->metas[v], s->imgs[v].pixels, NULL);
        if (rc)
            return rc;
        b->shards.pixels += (uint64_t)s->imgs[v].width * s->imgs[v].height;
        b->next_index++;
        shc_crash_point(&b->crash, 1, "sample written to", b->cur_name);
    }
    return 0;
}

/* The writer: the workers' results in input order into shards, up to the last shard finished
 * (a stream's end sets b->hi). 0, or the build's error (said). */
static int write_inputs(build_run *b)
{
    const shc_build_opts *o = b->o;
    const shc_build_cb *cb = b->cb;
    shc_pipeline *pl = &b->pl;
    fmt_msg feed_why = {{0}};
    double last_progress = 0;
    uint64_t shard_no = b->shards.n;
    int rc;
    for (size_t i = (size_t)b->next_input; i < b->hi; i++) {
        if (o->ctl && atomic_load(&o->ctl->stop)) {
            shc_say(cb, "build of %s stopped at input %zu", o->out, i);
            return SHC_ESTOPPED;
        }
        shc_slot *s = &pl->slots[i % pl->nslots];
        pthread_mutex_lock(&pl->mu);
        while (!s->done)
            pthread_cond_wait(&pl->ready, &pl->mu);
        pthread_mutex_unlock(&pl->mu);
        if ((rc = shc_feed_check(pl->feed, 0, &feed_why)))
            goto condemn;
        if (o->stream) {
            if (s->rc == SHC_EEND) {
                b->hi = i;      /* the stream's end: every item before it is written */
                break;
            }
            if (s->rc == SHC_ESTOPPED) {
                shc_say(cb, "build of %s stopped at input %zu", o->out, i);
                return SHC_ESTOPPED;
            }
            /* the item becomes input i, as a listed input would be */
            char *name;
            int32_t label;
            shc_stream_finish(o->stream, i, &name, &label);
            if (fmt_inputs_add(&b->in, name, label) != 0) {
                free(name);
                shc_say(cb, "out of memory");
                return ENOMEM;
            }
        }
        if ((rc = take_outcome(b, i, s)) != 0)
            return rc;
        if (s->rc == 0 && (rc = write_samples(b, i, s, &shard_no)) != 0)
            goto io_error;
        pthread_mutex_lock(&pl->mu);
        slot_clear(s, b->nper);
        pl->next_write = i + 1;
        pthread_cond_broadcast(&pl->space);
        pthread_mutex_unlock(&pl->mu);

        if (o->ctl)
            atomic_store(&o->ctl->done, i + 1 - b->lo);
        if (cb && cb->progress && shc_now() - last_progress > 0.25) {
            last_progress = shc_now();
            shc_report_progress(cb, b->t0, i + 1 - b->next_input,
                            o->stream ? i + 1 - b->next_input : b->hi - b->next_input,
                            b->rej.n, 0);
        }
    }
    if (o->stream && b->hi == b->lo) {
        shc_say(cb, "no samples were given");
        return SHC_EINPUT;
    }
    if (o->stream && !b->in.nclasses && (rc = shc_stream_label_classes(&b->in)) != 0) {
        shc_say(cb, "out of memory");
        return rc;
    }
    /* every archive read to the end of its stream, its checks passed, before anything is final */
    if ((rc = shc_feed_check(pl->feed, 1, &feed_why)))
        goto condemn;
    shard_boxes count = boxes_of(b);
    if (b->w && (rc = finish_shard(o, b->be, &b->w, b->journal, b->hi, &b->shards, b->cur_name,
                                   &b->crash, &count)))
        goto io_error;
    shc_report_progress(cb, b->t0, b->hi - b->next_input, b->hi - b->next_input, b->rej.n, 1);
    return 0;

condemn:
    /* samples already written may hold altered bytes, or another member's: none is kept (a
     * --resume would keep the finished shards) and nothing is published */
    shc_say(cb, "cannot read %s; the build stops and removes what it wrote in %s", feed_why.text,
            o->out);
    b->condemned = 1;
    return rc;
io_error:
    shc_say(cb, "cannot write %s: %s", b->cur_path ? b->cur_path : o->out, fmt_strerror(rc));
    return rc;
}

/* rejects.tsv, warnings.tsv and inputs.tsv, then the manifest, staged, checked by opening what
 * was written as a reader would, and published: last. 0, or the build's error (said). */
static int publish(build_run *b)
{
    const shc_build_opts *o = b->o;
    const shc_build_cb *cb = b->cb;
    fmt_manifest m = {0};
    char tool[64], spec[256] = "";
    shc_record_in r = {.o = o, .annot = b->annot, .in = &b->in, .fin = &b->fin,
                       .shards = &b->shards, .lo = b->lo, .hi = b->hi,
                       .samples = b->next_index, .fingerprint = b->fp, .rejects = b->rej.n};
    shc_record_manifest(&r, &m, tool, sizeof tool, spec, sizeof spec);
    if (!m.build_json) {
        shc_say(cb, "out of memory");
        return ENOMEM;
    }
    fclose(b->journal);
    b->journal = NULL;
    shc_crash_point(&b->crash, 0, "before writing", SHC_REJECTS_NAME);
    int rc = shc_write_rejects(o->out, &b->in, &b->rej);
    if (rc == 0)
        rc = shc_write_warnings(o->out, &b->warn);
    if (rc == 0) {
        shc_crash_point(&b->crash, 0, "before writing", SHC_INPUTS_NAME);
        rc = shc_write_inputs(o->out, &b->in, b->lo, b->hi);
    }
    if (rc == 0) {
        shc_crash_point(&b->crash, 0, "before writing", FMT_MANIFEST_NAME);
        rc = fmt_manifest_stage(o->out, &m);
    }
    free(m.build_json);
    if (rc) {
        shc_say(cb, "cannot write the manifest in %s: %s", o->out, strerror(rc));
        return rc;
    }
    /* what was written opens as a reader opens it, or the build failed: the manifest is
     * published only after that, so no reader (and no later --force) ever meets a dataset its
     * own build refused */
    fmt_msg probe = {{0}};
    if (!o->shard_done && (rc = shc_check_staged(o->out, &b->nboxes, &b->ndropped, &probe)) != 0) {
        char *staged = fmt_path_join(o->out, FMT_MANIFEST_STAGED_NAME, "");
        if (staged)
            unlink(staged);
        free(staged);
        shc_say(cb, "the dataset written to %s does not open: %s (no manifest written)", o->out,
                fmt_reason(&probe, rc));
        return rc;
    }
    if ((rc = fmt_manifest_publish(o->out)) != 0) {
        shc_say(cb, "cannot write the manifest in %s: %s", o->out, strerror(rc));
        return rc;
    }
    shc_crash_point(&b->crash, 0, "after writing", FMT_MANIFEST_NAME);
    b->committed = 1;
    unlink(b->jpath);
    return 0;
}

/* The summary through the callbacks; the build's status: SHC_EREJECTS when inputs were
 * rejected or skipped, else 0. */
static int summarize(const build_run *b)
{
    const shc_build_cb *cb = b->cb;
    double dt = shc_now() - b->t0;
    uint64_t total_bytes = 0;
    for (size_t k = 0; k < b->shards.n; k++)
        total_bytes += b->shards.v[k].bytes;
    size_t nrej = b->rej.n + b->in.nskipped;
    if (cb && cb->summary) {
        shc_summary sum = {.samples = b->next_index, .classes = b->in.nclasses,
                           .shards = b->shards.n, .bytes = total_bytes,
                           .inputs = (size_t)(b->hi - b->lo) + b->in.nskipped,
                           .rejects = nrej, .warnings = b->warn.n, .seconds = dt,
                           .threads = b->nthreads, .out = b->o->out,
                           .images_per_s = dt > 0 ? (double)(b->hi - b->next_input) / dt : 0.0};
        if (b->annot) {
            /* counted from what was written, so a resumed build counts its kept shards too */
            sum.targets = 1;
            sum.skipped_empty = b->annot->skipped_empty;
            sum.boxes = b->nboxes;
            sum.boxes_dropped = b->ndropped;
        }
        cb->summary(cb->ctx, &sum);
    }
    return nrej ? SHC_EREJECTS : 0;
}

/* Stop the workers, abort an unfinished shard, remove what a failed streamed or condemned
 * build wrote, release everything and unlock the output. Returns result. */
static int end_run(build_run *b, int result)
{
    shc_pipeline *pl = &b->pl;
    if (b->w)
        b->be->w_abort(b->w);
    b->w = NULL;
    if (b->pl_sync) {
        pthread_mutex_lock(&pl->mu);
        pl->stop = 1;
        pthread_cond_broadcast(&pl->space);
        pthread_mutex_unlock(&pl->mu);
        shc_feed_stop(pl->feed);    /* workers waiting for a member's bytes */
        for (unsigned t = 0; t < b->nthreads; t++)
            pthread_join(b->tids[t], NULL);
        pthread_mutex_destroy(&pl->mu);
        pthread_cond_destroy(&pl->space);
        pthread_cond_destroy(&pl->ready);
    }
    if (b->journal) {
        fflush(b->journal);
        fsync(fileno(b->journal));
        fclose(b->journal);
    }
    /* a streamed build cannot be resumed: what it wrote before failing goes */
    if ((b->o->stream || b->condemned) && b->started && !b->committed)
        shc_clear_output(b->o->out, -1, shc_is_set(b->be) ? &b->in : NULL);
    free(b->jpath);
    free(b->cur_name);
    free(b->cur_path);
    free(b->tids);
    for (size_t k = 0; pl->slots && k < pl->nslots; k++) {
        for (uint32_t v = 0; pl->slots[k].imgs && v < b->nper; v++)
            fmt_image_free(&pl->slots[k].imgs[v]);
        free(pl->slots[k].imgs);
        free(pl->slots[k].metas);
        free(pl->slots[k].params);
        free(pl->slots[k].aux);
        free(pl->slots[k].tbuf);
        free(pl->slots[k].pbuf);
    }
    free(pl->slots);
    shc_feed_free(pl->feed);
    fmt_rs_cache_free(pl->cache);
    shc_shard_list_free(&b->shards);
    shc_reject_list_free(&b->rej);
    shc_reject_list_free(&b->warn);
    fmt_inputs_free(&b->in);
    shc_fields_free(&b->fin);
    if (b->crash.o.report)
        shc_say(b->cb, "crash points: %" PRIu64, b->crash.passed);
    if (b->lock_fd >= 0) {
        /* no stale pid left behind (still holding the lock): a finished OUT is the same bytes
         * whoever wrote it */
        if (ftruncate(b->lock_fd, 0) != 0) {
            /* harmless: the next writer truncates it too */
        }
        close(b->lock_fd);
    }
    return result;
}

/* The build into o->out: the whole input list, or o->part's slice of it when o->out is the
 * part's folder. Its phases: list the inputs, load --fields, open the output, the journal, the
 * workers, write the inputs in order, publish the manifest, summarize. */
static int build_listed(const shc_build_opts *o, const shc_build_cb *cb, const shc_annot *annot,
                        fmt_inputs *listed)
{
    build_run run = {.o = o, .cb = cb, .annot = annot, .lock_fd = -1}, *b = &run;
    int rc = list_inputs(o, cb, listed, &b->in);
    if (rc)
        return rc;
    /* --fields: each input's record, and the fingerprint covers them */
    if (o->fields && !o->stream) {
        fmt_msg msg = {{0}};
        if ((rc = shc_fields_load(o->fields, &b->in, o->srcs, o->nsrc, &b->fin, &msg)) != 0) {
            shc_say(cb, "%s", msg.text);
            fmt_inputs_free(&b->in);
            return rc == ENOMEM ? ENOMEM : SHC_EINPUT;
        }
        b->with_fields = *o;
        b->with_fields.fields_hash = b->fin.hash;
        b->o = o = &b->with_fields;
    }
    /* a part takes its slice of the list; `source` stays the position in the whole list */
    b->lo = 0;
    b->hi = UINT64_MAX;         /* a stream's end is known when it comes */
    if (!o->stream)
        shc_part_range(b->in.n, &o->part, &b->lo, &b->hi);
    if (o->ctl)
        atomic_store(&o->ctl->total, o->stream ? 0 : b->hi - b->lo);   /* a stream's: not known */
    if (o->dry_run) {
        rc = shc_dry_run(o, cb, &b->in, annot, b->lo, b->hi);
        fmt_inputs_free(&b->in);
        shc_fields_free(&b->fin);
        return rc;
    }

    b->be = o->backend;
    /* a part's shards carry the whole build's fingerprint: a part folder's name fixes its slice */
    b->fp = shc_fingerprint(o, o->stream ? NULL : &b->in);
    b->next_input = b->lo;
    b->align = o->align;        /* 0: the backend's own layout (raw: packed) */
    b->nper = shc_render_count(&o->r);
    b->t0 = shc_now();
    shc_crash_init(&b->crash, &o->crash, cb);

    int result = open_output(b);
    if (result == 0 && !b->complete) {
        if (!o->stream)
            shc_warn_projection(o, cb, b->hi - b->lo);
        result = open_journal(b);
    }
    if (result == 0 && !b->complete)
        result = start_workers(b);
    if (result == 0 && !b->complete)
        result = write_inputs(b);
    if (result == 0 && !b->complete)
        result = publish(b);
    if (result == 0 && !b->complete)
        result = summarize(b);
    return end_run(b, result);
}

/* Checks of a detection build's options that need no file. 0 or SHC_EINPUT. */
static int annot_usable(const shc_build_opts *o, const shc_build_cb *cb)
{
    struct stat st;
    if (o->nsrc != 1 || stat(o->srcs[0], &st) != 0 || !S_ISDIR(st.st_mode)) {
        shc_say(cb, "--coco, --yolo and --masks take one SRC, the folder of the images (%s is not one)",
            o->nsrc ? o->srcs[0] : "nothing");
        return SHC_EINPUT;
    }
    if (shc_is_set(o->backend)) {
        shc_say(cb, "--coco, --yolo and --masks need --format raw, hdf5 or lmdb (%s writes per-image files "
            "without targets)", o->backend->name);
        return SHC_EINPUT;
    }
    return 0;
}

/* A build: list the inputs (for a detection build, from the annotations) and write them. */
static int build_dir(const shc_build_opts *o, const shc_build_cb *cb)
{
    if (o->fields && (o->r.augment || o->stream)) {
        shc_say(cb, "--fields is not for %s builds (a sample's aux record holds %s)",
                o->stream ? "streamed" : "--augment",
                o->stream ? "the fields each item brings" : "the variant's parameters");
        return SHC_EINPUT;
    }
    if (!o->coco && !o->yolo && !o->masks)
        return build_listed(o, cb, NULL, NULL);
    int rc = annot_usable(o, cb);
    if (rc)
        return rc;
    shc_annot a;
    fmt_inputs in;
    fmt_msg msg = {{0}};
    shc_annot_opts ao = {.images = o->srcs[0], .coco = o->coco, .yolo = o->yolo,
                         .names = o->names, .skip_empty = o->skip_empty, .kpt_k = o->kpt_k,
                         .kpt_d = o->kpt_d, .masks = o->masks, .mask_suffix = o->mask_suffix,
                         .ignore_index = o->ignore_index};
    if ((rc = shc_annot_load(&ao, &a, &in, &msg)) != 0) {
        shc_say(cb, "%s", fmt_reason(&msg, rc));
        return rc == ENOMEM ? ENOMEM : SHC_EINPUT;
    }
    if (a.skipped_empty)
        shc_say(cb, "note: %" PRIu64 " image(s) without annotations left out (--skip-empty)",
            a.skipped_empty);
    shc_build_opts ob = *o;
    ob.target_hash = a.hash;
    rc = build_listed(&ob, cb, &a, &in);
    fmt_inputs_free(&in);
    shc_annot_free(&a);
    return rc;
}

int shc_build(const shc_build_opts *o, const shc_build_cb *cb)
{
    if (rmt_is_url(o->out) && !o->dry_run)
        return shc_build_upload(o, cb);     /* staged here, uploaded as it goes (publish.h) */
    if (!o->part.count || o->dry_run)
        return build_dir(o, cb);
    /* a part: the same build, into OUT/parts/IIIII-of-NNNNN */
    char *dir = NULL;
    fmt_msg why = {{0}};
    int rc = shc_part_prepare(o->out, &o->part, o->force, o->resume, &dir, &why);
    if (rc) {
        shc_say(cb, "%s", fmt_reason(&why, rc));
        return rc == EEXIST ? SHC_EINPUT : rc;
    }
    shc_build_opts po = *o;
    po.out = dir;
    rc = build_dir(&po, cb);
    free(dir);
    return rc;
}
