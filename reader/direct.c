/* direct.c - a batch's O_DIRECT reads with many requests in flight (direct.h). */
#include "direct.h"

#include <errno.h>
#include <inttypes.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "raw.h"

/* Neighbouring samples whose aligned extents are at most this far apart are read with one
 * request (the gap is read and dropped: cheaper than another request); no request grows past
 * SHR_DIRECT_MAX_REQ unless one sample is larger. */
#define SHR_DIRECT_GAP (16u << 10)
#define SHR_DIRECT_MAX_REQ (2u << 20)
#define SHR_DIRECT_MAX_DEPTH 4096u
#define SHR_DIRECT_STAGE_ALIGN 4096u

typedef struct {
    uint32_t first, count;      /* items order[first .. first + count) */
    int fd, buffered_fd;
    uint64_t lo, len;           /* the aligned request */
    uint64_t need;              /* bytes from lo the samples need (the rest may be past EOF) */
    uint8_t *buf;               /* the batch itself (direct) or staging */
    int staged;
    int rc;
} dreq;

struct shr_direct {
    struct io_uring ring;
    int uring;
    uint32_t depth;
    uint8_t *stage;
    size_t stage_cap;
    uint32_t *order;            /* item positions in request order */
    dreq *reqs;
    size_t cap;                 /* of order and reqs */
};

int shr_direct_create(shr_direct **out, uint32_t depth, size_t staging, int uring)
{
    *out = NULL;
    if (depth == 0 || depth > SHR_DIRECT_MAX_DEPTH)
        return EINVAL;
    shr_direct *d = calloc(1, sizeof *d);
    if (!d)
        return ENOMEM;
    d->depth = depth;
    d->stage_cap = (staging + SHR_DIRECT_STAGE_ALIGN - 1) & ~(size_t)(SHR_DIRECT_STAGE_ALIGN - 1);
    if (d->stage_cap && posix_memalign((void **)&d->stage, SHR_DIRECT_STAGE_ALIGN, d->stage_cap)) {
        free(d);
        return ENOMEM;
    }
    if (uring)
        d->uring = io_uring_queue_init(depth, &d->ring, 0) == 0;
    *out = d;
    return 0;
}

void shr_direct_free(shr_direct *d)
{
    if (!d)
        return;
    if (d->uring)
        io_uring_queue_exit(&d->ring);
    free(d->stage);
    free(d->order);
    free(d->reqs);
    free(d);
}

int shr_direct_uring(const shr_direct *d)
{
    return d->uring;
}

/* ---- planning ---- */

/* qsort has no context argument in C11: the items being sorted, per thread */
static _Thread_local const shr_direct_item *t_items;

