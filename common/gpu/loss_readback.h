// loss_readback.h: chapter 03's asynchronous readback of a few floats from
// the device: the losses (and the gradient norms) of the steps since the
// last log line, read back only when a line is printed.
//
// Chapters 00-02 read the loss with cudaMemcpy after every forward pass, as
// `loss.item()` does: the host stops until the device has finished
// everything queued before the copy, and then the device has nothing to do
// until the host queues more. Here the copy is split in two:
//   loss_readback_start   queues the copy, device to host, on the stream
//                         (cudaMemcpyAsync) and records an event right after
//                         it; it returns at once, the device still busy
//   loss_readback_finish  waits for that event (the one wait) and hands out
//                         the values
// The copy's destination must be pinned (page-locked) host memory, from
// cudaMallocHost: only then is cudaMemcpyAsync truly asynchronous; into
// pageable memory the driver would wait for the copy before returning.
// Until the event has completed, the pinned buffer belongs to the copy
// engine: the host must not read it (the values are not there yet).
//
// loss_readback_start and loss_readback_finish are chapter 03's exercise:
// complete in solutions/03_sync_avoidance/loss_readback.c, cut out in
// exercises/03_sync_avoidance/. loss_readback_init and loss_readback_free
// are in common/gpu/loss_readback.c. The trainer, common/train/train_gpu.c, uses them
// from chapter 03 on.
#ifndef LOSS_READBACK_H
#define LOSS_READBACK_H

#include <cuda_runtime.h>

#include "gpu_context.h"

typedef struct {
    float *host;          // pinned (cudaMallocHost), `capacity` floats: the copy's destination
    int capacity;
    int count;            // floats in the copy last started (0 before the first)
    cudaEvent_t copied;   // recorded on the stream right after the copy
} LossReadback;

// Allocates the pinned buffer and creates the event (without timing: it is
// only waited for). Sets count to 0.
void loss_readback_init(LossReadback *r, int capacity);
void loss_readback_free(LossReadback *r);

// Queues a copy of n floats (0 < n <= capacity) from `device` (device
// memory) into r->host on `stream`, then records r->copied on `stream`, and
// sets r->count to n. Never waits for the device: it returns while the
// device may still be running whatever was queued before.
void loss_readback_start(LossReadback *r, const float *device, int n, cudaStream_t stream);

// Waits for r->copied with gpu_event_sync (gpu_context.h: the wait is
// counted in ctx, the context whose stream the copy was queued on, and an
// error raised by any kernel queued before the copy is reported here), then
// copies the r->count floats of r->host into out and returns r->count. Call
// it once per loss_readback_start.
int loss_readback_finish(LossReadback *r, const GpuContext *ctx, float *out);

#endif
