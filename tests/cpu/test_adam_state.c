// test_adam_state.c: chapter 10's optimizer state (common/optim/adam_state.h) and
// its state file (train_state.h, version 3): which tensors are 8-bit at GPT-2
// 124M and what that saves; moments to 8-bit and back within the maps'
// error; a version 3 state written and read back byte for byte; a state of
// no 8-bit tensor written as version 2; bad headers refused, naming the file.
#define _POSIX_C_SOURCE 200809L  // for file_helpers.h
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optim/adam_state.h"
#include "file_helpers.h"
#include "optim/quantize8.h"
#include "files/train_state.h"

TestSuite(adam_state, .init = make_tmpdir, .fini = remove_tmpdir);

static GPT2Config gpt2_124m_tied(void) {
    GPT2Config c = gpt2_config_124m();
    c.padded_vocab_size = 50304;
    c.tied = 1;
    return c;
}

// L=2, C=32: fcw and fcprojw have 4096 values per layer, the threshold, and
// are 8-bit; qkvw (3072) and attprojw (1024) are not.
static GPT2Config tiny(void) {
    return (GPT2Config){.max_seq_len = 16, .vocab_size = 64, .padded_vocab_size = 128,
                        .num_layers = 2, .num_heads = 2, .channels = 32, .tied = 1};
}

Test(adam_state, gpt2_124m_quantizes_the_four_weight_matrices) {
    GPT2Config c = gpt2_124m_tied();
    AdamLayout l = adam_layout_for(&c, 1);
    const size_t q = 12ull * 12 * 768 * 768;  // 3 + 1 + 4 + 4 times C^2, 12 layers
    cr_assert_eq(l.q8_values, q, "%zu", l.q8_values);
    cr_assert_eq(l.q8_blocks, q / 256);
    cr_assert_eq(l.fp32_values, l.num_params - q);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++)
        cr_assert_eq(l.quantized[i], i == PARAM_QKVW || i == PARAM_ATTPROJW || i == PARAM_FCW ||
                                         i == PARAM_FCPROJW, "%s", gpt2_param_names[i]);
    // 8 bytes of fp32 moments per value become 2, and 8 bytes per 256: 506.95 MB.
    const double saved = 8.0 * q - (2.0 * l.q8_values + 8.0 * l.q8_blocks);
    cr_assert_eq(saved, 506953728.0, "%.0f bytes", saved);
    AdamLayout full = adam_layout_for(&c, 0);
    cr_assert_eq(full.fp32_values, full.num_params);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++)
        cr_assert_eq(full.state_offset[i], full.param_offset[i], "chapter 09's layout");
}

// ---- comparing layouts ---------------------------------------------------------
// dst gets src's fields one by one, over whatever bytes dst held: its padding
// keeps them.
static void copy_fields(AdamLayout *dst, const AdamLayout *src) {
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        dst->param_offset[i] = src->param_offset[i];
        dst->size[i] = src->size[i];
        dst->quantized[i] = src->quantized[i];
        dst->state_offset[i] = src->state_offset[i];
    }
    dst->num_params = src->num_params;
    dst->fp32_values = src->fp32_values;
    dst->q8_values = src->q8_values;
    dst->q8_blocks = src->q8_blocks;
}

Test(adam_state, layouts_are_compared_field_by_field_not_by_their_padding) {
    GPT2Config c = tiny();
    AdamLayout a = adam_layout_for(&c, 1), b;
    memset(&b, 0xA5, sizeof b);
    copy_fields(&b, &a);
    const size_t fields = NUM_PARAM_TENSORS * (3 * sizeof(size_t) + sizeof(int)) +
                          4 * sizeof(size_t);
    if (sizeof(AdamLayout) > fields)  // the premise: padding bytes that differ
        cr_assert_neq(memcmp(&a, &b, sizeof a), 0);
    cr_assert(adam_layout_equal(&a, &b), "equal in every field, different padding");
    // A difference in any one field is found.
    size_t *counts[] = {&b.num_params, &b.fp32_values, &b.q8_values, &b.q8_blocks};
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        copy_fields(&b, &a);
        *counts[k] += 1;
        cr_assert(!adam_layout_equal(&a, &b), "count %zu differs, unnoticed", k);
    }
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        size_t *per_tensor[] = {&b.param_offset[i], &b.size[i], &b.state_offset[i]};
        for (size_t k = 0; k < 3; k++) {
            copy_fields(&b, &a);
            *per_tensor[k] += 1;
            cr_assert(!adam_layout_equal(&a, &b), "%s: field %zu differs, unnoticed",
                      gpt2_param_names[i], k);
        }
        copy_fields(&b, &a);
        b.quantized[i] ^= 1;
        cr_assert(!adam_layout_equal(&a, &b), "%s: quantized differs, unnoticed",
                  gpt2_param_names[i]);
    }
}

static void random_moments(size_t n, float *m, float *v, uint64_t seed) {
    Rng rng;
    rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++) {
        m[i] = 1e-3f * rng_normal(&rng);
        v[i] = m[i] * m[i] + 1e-8f * rng_uniform(&rng);
    }
}

