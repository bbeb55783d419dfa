// test_kernels_layernorm.c: the layernorm kernels, v1 (chapter 00) and v2
// (chapter 04, 16-byte vectors), against the CPU reference.
#include "model/gpt2_cpu.h"
#include "gpu_test.h"
#include "layernorm.h"

// fp32: the GPU sums each row's C values (and each channel's B*T rows) in a
// different order than the CPU's left-to-right loop. The difference is a few
// ulps of the sums, far below 1e-5 of the tensors' scale. bf16: the same
// fp32 arithmetic on the same (rounded) inputs, and each stored value
// rounded once, by at most 2^-9 of itself: 4e-3 is twice that.
#define LN_TOL GT_TOL(1e-5, 4e-3)
// mean and rstd are fp32 in both builds, computed from the same inputs.
#define LN_STATS_TOL 1e-5
// Against the double build, for inputs near 100 with a spread of 1: the float
// mean is off by about an ulp of the row's sum divided by C (~1e-5), which
// every xhat carries times rstd (~3.5). A one-pass variance, E[x^2] - E[x]^2,
// would be off by O(1) here: the reason for two passes. (bf16 adds the
// rounding of the output, as LN_TOL.)
#define LN_LARGE_MEAN_TOL 1e-4
#define LN_LARGE_MEAN_OUT_TOL GT_TOL(1e-4, 4e-3)

TestSuite(kernels_layernorm, .init = gpu_test_init, .fini = gpu_test_fini);

typedef void (*LayernormForward)(const GpuContext *, floatX *, float *, float *, const floatX *,
                                 const floatX *, const floatX *, int, int, int);
typedef void (*LayernormBackward)(const GpuContext *, floatX *, floatX *, floatX *, float *,
                                  const floatX *, const floatX *, const floatX *, const float *,
                                  const float *, int, int, int);

static void check_version_against_cpu(LayernormForward forward, LayernormBackward backward, int B,
                                      int T, int C, uint64_t seed) {
    const size_t BT = (size_t)B * T, N = BT * C;
    Rng rng;
    rng_seed(&rng, seed);
    float *inp = gt_random_x(N, -2, 3, &rng), *w = gt_random_x(C, 0.5f, 1.5f, &rng);
    float *b = gt_random_x(C, -1, 1, &rng), *dout = gt_random_x(N, -1, 1, &rng);
    // Nonzero starting gradients: the backward pass must add to them.
    float *dinp0 = gt_random_x(N, -1, 1, &rng), *dw0 = gt_random_x(C, -1, 1, &rng);
    float *db0 = gt_random_x(C, -1, 1, &rng);

    float *out = xmalloc(N * sizeof(float)), *mean = xmalloc(BT * sizeof(float));
    float *rstd = xmalloc(BT * sizeof(float));
    cpu_layernorm_forward(out, mean, rstd, inp, w, b, B, T, C);
    float *dinp = gt_copy(dinp0, N), *dw = gt_copy(dw0, C), *db = gt_copy(db0, C);
    cpu_layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, B, T, C);

    floatX *d_inp = gt_upload_x(inp, N), *d_w = gt_upload_x(w, C), *d_b = gt_upload_x(b, C);
    floatX *d_out = gt_device_poisoned_x(N);
    float *d_mean = gt_device_poisoned(BT), *d_rstd = gt_device_poisoned(BT);
    forward(&gt_ctx, d_out, d_mean, d_rstd, d_inp, d_w, d_b, B, T, C);
    gt_compare("layernorm out", gt_download_x(d_out, N), out, N, LN_TOL);
    gt_compare("layernorm mean", gt_download(d_mean, BT), mean, BT, LN_STATS_TOL);
    gt_compare("layernorm rstd", gt_download(d_rstd, BT), rstd, BT, LN_STATS_TOL);

    floatX *d_dout = gt_upload_x(dout, N), *d_dinp = gt_upload_x(dinp0, N);
    floatX *d_dw = gt_upload_x(dw0, C), *d_db = gt_upload_x(db0, C);
    float *d_scratch = gt_device_poisoned(layernorm_backward_scratch_floats(B, T, C));
    backward(&gt_ctx, d_dinp, d_dw, d_db, d_scratch, d_dout, d_inp, d_w, d_mean, d_rstd, B, T, C);
    gt_compare("layernorm dinp", gt_download_x(d_dinp, N), dinp, N, LN_TOL);
    gt_compare("layernorm dweight", gt_download_x(d_dw, C), dw, C, LN_TOL);
    gt_compare("layernorm dbias", gt_download_x(d_db, C), db, C, LN_TOL);
}

