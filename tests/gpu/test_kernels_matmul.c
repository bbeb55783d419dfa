// test_kernels_matmul.c: matmul_forward_v1 and matmul_backward_v1 (cuBLAS
// and the bias kernels) against the CPU reference.
#include "model/gpt2_cpu.h"
#include "gpu_test.h"
#include "matmul.h"

// fp32 GEMM on the fp32 cores: cuBLAS splits and orders the C-long dot
// products differently than the CPU's loop; a few ulps of the results.
// bf16: the products are exact in fp32 and summed in fp32, and the result is
// rounded to bf16 when stored (2^-9 of itself at most); the forward pass
// rounds twice, the GEMM's output and then the bias's sum: 1e-2 is over
// twice that.
#define MATMUL_TOL GT_TOL(1e-5, 1e-2)
// TF32 (chapter 01's switch, smoke-tested here): operands rounded to 10
// mantissa bits, a relative error up to 2^-11 per operand. Chapter 01's own
// parity test sets the real bound; this one only checks that the switch
// computes the same product, roughly.
#define MATMUL_TF32_TOL 5e-3

TestSuite(kernels_matmul, .init = gpu_test_init, .fini = gpu_test_fini);

typedef struct {
    int B, T, C, OC, with_bias;
} MatmulCase;

static void check_against_cpu(MatmulCase mc, uint64_t seed) {
    const int B = mc.B, T = mc.T, C = mc.C, OC = mc.OC;
    const size_t BT = (size_t)B * T, NI = BT * C, NO = BT * OC, NW = (size_t)OC * C;
    Rng rng;
    rng_seed(&rng, seed);
    float *inp = gt_random_x(NI, -1, 1, &rng), *w = gt_random_x(NW, -1, 1, &rng);
    float *bias = mc.with_bias ? gt_random_x(OC, -1, 1, &rng) : NULL;
    float *dout = gt_random_x(NO, -1, 1, &rng);
    float *dinp0 = gt_random_x(NI, -1, 1, &rng), *dw0 = gt_random_x(NW, -1, 1, &rng);
    float *db0 = gt_random_x(OC, -1, 1, &rng);

    float *out = xmalloc(NO * sizeof(float));
    cpu_matmul_forward(out, inp, w, bias, B, T, C, OC);
    float *dinp = gt_copy(dinp0, NI), *dw = gt_copy(dw0, NW), *db = gt_copy(db0, OC);
    cpu_matmul_backward(dinp, dw, mc.with_bias ? db : NULL, dout, inp, w, B, T, C, OC);

    floatX *d_inp = gt_upload_x(inp, NI), *d_w = gt_upload_x(w, NW);
    floatX *d_bias = mc.with_bias ? gt_upload_x(bias, OC) : NULL;
    floatX *d_out = gt_device_poisoned_x(NO);
    matmul_forward_v1(&gt_ctx, d_out, d_inp, d_w, d_bias, B, T, C, OC);
    gt_compare("matmul out", gt_download_x(d_out, NO), out, NO, MATMUL_TOL);

    floatX *d_dinp = gt_upload_x(dinp0, NI), *d_dw = gt_upload_x(dw0, NW);
    floatX *d_db = gt_upload_x(db0, OC);
    float *d_scratch = gt_device_poisoned(matmul_backward_scratch_floats(B, T, OC));
    matmul_backward_v1(&gt_ctx, d_dinp, d_dw, mc.with_bias ? d_db : NULL, d_scratch,
                       gt_upload_x(dout, NO), d_inp, d_w, B, T, C, OC);
    gt_compare("matmul dinp", gt_download_x(d_dinp, NI), dinp, NI, MATMUL_TOL);
    gt_compare("matmul dweight", gt_download_x(d_dw, NW), dw, NW, MATMUL_TOL);
    // Without a bias, dbias must be left exactly as it was.
    if (mc.with_bias)
        gt_compare("matmul dbias", gt_download_x(d_db, OC), db, OC, MATMUL_TOL);
    else
        gt_assert_identical("matmul dbias (no bias)", gt_download_x(d_db, OC), db0, OC);
}

Test(kernels_matmul, matches_cpu_with_bias) { check_against_cpu((MatmulCase){3, 37, 72, 101, 1}, 1); }

Test(kernels_matmul, matches_cpu_without_bias) {
    check_against_cpu((MatmulCase){3, 37, 72, 101, 0}, 2);
}

// B*T = 335: three chunks of dbias partials; OC = 216 = 3C, the qkv shape.
Test(kernels_matmul, matches_cpu_many_rows) { check_against_cpu((MatmulCase){5, 67, 72, 216, 1}, 3); }

Test(kernels_matmul, backward_is_deterministic) {
    const int B = 5, T = 67, C = 72, OC = 216;
    const size_t BT = (size_t)B * T, NI = BT * C, NO = BT * OC, NW = (size_t)OC * C;
    Rng rng;
    rng_seed(&rng, 4);
    floatX *d_inp = gt_upload_x(gt_random_x(NI, -1, 1, &rng), NI);
    floatX *d_w = gt_upload_x(gt_random_x(NW, -1, 1, &rng), NW);
    floatX *d_dout = gt_upload_x(gt_random_x(NO, -1, 1, &rng), NO);
    float *d_scratch = gt_device_poisoned(matmul_backward_scratch_floats(B, T, OC));
    float *dinp0 = gt_random_x(NI, -1, 1, &rng), *dw0 = gt_random_x(NW, -1, 1, &rng);
    float *db0 = gt_random_x(OC, -1, 1, &rng);
    float *runs[2][3];
    for (int run = 0; run < 2; run++) {
        floatX *d_dinp = gt_upload_x(dinp0, NI), *d_dw = gt_upload_x(dw0, NW);
        floatX *d_db = gt_upload_x(db0, OC);
        matmul_backward_v1(&gt_ctx, d_dinp, d_dw, d_db, d_scratch, d_dout, d_inp, d_w, B, T, C, OC);
        runs[run][0] = gt_download_x(d_dinp, NI);
        runs[run][1] = gt_download_x(d_dw, NW);
        runs[run][2] = gt_download_x(d_db, OC);
    }
    gt_assert_identical("matmul dinp, two runs", runs[0][0], runs[1][0], NI);
    gt_assert_identical("matmul dweight, two runs", runs[0][1], runs[1][1], NW);
    gt_assert_identical("matmul dbias, two runs", runs[0][2], runs[1][2], OC);
}

#ifndef PRECISION_BF16
// TF32 is a way of feeding fp32 operands to the tensor cores: the fp32 build only.
Test(kernels_matmul, tensor_core_switch_computes_the_same_product) {
    const int B = 4, T = 64, C = 256, OC = 384;
    const size_t BT = (size_t)B * T, NI = BT * C, NO = BT * OC, NW = (size_t)OC * C;
    Rng rng;
    rng_seed(&rng, 5);
    float *inp = gt_random(NI, -1, 1, &rng), *w = gt_random(NW, -1, 1, &rng);
    float *bias = gt_random(OC, -1, 1, &rng);
    float *out = xmalloc(NO * sizeof(float));
    cpu_matmul_forward(out, inp, w, bias, B, T, C, OC);
    float *d_out = gt_device_poisoned(NO);
    gt_ctx.tensor_cores = 1;
    matmul_forward_v1(&gt_ctx, d_out, gt_upload(inp, NI), gt_upload(w, NW), gt_upload(bias, OC), B,
                      T, C, OC);
    gt_compare("matmul out, TF32", gt_download(d_out, NO), out, NO, MATMUL_TF32_TOL);
}
#endif
