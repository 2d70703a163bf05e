/* dataset.c - a dataset directory: the manifest plus its shards, each opened through the backend
 * the manifest names (backend.h). */
#include "dataset.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "target.h"

typedef struct {
    void *s;                    /* the backend's shard; NULL when it could not be opened */
    char *path;
    int rc;                     /* FMT_OPEN_TOLERANT: why it could not be opened (0: open) */
    char *why;                  /* ... in words, without the path */
    uint8_t **tcopy;            /* per sample, an 8-aligned copy of a target record the backend
                                 * hands back misaligned (NULL: none needed) */
    uint64_t ncopy;
    void *skel;                 /* FMT_OPEN_LAZY: the shard's metadata before it arrives */
    uint8_t **skcopy;           /* ... and the copies its misaligned target records need */
    uint64_t nskcopy;
} ds_shard;

struct fmt_dataset {
    fmt_manifest man;
    const fmt_backend *be;
    fmt_access access;
    size_t ndirect;
    size_t nunavailable;        /* shards left closed (FMT_OPEN_TOLERANT) */
    uint64_t max_length;        /* largest payload */
    ds_shard *shards;           /* one per manifest shard */
    char *dir;                  /* FMT_OPEN_LAZY: where the shards arrive */
    unsigned flags;
    pthread_mutex_t lazy;       /* FMT_OPEN_LAZY: serialises loads and unloads */
};

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

/* Keep an 8-aligned copy of sample k's target record (fmt_target_view reads it in place) in
 * (*copy)[k], of *ncopy = n entries. */
static int copy_target(uint8_t ***copy, uint64_t *ncopy, uint64_t n, uint64_t k,
                       const fmt_sample *smp)
{
    if (!*copy) {
        if (n > SIZE_MAX / sizeof **copy || !(*copy = calloc((size_t)n, sizeof **copy)))
            return ENOMEM;
        *ncopy = n;
    }
    /* malloc's alignment is at least 8 */
    if (!((*copy)[k] = malloc(smp->aux_len)))
        return ENOMEM;
    memcpy((*copy)[k], smp->aux, smp->aux_len);
    return 0;
}

static void free_copy_array(uint8_t ***copy, uint64_t *ncopy)
{
    for (uint64_t k = 0; *copy && k < *ncopy; k++)
        free((*copy)[k]);
    free(*copy);
    *copy = NULL;
    *ncopy = 0;
}

static void free_copies(ds_shard *s)
{
    free_copy_array(&s->tcopy, &s->ncopy);
}

/* Shard i's open handle sh (its file, or its skeleton) against the manifest: its own account,
 * then every sample against what the manifest says of all of them, in one pass over the index
 * (in memory for every backend), so every access mode refuses the same datasets; d->max_length
 * takes its largest payload. A target record the backend hands back misaligned is copied into
 * *copy (copy_target: the shard's tcopy, or its skeleton's skcopy). 0, or the error with msg
 * saying why. */
static int check_shard(fmt_dataset *d, size_t i, void *sh, uint8_t ***copy, uint64_t *ncopy,
                       fmt_msg *msg)
{
    const fmt_manifest_shard *ms = &d->man.shards[i];
    const fmt_shard_info *h = d->be->r_info(sh);
    int rc = fmt_shard_check_info(&d->man, i, h, msg);
    uint64_t max = 0;
    for (uint64_t k = 0; rc == 0 && k < h->samples; k++) {
        fmt_sample smp;
        rc = d->be->r_get(sh, k, &smp);
        if (rc == 0) {
            smp.index = ms->first + k;
            rc = fmt_manifest_check_sample(&d->man, &smp, msg);
        }
        if (rc == 0 && d->man.targets && ((uintptr_t)smp.aux & 7u))
            rc = copy_target(copy, ncopy, h->samples, k, &smp);
        if (rc == 0)
            max = max_u64(max, smp.length);
    }
    if (rc == 0)
        d->max_length = max_u64(d->max_length, max);
    return rc;
}

/* Open manifest shard i into d->shards[i]: precheck, open, its own account against the manifest,
 * every sample against the manifest. 0, or the error with msg saying why (without the path). */
