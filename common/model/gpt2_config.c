// gpt2_config.c: see gpt2_config.h.
#include "model/gpt2_config.h"

#include "util/util.h"

const char *const gpt2_param_names[NUM_PARAM_TENSORS] = {
    "wte",  "wpe", "ln1w",    "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w",
    "ln2b", "fcw", "fcb",     "fcprojw", "fcprojb", "lnfw", "lnfb", "lm_head",
};

GPT2Config gpt2_config_124m(void) {
    GPT2Config cfg = {
        .max_seq_len = 1024,
        .vocab_size = 50257,
        .padded_vocab_size = 50257,
        .num_layers = 12,
        .num_heads = 12,
        .channels = 768,
        .tied = 0,
    };
    return cfg;
}

int gpt2_config_validate(const GPT2Config *c, char *err) {
    if (c->max_seq_len <= 0) return fail(err, "max_seq_len must be positive, got %d", c->max_seq_len);
    if (c->vocab_size <= 0) return fail(err, "vocab_size must be positive, got %d", c->vocab_size);
    if (c->padded_vocab_size < c->vocab_size)
        return fail(err, "padded_vocab_size (%d) is smaller than vocab_size (%d)",
                    c->padded_vocab_size, c->vocab_size);
    if (c->num_layers <= 0) return fail(err, "num_layers must be positive, got %d", c->num_layers);
    if (c->num_heads <= 0) return fail(err, "num_heads must be positive, got %d", c->num_heads);
    if (c->channels <= 0) return fail(err, "channels must be positive, got %d", c->channels);
    if (c->channels % c->num_heads != 0)
        return fail(err, "channels (%d) must be divisible by num_heads (%d)", c->channels,
                    c->num_heads);
    if (c->tied != 0 && c->tied != 1) return fail(err, "tied must be 0 or 1, got %d", c->tied);
    // Keep every tensor's element count well inside what int indexing in the
    // kernels can address.
    if ((double)c->padded_vocab_size * c->channels > 2e9 ||
        (double)c->num_layers * 4 * c->channels * c->channels > 2e9)
        return fail(err, "model too large: a parameter tensor would exceed 2e9 elements");
    return 0;
}

void gpt2_param_sizes(const GPT2Config *cfg, size_t sizes[NUM_PARAM_TENSORS]) {
    size_t Vp = cfg->padded_vocab_size, C = cfg->channels;
    size_t L = cfg->num_layers, T = cfg->max_seq_len;
    sizes[PARAM_WTE] = Vp * C;
    sizes[PARAM_WPE] = T * C;
    sizes[PARAM_LN1W] = L * C;
    sizes[PARAM_LN1B] = L * C;
    sizes[PARAM_QKVW] = L * 3 * C * C;
    sizes[PARAM_QKVB] = L * 3 * C;
    sizes[PARAM_ATTPROJW] = L * C * C;
    sizes[PARAM_ATTPROJB] = L * C;
    sizes[PARAM_LN2W] = L * C;
    sizes[PARAM_LN2B] = L * C;
    sizes[PARAM_FCW] = L * 4 * C * C;
    sizes[PARAM_FCB] = L * 4 * C;
    sizes[PARAM_FCPROJW] = L * C * 4 * C;
    sizes[PARAM_FCPROJB] = L * C;
    sizes[PARAM_LNFW] = C;
    sizes[PARAM_LNFB] = C;
    sizes[PARAM_LM_HEAD] = cfg->tied ? 0 : Vp * C;
}

size_t gpt2_num_params(const GPT2Config *cfg) {
    size_t sizes[NUM_PARAM_TENSORS], total = 0;
    gpt2_param_sizes(cfg, sizes);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) total += sizes[i];
    return total;
}

int gpt2_param_is_decayed(int i) {
    switch (i) {
    case PARAM_WTE: case PARAM_WPE: case PARAM_QKVW: case PARAM_ATTPROJW: case PARAM_FCW:
    case PARAM_FCPROJW: case PARAM_LM_HEAD:
        return 1;
    default:
        return 0;
    }
}
