// test_bf16.c: the fp32 <-> bf16 conversions of common/util/bf16.h (chapter 02's
// exercise, solutions/02_mixed_precision/bf16.c), against bit patterns worked
// out by hand: round to nearest with ties to even, subnormals, Inf and NaN,
// the largest finite value, and stochastic rounding's two neighbours and its
// unbiased mean.
//
// Bit patterns, fp32 high bit first: sign | 8 exponent bits | 23 mantissa
// bits; bf16 is the top 16 of them. 0x3F80 is 1.0; one bf16 step above 1 is
// 2^-7 (0x3F81), so 1 + 2^-8 (0x3F808000) is exactly halfway between them.
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "util/bf16.h"
#include "util/float_bits.h"
#include "util/util.h"

// fp32 bits -> bf16 bits, by round to nearest even, checked against `want`.
static void expect_rne(uint32_t in, uint16_t want) {
    uint16_t got = bf16_from_float_rne(float_from_bits(in));
    cr_assert(got == want, "bf16_from_float_rne(0x%08X = %.9g) = 0x%04X, want 0x%04X", in,
              (double)float_from_bits(in), got, want);
}

static int bf16_is_nan(uint16_t h) { return (h & 0x7F80u) == 0x7F80u && (h & 0x007Fu) != 0; }

Test(bf16, to_float_is_exact) {
    cr_assert(bf16_to_float(0x3F80) == 1.0f);
    cr_assert(bf16_to_float(0xC020) == -2.5f);
    cr_assert(bf16_to_float(0x0000) == 0.0f && !signbit(bf16_to_float(0x0000)));
    cr_assert(bf16_to_float(0x8000) == 0.0f && signbit(bf16_to_float(0x8000)));
    cr_assert(bf16_to_float(0x3F81) == 1.0f + 0x1p-7f);
    cr_assert(bf16_to_float(0x0001) == 0x1p-133f, "the smallest subnormal");
    cr_assert(bf16_to_float(0x0080) == FLT_MIN, "the smallest normal, fp32's");
    cr_assert(bf16_to_float(BF16_MAX_FINITE) == 0x1.FEp127f);
    cr_assert(isinf(bf16_to_float(BF16_POS_INF)) && bf16_to_float(BF16_POS_INF) > 0);
    cr_assert(isinf(bf16_to_float(BF16_NEG_INF)) && bf16_to_float(BF16_NEG_INF) < 0);
    cr_assert(isnan(bf16_to_float(BF16_QUIET_NAN)));
    // Every bf16 value is an fp32 value: its bits, then 16 zeros.
    for (uint32_t h = 0; h <= 0xFFFF; h++)
        cr_assert(float_bits(bf16_to_float((uint16_t)h)) == h << 16, "0x%04X", h);
}

Test(bf16, rne_keeps_bf16_values) {
    // A float with at most 8 significant bits is a bf16 value: it comes back
    // unchanged, for every finite and infinite pattern.
    for (uint32_t h = 0; h <= 0xFFFF; h++) {
        if (bf16_is_nan((uint16_t)h)) continue;
        expect_rne(h << 16, (uint16_t)h);
    }
}

Test(bf16, rne_rounds_to_nearest) {
    expect_rne(0x3F807FFF, 0x3F80);  // just below halfway: down
    expect_rne(0x3F808001, 0x3F81);  // just above halfway: up
    expect_rne(0x3F80C000, 0x3F81);  // three quarters: up
    expect_rne(0x3F804000, 0x3F80);  // a quarter: down
    expect_rne(0xBF808001, 0xBF81);  // negative: the magnitude rounds the same way
    expect_rne(0xBF807FFF, 0xBF80);
    // 1.1111111_1b (the mantissa all ones, then more than half): up into the
    // next exponent, 2.0.
    expect_rne(0x3FFFC000, 0x4000);
    // 0.1 = 0x3DCCCCCD: the dropped half 0xCCCD is more than half: up.
    expect_rne(0x3DCCCCCD, 0x3DCD);
}

Test(bf16, rne_ties_go_to_even) {
    expect_rne(0x3F808000, 0x3F80);  // 1 + 2^-8: between 0x3F80 (even) and 0x3F81: down
    expect_rne(0x3F818000, 0x3F82);  // between 0x3F81 and 0x3F82 (even): up
    expect_rne(0xBF808000, 0xBF80);  // the same, negative
    expect_rne(0xBF818000, 0xBF82);
    expect_rne(0x3FFF8000, 0x4000);  // between 0x3FFF and 0x4000 (even): up, into the next exponent
    expect_rne(0x40FE8000, 0x40FE);  // between 0x40FE (even) and 0x40FF: down
}

