// fuzz_shapes.h: the tiny model the binary-format harnesses read files for.
// Small files (a few KB) let the fuzzer reach past the length checks.
#ifndef FUZZ_SHAPES_H
#define FUZZ_SHAPES_H
#include "gpt2_config.h"

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
#endif
