// test_kernels_gemm_steps_bf16.c: appendix E's GEMM (kernels/gemm_steps.h),
// every step, against the CPU's matmul within TOL_GEMM_BF16 (reason in
// common/util/tolerances.h), and against itself run twice, bit for bit.
// bf16 build only. Steps 1 to 4 run on every GPU; steps 5 and 6 on a
// Hopper with a GPU_ARCH=90 build (gt_ctx.hopper), and are skipped,
// saying so, elsewhere.
//
// The shapes cross every edge of the tiles: 64 x 64 (step 1), 128 x 128
// (steps 2 to 5), 128 x 256 (step 6), and slices of K of 32 (steps 1 to 3)
// and 64 (steps 4 to 6): a single output, N odd (the stores one at a time),
// whole tiles, one past them, K shorter than a slice and K of 1000, then
// GPT-2's two MLP GEMMs at B=16, T=1024, checked on a sample of rows.
// Every output buffer starts as NaNs and has a tail of NaNs past C's end:
// an element not written fails the comparison, and one written past the
// end fails the tail's check (compute-sanitizer sees only writes past the
// allocation).
#include "gemm_steps.h"
#include "model/gpt2_cpu.h"
#include "gpu_test.h"  // criterion.h, which <criterion/redirect.h> needs first
#include <criterion/redirect.h>
#include "util/tolerances.h"

TestSuite(kernels_gemm_steps, .init = gpu_test_init, .fini = gpu_test_fini);

typedef struct {
    int M, N, K;
} Shape;

static const Shape ODD_SHAPES[] = {
    {1, 1, 8},        // one output from one chunk of K
    {7, 9, 8},        // N odd: no pair of outputs is 4-byte aligned in every row
    {64, 64, 64},     // step 1's tile, one slice of 64
    {128, 256, 64},   // step 6's tile
    {333, 200, 264},  // the kernel lab's check: no tile and no slice fits
    {129, 257, 72},   // one row past 128, N odd past 256, a chunk past a slice
    {200, 130, 1000}, // a long sum: 1000 = 15 x 64 + 40
    {1000, 24, 40},   // narrow, K shorter than any slice but step 1's
};
#define NUM_ODD_SHAPES ((int)(sizeof ODD_SHAPES / sizeof ODD_SHAPES[0]))

// NaNs past the end of C that must stay NaNs.
#define GUARD 64

static void skip_without_hopper(void) {
    if (!gt_ctx.hopper)
        cr_skip_test("steps 5 and 6 need a GPU of compute capability 9.0, GPU_ARCH=90, and "
                     "GPT2_PORTABLE_KERNELS not set to 1");
}

// C from step `step`, on the host (M x N floats); its tail checked.
static float *run_step(int step, Shape s, const floatX *dA, const floatX *dB) {
    const size_t n = (size_t)s.M * s.N;
    floatX *dC = gt_device_poisoned_x(n + GUARD);
    gemm_step(&gt_ctx, step, dC, dA, dB, s.M, s.N, s.K);
    float *c = gt_download_x(dC, n + GUARD);
    for (size_t i = n; i < n + GUARD; i++)
        cr_assert(isnan(c[i]), "step %d, %d x %d x %d: wrote %g at %zu past C's end", step, s.M,
                  s.N, s.K, (double)c[i], i - n);
    return c;
}

// Steps first..last on every odd shape, against the CPU.
static void check_odd_shapes(int first, int last) {
    Rng rng;
    rng_seed(&rng, 1234);
    for (int i = 0; i < NUM_ODD_SHAPES; i++) {
        const Shape s = ODD_SHAPES[i];
        const size_t n = (size_t)s.M * s.N;
        float *A = gt_random_x((size_t)s.M * s.K, -1, 1, &rng);
        float *B = gt_random_x((size_t)s.N * s.K, -1, 1, &rng);
        float *ref = xmalloc(n * sizeof(float));
        cpu_matmul_forward(ref, A, B, NULL, 1, s.M, s.K, s.N);
        const floatX *dA = gt_upload_x(A, (size_t)s.M * s.K), *dB = gt_upload_x(B, (size_t)s.N * s.K);
        for (int step = first; step <= last; step++) {
            float *got = run_step(step, s, dA, dB);
            char what[96];
            snprintf(what, sizeof what, "step %d, %d x %d x %d", step, s.M, s.N, s.K);
            gt_compare(what, got, ref, n, TOL_GEMM_BF16);
            free(got);
        }
        gt_device_free_all();
        free(A), free(B), free(ref);
    }
}

Test(kernels_gemm_steps, portable_steps_match_the_cpu_on_odd_shapes) {
    check_odd_shapes(1, GEMM_STEP_FIRST_HOPPER - 1);
}

Test(kernels_gemm_steps, hopper_steps_match_the_cpu_on_odd_shapes) {
    skip_without_hopper();
    check_odd_shapes(GEMM_STEP_FIRST_HOPPER, GEMM_STEPS);
}

// GPT-2's fc (16384 x 3072 x 768) and fcproj (16384 x 768 x 3072) at B=16,
// T=1024, with the operands' scales of the kernel lab: every output of one
// row in 61 (and of the last row) against the CPU, which computes only those.
static const Shape GPT2_SHAPES[] = {{16384, 3072, 768}, {16384, 768, 3072}};
#define ROW_STRIDE 61

