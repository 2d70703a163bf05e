/* stream.c - inputs handed to a running build one at a time (stream.h). */
#include "stream.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "annot.h"
#include "build.h"
#include "inputs.h"
#include "target.h"

/* shardc.h's public limits and codes of the stream are the formats' */
_Static_assert(SHC_TARGET_MAX_BOXES == FMT_TARGET_MAX_BOXES, "SHC_TARGET_MAX_BOXES");
_Static_assert(SHC_ITEM_MAX_LABEL == FMT_MAX_LABEL, "SHC_ITEM_MAX_LABEL");
_Static_assert(SHC_FIELDS_MAX == FMT_FIELDS_MAX, "SHC_FIELDS_MAX");
_Static_assert(SHC_FIELDS_MAX_RECORD == FMT_FIELDS_MAX_RECORD, "SHC_FIELDS_MAX_RECORD");
_Static_assert(SHC_FIELD_INT == FMT_FIELD_INT && SHC_FIELD_FLOAT == FMT_FIELD_FLOAT &&
               SHC_FIELD_STR == FMT_FIELD_STR && SHC_FIELD_BYTES == FMT_FIELD_BYTES,
               "SHC_FIELD_* are the formats' field types");

struct shc_stream {
    pthread_mutex_t mu;
    pthread_cond_t cond;        /* every change: items added, rendered, finished; close, cancel */
    shc_item *ring;             /* position p at ring[p % window] while held */
    size_t window;
    uint64_t added, finished;   /* positions [finished, added) are held */
    uint64_t held, budget;      /* bytes of the held items not yet rendered */
    int closed, cancelled;
    char **classes;
    size_t nclasses;
    fmt_field_def *fields;      /* the schema every item's fields record follows (NULL: none) */
    size_t nfields;
    int targets;                /* every item carries a target (shc_stream_set_targets) */
    fmt_category *cats;         /* the categories set (shc_stream_set_categories) */
    size_t ncats;
};

int shc_stream_create(size_t window, uint64_t budget, const char *const *classes,
                      size_t nclasses, shc_stream **out)
{
    *out = NULL;
    shc_stream *st = calloc(1, sizeof *st);
    if (!st)
        return ENOMEM;
    st->window = window ? window : 1;
    st->budget = budget;
    st->ring = calloc(st->window, sizeof *st->ring);
    st->classes = nclasses ? calloc(nclasses, sizeof *st->classes) : NULL;
    int ok = st->ring && (!nclasses || st->classes);
    st->nclasses = st->classes ? nclasses : 0;
    for (size_t i = 0; ok && i < st->nclasses; i++)
        ok = (st->classes[i] = strdup(classes[i])) != NULL;
    if (!ok || pthread_mutex_init(&st->mu, NULL) != 0) {
        for (size_t i = 0; i < st->nclasses; i++)
            free(st->classes[i]);
        free(st->classes);
        free(st->ring);
        free(st);
        return ENOMEM;
    }
    pthread_cond_init(&st->cond, NULL);
    *out = st;
    return 0;
}

static void free_defs(fmt_field_def *defs, size_t n)
{
    for (size_t i = 0; defs && i < n; i++)
        free(defs[i].name);
    free(defs);
}

int shc_stream_set_fields(shc_stream *st, const shc_field_def *defs, size_t n, shc_msg *msg)
{
    if (n == 0 || n > FMT_FIELDS_MAX)
        return fmt_fields_schema_check(NULL, n, msg);
    /* the public schema into the formats' type (a copy the stream keeps), then checked */
    fmt_field_def *copy = calloc(n, sizeof *copy);
    int ok = copy != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        copy[i] = (fmt_field_def){.type = defs[i].type, .count = defs[i].count};
        ok = !defs[i].name || (copy[i].name = strdup(defs[i].name)) != NULL;
    }
    if (!ok) {
        free_defs(copy, n);
        return ENOMEM;
    }
    int rc = fmt_fields_schema_check(copy, n, msg);
    if (rc) {
        free_defs(copy, n);
        return rc;
    }
    pthread_mutex_lock(&st->mu);
    rc = st->added || st->fields ? EBUSY : 0;
    if (rc == 0) {
        st->fields = copy;
        st->nfields = n;
    }
    pthread_mutex_unlock(&st->mu);
    if (rc) {
        free_defs(copy, n);
        fmt_fail(msg, rc, "the fields' schema is set before the first item, once");
    }
    return rc;
}

