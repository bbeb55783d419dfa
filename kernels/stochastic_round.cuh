// stochastic_round.cuh: rounding a float to floatX up or down at random,
// with the probability of each the nearness of the other (chapter 14's
// --no-master-weights).
//
// Why: without fp32 master weights the optimizer writes each updated weight
// straight into its bf16 copy. Rounded to nearest, an update smaller than
// half a bf16 step (2^-9 of the weight: a weight of 0.1 moved by less than
// 2e-4, which is most updates once the learning rate decays) is lost, every
// step, and training stalls. Rounded stochastically, x between the bf16
// neighbours lo < x < hi becomes hi with probability (x - lo) / (hi - lo)
// and lo otherwise: the rounded weight is x on average, so the small updates
// add up in expectation as they would in the master copy. This is how llm.c
// and others train bf16 weights without one, and it saves the copy's 4 bytes
// a parameter: 0.5 GB for GPT-2 124M, 6.2 GB for GPT-2 XL.
//
// How: a float's top 16 bits are its bf16 truncation; adding a uniform
// 16-bit random number to the low 16 bits carries into the top ones with
// exactly that probability, and truncating then keeps the top bits. The
// random number is a hash of (step, index), index being the value's place in
// the parameter buffer: no state to keep, and the same bits on every run, so
// a training run is still bit-identical from one run to the next.
//
// What it costs: a hash of a few multiplies and shifts per value in the
// update, a kernel that waits on memory: nothing measurable.
#ifndef STOCHASTIC_ROUND_CUH
#define STOCHASTIC_ROUND_CUH

#include <stdint.h>

#include "precision.h"

// splitmix64's finalizer (Steele, Lea and Flood) over the index, with the
// step mixed in by a multiply by the golden ratio's 64 bits: neighbouring
// indices and neighbouring steps give unrelated bits.
__device__ __forceinline__ uint64_t stochastic_round_hash(uint32_t step, uint64_t index) {
    uint64_t z = index + (uint64_t)step * 0x9E3779B97F4A7C15ull;
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// ANCHOR: round_stochastic
// x rounded to floatX: down or up at random (above), the random number a
// function of (step, index) only. NaN and infinities are rounded as f2x
// rounds them (adding to a NaN's bits could make it an infinity). The fp32
// build has nothing to round: x.
__device__ __forceinline__ floatX round_stochastic(float x, uint32_t step, uint64_t index) {
#ifdef PRECISION_BF16
    const uint32_t bits = __float_as_uint(x);
    if ((bits & 0x7F800000u) == 0x7F800000u) return f2x(x);
    const uint32_t r = (uint32_t)(stochastic_round_hash(step, index) >> 48);  // 16 bits
    // The sum has zero low bits, so f2x's rounding to nearest leaves it exact.
    return f2x(__uint_as_float((bits + r) & 0xFFFF0000u));
#else
    (void)step, (void)index;
    return x;
#endif
}
// ANCHOR_END: round_stochastic

// How an optimizer stores its updated weights in params: rounded to nearest
// (f2x), or, with stochastic set, by round_stochastic at the step and the
// value's index in the parameter buffer (base + the index the kernel counts
// from its pointers). The fused AdamW kernels take one; a launch sets it for
// every thread alike, so the branch costs no divergence.
struct WeightRounding {
    int stochastic;
    uint32_t step;
    uint64_t base;
};

__device__ __forceinline__ floatX round_weight(float p, const WeightRounding &r, size_t i) {
    return r.stochastic ? round_stochastic(p, r.step, r.base + i) : f2x(p);
}

#endif