static int open_shard(fmt_dataset *d, const char *dir, size_t i, fmt_msg *msg)
{
    const fmt_manifest_shard *ms = &d->man.shards[i];
    ds_shard *s = &d->shards[i];
    int rc = fmt_shard_precheck(d->be, s->path, ms, msg);
    if (rc)
        return rc;
    char *sdir = fmt_manifest_shard_dir(dir, ms);
    rc = sdir ? d->be->r_open(&s->s, sdir, s->path, d->access, msg) : ENOMEM;
    free(sdir);
    if (rc)
        return rc;
    return check_shard(d, i, s->s, &s->tcopy, &s->ncopy, msg);
}

/* A new dataset for the access mode, or the error (an unknown mode with msg saying so). */
static int ds_new(fmt_dataset **out, fmt_access access, fmt_msg *msg)
{
    if (access != FMT_ACCESS_MMAP && access != FMT_ACCESS_PREAD && access != FMT_ACCESS_DIRECT)
        return fmt_fail(msg, FMT_EINVAL, "unknown access mode %d", (int)access);
    fmt_dataset *d = calloc(1, sizeof *d);
    if (!d)
        return ENOMEM;
    d->access = access;
    *out = d;
    return 0;
}

/* The backend d->man names, when it reads the manifest's version of its format (raw 2 reads
 * raw 1): 0, or FMT_EUNSUPPORTED with msg saying why. */
static int ds_find_backend(fmt_dataset *d, const char *dir, fmt_msg *msg)
{
    d->be = fmt_backend_find(d->man.backend);
    if (!d->be || d->man.backend_version == 0 || d->man.backend_version > d->be->version)
        return fmt_fail(msg, FMT_EUNSUPPORTED, "%s/manifest.json: backend '%s' version %u is not "
                        "supported", dir, d->man.backend, d->man.backend_version);
    return 0;
}

/* d->shards, one per manifest shard, each with its path in dir (none opened yet). */
static int ds_shard_paths(fmt_dataset *d, const char *dir)
{
    d->shards = calloc(d->man.nshards ? d->man.nshards : 1, sizeof *d->shards);
    if (!d->shards)
        return ENOMEM;
    for (size_t i = 0; i < d->man.nshards; i++) {
        ds_shard *s = &d->shards[i];
        if (asprintf(&s->path, "%s/%s", dir, d->man.shards[i].file) < 0) {
            s->path = NULL;
            return ENOMEM;
        }
    }
    return 0;
}

int fmt_dataset_open_ex(fmt_dataset **out, const char *dir, fmt_access access, fmt_msg *msg)
{
    return fmt_dataset_open_flags(out, dir, access, 0, msg);
}

int fmt_dataset_open_flags(fmt_dataset **out, const char *dir, fmt_access access, unsigned flags,
                           fmt_msg *msg)
{
    *out = NULL;
    fmt_dataset *d = NULL;
    int rc = ds_new(&d, access, msg);
    if (rc)
        return rc;
    rc = fmt_manifest_read_named(dir, flags & FMT_OPEN_STAGED ? FMT_MANIFEST_STAGED_NAME
                                                              : FMT_MANIFEST_NAME, &d->man, msg);
    if (rc || (rc = ds_find_backend(d, dir, msg)) != 0 || (rc = ds_shard_paths(d, dir)) != 0)
        goto leave;
    size_t first_bad = 0;
    for (size_t i = 0; i < d->man.nshards; i++) {
        ds_shard *s = &d->shards[i];
        fmt_msg sub = {{0}};
        rc = open_shard(d, dir, i, &sub);
        if (rc == 0)
            continue;
        if (!(flags & FMT_OPEN_TOLERANT) || rc == ENOMEM) {
            fmt_fail(msg, rc, "%s: %s", s->path, fmt_reason(&sub, rc));
            goto leave;
        }
        /* tolerated: the shard stays closed and its samples report why */
        free_copies(s);
        d->be->r_close(s->s);
        s->s = NULL;
        s->rc = rc;
        if (!(s->why = strdup(fmt_reason(&sub, rc)))) {
            rc = ENOMEM;
            goto leave;
        }
        if (d->nunavailable++ == 0)
            first_bad = i;
        rc = 0;
    }
    if (d->man.nshards && d->nunavailable == d->man.nshards) {
        const ds_shard *s = &d->shards[first_bad];
        rc = fmt_fail(msg, s->rc, "no shard of %s opens (%s: %s)", dir, s->path, s->why);
        goto leave;
    }
    for (size_t i = 0; access == FMT_ACCESS_DIRECT && d->be->r_direct && i < d->man.nshards; i++)
        d->ndirect += d->shards[i].s && d->be->r_direct(d->shards[i].s) != 0;
    *out = d;
    d = NULL;
leave:
    fmt_dataset_close(d);
    return rc;
}

