// test_quantize8.c: chapter 10's 8-bit optimizer state on the CPU
// (common/optim/quantize8.h): the two dynamic maps, block-wise quantization and
// its error bound, and the 8-bit AdamW step against fp32 AdamW
// (common/optim/optimizer.c).
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/compare.h"
#include "optim/optimizer.h"
#include "optim/quantize8.h"
#include "util/tolerances.h"
#include "util/util.h"

static const char *map_name(Q8Map map) { return map == Q8_SIGNED ? "signed" : "unsigned"; }

// ---- the maps ------------------------------------------------------------------

Test(quantize8, maps_have_256_increasing_values_with_0_and_1) {
    for (Q8Map map = Q8_SIGNED; map <= Q8_UNSIGNED; map++) {
        float values[Q8_MAP_SIZE];
        q8_map(map, values);
        for (int i = 0; i + 1 < Q8_MAP_SIZE; i++)
            cr_assert(values[i] < values[i + 1], "%s map: [%d] = %.9g, [%d] = %.9g",
                      map_name(map), i, (double)values[i], i + 1, (double)values[i + 1]);
        const int zero = map == Q8_SIGNED ? Q8_SIGNED_ZERO : Q8_UNSIGNED_ZERO;
        cr_assert(values[zero] == 0.0f && !signbit(values[zero]), "%s map: [%d] is 0",
                  map_name(map), zero);
        cr_assert(values[Q8_MAP_SIZE - 1] == 1.0f, "%s map ends at 1", map_name(map));
        cr_assert(values[0] >= (map == Q8_SIGNED ? -1.0f : 0.0f), "%s map starts at %.9g",
                  map_name(map), (double)values[0]);
        for (int i = 0; i < Q8_MAP_SIZE; i++)
            cr_assert(q8_map_value(map, i) == values[i], "q8_map_value is q8_map");
    }
}

// map[127 - j] = -map[127 + j], j = 1..127: 127 magnitudes and their
// negatives around 0; the 256th value, 1.0, has no negative twin.
Test(quantize8, signed_map_is_symmetric_but_for_1) {
    float s[Q8_MAP_SIZE];
    q8_map(Q8_SIGNED, s);
    for (int j = 1; j <= 127; j++)
        cr_assert(s[Q8_SIGNED_ZERO - j] == -s[Q8_SIGNED_ZERO + j], "j = %d: %.9g and %.9g", j,
                  (double)s[Q8_SIGNED_ZERO - j], (double)s[Q8_SIGNED_ZERO + j]);
    cr_assert(s[0] > -1.0f && s[0] == -s[254], "the most negative value is -map[254], not -1");
}

// Decade i = [10^(i-7), 10^(i-6)] holds c = 2^i (signed) or 2^(i+1)
// (unsigned) values, evenly spaced midpoints of it: the first half a step
// above its lower bound, the last half a step below its upper bound.
Test(quantize8, each_decade_holds_its_midpoints) {
    for (Q8Map map = Q8_SIGNED; map <= Q8_UNSIGNED; map++) {
        float values[Q8_MAP_SIZE];
        q8_map(map, values);
        int next = map == Q8_SIGNED ? Q8_SIGNED_ZERO + 1 : Q8_UNSIGNED_ZERO + 1;
        for (int i = 0; i <= 6; i++) {
            const double lo = pow(10.0, i - 7), hi = pow(10.0, i - 6);
            const int c = map == Q8_SIGNED ? 1 << i : 2 << i;
            for (int k = 0; k < c; k++, next++) {
                const double want = lo + (hi - lo) * (2 * k + 1) / (2.0 * c);
                // The map's value is `want` rounded to float: within half
                // an ulp of it (2^-24 relative), and inside the decade.
                cr_assert(fabs(values[next] - want) <= 0x1p-24 * want,
                          "%s map [%d] = %.9g, want %.9g", map_name(map), next,
                          (double)values[next], want);
                cr_assert(values[next] > lo && values[next] < hi);
            }
        }
        cr_assert_eq(next, Q8_MAP_SIZE - 1, "%s map: 1.0 follows the last decade", map_name(map));
    }
    // The smallest positive values: decade 0's midpoints.
    float s[Q8_MAP_SIZE], u[Q8_MAP_SIZE];
    q8_map(Q8_SIGNED, s);
    q8_map(Q8_UNSIGNED, u);
    cr_assert(s[Q8_SIGNED_ZERO + 1] == 5.5e-7f, "%.9g", (double)s[Q8_SIGNED_ZERO + 1]);
    cr_assert(u[1] == 3.25e-7f && u[2] == 7.75e-7f, "%.9g %.9g", (double)u[1], (double)u[2]);
    // The top decade: 64 values 0.9/64 apart (signed), 128 values 0.9/128 apart.
    cr_assert(s[254] == 0.99296875f && s[191] == 0.10703125f);
    cr_assert(u[254] == 0.996484375f && u[127] == 0.103515625f);
}

