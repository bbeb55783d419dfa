// test_optimizer_shard.c: chapter 15's --shard-optimizer, its host
// arithmetic (optimizer_shard.h): the ranks' shards cover every parameter
// exactly once; each shard's AdamW tables update its parameters with their
// own moments, decay and gradients; a state cut into shards and gathered
// again is the same bytes; and a cut inside an 8-bit block is refused.
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "adamw_table_cover.h"
#include "optim/optimizer_shard.h"
#include "optim/quantize8.h"

static GPT2Config gpt2_shape(int layers, int heads, int channels) {
    return (GPT2Config){.max_seq_len = 1024, .vocab_size = 50257, .padded_vocab_size = 50304,
                        .num_layers = layers, .num_heads = heads, .channels = channels,
                        .tied = 1};
}

static OptimizerShard shard_of(const AdamLayout *whole, int rank, int n) {
    OptimizerShard s;
    char err[512];
    cr_assert_eq(optimizer_shard_for(&s, whole, rank, n, err), 0, "rank %d of %d: %s", rank, n,
                 err);
    return s;
}

// Every parameter in exactly one rank's shard, the shards equal, a multiple
// of 256, and the local layout's slices inside the rank's range.
static void check_cover(const GPT2Config *c, int quantize8, int n) {
    const AdamLayout whole = adam_layout_for(c, quantize8);
    size_t next = 0;
    for (int r = 0; r < n; r++) {
        const OptimizerShard s = shard_of(&whole, r, n);
        cr_assert_eq(s.shard_values % Q8_BLOCK, 0);
        cr_assert_geq(s.padded_values, whole.num_params);
        cr_assert_lt(s.padded_values - whole.num_params, (size_t)n * Q8_BLOCK + s.shard_values);
        cr_assert_eq(s.first, next, "rank %d starts where rank %d ended", r, r - 1);
        size_t sum = 0;
        for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
            if (s.local.size[i] == 0) continue;
            cr_assert_geq(s.local.param_offset[i], s.first);
            cr_assert_leq(s.local.param_offset[i] + s.local.size[i], s.last);
            cr_assert_geq(s.local.param_offset[i], whole.param_offset[i]);
            cr_assert_leq(s.local.param_offset[i] + s.local.size[i],
                          whole.param_offset[i] + whole.size[i]);
            sum += s.local.size[i];
        }
        cr_assert_eq(sum, s.last - s.first, "rank %d's slices fill its range", r);
        next = s.last;
    }
    cr_assert_eq(next, whole.num_params, "the last rank ends at the last parameter");
}

Test(optimizer_shard, every_gpt2_size_is_covered_once_on_1_to_8_ranks) {
    const GPT2Config sizes[] = {gpt2_shape(12, 12, 768), gpt2_shape(24, 16, 1024),
                                gpt2_shape(36, 20, 1280), gpt2_shape(48, 25, 1600)};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (int n = 1; n <= 8; n++)
            for (int q = 0; q <= 1; q++) check_cover(&sizes[k], q, n);
}

Test(optimizer_shard, one_rank_keeps_everything_in_the_whole_layout) {
    const GPT2Config c = gpt2_shape(12, 12, 768);
    const AdamLayout whole = adam_layout_for(&c, 1);
    const OptimizerShard s = shard_of(&whole, 0, 1);
    cr_assert_eq(s.first, 0);
    cr_assert_eq(s.last, whole.num_params);
    cr_assert_eq(s.local.q8_values, whole.q8_values);
    cr_assert_eq(s.local.q8_blocks, whole.q8_blocks);
    cr_assert_geq(s.local.fp32_values, whole.fp32_values, "the same, but aligned per tensor");
}

Test(optimizer_shard, the_tables_update_the_shard_once_with_its_own_master_and_moments) {
    const GPT2Config c = gpt2_shape(4, 4, 256);
    const AdamLayout whole = adam_layout_for(&c, 1);
    int decay[NUM_PARAM_TENSORS];
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) decay[i] = gpt2_param_is_decayed(i);
    const int n = 3;
    int *updated = calloc(whole.num_params, sizeof *updated);
    for (int r = 0; r < n; r++) {
        const OptimizerShard s = shard_of(&whole, r, n);
        Cover *cover = calloc(whole.num_params, sizeof *cover);
        AdamWTensors fp32, q8;
        optimizer_shard_table(&fp32, &s, decay, 0, 1024);
        optimizer_shard_table(&q8, &s, decay, 1, Q8_BLOCK);
        cover_table(cover, &fp32, 0, 1024);
        cover_table(cover, &q8, 1, Q8_BLOCK);
        for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
            for (size_t j = 0; j < whole.size[i]; j++) {
                const size_t p = whole.param_offset[i] + j;
                const int mine = p >= s.first && p < s.last;
                cr_assert_eq(cover[p].hits, mine, "rank %d, %s[%zu]", r, gpt2_param_names[i], j);
                if (!mine) continue;
                updated[p]++;
                cr_assert_eq(cover[p].master, (long long)(p - s.first), "master at p - first");
                cr_assert_eq(cover[p].grad, (long long)p, "the gradient where the backward wrote it");
                cr_assert_eq(cover[p].quantized, whole.quantized[i]);
                cr_assert_eq(cover[p].decay, gpt2_param_is_decayed(i));
                // The moment's place in the shard's buffers.
                const size_t into = p - s.local.param_offset[i];
                cr_assert_eq(cover[p].state, s.local.state_offset[i] + into);
                if (whole.quantized[i]) cr_assert_eq(s.local.state_offset[i] % Q8_BLOCK, 0);
                cr_assert_lt(cover[p].state, whole.quantized[i] ? s.local.q8_values
                                                                : s.local.fp32_values);
            }
        }
        free(cover);
    }
    for (size_t p = 0; p < whole.num_params; p++)
        cr_assert_eq(updated[p], 1, "parameter %zu updated by one rank", p);
    free(updated);
}

