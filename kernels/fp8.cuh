// fp8.cuh: the device pieces every FP8 cast shares (fp8.cu, layernorm_fp8.cu),
// for the .cu files only.
#ifndef FP8_CUH
#define FP8_CUH

#include <cuda_fp8.h>
#include <stdint.h>

#include "gemm_operands.h"

// Two floats to two FP8 bytes, rounded to nearest even, saturating at the
// format's largest finite value (an overflow is clamped, never infinity).
template <int FORMAT>
__device__ __forceinline__ uint16_t to_fp8x2(float a, float b) {
    const __nv_fp8_interpretation_t kind = FORMAT == GEMM_E5M2 ? __NV_E5M2 : __NV_E4M3;
    return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, kind);
}

// Eight values times `inverse` (1 / scale, a power of two: exact) as eight
// FP8 bytes, the first in the lowest byte.
template <int FORMAT>
__device__ __forceinline__ uint2 fp8x8(const float v[8], float inverse) {
    uint16_t q[4];
#pragma unroll
    for (int j = 0; j < 4; j++) q[j] = to_fp8x2<FORMAT>(v[2 * j] * inverse, v[2 * j + 1] * inverse);
    return make_uint2(q[0] | (uint32_t)q[1] << 16, q[2] | (uint32_t)q[3] << 16);
}

// ANCHOR: store_columns
// Eight rows of four FP8 bytes (from `rows`, rows `stride` bytes apart, each
// 4-byte aligned) stored as four columns of eight bytes: column j goes to
// out + j * out_stride, 8-byte aligned. Each row is read as one word; byte
// permutes regroup the bytes: first byte j of two rows side by side, then
// two such pairs, then two such quads.
__device__ __forceinline__ void store_columns_8x4(const uint8_t *rows, int stride, uint8_t *out,
                                                  size_t out_stride) {
    uint32_t w[8];
#pragma unroll
    for (int i = 0; i < 8; i++) w[i] = *(const uint32_t *)(rows + i * stride);
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const uint32_t pick = 0x0040 + j * 0x0011;  // byte j of the first word, then of the second
        const uint32_t lo = __byte_perm(__byte_perm(w[0], w[1], pick),
                                        __byte_perm(w[2], w[3], pick), 0x5410);
        const uint32_t hi = __byte_perm(__byte_perm(w[4], w[5], pick),
                                        __byte_perm(w[6], w[7], pick), 0x5410);
        *(uint2 *)(out + j * out_stride) = make_uint2(lo, hi);
    }
}
// ANCHOR_END: store_columns

#endif