// ---- quantization ----------------------------------------------------------------

// Every map value, quantized with absmax 1 (it is in the block: 1.0 is the
// last value) or a power of two times it (division and product exact),
// comes back as itself, from its own index.
Test(quantize8, every_map_value_round_trips_exactly) {
    const float scales[] = {1.0f, 0x1p-20f, 0x1p10f};
    for (Q8Map map = Q8_SIGNED; map <= Q8_UNSIGNED; map++)
        for (size_t s = 0; s < sizeof scales / sizeof scales[0]; s++) {
            float x[Q8_MAP_SIZE], back[Q8_MAP_SIZE], absmax;
            uint8_t q[Q8_MAP_SIZE];
            q8_map(map, x);
            for (int i = 0; i < Q8_MAP_SIZE; i++) x[i] *= scales[s];
            q8_quantize(map, x, Q8_MAP_SIZE, q, &absmax);
            cr_assert(absmax == scales[s]);
            q8_dequantize(map, q, &absmax, Q8_MAP_SIZE, back);
            for (int i = 0; i < Q8_MAP_SIZE; i++) {
                cr_assert_eq(q[i], i, "%s map, scale %g: value %d stored as %d", map_name(map),
                             (double)scales[s], i, q[i]);
                cr_assert(back[i] == x[i]);
            }
        }
}

// The rounding rule: the nearer neighbour, a tie to the lower index; below
// the first value the first index, above the last the last; NaN the first.
Test(quantize8, nearest_value_and_ties) {
    float u[Q8_MAP_SIZE], s[Q8_MAP_SIZE];
    q8_map(Q8_UNSIGNED, u);
    q8_map(Q8_SIGNED, s);
    const float half = u[1] / 2;  // exactly halfway between u[0] = 0 and u[1]
    cr_assert_eq(q8_nearest(u, half), 0, "a tie goes to the lower index");
    cr_assert_eq(q8_nearest(u, nextafterf(half, 1.0f)), 1);
    cr_assert_eq(q8_nearest(u, nextafterf(half, 0.0f)), 0);
    const float mid = (u[200] + u[201]) / 2;  // exact: both in [0.5, 1), a common ulp
    cr_assert_eq(q8_nearest(u, mid), 200);
    cr_assert_eq(q8_nearest(u, nextafterf(mid, 1.0f)), 201);
    cr_assert_eq(q8_nearest(s, -1.0f), 0, "below the first value: index 0");
    cr_assert_eq(q8_nearest(s, 1.0f), 255);
    cr_assert_eq(q8_nearest(u, 2.0f), 255, "above the last value: index 255");
    cr_assert_eq(q8_nearest(s, 0.0f), Q8_SIGNED_ZERO);
    cr_assert_eq(q8_nearest(s, -0.0f), Q8_SIGNED_ZERO);
    cr_assert_eq(q8_nearest(s, NAN), 0);
    for (int i = 0; i < Q8_MAP_SIZE; i++) cr_assert_eq(q8_nearest(s, s[i]), i);
}

// The largest error rounding y to its map may make, relative to the
// block's absmax: half the gap between the two map values around y (the
// distance to the end value outside them), plus the float rounding of
// y = x / absmax and of map[q] * absmax (2^-24 of each, relative).
static double allowed_error(const float *values, float y, float got) {
    double gap_half;
    if (y <= values[0]) gap_half = (double)values[0] - y;
    else if (y >= values[Q8_MAP_SIZE - 1]) gap_half = (double)y - values[Q8_MAP_SIZE - 1];
    else {
        int k = 0;
        while (values[k + 1] < y) k++;  // values[k] < y <= values[k + 1]
        gap_half = 0.5 * ((double)values[k + 1] - values[k]);
    }
    return gap_half + 0x1p-23 * (fabs(y) + fabs(got));
}

