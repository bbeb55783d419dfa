// gpu_ops.c: see gpu_ops.h. First chapter 00's slots, the eager ones, each
// made of kernels/ launchers one op at a time; then gpu_ops_select, where
// each chapter swaps some of them for its own.
#include "gpu/gpu_ops.h"

#include "attention.h"
#include "attention_flash.h"
#include "classifier.h"
#include "encoder.h"
#include "gelu.h"
#include "layernorm.h"
#include "matmul.h"
#include "matmul_lt.h"
#include "residual.h"
#include "softmax_crossentropy.h"
#include "util/util.h"

// ---- chapter 00: one kernel per op, every intermediate written out ---------------
// ANCHOR: eager_slots
// The sum goes to memory, and the layernorm reads it back.
static void residual_layernorm_forward_eager(const GpuContext *ctx, floatX *residual, floatX *out,
                                             float *mean, float *rstd, const floatX *a,
                                             const floatX *b, const floatX *weight,
                                             const floatX *bias, int B, int T, int C) {
    residual_forward_v1(ctx, residual, a, b, (size_t)B * T * C);
    layernorm_forward_v1(ctx, out, mean, rstd, residual, weight, bias, B, T, C);
}

// The GEMM, the bias in a kernel of its own (inside matmul_forward_v1), then
// GELU in another: three passes over the (B,T,OC) output.
static void matmul_forward_eager(const GpuContext *ctx, floatX *out, floatX *pre_gelu,
                                 const floatX *inp, const floatX *weight, const floatX *bias,
                                 int B, int T, int C, int OC, int ld,
                                 const GemmOperands *operands) {
    if (ld != OC) die("matmul_forward_eager: rows of stride %d, not %d: not an eager layout", ld, OC);
    if (!gemm_operands_are_floatx(operands)) die("matmul_forward_eager: FP8 operands (chapter 13)");
    if (!pre_gelu) {
        matmul_forward_v1(ctx, out, inp, weight, bias, B, T, C, OC);
        return;
    }
    matmul_forward_v1(ctx, pre_gelu, inp, weight, bias, B, T, C, OC);
    gelu_forward_v1(ctx, out, pre_gelu, (size_t)B * T * OC);
}

// The v1 GEMMs add into dinp (beta = 1): zero it first. Then GELU's backward
// pass over it, in place, when the forward applied one.
static void matmul_backward_eager(const GpuContext *ctx, floatX *dinp, floatX *dweight,
                                  floatX *dbias, float *scratch, const floatX *dout,
                                  const floatX *inp, const floatX *weight,
                                  const floatX *pre_gelu, int B, int T, int C, int OC, int ld,
                                  const GemmOperands *operands) {
    if (ld != OC) die("matmul_backward_eager: rows of stride %d, not %d: not an eager layout", ld, OC);
    if (!gemm_operands_are_floatx(operands))
        die("matmul_backward_eager: FP8 operands (chapter 13)");
    const size_t n = (size_t)B * T * C;
    gpu_zero(ctx, dinp, n * sizeof(floatX), "memset (a matmul's dinp)");
    matmul_backward_v1(ctx, dinp, dweight, dbias, scratch, dout, inp, weight, B, T, C, OC);
    if (pre_gelu) gelu_backward_inplace_v1(ctx, dinp, pre_gelu, n);
}

// The (B,NH,T,T) probabilities are kept for the backward pass, which needs
// no log-sum-exp and does not read out.
static void attention_forward_eager(const GpuContext *ctx, floatX *out, floatX *att, float *lse,
                                    float *scratch, const floatX *qkv, int B, int T, int C,
                                    int NH) {
    (void)lse;
    attention_forward_v1(ctx, out, att, scratch, qkv, B, T, C, NH);
}

static void attention_backward_eager(const GpuContext *ctx, floatX *dqkv, float *scratch,
                                     const floatX *dout, const floatX *out, const floatX *qkv,
                                     const floatX *att, const float *lse, int B, int T, int C,
                                     int NH) {
    (void)out, (void)lse;
    gpu_zero(ctx, dqkv, (size_t)B * T * 3 * C * sizeof(floatX), "memset (dqkv)");
    attention_backward_v1(ctx, dqkv, scratch, dout, qkv, att, B, T, C, NH);
}