/* The spans of src that failed their check (bad[i] set), all read from a local copy, read again
 * fresh (*again of them). 0 or the error of src. */
static int read_again(const fmt_lazy_source *src, fmt_span *sp, size_t n, const int *bad,
                      size_t *again, fmt_msg *msg)
{
    *again = 0;
    for (size_t i = 0; i < n; i++)
        *again += bad[i] != 0;
    if (!*again)
        return 0;
    fmt_span *re = calloc(*again, sizeof *re);
    if (!re)
        return fmt_fail(msg, ENOMEM, "out of memory");
    size_t j = 0;
    for (size_t i = 0; i < n; i++)
        if (bad[i]) {
            re[j] = sp[i];
            re[j++].fresh = 1;
        }
    int rc = src->read(src->ctx, re, *again, msg);
    j = 0;
    for (size_t i = 0; !rc && i < n; i++)
        if (bad[i])
            sp[i].local = re[j++].local;
    free(re);
    return rc;
}

/* Shard i's skeleton from its header and tail (d->be->r_open_parts), checked as open_shard checks
 * the shard: against the manifest entry, every sample against the manifest. */
static int open_skeleton(fmt_dataset *d, size_t i, const fmt_span *head, const fmt_span *tail,
                         fmt_msg *msg)
{
    ds_shard *s = &d->shards[i];
    d->be->r_close(s->skel);            /* (a copy that failed, read again) */
    s->skel = NULL;
    free_copy_array(&s->skcopy, &s->nskcopy);
    int rc = d->be->r_open_parts(&s->skel, &d->man.shards[i], head->buf,
                                 (size_t)(head->to - head->from), tail->buf,
                                 (size_t)(tail->to - tail->from), msg);
    return rc ? rc : check_shard(d, i, s->skel, &s->skcopy, &s->nskcopy, msg);
}

/* Check every span (part 0: the headers, which say where the tails are; 1: the tails, which make
 * the skeletons); those read from a local copy that fail are read again fresh and checked once
 * more. 0, or the first failure with *at its shard and why the reason (empty: src's error, in
 * msg). */
static int check_spans(fmt_dataset *d, const fmt_lazy_source *src, int part, fmt_span *hs,
                       fmt_span *ts, int *bad, size_t *at, fmt_msg *why, fmt_msg *msg)
{
    size_t n = d->man.nshards;
    fmt_span *sp = part ? ts : hs;
    int rc = 0;
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i < n; i++) {
            if (round && !bad[i])
                continue;
            fmt_msg w = {{0}};
            bad[i] = part ? open_skeleton(d, i, &hs[i], &ts[i], &w)
                          : d->be->r_tail(hs[i].buf, &d->man.shards[i], &ts[i].from, &ts[i].to,
                                          &w);
            if (bad[i] && (!sp[i].local || round || bad[i] == ENOMEM)) {
                *at = i;
                *why = w;
                return bad[i];
            }
        }
        if (round)
            break;
        size_t again;
        if ((rc = read_again(src, sp, n, bad, &again, msg)) != 0 || !again)
            break;
    }
    return rc;
}

/* The backend reads every shard's metadata apart from its payload (backend.h r_tail): raw's
 * always, hdf5's where the manifest says where the pixels lie (its pins). */
static int skeletons_readable(const fmt_dataset *d)
{
    if (!d->be->r_tail || !d->be->r_open_parts)
        return 0;
    uint64_t hl;
    for (size_t i = 0; d->be->r_head_of && i < d->man.nshards; i++)
        if (d->be->r_head_of(&d->man.shards[i], &hl, NULL) != 0)
            return 0;
    return 1;
}

