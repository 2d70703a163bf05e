/* test_ring.c - the prefetch ring (reader/ring.h) on its own, without a reader: delivery in stream
 * order whatever order the workers finish in, each slot owned by one side at a time, releases in
 * any order, EBUSY when every slot is held, the claim limit, a failing fill, second releases, and
 * parking workers (the active count of threads_auto).
 *
 * The fill writes the stream batch number into the slot's buffer and checks that nobody else
 * owns the slot meanwhile; workers finish out of order because the fill yields a k-dependent
 * number of times. Nothing here is timed. */
#include "ring.h"
#include "testutil.h"

#include <sched.h>
#include <stdatomic.h>

#define MAX_SLOTS 8
#define MAX_WORKERS 4

typedef struct {
    shr_ring ring;
    uint64_t buf[MAX_SLOTS];            /* the slots' "buffers": the batch each holds */
    atomic_int owner[MAX_SLOTS];        /* 1 while a fill writes the slot */
    atomic_int consumer[MAX_SLOTS];     /* 1 while the consumer holds it */
    atomic_uint_fast64_t fills;
    atomic_int overlap;                 /* a fill found its slot owned by someone else */
    uint64_t fail_at;                   /* the fill of this batch fails (UINT64_MAX: none) */
    pthread_t tid[MAX_WORKERS];
    uint32_t nworkers;
} fixture;

static int fill(void *ctx, void *worker, uint32_t slot, uint64_t k)
{
    fixture *f = ctx;
    (void)worker;
    if (atomic_exchange(&f->owner[slot], 1) != 0 || atomic_load(&f->consumer[slot]) != 0)
        atomic_store(&f->overlap, 1);
    /* finish out of order: later batches of a round sometimes before earlier ones */
    for (uint64_t i = 0; i < (k * 2654435761u) % 97; i++)
        sched_yield();
    f->buf[slot] = k;
    atomic_fetch_add(&f->fills, 1);
    atomic_store(&f->owner[slot], 0);
    return k == f->fail_at ? -1 : 0;
}

static void *serve(void *arg)
{
    fixture *f = arg;
    shr_ring_serve(&f->ring, NULL);
    return NULL;
}

/* A ring of nslots served by nworkers threads, claims below limit, the fill of batch fail_at
 * failing (UINT64_MAX: none). */
static void start(fixture *f, uint32_t nslots, uint32_t nworkers, uint64_t limit, uint64_t fail_at)
{
    memset(f, 0, sizeof *f);
    f->fail_at = fail_at;
    ck_assert_int_eq(shr_ring_init(&f->ring, nslots, fill, f), 0);
    if (limit != UINT64_MAX)
        shr_ring_set_limit(&f->ring, limit);
    f->nworkers = nworkers;
    for (uint32_t i = 0; i < nworkers; i++)
        ck_assert_int_eq(pthread_create(&f->tid[i], NULL, serve, f), 0);
}

static void join(fixture *f)
{
    for (uint32_t i = 0; i < f->nworkers; i++)
        ck_assert_int_eq(pthread_join(f->tid[i], NULL), 0);
    f->nworkers = 0;
}

static void stop(fixture *f)
{
    shr_ring_stop(&f->ring);
    join(f);
    ck_assert_int_eq(atomic_load(&f->overlap), 0);
    shr_ring_destroy(&f->ring);
}

/* The next batch: it must be batch `want`, in a slot the consumer does not hold already, filled
 * with `want`. Its slot is returned, held. */
static uint32_t take(fixture *f, uint64_t want)
{
    uint32_t slot = UINT32_MAX;
    uint64_t k = UINT64_MAX;
    ck_assert_int_eq(shr_ring_next(&f->ring, &slot, &k), 0);
    ck_assert_uint_eq(k, want);
    ck_assert_uint_lt(slot, f->ring.nslots);
    ck_assert_int_eq(atomic_exchange(&f->consumer[slot], 1), 0);
    ck_assert_int_eq(atomic_load(&f->owner[slot]), 0);
    ck_assert_uint_eq(f->buf[slot], want);
    return slot;
}

static void give_back(fixture *f, uint32_t slot)
{
    atomic_store(&f->consumer[slot], 0);
    ck_assert_int_eq(shr_ring_release(&f->ring, slot), 0);
}

