// train_gpt2_cpu.c: train GPT-2 on the CPU with the FP32 reference model.
//
// The slow, readable baseline of everything the GPU trainer does: each step
// prints its loss, time and throughput; every --val-every steps the
// validation loss; at the end a text sample. `make run` runs it on
// TinyShakespeare where no GPU is found.
#include <stdio.h>
#include <stdlib.h>

#include "tokenizer.h"
#include "train_cpu.h"

static void print_sample(CpuTrainer *tr, const Tokenizer *tok, int n) {
    int32_t *ids = xmalloc((size_t)(n + 1) * sizeof(int32_t));
    cpu_trainer_sample(tr, ids, n, tokenizer_eot(tok));
    tokenizer_print_sample(tok, ids + 1, n, tr->step);  // ids[0] is the prompt
    free(ids);
}

static void print_val_loss(CpuTrainer *tr) {
    char err[ERR_LEN];
    float loss;
    if (cpu_trainer_val_loss(tr, &loss, err)) die("%s", err);
    printf("step %5d | val loss %.4f\n", tr->step, loss);
}

static void save_checkpoint(CpuTrainer *tr) {
    char err[ERR_LEN], path[1024];
    if (cpu_trainer_save(tr, path, sizeof path, err)) die("%s", err);
    printf("step %5d | saved %s\n", tr->step, path);
}

int main(int argc, char **argv) {
    char err[ERR_LEN];
    TrainOptions opt = train_options_default();
    int parsed = train_options_parse(&opt, argc, argv, err);
    if (parsed == 1) return 0;
    if (parsed < 0) {
        fprintf(stderr, "error: %s\n", err);
        return 2;
    }
    Tokenizer *tok = NULL;
    if (opt.sample_tokens > 0) {
        tok = tokenizer_load(opt.encoder_path, opt.bpe_path, err);
        if (!tok) die("%s (needed to print samples; --sample-tokens 0 skips them)", err);
    }
    CpuTrainer tr;
    if (cpu_trainer_init(&tr, &opt, err)) die("%s", err);
    const GPT2Config *c = &tr.model.config;
    printf("model: L=%d H=%d C=%d T=%d V=%d (padded %d), %s, %.2fM parameters\n",
           c->num_layers, c->num_heads, c->channels, c->max_seq_len, c->vocab_size,
           c->padded_vocab_size, c->tied ? "tied" : "untied", tr.model.num_params / 1e6);
    printf("batch: B=%d T=%d, %zu training batches per epoch; steps %d..%d\n", opt.B, opt.T,
           dataloader_num_windows(&tr.train), tr.step, opt.steps);

    const double tokens_per_step = (double)opt.B * opt.T;
    while (tr.step < opt.steps) {
        if (opt.val_every > 0 && tr.step % opt.val_every == 0) print_val_loss(&tr);
        if (tok && opt.sample_every > 0 && tr.step > 0 && tr.step % opt.sample_every == 0)
            print_sample(&tr, tok, opt.sample_tokens);
        StepStats s;
        if (cpu_trainer_step(&tr, &s, err)) die("%s", err);
        if (tr.step % opt.log_every == 0 || tr.step == opt.steps)
            printf("step %5d/%d | loss %.4f | lr %.2e | norm %.3f | %.1f ms | %.0f tok/s\n",
                   tr.step, opt.steps, s.loss, s.lr, s.grad_norm, s.ms,
                   tokens_per_step / (s.ms / 1e3));
        fflush(stdout);
        if (opt.checkpoint_every > 0 && tr.step % opt.checkpoint_every == 0) save_checkpoint(&tr);
    }
    if (opt.val_every > 0) print_val_loss(&tr);
    if (opt.checkpoint_every > 0 && tr.step % opt.checkpoint_every != 0) save_checkpoint(&tr);
    if (tok) print_sample(&tr, tok, opt.sample_tokens);
    cpu_trainer_free(&tr);
    if (tok) tokenizer_free(tok);
    return 0;
}
