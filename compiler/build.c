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
 * journal still present). A build of S samples in H shards passes S + 2H + 4 of them. Environment:
 *   SHARDC_CRASH_AT=K      kill the build (SIGKILL: no cleanup, no flush of stdio buffers) at the
 *                          K-th crash point
 *   SHARDC_CRASH_AFTER=N   kill it at the N-th sample point (right after the N-th sample),
 *                          whatever the other points before it
 *   SHARDC_CRASH_POINTS=1  print "shardc: crash points: T" on stderr when the build ends (T: the
 *                          points passed), so a test can draw points in range; 2 also prints one
 *                          line per point as it is passed ("shardc: crash point K: what")
 * A resumed build counts its own points from 1.
 *
 * This file is the build itself: its workers, the writer and shc_build. Its other parts are files
 * of their own: journal.c (the reject journal, the crash-point hook), resume.c (the output
 * directory: what is ours, --force, --resume), tsv.c (rejects.tsv, warnings.tsv, inputs.tsv),
 * dryrun.c (the fingerprint, --dry-run) and report.c (messages through the caller's callbacks).
 */
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
#include "render.h"
#include "report.h"
#include "resume.h"
#include "publish.h"
#include "remote.h"
#include "stream.h"
#include "tsv.h"
#include "util.h"

/* One input's results: K samples (K = shc_render_count), or a reject. The arrays are allocated
 * once per slot and reused. */
typedef struct {
    int done;
    int rc;                     /* 0: samples ready; else rejected, why says why */
    fmt_msg why;                /* with rc 0: the decoder's warning, "" if none */
    fmt_image *imgs;
    fmt_sample_meta *metas;
    fmt_aug_params *params;
    uint8_t *aux;               /* K records of FMT_AUG_RECORD_MAX bytes when augmenting */
    uint8_t *tbuf;              /* the target record (detection builds) */
    size_t tcap;
} slot;

typedef struct {
    const shc_build_opts *o;
    const fmt_inputs *in;
    const shc_annot *annot;     /* detection builds: the annotations, else NULL */
    slot *slots;
    size_t nslots;
    fmt_rs_cache *cache;        /* resize coefficients shared by the workers */
    shc_feed *feed;             /* archive members' bytes (NULL: no archive among the inputs) */
    shc_stream *stream;         /* a streamed build's items (NULL: the inputs are listed) */
    const shc_fields_in *fields;    /* --fields: each input's record (NULL: none) */
    size_t next_claim, next_write, end;
    int stop;
    pthread_mutex_t mu;
    pthread_cond_t space, ready;
} pipeline;

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

const char *shc_strerror(int rc)
{
    switch (rc) {
    case SHC_EREJECTS:
        return "inputs were rejected";
    case SHC_EINPUT:
        return "bad inputs or output directory";
    case SHC_ESTOPPED:
        return "the build was stopped";
    case SHC_EEND:
        return "no more inputs";
    default:
        return fmt_strerror(rc);
    }
}

int shc_build_exit(int rc)
{
    return rc == 0 ? SHC_EXIT_OK : rc == SHC_EREJECTS ? SHC_EXIT_REJECTS :
           rc == SHC_EINPUT ? SHC_EXIT_USAGE : SHC_EXIT_IO;
}

/* ---- the worker side ---- */

/* Decode and render one input, then hash and sum each sample. On failure s->rc is set and
 * s->why says why. */
static void process(const shc_build_opts *o, const shc_annot *annot, shc_feed *feed,
                    shc_stream *stream, const shc_fields_in *fields, const fmt_input *in,
                    uint64_t pos, shc_render_scratch *rs, slot *s)
{
    uint32_t n = shc_render_count(&o->r);
    int32_t label = in ? in->label : 0;
    if (stream) {
        /* a streamed item (in is NULL): the stream says how to render it */
        s->rc = shc_stream_render(stream, pos, &o->r, rs, s->imgs, s->params, &label, &s->why);
    } else if (in->archive) {
        /* an archive member: its bytes come from the feeder */
        uint8_t *data;
        size_t len;
        s->rc = shc_feed_take(feed, pos, &data, &len, &s->why);
        if (s->rc == 0)
            s->rc = shc_render_mem_into(&o->r, data, len, pos, rs, s->imgs, s->params, &s->why);
        free(data);
    } else {
        s->rc = shc_render_into(&o->r, in->path, pos, rs, s->imgs, s->params, &s->why);
    }
    if (s->rc)
        return;
    for (uint32_t v = 0; v < n; v++) {
        fmt_image *im = &s->imgs[v];
        fmt_sample_meta *m = &s->metas[v];
        size_t npix = (size_t)im->width * im->height;
        memset(m, 0, sizeof *m);
        m->height = im->height;
        m->width = im->width;
        m->channels = im->channels;
        m->label = label;
        m->source = pos;
        m->hash = fmt_hash64(im->pixels, npix * im->channels);
        fmt_pixel_sums(im->pixels, npix, im->channels, m->sum, m->sumsq);
        if (o->r.augment) {
            uint8_t *rec = s->aux + (size_t)v * FMT_AUG_RECORD_MAX;
            m->aux = rec;
            m->aux_len = fmt_aug_encode(&s->params[v], rec);
        }
    }
    if (annot) {
        /* the boxes go where the pixels went (one sample: detection builds do not augment) */
        uint32_t sw, sh, len, dropped;
        fmt_geom_plan plan;
        shc_render_geometry(rs, &sw, &sh, &plan);
        fmt_msg why = {{0}};
        int rc = shc_annot_target(annot, (size_t)pos, sw, sh, &plan, &s->tbuf, &s->tcap, &len,
                                  &dropped, &why);
        if (rc) {
            s->rc = rc;
            s->why = why;
            return;
        }
        s->metas[0].aux = s->tbuf;
        s->metas[0].aux_len = len;
    }
    /* fields (not with augment or annotations: one aux record per sample) */
    if (stream) {
        const uint8_t *rec;
        uint32_t len;
        shc_stream_item_fields(stream, pos, &rec, &len);
        if (rec && len > s->tcap) {
            /* a copy: the writer finishes the item (freeing its record) before writing it */
            uint8_t *g = realloc(s->tbuf, len);
            if (!g) {
                s->rc = fmt_fail(&s->why, ENOMEM, "out of memory");
                return;
            }
            s->tbuf = g;
            s->tcap = len;
        }
        if (rec) {
            memcpy(s->tbuf, rec, len);
            s->metas[0].aux = s->tbuf;
            s->metas[0].aux_len = len;
        }
    } else if (fields) {
        s->metas[0].aux = fields->recs[pos];
        s->metas[0].aux_len = fields->lens[pos];
    }
}

/* The images keep their buffers: the next input rendered into the slot reuses them. */
static void slot_clear(slot *s, uint32_t n)
{
    (void)n;
    s->done = 0;
    s->rc = 0;
    s->why.text[0] = '\0';
}

static void *worker(void *arg)
{
    pipeline *pl = arg;
    shc_render_scratch *rs = NULL;
    int rzrc = shc_render_scratch_create(pl->cache, &rs);
    for (;;) {
        pthread_mutex_lock(&pl->mu);
        while (!pl->stop && pl->next_claim < pl->end &&
               pl->next_claim >= pl->next_write + pl->nslots)
            pthread_cond_wait(&pl->space, &pl->mu);
        if (pl->stop || pl->next_claim >= pl->end) {
            pthread_mutex_unlock(&pl->mu);
            break;
        }
        size_t i = pl->next_claim++;
        pthread_mutex_unlock(&pl->mu);

        slot *s = &pl->slots[i % pl->nslots];
        if (rzrc) {
            s->rc = fmt_fail(&s->why, rzrc, "%s", fmt_strerror(rzrc));
        } else {
            /* a stream's items are not in pl->in while the build runs */
            process(pl->o, pl->annot, pl->feed, pl->stream, pl->fields,
                    pl->stream ? NULL : &pl->in->items[i], i, rs, s);
        }

        pthread_mutex_lock(&pl->mu);
        s->done = 1;
        if (s->rc == SHC_EEND && i < pl->end)
            pl->end = i;        /* the stream ended here: nothing more to claim */
        pthread_cond_broadcast(&pl->ready);
        pthread_mutex_unlock(&pl->mu);
    }
    shc_render_scratch_free(rs);
    return NULL;
}

/* ---- writing helpers ---- */

static char *build_options_json(const shc_build_opts *o)
{
    char *s, codec[32];
    fmt_codec_format(&o->compress, codec, sizeof codec);
    int n = asprintf(&s,
                     "{\"channels\": %u, \"max_side_limit\": %u, \"max_pixels\": %" PRIu64
                     ", \"max_file_bytes\": %" PRIu64 ", \"shard_bytes\": %" PRIu64
                     ", \"shard_samples\": %" PRIu64 ", \"align\": %u, \"compress\": \"%s\""
                     ", \"jpeg_fraction\": %.17g, \"quality\": %d, \"source\": \"%s\"}",
                     o->r.channels, o->r.limits.max_side, o->r.limits.max_pixels,
                     o->r.max_file_bytes,
                     o->shard_bytes, o->shard_samples, o->align, codec, o->jpeg_fraction,
                     o->quality, o->stream ? "stream" : o->coco ? "coco" : o->yolo ? "yolo" : o->masks ? "masks" :
                     o->list ? "list" : "folders");
    return n < 0 ? NULL : s;
}

/* Finish the current shard: its rejects reach the disk first, then the backend completes it and
 * renames it into place. *w is consumed whatever happens. */
static int finish_shard(const shc_build_opts *o, const fmt_backend *be, void **w, FILE *journal,
                        uint64_t input_end, shc_shard_list *shards, const char *name,
                        shc_crash_hook *crash)
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
    if (rc == 0 && o->shard_done)
        rc = o->shard_done(o->shard_ctx, o->out, name);
    return rc;
}