static void fill_state(AdamState *s, unsigned seed) {
    const AdamLayout *l = &s->layout;
    srand(seed);
    for (size_t i = 0; i < l->fp32_values; i++) s->m[i] = (float)rand(), s->v[i] = (float)rand();
    for (size_t i = 0; i < l->q8_values; i++)
        s->m_q[i] = (uint8_t)rand(), s->v_q[i] = (uint8_t)rand();
    for (size_t i = 0; i < l->q8_blocks; i++)
        s->m_absmax[i] = (float)rand(), s->v_absmax[i] = (float)rand();
}

static void assert_same_state(const AdamState *a, const AdamState *b) {
    const AdamLayout *l = &a->layout;
    cr_assert_eq(memcmp(a->m, b->m, l->fp32_values * sizeof(float)), 0, "m");
    cr_assert_eq(memcmp(a->v, b->v, l->fp32_values * sizeof(float)), 0, "v");
    cr_assert_eq(memcmp(a->m_q, b->m_q, l->q8_values), 0, "m_q");
    cr_assert_eq(memcmp(a->v_q, b->v_q, l->q8_values), 0, "v_q");
    cr_assert_eq(memcmp(a->m_absmax, b->m_absmax, l->q8_blocks * sizeof(float)), 0, "m_absmax");
    cr_assert_eq(memcmp(a->v_absmax, b->v_absmax, l->q8_blocks * sizeof(float)), 0, "v_absmax");
}

// Cut into every rank's shard and gathered back: the same bytes, with 8-bit
// moments and without, on several counts of ranks.
Test(optimizer_shard, a_state_scattered_to_the_shards_and_gathered_is_the_same_bytes) {
    const GPT2Config c = gpt2_shape(4, 4, 256);
    for (int q = 0; q <= 1; q++) {
        for (int n = 1; n <= 5; n++) {
            const AdamLayout whole = adam_layout_for(&c, q);
            AdamState original, back;
            adam_state_alloc(&original, &whole);
            adam_state_alloc(&back, &whole);
            fill_state(&original, (unsigned)(7 * n + q));
            for (int r = 0; r < n; r++) {
                const OptimizerShard s = shard_of(&whole, r, n);
                AdamState mine;
                adam_state_alloc(&mine, &s.local);
                optimizer_shard_scatter(&s, &original, &mine);
                optimizer_shard_gather(&s, &mine, &back);
                adam_state_free(&mine);
            }
            // The padding of each tensor's last 8-bit block is not a moment:
            // the fill put bytes there that no shard carries. Compare the
            // moments through the same fill of the padding.
            for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
                if (!whole.quantized[i]) continue;
                const size_t end = whole.state_offset[i] + whole.size[i];
                const size_t pad_end = whole.state_offset[i] + q8_blocks(whole.size[i]) * Q8_BLOCK;
                for (size_t j = end; j < pad_end; j++)
                    back.m_q[j] = original.m_q[j], back.v_q[j] = original.v_q[j];
            }
            assert_same_state(&original, &back);
            adam_state_free(&original);
            adam_state_free(&back);
        }
    }
}

Test(optimizer_shard, a_cut_inside_an_8bit_block_is_refused_naming_the_tensor) {
    // A quantized tensor that starts off a block of 256 (no GPT-2 has one):
    // qkvb of a small model, quantized by hand.
    const GPT2Config c = {.max_seq_len = 32, .vocab_size = 250, .padded_vocab_size = 256,
                          .num_layers = 2, .num_heads = 2, .channels = 72, .tied = 1};
    const AdamLayout whole = adam_layout_masked(&c, 1u << PARAM_QKVB);
    cr_assert_neq(whole.param_offset[PARAM_QKVB] % Q8_BLOCK, 0, "the test's premise");
    // Some count of ranks puts a shard's edge inside it: at the latest, shards
    // of 256 values, fewer than qkvb's 432.
    char err[512] = "";
    OptimizerShard s;
    int refused = 0;
    const int most = (int)(whole.num_params / Q8_BLOCK) + 1;
    for (int n = 2; n <= most && !refused; n++)
        for (int r = 0; r < n && !refused; r++)
            refused = optimizer_shard_for(&s, &whole, r, n, err) != 0;
    cr_assert(refused, "some count of ranks cuts qkvb inside a block");
    cr_assert(strstr(err, "qkvb") && strstr(err, "--shard-optimizer"), "%s", err);
}
