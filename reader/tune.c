/* tune.c - threads_auto: add a worker while the consumer waits and more workers deliver more;
 * park one while the ring stays ahead with fewer (the rule: shardread.h, "Pipeline statistics
 * and auto threads").
 *
 * Why this works without knowing the machine: a stall means the workers deliver less than the
 * consumer takes, so one more worker is tried; if the window after it does not deliver clearly
 * more (the cores are all busy, or the ring too shallow for more fills in flight), the worker
 * goes back and the count is capped, so a saturated machine is not flooded with threads that
 * only contend. Without a stall, ceil(1.1 F / C) workers, each taking F per batch, keep up with
 * a consumer taking C per batch; more than that only burn CPU ahead of the consumer, so one is
 * parked per window until the count reaches it. The batches never depend on the count: a
 * batch is a pure function of its stream number, and claims are in stream order whoever
 * makes them (shardread.c, ring.c).
 *
 * Noise. On a shared machine the rate of two windows a few tens of milliseconds long differs by
 * more than a worker adds to many: a fixed small gain asked of a probe is met by chance, and a
 * worker that only contends is kept. So the windows are counted in batches (at least
 * max(8, 4 x active) and 50 ms), the probe's window is twice that and starts only once the new
 * worker has had time for its first fill, and the gain asked is half of what the worker could
 * add at most: k -> k + 1 workers can raise the rate by (k + 1) / k, and removing a stall s by
 * 1 / (1 - s); whichever is smaller. Workers beyond the cores are not tried while the workers'
 * time is CPU (their CPU over wall time, CLOCK_THREAD_CPUTIME_ID, above TUNE_CPU_BOUND): one
 * more CPU-bound thread than cores only takes turns. Where they wait on something else (a
 * remote read, a cold disk) one is tried, and kept only if measured better. Each failed probe
 * doubles the windows before the next (20 up to 320), so a machine where a worker more never
 * helps pays for a probe less and less often.
 */
#include "tune.h"

#include <math.h>
#include <sched.h>
#include <unistd.h>

#include "reader.h"
#include "stats.h"

#define TUNE_MIN_NS 50000000u   /* a window lasts at least 50 ms ... */
#define TUNE_MIN_BATCHES 8u     /* ... and max(8, 4 x active) batches; a probe's twice that */
#define TUNE_STALL_ADD 0.05     /* a stall above it adds a worker */
#define TUNE_STALL_PARK 0.01    /* below it, workers beyond the need are parked */
#define TUNE_GAIN_SHARE 0.5     /* an added worker must bring half the gain it could */
#define TUNE_MARGIN 1.1         /* headroom on the need */
#define TUNE_CPU_BOUND 0.75     /* workers' CPU over fill time above it: CPU-bound */
#define TUNE_BUSY_ADD 0.5       /* the workers' busy share below which adding cannot help */
#define TUNE_CAP_WINDOWS 20u    /* windows before a cap is lifted (doubled per failed probe) */
#define TUNE_CAP_WINDOWS_MAX 320u

static void set_active(shr_reader *r, uint32_t n)
{
    shr_tune *t = &r->tune;
    if (n == t->active)
        return;
    t->active = n;
    SHR_ADD(t->changes, 1);
    shr_ring_set_active(&r->ring, n);
}

/* the CPUs this process may run on */
static uint32_t online_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return (uint32_t)CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (uint32_t)n : 1;
}

void shr_tune_init(shr_reader *r, int on, uint32_t max)
{
    shr_tune *t = &r->tune;
    *t = (shr_tune){.on = on, .max = max, .cap = max, .active = max,
                    .cap_windows = TUNE_CAP_WINDOWS};
    if (on) {
        t->cores = online_cores();
        t->active = max < 2 ? max : 2;
        shr_ring_set_active(&r->ring, t->active);
    }
}

