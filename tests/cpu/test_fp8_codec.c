// test_fp8_codec.c: chapter 13's exercise, FP8's codes on the host
// (common/gpu/fp8_codec.h): every code's value, and every float's nearest
// code, against a search over all 256 codes.
#include <criterion/criterion.h>
#include <math.h>

#include "gpu/fp8_codec.h"
#include "util/util.h"

static const GemmPrecision FORMATS[] = {GEMM_E4M3, GEMM_E5M2};

// The code nearest x by trying them all: ties to the even code, clamped to
// the largest finite value, a zero of x's sign.
static uint8_t nearest_by_search(float x, GemmPrecision format) {
    int best = -1;
    double best_diff = INFINITY;
    for (int c = 0; c < 256; c++) {
        const float v = fp8_decode((uint8_t)c, format);
        if (!isfinite(v) || signbit(v) != signbit(x)) continue;
        const double diff = fabs((double)v - (double)x);
        if (diff < best_diff || (diff == best_diff && c % 2 == 0)) best = c, best_diff = diff;
    }
    return (uint8_t)best;
}

Test(fp8_codec, the_formats_ends) {
    cr_assert_eq(fp8_decode(0x7e, GEMM_E4M3), 448.0f, "e4m3's largest");
    cr_assert(isnan(fp8_decode(0x7f, GEMM_E4M3)), "e4m3's NaN");
    cr_assert_eq(fp8_decode(0x78, GEMM_E4M3), 256.0f, "e4m3 has no infinity: 1.0 * 2^8");
    cr_assert_eq(fp8_decode(0x01, GEMM_E4M3), ldexpf(1, -9), "e4m3's smallest subnormal");
    cr_assert_eq(fp8_decode(0x08, GEMM_E4M3), ldexpf(1, -6), "e4m3's smallest normal");
    cr_assert_eq(fp8_decode(0x7b, GEMM_E5M2), 57344.0f, "e5m2's largest");
    cr_assert(isinf(fp8_decode(0x7c, GEMM_E5M2)), "e5m2's infinity");
    cr_assert_eq(fp8_decode(0x01, GEMM_E5M2), ldexpf(1, -16), "e5m2's smallest subnormal");
    cr_assert_eq(fp8_decode(0xc0, GEMM_E4M3), -2.0f, "the sign bit");
}

// Every finite code is its own value's code.
Test(fp8_codec, every_code_round_trips) {
    for (int f = 0; f < 2; f++)
        for (int c = 0; c < 256; c++) {
            const float v = fp8_decode((uint8_t)c, FORMATS[f]);
            if (!isfinite(v)) continue;
            cr_assert_eq(fp8_encode(v, FORMATS[f]), c, "format %d: code 0x%02x (%g) came back 0x%02x",
                         f, c, v, fp8_encode(v, FORMATS[f]));
        }
}

// Halfway between two neighbours: the even one (1.0625 lies between 1 and
// 1.125 in e4m3; 1 is 0x38, even).
Test(fp8_codec, ties_go_to_even) {
    cr_assert_eq(fp8_encode(1.0625f, GEMM_E4M3), 0x38);
    cr_assert_eq(fp8_encode(1.1875f, GEMM_E4M3), 0x3a, "1.1875: between 0x39 and 0x3a");
    cr_assert_eq(fp8_encode(ldexpf(1, -10), GEMM_E4M3), 0x00, "half the smallest subnormal");
    cr_assert_eq(fp8_encode(3 * ldexpf(1, -10), GEMM_E4M3), 0x02, "1.5 subnormal steps: to 2");
    cr_assert_eq(fp8_encode(15.5f, GEMM_E4M3), 0x58, "15.5: between 15 (odd) and 16, the next binade's first");
}

Test(fp8_codec, saturates_and_keeps_signs) {
    cr_assert_eq(fp8_encode(1e6f, GEMM_E4M3), 0x7e, "past 448: 448, never NaN");
    cr_assert_eq(fp8_encode(-460.0f, GEMM_E4M3), 0xfe);
    cr_assert_eq(fp8_encode(INFINITY, GEMM_E5M2), 0x7b, "infinity saturates too");
    cr_assert_eq(fp8_encode(-0.0f, GEMM_E4M3), 0x80);
    cr_assert_eq(fp8_encode(-1e-30f, GEMM_E5M2), 0x80, "a negative underflow is -0");
    cr_assert(isnan(fp8_decode(fp8_encode(NAN, GEMM_E4M3), GEMM_E4M3)));
    cr_assert(isnan(fp8_decode(fp8_encode(NAN, GEMM_E5M2), GEMM_E5M2)));
}

// Random floats over every binade the formats reach, and past them.
Test(fp8_codec, matches_the_search) {
    Rng rng;
    rng_seed(&rng, 13);
    for (int f = 0; f < 2; f++)
        for (int i = 0; i < 100000; i++) {
            const float mag = ldexpf(1.0f + rng_uniform(&rng), (int)(rng_uniform(&rng) * 44) - 24);
            const float x = i % 2 ? -mag : mag;
            const uint8_t want = nearest_by_search(x, FORMATS[f]), got = fp8_encode(x, FORMATS[f]);
            cr_assert_eq(got, want, "format %d: %g encoded 0x%02x, the nearest is 0x%02x", f, x,
                         got, want);
        }
}
