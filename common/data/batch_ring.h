// batch_ring.h: chapter 08's ring of batches, in plain C: worker threads fill
// its slots with the batches of a run, in order, ahead of the one thread that
// takes them. What a batch is, and how it is read, lives in the callbacks;
// data_workers.h fills the slots with pinned host batches and copies them to
// the GPU.
//
// A slot is
//   FREE     a worker may fill it with the next batch
//   FILLING  a worker is reading and preparing batch `seq`
//   READY    batch `seq` is in it, waiting to be taken
//   HELD     the consumer took it and may still be reading it (its copies
//            to the GPU may not have run): free again once held_done says so
//   FAILED   the read or the preparation of batch `seq` failed; err says why
//
// Order. Batch k is the k-th batch read, whatever the number of threads: a
// worker takes the next batch number and calls read() for it under the ring's
// lock, so the reads happen one at a time, in order; prepare() (the part that
// may be slow: a read from storage, the checks, the grouping by token) runs
// unlocked, in parallel with the other workers. The consumer takes batch k
// only once it is READY, so batches come out in order too.
//
// The consumer never waits while a batch is ready. It waits when batch k is not
// ready yet: for a worker to finish it, or, when the workers are stuck for want
// of a free slot because the consumer holds them, for the oldest slot it
// holds (wait_held), which it then frees.
#ifndef BATCH_RING_H
#define BATCH_RING_H

#include <pthread.h>
#include <stdint.h>

#include "util/util.h"

#define BATCH_RING_MAX_SLOTS 16
#define BATCH_RING_MAX_THREADS 8

typedef enum { SLOT_FREE, SLOT_FILLING, SLOT_READY, SLOT_HELD, SLOT_FAILED } SlotState;

typedef struct {
    SlotState state;
    uint64_t seq;        // the batch it holds (FILLING, READY, HELD, FAILED)
    char err[ERR_LEN];   // FAILED: why
} RingSlot;

// What the ring calls; ctx is the caller's. Each gets the slot's index.
typedef struct {
    // A worker, under the lock, in batch order: read batch `seq` into the slot.
    int (*read)(void *ctx, int slot, uint64_t seq, char *err);
    // A worker, unlocked, in parallel with the others: the rest of the work.
    int (*prepare)(void *ctx, int slot, char *err);
    // The consumer: is a HELD slot free to refill (it no longer reads it)?
    // Must not wait.
    int (*held_done)(void *ctx, int slot);
    // The consumer: waits until a HELD slot is free to refill.
    void (*wait_held)(void *ctx, int slot);
    void *ctx;
} RingCallbacks;

typedef struct {
    RingCallbacks cb;
    int num_slots, num_threads;
    RingSlot slots[BATCH_RING_MAX_SLOTS];
    pthread_t threads[BATCH_RING_MAX_THREADS];
    pthread_mutex_t lock;    // guards everything below and every slot
    pthread_cond_t changed;  // a slot changed state, or stop was set
    uint64_t next_read;      // the next batch a worker reads
    uint64_t next_take;      // the next batch the consumer takes
    int stop, failed;
} BatchRing;

// Starts num_threads (1..BATCH_RING_MAX_THREADS) workers over num_slots
// (2..BATCH_RING_MAX_SLOTS) slots, all FREE. Returns 0, or -1 with a reason in
// err naming the flag (--data-threads) when a count is out of range.
int batch_ring_start(BatchRing *r, int num_slots, int num_threads, RingCallbacks cb, char *err);

// A worker thread's body (pthread_create's start routine, arg = the ring):
// fills FREE slots with the next batches, in order, until stop or a failure.
// Chapter 08's exercise (solutions/08_data_workers/batch_ring_worker.c).
void *batch_ring_worker(void *ring);

// The consumer: batch next_take, now HELD by the caller: its slot's index.
// Returns -1 with the workers' reason in err when that batch failed.
int batch_ring_take(BatchRing *r, char *err);

// Batches read (or being read) and not yet taken: how far ahead the workers are.
uint64_t batch_ring_ahead(BatchRing *r);

// Stops and joins the workers. The slots are the caller's again.
void batch_ring_stop(BatchRing *r);

#endif
