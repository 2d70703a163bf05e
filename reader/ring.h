/* ring.h - a prefetch ring: P slots filled by worker threads, delivered to one consumer in stream
 * order. The slots' buffers belong to the caller, who names a slot by its index 0..P-1; the ring
 * keeps who owns each slot, which stream batch it holds, and wakes whoever waits. libshardread's
 * reader runs on it (design notes: ring.c).
 */
#ifndef SHR_RING_H
#define SHR_RING_H

#include <pthread.h>
#include <stdint.h>

/* Fill slot `slot` with stream batch k. Called by a worker thread without the ring's lock; the
 * slot is the caller's alone until it returns. worker is what the thread passed to
 * shr_ring_serve. Non-zero stops all further claims (the batch is still delivered, in order). */
typedef int (*shr_ring_fill)(void *ctx, void *worker, uint32_t slot, uint64_t k);

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t slot_free, ready;
    pthread_cond_t parked;      /* workers numbered active and up wait here */
    uint32_t active;            /* workers numbered below it may claim (UINT32_MAX: all) */
    uint32_t nslots;
    uint8_t *state;             /* per slot: FREE, FILLING, READY, HELD (ring.c) */
    uint32_t *free_stack, nfree;
    uint32_t *pending;          /* pending[k % nslots]: slot of claimed, undelivered batch k */
    uint64_t next_claim, next_deliver;
    uint64_t limit;             /* batches below it may be claimed */
    uint32_t held;
    int stop, halt;
    shr_ring_fill fill;
    void *ctx;
} shr_ring;

/* A ring of nslots free slots, every stream batch claimable (see shr_ring_set_limit). Returns 0,
 * ENOMEM or the error of pthread_*_init. */
int shr_ring_init(shr_ring *g, uint32_t nslots, shr_ring_fill fill, void *ctx);

/* After shr_ring_stop and joining the threads that served it. Accepts a ring whose init failed
 * only if it was zeroed before. */
void shr_ring_destroy(shr_ring *g);

/* The worker loop: claim the next batch when a slot is free, fill it, mark it ready; returns when
 * the ring is stopped or a fill failed. One call per worker thread. */
void shr_ring_serve(shr_ring *g, void *worker);

/* shr_ring_serve for worker number id (0, 1, ...): while id >= the ring's active count the
 * worker is parked (it claims nothing and waits, using no CPU, until the count rises). */
void shr_ring_serve_as(shr_ring *g, void *worker, uint32_t id);

/* Let workers 0 .. n - 1 claim (n >= 1; UINT32_MAX, the default: all). Parked workers finish
 * the batch in hand; the batches and their order do not depend on n. */
void shr_ring_set_active(shr_ring *g, uint32_t n);

/* The active count (a relaxed read: any thread). */
uint32_t shr_ring_active(const shr_ring *g);

/* Let workers claim stream batches below limit (they wait at it). */
void shr_ring_set_limit(shr_ring *g, uint64_t limit);

/* Wake every thread and make shr_ring_serve return (each finishes the batch in hand). */
void shr_ring_stop(shr_ring *g);

/* The consumer: wait for stream batch next_deliver and hand its slot over (HELD) in *slot, with
 * the number of the batch in *k (may be NULL). EBUSY, without waiting, when every slot is held:
 * nothing could ever arrive. */
int shr_ring_next(shr_ring *g, uint32_t *slot, uint64_t *k);

/* A held slot back to the workers; 0, or EINVAL if the slot is not held (a second release). */
int shr_ring_release(shr_ring *g, uint32_t slot);

#endif