static void check_gpt2_shapes(int first, int last) {
    Rng rng;
    rng_seed(&rng, 5678);
    for (size_t i = 0; i < sizeof GPT2_SHAPES / sizeof GPT2_SHAPES[0]; i++) {
        const Shape s = GPT2_SHAPES[i];
        float *A = gt_random_x((size_t)s.M * s.K, -1, 1, &rng);
        float *B = gt_random_x((size_t)s.N * s.K, -0.05f, 0.05f, &rng);
        const int rows = (s.M - 1) / ROW_STRIDE + 2;  // 0, 61, ..., and M - 1
        float *A_rows = xmalloc((size_t)rows * s.K * sizeof(float));
        for (int r = 0; r < rows; r++) {
            const int src = r == rows - 1 ? s.M - 1 : r * ROW_STRIDE;
            memcpy(A_rows + (size_t)r * s.K, A + (size_t)src * s.K, (size_t)s.K * sizeof(float));
        }
        float *ref = xmalloc((size_t)rows * s.N * sizeof(float));
        float *got_rows = xmalloc((size_t)rows * s.N * sizeof(float));
        cpu_matmul_forward(ref, A_rows, B, NULL, 1, rows, s.K, s.N);
        const floatX *dA = gt_upload_x(A, (size_t)s.M * s.K), *dB = gt_upload_x(B, (size_t)s.N * s.K);
        for (int step = first; step <= last; step++) {
            float *got = run_step(step, s, dA, dB);
            for (int r = 0; r < rows; r++) {
                const int src = r == rows - 1 ? s.M - 1 : r * ROW_STRIDE;
                memcpy(got_rows + (size_t)r * s.N, got + (size_t)src * s.N,
                       (size_t)s.N * sizeof(float));
            }
            char what[96];
            snprintf(what, sizeof what, "step %d, %d x %d x %d (%d rows)", step, s.M, s.N, s.K,
                     rows);
            gt_compare(what, got_rows, ref, (size_t)rows * s.N, TOL_GEMM_BF16);
            free(got);
        }
        gt_device_free_all();
        free(A), free(B), free(A_rows), free(ref), free(got_rows);
    }
}

Test(kernels_gemm_steps, portable_steps_match_the_cpu_at_gpt2_shapes) {
    check_gpt2_shapes(1, GEMM_STEP_FIRST_HOPPER - 1);
}

Test(kernels_gemm_steps, hopper_steps_match_the_cpu_at_gpt2_shapes) {
    skip_without_hopper();
    check_gpt2_shapes(GEMM_STEP_FIRST_HOPPER, GEMM_STEPS);
}

// No step splits K or adds in an order that depends on timing: two runs give
// the same bits, on the lab's odd shape and on 2048 rows of fc.
static void check_deterministic(int first, int last) {
    static const Shape shapes[] = {{333, 200, 264}, {2048, 3072, 768}};
    Rng rng;
    rng_seed(&rng, 91011);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const Shape s = shapes[i];
        float *A = gt_random_x((size_t)s.M * s.K, -1, 1, &rng);
        float *B = gt_random_x((size_t)s.N * s.K, -1, 1, &rng);
        const floatX *dA = gt_upload_x(A, (size_t)s.M * s.K), *dB = gt_upload_x(B, (size_t)s.N * s.K);
        for (int step = first; step <= last; step++) {
            float *once = run_step(step, s, dA, dB), *twice = run_step(step, s, dA, dB);
            char what[96];
            snprintf(what, sizeof what, "step %d, %d x %d x %d, two runs", step, s.M, s.N, s.K);
            gt_assert_identical(what, once, twice, (size_t)s.M * s.N);
            free(once), free(twice);
        }
        gt_device_free_all();
        free(A), free(B);
    }
}

Test(kernels_gemm_steps, portable_steps_are_deterministic) {
    check_deterministic(1, GEMM_STEP_FIRST_HOPPER - 1);
}

Test(kernels_gemm_steps, hopper_steps_are_deterministic) {
    skip_without_hopper();
    check_deterministic(GEMM_STEP_FIRST_HOPPER, GEMM_STEPS);
}

// What the header says a step refuses stops the program, naming it, before
// anything reaches the device: these run, and pass, without a GPU. (Their
// message goes to a pipe, cr_redirect_stderr, not into make test's output.)
TestSuite(kernels_gemm_steps_host, .init = cr_redirect_stderr);

Test(kernels_gemm_steps_host, refuses_k_not_a_multiple_of_8, .exit_code = 1) {
    GpuContext ctx = {0};
    gemm_step(&ctx, 1, NULL, NULL, NULL, 16, 16, 12);
}

Test(kernels_gemm_steps_host, refuses_a_step_out_of_range, .exit_code = 1) {
    GpuContext ctx = {0};
    gemm_step(&ctx, GEMM_STEPS + 1, NULL, NULL, NULL, 16, 16, 16);
}

Test(kernels_gemm_steps_host, refuses_wgmma_where_the_context_has_no_hopper, .exit_code = 1) {
    GpuContext ctx = {0};  // hopper = 0
    gemm_step(&ctx, GEMM_STEP_FIRST_HOPPER, NULL, NULL, NULL, 16, 16, 16);
}
