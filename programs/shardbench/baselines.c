/* baselines.c - what the reader is compared with: a pool of threads claiming whole batches (the
 * reader's worker model without the ring), filling them by memcpy from the shard mappings or by
 * decoding an image folder. */
#include "bench.h"

/* ---- measurement ---- */

int sb_job_fill(sb_job *job, size_t worker, size_t k, uint8_t *dst)
{
    shr_msg msg = {{0}};
    int rc = job->fill(job, worker, k, dst, &msg);
    if (rc) {
        atomic_fetch_add(&job->errors, 1);
        pthread_mutex_lock(&job->mu);
        if (!job->first_error[0])
            snprintf(job->first_error, sizeof job->first_error, "%s: %s",
                     job->in ? shc_input_list_path(job->in, job->order[k]) : "sample",
                     sb_reason(&msg, rc));
        pthread_mutex_unlock(&job->mu);
    }
    return rc;
}

static void run_batches(sb_worker *w, sb_job *job)
{
    for (;;) {
        size_t b = atomic_fetch_add(&job->next_batch, 1);
        size_t lo = b * job->batch;
        if (lo >= job->n)
            break;
        size_t hi = lo + job->batch < job->n ? lo + job->batch : job->n;
        size_t filled = 0;
        uint64_t bytes = 0;
        for (size_t k = lo; k < hi; k++) {
            if (sb_job_fill(job, w->id, k, w->buf + filled * job->slot))
                continue;
            filled++;
            bytes += job->slot;
        }
        w->sink += sb_touch(w->buf, filled * job->slot);
        atomic_fetch_add(&job->images, filled);
        atomic_fetch_add(&job->bytes, bytes);
    }
}

static void *pool_main(void *arg)
{
    sb_worker *w = arg;
    sb_pool *p = w->pool;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->generation == seen && !p->quit)
            pthread_cond_wait(&p->go, &p->mu);
        if (p->quit)
            break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        run_batches(w, p->job);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0)
            pthread_cond_signal(&p->idle);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void pool_stop(sb_pool *p)
{
    if (!p->ws)
        return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (uint32_t i = 0; i < p->started; i++)
        pthread_join(p->ws[i].tid, NULL);
    for (uint32_t i = 0; i < p->started; i++)
        free(p->ws[i].buf);
    free(p->ws);
    p->ws = NULL;
    pthread_cond_destroy(&p->idle);
    pthread_cond_destroy(&p->go);
    pthread_mutex_destroy(&p->mu);
}

/* Start `threads` workers for job, each with a batch buffer (faulted in now, before any clock
 * runs). Returns 0, ENOMEM, or the error of pthread_create: a run with fewer threads than asked
 * would be mislabelled, so that is a failure too (and everything is undone). */
static int pool_start(sb_pool *p, sb_job *job, uint32_t threads)
{
    memset(p, 0, sizeof *p);
    p->job = job;
    size_t len = ((size_t)job->batch * job->slot + SB_PAGE - 1) / SB_PAGE * SB_PAGE;
    p->ws = calloc(threads, sizeof *p->ws);
    if (!p->ws)
        return ENOMEM;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->idle, NULL);
    int rc = 0;
    for (; p->started < threads; p->started++) {
        sb_worker *w = &p->ws[p->started];
        w->pool = p;
        w->id = p->started;
        if (len) {
            w->buf = aligned_alloc(SB_PAGE, len);
            if (!w->buf) {
                rc = ENOMEM;
                break;
            }
            memset(w->buf, 0, len);
        }
        rc = pthread_create(&w->tid, NULL, pool_main, w);
        if (rc) {
            free(w->buf);
            break;
        }
    }
    if (rc)
        pool_stop(p);
    return rc;
}

/* Run one epoch of the job (its n and inputs set by the caller) and add what was delivered to
 * span. */
static void pool_epoch(sb_pool *p, sb_span *span)
{
    sb_job *job = p->job;
    atomic_store(&job->next_batch, 0);
    atomic_store(&job->images, 0);
    atomic_store(&job->bytes, 0);
    pthread_mutex_lock(&p->mu);
    p->busy = p->started;
    p->generation++;
    pthread_cond_broadcast(&p->go);
    while (p->busy)
        pthread_cond_wait(&p->idle, &p->mu);
    pthread_mutex_unlock(&p->mu);
    span->images += atomic_load(&job->images);
    span->bytes += atomic_load(&job->bytes);
}

/* ---- memcpy baseline ---- */

