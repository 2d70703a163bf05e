/* ring.c - the prefetch ring: slot states, claims in stream order, delivery in stream order.
 *
 * Concurrency design
 * ------------------
 * One consumer calls shr_ring_next; worker threads run shr_ring_serve; shr_ring_release may come
 * from any thread. The ring's state lives under one mutex, g->mu. The slots' buffers are the
 * caller's and are written without it, by the one worker that owns the slot at the time.
 *
 * Slots. The ring has P slots. A slot's state says who owns it:
 *   FREE     on the free stack; nobody touches its buffers;
 *   FILLING  claimed by one worker for stream batch k; that worker writes the buffers, unlocked;
 *   READY    filled (or failed: the caller keeps the result in its slot); waiting for the consumer;
 *   HELD     handed to the consumer; it reads the buffers until it releases the slot.
 * Every transition happens under the mutex: FREE -> FILLING (a worker claims), FILLING -> READY
 * (the worker is done), READY -> HELD (shr_ring_next), HELD -> FREE (shr_ring_release). The
 * unlock/lock pairs order the worker's writes before the consumer's reads, and the consumer's
 * reads (which end with the release) before the next refill.
 *
 * Claims in order, any free slot. A worker claims when a slot is free: it pops one, takes
 * k = next_claim++ and records pending[k % P] = slot. Claims are thus in stream order, and at most
 * P batches are claimed and not yet delivered, so pending[] maps each of them to its slot without
 * collision. A batch goes to any free slot rather than to slot k % P because the consumer may
 * release batches out of order: with fixed slots, still holding batch k - P would block batch k
 * while other slots sat free. Claims stop at `limit` (a consumer that turns epochs itself moves
 * it; the reader's stream has none).
 *
 * Delivery in order. shr_ring_next waits until stream batch next_deliver is READY, whatever later
 * batches are ready already. Workers finish in any order; the consumer sees stream order.
 *
 * Who wakes whom. `slot_free`: workers wait on it for a free slot (or a raised limit); a release
 * signals one worker per freed slot; stop, a failing worker and a new limit broadcast it. `ready`:
 * the consumer waits on it for batch next_deliver; a worker signals it when the batch it finished
 * is next_deliver (the only one the consumer can be waiting for); stop broadcasts it. Nobody
 * polls or spins.
 *
 * Parking (shr_ring_set_active). Worker number id may claim only while id < active; a worker
 * above the count waits on its own condition, `parked`, which set_active broadcasts when the
 * count rises. A worker can be parked while it waits on `slot_free`: if a release's signal wakes
 * it there, it passes the signal on before parking (a free slot and a claimable batch mean an
 * active worker must wake), so no wakeup is lost. Worker 0 is always active, so the progress
 * argument below holds with any count.
 *
 * Progress. While the consumer holds h < P batches and next_deliver is below the limit, batch
 * next_deliver arrives: either it is claimed (a worker is filling it), or, claims being in order,
 * no later batch is claimed either, so the P - h slots not held are all free and a waiting worker
 * claims it. With h == P nothing can ever arrive, so shr_ring_next returns EBUSY instead of
 * blocking forever.
 *
 * Failure. A fill that returns non-zero marks its slot READY as any other and sets `halt`, which
 * stops all claims (idle workers are woken to exit). Batches before the failed one are still
 * delivered, in order, and then the failed one; what it means is the caller's business.
 */
#include "ring.h"

#include <errno.h>
#include <stdlib.h>

enum { RING_FREE, RING_FILLING, RING_READY, RING_HELD };

int shr_ring_init(shr_ring *g, uint32_t nslots, shr_ring_fill fill, void *ctx)
{
    *g = (shr_ring){.nslots = nslots, .limit = UINT64_MAX, .fill = fill, .ctx = ctx,
                    .active = UINT32_MAX};
    g->state = calloc(nslots, sizeof *g->state);
    g->free_stack = calloc(nslots, sizeof *g->free_stack);
    g->pending = calloc(nslots, sizeof *g->pending);
    if (!g->state || !g->free_stack || !g->pending) {
        free(g->state);
        free(g->free_stack);
        free(g->pending);
        *g = (shr_ring){0};
        return ENOMEM;
    }
    for (uint32_t i = 0; i < nslots; i++)
        g->free_stack[g->nfree++] = nslots - 1 - i;     /* slot 0 is taken first */
    int rc = pthread_mutex_init(&g->mu, NULL);
    if (rc == 0 && (rc = pthread_cond_init(&g->slot_free, NULL)) != 0)
        pthread_mutex_destroy(&g->mu);
    if (rc == 0 && (rc = pthread_cond_init(&g->ready, NULL)) != 0) {
        pthread_cond_destroy(&g->slot_free);
        pthread_mutex_destroy(&g->mu);
    }
    if (rc == 0 && (rc = pthread_cond_init(&g->parked, NULL)) != 0) {
        pthread_cond_destroy(&g->ready);
        pthread_cond_destroy(&g->slot_free);
        pthread_mutex_destroy(&g->mu);
    }
    if (rc) {
        free(g->state);
        free(g->free_stack);
        free(g->pending);
        *g = (shr_ring){0};
    }
    return rc;
}

