// softmax_crossentropy.cu: see softmax_crossentropy.h.
#include <math.h>

#include "reduce.cuh"
#include "softmax_crossentropy.h"

// A row is a whole vocabulary (50257 at GPT-2's size): too long for one
// warp, so a block of 512 threads strides over it, three times: the max, the
// sum of exponentials shifted by it, then the division. Consecutive threads
// read consecutive logits, so every pass is coalesced.
#define SOFTMAX_THREADS 512

__global__ void softmax_forward_kernel_v1(float *probs, const float *logits, int V, int Vp) {
    const float *z = logits + (size_t)blockIdx.x * Vp;
    float *p = probs + (size_t)blockIdx.x * Vp;
    float maxval = -INFINITY;
    for (int i = threadIdx.x; i < V; i += blockDim.x) maxval = fmaxf(maxval, z[i]);
    maxval = block_max(maxval);
    float sum = 0.0f;
    for (int i = threadIdx.x; i < V; i += blockDim.x) sum += expf(z[i] - maxval);
    sum = block_sum(sum);
    for (int i = threadIdx.x; i < Vp; i += blockDim.x)
        p[i] = i < V ? expf(z[i] - maxval) / sum : 0.0f;  // padding is not a token
}

extern "C" void softmax_forward_v1(const GpuContext *ctx, float *probs, const float *logits,
                                   int B, int T, int V, int Vp) {
    softmax_forward_kernel_v1<<<B * T, SOFTMAX_THREADS, 0, ctx->stream>>>(probs, logits, V, Vp);
    gpu_check_launch(ctx, "softmax_forward_kernel_v1");
}

__global__ void crossentropy_forward_kernel_v1(float *losses, const float *probs,
                                               const int32_t *targets, int BT, int Vp) {
    const int bt = blockIdx.x * blockDim.x + threadIdx.x;
    if (bt < BT) losses[bt] = -logf(probs[(size_t)bt * Vp + targets[bt]]);
}

extern "C" void crossentropy_forward_v1(const GpuContext *ctx, float *losses, const float *probs,
                                        const int32_t *targets, int B, int T, int Vp) {
    const int threads = 256;
    crossentropy_forward_kernel_v1<<<blocks_for((size_t)B * T, threads), threads, 0,
                                     ctx->stream>>>(losses, probs, targets, B * T, Vp);
    gpu_check_launch(ctx, "crossentropy_forward_kernel_v1");
}

// One block: each thread sums a strided slice in order, then the block sum
// adds the slices in a fixed tree. A few thousand floats: one block is plenty.
__global__ void loss_mean_kernel_v1(float *mean_loss, const float *losses, int BT) {
    float sum = 0.0f;
    for (int i = threadIdx.x; i < BT; i += blockDim.x) sum += losses[i];
    sum = block_sum(sum);
    if (threadIdx.x == 0) *mean_loss = sum / BT;
}

extern "C" void loss_mean_v1(const GpuContext *ctx, float *mean_loss, const float *losses, int B,
                             int T) {
    loss_mean_kernel_v1<<<1, 1024, 0, ctx->stream>>>(mean_loss, losses, B * T);
    gpu_check_launch(ctx, "loss_mean_kernel_v1");
}

__global__ void fill_kernel_v1(float *x, float value, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = value;
}

extern "C" void dlosses_fill_v1(const GpuContext *ctx, float *dlosses, int B, int T) {
    const int threads = 256;
    const float value = 1.0f / (float)(B * T);  // as the CPU reference rounds it
    fill_kernel_v1<<<blocks_for((size_t)B * T, threads), threads, 0, ctx->stream>>>(dlosses,
                                                                                    value, B * T);
    gpu_check_launch(ctx, "fill_kernel_v1");
}

// One block per row; every element is written by one thread, once: no
// reduction, nothing to order.
__global__ void crossentropy_softmax_backward_kernel_v1(float *dlogits, const float *dlosses,
                                                        const float *probs,
                                                        const int32_t *targets, int V, int Vp) {
    const size_t row = blockIdx.x;
    const float dl = dlosses[row];
    const int target = targets[row];
    const float *p = probs + row * Vp;
    float *dz = dlogits + row * Vp;
    for (int i = threadIdx.x; i < V; i += blockDim.x)
        dz[i] += (p[i] - (i == target ? 1.0f : 0.0f)) * dl;
}

extern "C" void crossentropy_softmax_backward_v1(const GpuContext *ctx, float *dlogits,
                                                 const float *dlosses, const float *probs,
                                                 const int32_t *targets, int B, int T, int V,
                                                 int Vp) {
    crossentropy_softmax_backward_kernel_v1<<<B * T, SOFTMAX_THREADS, 0, ctx->stream>>>(
        dlogits, dlosses, probs, targets, V, Vp);
    gpu_check_launch(ctx, "crossentropy_softmax_backward_kernel_v1");
}
