// classifier.cu: see classifier.h.
#include <math.h>

#include "classifier.h"
#include "reduce.cuh"
#include "softmax_crossentropy.h"
#include "util.h"
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
__global__ void __launch_bounds__(CLASSIFIER_THREADS)
    classifier_fused_kernel_v2(float *losses, floatX *logits, const int32_t *targets, int V,
                               int ld, float dloss, int write_dlogits) {
    const size_t row = blockIdx.x;
    floatX *x = logits + row * ld;
    const int full = V / VEC_X * VEC_X;  // columns read in whole vectors
    // Pass 1: max and sum of exponentials, one read of the row.
    Online o = {-INFINITY, 0.0f};
    for (int i = threadIdx.x * VEC_X; i < full; i += blockDim.x * VEC_X) {
        const Vec v = load_vec(x + i);
        for (int k = 0; k < VEC_X; k++) online_add(&o, x2f(v.x[k]));
    }
    for (int i = full + threadIdx.x; i < V; i += blockDim.x) online_add(&o, x2f(x[i]));
    o = block_online(o);
    const int target = targets[row];
    const float target_logit = x2f(x[target]);
    // Every thread has read x[target] before anyone may overwrite it.
    __syncthreads();
    if (threadIdx.x == 0) losses[row] = o.max + logf(o.sum) - target_logit;
    if (!write_dlogits) return;
    // ANCHOR: dlogits_pass
    // Pass 2: the gradient of the mean loss, written over the logits.
    const float inv_sum = 1.0f / o.sum;
    for (int i = threadIdx.x * VEC_X; i < ld; i += blockDim.x * VEC_X) {
        Vec v = load_vec(x + i);
        for (int k = 0; k < VEC_X; k++) {
            const int j = i + k;
            const float p = j < V ? expf(x2f(v.x[k]) - o.max) * inv_sum : 0.0f;
            const float indicator = j == target ? 1.0f : 0.0f;
            v.x[k] = f2x(j < V ? (p - indicator) * dloss : 0.0f);
        }
        store_vec(x + i, v);
    }
    // ANCHOR_END: dlogits_pass
}
// ANCHOR_END: classifier_kernel

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
