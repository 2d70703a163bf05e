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
 */
#include "build.h"

#include <dirent.h>
#include <ftw.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxhash.h>

#include "fmt.h"
#include "image.h"
#include "inputs.h"
#include "manifest.h"
#include "backend.h"
#include "dataset.h"
#include "feed.h"
#include "raw.h"
#include "render.h"
#include "util.h"

#define JOURNAL_NAME ".rejects.journal"
#define REJECTS_NAME "rejects.tsv"
#define WARNINGS_NAME "warnings.tsv"
#define INPUTS_NAME "inputs.tsv"

/* One input's results: K samples (K = shc_render_count), or a reject. The arrays are allocated
 * once per slot and reused. */
typedef struct {
    int done;
    int rc;                     /* 0: samples ready; else rejected, why says why */
    fmt_msg why;                /* with rc 0: the decoder's warning, "" if none */
    fmt_image *imgs;
    fmt_sample_meta *metas;
    fmt_aug_params *params;
    uint8_t *aux;               /* K records of FMT_AUG_RECORD_SIZE bytes when augmenting */
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
    size_t next_claim, next_write, end;
    int stop;
    pthread_mutex_t mu;
    pthread_cond_t space, ready;
} pipeline;

/* One reject: input position, path, reason. */
typedef struct {
    uint64_t pos;
    char *path, *reason;
} reject;

typedef struct {
    reject *v;
    size_t n, cap;
} reject_list;

static int reject_add(reject_list *l, uint64_t pos, const char *path, const char *reason)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        reject *p = realloc(l->v, cap * sizeof *p);
        if (!p)
            return ENOMEM;
        l->v = p;
        l->cap = cap;
    }
    reject *r = &l->v[l->n];
    r->pos = pos;
    r->path = strdup(path);
    r->reason = strdup(reason);
    if (!r->path || !r->reason) {
        free(r->path);
        free(r->reason);
        return ENOMEM;
    }
    l->n++;
    return 0;
}

