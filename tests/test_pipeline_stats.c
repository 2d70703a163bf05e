/* test_pipeline_stats.c - the reader's pipeline statistics and threads_auto through the public
 * API, with threads that race (the TSan run checks the counters, the seqlock and parking): a
 * threads_auto reader gives the bytes of a one-thread reader while another thread polls every
 * worker's counts and fills; a slow consumer makes the control loop park down to at most one
 * worker more than needed; the snapshots are consistent (stages within the fill time, each
 * sample read and resized once); the control loop's rule on given windows (a probe judged
 * against the gain one worker could bring, none beyond the cores while the workers compute).
 * Nothing is timed: the consumer's sleeps only make it slow. */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shardread.h"

#include "progs.h"
#include "testutil.h"
#include "tune.h"

static char g_ds[1100];

static int build_fixture(void)
{
    return tu_build_ds(g_ds, "--classes 3 --per-class 6 --min-side 24 --max-side 48", "--max-side 40");
}

static void recipe(shr_options *o, uint32_t threads, int automatic)
{
    shr_options_init(o);
    o->batch_size = 4;
    o->order = SHR_ORDER_RANDOM;
    o->seed = 5;
    o->width = o->height = 16;
    o->rrc = 1;
    o->flip = 1;
    o->jitter_brightness[0] = 0.8;
    o->jitter_brightness[1] = 1.2;
    o->threads = threads;
    o->threads_auto = automatic;
}

typedef struct {
    shr_reader *r;
    atomic_int stop;
    uint64_t polls;
} poller;

/* Another thread reading every worker's counts and fills while they move. */
static void *poll_stats(void *arg)
{
    poller *p = arg;
    shr_fill_event ev[SHR_STATS_EVENTS];
    while (!atomic_load(&p->stop)) {
        shr_consumer_stats c;
        shr_get_consumer_stats(p->r, &c);
        for (uint32_t i = 0; i < c.threads; i++) {
            shr_thread_stats t;
            ck_assert_int_eq(shr_get_thread_stats(p->r, i, &t), 0);
            uint64_t staged = 0;
            for (int s = 0; s < SHR_STAGE_COUNT; s++)
                staged += t.stage_ns[s];
            ck_assert_uint_le(staged, t.timed_fill_ns);     /* a batch's stages come with it */
            ck_assert_uint_eq(t.stage_calls[SHR_STAGE_READ], t.timed_samples);
            int n = shr_get_fill_events(p->r, i, ev, SHR_STATS_EVENTS);
            ck_assert_int_ge(n, 0);
            for (int j = 0; j < n; j++)
                ck_assert_uint_le(ev[j].start_ns, ev[j].end_ns);
        }
        p->polls++;
    }
    return NULL;
}

static void nap_ms(long ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* Epochs of r's batches (pixels and labels) into one buffer; sleep_ms after each of the first
 * slow batches. */
static unsigned char *read_all(shr_reader *r, int epochs, int slow, long sleep_ms, size_t *len)
{
    size_t cap = 1 << 16, used = 0;
    unsigned char *out = malloc(cap);
    ck_assert_ptr_nonnull(out);
    int k = 0;
    for (int e = 0; e < epochs; e++) {
        const shr_batch *b;
        int rc;
        while ((rc = shr_next(r, &b)) == 0) {
            size_t n = (size_t)b->n * b->width * b->height * b->channels;
            while (used + n + b->n * sizeof(int64_t) > cap)
                ck_assert_ptr_nonnull(out = realloc(out, cap *= 2));
            memcpy(out + used, b->data, n);
            memcpy(out + used + n, b->labels, b->n * sizeof(int64_t));
            used += n + b->n * sizeof(int64_t);
            shr_release(r, b);
            if (k++ < slow)
                nap_ms(sleep_ms);
        }
        ck_assert_int_eq(rc, SHR_EEND);
    }
    *len = used;
    return out;
}

START_TEST(test_auto_same_bytes)
{
    shr_options o;
    shr_reader *r;
    recipe(&o, 1, 0);
    ck_assert_int_eq(shr_open(&r, g_ds, &o, tu_fresh()), 0);
    size_t la, lb;
    unsigned char *a = read_all(r, 3, 0, 0, &la);
    shr_close(r);

    recipe(&o, 4, 1);
    ck_assert_int_eq(shr_open(&r, g_ds, &o, tu_fresh()), 0);
    ck_assert_int_eq(shr_stats_enable(r, 1), 0);
    ck_assert_int_eq(shr_stats_enable(r, 1), 1);
    poller p = {.r = r};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, poll_stats, &p), 0);
    /* slow at first (workers parked), then as fast as it can (workers added) */
    unsigned char *b = read_all(r, 3, 6, 20, &lb);
    atomic_store(&p.stop, 1);
    pthread_join(t, NULL);
    ck_assert_uint_eq(la, lb);
    ck_assert_mem_eq(a, b, la);
    shr_consumer_stats c;
    shr_get_consumer_stats(r, &c);
    ck_assert_uint_eq(c.threads, 4);
    ck_assert_uint_eq(c.batches, 3 * 5);        /* 18 samples: 5 batches of 4 an epoch */
    ck_assert_uint_ge(c.active, 1);
    ck_assert_uint_le(c.active, 4);
    shr_close(r);
    free(a);
    free(b);
}
END_TEST

