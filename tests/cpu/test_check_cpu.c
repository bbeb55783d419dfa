// test_check_cpu.c: the CPU check mode reads a checkpoint and a debug state
// written the way llm.c writes them (tied, Vp = 50304) and finds our CPU
// reference within tolerance; a gradient that differs in one real row fails
// the check, and one that differs only in a padding row does not.
#define _POSIX_C_SOURCE 200809L  // for file_helpers.h
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdlib.h>
#include <string.h>

#include "train/check_cpu.h"
#include "files/checkpoint.h"
#include "file_helpers.h"
#include "model/gpt2_cpu.h"
#include "llm_c_writer.h"

static void quiet_tmpdir(void) {
    make_tmpdir();
    cr_redirect_stdout();  // the check's report
}

TestSuite(check_cpu, .init = quiet_tmpdir, .fini = remove_tmpdir);

enum { B = 2, T = 6 };

// GPT-2's padded vocabulary on a tiny tied model, random weights (padding
// rows zero, as llm.c keeps them), and a batch; the checkpoint goes to
// model.bin, and the state, as llm.c's writer would write what our CPU
// reference computes, to state.bin. `bump` is added to one gradient value
// at index bump_at of the V-row gradients (0: none).
static void write_files(float bump, size_t bump_at) {
    GPT2Config cfg = {.max_seq_len = 8, .vocab_size = 50257, .padded_vocab_size = 50304,
                      .num_layers = 1, .num_heads = 2, .channels = 8, .tied = 1};
    GPT2Cpu model;
    gpt2_cpu_init(&model, &cfg);
    gpt2_cpu_init_random(&model, 5);
    char err[ERR_LEN];
    cr_assert_eq(checkpoint_write(tmp_path("model.bin"), &cfg, model.params, err), 0, "%s", err);

    int32_t x[B * T], y[B * T];
    for (int i = 0; i < B * T; i++) x[i] = (i * 4099) % 50257, y[i] = (i * 31337 + 7) % 50257;
    gpt2_cpu_forward(&model, x, y, B, T);
    gpt2_cpu_zero_grad(&model);
    gpt2_cpu_backward(&model);

    size_t V = cfg.vocab_size, Vp = cfg.padded_vocab_size, C = cfg.channels;
    float *logits = xmalloc((size_t)B * T * V * sizeof(float));
    for (size_t i = 0; i < (size_t)B * T; i++)
        memcpy(logits + i * V, model.acts.logits + i * Vp, V * sizeof(float));
    // PyTorch's gradients: wte without its padding rows.
    size_t n = model.num_params - (Vp - V) * C;
    float *grads = xmalloc(n * sizeof(float));
    memcpy(grads, model.grads, V * C * sizeof(float));
    memcpy(grads + V * C, model.grads + Vp * C, (n - V * C) * sizeof(float));
    grads[bump_at] += bump;
    write_llm_c_state(tmp_path("state.bin"), &cfg, B, T, x, y, logits, model.mean_loss, grads);
    free(grads);
    free(logits);
    gpt2_cpu_free(&model);
}

Test(check_cpu, passes_on_a_state_written_as_llm_c_writes_it) {
    write_files(0, 0);
    cr_assert_eq(check_state_cpu(tmp_path("model.bin"), tmp_path("state.bin")), 0);
}

Test(check_cpu, fails_on_a_gradient_off_in_a_real_row) {
    write_files(1.0f, 50257 * 8 - 1);  // the last element of wte's last real row
    cr_assert_eq(check_state_cpu(tmp_path("model.bin"), tmp_path("state.bin")), 1);
}

Test(check_cpu, ignores_the_padding_rows) {
    write_files(0, 0);
    // A non-zero gradient in wte's first padding row: not a token, not compared.
    const char *state = tmp_path("state.bin");
    long grads_at = 256 + 2 * B * T + (long)B * T * 50257 + 1;
    patch_float(state, grads_at + 50257 * 8, 123.0f);
    cr_assert_eq(check_state_cpu(tmp_path("model.bin"), state), 0);
}

Test(check_cpu, a_bad_file_is_an_error_naming_it) {
    write_files(0, 0);
    truncate_to(tmp_path("state.bin"), 2000);
    cr_redirect_stderr();
    cr_assert_eq(check_state_cpu(tmp_path("model.bin"), tmp_path("state.bin")), 2,
                 "a bad file is bad input: exit 2 (exit_status.h), not a failed check's 1");
    fflush(stderr);
    cr_assert_stderr_neq_str("");
}
