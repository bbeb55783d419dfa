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
// Everything here is floatX (precision.h): qkv, out, att, the gradients, and
// every intermediate tensor below; the softmax computes in fp32 and the GEMMs
// add their products in fp32.
//
// Scratch is passed in by the caller, one buffer per call, typed float * and
// sized in floats (the *_scratch_floats functions), as every scratch buffer
// of the trainer is. This file carves floatX arrays out of it, back to back
// from its first byte, in this order (N = B*T*C = B*NH*T*hs, A = B*NH*T*T):
//   forward:  q, k, v, y (N each; y = att @ v before the heads are merged),
//             preatt (A; the unscaled scores q k^T)          4N + A floatX
//   backward: q, k, v, dq, dk, dv, dy (N each),
//             datt (A; overwritten in place by the scores' gradient)
//                                                            7N + A floatX
// so array i starts at byte i*N*sizeof(floatX). floatX is never larger than
// a float, so a buffer of that many floats always holds them (the bf16 build
// uses the first half of it). Nothing in it needs to survive between calls:
// layers can share it.
#ifndef ATTENTION_H
#define ATTENTION_H

#include <stddef.h>

#include "gpu_context.h"
#include "precision.h"

#ifdef __cplusplus
extern "C" {
#endif

size_t attention_forward_scratch_floats(int B, int T, int C, int NH);
size_t attention_backward_scratch_floats(int B, int T, int C, int NH);

void attention_forward_v1(const GpuContext *ctx, floatX *out, floatX *att, float *scratch,
                          const floatX *qkv, int B, int T, int C, int NH);

// dqkv (B,T,3C) += the gradient of out with respect to qkv (ACCUMULATES, as
// the CPU reference). att is the forward pass's.
void attention_backward_v1(const GpuContext *ctx, floatX *dqkv, float *scratch,
                           const floatX *dout, const floatX *qkv, const floatX *att, int B, int T,
                           int C, int NH);

#ifdef __cplusplus
}
#endif

#endif
