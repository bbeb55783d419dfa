// softmax_crossentropy.cu: see softmax_crossentropy.h.
#include <math.h>

#include "reduce.cuh"
#include "softmax_crossentropy.h"

// A row is a whole vocabulary (50257 at GPT-2's size): too long for one
// warp, so a block of 512 threads strides over it, three times: the max, the
// sum of exponentials shifted by it, then the division. Consecutive threads
// read consecutive logits, so every pass is coalesced. The max and the sum
// are fp32; only the probabilities are rounded to floatX, when stored.
#define SOFTMAX_THREADS 512

__global__ void softmax_forward_kernel_v1(floatX *probs, const floatX *logits, int V, int Vp) {
    const floatX *z = logits + (size_t)blockIdx.x * Vp;
    floatX *p = probs + (size_t)blockIdx.x * Vp;
    float maxval = -INFINITY;
    for (int i = threadIdx.x; i < V; i += blockDim.x) maxval = fmaxf(maxval, x2f(z[i]));
    maxval = block_max(maxval);
    float sum = 0.0f;
    for (int i = threadIdx.x; i < V; i += blockDim.x) sum += expf(x2f(z[i]) - maxval);
    sum = block_sum(sum);
    for (int i = threadIdx.x; i < Vp; i += blockDim.x)
        p[i] = f2x(i < V ? expf(x2f(z[i]) - maxval) / sum : 0.0f);  // padding is not a token
}

extern "C" void softmax_forward_v1(const GpuContext *ctx, floatX *probs, const floatX *logits,
                                   int B, int T, int V, int Vp) {
    softmax_forward_kernel_v1<<<B * T, SOFTMAX_THREADS, 0, ctx->stream>>>(probs, logits, V, Vp);
    gpu_check_launch(ctx, "softmax_forward_kernel_v1");
}

// From the probabilities: one thread per row reads the target's.
__global__ void crossentropy_forward_kernel_v1(float *losses, const floatX *probs,
                                               const int32_t *targets, int BT, int Vp) {
    const int bt = blockIdx.x * blockDim.x + threadIdx.x;
    if (bt < BT) losses[bt] = -logf(x2f(probs[(size_t)bt * Vp + targets[bt]]));
}

// From the logits: one block per row finds the max and the sum of the
// exponentials exactly as softmax_forward_kernel_v1 does (same block, same
// order, so the same fp32 values), then
//   loss = -log(exp(z_t - max) / sum) = -(z_t - max - log(sum)),
// which needs no probability at all: every term is fp32, and only z_t, a
// stored logit, was ever rounded to floatX.
__global__ void crossentropy_forward_logits_kernel_v1(float *losses, const floatX *logits,
                                                      const int32_t *targets, int V, int Vp) {
    const floatX *z = logits + (size_t)blockIdx.x * Vp;
    float maxval = -INFINITY;
    for (int i = threadIdx.x; i < V; i += blockDim.x) maxval = fmaxf(maxval, x2f(z[i]));
    maxval = block_max(maxval);
    float sum = 0.0f;
    for (int i = threadIdx.x; i < V; i += blockDim.x) sum += expf(x2f(z[i]) - maxval);
    sum = block_sum(sum);
    if (threadIdx.x == 0)
        losses[blockIdx.x] = -(x2f(z[targets[blockIdx.x]]) - maxval - logf(sum));
}

extern "C" void crossentropy_forward_v1(const GpuContext *ctx, float *losses,
                                        const floatX *logits, const floatX *probs,
                                        const int32_t *targets, int B, int T, int V, int Vp) {
    // ANCHOR: loss_precision
#ifdef PRECISION_BF16
    // A bf16 probability keeps 8 significant bits: rounded, it is off by up
    // to 2^-8 = 0.4% of itself, so -log of it by up to 0.004, whatever the
    // loss. Computed from the logits in fp32 instead.
    (void)probs;
    crossentropy_forward_logits_kernel_v1<<<B * T, SOFTMAX_THREADS, 0, ctx->stream>>>(
        losses, logits, targets, V, Vp);
    gpu_check_launch(ctx, "crossentropy_forward_logits_kernel_v1");
#else
    // fp32: the probability is as precise as the loss needs (and this is the
    // CPU reference's formula, chapters 00 and 01's).
    (void)logits, (void)V;
    const int threads = 256;
    crossentropy_forward_kernel_v1<<<blocks_for((size_t)B * T, threads), threads, 0,
                                     ctx->stream>>>(losses, probs, targets, B * T, Vp);
    gpu_check_launch(ctx, "crossentropy_forward_kernel_v1");
#endif
    // ANCHOR_END: loss_precision
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

// One thread: a handful of floats a step.
__global__ void loss_accumulate_kernel_v1(float *step_loss, const float *micro_loss, int first,
                                          int num_micro) {
    float sum = first ? *micro_loss : *step_loss + *micro_loss;
    *step_loss = num_micro > 0 ? sum / (float)num_micro : sum;
}

extern "C" void loss_accumulate_v1(const GpuContext *ctx, float *step_loss,
                                   const float *micro_loss, int first, int num_micro) {
    loss_accumulate_kernel_v1<<<1, 1, 0, ctx->stream>>>(step_loss, micro_loss, first, num_micro);
    gpu_check_launch(ctx, "loss_accumulate_kernel_v1");
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
__global__ void crossentropy_softmax_backward_kernel_v1(floatX *dlogits, const float *dlosses,
                                                        const floatX *probs,
                                                        const int32_t *targets, int V, int Vp) {
    const size_t row = blockIdx.x;
    const float dl = dlosses[row];
    const int target = targets[row];
    const floatX *p = probs + row * Vp;
    floatX *dz = dlogits + row * Vp;
    for (int i = threadIdx.x; i < V; i += blockDim.x)
        dz[i] = f2x(x2f(dz[i]) + (x2f(p[i]) - (i == target ? 1.0f : 0.0f)) * dl);
}

extern "C" void crossentropy_softmax_backward_v1(const GpuContext *ctx, floatX *dlogits,
                                                 const float *dlosses, const floatX *probs,
                                                 const int32_t *targets, int B, int T, int V,
                                                 int Vp) {
    crossentropy_softmax_backward_kernel_v1<<<B * T, SOFTMAX_THREADS, 0, ctx->stream>>>(
        dlogits, dlosses, probs, targets, V, Vp);
    gpu_check_launch(ctx, "crossentropy_softmax_backward_kernel_v1");
}