static void check_against_cpu(int B, int T, int C, uint64_t seed) {
    check_version_against_cpu(layernorm_forward_v1, layernorm_backward_v1, B, T, C, seed);
}

// B*T = 111 rows (one chunk of parameter partials), C = 72: not a multiple of
// the warp's 32 lanes.
Test(kernels_layernorm, matches_cpu) { check_against_cpu(3, 37, 72, 1); }

// B*T = 335 rows: three chunks of partials; C = 770: 25 column tiles, the
// last one partial.
Test(kernels_layernorm, matches_cpu_many_rows_wide) { check_against_cpu(5, 67, 770, 2); }

Test(kernels_layernorm, two_pass_variance_survives_a_large_mean) {
    const int B = 2, T = 9, C = 72;
    const size_t BT = (size_t)B * T, N = BT * C;
    Rng rng;
    rng_seed(&rng, 3);
    float *inp = gt_random_x(N, 100, 101, &rng), *w = gt_random_x(C, 0.5f, 1.5f, &rng);
    float *b = gt_random_x(C, -1, 1, &rng);
    double *inp64 = xmalloc(N * sizeof(double)), *w64 = xmalloc(C * sizeof(double));
    double *b64 = xmalloc(C * sizeof(double)), *out64 = xmalloc(N * sizeof(double));
    double *mean64 = xmalloc(BT * sizeof(double)), *rstd64 = xmalloc(BT * sizeof(double));
    for (size_t i = 0; i < N; i++) inp64[i] = inp[i];
    for (int i = 0; i < C; i++) w64[i] = w[i], b64[i] = b[i];
    cpu_layernorm_forward_f64(out64, mean64, rstd64, inp64, w64, b64, B, T, C);
    float *out_ref = xmalloc(N * sizeof(float)), *rstd_ref = xmalloc(BT * sizeof(float));
    for (size_t i = 0; i < N; i++) out_ref[i] = (float)out64[i];
    for (size_t i = 0; i < BT; i++) rstd_ref[i] = (float)rstd64[i];

    floatX *d_inp = gt_upload_x(inp, N), *d_w = gt_upload_x(w, C), *d_b = gt_upload_x(b, C);
    floatX *d_out = gt_device_poisoned_x(N);
    float *d_mean = gt_device_poisoned(BT), *d_rstd = gt_device_poisoned(BT);
    layernorm_forward_v1(&gt_ctx, d_out, d_mean, d_rstd, d_inp, d_w, d_b, B, T, C);
    gt_compare("layernorm out, mean ~100 (vs double)", gt_download_x(d_out, N), out_ref, N,
               LN_LARGE_MEAN_OUT_TOL);
    gt_compare("layernorm rstd, mean ~100 (vs double)", gt_download(d_rstd, BT), rstd_ref, BT,
               LN_LARGE_MEAN_TOL);
}

// The gradients of `backward` (dinp, dweight, dbias, as floats) from inputs,
// a forward pass (v1, any C) and nonzero starting gradients drawn from
// `seed`: the same seed, the same inputs.
typedef struct {
    float *dinp, *dw, *db;
} LnGrads;

