/* publish.c - a build or merge into s3://: staged locally, uploaded as shards finish, the
 * manifest last (publish.h). */
#include "publish.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fmt.h"
#include "journal.h"
#include "manifest.h"
#include "part.h"
#include "remote.h"
#include "report.h"
#include "tsv.h"
#include "upload.h"
#include "util.h"

#define LANES_MAX 16            /* concurrent uploads at most (--upload-threads) */

static const char *const tables[3] = {SHC_REJECTS_NAME, SHC_WARNINGS_NAME, SHC_INPUTS_NAME};

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(path) != 0 && errno != ENOENT ? -1 : 0;
}

/* rm -rf of path (nothing there: 0) */
static int rm_rf(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return errno == ENOENT ? 0 : errno;
    return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0 ? errno : 0;
}

/* mkdir -p */
static int make_dirs(const char *path)
{
    char *p = strdup(path);
    if (!p)
        return ENOMEM;
    for (char *s = p + 1;; s++) {
        if (*s && *s != '/')
            continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            int e = errno;
            free(p);
            return e;
        }
        if (!c)
            break;
        *s = c;
    }
    free(p);
    return 0;
}

/* STAGING/<hash of the objects' base URL><suffix> into *out (malloc'd); STAGING: given, else
 * "upload" under the cache root (rmt_cache_root of cache). 0, FMT_EINVAL (no staging folder: no
 * HOME) or ENOMEM, with msg saying which. */
static int stage_dir(const char *given, const char *cache, const rmt_writer *w, const char *suffix,
                     char **out, fmt_msg *msg)
{
    const rmt_config *c = rmt_writer_config(w);
    uint64_t h = fmt_hash64(c->base, strlen(c->base));
    char *root = NULL;
    int n;
    *out = NULL;
    if (given && *given) {
        n = asprintf(out, "%s/%016" PRIx64 "%s", given, h, suffix);
    } else {
        fmt_msg why = {{0}};
        int rc = rmt_cache_root(cache, &root, &why);
        if (rc)
            return fmt_fail(msg, rc, "no staging folder for %s: give one (--staging): %s",
                            c->url, fmt_reason(&why, rc));
        n = asprintf(out, "%s/upload/%016" PRIx64 "%s", root, h, suffix);
        free(root);
    }
    if (n < 0) {
        *out = NULL;
        return fmt_fail(msg, ENOMEM, "out of memory");
    }
    return 0;
}

/* The objects of a build or merge: our names, as resume.c knows the files of a local one. */
static int ours(const char *name)
{
    if (strncmp(name, "shard-", 6) == 0 || strcmp(name, FMT_MANIFEST_NAME) == 0 ||
        strcmp(name, SHC_JOURNAL_NAME) == 0 || strncmp(name, SHC_PARTS_DIR "/", 6) == 0)
        return 1;
    for (int i = 0; i < 3; i++)
        if (strcmp(name, tables[i]) == 0)
            return 1;
    return 0;
}

/* rel (a name under the build's folder) is one of its objects: ours, at the top, or an lmdb
 * shard folder's data file (shard-NNNNN.lmdb/data.mdb) */
static int ours_top(const char *rel)
{
    const char *slash = strchr(rel, '/');
    if (!slash)
        return ours(rel);
    return strncmp(rel, "shard-", 6) == 0 && strcmp(slash + 1, fmt_backend_lmdb.data_file) == 0;
}

static int has(const rmt_object *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].name, name) == 0)
            return 1;
    return 0;
}

/* ---- the build ---- */

typedef struct item {
    char *name;                 /* the object's name */
    char *path;                 /* its staged file */
    char *folder;               /* a folder shard (lmdb): the staged folder, which goes once its
                                 * data file is up; else NULL */
    uint8_t *journal;           /* the journal when the shard finished */
    size_t jlen;
    uint64_t seq;               /* 1, 2, ...: the order the shards finished in */
    uint64_t size;
    struct item *next;
} item;

struct up;

/* One upload thread and its connection (its own writer: a libcurl handle is one thread's). */
typedef struct {
    struct up *x;
    rmt_writer *w;              /* lane 0's is the build's own writer (listing, tables, manifest) */
    atomic_uint_fast64_t sent;  /* bytes this lane's writer sent */
    pthread_t tid;
    int started;
} lane;

