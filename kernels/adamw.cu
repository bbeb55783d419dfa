// adamw.cu: see adamw.h.
#include <math.h>

#include "adamw.h"
#include "reduce.cuh"

// One thread per value. The bias corrections are computed once, on the host,
// exactly as optimizer.c computes them (powf on the CPU), and passed in.
// Results can still differ from the CPU in the last bit: nvcc contracts
// b1 * m + (1 - b1) * g into a fused multiply-add, which rounds once where
// the CPU rounds twice.
// With a master copy (see adamw.h) the weight is read from and written to
// master in fp32, and params gets it rounded to floatX; without one, params
// is the weight. The branch is the same for every thread of a launch.
__global__ void adamw_kernel_v1(floatX *params, float *master, const floatX *grads, float *m,
                                float *v, size_t n, float lr, float beta1, float beta2, float eps,
                                float wd, float correction1, float correction2) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float g = x2f(grads[i]);
    float mi = beta1 * m[i] + (1.0f - beta1) * g;
    float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float m_hat = mi / correction1;
    float v_hat = vi / correction2;
    float p = master ? master[i] : x2f(params[i]);
    p = p - lr * (m_hat / (sqrtf(v_hat) + eps) + wd * p);
    if (master) master[i] = p;
    params[i] = f2x(p);
}

extern "C" void adamw_update_v1(const GpuContext *ctx, floatX *params, float *master,
                                const floatX *grads, float *m, float *v, size_t n, float lr,
                                const AdamWConfig *cfg, int decay, int t) {
    const float correction1 = 1.0f - powf(cfg->beta1, (float)t);
    const float correction2 = 1.0f - powf(cfg->beta2, (float)t);
    const float wd = decay ? cfg->weight_decay : 0.0f;
    const int threads = 256;
    adamw_kernel_v1<<<blocks_for(n, threads), threads, 0, ctx->stream>>>(
        params, master, grads, m, v, n, lr, cfg->beta1, cfg->beta2, cfg->eps, wd, correction1,
        correction2);
    gpu_check_launch(ctx, "adamw_kernel_v1");
}

#define GRAD_NORM_THREADS 256

// The squares are added in fp32 whatever floatX is: each block's partial.
__global__ void sum_squares_partial_kernel_v1(float *partial, const floatX *x, size_t n) {
    float sum = 0.0f;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float xi = x2f(x[i]);
        sum += xi * xi;
    }
    sum = block_sum(sum);
    if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

// One warp: lane l adds partials l, l+32, ... in double, then the warp's
// butterfly adds the 32 lanes. Double, because the partials of a large
// model's gradient differ by orders of magnitude and a float sum of them
// would lose the small ones; it costs nothing at 1024 values.
__global__ void sum_partials_sqrt_kernel_v1(float *norm, const float *partial, int count) {
    double sum = 0.0;
    for (int i = threadIdx.x; i < count; i += WARP_SIZE) sum += (double)partial[i];
    sum = warp_sum_double(sum);
    if (threadIdx.x == 0) *norm = (float)sqrt(sum);
}

extern "C" void grad_norm_v1(const GpuContext *ctx, float *norm, float *scratch,
                             const floatX *grads, size_t n) {
    unsigned int blocks = blocks_for(n, GRAD_NORM_THREADS);
    if (blocks > GRAD_NORM_MAX_BLOCKS) blocks = GRAD_NORM_MAX_BLOCKS;
    if (blocks == 0) blocks = 1;  // n == 0: one block writes a zero partial
    sum_squares_partial_kernel_v1<<<blocks, GRAD_NORM_THREADS, 0, ctx->stream>>>(scratch, grads,
                                                                                 n);
    gpu_check_launch(ctx, "sum_squares_partial_kernel_v1");
    sum_partials_sqrt_kernel_v1<<<1, WARP_SIZE, 0, ctx->stream>>>(norm, scratch, (int)blocks);
    gpu_check_launch(ctx, "sum_partials_sqrt_kernel_v1");
}

__global__ void scale_kernel_v1(floatX *x, size_t n, float factor) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = f2x(x2f(x[i]) * factor);
}

extern "C" void scale_v1(const GpuContext *ctx, floatX *x, size_t n, float factor) {
    const int threads = 256;
    scale_kernel_v1<<<blocks_for(n, threads), threads, 0, ctx->stream>>>(x, n, factor);
    gpu_check_launch(ctx, "scale_kernel_v1");
}

// ANCHOR: clip_on_device
// grad_clip_factor (common/optimizer.c) line for line: one thread.
__global__ void grad_clip_factor_kernel_v1(float *factor, const float *norm, float max_norm) {
    if (max_norm <= 0.0f) {
        *factor = 1.0f;
        return;
    }
    float f = max_norm / (*norm + 1e-6f);
    *factor = f < 1.0f ? f : 1.0f;
}

// scale_kernel_v1 with the factor read from memory. Every thread reads the
// same float (one cached load) and, when it is not below 1 (the common case:
// no clipping; also a NaN norm, as on the host), returns at once. A grid of
// a few blocks per SM strides over x, so that this early return costs a few
// microseconds, not a grid of one thread per value.
__global__ void scale_by_device_factor_kernel_v1(floatX *x, size_t n, const float *factor) {
    const float f = *factor;
    if (!(f < 1.0f)) return;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] = f2x(x2f(x[i]) * f);
}
// ANCHOR_END: clip_on_device

extern "C" void grad_clip_factor_v1(const GpuContext *ctx, float *factor, const float *norm,
                                    float max_norm) {
    grad_clip_factor_kernel_v1<<<1, 1, 0, ctx->stream>>>(factor, norm, max_norm);
    gpu_check_launch(ctx, "grad_clip_factor_kernel_v1");
}

extern "C" void scale_by_device_factor_v1(const GpuContext *ctx, floatX *x, size_t n,
                                          const float *factor) {
    const int threads = 256;
    unsigned int blocks = blocks_for(n, threads), most = 8u * (unsigned int)ctx->sm_count;
    if (most > 0 && blocks > most) blocks = most;
    scale_by_device_factor_kernel_v1<<<blocks, threads, 0, ctx->stream>>>(x, n, factor);
    gpu_check_launch(ctx, "scale_by_device_factor_kernel_v1");
}
