// stochastic_round.cu: see stochastic_round.h.
#include "stochastic_round.cuh"
#include "stochastic_round.h"
#include "reduce.cuh"
#include "util/util.h"

__global__ void round_stochastic_kernel_v1(floatX *out, const float *x, size_t n, uint32_t step,
                                           uint64_t first_index) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = round_stochastic(x[i], step, first_index + i);
}

extern "C" void round_stochastic_v1(const GpuContext *ctx, floatX *out, const float *x,
                                    size_t n, uint32_t step, uint64_t first_index) {
    if (n == 0) return;
    const int threads = 256;
    round_stochastic_kernel_v1<<<blocks_for(n, threads), threads, 0, ctx->stream>>>(
        out, x, n, step, first_index);
    gpu_check_launch(ctx, "round_stochastic_kernel_v1");
}
