/* feed.c - the feeder thread that reads archive members for a build (feed.h). */
#include "feed.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arcwalk.h"

enum { PENDING, HELD, TAKEN };

/* Members held below need (their turn has come, the workers have not taken them yet) at most:
 * in an archive written in the inputs' order every member is read at its turn, and this, not
 * the budget, bounds what is read ahead of the workers. */
#define AHEAD 128

typedef struct {
    uint8_t *data;
    size_t len;
    int rc;
    char *why;                  /* with rc != 0 */
    uint8_t state;
} member;

typedef struct {
    uint64_t seq, pos;
} want;

struct shc_feed {
    const fmt_inputs *in;
    uint64_t lo, hi, max_member, budget;
    member *m;                  /* position lo + k */
    want **wants;               /* per archive: (seq, pos) sorted by seq */
    size_t *nwants;
    uint64_t need;              /* lowest position in [lo, hi) not yet HELD or TAKEN */
    uint64_t held_low, held_high;   /* bytes HELD below need, and at or above it */
    uint64_t nheld_low;             /* members HELD below need */
    uint64_t peak, walks;
    int stop, done;
    int fatal;                  /* an archive failed its stream check or changed: the build stops */
    char *fatal_why;
    pthread_t tid;
    pthread_mutex_t mu;
    pthread_cond_t change;
};

static int cmp_want(const void *a, const void *b)
{
    const want *x = a, *y = b;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Move need past positions that are files or already delivered (mu held). */
static void advance(shc_feed *f)
{
    while (f->need < f->hi) {
        member *x = &f->m[f->need - f->lo];
        if (f->in->items[f->need].archive && x->state == PENDING)
            break;
        if (x->state == HELD) {
            f->held_high -= x->len;
            f->held_low += x->len;
            f->nheld_low++;
        }
        f->need++;
    }
}

/* Hand a result to position pos (mu held). */
static void deliver(shc_feed *f, uint64_t pos, uint8_t *data, size_t len, int rc,
                    const char *why)
{
    member *x = &f->m[pos - f->lo];
    x->data = data;
    x->len = rc ? 0 : len;
    x->rc = rc;
    x->why = rc ? strdup(why && *why ? why : "cannot read the member") : NULL;
    x->state = HELD;
    if (pos < f->need) {
        f->held_low += x->len;
        f->nheld_low++;
    } else {
        f->held_high += x->len;
    }
    if (f->held_low + f->held_high > f->peak)
        f->peak = f->held_low + f->held_high;
    advance(f);
    pthread_cond_broadcast(&f->change);
}

typedef struct {
    shc_feed *f;
    uint32_t arc;               /* archive index (0-based) */
    uint8_t *seen;              /* wants[arc][k] was met in this walk */
    int delivered;              /* this walk */
    char error[sizeof(fmt_msg)];    /* an inner tar's damage, for the members it hides */
    char changed[sizeof(fmt_msg)];  /* a member that is not the one listed at its ordinal */
} walk_ctx;

/* Is am the member the listing found at its ordinal (it), as its item path ("ARCHIVE!NAME",
 * inputs.h) and size say? Members are matched by ordinal: a replaced archive would hand one
 * member's bytes to another's position. */
static int same_member(const char *arc, const fmt_input *it, const shc_arc_member *am)
{
    size_t n = strlen(arc);
    uint64_t size = am->size > 0 ? (uint64_t)am->size : 0;
    return strncmp(it->path, arc, n) == 0 && it->path[n] == '!' &&
           strcmp(it->path + n + 1, am->name) == 0 && it->size == size;
}

static int visit(void *ctx, const shc_arc_member *am, shc_arc_reader *r)
{
    walk_ctx *w = ctx;
    shc_feed *f = w->f;
    want *v = f->wants[w->arc];
    size_t n = f->nwants[w->arc], lo = 0, hi = n;
    if (am->type == SHC_ARC_ERROR) {
        snprintf(w->error, sizeof w->error, "%s", am->error ? am->error : "damaged inner tar");
        return 0;
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].seq < am->seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == n || v[lo].seq != am->seq)
        return 0;
    const fmt_input *it = &f->in->items[v[lo].pos];
    const char *arc = f->in->archives[w->arc].path;
    if (!same_member(arc, it, am)) {
        snprintf(w->changed, sizeof w->changed, "%s: the archive changed since it was listed: "
                 "member %llu is %s (%lld bytes), listed as %s (%llu bytes)", arc,
                 (unsigned long long)am->seq, am->name, (long long)am->size, it->path,
                 (unsigned long long)it->size);
        return ESTALE;
    }
    uint8_t *data = NULL;
    size_t len = 0;
    int have = 0, rc = 0;
    fmt_msg why = {{0}};
    for (size_t k = lo; k < n && v[k].seq == am->seq; k++)
        w->seen[k] = 1;
    for (size_t k = lo; k < n && v[k].seq == am->seq; k++) {
        uint64_t pos = v[k].pos;
        pthread_mutex_lock(&f->mu);
        if (f->stop) {
            pthread_mutex_unlock(&f->mu);
            free(data);
            return ECANCELED;
        }
        if (f->m[pos - f->lo].state != PENDING) {
            pthread_mutex_unlock(&f->mu);
            continue;
        }
        uint64_t size = am->size > 0 ? (uint64_t)am->size : 0;
        if (size > f->max_member)
            size = 0;           /* refused without reading */
        if (pos == f->need) {
            /* wait for room only while the positions below need are still being taken */
            while (!f->stop && f->nheld_low > 0 &&
                   (f->held_low + f->held_high + size > f->budget || f->nheld_low >= AHEAD))
                pthread_cond_wait(&f->change, &f->mu);
        } else if (f->held_low + f->held_high + size > f->budget) {
            pthread_mutex_unlock(&f->mu);
            continue;           /* a later walk reads it */
        }
        pthread_mutex_unlock(&f->mu);
        if (!have) {
            rc = am->type == SHC_ARC_FILE ? shc_arc_read(r, f->max_member, &data, &len, &why)
                                          : fmt_fail(&why, FMT_EUNSUPPORTED, "not a file");
            have = 1;
        }
        uint8_t *copy = data;
        if (rc == 0 && k + 1 < n && v[k + 1].seq == am->seq) {
            /* the same member at several positions (a list file may name it twice) */
            copy = malloc(len ? len : 1);
            if (!copy)
                rc = fmt_fail(&why, ENOMEM, "out of memory");
            else
                memcpy(copy, data, len);
        }
        pthread_mutex_lock(&f->mu);
        deliver(f, pos, rc ? NULL : copy, len, rc, why.text);
        if (copy == data)
            data = NULL;
        w->delivered++;
        pthread_mutex_unlock(&f->mu);
        if (rc && copy != data)
            free(copy);
    }
    free(data);
    return 0;
}

