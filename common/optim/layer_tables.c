// layer_tables.c: see layer_tables.h.
#include "optim/layer_tables.h"

#include <string.h>

#include "optim/quantize8.h"
#include "util/util.h"

int layer_tensor(int i) { return i >= PARAM_LN1W && i <= PARAM_FCPROJB; }

LayerGrads layer_grads_for(const GPT2Config *cfg) {
    LayerGrads g;
    memset(&g, 0, sizeof g);
    size_t full[NUM_PARAM_TENSORS];
    gpt2_param_sizes(cfg, full);
    const size_t L = (size_t)cfg->num_layers;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        g.size[i] = layer_tensor(i) && L > 0 ? full[i] / L : full[i];
        g.offset[i] = g.values;
        g.values += g.size[i];
        if (layer_tensor(i)) g.layer_values += g.size[i];
    }
    g.layer_offset = g.offset[PARAM_LN1W];
    return g;
}

// Appends n values of tensor i starting at `first` (its offset in the
// parameters) to the table, their gradients at grad_at.
static void append(AdamWTensors *t, const AdamLayout *adam, int i, size_t first, size_t n,
                   size_t grad_at, size_t values_per_block) {
    if (n == 0) return;
    if (t->count == ADAMW_MAX_TENSORS)
        die("layer_table_build: more than %d tensors", ADAMW_MAX_TENSORS);
    const int k = t->count++;
    const size_t into_tensor = first - adam->param_offset[i];
    t->offset[k] = first;
    t->size[k] = n;
    t->state_offset[k] = adam->state_offset[i] + into_tensor;
    t->grad_shift[k] = (long long)grad_at - (long long)first;
    t->decay[k] = gpt2_param_is_decayed(i);
    t->first_block[k] = t->blocks;
    t->blocks += (unsigned int)((n + values_per_block - 1) / values_per_block);
}

void layer_table_build(AdamWTensors *t, const GPT2Config *cfg, const AdamLayout *adam,
                       const LayerGrads *g, int l, int quantized, size_t values_per_block) {
    memset(t, 0, sizeof *t);
    const int L = cfg->num_layers;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        if (adam->quantized[i] != quantized || layer_tensor(i) != (l < L)) continue;
        const size_t slice = l < L ? g->size[i] : adam->size[i];
        const size_t first = adam->param_offset[i] + (l < L ? (size_t)l * slice : 0);
        if (quantized && (first - adam->param_offset[i]) % Q8_BLOCK != 0)
            die("--update-in-backward: a layer's slice of %s (%zu values) does not start on a "
                "block of %d of the 8-bit moments: the channels (%d) must be a multiple of 16",
                gpt2_param_names[i], slice, Q8_BLOCK, cfg->channels);
        append(t, adam, i, first, slice, g->offset[i], values_per_block);
    }
}