const fmt_field_def *shc_stream_fields(const shc_stream *st, size_t *n)
{
    *n = st->nfields;
    return st->fields;
}

int shc_stream_item_target(shc_stream *st, uint64_t pos, uint32_t src_w, uint32_t src_h,
                           const fmt_geom_plan *p, uint8_t **buf, size_t *cap, uint32_t *len,
                           uint32_t *dropped, fmt_msg *why)
{
    *len = 0;
    *dropped = 0;
    /* the item's blob stays in its place until the writer finishes it, after this */
    pthread_mutex_lock(&st->mu);
    const uint8_t *rec = st->ring[pos % st->window].target;
    pthread_mutex_unlock(&st->mu);
    if (!rec)
        return 0;
    uint32_t n;
    int64_t image_id;
    memcpy(&n, rec, sizeof n);
    memcpy(&image_id, rec + 8, sizeof image_id);
    uint8_t *tmp = malloc((size_t)n * (16 + 8 + 4 + 1) + 8);
    if (!tmp)
        return ENOMEM;
    float *boxes = (float *)(void *)tmp;
    int64_t *labels = (int64_t *)(void *)(tmp + 16 * (size_t)n);
    float *area = (float *)(void *)(tmp + 24 * (size_t)n);
    uint8_t *crowd = tmp + 28 * (size_t)n;
    const uint8_t *sb = rec + 16, *sl = sb + 32 * (size_t)n, *sa = sl + 8 * (size_t)n,
                  *sc = sa + 8 * (size_t)n;
    uint32_t kept = 0;
    int rc = 0;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        double src[4], scale, ar;
        int64_t id;
        memcpy(&id, sl + 8 * (size_t)i, sizeof id);
        memcpy(&ar, sa + 8 * (size_t)i, sizeof ar);
        double in[4];
        memcpy(in, sb + 32 * (size_t)i, sizeof in);
        if (!(in[0] < in[2]) || !(in[1] < in[3]))
            rc = fmt_fail(why, FMT_ECORRUPT, "box %" PRIu32 " (%g, %g, %g, %g) has no size", i,
                          in[0], in[1], in[2], in[3]);
        else if (!shc_annot_clamp_box(in, src_w, src_h, src))
            rc = fmt_fail(why, FMT_ECORRUPT, "box %" PRIu32 " (%g, %g, %g, %g) is outside the %"
                          PRIu32 "x%" PRIu32 " image", i, in[0], in[1], in[2], in[3], src_w,
                          src_h);
        if (rc)
            break;
        if (isnan(ar))
            ar = (in[2] - in[0]) * (in[3] - in[1]);
        if (!fmt_target_map_box(p, src_w, src_h, src, boxes + 4 * (size_t)kept, &scale)) {
            (*dropped)++;
            continue;
        }
        if (!(ar >= 0) || !(ar * scale <= FLT_MAX)) {
            rc = fmt_fail(why, FMT_ECORRUPT, "box %" PRIu32 ": area %g is not a float >= 0 once "
                          "scaled to the sample", i, ar * scale);
            break;
        }
        labels[kept] = id;
        area[kept] = (float)(ar * scale);
        crowd[kept] = sc[i];
        kept++;
    }
    if (rc == 0) {
        /* the arrays move to their places: labels, areas and flags follow the kept boxes */
        fmt_target t = {.count = kept, .image_id = image_id, .orig_width = src_w,
                        .orig_height = src_h, .dropped = *dropped, .boxes = boxes,
                        .labels = labels, .area = area, .iscrowd = crowd};
        rc = shc_annot_encode(&t, "the item", buf, cap, len, why);
    }
    free(tmp);
    return rc;
}

void shc_stream_item_fields(shc_stream *st, uint64_t pos, const uint8_t **rec, uint32_t *len)
{
    pthread_mutex_lock(&st->mu);
    shc_item *p = &st->ring[pos % st->window];
    *rec = p->fields;
    *len = p->fields_len;
    pthread_mutex_unlock(&st->mu);
}

