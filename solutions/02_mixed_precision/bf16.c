// bf16.c: chapter 02's exercise, part 1: the conversions between fp32 and
// bfloat16 on the host (declared, with what each must do, in common/util/bf16.h).
// solutions/02_mixed_precision/ has them complete, and the bf16 trainer runs
// them (the weights go to the device through bf16_from_float_rne);
// exercises/02_mixed_precision/ has their bodies cut out.
//
// Everything works on bit patterns: an fp32 number is the uint32 of its bits,
// a bf16 number the top 16 of them. fp32's layout, high bit first:
//   [31] sign   [30:23] exponent (255: Inf or NaN)   [22:0] mantissa
// bf16 keeps bits [31:16]: the sign, the whole exponent, 7 mantissa bits.
#include <math.h>

#include "util/bf16.h"
#include "util/float_bits.h"
#include "exercise.h"

// A NaN: exponent all ones and a mantissa that is not zero. Its payload may
// sit in the 16 bits that bf16 drops, so truncating it could leave a zero
// mantissa (Inf), and adding a rounding increment could carry into the sign:
// a NaN is never rounded, only made quiet (the mantissa's top bit set).
static inline int bits_are_nan(uint32_t u) { return (u & 0x7FFFFFFFu) > 0x7F800000u; }

// ANCHOR: bf16_rne
uint16_t bf16_from_float_rne(float x) {
    uint16_t h;
    // EXERCISE BEGIN: keep the top 16 bits of x, rounded to nearest, ties to even; a NaN stays a quiet NaN
    // EXERCISE STUB: (void)x;
    // EXERCISE STUB: h = BF16_QUIET_NAN;  // a NaN: every test fails until this is written
    uint32_t u = float_bits(x);
    if (bits_are_nan(u)) {
        h = (uint16_t)((u >> 16) | 0x0040u);
    } else {
        // The dropped half, u & 0xFFFF, is compared with 0x8000 by adding
        // just under it: a carry into bit 16 happens when it is more than
        // half (> 0x8000), or exactly half (== 0x8000) and bit 16 is 1,
        // which makes the kept part even. A carry out of the mantissa bumps
        // the exponent, which is right (1.11111111b rounds up to 10.0b), and
        // past the largest finite value it gives Inf, which is right too.
        uint32_t lsb = (u >> 16) & 1u;
        h = (uint16_t)((u + 0x7FFFu + lsb) >> 16);
    }
    // EXERCISE END
    // EXERCISE LAUNCH-CHECK: fp32 to bf16, round to nearest even
    return h;
}
// ANCHOR_END: bf16_rne

// ANCHOR: bf16_stochastic
uint16_t bf16_from_float_stochastic(float x, uint32_t random_bits) {
    uint16_t h;
    // EXERCISE BEGIN: keep the top 16 bits of x, rounded up with probability (dropped bits) / 65536; a NaN stays a quiet NaN
    // EXERCISE STUB: (void)x, (void)random_bits;
    // EXERCISE STUB: h = BF16_QUIET_NAN;
    uint32_t u = float_bits(x);
    if (bits_are_nan(u)) {
        h = (uint16_t)((u >> 16) | 0x0040u);
    } else {
        // With r uniform in [0, 65536), the dropped part d = u & 0xFFFF
        // carries into bit 16 exactly when r >= 65536 - d: probability
        // d / 65536, the distance to the lower neighbour over the gap. So
        // E[result] = x. A bf16 value (d = 0) never moves.
        h = (uint16_t)((u + (random_bits & 0xFFFFu)) >> 16);
    }
    // EXERCISE END
    // EXERCISE LAUNCH-CHECK: fp32 to bf16, stochastic rounding
    return h;
}
// ANCHOR_END: bf16_stochastic

float bf16_to_float(uint16_t h) {
    float x;
    // EXERCISE BEGIN: a bf16 is the top half of an fp32 number
    // EXERCISE STUB: (void)h;
    // EXERCISE STUB: x = NAN;
    x = float_from_bits((uint32_t)h << 16);
    // EXERCISE END
    // EXERCISE LAUNCH-CHECK: bf16 to fp32
    return x;
}
