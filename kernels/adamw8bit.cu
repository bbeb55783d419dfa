// adamw8bit.cu: see adamw8bit.h.
#include <math.h>
#include <stdint.h>

#include "adamw8bit.h"
#include "optim/quantize8.h"
#include "reduce.cuh"
#include "adamw_clip.cuh"
#include "stochastic_round.cuh"
#include "vec.cuh"

#define ADAMW8BIT_THREADS 256
#define ADAMW8BIT_WARPS (ADAMW8BIT_THREADS / WARP_SIZE)
// Values per lane: a warp's 32 lanes cover one block of Q8_BLOCK values.
#define LANE_VALUES (Q8_BLOCK / WARP_SIZE)
static_assert(LANE_VALUES == 8, "one block of 256 values per warp, 8 per lane");
static_assert(ADAMW8BIT_THREADS == Q8_MAP_SIZE, "each thread builds one value of each map");

// ANCHOR: adamw8bit_maps
// The two maps, built by every thread block into its shared memory, one
// value of each per thread, with quantize8.h's own function: the same
// arithmetic as the host's q8_map, so the same floats.
//
// Shared memory, not constant memory: quantizing is a binary search, and
// after its first step the 32 lanes of a warp look up 32 different entries.
// The constant cache serves one address per cycle (divergent reads are
// serialized, up to 32-fold), where shared memory serves 32 different
// addresses at once (bank conflicts aside). Built here rather than copied
// from the host: nothing to initialize before the first launch, and nothing
// that a CUDA graph (chapter 11) or a second GPU must know about; it costs
// each thread block two values per thread, once, before its loop over
// blocks of values.
__device__ __forceinline__ void build_maps(float *signed_map, float *unsigned_map) {
    signed_map[threadIdx.x] = q8_map_value(Q8_SIGNED, (int)threadIdx.x);
    unsigned_map[threadIdx.x] = q8_map_value(Q8_UNSIGNED, (int)threadIdx.x);
    __syncthreads();
}
// ANCHOR_END: adamw8bit_maps


// The two maps, in the thread block's shared memory.
struct Q8Maps {
    const float *signed_map, *unsigned_map;
};

struct Adam8Scalars {
    float lr, beta1, beta2, eps, wd, correction1, correction2;
};

// ANCHOR: adamw8bit_value
// adamw_update's arithmetic (common/optim/optimizer.c) on one value, each rounding
// written out in the C code's order: its products and sums, left to right,
// each rounded to float, none fused. (adamw_kernel_v1 leaves its expressions
// to nvcc, which fuses b1 * m + (1 - b1) * g into a fused multiply-add,
// rounded once; the CPU rounds twice.) Every operation here is IEEE's
// correctly rounded one, as the CPU's are, so the new m, v and weight have
// the CPU's bits, and so do their bytes after quantization.
__device__ __forceinline__ void adamw_value(float g, float &m, float &v, float &p,
                                            const Adam8Scalars &a) {
    // m = b1 * m + (1 - b1) * g
    m = __fadd_rn(__fmul_rn(a.beta1, m), __fmul_rn(__fsub_rn(1.0f, a.beta1), g));
    // v = b2 * v + (1 - b2) * g * g, where C reads (1 - b2) * g * g as ((1 - b2) * g) * g
    v = __fadd_rn(__fmul_rn(a.beta2, v), __fmul_rn(__fmul_rn(__fsub_rn(1.0f, a.beta2), g), g));
    const float m_hat = __fdiv_rn(m, a.correction1);
    const float v_hat = __fdiv_rn(v, a.correction2);
    const float adam = __fdiv_rn(m_hat, __fadd_rn(__fsqrt_rn(v_hat), a.eps));
    // p -= lr * (adam + wd * p)
    p = __fsub_rn(p, __fmul_rn(a.lr, __fadd_rn(adam, __fmul_rn(a.wd, p))));
}
// ANCHOR_END: adamw8bit_value

// A lane's 8 bytes of m or v: one 8-byte load or store.
struct alignas(8) Bytes8 {
    uint8_t b[LANE_VALUES];
};

// What a lane reads and writes: its values' gradient, weight and indices.
struct Lane {
    float g[LANE_VALUES], p[LANE_VALUES];
    uint8_t m[LANE_VALUES], v[LANE_VALUES];
};

__device__ __forceinline__ int aligned(const void *p, int bytes) {
    return ((uintptr_t)p & (uintptr_t)(bytes - 1)) == 0;
}