typedef struct up {
    rmt_writer *w;
    const char *data_file;      /* a folder shard's one file (lmdb: data.mdb), else NULL */
    const char *url;
    const char *stage;          /* the staging root, which the build sees as OUT */
    char *sub;                  /* "" or "parts/IIIII-of-NNNNN/": the objects' folder */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    item *head, *tail;          /* shards waiting for a lane */
    size_t waiting;             /* shards staged: queued or being uploaded */
    size_t waiting_max;         /* lanes + 1: the bound on the staging folder */
    uint64_t finished;          /* shards handed over so far (their seq) */
    int closing, failed, said;
    int abandon;                /* the queue's shards are not uploaded (a failed stream) */
    int err;
    fmt_msg why;
    uint64_t queued;            /* bytes handed to the uploader */
    lane lanes[LANES_MAX];
    unsigned nlanes;
    /* The journal object, which must never be older than a shard in the bucket: under jmu, a
     * lane puts the journal its shard finished with before the shard, unless a newer one (the
     * journal only grows) is up already. */
    pthread_mutex_t jmu;
    uint8_t *journal;           /* what the journal object holds */
    size_t jlen;
    uint64_t jseq;              /* the seq of the shard whose journal it is (0: none is up) */
    const shc_build_cb *user;
    int have_summary, final_pending;
    shc_summary summary;
    shc_progress last;
    double t0;
} up_t;

static void say(up_t *x, const char *text)
{
    if (x->user && x->user->message)
        x->user->message(x->user->ctx, text);
}

static void item_free(item *it)
{
    if (!it)
        return;
    free(it->name);
    free(it->path);
    free(it->folder);
    free(it->journal);
    free(it);
}

static void on_sent(void *ctx, uint64_t sent)
{
    lane *l = ctx;
    atomic_store(&l->sent, sent);
}

static uint64_t sent_total(up_t *x)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < x->nlanes; i++)
        n += atomic_load(&x->lanes[i].sent);
    return n;
}

/* The shard's rejects reach the bucket before the shard does (as they reach the disk before a
 * local shard is renamed): its journal goes up first, unless one as new is up already. */
static int journal_first(up_t *x, rmt_writer *w, item *it, fmt_msg *why)
{
    int rc = 0;
    pthread_mutex_lock(&x->jmu);
    if (it->seq > x->jseq) {
        if (!x->jseq || it->jlen != x->jlen || memcmp(it->journal, x->journal, it->jlen)) {
            char *jname = NULL;
            pthread_mutex_lock(&x->mu);
            x->queued += it->jlen;      /* the progress counts every byte sent */
            pthread_mutex_unlock(&x->mu);
            if (asprintf(&jname, "%s%s", x->sub, SHC_JOURNAL_NAME) < 0)
                rc = fmt_fail(why, ENOMEM, "out of memory");
            else
                rc = rmt_put_data(w, jname, it->journal, it->jlen, why);
            free(jname);
            if (!rc) {
                free(x->journal);
                x->journal = it->journal;
                x->jlen = it->jlen;
                it->journal = NULL;
            }
        }
        if (!rc)
            x->jseq = it->seq;
    }
    pthread_mutex_unlock(&x->jmu);
    return rc;
}

static void *uploader(void *arg)
{
    lane *l = arg;
    up_t *x = l->x;
    pthread_mutex_lock(&x->mu);
    for (;;) {
        while (!x->head && !x->closing && !x->failed)
            pthread_cond_wait(&x->cv, &x->mu);
        if (!x->head || x->failed || x->abandon)
            break;
        item *it = x->head;
        x->head = it->next;
        if (!x->head)
            x->tail = NULL;
        pthread_mutex_unlock(&x->mu);
        fmt_msg why = {{0}};
        int rc = journal_first(x, l->w, it, &why);
        if (!rc)
            rc = rmt_put_file(l->w, it->name, it->path, &why);
        if (!rc && it->folder)
            rm_rf(it->folder);          /* up: the staging folder stays small */
        else if (!rc)
            unlink(it->path);
        pthread_mutex_lock(&x->mu);
        x->waiting--;
        item_free(it);
        if (rc && !x->failed) {
            x->failed = 1;
            x->err = rc;
            x->why = why;
        }
        pthread_cond_broadcast(&x->cv);
    }
    pthread_mutex_unlock(&x->mu);
    return NULL;
}