/* Open the dataset in dir under its staged manifest as a reader opens it (which checks every
 * target record), and count the boxes stored and dropped over every sample. 0, or the error of
 * the open or of a record, with msg saying why. */
static int check_staged(const char *dir, uint64_t *boxes, uint64_t *dropped, fmt_msg *msg)
{
    fmt_dataset *d = NULL;
    *boxes = *dropped = 0;
    int rc = fmt_dataset_open_flags(&d, dir, FMT_ACCESS_PREAD, FMT_OPEN_STAGED, msg);
    int targets = rc == 0 && fmt_dataset_manifest(d)->targets;
    for (uint64_t i = 0; targets && rc == 0 && i < fmt_dataset_count(d); i++) {
        fmt_target t;
        if ((rc = fmt_dataset_target(d, i, &t, msg)) == 0) {
            *boxes += t.count;
            *dropped += t.dropped;
        }
    }
    fmt_dataset_close(d);
    return rc;
}

/* ---- the build ---- */

/* A streamed build without class names: as for a list file, label L is class "L", for every L
 * up to the largest label given. */
static int stream_classes(fmt_inputs *in)
{
    int32_t top = -1;
    for (size_t i = 0; i < in->n; i++)
        if (in->items[i].label > top)
            top = in->items[i].label;
    if (top < 0)
        return 0;
    if (!(in->classes = calloc((size_t)top + 1, sizeof *in->classes)))
        return ENOMEM;
    for (int32_t c = 0; c <= top; c++, in->nclasses++)
        if (asprintf(&in->classes[c], "%d", (int)c) < 0) {
            in->classes[c] = NULL;
            return ENOMEM;
        }
    return 0;
}