static LnGrads backward_from_seed(LayernormBackward backward, int B, int T, int C,
                                  uint64_t seed) {
    const size_t BT = (size_t)B * T, N = BT * C;
    Rng rng;
    rng_seed(&rng, seed);
    floatX *d_inp = gt_upload_x(gt_random_x(N, -2, 3, &rng), N);
    floatX *d_w = gt_upload_x(gt_random_x(C, 0.5f, 1.5f, &rng), C);
    floatX *d_b = gt_upload_x(gt_random_x(C, -1, 1, &rng), C);
    floatX *d_dout = gt_upload_x(gt_random_x(N, -1, 1, &rng), N);
    floatX *d_out = gt_device_poisoned_x(N);
    float *d_mean = gt_device_poisoned(BT), *d_rstd = gt_device_poisoned(BT);
    float *d_scratch = gt_device_poisoned(layernorm_backward_scratch_floats(B, T, C));
    layernorm_forward_v1(&gt_ctx, d_out, d_mean, d_rstd, d_inp, d_w, d_b, B, T, C);
    floatX *d_dinp = gt_upload_x(gt_random_x(N, -1, 1, &rng), N);
    floatX *d_dw = gt_upload_x(gt_random_x(C, -1, 1, &rng), C);
    floatX *d_db = gt_upload_x(gt_random_x(C, -1, 1, &rng), C);
    backward(&gt_ctx, d_dinp, d_dw, d_db, d_scratch, d_dout, d_inp, d_w, d_mean, d_rstd, B, T, C);
    return (LnGrads){gt_download_x(d_dinp, N), gt_download_x(d_dw, C), gt_download_x(d_db, C)};
}

static void assert_same_grads(const LnGrads *a, const LnGrads *b, size_t N, size_t C,
                              const char *what) {
    char name[96];
    snprintf(name, sizeof name, "layernorm dinp, %s", what);
    gt_assert_identical(name, a->dinp, b->dinp, N);
    snprintf(name, sizeof name, "layernorm dweight, %s", what);
    gt_assert_identical(name, a->dw, b->dw, C);
    snprintf(name, sizeof name, "layernorm dbias, %s", what);
    gt_assert_identical(name, a->db, b->db, C);
}

Test(kernels_layernorm, backward_is_deterministic) {
    const int B = 5, T = 67, C = 770;
    LnGrads first = backward_from_seed(layernorm_backward_v1, B, T, C, 4);
    LnGrads second = backward_from_seed(layernorm_backward_v1, B, T, C, 4);
    assert_same_grads(&first, &second, (size_t)B * T * C, C, "two runs");
}

// v2 reads rows in 16-byte vectors: C a multiple of 8. 72 is 9 vectors of 8
// in bf16, fewer than one per lane; 776 is 97 of them, three passes of the
// warp and a partial fourth; 768 is GPT-2's.
Test(kernels_layernorm, v2_matches_cpu) {
    check_version_against_cpu(layernorm_forward_v2, layernorm_backward_v2, 3, 37, 72, 5);
    check_version_against_cpu(layernorm_forward_v2, layernorm_backward_v2, 5, 67, 776, 6);
    check_version_against_cpu(layernorm_forward_v2, layernorm_backward_v2, 2, 64, 768, 7);
}

// Chapter 11's v3: v2's contract against the CPU, and v2's bits. B*T = 111
// rows is one chunk of partials (the reduce's tail loop only); 5 x 67 is
// three; 8 x 1024 is 64, four rounds of the reduce's unrolled loads.
static void check_v3_identical_to_v2(int B, int T, int C, uint64_t seed) {
    LnGrads v2 = backward_from_seed(layernorm_backward_v2, B, T, C, seed);
    LnGrads v3 = backward_from_seed(layernorm_backward_v3, B, T, C, seed);
    assert_same_grads(&v3, &v2, (size_t)B * T * C, C, "v3 vs v2");
}

Test(kernels_layernorm, v3_matches_cpu) {
    check_version_against_cpu(layernorm_forward_v2, layernorm_backward_v3, 3, 37, 72, 8);
    check_version_against_cpu(layernorm_forward_v2, layernorm_backward_v3, 5, 67, 776, 9);
}

Test(kernels_layernorm, v3_is_bit_identical_to_v2) {
    check_v3_identical_to_v2(3, 37, 72, 10);
    check_v3_identical_to_v2(5, 67, 776, 11);
    check_v3_identical_to_v2(8, 1024, 768, 12);
}
