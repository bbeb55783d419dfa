// test_kernels_matmul_lt.c: chapter 04's cuBLASLt matmuls with epilogues
// (matmul_forward_v2, matmul_backward_v2) against the CPU reference.
//
// Tolerances: the GEMM's sums are fp32 in a different order than the CPU's
// loop (a few ulps), and in bf16 each stored value is rounded once, by at
// most 2^-9 of itself. The epilogues add the bias and apply GELU or its
// derivative to the fp32 sum, before that one rounding, so v2's error is at
// most v1's, whose tolerance (test_kernels_matmul.c) is used. cuBLASLt's GELU
// is the tanh form, as GPT-2's and the CPU's: the fp32 build's tolerance
// allows for its own tanh.
#include <math.h>

#include "model/gpt2_cpu.h"
#include "gpu_test.h"
#include "matmul_lt.h"

#define MATMUL_TOL GT_TOL(1e-5, 1e-2)
#define GELU_TOL GT_TOL(1e-4, 1e-2)

TestSuite(kernels_matmul_lt, .init = gpu_test_init, .fini = gpu_test_fini);

typedef struct {
    int B, T, C, OC, ld, with_bias, with_gelu;
} Case;

// The output's first OC columns of rows of stride ld, as a dense (BT, OC).
static float *dense(const float *strided, size_t rows, int OC, int ld) {
    float *out = xmalloc(rows * OC * sizeof(float));
    for (size_t r = 0; r < rows; r++)
        for (int j = 0; j < OC; j++) out[r * OC + j] = strided[r * ld + j];
    return out;
}

static void check_forward(Case k, uint64_t seed) {
    const size_t BT = (size_t)k.B * k.T, NI = BT * k.C, NO = BT * k.OC, NW = (size_t)k.OC * k.C;
    Rng rng;
    rng_seed(&rng, seed);
    float *inp = gt_random_x(NI, -1, 1, &rng), *w = gt_random_x(NW, -1, 1, &rng);
    float *bias = k.with_bias ? gt_random_x(k.OC, -1, 1, &rng) : NULL;
    float *pre = xmalloc(NO * sizeof(float)), *out = xmalloc(NO * sizeof(float));
    cpu_matmul_forward(pre, inp, w, bias, k.B, k.T, k.C, k.OC);
    if (k.with_gelu) cpu_gelu_forward(out, pre, NO);

    floatX *d_out = gt_device_poisoned_x(BT * k.ld);
    floatX *d_pre = k.with_gelu ? gt_device_poisoned_x(NO) : NULL;
    matmul_forward_v2(&gt_ctx, d_out, d_pre, gt_upload_x(inp, NI), gt_upload_x(w, NW),
                      k.with_bias ? gt_upload_x(bias, k.OC) : NULL, k.B, k.T, k.C, k.OC, k.ld,
                      NULL);
    float *got = dense(gt_download_x(d_out, BT * k.ld), BT, k.OC, k.ld);
    if (k.with_gelu) {
        gt_compare("matmul_v2 pre_gelu", gt_download_x(d_pre, NO), pre, NO, MATMUL_TOL);
        gt_compare("matmul_v2 gelu(out)", got, out, NO, GELU_TOL);
    } else {
        gt_compare("matmul_v2 out", got, pre, NO, MATMUL_TOL);
    }
}