// Checks q and absmax (quantized from x, n values) against the rule: each
// block's absmax is its largest |x|, each index is the nearest map value to
// x / absmax (neither neighbour is nearer), and the dequantized value is
// within allowed_error of x.
static void check_quantized(Q8Map map, const float *x, size_t n, const uint8_t *q,
                            const float *absmax) {
    float values[Q8_MAP_SIZE];
    q8_map(map, values);
    for (size_t b = 0; b < q8_blocks(n); b++) {
        const size_t start = b * Q8_BLOCK, end = start + Q8_BLOCK < n ? start + Q8_BLOCK : n;
        float largest = 0;
        for (size_t i = start; i < end; i++) largest = fmaxf(largest, fabsf(x[i]));
        cr_assert(absmax[b] == largest, "%s block %zu: absmax %.9g, largest |x| %.9g",
                  map_name(map), b, (double)absmax[b], (double)largest);
        for (size_t i = start; i < end; i++) {
            const float y = largest > 0 ? x[i] / largest : 0.0f, got = values[q[i]];
            const double d = fabs((double)got - y);
            if (q[i] > 0)
                cr_assert(d <= fabs((double)values[q[i] - 1] - y), "[%zu]: [%d] is nearer", i,
                          q[i] - 1);
            if (q[i] < Q8_MAP_SIZE - 1)
                cr_assert(d <= fabs((double)values[q[i] + 1] - y), "[%zu]: [%d] is nearer", i,
                          q[i] + 1);
            const double err =
                largest > 0 ? fabs((double)got * largest - x[i]) / largest : fabs(x[i]);
            const double allowed = allowed_error(values, y, got);
            cr_assert(err <= allowed, "%s map, [%zu] = %.9g (block absmax %.9g): error %.3g of "
                      "absmax, allowed %.3g", map_name(map), i, (double)x[i], (double)largest, err,
                      allowed);
        }
    }
}

// Random blocks whose values span many orders of magnitude, as Adam's
// moments do: each value is a normal draw times 10^-u, u uniform in [0, 8),
// and each block has a scale of its own; the signed map gets both signs,
// the unsigned one the absolute values (and, as v's, their squares).
Test(quantize8, error_is_within_half_a_gap) {
    const size_t n = 64 * Q8_BLOCK + 99;
    Rng rng;
    rng_seed(&rng, 10);
    float *x = xmalloc(n * sizeof(float)), *absmax = xmalloc(q8_blocks(n) * sizeof(float));
    uint8_t *q = xmalloc(n);
    for (int square = 0; square <= 1; square++) {
        for (size_t i = 0; i < n; i++) {
            const float block_scale = powf(10.0f, (float)((i / Q8_BLOCK) % 7) - 3.0f);
            x[i] = block_scale * rng_normal(&rng) * powf(10.0f, -8.0f * rng_uniform(&rng));
        }
        q8_quantize(Q8_SIGNED, x, n, q, absmax);
        check_quantized(Q8_SIGNED, x, n, q, absmax);
        for (size_t i = 0; i < n; i++) x[i] = square ? x[i] * x[i] : fabsf(x[i]);
        q8_quantize(Q8_UNSIGNED, x, n, q, absmax);
        check_quantized(Q8_UNSIGNED, x, n, q, absmax);
    }
    // A block's largest value is exact when positive (1.0 is in both maps),
    // and 0.7% of absmax off when negative in the signed map (-1 is not).
    float two[2] = {-3.0f, 1.5f}, back[2], scale;
    uint8_t q2[2];
    q8_quantize(Q8_SIGNED, two, 2, q2, &scale);
    q8_dequantize(Q8_SIGNED, q2, &scale, 2, back);
    cr_assert(scale == 3.0f && q2[0] == 0 && fabsf(back[0] + 3.0f) < 0.0071f * 3.0f,
              "-3 comes back as %.9g", (double)back[0]);
    free(x), free(absmax), free(q);
}