/* Every shard's skeleton through src: the headers, checked against the manifest, then the
 * index and aux bytes they point at (fmt_dataset_open_lazy). */
static int open_skeletons(fmt_dataset *d, const fmt_lazy_source *src, fmt_msg *msg)
{
    size_t n = d->man.nshards;
    fmt_span *hs = calloc(n ? n : 1, sizeof *hs), *ts = calloc(n ? n : 1, sizeof *ts);
    int *bad = calloc(n ? n : 1, sizeof *bad);
    fmt_msg why = {{0}};
    size_t at = 0;              /* the shard at fault */
    int rc = hs && ts && bad ? 0 : ENOMEM;
    for (size_t i = 0; !rc && i < n; i++) {
        uint64_t hl = d->be->r_head;
        if (d->be->r_head_of)   /* (every shard said yes at the open: skeletons_readable) */
            (void)d->be->r_head_of(&d->man.shards[i], &hl, NULL);
        if (d->man.shards[i].bytes < hl) {
            at = i;
            rc = fmt_fail(&why, FMT_ETRUNC, "%" PRIu64 " bytes, shorter than its header",
                          d->man.shards[i].bytes);
        } else if (hl > SIZE_MAX || !(hs[i].buf = malloc(hl ? (size_t)hl : 1))) {
            rc = ENOMEM;
        }
        hs[i].shard = i;
        hs[i].to = hl;
    }
    if (!rc && !(rc = src->read(src->ctx, hs, n, msg)))
        rc = check_spans(d, src, 0, hs, ts, bad, &at, &why, msg);
    for (size_t i = 0; !rc && i < n; i++) {
        ts[i].shard = i;
        if (!(ts[i].buf = malloc(ts[i].to > ts[i].from ? (size_t)(ts[i].to - ts[i].from) : 1)))
            rc = ENOMEM;
    }
    if (!rc && !(rc = src->read(src->ctx, ts, n, msg)))
        rc = check_spans(d, src, 1, hs, ts, bad, &at, &why, msg);
    if (rc && why.text[0])
        rc = fmt_fail(msg, rc == FMT_ETRUNC || rc == FMT_EHASH || rc == ENOMEM ? rc
                                                                              : FMT_ECORRUPT,
                      "%s/%s: the object fails its check against the manifest: %s", src->base,
                      d->man.shards[at].file, fmt_reason(&why, rc));
    else if (rc == ENOMEM && !msg->text[0])
        fmt_fail(msg, rc, "out of memory");
    for (size_t i = 0; ts && i < n; i++)
        free(ts[i].buf);
    for (size_t i = 0; hs && i < n; i++)
        free(hs[i].buf);
    free(hs);
    free(ts);
    free(bad);
    return rc;
}

int fmt_dataset_open_lazy(fmt_dataset **out, const char *dir, const char *manifest, size_t len,
                          fmt_access access, unsigned flags, const fmt_lazy_source *src,
                          fmt_msg *msg)
{
    *out = NULL;
    fmt_dataset *d = NULL;
    int rc = ds_new(&d, access, msg);
    if (rc)
        return rc;
    d->flags = flags | FMT_OPEN_LAZY;
    rc = fmt_manifest_parse(manifest, len, &d->man, msg);
    if (rc || (rc = ds_find_backend(d, dir, msg)) != 0)
        goto leave;
    int skeletons = !d->man.sample_width || !d->man.sample_height || d->man.targets;
    if (skeletons && (!src || !skeletons_readable(d))) {
        rc = fmt_fail(msg, FMT_EUNSUPPORTED, "shards opened as they arrive need samples of one "
                      "size and no targets, or shards whose metadata can be read first (raw; "
                      "hdf5 whose manifest pins it; lmdb whose manifest locates its index "
                      "value)");
        goto leave;
    }
    if (!skeletons)
        d->max_length = (uint64_t)d->man.sample_width * d->man.sample_height * d->man.channels;
    if ((rc = ds_shard_paths(d, dir)) != 0)
        goto leave;
    if (skeletons && (rc = open_skeletons(d, src, msg)) != 0)
        goto leave;
    if (!(d->dir = strdup(dir))) {
        rc = ENOMEM;
        goto leave;
    }
    pthread_mutex_init(&d->lazy, NULL);
    for (size_t i = 0; i < d->man.nshards; i++)
        d->shards[i].rc = EAGAIN;
    *out = d;
    d = NULL;
leave:
    fmt_dataset_close(d);
    return rc;
}