static void reject_list_free(reject_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].path);
        free(l->v[i].reason);
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* Shard k's name without the backend's suffix, and with it (the manifest's file name). */
static char *shard_stem(uint64_t k)
{
    char *p;
    return asprintf(&p, "shard-%05" PRIu64, k) < 0 ? NULL : p;
}

static char *shard_name(const fmt_backend *be, uint64_t k)
{
    char *p;
    return asprintf(&p, "shard-%05" PRIu64 "%s", k, be->suffix) < 0 ? NULL : p;
}

/* Remove a file or a whole directory tree (LMDB shards, per-image class folders). */
static int rm_entry(const char *fpath, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    int r = type == FTW_DP ? rmdir(fpath) : unlink(fpath);
    return r != 0 && errno != ENOENT ? errno : 0;
}

static int rm_tree(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return errno == ENOENT ? 0 : errno;
    if (!S_ISDIR(sb.st_mode))
        return unlink(path) != 0 && errno != ENOENT ? errno : 0;
    return nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- reporting: the caller's callbacks (build.h); the library prints nothing ---- */

static void say(const shc_build_cb *cb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One line for cb->message. */
static void say(const shc_build_cb *cb, const char *fmt, ...)
{
    if (!cb || !cb->message)
        return;
    char text[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    cb->message(cb->ctx, text);
}

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
    default:
        return fmt_strerror(rc);
    }
}

int shc_build_exit(int rc)
{
    return rc == 0 ? SHC_EXIT_OK : rc == SHC_EREJECTS ? SHC_EXIT_REJECTS :
           rc == SHC_EINPUT ? SHC_EXIT_USAGE : SHC_EXIT_IO;
}

/* ---- crash points (see the top of this file) ---- */

typedef struct {
    uint64_t at;                /* SHARDC_CRASH_AT, 0: never */
    uint64_t after_samples;     /* SHARDC_CRASH_AFTER, 0: never */
    uint64_t passed, samples;
    uint64_t report;            /* SHARDC_CRASH_POINTS */
    const shc_build_cb *cb;     /* where the report goes */
} crash_hook;

static uint64_t env_uint(const char *name)
{
    const char *v = getenv(name);
    uint64_t n;
    return v && shc_parse_uint(v, 1, UINT64_MAX, &n) == 0 ? n : 0;
}

static void crash_init(crash_hook *c, const shc_build_cb *cb)
{
    memset(c, 0, sizeof *c);
    c->cb = cb;
    c->at = env_uint("SHARDC_CRASH_AT");
    c->after_samples = env_uint("SHARDC_CRASH_AFTER");
    c->report = env_uint("SHARDC_CRASH_POINTS");
}

/* Pass one crash point: what and name say where, for SHARDC_CRASH_POINTS=2. */
static void crash_point(crash_hook *c, int sample, const char *what, const char *name)
{
    c->passed++;
    c->samples += sample != 0;
    if (c->report >= 2)
        say(c->cb, "crash point %" PRIu64 ": %s %s", c->passed, what, name);
    if ((c->at && c->passed == c->at) ||
        (sample && c->after_samples && c->samples == c->after_samples))
        raise(SIGKILL);
}

/* ---- the worker side ---- */

/* Decode and render one input, then hash and sum each sample. On failure s->rc is set and
 * s->why says why. */
static void process(const shc_build_opts *o, const shc_annot *annot, shc_feed *feed,
                    const fmt_input *in, uint64_t pos, shc_render_scratch *rs, slot *s)
{
    uint32_t n = shc_render_count(&o->r);
    if (in->archive) {
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
        m->label = in->label;
        m->source = pos;
        m->hash = fmt_hash64(im->pixels, npix * im->channels);
        fmt_pixel_sums(im->pixels, npix, im->channels, m->sum, m->sumsq);
        if (o->r.augment) {
            uint8_t *rec = s->aux + (size_t)v * FMT_AUG_RECORD_SIZE;
            fmt_aug_encode(&s->params[v], rec);
            m->aux = rec;
            m->aux_len = FMT_AUG_RECORD_SIZE;
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
            process(pl->o, pl->annot, pl->feed, &pl->in->items[i], i, rs, s);
        }

        pthread_mutex_lock(&pl->mu);
        s->done = 1;
        pthread_cond_broadcast(&pl->ready);
        pthread_mutex_unlock(&pl->mu);
    }
    shc_render_scratch_free(rs);
    return NULL;
}

/* ---- fingerprint, projection ---- */

uint64_t shc_fingerprint(const shc_build_opts *o, const fmt_inputs *in)
{
    XXH3_state_t *st = XXH3_createState();
    if (!st)
        return 0;
    XXH3_64bits_reset(st);
    const char tag[] = "shardc-build-1";
    XXH3_64bits_update(st, tag, sizeof tag);
    const shc_render_opts *r = &o->r;
    uint64_t v[] = {r->geom.mode, r->geom.fit, r->geom.width, r->geom.height, r->geom.short_side,
                    r->geom.max_side, r->channels, r->limits.max_side, r->limits.max_pixels,
                    r->max_file_bytes, o->shard_bytes, o->shard_samples, o->align, r->augment,
                    r->seed, r->geom.crop_w, r->geom.crop_h, (uint64_t)r->geom.filter,
                    (uint64_t)r->geom.shrink_on_load};
    XXH3_64bits_update(st, v, sizeof v);
    if (o->compress.codec) {
        /* only when compressing, so that the fingerprints of other builds stay what they were */
        char spec[32];
        fmt_codec_format(&o->compress, spec, sizeof spec);
        XXH3_64bits_update(st, spec, strlen(spec) + 1);
    }
    if (o->jpeg_fraction > 0) {
        char spec[64];
        snprintf(spec, sizeof spec, "jpeg %.17g q%d", o->jpeg_fraction, o->quality);
        XXH3_64bits_update(st, spec, strlen(spec) + 1);
    }
    if (r->augment) {
        char spec[256];
        fmt_aug_format(&r->aug, spec, sizeof spec);
        XXH3_64bits_update(st, spec, strlen(spec) + 1);
    }
    if (o->target_hash) {
        /* only for detection builds, so that other fingerprints stay what they were */
        const char ttag[] = "targets";
        XXH3_64bits_update(st, ttag, sizeof ttag);
        XXH3_64bits_update(st, &o->target_hash, sizeof o->target_hash);
    }
    for (size_t i = 0; i < in->nclasses; i++)
        XXH3_64bits_update(st, in->classes[i], strlen(in->classes[i]) + 1);
    for (size_t i = 0; i < in->n; i++) {
        XXH3_64bits_update(st, in->items[i].path, strlen(in->items[i].path) + 1);
        XXH3_64bits_update(st, &in->items[i].label, sizeof in->items[i].label);
    }
    uint64_t h = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return h;
}

/* ---- output directory state ---- */

/* Class folders of per-image sets are ours too. */
static int is_class(const fmt_inputs *in, const char *name)
{
    for (size_t i = 0; in && i < in->nclasses; i++)
        if (strcmp(in->classes[i], name) == 0)
            return 1;
    return 0;
}

static int is_ours(const char *name)
{
    return strcmp(name, FMT_MANIFEST_NAME) == 0 || strcmp(name, REJECTS_NAME) == 0 ||
           strcmp(name, WARNINGS_NAME) == 0 || strcmp(name, WARNINGS_NAME ".tmp") == 0 ||
           strcmp(name, INPUTS_NAME) == 0 || strcmp(name, INPUTS_NAME ".tmp") == 0 ||
           strcmp(name, JOURNAL_NAME) == 0 || strncmp(name, "shard-", 6) == 0 ||
           strcmp(name, SHC_PARTS_DIR) == 0 ||
           strcmp(name, FMT_MANIFEST_NAME ".tmp") == 0 || strcmp(name, REJECTS_NAME ".tmp") == 0;
}

/* 1 if dir holds anything; 2 if it holds something that is not ours (class folders are ours
 * when the backend writes per-image sets). */
static int dir_contents(const char *dir, const fmt_inputs *sets)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int any = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            strcmp(e->d_name, SHC_LOCK_NAME) == 0)
            continue;
        if (!is_ours(e->d_name) && !is_class(sets, e->d_name)) {
            any = 2;
            break;
        }
        any = 1;
    }
    closedir(d);
    return any;
}

/* Remove our files: the manifest first, so no manifest ever names a removed shard. With
 * keep_from >= 0, shards numbered below keep_from (and the journal) are kept. Class folders of
 * per-image sets (sets != NULL) go only when everything goes: kept shards' images live there, and
 * a resumed build rewrites the others under the same names. */
