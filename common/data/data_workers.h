// data_workers.h: chapter 08's data pipeline. Worker threads read the next
// training batches ahead of the steps, check their tokens and group them by
// token (the host work of gpt2_gpu_upload_batch), each batch into a slot of a
// ring of pinned host batches (batch_ring.h: the threads, the order, the
// waits). The trainer takes the batches in order, queues their copies on a
// stream of its own, and the step's stream waits for the copies through an
// event: the step never waits for data unless the ring holds no ready batch.
//
//   worker threads:  read, delay, check, buckets  ->  slot k % DATA_RING_SLOTS
//   trainer thread:  take batch k  ->  copy stream: slot -> device[k % 2]
//                                     compute stream: waits for the copies, runs step k
//
// The workers are plain C: they never call CUDA. Every CUDA call (copies,
// events, waits) is the trainer thread's. A slot the trainer took stays HELD
// until the copies that read it have run (its event), and only then may a
// worker write the next batch into it: the copy engine reads pinned memory
// when the copy stream gets there, not when the copy is queued (chapter 03).
// The two device buffers are used in turn: batch k's copies wait, on the copy
// stream, for the step that read batch k-2 from the same buffer.
//
// Checkpoints. The workers run ahead of the model, so the loader's position
// is not the run's. Each slot carries the position after its batch, and the
// pipeline keeps that of the last batch taken: the batches the model has
// consumed, which is where a resumed run must go on.
#ifndef DATA_WORKERS_H
#define DATA_WORKERS_H

#include <stdint.h>

#include "data/batch_ring.h"
#include "data/dataloader.h"
#include "gpu/gpt2_gpu.h"
#include "util/util.h"

#define DATA_RING_SLOTS 8

typedef struct {
    HostBatch batch;          // pinned
    DataPosition after;       // the loader's position after its batch
    cudaEvent_t uploaded;     // recorded after the copies that read it
} DataSlot;

typedef struct {
    const GpuContext *ctx;    // the model's: its stream waits for the copies, it counts our waits
    DataLoader *loader;       // the training loader: the workers' until data_workers_stop
    int B, T, V, delay_us;
    BatchRing ring;
    DataSlot slots[DATA_RING_SLOTS];
    DataPosition consumed;    // after the last batch taken (the trainer's only)
    // The device side.
    cudaStream_t copy_stream;
    DeviceBatch device[2];
    cudaEvent_t device_free[2];  // recorded after the step that read device[d]
} DataWorkers;

// Starts num_threads workers (1..BATCH_RING_MAX_THREADS) reading (B,T) batches of
// tokens in [0, V) from loader, at its current position, each followed by
// --data-delay-us (delay_us). Returns 0, or -1 with a reason in err.
int data_workers_start(DataWorkers *dw, const GpuContext *ctx, DataLoader *loader, int B, int T,
                       int V, int num_threads, int delay_us, char *err);

// The step's batch: takes the next one in order (waiting for it only when no
// batch is ready), queues its copies on the copy stream into a device buffer,
// makes the model's stream wait for them, and points the model at it
// (gpt2_gpu_use_batch). Returns -1 with the workers' reason in err when that
// batch could not be read; the run cannot go on.
int data_workers_feed(DataWorkers *dw, GPT2Gpu *model, char *err);

// The loader's position after the last batch fed: where a checkpoint taken now
// resumes.
DataPosition data_workers_position(DataWorkers *dw);

// Batches read (or being prepared) and not yet fed: how far ahead the
// workers are.
uint64_t data_workers_ahead(DataWorkers *dw);

// Stops and joins the workers, waits for the copies, frees everything. The
// loader is the caller's again.
void data_workers_stop(DataWorkers *dw);

#endif