int fmt_dataset_skeletons(const fmt_dataset *d)
{
    return d->man.nshards > 0 && d->shards && d->shards[0].skel != NULL;
}

int fmt_dataset_shard_load(fmt_dataset *d, size_t i, fmt_msg *msg)
{
    if (!(d->flags & FMT_OPEN_LAZY) || i >= d->man.nshards)
        return FMT_EINVAL;
    pthread_mutex_lock(&d->lazy);
    ds_shard *s = &d->shards[i];
    int rc = 0;
    if (!s->s) {
        fmt_msg sub = {{0}};
        rc = open_shard(d, d->dir, i, &sub);
        if (rc) {
            free_copies(s);
            d->be->r_close(s->s);
            s->s = NULL;
            fmt_fail(msg, rc, "%s: %s", s->path, fmt_reason(&sub, rc));
        } else {
            s->rc = 0;
        }
    }
    pthread_mutex_unlock(&d->lazy);
    return rc;
}

void fmt_dataset_shard_unload(fmt_dataset *d, size_t i, int rc, const char *why)
{
    if (!(d->flags & FMT_OPEN_LAZY) || i >= d->man.nshards)
        return;
    pthread_mutex_lock(&d->lazy);
    ds_shard *s = &d->shards[i];
    d->be->r_close(s->s);
    free_copies(s);
    s->s = NULL;
    s->rc = rc ? rc : EAGAIN;
    if (why) {
        char *w = strdup(why);
        if (w) {
            free(s->why);
            s->why = w;
        }
    }
    pthread_mutex_unlock(&d->lazy);
}

size_t fmt_dataset_unavailable(const fmt_dataset *d)
{
    return d->nunavailable;
}

int fmt_dataset_shard_status(const fmt_dataset *d, size_t i, const char **path, const char **why)
{
    if (i >= d->man.nshards)
        return FMT_EINVAL;
    if (path)
        *path = d->shards[i].path;
    if (why)
        *why = d->shards[i].why;
    return d->shards[i].rc;
}

const char *fmt_dataset_sample_error(const fmt_dataset *d, uint64_t idx)
{
    long si = fmt_manifest_find_shard(&d->man, idx);
    return si < 0 ? NULL : d->shards[si].why;
}

/* The target and the fields record in a sample's aux record rec (len bytes): with both targets
 * and fields, the parts of its pair record (fields.h); else the whole record is the one the
 * manifest names (the other part NULL, 0). 0, or FMT_ECORRUPT with msg saying why. */
static int aux_parts(const fmt_manifest *m, const uint8_t *rec, size_t len, const uint8_t **tg,
                     size_t *tlen, const uint8_t **fl, size_t *flen, fmt_msg *msg)
{
    *tg = *fl = NULL;
    *tlen = *flen = 0;
    if (m->targets && m->nfields)
        return fmt_pair_view(rec, len, tg, tlen, fl, flen, msg);
    if (m->targets) {
        *tg = rec;
        *tlen = len;
    } else {
        *fl = rec;
        *flen = len;
    }
    return 0;
}

/* Sample s's target record (tg, tlen bytes: its aux record or the target part of its pair):
 * well formed (fmt_target_view on an aligned copy), inside the sample, every category one the
 * manifest names. 0, or the error with why saying what is wrong. */
