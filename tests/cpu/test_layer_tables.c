// test_layer_tables.c: chapter 14's --update-in-backward, its host arithmetic
// (layer_tables.h): the one-layer gradient layout, and the AdamW tables of
// each layer and of the rest, which together must update every parameter
// exactly once, with its own moments and decay, reading its gradient where
// the backward pass wrote it.
#include <criterion/criterion.h>
#include <stdlib.h>

#include "optim/layer_tables.h"
#include "optim/quantize8.h"

static GPT2Config shape(int layers, int channels, int tied) {
    return (GPT2Config){.max_seq_len = 32, .vocab_size = 250, .padded_vocab_size = 256,
                        .num_layers = layers, .num_heads = 4, .channels = channels,
                        .tied = tied};
}

Test(layer_tables, the_gradients_keep_one_layer_and_everything_outside_the_layers) {
    const GPT2Config c = shape(3, 64, 0);
    const LayerGrads g = layer_grads_for(&c);
    size_t sizes[NUM_PARAM_TENSORS], layer = 0;
    gpt2_param_sizes(&c, sizes);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        cr_assert_eq(g.size[i], layer_tensor(i) ? sizes[i] / 3 : sizes[i], "%s",
                     gpt2_param_names[i]);
        if (layer_tensor(i)) layer += g.size[i];
        if (i > 0) cr_assert_eq(g.offset[i], g.offset[i - 1] + g.size[i - 1]);
    }
    cr_assert_eq(g.layer_values, layer);
    cr_assert_eq(g.layer_offset, g.offset[PARAM_LN1W]);
    cr_assert_eq(g.values, gpt2_num_params(&c) - 2 * layer, "two layers' fewer");
}

// Which table entry updates parameter p, and where it reads its gradient
// and its moments.
typedef struct {
    int hits;
    long long grad;
    size_t state;
    int decay, quantized;
} Cover;

static void cover_table(Cover *cover, const AdamWTensors *t, int quantized, size_t per_block) {
    unsigned int blocks = 0;
    for (int k = 0; k < t->count; k++) {
        cr_assert_eq(t->first_block[k], blocks, "entry %d's first block", k);
        blocks += (unsigned int)((t->size[k] + per_block - 1) / per_block);
        for (size_t j = 0; j < t->size[k]; j++) {
            Cover *c = &cover[t->offset[k] + j];
            c->hits++;
            c->grad = (long long)(t->offset[k] + j) + t->grad_shift[k];
            c->state = t->state_offset[k] + j;
            c->decay = t->decay[k];
            c->quantized = quantized;
        }
    }
    cr_assert_eq(t->blocks, blocks);
}

static void check_cover(const GPT2Config *c, int quantize8) {
    const AdamLayout adam = adam_layout_for(c, quantize8);
    const LayerGrads g = layer_grads_for(c);
    const size_t n = gpt2_num_params(c);
    Cover *cover = calloc(n, sizeof *cover);
    for (int l = 0; l <= c->num_layers; l++) {
        AdamWTensors t;
        layer_table_build(&t, c, &adam, &g, l, 0, 2048);
        cover_table(cover, &t, 0, 2048);
        layer_table_build(&t, c, &adam, &g, l, 1, Q8_BLOCK);
        cover_table(cover, &t, 1, Q8_BLOCK);
    }
    const size_t L = (size_t)c->num_layers;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        const size_t slice = layer_tensor(i) ? adam.size[i] / L : adam.size[i];
        for (size_t j = 0; j < adam.size[i]; j++) {
            const Cover *v = &cover[adam.param_offset[i] + j];
            cr_assert_eq(v->hits, 1, "%s[%zu] updated %d times", gpt2_param_names[i], j, v->hits);
            // The gradient: the slice's place in the one-layer buffer.
            cr_assert_eq(v->grad, (long long)(g.offset[i] + j % slice), "%s[%zu]'s gradient",
                         gpt2_param_names[i], j);
            cr_assert_eq(v->state, adam.state_offset[i] + j, "%s[%zu]'s moments",
                         gpt2_param_names[i], j);
            cr_assert_eq(v->decay, gpt2_param_is_decayed(i));
            cr_assert_eq(v->quantized, adam.quantized[i]);
        }
    }
    free(cover);
}

Test(layer_tables, every_parameter_is_updated_once_with_its_own_gradient_and_moments) {
    const GPT2Config untied = shape(3, 64, 0), tied = shape(3, 64, 1), wide = shape(2, 128, 0);
    check_cover(&untied, 0);  // chapter 09's fp32 moments
    check_cover(&untied, 1);  // chapter 10's 8-bit ones for the matrices
    check_cover(&tied, 1);
    check_cover(&wide, 1);
}
