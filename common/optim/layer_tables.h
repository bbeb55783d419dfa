// layer_tables.h: chapter 14's --update-in-backward, in host arithmetic:
// where the gradients go when only one layer's are kept, and the AdamW
// tables that update the model a layer at a time.
//
// The backward pass completes the gradients of the layers from the last to
// the first. Applied as soon as a layer's are complete, they need not outlive
// it: the next layer down can write its own into the same buffer. The
// gradients are then laid out as the parameters of a model with one layer:
//
//   wte  wpe  | ln1w ln1b qkvw ... fcprojb |  lnfw  lnfb  (lm_head)
//   all rows    one layer's, every layer's in turn   all
//
// which at GPT-2 124M in bf16 is 39.8M values (80 MB) instead of 124M
// (249 MB), and at GPT-2 XL 111M instead of 1558M: 2.9 GB of a 16 GB card.
// The tensors outside the layers (the embeddings, the final layernorm) keep
// all their gradients: wte's are complete only when the encoder's backward,
// the last of the pass, has added its rows to the lm_head's.
//
// AdamW's table of a layer (adamw_table.h) lists that layer's slices of the
// twelve per-layer tensors: their parameters and moments where the whole
// model keeps them, their gradients in the one-layer buffer (grad_shift).
// Each value is updated by the same arithmetic as in the whole-model launch:
// the same bits, whichever table it is in (the tests check it).
#ifndef LAYER_TABLES_H
#define LAYER_TABLES_H

#include <stddef.h>

#include "model/gpt2_config.h"
#include "optim/adam_state.h"
#include "optim/adamw_table.h"

typedef struct {
    size_t size[NUM_PARAM_TENSORS];    // each tensor's gradients: one layer's for a layer's
    size_t offset[NUM_PARAM_TENSORS];  // where they start in the buffer
    size_t values;                     // the buffer: their sum
    size_t layer_offset, layer_values; // the one layer's slices: where they start, how many
} LayerGrads;

// 1 for the tensors that hold a slice per layer (ln1w .. fcprojb).
int layer_tensor(int i);

// The one-layer gradient layout of a model of shape cfg.
LayerGrads layer_grads_for(const GPT2Config *cfg);

// The table of layer l's slices (0 <= l < L), or, with l = L, of the tensors
// outside the layers, keeping those whose moments are 8-bit when quantized
// is 1 and the others when 0 (adam's layout says which), cut into blocks of
// values_per_block. A quantized slice must start on a block of the 8-bit
// state (a layer's matrices are multiples of 256 values when the channels
// are a multiple of 16, as in every GPT-2): one that does not is refused
// here, with the shape named.
void layer_table_build(AdamWTensors *t, const GPT2Config *cfg, const AdamLayout *adam,
                       const LayerGrads *g, int l, int quantized, size_t values_per_block);

#endif