/* The lanes told to end once the queue is empty (or at once after a failure), and joined. */
static void stop_lanes(up_t *x)
{
    pthread_mutex_lock(&x->mu);
    x->closing = 1;
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
    for (unsigned i = 0; i < x->nlanes; i++)
        if (x->lanes[i].started) {
            pthread_join(x->lanes[i].tid, NULL);
            x->lanes[i].started = 0;
        }
}

/* Report the upload's failure, once, from the build's thread. */
static void tell_failure(up_t *x)
{
    if (!x->said) {
        x->said = 1;
        say(x, x->why.text[0] ? x->why.text : fmt_strerror(x->err));
    }
}

static int on_shard(void *ctx, const char *dir, const char *name)
{
    up_t *x = ctx;
    item *it = calloc(1, sizeof *it);
    char *jpath = NULL;
    struct stat sb;
    int rc = 0;
    /* a folder shard (lmdb) goes up as its data file, NAME.lmdb/data.mdb */
    const char *sep = x->data_file ? "/" : "", *file = x->data_file ? x->data_file : "";
    if (!it || asprintf(&it->name, "%s%s%s%s", x->sub, name, sep, file) < 0 ||
        asprintf(&it->path, "%s/%s%s%s", dir, name, sep, file) < 0 ||
        asprintf(&jpath, "%s/%s", dir, SHC_JOURNAL_NAME) < 0 ||
        (x->data_file && asprintf(&it->folder, "%s/%s", dir, name) < 0)) {
        if (it)
            it->name = it->path = it->folder = NULL;
        rc = ENOMEM;
    }
    if (!rc && (rc = fmt_read_file(jpath, SIZE_MAX, &it->journal, &it->jlen)) == ENOENT)
        rc = 0;                 /* no journal yet: an empty one */
    if (!rc && stat(it->path, &sb) != 0)
        rc = errno;
    free(jpath);
    if (rc) {
        item_free(it);
        return rc;
    }
    it->size = (uint64_t)sb.st_size;
    pthread_mutex_lock(&x->mu);
    if (!x->failed) {
        if (x->tail)
            x->tail->next = it;
        else
            x->head = it;
        x->tail = it;
        x->waiting++;
        x->queued += it->size;
        it->seq = ++x->finished;
        it = NULL;
        pthread_cond_broadcast(&x->cv);
        while (x->waiting >= x->waiting_max && !x->failed)
            pthread_cond_wait(&x->cv, &x->mu);
    }
    int failed = x->failed;
    rc = x->err;
    pthread_mutex_unlock(&x->mu);
    item_free(it);
    if (failed) {
        tell_failure(x);
        return rc;
    }
    return 0;
}

/* the build's callbacks, with the staging folder named as the URL and the upload's counts in
 * each progress report */
static void w_message(void *ctx, const char *text)
{
    up_t *x = ctx;
    pthread_mutex_lock(&x->mu);
    int failed = x->failed;
    pthread_mutex_unlock(&x->mu);
    if (failed && strncmp(text, "cannot write ", 13) == 0)
        return;                         /* the upload's error said it */
    size_t sl = strlen(x->stage);
    const char *at = strstr(text, x->stage);
    if (!at || (at[sl] && at[sl] != '/' && at[sl] != ' ' && at[sl] != ':')) {
        say(x, text);
        return;
    }
    char *t = NULL;
    if (asprintf(&t, "%.*s%s%s", (int)(at - text), text, x->url, at + sl) < 0) {
        say(x, text);
        return;
    }
    say(x, t);
    free(t);
}

static void w_reject(void *ctx, const char *path, const char *reason)
{
    up_t *x = ctx;
    if (x->user->reject)
        x->user->reject(x->user->ctx, path, reason);
}

static void w_warning(void *ctx, const char *path, const char *text)
{
    up_t *x = ctx;
    if (x->user->warning)
        x->user->warning(x->user->ctx, path, text);
}

