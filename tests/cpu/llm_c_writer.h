// llm_c_writer.h: a debug state written the way llm.c's train_gpt2.py writes
// one (its write_state), independently of debug_state.c's writer: the header
// (magic, version 2, B, T), x and y as int32, the logits (B, T, V) of the
// real tokens only, the loss, then every parameter's gradient in checkpoint
// order, wte's padded with zero rows to Vp (as its write_model pads wte).
// llm.c's models are tied, so there is no lm_head; an untied one's would
// follow, padded the same way.
//
// Tests build files with it to prove that we read what llm.c writes.
// Include after file_helpers.h.
#ifndef LLM_C_WRITER_H
#define LLM_C_WRITER_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "model/gpt2_config.h"

// grads: each tensor as PyTorch holds it, so wte's (and lm_head's) with V rows:
// the order of gpt2_config.h, the sizes of gpt2_param_sizes but with V rows.
static inline void write_llm_c_state(const char *path, const GPT2Config *cfg, int B, int T,
                                     const int32_t *x, const int32_t *y, const float *logits,
                                     float loss, const float *grads_v_rows) {
    FILE *fp = fopen(path, "wb");
    cr_assert_not_null(fp, "%s: cannot create", path);
    int32_t header[256] = {20240327, 2, B, T};
    size_t N = (size_t)B * T, V = cfg->vocab_size, C = cfg->channels;
    size_t pad = (size_t)(cfg->padded_vocab_size - cfg->vocab_size) * C;
    fwrite(header, sizeof header, 1, fp);
    fwrite(x, sizeof(int32_t), N, fp);
    fwrite(y, sizeof(int32_t), N, fp);
    fwrite(logits, sizeof(float), N * V, fp);
    fwrite(&loss, sizeof(float), 1, fp);
    size_t sizes[NUM_PARAM_TENSORS];
    gpt2_param_sizes(cfg, sizes);
    const float *g = grads_v_rows;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        if (sizes[t] == 0) continue;
        int vocab_rows = t == PARAM_WTE || t == PARAM_LM_HEAD;
        size_t n = vocab_rows ? V * C : sizes[t];
        fwrite(g, sizeof(float), n, fp);
        g += n;
        for (size_t i = 0; vocab_rows && i < pad; i++) fwrite(&(float){0.0f}, sizeof(float), 1, fp);
    }
    cr_assert_eq(fclose(fp), 0, "%s: cannot write", path);
}

#endif
