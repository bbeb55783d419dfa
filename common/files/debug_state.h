// debug_state.h: llm.c's "debug state": one batch and what a reference
// implementation (PyTorch) computed for it, to check our forward and backward.
//
// Layout, little-endian, with V = vocab_size, Vp = padded_vocab_size, N = B*T:
//   header   256 int32     [0] = DEBUG_STATE_MAGIC, [1] = DEBUG_STATE_VERSION,
//                          [2] = B, [3] = T, the rest zero
//   x        N int32       inputs, (B, T)
//   y        N int32       targets, (B, T)
//   logits   N*V float32   (B, T, V): UNPADDED, only the real tokens' logits
//   loss     1 float32     mean cross-entropy over the batch
//   grads    float32       the gradient of every parameter tensor in checkpoint
//                          order AND layout (gpt2_config.h): wte's, and lm_head's
//                          when untied (it comes last), have Vp rows, the
//                          padding rows zero. This is what llm.c's
//                          train_gpt2.py writes (it pads wte's gradient as it
//                          pads wte in the checkpoint), and what
//                          tools/pytorch_reference.py writes.
// So the gradients are laid out exactly as the model's own gradient buffer.
// Padding rows are the LAST rows of wte and lm_head: the real rows of a
// tensor are its first debug_grad_real_sizes(cfg)[t] elements, and only
// those are compared (the padding rows' gradients are zero in a correct
// model, since no token and no target is ever a padding id).
//
// (Before llm.c's layout was adopted, this project's files had V-row
// gradients; such a file is refused with a message that says so.)
#ifndef DEBUG_STATE_H
#define DEBUG_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "model/gpt2_config.h"

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
    float *grads;      // checkpoint layout (see above), num_grads floats
    size_t num_grads;  // == debug_grads_size(cfg) == gpt2_num_params(cfg)
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

// ---- the gradients' layout ----------------------------------------------------
// (The names are older than llm.c's layout; their meaning now is this.)

// Element counts of the 17 gradient tensors as the file holds them: the
// same as gpt2_param_sizes (Vp rows for wte and lm_head; lm_head 0 when tied).
void debug_grad_sizes(const GPT2Config *cfg, size_t sizes[NUM_PARAM_TENSORS]);

// Their sum: the number of gradient values in the file, == gpt2_num_params.
size_t debug_grads_size(const GPT2Config *cfg);

// How many leading elements of each tensor hold real rows: V*C for wte and
// lm_head (0 for lm_head when tied), all of the others. A comparison of
// gradients looks at these and skips the rest of the tensor (the padding
// rows). Tensor t starts at the same offset as in debug_grad_sizes.
void debug_grad_real_sizes(const GPT2Config *cfg, size_t sizes[NUM_PARAM_TENSORS]);

// Copies tensor t's gradient out of `grads` (the file's layout) into out,
// gpt2_param_sizes(cfg)[t] floats, with the padding rows set to zero.
void debug_grad_copy_out(const GPT2Config *cfg, const float *grads, int t, float *out);

// Whole-buffer copies between the file's layout and the model's parameter
// layout, which are now the same; both set the padding rows to zero (as
// llm.c writes them), so a model's gradient written through
// debug_grads_from_param_layout is byte for byte what llm.c would write.
void debug_grads_to_param_layout(const GPT2Config *cfg, const float *grads, float *param_grads);
void debug_grads_from_param_layout(const GPT2Config *cfg, const float *param_grads, float *grads);

#endif