Test(bf16, rne_subnormals) {
    // bf16 has fp32's exponent, so fp32's subnormals round like any other
    // value, in steps of 2^-133 (0x0001), and are not flushed to zero.
    expect_rne(0x00010000, 0x0001);  // the smallest bf16 subnormal, exact
    expect_rne(0x00008000, 0x0000);  // half of it: a tie, to even: zero
    expect_rne(0x00008001, 0x0001);  // just over half: up
    expect_rne(0x00018000, 0x0002);  // between 0x0001 and 0x0002: a tie, to even
    expect_rne(0x00017FFF, 0x0001);
    expect_rne(0x00000001, 0x0000);  // fp32's smallest subnormal: far below half a step
    expect_rne(0x80008001, 0x8001);  // negative
    expect_rne(0x80000001, 0x8000);  // rounds to -0, sign kept
    expect_rne(0x007FFFFF, 0x0080);  // the largest fp32 subnormal rounds up to FLT_MIN
    expect_rne(0x007F7FFF, 0x007F);  // the largest bf16 subnormal
}

Test(bf16, rne_largest_finite_and_overflow) {
    expect_rne(0x7F7F0000, BF16_MAX_FINITE);  // 3.3895e38, exact
    expect_rne(0x7F7F7FFF, BF16_MAX_FINITE);  // below halfway to the next (2^128): down
    // Halfway: 0x7F7F is odd, so the tie goes up, to 2^128, which is Inf.
    expect_rne(0x7F7F8000, BF16_POS_INF);
    expect_rne(float_bits(FLT_MAX), BF16_POS_INF);  // fp32's largest, 3.4028e38: Inf in bf16
    expect_rne(float_bits(-FLT_MAX), BF16_NEG_INF);
    expect_rne(0xFF7F7FFF, 0xFF7F);
}

Test(bf16, rne_inf_and_nan) {
    expect_rne(0x7F800000, BF16_POS_INF);
    expect_rne(0xFF800000, BF16_NEG_INF);
    // NaNs stay NaNs, whatever their payload: 0x7F800001 truncated would be
    // Inf, and 0x7FFFFFFF plus a rounding increment would carry into the sign.
    const uint32_t nans[] = {0x7FC00000, 0x7F800001, 0x7F80FFFF, 0x7FFFFFFF, 0xFFC00000,
                             0xFF800001, 0xFFFFFFFF, 0x7FBFFFFF};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        uint16_t h = bf16_from_float_rne(float_from_bits(nans[i]));
        cr_assert(bf16_is_nan(h), "0x%08X became 0x%04X, not a NaN", nans[i], h);
        cr_assert((h >> 15) == (nans[i] >> 31), "0x%08X lost its sign: 0x%04X", nans[i], h);
        cr_assert(h & 0x0040, "0x%08X became 0x%04X, not a quiet NaN", nans[i], h);
    }
}

// The two bf16 neighbours of a finite x: the pattern with its low 16 bits
// dropped (toward zero), and the next one away from zero.
static void neighbours(float x, uint16_t *lo, uint16_t *hi) {
    *lo = (uint16_t)(float_bits(x) >> 16);
    *hi = (float_bits(x) & 0xFFFFu) ? (uint16_t)(*lo + 1) : *lo;
}

Test(bf16, rne_is_the_nearest_over_random_values) {
    Rng rng;
    rng_seed(&rng, 2);
    for (int i = 0; i < 200000; i++) {
        // Random bit patterns over all finite exponents.
        float x = float_from_bits(rng_u32(&rng));
        if (!isfinite(x)) continue;
        uint16_t lo, hi, h = bf16_from_float_rne(x);
        neighbours(x, &lo, &hi);
        cr_assert(h == lo || h == hi, "%.9g -> 0x%04X, not a neighbour", (double)x, h);
        double err = fabs((double)bf16_to_float(h) - x);
        double other = fabs((double)bf16_to_float(h == lo ? hi : lo) - x);
        if (isinf(bf16_to_float(h))) continue;  // rounded past the largest finite
        cr_assert(err <= other, "%.9g -> %.9g, but %.9g is nearer", (double)x,
                  (double)bf16_to_float(h), (double)bf16_to_float(h == lo ? hi : lo));
        // so the error is at most half the step between them, which is at
        // most 2^-8 of |x| for normal values (8 significant bits)
        cr_assert(err <= 0.5 * (err + other), "%.9g: error %.3g", (double)x, err);
        if (fabs(x) >= FLT_MIN)
            cr_assert(err <= 0x1p-8 * fabs(x), "%.9g: error %.3g", (double)x, err);
    }
}

Test(bf16, stochastic_keeps_bf16_values) {
    const uint32_t randoms[] = {0, 1, 0x7FFF, 0x8000, 0xFFFF, 0xFFFFFFFF, 0x12345678};
    for (uint32_t h = 0; h <= 0xFFFF; h++) {
        if (bf16_is_nan((uint16_t)h)) continue;
        for (size_t r = 0; r < sizeof randoms / sizeof randoms[0]; r++) {
            uint16_t got = bf16_from_float_stochastic(float_from_bits(h << 16), randoms[r]);
            cr_assert(got == h, "0x%04X with random bits 0x%08X became 0x%04X", h, randoms[r], got);
        }
    }
}

