// softmax_crossentropy.h: the loss, the eager way: a softmax that writes the
// probabilities (B,T,Vp) out in full, then the cross-entropy that reads back
// one of them per position. (Chapter 04 fuses the two.)
//
// Shapes, row-major, as the CPU reference (gpt2_cpu.h): logits, probs and
// dlogits (B,T,Vp), floatX (precision.h), of which only the first V columns
// are tokens (V <= Vp; the padding columns [V, Vp) exist from chapter 06 on);
// targets (B,T) int32 in [0, V) on the device; losses, dlosses and the mean
// loss, fp32 in every build (a loss near 3 stored in bf16 would be off by up
// to 0.008). Every max, sum and exponential is computed in fp32.
#ifndef SOFTMAX_CROSSENTROPY_H
#define SOFTMAX_CROSSENTROPY_H

#include <stdint.h>

#include "gpu_context.h"
#include "precision.h"

#ifdef __cplusplus
extern "C" {
#endif

// probs = softmax over the first V logits of each row; padding columns get
// exactly 0. One block per row.
void softmax_forward_v1(const GpuContext *ctx, floatX *probs, const floatX *logits, int B,
                        int T, int V, int Vp);

// losses[b,t] = -log(softmax(logits[b,t,:V])[targets[b,t]]), from the softmax
// forward's probs and logits:
//   fp32 build: -log(probs[b,t,target]), reading one probability per row.
//   bf16 build: from the logits, as -(logit[target] - max - log(sum of
//     exp(logit - max))), all in fp32: a bf16 probability has 8 significant
//     bits, and its log would carry their error into the loss. This re-reads
//     each row's logits (one block per row) for the max and the sum.
void crossentropy_forward_v1(const GpuContext *ctx, float *losses, const floatX *logits,
                             const floatX *probs, const int32_t *targets, int B, int T, int V,
                             int Vp);

// mean_loss (one float on the device) = the mean of the B*T losses, summed by
// one block in a fixed order, so it is the same on every run.
void loss_mean_v1(const GpuContext *ctx, float *mean_loss, const float *losses, int B, int T);

// Chapter 11's gradient accumulation: the step's loss as the mean of its
// micro-batches' mean losses (one float each, device), on the device: the
// first sets *step_loss, the others add to it, in order, and the last
// (num_micro > 0) divides the sum by num_micro.
void loss_accumulate_v1(const GpuContext *ctx, float *step_loss, const float *micro_loss,
                        int first, int num_micro);

// dlosses[i] = 1 / (B*T) for every position: the gradient of the mean loss,
// as the CPU reference seeds its backward pass.
void dlosses_fill_v1(const GpuContext *ctx, float *dlosses, int B, int T);

// dlogits += dlosses * (probs - onehot(targets)) over the first V columns,
// computed in fp32, rounded to floatX once; the padding columns are not
// touched. ACCUMULATES, as the CPU reference.
void crossentropy_softmax_backward_v1(const GpuContext *ctx, floatX *dlogits,
                                      const float *dlosses, const floatX *probs,
                                      const int32_t *targets, int B, int T, int V, int Vp);

#ifdef __cplusplus
}
#endif

#endif