static int clear_output(const char *dir, long keep_from, const fmt_inputs *sets)
{
    char *p = fmt_path_join(dir, FMT_MANIFEST_NAME, "");
    if (!p)
        return ENOMEM;
    if (unlink(p) != 0 && errno != ENOENT) {
        int e = errno;
        free(p);
        return e;
    }
    free(p);
    fmt_fsync_parent(dir);
    DIR *d = opendir(dir);
    if (!d)
        return errno;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            strcmp(e->d_name, SHC_LOCK_NAME) == 0)
            continue;   /* the lock we hold stays (see shc_lock_dir) */
        int cls = is_class(sets, e->d_name);
        if (!is_ours(e->d_name) && !(cls && keep_from < 0))
            continue;
        unsigned long k;
        int n = 0;
        if (keep_from >= 0 && strcmp(e->d_name, JOURNAL_NAME) == 0)
            continue;
        /* parts of a build in parts go with --force only */
        if (keep_from >= 0 && strcmp(e->d_name, SHC_PARTS_DIR) == 0)
            continue;
        /* shard-NNNNN followed by a suffix, not a temporary */
        if (keep_from >= 0 && sscanf(e->d_name, "shard-%lu%n", &k, &n) == 1 &&
            !strstr(e->d_name + n, ".tmp") && (long)k < keep_from)
            continue;
        char *q = fmt_path_join(dir, e->d_name, "");
        int r = q ? rm_tree(q) : ENOMEM;
        if (r && !rc)
            rc = r;
        free(q);
    }
    closedir(d);
    return rc;
}

/* ---- resume ---- */

/* Backends whose shards keep their images in class folders. */
static int is_set(const fmt_backend *be)
{
    return strcmp(be->suffix, ".idx") == 0;
}

typedef struct {
    fmt_manifest_shard *v;
    size_t n, cap;
    uint64_t sum[3], sumsq[3];
    uint64_t pixels;            /* per channel, over all samples of the listed shards */
} shard_list;

static int shard_list_add(shard_list *l, const char *name, const fmt_shard_info *h)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        fmt_manifest_shard *p = realloc(l->v, cap * sizeof *p);
        if (!p)
            return ENOMEM;
        l->v = p;
        l->cap = cap;
    }
    fmt_manifest_shard *s = &l->v[l->n];
    memset(s, 0, sizeof *s);
    if (!(s->file = strdup(name)))
        return ENOMEM;
    s->first = h->first_index;
    s->samples = h->samples;
    s->bytes = h->bytes;
    s->hash = h->hash;
    s->pins = h->pins;
    s->file_hash = h->file_hash;
    s->pin_hash = h->pin_hash;
    s->pin_skip_off = h->pin_skip_off;
    s->pin_skip_len = h->pin_skip_len;
    for (int c = 0; c < 3; c++) {
        l->sum[c] += h->sum[c];
        l->sumsq[c] += h->sumsq[c];
    }
    l->n++;
    return 0;
}

static void shard_list_free(shard_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].file);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* Keep finished shards 0, 1, ... while each opens, carries this build's fingerprint, continues
 * where the previous one ended and has every sample hash intact. Sets *next_input and
 * *next_index to where the build continues. */
static int resume_scan(const shc_build_opts *o, const shc_build_cb *cb, const fmt_inputs *in, uint64_t fp,
                       uint64_t first_input, shard_list *kept, uint64_t *next_input,
                       uint64_t *next_index)
{
    const fmt_backend *be = o->backend;
    *next_input = first_input;
    *next_index = 0;
    for (uint64_t k = 0;; k++) {
        char *name = shard_name(be, k), *path = name ? fmt_path_join(o->out, name, "") : NULL;
        if (!path) {
            free(name);
            return ENOMEM;
        }
        void *s = NULL;
        fmt_msg msg = {{0}};
        int ok = 0;
        uint64_t px = 0;
        if (access(path, F_OK) == 0) {
            int rc = be->r_open(&s, o->out, path, FMT_ACCESS_MMAP, &msg);
            const fmt_shard_info *h = rc ? NULL : be->r_info(s);
            if (h && h->fingerprint == fp && h->first_index == *next_index &&
                h->input_end > *next_input) {
                ok = 1;
                for (uint64_t i = 0; ok && i < h->samples; i++) {
                    fmt_sample e;
                    ok = be->r_get(s, i, &e) == 0 && be->r_check(s, i) == 0;
                    px += (uint64_t)e.height * e.width;
                }
            }
            fmt_shard_info hp;
            if (ok) {
                hp = *h;
                ok = !be->r_pins || be->r_pins(s, path, &hp) == 0;
            }
            if (ok) {
                *next_input = h->input_end;
                *next_index += h->samples;
                kept->pixels += px;
                ok = shard_list_add(kept, name, &hp) == 0;
            } else {
                say(cb, "%s: not reusable (%s), rebuilding from here", path,
                        rc ? fmt_reason(&msg, rc) : "different build or damaged");
            }
        }
        be->r_close(s);
        free(path);
        free(name);
        if (!ok)
            return clear_output(o->out, (long)k, is_set(be) ? in : NULL);
    }
}

/* Reload the journal's rejects (and warnings: lines "W<pos>...") below next_input. */
static int journal_load(const char *out, uint64_t next_input, reject_list *rej,
                        reject_list *warn)
{
    char *path = fmt_path_join(out, JOURNAL_NAME, "");
    if (!path)
        return ENOMEM;
    FILE *f = fopen(path, "r");
    int rc = 0;
    if (f) {
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        while ((n = getline(&line, &cap, f)) > 0) {
            if (line[n - 1] != '\n')
                break; /* torn last line */
            line[n - 1] = '\0';
            char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
            if (!t2)
                continue;
            *t1 = *t2 = '\0';
            uint64_t pos;
            int w = line[0] == 'W';
            if (shc_parse_uint(line + w, 0, UINT64_MAX, &pos) == 0 && pos < next_input)
                if ((rc = reject_add(w ? warn : rej, pos, t1 + 1, t2 + 1)))
                    break;
        }
        free(line);
        fclose(f);
    }
    free(path);
    return rc;
}

