// gpu_ops.h: the launcher slots. The GPU model (gpt2_gpu.c) never calls a
// kernel by name: it calls the slots of a GpuOps table, and one function,
// gpu_ops_select, fills the table from the chapter's switches. That function
// is where every chapter's change to the kernels is made, one line or a few,
// the old choice and the new side by side.
//
// Each slot has a fixed contract, whichever kernels fill it:
//   - activation gradients (dinp of a matmul, dqkv, dlogits) are OVERWRITTEN;
//   - parameter gradients (dweight, dbias, dwte, ...) ACCUMULATE (+=): the
//     model zeroes them once per step, and a tied wte gathers both of its uses;
//   - the residual stream's gradient ACCUMULATES: every layernorm backward
//     adds its branch's contribution into it (layernorm_backward's dinp).
// Chapter 00's kernels (the _v1 launchers of kernels/) accumulate everywhere,
// as the CPU reference does, so its slots that must overwrite zero their
// output first: the eager way, a memset and an add.
//
// Shapes, row-major, as in kernels/*.h: inp (B,T,C), weight (OC,C), out
// (B,T,OC); qkv (B,T,3C); logits (B,T,Vrow) of which the first V are tokens
// (Vrow = gpu_ops_logits_stride: Vp, rounded up from chapter 04 on; the
// classifier slots' Vp argument is that row stride);
// losses (B,T) fp32; att (B,NH,T,T); lse (B,NH,T) fp32. Everything else is
// floatX.
#ifndef GPU_OPS_H
#define GPU_OPS_H

#include <stdint.h>