/* Batches from .. to - 1 taken in stream order and given back at once; returns to. */
static uint64_t pass_batches(fixture *f, uint64_t from, uint64_t to)
{
    for (uint64_t k = from; k < to; k++)
        give_back(f, take(f, k));
    return to;
}

/* Many workers, few slots: every batch arrives in stream order, each exactly once. */
START_TEST(test_stream_order)
{
    static const uint32_t shapes[][2] = {{1, 1}, {1, 4}, {3, 4}, {8, 2}, {2, 3}};
    for (size_t t = 0; t < sizeof shapes / sizeof *shapes; t++) {
        fixture f;
        start(&f, shapes[t][0], shapes[t][1], UINT64_MAX, UINT64_MAX);
        pass_batches(&f, 0, 500);
        stop(&f);
    }
}
END_TEST

/* The consumer holds several batches and gives them back in another order: the next ones still
 * come in stream order, into whichever slots are free. */
START_TEST(test_release_out_of_order)
{
    fixture f;
    start(&f, 4, 3, UINT64_MAX, UINT64_MAX);
    uint64_t k = 0;
    for (int round = 0; round < 100; round++) {
        uint32_t held[3];
        for (int i = 0; i < 3; i++)
            held[i] = take(&f, k++);
        give_back(&f, held[2]);
        give_back(&f, held[0]);
        uint32_t s = take(&f, k++);
        give_back(&f, held[1]);
        give_back(&f, s);
    }
    stop(&f);
}
END_TEST

/* With every slot held nothing can arrive: next says EBUSY at once; one release lets it go on. */
START_TEST(test_all_held_is_ebusy)
{
    fixture f;
    start(&f, 2, 1, UINT64_MAX, UINT64_MAX);
    uint32_t a = take(&f, 0), b = take(&f, 1), slot;
    ck_assert_int_eq(shr_ring_next(&f.ring, &slot, NULL), EBUSY);
    ck_assert_int_eq(shr_ring_next(&f.ring, &slot, NULL), EBUSY);
    give_back(&f, a);
    uint32_t c = take(&f, 2);
    ck_assert_uint_eq(c, a);        /* the only free slot */
    give_back(&f, b);
    give_back(&f, c);
    stop(&f);
}
END_TEST

/* Releasing a slot that is not held (twice, never handed out, out of range) is EINVAL and
 * changes nothing. */
START_TEST(test_bad_release)
{
    fixture f;
    start(&f, 3, 2, UINT64_MAX, UINT64_MAX);
    uint32_t s = take(&f, 0);
    give_back(&f, s);
    ck_assert_int_eq(shr_ring_release(&f.ring, s), EINVAL);
    ck_assert_int_eq(shr_ring_release(&f.ring, 3), EINVAL);
    ck_assert_int_eq(shr_ring_release(&f.ring, UINT32_MAX), EINVAL);
    pass_batches(&f, 1, 50);
    stop(&f);
}
END_TEST

/* Workers claim only batches below the limit: after the consumer took them all, exactly that
 * many were filled; raising the limit lets the stream go on where it stopped. */
START_TEST(test_limit)
{
    fixture f;
    start(&f, 4, 3, 5, UINT64_MAX);
    pass_batches(&f, 0, 5);
    ck_assert_uint_eq(atomic_load(&f.fills), 5);
    ck_assert_uint_eq(f.ring.next_claim, 5);
    shr_ring_set_limit(&f.ring, 12);
    pass_batches(&f, 5, 12);
    ck_assert_uint_eq(atomic_load(&f.fills), 12);
    stop(&f);
}
END_TEST

/* A failing fill halts the workers (serve returns without a stop); every batch claimed before
 * that, the failed one included, is still delivered in order. */
START_TEST(test_fill_failure)
{
    fixture f;
    start(&f, 3, 3, UINT64_MAX, 7);
    uint64_t k = 0;
    k = pass_batches(&f, k, 8);
    join(&f);                           /* returns: the workers saw the failure */
    uint64_t claimed = f.ring.next_claim;
    ck_assert_uint_ge(claimed, 8);
    ck_assert_uint_le(claimed, 8 + 3);  /* at most one slot's worth of claims after the failure */
    k = pass_batches(&f, k, claimed);
    ck_assert_uint_eq(atomic_load(&f.fills), claimed);
    stop(&f);
}
END_TEST