int shc_stream_set_targets(shc_stream *st)
{
    pthread_mutex_lock(&st->mu);
    int rc = st->added ? EBUSY : 0;
    if (rc == 0)
        st->targets = 1;
    pthread_mutex_unlock(&st->mu);
    return rc;
}

int shc_stream_set_categories(shc_stream *st, const shc_category *cats, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (cats[i].id <= cats[i - 1].id)
            return EINVAL;
    fmt_category *copy = calloc(n ? n : 1, sizeof *copy);
    int ok = copy != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        copy[i].id = cats[i].id;
        ok = (copy[i].name = strdup(cats[i].name)) != NULL;
    }
    if (!ok) {
        for (size_t i = 0; copy && i < n; i++)
            free(copy[i].name);
        free(copy);
        return ENOMEM;
    }
    pthread_mutex_lock(&st->mu);
    fmt_category *old = st->cats;
    size_t nold = st->ncats;
    st->cats = copy;
    st->ncats = n;
    pthread_mutex_unlock(&st->mu);
    for (size_t i = 0; i < nold; i++)
        free(old[i].name);
    free(old);
    return 0;
}

int shc_stream_targets(const shc_stream *st, const fmt_category **cats, size_t *n)
{
    *cats = st->cats;
    *n = st->ncats;
    return st->targets;
}

/* Is rec (len bytes) a well-formed SHC_SRC_TARGET: its length, its count, finite boxes and
 * iscrowd 0 or 1? (What only the image can tell is checked by shc_stream_item_target.) */