#include "train/chapters.h"
#include "gemm_operands.h"
#include "gpu_context.h"
#include "precision.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    // ---- forward ----------------------------------------------------------
    // out = wte[tokens] + wpe[position]
    void (*encoder_forward)(const GpuContext *ctx, floatX *out, const int32_t *tokens,
                            const floatX *wte, const floatX *wpe, int B, int T, int C);
    // out = layernorm(inp); mean, rstd (B,T) fp32, saved for the backward pass
    void (*layernorm_forward)(const GpuContext *ctx, floatX *out, float *mean, float *rstd,
                              const floatX *inp, const floatX *weight, const floatX *bias, int B,
                              int T, int C);
    // residual = a + b (the residual stream after a block), then out =
    // layernorm(residual) (the next block's input): the seam between blocks
    void (*residual_layernorm_forward)(const GpuContext *ctx, floatX *residual, floatX *out,
                                       float *mean, float *rstd, const floatX *a, const floatX *b,
                                       const floatX *weight, const floatX *bias, int B, int T,
                                       int C);
    // out = inp @ weight^T + bias (bias may be NULL). With pre_gelu (not NULL):
    // pre_gelu = that product, kept for the backward pass, and out = gelu(pre_gelu).
    // ld: the row stride of out, OC except for the logits (gpu_ops_logits_stride).
    // operands: how weight and inp are stored (gemm_operands.h); NULL, floatX,
    // until chapter 13
    void (*matmul_forward)(const GpuContext *ctx, floatX *out, floatX *pre_gelu,
                           const floatX *inp, const floatX *weight, const floatX *bias, int B,
                           int T, int C, int OC, int ld, const GemmOperands *operands);
    // out (B,T,C) = causal self-attention over qkv, and what the backward
    // pass needs besides qkv and out: att (B,NH,T,T), the probabilities
    // (chapters 00-04), or lse (B,NH,T), each row's log-sum-exp of scores
    // (chapter 05 on, attention_flash.h); the other is NULL. Scratch as
    // attention.h says.
    void (*attention_forward)(const GpuContext *ctx, floatX *out, floatX *att, float *lse,
                              float *scratch, const floatX *qkv, int B, int T, int C, int NH);
    // losses (B,T) and *mean_loss (one float, device) from the logits and the
    // targets; probs (B,T,Vp) for a classifier that keeps them (may be
    // unused). With write_dlogits, a classifier may also write d(mean
    // loss)/d(logits) over the logits themselves, the logits being no longer
    // needed; classifier_backward is then NULL.
    void (*classifier_forward)(const GpuContext *ctx, float *losses, float *mean_loss,
                               floatX *logits, floatX *probs, const int32_t *targets, int B,
                               int T, int V, int Vp, int write_dlogits);

    // ---- backward ---------------------------------------------------------
    // dlogits (B,T,Vp) = d(mean loss)/d(logits), OVERWRITTEN (padding columns
    // untouched); dlosses (B,T) fp32 scratch. NULL when classifier_forward
    // wrote them.
    void (*classifier_backward)(const GpuContext *ctx, floatX *dlogits, float *dlosses,
                                const floatX *probs, const int32_t *targets, int B, int T, int V,
                                int Vp);
    // dinp OVERWRITTEN = dout @ weight, and with pre_gelu (not NULL) times
    // gelu'(pre_gelu): the backward pass through the GELU that the forward
    // applied after this matmul's input was made. dweight, dbias (may be
    // NULL) ACCUMULATE. ld: the row stride of dout, as the forward's out.
    // operands: as the forward's (NULL until chapter 13)
    void (*matmul_backward)(const GpuContext *ctx, floatX *dinp, floatX *dweight, floatX *dbias,
                            float *scratch, const floatX *dout, const floatX *inp,
                            const floatX *weight, const floatX *pre_gelu, int B, int T, int C,
                            int OC, int ld, const GemmOperands *operands);
    // dqkv (B,T,3C) OVERWRITTEN, from dout (B,T,C) and the forward's out, qkv,
    // and att or lse (whichever it kept)
    void (*attention_backward)(const GpuContext *ctx, floatX *dqkv, float *scratch,
                               const floatX *dout, const floatX *out, const floatX *qkv,
                               const floatX *att, const float *lse, int B, int T, int C, int NH);
    // dinp (the residual stream's gradient), dweight, dbias ACCUMULATE
    void (*layernorm_backward)(const GpuContext *ctx, floatX *dinp, floatX *dweight,
                               floatX *dbias, float *scratch, const floatX *dout,
                               const floatX *inp, const floatX *weight, const float *mean,
                               const float *rstd, int B, int T, int C);
    // dwte, dwpe ACCUMULATE; the positions grouped by token (encoder.h)
    void (*encoder_backward)(const GpuContext *ctx, floatX *dwte, floatX *dwpe,
                             const floatX *dout, const int32_t *buckets, int num_buckets, int B,
                             int T, int C);
} GpuOps;

// The switches that change how every launch is made rather than which
// kernel runs: the context's fields of the same names (gpu_context.h), set
// from these by gpu_launch_apply.
typedef struct {
    int sync_after_launch;  // chapters 00-02: wait after every launch
    int tensor_cores;       // chapter 01: TF32 for the fp32 GEMMs
    int gemm_autotune;      // chapter 11: each GEMM shape's kernel picked by timing
} GpuLaunchSettings;

// The slots for the switches in o, and the launch settings that are
// switches too.
GpuOps gpu_ops_select(const Optimizations *o, GpuLaunchSettings *launch);
void gpu_launch_apply(GpuContext *ctx, const GpuLaunchSettings *launch);

// The row stride of the logits for a model of Vp vocabulary rows: Vp, or
// from chapter 04 on Vp rounded up to a multiple of 8 (16 bytes of bf16), so
// that every row of the logits starts 16-byte aligned. The tensor-core GEMM
// kernels that read and write the logits need that alignment (for their
// vector loads and the TMA copies of Hopper); with Vp = 50257 only one row
// in eight starts aligned, and cuBLAS must pick slower kernels. torch.compile does
// the same (its pad_mm pass pads a misaligned GEMM's dimensions).
int gpu_ops_logits_stride(const Optimizations *o, int Vp);

#ifdef __cplusplus
}
#endif

#endif
