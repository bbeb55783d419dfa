// layernorm_row.cuh: one warp normalizes one row of C values with 16-byte
// vectors (vec.cuh): chapter 04's layernorm forward kernels, the plain one
// (layernorm.cu) and the one fused with the residual add (chapter 04's
// exercise, solutions/04_kernel_fusion/residual_layernorm.cu), share it.
//
// Lane `lane` owns the vectors at columns lane*VEC_X, lane*VEC_X + 32*VEC_X,
// ...: consecutive lanes read consecutive 16-byte pieces, 512 bytes per warp
// instruction in bf16. C must be a multiple of VEC_X (the launchers check).
// The row is read once per pass from global memory; the second and third
// reads of its C*sizeof(floatX) bytes come from L1.
#ifndef LAYERNORM_ROW_CUH
#define LAYERNORM_ROW_CUH

#include "reduce.cuh"
#include "vec.cuh"

#define LAYERNORM_EPS 1e-5f

// The mean, then the variance around it (two passes, as chapter 00's kernel:
// E[x^2] - E[x]^2 cancels when |mean| >> std); every lane gets both.
__device__ inline void row_mean_rstd(const floatX *x, int C, int lane, float *mean, float *rstd) {
    float sum = 0.0f;
    for (int i = lane * VEC_X; i < C; i += WARP_SIZE * VEC_X) {
        const Vec v = load_vec(x + i);
        for (int k = 0; k < VEC_X; k++) sum += x2f(v.x[k]);
    }
    const float m = warp_sum(sum) / C;
    float sq = 0.0f;
    for (int i = lane * VEC_X; i < C; i += WARP_SIZE * VEC_X) {
        const Vec v = load_vec(x + i);
        for (int k = 0; k < VEC_X; k++) {
            const float d = x2f(v.x[k]) - m;
            sq += d * d;
        }
    }
    *mean = m;
    *rstd = 1.0f / sqrtf(warp_sum(sq) / C + LAYERNORM_EPS);
}

// y = (x - mean) * rstd * weight + bias, rounded once per value.
__device__ inline void row_normalize(floatX *y, const floatX *x, const floatX *weight,
                                     const floatX *bias, float mean, float rstd, int C,
                                     int lane) {
    for (int i = lane * VEC_X; i < C; i += WARP_SIZE * VEC_X) {
        const Vec v = load_vec(x + i), w = load_vec(weight + i), b = load_vec(bias + i);
        Vec out;
        for (int k = 0; k < VEC_X; k++)
            out.x[k] = f2x((x2f(v.x[k]) - mean) * rstd * x2f(w.x[k]) + x2f(b.x[k]));
        store_vec(y + i, out);
    }
}

#endif