/* ---- writing helpers ---- */

/* TSV field: tabs, newlines and backslashes escaped so every line is one record. */
static void put_tsv(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '\t': fputs("\\t", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\\': fputs("\\\\", f); break;
        default: fputc(*s, f);
        }
    }
}

static int write_rejects(const char *out, const fmt_inputs *in, const reject_list *rej)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return ENOMEM;
    fputs("path\treason\n", f);
    for (size_t i = 0; i < in->nskipped; i++) {
        put_tsv(f, in->skipped[i].path);
        fputc('\t', f);
        put_tsv(f, in->skipped[i].reason);
        fputc('\n', f);
    }
    for (size_t i = 0; i < rej->n; i++) {
        put_tsv(f, rej->v[i].path);
        fputc('\t', f);
        put_tsv(f, rej->v[i].reason);
        fputc('\n', f);
    }
    if (fclose(f) != 0) {
        free(buf);
        return ENOMEM;
    }
    char *path = fmt_path_join(out, REJECTS_NAME, "");
    int rc = path ? fmt_write_file_atomic(path, buf, len) : ENOMEM;
    free(path);
    free(buf);
    return rc;
}

/* warnings.tsv: the inputs stored although their decoder warned, with the warning. */
static int write_warnings(const char *out, const reject_list *warn)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return ENOMEM;
    fputs("path\twarning\n", f);
    for (size_t i = 0; i < warn->n; i++) {
        put_tsv(f, warn->v[i].path);
        fputc('\t', f);
        put_tsv(f, warn->v[i].reason);
        fputc('\n', f);
    }
    if (fclose(f) != 0) {
        free(buf);
        return ENOMEM;
    }
    char *path = fmt_path_join(out, WARNINGS_NAME, "");
    int rc = path ? fmt_write_file_atomic(path, buf, len) : ENOMEM;
    free(path);
    free(buf);
    return rc;
}

/* inputs.tsv: every input position in [lo, hi) with its label and path, so each sample's
 * `source` can be traced back to its file (and replayed: shardc cat --replay). */
static int write_inputs(const char *out, const fmt_inputs *in, uint64_t lo, uint64_t hi)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return ENOMEM;
    fputs("source\tlabel\tpath\n", f);
    for (size_t i = (size_t)lo; i < hi; i++) {
        fprintf(f, "%zu\t%d\t", i, (int)in->items[i].label);
        put_tsv(f, in->items[i].path);
        fputc('\n', f);
    }
    if (fclose(f) != 0) {
        free(buf);
        return ENOMEM;
    }
    char *path = fmt_path_join(out, INPUTS_NAME, "");
    int rc = path ? fmt_write_file_atomic(path, buf, len) : ENOMEM;
    free(path);
    free(buf);
    return rc;
}

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
                     o->quality, o->coco ? "coco" : o->yolo ? "yolo" : o->list ? "list" : "folders");
    return n < 0 ? NULL : s;
}

static void report_progress(const shc_build_cb *cb, double t0, uint64_t done, uint64_t total,
                            uint64_t rejects, int final)
{
    if (!cb || !cb->progress)
        return;
    shc_progress p = {.done = done, .total = total, .rejects = rejects,
                      .seconds = shc_now() - t0, .final = final};
    cb->progress(cb->ctx, &p);
}

/* Finish the current shard: its rejects reach the disk first, then the backend completes it and
 * renames it into place. *w is consumed whatever happens. */
static int finish_shard(const fmt_backend *be, void **w, FILE *journal, uint64_t input_end,
                        shard_list *shards, const char *name, crash_hook *crash)
{
    fmt_shard_info h;
    int rc;
    crash_point(crash, 0, "before finishing", name);
    if (fflush(journal) != 0 || fsync(fileno(journal)) != 0) {
        rc = errno;
        be->w_abort(*w);
    } else {
        rc = be->w_finish(*w, input_end, &h);
        if (rc == 0)
            rc = shard_list_add(shards, name, &h);
    }
    *w = NULL;
    if (rc == 0)
        crash_point(crash, 0, "after finishing", name);
    return rc;
}

/* ---- dry run ---- */

/* Inputs rendered and encoded by a dry run for backends with w_sample_bytes. */
#define DRY_ENCODED_MAX 128

/* Render the input at pos and add, over its samples, what the backend would store
 * (w_sample_bytes) to *exact and its w_cost estimate to *est. Nothing is added when the input
 * cannot be rendered or encoded. */
static void dry_encode(const shc_build_opts *o, const fmt_inputs *in, size_t pos,
                       const uint8_t *data, size_t data_len, uint64_t first_index, fmt_resizer *rz,
                       uint64_t *exact, uint64_t *est)
{
    uint32_t nper = shc_render_count(&o->r);
    fmt_image *imgs = calloc(nper, sizeof *imgs);
    fmt_aug_params *params = calloc(nper, sizeof *params);
    if (!imgs || !params ||
        (data ? shc_render_mem(&o->r, data, data_len, pos, rz, imgs, params, NULL)
              : shc_render(&o->r, in->items[pos].path, pos, rz, imgs, params, NULL))) {
        free(imgs);
        free(params);
        return;
    }
    fmt_writer_opts wo = {.align = o->align, .quality = o->quality, .codec = o->compress.codec,
                          .level = o->compress.level, .jpeg_fraction = o->jpeg_fraction};
    uint64_t e = 0, c = 0;
    int ok = 1;
    for (uint32_t v = 0; v < nper; v++) {
        fmt_image *im = &imgs[v];
        uint8_t rec[FMT_AUG_RECORD_SIZE] = {0};
        wo.first_index = first_index + v;   /* the sample's dataset index (the mixed mode's pick) */
        fmt_sample_meta m = {.height = im->height, .width = im->width, .channels = im->channels,
                             .label = in->items[pos].label, .source = pos,
                             .aux = o->r.augment ? rec : NULL,
                             .aux_len = o->r.augment ? FMT_AUG_RECORD_SIZE : 0};
        uint64_t len = (uint64_t)im->width * im->height * im->channels;
        m.hash = fmt_hash64(im->pixels, (size_t)len);
        uint64_t b = o->backend->w_sample_bytes(&wo, &m, im->pixels);
        ok = ok && b != 0;
        e += b;
        c += o->backend->w_cost(len, m.aux_len, o->align);
        fmt_image_free(im);
    }
    if (ok) {
        *exact += e;
        *est += c;
    }
    free(imgs);
    free(params);
}