/* the workers' fills so far: batches, wall and CPU time */
static void fills(const shr_reader *r, uint64_t *batches, uint64_t *ns, uint64_t *cpu)
{
    *batches = *ns = *cpu = 0;
    for (uint32_t i = 0; i < r->nworkers; i++) {
        *batches += SHR_LOAD(r->workers[i].st.batches);
        *ns += SHR_LOAD(r->workers[i].st.fill_ns);
        *cpu += SHR_LOAD(r->workers[i].st.cpu_ns);
    }
}

static void window_start(shr_reader *r, uint64_t now)
{
    shr_tune *t = &r->tune;
    t->t0 = now;
    t->wait0 = SHR_LOAD(r->c_wait_ns);
    t->n0 = SHR_LOAD(r->c_batches);
    fills(r, &t->filled0, &t->fill0, &t->cpu0);
}

/* a probe's verdict: the rate must rise by half of what one worker more could bring */
static int probe_helped(const shr_tune *t, double rate)
{
    double k = t->active - 1, most = (k + 1) / k;
    if (t->probe_stall < 1 && 1 / (1 - t->probe_stall) < most)
        most = 1 / (1 - t->probe_stall);
    return rate >= t->probe_rate * (1 + TUNE_GAIN_SHARE * (most - 1));
}

uint32_t shr_tune_decide(shr_tune *t, const shr_tune_window *w)
{
    if (w->fill_per_batch > 0)
        t->fill_per_batch = w->fill_per_batch;
    if (t->probing) {
        t->probing = 0;
        if (w->stall > TUNE_STALL_ADD && !probe_helped(t, w->rate)) {
            t->cap = t->active - 1;             /* it did not help */
            t->cap_age = 0;
            if (t->cap_windows < TUNE_CAP_WINDOWS_MAX)
                t->cap_windows *= 2;
            return t->cap;
        }
        t->cap_windows = TUNE_CAP_WINDOWS;
    }
    if (t->cap < t->max && ++t->cap_age >= t->cap_windows)
        t->cap = t->max;
    uint32_t need = t->max;
    if (w->own_ns > 0 && t->fill_per_batch > 0) {
        double x = ceil(TUNE_MARGIN * t->fill_per_batch / w->own_ns);
        need = x < 1 ? 1 : x > t->max ? t->max : (uint32_t)x;
    }
    uint32_t most = t->cap;
    if (w->cpu_share > TUNE_CPU_BOUND && most > t->cores)
        most = t->cores > t->active ? t->cores : t->active;
    if (w->stall > TUNE_STALL_ADD && t->active < most && w->busy > TUNE_BUSY_ADD) {
        t->probe_rate = w->rate;
        t->probe_stall = w->stall;
        t->probing = 1;
        return t->active + 1;
    }
    if (w->stall < TUNE_STALL_PARK && t->active > need)
        return t->active - 1;
    return t->active;
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
    if (t->settle) {            /* a worker was added: its first fill is not the probe's */
        if (--t->settle == 0)
            window_start(r, now);
        return;
    }
    uint64_t n = SHR_LOAD(r->c_batches) - t->n0, el = now - t->t0;
    uint32_t want = 4 * t->active > TUNE_MIN_BATCHES ? 4 * t->active : TUNE_MIN_BATCHES;
    if (t->probing)
        want *= 2;
    if (n < want || el < TUNE_MIN_NS)
        return;
    uint64_t wait = SHR_LOAD(r->c_wait_ns) - t->wait0, filled, fill_ns, cpu_ns;
    fills(r, &filled, &fill_ns, &cpu_ns);
    fill_ns -= t->fill0;
    cpu_ns -= t->cpu0;
    shr_tune_window w = {
        .stall = (double)wait / (double)el,
        .rate = (double)n * 1e9 / (double)el,
        .own_ns = wait < el ? (double)(el - wait) / (double)n : 0,
        .fill_per_batch = filled > t->filled0 ? (double)fill_ns / (double)(filled - t->filled0)
                                              : 0,
        .busy = (double)fill_ns / ((double)el * t->active),
        .cpu_share = fill_ns ? (double)cpu_ns / (double)fill_ns : 0,
    };
    uint32_t to = shr_tune_decide(t, &w);
    set_active(r, to);
    if (t->probing)
        t->settle = to;
    else
        window_start(r, now);
}
