// test_kernels_softmax_crossentropy.c: the softmax, the cross-entropy, the
// mean loss and the fused backward against the CPU reference.
#include "model/gpt2_cpu.h"
#include "gpu_test.h"
#include "softmax_crossentropy.h"

// fp32 on both sides: the row's max is exact, its sum of exponentials is
// added in another order (a tree of 512 threads against a loop), and CUDA's
// expf and logf are within 2 ulp. A few ulps of each value. bf16: the same
// fp32 arithmetic, and each probability and dlogit rounded once when stored
// (2^-9 of itself); the losses and their mean stay fp32 (computed from the
// logits in the bf16 build: softmax_crossentropy.h).
#define SOFTMAX_TOL GT_TOL(1e-5, 4e-3)
#define LOSS_TOL 1e-5

TestSuite(kernels_softmax_crossentropy, .init = gpu_test_init, .fini = gpu_test_fini);

static void check_against_cpu(int B, int T, int V, int Vp, float lo, float hi, uint64_t seed) {
    const size_t BT = (size_t)B * T, NL = BT * Vp;
    Rng rng;
    rng_seed(&rng, seed);
    float *logits = gt_random_x(NL, lo, hi, &rng);
    int32_t *targets = gt_random_tokens(BT, V, &rng);
    float *dlogits0 = gt_random_x(NL, -1, 1, &rng);  // the padding columns must stay as they are

    float *probs = xmalloc(NL * sizeof(float)), *losses = xmalloc(BT * sizeof(float));
    cpu_softmax_forward(probs, logits, B, T, V, Vp);
    cpu_crossentropy_forward(losses, probs, targets, B, T, Vp);
    float mean = 0;  // as gpt2_cpu_forward computes it
    for (size_t i = 0; i < BT; i++) mean += losses[i];
    mean /= (float)BT;
    float *dlosses = xmalloc(BT * sizeof(float)), *dlogits = gt_copy(dlogits0, NL);
    for (size_t i = 0; i < BT; i++) dlosses[i] = 1.0f / (float)BT;
    cpu_crossentropy_softmax_backward(dlogits, dlosses, probs, targets, B, T, V, Vp);

    floatX *d_probs = gt_device_poisoned_x(NL);
    float *d_losses = gt_device_poisoned(BT);
    float *d_mean = gt_device_poisoned(1), *d_dlosses = gt_device_poisoned(BT);
    int32_t *d_targets = gt_upload_i32(targets, BT);
    floatX *d_logits = gt_upload_x(logits, NL);
    softmax_forward_v1(&gt_ctx, d_probs, d_logits, B, T, V, Vp);
    gt_compare("softmax probs", gt_download_x(d_probs, NL), probs, NL, SOFTMAX_TOL);
    crossentropy_forward_v1(&gt_ctx, d_losses, d_logits, d_probs, d_targets, B, T, V, Vp);
    gt_compare("crossentropy losses", gt_download(d_losses, BT), losses, BT, LOSS_TOL);
    loss_mean_v1(&gt_ctx, d_mean, d_losses, B, T);
    gt_compare("mean loss", gt_download(d_mean, 1), &mean, 1, LOSS_TOL);
    dlosses_fill_v1(&gt_ctx, d_dlosses, B, T);
    gt_assert_identical("dlosses", gt_download(d_dlosses, BT), dlosses, BT);
    floatX *d_dlogits = gt_upload_x(dlogits0, NL);
    crossentropy_softmax_backward_v1(&gt_ctx, d_dlogits, d_dlosses, d_probs, d_targets, B, T, V,
                                     Vp);
    gt_compare("dlogits", gt_download_x(d_dlogits, NL), dlogits, NL, SOFTMAX_TOL);
}

// V = 101 real tokens in rows of Vp = 128 (27 padding columns).
Test(kernels_softmax_crossentropy, matches_cpu_padded) { check_against_cpu(3, 37, 101, 128, -5, 5, 1); }

// Unpadded (chapter 00's V = Vp), rows longer than the 512-thread block.
Test(kernels_softmax_crossentropy, matches_cpu_long_rows) {
    check_against_cpu(2, 5, 1500, 1500, -5, 5, 2);
}

// Logits near 100: exp(100) overflows fp32, so this passes only because the
// softmax subtracts each row's max first.
Test(kernels_softmax_crossentropy, large_logits_are_shifted_by_the_max) {
    check_against_cpu(2, 7, 101, 128, 90, 110, 3);
}

Test(kernels_softmax_crossentropy, mean_loss_is_deterministic) {
    const int B = 8, T = 300;  // 2400 losses: more than the block's 1024 threads
    const size_t BT = (size_t)B * T;
    Rng rng;
    rng_seed(&rng, 4);
    float *d_losses = gt_upload(gt_random(BT, 0.5f, 11, &rng), BT);
    float *d_mean = gt_device_poisoned(1);
    loss_mean_v1(&gt_ctx, d_mean, d_losses, B, T);
    float *first = gt_download(d_mean, 1);
    loss_mean_v1(&gt_ctx, d_mean, d_losses, B, T);
    gt_assert_identical("mean loss, two runs", first, gt_download(d_mean, 1), 1);
}
