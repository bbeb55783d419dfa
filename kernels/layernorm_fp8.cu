// layernorm_fp8.cu: see layernorm_fp8.h.
//
// A block takes 64 rows: each of its 8 warps normalizes 8 of them, one at a
// time, as residual_layernorm_forward_kernel_v2's warps do, and writes each
// row's FP8 bytes to the rows output and to a shared tile of 64 rows; then
// the block writes the tile's transpose, 64 bytes (two sectors) per column.
#include "fp8.cuh"
#include "layernorm.h"
#include "layernorm_fp8.h"
#include "layernorm_row.cuh"
#include "util/util.h"

#ifdef PRECISION_BF16

#define ROWS 64                          // a block's rows
#define THREADS 256                      // 8 warps
#define WARPS (THREADS / WARP_SIZE)
#define TILE_PAD 4                       // bytes: the tile's rows are C + 4 apart (bank spread)

// ANCHOR: layernorm_fp8_kernel
__global__ void __launch_bounds__(THREADS)
    residual_layernorm_forward_fp8_kernel(floatX *residual, float *mean, float *rstd,
                                          const floatX *a, const floatX *b, const floatX *weight,
                                          const floatX *bias, int BT, int C, Fp8Meta *meta,
                                          uint8_t *out_rows, uint8_t *out_cols) {
    extern __shared__ __align__(16) uint8_t tile[];  // ROWS x (C + TILE_PAD)
    const int stride = C + TILE_PAD;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int r0 = blockIdx.x * ROWS;
    const float inverse = 1.0f / meta->scale;  // exact: a power of two
    float amax = 0.0f;
    for (int tr = warp; tr < ROWS; tr += WARPS) {
        const int row = r0 + tr;
        if (row >= BT) break;  // the whole warp leaves together
        const size_t offset = (size_t)row * C;
        const floatX *x = a + offset;
        if (b) {  // the residual add, rounded as residual_forward_v1 stores it
            for (int i = lane * VEC_X; i < C; i += WARP_SIZE * VEC_X) {
                const Vec va = load_vec(a + offset + i), vb = load_vec(b + offset + i);
                Vec sum;
                for (int k = 0; k < VEC_X; k++) sum.x[k] = f2x(x2f(va.x[k]) + x2f(vb.x[k]));
                store_vec(residual + offset + i, sum);
            }
            x = residual + offset;  // each lane reads back its own vectors
        }
        float m, s;
        row_mean_rstd(x, C, lane, &m, &s);
        for (int i = lane * VEC_X; i < C; i += WARP_SIZE * VEC_X) {
            const Vec v = load_vec(x + i), w = load_vec(weight + i), bb = load_vec(bias + i);
            float y[8];
            for (int k = 0; k < VEC_X; k++) {
                // bf16 first, as the unfused layernorm stores it
                y[k] = x2f(f2x((x2f(v.x[k]) - m) * s * x2f(w.x[k]) + x2f(bb.x[k])));
                amax = fmaxf(amax, fabsf(y[k]));
            }
            const uint2 bytes = fp8x8<GEMM_E4M3>(y, inverse);
            *(uint2 *)(out_rows + offset + i) = bytes;
            uint32_t *t = (uint32_t *)(tile + tr * stride + i);  // rows 4-byte aligned
            t[0] = bytes.x, t[1] = bytes.y;
        }
        if (lane == 0) mean[row] = m, rstd[row] = s;
    }
    __syncthreads();
    // The transpose: groups of 8 rows by 4 columns, 8 consecutive threads
    // down one column group.
    const int rows_here = min(ROWS, BT - r0);  // a multiple of 16
    for (int g = threadIdx.x; g < (C / 4) * (ROWS / 8); g += THREADS) {
        const int tc = (g / 8) * 4, tr = (g % 8) * 8;
        if (tr >= rows_here) continue;
        store_columns_8x4(tile + tr * stride + tc, stride, out_cols + (size_t)tc * BT + r0 + tr,
                          BT);
    }
    amax = warp_max(amax);
    if (lane == 0) atomicMax((unsigned int *)&meta->amax, __float_as_uint(amax));
}
// ANCHOR_END: layernorm_fp8_kernel

extern "C" void residual_layernorm_forward_fp8(const GpuContext *ctx, floatX *residual,
                                               float *mean, float *rstd, const floatX *a,
                                               const floatX *b, const floatX *weight,
                                               const floatX *bias, int BT, int C, Fp8Meta *meta,
                                               void *out_rows, void *out_cols) {
    layernorm_check_vector_width(C, "residual_layernorm_forward_fp8");
    if (BT % 16 || C % 16)
        die("residual_layernorm_forward_fp8: B*T (%d) and C (%d) must be multiples of 16", BT, C);
    const size_t smem = (size_t)ROWS * (C + TILE_PAD);
    CUDA_CHECK(cudaFuncSetAttribute(residual_layernorm_forward_fp8_kernel,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    residual_layernorm_forward_fp8_kernel<<<(BT + ROWS - 1) / ROWS, THREADS, smem, ctx->stream>>>(
        residual, mean, rstd, a, b, weight, bias, BT, C, meta, (uint8_t *)out_rows,
        (uint8_t *)out_cols);
    gpu_check_launch(ctx, "residual_layernorm_forward_fp8_kernel");
}

#else

extern "C" void residual_layernorm_forward_fp8(const GpuContext *ctx, floatX *residual,
                                               float *mean, float *rstd, const floatX *a,
                                               const floatX *b, const floatX *weight,
                                               const floatX *bias, int BT, int C, Fp8Meta *meta,
                                               void *out_rows, void *out_cols) {
    (void)ctx, (void)residual, (void)mean, (void)rstd, (void)a, (void)b, (void)weight, (void)bias;
    (void)BT, (void)C, (void)meta, (void)out_rows, (void)out_cols;
    die("residual_layernorm_forward_fp8: chapter 13 runs in the bf16 build");
}

#endif
