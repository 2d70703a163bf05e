/* stats.c - pipeline statistics: the workers' and the consumer's counts read out, stage timing
 * switched on and off, the fills kept for timelines (stats.h; the API: shardread.h, "Pipeline
 * statistics and auto threads"). */
#include "stats.h"

#include <sched.h>
#include <string.h>

#include "reader.h"

_Thread_local shr_wstats *shr_stage_sink;

static const char *const stage_names[SHR_STAGE_COUNT] = {
    "read", "resize", "flip", "rotate", "affine", "auto_augment", "jitter", "grayscale",
    "convert", "erase", "mix", "targets",
};

const char *shr_stage_name(int stage)
{
    return stage >= 0 && stage < SHR_STAGE_COUNT ? stage_names[stage] : NULL;
}

void shr_wstats_publish(shr_wstats *w, int timed, uint64_t k, uint64_t samples, uint64_t t0,
                        uint64_t t1, uint64_t cpu)
{
    uint64_t q = w->seq;        /* the only writer */
    __atomic_store_n(&w->seq, q + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    SHR_ADD(w->batches, 1);
    SHR_ADD(w->samples, samples);
    SHR_ADD(w->fill_ns, t1 - t0);
    SHR_ADD(w->cpu_ns, cpu);
    if (timed) {
        SHR_ADD(w->timed_samples, samples);
        SHR_ADD(w->timed_fill_ns, t1 - t0);
        for (int i = 0; i < SHR_STAGE_COUNT; i++) {
            if (w->cur_calls[i]) {
                SHR_ADD(w->stage_ns[i], w->cur_ns[i]);
                SHR_ADD(w->stage_calls[i], w->cur_calls[i]);
                w->cur_ns[i] = w->cur_calls[i] = 0;
            }
        }
        uint64_t e = w->nevents;
        SHR_STORE(w->ev_k[e % SHR_STATS_EVENTS], k);
        SHR_STORE(w->ev_start[e % SHR_STATS_EVENTS], t0);
        SHR_STORE(w->ev_end[e % SHR_STATS_EVENTS], t1);
        __atomic_store_n(&w->nevents, e + 1, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&w->seq, q + 2, __ATOMIC_RELEASE);
}

static void snapshot(const shr_wstats *w, shr_thread_stats *s)
{
    s->batches = SHR_LOAD(w->batches);
    s->samples = SHR_LOAD(w->samples);
    s->fill_ns = SHR_LOAD(w->fill_ns);
    s->cpu_ns = SHR_LOAD(w->cpu_ns);
    for (int i = 0; i < SHR_STAGE_COUNT; i++) {
        s->stage_ns[i] = SHR_LOAD(w->stage_ns[i]);
        s->stage_calls[i] = SHR_LOAD(w->stage_calls[i]);
    }
    s->timed_samples = SHR_LOAD(w->timed_samples);
    s->timed_fill_ns = SHR_LOAD(w->timed_fill_ns);
}

void shr_wstats_get(const shr_wstats *w, shr_thread_stats *s)
{
    memset(s, 0, sizeof *s);
    /* a worker publishes once per batch, so a retry is rare and short: give up on a torn
     * snapshot only after many (the counts are then at most one batch apart) */
    for (int tries = 0; tries < 1000; tries++) {
        uint64_t q1 = __atomic_load_n(&w->seq, __ATOMIC_ACQUIRE);
        snapshot(w, s);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        uint64_t q2 = __atomic_load_n(&w->seq, __ATOMIC_RELAXED);
        if (q1 == q2 && !(q1 & 1))
            return;
        sched_yield();
    }
}

int shr_wstats_events(const shr_wstats *w, shr_fill_event *out, uint32_t max)
{
    /* the writer stores an event's fields, then publishes the count (release): events of
     * [n1 - E, n1) were complete when n1 was read, and those the writer may have reached since
     * (up to the one it may be writing, n2) are dropped */
    uint64_t n1 = __atomic_load_n(&w->nevents, __ATOMIC_ACQUIRE), E = SHR_STATS_EVENTS;
    uint64_t lo = n1 > E ? n1 - E : 0, take = n1 - lo;
    if (take > max)
        take = max;
    lo = n1 - take;
    for (uint64_t i = lo; i < n1; i++) {
        out[i - lo].k = SHR_LOAD(w->ev_k[i % E]);
        out[i - lo].start_ns = SHR_LOAD(w->ev_start[i % E]);
        out[i - lo].end_ns = SHR_LOAD(w->ev_end[i % E]);
    }
    uint64_t n2 = __atomic_load_n(&w->nevents, __ATOMIC_ACQUIRE);
    uint64_t first_ok = n2 + 1 > E ? n2 + 1 - E : 0;
    if (first_ok <= lo)
        return (int)take;
    if (first_ok >= n1)
        return 0;
    memmove(out, out + (first_ok - lo), (size_t)(n1 - first_ok) * sizeof *out);
    return (int)(n1 - first_ok);
}

int shr_stats_enable(shr_reader *r, int on)
{
    if (!r)
        return 0;
    return __atomic_exchange_n(&r->stats_on, on != 0, __ATOMIC_RELAXED);
}

int shr_get_thread_stats(const shr_reader *r, uint32_t i, shr_thread_stats *s)
{
    if (!r || !s || i >= r->nworkers)
        return SHR_EINVAL;
    shr_wstats_get(&r->workers[i].st, s);
    s->active = i < shr_ring_active(&r->ring);
    return 0;
}

void shr_get_consumer_stats(const shr_reader *r, shr_consumer_stats *s)
{
    memset(s, 0, sizeof *s);
    if (!r)
        return;
    s->batches = SHR_LOAD(r->c_batches);
    s->wait_ns = SHR_LOAD(r->c_wait_ns);
    s->threads = r->nworkers;
    uint32_t a = shr_ring_active(&r->ring);
    s->active = a < r->nworkers ? a : r->nworkers;
    s->auto_changes = SHR_LOAD(r->tune.changes);
}

int shr_get_fill_events(const shr_reader *r, uint32_t i, shr_fill_event *out, uint32_t max)
{
    if (!r || (!out && max) || i >= r->nworkers)
        return SHR_EINVAL;
    return shr_wstats_events(&r->workers[i].st, out, max);
}
