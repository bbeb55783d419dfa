// train_cpu.c: see train_cpu.h.
#define _POSIX_C_SOURCE 200809L
#include "train_cpu.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "optimizer.h"
#include "sampling.h"
#include "train_state.h"

// The model's weights come from one of three places.
static int load_model(CpuTrainer *tr, const char *path, char *err) {
    GPT2Config cfg;
    float *params;
    if (checkpoint_read(path, &cfg, &params, err)) return -1;
    if (tr->opt.T > cfg.max_seq_len) {
        free(params);
        return fail(err, "%s: the model's max_seq_len is %d but --seq-len is %d", path,
                    cfg.max_seq_len, tr->opt.T);
    }
    tr->opt.model = cfg;
    gpt2_cpu_init(&tr->model, &cfg);
    memcpy(tr->model.params, params, tr->model.num_params * sizeof(float));
    free(params);
    return 0;
}

static int resume(CpuTrainer *tr, char *err) {
    const char *model_path = tr->opt.resume_from;
    char state_path[1024];
    TrainProgress p;
    if (state_path_for_model(model_path, state_path, sizeof state_path, err)) return -1;
    if (load_model(tr, model_path, err)) return -1;
    tr->m = xcalloc(tr->model.num_params, sizeof(float));
    tr->v = xcalloc(tr->model.num_params, sizeof(float));
    if (train_state_read(state_path, &p, tr->m, tr->v, tr->model.num_params, err)) return -1;
    if (p.B != tr->opt.B || p.T != tr->opt.T)
        return fail(err, "%s: saved with B=%d T=%d, but this run has B=%d T=%d", state_path, p.B,
                    p.T, tr->opt.B, tr->opt.T);
    tr->step = p.step;
    tr->sampler.state = p.sampler_rng;
    return dataloader_seek(&tr->train, p.data, err);
}

int cpu_trainer_init(CpuTrainer *tr, const TrainOptions *opt, char *err) {
    memset(tr, 0, sizeof(*tr));
    tr->opt = *opt;
    const int B = opt->B, T = opt->T;
    rng_seed(&tr->sampler, opt->seed ^ 0x5A5A5A5Aull);
    // The loaders first: the model's vocabulary bounds the tokens they accept.
    int V = opt->model.vocab_size;
    if (dataloader_init(&tr->train, opt->train_pattern, B, T, V, 1, opt->seed, err)) return -1;
    char val_err[ERR_LEN];
    tr->has_val = opt->val_every > 0 &&
                  dataloader_init(&tr->val, opt->val_pattern, B, T, V, 0, 0, val_err) == 0;
    if (opt->val_every > 0 && !tr->has_val) {
        dataloader_free(&tr->train);
        return fail(err, "validation data: %s", val_err);
    }
    int rc;
    if (opt->resume_from[0]) {
        rc = resume(tr, err);
    } else if (opt->init_from[0]) {
        rc = load_model(tr, opt->init_from, err);
    } else {
        gpt2_cpu_init(&tr->model, &opt->model);
        gpt2_cpu_init_random(&tr->model, opt->seed);
        rc = 0;
    }
    if (rc) {
        cpu_trainer_free(tr);
        return -1;
    }
    if (tr->model.config.vocab_size != V) {
        int got = tr->model.config.vocab_size;
        cpu_trainer_free(tr);
        return fail(err, "the checkpoint's vocabulary (%d) differs from the data's (%d)", got, V);
    }
    if (!tr->m) tr->m = xcalloc(tr->model.num_params, sizeof(float));
    if (!tr->v) tr->v = xcalloc(tr->model.num_params, sizeof(float));
    tr->inputs = xmalloc((size_t)B * T * sizeof(int32_t));
    tr->targets = xmalloc((size_t)B * T * sizeof(int32_t));
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
    const char *dir = tr->opt.checkpoint_dir;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return fail(err, "%s: cannot create checkpoint directory: %s", dir, strerror(errno));
    char mpath[1024], spath[1024];
    checkpoint_paths(dir, tr->step, mpath, spath, sizeof mpath);
    TrainProgress p = {.step = tr->step, .data = dataloader_position(&tr->train),
                       .sampler_rng = tr->sampler.state, .B = tr->opt.B, .T = tr->opt.T};
    if (checkpoint_write(mpath, &tr->model.config, tr->model.params, err)) return -1;
    if (train_state_write(spath, &p, tr->m, tr->v, tr->model.num_params, err)) return -1;
    if (model_path) snprintf(model_path, cap, "%s", mpath);
    return 0;
}

void cpu_trainer_sample(CpuTrainer *tr, int32_t *out, int n, int eot) {
    const GPT2Config *c = &tr->model.config;
    out[0] = eot;
    for (int t = 1; t <= n; t++) {
        // No KV cache: rerun the whole context, cropped to the model's window.
        int len = t < c->max_seq_len ? t : c->max_seq_len;
        const int32_t *context = out + t - len;
        gpt2_cpu_forward(&tr->model, context, NULL, 1, len);
        const float *probs = tr->model.acts.probs + (size_t)(len - 1) * c->padded_vocab_size;
        out[t] = sample_from_probs(probs, c->vocab_size, rng_uniform(&tr->sampler));
    }
}