// dinp is overwritten: it starts poisoned. dweight and dbias accumulate onto
// random values. With GELU, pre_gelu is the (B,T,C) input of the GELU that
// made this layer's input, and dinp is multiplied by its derivative.
static void check_backward(Case k, uint64_t seed) {
    const size_t BT = (size_t)k.B * k.T, NI = BT * k.C, NW = (size_t)k.OC * k.C;
    Rng rng;
    rng_seed(&rng, seed);
    float *inp = gt_random_x(NI, -1, 1, &rng), *w = gt_random_x(NW, -1, 1, &rng);
    float *dout = gt_random_x(BT * k.ld, -1, 1, &rng);
    for (size_t r = 0; r < BT; r++)  // the contract: dout's padding columns are zero
        for (int j = k.OC; j < k.ld; j++) dout[r * k.ld + j] = 0;
    float *pre = k.with_gelu ? gt_rounded_x(gt_random_x(NI, -3, 3, &rng), NI) : NULL;
    float *dw0 = gt_random_x(NW, -1, 1, &rng), *db0 = gt_random_x(k.OC, -1, 1, &rng);

    float *dout_dense = dense(dout, BT, k.OC, k.ld);
    float *dinp = xcalloc(NI, sizeof(float)), *dw = gt_copy(dw0, NW), *db = gt_copy(db0, k.OC);
    cpu_matmul_backward(dinp, dw, k.with_bias ? db : NULL, dout_dense, inp, w, k.B, k.T, k.C,
                        k.OC);
    if (k.with_gelu) {
        float *through = xcalloc(NI, sizeof(float));
        cpu_gelu_backward(through, pre, dinp, NI);
        free(dinp);
        dinp = through;
    }

    floatX *d_dinp = gt_device_poisoned_x(NI), *d_dw = gt_upload_x(dw0, NW);
    floatX *d_db = gt_upload_x(db0, k.OC);
    float *d_scratch = gt_device_poisoned(matmul_backward_v2_scratch_floats(k.OC));
    matmul_backward_v2(&gt_ctx, d_dinp, d_dw, k.with_bias ? d_db : NULL, d_scratch,
                       gt_upload_x(dout, BT * k.ld), gt_upload_x(inp, NI), gt_upload_x(w, NW),
                       k.with_gelu ? gt_upload_x(pre, NI) : NULL, k.B, k.T, k.C, k.OC, k.ld, NULL);
    gt_compare("matmul_v2 dinp", gt_download_x(d_dinp, NI), dinp, NI,
               k.with_gelu ? GELU_TOL : MATMUL_TOL);
    gt_compare("matmul_v2 dweight", gt_download_x(d_dw, NW), dw, NW, MATMUL_TOL);
    if (k.with_bias)
        gt_compare("matmul_v2 dbias", gt_download_x(d_db, k.OC), db, k.OC, MATMUL_TOL);
    else
        gt_assert_identical("matmul_v2 dbias (no bias)", gt_download_x(d_db, k.OC), db0, k.OC);
}

// The qkv shape of a small model (OC = 3C), bias in the epilogue.
Test(kernels_matmul_lt, bias) {
    check_forward((Case){5, 67, 72, 216, 216, 1, 0}, 1);
    check_backward((Case){5, 67, 72, 216, 216, 1, 0}, 2);
}

// The MLP's up-projection: bias and GELU forward; its down-projection's
// backward applies GELU's derivative to dinp (here C is the 4C side).
Test(kernels_matmul_lt, gelu) {
    check_forward((Case){3, 37, 72, 288, 288, 1, 1}, 3);
    check_backward((Case){3, 37, 288, 72, 72, 1, 1}, 4);
}

// The classifier's GEMM: no bias, a width that is not a multiple of 8 (a
// vocabulary of 101 tokens: the GEMMs run at 104 on a padded copy of the
// weight) written into rows of stride 104 and read back from them; and a
// width of 96 in rows of 104.
Test(kernels_matmul_lt, odd_width_in_padded_rows) {
    check_forward((Case){3, 37, 72, 101, 104, 0, 0}, 5);
    check_backward((Case){3, 37, 72, 101, 104, 0, 0}, 6);
    check_forward((Case){3, 37, 72, 96, 104, 0, 0}, 7);
    check_backward((Case){3, 37, 72, 96, 104, 0, 0}, 8);
}

