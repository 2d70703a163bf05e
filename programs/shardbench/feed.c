/* feed.c - an image folder as a batch source for `shardbench train`: decoding threads fill a
 * small ordered queue of batches shaped as the reader's (sb_queue, bench.h).
 *
 * The stream: batch k is batch k % nb of epoch k / nb. A worker claims the next stream batch
 * when a slot is free and the batch is below the queue's limit, fills the slot without the lock,
 * and marks it ready; the consumer takes batch after batch in stream order. Unlike the reader,
 * the feed does not fill the next epoch ahead: the epoch's order is drawn when the consumer opens
 * it, and the limit holds the workers at the epoch's end until then. A batch whose every image
 * failed to decode is delivered empty and skipped by the consumer. */
#include "bench.h"

enum { SB_SLOT_FREE, SB_SLOT_FILLING, SB_SLOT_READY, SB_SLOT_HELD };

/* Fill slot `slot` with stream batch k (the worker's alone until it is marked ready). */
static void feed_fill(sb_feed *f, const sb_feed_worker *w, uint32_t slot, uint64_t k)
{
    shr_batch *b = &f->slots[slot].b;
    sb_job *job = &f->job;
    size_t lo = (size_t)(k % f->nb) * job->batch;
    size_t hi = lo + job->batch < job->n ? lo + job->batch : job->n;
    uint32_t filled = 0;
    for (size_t i = lo; i < hi; i++) {
        if (sb_job_fill(job, w->id, i, b->data + filled * job->slot))
            continue;
        size_t item = job->order[i];
        b->labels[filled] = shc_input_list_label(job->in, item);
        b->indices[filled] = (int64_t)item;
        b->sources[filled] = (int64_t)item;
        filled++;
    }
    b->n = filled;
    b->epoch = k / f->nb;
    b->number = k % f->nb;
}

static void *feed_main(void *arg)
{
    sb_feed_worker *w = arg;
    sb_feed *f = w->feed;
    sb_queue *q = &f->q;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->stop && (q->next_claim >= q->limit || q->nfree == 0))
            pthread_cond_wait(&q->room, &q->mu);
        if (q->stop)
            break;
        uint32_t slot = q->free_slots[--q->nfree];
        uint64_t k = q->next_claim++;
        q->pending[k % f->depth] = slot;
        f->slots[slot].state = SB_SLOT_FILLING;
        pthread_mutex_unlock(&q->mu);
        feed_fill(f, w, slot, k);
        pthread_mutex_lock(&q->mu);
        f->slots[slot].state = SB_SLOT_READY;
        pthread_cond_signal(&q->ready);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

static int queue_init(sb_feed *f)
{
    sb_queue *q = &f->q;
    q->free_slots = malloc(f->depth * sizeof *q->free_slots);
    q->pending = malloc(f->depth * sizeof *q->pending);
    if (!q->free_slots || !q->pending)
        return ENOMEM;
    for (uint32_t i = 0; i < f->depth; i++)
        q->free_slots[i] = f->depth - 1 - i;        /* slot 0 first */
    q->nfree = f->depth;
    q->limit = 0;               /* nothing to claim before the first epoch's order */
    int rc = pthread_mutex_init(&q->mu, NULL);
    if (rc)
        return rc;
    if ((rc = pthread_cond_init(&q->room, NULL)) != 0) {
        pthread_mutex_destroy(&q->mu);
        return rc;
    }
    if ((rc = pthread_cond_init(&q->ready, NULL)) != 0) {
        pthread_cond_destroy(&q->room);
        pthread_mutex_destroy(&q->mu);
        return rc;
    }
    q->live = 1;
    return 0;
}

static void queue_set_limit(sb_queue *q, uint64_t limit)
{
    pthread_mutex_lock(&q->mu);
    q->limit = limit;
    pthread_cond_broadcast(&q->room);
    pthread_mutex_unlock(&q->mu);
}

/* The consumer: wait for stream batch next_deliver and hold its slot. EBUSY, without waiting,
 * when the consumer holds every slot: nothing could ever arrive. */
static int queue_next(sb_feed *f, uint32_t *slot)
{
    sb_queue *q = &f->q;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        if (q->next_claim > q->next_deliver) {
            uint32_t s = q->pending[q->next_deliver % f->depth];
            if (f->slots[s].state == SB_SLOT_READY) {
                f->slots[s].state = SB_SLOT_HELD;
                q->next_deliver++;
                q->held++;
                *slot = s;
                pthread_mutex_unlock(&q->mu);
                return 0;
            }
        } else if (q->held == f->depth) {
            pthread_mutex_unlock(&q->mu);
            return EBUSY;
        }
        pthread_cond_wait(&q->ready, &q->mu);
    }
}

static void queue_release(sb_feed *f, uint32_t slot)
{
    sb_queue *q = &f->q;
    pthread_mutex_lock(&q->mu);
    if (f->slots[slot].state == SB_SLOT_HELD) {
        f->slots[slot].state = SB_SLOT_FREE;
        q->free_slots[q->nfree++] = slot;
        q->held--;
        pthread_cond_signal(&q->room);
    }
    pthread_mutex_unlock(&q->mu);
}