// The softmax writes every probability out; the cross-entropy reads one per
// row back (in bf16 it re-reads the logits: softmax_crossentropy.h); the
// backward pass reads them all again. dlogits are left to the backward pass.
static void classifier_forward_eager(const GpuContext *ctx, float *losses, float *mean_loss,
                                     floatX *logits, floatX *probs, const int32_t *targets, int B,
                                     int T, int V, int Vp, int write_dlogits) {
    (void)write_dlogits;
    softmax_forward_v1(ctx, probs, logits, B, T, V, Vp);
    crossentropy_forward_v1(ctx, losses, logits, probs, targets, B, T, V, Vp);
    loss_mean_v1(ctx, mean_loss, losses, B, T);
}

static void classifier_backward_eager(const GpuContext *ctx, floatX *dlogits, float *dlosses,
                                      const floatX *probs, const int32_t *targets, int B, int T,
                                      int V, int Vp) {
    dlosses_fill_v1(ctx, dlosses, B, T);
    gpu_zero(ctx, dlogits, (size_t)B * T * Vp * sizeof(floatX), "memset (dlogits)");
    crossentropy_softmax_backward_v1(ctx, dlogits, dlosses, probs, targets, B, T, V, Vp);
}
// ANCHOR_END: eager_slots

// ---- chapter 05: flash attention ---------------------------------------------------
// ANCHOR: flash_slots
// No probabilities: each row's log-sum-exp is all the backward pass keeps.
// Heads of 64, GPT-2's, run on Hopper's warpgroup products (v3) on a Hopper
// GPU; other head sizes (the tests' small models), and other GPUs, on the
// warp's (v2).
static void attention_forward_flash(const GpuContext *ctx, floatX *out, floatX *att, float *lse,
                                    float *scratch, const floatX *qkv, int B, int T, int C,
                                    int NH) {
    (void)att, (void)scratch;
    if (ctx->hopper && C == 64 * NH) attention_forward_v3(ctx, out, lse, qkv, B, T, C, NH);
    else attention_forward_v2(ctx, out, lse, qkv, B, T, C, NH);
}

// The backward pass rebuilds the probabilities from q, k and lse; it writes
// every element of dqkv, so there is nothing to zero first.
static void attention_backward_flash(const GpuContext *ctx, floatX *dqkv, float *scratch,
                                     const floatX *dout, const floatX *out, const floatX *qkv,
                                     const floatX *att, const float *lse, int B, int T, int C,
                                     int NH) {
    (void)att;
    if (ctx->hopper && C == 64 * NH)
        attention_backward_v3(ctx, dqkv, scratch, dout, out, qkv, lse, B, T, C, NH);
    else attention_backward_v2(ctx, dqkv, scratch, dout, out, qkv, lse, B, T, C, NH);
}
// ANCHOR_END: flash_slots

// ---- chapter 12: attention at Hopper's pace ----------------------------------------
// ANCHOR: fast_slots
// The same contracts as chapter 05's slots, and where chapter 05 runs v3 (a
// Hopper GPU, heads of 64) v4: the forward pass in tiles of 128 keys, fed
// by the TMA from a producer warp, in persistent blocks (v3's values,
// rounded elsewhere); the backward pass v3's products, fed by TMA rings; the
// blocks of both passes ordered by head so that a head's tiles share L2.
// Everywhere else chapter 05's slot runs, exactly as it did (v2 on an A100
// or an RTX card, at other head sizes, under GPT2_PORTABLE_KERNELS=1), so
// that chapter 12 trains wherever chapter 11 does, with chapter 11's
// attention.
static void attention_forward_fast(const GpuContext *ctx, floatX *out, floatX *att, float *lse,
                                   float *scratch, const floatX *qkv, int B, int T, int C,
                                   int NH) {
    if (ctx->hopper && C == 64 * NH) attention_forward_v4(ctx, out, lse, qkv, B, T, C, NH);
    else attention_forward_flash(ctx, out, att, lse, scratch, qkv, B, T, C, NH);
}

// v4's backward pass is v3's two kernels, ordered by head: the same
// scratch (D, one float per row). (GPT2_ATTENTION_V4_BACKWARD=n in the
// environment runs the lab's backward variant n instead, one of those with
// this scratch: attention_flash.h.)
static void attention_backward_fast(const GpuContext *ctx, floatX *dqkv, float *scratch,
                                    const floatX *dout, const floatX *out, const floatX *qkv,
                                    const floatX *att, const float *lse, int B, int T, int C,
                                    int NH) {
    if (ctx->hopper && C == 64 * NH)
        attention_backward_v4(ctx, dqkv, scratch, dout, out, qkv, lse, B, T, C, NH);
    else attention_backward_flash(ctx, dqkv, scratch, dout, out, qkv, att, lse, B, T, C, NH);
}
// ANCHOR_END: fast_slots