static int check_target(const fmt_manifest *m, const fmt_sample *s, const uint8_t *tg,
                        size_t tlen, fmt_msg *why)
{
    uint64_t buf[64];
    uint8_t *copy = tlen <= sizeof buf ? (uint8_t *)buf : malloc(tlen);
    if (!copy)
        return ENOMEM;
    memcpy(copy, tg, tlen);
    fmt_target t;
    int rc = fmt_target_view(copy, tlen, s->width, s->height, &t, why);
    if (rc == 0 && (t.ext != m->target_ext || t.num_keypoints != m->num_keypoints))
        rc = fmt_fail(why, FMT_ECORRUPT, "its target record carries extension %#x with %"
                      PRIu32 " keypoints, the manifest says %#x with %" PRIu32 " (field "
                      "'targets')", t.ext, t.num_keypoints, m->target_ext, m->num_keypoints);
    for (uint32_t i = 0; rc == 0 && i < t.count; i++)
        if (fmt_manifest_find_category(m, t.labels[i]) < 0)
            rc = fmt_fail(why, FMT_ECORRUPT, "box %" PRIu32 " has category %" PRId64 ", which "
                          "the manifest does not name (field 'targets.categories')", i,
                          t.labels[i]);
    if (copy != (uint8_t *)buf)
        free(copy);
    return rc;
}

int fmt_manifest_check_sample(const fmt_manifest *m, const fmt_sample *s, fmt_msg *msg)
{
    if (s->channels != m->channels)
        return fmt_fail(msg, FMT_ECORRUPT, "sample %" PRIu64 " has %u channel(s), the manifest "
                        "says %u (field 'channels')", s->index, s->channels, m->channels);
    if ((m->sample_width || m->sample_height) &&
        (s->width != m->sample_width || s->height != m->sample_height))
        return fmt_fail(msg, FMT_ECORRUPT, "sample %" PRIu64 " is %ux%u, the manifest says every "
                        "sample is %ux%u (fields 'sample_width', 'sample_height')", s->index,
                        s->width, s->height, m->sample_width, m->sample_height);
    if (s->label < -1 || (s->label >= 0 && (uint64_t)s->label >= m->nclasses))
        return fmt_fail(msg, FMT_ECORRUPT, "sample %" PRIu64 " has label %d, the manifest names "
                        "%zu class(es) (field 'classes')", s->index, (int)s->label, m->nclasses);
    if (m->augment && !s->aux)
        return fmt_fail(msg, FMT_ECORRUPT, "sample %" PRIu64 " has no augmentation record, the "
                        "manifest says %u variants (field 'augment')", s->index, m->augment);
    if (!m->targets && !m->nfields)
        return 0;
    if (!s->aux)
        return fmt_fail(msg, FMT_ECORRUPT, "sample %" PRIu64 " has no %s record, the manifest "
                        "says the dataset has %s (field '%s')", s->index,
                        m->targets ? "target" : "fields", m->targets ? "targets" : "fields",
                        m->targets ? "targets" : "fields");
    /* the aux record split once: the target, the fields record, or both parts of a pair */
    const uint8_t *tg, *fl;
    size_t tlen, flen;
    fmt_msg why = {{0}};
    int rc = aux_parts(m, s->aux, s->aux_len, &tg, &tlen, &fl, &flen, &why);
    if (rc == 0 && m->targets)
        rc = check_target(m, s, tg, tlen, &why);
    if (rc == 0 && m->nfields)
        rc = fmt_fields_check(fl, flen, m->fields, m->nfields, &why);
    if (rc)
        return fmt_fail(msg, rc, "sample %" PRIu64 ": %s", s->index, fmt_reason(&why, rc));
    return 0;
}

int fmt_shard_check_info(const fmt_manifest *m, size_t i, const fmt_shard_info *h, fmt_msg *msg)
{
    const fmt_manifest_shard *ms = &m->shards[i];
    if (h->samples != ms->samples)
        return fmt_fail(msg, FMT_ECORRUPT, "holds %" PRIu64 " samples, the manifest says %" PRIu64,
                        h->samples, ms->samples);
    if (h->first_index + ms->offset != ms->first)
        return fmt_fail(msg, FMT_ECORRUPT, "starts at sample %" PRIu64 ", the manifest says %"
                        PRIu64, h->first_index + ms->offset, ms->first);
    if (h->bytes != ms->bytes)
        return fmt_fail(msg, FMT_ECORRUPT, "is %" PRIu64 " bytes, the manifest says %" PRIu64,
                        h->bytes, ms->bytes);
    if (h->hash != ms->hash)
        return fmt_fail(msg, FMT_ECORRUPT, "content hash %016" PRIx64 " differs from the "
                        "manifest's %016" PRIx64, h->hash, ms->hash);
    if (h->fingerprint != m->fingerprint)
        return fmt_fail(msg, FMT_ECORRUPT, "was written by a build with fingerprint %016" PRIx64
                        ", the manifest says %016" PRIx64 " (field 'fingerprint')",
                        h->fingerprint, m->fingerprint);
    return 0;
}