// A block of zeros: absmax 0, every value the index of 0, dequantized to 0.
// And any index dequantizes to 0 where absmax is 0: zero bytes are zeros.
Test(quantize8, a_block_of_zeros) {
    const size_t n = 3 * Q8_BLOCK;
    float x[3 * Q8_BLOCK], back[3 * Q8_BLOCK], absmax[3];
    uint8_t q[3 * Q8_BLOCK];
    for (size_t i = 0; i < n; i++) x[i] = i / Q8_BLOCK == 1 ? 0.0f : (float)(i % 7) - 3.0f;
    for (Q8Map map = Q8_SIGNED; map <= Q8_UNSIGNED; map++) {
        for (size_t i = 0; i < n; i++) x[i] = map == Q8_UNSIGNED ? fabsf(x[i]) : x[i];
        q8_quantize(map, x, n, q, absmax);
        cr_assert(absmax[1] == 0.0f && absmax[0] == 3.0f && absmax[2] == 3.0f);
        for (size_t i = Q8_BLOCK; i < 2 * Q8_BLOCK; i++)
            cr_assert_eq(q[i], map == Q8_SIGNED ? Q8_SIGNED_ZERO : Q8_UNSIGNED_ZERO);
        q8_dequantize(map, q, absmax, n, back);
        for (size_t i = Q8_BLOCK; i < 2 * Q8_BLOCK; i++) cr_assert(back[i] == 0.0f);
        for (int i = 0; i < Q8_MAP_SIZE; i++) q[i] = (uint8_t)i;
        const float zero = 0.0f;
        q8_dequantize(map, q, &zero, Q8_MAP_SIZE, back);
        for (int i = 0; i < Q8_MAP_SIZE; i++) cr_assert(back[i] == 0.0f, "index %d", i);
    }
}

// n = 2 blocks and 5 values: three scales, the last one the largest of the
// 5 values alone, and nothing written past the n-th byte.
Test(quantize8, a_short_last_block) {
    const size_t n = 2 * Q8_BLOCK + 5, room = 3 * Q8_BLOCK;
    Rng rng;
    rng_seed(&rng, 11);
    float x[3 * Q8_BLOCK], back[3 * Q8_BLOCK], absmax[4] = {-1, -1, -1, -1};
    uint8_t q[3 * Q8_BLOCK];
    memset(q, 0xAB, sizeof q);
    for (size_t i = 0; i < room; i++) x[i] = i < n ? rng_uniform(&rng) - 0.5f : 1e6f;
    x[n - 3] = -0.75f;  // the tail's largest |x|
    cr_assert_eq(q8_blocks(n), 3);
    q8_quantize(Q8_SIGNED, x, n, q, absmax);
    cr_assert(absmax[2] == 0.75f, "the tail's absmax: %.9g", (double)absmax[2]);
    cr_assert(absmax[3] == -1, "no fourth block");
    for (size_t i = n; i < room; i++) cr_assert_eq(q[i], 0xAB, "byte %zu past the end written", i);
    check_quantized(Q8_SIGNED, x, n, q, absmax);
    q8_dequantize(Q8_SIGNED, q, absmax, n, back);
    for (size_t i = n - 5; i < n; i++)
        cr_assert(fabsf(back[i] - x[i]) <= 0.0071f * 0.75f, "[%zu]: %.9g back as %.9g", i,
                  (double)x[i], (double)back[i]);
    cr_assert_eq(q8_blocks(0), 0);
    cr_assert_eq(q8_blocks(1), 1);
    cr_assert_eq(q8_blocks(Q8_BLOCK), 1);
}

