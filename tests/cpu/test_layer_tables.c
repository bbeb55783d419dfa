// test_layer_tables.c: chapter 14's update a layer at a time, its host
// arithmetic (layer_tables.h): the one-layer gradient layout
// (--update-in-backward), the blocks of a layer's moments
// (--offload-optimizer), and the AdamW tables of each layer and of the rest,
// which together must update every parameter exactly once, with its own
// moments and decay, reading its gradient where the backward pass wrote it.
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "adamw_table_cover.h"
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

// Every parameter updated once by the tables of groups 0..L, its gradient
// where g puts it (NULL: laid out as the parameters), its moments where the
// blocks put them (with_blocks: the group's block, else adam's layout).
static void check_cover(const GPT2Config *c, int quantize8, const LayerGrads *g,
                        int with_blocks) {
    const AdamLayout adam = adam_layout_for(c, quantize8);
    const StateBlock layer = state_block_for(c, &adam, 0), rest = state_block_for(c, &adam, 1);
    const size_t n = gpt2_num_params(c);
    Cover *cover = calloc(n, sizeof *cover);
    for (int l = 0; l <= c->num_layers; l++) {
        const StateBlock *b = !with_blocks ? NULL : l < c->num_layers ? &layer : &rest;
        AdamWTensors t;
        layer_table_build(&t, c, &adam, g, b, l, 0, 2048);
        cover_table(cover, &t, 0, 2048);
        layer_table_build(&t, c, &adam, g, b, l, 1, Q8_BLOCK);
        cover_table(cover, &t, 1, Q8_BLOCK);
    }
    const size_t L = (size_t)c->num_layers;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        const size_t slice = layer_tensor(i) ? adam.size[i] / L : adam.size[i];
        const StateBlock *b = layer_tensor(i) ? &layer : &rest;
        for (size_t j = 0; j < adam.size[i]; j++) {
            const Cover *v = &cover[adam.param_offset[i] + j];
            cr_assert_eq(v->hits, 1, "%s[%zu] updated %d times", gpt2_param_names[i], j, v->hits);
            // The gradient: the slice's place in the one-layer buffer.
            const size_t grad = g ? g->offset[i] + j % slice : adam.param_offset[i] + j;
            cr_assert_eq(v->grad, (long long)grad, "%s[%zu]'s gradient", gpt2_param_names[i], j);
            const size_t in_block = (adam.quantized[i] ? b->q8_at[i] : b->fp32_at[i]) + j % slice;
            cr_assert_eq(v->state, with_blocks ? in_block : adam.state_offset[i] + j,
                         "%s[%zu]'s moments", gpt2_param_names[i], j);
            cr_assert_eq(v->decay, gpt2_param_is_decayed(i));
            cr_assert_eq(v->quantized, adam.quantized[i]);
        }
    }
    free(cover);
}

Test(layer_tables, every_parameter_is_updated_once_with_its_own_gradient_and_moments) {
    const GPT2Config untied = shape(3, 64, 0), tied = shape(3, 64, 1), wide = shape(2, 128, 0);
    const GPT2Config *shapes[] = {&untied, &tied, &wide};
    for (int k = 0; k < 3; k++)
        for (int q8 = 0; q8 < 2; q8++) {  // chapter 09's fp32 moments, chapter 10's 8-bit
            const LayerGrads g = layer_grads_for(shapes[k]);
            check_cover(shapes[k], q8, &g, 0);    // --update-in-backward
            check_cover(shapes[k], q8, NULL, 1);  // --offload-optimizer
            check_cover(shapes[k], q8, &g, 1);    // both
        }
}

// A block's arrays do not overlap, each starts on 256 bytes, and its slices
// fit their arrays.
Test(layer_tables, a_blocks_arrays_are_apart_and_aligned) {
    const GPT2Config c = shape(3, 64, 0);
    for (int q8 = 0; q8 < 2; q8++)
        for (int rest = 0; rest < 2; rest++) {
            const AdamLayout adam = adam_layout_for(&c, q8);
            const StateBlock b = state_block_for(&c, &adam, rest);
            const size_t at[] = {b.m, b.v, b.m_absmax, b.v_absmax, b.m_q, b.v_q, b.bytes};
            const size_t need[] = {b.fp32_values * 4, b.fp32_values * 4, b.q8_values / 64,
                                   b.q8_values / 64, b.q8_values, b.q8_values};
            for (int k = 0; k < 6; k++) {
                cr_assert_eq(at[k] % 256, 0, "array %d on 256 bytes", k);
                cr_assert_geq(at[k + 1] - at[k], need[k], "array %d fits", k);
            }
            cr_assert_eq(b.q8_values % Q8_BLOCK, 0);
            cr_assert_eq(rest ? b.q8_values : 0, 0, "the tensors outside the layers: fp32");
        }
}

// Every group's moments into its block and back give the state again.
Test(layer_tables, moments_go_into_blocks_and_back_unchanged) {
    const GPT2Config c = shape(3, 64, 1);
    const AdamLayout adam = adam_layout_for(&c, 1);
    AdamState s, back;
    adam_state_alloc(&s, &adam);
    adam_state_alloc(&back, &adam);
    for (size_t i = 0; i < adam.fp32_values; i++) s.m[i] = (float)i, s.v[i] = (float)(2 * i);
    for (size_t i = 0; i < adam.q8_values; i++) s.m_q[i] = (uint8_t)i, s.v_q[i] = (uint8_t)(3 * i);
    for (size_t i = 0; i < adam.q8_blocks; i++) s.m_absmax[i] = (float)i, s.v_absmax[i] = -(float)i;
    const StateBlock layer = state_block_for(&c, &adam, 0), rest = state_block_for(&c, &adam, 1);
    unsigned char *block = malloc(layer.bytes > rest.bytes ? layer.bytes : rest.bytes);
    for (int l = 0; l <= c.num_layers; l++) {
        const StateBlock *b = l < c.num_layers ? &layer : &rest;
        memset(block, 0xAB, b->bytes);
        state_block_gather(b, &s, &c, l, block);
        state_block_scatter(b, block, &c, l, &back);
    }
    cr_assert(memcmp(s.m, back.m, adam.fp32_values * sizeof(float)) == 0, "fp32 m");
    cr_assert(memcmp(s.v, back.v, adam.fp32_values * sizeof(float)) == 0, "fp32 v");
    cr_assert(memcmp(s.m_q, back.m_q, adam.q8_values) == 0, "8-bit m");
    cr_assert(memcmp(s.v_q, back.v_q, adam.q8_values) == 0, "8-bit v");
    cr_assert(memcmp(s.m_absmax, back.m_absmax, adam.q8_blocks * sizeof(float)) == 0);
    cr_assert(memcmp(s.v_absmax, back.v_absmax, adam.q8_blocks * sizeof(float)) == 0);
    free(block);
    adam_state_free(&s), adam_state_free(&back);
}
