// gpu_comm.h: chapter 15: what the GPUs of a run say to each other, over
// NCCL. One process per GPU (launch.h), each with its own GpuComm, made once
// the processes have met (rendezvous.h):
//
//   - the gradients' mean over the ranks, queued on a stream of its own (the
//     communication stream) as soon as the backward pass has completed each
//     layer's, so that the all-reduces of the last layers run while the
//     backward pass computes the first ones; the model's stream waits for
//     them only before the update;
//   - the step's loss, averaged the same way, so that rank 0 prints the
//     run's;
//   - a check, at the start, that every rank runs the same command line.
//
// NCCL's collectives are enqueued on a stream, as kernels are, and do not
// make the host wait. A rank that stops makes the others wait inside a
// collective for ever: a watchdog thread watches the steps' progress and
// NCCL's own errors, and stops the process with a message when either says
// the run cannot go on (gpu_comm_progress, --comm-timeout).
//
// Built without NCCL (no nccl.h at build time: the Makefile says where it
// looks), gpu_comm_init refuses a world of more than one rank, saying so.
#ifndef GPU_COMM_H
#define GPU_COMM_H

#include <cuda_runtime.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu_context.h"
#include "precision.h"

typedef struct {
    int rank, world_size;
    void *nccl;              // ncclComm_t: the communicator (NULL: one rank, nothing to say)
    cudaStream_t stream;     // the communication stream
    cudaEvent_t fork, join;  // the model's stream to it, and back
    // The watchdog: the time of the last progress the run reported, the
    // seconds it may go without one, and the thread that checks.
    double last_progress;
    double timeout_s;
    int watching;
    pthread_t watchdog;
    pthread_mutex_t lock;
} GpuComm;

// Connects this process, rank `rank` of world_size, to the others: rank 0
// makes NCCL's id and publishes it at id_path, the others wait for it there
// (at most timeout_s), then all join NCCL's communicator on ctx's GPU, and
// rank 0 removes the file. The watchdog starts before the joining (a rank
// that never comes stops the others too), with timeout_s between two
// progress reports. 0, or -1 with err. A world of 1 makes nothing.
int gpu_comm_init(GpuComm *c, const GpuContext *ctx, int rank, int world_size,
                  const char *id_path, double timeout_s, char *err);
void gpu_comm_free(GpuComm *c);

// The run made progress (a step's numbers were read): the watchdog's clock
// starts again.
void gpu_comm_progress(GpuComm *c);

// The mean over the ranks of n tensors in place, tensor i at ptrs[i] with
// counts[i] floatX values: one group of all-reduces on the communication
// stream, after the work queued on ctx's stream so far.
void gpu_comm_mean_async(GpuComm *c, const GpuContext *ctx, floatX *const *ptrs,
                         const size_t *counts, int n);

// Chapter 15's --shard-optimizer (optimizer_shard.h): the flat buffer
// `buf` is cut into world_size shards of shard_values, rank r's at
// r * shard_values.
//   gpu_comm_mean_to_owners_async: the mean over the ranks of the ranges
//     [firsts[i], firsts[i] + counts[i]) of buf, each part of a range on the
//     rank that owns it only (a reduce to that rank), on the communication
//     stream as gpu_comm_mean_async; the ranges' other values stay this
//     rank's own.
//   gpu_comm_mean_scatter_async: the same for the whole buffer (world_size
//     * shard_values values), in one reduce-scatter.
//   gpu_comm_gather: every rank's shard of buf to every rank (an
//     all-gather), on ctx's stream.
void gpu_comm_mean_to_owners_async(GpuComm *c, const GpuContext *ctx, floatX *buf,
                                   const size_t *firsts, const size_t *counts, int n,
                                   size_t shard_values);
void gpu_comm_mean_scatter_async(GpuComm *c, const GpuContext *ctx, floatX *buf,
                                 size_t shard_values);
void gpu_comm_gather(GpuComm *c, const GpuContext *ctx, floatX *buf, size_t shard_values);

// Every rank's `each` floats, x[rank * each ..], to every rank, in place, on
// ctx's stream.
void gpu_comm_gather_floats(GpuComm *c, const GpuContext *ctx, float *x, size_t each);

// `bytes` of device memory from this rank to rank `peer`, which receives
// them with gpu_comm_recv; on ctx's stream.
void gpu_comm_send(GpuComm *c, const GpuContext *ctx, const void *buf, size_t bytes, int peer);
void gpu_comm_recv(GpuComm *c, const GpuContext *ctx, void *buf, size_t bytes, int peer);

// ctx's stream waits (on the device) for every all-reduce queued so far.
void gpu_comm_wait(GpuComm *c, const GpuContext *ctx);

// The mean over the ranks of n floats in place, on ctx's stream: the loss.
void gpu_comm_mean_floats(GpuComm *c, const GpuContext *ctx, float *x, size_t n);

// 0 when every rank passed the same value (a hash of its command line);
// else -1 with err naming `what` and the first rank whose value differs
// from rank 0's. Waits for the answer.
int gpu_comm_same_everywhere(GpuComm *c, const GpuContext *ctx, uint64_t value,
                             const char *what, char *err);

#endif
