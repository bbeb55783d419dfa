// loss_readback.c: the buffer and the event of a LossReadback
// (loss_readback.h). Starting and finishing a readback is chapter 03's
// exercise: solutions/03_sync_avoidance/loss_readback.c.
#include "gpu/loss_readback.h"

#include <string.h>

#include "gpu_context.h"
#include "util/util.h"

void loss_readback_init(LossReadback *r, int capacity) {
    memset(r, 0, sizeof *r);
    if (capacity <= 0) die("loss_readback_init: capacity %d", capacity);
    r->capacity = capacity;
    CUDA_CHECK(cudaMallocHost((void **)&r->host, (size_t)capacity * sizeof(float)));
    CUDA_CHECK(cudaEventCreateWithFlags(&r->copied, cudaEventDisableTiming));
}

void loss_readback_free(LossReadback *r) {
    if (r->copied) CUDA_CHECK(cudaEventDestroy(r->copied));
    if (r->host) CUDA_CHECK(cudaFreeHost(r->host));
    memset(r, 0, sizeof *r);
}