Test(bf16, stochastic_rounds_to_a_neighbour) {
    Rng rng;
    rng_seed(&rng, 3);
    for (int i = 0; i < 200000; i++) {
        float x = float_from_bits(rng_u32(&rng));
        if (!isfinite(x)) continue;
        uint16_t lo, hi, h = bf16_from_float_stochastic(x, rng_u32(&rng));
        neighbours(x, &lo, &hi);
        cr_assert(h == lo || h == hi, "%.9g -> 0x%04X, not 0x%04X or 0x%04X", (double)x, h, lo, hi);
    }
    // The extremes of the random bits: 0 never rounds up, 0xFFFF always does
    // (unless x is a bf16 value already).
    cr_assert(bf16_from_float_stochastic(float_from_bits(0x3F800001), 0) == 0x3F80);
    cr_assert(bf16_from_float_stochastic(float_from_bits(0x3F800001), 0xFFFF) == 0x3F81);
    cr_assert(bf16_from_float_stochastic(float_from_bits(0xBF800001), 0xFFFF) == 0xBF81);
}

// Over all 65536 values of the random bits, x = lo + d/65536 of a step
// rounds up exactly d times: the mean of the results is x itself, exactly.
static void expect_exactly_unbiased(uint32_t in) {
    float x = float_from_bits(in);
    double sum = 0;
    uint32_t ups = 0;
    uint16_t lo, hi;
    neighbours(x, &lo, &hi);
    for (uint32_t r = 0; r <= 0xFFFF; r++) {
        uint16_t h = bf16_from_float_stochastic(x, r);
        ups += h == hi && hi != lo;
        sum += bf16_to_float(h);
    }
    cr_assert(ups == (in & 0xFFFFu), "0x%08X rounded up %u times in 65536, want %u", in, ups,
              in & 0xFFFFu);
    cr_assert(sum / 65536 == (double)x, "0x%08X: mean %.12g, want %.12g", in, sum / 65536,
              (double)x);
}

Test(bf16, stochastic_is_unbiased_over_all_random_bits) {
    expect_exactly_unbiased(0x3F802000);  // 1 + 2^-10: an eighth of a step up
    expect_exactly_unbiased(0x3F808000);  // the tie: half the time each way
    expect_exactly_unbiased(0xBF80E000);  // negative, seven eighths
    expect_exactly_unbiased(0x3DCCCCCD);  // 0.1
    expect_exactly_unbiased(0x00008001);  // a subnormal
}

Test(bf16, stochastic_mean_is_unbiased_with_random_bits) {
    // With random bits from an RNG, the mean of many roundings converges to
    // x, while round to nearest is off by the same amount every time.
    const float xs[] = {1.0f + 0x1p-10f, 0.1f, -3.14159265f, 1e-3f, 123.456f};
    Rng rng;
    rng_seed(&rng, 4);
    enum { DRAWS = 200000 };
    for (size_t k = 0; k < sizeof xs / sizeof xs[0]; k++) {
        float x = xs[k];
        uint16_t lo, hi;
        neighbours(x, &lo, &hi);
        double step = fabs((double)bf16_to_float(hi) - bf16_to_float(lo));
        double p = fabs((double)x - bf16_to_float(lo)) / step;
        double sum = 0;
        for (int i = 0; i < DRAWS; i++) sum += bf16_to_float(bf16_from_float_stochastic(x, rng_u32(&rng)));
        double mean = sum / DRAWS;
        // The mean of DRAWS Bernoulli(p) steps has a standard deviation of
        // step * sqrt(p (1 - p) / DRAWS); 5 of them is a 1 in 10^6 event.
        double sd = step * sqrt(p * (1 - p) / DRAWS);
        cr_assert(fabs(mean - x) <= 5 * sd + 1e-12 * fabs(x),
                  "%.9g: mean of %d stochastic roundings %.9g, %.2f sd away", (double)x, DRAWS,
                  mean, fabs(mean - x) / sd);
    }
}

Test(bf16, stochastic_inf_and_nan) {
    const uint32_t randoms[] = {0, 0x8000, 0xFFFF, 0xFFFFFFFF};
    for (size_t r = 0; r < sizeof randoms / sizeof randoms[0]; r++) {
        cr_assert(bf16_from_float_stochastic(INFINITY, randoms[r]) == BF16_POS_INF);
        cr_assert(bf16_from_float_stochastic(-INFINITY, randoms[r]) == BF16_NEG_INF);
        const uint32_t nans[] = {0x7FC00000, 0x7F800001, 0x7FFFFFFF, 0xFFFFFFFF, 0xFF800001};
        for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
            uint16_t h = bf16_from_float_stochastic(float_from_bits(nans[i]), randoms[r]);
            cr_assert(bf16_is_nan(h) && (h >> 15) == (nans[i] >> 31),
                      "0x%08X with 0x%08X became 0x%04X", nans[i], randoms[r], h);
        }
    }
    // Past the largest finite value, the upper neighbour is Inf.
    cr_assert(bf16_from_float_stochastic(FLT_MAX, 0) == BF16_MAX_FINITE);
    cr_assert(bf16_from_float_stochastic(FLT_MAX, 0xFFFF) == BF16_POS_INF);
}
