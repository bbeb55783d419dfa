// adamw.cu: see adamw.h.
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "adamw.h"
#include "reduce.cuh"
#include "util/util.h"
#include "adamw_clip.cuh"
#include "stochastic_round.cuh"
#include "vec.cuh"

// One thread per value. The bias corrections are computed once, on the host,
// by optimizer.c's adamw_bias_correction, and passed in.
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
    const float correction1 = adamw_bias_correction(cfg->beta1, t);
    const float correction2 = adamw_bias_correction(cfg->beta2, t);
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

// One thread: the parts' squares in double, in the parts' order.
__global__ void grad_norm_of_parts_kernel_v1(float *norm, const float *parts, int count) {
    double sum = 0.0;
    for (int i = 0; i < count; i++) sum += (double)parts[i] * (double)parts[i];
    *norm = (float)sqrt(sum);
}

extern "C" void grad_norm_of_parts_v1(const GpuContext *ctx, float *norm, const float *parts,
                                      int count) {
    grad_norm_of_parts_kernel_v1<<<1, 1, 0, ctx->stream>>>(norm, parts, count);
    gpu_check_launch(ctx, "grad_norm_of_parts_kernel_v1");
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
// grad_clip_factor (common/optim/optimizer.c) line for line. Chapter 09's
// adamw_begin_step_kernel_v2 calls it too: one definition, so that the two
// cannot drift apart.
__device__ float grad_clip_factor_device(float norm, float max_norm) {
    if (max_norm <= 0.0f) return 1.0f;
    float f = max_norm / (norm + 1e-6f);
    return f < 1.0f ? f : 1.0f;
}

// One thread.
__global__ void grad_clip_factor_kernel_v1(float *factor, const float *norm, float max_norm) {
    *factor = grad_clip_factor_device(*norm, max_norm);
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

// ---- chapter 09: one launch for every tensor ------------------------------------

// ANCHOR: adamw_begin_step
// The step's values, written where adamw_fused_kernel_v2 reads them (adamw.h
// says why memory): one thread, once a step, after the gradient norm.
__global__ void adamw_begin_step_kernel_v2(AdamWStep *step, const float *norm, float max_norm,
                                           int t, float lr, float correction1,
                                           float correction2) {
    step->t = t;
    step->lr = lr;
    step->correction1 = correction1;
    step->correction2 = correction2;
    step->clip_factor = grad_clip_factor_device(*norm, max_norm);
}
// ANCHOR_END: adamw_begin_step

extern "C" void adamw_begin_step_v2(const GpuContext *ctx, AdamWStep *step, const float *norm,
                                    float max_norm, int t, float lr, const AdamWConfig *cfg) {
    const float correction1 = adamw_bias_correction(cfg->beta1, t);
    const float correction2 = adamw_bias_correction(cfg->beta2, t);
    adamw_begin_step_kernel_v2<<<1, 1, 0, ctx->stream>>>(step, norm, max_norm, t, lr,
                                                         correction1, correction2);
    gpu_check_launch(ctx, "adamw_begin_step_kernel_v2");
}

// ANCHOR: adamw_begin_step_v3
// Chapter 11: the same values, none of them an argument that changes per
// step, so that a graph's replay of this launch is right for every step.
// A step past the table's end reads nothing beyond it: its lr is NaN, which
// makes the weights NaN and the next loss stop the run as diverged. The
// trainer never gets there (it checks every step against the table, graph
// or not); a caller that does sees it at once instead of training on
// whatever lies after the table.
__global__ void adamw_begin_step_kernel_v3(AdamWStep *step, float *norm, float max_norm,
                                           float grad_scale, const AdamWScheduleEntry *schedule,
                                           int schedule_steps) {
    const int t = step->t + 1;
    const AdamWScheduleEntry past_end = {NAN, NAN, NAN};
    const AdamWScheduleEntry e = t <= schedule_steps ? schedule[t - 1] : past_end;
    step->t = t;
    step->lr = e.lr;
    step->correction1 = e.correction1;
    step->correction2 = e.correction2;
    // Gradients summed over N micro-batches: the norm and the update are the
    // mean's. grad_scale = 1 changes no bit.
    const float mean_norm = grad_scale == 1.0f ? *norm : *norm * grad_scale;
    *norm = mean_norm;
    step->clip_factor = grad_clip_factor_device(mean_norm, max_norm) * grad_scale;
}
// ANCHOR_END: adamw_begin_step_v3

extern "C" void adamw_begin_step_v3(const GpuContext *ctx, AdamWStep *step, float *norm,
                                    float max_norm, float grad_scale,
                                    const AdamWScheduleEntry *schedule, int schedule_steps) {
    adamw_begin_step_kernel_v3<<<1, 1, 0, ctx->stream>>>(step, norm, max_norm, grad_scale,
                                                         schedule, schedule_steps);
    gpu_check_launch(ctx, "adamw_begin_step_kernel_v3");
}

#define ADAMW_FUSED_THREADS 256
// Values per block: one Vec (VEC_X values) per thread.
#define ADAMW_FUSED_BLOCK_VALUES ((size_t)ADAMW_FUSED_THREADS * VEC_X)
static_assert(ADAMW_FUSED_BLOCK_VALUES == ADAMW_FUSED_VALUES_PER_BLOCK, "adamw.h's count");

extern "C" void adamw_tensors_v2(AdamWTensors *table, const size_t *sizes, const int *decay,
                                 int count) {
    adamw_table_build(table, sizes, decay, count, ADAMW_FUSED_BLOCK_VALUES);
    // The moments are laid out as the parameters (chapter 10 packs them).
    for (int k = 0; k < table->count; k++) table->state_offset[k] = table->offset[k];
}

// What the update of one value reads besides its own state: the step's
// values (from memory) and the run's constants (arguments).
struct AdamWScalars {
    float lr, beta1, beta2, eps, wd, correction1, correction2, clip_factor;
};

// adamw_kernel_v1's arithmetic on one value, each rounding written out.
// v1 leaves its products and sums to nvcc, which contracts some of them
// into fused multiply-adds (a * b + c rounded once), and which ones depends
// on the code around them: v1's own expressions, compiled in this kernel's
// loops, came out as fma(beta1, m, (1 - beta1) * g) where v1 computes
// fma(1 - beta1, g, beta1 * m), a different rounding. So the operations
// below are those that nvcc (CUDA 13.0, -O3) makes of v1, read off its
// machine code (cuobjdump -sass): the _rn intrinsics round once each and are
// never contracted, whatever surrounds them. tests/gpu/test_kernels_adamw.c
// compares the two kernels bit for bit, and fails if a compiler ever makes
// v1 differently.
__device__ __forceinline__ void adamw_value(float g, float &m, float &v, float &p,
                                            const AdamWScalars &a) {
    m = __fmaf_rn(__fsub_rn(1.0f, a.beta1), g, __fmul_rn(a.beta1, m));
    v = __fmaf_rn(g, __fmul_rn(__fsub_rn(1.0f, a.beta2), g), __fmul_rn(a.beta2, v));
    const float m_hat = __fdiv_rn(m, a.correction1);
    const float v_hat = __fdiv_rn(v, a.correction2);
    const float adam = __fdiv_rn(m_hat, __fadd_rn(__fsqrt_rn(v_hat), a.eps));
    p = __fmaf_rn(-a.lr, __fmaf_rn(a.wd, p, adam), p);  // p - lr * (adam + wd * p)
}

// Value i alone: the scalar path. The weight is stored in params as r says
// (stochastic_round.cuh): to nearest, or stochastically (chapter 14).
__device__ __forceinline__ void adamw_one(floatX *params, float *master, const floatX *grads,
                                          float *m, float *v, size_t i, const AdamWScalars &a,
                                          const WeightRounding &r) {
    float mi = m[i], vi = v[i], p = master ? master[i] : x2f(params[i]);
    adamw_value(clipped_grad(grads[i], a.clip_factor), mi, vi, p, a);
    m[i] = mi;
    v[i] = vi;
    if (master) master[i] = p;
    params[i] = round_weight(p, r, i);
}

// VEC_X fp32 values at p (16-byte aligned) into registers, and back.
__device__ __forceinline__ void load_floats(float (&x)[VEC_X], const float *p) {
#pragma unroll
    for (int j = 0; j < VEC_X; j += 4) {
        const float4 f = *reinterpret_cast<const float4 *>(p + j);
        x[j] = f.x, x[j + 1] = f.y, x[j + 2] = f.z, x[j + 3] = f.w;
    }
}

__device__ __forceinline__ void store_floats(float *p, const float (&x)[VEC_X]) {
#pragma unroll
    for (int j = 0; j < VEC_X; j += 4)
        *reinterpret_cast<float4 *>(p + j) = make_float4(x[j], x[j + 1], x[j + 2], x[j + 3]);
}

// Values i .. i + VEC_X - 1, every address 16-byte aligned: one 16-byte
// load or store per buffer and Vec (two of them for fp32 in bf16).
__device__ __forceinline__ void adamw_vec(floatX *params, float *master, const floatX *grads,
                                          float *m, float *v, size_t i, const AdamWScalars &a,
                                          const WeightRounding &r) {
    const Vec g = load_vec(grads + i);
    float mi[VEC_X], vi[VEC_X], p[VEC_X];
    load_floats(mi, m + i);
    load_floats(vi, v + i);
    if (master) {
        load_floats(p, master + i);
    } else {
        const Vec w = load_vec(params + i);
#pragma unroll
        for (int j = 0; j < VEC_X; j++) p[j] = x2f(w.x[j]);
    }
    Vec out;
#pragma unroll
    for (int j = 0; j < VEC_X; j++) {
        adamw_value(clipped_grad(g.x[j], a.clip_factor), mi[j], vi[j], p[j], a);
        out.x[j] = round_weight(p[j], r, i + j);
    }
    store_floats(m + i, mi);
    store_floats(v + i, vi);
    if (master) store_floats(master + i, p);
    store_vec(params + i, out);
}

__device__ __forceinline__ int aligned16(const void *p) {
    return ((uintptr_t)p & 15) == 0;
}

// ANCHOR: adamw_fused
// One block: ADAMW_FUSED_BLOCK_VALUES values of one tensor (fewer at its
// end), VEC_X per thread. The table is read where the launch put it, in the
// constant bank of the arguments (__grid_constant__: no copy per thread);
// the step's values are read from memory, one 20-byte load per thread that
// the cache serves to every thread after the first.
__global__ void __launch_bounds__(ADAMW_FUSED_THREADS)
    adamw_fused_kernel_v2(const __grid_constant__ AdamWTensors table, floatX *params,
                          float *master, const floatX *grads, float *m, float *v,
                          const AdamWStep *step, float beta1, float beta2, float eps,
                          float weight_decay, int stochastic) {
    // The block's tensor: the last one that starts at or before this block.
    int k = 0;
    while (k + 1 < table.count && blockIdx.x >= table.first_block[k + 1]) k++;
    // The thread's first value, counted from the start of its tensor.
    const size_t n = table.size[k];
    const size_t i = (size_t)(blockIdx.x - table.first_block[k]) * ADAMW_FUSED_BLOCK_VALUES +
                     (size_t)threadIdx.x * VEC_X;
    if (i >= n) return;
    // The tensor's parameters, and its moments where the state keeps them.
    params += table.offset[k], grads += table.offset[k] + table.grad_shift[k];
    if (master) master += table.offset[k] + table.master_shift[k];
    m += table.state_offset[k], v += table.state_offset[k];
    const AdamWStep s = *step;
    const AdamWScalars a = {s.lr,  beta1, beta2, eps, table.decay[k] ? weight_decay : 0.0f,
                            s.correction1, s.correction2, s.clip_factor};
    // Chapter 14: without master weights, the weights stochastically rounded
    // when asked, each value's random bits from the step and its place in
    // the whole parameter buffer (the tensor's offset, then i).
    const WeightRounding r = {stochastic && !master, (uint32_t)s.t, table.offset[k]};
    if (i + VEC_X <= n && aligned16(params + i) && aligned16(grads + i) &&
        aligned16(m + i) && aligned16(v + i) && (!master || aligned16(master + i))) {
        adamw_vec(params, master, grads, m, v, i, a, r);
    } else {
        for (size_t j = i; j < n && j < i + VEC_X; j++)
            adamw_one(params, master, grads, m, v, j, a, r);
    }
}
// ANCHOR_END: adamw_fused

extern "C" void adamw_fused_v2(const GpuContext *ctx, const AdamWTensors *table, floatX *params,
                               float *master, const floatX *grads, float *m, float *v,
                               const AdamWStep *step, const AdamWConfig *cfg, int stochastic) {
    if (table->blocks == 0) return;  // no values at all
    adamw_fused_kernel_v2<<<table->blocks, ADAMW_FUSED_THREADS, 0, ctx->stream>>>(
        *table, params, master, grads, m, v, step, cfg->beta1, cfg->beta2, cfg->eps,
        cfg->weight_decay, stochastic);
    gpu_check_launch(ctx, "adamw_fused_kernel_v2");
}