// The range is finite: below half the smallest nonzero value (relative to
// the block's absmax) a value becomes 0. For v, that is 1.625e-7 x absmax:
// the square of a gradient about 2500 times smaller than the block's largest.
Test(quantize8, values_below_half_the_smallest_become_zero) {
    float u[Q8_MAP_SIZE], s[Q8_MAP_SIZE];
    q8_map(Q8_UNSIGNED, u);
    q8_map(Q8_SIGNED, s);
    float x[2] = {1.0f, 1.6e-7f}, absmax;
    uint8_t q[2];
    q8_quantize(Q8_UNSIGNED, x, 2, q, &absmax);
    cr_assert_eq(q[1], Q8_UNSIGNED_ZERO);
    x[1] = 1.7e-7f;
    q8_quantize(Q8_UNSIGNED, x, 2, q, &absmax);
    cr_assert_eq(q[1], 1);
    cr_assert_eq(q8_nearest(s, 2.7e-7f), Q8_SIGNED_ZERO);
    cr_assert_eq(q8_nearest(s, 2.8e-7f), Q8_SIGNED_ZERO + 1);
}

// ---- the 8-bit AdamW step ----------------------------------------------------------

typedef struct {
    size_t n;
    float *params, *m, *v, *m_absmax, *v_absmax;
    uint8_t *m_q, *v_q;
} State8;

static State8 state8(size_t n) {
    State8 s = {n,
                xcalloc(n, sizeof(float)),
                xcalloc(n, sizeof(float)),
                xcalloc(n, sizeof(float)),
                xcalloc(q8_blocks(n), sizeof(float)),
                xcalloc(q8_blocks(n), sizeof(float)),
                xcalloc(n, 1),
                xcalloc(n, 1)};
    return s;
}

static void free_state8(State8 *s) {
    free(s->params), free(s->m), free(s->v), free(s->m_absmax), free(s->v_absmax);
    free(s->m_q), free(s->v_q);
}

// One step from a quantized state is fp32 AdamW from the dequantized
// moments: the same weights, bit for bit (it runs the same function), and
// new moments that are adamw_update's, rounded to their maps.
Test(adamw8bit, one_step_is_adamw_on_the_dequantized_moments) {
    const size_t n = 9 * Q8_BLOCK + 31;
    Rng rng;
    rng_seed(&rng, 12);
    State8 s = state8(n);
    float *grads = xmalloc(n * sizeof(float)), *p = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        s.params[i] = 2 * rng_uniform(&rng) - 1;
        s.m[i] = 0.01f * rng_normal(&rng);
        s.v[i] = 1e-4f * s.m[i] * s.m[i] + 1e-9f * rng_uniform(&rng);
        grads[i] = 0.01f * rng_normal(&rng);
    }
    q8_quantize(Q8_SIGNED, s.m, n, s.m_q, s.m_absmax);
    q8_quantize(Q8_UNSIGNED, s.v, n, s.v_q, s.v_absmax);
    q8_dequantize(Q8_SIGNED, s.m_q, s.m_absmax, n, s.m);
    q8_dequantize(Q8_UNSIGNED, s.v_q, s.v_absmax, n, s.v);
    memcpy(p, s.params, n * sizeof(float));
    const AdamWConfig cfg = adamw_default_config();
    for (int decay = 0; decay <= 1; decay++) {
        const int t = 3 + decay;
        adamw_update(p, grads, s.m, s.v, n, 6e-4f, &cfg, decay, t);
        adamw8bit_update(s.params, grads, s.m_q, s.v_q, s.m_absmax, s.v_absmax, n, 6e-4f, &cfg,
                         decay, t);
        cr_assert(memcmp(p, s.params, n * sizeof(float)) == 0, "the weights are fp32 AdamW's");
        check_quantized(Q8_SIGNED, s.m, n, s.m_q, s.m_absmax);
        check_quantized(Q8_UNSIGNED, s.v, n, s.v_q, s.v_absmax);
        // The next step starts from the moments as stored.
        q8_dequantize(Q8_SIGNED, s.m_q, s.m_absmax, n, s.m);
        q8_dequantize(Q8_UNSIGNED, s.v_q, s.v_absmax, n, s.v);
    }
    free_state8(&s), free(grads), free(p);
}

