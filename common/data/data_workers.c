// data_workers.c: see data_workers.h.
#include "data/data_workers.h"

#include <string.h>

#include "train/train_common.h"

// ---- the workers' callbacks (plain C) ---------------------------------------------

// ANCHOR: worker_callbacks
// Under the ring's lock, in batch order: the loader is one sequence, and not
// thread-safe. A copy of B*T + 1 tokens from memory (or a shard's load).
static int read_batch(void *ctx, int slot, uint64_t seq, char *err) {
    (void)seq;  // the loader's next batch is batch seq: the ring reads in order
    DataWorkers *dw = ctx;
    DataSlot *s = &dw->slots[slot];
    int rc = dataloader_next(dw->loader, s->batch.inputs, s->batch.targets, err);
    s->after = dataloader_position(dw->loader);
    return rc;
}

// Unlocked, in parallel: what else a batch costs on the host.
static int prepare_batch(void *ctx, int slot, char *err) {
    DataWorkers *dw = ctx;
    simulated_storage_delay(dw->delay_us);
    return host_batch_prepare(&dw->slots[slot].batch, 1, dw->B, dw->T, dw->V, err);
}
// ANCHOR_END: worker_callbacks

// ---- the trainer's callbacks: a taken slot is free once its copies ran -------------

static int copies_done(void *ctx, int slot) {
    DataWorkers *dw = ctx;
    return cudaEventQuery(dw->slots[slot].uploaded) == cudaSuccess;
}

static void wait_for_copies(void *ctx, int slot) {
    DataWorkers *dw = ctx;
    gpu_event_sync(dw->ctx, dw->slots[slot].uploaded, "a free slot of the data ring");
}

static void free_buffers(DataWorkers *dw) {
    for (int i = 0; i < DATA_RING_SLOTS; i++) {
        host_batch_free(&dw->slots[i].batch);
        CUDA_CHECK(cudaEventDestroy(dw->slots[i].uploaded));
    }
    for (int d = 0; d < 2; d++) {
        device_batch_free(&dw->device[d]);
        CUDA_CHECK(cudaEventDestroy(dw->device_free[d]));
    }
    CUDA_CHECK(cudaStreamDestroy(dw->copy_stream));
    memset(dw, 0, sizeof *dw);
}

int data_workers_start(DataWorkers *dw, const GpuContext *ctx, DataLoader *loader, int B, int T,
                       int V, int num_threads, int delay_us, char *err) {
    *dw = (DataWorkers){.ctx = ctx, .loader = loader, .B = B, .T = T, .V = V, .delay_us = delay_us,
                        .consumed = dataloader_position(loader)};
    for (int i = 0; i < DATA_RING_SLOTS; i++) {
        host_batch_init(&dw->slots[i].batch, B, T, V, 1);
        CUDA_CHECK(cudaEventCreateWithFlags(&dw->slots[i].uploaded, cudaEventDisableTiming));
    }
    // Non-blocking: the copy stream does not wait for the legacy default stream.
    CUDA_CHECK(cudaStreamCreateWithFlags(&dw->copy_stream, cudaStreamNonBlocking));
    for (int d = 0; d < 2; d++) {
        device_batch_alloc(&dw->device[d], B, T);
        CUDA_CHECK(cudaEventCreateWithFlags(&dw->device_free[d], cudaEventDisableTiming));
    }
    RingCallbacks cb = {.read = read_batch, .prepare = prepare_batch, .held_done = copies_done,
                        .wait_held = wait_for_copies, .ctx = dw};
    if (batch_ring_start(&dw->ring, DATA_RING_SLOTS, num_threads, cb, err)) {
        free_buffers(dw);
        return -1;
    }
    return 0;
}

// ANCHOR: feed_batch
int data_workers_feed(DataWorkers *dw, GPT2Gpu *model, char *err) {
    const int slot = batch_ring_take(&dw->ring, err);  // waits only if no batch is ready
    if (slot < 0) return -1;
    DataSlot *s = &dw->slots[slot];
    const uint64_t k = dw->ring.slots[slot].seq;  // HELD: ours until its copies ran
    const int d = (int)(k % 2);
    cudaStream_t compute = model->ctx->stream;
    // Step k-1, which read the other buffer, is queued whole: once the compute
    // stream is past it, that buffer may take batch k+1.
    if (k > 0) CUDA_CHECK(cudaEventRecord(dw->device_free[1 - d], compute));
    // Batch k goes into the buffer step k-2 read: after that step.
    CUDA_CHECK(cudaStreamWaitEvent(dw->copy_stream, dw->device_free[d], 0));
    device_batch_upload_async(&dw->device[d], &s->batch, dw->B, dw->T, dw->copy_stream);
    // The slot is free for the workers once this event is done.
    CUDA_CHECK(cudaEventRecord(s->uploaded, dw->copy_stream));
    // The step waits for its copies on the device; the host goes on.
    CUDA_CHECK(cudaStreamWaitEvent(compute, s->uploaded, 0));
    gpt2_gpu_use_batch(model, &dw->device[d], dw->B, dw->T);
    dw->consumed = s->after;
    return 0;
}
// ANCHOR_END: feed_batch

DataPosition data_workers_position(DataWorkers *dw) { return dw->consumed; }

uint64_t data_workers_ahead(DataWorkers *dw) { return batch_ring_ahead(&dw->ring); }

void data_workers_stop(DataWorkers *dw) {
    batch_ring_stop(&dw->ring);
    // The copies still queued read the slots: they must finish first.
    CUDA_CHECK(cudaStreamSynchronize(dw->copy_stream));
    free_buffers(dw);
}
