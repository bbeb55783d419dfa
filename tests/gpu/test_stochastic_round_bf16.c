// test_stochastic_round_bf16.c: chapter 14's stochastic rounding
// (kernels/stochastic_round.cuh) and the fused AdamW kernels that use it
// without master weights (adamw_fused_v2, adamw8bit_fused_v2 with
// stochastic 1). bf16 only: the fp32 build has nothing to round.
#include <math.h>
#include <string.h>

#include "adamw.h"
#include "adamw8bit.h"
#include "gpu_test.h"
#include "optim/quantize8.h"
#include "stochastic_round.h"
#include "util/float_bits.h"

TestSuite(stochastic_round, .init = gpu_test_init, .fini = gpu_test_fini);

// The bf16 step at w: the distance from |w|'s bf16 truncation to the next bf16 up.
static double bf16_step(float w) {
    const uint32_t lo = float_bits(fabsf(w)) & 0xFFFF0000u;
    return (double)float_from_bits(lo + 0x10000u) - (double)float_from_bits(lo);
}

// N roundings of one x (the same value at N indices) between two bf16
// neighbours lo and hi: only lo and hi come out, and the share of hi is
// x's position between them within 1% (the mean of N = 2^20 roundings has a
// standard deviation of at most 0.5 / 1024 = 0.05% of the step: 1% is 20
// of them, so a biased rounding fails and a fair one never does).
static void check_unbiased(float x, uint32_t step) {
    const size_t N = (size_t)1 << 20;
    const uint32_t lo_bits = float_bits(x) & 0xFFFF0000u;
    const float lo = float_from_bits(lo_bits), hi = float_from_bits(lo_bits + 0x10000u);
    const double frac = ((double)x - lo) / ((double)hi - lo);
    float *xs = xmalloc(N * sizeof(float));
    for (size_t i = 0; i < N; i++) xs[i] = x;
    floatX *out = gt_device_alloc(N * sizeof(floatX), "rounded");
    round_stochastic_v1(&gt_ctx, out, gt_upload(xs, N), N, step, 12345);
    float *got = gt_download_x(out, N);
    size_t up = 0;
    for (size_t i = 0; i < N; i++) {
        cr_assert(got[i] == lo || got[i] == hi, "x = %.9g: %.9g is neither neighbour (%.9g, %.9g)",
                  (double)x, (double)got[i], (double)lo, (double)hi);
        up += got[i] == hi;
    }
    const double share = (double)up / N;
    cr_assert(fabs(share - frac) <= 0.01, "x = %.9g at %.4f between its neighbours, rounded up "
              "%.4f of the time", (double)x, frac, share);
    free(xs), free(got);
}

Test(stochastic_round, is_unbiased_and_gives_only_the_two_neighbours) {
    check_unbiased(1.0f + 0.3f * 0.0078125f, 1);  // 0.3 of the way from 1 to the next
    check_unbiased(-0.1234567f, 7);               // negative: away from 0 as often as due
    check_unbiased(float_from_bits(0x3F008001u), 3);    // just above a bf16 value: rarely up
    check_unbiased(float_from_bits(0x3F00FFFFu), 3);    // just below the next: nearly always up
    check_unbiased(3.0e-39f, 5);                  // a subnormal
}

// The same inputs, step and indices give the same bits; another step gives
// other bits; a bf16 value, an infinity and NaN are left as they are.
Test(stochastic_round, is_deterministic_and_exact_where_nothing_is_to_round) {
    const size_t n = 100003;
    Rng rng;
    rng_seed(&rng, 11);
    float *x = gt_random(n, -2, 2, &rng);
    float *d_x = gt_upload(x, n);
    floatX *a = gt_device_alloc(n * sizeof(floatX), "a");
    floatX *b = gt_device_alloc(n * sizeof(floatX), "b");
    round_stochastic_v1(&gt_ctx, a, d_x, n, 5, 0);
    round_stochastic_v1(&gt_ctx, b, d_x, n, 5, 0);
    float *ga = gt_download_x(a, n), *gb = gt_download_x(b, n);
    gt_assert_identical("two roundings at the same step", ga, gb, n);
    round_stochastic_v1(&gt_ctx, b, d_x, n, 6, 0);
    free(gb);
    gb = gt_download_x(b, n);
    size_t differ = 0;
    for (size_t i = 0; i < n; i++) differ += float_bits(ga[i]) != float_bits(gb[i]);
    cr_assert_gt(differ, n / 10, "step 6 rounds as step 5 did at %zu of %zu values", n - differ, n);
    float special[4] = {1.5f, -0.25f, INFINITY, NAN};
    floatX *s = gt_device_alloc(4 * sizeof(floatX), "special");
    round_stochastic_v1(&gt_ctx, s, gt_upload(special, 4), 4, 9, 77);
    float *gs = gt_download_x(s, 4);
    cr_assert(gs[0] == 1.5f && gs[1] == -0.25f && isinf(gs[2]) && gs[2] > 0 && isnan(gs[3]),
              "%g %g %g %g", (double)gs[0], (double)gs[1], (double)gs[2], (double)gs[3]);
    free(x), free(ga), free(gb), free(gs);
}

