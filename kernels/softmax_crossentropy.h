// softmax_crossentropy.h: the loss, the eager way: a softmax that writes the
// probabilities (B,T,Vp) out in full, then the cross-entropy that reads back
// one of them per position. (Chapter 04 fuses the two.)
//
// Shapes, row-major, as the CPU reference (gpt2_cpu.h): logits, probs and
// dlogits (B,T,Vp), of which only the first V columns are tokens (V <= Vp;
// the padding columns [V, Vp) exist from chapter 06 on); targets (B,T) int32
// in [0, V) on the device; losses and dlosses (B,T).
#ifndef SOFTMAX_CROSSENTROPY_H
#define SOFTMAX_CROSSENTROPY_H

#include <stdint.h>

#include "gpu_context.h"

#ifdef __cplusplus
extern "C" {
#endif

// probs = softmax over the first V logits of each row; padding columns get
// exactly 0. One block per row.
void softmax_forward_v1(const GpuContext *ctx, float *probs, const float *logits, int B, int T,
                        int V, int Vp);

// losses[b,t] = -log(probs[b,t,targets[b,t]])
void crossentropy_forward_v1(const GpuContext *ctx, float *losses, const float *probs,
                             const int32_t *targets, int B, int T, int Vp);

// mean_loss (one float on the device) = the mean of the B*T losses, summed by
// one block in a fixed order, so it is the same on every run.
void loss_mean_v1(const GpuContext *ctx, float *mean_loss, const float *losses, int B, int T);

// dlosses[i] = 1 / (B*T) for every position: the gradient of the mean loss,
// as the CPU reference seeds its backward pass.
void dlosses_fill_v1(const GpuContext *ctx, float *dlosses, int B, int T);

// dlogits += dlosses * (probs - onehot(targets)) over the first V columns;
// the padding columns are not touched. ACCUMULATES, as the CPU reference.
void crossentropy_softmax_backward_v1(const GpuContext *ctx, float *dlogits, const float *dlosses,
                                      const float *probs, const int32_t *targets, int B, int T,
                                      int V, int Vp);

#ifdef __cplusplus
}
#endif

#endif