/* Positions of archive arc still PENDING that the last walk did not meet get rc/why (mu not
 * held): they lie beyond damage, or the archive changed. Those met but passed over for want of
 * room are read by the next walk. */
static void fail_unseen(shc_feed *f, uint32_t arc, const uint8_t *seen, int rc, const char *why)
{
    pthread_mutex_lock(&f->mu);
    for (size_t k = 0; k < f->nwants[arc]; k++) {
        uint64_t pos = f->wants[arc][k].pos;
        if ((!seen || !seen[k]) && f->m[pos - f->lo].state == PENDING)
            deliver(f, pos, NULL, 0, rc, why);
    }
    pthread_mutex_unlock(&f->mu);
}

/* The build cannot go on: every position still PENDING gets rc/why, and so does
 * shc_feed_check (mu not held). */
static void fail_all(shc_feed *f, int rc, const char *why)
{
    pthread_mutex_lock(&f->mu);
    f->fatal = rc;
    f->fatal_why = strdup(why && *why ? why : "an archive is damaged");
    for (uint64_t pos = f->lo; pos < f->hi; pos++)
        if (f->in->items[pos].archive && f->m[pos - f->lo].state == PENDING)
            deliver(f, pos, NULL, 0, rc, why);
    pthread_mutex_unlock(&f->mu);
}