static void report(up_t *x, const shc_progress *p, int final)
{
    if (!x->user->progress)
        return;
    shc_progress q = *p;
    q.uploading = 1;
    q.sent = sent_total(x);
    pthread_mutex_lock(&x->mu);
    q.to_send = x->queued;
    pthread_mutex_unlock(&x->mu);
    q.seconds = shc_now() - x->t0;
    q.final = final;
    x->user->progress(x->user->ctx, &q);
}

static void w_progress(void *ctx, const shc_progress *p)
{
    up_t *x = ctx;
    x->last = *p;
    if (p->final)
        x->final_pending = 1;           /* said once the uploads are done */
    report(x, p, 0);
}

static void w_summary(void *ctx, const shc_summary *s)
{
    up_t *x = ctx;
    x->summary = *s;
    x->have_summary = 1;                /* told once the manifest is up */
}

static void w_projection(void *ctx, const shc_projection *p)
{
    up_t *x = ctx;
    if (x->user->projection)
        x->user->projection(x->user->ctx, p);
}

/* Download the objects of an interrupted build (those under sub, of ours, not in a subfolder)
 * into dir, for the local --resume to check. */
static int fetch_for_resume(up_t *x, const rmt_object *v, size_t n, const char *dir,
                            fmt_msg *msg)
{
    size_t sl = strlen(x->sub), k = 0;
    rmt_job *jobs = calloc(n ? n : 1, sizeof *jobs);
    char **paths = calloc(n ? n : 1, sizeof *paths);
    int rc = jobs && paths ? 0 : fmt_fail(msg, ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        const char *rel = v[i].name + sl;
        if (strncmp(v[i].name, x->sub, sl) != 0 || !ours_top(rel))
            continue;
        if (asprintf(&paths[k], "%s/%s", dir, rel) < 0) {
            paths[k] = NULL;
            rc = fmt_fail(msg, ENOMEM, "out of memory");
            break;
        }
        char *slash = strchr(rel, '/') ? strrchr(paths[k], '/') : NULL;
        if (slash) {            /* an lmdb shard's folder */
            *slash = '\0';
            rc = make_dirs(paths[k]);
            *slash = '/';
            if (rc) {
                rc = fmt_fail(msg, rc, "cannot create the folder of %s: %s", paths[k],
                              strerror(rc));
                free(paths[k]);
                break;
            }
        }
        unlink(paths[k]);
        jobs[k].name = v[i].name;
        jobs[k].path = paths[k];
        jobs[k].size = v[i].size;
        k++;
    }
    if (!rc && k)
        rc = rmt_fetch(rmt_writer_config(x->w), jobs, k, 0, 0, NULL, NULL, NULL, NULL, msg);
    for (size_t i = 0; paths && i < k; i++)
        free(paths[i]);
    free(paths);
    free(jobs);
    return rc;
}

/* What the bucket holds under the build's folder, against --force and --resume (as a local build
 * treats its OUT): 0, or SHC_EINPUT / an error, said through cb. */
static int prepare_remote(up_t *x, const shc_build_opts *o, const shc_build_cb *cb,
                          const char *dir)
{
    rmt_object *v = NULL, *top = NULL;
    size_t n = 0, ntop = 0;
    fmt_msg msg = {{0}};
    int rc = rmt_list(x->w, x->sub, &v, &n, &msg);
    if (!rc && *x->sub)
        rc = rmt_list(x->w, FMT_MANIFEST_NAME, &top, &ntop, &msg);
    if (rc) {
        shc_say(cb, "%s", msg.text);
        goto out;
    }
    size_t mine = 0, sl = strlen(x->sub);
    for (size_t i = 0; i < n; i++)
        mine += ours(v[i].name + sl);
    char mname[64];
    snprintf(mname, sizeof mname, "%s%s", x->sub, FMT_MANIFEST_NAME);
    int complete = has(v, n, mname);
    if (has(top, ntop, FMT_MANIFEST_NAME)) {
        /* a merged dataset over the parts: it goes when a part is to change (part.h) */
        if (!o->force && !o->resume) {
            shc_say(cb, "%s already holds a merged dataset (use --force to rebuild this part)",
                    x->url);
            rc = SHC_EINPUT;
            goto out;
        }
        if ((rc = rmt_delete(x->w, FMT_MANIFEST_NAME, &msg))) {
            shc_say(cb, "%s", msg.text);
            goto out;
        }
    }
    if (mine && !o->resume) {
        if (!o->force) {
            shc_say(cb, "%s%s%s %s (use --resume to continue it or --force to replace it)",
                    x->url, *x->sub ? "/" : "", x->sub,
                    complete ? "already holds a dataset" : "holds the objects of an unfinished "
                    "build");
            rc = SHC_EINPUT;
            goto out;
        }
        /* the manifest first: no manifest ever names a removed object */
        if (complete && (rc = rmt_delete(x->w, mname, &msg)) != 0) {
            shc_say(cb, "%s", msg.text);
            goto out;
        }
        for (size_t i = 0; i < n && !rc; i++)
            if (ours(v[i].name + sl) && strcmp(v[i].name, mname) != 0 &&
                (rc = rmt_delete(x->w, v[i].name, &msg)) != 0)
                shc_say(cb, "%s", msg.text);
    } else if (mine) {
        if ((rc = make_dirs(dir)) != 0)
            shc_say(cb, "cannot create %s: %s", dir, strerror(rc));
        else if ((rc = fetch_for_resume(x, v, n, dir, &msg)) != 0)
            shc_say(cb, "cannot resume %s: %s", x->url, msg.text);
    }
out:
    rmt_objects_free(v, n);
    rmt_objects_free(top, ntop);
    return rc;
}

