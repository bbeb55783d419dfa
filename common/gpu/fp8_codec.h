// fp8_codec.h: chapter 13's two FP8 formats on the host: the value of each of
// their 256 codes, and the code nearest a float, as Hopper's conversion
// (cvt.rn.satfinite) gives it. Host C; no CUDA needed to compute or test it.
// The GPU tests check the casts' bytes against it (test_kernels_fp8_bf16.c).
//
// A code is a sign bit, E exponent bits and M mantissa bits (e4m3: E = 4,
// M = 3, bias 7; e5m2: E = 5, M = 2, bias 15). Exponent field e > 0 is the
// normal value (1 + m / 2^M) * 2^(e - bias); e = 0 the subnormal
// (m / 2^M) * 2^(1 - bias). The top of each format is special: e4m3 has no
// infinity, and only S.1111.111 is NaN, so its largest value is
// 1.75 * 2^8 = 448; e5m2 keeps IEEE's: e = 31 is infinity (m = 0) or NaN, and
// its largest is 1.75 * 2^15 = 57344.
#ifndef FP8_CODEC_H
#define FP8_CODEC_H

#include <stdint.h>

#include "gemm_operands.h"

#ifdef __cplusplus
extern "C" {
#endif

// The value of a code (NaN for a NaN code, +-infinity for e5m2's).
float fp8_decode(uint8_t code, GemmPrecision format);

// The code of the value nearest x: to nearest, ties to the code whose
// mantissa is even; beyond the largest finite value, the largest finite
// value of x's sign (saturation: never infinity); NaN to a NaN code; a zero,
// or a value that rounds to zero, keeps x's sign.
uint8_t fp8_encode(float x, GemmPrecision format);

#ifdef __cplusplus
}
#endif

#endif
