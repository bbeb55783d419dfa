// test_check_state.c: the GPU check mode (--check-state) reads a checkpoint
// and a debug state written the way llm.c writes them (tied, Vp = 50304,
// wte's gradient padded to Vp rows) and finds the GPU model within the
// build's tolerance of our CPU reference; a gradient off in a real row fails
// the check, and one off only in a padding row (which no token reaches) does
// not. Built into both trainers' tests: fp32 and bf16.
#define _POSIX_C_SOURCE 200809L  // for file_helpers.h
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdlib.h>
#include <string.h>

#include "../cpu/file_helpers.h"
#include "../cpu/llm_c_writer.h"
#include "train/chapters.h"
#include "gpu/check_state.h"
#include "files/checkpoint.h"
#include "model/gpt2_cpu.h"
#include "gpu_context.h"
#include "precision.h"

// check_state_run makes its own device context: the suite only skips.
static void init(void) {
    if (gpu_device_count() == 0) cr_skip_test("no CUDA device");
    make_tmpdir();
    cr_redirect_stdout();  // the check's report
}

TestSuite(check_state, .init = init, .fini = remove_tmpdir);

enum { B = 2, T = 6, C = 8, V = 50257 };

// As tests/cpu/test_check_cpu.c: a tiny tied model with GPT-2's padded
// vocabulary, its checkpoint in model.bin, and in state.bin what our CPU
// reference computes for one batch, written as llm.c's writer writes it.
// `bump` is added to the V-row gradients at index bump_at (0: none).
static void write_files(float bump, size_t bump_at) {
    GPT2Config cfg = {.max_seq_len = 8, .vocab_size = V, .padded_vocab_size = 50304,
                      .num_layers = 1, .num_heads = 2, .channels = C, .tied = 1};
    GPT2Cpu model;
    gpt2_cpu_init(&model, &cfg);
    gpt2_cpu_init_random(&model, 5);
    char err[ERR_LEN];
    cr_assert_eq(checkpoint_write(tmp_path("model.bin"), &cfg, model.params, err), 0, "%s", err);

    int32_t x[B * T], y[B * T];
    for (int i = 0; i < B * T; i++) x[i] = (i * 4099) % V, y[i] = (i * 31337 + 7) % V;
    gpt2_cpu_forward(&model, x, y, B, T);
    gpt2_cpu_zero_grad(&model);
    gpt2_cpu_backward(&model);

    size_t Vp = cfg.padded_vocab_size;
    float *logits = xmalloc((size_t)B * T * V * sizeof(float));
    for (size_t i = 0; i < (size_t)B * T; i++)
        memcpy(logits + i * V, model.acts.logits + i * Vp, V * sizeof(float));
    size_t n = model.num_params - (Vp - V) * C;  // PyTorch's: wte without its padding
    float *grads = xmalloc(n * sizeof(float));
    memcpy(grads, model.grads, (size_t)V * C * sizeof(float));
    memcpy(grads + (size_t)V * C, model.grads + Vp * C, (n - (size_t)V * C) * sizeof(float));
    grads[bump_at] += bump;
    write_llm_c_state(tmp_path("state.bin"), &cfg, B, T, x, y, logits, model.mean_loss, grads);
    free(grads);
    free(logits);
    gpt2_cpu_free(&model);
}

static int check(void) {
    Optimizations o = chapter_optimizations(chapter_first_of_precision(PRECISION_NAME));
    return check_state_run(tmp_path("model.bin"), tmp_path("state.bin"), &o);
}

Test(check_state, passes_on_a_state_written_as_llm_c_writes_it) {
    write_files(0, 0);
    cr_assert_eq(check(), 0);
}

Test(check_state, fails_on_a_gradient_off_in_a_real_row) {
    write_files(1.0f, (size_t)V * C - 1);  // the last element of wte's last real row
    cr_assert_eq(check(), 1);
}

Test(check_state, ignores_the_padding_rows) {
    write_files(0, 0);
    // A non-zero gradient in wte's first padding row: not a token, not compared.
    long grads_at = 256 + 2 * B * T + (long)B * T * V + 1;
    patch_float(tmp_path("state.bin"), grads_at + (long)V * C, 123.0f);
    cr_assert_eq(check(), 0);
}
