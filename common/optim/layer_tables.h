// layer_tables.h: chapter 14's update a layer at a time, in host
// arithmetic: where the gradients go when only one layer's are kept
// (--update-in-backward), where the moments go when they live on the host
// (--offload-optimizer), and the AdamW tables that update the model a layer
// at a time.
//
// The backward pass completes the gradients of the layers from the last to
// the first. Applied as soon as a layer's are complete, they need not outlive
// it: the next layer down can write its own into the same buffer. The
// gradients are then laid out as the parameters of a model with one layer:
//
//   wte  wpe  | ln1w ln1b qkvw ... fcprojb |  lnfw  lnfb  (lm_head)
//   all rows    one layer's, every layer's in turn   all
//
// which at GPT-2 124M is 46.5M values (93 MB in bf16) instead of 124M
// (249 MB), and at GPT-2 XL 113M instead of 1558M: 2.69 GiB less, of a
// 16 GiB card.
// The tensors outside the layers (the embeddings, the final layernorm) keep
// all their gradients: wte's are complete only when the encoder's backward,
// the last of the pass, has added its rows to the lm_head's.
//
// AdamW's table of a layer (adamw_table.h) lists that layer's slices of the
// twelve per-layer tensors: their parameters and moments where the whole
// model keeps them, their gradients in the one-layer buffer (grad_shift).
// Each value is updated by the same arithmetic as in the whole-model launch:
// the same bits, whichever table it is in (the tests check it).
//
// --offload-optimizer keeps AdamW's moments of the layers' tensors in the
// host's memory, each layer's in one block of bytes, and brings a layer's
// block to the GPU only for its update (optimizer_offload.h). A block holds
// a layer's slices of every per-layer tensor, in six arrays:
//
//   m, v (fp32)  m_absmax, v_absmax (fp32)  m_q, v_q (one byte each)
//
// the fp32 ones for the tensors whose moments are fp32, the others for
// chapter 10's 8-bit ones, each array starting on 256 bytes. The tensors
// outside the layers keep theirs on the GPU, in a block of the same kind.
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

typedef struct {
    size_t fp32_at[NUM_PARAM_TENSORS];  // a slice's first moment in m and v (fp32 moments)
    size_t q8_at[NUM_PARAM_TENSORS];    // in m_q and v_q (8-bit moments): a multiple of 256
    size_t fp32_values, q8_values;      // of each array
    size_t m, v, m_absmax, v_absmax, m_q, v_q;  // each array's first byte in the block
    size_t bytes;                       // the block's
} StateBlock;

// The block of one layer's moments (the same for every layer), or, with
// rest = 1, of the tensors outside the layers, in adam's layout's kinds.
StateBlock state_block_for(const GPT2Config *cfg, const AdamLayout *adam, int rest);

// Group l's moments (layer l, or with l = L the tensors outside the layers,
// whose block `b` must be) from a state in adam's layout into a block, and
// back.
void state_block_gather(const StateBlock *b, const AdamState *s, const GPT2Config *cfg, int l,
                        unsigned char *block);
void state_block_scatter(const StateBlock *b, const unsigned char *block, const GPT2Config *cfg,
                         int l, AdamState *s);

// The table of layer l's slices (0 <= l < L), or, with l = L, of the tensors
// outside the layers, keeping those whose moments are 8-bit when quantized
// is 1 and the others when 0 (adam's layout says which), cut into blocks of
// values_per_block. Their gradients are where g puts them, or, with g NULL,
// laid out as the parameters; their moments where the block b puts them,
// or, with b NULL, where adam's layout does. A quantized slice must start on
// a block of the 8-bit state (a layer's matrices are multiples of 256 values
// when the channels are a multiple of 16, as in every GPT-2): one that does
// not is refused here, with the shape named.
void layer_table_build(AdamWTensors *t, const GPT2Config *cfg, const AdamLayout *adam,
                       const LayerGrads *g, const StateBlock *b, int l, int quantized,
                       size_t values_per_block);

#endif
