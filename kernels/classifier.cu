// classifier.cu: see classifier.h.
#include <math.h>

#include "classifier.h"
#include "reduce.cuh"
#include "sm_limits.cuh"
#include "softmax_crossentropy.h"
#include "util/util.h"
#include "vec.cuh"

#define CLASSIFIER_THREADS 1024

// A running (max, sum of exp(x - max)) pair. Adding x to it: if x is a new
// max, the sum so far was taken against the old max and is rescaled by
// exp(old - new); otherwise x adds exp(x - max).
struct Online {
    float max, sum;
};

__device__ inline void online_add(Online *o, float x) {
    if (x > o->max) {
        o->sum = o->sum * expf(o->max - x) + 1.0f;
        o->max = x;
    } else {
        o->sum += expf(x - o->max);
    }
}

// The block's max and sum: first the max of the threads' maxima, then each
// thread's sum rescaled to it and added in a fixed order (block_sum).
__device__ inline Online block_online(Online o) {
    const float max = block_max(o.max);
    const float mine = o.max == -INFINITY ? 0.0f : o.sum * expf(o.max - max);
    return Online{max, block_sum(mine)};
}

// ANCHOR: classifier_kernel
// Pass 1's step: one vector of the row added to the thread's (max, sum).
__device__ inline void online_add_vec(Online *o, const Vec &v) {
    for (int k = 0; k < VEC_X; k++) online_add(o, x2f(v.x[k]));
}

// ANCHOR: dlogits_pass
// Pass 2's step: the logits of columns [i, i + VEC_X), in v, replaced by the
// gradient of the mean loss; the padding columns [V, ld) get exact zeros.
__device__ inline void dlogits_vec(Vec *v, int i, int V, int target, Online o, float inv_sum,
                                   float dloss) {
    for (int k = 0; k < VEC_X; k++) {
        const int j = i + k;
        const float p = j < V ? expf(x2f(v->x[k]) - o.max) * inv_sum : 0.0f;
        const float indicator = j == target ? 1.0f : 0.0f;
        v->x[k] = f2x(j < V ? (p - indicator) * dloss : 0.0f);
    }
}
// ANCHOR_END: dlogits_pass

__global__ void __launch_bounds__(CLASSIFIER_THREADS)
    classifier_fused_kernel_v2(float *losses, floatX *logits, const int32_t *targets, int V,
                               int ld, float dloss, int write_dlogits) {
    const size_t row = blockIdx.x;
    floatX *x = logits + row * ld;
    const int full = V / VEC_X * VEC_X;  // columns read in whole vectors
    // Pass 1: max and sum of exponentials, one read of the row.
    Online o = {-INFINITY, 0.0f};
    for (int i = threadIdx.x * VEC_X; i < full; i += blockDim.x * VEC_X)
        online_add_vec(&o, load_vec(x + i));
    for (int i = full + threadIdx.x; i < V; i += blockDim.x) online_add(&o, x2f(x[i]));
    o = block_online(o);
    const int target = targets[row];
    const float target_logit = x2f(x[target]);
    // Every thread has read x[target] before anyone may overwrite it.
    __syncthreads();
    if (threadIdx.x == 0) losses[row] = o.max + logf(o.sum) - target_logit;
    if (!write_dlogits) return;
    // Pass 2: the gradient of the mean loss, written over the logits.
    const float inv_sum = 1.0f / o.sum;
    for (int i = threadIdx.x * VEC_X; i < ld; i += blockDim.x * VEC_X) {
        Vec v = load_vec(x + i);
        dlogits_vec(&v, i, V, target, o, inv_sum, dloss);
        store_vec(x + i, v);
    }
}
// ANCHOR_END: classifier_kernel

