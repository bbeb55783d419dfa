// gemm_steps.h: appendix E's GEMM, from chapter 01's WMMA exercise toward
// cuBLAS, one idea per step. The trainer does not call it (its GEMMs are
// cuBLASLt's, matmul_lt.h); the kernel lab (tools/kernel_lab/
// lab_gemm_steps.c, `make demo-gemm`) checks and times every step beside
// cuBLASLt, and tests/gpu/test_kernels_gemm_steps_bf16.c checks them.
//
// ANCHOR: gemm_steps_contract
// The convention is matmul.h's and tiled_gemm.h's, nn.Linear's:
//   C (M, N) = A (M, K) @ B^T,  B (N, K),
// every matrix row-major and bf16, the products summed in fp32 and each
// output rounded to bf16 once, when stored (overwritten: no bias, no
// accumulation into C). gemm_step(ctx, s, out, inp, weight, B*T, OC, C) is
// the product of matmul_forward_v2(ctx, out, NULL, inp, weight, NULL, B, T,
// C, OC, OC, NULL).
//
// The steps (gemm_steps.cu has the code and says what each should buy):
//   1  WMMA, a 64 x 64 tile of C per block of 4 warps, 32 x 32 per warp,
//      slices of K copied through registers: chapter 01's kernel in bf16
//   2  the same kernel with a 128 x 128 tile per block of 8 warps, 64 x 32
//      per warp: each fragment loaded from shared memory feeds more products
//   3  step 2 fed by cp.async, 4 slices of K in flight
//   4  mma.sync (m16n8k16) on fragments that ldmatrix reads from an
//      unpadded, XOR-swizzled tile: the warp's own instruction, in place of WMMA
//   5  Hopper: wgmma fed by the TMA through a ring of mbarriers, one
//      producer warp and two consumer warpgroups, 128 x 128 per block
//   6  Hopper: step 5 with 128 x 256 per block, one wgmma of 64 x 256 per
//      warpgroup and slice of 16 (where step 5 issues two of 64 x 64)
//
// What every step requires, checked by gemm_step (which stops the program,
// naming the problem, otherwise):
//   - M >= 1 and N >= 1, any values: tiles that stick out of C are computed
//     on zeros and only the elements inside C are written;
//   - K a positive multiple of 8: every copy moves 16 bytes (8 bf16) of a
//     row, and the TMA (steps 5 and 6) wants row strides of 16 bytes' multiples;
//     K need not be a multiple of any slice of K (zeros past K);
//   - A, B and C 16-byte aligned (cudaMalloc's are);
//   - M no more than 65535 tiles of rows (about 4 million rows);
//   - steps 5 and 6: a GPU of compute capability 9.0 and a build for it
//     (GPU_ARCH=90): ctx->hopper. Elsewhere they stop with that reason, and
//     gemm_step_needs_hopper says which steps to leave out.
// The bf16 build only: in the fp32 build gemm_step stops with that reason.
// No step splits K: each output is one sum in a fixed order, the same bits
// on every run.
// ANCHOR_END: gemm_steps_contract
#ifndef GEMM_STEPS_H
#define GEMM_STEPS_H

#include "gpu_context.h"
#include "precision.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GEMM_STEPS 6
#define GEMM_STEP_FIRST_HOPPER 5

// C = A @ B^T by step `step`, 1..GEMM_STEPS, on ctx's stream.
void gemm_step(const GpuContext *ctx, int step, floatX *C, const floatX *A, const floatX *B,
               int M, int N, int K);

static inline int gemm_step_needs_hopper(int step) { return step >= GEMM_STEP_FIRST_HOPPER; }

#ifdef __cplusplus
}
#endif

#endif
