// test_kernels_gelu.c: gelu_forward_v1 and gelu_backward_v1 against the CPU
// reference.
#include "gelu.h"
#include "model/gpt2_cpu.h"
#include "gpu_test.h"

// Same formula, operation for operation; the differences are CUDA's tanhf
// (within 2 ulp; glibc's is within 1) and nvcc's fused multiply-adds, which
// round once where the CPU rounds twice. A few ulps of values of order 1.
// bf16: the same, and each stored value rounded once (2^-9 of itself).
#define GELU_TOL GT_TOL(1e-5, 4e-3)

TestSuite(kernels_gelu, .init = gpu_test_init, .fini = gpu_test_fini);

Test(kernels_gelu, forward_and_backward_match_cpu) {
    const size_t n = (size_t)3 * 37 * 4 * 72;  // 31968: not a multiple of the 256-thread block
    Rng rng;
    rng_seed(&rng, 1);
    float *inp = gt_random_x(n, -5, 5, &rng), *dout = gt_random_x(n, -1, 1, &rng);
    float *dinp0 = gt_random_x(n, -1, 1, &rng);
    float *out = xmalloc(n * sizeof(float)), *dinp = gt_copy(dinp0, n);
    cpu_gelu_forward(out, inp, n);
    cpu_gelu_backward(dinp, inp, dout, n);

    floatX *d_inp = gt_upload_x(inp, n), *d_out = gt_device_poisoned_x(n);
    gelu_forward_v1(&gt_ctx, d_out, d_inp, n);
    gt_compare("gelu out", gt_download_x(d_out, n), out, n, GELU_TOL);
    floatX *d_dinp = gt_upload_x(dinp0, n);
    gelu_backward_v1(&gt_ctx, d_dinp, d_inp, gt_upload_x(dout, n), n);
    gt_compare("gelu dinp", gt_download_x(d_dinp, n), dinp, n, GELU_TOL);
}

// The in-place backward pass (the eager matmul_backward's, gpu_ops.c) is
// gelu_backward_v1 into a zeroed dinp, bit for bit, in either build.
Test(kernels_gelu, backward_in_place_is_backward_from_zero) {
    const size_t n = (size_t)3 * 37 * 4 * 72;
    Rng rng;
    rng_seed(&rng, 2);
    float *inp = gt_random_x(n, -5, 5, &rng), *dout = gt_random_x(n, -1, 1, &rng);
    float *zeros = xcalloc(n, sizeof(float));
    floatX *d_inp = gt_upload_x(inp, n), *d_want = gt_upload_x(zeros, n);
    floatX *d_got = gt_upload_x(dout, n);
    gelu_backward_v1(&gt_ctx, d_want, d_inp, gt_upload_x(dout, n), n);
    gelu_backward_inplace_v1(&gt_ctx, d_got, d_inp, n);
    gt_assert_identical("gelu dinp, in place vs from zero", gt_download_x(d_got, n),
                        gt_download_x(d_want, n), n);
}
