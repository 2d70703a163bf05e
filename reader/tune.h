/* tune.h - threads_auto: the control loop that adds and parks workers (tune.c; the rule is in
 * shardread.h, "Pipeline statistics and auto threads"). It runs on the consumer's thread, in
 * shr_next, after each delivered batch; it reads the workers' counters (stats.h) and moves the
 * ring's active count (ring.h). Internal to libshardread.
 */
#ifndef SHR_TUNE_H
#define SHR_TUNE_H

#include <stdint.h>

#include "transform.h"     /* SHR_INTERNAL */

struct shr_reader;

typedef struct {
    int on;
    uint32_t max;               /* workers started */
    uint32_t active;            /* the ring's count, as last set */
    uint32_t cores;             /* the CPUs the process may run on */
    uint32_t cap, cap_age;      /* no more than cap: more did not help (lifted after a while) */
    uint32_t cap_windows;       /* windows before the cap is lifted (doubles per failed probe) */
    uint32_t settle;            /* batches to let pass before the probe's window starts */
    uint32_t changes;           /* workers added or parked (read by other threads: relaxed) */
    int probing;                /* a worker was added at the start of this window */
    double probe_rate, probe_stall;     /* batches/s and stall of the window before it */
    int started;
    uint64_t t0, wait0, n0, fill0, filled0, cpu0;       /* the window's start */
    double fill_per_batch;      /* the workers' last mean fill time per batch, ns */
} shr_tune;

/* One window's measurements (shr_tune_step takes them from the counters). */
typedef struct {
    double stall;               /* the consumer's wait over the window's time */
    double rate;                /* batches per second delivered */
    double own_ns;              /* the consumer's own time per batch, C */
    double fill_per_batch;      /* the workers' wall time per batch filled, F (0: none filled) */
    double busy;                /* the workers' fill time over the window's, per active worker */
    double cpu_share;           /* the workers' CPU time over their fill time */
} shr_tune_window;

/* The rule on one window: the active count it wants (t->active unchanged; the probe and the
 * cap updated). A count above t->active is a probe, judged on the next window. */
SHR_INTERNAL uint32_t shr_tune_decide(shr_tune *t, const shr_tune_window *w);

/* Off (max workers, all active) or on: the ring's active count set to min(2, max). */
SHR_INTERNAL void shr_tune_init(struct shr_reader *r, int on, uint32_t max);

/* After shr_next delivered a batch at time now (ns): the rule, once per window. */
SHR_INTERNAL void shr_tune_step(struct shr_reader *r, uint64_t now);

#endif
