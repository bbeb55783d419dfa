// gpu_batch.c: see gpu_batch.h.
#include "gpu/gpu_batch.h"

#include <stdlib.h>
#include <string.h>

#include "gpu_context.h"
#include "util/util.h"

// ---- host batches ----------------------------------------------------------------

static void *pinned_alloc(size_t bytes) {
    void *p;
    CUDA_CHECK(cudaMallocHost(&p, bytes));
    return p;
}

void host_batch_init(HostBatch *hb, int B, int T, int V, int pinned) {
    const size_t BT = (size_t)B * T, bytes = BT * sizeof(int32_t);
    hb->pinned = pinned;
    hb->inputs = pinned ? pinned_alloc(bytes) : xmalloc(bytes);
    hb->targets = pinned ? pinned_alloc(bytes) : xmalloc(bytes);
    if (pinned) encoder_buckets_init_pinned(&hb->buckets, (int)BT, V);
    else encoder_buckets_init(&hb->buckets, (int)BT, V);
}

void host_batch_free(HostBatch *hb) {
    if (hb->pinned) {
        if (hb->inputs) CUDA_CHECK(cudaFreeHost(hb->inputs));
        if (hb->targets) CUDA_CHECK(cudaFreeHost(hb->targets));
    } else {
        free(hb->inputs);
        free(hb->targets);
    }
    if (hb->buckets.packed) encoder_buckets_free(&hb->buckets);
    memset(hb, 0, sizeof *hb);
}

int host_batch_prepare(HostBatch *hb, int with_targets, int B, int T, int V, char *err) {
    const size_t BT = (size_t)B * T;
    for (size_t i = 0; i < BT; i++)
        if (hb->inputs[i] < 0 || hb->inputs[i] >= V ||
            (with_targets && (hb->targets[i] < 0 || hb->targets[i] >= V)))
            return fail(err, "token %zu of the batch is outside the vocabulary [0, %d)", i, V);
    if (!with_targets) return 0;
    // The embedding's backward pass needs the positions grouped by token.
    hb->buckets.BT = B * T;
    return encoder_buckets_build(&hb->buckets, hb->inputs, err);
}

// ---- device batches --------------------------------------------------------------

size_t device_batch_bytes(int B, int T) {
    const size_t BT = (size_t)B * T;
    return (2 * BT + encoder_buckets_ints((int)BT)) * sizeof(int32_t);
}

size_t device_batch_alloc(DeviceBatch *db, int B, int T) {
    const size_t BT = (size_t)B * T, buckets = encoder_buckets_ints((int)BT);
    db->inputs = gpu_malloc(BT * sizeof(int32_t), "input tokens");
    db->targets = gpu_malloc(BT * sizeof(int32_t), "target tokens");
    db->buckets = gpu_malloc(buckets * sizeof(int32_t), "encoder buckets");
    db->num_buckets = 0;
    return device_batch_bytes(B, T);
}

void device_batch_free(DeviceBatch *db) {
    gpu_free(db->inputs);
    gpu_free(db->targets);
    gpu_free(db->buckets);
    memset(db, 0, sizeof *db);
}

// ANCHOR: device_batch_upload
void device_batch_upload_async(DeviceBatch *db, const HostBatch *hb, int B, int T,
                               cudaStream_t stream) {
    const size_t bytes = (size_t)B * T * sizeof(int32_t);
    const size_t bucket_bytes = encoder_buckets_ints(B * T) * sizeof(int32_t);
    CUDA_CHECK(cudaMemcpyAsync(db->inputs, hb->inputs, bytes, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaMemcpyAsync(db->targets, hb->targets, bytes, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaMemcpyAsync(db->buckets, hb->buckets.packed, bucket_bytes,
                               cudaMemcpyHostToDevice, stream));
    db->num_buckets = hb->buckets.num_buckets;
}
// ANCHOR_END: device_batch_upload

