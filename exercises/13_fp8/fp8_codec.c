// GENERATED from solutions/13_fp8/fp8_codec.c by tools/make_exercises.py.
// Yours to write: the regions marked TODO(exercise 13_fp8); what to do and
// how to test it: exercises/13_fp8/README.md.
// fp8_codec.c: chapter 13's exercise: FP8's codes on the host
// (common/gpu/fp8_codec.h says what they must be). solutions/13_fp8/ has it
// complete; exercises/13_fp8/ has the encoder's body cut out.
#include "gpu/fp8_codec.h"

#include <math.h>

#include "exercise.h"

typedef struct {
    int mantissa_bits, bias;
    float largest;
} Fp8Format;

static Fp8Format format_of(GemmPrecision format) {
    return format == GEMM_E5M2 ? (Fp8Format){2, 15, 57344.0f} : (Fp8Format){3, 7, 448.0f};
}

// ANCHOR: fp8_decode
float fp8_decode(uint8_t code, GemmPrecision format) {
    const Fp8Format f = format_of(format);
    const int e = (code & 0x7f) >> f.mantissa_bits, m = code & ((1 << f.mantissa_bits) - 1);
    const int top = (1 << (7 - f.mantissa_bits)) - 1;  // the largest exponent field
    float v;
    if (format == GEMM_E4M3 && e == top && m == (1 << f.mantissa_bits) - 1) v = NAN;
    else if (format == GEMM_E5M2 && e == top) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexpf((float)m, 1 - f.bias - f.mantissa_bits);
    else v = ldexpf((float)((1 << f.mantissa_bits) + m), e - f.bias - f.mantissa_bits);
    return code & 0x80 ? -v : v;
}
// ANCHOR_END: fp8_decode

// ANCHOR: fp8_encode
uint8_t fp8_encode(float x, GemmPrecision format) {
    const Fp8Format f = format_of(format);
    const uint8_t sign = signbit(x) ? 0x80 : 0;
    if (isnan(x)) return sign | 0x7f;  // e4m3's NaN, and one of e5m2's
    uint8_t code;
    // TODO(exercise 13_fp8): |x| clamped to the largest; its step: 2^(exponent - M) in its binade, 2^(1 - bias - M) below the smallest normal 2^(1 - bias); n = rint(|x| / step) (ties to even); the code from n and the exponent (n may carry into the next binade)
    // Replace this stub, which makes the tests fail, with your code.
    (void)f;      // the format's numbers, for the code you write
    code = sign;  // every value encoded as zero: the tests fail
    // TODO(exercise 13_fp8): delete this call once the code above is written.
    exercise_unfinished("13_fp8", "the FP8 encoder",
                        "|x| clamped to the largest; its step: 2^(exponent - M) in its binade, 2^(1 - bias - M) below the smallest normal 2^(1 - bias); n = rint(|x| / step) (ties to even); the code from n and the exponent (n may carry into the next binade)");
    return code;
}
// ANCHOR_END: fp8_encode
