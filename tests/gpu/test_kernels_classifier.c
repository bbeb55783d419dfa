// test_kernels_classifier.c: chapter 04's fused classifier
// (classifier_fused_v2) against the CPU reference's softmax, cross-entropy,
// mean and backward pass, run one after another; chapter 11's
// (classifier_fused_v3, the row in shared memory) against the CPU reference
// and, bit for bit, against v2.
//
// Tolerances: test_kernels_softmax_crossentropy.c's. The fused kernel sums
// the exponentials in another order (per thread, then a tree), and takes the
// loss as max + log(sum) - logit[target], all fp32, rather than -log(prob):
// a few ulps of fp32. Its dlogits are computed in fp32 from the logits and
// rounded once (bf16: 2^-9 of itself), where the eager path rounds the
// probabilities first; the tolerance covers both.
#include "classifier.h"
#include "model/gpt2_cpu.h"
#include "gpu_test.h"

#define SOFTMAX_TOL GT_TOL(1e-5, 4e-3)
#define LOSS_TOL 1e-5

TestSuite(kernels_classifier, .init = gpu_test_init, .fini = gpu_test_fini);

typedef void (*Classifier)(const GpuContext *ctx, float *losses, float *mean_loss, floatX *logits,
                           floatX *probs, const int32_t *targets, int B, int T, int V, int ld,
                           int write_dlogits);

static void check_against_cpu(Classifier classifier, int B, int T, int V, int ld, float lo,
                              float hi, uint64_t seed) {
    const size_t BT = (size_t)B * T, NL = BT * ld;
    Rng rng;
    rng_seed(&rng, seed);
    float *logits = gt_random_x(NL, lo, hi, &rng);
    int32_t *targets = gt_random_tokens(BT, V, &rng);

    float *probs = xmalloc(NL * sizeof(float)), *losses = xmalloc(BT * sizeof(float));
    cpu_softmax_forward(probs, logits, B, T, V, ld);
    cpu_crossentropy_forward(losses, probs, targets, B, T, ld);
    float mean = 0;  // as gpt2_cpu_forward computes it
    for (size_t i = 0; i < BT; i++) mean += losses[i];
    mean /= (float)BT;
    float *dlosses = xmalloc(BT * sizeof(float)), *dlogits = xcalloc(NL, sizeof(float));
    for (size_t i = 0; i < BT; i++) dlosses[i] = 1.0f / (float)BT;
    cpu_crossentropy_softmax_backward(dlogits, dlosses, probs, targets, B, T, V, ld);

    int32_t *d_targets = gt_upload_i32(targets, BT);
    // Loss only: the logits must be left as they were.
    floatX *d_logits = gt_upload_x(logits, NL);
    float *d_losses = gt_device_poisoned(BT), *d_mean = gt_device_poisoned(1);
    classifier(&gt_ctx, d_losses, d_mean, d_logits, NULL, d_targets, B, T, V, ld, 0);
    gt_compare("classifier losses", gt_download(d_losses, BT), losses, BT, LOSS_TOL);
    gt_compare("classifier mean loss", gt_download(d_mean, 1), &mean, 1, LOSS_TOL);
    gt_assert_identical("logits after a loss-only pass", gt_download_x(d_logits, NL),
                        gt_rounded_x(logits, NL), NL);
    // With dlogits: written over the logits, padding columns [V, ld) zeroed.
    classifier(&gt_ctx, d_losses, d_mean, d_logits, NULL, d_targets, B, T, V, ld, 1);
    gt_compare("classifier losses (training)", gt_download(d_losses, BT), losses, BT, LOSS_TOL);
    gt_compare("classifier dlogits", gt_download_x(d_logits, NL), dlogits, NL, SOFTMAX_TOL);
}

// A vocabulary of 101 in rows of 104: a partial vector at the row's end and
// padding columns to zero.
Test(kernels_classifier, matches_cpu_padded_rows) {
    check_against_cpu(classifier_fused_v2, 3, 37, 101, 104, -4, 4, 1);
}

// Rows much wider than the block's 1024 threads, with large logits (the
// online max must rescale the running sum many times).
Test(kernels_classifier, matches_cpu_wide_rows) {
    check_against_cpu(classifier_fused_v2, 2, 5, 50257, 50264, -8, 30, 2);
}

// ld == V: no padding at all.
Test(kernels_classifier, matches_cpu_unpadded) {
    check_against_cpu(classifier_fused_v2, 2, 9, 256, 256, -4, 4, 3);
}

// v3 against the CPU, GPT-2's rows: in shared memory in the bf16 build.
Test(kernels_classifier, v3_matches_cpu_wide_rows) {
    check_against_cpu(classifier_fused_v3, 2, 5, 50257, 50304, -8, 30, 4);
}

// v3 and v2 on the same logits: the losses, the mean and the whole buffer of
// dlogits (padding included) bit for bit, since v3 changes where pass 2
// reads the row, not what it computes.
static void check_v3_identical(int B, int T, int V, int ld, float lo, float hi, uint64_t seed) {
    const size_t BT = (size_t)B * T, NL = BT * ld;
    Rng rng;
    rng_seed(&rng, seed);
    float *logits = gt_random_x(NL, lo, hi, &rng);
    int32_t *d_targets = gt_upload_i32(gt_random_tokens(BT, V, &rng), BT);
    floatX *d_logits2 = gt_upload_x(logits, NL), *d_logits3 = gt_upload_x(logits, NL);
    float *d_losses2 = gt_device_poisoned(BT), *d_mean2 = gt_device_poisoned(1);
    float *d_losses3 = gt_device_poisoned(BT), *d_mean3 = gt_device_poisoned(1);
    classifier_fused_v2(&gt_ctx, d_losses2, d_mean2, d_logits2, NULL, d_targets, B, T, V, ld, 1);
    classifier_fused_v3(&gt_ctx, d_losses3, d_mean3, d_logits3, NULL, d_targets, B, T, V, ld, 1);
    gt_assert_identical("v3 losses", gt_download(d_losses3, BT), gt_download(d_losses2, BT), BT);
    gt_assert_identical("v3 mean loss", gt_download(d_mean3, 1), gt_download(d_mean2, 1), 1);
    gt_assert_identical("v3 dlogits", gt_download_x(d_logits3, NL), gt_download_x(d_logits2, NL),
                        NL);
}

// Rows of 56 (a partial vector, padding): tiny, in shared memory.
Test(kernels_classifier, v3_identical_to_v2_small) { check_v3_identical(2, 3, 50, 56, -4, 4, 5); }

// GPT-2's padded rows, V not a multiple of 8: in shared memory in bf16 (the
// fp32 build's rows of 201 KB too, where they fit).
Test(kernels_classifier, v3_identical_to_v2_gpt2_rows) {
    check_v3_identical(2, 4, 50257, 50304, -8, 30, 6);
}

// Rows wider than any block's shared memory (260 KB in bf16): v2's path.
Test(kernels_classifier, v3_identical_to_v2_too_wide) {
    check_v3_identical(2, 2, 130001, 130008, -4, 4, 7);
}
