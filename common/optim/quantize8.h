// quantize8.h: 8-bit block-wise quantization of AdamW's moments (chapter 10,
// after Dettmers et al. 2022, "8-bit Optimizers via Block-wise
// Quantization"), on the CPU: the two maps, quantization and dequantization
// of a tensor, and one 8-bit AdamW step. This is the reference that the GPU
// kernel, kernels/adamw8bit.cu, must match.
//
// ---- Why a dynamic map, not int8 ----------------------------------------------
// AdamW keeps two fp32 numbers per parameter, m (the running mean of the
// gradient) and v (of its square): 8 bytes, twice the fp32 weight. Stored in
// one byte each, they take a quarter of that. A byte holds 256 values; the
// question is which 256.
//
// Linear int8 (x ~ k * absmax / 127) spaces them evenly: a step of 0.8% of
// the largest value, so that anything below half a step, 0.4% of the
// largest, becomes 0, and a value 1% of the largest keeps one significant
// bit. Adam's moments are not like that. Within one tensor, even within 256
// neighbouring values, gradients differ by orders of magnitude, and v, a
// square, by twice as many: a linear grid would round much of m to 0 or to
// one step, and much of v to 0, and Adam divides by sqrt(v).
//
// A dynamic map spends the 8 bits like a tiny floating-point number: a few
// bits say the order of magnitude (the exponent) and the rest place the
// value within it (the fraction). Read as "dynamic tree quantization": after
// the sign bit, the number of leading zero bits is the exponent E, in
// decades (the value lies in [10^-(E+1), 10^-E]); the first 1 bit ends it;
// the bits after that, 6 - E of them, are a linear fraction within the
// decade. The decades near 1 get many values (64 between 0.1 and 1), the
// small ones few (1 between 1e-7 and 1e-6): relative precision everywhere
// over 7 orders of magnitude, the range the moments span, instead of
// absolute precision near the largest value only.
//
// ---- The two maps, exactly ----------------------------------------------------
// Each map is 256 floats sorted ascending; a stored byte is an index into it.
// Decade i (i = 0..6) is the interval [10^(i-7), 10^(i-6)]; "c midpoints" of
// it are the centres of its c equal parts:
//     10^(i-7) + (10^(i-6) - 10^(i-7)) * (2k + 1) / (2c),   k = 0 .. c-1.
//
//   Q8_SIGNED, for m (values in [-1, 1]): in each decade i, c = 2^i
//     midpoints (decade 0: 1 value, 5.5e-7; decade 6: 64, 0.10703125 ..
//     0.99296875); 127 positive values, their 127 negatives, 0, and 1.0:
//       index   0 .. 126   the negatives, -0.99296875 .. -5.5e-7
//       index 127          0
//       index 128 .. 254   the positives, 5.5e-7 .. 0.99296875
//       index 255          1.0
//     Symmetric, map[127 - j] = -map[127 + j] for j = 1..127, except for
//     1.0, which has no negative twin: it is the block's largest value when
//     positive; when the largest is negative it is stored as -0.99296875, an
//     error of 0.7% of the block's scale (what the construction gives: 7 bits
//     of magnitude make 127 nonzero values, not 128).
//   Q8_UNSIGNED, for v (values in [0, 1]): in each decade i, c = 2^(i+1)
//     midpoints (decade 0: 2 values, 3.25e-7 and 7.75e-7; decade 6: 128,
//     0.103515625 .. 0.996484375); 254 values, then 0 and 1.0:
//       index   0          0
//       index   1 .. 254   the midpoints, 3.25e-7 .. 0.996484375
//       index 255          1.0
//     v is a mean of squares, never negative: a sign bit would spend half of
//     the 256 values on numbers that never occur. Its own map gives that bit
//     to the fraction instead: twice as many values per decade as m's, half
//     the gap, which v, whose square root Adam divides by, can use.
// The values are computed in double from the decades' bounds (decimal
// literals, converted exactly alike by every compiler) with operations that
// IEEE 754 rounds the same everywhere, then rounded to float once: the host
// (q8_map) and the GPU kernel (which builds the maps in shared memory with
// the same function, q8_map_value below) get the same 512 floats, bit for
// bit, and the GPU tests check it.
//
// ---- Block-wise quantization --------------------------------------------------
// A tensor of n floats is cut into blocks of Q8_BLOCK = 256 consecutive
// values, the last one shorter when n is not a multiple of 256. Each block
// keeps its scale, absmax = max |x| over the block (fp32), and each value x
// the byte q whose map value is nearest to x / absmax (which lies in [-1, 1],
// or [0, 1] for v):
//     quantize:    q = nearest(map, x / absmax)
//     dequantize:  x' = map[q] * absmax
// So the error of a value is at most half the gap between the two map
// values around x / absmax, times absmax (plus float rounding): 0.7% of
// the block's scale at the top decade of the signed map (0.35% for v), less
// in the decades below. Per block, not per tensor: one outlier then coarsens
// only its own 255 neighbours.
//   - "Nearest": the two map values around y = x / absmax (binary search),
//     their distances to y computed in float (map[hi] - y and y - map[lo]),
//     and the nearer one taken; a tie goes to the LOWER index (the smaller
//     value). Below map[0] (only y in [-1, -0.99296875) of the signed map)
//     it is index 0; at or above map[255] (1.0), index 255. A NaN y gives
//     index 0.
//   - A block of zeros has absmax 0: y is taken as 0, and every value stores
//     the index of 0 (127 signed, 0 unsigned). Any index dequantizes to 0
//     there, so a state of all-zero bytes (cudaMemset 0) is m = v = 0: a
//     fresh optimizer.
//   - The max ignores NaNs (fmaxf), as the GPU's warp maximum does, and a
//     NaN value is stored as index 0: the state never holds a NaN (the
//     weight that a NaN moment updated is NaN already).
// Bytes: 1 per value and 4 per 256 values (absmax): 1.016 bytes, against 4
// for fp32.
#ifndef QUANTIZE8_H
#define QUANTIZE8_H

