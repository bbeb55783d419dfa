// classifier.h: chapter 04's classifier: softmax, cross-entropy, the loss's
// gradient, in one kernel that reads the logits and writes the gradient over
// them.
//
// The eager classifier (softmax_crossentropy.h) writes the probabilities
// (B,T,Vp) out, reads them back for the loss, and reads them again in the
// backward pass to write dlogits, a third (B,T,Vp) buffer: at 124M and B=16
// each of those is 1.6 GB of bf16. Here one block per row reads its logits,
// takes the row's max and sum of exponentials in one pass (the "online"
// softmax: the sum is rescaled whenever the max grows), computes the loss,
// and in a second pass over the same row (v2: from L2 where the row is
// still there; v3: from shared memory) writes d(mean loss)/d(logit) in
// place of each logit:
//   dlogit_j = (softmax_j - [j == target]) / (B*T).
// No probabilities are stored anywhere, and dlogits need no buffer of their
// own: the logits are dead once the loss is known.
//
// Shapes: logits (B,T,ld) floatX, of which the first V columns are tokens
// and the rest (ld - V) padding; ld a multiple of 16 bytes' worth of floatX
// (the rows are read in 16-byte vectors). targets (B,T) int32; losses (B,T)
// and the mean loss fp32, as softmax_crossentropy.h.
#ifndef CLASSIFIER_H
#define CLASSIFIER_H

#include <stdint.h>

#include "gpu_context.h"
#include "precision.h"

#ifdef __cplusplus
extern "C" {
#endif

// losses and *mean_loss (device) from the logits; with write_dlogits, the
// logits are OVERWRITTEN by d(mean loss)/d(logits), the padding columns
// [V, ld) by 0. `probs` is unused (the slot's signature, gpu_ops.h, has it
// for the eager classifier). The mean is loss_mean_v1's fixed-order sum.
void classifier_fused_v2(const GpuContext *ctx, float *losses, float *mean_loss, floatX *logits,
                         floatX *probs, const int32_t *targets, int B, int T, int V, int ld,
                         int write_dlogits);

// Chapter 11: v2 with each row kept in shared memory between its passes,
// so that pass 2 never goes back to L2 or, where L2 has lost the row, to
// DRAM: the logits are read once. The same contract, shapes and results as
// v2, bit for bit. A row of ld floatX must fit one block's shared memory
// (227 KB on the H100: rows of 50304 do, in both builds); wider rows, and
// loss-only calls (write_dlogits == 0: no pass 2), run v2 itself. In bf16
// it is no faster than v2, whose rows the L2 keeps (classifier.cu says why),
// so chapter 11 measured it and left it in the lab.
void classifier_fused_v3(const GpuContext *ctx, float *losses, float *mean_loss, floatX *logits,
                         floatX *probs, const int32_t *targets, int B, int T, int V, int ld,
                         int write_dlogits);

#ifdef __cplusplus
}
#endif

#endif