// Values i .. i + 7, every address aligned: 16-byte loads of the gradients,
// weights and master weights, 8-byte loads of the indices.
__device__ __forceinline__ void load_lane_vec(Lane &l, const floatX *params, const float *master,
                                              const floatX *grads, const uint8_t *m_q,
                                              const uint8_t *v_q, size_t i, float clip) {
#pragma unroll
    for (int k = 0; k < LANE_VALUES; k += VEC_X) {
        const Vec g = load_vec(grads + i + k);
#pragma unroll
        for (int j = 0; j < VEC_X; j++) l.g[k + j] = clipped_grad(g.x[j], clip);
    }
    if (master) {
#pragma unroll
        for (int k = 0; k < LANE_VALUES; k += 4) {
            const float4 f = *reinterpret_cast<const float4 *>(master + i + k);
            l.p[k] = f.x, l.p[k + 1] = f.y, l.p[k + 2] = f.z, l.p[k + 3] = f.w;
        }
    } else {
#pragma unroll
        for (int k = 0; k < LANE_VALUES; k += VEC_X) {
            const Vec w = load_vec(params + i + k);
#pragma unroll
            for (int j = 0; j < VEC_X; j++) l.p[k + j] = x2f(w.x[j]);
        }
    }
    const Bytes8 m = *reinterpret_cast<const Bytes8 *>(m_q + i);
    const Bytes8 v = *reinterpret_cast<const Bytes8 *>(v_q + i);
#pragma unroll
    for (int j = 0; j < LANE_VALUES; j++) l.m[j] = m.b[j], l.v[j] = v.b[j];
}

__device__ __forceinline__ void store_lane_vec(const Lane &l, floatX *params, float *master,
                                               uint8_t *m_q, uint8_t *v_q, size_t i,
                                               const WeightRounding &r) {
    if (master) {
#pragma unroll
        for (int k = 0; k < LANE_VALUES; k += 4)
            *reinterpret_cast<float4 *>(master + i + k) =
                make_float4(l.p[k], l.p[k + 1], l.p[k + 2], l.p[k + 3]);
    }
#pragma unroll
    for (int k = 0; k < LANE_VALUES; k += VEC_X) {
        Vec w;
#pragma unroll
        for (int j = 0; j < VEC_X; j++) w.x[j] = round_weight(l.p[k + j], r, i + k + j);
        store_vec(params + i + k, w);
    }
    Bytes8 m, v;
#pragma unroll
    for (int j = 0; j < LANE_VALUES; j++) m.b[j] = l.m[j], v.b[j] = l.v[j];
    *reinterpret_cast<Bytes8 *>(m_q + i) = m;
    *reinterpret_cast<Bytes8 *>(v_q + i) = v;
}

// The first `count` values from i, one at a time (the end of a tensor, or
// addresses that are not aligned).
__device__ __forceinline__ void load_lane_scalar(Lane &l, const floatX *params,
                                                 const float *master, const floatX *grads,
                                                 const uint8_t *m_q, const uint8_t *v_q,
                                                 size_t i, int count, float clip) {
#pragma unroll
    for (int j = 0; j < LANE_VALUES; j++) {
        if (j < count) {
            l.g[j] = clipped_grad(grads[i + j], clip);
            l.p[j] = master ? master[i + j] : x2f(params[i + j]);
            l.m[j] = m_q[i + j];
            l.v[j] = v_q[i + j];
        }
    }
}

__device__ __forceinline__ void store_lane_scalar(const Lane &l, floatX *params, float *master,
                                                  uint8_t *m_q, uint8_t *v_q, size_t i,
                                                  int count, const WeightRounding &r) {
#pragma unroll
    for (int j = 0; j < LANE_VALUES; j++) {
        if (j < count) {
            if (master) master[i + j] = l.p[j];
            params[i + j] = round_weight(l.p[j], r, i + j);
            m_q[i + j] = l.m[j];
            v_q[i + j] = l.v[j];
        }
    }
}

