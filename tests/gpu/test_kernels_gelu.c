// test_kernels_gelu.c: gelu_forward_v1 and gelu_backward_v1 against the CPU
// reference.
#include "gelu.h"
#include "gpt2_cpu.h"
#include "gpu_test.h"

// Same formula, operation for operation; the differences are CUDA's tanhf
// (within 2 ulp; glibc's is within 1) and nvcc's fused multiply-adds, which
// round once where the CPU rounds twice. A few ulps of values of order 1.
#define GELU_TOL 1e-5

TestSuite(kernels_gelu, .init = gpu_test_init, .fini = gpu_test_fini);

Test(kernels_gelu, forward_and_backward_match_cpu) {
    const size_t n = (size_t)3 * 37 * 4 * 72;  // 31968: not a multiple of the 256-thread block
    Rng rng;
    rng_seed(&rng, 1);
    float *inp = gt_random(n, -5, 5, &rng), *dout = gt_random(n, -1, 1, &rng);
    float *dinp0 = gt_random(n, -1, 1, &rng);
    float *out = xmalloc(n * sizeof(float)), *dinp = gt_copy(dinp0, n);
    cpu_gelu_forward(out, inp, n);
    cpu_gelu_backward(dinp, inp, dout, n);

    float *d_inp = gt_upload(inp, n), *d_out = gt_device_poisoned(n);
    gelu_forward_v1(&gt_ctx, d_out, d_inp, n);
    gt_compare("gelu out", gt_download(d_out, n), out, n, GELU_TOL);
    float *d_dinp = gt_upload(dinp0, n);
    gelu_backward_v1(&gt_ctx, d_dinp, d_inp, gt_upload(dout, n), n);
    gt_compare("gelu dinp", gt_download(d_dinp, n), dinp, n, GELU_TOL);
}
