// fuzz_shapes.h: the model shapes the binary-format harnesses read files for.
// Small files (a few KB) let the fuzzer reach past the length checks; but a
// file's payload depends on the shape, so each harness gets the shape its
// input is for, as the trainer gets it from the model beside the file:
//   train_state  the shape below whose parameter count the state's header
//                names (fuzz_train_state_config)
//   debug_state  the shape spelled out in the input's first bytes
//                (fuzz_config_from_bytes), then the file
//   checkpoint   none: a checkpoint's header is its shape
#ifndef FUZZ_SHAPES_H
#define FUZZ_SHAPES_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "model/gpt2_config.h"

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

// ---- debug_state -----------------------------------------------------------------
// A debug state does not say which model it is for, so the harness's input
// starts with the model's shape: FUZZ_CONFIG_BYTES bytes, one field each, in
// this order, each a signed byte; the rest of the input is the file. Signed,
// so that the fuzzer reaches the reader's "bad model config" path (a zero or
// negative size, Vp < V, H not dividing C, tied not 0 or 1) as easily as
// shapes tied and untied, padded and not; and small (at most 127), so that
// a valid shape's file stays small enough to be reached.
enum { FUZZ_CONFIG_BYTES = 7 };

static inline GPT2Config fuzz_config_from_bytes(const uint8_t b[FUZZ_CONFIG_BYTES]) {
    GPT2Config cfg = {0};
    cfg.max_seq_len = (int8_t)b[0];
    cfg.vocab_size = (int8_t)b[1];
    cfg.padded_vocab_size = (int8_t)b[2];
    cfg.num_layers = (int8_t)b[3];
    cfg.num_heads = (int8_t)b[4];
    cfg.channels = (int8_t)b[5];
    cfg.tied = (int8_t)b[6];
    return cfg;
}

// The reverse, for the seeds (fuzz_seeds.h): returns -1 when a field does
// not fit a signed byte.
static inline int fuzz_config_to_bytes(const GPT2Config *cfg, uint8_t b[FUZZ_CONFIG_BYTES]) {
    const int f[FUZZ_CONFIG_BYTES] = {cfg->max_seq_len, cfg->vocab_size,
                                      cfg->padded_vocab_size, cfg->num_layers,
                                      cfg->num_heads, cfg->channels, cfg->tied};
    for (int i = 0; i < FUZZ_CONFIG_BYTES; i++) {
        if (f[i] < INT8_MIN || f[i] > INT8_MAX) return -1;
        b[i] = (uint8_t)(int8_t)f[i];
    }
    return 0;
}
#endif