/* A failed build's objects under x->sub deleted (it wrote no manifest), each failure said. */
static void remove_ours(up_t *x, const shc_build_cb *cb)
{
    rmt_object *v = NULL;
    size_t n = 0, sl = strlen(x->sub);
    fmt_msg msg = {{0}};
    if (rmt_list(x->w, x->sub, &v, &n, &msg) != 0) {
        shc_say(cb, "warning: cannot remove what the failed build uploaded: %s", msg.text);
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (ours_top(v[i].name + sl) && rmt_delete(x->w, v[i].name, &msg) != 0)
            shc_say(cb, "warning: cannot remove what the failed build uploaded: %s", msg.text);
    rmt_objects_free(v, n);
}

/* After the build: every shard up, then the tables, the manifest last, then the journal goes. */
static int finish_upload(up_t *x, const char *dir, const shc_build_cb *cb)
{
    fmt_msg msg = {{0}};
    int rc = 0;
    for (int i = 0; i < 4 && !rc; i++) {
        const char *t = i < 3 ? tables[i] : FMT_MANIFEST_NAME;
        char *path = NULL, *name = NULL;
        if (asprintf(&path, "%s/%s", dir, t) < 0 || asprintf(&name, "%s%s", x->sub, t) < 0) {
            free(path);
            return ENOMEM;
        }
        struct stat sb;
        if (stat(path, &sb) == 0) {
            pthread_mutex_lock(&x->mu);
            x->queued += (uint64_t)sb.st_size;
            pthread_mutex_unlock(&x->mu);
            rc = rmt_put_file(x->w, name, path, &msg);
        } else if (i == 3) {
            rc = fmt_fail(&msg, errno, "cannot read %s: %s", path, strerror(errno));
        }
        free(path);
        free(name);
    }
    if (!rc) {
        char *jname = NULL;
        if (asprintf(&jname, "%s%s", x->sub, SHC_JOURNAL_NAME) < 0)
            return ENOMEM;
        /* the dataset is complete; a journal left behind would only be clutter */
        if (rmt_delete(x->w, jname, &msg) != 0)
            shc_say(cb, "warning: %s", msg.text);
        free(jname);
        return 0;
    }
    shc_say(cb, "%s (no manifest written)", msg.text);
    return rc;
}

int shc_build_upload(const shc_build_opts *o, const shc_build_cb *cb)
{
    shc_build_cb nocb = {0};
    if (!cb)
        cb = &nocb;
    fmt_msg msg = {{0}};
    up_t x = {0};
    x.url = o->out;
    x.user = cb;
    x.t0 = shc_now();
    char *stage = NULL, *dir = NULL;
    int prepared = 0;
    int rc = rmt_writer_open(&x.w, o->out, o->upload_part_size, &msg);
    if (rc) {
        shc_say(cb, "cannot write to %s", msg.text);
        return rc == ENOMEM ? ENOMEM : SHC_EINPUT;
    }
    if (strcmp(o->backend->name, "raw") != 0 && strcmp(o->backend->name, "hdf5") != 0 &&
        strcmp(o->backend->name, "lmdb") != 0) {
        shc_say(cb, "cannot write to %s: a dataset at a URL must have raw, hdf5 or lmdb shards "
                "(not %s)", o->out, o->backend->name);
        rmt_writer_close(x.w);
        return SHC_EINPUT;
    }
    char pname[SHC_PART_NAME_LEN] = "";
    if (o->part.count)
        shc_part_name(&o->part, pname);
    if (asprintf(&x.sub, "%s%s%s", *pname ? SHC_PARTS_DIR "/" : "", pname, *pname ? "/" : "") < 0)
        x.sub = NULL;
    rc = x.sub ? stage_dir(o->staging, o->cache, x.w, "", &stage, &msg) : ENOMEM;
    if (rc == 0 && asprintf(&dir, "%s%s%s", stage, *pname ? "/" SHC_PARTS_DIR "/" : "",
                            pname) < 0)
        rc = ENOMEM;
    if (rc) {
        shc_say(cb, "%s", fmt_reason(&msg, rc));
        free(stage);
        free(x.sub);
        rmt_writer_close(x.w);
        return rc == ENOMEM ? ENOMEM : SHC_EINPUT;
    }
    x.stage = stage;
    x.data_file = o->backend->data_file;
    pthread_mutex_init(&x.mu, NULL);
    pthread_mutex_init(&x.jmu, NULL);
    pthread_cond_init(&x.cv, NULL);
    x.nlanes = o->upload_threads ? o->upload_threads : SHC_UPLOAD_THREADS;
    x.nlanes = x.nlanes < LANES_MAX ? x.nlanes : LANES_MAX;
    x.waiting_max = x.nlanes + 1;
    for (unsigned i = 0; i < x.nlanes; i++)
        x.lanes[i].x = &x;
    x.lanes[0].w = x.w;
    rmt_writer_progress(x.w, on_sent, &x.lanes[0]);
    /* the staging folder holds this build alone: what an earlier run left goes (the bucket is
     * what --resume continues) */
    if ((rc = rm_rf(dir)) != 0) {
        shc_say(cb, "cannot clear %s: %s", dir, strerror(rc));
        goto out;
    }
    if ((rc = prepare_remote(&x, o, cb, dir)) != 0)
        goto out;
    prepared = 1;               /* from here on, what is ours under x.sub is this build's */
    if ((rc = make_dirs(stage)) != 0) {
        shc_say(cb, "cannot create %s: %s", stage, strerror(rc));
        goto out;
    }
    for (unsigned i = 1; i < x.nlanes; i++) {
        if ((rc = rmt_writer_open(&x.lanes[i].w, o->out, o->upload_part_size, &msg)) != 0) {
            shc_say(cb, "cannot write to %s", msg.text);
            goto out;
        }
        rmt_writer_progress(x.lanes[i].w, on_sent, &x.lanes[i]);
    }
    for (unsigned i = 0; i < x.nlanes; i++) {
        if ((rc = pthread_create(&x.lanes[i].tid, NULL, uploader, &x.lanes[i])) != 0) {
            shc_say(cb, "cannot start the upload: %s", strerror(rc));
            goto out;
        }
        x.lanes[i].started = 1;
    }
    shc_build_opts ob = *o;
    ob.out = stage;
    ob.shard_done = on_shard;
    ob.shard_ctx = &x;
    shc_build_cb wcb = {.ctx = &x, .message = w_message, .reject = w_reject,
                        .warning = w_warning, .progress = cb->progress ? w_progress : NULL,
                        .summary = w_summary, .projection = w_projection};
    rc = shc_build(&ob, &wcb);
    /* the shards still waiting go up (with a progress report now and then), unless the build
     * was a stream that failed: its uploads are of no use (they go, below) */
    pthread_mutex_lock(&x.mu);
    x.closing = 1;
    x.abandon = o->stream && rc != 0 && rc != SHC_EREJECTS;
    pthread_cond_broadcast(&x.cv);
    while (x.waiting && !x.failed && !x.abandon) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 250000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&x.cv, &x.mu, &ts);
        if (x.final_pending) {
            pthread_mutex_unlock(&x.mu);
            report(&x, &x.last, 0);
            pthread_mutex_lock(&x.mu);
        }
    }
    pthread_mutex_unlock(&x.mu);
    stop_lanes(&x);
    if (x.failed) {
        tell_failure(&x);
        if (rc == 0 || rc == SHC_EREJECTS || rc == x.err)
            rc = x.err;
        goto out;
    }
    if (rc != 0 && rc != SHC_EREJECTS)
        goto out;
    int up = finish_upload(&x, dir, cb);
    if (up) {
        rc = up;
        goto out;
    }
    if (x.final_pending)
        report(&x, &x.last, 1);
    char *where = NULL;
    if (x.have_summary && cb->summary) {
        if (asprintf(&where, "%s%s%.*s", x.url, *x.sub ? "/" : "", (int)strlen(x.sub) - 1,
                     x.sub) < 0)
            where = NULL;
        x.summary.out = where ? where : x.url;
        x.summary.seconds = shc_now() - x.t0;
        cb->summary(cb->ctx, &x.summary);
    }
    free(where);
