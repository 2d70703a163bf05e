/* feed.c - an image folder as a batch source for `shardbench train`: decoding threads fill a ring
 * of batches shaped as libshardread's. */
#include "bench.h"

static void feed_fill(sb_feed *f, size_t worker, sb_slot *sl, uint64_t k)
{
    sb_job *job = &f->job;
    size_t lo = (size_t)k * job->batch;
    size_t hi = lo + job->batch < job->n ? lo + job->batch : job->n;
    uint32_t filled = 0;
    for (size_t i = lo; i < hi; i++) {
        fmt_msg msg = {{0}};
        int rc = job->fill(job, worker, i, sl->b.data + filled * job->slot, &msg);
        if (rc) {
            atomic_fetch_add(&job->errors, 1);
            pthread_mutex_lock(&job->mu);
            if (!job->first_error[0])
                snprintf(job->first_error, sizeof job->first_error, "%s: %s",
                         job->in->items[job->order[i]].path, fmt_reason(&msg, rc));
            pthread_mutex_unlock(&job->mu);
            continue;
        }
        size_t item = job->order[i];
        sl->b.labels[filled] = job->in->items[item].label;
        sl->b.indices[filled] = (int64_t)item;
        sl->b.sources[filled] = (int64_t)item;
        filled++;
    }
    sl->b.n = filled;
}