// ---- the fused AdamW without master weights -----------------------------------

// Tensors of odd sizes and starts (the vector and the scalar paths both).
#define SR_TENSORS 4
static const size_t SR_SIZES[SR_TENSORS] = {40961, 3, 20007, 1024};
static const int SR_DECAY[SR_TENSORS] = {1, 0, 1, 0};
#define SR_STEPS 4
// lr 1e-3 against weights in [0.5, 1), whose bf16 step is 2^-8 = 3.9e-3:
// each update (about lr: Adam's step is lr times m/sqrt(v), about 1 with
// gradients of one sign) is a quarter of a step. Rounded to nearest it is
// lost entirely; rounded stochastically it is kept on average.
#define SR_LR 1e-3f

// Which optimizer: fp32 moments (adamw_fused_v2) or 8-bit (adamw8bit_fused_v2).
typedef struct {
    int eight_bit;
    AdamWTensors table;
    size_t n, state;
} SrSetup;

typedef struct {
    floatX *params;
    float *master;
    float *m, *v;              // fp32 moments
    uint8_t *m_q, *v_q;        // or 8-bit ones
    float *m_absmax, *v_absmax;
} SrState;

static SrSetup sr_setup(int eight_bit) {
    SrSetup s = {.eight_bit = eight_bit};
    if (eight_bit) {
        adamw_table_build(&s.table, SR_SIZES, SR_DECAY, SR_TENSORS, Q8_BLOCK);
        size_t state = 0;
        for (int k = 0; k < s.table.count; k++) {
            s.table.state_offset[k] = state;
            state += (s.table.size[k] + Q8_BLOCK - 1) / Q8_BLOCK * Q8_BLOCK;
        }
        s.state = state;
    } else {
        adamw_tensors_v2(&s.table, SR_SIZES, SR_DECAY, SR_TENSORS);
    }
    for (int k = 0; k < SR_TENSORS; k++) s.n += SR_SIZES[k];
    if (!eight_bit) s.state = s.n;
    return s;
}

static SrState sr_state(const SrSetup *s, const float *params, int with_master) {
    SrState st = {0};
    st.params = gt_upload_x(params, s->n);
    st.master = with_master ? gt_upload(params, s->n) : NULL;
    if (s->eight_bit) {
        const size_t blocks = s->state / Q8_BLOCK;
        st.m_q = gt_device_alloc(s->state, "m_q"), st.v_q = gt_device_alloc(s->state, "v_q");
        st.m_absmax = gt_device_alloc(blocks * sizeof(float), "m scales");
        st.v_absmax = gt_device_alloc(blocks * sizeof(float), "v scales");
        CUDA_CHECK(cudaMemset(st.m_q, 0, s->state));
        CUDA_CHECK(cudaMemset(st.v_q, 0, s->state));
        CUDA_CHECK(cudaMemset(st.m_absmax, 0, blocks * sizeof(float)));
        CUDA_CHECK(cudaMemset(st.v_absmax, 0, blocks * sizeof(float)));
    } else {
        st.m = gt_device_alloc(s->n * sizeof(float), "m");
        st.v = gt_device_alloc(s->n * sizeof(float), "v");
        CUDA_CHECK(cudaMemset(st.m, 0, s->n * sizeof(float)));
        CUDA_CHECK(cudaMemset(st.v, 0, s->n * sizeof(float)));
    }
    return st;
}

static void sr_update(const SrSetup *s, SrState *st, const floatX *grads, const AdamWStep *step,
                      int stochastic) {
    const AdamWConfig cfg = adamw_default_config();
    if (s->eight_bit)
        adamw8bit_fused_v2(&gt_ctx, &s->table, st->params, st->master, grads, st->m_q, st->v_q,
                           st->m_absmax, st->v_absmax, step, &cfg, stochastic);
    else
        adamw_fused_v2(&gt_ctx, &s->table, st->params, st->master, grads, st->m, st->v, step,
                       &cfg, stochastic);
}

