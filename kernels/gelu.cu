// gelu.cu: see gelu.h. The arithmetic is the CPU reference's, line for line,
// in fp32: each value is loaded with x2f and stored with f2x (precision.h).
#include "gelu.h"
#include "reduce.cuh"

#define GELU_SCALE 0.7978845608028654f  // sqrt(2/pi)
#define GELU_CUBIC 0.044715f

__global__ void gelu_forward_kernel_v1(floatX *out, const floatX *inp, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = x2f(inp[i]);
    float u = GELU_SCALE * (x + GELU_CUBIC * x * x * x);
    out[i] = f2x(0.5f * x * (1.0f + tanhf(u)));
}

// d gelu(x) / dx, the CPU reference's formula.
__device__ __forceinline__ float gelu_grad(float x) {
    float u = GELU_SCALE * (x + GELU_CUBIC * x * x * x);
    float th = tanhf(u);
    float sech2 = 1.0f - th * th;
    float du_dx = GELU_SCALE * (1.0f + 3.0f * GELU_CUBIC * x * x);
    return 0.5f * (1.0f + th) + 0.5f * x * sech2 * du_dx;
}

__global__ void gelu_backward_kernel_v1(floatX *dinp, const floatX *inp, const floatX *dout,
                                        size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    dinp[i] = f2x(x2f(dinp[i]) + gelu_grad(x2f(inp[i])) * x2f(dout[i]));
}

// gelu_backward_kernel_v1's arithmetic, in place: d is dout on the way in
// and dinp on the way out (each thread reads its element before writing it).
__global__ void gelu_backward_inplace_kernel_v1(floatX *d, const floatX *inp, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) d[i] = f2x(gelu_grad(x2f(inp[i])) * x2f(d[i]));
}

extern "C" void gelu_forward_v1(const GpuContext *ctx, floatX *out, const floatX *inp,
                                size_t n) {
    const int threads = 256;
    gelu_forward_kernel_v1<<<blocks_for(n, threads), threads, 0, ctx->stream>>>(out, inp, n);
    gpu_check_launch(ctx, "gelu_forward_kernel_v1");
}

extern "C" void gelu_backward_v1(const GpuContext *ctx, floatX *dinp, const floatX *inp,
                                 const floatX *dout, size_t n) {
    const int threads = 256;
    gelu_backward_kernel_v1<<<blocks_for(n, threads), threads, 0, ctx->stream>>>(dinp, inp, dout,
                                                                                  n);
    gpu_check_launch(ctx, "gelu_backward_kernel_v1");
}

extern "C" void gelu_backward_inplace_v1(const GpuContext *ctx, floatX *d, const floatX *inp,
                                         size_t n) {
    const int threads = 256;
    gelu_backward_inplace_kernel_v1<<<blocks_for(n, threads), threads, 0, ctx->stream>>>(d, inp,
                                                                                          n);
    gpu_check_launch(ctx, "gelu_backward_inplace_kernel_v1");
}