/* The build into o->out: the whole input list, or o->part's slice of it when o->out is the
 * part's folder. */
static int build_listed(const shc_build_opts *o, const shc_build_cb *cb, const shc_annot *annot,
                        fmt_inputs *listed)
{
    fmt_inputs in;
    fmt_msg msg = {{0}};
    int rc = 0;
    if (listed) {
        in = *listed;           /* ours from here on */
        memset(listed, 0, sizeof *listed);
    } else if (o->stream) {
        /* a streamed build: its items join in.items as the writer takes them; the classes are
         * the given names, or made from the labels once the stream ends */
        memset(&in, 0, sizeof in);
        size_t nc;
        const char *const *names = shc_stream_classes(o->stream, &nc);
        if (nc && !(in.classes = calloc(nc, sizeof *in.classes)))
            rc = ENOMEM;
        for (size_t c = 0; !rc && c < nc; c++, in.nclasses++)
            if (!(in.classes[c] = strdup(names[c])))
                rc = ENOMEM;
        if (rc) {
            fmt_inputs_free(&in);
            shc_say(cb, "out of memory");
            return ENOMEM;
        }
    } else {
        rc = o->wds ? fmt_inputs_from_wds(o->srcs, o->nsrc, o->wds_label, &in, &msg)
             : o->list ? fmt_inputs_from_list(o->list, o->srcs, o->nsrc, &in, &msg)
                       : fmt_inputs_from_dirs(o->srcs, o->nsrc, &in, &msg);
    }
    if (rc) {
        shc_say(cb, "%s", msg.text);
        return rc == ENOMEM ? ENOMEM : SHC_EINPUT;
    }
    for (size_t i = 0; i < in.nskipped; i++)
        shc_say(cb, "cannot read %s: %s (skipped)", in.skipped[i].path, in.skipped[i].reason);
    if (in.n == 0 && !o->stream && o->wds) {
        const char *lab = o->wds_label ? o->wds_label : "cls";
        int json = strncmp(lab, "json:", 5) == 0;
        shc_say(cb, "no samples found in %s%s (expected WebDataset shards whose samples hold a "
                ".jpg, .png or .bmp image and a usable .%s label%s%s of the same key)", o->srcs[0],
                o->nsrc > 1 ? " and the other SRCs" : "", json ? "json" : lab,
                json ? " with the field " : "", json ? lab + 5 : "");
        fmt_inputs_free(&in);
        return SHC_EINPUT;
    }
    if (in.n == 0 && !o->stream) {
        shc_say(cb, "no images found in %s%s (expected class folders of .jpg, .png or .bmp files, "
                "or a --list)", o->srcs[0], o->nsrc > 1 ? " and the other SRCs" : "");
        fmt_inputs_free(&in);
        return SHC_EINPUT;
    }
    /* --fields: each input's record, and the fingerprint covers them */
    shc_fields_in fin = {0};
    shc_build_opts with_fields;
    if (o->fields && !o->stream) {
        if ((rc = shc_fields_load(o->fields, &in, o->srcs, o->nsrc, &fin, &msg)) != 0) {
            shc_say(cb, "%s", msg.text);
            fmt_inputs_free(&in);
            return rc == ENOMEM ? ENOMEM : SHC_EINPUT;
        }
        with_fields = *o;
        with_fields.fields_hash = fin.hash;
        o = &with_fields;
    }
    /* a part takes its slice of the list; `source` stays the position in the whole list */
    uint64_t lo = 0, hi = UINT64_MAX;   /* a stream's end is known when it comes */
    if (!o->stream)
        shc_part_range(in.n, &o->part, &lo, &hi);
    if (o->ctl)
        atomic_store(&o->ctl->total, o->stream ? 0 : hi - lo);   /* a stream's: not known */
    if (o->dry_run) {
        rc = shc_dry_run(o, cb, &in, annot, lo, hi);
        fmt_inputs_free(&in);
        shc_fields_free(&fin);
        return rc;
    }

    int result = 0;
    shc_reject_list rej = {0}, warn = {0};
    shc_shard_list shards = {0};
    pipeline pl = {0};
    pthread_t *tids = NULL;
    unsigned nthreads = 0;
    const fmt_backend *be = o->backend;
    void *w = NULL;
    FILE *journal = NULL;
    char *jpath = NULL, *cur_name = NULL, *cur_path = NULL;
    /* a part's shards carry the whole build's fingerprint: a part folder's name fixes its slice */
    uint64_t fp = shc_fingerprint(o, o->stream ? NULL : &in), next_input = lo, next_index = 0;
    uint32_t align = o->align;   /* 0: the backend's own layout (raw: packed) */
    const uint32_t nper = shc_render_count(&o->r);
    double t0 = shc_now(), last_progress = 0;
    shc_crash_hook crash;
    shc_crash_init(&crash, cb);
    int lock_fd = -1;
    int started = 0, committed = 0;     /* writing into out began; the manifest is in place */
    int condemned = 0;          /* an archive failed its stream check or changed (feed.h) */
    fmt_msg feed_why = {{0}};

    /* the output directory */
    if (mkdir(o->out, 0777) != 0 && errno != EEXIST) {
        result = errno;
        shc_say(cb, "cannot create %s: %s", o->out, strerror(result));
        goto leave;
    }
    struct stat sb;
    errno = 0;
    if (stat(o->out, &sb) != 0 || !S_ISDIR(sb.st_mode) || access(o->out, W_OK | X_OK) != 0) {
        result = errno ? errno : ENOTDIR;
        shc_say(cb, "cannot write to %s: %s", o->out, errno ? strerror(errno) : "not a directory");
        goto leave;
    }
    /* one writer at a time: a second build, --force or --resume into OUT would mix shards */
    long holder;
    rc = shc_lock_dir(o->out, SHC_LOCK_NAME, &lock_fd, &holder);
    if (rc == EWOULDBLOCK) {
        if (holder > 0)
            shc_say(cb, "%s is being written by another shardc, pid %ld", o->out, holder);
        else
            shc_say(cb, "%s is being written by another shardc", o->out);
        result = SHC_EINPUT;
        goto leave;
    }
    if (rc) {
        shc_say(cb, "cannot lock %s/%s: %s", o->out, SHC_LOCK_NAME, strerror(rc));
        result = rc;
        goto leave;
    }
    int contents = shc_dir_contents(o->out, shc_is_set(be) ? &in : NULL);
    if (contents == 2 && !o->force) {
        shc_say(cb, "%s is not empty and holds files that are not a shardc dataset (use --force to "
            "write into it anyway)", o->out);
        result = SHC_EINPUT;
        goto leave;
    }
    if (contents && o->resume) {
        fmt_manifest old;
        if (fmt_manifest_read(o->out, &old, NULL) == 0) {
            int same = old.fingerprint == fp;
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
                result = r ? SHC_EREJECTS : 0;
                goto leave;
            }
        }
        rc = shc_resume_scan(o, cb, &in, fp, lo, &shards, &next_input, &next_index);
        if (rc == 0)
            rc = shc_journal_load(o->out, next_input, &rej, &warn);
        if (rc) {
            shc_say(cb, "cannot resume in %s: %s", o->out, strerror(rc));
            result = rc;
            goto leave;
        }
        if (shards.n)
            shc_say(cb, "resuming: kept %zu finished shard(s), %" PRIu64 " samples; continuing at "
                "input %" PRIu64 " of %" PRIu64, shards.n,
                    next_index, next_input - lo, hi - lo);
    } else if (contents) {
        if (!o->force) {
            shc_say(cb, "%s already holds a dataset (use --resume to continue it or --force to "
                "replace it)", o->out);
            result = SHC_EINPUT;
            goto leave;
        }
        if ((rc = shc_clear_output(o->out, -1, shc_is_set(be) ? &in : NULL))) {
            shc_say(cb, "cannot clear %s: %s", o->out, strerror(rc));
            result = rc;
            goto leave;
        }
    }
    if (!o->stream)
        shc_warn_projection(o, cb, hi - lo);

    /* the journal holds exactly the rejects below the resume point */
    jpath = fmt_path_join(o->out, SHC_JOURNAL_NAME, "");
    journal = jpath ? fopen(jpath, "w") : NULL;
    if (!journal) {
        result = jpath ? errno : ENOMEM;
        shc_say(cb, "cannot write %s: %s", jpath ? jpath : o->out, strerror(result));
        goto leave;
    }
    started = 1;
    for (size_t i = 0; i < rej.n; i++)
        shc_journal_add(journal, 0, rej.v[i].pos, rej.v[i].path, rej.v[i].reason);
    for (size_t i = 0; i < warn.n; i++)
        shc_journal_add(journal, 1, warn.v[i].pos, warn.v[i].path, warn.v[i].reason);

    /* workers */
    nthreads = o->threads ? o->threads : 1;
    pl.o = o;
    pl.in = &in;
    pl.annot = annot;
    pl.stream = o->stream;
    pl.fields = fin.recs ? &fin : NULL;
    pl.nslots = 2 * (size_t)nthreads + 2;
    pl.next_claim = pl.next_write = (size_t)next_input;
    pl.end = o->stream ? SIZE_MAX : (size_t)hi;
    pl.slots = calloc(pl.nslots, sizeof *pl.slots);
    tids = calloc(nthreads, sizeof *tids);
    int slots_ok = pl.slots != NULL && fmt_rs_cache_create(&pl.cache) == 0;
    for (size_t k = 0; slots_ok && k < pl.nslots; k++) {
        slot *sl = &pl.slots[k];
        sl->imgs = calloc(nper, sizeof *sl->imgs);
        sl->metas = calloc(nper, sizeof *sl->metas);
        sl->params = calloc(nper, sizeof *sl->params);
        sl->aux = calloc(nper, FMT_AUG_RECORD_MAX);
        slots_ok = sl->imgs && sl->metas && sl->params && sl->aux;
    }
    if (!slots_ok || !tids) {
        shc_say(cb, "out of memory");
        result = ENOMEM;
        goto leave;
    }
    if (in.narchives && (rc = shc_feed_start(&in, next_input, hi, o->r.max_file_bytes,
                                             o->archive_buffer, &pl.feed)) != 0) {
        shc_say(cb, "cannot start reading the archives: %s", strerror(rc));
        result = rc;
        goto leave;
    }
    pthread_mutex_init(&pl.mu, NULL);
    pthread_cond_init(&pl.space, NULL);
    pthread_cond_init(&pl.ready, NULL);
    for (unsigned t = 0; t < nthreads; t++) {
        if (pthread_create(&tids[t], NULL, worker, &pl) != 0) {
            nthreads = t;
            break;
        }
    }
    if (nthreads == 0) {
        shc_say(cb, "cannot start worker threads");
        result = EAGAIN;
        goto stop;
    }

    /* the writer: results in input order */
    uint64_t shard_no = shards.n;
    for (size_t i = (size_t)next_input; i < hi; i++) {
        if (o->ctl && atomic_load(&o->ctl->stop)) {
            shc_say(cb, "build of %s stopped at input %zu", o->out, i);
            result = SHC_ESTOPPED;
            goto stop;
        }
        slot *s = &pl.slots[i % pl.nslots];
        pthread_mutex_lock(&pl.mu);
        while (!s->done)
            pthread_cond_wait(&pl.ready, &pl.mu);
        pthread_mutex_unlock(&pl.mu);
        if ((rc = shc_feed_check(pl.feed, 0, &feed_why)))
            goto condemn;
        if (o->stream) {
            if (s->rc == SHC_EEND) {
                hi = i;         /* the stream's end: every item before it is written */
                break;
            }
            if (s->rc == SHC_ESTOPPED) {
                shc_say(cb, "build of %s stopped at input %zu", o->out, i);
                result = SHC_ESTOPPED;
                goto stop;
            }
            /* the item becomes input i, as a listed input would be */
            char *name;
            int32_t label;
            shc_stream_finish(o->stream, i, &name, &label);
            if (fmt_inputs_add(&in, name, label) != 0) {
                free(name);
                shc_say(cb, "out of memory");
                result = ENOMEM;
                goto stop;
            }
        }

        if (s->rc == 0 && s->why.text[0] && o->strict) {
            /* --strict: a file the decoder warned about is refused like a damaged one */
            s->rc = FMT_ECORRUPT;
            size_t n = strlen(s->why.text);
            const char *tail = " (a decoder warning; --strict)";
            if (n + strlen(tail) < sizeof s->why.text)
                memcpy(s->why.text + n, tail, strlen(tail) + 1);
        } else if (s->rc == 0 && s->why.text[0]) {
            if (cb && cb->warning)
                cb->warning(cb->ctx, in.items[i].path, s->why.text);
            if (shc_reject_add(&warn, i, in.items[i].path, s->why.text) != 0) {
                result = ENOMEM;
                goto stop;
            }
            shc_journal_add(journal, 1, i, in.items[i].path, s->why.text);
        }
        if (s->rc) {
            if (cb && cb->reject)
                cb->reject(cb->ctx, in.items[i].path, s->why.text);
            if (shc_reject_add(&rej, i, in.items[i].path, s->why.text) != 0) {
                result = ENOMEM;
                goto stop;
            }
            shc_journal_add(journal, 0, i, in.items[i].path, s->why.text);
            if (o->strict) {
                result = SHC_EREJECTS;
                goto stop;
            }
        } else {
            /* a shard holds whole inputs (all variants of one), so input_end is exact */
            uint64_t cost = 0;
            for (uint32_t v = 0; v < nper; v++)
                cost += be->w_cost((uint64_t)s->imgs[v].width * s->imgs[v].height *
                                            s->imgs[v].channels, s->metas[v].aux_len, align);
            if (w && be->w_count(w) > 0 &&
                (be->w_size(w) + cost > o->shard_bytes ||
                 (o->shard_samples && be->w_count(w) + nper > o->shard_samples))) {
                if ((rc = finish_shard(o, be, &w, journal, i, &shards, cur_name, &crash)))
                    goto io_error;
                shard_no++;
            }
            if (!w) {
                free(cur_name);
                free(cur_path);
                cur_name = shc_shard_name(be, shard_no);
                cur_path = cur_name ? fmt_path_join(o->out, cur_name, "") : NULL;
                char *stem = shc_shard_stem(shard_no);
                fmt_writer_opts wo = {.dir = o->out, .name = stem, .first_index = next_index,
                                      .fingerprint = fp, .align = align, .quality = o->quality,
                                      .codec = o->compress.codec, .level = o->compress.level,
                                      .jpeg_fraction = o->jpeg_fraction,
                                      .classes = (const char *const *)in.classes,
                                      .nclasses = in.nclasses};
                rc = cur_path && stem ? be->w_open(&w, &wo) : ENOMEM;
                free(stem);
                if (rc)
                    goto io_error;
            }
            for (uint32_t v = 0; v < nper; v++) {
                rc = be->w_add(w, &s->metas[v], s->imgs[v].pixels, NULL);
                if (rc)
                    goto io_error;
                shards.pixels += (uint64_t)s->imgs[v].width * s->imgs[v].height;
                next_index++;
                shc_crash_point(&crash, 1, "sample written to", cur_name);
            }
        }
        pthread_mutex_lock(&pl.mu);
        slot_clear(s, nper);
        pl.next_write = i + 1;
        pthread_cond_broadcast(&pl.space);
        pthread_mutex_unlock(&pl.mu);

        if (o->ctl)
            atomic_store(&o->ctl->done, i + 1 - lo);
        if (cb && cb->progress && shc_now() - last_progress > 0.25) {
            last_progress = shc_now();
            shc_report_progress(cb, t0, i + 1 - next_input,
                            o->stream ? i + 1 - next_input : hi - next_input, rej.n, 0);
        }
    }
    if (o->stream && hi == lo) {
        shc_say(cb, "no samples were given");
        result = SHC_EINPUT;
        goto stop;
    }
    if (o->stream && !in.nclasses && (rc = stream_classes(&in)) != 0) {
        shc_say(cb, "out of memory");
        result = rc;
        goto stop;
    }
    /* every archive read to the end of its stream, its checks passed, before anything is final */
    if ((rc = shc_feed_check(pl.feed, 1, &feed_why)))
        goto condemn;
    if (w && (rc = finish_shard(o, be, &w, journal, hi, &shards, cur_name, &crash)))
        goto io_error;
    shc_report_progress(cb, t0, hi - next_input, hi - next_input, rej.n, 1);

    /* rejects.tsv, then the manifest: last */
    fmt_manifest m = {0};
    char tool[64];
    snprintf(tool, sizeof tool, "shardc %s", SHARDC_VERSION);
    m.backend = (char *)be->name;
    m.backend_version = be->version;
    m.tool = tool;
    m.samples = next_index;
    m.inputs = hi - lo + in.nskipped;
    m.rejects = rej.n + in.nskipped;
    m.classes = in.classes;
    m.nclasses = in.nclasses;
    m.geom = o->r.geom;
    m.channels = o->r.channels;
    m.augment = o->r.augment;
    m.seed = o->r.seed;
    char spec[256] = "";
    if (o->r.augment)
        fmt_aug_format(&o->r.aug, spec, sizeof spec);
    m.aug_spec = o->r.augment ? spec : NULL;
    if (o->r.geom.mode == FMT_GEOM_SIZE) {
        m.sample_width = o->r.geom.width;
        m.sample_height = o->r.geom.height;
    } else if (o->r.geom.crop_w) {
        m.sample_width = o->r.geom.crop_w;
        m.sample_height = o->r.geom.crop_h;
    }
    m.pixels = shards.pixels;
    shc_channel_stats(shards.sum, shards.sumsq, shards.pixels, o->r.channels, m.mean, m.std);
    m.fingerprint = fp;
    m.nshards = shards.n;
    m.shards = shards.v;
    if (annot) {
        m.targets = 1;
        m.target_source = (char *)(annot->kind == SHC_ANNOT_COCO ? "coco"
                                   : annot->kind == SHC_ANNOT_MAPS ? "masks" : "yolo");
        m.ignore_index = annot->ignore_index;
        m.target_hash = o->target_hash;
        m.target_skipped = annot->skipped_empty;
        m.categories = annot->cats;
        m.ncategories = annot->ncats;
        m.target_ext = annot->ext;
        m.num_keypoints = annot->nkp;
        m.keypoint_names = annot->kp_names;
        m.nskeleton = annot->nskeleton;
        m.skeleton = annot->skeleton;
    }
    size_t nsf = 0;
    const fmt_field_def *sf = o->stream ? shc_stream_fields(o->stream, &nsf) : NULL;
    if (fin.defs || sf) {
        m.fields = fin.defs ? fin.defs : (fmt_field_def *)sf;
        m.nfields = fin.defs ? fin.ndefs : nsf;
        m.fields_source = (char *)(fin.defs ? "jsonl" : "stream");
        m.fields_hash = o->fields_hash;
    }
    m.build_json = build_options_json(o);
    if (o->part.count && m.build_json) {
        /* what the merge checks and adds up */
        shc_part_record pr = {.part = o->part, .inputs = in.n, .first_input = lo, .end_input = hi,
                              .listing_skips = in.nskipped, .rejects = rej.n,
                              .list_hash = shc_inputs_hash(&in), .fingerprint = fp,
                              .pixels = shards.pixels, .quality = o->quality};
        memcpy(pr.sum, shards.sum, sizeof pr.sum);
        memcpy(pr.sumsq, shards.sumsq, sizeof pr.sumsq);
        char *with = NULL;
        rc = shc_part_record_add(m.build_json, &pr, &with);
        free(m.build_json);
        m.build_json = rc ? NULL : with;
    }
    if (!m.build_json) {
        shc_say(cb, "out of memory");
        result = ENOMEM;
        goto stop;
    }
    fclose(journal);
    journal = NULL;
    shc_crash_point(&crash, 0, "before writing", SHC_REJECTS_NAME);
    rc = shc_write_rejects(o->out, &in, &rej);
    if (rc == 0)
        rc = shc_write_warnings(o->out, &warn);
    if (rc == 0) {
        shc_crash_point(&crash, 0, "before writing", SHC_INPUTS_NAME);
        rc = shc_write_inputs(o->out, &in, lo, hi);
    }
    if (rc == 0) {
        shc_crash_point(&crash, 0, "before writing", FMT_MANIFEST_NAME);
        rc = fmt_manifest_stage(o->out, &m);
    }
    free(m.build_json);
    if (rc) {
        shc_say(cb, "cannot write the manifest in %s: %s", o->out, strerror(rc));
        result = rc;
        goto stop;
    }
    /* what was written opens as a reader opens it, or the build failed: the manifest is
     * published only after that, so no reader (and no later --force) ever meets a dataset its
     * own build refused */
    uint64_t nboxes = 0, ndropped = 0;
    fmt_msg probe = {{0}};
    if (!o->shard_done && (rc = check_staged(o->out, &nboxes, &ndropped, &probe)) != 0) {
        char *staged = fmt_path_join(o->out, FMT_MANIFEST_STAGED_NAME, "");
        if (staged)
            unlink(staged);
        free(staged);
        shc_say(cb, "the dataset written to %s does not open: %s (no manifest written)", o->out,
                fmt_reason(&probe, rc));
        result = rc;
        goto stop;
    }
    if ((rc = fmt_manifest_publish(o->out)) != 0) {
        shc_say(cb, "cannot write the manifest in %s: %s", o->out, strerror(rc));
        result = rc;
        goto stop;
    }
    shc_crash_point(&crash, 0, "after writing", FMT_MANIFEST_NAME);
    committed = 1;
    unlink(jpath);

    double dt = shc_now() - t0;
    uint64_t total_bytes = 0;
    for (size_t k = 0; k < shards.n; k++)
        total_bytes += shards.v[k].bytes;
    size_t nrej = rej.n + in.nskipped;
    if (cb && cb->summary) {
        shc_summary sum = {.samples = next_index, .classes = in.nclasses, .shards = shards.n,
                           .bytes = total_bytes, .inputs = (size_t)(hi - lo) + in.nskipped,
                           .rejects = nrej, .warnings = warn.n, .seconds = dt,
                           .threads = nthreads, .out = o->out,
                           .images_per_s = dt > 0 ? (double)(hi - next_input) / dt : 0.0};
        if (annot) {
            /* counted from what was written, so a resumed build counts its kept shards too */
            sum.targets = 1;
            sum.skipped_empty = annot->skipped_empty;
            sum.boxes = nboxes;
            sum.boxes_dropped = ndropped;
        }
        cb->summary(cb->ctx, &sum);
    }
    result = nrej ? SHC_EREJECTS : 0;
    goto stop;

