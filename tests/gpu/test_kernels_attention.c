// test_kernels_attention.c: attention_forward_v1 and attention_backward_v1
// (split heads, batched cuBLAS GEMMs, causal softmax, merge heads) against
// the CPU reference.
#include "attention.h"
#include "model/gpt2_cpu.h"
#include "gpu_test.h"

// fp32 everywhere; the GEMMs and the softmax's row sums add in other orders
// than the CPU's loops, and the backward pass chains four such products. The
// scores of these inputs are O(1), so nothing is amplified: a few ulps.
// bf16: every intermediate the eager attention stores is rounded, 2^-9 of
// itself each time: the scores, the probabilities, att @ v (and in the
// backward pass datt, dpre, dq/dk/dv, and the sum into dqkv), about five
// roundings deep: 3e-2 of the scale, where a wrong index or mask costs O(1).
#define ATTENTION_TOL GT_TOL(1e-5, 3e-2)

TestSuite(kernels_attention, .init = gpu_test_init, .fini = gpu_test_fini);

static void check_against_cpu(int B, int T, int C, int NH, uint64_t seed) {
    const size_t N = (size_t)B * T * C, N3 = 3 * N, A = (size_t)B * NH * T * T;
    Rng rng;
    rng_seed(&rng, seed);
    float *qkv = gt_random_x(N3, -1, 1, &rng), *dout = gt_random_x(N, -1, 1, &rng);
    float *dqkv0 = gt_random_x(N3, -1, 1, &rng);

    float *out = xmalloc(N * sizeof(float)), *preatt = xmalloc(A * sizeof(float));
    float *att = xmalloc(A * sizeof(float));
    cpu_attention_forward(out, preatt, att, qkv, B, T, C, NH);
    float *dqkv = gt_copy(dqkv0, N3), *dpreatt = xcalloc(A, sizeof(float));
    float *datt = xcalloc(A, sizeof(float));
    cpu_attention_backward(dqkv, dpreatt, datt, dout, qkv, att, B, T, C, NH);

    floatX *d_qkv = gt_upload_x(qkv, N3), *d_out = gt_device_poisoned_x(N);
    floatX *d_att = gt_device_poisoned_x(A);
    float *d_fwd_scratch = gt_device_poisoned(attention_forward_scratch_floats(B, T, C, NH));
    attention_forward_v1(&gt_ctx, d_out, d_att, d_fwd_scratch, d_qkv, B, T, C, NH);
    gt_compare("attention out", gt_download_x(d_out, N), out, N, ATTENTION_TOL);
    gt_compare("attention att", gt_download_x(d_att, A), att, A, ATTENTION_TOL);

    floatX *d_dqkv = gt_upload_x(dqkv0, N3);
    float *d_bwd_scratch = gt_device_poisoned(attention_backward_scratch_floats(B, T, C, NH));
    attention_backward_v1(&gt_ctx, d_dqkv, d_bwd_scratch, gt_upload_x(dout, N), d_qkv, d_att, B,
                          T, C, NH);
    gt_compare("attention dqkv", gt_download_x(d_dqkv, N3), dqkv, N3, ATTENTION_TOL);
}

// T = 37: rows of the softmax both shorter and longer than a warp; hs = 12.
Test(kernels_attention, matches_cpu) { check_against_cpu(3, 37, 72, 6, 1); }

// hs = 32, T = 70: three warp strides per row.
Test(kernels_attention, matches_cpu_longer_rows) { check_against_cpu(2, 70, 64, 2, 2); }

Test(kernels_attention, is_deterministic) {
    const int B = 2, T = 70, C = 64, NH = 2;
    const size_t N = (size_t)B * T * C, N3 = 3 * N, A = (size_t)B * NH * T * T;
    Rng rng;
    rng_seed(&rng, 3);
    floatX *d_qkv = gt_upload_x(gt_random_x(N3, -1, 1, &rng), N3);
    floatX *d_dout = gt_upload_x(gt_random_x(N, -1, 1, &rng), N);
    float *dqkv0 = gt_random_x(N3, -1, 1, &rng);
    float *d_fwd_scratch = gt_device_poisoned(attention_forward_scratch_floats(B, T, C, NH));
    float *d_bwd_scratch = gt_device_poisoned(attention_backward_scratch_floats(B, T, C, NH));
    float *runs[2][3];
    for (int run = 0; run < 2; run++) {
        floatX *d_out = gt_device_poisoned_x(N), *d_att = gt_device_poisoned_x(A);
        floatX *d_dqkv = gt_upload_x(dqkv0, N3);
        attention_forward_v1(&gt_ctx, d_out, d_att, d_fwd_scratch, d_qkv, B, T, C, NH);
        attention_backward_v1(&gt_ctx, d_dqkv, d_bwd_scratch, d_dout, d_qkv, d_att, B, T, C, NH);
        runs[run][0] = gt_download_x(d_out, N);
        runs[run][1] = gt_download_x(d_att, A);
        runs[run][2] = gt_download_x(d_dqkv, N3);
    }
    gt_assert_identical("attention out, two runs", runs[0][0], runs[1][0], N);
    gt_assert_identical("attention att, two runs", runs[0][1], runs[1][1], A);
    gt_assert_identical("attention dqkv, two runs", runs[0][2], runs[1][2], N3);
}