// SR_STEPS steps of three copies of one state, from the same bf16 weights
// in [0.5, 1) and the same gradients (positive, so that every update moves
// its weight down): with master weights (the reference), without them
// rounding stochastically, and without them rounding to nearest; and the
// stochastic one again, for determinism.
//
// The tolerance: the moments depend on the gradients only, the same in
// every copy, so each step's update is the same but for weight decay's
// lr * wd * (difference), negligible. The stochastic copy's weight is then
// the master's plus SR_STEPS rounding errors, each less than one bf16 step
// of the weight: |difference| <= SR_STEPS steps (plus one for the master's
// own rounding to compare in bf16). And on average the errors cancel: the
// mean difference over all values, in units of the total update
// SR_STEPS * lr, is near 0 (its standard deviation here: at most
// sqrt(SR_STEPS) * step / 2 / sqrt(n), 0.004 of SR_STEPS * lr; allowed 0.1),
// where rounding to nearest loses every update: a mean difference of 1.
static void check_fused_without_master(int eight_bit) {
    const SrSetup s = sr_setup(eight_bit);
    const size_t n = s.n;
    Rng rng;
    rng_seed(&rng, 21 + eight_bit);
    float *w0 = gt_rounded_x(gt_random(n, 0.5f, 0.999f, &rng), n);
    SrState ref = sr_state(&s, w0, 1), sr = sr_state(&s, w0, 0), again = sr_state(&s, w0, 0);
    SrState nearest = sr_state(&s, w0, 0);
    AdamWStep *step = gt_device_alloc(sizeof(AdamWStep), "the step's values");
    float *norm = gt_device_alloc(sizeof(float), "norm");
    const float host_norm = 0.5f;  // no clipping
    CUDA_CHECK(cudaMemcpy(norm, &host_norm, sizeof host_norm, cudaMemcpyHostToDevice));
    const AdamWConfig cfg = adamw_default_config();
    for (int t = 1; t <= SR_STEPS; t++) {
        floatX *grads = gt_upload_x(gt_random_x(n, 0.01f, 0.02f, &rng), n);
        adamw_begin_step_v2(&gt_ctx, step, norm, 1.0f, t, SR_LR, &cfg);
        sr_update(&s, &ref, grads, step, 0);
        sr_update(&s, &sr, grads, step, 1);
        sr_update(&s, &again, grads, step, 1);
        sr_update(&s, &nearest, grads, step, 0);
    }
    float *master = gt_download(ref.master, n), *got = gt_download_x(sr.params, n);
    float *got_again = gt_download_x(again.params, n), *near = gt_download_x(nearest.params, n);
    gt_assert_identical("stochastic rounding, two runs", got, got_again, n);
    double mean_sr = 0, mean_near = 0;
    for (size_t i = 0; i < n; i++) {
        const double diff = (double)got[i] - master[i];
        const double allowed = (SR_STEPS + 1) * bf16_step(master[i]);
        cr_assert(fabs(diff) <= allowed, "value %zu: %.9g without master weights, %.9g with: "
                  "%.3g apart, more than %d bf16 steps", i, (double)got[i], (double)master[i],
                  diff, SR_STEPS + 1);
        mean_sr += diff, mean_near += (double)near[i] - master[i];
    }
    const double total = (double)SR_STEPS * SR_LR;
    mean_sr /= n * total, mean_near /= n * total;
    if (getenv("GPU_TEST_VERBOSE"))
        fprintf(stderr, "  %s: mean difference from the master weights, in units of the "
                "updates: stochastic %.4f, nearest %.4f\n", eight_bit ? "8-bit" : "fp32 moments",
                mean_sr, mean_near);
    cr_assert(fabs(mean_sr) <= 0.1, "stochastic rounding's weights are %.3f of the updates "
              "away from the master weights on average", mean_sr);
    cr_assert(mean_near > 0.5, "rounded to nearest the updates should be lost (mean %.3f): "
              "the test's updates are not below half a bf16 step", mean_near);
    free(w0), free(master), free(got), free(got_again), free(near);
}

Test(stochastic_round, fused_adamw_without_master_weights_follows_them) {
    check_fused_without_master(0);
}

Test(stochastic_round, fused_adamw8bit_without_master_weights_follows_them) {
    check_fused_without_master(1);
}

// With master weights, stochastic is ignored: params is the master copy
// rounded to nearest, bit for bit as with stochastic 0.
Test(stochastic_round, with_master_weights_stochastic_changes_nothing) {
    for (int eight_bit = 0; eight_bit <= 1; eight_bit++) {
        const SrSetup s = sr_setup(eight_bit);
        Rng rng;
        rng_seed(&rng, 31);
        float *w0 = gt_random_x(s.n, -1, 1, &rng);
        SrState a = sr_state(&s, w0, 1), b = sr_state(&s, w0, 1);
        AdamWStep *step = gt_device_alloc(sizeof(AdamWStep), "the step's values");
        float *norm = gt_device_alloc(sizeof(float), "norm");
        const float host_norm = 0.5f;
        CUDA_CHECK(cudaMemcpy(norm, &host_norm, sizeof host_norm, cudaMemcpyHostToDevice));
        const AdamWConfig cfg = adamw_default_config();
        for (int t = 1; t <= 2; t++) {
            floatX *grads = gt_upload_x(gt_random_x(s.n, -0.1f, 0.1f, &rng), s.n);
            adamw_begin_step_v2(&gt_ctx, step, norm, 1.0f, t, SR_LR, &cfg);
            sr_update(&s, &a, grads, step, 0);
            sr_update(&s, &b, grads, step, 1);
        }
        float *pa = gt_download_x(a.params, s.n), *pb = gt_download_x(b.params, s.n);
        gt_assert_identical("params with master weights, stochastic 0 and 1", pa, pb, s.n);
        free(w0), free(pa), free(pb);
    }
}