static int src_target_ok(const uint8_t *rec, size_t len)
{
    uint32_t n;
    if (!rec || len < 16)
        return 0;
    memcpy(&n, rec, sizeof n);
    if (n > FMT_TARGET_MAX_BOXES || len != SHC_SRC_TARGET_SIZE(n))
        return 0;
    for (size_t i = 0; i < 4 * (size_t)n; i++) {
        double v;
        memcpy(&v, rec + 16 + 8 * i, sizeof v);
        if (!isfinite(v))
            return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (rec[16 + 48 * (size_t)n + i] > 1)
            return 0;
    return 1;
}

int shc_stream_add(shc_stream *st, shc_item *it)
{
    if (it->kind != SHC_ITEM_REJECT &&
        (st->fields ? !it->fields || fmt_fields_check(it->fields, it->fields_len, st->fields,
                                                      st->nfields, NULL) != 0
                    : it->fields != NULL))
        return EINVAL;
    if (it->kind != SHC_ITEM_REJECT &&
        (st->targets ? !src_target_ok(it->target, it->target_len) || it->label != -1
                     : it->target != NULL))
        return EINVAL;
    if (!it->name || it->label < (st->targets ? -1 : 0) || it->label > FMT_MAX_LABEL ||
        (st->nclasses && it->label >= 0 && (size_t)it->label >= st->nclasses) ||
        (it->kind != SHC_ITEM_PATH && !it->data) ||
        (it->kind == SHC_ITEM_PIXELS &&
         (uint64_t)it->width * it->height * it->channels != it->len))
        return EINVAL;
    uint64_t bytes = it->kind == SHC_ITEM_PATH ? 0 : it->len;
    pthread_mutex_lock(&st->mu);
    while (!st->cancelled && !st->closed &&
           (st->added - st->finished >= st->window ||
            (st->budget && st->added > st->finished && st->held + bytes > st->budget)))
        pthread_cond_wait(&st->cond, &st->mu);
    if (st->cancelled || st->closed) {
        pthread_mutex_unlock(&st->mu);
        return ECANCELED;
    }
    st->ring[st->added % st->window] = *it;
    st->held += bytes;
    st->added++;
    pthread_cond_broadcast(&st->cond);
    pthread_mutex_unlock(&st->mu);
    it->name = NULL;
    it->data = NULL;
    it->fields = NULL;
    it->target = NULL;
    return 0;
}

void shc_stream_close(shc_stream *st)
{
    pthread_mutex_lock(&st->mu);
    st->closed = 1;
    pthread_cond_broadcast(&st->cond);
    pthread_mutex_unlock(&st->mu);
}

void shc_stream_cancel(shc_stream *st)
{
    pthread_mutex_lock(&st->mu);
    st->cancelled = 1;
    pthread_cond_broadcast(&st->cond);
    pthread_mutex_unlock(&st->mu);
}

uint64_t shc_stream_added(shc_stream *st)
{
    pthread_mutex_lock(&st->mu);
    uint64_t n = st->added;
    pthread_mutex_unlock(&st->mu);
    return n;
}

const char *const *shc_stream_classes(const shc_stream *st, size_t *n)
{
    *n = st->nclasses;
    return (const char *const *)st->classes;
}

/* A streamed build without class names: as for a list file, label L is class "L", for every L
 * up to the largest label given. */
int shc_stream_label_classes(fmt_inputs *in)
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

int shc_stream_render(shc_stream *st, uint64_t pos, const shc_render_opts *o,
                      shc_render_scratch *rs, fmt_image *out, fmt_aug_params *params,
                      int32_t *label, fmt_msg *msg)
{
    pthread_mutex_lock(&st->mu);
    while (!st->cancelled && !st->closed && pos >= st->added)
        pthread_cond_wait(&st->cond, &st->mu);
    if (st->cancelled || pos >= st->added) {
        int rc = st->cancelled ? SHC_ESTOPPED : SHC_EEND;
        pthread_mutex_unlock(&st->mu);
        return fmt_fail(msg, rc, "%s", rc == SHC_EEND ? "no more inputs" : "stopped");
    }
    /* the item stays in its place until finished; its bytes are this worker's now */
    shc_item *p = &st->ring[pos % st->window], it = *p;
    p->data = NULL;
    pthread_mutex_unlock(&st->mu);

    int rc;
    *label = it.label;
    switch (it.kind) {
    case SHC_ITEM_ENCODED:
        if ((uint64_t)it.len > o->max_file_bytes)
            rc = fmt_fail(msg, FMT_ETOOBIG, "file larger than %" PRIu64 " bytes",
                          o->max_file_bytes);
        else
            rc = shc_render_mem_into(o, it.data, it.len, pos, rs, out, params, msg);
        break;
    case SHC_ITEM_REJECT:
        rc = fmt_fail(msg, FMT_EINVAL, "%.*s", (int)it.len, (const char *)it.data);
        break;
    case SHC_ITEM_PIXELS:
        rc = shc_render_pixels_into(o, it.data, it.width, it.height, it.channels, pos, rs, out,
                                    params, msg);
        break;
    default:
        rc = shc_render_into(o, it.name, pos, rs, out, params, msg);
        break;
    }
    free(it.data);
    if (it.kind != SHC_ITEM_PATH) {
        pthread_mutex_lock(&st->mu);
        st->held -= it.len;
        pthread_cond_broadcast(&st->cond);
        pthread_mutex_unlock(&st->mu);
    }
    return rc;
}

void shc_stream_finish(shc_stream *st, uint64_t pos, char **name, int32_t *label)
{
    pthread_mutex_lock(&st->mu);
    shc_item *p = &st->ring[pos % st->window];
    *name = p->name;
    *label = p->label;
    if (p->data) {              /* never rendered */
        st->held -= p->len;
        free(p->data);
    }
    free(p->fields);
    free(p->target);
    memset(p, 0, sizeof *p);
    st->finished = pos + 1;
    pthread_cond_broadcast(&st->cond);
    pthread_mutex_unlock(&st->mu);
}

void shc_stream_free(shc_stream *st)
{
    if (!st)
        return;
    for (uint64_t pos = st->finished; pos < st->added; pos++) {
        shc_item *p = &st->ring[pos % st->window];
        free(p->name);
        free(p->data);
        free(p->fields);
        free(p->target);
    }
    for (size_t i = 0; i < st->ncats; i++)
        free(st->cats[i].name);
    free(st->cats);
    free_defs(st->fields, st->nfields);
    for (size_t i = 0; i < st->nclasses; i++)
        free(st->classes[i]);
    free(st->classes);
    free(st->ring);
    pthread_cond_destroy(&st->cond);
    pthread_mutex_destroy(&st->mu);
    free(st);
}
