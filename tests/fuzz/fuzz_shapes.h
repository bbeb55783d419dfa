// fuzz_shapes.h: the model shapes the binary-format harnesses read files for.
// Small files (a few KB) let the fuzzer reach past the length checks; but a
// file's payload depends on the shape, so each harness gets the shape its
// input is for, as the trainer gets it from the model beside the file:
//   train_state  the shape below whose parameter count the state's header
//                names (fuzz_train_state_config)
//   debug_state  the tiny shape
//   checkpoint   none: a checkpoint's header is its shape
#ifndef FUZZ_SHAPES_H
#define FUZZ_SHAPES_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "gpt2_config.h"

// 300 parameters: a state of fp32 moments is 3.4 KB, a debug state 2.3 KB.
static inline GPT2Config fuzz_tiny_config(void) {
    GPT2Config cfg = {0};
    cfg.max_seq_len = 4;
    cfg.vocab_size = 7;
    cfg.padded_vocab_size = 8;
    cfg.num_layers = 1;
    cfg.num_heads = 2;
    cfg.channels = 4;
    cfg.tied = 1;
    return cfg;
}

// The smallest shape whose state chapter 10 writes with 8-bit moments
// (version 3). A tensor's moments are 8-bit when it is one of the layers'
// weight matrices with at least 4096 values per layer (adam_state.h): fcw
// and fcprojw, 4C x C each, reach that first, at C = 32 (qkvw, 3C x C, needs
// C >= 37). 13,152 parameters, and a state of 57 KB; at the tiny shape
// chapter 10 quantizes nothing, and its state is version 2.
static inline GPT2Config fuzz_8bit_config(void) {
    GPT2Config cfg = fuzz_tiny_config();
    cfg.channels = 32;
    return cfg;
}

// ---- train_state -----------------------------------------------------------------
// The shape a training state is read for: the one of the two above whose
// parameter count is the header's ([3] and [4], train_state.h), so that a
// state of either shape gets past the reader's count check to its payload;
// the tiny shape for any other count (which the reader then refuses). The
// trainer reads a state for the model saved beside it, which names the same
// count.
static inline GPT2Config fuzz_train_state_config(const uint8_t *data, size_t size) {
    GPT2Config q8 = fuzz_8bit_config();
    uint32_t count[2];
    if (size >= 5 * sizeof(uint32_t)) {
        memcpy(count, data + 3 * sizeof(uint32_t), sizeof count);  // little-endian, as written
        if (((uint64_t)count[1] << 32 | count[0]) == gpt2_num_params(&q8)) return q8;
    }
    return fuzz_tiny_config();
}
#endif
