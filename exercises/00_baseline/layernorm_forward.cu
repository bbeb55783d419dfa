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
// consecutive floats is one coalesced transaction, and the row's sums are
// warp shuffles, with no shared memory or block barriers.
__global__ void layernorm_forward_kernel_v1(float *out, float *mean, float *rstd,
                                            const float *inp, const float *weight,
                                            const float *bias, int BT, int C) {
    // TODO(exercise 00_baseline): one warp per row: mean, variance around it, normalize, scale, shift
    // Replace this stub, which makes the tests fail, with your code.
    exercise_fill_nan(out, (size_t)BT * C);
    exercise_fill_nan(mean, BT);
    exercise_fill_nan(rstd, BT);
}

extern "C" void layernorm_forward_v1(const GpuContext *ctx, float *out, float *mean, float *rstd,
                                     const float *inp, const float *weight, const float *bias,
                                     int B, int T, int C) {
    // TODO(exercise 00_baseline): delete this call once the code above is written.
    exercise_unfinished("00_baseline", "layernorm forward",
                        "one warp per row: mean, variance around it, normalize, scale, shift");
    const int threads = 256, rows_per_block = threads / WARP_SIZE;
    layernorm_forward_kernel_v1<<<blocks_for((size_t)B * T, rows_per_block), threads, 0,
                                  ctx->stream>>>(out, mean, rstd, inp, weight, bias, B * T, C);
    gpu_check_launch(ctx, "layernorm_forward_kernel_v1");
}
