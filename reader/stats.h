/* stats.h - pipeline statistics: per-worker counters of batches, samples, fill and CPU time,
 * the per-stage timing of each sample (when switched on) and the last fills for timelines;
 * the consumer's waits (see shardread.h, "Pipeline statistics and auto threads").
 *
 * Each counter has one writer (its worker, or the consumer), which updates it with relaxed
 * atomic loads and stores (no locked instruction); readers on other threads load them relaxed.
 * A worker publishes a batch's counts at once, inside a seqlock (seq odd while it writes), so a
 * snapshot (shr_wstats_get) has each batch's stages and fill time together or not at all.
 * The stage clock reaches the code that runs a stage through a thread-local pointer, set by the
 * worker per batch while timing is on and NULL otherwise (and in every other thread), so the
 * ops' signatures do not change and shr_dataset's callers pay one test per stage.
 * Internal to libshardread.
 */
#ifndef SHR_STATS_H
#define SHR_STATS_H

#include <stdint.h>
#include <time.h>

#include "shardread.h"
#include "transform.h"     /* SHR_INTERNAL */

typedef struct {
    uint64_t batches, samples, fill_ns, cpu_ns;
    uint64_t stage_ns[SHR_STAGE_COUNT], stage_calls[SHR_STAGE_COUNT];
    uint64_t timed_samples, timed_fill_ns;
    uint64_t seq;               /* odd while the worker publishes a batch's counts (a seqlock) */
    /* the worker's own, plain: the lap clock, and the batch in hand's stages, published with
     * its fill time when it is done (so a snapshot never has stages of a batch not counted) */
    uint64_t last, cur_ns[SHR_STAGE_COUNT], cur_calls[SHR_STAGE_COUNT];
    uint64_t nevents;                           /* fills recorded; event i at i % EVENTS */
    uint64_t ev_k[SHR_STATS_EVENTS], ev_start[SHR_STATS_EVENTS], ev_end[SHR_STATS_EVENTS];
} shr_wstats;

/* the worker's counters while its stage timing is on, else NULL */
extern _Thread_local shr_wstats *shr_stage_sink;

#define SHR_LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define SHR_STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
/* one writer: a relaxed load and store, no locked add */
#define SHR_ADD(x, v) SHR_STORE((x), SHR_LOAD(x) + (v))

static inline uint64_t shr_clock_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t shr_now_ns(void)
{
    return shr_clock_ns(CLOCK_MONOTONIC);
}

/* Stage timing, a lap clock: shr_stage_mark() where a sample's work starts, then
 * shr_stage_lap(SHR_STAGE_X) after each stage, which adds the time since the previous mark or lap
 * to that stage. Nothing while timing is off. */
static inline void shr_stage_mark(void)
{
    shr_wstats *s = shr_stage_sink;
    if (s)
        s->last = shr_now_ns();
}

static inline void shr_stage_lap(int stage)
{
    shr_wstats *s = shr_stage_sink;
    if (!s)
        return;
    uint64_t t = shr_now_ns();
    s->cur_ns[stage] += t - s->last;
    s->cur_calls[stage]++;
    s->last = t;
}

/* A fill done: its wall and CPU time, samples and (timed) its stages published, the fill kept
 * as stream batch k's event. The worker's own call. */
SHR_INTERNAL void shr_wstats_publish(shr_wstats *w, int timed, uint64_t k, uint64_t samples,
                                     uint64_t t0, uint64_t t1, uint64_t cpu);

/* The worker's counts as the public struct (a consistent snapshot). */
SHR_INTERNAL void shr_wstats_get(const shr_wstats *w, shr_thread_stats *s);

/* Its last fills, oldest first (see shr_get_fill_events). */
SHR_INTERNAL int shr_wstats_events(const shr_wstats *w, shr_fill_event *out, uint32_t max);

#endif
