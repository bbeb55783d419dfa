// attention_flash.h: chapter 05's causal self-attention, flash attention:
// the same function as attention.h's eager version, computed tile by tile
// in on-chip memory, without ever writing the (B,NH,T,T) scores. Our own
// kernels in the style of FlashAttention-2 (Dao, 2023), on the tensor cores
// (bf16 products added in fp32), for the bf16 build only: in the fp32 build
// the launchers stop with a message. Two versions of the same algorithm:
//   v2  attention_flash.cu: mma.sync, a warp's product (any GPU since the A100)
//   v3  attention_flash_hopper.cu: wgmma, a warpgroup's (the H100 and H200),
//       heads of 64 only
//   v4  attention_flash_ws.cu (chapter 12): v3's products, fed by the TMA
//       from a producer warp through mbarrier pipelines (warp
//       specialization); each warpgroup's softmax overlapped with its next
//       product and the two warpgroups' products taking turns (ping-pong);
//       the backward pass in one kernel, dQ added in a fixed order
//// The same inputs give the two versions' outputs within bf16 rounding: they
// add the same products in a different order inside the tensor cores.
//
// Shapes, row-major, as attention.h: qkv (B,T,3C) holds q, k and v side by
// side, head h at channels [h*hs, (h+1)*hs) of each, hs = C/NH; out (B,T,C).
// The kernels read q, k and v where they are in qkv, with its row stride 3C:
// no copies into per-head tensors. Head sizes 16, 32 and 64 (GPT-2 uses 64
// at every size); another head size stops with a message. Any B, T and NH.
//
//   lse (B,NH,T) fp32: the log-sum-exp of each row of scaled scores,
//     lse[b,h,t] = log(sum_{j<=t} exp(q_t . k_j / sqrt(hs))): with it the
//     backward pass rebuilds any probability, exp(score - lse), from q and k.
//     It is the one tensor the backward pass needs besides qkv and out:
//     B*NH*T floats, where the eager version keeps B*NH*T*T probabilities.
//
// Both passes are deterministic: every sum is taken in a fixed order by one
// thread block, and no kernel adds into memory another block writes (no
// atomics), so the same inputs give the same bits on every run.
#ifndef ATTENTION_FLASH_H
#define ATTENTION_FLASH_H

#include <stddef.h>

#include "gpu_context.h"
#include "precision.h"

