// batch_ring_worker.c: chapter 08's exercise: the loop of a worker thread of
// the ring of batches (common/data/batch_ring.h says what it must do).
// solutions/08_data_workers/ has it complete; exercises/08_data_workers/ has
// its body cut out.
#include "data/batch_ring.h"
#include "exercise.h"

// ANCHOR: ring_worker
// Take the next batch number and read that batch under the lock (one read at a
// time, in order), then, unlocked and in parallel with the other workers, the
// slow part. Exits on stop, or after the first failure: a later batch would
// follow one the run never gets.
void *batch_ring_worker(void *ring) {
    BatchRing *r = ring;
    pthread_mutex_lock(&r->lock);
    // EXERCISE BEGIN: loop: wait (pthread_cond_wait on r->changed) until the slot of batch r->next_read (index next_read % num_slots) is FREE, or stop or failed is set (then leave the loop); claim the batch (FILLING, seq, next_read + 1); call read() locked, prepare() unlocked; mark the slot READY, or FAILED and set r->failed; broadcast
    // EXERCISE STUB: r->failed = 1;  // no batch is ever read: the consumer's take fails at once
    // EXERCISE STUB: r->slots[0].state = SLOT_FAILED;
    // EXERCISE STUB: snprintf(r->slots[0].err, ERR_LEN, "exercise 08_data_workers: batch_ring_worker is not written yet");
    // EXERCISE STUB: pthread_cond_broadcast(&r->changed);
    for (;;) {
        while (!r->stop && !r->failed &&
               r->slots[r->next_read % (uint64_t)r->num_slots].state != SLOT_FREE)
            pthread_cond_wait(&r->changed, &r->lock);
        if (r->stop || r->failed) break;
        const uint64_t k = r->next_read++;
        const int i = (int)(k % (uint64_t)r->num_slots);
        RingSlot *s = &r->slots[i];
        s->state = SLOT_FILLING;
        s->seq = k;
        int rc = r->cb.read(r->cb.ctx, i, k, s->err);
        if (rc == 0) {
            pthread_mutex_unlock(&r->lock);
            rc = r->cb.prepare(r->cb.ctx, i, s->err);
            pthread_mutex_lock(&r->lock);
        }
        s->state = rc ? SLOT_FAILED : SLOT_READY;
        if (rc) r->failed = 1;
        pthread_cond_broadcast(&r->changed);
    }
    // EXERCISE END
    // EXERCISE LAUNCH-CHECK: the batch ring's worker loop
    pthread_mutex_unlock(&r->lock);
    return NULL;
}
// ANCHOR_END: ring_worker