static void *feeder(void *arg)
{
    shc_feed *f = arg;
    for (;;) {
        pthread_mutex_lock(&f->mu);
        uint64_t need = f->need;
        int stop = f->stop;
        pthread_mutex_unlock(&f->mu);
        if (stop || need >= f->hi)
            break;
        uint32_t arc = f->in->items[need].archive - 1;
        const fmt_archive_src *src = &f->in->archives[arc];
        walk_ctx w = {.f = f, .arc = arc, .seen = calloc(f->nwants[arc] + 1, 1)};
        if (!w.seen) {
            fail_unseen(f, arc, NULL, ENOMEM, "out of memory");
            continue;
        }
        fmt_msg msg = {{0}};
        int rc = shc_arc_walk_id(src->path, src->nest, src->have_id ? &src->id : NULL, NULL,
                                 visit, &w, &msg);
        pthread_mutex_lock(&f->mu);
        f->walks++;
        stop = f->stop;
        pthread_mutex_unlock(&f->mu);
        if (!stop && (rc == FMT_EHASH || rc == ESTALE)) {
            /* members delivered before may be altered (or another member's): no position of
             * any archive gets more, and the build must not publish (shc_feed_check) */
            fail_all(f, rc, rc == ESTALE && w.changed[0] ? w.changed : msg.text);
            free(w.seen);
            break;
        }
        if (!stop && rc != ECANCELED)
            /* each member not met is a reject saying why; so each walk delivers need */
            fail_unseen(f, arc, w.seen, rc ? rc : FMT_ECORRUPT,
                        rc ? msg.text : w.error[0] ? w.error :
                        "member not found (the archive changed since it was listed)");
        free(w.seen);
        if (stop || rc == ECANCELED)
            break;
    }
    pthread_mutex_lock(&f->mu);
    f->done = 1;
    pthread_cond_broadcast(&f->change);
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

/* What shc_feed_start allocated for the na archives, and f itself, freed (a start that failed). */
static void feed_discard(shc_feed *f, size_t na)
{
    for (size_t a = 0; f->wants && a < na; a++)
        free(f->wants[a]);
    free(f->wants);
    free(f->nwants);
    free(f->m);
    free(f);
}

int shc_feed_start(const fmt_inputs *in, uint64_t lo, uint64_t hi, uint64_t max_member,
                   uint64_t budget, shc_feed **out)
{
    *out = NULL;
    shc_feed *f = calloc(1, sizeof *f);
    if (!f)
        return ENOMEM;
    f->in = in;
    f->lo = lo;
    f->hi = hi > lo ? hi : lo;
    f->max_member = max_member;
    f->budget = budget;
    f->need = lo;
    size_t na = in->narchives;
    f->m = calloc(f->hi - lo + 1, sizeof *f->m);
    f->wants = calloc(na + 1, sizeof *f->wants);
    f->nwants = calloc(na + 1, sizeof *f->nwants);
    if (!f->m || !f->wants || !f->nwants)
        goto nomem;
    for (uint64_t p = lo; p < f->hi; p++)
        if (in->items[p].archive)
            f->nwants[in->items[p].archive - 1]++;
    for (size_t a = 0; a < na; a++)
        if (f->nwants[a] && !(f->wants[a] = malloc(f->nwants[a] * sizeof **f->wants)))
            goto nomem;
    memset(f->nwants, 0, (na + 1) * sizeof *f->nwants);
    for (uint64_t p = lo; p < f->hi; p++) {
        uint32_t a = in->items[p].archive;
        if (a)
            f->wants[a - 1][f->nwants[a - 1]++] = (want){in->items[p].seq, p};
    }
    for (size_t a = 0; a < na; a++)
        if (f->nwants[a] > 1)
            qsort(f->wants[a], f->nwants[a], sizeof **f->wants, cmp_want);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->change, NULL);
    advance(f);
    if (pthread_create(&f->tid, NULL, feeder, f) != 0) {
        pthread_mutex_destroy(&f->mu);
        pthread_cond_destroy(&f->change);
        feed_discard(f, na);
        return EAGAIN;
    }
    *out = f;
    return 0;
nomem:
    feed_discard(f, na);
    return ENOMEM;
}

int shc_feed_take(shc_feed *f, uint64_t pos, uint8_t **data, size_t *len, fmt_msg *msg)
{
    *data = NULL;
    *len = 0;
    if (pos < f->lo || pos >= f->hi || !f->in->items[pos].archive)
        return fmt_fail(msg, FMT_EINVAL, "not an archive member of this feed");
    member *x = &f->m[pos - f->lo];
    pthread_mutex_lock(&f->mu);
    while (x->state == PENDING && !f->stop && !f->done)
        pthread_cond_wait(&f->change, &f->mu);
    int rc;
    if (x->state != HELD) {
        rc = fmt_fail(msg, ECANCELED, "%s", x->state == TAKEN ? "member taken twice"
                                                              : "reading stopped");
    } else {
        rc = x->rc;
        if (rc)
            fmt_fail(msg, rc, "%s", x->why);
        *data = x->data;
        *len = x->len;
        if (pos < f->need) {
            f->held_low -= x->len;
            f->nheld_low--;
        } else {
            f->held_high -= x->len;
        }
        x->data = NULL;
        x->state = TAKEN;
        free(x->why);
        x->why = NULL;
        pthread_cond_broadcast(&f->change);
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

int shc_feed_check(shc_feed *f, int wait, fmt_msg *msg)
{
    if (!f)
        return 0;
    pthread_mutex_lock(&f->mu);
    while (wait && !f->done && !f->stop)
        pthread_cond_wait(&f->change, &f->mu);
    int rc = f->fatal;
    if (rc)
        fmt_fail(msg, rc, "%s", f->fatal_why ? f->fatal_why : "an archive is damaged");
    pthread_mutex_unlock(&f->mu);
    return rc;
}

void shc_feed_stop(shc_feed *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    f->stop = 1;
    pthread_cond_broadcast(&f->change);
    pthread_mutex_unlock(&f->mu);
}

void shc_feed_free(shc_feed *f)
{
    if (!f)
        return;
    shc_feed_stop(f);
    pthread_join(f->tid, NULL);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->change);
    for (uint64_t p = f->lo; p < f->hi; p++) {
        free(f->m[p - f->lo].data);
        free(f->m[p - f->lo].why);
    }
    for (size_t a = 0; a < f->in->narchives; a++)
        free(f->wants[a]);
    free(f->wants);
    free(f->nwants);
    free(f->m);
    free(f->fatal_why);
    free(f);
}

uint64_t shc_feed_peak(const shc_feed *f)
{
    return f ? f->peak : 0;
}

uint64_t shc_feed_walks(const shc_feed *f)
{
    return f ? f->walks : 0;
}