void sb_feed_close(sb_feed *f)
{
    if (f->q.live) {
        pthread_mutex_lock(&f->q.mu);
        f->q.stop = 1;
        pthread_cond_broadcast(&f->q.room);
        pthread_mutex_unlock(&f->q.mu);
        for (uint32_t i = 0; f->ws && i < f->started; i++)
            pthread_join(f->ws[i].tid, NULL);
    }
    free(f->ws);
    for (uint32_t i = 0; f->slots && i < f->depth; i++) {
        shr_host_free(f->slots[i].b.data, f->slots[i].b.pinned);
        free(f->slots[i].b.labels);
        free(f->slots[i].b.indices);
        free(f->slots[i].b.sources);
    }
    free(f->slots);
    for (uint32_t i = 0; f->rz && i < f->nthreads; i++)
        shc_renderer_free(f->rz[i]);
    free(f->rz);
    free(f->order);
    shc_input_list_free(f->in);
    if (f->q.live) {
        pthread_cond_destroy(&f->q.ready);
        pthread_cond_destroy(&f->q.room);
        pthread_mutex_destroy(&f->q.mu);
    }
    free(f->q.free_slots);
    free(f->q.pending);
    pthread_mutex_destroy(&f->job.mu);
    memset(f, 0, sizeof *f);
}

/* Open the folder dir as a batch source: list its images, allocate `depth` slots of `batch`
 * samples of width x height x channels (pixels pinned as shr_host_alloc does under pin),
 * start `threads` decoders. Prints its errors. */
int sb_feed_open(sb_feed *f, char *dir, uint32_t batch, uint32_t threads, uint32_t depth,
              shr_order kind, uint64_t seed, uint32_t width, uint32_t height, uint32_t channels,
              shr_pin pin)
{
    memset(f, 0, sizeof *f);
    pthread_mutex_init(&f->job.mu, NULL);
    f->kind = kind;
    f->seed = seed;
    f->depth = depth;
    f->nthreads = threads;
    int rc = sb_list_folder(dir, &f->in);
    if (rc)
        return rc;
    size_t n = shc_input_list_count(f->in);
    f->job.batch = batch;
    f->job.fill = sb_fill_decode;
    f->job.slot = (size_t)width * height * channels;
    f->job.in = f->in;
    f->job.n = n;
    f->nb = (n + batch - 1) / batch;
    f->order = malloc(n * sizeof *f->order);
    f->rz = calloc(threads, sizeof *f->rz);
    f->slots = calloc(depth, sizeof *f->slots);
    f->ws = calloc(threads, sizeof *f->ws);
    rc = f->order && f->rz && f->slots && f->ws ? 0 : ENOMEM;
    if (!rc)
        rc = queue_init(f);
    if (!rc)
        rc = sb_renderers(width, height, channels, threads, f->rz);
    size_t len = ((size_t)batch * f->job.slot + SB_PAGE - 1) / SB_PAGE * SB_PAGE;
    for (uint32_t i = 0; !rc && i < depth; i++) {
        shr_batch *b = &f->slots[i].b;
        /* pinned where a device is, as the reader's ring and a DataLoader with pin_memory: a
         * copy out of pageable memory would be staged by the driver */
        void *data = NULL;
        shr_msg why = {""};
        rc = shr_host_alloc(len, &data, &b->pinned, pin,
                            (int)shr_pin_device_from_env(getenv) - 1, &why);   /* $LOCAL_RANK */
        if (why.text[0] && !f->unpinned.text[0])
            f->unpinned = why;
        b->data = data;
        b->labels = malloc(batch * sizeof *b->labels);
        b->indices = malloc(batch * sizeof *b->indices);
        b->sources = malloc(batch * sizeof *b->sources);
        if (!rc && (!b->labels || !b->indices || !b->sources))
            rc = ENOMEM;
        if (!rc)
            memset(b->data, 0, len);    /* faulted in now, before any clock runs */
        f->pinned = i == 0 ? b->pinned : f->pinned && b->pinned;
        f->ring_bytes += len + (uint64_t)batch * (sizeof *b->labels + sizeof *b->indices +
                                                  sizeof *b->sources);
        b->width = width;
        b->height = height;
        b->channels = channels;
    }
    if (rc) {
        fprintf(stderr, "shardbench: %s: %s\n", dir, strerror(rc));
        return rc;
    }
    f->job.order = f->order;
    f->job.rz = f->rz;
    for (; f->started < threads; f->started++) {
        sb_feed_worker *w = &f->ws[f->started];
        w->feed = f;
        w->id = f->started;
        rc = pthread_create(&w->tid, NULL, feed_main, w);
        if (rc) {
            fprintf(stderr, "shardbench: cannot start %u threads: %s\n", threads, strerror(rc));
            return rc;
        }
    }
    return 0;
}

/* The consumer alone draws an epoch's order and moves the queue's limit: every batch of the
 * epoch before has been delivered by then, so no worker is reading the order. */
int sb_feed_next(void *ctx, const shr_batch **b)
{
    sb_feed *f = ctx;
    *b = NULL;
    if (!f->open) {
        int orc = sb_folder_order(f->order, shc_input_list_count(f->in), f->kind, f->seed,
                                  f->epoch);
        if (orc)
            return sb_fail(&f->error, orc, "cannot draw the order of epoch %" PRIu64 ": %s",
                            f->epoch, shr_strerror(orc));
        f->take = 0;
        f->open = 1;
        queue_set_limit(&f->q, (f->epoch + 1) * f->nb);
    }
    for (;;) {
        if (f->take == f->nb) {
            f->open = 0;
            f->epoch++;
            return SHR_EEND;
        }
        uint32_t si;
        if (queue_next(f, &si) != 0)
            return sb_fail(&f->error, SHR_EINVAL, "every batch slot is held by the consumer: "
                            "nothing can arrive");
        f->take++;
        if (f->slots[si].b.n == 0) {
            queue_release(f, si);
            continue;
        }
        *b = &f->slots[si].b;
        return 0;
    }
}

void sb_feed_release(void *ctx, const shr_batch *b)
{
    sb_feed *f = ctx;
    for (uint32_t i = 0; b && i < f->depth; i++)
        if (&f->slots[i].b == b)
            queue_release(f, i);
}

const char *sb_feed_error(void *ctx)
{
    const sb_feed *f = ctx;
    return f->error.text;
}