int fmt_shard_precheck(const fmt_backend *be, const char *path, const fmt_manifest_shard *ms,
                       fmt_msg *msg)
{
    if (!be->r_precheck)
        return 0;
    return be->r_precheck(path, ms, msg);
}

int fmt_dataset_probe(const char *dir, fmt_msg *msg)
{
    fmt_dataset *d;
    int rc = fmt_dataset_open_ex(&d, dir, FMT_ACCESS_PREAD, msg);
    fmt_dataset_close(rc ? NULL : d);
    return rc;
}

int fmt_dataset_open(fmt_dataset **d, const char *dir, fmt_msg *msg)
{
    return fmt_dataset_open_ex(d, dir, FMT_ACCESS_MMAP, msg);
}

void fmt_dataset_close(fmt_dataset *d)
{
    if (!d)
        return;
    for (size_t i = 0; d->shards && i < d->man.nshards; i++) {
        d->be->r_close(d->shards[i].s);
        d->be->r_close(d->shards[i].skel);
        free_copies(&d->shards[i]);
        free_copy_array(&d->shards[i].skcopy, &d->shards[i].nskcopy);
        free(d->shards[i].path);
        free(d->shards[i].why);
    }
    if (d->dir)
        pthread_mutex_destroy(&d->lazy);
    free(d->dir);
    free(d->shards);
    fmt_manifest_free(&d->man);
    free(d);
}

const fmt_manifest *fmt_dataset_manifest(const fmt_dataset *d)
{
    return &d->man;
}

uint64_t fmt_dataset_count(const fmt_dataset *d)
{
    return d->man.samples;
}

fmt_access fmt_dataset_access(const fmt_dataset *d)
{
    return d->access;
}

uint64_t fmt_dataset_max_length(const fmt_dataset *d)
{
    return d->max_length;
}

size_t fmt_dataset_direct_shards(const fmt_dataset *d)
{
    return d->ndirect;
}

const char *fmt_dataset_backend(const fmt_dataset *d)
{
    return d->be->name;
}

/* Shard of sample idx and the index inside it: 0, FMT_EINVAL (no such sample), or the error of
 * a shard that could not be opened (FMT_OPEN_TOLERANT). */
static int locate(const fmt_dataset *d, uint64_t idx, const ds_shard **sh, uint64_t *local)
{
    long si = fmt_manifest_find_shard(&d->man, idx);
    if (si < 0)
        return FMT_EINVAL;
    *sh = &d->shards[si];
    *local = idx - d->man.shards[si].first;
    return d->shards[si].s ? 0 : d->shards[si].rc;
}

int fmt_dataset_get(const fmt_dataset *d, uint64_t idx, fmt_sample *s)
{
    const ds_shard *sh;
    uint64_t local;
    int lrc = locate(d, idx, &sh, &local);
    if (lrc == EAGAIN && sh->skel) {    /* not arrived yet: its metadata from the skeleton */
        int rc = d->be->r_get(sh->skel, local, s);
        s->index = idx;
        return rc;
    }
    if (lrc)
        return lrc;
    int rc = d->be->r_get(sh->s, local, s);
    s->index = idx;
    return rc;
}

int fmt_dataset_read_buf(const fmt_dataset *d, uint64_t idx, void *dst, fmt_sample *meta,
                         void *scratch, size_t scratch_len)
{
    const ds_shard *sh;
    uint64_t local;
    int lrc = locate(d, idx, &sh, &local);
    if (lrc)
        return lrc;
    if (meta) {
        int rc = d->be->r_get(sh->s, local, meta);
        if (rc)
            return rc;
        meta->index = idx;
        meta->pixels = NULL;
    }
    return d->be->r_read(sh->s, local, dst, scratch, scratch_len);
}