// ---- the chapters' choices ---------------------------------------------------------
// ANCHOR: gpu_ops_select
GpuOps gpu_ops_select(const Optimizations *o, GpuLaunchSettings *launch) {
    // Chapter 00: one eager kernel per op.
    GpuOps ops = {
        .encoder_forward = encoder_forward_v1,
        .layernorm_forward = layernorm_forward_v1,
        .residual_layernorm_forward = residual_layernorm_forward_eager,
        .matmul_forward = matmul_forward_eager,
        .attention_forward = attention_forward_eager,
        .classifier_forward = classifier_forward_eager,
        .classifier_backward = classifier_backward_eager,
        .matmul_backward = matmul_backward_eager,
        .attention_backward = attention_backward_eager,
        .layernorm_backward = layernorm_backward_v1,
        .encoder_backward = encoder_backward_v1,
    };
    // Chapter 01: the same GEMMs, with fp32 operands fed to the tensor cores
    // in TF32 (a setting every GEMM launch reads: gpu_gemm_compute_type).
    launch->tensor_cores = o->tensor_cores;
    // Chapter 02 is the bf16 build: the same slots, compiled for bf16.
    // Chapter 03: every launch is still checked, but the host no longer
    // waits for each kernel to finish.
    launch->sync_after_launch = !o->sync_avoidance;
    // Chapter 04: fewer trips to memory. The residual add joins the next
    // layernorm; bias, GELU and their gradients run in the GEMMs' epilogues;
    // the classifier is one kernel that writes dlogits over the logits; the
    // rest reads and writes 16 bytes per lane.
    if (o->kernel_fusion) {
        ops.layernorm_forward = layernorm_forward_v2;
        ops.residual_layernorm_forward = residual_layernorm_forward_v2;
        ops.matmul_forward = matmul_forward_v2;
        ops.classifier_forward = classifier_fused_v2;
        ops.classifier_backward = NULL;  // done by classifier_fused_v2
        ops.matmul_backward = matmul_backward_v2;
        ops.layernorm_backward = layernorm_backward_v2;
    }
    // Chapter 05: attention in one kernel forward and three backward, our
    // own, on the tensor cores; the (B,NH,T,T) scores are never stored.
    if (o->flash_attention) {
        ops.attention_forward = attention_forward_flash;
        ops.attention_backward = attention_backward_flash;
    }
    // Chapter 11: a CUDA graph replays every launch as it was captured, so the
    // embedding's backward pass may not size its grid from the batch's tokens
    // (v2 reads their count on the device). Then what the profile pointed at:
    // the GEMMs, each shape's fastest among cuBLASLt's candidates, and the
    // layernorm backward's parameter gradients, whose kernels left most of
    // the GPU idle.
    if (o->cuda_graphs) ops.encoder_backward = encoder_backward_v2;
    launch->gemm_autotune = o->gemm_autotune;
    if (o->tuned_layernorm) ops.layernorm_backward = layernorm_backward_v3;
    // Chapter 12: chapter 05's flash attention rewritten for Hopper (the
    // TMA, warp specialization, the softmax overlapped with the products).
    // A flash kernel: without chapter 05's switch the eager slots stay.
    if (o->flash_attention && o->fast_attention) {
        ops.attention_forward = attention_forward_fast;
        ops.attention_backward = attention_backward_fast;
    }
    // Chapter 13 changes no slot: chapter 04's matmul slots take FP8
    // operands (gemm_operands.h), which the model casts when its plan says
    // so (run_plan.c, fp8_layers.h).
    return ops;
}
// ANCHOR_END: gpu_ops_select

void gpu_launch_apply(GpuContext *ctx, const GpuLaunchSettings *launch) {
    ctx->sync_after_launch = launch->sync_after_launch;
    ctx->tensor_cores = launch->tensor_cores;
    ctx->gemm_autotune = launch->gemm_autotune;
}

int gpu_ops_logits_stride(const Optimizations *o, int Vp) {
    const int align = o->kernel_fusion ? 8 : 1;  // 8 floatX: 16 bytes in bf16
    return (Vp + align - 1) / align * align;
}