/* Bytes of inputs.tsv, as write_inputs writes it (paths are short enough never to be escaped in
 * a way that matters for a projection). */
static uint64_t inputs_tsv_bytes(const fmt_inputs *in, uint64_t lo, uint64_t hi)
{
    uint64_t b = strlen("source\tlabel\tpath\n");
    char num[64];
    for (size_t i = (size_t)lo; i < hi; i++)
        b += (uint64_t)snprintf(num, sizeof num, "%zu\t%d\t\n", i, (int)in->items[i].label) +
             strlen(in->items[i].path);
    return b;
}

/* The projection: every input is probed (header only) for the sample size the geometry gives
 * it, and the shards are laid out as the writer would, input by input. Backends whose stored
 * size depends on the pixels (w_sample_bytes: image files, compressed payloads) get their
 * w_cost scaled by exact / estimated bytes over up to DRY_ENCODED_MAX inputs, evenly spread,
 * that are really rendered and encoded. */
static int dry_run(const shc_build_opts *o, const shc_build_cb *cb, const fmt_inputs *in,
                   const shc_annot *annot, uint64_t lo, uint64_t hi)
{
    uint64_t samples = 0, bad = 0, src_bytes = 0, bytes = 0, shards = 0, cur = 0, cur_n = 0;
    uint32_t align = o->align;
    uint32_t nper = shc_render_count(&o->r);
    uint64_t *cost = calloc(in->n ? in->n : 1, sizeof *cost);
    shc_feed *feed = NULL;
    if (!cost || (in->narchives && shc_feed_start(in, lo, hi, o->r.max_file_bytes,
                                                  o->archive_buffer, &feed) != 0)) {
        free(cost);
        say(cb, "out of memory");
        return ENOMEM;
    }
    for (size_t i = (size_t)lo; i < hi; i++) {
        uint8_t *buf = NULL;
        size_t len = 0;
        fmt_image_info info;
        fmt_geom_plan plan;
        int rc = in->items[i].archive ? shc_feed_take(feed, i, &buf, &len, NULL)
                                      : fmt_read_file(in->items[i].path,
                                                      (size_t)o->r.max_file_bytes, &buf, &len);
        if (rc == 0)
            rc = fmt_image_probe(buf, len, &info, NULL);
        free(buf);
        if (rc == 0)
            rc = fmt_geom_plan_for(&o->r.geom, info.width, info.height, &plan);
        if (rc) {
            bad++;
            continue;
        }
        src_bytes += len;
        /* a target record: as many boxes as annotated (the geometry may drop some) */
        uint32_t aux = o->r.augment ? FMT_AUG_RECORD_SIZE
                       : annot ? shc_annot_record_bytes(annot, i) : 0;
        cost[i] = nper * o->backend->w_cost((uint64_t)plan.out_w * plan.out_h * o->r.channels,
                                            aux, align);
    }
    shc_feed_free(feed);
    feed = NULL;
    double scale = 1.0;
    uint64_t good = hi - lo - bad, encoded = 0;
    /* raw stores plain pixels exactly as w_cost says: only compressed raw needs encoding */
    int measure = o->backend->w_sample_bytes &&
                  (strcmp(o->backend->name, "raw") != 0 || o->compress.codec ||
                   o->jpeg_fraction > 0);
    if (measure && good) {
        fmt_resizer *rz = NULL;
        uint64_t exact = 0, est = 0, step = (good + DRY_ENCODED_MAX - 1) / DRY_ENCODED_MAX, k = 0;
        /* archive members are read again, in one more walk of their archives */
        if (fmt_resizer_create(&rz) == 0 &&
            (!in->narchives || shc_feed_start(in, lo, hi, o->r.max_file_bytes,
                                              o->archive_buffer, &feed) == 0)) {
            for (size_t i = (size_t)lo; i < hi; i++) {
                uint8_t *data = NULL;
                size_t len = 0;
                int took = in->items[i].archive &&
                           shc_feed_take(feed, i, &data, &len, NULL) == 0;
                if (cost[i] && k++ % step == 0 && (took || !in->items[i].archive)) {
                    dry_encode(o, in, i, data, len, (k - 1) * nper, rz, &exact, &est);
                    encoded++;
                }
                free(data);
            }
            shc_feed_free(feed);
        }
        fmt_resizer_free(rz);
        if (est)
            scale = (double)exact / (double)est;
    }
    uint64_t header = align ? align : FMT_RAW_DEFAULT_ALIGN;
    for (size_t i = (size_t)lo; i < hi; i++) {
        if (!cost[i])
            continue;
        /* as the writer does: whole inputs per shard, bounded by the size so far (real bytes)
         * plus the next input's w_cost (an estimate) */
        if (cur_n == 0 || cur + cost[i] > o->shard_bytes ||
            (o->shard_samples && cur_n + nper > o->shard_samples)) {
            if (cur_n)
                bytes += cur;
            shards++;
            cur = header;
            cur_n = 0;
        }
        cur += (uint64_t)((double)cost[i] * scale + 0.5);
        cur_n += nper;
        samples += nper;
    }
    bytes += cur_n ? cur : 0;
    free(cost);
    uint64_t shard_bytes = bytes;
    /* the files next to the shards: inputs.tsv exactly, rejects.tsv and the manifest roughly */
    bytes += inputs_tsv_bytes(in, lo, hi) + 1024 + 128 * shards + 16 * in->nclasses;
    if (cb && cb->projection) {
        shc_projection p = {.inputs = (size_t)(hi - lo), .classes = in->nclasses,
                            .skipped = in->nskipped, .samples = samples, .unreadable = bad,
                            .bytes = bytes, .shards = shards, .shard_bytes = shard_bytes,
                            .input_bytes = src_bytes, .encoded = encoded, .scale = scale};
        cb->projection(cb->ctx, &p);
    }
    return 0;
}