// ANCHOR: adamw8bit_block
// One block of up to 256 values, by one warp: the pointers point at the
// block's first value and at its two scales; values is 256, or fewer at the
// end of a tensor. Lane l holds values 8l .. 8l + 7. The weights are stored
// in params as r says (stochastic_round.cuh), r.base being the index of the
// block's first value in the whole parameter buffer.
__device__ __forceinline__ void adamw8bit_block(floatX *params, float *master,
                                                const floatX *grads, uint8_t *m_q, uint8_t *v_q,
                                                float *m_absmax, float *v_absmax, size_t values,
                                                const Adam8Scalars &a, float clip,
                                                const Q8Maps &q, const WeightRounding &r) {
    const int lane = (int)threadIdx.x % WARP_SIZE;
    const size_t i = (size_t)lane * LANE_VALUES;
    const int count = i >= values ? 0 : values - i < LANE_VALUES ? (int)(values - i) : LANE_VALUES;
    const int vec = count == LANE_VALUES && aligned(grads + i, 16) && aligned(params + i, 16) &&
                    (!master || aligned(master + i, 16)) && aligned(m_q + i, 8) &&
                    aligned(v_q + i, 8);
    // The block's old scales: every lane reads them here, before lane 0
    // overwrites them below (after the warp maxima, which every lane
    // reaches only once it has used them).
    const float m_scale = *m_absmax, v_scale = *v_absmax;
    Lane l;
    if (vec) load_lane_vec(l, params, master, grads, m_q, v_q, i, clip);
    else load_lane_scalar(l, params, master, grads, m_q, v_q, i, count, clip);
    // Dequantize, update, and the new scales (values past the tensor's end
    // count as 0).
    float m[LANE_VALUES], v[LANE_VALUES], m_max = 0.0f, v_max = 0.0f;
#pragma unroll
    for (int j = 0; j < LANE_VALUES; j++) {
        if (j < count) {
            m[j] = q8_dequantize_value(q.signed_map, l.m[j], m_scale);
            v[j] = q8_dequantize_value(q.unsigned_map, l.v[j], v_scale);
            adamw_value(l.g[j], m[j], v[j], l.p[j], a);
            m_max = fmaxf(m_max, fabsf(m[j]));
            v_max = fmaxf(v_max, fabsf(v[j]));
        }
    }
    m_max = warp_max(m_max);
    v_max = warp_max(v_max);
    // Requantize with the new scales.
#pragma unroll
    for (int j = 0; j < LANE_VALUES; j++) {
        if (j < count) {
            l.m[j] = q8_quantize_value(q.signed_map, m[j], m_max);
            l.v[j] = q8_quantize_value(q.unsigned_map, v[j], v_max);
        }
    }
    if (vec) store_lane_vec(l, params, master, m_q, v_q, i, r);
    else store_lane_scalar(l, params, master, m_q, v_q, i, count, r);
    if (lane == 0) {
        *m_absmax = m_max;
        *v_absmax = v_max;
    }
}
// ANCHOR_END: adamw8bit_block

// ANCHOR: adamw8bit_kernel
// One tensor. Each warp takes blocks of 256 values, one after another (a
// grid-stride loop over blocks, so that each thread block builds its maps
// once for many blocks).
__global__ void __launch_bounds__(ADAMW8BIT_THREADS)
    adamw8bit_kernel_v1(floatX *params, float *master, const floatX *grads, uint8_t *m_q,
                        uint8_t *v_q, float *m_absmax, float *v_absmax, size_t n,
                        Adam8Scalars a, const float *clip_factor) {
    __shared__ float signed_map[Q8_MAP_SIZE], unsigned_map[Q8_MAP_SIZE];
    build_maps(signed_map, unsigned_map);
    const float clip = clip_factor ? *clip_factor : 1.0f;
    const Q8Maps q = {signed_map, unsigned_map};
    const size_t blocks = (n + Q8_BLOCK - 1) / Q8_BLOCK;
    const WeightRounding nearest = {0, 0, 0};
    for (size_t b = (size_t)blockIdx.x * ADAMW8BIT_WARPS + threadIdx.x / WARP_SIZE; b < blocks;
         b += (size_t)gridDim.x * ADAMW8BIT_WARPS) {
        const size_t first = b * Q8_BLOCK;
        adamw8bit_block(params + first, master ? master + first : NULL, grads + first,
                        m_q + first, v_q + first, m_absmax + b, v_absmax + b, n - first, a, clip,
                        q, nearest);
    }
}
// ANCHOR_END: adamw8bit_kernel

// Thread blocks per SM that the fused kernel is compiled for: four (64
// registers a thread, a few spilled) rather than the two that its 93
// registers would allow, because the kernel is latency-bound and needs the
// warps: 1.47 ms at two, 1.21 at three, 1.16 at four on the H100
// (results/h100/adamw8bit/occupancy_sweep.txt, which -D sets it for).
#ifndef ADAMW8BIT_FUSED_MIN_BLOCKS
#define ADAMW8BIT_FUSED_MIN_BLOCKS 4
#endif