static void *feed_main(void *arg)
{
    sb_feed_worker *w = arg;
    sb_feed *f = w->feed;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (!f->quit && !(f->open && f->claim < f->nb &&
                             f->slots[f->claim % f->depth].state == SB_SLOT_FREE))
            pthread_cond_wait(&f->work, &f->mu);
        if (f->quit)
            break;
        uint64_t k = f->claim++;
        sb_slot *sl = &f->slots[k % f->depth];
        sl->state = SB_SLOT_FILLING;
        sl->b.epoch = f->epoch;
        sl->b.number = k;
        pthread_mutex_unlock(&f->mu);
        feed_fill(f, w->id, sl, k);
        pthread_mutex_lock(&f->mu);
        sl->state = SB_SLOT_READY;
        pthread_cond_broadcast(&f->ready);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

void feed_close(sb_feed *f)
{
    if (f->ws) {
        pthread_mutex_lock(&f->mu);
        f->quit = 1;
        pthread_cond_broadcast(&f->work);
        pthread_mutex_unlock(&f->mu);
        for (uint32_t i = 0; i < f->started; i++)
            pthread_join(f->ws[i].tid, NULL);
        free(f->ws);
    }
    for (uint32_t i = 0; f->slots && i < f->depth; i++) {
        free(f->slots[i].b.data);
        free(f->slots[i].b.labels);
        free(f->slots[i].b.indices);
        free(f->slots[i].b.sources);
    }
    free(f->slots);
    for (uint32_t i = 0; f->rz && i < f->nthreads; i++)
        fmt_resizer_free(f->rz[i]);
    free(f->rz);
    free(f->order);
    if (f->have_inputs)
        fmt_inputs_free(&f->in);
    pthread_cond_destroy(&f->ready);
    pthread_cond_destroy(&f->work);
    pthread_mutex_destroy(&f->mu);
    pthread_mutex_destroy(&f->job.mu);
    memset(f, 0, sizeof *f);
}

/* Open the folder dir as a batch source: list its images, allocate `depth` slots of `batch`
 * samples of width x height x channels, start `threads` decoders. Prints its errors. */
int feed_open(sb_feed *f, char *dir, uint32_t batch, uint32_t threads, uint32_t depth,
                     shr_order kind, uint64_t seed, uint32_t width, uint32_t height,
                     uint32_t channels)
{
    memset(f, 0, sizeof *f);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->work, NULL);
    pthread_cond_init(&f->ready, NULL);
    pthread_mutex_init(&f->job.mu, NULL);
    f->kind = kind;
    f->seed = seed;
    f->depth = depth;
    f->nthreads = threads;
    int rc = fmt_inputs_from_dirs(&dir, 1, &f->in, NULL);
    if (rc) {
        fprintf(stderr, "shardbench: cannot open %s: %s\n", dir, strerror(rc));
        return rc;
    }
    f->have_inputs = 1;
    if (f->in.n == 0) {
        fprintf(stderr, "shardbench: cannot open %s: no manifest.json and no images in class "
                "folders\n", dir);
        return ENOENT;
    }
    f->geom = (fmt_geom){.mode = FMT_GEOM_SIZE, .fit = FMT_FIT_CROP, .width = width,
                         .height = height};
    f->job.batch = batch;
    f->job.fill = fill_decode;
    f->job.geom = &f->geom;
    f->job.channels = channels;
    f->job.slot = (size_t)width * height * channels;
    f->job.in = &f->in;
    f->job.n = f->in.n;
    f->nb = (f->in.n + batch - 1) / batch;
    f->order = malloc(f->in.n * sizeof *f->order);
    f->rz = calloc(threads, sizeof *f->rz);
    f->slots = calloc(depth, sizeof *f->slots);
    f->ws = calloc(threads, sizeof *f->ws);
    rc = f->order && f->rz && f->slots && f->ws ? 0 : ENOMEM;
    for (uint32_t i = 0; !rc && i < threads; i++)
        rc = fmt_resizer_create(&f->rz[i]);
    size_t len = ((size_t)batch * f->job.slot + SB_PAGE - 1) / SB_PAGE * SB_PAGE;
    for (uint32_t i = 0; !rc && i < depth; i++) {
        shr_batch *b = &f->slots[i].b;
        b->data = aligned_alloc(SB_PAGE, len);
        b->labels = malloc(batch * sizeof *b->labels);
        b->indices = malloc(batch * sizeof *b->indices);
        b->sources = malloc(batch * sizeof *b->sources);
        if (!b->data || !b->labels || !b->indices || !b->sources)
            rc = ENOMEM;
        else
            memset(b->data, 0, len);    /* faulted in now, before any clock runs */
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

int feed_next(void *ctx, const shr_batch **b)
{
    sb_feed *f = ctx;
    *b = NULL;
    pthread_mutex_lock(&f->mu);
    if (!f->open) {
        int orc = folder_order(f->order, f->in.n, f->kind, f->seed, f->epoch);
        if (orc) {
            pthread_mutex_unlock(&f->mu);
            return orc;
        }
        f->claim = f->take = 0;
        f->open = 1;
        pthread_cond_broadcast(&f->work);
    }
    int rc = 0;
    for (;;) {
        if (f->take == f->nb) {
            f->open = 0;
            f->epoch++;
            rc = SHR_EEND;
            break;
        }
        sb_slot *sl = &f->slots[f->take % f->depth];
        if (sl->state == SB_SLOT_HELD) {
            rc = SHR_EINVAL;    /* the consumer holds every slot: nothing can arrive */
            break;
        }
        while (!(sl->state == SB_SLOT_READY && sl->b.number == f->take))
            pthread_cond_wait(&f->ready, &f->mu);
        f->take++;
        if (sl->b.n == 0) {
            sl->state = SB_SLOT_FREE;
            pthread_cond_broadcast(&f->work);
            continue;
        }
        sl->state = SB_SLOT_HELD;
        *b = &sl->b;
        break;
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

void feed_release(void *ctx, const shr_batch *b)
{
    sb_feed *f = ctx;
    pthread_mutex_lock(&f->mu);
    for (uint32_t i = 0; b && i < f->depth; i++) {
        if (&f->slots[i].b == b && f->slots[i].state == SB_SLOT_HELD) {
            f->slots[i].state = SB_SLOT_FREE;
            pthread_cond_broadcast(&f->work);
        }
    }
    pthread_mutex_unlock(&f->mu);
}

const char *feed_error(void *ctx)
{
    return "";
}