int fmt_dataset_extent(const fmt_dataset *d, uint64_t idx, fmt_extent *x)
{
    const ds_shard *sh;
    uint64_t local;
    int lrc = locate(d, idx, &sh, &local);
    if (lrc)
        return lrc;
    if (!d->be->r_extent)
        return FMT_EUNSUPPORTED;
    return d->be->r_extent(sh->s, local, x);
}

int fmt_dataset_read(const fmt_dataset *d, uint64_t idx, void *dst, fmt_sample *meta)
{
    return fmt_dataset_read_buf(d, idx, dst, meta, NULL, 0);
}

const char *fmt_dataset_sample_file(const fmt_dataset *d, uint64_t idx)
{
    long si = fmt_manifest_find_shard(&d->man, idx);
    return si < 0 ? NULL : d->shards[si].path;
}

int fmt_dataset_advise(const fmt_dataset *d, fmt_advice advice)
{
    if ((unsigned)advice > FMT_ADVICE_RANDOM)
        return FMT_EINVAL;
    if (!d->be->r_advise)
        return 0;
    int first = 0;
    for (size_t i = 0; i < d->man.nshards; i++) {
        if (!d->shards[i].s)
            continue;
        int rc = d->be->r_advise(d->shards[i].s, advice);
        if (rc && !first)
            first = rc;
    }
    return first;
}

int fmt_dataset_check(const fmt_dataset *d, uint64_t idx)
{
    const ds_shard *sh;
    uint64_t local;
    int lrc = locate(d, idx, &sh, &local);
    if (lrc)
        return lrc;
    return d->be->r_check(sh->s, local);
}

/* Sample idx's view and the parts of its aux record (aux_parts; read from the 8-aligned copy
 * when the shard keeps one); "no sample N" past the end. */
static int sample_parts(const fmt_dataset *d, uint64_t idx, fmt_sample *smp, const uint8_t **tg,
                        size_t *tlen, const uint8_t **fl, size_t *flen, fmt_msg *msg)
{
    const ds_shard *sh;
    uint64_t local;
    int rc = locate(d, idx, &sh, &local);
    /* a skeleton answers whether its shard is there or not: the same bytes (both checked
     * against the manifest), in memory as long as the dataset is, where a shard's may go with
     * its eviction */
    if ((rc == 0 || rc == EAGAIN) && sh->skel) {
        if ((rc = d->be->r_get(sh->skel, local, smp)) != 0)
            return rc;
        const uint8_t *rec = sh->skcopy && sh->skcopy[local] ? sh->skcopy[local] : smp->aux;
        return aux_parts(&d->man, rec, smp->aux_len, tg, tlen, fl, flen, msg);
    }
    if (rc)
        return rc == FMT_EINVAL ? fmt_fail(msg, rc, "no sample %" PRIu64, idx) : rc;
    if ((rc = d->be->r_get(sh->s, local, smp)) != 0)
        return rc;
    const uint8_t *rec = sh->tcopy && sh->tcopy[local] ? sh->tcopy[local] : smp->aux;
    return aux_parts(&d->man, rec, smp->aux_len, tg, tlen, fl, flen, msg);
}

int fmt_dataset_fields_record(const fmt_dataset *d, uint64_t idx, const uint8_t **rec,
                              size_t *len, fmt_msg *msg)
{
    *rec = NULL;
    *len = 0;
    if (!d->man.nfields)
        return fmt_fail(msg, FMT_EINVAL, "the dataset has no fields");
    fmt_sample smp;
    const uint8_t *tg;
    size_t tlen;
    return sample_parts(d, idx, &smp, &tg, &tlen, rec, len, msg);
}

int fmt_dataset_target(const fmt_dataset *d, uint64_t idx, fmt_target *t, fmt_msg *msg)
{
    memset(t, 0, sizeof *t);
    if (!d->man.targets)
        return fmt_fail(msg, FMT_EINVAL, "the dataset has no targets");
    fmt_sample smp;
    const uint8_t *tg, *fl;
    size_t tlen, flen;
    int rc = sample_parts(d, idx, &smp, &tg, &tlen, &fl, &flen, msg);
    if (rc)
        return rc;
    return fmt_target_view(tg, tlen, smp.width, smp.height, t, msg);
}