static int by_file_offset(const void *a, const void *b)
{
    const fmt_extent *x = &t_items[*(const uint32_t *)a].x, *y = &t_items[*(const uint32_t *)b].x;
    if (x->fd != y->fd)
        return x->fd < y->fd ? -1 : 1;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

static uint64_t down(uint64_t x, uint64_t a)
{
    return x & ~(a - 1);
}

static uint64_t up(uint64_t x, uint64_t a)
{
    return (x + a - 1) & ~(a - 1);
}

/* The item can be read straight into its destination: plain, and offset, length and address
 * aligned as the device wants. */
static int direct_ok(const shr_direct_item *t)
{
    return t->x.codec == 0 && t->x.offset % t->x.off_align == 0 &&
           t->x.length % t->x.off_align == 0 && (uintptr_t)t->dst % t->x.mem_align == 0 &&
           t->x.length > 0;
}

static int grow_plan(shr_direct *d, uint32_t n)
{
    if (n <= d->cap)
        return 0;
    uint32_t *o = realloc(d->order, n * sizeof *o);
    if (!o)
        return ENOMEM;
    d->order = o;
    dreq *r = realloc(d->reqs, n * sizeof *r);
    if (!r)
        return ENOMEM;
    d->reqs = r;
    d->cap = n;
    return 0;
}

/* Requests for it[], in file order: runs of direct items back to back in the file and in the
 * batch become one direct request; other items are merged with their neighbours (gaps up to
 * SHR_DIRECT_GAP) into staged requests. Returns the number of requests. */
static uint32_t plan(shr_direct *d, const shr_direct_item *it, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        d->order[i] = i;
    t_items = it;
    qsort(d->order, n, sizeof *d->order, by_file_offset);
    uint32_t nr = 0;
    for (uint32_t k = 0; k < n;) {
        const shr_direct_item *a = &it[d->order[k]];
        dreq *r = &d->reqs[nr++];
        memset(r, 0, sizeof *r);
        r->first = k;
        r->count = 1;
        r->fd = a->x.fd;
        r->buffered_fd = a->x.buffered_fd;
        uint64_t end = a->x.offset + a->x.stored;
        if (direct_ok(a)) {
            r->lo = a->x.offset;
            r->buf = a->dst;
            while (k + r->count < n) {
                const shr_direct_item *p = &it[d->order[k + r->count - 1]];
                const shr_direct_item *b = &it[d->order[k + r->count]];
                if (b->x.fd != a->x.fd || !direct_ok(b) || b->x.offset != end ||
                    b->dst != p->dst + p->x.length || end + b->x.length - r->lo > SHR_DIRECT_MAX_REQ)
                    break;
                end += b->x.length;
                r->count++;
            }
            r->len = r->need = end - r->lo;
        } else {
            uint64_t align = a->x.off_align;
            r->lo = down(a->x.offset, align);
            r->staged = 1;
            while (k + r->count < n) {
                const shr_direct_item *b = &it[d->order[k + r->count]];
                uint64_t bend = b->x.offset + b->x.stored;
                if (b->x.fd != a->x.fd || direct_ok(b) ||
                    down(b->x.offset, align) > up(end, align) + SHR_DIRECT_GAP ||
                    up(bend, align) - r->lo > SHR_DIRECT_MAX_REQ)
                    break;
                if (bend > end)
                    end = bend;
                r->count++;
            }
            r->need = end - r->lo;
            r->len = up(end, align) - r->lo;
        }
        k += r->count;
    }
    return nr;
}

/* ---- execution ---- */

/* A request's samples out of its buffer into the batch (staged), and every compressed one
 * decoded. Returns 0 or the first error, with *bad and msg set. */
static int finish(shr_direct *d, const dreq *r, shr_direct_item *it, uint32_t *bad, fmt_msg *msg)
{
    if (r->rc) {
        *bad = d->order[r->first];
        return fmt_fail(msg, r->rc, "%s", fmt_strerror(r->rc));
    }
    if (!r->staged)
        return 0;
    for (uint32_t j = 0; j < r->count; j++) {
        shr_direct_item *t = &it[d->order[r->first + j]];
        const uint8_t *src = r->buf + (t->x.offset - r->lo);
        fmt_raw_entry e = {.codec = (uint32_t)t->x.codec, .stored = t->x.stored,
                           .length = t->x.length, .hash = t->x.hash, .height = t->x.height,
                           .width = t->x.width, .channels = t->x.channels};
        int rc = fmt_raw_decode(&e, src, t->dst, msg);
        if (rc) {
            *bad = d->order[r->first + j];
            return rc;
        }
    }
    return 0;
}

/* What a completed read of `got` bytes means: a short read is finished with plain preads on the
 * buffered descriptor (O_DIRECT may stop short, e.g. at the end of the file), EINVAL (the
 * filesystem refuses this transfer for O_DIRECT) redoes it that way. */
static int complete(dreq *r, long res)
{
    size_t got = 0;
    if (res == -EINVAL)
        res = 0;
    else if (res < 0)
        return (int)-res;
    if ((uint64_t)res >= r->need)
        return 0;
    int rc = fmt_pread_full(r->buffered_fd, r->buf + res, (size_t)(r->need - (uint64_t)res),
                            r->lo + (uint64_t)res, &got);
    if (rc)
        return rc;
    return (uint64_t)res + got < r->need ? FMT_ETRUNC : 0;
}

int shr_direct_read(shr_direct *d, shr_direct_item *it, uint32_t n, uint32_t *bad, fmt_msg *msg)
{
    *bad = 0;
    if (msg)
        msg->text[0] = '\0';
    if (n == 0)
        return 0;
    if (grow_plan(d, n))
        return fmt_fail(msg, ENOMEM, "no memory for %" PRIu32 " requests", n);
    uint32_t nr = plan(d, it, n);

    /* the staging buffer must hold the largest staged request */
    size_t biggest = 0;
    for (uint32_t q = 0; q < nr; q++)
        if (d->reqs[q].staged && d->reqs[q].len > biggest)
            biggest = (size_t)d->reqs[q].len;
    if (biggest > d->stage_cap) {
        void *p;
        if (posix_memalign(&p, SHR_DIRECT_STAGE_ALIGN, biggest))
            return fmt_fail(msg, ENOMEM, "no memory for a read of %zu bytes", biggest);
        free(d->stage);
        d->stage = p;
        d->stage_cap = biggest;
    }

    int first = 0;
    uint32_t next = 0, done_upto = 0, inflight = 0;
    size_t stage_used = 0;
    /* requests are issued in order; a wave ends when the depth or the staging buffer is used up,
     * and its requests are finished once all of them completed (staging is then reused) */
    while (done_upto < nr) {
        while (next < nr && inflight < d->depth) {
            dreq *r = &d->reqs[next];
            if (r->staged) {
                size_t at = (stage_used + SHR_DIRECT_STAGE_ALIGN - 1) &
                            ~(size_t)(SHR_DIRECT_STAGE_ALIGN - 1);
                if (at + r->len > d->stage_cap)
                    break;
                r->buf = d->stage + at;
                stage_used = at + (size_t)r->len;
            }
            if (d->uring) {
                struct io_uring_sqe *sqe = io_uring_get_sqe(&d->ring);
                if (!sqe)
                    break;
                io_uring_prep_read(sqe, r->fd, r->buf, (unsigned)r->len, r->lo);
                io_uring_sqe_set_data64(sqe, next);
            } else {
                size_t got;
                int rc = fmt_pread_full(r->fd, r->buf, (size_t)r->len, r->lo, &got);
                r->rc = complete(r, rc ? -(long)rc : (long)got);
            }
            next++;
            inflight++;
        }
        if (d->uring && inflight) {
            uint32_t submitted = 0;
            int rc = 0;
            while (submitted < inflight) {
                rc = io_uring_submit(&d->ring);
                if (rc == -EINTR)
                    continue;
                if (rc <= 0)
                    break;
                submitted += (uint32_t)rc;
            }
            if (submitted < inflight) {
                /* the ring failed: reap what was submitted, fail the wave's other requests, and
                 * never use the ring again (unsubmitted entries must not run later) */
                for (uint32_t got = 0; got < submitted; got++) {
                    struct io_uring_cqe *cqe;
                    if (io_uring_wait_cqe(&d->ring, &cqe) < 0)
                        break;
                    io_uring_cqe_seen(&d->ring, cqe);
                }
                for (uint32_t q = done_upto; q < next; q++)
                    d->reqs[q].rc = rc < 0 ? -rc : EIO;
                io_uring_queue_exit(&d->ring);
                d->uring = 0;
            } else {
                for (uint32_t got = 0; got < inflight; got++) {
                    struct io_uring_cqe *cqe;
                    int w;
                    while ((w = io_uring_wait_cqe(&d->ring, &cqe)) == -EINTR)
                        ;
                    if (w < 0) {
                        for (uint32_t q = done_upto; q < next; q++)
                            if (!d->reqs[q].rc)
                                d->reqs[q].rc = -w;
                        break;
                    }
                    dreq *r = &d->reqs[io_uring_cqe_get_data64(cqe)];
                    r->rc = complete(r, cqe->res);
                    io_uring_cqe_seen(&d->ring, cqe);
                }
            }
        }
        for (; done_upto < next; done_upto++) {
            uint32_t b;
            fmt_msg m = {{0}};
            int rc = finish(d, &d->reqs[done_upto], it, &b, &m);
            if (rc && !first) {
                first = rc;
                *bad = b;
                if (msg)
                    *msg = m;
            }
        }
        inflight = 0;
        stage_used = 0;
        if (first)
            break;
    }
    return first;
}
