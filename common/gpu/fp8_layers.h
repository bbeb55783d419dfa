// fp8_layers.h: chapter 13's FP8 copies of the four linear layers' operands
// in every transformer block (qkv, the attention's projection, fc, fc's
// projection), their scales, and the casts that make them (kernels/fp8.h).
//
// What stays bf16, and why:
//   - the lm_head (B*T x 768 x 50304): its logits feed a softmax over 50,304
//     values whose differences matter in the last bits, its input is the
//     final layernorm's, and its weight is wte (tied), which the embedding
//     reads in bf16 too; its GEMMs are 30% of the GEMM time, kept exact;
//   - attention (chapter 12's kernels): its products are inside one kernel,
//     and P's rounding to bf16 already is the kernel's largest error;
//   - the optimizer's state and the master weights (fp32 and 8-bit, chapter
//     10): FP8 is for what the tensor cores multiply, not what they keep.
//
// Per layer and linear layer, three FP8 operands, each with its scale (an
// Fp8Meta):
//   weight  e4m3  W (OC, C) and W^T, cast at the start of every training
//                 forward pass (an update moves a weight by about lr: its
//                 amax changes slowly, and a delayed scale serves it as well);
//   input   e4m3  X (B*T, C), cast in the forward pass: its rows for the
//                 product at once, its transpose kept for the backward pass;
//   grad    e5m2  dout (B*T, OC), cast in the backward pass, with the bias
//                 gradient taken by the same pass.
// All are cast with delayed scales (fp8.h) from the second step on; the
// first training step after the model is made runs current scaling.
// Validation and sampling run chapter 12's bf16 GEMMs on the same weights.
//
// Memory, at B*T tokens: the weights twice in one byte (2 x 85M at 124M);
// per layer the inputs' transposes, 7C bytes a token (ln1, attention's
// output, ln2 as C each, GELU's output as 4C); and three (B*T, 4C) byte
// buffers shared by every layer: an input's rows, a gradient's rows and its
// transpose. Chapter 14 (--recompute, recompute.h): an input whose bf16
// tensor the backward pass recomputes is cast again there too, with the
// forward pass's scale, and its transpose is kept for one layer only
// (input_layers), which every layer shares.
#ifndef FP8_LAYERS_H
#define FP8_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "fp8.h"
#include "gemm_operands.h"
#include "gpu/gpu_ops.h"
#include "gpu_context.h"
#include "model/gpt2_config.h"
#include "precision.h"
#include "train/recompute.h"

typedef enum { LINEAR_QKV, LINEAR_ATTPROJ, LINEAR_FC, LINEAR_FCPROJ, LINEARS } Linear;
typedef enum { FP8_WEIGHT, FP8_INPUT, FP8_GRAD, FP8_ROLES } Fp8Role;

typedef struct {
    int history_ready;  // a step has ended: inputs and grads use delayed scales
    int L, C, max_BT;
    uint8_t *weight_rows[LINEARS], *weight_cols[LINEARS];  // (L, OC, IC), (L, IC, OC)
    uint8_t *input_cols[LINEARS];                          // (input_layers, IC, max_BT)
    int input_layers[LINEARS];  // L, or 1 where the backward pass casts the input again
    uint8_t *input_rows;               // (max_BT, 4C): the input of the product at hand
    uint8_t *grad_rows, *grad_cols;    // (max_BT, 4C) each: the gradient at hand
    float *col_partials;               // the bias gradients' partial sums (fp8.h)
    Fp8Meta *metas;                    // (L, LINEARS, FP8_ROLES)
    uint8_t *formats;                  // a GemmPrecision per meta (device)
    size_t bytes;                      // all of the above
} Fp8Layers;

// The linear layer's input and output widths (IC, OC) at C channels.
void fp8_linear_shape(Linear k, int C, int *IC, int *OC);

// Device bytes fp8_layers_alloc takes for this model, largest batch and
// level of recompute.
size_t fp8_layers_bytes(const GPT2Config *cfg, int max_B, int max_T, Recompute recompute);

// Allocates the buffers, every scale 1 and every history empty.
void fp8_layers_alloc(Fp8Layers *f, const GPT2Config *cfg, int max_B, int max_T,
                      Recompute recompute);
void fp8_layers_free(Fp8Layers *f);

// Every layer's four weight matrices, from the parameters' views
// (gpt2_config.h's PARAM_QKVW...), cast in rows and columns.
void fp8_cast_weights(Fp8Layers *f, const GpuContext *ctx, floatX *const *params_of);

// The forward pass's operands of linear layer k of layer l: the weight cast
// above, and X (BT, IC), cast now (op: FP8_COPY, or FP8_GELU for fc's
// projection, whose input is GELU of x: fc's output before it), its
// transpose kept for the backward pass.
GemmOperands fp8_forward_operands(Fp8Layers *f, const GpuContext *ctx, int l, Linear k,
                                  const floatX *x, Fp8CastOp op, int BT);

// The same where X is a layernorm's output: the seam between blocks, the
// residual add a + b (b NULL: none; residual is then a) and the layernorm of
// linear layer k's input. With delayed scales the layernorm itself writes X
// in FP8 (layernorm_fp8.h) and X's bf16 buffer `out` is left alone; in the
// first step, the plan's bf16 kernels and a current-scaled cast of `out`.
GemmOperands fp8_layernorm_operands(Fp8Layers *f, const GpuContext *ctx, const GpuOps *ops, int l,
                                    Linear k, floatX *residual, floatX *out, float *mean,
                                    float *rstd, const floatX *a, const floatX *b,
                                    const floatX *weight, const floatX *bias, int B, int T);

// The backward pass's: the weight's and the input's transposes from the
// forward pass, and dout (BT, OC) cast now (op: FP8_COPY, or FP8_DGELU with
// pre, GELU's input, for fc: dout is then the gradient of GELU's output),
// dbias (OC) += its column sums.
GemmOperands fp8_backward_operands(Fp8Layers *f, const GpuContext *ctx, int l, Linear k,
                                   const floatX *dout, Fp8CastOp op, const floatX *pre,
                                   floatX *dbias, int BT);

// The end of a training step: every amax into its history and every delayed
// scale recomputed (fp8_scales_advance); later steps cast with them.
void fp8_end_step(Fp8Layers *f, const GpuContext *ctx);

#endif
