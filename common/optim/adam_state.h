// adam_state.h: AdamW's moments, where they live. Through chapter 09 they are
// two fp32 buffers laid out as the parameters are. Chapter 10 stores the
// moments of the large weight matrices in one byte each (quantize8.h) and
// keeps the rest in fp32, so the state becomes six buffers:
//
//   m, v                fp32, the moments of the fp32-state tensors, one
//                       after another in the parameters' order
//   m_q, v_q            one byte per value, the quantized tensors' moments,
//                       each tensor starting on a block of 256
//   m_absmax, v_absmax  fp32, one scale per block of 256 of m_q and v_q
//
// AdamLayout says which tensor is where. With no quantized tensor it is the
// layout of chapters 00-09: every tensor in m and v at its parameter offset.
//
// Which tensors are quantized (adam_layout_for): the weight matrices of the
// layers (qkvw, attprojw, fcw, fcprojw), 85M of GPT-2 124M's 124M values.
// Not the embeddings: a row of wte is touched only by the batches that hold
// its token, so its moments decay for hundreds of steps between gradients
// and spread over many orders of magnitude within a block of 256 (one row
// is 768 values), where the dynamic map's 7 decades run out (Dettmers et al.
// keep an embedding layer's state in 32 bits for the same reason). Not the
// biases and layernorm weights: under 4096 values per layer, 0.1% of the
// state, not worth a scale per 256 values and the error.
#ifndef ADAM_STATE_H
#define ADAM_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "model/gpt2_config.h"

typedef struct {
    size_t param_offset[NUM_PARAM_TENSORS];  // where the tensor's parameters start
    size_t size[NUM_PARAM_TENSORS];          // its values
    int quantized[NUM_PARAM_TENSORS];        // 1: its moments are 8-bit
    size_t state_offset[NUM_PARAM_TENSORS];  // where its moments start: in m, v, or in m_q,
                                             // v_q (a multiple of 256 there)
    size_t num_params;
    size_t fp32_values;                      // of m and v
    size_t q8_values;                        // of m_q and v_q (each tensor rounded up to 256)
    size_t q8_blocks;                        // of m_absmax and v_absmax: q8_values / 256
} AdamLayout;

// The layout for a model's shape: with quantize8 = 0 every tensor fp32 at its
// parameter offset (chapters 00-09); with 1 (chapter 10) the layers' weight
// matrices quantized, as said above.
AdamLayout adam_layout_for(const GPT2Config *cfg, int quantize8);

// The layout with the tensors of `mask` quantized (bit i: tensor i), for a
// state file that names them; and the mask of a layout.
AdamLayout adam_layout_masked(const GPT2Config *cfg, unsigned mask);
unsigned adam_layout_mask(const AdamLayout *l);

// 1 when a and b are the same layout, field by field. Never memcmp them: the
// struct has padding (after `quantized`, an odd count of ints), whose bytes
// are whatever a copy or the stack left there.
int adam_layout_equal(const AdamLayout *a, const AdamLayout *b);

// 1 when tensor i of this shape gets 8-bit moments in chapter 10.
int adam_tensor_is_quantized(const GPT2Config *cfg, int i);

// The moments on the host, in a layout's buffers.
typedef struct {
    AdamLayout layout;
    float *m, *v;                // fp32_values each
    uint8_t *m_q, *v_q;          // q8_values each
    float *m_absmax, *v_absmax;  // q8_blocks each
} AdamState;

void adam_state_alloc(AdamState *s, const AdamLayout *layout);  // every value zero: fresh
void adam_state_free(AdamState *s);

// A state of fp32 moments at their parameters' offsets (the layout of chapters
// 00-09) that uses m and v (num_params floats each) as its buffers: a view,
// not to be freed.
AdamState adam_state_view_full(const GPT2Config *cfg, float *m, float *v);

// Every moment as an fp32 value at its parameter offset (num_params floats
// each): the quantized ones dequantized.
void adam_state_to_full(const AdamState *s, float *m, float *v);

// The reverse: full moments (num_params floats each) into s's layout, the
// quantized tensors' block by block (quantize8.h).
void adam_state_from_full(AdamState *s, const float *m, const float *v);

// dst (allocated, its own layout) from src (any layout of the same
// parameters): copied when the layouts agree, else through full fp32 moments
// (a checkpoint of chapter 09 resumed in chapter 10 is quantized; one of
// chapter 10 resumed in chapter 09 is dequantized).
void adam_state_convert(const AdamState *src, AdamState *dst);

#endif