out:
    stop_lanes(&x);
    if (prepared && o->stream && rc != 0 && rc != SHC_EREJECTS)
        remove_ours(&x, cb);    /* a stream cannot be resumed: what went up is of no use */
    /* nothing staged is needed once the build ended: the bucket holds what --resume continues */
    rm_rf(dir);
    if (*pname) {
        char *parts = NULL;
        if (asprintf(&parts, "%s/%s", stage, SHC_PARTS_DIR) >= 0)
            rmdir(parts);               /* when no other part is staged there */
        free(parts);
    }
    rmdir(stage);
    for (item *it = x.head, *nx; it; it = nx) {
        nx = it->next;
        item_free(it);
    }
    free(x.journal);
    free(x.sub);
    free(dir);
    free(stage);
    for (unsigned i = 1; i < x.nlanes; i++)
        rmt_writer_close(x.lanes[i].w);
    pthread_cond_destroy(&x.cv);
    pthread_mutex_destroy(&x.jmu);
    pthread_mutex_destroy(&x.mu);
    rmt_writer_close(x.w);
    return rc;
}

/* ---- the merge ---- */

static int by_name(const void *a, const void *b)
{
    return strcmp(((const rmt_object *)a)->name, ((const rmt_object *)b)->name);
}

typedef struct {
    rmt_object *v;
    size_t n;
    const char *url;
} merge_ctx;