void shr_ring_destroy(shr_ring *g)
{
    if (!g->state)
        return;
    pthread_cond_destroy(&g->parked);
    pthread_cond_destroy(&g->ready);
    pthread_cond_destroy(&g->slot_free);
    pthread_mutex_destroy(&g->mu);
    free(g->state);
    free(g->free_stack);
    free(g->pending);
    *g = (shr_ring){0};
}

void shr_ring_serve(shr_ring *g, void *worker)
{
    shr_ring_serve_as(g, worker, 0);
}

void shr_ring_serve_as(shr_ring *g, void *worker, uint32_t id)
{
    pthread_mutex_lock(&g->mu);
    for (;;) {
        while (!g->stop && !g->halt) {
            int claimable = g->nfree > 0 && g->next_claim < g->limit;
            if (id >= g->active) {
                if (claimable)
                    pthread_cond_signal(&g->slot_free);     /* not ours: pass it on */
                pthread_cond_wait(&g->parked, &g->mu);
            } else if (!claimable) {
                pthread_cond_wait(&g->slot_free, &g->mu);
            } else {
                break;
            }
        }
        if (g->stop || g->halt)
            break;
        uint32_t si = g->free_stack[--g->nfree];
        uint64_t k = g->next_claim++;
        g->pending[k % g->nslots] = si;
        g->state[si] = RING_FILLING;
        pthread_mutex_unlock(&g->mu);

        int rc = g->fill(g->ctx, worker, si, k);

        pthread_mutex_lock(&g->mu);
        g->state[si] = RING_READY;
        if (rc) {
            g->halt = 1;
            pthread_cond_broadcast(&g->slot_free);
        }
        if (k == g->next_deliver)
            pthread_cond_signal(&g->ready);
    }
    pthread_mutex_unlock(&g->mu);
}

void shr_ring_set_limit(shr_ring *g, uint64_t limit)
{
    pthread_mutex_lock(&g->mu);
    g->limit = limit;
    pthread_cond_broadcast(&g->slot_free);
    pthread_mutex_unlock(&g->mu);
}

void shr_ring_set_active(shr_ring *g, uint32_t n)
{
    pthread_mutex_lock(&g->mu);
    uint32_t was = g->active;
    __atomic_store_n(&g->active, n ? n : 1, __ATOMIC_RELAXED);
    if (g->active > was)
        pthread_cond_broadcast(&g->parked);
    pthread_mutex_unlock(&g->mu);
}

uint32_t shr_ring_active(const shr_ring *g)
{
    return __atomic_load_n(&g->active, __ATOMIC_RELAXED);
}

void shr_ring_stop(shr_ring *g)
{
    pthread_mutex_lock(&g->mu);
    g->stop = 1;
    pthread_cond_broadcast(&g->parked);
    pthread_cond_broadcast(&g->slot_free);
    pthread_cond_broadcast(&g->ready);
    pthread_mutex_unlock(&g->mu);
}

int shr_ring_next(shr_ring *g, uint32_t *slot, uint64_t *k)
{
    pthread_mutex_lock(&g->mu);
    if (g->held == g->nslots) {
        pthread_mutex_unlock(&g->mu);
        return EBUSY;
    }
    uint64_t n = g->next_deliver;
    while (!(n < g->next_claim && g->state[g->pending[n % g->nslots]] == RING_READY))
        pthread_cond_wait(&g->ready, &g->mu);
    uint32_t si = g->pending[n % g->nslots];
    g->state[si] = RING_HELD;
    g->held++;
    g->next_deliver++;
    pthread_mutex_unlock(&g->mu);
    *slot = si;
    if (k)
        *k = n;
    return 0;
}

int shr_ring_release(shr_ring *g, uint32_t slot)
{
    int rc = EINVAL;
    pthread_mutex_lock(&g->mu);
    if (slot < g->nslots && g->state[slot] == RING_HELD) {
        g->state[slot] = RING_FREE;
        g->free_stack[g->nfree++] = slot;
        g->held--;
        pthread_cond_signal(&g->slot_free);
        rc = 0;
    }
    pthread_mutex_unlock(&g->mu);
    return rc;
}
