// train_options.c: see train_options.h.
#include "train_options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

TrainOptions train_options_default(void) {
    TrainOptions o;
    memset(&o, 0, sizeof(o));
    snprintf(o.train_pattern, sizeof o.train_pattern, "data/tinyshakespeare/train*.bin");
    snprintf(o.val_pattern, sizeof o.val_pattern, "data/tinyshakespeare/val*.bin");
    snprintf(o.encoder_path, sizeof o.encoder_path, "data/raw/gpt2_encoder.json");
    snprintf(o.bpe_path, sizeof o.bpe_path, "data/raw/gpt2_vocab.bpe");
    o.model = (GPT2Config){.max_seq_len = 64, .vocab_size = 50257, .padded_vocab_size = 50257,
                           .num_layers = 4, .num_heads = 4, .channels = 128, .tied = 0};
    o.B = 8;
    o.T = 64;
    o.steps = 100;
    o.lr = (LrSchedule){.max_lr = 1e-3f, .min_lr_fraction = 0.1f, .warmup_steps = 10,
                        .total_steps = 100};
    o.adamw = adamw_default_config();
    o.grad_clip = 1.0f;
    o.seed = 1337;
    o.val_every = 25;
    o.val_batches = 4;
    o.sample_every = 0;
    o.sample_tokens = 48;
    o.checkpoint_every = 0;
    snprintf(o.checkpoint_dir, sizeof o.checkpoint_dir, "build/checkpoints");
    o.log_every = 1;
    return o;
}

void train_options_usage(const char *program) {
    TrainOptions d = train_options_default();
    printf(
        "usage: %s [flags]\n"
        "data:\n"
        "  --data DIR            shards DIR/train*.bin and DIR/val*.bin\n"
        "  --train GLOB          training shards (default %s)\n"
        "  --val GLOB            validation shards (default %s)\n"
        "  --encoder FILE        GPT-2 encoder.json, for printing samples (default %s)\n"
        "  --bpe FILE            GPT-2 vocab.bpe (default %s)\n"
        "model:\n"
        "  --model NAME          preset: tiny, small (default), 124m\n"
        "  --layers N --heads N --channels N --max-seq-len N\n"
        "  --padded-vocab N      rows of wte/lm_head (default: the vocabulary, %d)\n"
        "  --tied / --untied     share wte with lm_head (default untied)\n"
        "  --init-from FILE      start from a model checkpoint\n"
        "training:\n"
        "  -b, --batch N         sequences per step (default %d)\n"
        "  -t, --seq-len N       tokens per sequence (default: the model's max)\n"
        "  --steps N             steps to train (default %d)\n"
        "  --lr X                peak learning rate (default %g)\n"
        "  --warmup N            warm-up steps (default %d)\n"
        "  --min-lr-frac X       final lr as a fraction of the peak (default %g)\n"
        "  --weight-decay X      AdamW weight decay on matrices (default %g)\n"
        "  --grad-clip X         max gradient norm, 0 = off (default %g)\n"
        "  --seed N              (default %llu)\n"
        "evaluation and checkpoints:\n"
        "  --val-every N         validation loss every N steps, 0 = off (default %d)\n"
        "  --val-batches N       batches per validation (default %d)\n"
        "  --sample-every N      print a sample every N steps, 0 = only at the end\n"
        "  --sample-tokens N     tokens per sample, 0 = no sampling (default %d)\n"
        "  --checkpoint-every N  save every N steps and at the end, 0 = off (default)\n"
        "  --checkpoint-dir DIR  (default %s)\n"
        "  --resume FILE         a model_NNNNNN.bin written by this trainer; its\n"
        "                        state_NNNNNN.bin must sit beside it\n"
        "  --log-every N         print a step line every N steps (default %d)\n",
        program, d.train_pattern, d.val_pattern, d.encoder_path, d.bpe_path,
        d.model.vocab_size, d.B, d.steps, d.lr.max_lr, d.lr.warmup_steps,
        d.lr.min_lr_fraction, d.adamw.weight_decay, d.grad_clip, (unsigned long long)d.seed,
        d.val_every, d.val_batches, d.sample_tokens, d.checkpoint_dir, d.log_every);
}

// ---- parsing helpers: each names the flag when the value is bad ----------
static int parse_int(const char *flag, const char *s, int min, int *out, char *err) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < min || v > 1000000000)
        return fail(err, "%s: expected an integer >= %d, got '%s'", flag, min, s);
    *out = (int)v;
    return 0;
}

static int parse_float(const char *flag, const char *s, float min, float *out, char *err) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || *end || end == s || !(v >= min) || v > 1e30f)
        return fail(err, "%s: expected a number >= %g, got '%s'", flag, min, s);
    *out = v;
    return 0;
}

static int copy_string(const char *flag, const char *s, char *dst, size_t cap, char *err) {
    if (strlen(s) >= cap) return fail(err, "%s: value too long (max %zu bytes)", flag, cap - 1);
    memcpy(dst, s, strlen(s) + 1);
    return 0;
}

static int set_data_dir(TrainOptions *o, const char *dir, char *err) {
    size_t cap = sizeof o->train_pattern;
    if (strlen(dir) + sizeof "/train*.bin" > cap) return fail(err, "--data: path too long");
    snprintf(o->train_pattern, cap, "%s/train*.bin", dir);
    snprintf(o->val_pattern, cap, "%s/val*.bin", dir);
    return 0;
}