/* part's shard ms is an object of the size its manifest gives */
static int shard_there(void *ctx, const char *part, const fmt_manifest_shard *ms, fmt_msg *msg)
{
    merge_ctx *m = ctx;
    char *name = NULL;
    if (asprintf(&name, "%s/%s/%s", SHC_PARTS_DIR, part, ms->file) < 0)
        return ENOMEM;
    rmt_object key = {.name = name};
    const rmt_object *o = bsearch(&key, m->v, m->n, sizeof *m->v, by_name);
    if (!o) {                   /* an lmdb shard: its folder's data file */
        char *data = NULL;
        if (asprintf(&data, "%s/%s", name, fmt_backend_lmdb.data_file) < 0) {
            free(name);
            return ENOMEM;
        }
        free(name);
        key.name = name = data;
        o = bsearch(&key, m->v, m->n, sizeof *m->v, by_name);
    }
    int rc = 0;
    if (!o)
        rc = fmt_fail(msg, ENOENT, "%s/%s: no such object", m->url, name);
    else if (o->size != ms->bytes)
        rc = fmt_fail(msg, FMT_ECORRUPT, "%s/%s: %" PRIu64 " bytes, its part's manifest says %"
                      PRIu64, m->url, name, o->size, ms->bytes);
    free(name);
    return rc;
}

/* text with the staging folder named as the URL */
static void rename_in(fmt_msg *msg, const char *stage, const char *url)
{
    char *at = msg ? strstr(msg->text, stage) : NULL;
    if (!at)
        return;
    char t[sizeof msg->text];
    snprintf(t, sizeof t, "%.*s%s%s", (int)(at - msg->text), msg->text, url, at + strlen(stage));
    memcpy(msg->text, t, sizeof t);
}

