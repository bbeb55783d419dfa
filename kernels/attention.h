// attention.h: causal multi-head self-attention, the "eager" way: the way
// PyTorch runs the textbook code (q @ k^T, scale, mask, softmax, @ v), one
// kernel or cuBLAS call per step, with the (B,NH,T,T) score and probability
// matrices written out in full. Chapter 05 replaces it with flash attention.
//
// Shapes, row-major, as the CPU reference (gpt2_cpu.h): qkv (B,T,3C) holds
// q, k and v side by side; head h uses channels [h*hs, (h+1)*hs) of each,
// hs = C/NH. out (B,T,C) is the heads concatenated. att (B,NH,T,T) is the
// softmax of the scaled scores, exactly 0 above the diagonal: the one tensor
// the backward pass needs besides qkv, so the caller keeps it per layer.
//
// Scratch is passed in by the caller, one float buffer per call, carved up as
// below (N = B*T*C = B*NH*T*hs, A = B*NH*T*T):
//   forward:  q, k, v, y (N each; y = att @ v before the heads are merged),
//             preatt (A; the unscaled scores q k^T)            4N + A floats
//   backward: q, k, v, dq, dk, dv, dy (N each),
//             datt (A; overwritten in place by the scores' gradient)
//                                                              7N + A floats
// Nothing in it needs to survive between calls: layers can share it.
#ifndef ATTENTION_H
#define ATTENTION_H

#include <stddef.h>

#include "gpu_context.h"

#ifdef __cplusplus
extern "C" {
#endif

size_t attention_forward_scratch_floats(int B, int T, int C, int NH);
size_t attention_backward_scratch_floats(int B, int T, int C, int NH);

void attention_forward_v1(const GpuContext *ctx, float *out, float *att, float *scratch,
                          const float *qkv, int B, int T, int C, int NH);

// dqkv (B,T,3C) += the gradient of out with respect to qkv (ACCUMULATES, as
// the CPU reference). att is the forward pass's.
void attention_backward_v1(const GpuContext *ctx, float *dqkv, float *scratch, const float *dout,
                           const float *qkv, const float *att, int B, int T, int C, int NH);

#ifdef __cplusplus
}
#endif

#endif
