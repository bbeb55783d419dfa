// test_online_softmax.c: chapter 05's exercise, the online softmax of one
// row of attention (common/model/online_softmax.h, solutions/05_flash_attention/),
// against the textbook's three passes in double: the output and the
// log-sum-exp, whatever the tile size; the running state after each tile;
// and scores large enough that the textbook's exp(x) would overflow a float.
#include <criterion/criterion.h>
#include <math.h>

#include "model/online_softmax.h"
#include "util/util.h"

enum { HS = 16, LD = 24 };  // rows of k and v are LD floats apart, HS of them used

// The textbook, in double: all scores, their max, the exponentials, the sums.
static void reference_row(double *out, double *lse, const float *q, const float *k,
                          const float *v, int n) {
    const double scale = 1.0 / sqrt((double)HS);
    double max = -INFINITY, sum = 0, *x = xmalloc((size_t)n * sizeof(double));
    for (int j = 0; j < n; j++) {
        x[j] = 0;
        for (int d = 0; d < HS; d++) x[j] += (double)q[d] * k[(size_t)j * LD + d];
        x[j] *= scale;
        max = fmax(max, x[j]);
    }
    for (int d = 0; d < HS; d++) out[d] = 0;
    for (int j = 0; j < n; j++) {
        double p = exp(x[j] - max);
        sum += p;
        for (int d = 0; d < HS; d++) out[d] += p * v[(size_t)j * LD + d];
    }
    for (int d = 0; d < HS; d++) out[d] /= sum;
    *lse = max + log(sum);
    free(x);
}

static float *uniform(Rng *rng, size_t n, float lo, float hi) {
    float *x = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * rng_uniform(rng);
    return x;
}

// out within 1e-5 of its scale, lse within 1e-5 of itself: float sums of at
// most a few hundred terms, against double.
static void check_row(int n, int tile, float q_scale, uint64_t seed) {
    Rng rng;
    rng_seed(&rng, seed);
    float *q = uniform(&rng, HS, -q_scale, q_scale);
    float *k = uniform(&rng, (size_t)n * LD, -1, 1), *v = uniform(&rng, (size_t)n * LD, -1, 1);
    double want[HS], want_lse;
    reference_row(want, &want_lse, q, k, v, n);
    float got[HS], got_lse;
    attention_row_online(got, &got_lse, q, k, v, n, HS, LD, tile);
    double max_out = 0;
    for (int d = 0; d < HS; d++) max_out = fmax(max_out, fabs(want[d]));
    for (int d = 0; d < HS; d++)
        cr_assert(fabs(got[d] - want[d]) <= 1e-5 * max_out + 1e-7,
                  "n=%d, tile=%d: out[%d] = %.9g, want %.9g", n, tile, d, (double)got[d], want[d]);
    cr_assert(fabs(got_lse - want_lse) <= 1e-5 * fabs(want_lse) + 1e-6,
              "n=%d, tile=%d: lse = %.9g, want %.9g", n, tile, (double)got_lse, want_lse);
    free(q), free(k), free(v);
}

// One tile or many, tiles that divide n and tiles that do not, a tile of 1.
Test(online_softmax, any_tile_size_gives_the_softmax) {
    const int tiles[] = {1, 3, 7, 16, 64, 100, 1000};
    for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++) check_row(100, tiles[t], 4, 1);
}

// A row of one key: the softmax is 1, out = v_0, lse = x_0.
Test(online_softmax, one_key) { check_row(1, 64, 4, 2); }

// Scores near 3000: exp(3000) is far beyond a float (3.4e38 is exp(88.7)),
// and the textbook's single pass without the max would give inf / inf. The
// online softmax never exponentiates anything positive.
Test(online_softmax, huge_scores_do_not_overflow) { check_row(200, 16, 3000, 3); }

// The state after each tile is the textbook's partial sums relative to the
// running maximum: m the max so far, l = sum exp(x - m), acc = sum exp(x - m) v.
Test(online_softmax, the_state_after_each_tile) {
    const int n = 50, tile = 8;
    Rng rng;
    rng_seed(&rng, 4);
    float *q = uniform(&rng, HS, -4, 4);
    float *k = uniform(&rng, (size_t)n * LD, -1, 1), *v = uniform(&rng, (size_t)n * LD, -1, 1);
    const float scale = 1.0f / sqrtf((float)HS);
    float acc[HS];
    OnlineSoftmax s;
    online_softmax_init(&s, acc, HS);
    cr_assert(isinf(s.m) && s.m < 0 && s.l == 0.0f, "the empty state: m = -inf, l = 0");
    for (int j = 0; j < n; j += tile) {
        const int m = n - j < tile ? n - j : tile;
        online_softmax_tile(&s, q, k + (size_t)j * LD, v + (size_t)j * LD, m, LD, scale);
        double x_max = -INFINITY, l = 0, want_acc[HS] = {0};
        for (int i = 0; i < j + m; i++) {
            double x = 0;
            for (int d = 0; d < HS; d++) x += (double)q[d] * k[(size_t)i * LD + d];
            x_max = fmax(x_max, x * scale);
        }
        for (int i = 0; i < j + m; i++) {
            double x = 0;
            for (int d = 0; d < HS; d++) x += (double)q[d] * k[(size_t)i * LD + d];
            const double p = exp(x * scale - x_max);
            l += p;
            for (int d = 0; d < HS; d++) want_acc[d] += p * v[(size_t)i * LD + d];
        }
        cr_assert(fabs(s.m - x_max) <= 1e-5 * fabs(x_max) + 1e-6,
                  "after %d keys: m = %.9g, want the max %.9g", j + m, (double)s.m, x_max);
        cr_assert(fabs(s.l - l) <= 1e-5 * l, "after %d keys: l = %.9g, want %.9g", j + m,
                  (double)s.l, l);
        for (int d = 0; d < HS; d++)
            cr_assert(fabs(s.acc[d] - want_acc[d]) <= 1e-5 * l,
                      "after %d keys: acc[%d] = %.9g, want %.9g", j + m, d, (double)s.acc[d],
                      want_acc[d]);
    }
    free(q), free(k), free(v);
}