/* For fixed-size geometry the output size is known up front: warn when it is large or does not
 * fit on the output filesystem. */
static void warn_projection(const shc_build_opts *o, const shc_build_cb *cb, uint64_t ninputs)
{
    if (o->r.geom.mode != FMT_GEOM_SIZE)
        return;
    uint32_t align = o->align;   /* 0: the backend's own layout (raw: packed) */
    uint64_t per = o->backend->w_cost((uint64_t)o->r.geom.width * o->r.geom.height * o->r.channels,
                                       o->r.augment ? FMT_AUG_RECORD_SIZE : 0, align);
    uint64_t total = per * ninputs * shc_render_count(&o->r);
    struct statvfs vfs;
    char b1[32], b2[32];
    if (statvfs(o->out, &vfs) == 0) {
        uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
        if (total > avail)
            say(cb, "warning: projected output %s exceeds the %s free in %s",
                    shc_human_size(total, b1, sizeof b1), shc_human_size(avail, b2, sizeof b2),
                    o->out);
        else if (total > (64ull << 30))
            say(cb, "note: projected output %s (uncompressed pixels)",
                    shc_human_size(total, b1, sizeof b1));
    }
}

/* Boxes stored and dropped over every sample of the dataset in dir. */
static int count_boxes(const char *dir, uint64_t *boxes, uint64_t *dropped)
{
    fmt_dataset *d = NULL;
    *boxes = *dropped = 0;
    int rc = fmt_dataset_open_ex(&d, dir, FMT_ACCESS_PREAD, NULL);
    for (uint64_t i = 0; rc == 0 && i < fmt_dataset_count(d); i++) {
        fmt_target t;
        if ((rc = fmt_dataset_target(d, i, &t, NULL)) == 0) {
            *boxes += t.count;
            *dropped += t.dropped;
        }
    }
    fmt_dataset_close(d);
    return rc;
}