// All-zero bytes are a fresh optimizer: the first step is fp32 AdamW's from
// m = v = 0, bit for bit.
Test(adamw8bit, zero_bytes_are_a_fresh_state) {
    const size_t n = 2 * Q8_BLOCK + 3;
    Rng rng;
    rng_seed(&rng, 13);
    State8 s = state8(n);
    float *grads = xmalloc(n * sizeof(float)), *p = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        s.params[i] = p[i] = 2 * rng_uniform(&rng) - 1;
        grads[i] = 0.01f * rng_normal(&rng);
    }
    const AdamWConfig cfg = adamw_default_config();
    adamw_update(p, grads, s.m, s.v, n, 6e-4f, &cfg, 1, 1);
    adamw8bit_update(s.params, grads, s.m_q, s.v_q, s.m_absmax, s.v_absmax, n, 6e-4f, &cfg, 1, 1);
    cr_assert(memcmp(p, s.params, n * sizeof(float)) == 0);
    check_quantized(Q8_SIGNED, s.m, n, s.m_q, s.m_absmax);
    check_quantized(Q8_UNSIGNED, s.v, n, s.v_q, s.v_absmax);
    free_state8(&s), free(grads), free(p);
}

// Ten steps of each from a fresh state, with the same gradients: normal
// draws, each block with a scale of its own (10^-3 to 10^-6, as different
// rows of a weight matrix). The weights' change by direction and by size
// (tolerances.h, TOL_ADAMW8BIT_*), and each moment within its quantization
// error of fp32's after the first step. Set Q8_TEST_VERBOSE=1 to print the
// measured values.
static void check_steps(int decay, uint64_t seed) {
    const size_t n = 40 * Q8_BLOCK + 77;
    const int steps = 10;
    Rng rng;
    rng_seed(&rng, seed);
    State8 s = state8(n);
    float *p = xmalloc(n * sizeof(float)), *start = xmalloc(n * sizeof(float));
    float *m = xcalloc(n, sizeof(float)), *v = xcalloc(n, sizeof(float));
    float *grads = xmalloc(n * sizeof(float)), *scale = xmalloc(q8_blocks(n) * sizeof(float));
    for (size_t i = 0; i < n; i++) s.params[i] = p[i] = start[i] = 2 * rng_uniform(&rng) - 1;
    for (size_t b = 0; b < q8_blocks(n); b++)
        scale[b] = 1e-3f * powf(10.0f, -3 * rng_uniform(&rng));
    const AdamWConfig cfg = adamw_default_config();
    for (int t = 1; t <= steps; t++) {
        for (size_t i = 0; i < n; i++) grads[i] = scale[i / Q8_BLOCK] * rng_normal(&rng);
        adamw_update(p, grads, m, v, n, 1e-3f, &cfg, decay, t);
        adamw8bit_update(s.params, grads, s.m_q, s.v_q, s.m_absmax, s.v_absmax, n, 1e-3f, &cfg,
                         decay, t);
        if (t == 1) {  // one rounding away from fp32's
            check_quantized(Q8_SIGNED, m, n, s.m_q, s.m_absmax);
            check_quantized(Q8_UNSIGNED, v, n, s.v_q, s.v_absmax);
        }
    }
    for (size_t i = 0; i < n; i++) p[i] -= start[i], s.params[i] -= start[i];
    const double cosine = cosine_similarity(s.params, p, n), ratio = norm_ratio(s.params, p, n);
    q8_dequantize(Q8_SIGNED, s.m_q, s.m_absmax, n, s.m);
    q8_dequantize(Q8_UNSIGNED, s.v_q, s.v_absmax, n, s.v);
    if (getenv("Q8_TEST_VERBOSE"))
        fprintf(stderr, "  8-bit vs fp32 AdamW, %d steps, decay %d: change 1 - cosine %.3g, "
                "norm ratio - 1 %.3g; m 1 - cosine %.3g, v 1 - cosine %.3g\n", steps, decay,
                1 - cosine, ratio - 1, 1 - cosine_similarity(s.m, m, n),
                1 - cosine_similarity(s.v, v, n));
    cr_assert(cosine >= TOL_ADAMW8BIT_COSINE, "the weights' change: cosine %.6f", cosine);
    cr_assert(fabs(ratio - 1) <= TOL_ADAMW8BIT_NORM_RATIO, "the weights' change: norm ratio %.6f",
              ratio);
    free_state8(&s), free(p), free(start), free(m), free(v), free(grads), free(scale);
}

Test(adamw8bit, ten_steps_follow_fp32_adamw_with_decay) { check_steps(1, 14); }
Test(adamw8bit, ten_steps_follow_fp32_adamw_without_decay) { check_steps(0, 15); }