// The padded forward writes zeros into the padding columns [OC, OCp).
Test(kernels_matmul_lt, padding_columns_are_zero) {
    const int B = 2, T = 8, C = 72, OC = 101, ld = 104;
    const size_t BT = (size_t)B * T;
    Rng rng;
    rng_seed(&rng, 9);
    floatX *d_out = gt_device_poisoned_x(BT * ld);
    matmul_forward_v2(&gt_ctx, d_out, NULL, gt_upload_x(gt_random_x(BT * C, -1, 1, &rng), BT * C),
                      gt_upload_x(gt_random_x((size_t)OC * C, -1, 1, &rng), (size_t)OC * C), NULL,
                      B, T, C, OC, ld, NULL);
    float *out = gt_download_x(d_out, BT * ld);
    for (size_t r = 0; r < BT; r++)
        for (int j = OC; j < ld; j++)
            cr_assert(out[r * ld + j] == 0.0f, "row %zu, padding column %d: %g", r, j,
                      out[r * ld + j]);
    free(out);
}

// ---- the plan cache ------------------------------------------------------------------
// More shapes than the cache holds (sampling once made a shape per token):
// the plans used longest ago give way, and every GEMM is still right,
// including one whose plan was evicted and is made again.
Test(kernels_matmul_lt, a_full_cache_evicts_and_stays_right) {
    enum { SHAPES = 140 };
    for (int t = 1; t <= SHAPES; t++) {
        check_forward((Case){1, t, 72, 216, 216, 1, 0}, 100 + t);
        gt_device_free_all();
    }
    MatmulLtStats st = matmul_lt_stats(&gt_ctx);
    cr_assert_eq(st.plans_cached, 128, "plans held: %d", st.plans_cached);
    cr_assert_eq(st.evictions, SHAPES - 128, "evictions: %lld", st.evictions);
    check_forward((Case){1, 1, 72, 216, 216, 1, 0}, 1000);  // evicted first, made again
    cr_assert_eq(matmul_lt_stats(&gt_ctx).evictions, SHAPES - 127);
}