/* ---- the build ---- */

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
    } else {
        rc = o->wds ? fmt_inputs_from_wds(o->srcs, o->nsrc, o->wds_label, &in, &msg)
             : o->list ? fmt_inputs_from_list(o->list, o->srcs, o->nsrc, &in, &msg)
                       : fmt_inputs_from_dirs(o->srcs, o->nsrc, &in, &msg);
    }
    if (rc) {
        say(cb, "%s", msg.text);
        return rc == ENOMEM ? ENOMEM : SHC_EINPUT;
    }
    for (size_t i = 0; i < in.nskipped; i++)
        say(cb, "cannot read %s: %s (skipped)", in.skipped[i].path, in.skipped[i].reason);
    if (in.n == 0) {
        say(cb, "no images found in %s%s (expected class folders of .jpg, .png or .bmp files, or a "
            "--list)", o->srcs[0], o->nsrc > 1 ? " and the other SRCs" : "");
        fmt_inputs_free(&in);
        return SHC_EINPUT;
    }
    /* a part takes its slice of the list; `source` stays the position in the whole list */
    uint64_t lo, hi;
    shc_part_range(in.n, &o->part, &lo, &hi);
    if (o->ctl)
        atomic_store(&o->ctl->total, hi - lo);
    if (o->dry_run) {
        rc = dry_run(o, cb, &in, annot, lo, hi);
        fmt_inputs_free(&in);
        return rc;
    }

    int result = 0;
    reject_list rej = {0}, warn = {0};
    shard_list shards = {0};
    pipeline pl = {0};
    pthread_t *tids = NULL;
    unsigned nthreads = 0;
    const fmt_backend *be = o->backend;
    void *w = NULL;
    FILE *journal = NULL;
    char *jpath = NULL, *cur_name = NULL, *cur_path = NULL;
    /* a part's shards carry the whole build's fingerprint: a part folder's name fixes its slice */
    uint64_t fp = shc_fingerprint(o, &in), next_input = lo, next_index = 0;
    uint32_t align = o->align;   /* 0: the backend's own layout (raw: packed) */
    const uint32_t nper = shc_render_count(&o->r);
    double t0 = shc_now(), last_progress = 0;
    crash_hook crash;
    crash_init(&crash, cb);
    int lock_fd = -1;

    /* the output directory */
    if (mkdir(o->out, 0777) != 0 && errno != EEXIST) {
        result = errno;
        say(cb, "cannot create %s: %s", o->out, strerror(result));
        goto leave;
    }
    struct stat sb;
    errno = 0;
    if (stat(o->out, &sb) != 0 || !S_ISDIR(sb.st_mode) || access(o->out, W_OK | X_OK) != 0) {
        result = errno ? errno : ENOTDIR;
        say(cb, "cannot write to %s: %s", o->out, errno ? strerror(errno) : "not a directory");
        goto leave;
    }
    /* one writer at a time: a second build, --force or --resume into OUT would mix shards */
    long holder;
    rc = shc_lock_dir(o->out, SHC_LOCK_NAME, &lock_fd, &holder);
    if (rc == EWOULDBLOCK) {
        if (holder > 0)
            say(cb, "%s is being written by another shardc, pid %ld", o->out, holder);
        else
            say(cb, "%s is being written by another shardc", o->out);
        result = SHC_EINPUT;
        goto leave;
    }
    if (rc) {
        say(cb, "cannot lock %s/%s: %s", o->out, SHC_LOCK_NAME, strerror(rc));
        result = rc;
        goto leave;
    }
    int contents = dir_contents(o->out, is_set(be) ? &in : NULL);
    if (contents == 2 && !o->force) {
        say(cb, "%s is not empty and holds files that are not a shardc dataset (use --force to "
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
                char *jp = fmt_path_join(o->out, JOURNAL_NAME, "");
                if (jp)
                    unlink(jp);
                free(jp);
                say(cb, "%s is already complete (%" PRIu64 " samples, %" PRIu64 " rejected); nothing "
                    "to do", o->out, n, r);
                result = r ? SHC_EREJECTS : 0;
                goto leave;
            }
        }
        rc = resume_scan(o, cb, &in, fp, lo, &shards, &next_input, &next_index);
        if (rc == 0)
            rc = journal_load(o->out, next_input, &rej, &warn);
        if (rc) {
            say(cb, "cannot resume in %s: %s", o->out, strerror(rc));
            result = rc;
            goto leave;
        }
        if (shards.n)
            say(cb, "resuming: kept %zu finished shard(s), %" PRIu64 " samples; continuing at "
                "input %" PRIu64 " of %" PRIu64, shards.n,
                    next_index, next_input - lo, hi - lo);
    } else if (contents) {
        if (!o->force) {
            say(cb, "%s already holds a dataset (use --resume to continue it or --force to "
                "replace it)", o->out);
            result = SHC_EINPUT;
            goto leave;
        }
        if ((rc = clear_output(o->out, -1, is_set(be) ? &in : NULL))) {
            say(cb, "cannot clear %s: %s", o->out, strerror(rc));
            result = rc;
            goto leave;
        }
    }
    warn_projection(o, cb, hi - lo);

    /* the journal holds exactly the rejects below the resume point */
    jpath = fmt_path_join(o->out, JOURNAL_NAME, "");
    journal = jpath ? fopen(jpath, "w") : NULL;
    if (!journal) {
        result = jpath ? errno : ENOMEM;
        say(cb, "cannot write %s: %s", jpath ? jpath : o->out, strerror(result));
        goto leave;
    }
    for (size_t i = 0; i < rej.n; i++)
        fprintf(journal, "%" PRIu64 "\t%s\t%s\n", rej.v[i].pos, rej.v[i].path, rej.v[i].reason);
    for (size_t i = 0; i < warn.n; i++)
        fprintf(journal, "W%" PRIu64 "\t%s\t%s\n", warn.v[i].pos, warn.v[i].path,
                warn.v[i].reason);

    /* workers */
    nthreads = o->threads ? o->threads : 1;
    pl.o = o;
    pl.in = &in;
    pl.annot = annot;
    pl.nslots = 2 * (size_t)nthreads + 2;
    pl.next_claim = pl.next_write = (size_t)next_input;
    pl.end = (size_t)hi;
    pl.slots = calloc(pl.nslots, sizeof *pl.slots);
    tids = calloc(nthreads, sizeof *tids);
    int slots_ok = pl.slots != NULL && fmt_rs_cache_create(&pl.cache) == 0;
    for (size_t k = 0; slots_ok && k < pl.nslots; k++) {
        slot *sl = &pl.slots[k];
        sl->imgs = calloc(nper, sizeof *sl->imgs);
        sl->metas = calloc(nper, sizeof *sl->metas);
        sl->params = calloc(nper, sizeof *sl->params);
        sl->aux = calloc(nper, FMT_AUG_RECORD_SIZE);
        slots_ok = sl->imgs && sl->metas && sl->params && sl->aux;
    }
    if (!slots_ok || !tids) {
        say(cb, "out of memory");
        result = ENOMEM;
        goto leave;
    }
    if (in.narchives && (rc = shc_feed_start(&in, next_input, hi, o->r.max_file_bytes,
                                             o->archive_buffer, &pl.feed)) != 0) {
        say(cb, "cannot start reading the archives: %s", strerror(rc));
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
        say(cb, "cannot start worker threads");
        result = EAGAIN;
        goto stop;
    }

    /* the writer: results in input order */
    uint64_t shard_no = shards.n;
    for (size_t i = (size_t)next_input; i < hi; i++) {
        if (o->ctl && atomic_load(&o->ctl->stop)) {
            say(cb, "build of %s stopped at input %zu", o->out, i);
            result = SHC_ESTOPPED;
            goto stop;
        }
        slot *s = &pl.slots[i % pl.nslots];
        pthread_mutex_lock(&pl.mu);
        while (!s->done)
            pthread_cond_wait(&pl.ready, &pl.mu);
        pthread_mutex_unlock(&pl.mu);

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
            if (reject_add(&warn, i, in.items[i].path, s->why.text) != 0) {
                result = ENOMEM;
                goto stop;
            }
            fprintf(journal, "W%zu\t%s\t%s\n", i, in.items[i].path, s->why.text);
        }
        if (s->rc) {
            if (cb && cb->reject)
                cb->reject(cb->ctx, in.items[i].path, s->why.text);
            if (reject_add(&rej, i, in.items[i].path, s->why.text) != 0) {
                result = ENOMEM;
                goto stop;
            }
            fprintf(journal, "%zu\t%s\t%s\n", i, in.items[i].path, s->why.text);
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
                if ((rc = finish_shard(be, &w, journal, i, &shards, cur_name, &crash)))
                    goto io_error;
                shard_no++;
            }
            if (!w) {
                free(cur_name);
                free(cur_path);
                cur_name = shard_name(be, shard_no);
                cur_path = cur_name ? fmt_path_join(o->out, cur_name, "") : NULL;
                char *stem = shard_stem(shard_no);
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
                crash_point(&crash, 1, "sample written to", cur_name);
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
            report_progress(cb, t0, i + 1 - next_input, hi - next_input, rej.n, 0);
        }
    }
    if (w && (rc = finish_shard(be, &w, journal, hi, &shards, cur_name, &crash)))
        goto io_error;
    report_progress(cb, t0, hi - next_input, hi - next_input, rej.n, 1);

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
        m.target_source = (char *)(annot->kind == SHC_ANNOT_COCO ? "coco" : "yolo");
        m.target_hash = o->target_hash;
        m.target_skipped = annot->skipped_empty;
        m.categories = annot->cats;
        m.ncategories = annot->ncats;
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
        say(cb, "out of memory");
        result = ENOMEM;
        goto stop;
    }
    fclose(journal);
    journal = NULL;
    crash_point(&crash, 0, "before writing", REJECTS_NAME);
    rc = write_rejects(o->out, &in, &rej);
    if (rc == 0)
        rc = write_warnings(o->out, &warn);
    if (rc == 0) {
        crash_point(&crash, 0, "before writing", INPUTS_NAME);
        rc = write_inputs(o->out, &in, lo, hi);
    }
    if (rc == 0) {
        crash_point(&crash, 0, "before writing", FMT_MANIFEST_NAME);
        rc = fmt_manifest_write(o->out, &m);
    }
    free(m.build_json);
    if (rc) {
        say(cb, "cannot write the manifest in %s: %s", o->out, strerror(rc));
        result = rc;
        goto stop;
    }
    crash_point(&crash, 0, "after writing", FMT_MANIFEST_NAME);
    unlink(jpath);
    /* what was written opens as a reader opens it, or the build failed */
    fmt_msg probe = {{0}};
    if ((rc = fmt_dataset_probe(o->out, &probe)) != 0) {
        say(cb, "the dataset written to %s does not open: %s", o->out, fmt_reason(&probe, rc));
        result = rc;
        goto stop;
    }

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
            if ((rc = count_boxes(o->out, &sum.boxes, &sum.boxes_dropped)) != 0) {
                say(cb, "cannot read the targets back from %s: %s", o->out, fmt_strerror(rc));
                result = rc;
                goto stop;
            }
        }
        cb->summary(cb->ctx, &sum);
    }
    result = nrej ? SHC_EREJECTS : 0;
    goto stop;

