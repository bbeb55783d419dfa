// test_gpu_context.c: the context's starting state and the one switch that
// chapter 01 flips.
#include "gpu_test.h"

TestSuite(gpu_context, .init = gpu_test_init, .fini = gpu_test_fini);

Test(gpu_context, starts_with_chapter_00_switches) {
    cr_assert_gt(gpu_device_count(), 0);
    cr_assert_eq(gt_ctx.sync_after_launch, 1);
    cr_assert_eq(gt_ctx.tensor_cores, 0);
    cr_assert_gt(gt_ctx.sm_count, 0);
    cr_assert_eq(gpu_gemm_compute_type(&gt_ctx), CUBLAS_COMPUTE_32F);
    gt_ctx.tensor_cores = 1;
    cr_assert_eq(gpu_gemm_compute_type(&gt_ctx), CUBLAS_COMPUTE_32F_FAST_TF32);
}