#include <stddef.h>
#include <stdint.h>

#define Q8_MAP_SIZE 256
#define Q8_BLOCK 256

typedef enum { Q8_SIGNED = 0, Q8_UNSIGNED = 1 } Q8Map;

// The index of 0 in each map: a block of zeros stores it.
#define Q8_SIGNED_ZERO 127
#define Q8_UNSIGNED_ZERO 0

// ---- shared by the host and the GPU kernel --------------------------------------
// The functions below are compiled by gcc for the CPU and by nvcc for the
// kernel, so that both sides compute each map value, each quantization and
// each dequantization with the same operations. In device code each
// operation is an explicitly rounded intrinsic, which nvcc never fuses with
// a neighbour (into a fused multiply-add, say); gcc compiles ISO C (-std=c11)
// without fusing (-ffp-contract=off is its default there).
#ifdef __CUDACC__
#define Q8_HD __host__ __device__
#else
#define Q8_HD
#endif
#ifdef __CUDA_ARCH__
#define Q8_DSUB(a, b) __dsub_rn(a, b)
#define Q8_DADD(a, b) __dadd_rn(a, b)
#define Q8_DMUL(a, b) __dmul_rn(a, b)
#define Q8_DDIV(a, b) __ddiv_rn(a, b)
#define Q8_TO_FLOAT(x) __double2float_rn(x)
#define Q8_FSUB(a, b) __fsub_rn(a, b)
#define Q8_FMUL(a, b) __fmul_rn(a, b)
#define Q8_FDIV(a, b) __fdiv_rn(a, b)
#else
#define Q8_DSUB(a, b) ((a) - (b))
#define Q8_DADD(a, b) ((a) + (b))
#define Q8_DMUL(a, b) ((a) * (b))
#define Q8_DDIV(a, b) ((a) / (b))
#define Q8_TO_FLOAT(x) ((float)(x))
#define Q8_FSUB(a, b) ((a) - (b))
#define Q8_FMUL(a, b) ((a) * (b))
#define Q8_FDIV(a, b) ((a) / (b))
#endif

// 10^(i-7), i = 0..7: the decades' bounds, as decimal literals.
static inline Q8_HD double q8_decade_bound(int i) {
    switch (i) {
    case 0: return 1e-7;
    case 1: return 1e-6;
    case 2: return 1e-5;
    case 3: return 1e-4;
    case 4: return 1e-3;
    case 5: return 1e-2;
    case 6: return 1e-1;
    default: return 1.0;
    }
}

// Midpoint k of the c midpoints of decade i (i = 0..6), as a float.
static inline Q8_HD float q8_midpoint(int i, int k, int c) {
    const double lo = q8_decade_bound(i), width = Q8_DSUB(q8_decade_bound(i + 1), lo);
    const double offset = Q8_DDIV(Q8_DMUL(width, (double)(2 * k + 1)), (double)(2 * c));
    return Q8_TO_FLOAT(Q8_DADD(lo, offset));
}

// floor(log2(x)) for x >= 1.
static inline Q8_HD int q8_log2(int x) {
    int e = 0;
    while ((2 << e) <= x) e++;
    return e;
}