START_TEST(test_slow_consumer_parks)
{
    shr_options o;
    shr_reader *r;
    recipe(&o, 6, 1);
    ck_assert_int_eq(shr_open(&r, g_ds, &o, tu_fresh()), 0);
    shr_consumer_stats c;
    shr_get_consumer_stats(r, &c);
    ck_assert_uint_eq(c.active, 2);             /* it starts with two */
    size_t len;
    free(read_all(r, 4, 20, 50, &len));         /* 50 ms a batch: one worker is plenty */
    shr_get_consumer_stats(r, &c);
    ck_assert_uint_ge(c.active, 1);
    ck_assert_uint_le(c.active, 2);
    ck_assert_uint_ge(c.auto_changes, 1);
    uint32_t active = 0;
    for (uint32_t i = 0; i < c.threads; i++) {
        shr_thread_stats t;
        ck_assert_int_eq(shr_get_thread_stats(r, i, &t), 0);
        active += (uint32_t)t.active;
        ck_assert_uint_eq(t.timed_samples, 0);  /* stage timing was never on */
        ck_assert_uint_eq(t.stage_ns[SHR_STAGE_READ], 0);
    }
    ck_assert_uint_eq(active, c.active);
    shr_thread_stats t;
    ck_assert_int_eq(shr_get_thread_stats(r, c.threads, &t), SHR_EINVAL);
    ck_assert_int_eq(shr_get_fill_events(r, c.threads, NULL, 0), SHR_EINVAL);
    shr_close(r);
}
END_TEST

START_TEST(test_stage_names)
{
    static const char *const names[] = {"read", "resize", "flip", "rotate", "affine",
                                        "auto_augment", "jitter", "grayscale", "convert",
                                        "erase", "mix", "targets"};
    ck_assert_int_eq(SHR_STAGE_COUNT, 12);
    for (int i = 0; i < SHR_STAGE_COUNT; i++)
        ck_assert_str_eq(shr_stage_name(i), names[i]);
    ck_assert_ptr_null(shr_stage_name(SHR_STAGE_COUNT));
    ck_assert_ptr_null(shr_stage_name(-1));
    ck_assert_int_eq(shr_stats_enable(NULL, 1), 0);
    shr_consumer_stats c;
    shr_get_consumer_stats(NULL, &c);
    ck_assert_uint_eq(c.threads, 0);
}
END_TEST

/* A controller as shr_tune_init leaves it, on `cores` CPUs. */
static shr_tune tuner(uint32_t max, uint32_t active, uint32_t cores)
{
    return (shr_tune){.on = 1, .max = max, .cap = max, .active = active, .cores = cores,
                      .cap_windows = 20};
}

/* a consumer faster than the workers: it waits 90% of the window, the workers fill all of it */
static shr_tune_window fast(double rate, double cpu_share)
{
    return (shr_tune_window){.stall = 0.9, .rate = rate, .own_ns = 1e5,
                             .fill_per_batch = 4e6, .busy = 1.0, .cpu_share = cpu_share};
}