#ifdef __cplusplus
extern "C" {
#endif

// out (B,T,C) and lse (B,NH,T), OVERWRITTEN.
void attention_forward_v2(const GpuContext *ctx, floatX *out, float *lse, const floatX *qkv,
                          int B, int T, int C, int NH);

// Floats of scratch the backward pass needs: D (B,NH,T), below.
size_t attention_backward_v2_scratch_floats(int B, int T, int NH);

// dqkv (B,T,3C) OVERWRITTEN with the gradient of out with respect to qkv,
// from dout (B,T,C) and the forward pass's out, qkv and lse. Three kernels:
// D = rowsum(dout * out) per (b, h, t) into scratch; dk and dv, one block
// per tile of keys; dq, one block per tile of queries.
void attention_backward_v2(const GpuContext *ctx, floatX *dqkv, float *scratch,
                           const floatX *dout, const floatX *out, const floatX *qkv,
                           const float *lse, int B, int T, int C, int NH);

// v3: the same contracts as v2, heads of 64 only.
void attention_forward_v3(const GpuContext *ctx, floatX *out, float *lse, const floatX *qkv,
                          int B, int T, int C, int NH);
void attention_backward_v3(const GpuContext *ctx, floatX *dqkv, float *scratch,
                           const floatX *dout, const floatX *out, const floatX *qkv,
                           const float *lse, int B, int T, int C, int NH);

// The order in which a grid's blocks start (chapter 12; attention_wgmma.cuh
// says what each means): chapter 05's, the head varying fastest; a head's
// tiles side by side; groups of heads, the heaviest tiles of a group first.
typedef enum { ATTENTION_HEAD_FASTEST, ATTENTION_BY_HEAD, ATTENTION_HEAD_GROUPS } AttentionBlockOrder;

// v3 with its blocks in another order (chapter 12's first steps): the same
// blocks computing the same values, so v3's bits, in any order. v3 is
// ATTENTION_HEAD_FASTEST.
void attention_forward_v3_ordered(const GpuContext *ctx, AttentionBlockOrder order, floatX *out,
                                  float *lse, const floatX *qkv, int B, int T, int C, int NH);
void attention_backward_v3_ordered(const GpuContext *ctx, AttentionBlockOrder order,
                                   floatX *dqkv, float *scratch, const floatX *dout,
                                   const floatX *out, const floatX *qkv, const float *lse, int B,
                                   int T, int C, int NH);

// v4: the same contracts as v3 (heads of 64, the H100 and H200).
void attention_forward_v4(const GpuContext *ctx, floatX *out, float *lse, const floatX *qkv,
                          int B, int T, int C, int NH);
size_t attention_backward_v4_scratch_floats(int B, int T, int NH);
void attention_backward_v4(const GpuContext *ctx, floatX *dqkv, float *scratch,
                           const floatX *dout, const floatX *out, const floatX *qkv,
                           const float *lse, int B, int T, int C, int NH);

// Chapter 12's steps from v3, the kernel lab's rows. The forward pass:
//   1  v3, its grid ordered by head
//   2  v3, by groups of heads, the heaviest tiles of a group first
//   3  the TMA and mbarriers, a producer warp beside two consumer
//      warpgroups, two blocks per SM: v4's forward pass
//   4  + each warpgroup's softmax overlapped with its own next product
//      (one block per SM: the second tile of scores needs the registers)
//   5  + the two warpgroups' products taking turns (ping-pong)
// and with tiles of 128 keys (attention_flash_wide.cu):
//   6  one warpgroup and a producer warp a block, three blocks per SM
//   7  6 in persistent blocks, each taking the next 64 queries as it finishes
//      and loading their tiles while it finishes: v4's forward pass
// Steps 1 to ATTENTION_V4_STEPS_V3_BITS compute v3's bits; 6 and 7 move the
// running maximum per 128 keys, not per 64, and give v3's values rounded
// elsewhere (7 gives 6's bits).
#define ATTENTION_V4_STEPS 7
#define ATTENTION_V4_STEPS_V3_BITS 5
#define ATTENTION_V4_FORWARD 7
void attention_forward_v4_step(const GpuContext *ctx, int step, floatX *out, float *lse,
                               const floatX *qkv, int B, int T, int C, int NH);
// Steps 6 and 7 (attention_forward_v4_step calls it).
void attention_forward_wide_step(const GpuContext *ctx, int step, floatX *out, float *lse,
                                 const floatX *qkv, int B, int T, int C, int NH);
// The backward pass:
//   1  v3, its grid ordered by head
//   2  v3, by groups of heads, heaviest first: v4's backward pass
//   3  one kernel per 128 keys: dK, dV and dQ from one computation of P and
//      dS, dQ added into fp32 sums in a fixed order (deterministic)
//   4  the same, dQ added by atomics in any order (not deterministic: the
//      lab's measure of what the order costs)
// and the candidates past v4 (attention_flash_bwd.cu), each still v3's two
// kernels in groups of heads, each giving v3's bits, v3's scratch:
//   5  no delta kernel: the dQ kernel, run first, computes D for its own
//      rows and writes it; the dK/dV kernel reads it after
//   6  5 + each tile's probabilities computed while dP's product runs
//   7  5 + the tiles copied by the TMA into an mbarrier ring, issued by one
//      thread of the warpgroup (no producer warp: the registers)
//   8  6 and 7 together
#define ATTENTION_V4_BACKWARD_VARIANTS 8
// The variant the model runs (attention_backward_v4). The environment
// variable GPT2_ATTENTION_V4_BACKWARD=n runs variant n instead, for
// measuring a candidate in the trainer without rebuilding; only the
// variants with v3's scratch (1, 2, 5..8) may be named there.
#define ATTENTION_V4_BACKWARD 8
size_t attention_backward_v4_variant_scratch_floats(int variant, int B, int T, int NH);
void attention_backward_v4_variant(const GpuContext *ctx, int variant, floatX *dqkv,
                                   float *scratch, const floatX *dout, const floatX *out,
                                   const floatX *qkv, const float *lse, int B, int T, int C,
                                   int NH);
// Variants 5 to 8 (attention_backward_v4_variant calls it).
void attention_backward_split_variant(const GpuContext *ctx, int variant, floatX *dqkv,
                                      float *scratch, const floatX *dout, const floatX *out,
                                      const floatX *qkv, const float *lse, int B, int T, int C,
                                      int NH);

#ifdef __cplusplus
}
#endif

#endif
