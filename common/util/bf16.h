// bf16.h: bfloat16 on the host: the conversions between fp32 and bf16 that
// the bf16 build (chapter 02) uses to move weights between the host's fp32
// copies and the device's bf16 storage.
//
// bfloat16 is the top half of an IEEE fp32 number: 1 sign bit, the same 8
// exponent bits (so the same range, about 1e-38 to 3.4e38, with subnormals
// down to 2^-133), and 7 of fp32's 23 mantissa bits, so 8 significant bits
// instead of 24. Converting bf16 to fp32 is exact (append 16 zero bits);
// converting fp32 to bf16 drops 16 bits and has to round:
//   - round to nearest, ties to even (RNE): the nearest bf16 value; halfway
//     cases go to the one whose last mantissa bit is 0. The error is at most
//     half a unit in the last place: 2^-8 = 0.39% of the value just above a
//     power of two (where the step is 2^-7 of it), 2^-9 just below the next.
//     What the GPU's __float2bfloat16_rn does, so host and device agree bit
//     for bit.
//   - stochastic rounding: up with probability (the distance to the lower
//     neighbour) / (the gap between the two neighbours), down otherwise. Each
//     result is off by up to a whole ulp, but the rounding is unbiased on
//     average (E[round(x)] = x), which keeps many tiny updates from being
//     rounded away one after the other.
// Both keep NaN a NaN (quiet, same sign) and +-Inf an Inf; finite values
// past the largest bf16 (3.3895e38) round to Inf where the rounding says so.
//
// In C a bf16 value is a uint16_t: its bit pattern, opaque storage; the
// arithmetic happens in fp32 (bf16_to_float, compute, convert back).
//
// These three functions are chapter 02's exercise:
// solutions/02_mixed_precision/bf16.c has them, and the trainer runs that.
#ifndef BF16_H
#define BF16_H

#include <stdint.h>

// The nearest bf16 value to x, ties to even.
uint16_t bf16_from_float_rne(float x);

// x rounded up or down to one of its two bf16 neighbours at random: up with
// probability (x - lower) / (upper - lower), decided by the low 16 bits of
// random_bits (uniformly random bits make it unbiased). A value that is
// exactly a bf16 value stays itself.
uint16_t bf16_from_float_stochastic(float x, uint32_t random_bits);

// The fp32 value of a bf16 (exact).
float bf16_to_float(uint16_t h);

// A few bit patterns the tests and the book name.
#define BF16_POS_INF 0x7F80u
#define BF16_NEG_INF 0xFF80u
#define BF16_QUIET_NAN 0x7FC0u
#define BF16_MAX_FINITE 0x7F7Fu  // (2 - 2^-7) * 2^127 = 3.3895e38

#endif
