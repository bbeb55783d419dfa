// matmul_lt.h: chapter 04's linear layer, on cuBLASLt, with the bias, the
// GELU and their gradients done inside the GEMM ("epilogues") instead of in
// kernels of their own.
//
// The GEMM's epilogue is the code that runs on each output tile while it is
// still in registers, before it is written: adding a bias there, or applying
// GELU, costs no trip to memory. Chapter 00's matmul_forward_v1 writes the
// product, reads it back to add the bias, writes it, reads it back for GELU
// and writes it again; matmul_forward_v2 writes once.
//
// Shapes as matmul.h: inp (B,T,C), weight (OC,C), bias (OC) or NULL, out
// (B,T,OC); except that the rows of out (and of dout) may be longer than OC:
// `ld` is their row stride in elements (ld >= OC). The classifier's logits
// use it: their row stride is rounded up to a multiple of 8 (16 bytes) so
// that every row starts aligned (gpu_ops.h, gpu_ops_logits_stride).
//
// A width OC that is not a multiple of 8 (the lm_head's 50257) runs padded
// to the next multiple, on a zero-padded copy of the weight, as
// torch.compile's pad_mm pass does (matmul_lt.cu says why); out's rows must
// then be long enough (ld >= OC rounded up to 8), the padding columns of
// out get zeros, and those of dout must be zeros.
//
// Each distinct GEMM (shape, strides, epilogue, alignments) gets its cuBLASLt
// descriptors and its algorithm, chosen by cuBLASLt's heuristic, the first
// time it runs; every later call reuses them from a cache (a model runs a
// handful of shapes thousands of times). The cache holds 128 plans; a new
// shape beyond them evicts the plan used longest ago. The workspace is 32
// MiB, allocated once; so is each padded weight's copy (below), per shape,
// kept until the context is freed so that a captured CUDA graph's pointers
// stay valid. All of it is the context's (GpuContext.lt): two contexts share
// no plan.
//
// Chapter 11 (ctx->gemm_autotune): the algorithm is instead the fastest of the
// heuristic's first eight whose attributes say they add each output's
// products in the heuristic's first's order (no split of K, no reduction,
// the same instruction and accumulator), of those whose outputs on the first
// call's operands have the first's bits, timed on those operands (median of
// nine runs, each after an L2 flush; matmul_lt.cu, autotune). So the choice
// changes the time, and on the first call's operands provably not the bits.
#ifndef MATMUL_LT_H
#define MATMUL_LT_H

#include <stddef.h>

#include "gemm_operands.h"
#include "gpu_context.h"
#include "precision.h"

#ifdef __cplusplus
extern "C" {
#endif

// out[:, :OC] = inp @ weight^T + bias (bias may be NULL), rows of stride ld.
// With pre_gelu (not NULL; then ld must be OC): pre_gelu = inp @ weight^T +
// bias, kept for the backward pass, and out = gelu(pre_gelu) (tanh form), from
// the fp32 sum, each rounded to floatX once.
// operands: how weight and inp are stored (gemm_operands.h): NULL, floatX;
// or chapter 13's FP8 operands, whose pointers replace inp and weight: then
// no GELU (pre_gelu NULL: the cast that follows applies it, fp8.h), and
// B*T, C and OC multiples of 16.
void matmul_forward_v2(const GpuContext *ctx, floatX *out, floatX *pre_gelu, const floatX *inp,
                       const floatX *weight, const floatX *bias, int B, int T, int C, int OC,
                       int ld, const GemmOperands *operands);

// Floats of scratch matmul_backward_v2 needs: room for OC floatX, the bias
// gradient as the GEMM's epilogue writes it.
size_t matmul_backward_v2_scratch_floats(int OC);

// dinp (B,T,C) = dout[:, :OC] @ weight, OVERWRITTEN (beta = 0), and with
// pre_gelu (the forward's input of the GELU before this layer, (B,T,C))
// times gelu'(pre_gelu) in the epilogue. dweight (OC,C) += dout^T @ inp
// (beta = 1: ACCUMULATES); dbias (OC) += the column sums of dout, taken by
// the same GEMM's epilogue (which reads dout anyway: fp32 sums, rounded once
// to floatX) into `scratch`, then added to dbias. dout's rows have stride ld.
// With chapter 13's FP8 operands, their rows and transposes replace dout, inp
// and weight (gemm_operands.h), and dbias and pre_gelu are NULL: the cast of
// dout took the bias gradient and GELU's (fp8.h).
void matmul_backward_v2(const GpuContext *ctx, floatX *dinp, floatX *dweight, floatX *dbias,
                        float *scratch, const floatX *dout, const floatX *inp,
                        const floatX *weight, const floatX *pre_gelu, int B, int T, int C, int OC,
                        int ld, const GemmOperands *operands);

// A context's cuBLASLt state (GpuContext.lt), empty: the handle, the
// workspace and the plans are made by the first GEMM that needs them. Freed,
// with all of it, by matmul_lt_free (gpu_context_free calls both).
typedef struct MatmulLt MatmulLt;
MatmulLt *matmul_lt_new(void);
void matmul_lt_free(MatmulLt *lt);

// Device bytes held beside the model: the workspace, and for a weight of
// (OC, C) whose OC is not a multiple of 8, each of its two padded copies
// (0 when none is needed).
size_t matmul_lt_workspace_bytes(void);
size_t matmul_lt_padded_weight_bytes(int OC, int C);

// What the context's cache has done since it was made: for tests and reports.
typedef struct {
    int plans_cached;                 // plans held now (at most 128)
    long long plans_made;             // made in all, evicted ones too
    long long evictions;              // plans dropped to make room
    long long plans_tuned;            // shapes whose first call timed candidates
    long long candidates_rejected;    // candidates dropped for different bits
} MatmulLtStats;
MatmulLtStats matmul_lt_stats(const GpuContext *ctx);

#ifdef __cplusplus
}
#endif

#endif