// fp32 tensors come back exactly; 8-bit ones within 1% of their block's
// largest value (the maps' widest gap is 0.7% of it for m, 0.35% for v).
Test(adam_state, moments_to_8bit_and_back) {
    GPT2Config c = tiny();
    AdamLayout l = adam_layout_for(&c, 1);
    const size_t n = l.num_params;
    cr_assert(l.q8_values > 0);
    float *m = xmalloc(n * sizeof(float)), *v = xmalloc(n * sizeof(float));
    float *m2 = xmalloc(n * sizeof(float)), *v2 = xmalloc(n * sizeof(float));
    random_moments(n, m, v, 5);
    AdamState s;
    adam_state_alloc(&s, &l);
    adam_state_from_full(&s, m, v);
    adam_state_to_full(&s, m2, v2);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++)
        for (size_t j = l.param_offset[i]; j < l.param_offset[i] + l.size[i]; j++) {
            if (!l.quantized[i]) {
                cr_assert(m2[j] == m[j] && v2[j] == v[j], "%s: fp32 moments changed",
                          gpt2_param_names[i]);
                continue;
            }
            const size_t b = (l.state_offset[i] + j - l.param_offset[i]) / Q8_BLOCK;
            cr_assert(fabsf(m2[j] - m[j]) <= 0.01f * s.m_absmax[b], "%s: m", gpt2_param_names[i]);
            cr_assert(fabsf(v2[j] - v[j]) <= 0.01f * s.v_absmax[b], "%s: v", gpt2_param_names[i]);
        }
    adam_state_free(&s);
    free(m), free(v), free(m2), free(v2);
}

static const TrainProgress PROGRESS = {.step = 7, .data = {1, 2}, .sampler_rng = 99, .B = 4,
                                       .T = 16, .model_checksum = 0x1234};

static void write_state(const char *path, const AdamState *s) {
    AtomicFile af;
    char err[ERR_LEN];
    cr_assert_eq(train_state_write_adam_unrenamed(&af, path, &PROGRESS, s, err), 0, "%s", err);
    cr_assert_eq(atomic_commit(&af, err), 0, "%s", err);
}

static AdamState quantized_state(const GPT2Config *c) {
    AdamLayout l = adam_layout_for(c, 1);
    float *m = xmalloc(l.num_params * sizeof(float)), *v = xmalloc(l.num_params * sizeof(float));
    random_moments(l.num_params, m, v, 9);
    AdamState s;
    adam_state_alloc(&s, &l);
    adam_state_from_full(&s, m, v);
    free(m), free(v);
    return s;
}

Test(adam_state, version_3_round_trips_byte_for_byte) {
    GPT2Config c = tiny();
    AdamState s = quantized_state(&c), r;
    const char *path = tmp_path("state_000007.bin");
    write_state(path, &s);
    TrainProgress p;
    char err[ERR_LEN];
    cr_assert_eq(train_state_read_adam(path, &c, &p, &r, err), 0, "%s", err);
    cr_assert(p.step == 7 && p.model_checksum == 0x1234);
    const AdamLayout *l = &s.layout;
    cr_assert(adam_layout_equal(&r.layout, l), "the file's layout");
    cr_assert(memcmp(r.m, s.m, l->fp32_values * sizeof(float)) == 0);
    cr_assert(memcmp(r.v, s.v, l->fp32_values * sizeof(float)) == 0);
    cr_assert(memcmp(r.m_q, s.m_q, l->q8_values) == 0);
    cr_assert(memcmp(r.v_q, s.v_q, l->q8_values) == 0);
    cr_assert(memcmp(r.m_absmax, s.m_absmax, l->q8_blocks * sizeof(float)) == 0);
    cr_assert(memcmp(r.v_absmax, s.v_absmax, l->q8_blocks * sizeof(float)) == 0);
    // The fp32 reader (the CPU trainer's) refuses it, saying what it is.
    size_t n = l->num_params;
    float *m = xmalloc(n * sizeof(float)), *v = xmalloc(n * sizeof(float));
    cr_assert_eq(train_state_read(path, &p, m, v, n, err), -1);
    cr_assert(strstr(err, path) && strstr(err, "version 3"), "%s", err);
    free(m), free(v);
    adam_state_free(&s), adam_state_free(&r);
}

Test(adam_state, a_state_without_8bit_moments_is_version_2) {
    GPT2Config c = tiny();
    AdamLayout l = adam_layout_for(&c, 0);
    AdamState s;
    adam_state_alloc(&s, &l);
    const char *path = tmp_path("state_000007.bin");
    write_state(path, &s);
    FILE *f = fopen(path, "rb");
    int32_t h[2];
    cr_assert(fread(h, sizeof h[0], 2, f) == 2);
    fclose(f);
    cr_assert_eq(h[1], TRAIN_STATE_VERSION, "written as version %d", h[1]);
    adam_state_free(&s);
}

Test(adam_state, bad_version_3_headers_are_refused) {
    GPT2Config c = tiny();
    AdamState s = quantized_state(&c), r;
    const char *path = tmp_path("state_000007.bin");
    TrainProgress p;
    char err[ERR_LEN];
    write_state(path, &s);
    patch_int32(path, 15, 1 << 20);  // a tensor that does not exist
    cr_assert_eq(train_state_read_adam(path, &c, &p, &r, err), -1);
    cr_assert(strstr(err, path) && strstr(err, "quantized tensors"), "%s", err);
    write_state(path, &s);
    patch_int32(path, 15, 1 << PARAM_QKVW);  // another layout than the payload's
    cr_assert_eq(train_state_read_adam(path, &c, &p, &r, err), -1);
    cr_assert(strstr(err, path) != NULL, "%s", err);
    write_state(path, &s);
    truncate_to(path, 1024 + 100);
    cr_assert_eq(train_state_read_adam(path, &c, &p, &r, err), -1);
    cr_assert(strstr(err, path) != NULL, "%s", err);
    adam_state_free(&s);
}
