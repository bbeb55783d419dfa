// gelu.cu: see gelu.h. The arithmetic is the CPU reference's, line for line.
#include "gelu.h"
#include "reduce.cuh"

#define GELU_SCALE 0.7978845608028654f  // sqrt(2/pi)
#define GELU_CUBIC 0.044715f

__global__ void gelu_forward_kernel_v1(float *out, const float *inp, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = inp[i];
    float u = GELU_SCALE * (x + GELU_CUBIC * x * x * x);
    out[i] = 0.5f * x * (1.0f + tanhf(u));
}

__global__ void gelu_backward_kernel_v1(float *dinp, const float *inp, const float *dout,
                                        size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = inp[i];
    float u = GELU_SCALE * (x + GELU_CUBIC * x * x * x);
    float th = tanhf(u);
    float sech2 = 1.0f - th * th;
    float du_dx = GELU_SCALE * (1.0f + 3.0f * GELU_CUBIC * x * x);
    float grad = 0.5f * (1.0f + th) + 0.5f * x * sech2 * du_dx;
    dinp[i] += grad * dout[i];
}

extern "C" void gelu_forward_v1(const GpuContext *ctx, float *out, const float *inp, size_t n) {
    const int threads = 256;
    gelu_forward_kernel_v1<<<blocks_for(n, threads), threads, 0, ctx->stream>>>(out, inp, n);
    gpu_check_launch(ctx, "gelu_forward_kernel_v1");
}

extern "C" void gelu_backward_v1(const GpuContext *ctx, float *dinp, const float *inp,
                                 const float *dout, size_t n) {
    const int threads = 256;
    gelu_backward_kernel_v1<<<blocks_for(n, threads), threads, 0, ctx->stream>>>(dinp, inp, dout,
                                                                                  n);
    gpu_check_launch(ctx, "gelu_backward_kernel_v1");
}
