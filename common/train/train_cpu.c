// train_cpu.c: see train_cpu.h.
#include "train/train_cpu.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optimizer.h"
#include "model/sampling.h"
#include "train/stop_signal.h"
#include "train/train_common.h"

void cpu_threads_cap(void) {
    int processors = omp_get_num_procs();
    if (omp_get_max_threads() > processors) omp_set_num_threads(processors);
}

// The model's weights come from one of three places: a resumed run's
// checkpoint, --init-from, or GPT-2's random initialisation.
static int build_model(CpuTrainer *tr, char *err) {
    const TrainOptions *opt = &tr->opt;
    const char *path = opt->resume_from[0] ? opt->resume_from : opt->init_from;
    if (!path[0]) {
        gpt2_cpu_init(&tr->model, &opt->model);
        gpt2_cpu_init_random(&tr->model, opt->seed);
        return 0;
    }
    GPT2Config cfg;
    float *params;
    if (load_model_for_run(path, opt->T, &cfg, &params, err)) return -1;
    gpt2_cpu_init(&tr->model, &cfg);
    memcpy(tr->model.params, params, tr->model.num_params * sizeof(float));
    free(params);
    if (cfg.vocab_size != opt->model.vocab_size)
        return fail(err, "%s: the model's vocabulary (%d) differs from the data's (%d)", path,
                    cfg.vocab_size, opt->model.vocab_size);
    return 0;
}

int cpu_trainer_init(CpuTrainer *tr, const TrainOptions *opt, char *err) {
    memset(tr, 0, sizeof(*tr));
    if (opt->grad_accum != 1)
        return fail(err, "--grad-accum: the GPU trainer's (chapter 11); the CPU reference "
                         "takes one batch a step");
    if (opt->recompute != RECOMPUTE_NONE)
        return fail(err, "--recompute %s: the GPU trainer's (chapter 14); the CPU reference "
                         "keeps every activation", recompute_name(opt->recompute));
    if (opt->no_master_weights)
        return fail(err, "--no-master-weights: the GPU trainer's bf16 build (chapter 14); the "
                         "CPU reference keeps its weights in fp32");
    if (opt->update_in_backward)
        return fail(err, "--update-in-backward: the GPU trainer's (chapter 14); the CPU "
                         "reference updates after its backward pass");
    if (opt->offload_optimizer)
        return fail(err, "--offload-optimizer: the GPU trainer's (chapter 14); the CPU "
                         "reference's moments are in host memory already");
    tr->opt = *opt;
    rng_seed(&tr->sampler, opt->seed ^ 0x5A5A5A5Aull);
    if (open_data(opt, &tr->train, &tr->val, &tr->has_val, err)) return -1;
    if (build_model(tr, err)) {
        cpu_trainer_free(tr);
        return -1;
    }
    size_t n = tr->model.num_params;
    tr->m = xcalloc(n, sizeof(float));
    tr->v = xcalloc(n, sizeof(float));
    if (opt->resume_from[0]) {
        TrainProgress p;
        AdamState s;
        Fp8State fp8;
        if (load_state_for_run(opt->resume_from, opt, &tr->model.config, &p, &s, &fp8, err)) {
            cpu_trainer_free(tr);
            return -1;
        }
        adam_state_to_full(&s, tr->m, tr->v);  // 8-bit moments (chapter 10) dequantized
        adam_state_free(&s);
        // Chapter 13's FP8 scales say how the GPU cast its operands; the
        // reference casts nothing (train_state.h, version 4).
        if (fp8.tensors > 0)
            printf("resume: the FP8 scales saved with %s are left out: the CPU reference "
                   "multiplies in fp32\n", opt->resume_from);
        fp8_state_free(&fp8);
        if (dataloader_seek(&tr->train, p.data, err)) {
            cpu_trainer_free(tr);
            return -1;
        }
        tr->step = p.step;
        tr->sampler.state = p.sampler_rng;
    }
    tr->inputs = xmalloc((size_t)opt->B * opt->T * sizeof(int32_t));
    tr->targets = xmalloc((size_t)opt->B * opt->T * sizeof(int32_t));
    return 0;
}

