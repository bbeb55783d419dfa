// GENERATED from solutions/08_data_workers/batch_ring_worker.c by tools/make_exercises.py.
// Yours to write: the regions marked TODO(exercise 08_data_workers); what to do and
// how to test it: exercises/08_data_workers/README.md.
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
    // TODO(exercise 08_data_workers): loop: wait (pthread_cond_wait on r->changed) until the slot of batch r->next_read (index next_read % num_slots) is FREE, or stop or failed is set (then leave the loop); claim the batch (FILLING, seq, next_read + 1); call read() locked, prepare() unlocked; mark the slot READY, or FAILED and set r->failed; broadcast
    // Replace this stub, which makes the tests fail, with your code.
    r->failed = 1;  // no batch is ever read: the consumer's take fails at once
    r->slots[0].state = SLOT_FAILED;
    snprintf(r->slots[0].err, ERR_LEN, "exercise 08_data_workers: batch_ring_worker is not written yet");
    pthread_cond_broadcast(&r->changed);
    // TODO(exercise 08_data_workers): delete this call once the code above is written.
    exercise_unfinished("08_data_workers", "the batch ring's worker loop",
                        "loop: wait (pthread_cond_wait on r->changed) until the slot of batch r->next_read (index next_read % num_slots) is FREE, or stop or failed is set (then leave the loop); claim the batch (FILLING, seq, next_read + 1); call read() locked, prepare() unlocked; mark the slot READY, or FAILED and set r->failed; broadcast");
    pthread_mutex_unlock(&r->lock);
    return NULL;
}
// ANCHOR_END: ring_worker
