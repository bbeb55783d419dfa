// layernorm_forward.cu: chapter 00's exercise, the layernorm forward pass
// (declared in kernels/layernorm.h; the backward pass is kernels/layernorm.cu).
// solutions/00_baseline/ has it complete, and the trainer runs that;
// exercises/00_baseline/ has it with the marked region cut out.
#include "exercise.h"
#include "layernorm.h"
#include "reduce.cuh"

#define LAYERNORM_EPS 1e-5f

// One warp per row: the lanes stride over the channels, so each load of 32
// consecutive values is one coalesced transaction, and the row's sums are
// warp shuffles, with no shared memory or block barriers.
// inp, weight, bias and out are floatX, the trainer's storage type
// (kernels/precision.h): float in chapters 00 and 01, bf16 from chapter 02 on.
// The arithmetic is fp32 in every build: x2f(v) reads a stored value as a
// float, f2x(f) rounds a float for storing; for float storage both do
// nothing. mean and rstd are always float.
__global__ void layernorm_forward_kernel_v1(floatX *out, float *mean, float *rstd,
                                            const floatX *inp, const floatX *weight,
                                            const floatX *bias, int BT, int C) {
    // EXERCISE BEGIN: one warp per row: mean, variance around it, normalize, scale, shift
    // EXERCISE STUB: exercise_fill_nan(out, (size_t)BT * C);
    // EXERCISE STUB: exercise_fill_nan(mean, BT);
    // EXERCISE STUB: exercise_fill_nan(rstd, BT);
    const int lane = threadIdx.x % WARP_SIZE;
    const int row = blockIdx.x * (blockDim.x / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    if (row >= BT) return;  // the whole warp leaves together: shuffles stay full
    const floatX *x = inp + (size_t)row * C;
    float sum = 0.0f;
    for (int i = lane; i < C; i += WARP_SIZE) sum += x2f(x[i]);
    const float m = warp_sum(sum) / C;
    float sq = 0.0f;
    for (int i = lane; i < C; i += WARP_SIZE) {
        float d = x2f(x[i]) - m;
        sq += d * d;
    }
    const float var = warp_sum(sq) / C;
    // 1/sqrtf rather than rsqrtf: rsqrtf is an approximation (2 ulp), and
    // chapter 00 computes what the CPU computes.
    const float s = 1.0f / sqrtf(var + LAYERNORM_EPS);
    floatX *y = out + (size_t)row * C;
    for (int i = lane; i < C; i += WARP_SIZE)
        y[i] = f2x((x2f(x[i]) - m) * s * x2f(weight[i]) + x2f(bias[i]));
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = s;
    }
    // EXERCISE END
}

extern "C" void layernorm_forward_v1(const GpuContext *ctx, floatX *out, float *mean,
                                     float *rstd, const floatX *inp, const floatX *weight,
                                     const floatX *bias, int B, int T, int C) {
    // EXERCISE LAUNCH-CHECK: layernorm forward
    const int threads = 256, rows_per_block = threads / WARP_SIZE;
    layernorm_forward_kernel_v1<<<blocks_for((size_t)B * T, rows_per_block), threads, 0,
                                  ctx->stream>>>(out, mean, rstd, inp, weight, bias, B * T, C);
    gpu_check_launch(ctx, "layernorm_forward_kernel_v1");
}