static int fill_memcpy(sb_job *job, size_t worker, size_t item, uint8_t *dst, shr_msg *msg)
{
    const void *px;
    uint64_t len;
    int rc = shr_dataset_pixels(job->ds, job->idx[item], &px, &len, NULL);
    if (rc == SHR_EUNSUPPORTED) {
        shr_dataset_info info;
        shr_dataset_get_info(job->ds, &info);
        return sb_fail(msg, rc, "the %s backend does not map its pixels: no mmap+memcpy "
                       "baseline", info.format);
    }
    if (rc)
        return sb_fail(msg, rc, "sample %" PRIu64 ": no such sample", job->idx[item]);
    /* variable-size samples: the reader crops them into slot-sized places; copy as much */
    memcpy(dst, px, len < job->slot ? (size_t)len : job->slot);
    return 0;
}

/* The dataset mapped, as the reader maps it by default: the shards' pages are what is copied. */
static int open_dataset(shr_dataset **ds, const char *dir)
{
    shr_msg msg = {{0}};
    int rc = shr_dataset_open(ds, dir, SHR_ACCESS_MMAP, &msg);
    if (rc)
        fprintf(stderr, "shardbench: %s\n", sb_reason(&msg, rc));
    return rc;
}

int sb_run_memcpy(const char *dir, const sb_read_opts *ro, const sb_trace *trace,
                      size_t slot, sb_row *row)
{
    sb_job job = {.batch = ro->batch, .slot = slot, .fill = fill_memcpy};
    pthread_mutex_init(&job.mu, NULL);
    shr_dataset *ds = NULL;
    sb_pool pool;
    int rc = pool_start(&pool, &job, ro->threads);
    if (rc) {
        fprintf(stderr, "shardbench: cannot start %u threads: %s\n", ro->threads, strerror(rc));
        goto leave;
    }
    for (uint32_t e = 0; e < ro->epochs; e++) {
        if (ro->cold) {
            shr_dataset_close(ds);
            ds = NULL;
            sb_evict_dataset(dir, row);
        }
        sb_mark from = sb_mark_now();
        if (!ds && (rc = open_dataset(&ds, dir)) != 0)
            goto leave;
        job.ds = ds;
        job.idx = trace->idx + (size_t)e * trace->per_epoch;
        job.n = (size_t)trace->count[e];
        pool_epoch(&pool, &row->spans[e]);
        sb_span_close(&row->spans[e], from, sb_mark_now());
    }
    row->errors = atomic_load(&job.errors);
    if (row->errors)
        fprintf(stderr, "shardbench: %s: %" PRIu64 " samples could not be copied (first: %s)\n",
                dir, row->errors, job.first_error);
leave:
    pool_stop(&pool);
    shr_dataset_close(ds);
    pthread_mutex_destroy(&job.mu);
    return rc;
}

/* ---- image folders: the decode path ---- */

/* What shardc build does per input, minus hashing and writing: the compiler's own render path
 * (read, probe, decode with the shrink-on-load hint, plan on the decoded size, resize unless it is
 * already the output), called through shardc.h (shc_render_file). */
int sb_fill_decode(sb_job *job, size_t worker, size_t item, uint8_t *dst, shr_msg *msg)
{
    const char *path = shc_input_list_path(job->in, job->order[item]);
    uint32_t w, h, c;
    int rc = shc_render_file(job->rz[worker], path, job->order[item], dst, job->slot, &w, &h, &c,
                             msg);
    if (rc)
        return rc;
    if ((size_t)w * h * c != job->slot)
        rc = sb_fail(msg, SHR_EFMT_INVAL, "decoded to %ux%ux%u, expected %zu bytes", w, h, c,
                     job->slot);
    return rc;
}

/* This epoch's file order, as the reader orders a dataset (shr_epoch_order): file i of the
 * listing stands where a shardc dataset built from the folder holds sample i, so seq and random
 * give the order in which the reader delivers that dataset. quasi: blocks of SB_QUASI_BLOCK files
 * stand in for shards (the order shuffles blocks, then files within windows of SB_QUASI_WINDOW
 * blocks). Returns 0, ENOMEM or shr_epoch_order's error. */
