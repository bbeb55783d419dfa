// GENERATED from solutions/02_mixed_precision/bf16.c by tools/make_exercises.py.
// Yours to write: the regions marked TODO(exercise 02_mixed_precision); what to do and
// how to test it: exercises/02_mixed_precision/README.md.
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
    // TODO(exercise 02_mixed_precision): keep the top 16 bits of x, rounded to nearest, ties to even; a NaN stays a quiet NaN
    // Replace this stub, which makes the tests fail, with your code.
    (void)x;
    h = BF16_QUIET_NAN;  // a NaN: every test fails until this is written
    // TODO(exercise 02_mixed_precision): delete this call once the code above is written.
    exercise_unfinished("02_mixed_precision", "fp32 to bf16, round to nearest even",
                        "keep the top 16 bits of x, rounded to nearest, ties to even; a NaN stays a quiet NaN");
    return h;
}
// ANCHOR_END: bf16_rne

// ANCHOR: bf16_stochastic
uint16_t bf16_from_float_stochastic(float x, uint32_t random_bits) {
    uint16_t h;
    // TODO(exercise 02_mixed_precision): keep the top 16 bits of x, rounded up with probability (dropped bits) / 65536; a NaN stays a quiet NaN
    // Replace this stub, which makes the tests fail, with your code.
    (void)x, (void)random_bits;
    h = BF16_QUIET_NAN;
    // TODO(exercise 02_mixed_precision): delete this call once the code above is written.
    exercise_unfinished("02_mixed_precision", "fp32 to bf16, stochastic rounding",
                        "keep the top 16 bits of x, rounded up with probability (dropped bits) / 65536; a NaN stays a quiet NaN");
    return h;
}
// ANCHOR_END: bf16_stochastic

float bf16_to_float(uint16_t h) {
    float x;
    // TODO(exercise 02_mixed_precision): a bf16 is the top half of an fp32 number
    // Replace this stub, which makes the tests fail, with your code.
    (void)h;
    x = NAN;
    // TODO(exercise 02_mixed_precision): delete this call once the code above is written.
    exercise_unfinished("02_mixed_precision", "bf16 to fp32",
                        "a bf16 is the top half of an fp32 number");
    return x;
}
