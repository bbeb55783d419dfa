// residual.cu: see residual.h. Single adds, rounded as on the CPU, so these
// two are bit-identical to the CPU reference.
#include "residual.h"
#include "reduce.cuh"

__global__ void residual_forward_kernel_v1(float *out, const float *a, const float *b, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

__global__ void residual_backward_kernel_v1(float *da, float *db, const float *dout, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float d = dout[i];
    da[i] += d;
    db[i] += d;
}

extern "C" void residual_forward_v1(const GpuContext *ctx, float *out, const float *a,
                                    const float *b, size_t n) {
    const int threads = 256;
    residual_forward_kernel_v1<<<blocks_for(n, threads), threads, 0, ctx->stream>>>(out, a, b, n);
    gpu_check_launch(ctx, "residual_forward_kernel_v1");
}

extern "C" void residual_backward_v1(const GpuContext *ctx, float *da, float *db,
                                     const float *dout, size_t n) {
    const int threads = 256;
    residual_backward_kernel_v1<<<blocks_for(n, threads), threads, 0, ctx->stream>>>(da, db, dout,
                                                                                      n);
    gpu_check_launch(ctx, "residual_backward_kernel_v1");
}
