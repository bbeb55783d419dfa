// batch_ring.c: see batch_ring.h. The workers' loop, batch_ring_worker, is
// chapter 08's exercise: solutions/08_data_workers/batch_ring_worker.c.
#include "data/batch_ring.h"

#include <string.h>

int batch_ring_start(BatchRing *r, int num_slots, int num_threads, RingCallbacks cb, char *err) {
    if (num_threads < 1 || num_threads > BATCH_RING_MAX_THREADS)
        return fail(err, "--data-threads: %d threads; from 1 to %d", num_threads,
                    BATCH_RING_MAX_THREADS);
    if (num_slots < 2 || num_slots > BATCH_RING_MAX_SLOTS)
        return fail(err, "batch ring: %d slots; from 2 to %d", num_slots, BATCH_RING_MAX_SLOTS);
    memset(r, 0, sizeof *r);
    r->cb = cb;
    r->num_slots = num_slots;
    r->num_threads = num_threads;
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->changed, NULL);
    for (int i = 0; i < num_threads; i++)
        if (pthread_create(&r->threads[i], NULL, batch_ring_worker, r) != 0)
            die("batch ring: could not start worker thread %d of %d", i + 1, num_threads);
    return 0;
}

// Under the lock: the HELD slots that held_done says are free are FREE again.
static void free_done_slots(BatchRing *r) {
    int freed = 0;
    for (int i = 0; i < r->num_slots; i++)
        if (r->slots[i].state == SLOT_HELD && r->cb.held_done(r->cb.ctx, i)) {
            r->slots[i].state = SLOT_FREE;
            freed = 1;
        }
    if (freed) pthread_cond_broadcast(&r->changed);
}

// Under the lock: the HELD slot of the oldest batch; -1 when there is none.
static int oldest_held(const BatchRing *r) {
    int oldest = -1;
    for (int i = 0; i < r->num_slots; i++)
        if (r->slots[i].state == SLOT_HELD &&
            (oldest < 0 || r->slots[i].seq < r->slots[oldest].seq))
            oldest = i;
    return oldest;
}

// ANCHOR: ring_take
int batch_ring_take(BatchRing *r, char *err) {
    pthread_mutex_lock(&r->lock);
    const uint64_t k = r->next_take;
    const int i = (int)(k % (uint64_t)r->num_slots);
    RingSlot *s = &r->slots[i];
    free_done_slots(r);
    while (!(s->seq == k && (s->state == SLOT_READY || s->state == SLOT_FAILED))) {
        // Batch k is not ready. If we hold slots, the workers may be waiting
        // for one of them: wait for the oldest (the next one they need), free
        // it, and look again. Else sleep until a worker signals.
        const int old = oldest_held(r);
        if (old < 0) {
            pthread_cond_wait(&r->changed, &r->lock);
            continue;
        }
        pthread_mutex_unlock(&r->lock);
        r->cb.wait_held(r->cb.ctx, old);
        pthread_mutex_lock(&r->lock);
        r->slots[old].state = SLOT_FREE;
        pthread_cond_broadcast(&r->changed);
    }
    int rc = i;
    if (s->state == SLOT_FAILED) {
        rc = fail(err, "%s", s->err);
    } else {
        s->state = SLOT_HELD;
        r->next_take = k + 1;
    }
    pthread_mutex_unlock(&r->lock);
    return rc;
}
// ANCHOR_END: ring_take

uint64_t batch_ring_ahead(BatchRing *r) {
    pthread_mutex_lock(&r->lock);
    uint64_t ahead = r->next_read - r->next_take;
    pthread_mutex_unlock(&r->lock);
    return ahead;
}

void batch_ring_stop(BatchRing *r) {
    pthread_mutex_lock(&r->lock);
    r->stop = 1;
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->lock);
    for (int i = 0; i < r->num_threads; i++) pthread_join(r->threads[i], NULL);
    pthread_cond_destroy(&r->changed);
    pthread_mutex_destroy(&r->lock);
}
