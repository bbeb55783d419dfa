// gpu_batch.h: a batch of tokens, on the host and on the device, and the
// copies between them: what the training step feeds the model (gpt2_gpu.h)
// and chapter 08's workers prepare (data_workers.h).
#ifndef GPU_BATCH_H
#define GPU_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "encoder.h"

// A batch of tokens on the host, ready to go up: the inputs, the targets,
// and the inputs grouped by token for the embedding's backward pass
// (encoder.h). In pageable memory (malloc) or, for chapter 03, pinned
// memory (cudaMallocHost), which the copy engine reads by itself: see
// gpt2_gpu_upload_batch.
typedef struct {
    int32_t *inputs, *targets;  // (B,T) each
    EncoderBuckets buckets;
    int pinned;
} HostBatch;

// The same batch on the device: what the forward and backward passes read.
// The model has one of its own (gpt2_gpu_upload_batch fills it); chapter 08's
// data workers keep two more and hand them to the model in turn
// (gpt2_gpu_use_batch).
typedef struct {
    int32_t *inputs, *targets;  // (B,T) each
    int32_t *buckets;           // encoder_buckets_ints(B*T): the inputs grouped by token
    int num_buckets;            // of the batch it holds (encoder_backward's grid)
} DeviceBatch;

void host_batch_init(HostBatch *hb, int B, int T, int V, int pinned);
void host_batch_free(HostBatch *hb);

// Host work of a batch before it goes up: checks that its B*T tokens (and
// targets, with with_targets) are in [0, V) and, with targets, groups the
// inputs by token into hb->buckets. Returns -1 with a reason in err.
int host_batch_prepare(HostBatch *hb, int with_targets, int B, int T, int V, char *err);

// DeviceBatch buffers for batches up to B*T tokens (returns their bytes,
// device_batch_bytes), and their freeing.
size_t device_batch_bytes(int B, int T);
size_t device_batch_alloc(DeviceBatch *db, int B, int T);
void device_batch_free(DeviceBatch *db);

// Queues the copies of a prepared, pinned host batch (inputs, targets,
// buckets) into db on `stream`: the copy engine reads hb when the stream
// gets there, so hb must be left alone until an event recorded after this
// call is done.
void device_batch_upload_async(DeviceBatch *db, const HostBatch *hb, int B, int T,
                               cudaStream_t stream);

#endif
