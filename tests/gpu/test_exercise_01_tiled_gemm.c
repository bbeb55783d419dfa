// test_exercise_01_tiled_gemm.c: chapter 01's exercise, tiled_gemm_tf32
// (kernels/tiled_gemm.h, solutions/01_tensor_cores/tiled_gemm.cu), against
// the CPU reference's matmul: C = A @ B^T is cpu_matmul_forward with
// B*T = M rows, C = K channels, OC = N outputs and no bias.
#include <stdint.h>

#include "model/gpt2_cpu.h"
#include "gpu_test.h"
#include "tiled_gemm.h"
#include "util/tolerances.h"

// Against the same product computed from operands rounded to TF32 first, as
// the kernel must round them (wmma::__float_to_tf32: to nearest, ties away
// from zero): what is left is the fp32 summation order and the tensor cores'
// own accumulation, a few ulps of the sums: measured 4.2e-6 (H100,
// 2026-11-20). Operands that reach the tensor cores unrounded lose their low
// 13 bits instead: the same kernel without __float_to_tf32 measured 8.9e-4,
// far outside this bound (and still inside TOL_TF32_GEMM: only this test
// tells the two apart).
#define TILED_GEMM_ROUNDED_TOL 1e-4

// Floats of NaN on each side of C: a write outside C changes them.
#define GUARD 256

TestSuite(exercise_tiled_gemm, .init = gpu_test_init, .fini = gpu_test_fini);

// x rounded to TF32's 10-bit mantissa, to nearest with ties away from zero,
// as the PTX instruction cvt.rna.tf32.f32 does (for finite x).
static float round_to_tf32(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = (u + 0x1000u) & 0xffffe000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

// Runs the kernel on A (M,K) and B (N,K) and returns C (M,N) on the host,
// after checking that the GUARD floats around C are still untouched.
static float *run_tiled_gemm(const float *A, const float *B, int M, int N, int K) {
    const size_t NC = (size_t)M * N;
    float *d_c = gt_device_poisoned(GUARD + NC + GUARD);
    tiled_gemm_tf32(&gt_ctx, d_c + GUARD, gt_upload(A, (size_t)M * K), gt_upload(B, (size_t)N * K),
                    M, N, K);
    float *all = gt_download(d_c, GUARD + NC + GUARD);
    for (size_t i = 0; i < GUARD; i++) {
        uint32_t before, after;
        memcpy(&before, &all[i], sizeof before);
        memcpy(&after, &all[GUARD + NC + i], sizeof after);
        cr_assert(before == 0xffffffffu && after == 0xffffffffu,
                  "tiled_gemm_tf32 (M=%d N=%d K=%d) wrote outside C: %zu floats %s it", M, N, K,
                  before != 0xffffffffu ? GUARD - i : i + 1,
                  before != 0xffffffffu ? "before" : "after");
    }
    return all + GUARD;
}

static void check_against_cpu(int M, int N, int K, uint64_t seed) {
    Rng rng;
    rng_seed(&rng, seed);
    float *A = gt_random((size_t)M * K, -1, 1, &rng), *B = gt_random((size_t)N * K, -1, 1, &rng);
    float *ref = xmalloc((size_t)M * N * sizeof(float));
    cpu_matmul_forward(ref, A, B, NULL, 1, M, K, N);
    char what[96];
    snprintf(what, sizeof what, "tiled_gemm_tf32 M=%d N=%d K=%d", M, N, K);
    gt_compare(what, run_tiled_gemm(A, B, M, N, K), ref, (size_t)M * N, TOL_TF32_GEMM);
}

// One element, one value of K: a tile that is almost all padding.
Test(exercise_tiled_gemm, one_by_one_by_one) { check_against_cpu(1, 1, 1, 1); }

// Smaller than one 64 x 64 tile, and K is not a multiple of the slice (32) or
// of the tensor cores' 8: the zero padding does all the work.
Test(exercise_tiled_gemm, odd_shape_17x33x29) { check_against_cpu(17, 33, 29, 2); }

// Exactly one tile of C, two slices of K: no padding at all.
Test(exercise_tiled_gemm, one_whole_tile_64x64x64) { check_against_cpu(64, 64, 64, 3); }

// Several tiles in both directions, the last row and column of tiles partial.
Test(exercise_tiled_gemm, partial_edge_tiles_100x257x96) { check_against_cpu(100, 257, 96, 4); }

// Many slices of K (K = 1000 is not a multiple of 32), partial tiles.
Test(exercise_tiled_gemm, long_k_200x130x1000) { check_against_cpu(200, 130, 1000, 5); }

// A slice of GPT-2's QKV projection: 128 tokens, C = 768 -> 3C = 2304.
Test(exercise_tiled_gemm, gpt2_qkv_slice_128x2304x768) { check_against_cpu(128, 2304, 768, 6); }

// The kernel must round its operands to TF32 itself (__float_to_tf32): the
// result is then the fp32 sum of the rounded operands' products, within a
// few ulps.
Test(exercise_tiled_gemm, rounds_operands_to_tf32) {
    const int M = 100, N = 257, K = 768;
    Rng rng;
    rng_seed(&rng, 7);
    float *A = gt_random((size_t)M * K, -1, 1, &rng), *B = gt_random((size_t)N * K, -1, 1, &rng);
    float *A32 = gt_copy(A, (size_t)M * K), *B32 = gt_copy(B, (size_t)N * K);
    for (size_t i = 0; i < (size_t)M * K; i++) A32[i] = round_to_tf32(A[i]);
    for (size_t i = 0; i < (size_t)N * K; i++) B32[i] = round_to_tf32(B[i]);
    float *ref = xmalloc((size_t)M * N * sizeof(float));
    cpu_matmul_forward(ref, A32, B32, NULL, 1, M, K, N);
    gt_compare("tiled_gemm_tf32 vs operands rounded to TF32 on the CPU",
               run_tiled_gemm(A, B, M, N, K), ref, (size_t)M * N, TILED_GEMM_ROUNDED_TOL);
}
