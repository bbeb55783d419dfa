// debug_state.h: llm.c's "debug state": one batch and what a reference
// implementation (PyTorch) computed for it, to check our forward and backward.
//
// Layout, little-endian, with V = vocab_size (UNPADDED) and N = B*T:
//   header   256 int32     [0] = DEBUG_STATE_MAGIC, [1] = DEBUG_STATE_VERSION,
//                          [2] = B, [3] = T, the rest zero
//   x        N int32       inputs, (B, T)
//   y        N int32       targets, (B, T)
//   logits   N*V float32   (B, T, V)
//   loss     1 float32     mean cross-entropy over the batch
//   grads    float32       the gradient of every parameter tensor, in checkpoint
//                          order (gpt2_config.h), except that wte's, and lm_head's
//                          when untied (it comes last), have V rows, not
//                          padded_vocab_size: PyTorch's model has no padding rows.
// The model's own gradient buffer has the padded layout; the helpers below
// convert between the two. Padding rows are the LAST rows of wte and lm_head,
// so an unpadded tensor is just the first V*C elements of its padded one.
#ifndef DEBUG_STATE_H
#define DEBUG_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "gpt2_config.h"

#define DEBUG_STATE_MAGIC 20240327
#define DEBUG_STATE_VERSION 2
#define DEBUG_STATE_HEADER_INTS 256
#define DEBUG_STATE_HEADER_BYTES (DEBUG_STATE_HEADER_INTS * 4)

typedef struct {
    int B, T;
    int32_t *x;        // (B, T) inputs
    int32_t *y;        // (B, T) targets
    float *logits;     // (B, T, V), V unpadded
    float loss;
    float *grads;      // debug layout (see above), num_grads floats
    size_t num_grads;  // == debug_grads_size(cfg)
} DebugState;

// Reads path, a debug state for a model of shape cfg (which comes from the
// matching checkpoint). Checks magic, version, 0 < B, 0 < T <= max_seq_len,
// the exact length, targets and inputs in [0, V), and that the logits, the
// loss and the gradients are finite. Fills *ds with fresh buffers (release
// with debug_state_free); on failure *ds is left empty. Returns 0 or -1.
int debug_state_read(const char *path, const GPT2Config *cfg, DebugState *ds, char *err);

// Writes ds (atomically); ds->num_grads must be debug_grads_size(cfg).
int debug_state_write(const char *path, const GPT2Config *cfg, const DebugState *ds, char *err);

// Frees the buffers and zeroes *ds. Safe on an empty or already-freed state.
void debug_state_free(DebugState *ds);

// Element counts of the 17 gradient tensors in the debug layout (as
// gpt2_param_sizes, but with V rows for wte and lm_head), and their sum.
void debug_grad_sizes(const GPT2Config *cfg, size_t sizes[NUM_PARAM_TENSORS]);
size_t debug_grads_size(const GPT2Config *cfg);

// Copies tensor t's gradient out of `grads` (debug layout) into out, laid out
// as the model's parameter tensor t (gpt2_param_sizes(cfg)[t] floats), with
// the padding rows set to zero.
void debug_grad_copy_out(const GPT2Config *cfg, const float *grads, int t, float *out);

// Whole-buffer conversions: debug layout (debug_grads_size floats) <-> the
// model's parameter layout (gpt2_num_params floats). Going to the debug
// layout drops the padding rows; a correct model's gradient there is zero
// anyway, since padding tokens are never seen and their logits are ignored.
void debug_grads_to_param_layout(const GPT2Config *cfg, const float *grads, float *param_grads);
void debug_grads_from_param_layout(const GPT2Config *cfg, const float *param_grads, float *grads);

#endif
