// residual.cu: see residual.h. Single adds, rounded as on the CPU, so in the
// fp32 build these two are bit-identical to the CPU reference. (In bf16 the
// add is exact in fp32 and rounded once, to bf16, when stored.)
#include "residual.h"
#include "reduce.cuh"

__global__ void residual_forward_kernel_v1(floatX *out, const floatX *a, const floatX *b,
                                           size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = f2x(x2f(a[i]) + x2f(b[i]));
}

__global__ void residual_backward_kernel_v1(floatX *da, floatX *db, const floatX *dout,
                                            size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float d = x2f(dout[i]);
    da[i] = f2x(x2f(da[i]) + d);
    db[i] = f2x(x2f(db[i]) + d);
}

extern "C" void residual_forward_v1(const GpuContext *ctx, floatX *out, const floatX *a,
                                    const floatX *b, size_t n) {
    const int threads = 256;
    residual_forward_kernel_v1<<<blocks_for(n, threads), threads, 0, ctx->stream>>>(out, a, b, n);
    gpu_check_launch(ctx, "residual_forward_kernel_v1");
}

extern "C" void residual_backward_v1(const GpuContext *ctx, floatX *da, floatX *db,
                                     const floatX *dout, size_t n) {
    const int threads = 256;
    residual_backward_kernel_v1<<<blocks_for(n, threads), threads, 0, ctx->stream>>>(da, db, dout,
                                                                                      n);
    gpu_check_launch(ctx, "residual_backward_kernel_v1");
}
