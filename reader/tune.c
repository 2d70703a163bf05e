/* tune.c - threads_auto: add a worker while the consumer waits and more workers deliver more;
 * park one while the ring stays ahead with fewer (the rule: shardread.h, "Pipeline statistics
 * and auto threads").
 *
 * Why this works without knowing the machine: a stall means the workers deliver less than the
 * consumer takes, so one more worker is tried; if the window after it delivers no more (the
 * cores are all busy, or the ring too shallow for more fills in flight), the worker goes back
 * and the count is capped, so a saturated machine is not flooded with threads that only
 * contend. Without a stall, ceil(1.1 F / C) workers, each taking F per batch, keep up with a
 * consumer taking C per batch; more than that only burn CPU ahead of the consumer, so one is
 * parked per window until the count reaches it. The batches never depend on the count: a
 * batch is a pure function of its stream number, and claims are in stream order whoever
 * makes them (shardread.c, ring.c).
 */
#include "tune.h"

#include <math.h>

#include "reader.h"
#include "stats.h"

#define TUNE_MIN_NS 50000000u   /* a window lasts at least 50 ms ... */
#define TUNE_MIN_BATCHES 3u     /* ... and max(3, active) batches */
#define TUNE_STALL_ADD 0.05     /* a stall above it adds a worker */
#define TUNE_STALL_PARK 0.01    /* below it, workers beyond the need are parked */
#define TUNE_GAIN 1.03          /* an added worker must raise the rate this much */
#define TUNE_MARGIN 1.1         /* headroom on the need */
#define TUNE_CAP_WINDOWS 20u    /* windows before a cap is lifted */

static void set_active(shr_reader *r, uint32_t n)
{
    shr_tune *t = &r->tune;
    if (n == t->active)
        return;
    t->active = n;
    SHR_ADD(t->changes, 1);
    shr_ring_set_active(&r->ring, n);
}

void shr_tune_init(shr_reader *r, int on, uint32_t max)
{
    shr_tune *t = &r->tune;
    *t = (shr_tune){.on = on, .max = max, .cap = max, .active = max};
    if (on) {
        t->active = max < 2 ? max : 2;
        shr_ring_set_active(&r->ring, t->active);
    }
}

/* the workers' fills so far: batches and wall time */
static void fills(const shr_reader *r, uint64_t *batches, uint64_t *ns)
{
    *batches = *ns = 0;
    for (uint32_t i = 0; i < r->nworkers; i++) {
        *batches += SHR_LOAD(r->workers[i].st.batches);
        *ns += SHR_LOAD(r->workers[i].st.fill_ns);
    }
}

static void window_start(shr_reader *r, uint64_t now)
{
    shr_tune *t = &r->tune;
    t->t0 = now;
    t->wait0 = SHR_LOAD(r->c_wait_ns);
    t->n0 = SHR_LOAD(r->c_batches);
    fills(r, &t->filled0, &t->fill0);
}

void shr_tune_step(shr_reader *r, uint64_t now)
{
    shr_tune *t = &r->tune;
    if (!t->on)
        return;
    if (!t->started) {          /* the first batch waited for the workers' start: not counted */
        t->started = 1;
        window_start(r, now);
        return;
    }
    uint64_t n = SHR_LOAD(r->c_batches) - t->n0, el = now - t->t0;
    uint32_t want = t->active > TUNE_MIN_BATCHES ? t->active : TUNE_MIN_BATCHES;
    if (n < want || el < TUNE_MIN_NS)
        return;
    uint64_t wait = SHR_LOAD(r->c_wait_ns) - t->wait0, filled, fill_ns;
    fills(r, &filled, &fill_ns);
    if (filled > t->filled0)
        t->fill_per_batch = (double)(fill_ns - t->fill0) / (double)(filled - t->filled0);
    double stall = (double)wait / (double)el;
    double rate = (double)n * 1e9 / (double)el;
    double own = wait < el ? (double)(el - wait) / (double)n : 0;   /* C, ns per batch */
    if (t->probing) {
        t->probing = 0;
        if (stall > TUNE_STALL_ADD && rate < t->probe_rate * TUNE_GAIN) {
            set_active(r, t->active - 1);       /* it did not help */
            t->cap = t->active;
            t->cap_age = 0;
            window_start(r, now);
            return;
        }
    }
    if (t->cap < t->max && ++t->cap_age >= TUNE_CAP_WINDOWS)
        t->cap = t->max;
    uint32_t need = t->max;
    if (own > 0 && t->fill_per_batch > 0) {
        double x = ceil(TUNE_MARGIN * t->fill_per_batch / own);
        need = x < 1 ? 1 : x > t->max ? t->max : (uint32_t)x;
    }
    if (stall > TUNE_STALL_ADD && t->active < t->cap) {
        t->probe_rate = rate;
        t->probing = 1;
        set_active(r, t->active + 1);
    } else if (stall < TUNE_STALL_PARK && t->active > need) {
        set_active(r, t->active - 1);
    }
    window_start(r, now);
}
