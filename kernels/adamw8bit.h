// adamw8bit.h: chapter 10's 8-bit optimizer on the GPU: AdamW over one
// tensor whose moments m and v are stored in one byte each, block-wise
// quantized with the dynamic maps of common/optim/quantize8.h (which explains the
// maps, the blocks and the rounding rule). The CPU reference is
// adamw8bit_update() there: this kernel computes the same bytes, the same
// scales and the same weights, bit for bit.
#ifndef ADAMW8BIT_H
#define ADAMW8BIT_H

#include <stddef.h>
#include <stdint.h>

#include "gpu_context.h"
#include "precision.h"

#ifdef __cplusplus
extern "C" {
#endif

#include "adamw.h"      // AdamWStep, AdamWTensors
#include "optim/optimizer.h"  // AdamWConfig; a C header, hence inside the C block

// One 8-bit AdamW step over n values of one tensor, at step t (1-based):
// adamw8bit_update() of quantize8.h, with the weights where adamw_update_v1
// (adamw.h) keeps them:
//   master == NULL: params are the weights, updated in place (in the bf16
//     build rounded to bf16 at every step, as in adamw_update_v1);
//   master != NULL: master (n floats) holds the weights in fp32 and is the
//     one updated; params is then overwritten with it rounded to floatX.
// m_q and v_q (n bytes each, device) are the moments' indices into the
// Q8_SIGNED and Q8_UNSIGNED maps, m_absmax and v_absmax (q8_blocks(n) =
// ceil(n / 256) floats each, device) their blocks' scales; all four are
// updated in place. A fresh state is all zero bytes (cudaMemset 0).
//
// clip_factor (one float, device) may be NULL. When it is not, and
// *clip_factor < 1, each gradient is first scaled and rounded to floatX,
// x2f(f2x(x2f(g) * factor)), exactly as chapter 03's
// scale_by_device_factor_v1 would have left it in memory; grads itself is
// only read. When *clip_factor >= 1 (or NaN) the gradients are used as they
// are, as that kernel leaves them.
//
// The design: one warp per block of 256 values, 8 consecutive values per
// lane (16-byte loads and stores where the addresses allow, one value at a
// time otherwise: the end of a tensor, a tensor that starts unaligned); the
// two maps in shared memory; dequantize, update and requantize in registers,
// the block's new scales by a warp maximum.
//
// Bytes per parameter, bf16 build with master weights: read the gradient 2,
// m 1, v 1, master 4; write m 1, v 1, master 4, params 2: 16 bytes, plus 8
// per 256 values for the two scales read and 8 written (0.06 bytes), where
// fp32 moments take 28 (adamw_update_v1: read 2 + 4 + 4 + 4, write 4 + 4 +
// 4 + 2). The fp32 build without master: read 4 + 1 + 1 + 4, write 1 + 1 +
// 4: 16 bytes too, against 28.
void adamw8bit_update_v1(const GpuContext *ctx, floatX *params, float *master,
                         const floatX *grads, uint8_t *m_q, uint8_t *v_q, float *m_absmax,
                         float *v_absmax, size_t n, float lr, const AdamWConfig *cfg, int decay,
                         int t, const float *clip_factor);

// Chapter 10: adamw8bit_update_v1 over every tensor of the table in one
// launch. The table's blocks are blocks of Q8_BLOCK values (built with
// values_per_block = Q8_BLOCK): offset indexes params, master and grads,
// state_offset (a multiple of Q8_BLOCK) indexes m_q and v_q, and
// state_offset / Q8_BLOCK the scales. lr, the bias corrections and the clip
// factor come from *step (device memory), as in adamw_fused_v2, and so does
// stochastic (chapter 14): with master NULL, 1 rounds each weight into
// params stochastically (kernels/stochastic_round.cuh), 0 to nearest.
void adamw8bit_fused_v2(const GpuContext *ctx, const AdamWTensors *table, floatX *params,
                        float *master, const floatX *grads, uint8_t *m_q, uint8_t *v_q,
                        float *m_absmax, float *v_absmax, const AdamWStep *step,
                        const AdamWConfig *cfg, int stochastic);

// The two maps as the kernel builds them in shared memory, into maps (512
// floats, device): Q8_SIGNED's 256 values, then Q8_UNSIGNED's. For the
// tests, which compare them with q8_map() bit for bit.
void quantize8_maps_v1(const GpuContext *ctx, float *maps);

#ifdef __cplusplus
}
#endif

#endif
