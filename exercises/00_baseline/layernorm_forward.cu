// GENERATED from solutions/00_baseline/layernorm_forward.cu by tools/make_exercises.py.
// Yours to write: the regions marked TODO(exercise 00_baseline); what to do and
// how to test it: exercises/00_baseline/README.md.
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
    // TODO(exercise 00_baseline): one warp per row: mean, variance around it, normalize, scale, shift
    // Replace this stub, which makes the tests fail, with your code.
    exercise_fill_nan(out, (size_t)BT * C);
    exercise_fill_nan(mean, BT);
    exercise_fill_nan(rstd, BT);
}

extern "C" void layernorm_forward_v1(const GpuContext *ctx, floatX *out, float *mean,
                                     float *rstd, const floatX *inp, const floatX *weight,
                                     const floatX *bias, int B, int T, int C) {
    // TODO(exercise 00_baseline): delete this call once the code above is written.
    exercise_unfinished("00_baseline", "layernorm forward",
                        "one warp per row: mean, variance around it, normalize, scale, shift");
    const int threads = 256, rows_per_block = threads / WARP_SIZE;
    layernorm_forward_kernel_v1<<<blocks_for((size_t)B * T, rows_per_block), threads, 0,
                                  ctx->stream>>>(out, mean, rstd, inp, weight, bias, B * T, C);
    gpu_check_launch(ctx, "layernorm_forward_kernel_v1");
}