int sb_folder_order(size_t *order, size_t n, shr_order kind, uint64_t seed, uint64_t epoch)
{
    size_t nblocks = (n + SB_QUASI_BLOCK - 1) / SB_QUASI_BLOCK;
    uint64_t *counts = calloc(nblocks ? nblocks : 1, sizeof *counts);
    uint64_t *idx = malloc((n ? n : 1) * sizeof *idx);
    int rc = counts && idx ? 0 : ENOMEM;
    for (size_t b = 0; !rc && b < nblocks; b++)
        counts[b] = b + 1 < nblocks ? SB_QUASI_BLOCK : n - b * SB_QUASI_BLOCK;
    shr_order_spec spec = {.n = n, .order = kind, .seed = seed, .rank = 0, .world = 1,
                           .uneven = SHR_UNEVEN_PAD, .nshards = nblocks, .shard_counts = counts,
                           .window = SB_QUASI_WINDOW};
    uint64_t got = 0;
    if (!rc)
        rc = shr_epoch_order(&spec, epoch, idx, &got, NULL);
    for (uint64_t i = 0; !rc && i < got && i < n; i++)
        order[i] = (size_t)idx[i];
    free(idx);
    free(counts);
    return rc;
}

int sb_list_folder(char *dir, shc_input_list **in)
{
    int rc = shc_input_list_dirs(&dir, 1, in, NULL);
    if (rc) {
        fprintf(stderr, "shardbench: cannot open %s: %s\n", dir, strerror(rc));
        return rc;
    }
    if (shc_input_list_count(*in) == 0) {
        fprintf(stderr, "shardbench: cannot open %s: no manifest.json and no images in class "
                "folders\n", dir);
        return ENOENT;
    }
    return 0;
}

int sb_renderers(uint32_t width, uint32_t height, uint32_t channels, uint32_t n,
                 shc_renderer **rz)
{
    shc_build_opts *o = shc_build_opts_new();
    if (!o)
        return ENOMEM;
    char size[32];
    snprintf(size, sizeof size, "%" PRIu32 "x%" PRIu32, width, height);
    int rc = shc_build_set(o, "size", size, NULL);
    if (!rc && channels == 1)
        rc = shc_build_set(o, "gray", NULL, NULL);
    for (uint32_t i = 0; !rc && i < n; i++)
        if ((rz[i] = shc_renderer_new(o)) == NULL)
            rc = ENOMEM;
    shc_build_opts_free(o);
    return rc;
}

int sb_run_folder(char *dir, const sb_read_opts *ro, sb_row *row)
{
    shc_input_list *in = NULL;
    sb_job job = {.batch = ro->batch, .fill = sb_fill_decode,
                  .slot = (size_t)ro->width * ro->height * ro->channels};
    pthread_mutex_init(&job.mu, NULL);
    size_t *order = NULL;
    sb_pool pool = {0};
    shc_renderer **rz = NULL;
    size_t n = 0;
    int rc = sb_list_folder(dir, &in);
    if (rc)
        goto leave;
    n = shc_input_list_count(in);
    order = malloc(n * sizeof *order);
    rz = calloc(ro->threads, sizeof *rz);
    rc = order && rz ? 0 : ENOMEM;
    if (!rc)
        rc = sb_renderers(ro->width, ro->height, ro->channels, ro->threads, rz);
    if (rc) {
        fprintf(stderr, "shardbench: %s: %s\n", dir, shr_strerror(rc));
        goto leave;
    }
    job.in = in;
    job.order = order;
    job.rz = rz;
    job.n = n;
    rc = pool_start(&pool, &job, ro->threads);
    if (rc) {
        fprintf(stderr, "shardbench: cannot start %u threads: %s\n", ro->threads, strerror(rc));
        goto leave;
    }
    row->width = ro->width;
    row->height = ro->height;
    row->channels = ro->channels;
    for (uint32_t e = 0; e < ro->epochs; e++) {
        if (ro->cold)
            sb_evict_dataset(dir, row);
        sb_mark from = sb_mark_now();
        if ((rc = sb_folder_order(order, n, ro->order, ro->seed, e)) != 0) {
            fprintf(stderr, "shardbench: %s: %s\n", dir, shr_strerror(rc));
            goto leave;
        }
        pool_epoch(&pool, &row->spans[e]);
        sb_span_close(&row->spans[e], from, sb_mark_now());
    }
    row->errors = atomic_load(&job.errors);
    if (row->errors)
        fprintf(stderr, "shardbench: %s: %" PRIu64 " decodes failed over %u epoch(s) (skipped; "
                "first: %s)\n", dir, row->errors, ro->epochs, job.first_error);
leave:
    pool_stop(&pool);
    for (uint32_t i = 0; rz && i < ro->threads; i++)
        shc_renderer_free(rz[i]);
    free(rz);
    free(order);
    shc_input_list_free(in);
    pthread_mutex_destroy(&job.mu);
    return rc;
}

/* ---- the report ---- */