static int apply_preset(TrainOptions *o, const char *name, char *err) {
    GPT2Config *m = &o->model;
    if (!strcmp(name, "tiny")) {
        m->num_layers = 2, m->num_heads = 2, m->channels = 64, m->max_seq_len = 32;
    } else if (!strcmp(name, "small")) {
        m->num_layers = 4, m->num_heads = 4, m->channels = 128, m->max_seq_len = 64;
    } else if (!strcmp(name, "124m")) {
        int vocab = m->vocab_size, padded = m->padded_vocab_size, tied = m->tied;
        *m = gpt2_config_124m();
        m->vocab_size = vocab, m->padded_vocab_size = padded, m->tied = tied;
    } else {
        return fail(err, "--model: unknown preset '%s' (expected tiny, small or 124m)", name);
    }
    return 0;
}

int train_options_parse(TrainOptions *o, int argc, char **argv, char *err) {
    int seq_len_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            train_options_usage(argv[0]);
            return 1;
        }
        if (!strcmp(f, "--tied")) { o->model.tied = 1; continue; }
        if (!strcmp(f, "--untied")) { o->model.tied = 0; continue; }
        if (i + 1 >= argc) return fail(err, "%s: missing value (see --help)", f);
        const char *v = argv[++i];
        int rc;
        if (!strcmp(f, "--data")) rc = set_data_dir(o, v, err);
        else if (!strcmp(f, "--train")) rc = copy_string(f, v, o->train_pattern, sizeof o->train_pattern, err);
        else if (!strcmp(f, "--val")) rc = copy_string(f, v, o->val_pattern, sizeof o->val_pattern, err);
        else if (!strcmp(f, "--encoder")) rc = copy_string(f, v, o->encoder_path, sizeof o->encoder_path, err);
        else if (!strcmp(f, "--bpe")) rc = copy_string(f, v, o->bpe_path, sizeof o->bpe_path, err);
        else if (!strcmp(f, "--model")) rc = apply_preset(o, v, err);
        else if (!strcmp(f, "--layers")) rc = parse_int(f, v, 1, &o->model.num_layers, err);
        else if (!strcmp(f, "--heads")) rc = parse_int(f, v, 1, &o->model.num_heads, err);
        else if (!strcmp(f, "--channels")) rc = parse_int(f, v, 1, &o->model.channels, err);
        else if (!strcmp(f, "--max-seq-len")) rc = parse_int(f, v, 1, &o->model.max_seq_len, err);
        else if (!strcmp(f, "--padded-vocab")) rc = parse_int(f, v, 1, &o->model.padded_vocab_size, err);
        else if (!strcmp(f, "--init-from")) rc = copy_string(f, v, o->init_from, sizeof o->init_from, err);
        else if (!strcmp(f, "-b") || !strcmp(f, "--batch")) rc = parse_int(f, v, 1, &o->B, err);
        else if (!strcmp(f, "-t") || !strcmp(f, "--seq-len")) rc = parse_int(f, v, 1, &o->T, err), seq_len_given = 1;
        else if (!strcmp(f, "--steps")) rc = parse_int(f, v, 1, &o->steps, err);
        else if (!strcmp(f, "--lr")) rc = parse_float(f, v, 0, &o->lr.max_lr, err);
        else if (!strcmp(f, "--warmup")) rc = parse_int(f, v, 0, &o->lr.warmup_steps, err);
        else if (!strcmp(f, "--min-lr-frac")) rc = parse_float(f, v, 0, &o->lr.min_lr_fraction, err);
        else if (!strcmp(f, "--weight-decay")) rc = parse_float(f, v, 0, &o->adamw.weight_decay, err);
        else if (!strcmp(f, "--grad-clip")) rc = parse_float(f, v, 0, &o->grad_clip, err);
        else if (!strcmp(f, "--seed")) {
            int s;
            rc = parse_int(f, v, 0, &s, err);
            o->seed = (uint64_t)s;
        } else if (!strcmp(f, "--val-every")) rc = parse_int(f, v, 0, &o->val_every, err);
        else if (!strcmp(f, "--val-batches")) rc = parse_int(f, v, 1, &o->val_batches, err);
        else if (!strcmp(f, "--sample-every")) rc = parse_int(f, v, 0, &o->sample_every, err);
        else if (!strcmp(f, "--sample-tokens")) rc = parse_int(f, v, 0, &o->sample_tokens, err);
        else if (!strcmp(f, "--checkpoint-every")) rc = parse_int(f, v, 0, &o->checkpoint_every, err);
        else if (!strcmp(f, "--checkpoint-dir")) rc = copy_string(f, v, o->checkpoint_dir, sizeof o->checkpoint_dir, err);
        else if (!strcmp(f, "--resume")) rc = copy_string(f, v, o->resume_from, sizeof o->resume_from, err);
        else if (!strcmp(f, "--log-every")) rc = parse_int(f, v, 1, &o->log_every, err);
        else return fail(err, "unknown flag '%s' (see --help)", f);
        if (rc) return -1;
    }
    // Derived values and cross-checks.
    if (o->model.padded_vocab_size < o->model.vocab_size)
        o->model.padded_vocab_size = o->model.vocab_size;
    if (!seq_len_given) o->T = o->model.max_seq_len;
    if (o->T > o->model.max_seq_len)
        return fail(err, "--seq-len: %d exceeds the model's --max-seq-len %d", o->T,
                    o->model.max_seq_len);
    if (gpt2_config_validate(&o->model, err)) return -1;
    o->lr.total_steps = o->steps;
    if (o->lr.warmup_steps > o->steps) o->lr.warmup_steps = o->steps;
    return 0;
}