START_TEST(test_rule_probe)
{
    /* two CPU-bound workers on two cores: a third is not tried (it only takes turns) */
    shr_tune t = tuner(3, 2, 2);
    shr_tune_window w = fast(100, 0.95);
    ck_assert_uint_eq(shr_tune_decide(&t, &w), 2);
    ck_assert_int_eq(t.probing, 0);
    /* workers that wait on reads (CPU 40% of their time): a third is tried ... */
    w = fast(100, 0.4);
    ck_assert_uint_eq(shr_tune_decide(&t, &w), 3);
    ck_assert_int_eq(t.probing, 1);
    t.active = 3;
    /* ... and a window 10% faster, the noise of a shared machine, does not keep it: from two
     * workers one more could bring 1.5x, half of that gain is asked (1.25x) */
    w = fast(110, 0.4);
    ck_assert_uint_eq(shr_tune_decide(&t, &w), 2);
    ck_assert_uint_eq(t.cap, 2);
    ck_assert_uint_eq(t.cap_windows, 40);       /* the next probe waits twice as long */
    t.active = 2;
    for (int i = 0; i < 39; i++)                /* capped: no probe */
        ck_assert_uint_eq(shr_tune_decide(&t, &w), 2);
    ck_assert_uint_eq(shr_tune_decide(&t, &w), 3);      /* the cap lifted */
    t.active = 3;
    w = fast(140, 0.4);                         /* 1.27x the window before: kept */
    ck_assert_uint_eq(shr_tune_decide(&t, &w), 3);
    ck_assert_uint_eq(t.cap_windows, 20);
    ck_assert_int_eq(t.probing, 0);

    /* below the cores a probe needs no CPU measure; the stall bounds the gain asked: with 20%
     * stall from four workers one more brings at most 1 / 0.8 = 1.25x, so 1.125x is asked */
    t = tuner(8, 4, 16);
    w = (shr_tune_window){.stall = 0.2, .rate = 100, .own_ns = 4e6, .fill_per_batch = 2e7,
                          .busy = 1.0, .cpu_share = 1.0};
    ck_assert_uint_eq(shr_tune_decide(&t, &w), 5);
    t.active = 5;
    w.rate = 112;
    w.stall = 0.1;
    ck_assert_uint_eq(shr_tune_decide(&t, &w), 4);
    t = tuner(8, 4, 16);
    w.rate = 100;
    w.stall = 0.2;
    ck_assert_uint_eq(shr_tune_decide(&t, &w), 5);
    t.active = 5;
    w.rate = 113;
    w.stall = 0.02;                             /* no stall left: kept whatever the rate */
    ck_assert_uint_eq(shr_tune_decide(&t, &w), 5);
    /* idle workers while the consumer waits: more workers cannot help */
    t = tuner(8, 2, 16);
    w = fast(100, 1.0);
    w.busy = 0.3;
    ck_assert_uint_eq(shr_tune_decide(&t, &w), 2);
}
END_TEST

START_TEST(test_rule_park)
{
    /* the consumer takes 10 ms a batch, a worker 4 ms to fill one: ceil(1.1 x 0.4) = 1 */
    shr_tune t = tuner(6, 3, 8);
    shr_tune_window w = {.stall = 0.0, .rate = 100, .own_ns = 1e7, .fill_per_batch = 4e6,
                         .busy = 0.13, .cpu_share = 1.0};
    ck_assert_uint_eq(shr_tune_decide(&t, &w), 2);
    t.active = 2;
    ck_assert_uint_eq(shr_tune_decide(&t, &w), 1);
    t.active = 1;
    ck_assert_uint_eq(shr_tune_decide(&t, &w), 1);
    /* a stall of 3%: neither added nor parked (between the two thresholds) */
    t = tuner(6, 3, 8);
    w.stall = 0.03;
    ck_assert_uint_eq(shr_tune_decide(&t, &w), 3);
}
END_TEST

int main(void)
{
    int rc = build_fixture();
    Suite *s = TU_SUITE("pipeline_stats", "core", 120, test_auto_same_bytes,
                        test_slow_consumer_parks, test_stage_names, test_rule_probe,
                        test_rule_park);
    return tu_run_fixtures(rc, s);
}