int shc_merge_upload(const char *out, const shc_merge_opts *o, shc_merge_result *res,
                     fmt_msg *msg)
{
    if (res)
        memset(res, 0, sizeof *res);
    rmt_writer *w = NULL;
    int rc = rmt_writer_open(&w, out, o ? o->part_size : 0, msg);
    if (rc)
        return rc;
    const rmt_config *c = rmt_writer_config(w);
    merge_ctx m = {.url = c->url};
    char *stage = NULL;
    rmt_job *jobs = NULL;
    char **paths = NULL;
    size_t k = 0;
    if ((rc = stage_dir(o ? o->staging : NULL, o ? o->cache : NULL, w, ".merge", &stage, msg)) != 0)
        goto out;
    if ((rc = rm_rf(stage)) != 0 || (rc = make_dirs(stage)) != 0) {
        rc = fmt_fail(msg, rc, "cannot prepare %s: %s", stage, strerror(rc));
        goto out;
    }
    if ((rc = rmt_list(w, SHC_PARTS_DIR "/", &m.v, &m.n, msg)) != 0)
        goto out;
    /* each part's manifest and tables, in a folder of its own as a local part has it */
    jobs = calloc(m.n ? m.n : 1, sizeof *jobs);
    paths = calloc(m.n ? m.n : 1, sizeof *paths);
    if (!jobs || !paths) {
        rc = fmt_fail(msg, ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < m.n && !rc; i++) {
        const char *rel = m.v[i].name + strlen(SHC_PARTS_DIR "/"), *slash = strchr(rel, '/');
        char pn[SHC_PART_NAME_LEN];
        shc_part p;
        if (!slash || (size_t)(slash - rel) >= sizeof pn)
            continue;
        memcpy(pn, rel, (size_t)(slash - rel));
        pn[slash - rel] = '\0';
        if (shc_part_name_parse(pn, &p) != 0)
            continue;
        char *pdir = NULL;
        if (asprintf(&pdir, "%s/%s/%s", stage, SHC_PARTS_DIR, pn) < 0) {
            rc = fmt_fail(msg, ENOMEM, "out of memory");
            break;
        }
        rc = make_dirs(pdir);
        free(pdir);
        if (rc) {
            rc = fmt_fail(msg, rc, "cannot create a folder in %s: %s", stage, strerror(rc));
            break;
        }
        int table = strcmp(slash + 1, FMT_MANIFEST_NAME) == 0;
        for (int t = 0; t < 3; t++)
            table |= strcmp(slash + 1, tables[t]) == 0;
        if (!table)
            continue;
        if (asprintf(&paths[k], "%s/%s", stage, m.v[i].name) < 0) {
            paths[k] = NULL;
            rc = fmt_fail(msg, ENOMEM, "out of memory");
            break;
        }
        jobs[k].name = m.v[i].name;
        jobs[k].path = paths[k];
        jobs[k].size = m.v[i].size;
        k++;
    }
    if (!rc && k)
        rc = rmt_fetch(c, jobs, k, 0, 0, NULL, NULL, NULL, NULL, msg);
    if (rc)
        goto out;
    qsort(m.v, m.n, sizeof *m.v, by_name);
    rc = shc_merge_with(stage, shard_there, &m, res, msg);
    rename_in(msg, stage, c->url);
    if (rc)
        goto out;
    /* a previous merge's manifest first, then the tables, the manifest last */
    if ((rc = rmt_delete(w, FMT_MANIFEST_NAME, msg)) != 0)
        goto out;
    for (int i = 0; i < 4 && !rc; i++) {
        const char *t = i < 3 ? tables[i] : FMT_MANIFEST_NAME;
        char *path = NULL;
        if (asprintf(&path, "%s/%s", stage, t) < 0) {
            rc = fmt_fail(msg, ENOMEM, "out of memory");
            break;
        }
        if (i == 3 || access(path, F_OK) == 0)
            rc = rmt_put_file(w, t, path, msg);
        free(path);
    }
out:
    if (stage)
        rm_rf(stage);
    for (size_t i = 0; i < k; i++)
        free(paths[i]);
    free(paths);
    free(jobs);
    free(stage);
    rmt_objects_free(m.v, m.n);
    rmt_writer_close(w);
    return rc;
}