// Value `index` (0..255) of a map, as the header's table says.
static inline Q8_HD float q8_map_value(Q8Map map, int index) {
    if (index == Q8_MAP_SIZE - 1) return 1.0f;
    if (map == Q8_SIGNED) {
        if (index == Q8_SIGNED_ZERO) return 0.0f;
        // The positives in ascending order, r = 0..126: decade i holds r =
        // 2^i - 1 .. 2^(i+1) - 2, 2^i of them.
        const int r = index > Q8_SIGNED_ZERO ? index - Q8_SIGNED_ZERO - 1
                                             : Q8_SIGNED_ZERO - 1 - index;
        const int i = q8_log2(r + 1);
        const float x = q8_midpoint(i, r + 1 - (1 << i), 1 << i);
        return index > Q8_SIGNED_ZERO ? x : -x;
    }
    if (index == Q8_UNSIGNED_ZERO) return 0.0f;
    // r = 0..253: decade i holds r = 2^(i+1) - 2 .. 2^(i+2) - 3, 2^(i+1) of them.
    const int r = index - 1, i = q8_log2(r + 2) - 1;
    return q8_midpoint(i, r + 2 - (2 << i), 2 << i);
}

// The index of the map value nearest to y (map: 256 sorted floats), by the
// rule above: a binary search of 8 fixed steps for the last value <= y, then
// the nearer of it and the next, ties to the lower.
static inline Q8_HD int q8_nearest(const float *map, float y) {
    int lo = 0;
    for (int step = Q8_MAP_SIZE / 2; step > 0; step /= 2)
        if (map[lo + step] <= y) lo += step;
    if (lo == Q8_MAP_SIZE - 1) return lo;
    return Q8_FSUB(map[lo + 1], y) < Q8_FSUB(y, map[lo]) ? lo + 1 : lo;
}

// One value of a block whose scale is absmax.
static inline Q8_HD uint8_t q8_quantize_value(const float *map, float x, float absmax) {
    return (uint8_t)q8_nearest(map, absmax > 0.0f ? Q8_FDIV(x, absmax) : 0.0f);
}

static inline Q8_HD float q8_dequantize_value(const float *map, uint8_t q, float absmax) {
    return Q8_FMUL(map[q], absmax);
}

// ---- the host's functions -------------------------------------------------------
#ifdef __cplusplus
extern "C" {
#endif

#include "optim/optimizer.h"  // AdamWConfig

// The 256 values of a map, ascending.
void q8_map(Q8Map map, float values[Q8_MAP_SIZE]);

// Blocks of a tensor of n values: ceil(n / Q8_BLOCK), the length of its
// absmax array.
size_t q8_blocks(size_t n);

// x (n floats) into q (n bytes) and absmax (q8_blocks(n) floats), block by
// block, with map `map`; and back. Blocks start at x[0].
void q8_quantize(Q8Map map, const float *x, size_t n, uint8_t *q, float *absmax);
// The same with the map's 256 values given (q8_map): per block of Q8_BLOCK
// values its scale, the largest |x|, into absmax[block], and each value's
// byte, q8_quantize_value. Chapter 10's exercise
// (solutions/10_8bit_optimizer/quantize_blocks.c).
void q8_quantize_blocks(const float *map, const float *x, size_t n, uint8_t *q, float *absmax);
void q8_dequantize(Q8Map map, const uint8_t *q, const float *absmax, size_t n, float *x);

// ANCHOR: adamw8bit_reference
// One AdamW step over n values of one tensor, at step t (1-based), with m
// and v stored in 8 bits: m_q (Q8_SIGNED) and v_q (Q8_UNSIGNED), n bytes
// each, their scales m_absmax and v_absmax, q8_blocks(n) floats each; all
// updated in place. For each block of Q8_BLOCK values:
//   1. dequantize its m and v to fp32;
//   2. adamw_update (optimizer.h) on the block: the same function, the same
//      float operations, with the dequantized moments as the previous ones;
//      the weights are updated with the NEW fp32 m and v;
//   3. quantize the new m and v, with the block's new absmax.
// So the only difference from fp32 AdamW is the rounding of the moments to
// their maps between steps. A fresh state is all zero bytes (see above).
// The GPU kernel, adamw8bit_update_v1 (kernels/adamw8bit.h), must compute
// the same bytes, scales and weights.
void adamw8bit_update(float *params, const float *grads, uint8_t *m_q, uint8_t *v_q,
                      float *m_absmax, float *v_absmax, size_t n, float lr,
                      const AdamWConfig *cfg, int decay, int t);
// ANCHOR_END: adamw8bit_reference

#ifdef __cplusplus
}
#endif

#endif
