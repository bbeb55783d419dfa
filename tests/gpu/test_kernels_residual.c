// test_kernels_residual.c: residual_forward_v1 and residual_backward_v1
// against the CPU reference. Tolerance: none; one add per element, rounded
// the same way on both sides, so the results must be bit-identical (in bf16:
// to the CPU's fp32 sum rounded to bf16, as the kernel rounds it).
#include "model/gpt2_cpu.h"
#include "gpu_test.h"
#include "residual.h"

TestSuite(kernels_residual, .init = gpu_test_init, .fini = gpu_test_fini);

Test(kernels_residual, forward_and_backward_are_bit_identical_to_cpu) {
    const size_t n = (size_t)3 * 37 * 72;  // 7992: not a multiple of the block
    Rng rng;
    rng_seed(&rng, 1);
    float *a = gt_random_x(n, -1, 1, &rng), *b = gt_random_x(n, -1, 1, &rng);
    float *dout = gt_random_x(n, -1, 1, &rng);
    float *da0 = gt_random_x(n, -1, 1, &rng), *db0 = gt_random_x(n, -1, 1, &rng);
    float *out = xmalloc(n * sizeof(float)), *da = gt_copy(da0, n), *db = gt_copy(db0, n);
    cpu_residual_forward(out, a, b, n);
    cpu_residual_backward(da, db, dout, n);

    floatX *d_out = gt_device_poisoned_x(n);
    residual_forward_v1(&gt_ctx, d_out, gt_upload_x(a, n), gt_upload_x(b, n), n);
    gt_assert_identical("residual out", gt_download_x(d_out, n), gt_rounded_x(out, n), n);
    floatX *d_da = gt_upload_x(da0, n), *d_db = gt_upload_x(db0, n);
    residual_backward_v1(&gt_ctx, d_da, d_db, gt_upload_x(dout, n), n);
    gt_assert_identical("residual da", gt_download_x(d_da, n), gt_rounded_x(da, n), n);
    gt_assert_identical("residual db", gt_download_x(d_db, n), gt_rounded_x(db, n), n);
}
