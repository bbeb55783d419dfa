// test_batch_ring.c: chapter 08's ring of batches (common/data/batch_ring.h) with
// callbacks that stand in for the data loader and the GPU copies: batches
// come out in order whatever the threads do, the slow part runs in parallel,
// a slot the consumer holds is never refilled, a failure reaches the consumer
// at its batch, and stopping never hangs. Chapter 08's exercise
// (batch_ring_worker) is what these tests check.
#define _POSIX_C_SOURCE 200809L  // nanosleep
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <time.h>

#include "data/batch_ring.h"

#define SLOTS 6

typedef struct {
    uint64_t next_value;           // the "loader": batch k holds the value k
    uint64_t value[SLOTS];         // what each slot holds
    int held[SLOTS];               // the consumer still reads it: a refill is a bug
    int refilled_while_held;
    uint64_t fail_at;              // read() fails for this batch (0: never)
    int prepare_us;                // prepare() sleeps up to this long
    atomic_int preparing, most_preparing;
} Fake;

static void sleep_us(int us) {
    struct timespec t = {0, (long)us * 1000L};
    nanosleep(&t, NULL);
}

static int fake_read(void *ctx, int slot, uint64_t seq, char *err) {
    Fake *f = ctx;
    if (f->held[slot]) f->refilled_while_held = 1;
    if (f->fail_at && seq == f->fail_at)
        return fail(err, "shard.bin: batch %llu could not be read", (unsigned long long)seq);
    f->value[slot] = f->next_value++;
    return 0;
}

static int fake_prepare(void *ctx, int slot, char *err) {
    (void)slot, (void)err;
    Fake *f = ctx;
    int now = atomic_fetch_add(&f->preparing, 1) + 1;
    int most = atomic_load(&f->most_preparing);
    while (now > most && !atomic_compare_exchange_weak(&f->most_preparing, &most, now)) {
    }
    // Batches take uneven times, so that the workers finish out of order.
    if (f->prepare_us) sleep_us((int)(f->value[slot] * 7919 % (uint64_t)f->prepare_us) + 1);
    atomic_fetch_sub(&f->preparing, 1);
    return 0;
}

// The consumer's "copies" of a held slot have run when it no longer reads it;
// waiting for them makes them run.
static int fake_held_done(void *ctx, int slot) {
    Fake *f = ctx;
    return !f->held[slot];
}

static void fake_wait_held(void *ctx, int slot) {
    Fake *f = ctx;
    f->held[slot] = 0;
}

static RingCallbacks callbacks(Fake *f) {
    return (RingCallbacks){.read = fake_read, .prepare = fake_prepare, .held_done = fake_held_done,
                           .wait_held = fake_wait_held, .ctx = f};
}

// Takes n batches; reads each until `hold` more have been taken (as the GPU's
// copies run behind the host), unless the ring waited for it first. Returns
// the batch that failed, or n.
static uint64_t consume(BatchRing *r, Fake *f, uint64_t n, int hold, char *err) {
    int order[4 * SLOTS], held = 0;
    for (uint64_t k = 0; k < n; k++) {
        int slot = batch_ring_take(r, err);
        if (slot < 0) return k;
        cr_assert(slot >= 0 && slot < SLOTS);
        cr_assert_eq(f->value[slot], k, "batch %llu came out of order: it holds %llu",
                     (unsigned long long)k, (unsigned long long)f->value[slot]);
        // A slot taken again was let go of before: it leaves the list.
        for (int j = 0; j < held; j++)
            if (order[j] == slot) memmove(order + j, order + j + 1, (size_t)(--held - j) * sizeof *order);
        f->held[slot] = 1;
        order[held++] = slot;
        if (held > hold) {
            f->held[order[0]] = 0;
            memmove(order, order + 1, (size_t)--held * sizeof *order);
        }
    }
    return n;
}

static void run_in_order(int threads, int prepare_us, int hold) {
    Fake f = {.prepare_us = prepare_us};
    BatchRing r;
    char err[ERR_LEN];
    cr_assert(batch_ring_start(&r, SLOTS, threads, callbacks(&f), err) == 0, "%s", err);
    cr_assert_eq(consume(&r, &f, 300, hold, err), 300, "%s", err);
    batch_ring_stop(&r);
    cr_assert(!f.refilled_while_held, "a worker wrote into a slot the consumer held");
}

TestSuite(batch_ring, .timeout = 60);

Test(batch_ring, one_worker_keeps_the_order) { run_in_order(1, 0, 0); }

Test(batch_ring, many_workers_keep_the_order) {
    for (int threads = 2; threads <= BATCH_RING_MAX_THREADS; threads *= 2)
        run_in_order(threads, 200, 1);
}

// The consumer holds every slot but one at times: the workers must wait for
// held slots and the consumer must free them (wait_held) instead of hanging.
Test(batch_ring, held_slots_are_never_refilled) { run_in_order(4, 50, SLOTS - 1); }

// The slow part runs outside the lock: with four workers, several prepare at once.
Test(batch_ring, prepares_run_in_parallel) {
    Fake f = {.prepare_us = 3000};
    BatchRing r;
    char err[ERR_LEN];
    cr_assert(batch_ring_start(&r, SLOTS, 4, callbacks(&f), err) == 0, "%s", err);
    cr_assert_eq(consume(&r, &f, 40, 1, err), 40, "%s", err);
    batch_ring_stop(&r);
    cr_assert(atomic_load(&f.most_preparing) >= 2,
              "at most %d prepare() at a time: the workers hold the lock through it",
              atomic_load(&f.most_preparing));
}

// Batch 37 cannot be read: batches 0..36 come out, then the take of 37 fails
// with the reader's message.
Test(batch_ring, a_failed_read_reaches_the_consumer_at_its_batch) {
    Fake f = {.fail_at = 37};
    BatchRing r;
    char err[ERR_LEN] = "";
    cr_assert(batch_ring_start(&r, SLOTS, 3, callbacks(&f), err) == 0, "%s", err);
    cr_assert_eq(consume(&r, &f, 100, 1, err), 37);
    cr_assert(strstr(err, "batch 37 could not be read") != NULL, "err: %s", err);
    batch_ring_stop(&r);
}

// Stopping while the workers wait for free slots (nothing was taken) returns.
Test(batch_ring, stops_while_the_workers_wait) {
    Fake f = {0};
    BatchRing r;
    char err[ERR_LEN];
    cr_assert(batch_ring_start(&r, SLOTS, 3, callbacks(&f), err) == 0, "%s", err);
    for (int i = 0; i < 1000 && batch_ring_ahead(&r) < SLOTS; i++) sleep_us(1000);
    cr_assert_eq(batch_ring_ahead(&r), SLOTS, "the workers fill every slot, then wait");
    batch_ring_stop(&r);
}

Test(batch_ring, refuses_bad_counts) {
    Fake f = {0};
    BatchRing r;
    char err[ERR_LEN];
    cr_assert(batch_ring_start(&r, SLOTS, 0, callbacks(&f), err) == -1);
    cr_assert(strstr(err, "--data-threads") != NULL, "%s", err);
    cr_assert(batch_ring_start(&r, SLOTS, BATCH_RING_MAX_THREADS + 1, callbacks(&f), err) == -1);
    cr_assert(batch_ring_start(&r, 1, 2, callbacks(&f), err) == -1);
}