// ANCHOR: adamw8bit_fused
// Chapter 10's update of every quantized tensor in one launch: the table's
// blocks are blocks of 256 values (first_block counts them), one per warp,
// in a grid-stride loop; the step's values come from device memory, as in
// adamw_fused_kernel_v2.
__global__ void __launch_bounds__(ADAMW8BIT_THREADS, ADAMW8BIT_FUSED_MIN_BLOCKS)
    adamw8bit_fused_kernel_v2(const __grid_constant__ AdamWTensors table, floatX *params,
                              float *master, const floatX *grads, uint8_t *m_q, uint8_t *v_q,
                              float *m_absmax, float *v_absmax, const AdamWStep *step,
                              float beta1, float beta2, float eps, float weight_decay,
                              int stochastic) {
    __shared__ float signed_map[Q8_MAP_SIZE], unsigned_map[Q8_MAP_SIZE];
    build_maps(signed_map, unsigned_map);
    const Q8Maps q = {signed_map, unsigned_map};
    const AdamWStep s = *step;
    for (unsigned int b = blockIdx.x * ADAMW8BIT_WARPS + threadIdx.x / WARP_SIZE;
         b < table.blocks; b += gridDim.x * ADAMW8BIT_WARPS) {
        int k = 0;
        while (k + 1 < table.count && b >= table.first_block[k + 1]) k++;
        const size_t local = (size_t)(b - table.first_block[k]) * Q8_BLOCK;
        const size_t first = table.offset[k] + local, state = table.state_offset[k] + local;
        const Adam8Scalars a = {s.lr, beta1, beta2, eps, table.decay[k] ? weight_decay : 0.0f,
                                s.correction1, s.correction2};
        // Chapter 14: without master weights, stochastic rounding when asked
        // (adamw_fused_kernel_v2 does the same).
        const WeightRounding r = {stochastic && !master, (uint32_t)s.t, first};
        adamw8bit_block(params + first, master ? master + first + table.master_shift[k] : NULL,
                        grads + first + table.grad_shift[k],
                        m_q + state, v_q + state, m_absmax + state / Q8_BLOCK,
                        v_absmax + state / Q8_BLOCK, table.size[k] - local, a, s.clip_factor,
                        q, r);
    }
}
// ANCHOR_END: adamw8bit_fused

extern "C" void adamw8bit_fused_v2(const GpuContext *ctx, const AdamWTensors *table,
                                   floatX *params, float *master, const floatX *grads,
                                   uint8_t *m_q, uint8_t *v_q, float *m_absmax, float *v_absmax,
                                   const AdamWStep *step, const AdamWConfig *cfg,
                                   int stochastic) {
    if (table->blocks == 0) return;
    unsigned int blocks = (table->blocks + ADAMW8BIT_WARPS - 1) / ADAMW8BIT_WARPS;
    const unsigned int most = 8u * (unsigned int)ctx->sm_count;
    if (most > 0 && blocks > most) blocks = most;
    adamw8bit_fused_kernel_v2<<<blocks, ADAMW8BIT_THREADS, 0, ctx->stream>>>(
        *table, params, master, grads, m_q, v_q, m_absmax, v_absmax, step, cfg->beta1,
        cfg->beta2, cfg->eps, cfg->weight_decay, stochastic);
    gpu_check_launch(ctx, "adamw8bit_fused_kernel_v2");
}

extern "C" void adamw8bit_update_v1(const GpuContext *ctx, floatX *params, float *master,
                                    const floatX *grads, uint8_t *m_q, uint8_t *v_q,
                                    float *m_absmax, float *v_absmax, size_t n, float lr,
                                    const AdamWConfig *cfg, int decay, int t,
                                    const float *clip_factor) {
    if (n == 0) return;
    // The bias corrections on the host, as optimizer.c computes them.
    const Adam8Scalars a = {lr,
                            cfg->beta1,
                            cfg->beta2,
                            cfg->eps,
                            decay ? cfg->weight_decay : 0.0f,
                            adamw_bias_correction(cfg->beta1, t),
                            adamw_bias_correction(cfg->beta2, t)};
    // One warp per block of values; at most 8 thread blocks per SM, each
    // warp then looping over several blocks of values.
    const size_t value_blocks = (n + Q8_BLOCK - 1) / Q8_BLOCK;
    unsigned int blocks = (unsigned int)((value_blocks + ADAMW8BIT_WARPS - 1) / ADAMW8BIT_WARPS);
    const unsigned int most = 8u * (unsigned int)ctx->sm_count;
    if (most > 0 && blocks > most) blocks = most;
    adamw8bit_kernel_v1<<<blocks, ADAMW8BIT_THREADS, 0, ctx->stream>>>(
        params, master, grads, m_q, v_q, m_absmax, v_absmax, n, a, clip_factor);
    gpu_check_launch(ctx, "adamw8bit_kernel_v1");
}

// One thread block: the maps as adamw8bit_kernel_v1 builds them.
__global__ void quantize8_maps_kernel_v1(float *maps) {
    __shared__ float signed_map[Q8_MAP_SIZE], unsigned_map[Q8_MAP_SIZE];
    build_maps(signed_map, unsigned_map);
    maps[threadIdx.x] = signed_map[threadIdx.x];
    maps[Q8_MAP_SIZE + threadIdx.x] = unsigned_map[threadIdx.x];
}

extern "C" void quantize8_maps_v1(const GpuContext *ctx, float *maps) {
    quantize8_maps_kernel_v1<<<1, Q8_MAP_SIZE, 0, ctx->stream>>>(maps);
    gpu_check_launch(ctx, "quantize8_maps_kernel_v1");
}