/* Stop wakes workers that wait for a free slot (all slots held) and for the limit. */
START_TEST(test_stop_wakes_waiters)
{
    fixture f;
    start(&f, 2, 3, UINT64_MAX, UINT64_MAX);
    uint32_t a = take(&f, 0), b = take(&f, 1);
    stop(&f);                           /* the workers wait for a slot: stop must wake them */
    (void)a;
    (void)b;
    start(&f, 2, 2, 0, UINT64_MAX);     /* nothing claimable: they wait at the limit */
    stop(&f);
    ck_assert_uint_eq(atomic_load(&f.fills), 0);
}
END_TEST

/* Parking: workers numbered at or above the active count claim nothing; raising the count lets
 * more work, lowering it parks them after the batch in hand; the stream stays in order, each
 * batch exactly once, and no wakeup is lost (a lost one hangs: the case's timeout fails it). */
typedef struct {
    fixture *f;
    uint32_t id;
    atomic_uint_fast64_t fills;
} parked_worker;

static int fill_counted(void *ctx, void *worker, uint32_t slot, uint64_t k)
{
    parked_worker *w = worker;
    atomic_fetch_add(&w->fills, 1);
    return fill(ctx, NULL, slot, k);
}

static void *serve_numbered(void *arg)
{
    parked_worker *w = arg;
    shr_ring_serve_as(&w->f->ring, w, w->id);
    return NULL;
}

START_TEST(test_parking)
{
    fixture f;
    parked_worker w[MAX_WORKERS];
    memset(&f, 0, sizeof f);
    f.fail_at = UINT64_MAX;
    ck_assert_int_eq(shr_ring_init(&f.ring, 6, fill_counted, &f), 0);
    ck_assert_uint_eq(shr_ring_active(&f.ring), UINT32_MAX);
    shr_ring_set_active(&f.ring, 1);
    ck_assert_uint_eq(shr_ring_active(&f.ring), 1);
    for (uint32_t i = 0; i < MAX_WORKERS; i++) {
        w[i].f = &f;
        w[i].id = i;
        atomic_init(&w[i].fills, 0);
        ck_assert_int_eq(pthread_create(&f.tid[i], NULL, serve_numbered, &w[i]), 0);
    }
    f.nworkers = MAX_WORKERS;
    uint64_t k = 0;
    k = pass_batches(&f, k, 200);
    for (uint32_t i = 1; i < MAX_WORKERS; i++)
        ck_assert_uint_eq(atomic_load(&w[i].fills), 0);
    shr_ring_set_active(&f.ring, 3);
    k = pass_batches(&f, k, 500);
    ck_assert_uint_eq(atomic_load(&w[3].fills), 0);
    shr_ring_set_active(&f.ring, 0);     /* 0 means 1: worker 0 always serves */
    ck_assert_uint_eq(shr_ring_active(&f.ring), 1);
    uint64_t at[MAX_WORKERS];
    for (uint32_t i = 0; i < MAX_WORKERS; i++)
        at[i] = atomic_load(&w[i].fills);
    k = pass_batches(&f, k, 800);
    for (uint32_t i = 1; i < MAX_WORKERS; i++)
        ck_assert_uint_le(atomic_load(&w[i].fills), at[i] + 1);     /* the batch in hand */
    stop(&f);                           /* wakes the parked workers too */
    uint64_t total = 0;
    for (uint32_t i = 0; i < MAX_WORKERS; i++)
        total += atomic_load(&w[i].fills);
    ck_assert_uint_eq(total, atomic_load(&f.fills));
}
END_TEST

/* destroy accepts a zeroed ring (an init that failed). */
START_TEST(test_destroy_zeroed)
{
    shr_ring g;
    memset(&g, 0, sizeof g);
    shr_ring_destroy(&g);
    ck_assert_int_eq(shr_ring_init(&g, 1, fill, NULL), 0);
    shr_ring_destroy(&g);
    ck_assert_ptr_null(g.state);
}
END_TEST

static Suite *ring_suite(void)
{
    TCase *tc;
    Suite *s = tu_suite("ring", "ring", 0, &tc);
    tcase_set_timeout(tc, 30);          /* a ring that loses a wake-up hangs: fail, do not wait */
    TU_ADD_TESTS(tc, test_stream_order, test_release_out_of_order, test_all_held_is_ebusy,
                 test_bad_release, test_limit, test_fill_failure, test_stop_wakes_waiters,
                 test_destroy_zeroed, test_parking);
    return s;
}

int main(void)
{
    return tu_run(ring_suite());
}