// ANCHOR: classifier_kernel_v3
// v2's pass 2 reads its row a second time and counts on L2 for it. But
// between a row's two reads L2 also takes in the other rows in flight (132
// SMs x 2 blocks) and the dlogits written over them, and what it has lost
// comes from DRAM again: up to three passes over the logits (read, read,
// write) where one read and one write would do. v3 keeps the row in shared
// memory, which nothing else evicts: pass 1 stores each vector it reads
// there, pass 2 reads it back from there.
// Measured in bf16 (the kernel lab, results/h100/last_mile/lab.csv), v3 is
// no faster than v2: the rows in flight, 132 SMs x 2 blocks x 100 KB = 26 MB,
// fit in the H100's 50 MB L2, so v2's second read was coming from there, and
// the kernel is bound by its work per value, not by memory. fp32 rows (201
// KB, 53 MB in flight) do not fit, and there v3 saves a read of the logits.
// The arithmetic is v2's, thread for thread and in the same order, with the
// same 1024 threads (so the same reduction tree): the results are v2's, bit
// for bit. 2 such blocks fill an SM of 2048 threads (the launch bound keeps
// them to 32 registers) and their 2 bf16 rows fit the H100's 228 KB; an SM
// of 1536 threads (sm_limits.cuh) holds one. 512 threads would fit no more
// rows, so half the threads, and would change the bits.
__global__ void __launch_bounds__(CLASSIFIER_THREADS, SM_MAX_THREADS / CLASSIFIER_THREADS)
    classifier_fused_kernel_v3(float *losses, floatX *logits, const int32_t *targets, int V,
                               int ld, float dloss) {
    extern __shared__ int4 smem[];  // int4: 16-byte aligned, for load_vec
    floatX *copy = reinterpret_cast<floatX *>(smem);
    const size_t row = blockIdx.x;
    floatX *x = logits + row * ld;
    const int full = V / VEC_X * VEC_X;
    // Pass 1: v2's, keeping a copy of what it reads.
    Online o = {-INFINITY, 0.0f};
    for (int i = threadIdx.x * VEC_X; i < full; i += blockDim.x * VEC_X) {
        const Vec v = load_vec(x + i);
        store_vec(copy + i, v);
        online_add_vec(&o, v);
    }
    // The padding too, so that pass 2 reads the very bytes v2's reads.
    for (int i = full + threadIdx.x; i < ld; i += blockDim.x) {
        const floatX xi = x[i];
        copy[i] = xi;
        if (i < V) online_add(&o, x2f(xi));
    }
    o = block_online(o);  // its __syncthreads also complete the copy
    const int target = targets[row];
    // The copy is never overwritten: no barrier before pass 2's writes.
    if (threadIdx.x == 0) losses[row] = o.max + logf(o.sum) - x2f(copy[target]);
    // Pass 2: v2's, reading the copy.
    const float inv_sum = 1.0f / o.sum;
    for (int i = threadIdx.x * VEC_X; i < ld; i += blockDim.x * VEC_X) {
        Vec v = load_vec(copy + i);
        dlogits_vec(&v, i, V, target, o, inv_sum, dloss);
        store_vec(x + i, v);
    }
}
// ANCHOR_END: classifier_kernel_v3

extern "C" void classifier_fused_v2(const GpuContext *ctx, float *losses, float *mean_loss,
                                    floatX *logits, floatX *probs, const int32_t *targets, int B,
                                    int T, int V, int ld, int write_dlogits) {
    (void)probs;
    if (ld % VEC_X != 0)
        die("classifier_fused_v2: the logits' row stride %d is not a multiple of %d", ld, VEC_X);
    const float dloss = 1.0f / (float)(B * T);  // d(mean loss)/d(each loss)
    classifier_fused_kernel_v2<<<B * T, CLASSIFIER_THREADS, 0, ctx->stream>>>(
        losses, logits, targets, V, ld, dloss, write_dlogits);
    gpu_check_launch(ctx, "classifier_fused_kernel_v2");
    loss_mean_v1(ctx, mean_loss, losses, B, T);
}

// The widest row, in bytes, that v3 can hold: a block's opt-in shared memory
// (227 KB on the H100) less the kernel's static arrays (block_online's).
// fp32's rows of 50304 (201 KB) fit, one block per SM: measured, still faster
// than v2, whose second reads they push out of L2.
// Asked of the context's device at each call (a few microseconds of the
// host's): GPUs differ, and a program may hold several.
static size_t classifier_v3_row_limit(const GpuContext *ctx) {
    int optin = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                      ctx->device));
    cudaFuncAttributes attr;
    CUDA_CHECK(cudaFuncGetAttributes(&attr, classifier_fused_kernel_v3));
    return (size_t)optin - attr.sharedSizeBytes;
}

extern "C" void classifier_fused_v3(const GpuContext *ctx, float *losses, float *mean_loss,
                                    floatX *logits, floatX *probs, const int32_t *targets, int B,
                                    int T, int V, int ld, int write_dlogits) {
    const size_t bytes = (size_t)ld * sizeof(floatX);
    // Without pass 2 there is nothing to keep; a row too wide takes v2's path.
    if (!write_dlogits || bytes > classifier_v3_row_limit(ctx)) {
        classifier_fused_v2(ctx, losses, mean_loss, logits, probs, targets, B, T, V, ld,
                            write_dlogits);
        return;
    }
    if (ld % VEC_X != 0)
        die("classifier_fused_v3: the logits' row stride %d is not a multiple of %d", ld, VEC_X);
    // Allowed on the device current now, at every launch, as the flash
    // kernels do (allow_shared_memory): a setting of the device, not of the
    // process.
    CUDA_CHECK(cudaFuncSetAttribute(classifier_fused_kernel_v3,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    const float dloss = 1.0f / (float)(B * T);
    classifier_fused_kernel_v3<<<B * T, CLASSIFIER_THREADS, bytes, ctx->stream>>>(
        losses, logits, targets, V, ld, dloss);
    gpu_check_launch(ctx, "classifier_fused_kernel_v3");
    loss_mean_v1(ctx, mean_loss, losses, B, T);
}