condemn:
    /* samples already written may hold altered bytes, or another member's: none is kept (a
     * --resume would keep the finished shards) and nothing is published */
    shc_say(cb, "cannot read %s; the build stops and removes what it wrote in %s", feed_why.text,
            o->out);
    condemned = 1;
    result = rc;
    goto stop;
io_error:
    shc_say(cb, "cannot write %s: %s", cur_path ? cur_path : o->out, fmt_strerror(rc));
    result = rc;
stop:
    if (w)
        be->w_abort(w);
    w = NULL;
    if (tids) {
        pthread_mutex_lock(&pl.mu);
        pl.stop = 1;
        pthread_cond_broadcast(&pl.space);
        pthread_mutex_unlock(&pl.mu);
        shc_feed_stop(pl.feed);     /* workers waiting for a member's bytes */
        for (unsigned t = 0; t < nthreads; t++)
            pthread_join(tids[t], NULL);
        pthread_mutex_destroy(&pl.mu);
        pthread_cond_destroy(&pl.space);
        pthread_cond_destroy(&pl.ready);
    }
    for (size_t k = 0; pl.slots && k < pl.nslots; k++)
        if (pl.slots[k].imgs)
            slot_clear(&pl.slots[k], nper);
leave:
    if (journal) {
        fflush(journal);
        fsync(fileno(journal));
        fclose(journal);
    }
    /* a streamed build cannot be resumed: what it wrote before failing goes */
    if ((o->stream || condemned) && started && !committed)
        shc_clear_output(o->out, -1, shc_is_set(be) ? &in : NULL);
    free(jpath);
    free(cur_name);
    free(cur_path);
    free(tids);
    for (size_t k = 0; pl.slots && k < pl.nslots; k++) {
        for (uint32_t v = 0; pl.slots[k].imgs && v < nper; v++)
            fmt_image_free(&pl.slots[k].imgs[v]);
        free(pl.slots[k].imgs);
        free(pl.slots[k].metas);
        free(pl.slots[k].params);
        free(pl.slots[k].aux);
        free(pl.slots[k].tbuf);
    }
    free(pl.slots);
    shc_feed_free(pl.feed);
    fmt_rs_cache_free(pl.cache);
    shc_shard_list_free(&shards);
    shc_reject_list_free(&rej);
    shc_reject_list_free(&warn);
    fmt_inputs_free(&in);
    shc_fields_free(&fin);
    if (crash.report)
        shc_say(cb, "crash points: %" PRIu64, crash.passed);
    if (lock_fd >= 0) {
        /* no stale pid left behind (still holding the lock): a finished OUT is the same bytes
         * whoever wrote it */
        if (ftruncate(lock_fd, 0) != 0) {
            /* harmless: the next writer truncates it too */
        }
        close(lock_fd);
    }
    return result;
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
    if (o->fields && (o->coco || o->yolo || o->masks || o->r.augment || o->stream)) {
        shc_say(cb, "--fields is not for %s builds (a sample has one aux record, and it holds %s)",
                o->stream ? "streamed" : o->r.augment ? "--augment" : "detection",
                o->stream ? "the fields each item brings" : o->r.augment
                ? "the variant's parameters" : "its target");
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
