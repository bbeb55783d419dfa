// train_gpt2_cpu.c: train GPT-2 on the CPU with the FP32 reference model.
//
// The slow, readable baseline of everything the GPU trainer does: each step
// prints its loss, time and throughput; every --val-every steps the
// validation loss; at the end a text sample. `make run` runs it on
// TinyShakespeare where no GPU is found.
//
//   build/train_gpt2_cpu --data data/tinyshakespeare
//   build/train_gpt2_cpu --check-state MODEL.bin STATE.bin
//
// Exit status (exit_status.h, the GPU trainer's too, printed by --help): 0
// done; 1 the run failed while running (a diverged loss, a read or a write
// that failed); 2 the command line, or a file it names, is wrong, found
// before the first step; 130 or 143 stopped by Ctrl-C or SIGTERM (after
// saving, when checkpoints are on).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/check_cpu.h"
#include "train/exit_status.h"
#include "train/stop_signal.h"
#include "data/tokenizer.h"
#include "train/train_common.h"
#include "train/train_cpu.h"

// Prints what was drawn, all of it or what a Ctrl-C left.
static void print_sample(CpuTrainer *tr, const Tokenizer *tok, int n) {
    int32_t *ids = xmalloc((size_t)(n + 1) * sizeof(int32_t));
    const int drawn = cpu_trainer_sample(tr, ids, n, tokenizer_eot(tok));
    report_sample(tok, ids + 1, drawn, n, tr->step);  // ids[0] is the prompt
    free(ids);
}

static void print_val_loss(CpuTrainer *tr) {
    char err[ERR_LEN];
    float loss;
    if (cpu_trainer_val_loss(tr, &loss, err)) die("%s", err);
    if (check_val_loss_finite(tr->step, loss, err)) die("%s", err);
    printf("step %5d | val loss %.4f\n", tr->step, loss);
}

// Saves, and returns the step saved (so that a step is never saved twice).
static int save_checkpoint(CpuTrainer *tr, char *path, size_t cap) {
    char err[ERR_LEN];
    if (cpu_trainer_save(tr, path, cap, err)) die("%s", err);
    printf("step %5d | saved %s\n", tr->step, path);
    return tr->step;
}

static void print_start(const CpuTrainer *tr, const TrainOptions *opt) {
    const GPT2Config *c = &tr->model.config;
    char params[160];
    describe_param_count(c, params, sizeof params);
    printf("model: L=%d H=%d C=%d T=%d V=%d (padded %d), %s\n", c->num_layers, c->num_heads,
           c->channels, c->max_seq_len, c->vocab_size, c->padded_vocab_size, params);
    printf("batch: B=%d T=%d, %zu training batches per epoch; steps %d..%d\n", opt->B, opt->T,
           dataloader_num_windows(&tr->train), tr->step, opt->steps);
}

// The training loop. Returns the exit status.
static int train(const TrainOptions *opt, const Tokenizer *tok) {
    char err[ERR_LEN], path[1024] = "";
    CpuTrainer tr;
    // The trainer is built from the files the flags name (the data, the
    // checkpoint and its state): what is wrong there is the input's.
    if (cpu_trainer_init(&tr, opt, err)) return bad_input(err);
    print_start(&tr, opt);
    const double tokens_per_step = (double)opt->B * opt->T;
    int saved_step = -1;
    while (tr.step < opt->steps && !stop_requested()) {
        if (opt->val_every > 0 && tr.step % opt->val_every == 0) print_val_loss(&tr);
        if (tok && opt->sample_every > 0 && tr.step > 0 && tr.step % opt->sample_every == 0)
            print_sample(&tr, tok, opt->sample_tokens);
        if (stop_requested()) break;  // in the validation or the sample: no step begins
        StepStats s;
        if (cpu_trainer_step(&tr, &s, err)) die("%s", err);
        // A diverged step has already ruined the weights: stop, save nothing.
        if (check_step_finite(tr.step, s.loss, s.grad_norm, err)) die("%s", err);
        if (tr.step % opt->log_every == 0 || tr.step == opt->steps)
            printf("step %5d/%d | loss %.4f | lr %.2e | norm %.3f | %.1f ms | %.0f tok/s\n",
                   tr.step, opt->steps, s.loss, s.lr, s.grad_norm, s.ms,
                   tokens_per_step / (s.ms / 1e3));
        if (opt->checkpoint_every > 0 && tr.step % opt->checkpoint_every == 0)
            saved_step = save_checkpoint(&tr, path, sizeof path);
    }
    if (stop_requested()) {
        if (opt->checkpoint_every > 0 && saved_step != tr.step)
            saved_step = save_checkpoint(&tr, path, sizeof path);
        report_stopped_run(tr.step, opt->steps, saved_step == tr.step ? path : NULL);
        cpu_trainer_free(&tr);
        return stop_exit_status();
    }
    if (opt->val_every > 0) print_val_loss(&tr);
    if (opt->checkpoint_every > 0 && saved_step != tr.step) save_checkpoint(&tr, path, sizeof path);
    if (tok) print_sample(&tr, tok, opt->sample_tokens);
    cpu_trainer_free(&tr);
    // Every step is done and saved, but a Ctrl-C after the last one (in the
    // sample, which it cut short) still gives the signal's status, not 0.
    return stop_exit_status();
}

int main(int argc, char **argv) {
    line_buffered_stdout();
    cpu_threads_cap();
    char err[ERR_LEN];
    if (argc > 1 && !strcmp(argv[1], "--check-state")) {
        if (argc == 4) return check_state_cpu(argv[2], argv[3]);
        return bad_input("--check-state MODEL STATE: two files, and no other flag");
    }
    TrainOptions opt = train_options_default();
    int parsed = train_options_parse(&opt, argc, argv, err);
    if (parsed == 1) {
        TrainOptions defaults = train_options_default();
        train_options_usage(argv[0], &defaults);
        printf("  --check-state MODEL STATE  (alone) compare the CPU reference with a debug\n"
               "                        state written by tools/pytorch_reference.py or llm.c\n");
        fputs(EXIT_STATUS_HELP, stdout);
        return 0;
    }
    if (parsed < 0 || prepare_run(&opt, err)) return bad_input(err);
    Tokenizer *tok = NULL;
    if (load_sample_tokenizer(&opt, &tok, err)) return bad_input(err);
    stop_signals_install();
    int status = train(&opt, tok);
    if (tok) tokenizer_free(tok);
    return status;
}
