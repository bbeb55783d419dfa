// fuzz_tokenizer.h: GPT-2's real tokenizer, loaded once per fuzzing process,
// for the harnesses that fuzz what is read with it (text, ids, merges).
#ifndef FUZZ_TOKENIZER_H
#define FUZZ_TOKENIZER_H
#include <stdio.h>
#include <stdlib.h>
#include "fuzz.h"
#include "data/tokenizer.h"

static inline const Tokenizer *fuzz_gpt2_tokenizer(void) {
    static Tokenizer *tok = NULL;
    if (tok == NULL) {
        char err[ERR_LEN];
        tok = tokenizer_load(fuzz_data_path("FUZZ_ENCODER", "data/raw/gpt2_encoder.json"),
                             fuzz_data_path("FUZZ_BPE", "data/raw/gpt2_vocab.bpe"), err);
        if (tok == NULL) {
            fprintf(stderr, "fuzz: %s (set FUZZ_ENCODER and FUZZ_BPE, or make data)\n", err);
            exit(2);
        }
    }
    return tok;
}
#endif