// A padded weight's copy keeps its place once made: a CUDA graph captured
// with it still runs right after a larger padded shape has come and gone
// (each copy used to be freed and made again at the largest size seen).
Test(kernels_matmul_lt, a_captured_padded_gemm_survives_a_larger_shape) {
    const int B = 2, T = 16, C = 1024, OC = 1001, ld = 1008, BIG = 3001, BIG_LD = 3008;
    const size_t BT = (size_t)B * T;
    Rng rng;
    rng_seed(&rng, 11);
    float *inp = gt_random_x(BT * C, -1, 1, &rng), *w = gt_random_x((size_t)OC * C, -1, 1, &rng);
    float *want = xmalloc(BT * OC * sizeof(float));
    cpu_matmul_forward(want, inp, w, NULL, B, T, C, OC);
    floatX *d_inp = gt_upload_x(inp, BT * C), *d_w = gt_upload_x(w, (size_t)OC * C);
    floatX *d_out = gt_device_poisoned_x(BT * ld);
    gt_ctx.sync_after_launch = 0;  // a capture may not wait
    matmul_forward_v2(&gt_ctx, d_out, NULL, d_inp, d_w, NULL, B, T, C, OC, ld, NULL);  // the plan
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaStreamBeginCapture(gt_ctx.stream, cudaStreamCaptureModeThreadLocal));
    matmul_forward_v2(&gt_ctx, d_out, NULL, d_inp, d_w, NULL, B, T, C, OC, ld, NULL);
    CUDA_CHECK(cudaStreamEndCapture(gt_ctx.stream, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    floatX *big_out = gt_device_poisoned_x(BT * BIG_LD);
    matmul_forward_v2(&gt_ctx, big_out, NULL, d_inp,
                      gt_upload_x(gt_random_x((size_t)BIG * C, -1, 1, &rng), (size_t)BIG * C),
                      NULL, B, T, C, BIG, BIG_LD, NULL);
    CUDA_CHECK(cudaMemsetAsync(d_out, 0xff, BT * ld * sizeof(floatX), gt_ctx.stream));
    CUDA_CHECK(cudaGraphLaunch(exec, gt_ctx.stream));
    gpu_stream_sync(&gt_ctx, "the replayed GEMM");
    gt_compare("replayed padded GEMM", dense(gt_download_x(d_out, BT * ld), BT, OC, ld), want,
               BT * OC, MATMUL_TOL);
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
}

// ---- chapter 11: autotuned plans ---------------------------------------------------
// The same GEMMs with ctx->gemm_autotune on: the kernel picked by timing
// adds in the heuristic's order (matmul_lt.h), so every output has the
// first's bits, including dweight and dbias, which accumulate onto values
// the trial runs must leave as they found them. GPT-2's MLP shapes at a
// small batch, where cuBLASLt offers several candidates. The bits are
// checked on the operands the plans were tuned on, and again on others.
static void run_mlp_gemms(int autotune, uint64_t seed, float *outs[5]) {
    enum { B = 4, T = 256, C = 768, OC = 3072 };
    const size_t BT = (size_t)B * T, NI = BT * C, NO = BT * OC, NW = (size_t)OC * C;
    Rng rng;
    rng_seed(&rng, seed);
    float *inp = gt_random_x(NI, -1, 1, &rng), *w = gt_random_x(NW, -1, 1, &rng);
    float *bias = gt_random_x(OC, -1, 1, &rng), *dout = gt_random_x(NO, -1, 1, &rng);
    float *dw0 = gt_random_x(NW, -1, 1, &rng), *db0 = gt_random_x(OC, -1, 1, &rng);
    floatX *d_inp = gt_upload_x(inp, NI), *d_w = gt_upload_x(w, NW);
    floatX *d_out = gt_device_poisoned_x(NO), *d_pre = gt_device_poisoned_x(NO);
    floatX *d_dinp = gt_device_poisoned_x(NI), *d_dw = gt_upload_x(dw0, NW);
    floatX *d_db = gt_upload_x(db0, OC);
    float *scratch = gt_device_alloc(matmul_backward_v2_scratch_floats(OC) * sizeof(float), "s");
    gt_ctx.gemm_autotune = autotune;
    matmul_forward_v2(&gt_ctx, d_out, d_pre, d_inp, d_w, gt_upload_x(bias, OC), B, T, C, OC, OC,
                      NULL);
    matmul_backward_v2(&gt_ctx, d_dinp, d_dw, d_db, scratch, gt_upload_x(dout, NO), d_inp, d_w,
                       NULL, B, T, C, OC, OC, NULL);
    gt_ctx.gemm_autotune = 0;
    outs[0] = gt_download_x(d_out, NO), outs[1] = gt_download_x(d_pre, NO);
    outs[2] = gt_download_x(d_dinp, NI), outs[3] = gt_download_x(d_dw, NW);
    outs[4] = gt_download_x(d_db, OC);
}

static void assert_mlp_identical(float *tuned[5], float *plain[5], const char *which) {
    const size_t n[5] = {4 * 256 * 3072, 4 * 256 * 3072, 4 * 256 * 768, 3072 * 768, 3072};
    const char *names[5] = {"gelu(out)", "pre_gelu", "dinp", "dweight (+=)", "dbias (+=)"};
    char what[96];
    for (int i = 0; i < 5; i++) {
        snprintf(what, sizeof what, "%s, %s", names[i], which);
        gt_assert_identical(what, tuned[i], plain[i], n[i]);
    }
}

Test(kernels_matmul_lt, autotuned_plans_compute_the_same_bits) {
    float *plain[5], *tuned[5];
    run_mlp_gemms(0, 42, plain);
    run_mlp_gemms(1, 42, tuned);
    cr_assert(matmul_lt_stats(&gt_ctx).plans_tuned > 0, "no shape had candidates to time");
    assert_mlp_identical(tuned, plain, "the operands they were tuned on");
    run_mlp_gemms(0, 43, plain);
    run_mlp_gemms(1, 43, tuned);
    assert_mlp_identical(tuned, plain, "other operands");
}