void cpu_trainer_free(CpuTrainer *tr) {
    gpt2_cpu_free(&tr->model);
    dataloader_free(&tr->train);
    if (tr->has_val) dataloader_free(&tr->val);
    free(tr->m);
    free(tr->v);
    free(tr->inputs);
    free(tr->targets);
    memset(tr, 0, sizeof(*tr));
}

// AdamW over each tensor in turn, so that weight decay can follow the tensor.
static void adamw_all_tensors(CpuTrainer *tr, float lr) {
    GPT2Cpu *model = &tr->model;
    size_t offset = 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        size_t n = model->param_sizes[i];
        adamw_update(model->params + offset, model->grads + offset, tr->m + offset,
                     tr->v + offset, n, lr, &tr->opt.adamw, gpt2_param_is_decayed(i),
                     tr->step + 1);
        offset += n;
    }
}

int cpu_trainer_step(CpuTrainer *tr, StepStats *stats, char *err) {
    double start = now_ms();
    GPT2Cpu *model = &tr->model;
    if (dataloader_next(&tr->train, tr->inputs, tr->targets, err)) return -1;
    simulated_storage_delay(tr->opt.data_delay_us);
    gpt2_cpu_forward(model, tr->inputs, tr->targets, tr->opt.B, tr->opt.T);
    gpt2_cpu_zero_grad(model);
    gpt2_cpu_backward(model);
    float norm = grad_global_norm(model->grads, model->num_params);
    float clip = grad_clip_factor(norm, tr->opt.grad_clip);
    if (clip < 1.0f) scale_values(model->grads, model->num_params, clip);
    float lr = lr_at_step(&tr->opt.lr, tr->step);
    adamw_all_tensors(tr, lr);
    tr->step++;
    stats->loss = model->mean_loss;
    stats->grad_norm = norm;
    stats->lr = lr;
    stats->ms = now_ms() - start;
    return 0;
}

int cpu_trainer_val_loss(CpuTrainer *tr, float *loss, char *err) {
    if (!tr->has_val) return fail(err, "no validation data");
    dataloader_reset(&tr->val);
    double sum = 0;
    for (int i = 0; i < tr->opt.val_batches; i++) {
        if (dataloader_next(&tr->val, tr->inputs, tr->targets, err)) return -1;
        gpt2_cpu_forward(&tr->model, tr->inputs, tr->targets, tr->opt.B, tr->opt.T);
        sum += tr->model.mean_loss;
    }
    *loss = (float)(sum / tr->opt.val_batches);
    return 0;
}

int cpu_trainer_save(CpuTrainer *tr, char *model_path, size_t cap, char *err) {
    TrainProgress p = {.step = tr->step, .data = dataloader_position(&tr->train),
                       .sampler_rng = tr->sampler.state, .B = tr->opt.B, .T = tr->opt.T};
    AdamState s = adam_state_view_full(&tr->model.config, tr->m, tr->v);
    return save_run(tr->opt.checkpoint_dir, &tr->model.config, tr->model.params, &s, NULL, &p,
                    model_path, cap, err);
}

int cpu_trainer_sample(CpuTrainer *tr, int32_t *out, int n, int eot) {
    const GPT2Config *c = &tr->model.config;
    out[0] = eot;
    // Each token costs a whole forward pass: a Ctrl-C does not wait for the rest.
    int t = 1;
    for (; t <= n && !stop_requested(); t++) {
        // No KV cache: rerun the whole context, cropped to the model's window.
        int len = t < c->max_seq_len ? t : c->max_seq_len;
        const int32_t *context = out + t - len;
        gpt2_cpu_forward(&tr->model, context, NULL, 1, len);
        const float *probs = tr->model.acts.probs + (size_t)(len - 1) * c->padded_vocab_size;
        out[t] = sample_from_probs(probs, c->vocab_size, rng_uniform(&tr->sampler));
    }
    return t - 1;
}