io_error:
    say(cb, "cannot write %s: %s", cur_path ? cur_path : o->out, fmt_strerror(rc));
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
    shard_list_free(&shards);
    reject_list_free(&rej);
    reject_list_free(&warn);
    fmt_inputs_free(&in);
    if (crash.report)
        say(cb, "crash points: %" PRIu64, crash.passed);
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
        say(cb, "--coco and --yolo take one SRC, the folder of the images (%s is not one)",
            o->nsrc ? o->srcs[0] : "nothing");
        return SHC_EINPUT;
    }
    if (is_set(o->backend)) {
        say(cb, "--coco and --yolo need --format raw, hdf5 or lmdb (%s writes per-image files "
            "without targets)", o->backend->name);
        return SHC_EINPUT;
    }
    return 0;
}

/* A build: list the inputs (for a detection build, from the annotations) and write them. */
static int build_dir(const shc_build_opts *o, const shc_build_cb *cb)
{
    if (!o->coco && !o->yolo)
        return build_listed(o, cb, NULL, NULL);
    int rc = annot_usable(o, cb);
    if (rc)
        return rc;
    shc_annot a;
    fmt_inputs in;
    fmt_msg msg = {{0}};
    shc_annot_opts ao = {.images = o->srcs[0], .coco = o->coco, .yolo = o->yolo,
                         .names = o->names, .skip_empty = o->skip_empty};
    if ((rc = shc_annot_load(&ao, &a, &in, &msg)) != 0) {
        say(cb, "%s", fmt_reason(&msg, rc));
        return rc == ENOMEM ? ENOMEM : SHC_EINPUT;
    }
    if (a.skipped_empty)
        say(cb, "note: %" PRIu64 " image(s) without annotations left out (--skip-empty)",
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
    if (!o->part.count || o->dry_run)
        return build_dir(o, cb);
    /* a part: the same build, into OUT/parts/IIIII-of-NNNNN */
    char err[1024], *dir = NULL;
    int rc = shc_part_prepare(o->out, &o->part, o->force, o->resume, &dir, err, sizeof err);
    if (rc) {
        say(cb, "%s", err);
        return rc == EEXIST ? SHC_EINPUT : rc;
    }
    shc_build_opts po = *o;
    po.out = dir;
    rc = build_dir(&po, cb);
    free(dir);
    return rc;
}
