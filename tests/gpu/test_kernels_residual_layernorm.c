// test_kernels_residual_layernorm.c: chapter 04's fused residual add and
// layernorm (residual_layernorm_forward_v2, the chapter's exercise) against
// the CPU reference's two steps, residual then layernorm.
//
// The residual is one add per element, rounded as residual_forward_v1 rounds
// it: bit-identical. The layernorm then normalizes that rounded residual, as
// the CPU does here; its tolerances are test_kernels_layernorm.c's (the sums
// of a row are added in another order than the CPU's loop: a few ulps of
// fp32; bf16 rounds each stored value once, 4e-3 is twice that).
#include "model/gpt2_cpu.h"
#include "gpu_test.h"
#include "layernorm.h"

#define LN_TOL GT_TOL(1e-5, 4e-3)
#define LN_STATS_TOL 1e-5

TestSuite(kernels_residual_layernorm, .init = gpu_test_init, .fini = gpu_test_fini);

static void check_against_cpu(int B, int T, int C, uint64_t seed) {
    const size_t BT = (size_t)B * T, N = BT * C;
    Rng rng;
    rng_seed(&rng, seed);
    float *a = gt_random_x(N, -2, 2, &rng), *b = gt_random_x(N, -1, 1, &rng);
    float *w = gt_random_x(C, 0.5f, 1.5f, &rng), *bias = gt_random_x(C, -1, 1, &rng);
    float *sum = xmalloc(N * sizeof(float));
    cpu_residual_forward(sum, a, b, N);
    float *residual = gt_rounded_x(sum, N);  // what the kernel stores, and normalizes
    float *out = xmalloc(N * sizeof(float)), *mean = xmalloc(BT * sizeof(float));
    float *rstd = xmalloc(BT * sizeof(float));
    cpu_layernorm_forward(out, mean, rstd, residual, w, bias, B, T, C);

    floatX *d_residual = gt_device_poisoned_x(N), *d_out = gt_device_poisoned_x(N);
    float *d_mean = gt_device_poisoned(BT), *d_rstd = gt_device_poisoned(BT);
    residual_layernorm_forward_v2(&gt_ctx, d_residual, d_out, d_mean, d_rstd, gt_upload_x(a, N),
                                  gt_upload_x(b, N), gt_upload_x(w, C), gt_upload_x(bias, C), B,
                                  T, C);
    gt_assert_identical("residual", gt_download_x(d_residual, N), residual, N);
    gt_compare("layernorm out", gt_download_x(d_out, N), out, N, LN_TOL);
    gt_compare("layernorm mean", gt_download(d_mean, BT), mean, BT, LN_STATS_TOL);
    gt_compare("layernorm rstd", gt_download(d_rstd, BT), rstd, BT, LN_STATS_TOL);
}

// C = 72: fewer 16-byte vectors than lanes; B*T = 111 rows, not a multiple
// of the block's 8.
Test(kernels_residual_layernorm, matches_cpu_narrow) { check_against_cpu(3, 37, 72, 1); }

// C = 776: each lane takes several vectors, the last pass of the warp partial.
Test(kernels_residual_layernorm, matches_cpu_wide) { check_against_cpu(5, 67, 776, 2); }

// GPT-2's width.
Test(kernels_residual_layernorm, matches_cpu_gpt2_width) { check_against_cpu(2, 64, 768, 3); }
