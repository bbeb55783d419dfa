// train_options.c: see train_options.h.
#include "train/train_options.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

TrainOptions train_options_default(void) {
    TrainOptions o;
    memset(&o, 0, sizeof(o));
    snprintf(o.train_pattern, sizeof o.train_pattern, "data/tinyshakespeare/train*.bin");
    snprintf(o.val_pattern, sizeof o.val_pattern, "data/tinyshakespeare/val*.bin");
    snprintf(o.encoder_path, sizeof o.encoder_path, "data/raw/gpt2_encoder.json");
    snprintf(o.bpe_path, sizeof o.bpe_path, "data/raw/gpt2_vocab.bpe");
    o.model = (GPT2Config){.max_seq_len = 64, .vocab_size = 50257, .padded_vocab_size = 50257,
                           .num_layers = 4, .num_heads = 4, .channels = 128, .tied = 0};
    o.data_threads = 2;
    o.grad_accum = 1;
    o.recompute = RECOMPUTE_NONE;
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
    o.launch = (Launch){0, 1, 0, "none"};  // one process; the GPU trainer asks its launcher
    o.comm_timeout_s = 300;
    return o;
}

// ---- the model's presets --------------------------------------------------------
// ANCHOR: model_presets
// Two small shapes for tests and quick runs, and GPT-2's four sizes (llm.c's
// d12, d24, d36 and d48), all with heads of 64 and a context of 1024.
static const struct {
    const char *name;
    int layers, heads, channels, max_seq_len;
} PRESETS[] = {
    {"tiny", 2, 2, 64, 32},      {"small", 4, 4, 128, 64},       {"124m", 12, 12, 768, 1024},
    {"355m", 24, 16, 1024, 1024}, {"774m", 36, 20, 1280, 1024}, {"1558m", 48, 25, 1600, 1024},
};
// ANCHOR_END: model_presets
#define NUM_PRESETS (sizeof PRESETS / sizeof PRESETS[0])
#define PRESET_NAMES "tiny, small, 124m, 355m, 774m or 1558m"

// Sets the four shape fields of preset `name`; the vocabulary and tying stay.
static int apply_preset(GPT2Config *m, const char *name, char *err) {
    for (size_t i = 0; i < NUM_PRESETS; i++) {
        if (strcmp(name, PRESETS[i].name) != 0) continue;
        m->num_layers = PRESETS[i].layers, m->num_heads = PRESETS[i].heads;
        m->channels = PRESETS[i].channels, m->max_seq_len = PRESETS[i].max_seq_len;
        return 0;
    }
    return fail(err, "--model: unknown preset '%s' (expected " PRESET_NAMES ")", name);
}

// The preset whose shape m has, or NULL.
static const char *preset_of(const GPT2Config *m) {
    for (size_t i = 0; i < NUM_PRESETS; i++) {
        GPT2Config p = *m;
        apply_preset(&p, PRESETS[i].name, NULL);
        if (p.num_layers == m->num_layers && p.num_heads == m->num_heads &&
            p.channels == m->channels && p.max_seq_len == m->max_seq_len)
            return PRESETS[i].name;
    }
    return NULL;
}

void train_options_usage(const char *program, const TrainOptions *d) {
    const GPT2Config *m = &d->model;
    char shape[96];
    const char *preset = preset_of(m);
    if (preset) snprintf(shape, sizeof shape, "%s", preset);
    else snprintf(shape, sizeof shape, "L=%d H=%d C=%d T=%d", m->num_layers, m->num_heads,
                  m->channels, m->max_seq_len);
    printf(
        "usage: %s [flags]\n"
        "data:\n"
        "  --data DIR            shards DIR/train*.bin and DIR/val*.bin\n"
        "  --train GLOB          training shards (default %s)\n"
        "  --val GLOB            validation shards (default %s)\n"
        "  --encoder FILE        GPT-2 encoder.json, for printing samples (default %s)\n"
        "  --bpe FILE            GPT-2 vocab.bpe (default %s)\n"
        "  --data-delay-us N     wait N microseconds after reading each training batch,\n"
        "                        as slow storage would (default %d)\n"
        "  --data-threads N      worker threads that read batches, with --data-workers\n"
        "                        (chapter 08; default %d)\n"
        "model:\n"
        "  --model NAME          preset: tiny, small, or GPT-2's 124m, 355m, 774m, 1558m\n"
        "                        (default %s)\n"
        "  --layers N --heads N --channels N --max-seq-len N\n"
        "  --padded-vocab N      rows of wte/lm_head, at least the vocabulary's\n"
        "                        (default: the vocabulary, %d)\n"
        "  --tied / --untied     share wte with lm_head (default %s)\n"
        "  --init-from FILE      start from a model checkpoint: its shape and weights\n"
        "                        (shape flags given must agree with it)\n"
        "training:\n"
        "  -b, --batch N         sequences per step (default %d)\n"
        "  -t, --seq-len N       tokens per sequence (default: the model's max, %d)\n"
        "  --grad-accum N        sum the gradients of N batches of -b sequences into each\n"
        "                        step: a step of N*B sequences in the memory of B (GPU\n"
        "                        trainer, --fused-optimizer; default %d)\n"
        "  --recompute LEVEL     recompute activations in the backward pass instead of\n"
        "                        keeping them for every layer: " RECOMPUTE_CHOICES "\n"
        "                        (each includes the ones before; the same bits; GPU\n"
        "                        trainer, chapter 14; default %s)\n"
        "  --no-master-weights   keep no fp32 master copy of the weights: AdamW rounds\n"
        "                        each update into the bf16 weights stochastically, so\n"
        "                        that small updates are kept on average; 4 bytes a\n"
        "                        parameter saved (GPU trainer, bf16 build,\n"
        "                        --fused-optimizer; chapter 14)\n"
        "  --update-in-backward  apply each layer's gradients as soon as the backward\n"
        "                        pass completes them, and keep one layer's: needs\n"
        "                        --grad-clip 0 (GPU trainer, --fused-optimizer;\n"
        "                        chapter 14)\n"
        "  --offload-optimizer   keep AdamW's moments of the layers in pinned host\n"
        "                        memory, copied to the GPU and back for each layer's\n"
        "                        update (GPU trainer, --fused-optimizer; chapter 14)\n"
        "  --steps N             steps in all: a resumed run continues to N (default %d)\n"
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
        "                        (default %d)\n"
        "  --sample-tokens N     tokens per sample, 0 = no sampling (default %d)\n"
        "  --checkpoint-every N  save every N steps, at the end and when stopped by\n"
        "                        Ctrl-C; 0 = off (default %d)\n"
        "  --checkpoint-dir DIR  created if missing (default %s)\n"
        "  --resume FILE|DIR     continue a run from a model_NNNNNN.bin written by this\n"
        "                        trainer (its state_NNNNNN.bin beside it), or from the\n"
        "                        latest complete pair in DIR; the shape, B and T are\n"
        "                        the checkpoint's (flags given must agree)\n"
        "  --log-every N         print a step line every N steps (default %d)\n",
        program, d->train_pattern, d->val_pattern, d->encoder_path, d->bpe_path,
        d->data_delay_us, d->data_threads, shape, m->padded_vocab_size,
        m->tied ? "tied" : "untied", d->B, d->T, d->grad_accum,
        recompute_name(d->recompute), d->steps, d->lr.max_lr,
        d->lr.warmup_steps, d->lr.min_lr_fraction, d->adamw.weight_decay, d->grad_clip,
        (unsigned long long)d->seed, d->val_every, d->val_batches, d->sample_every,
        d->sample_tokens, d->checkpoint_every, d->checkpoint_dir, d->log_every);
}

// ---- values: each parser names the flag when the value is bad -------------
int parse_int(const char *flag, const char *s, long min, long max, int *out, char *err) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < min || v > max)
        return fail(err, "%s: expected an integer from %ld to %ld, got '%s'", flag, min, max, s);
    *out = (int)v;
    return 0;
}

int parse_double(const char *flag, const char *s, double min, double max, double *out,
                 char *err) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !(v >= min && v <= max))  // NaN fails too
        return fail(err, "%s: expected a number from %g to %g, got '%s'", flag, min, max, s);
    *out = v;
    return 0;
}

int parse_float(const char *flag, const char *s, double min, double max, float *out, char *err) {
    double v;
    if (parse_double(flag, s, min, max, &v, err)) return -1;
    *out = (float)v;
    return 0;
}

static int parse_seed(const char *flag, const char *s, uint64_t *out, char *err) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || end == s || s[0] == '-')
        return fail(err, "%s: expected a non-negative integer, got '%s'", flag, s);
    *out = (uint64_t)v;
    return 0;
}

static int parse_recompute(const char *flag, const char *s, Recompute *out, char *err) {
    if (recompute_from_name(s, out))
        return fail(err, "%s: expected " RECOMPUTE_CHOICES ", got '%s'", flag, s);
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


// ---- the flags ----------------------------------------------------------------
// One row per flag: its name, what kind of value it takes, where the value
// goes in TrainOptions, its range, and the GIVEN_ bit it records. The parser
// below reads this table and nothing else, so a flag is known, parsed and
// range-checked in one place.
typedef enum {
    FLAG_INT,     // an int field, within [min, max]
    FLAG_FLOAT,   // a float field, within [min, max]
    FLAG_TEXT,    // a char array field
    FLAG_SWITCH,  // no value: sets the int field to min
    FLAG_DATA,    // --data DIR: both shard patterns
    FLAG_MODEL,   // --model NAME: a preset of four shape fields
    FLAG_SEED,    // --seed N: the uint64 seed
    FLAG_RECOMPUTE,  // --recompute LEVEL: a level's name (recompute.h)
} FlagKind;

typedef struct {
    const char *name, *alias;
    FlagKind kind;
    size_t offset, size;  // the field, for FLAG_INT, FLAG_FLOAT, FLAG_TEXT, FLAG_SWITCH
    double min, max;
    unsigned given;
} FlagSpec;

#define FIELD(f) .offset = offsetof(TrainOptions, f), .size = sizeof(((TrainOptions *)0)->f)
#define MANY 1e9  // the largest count any flag accepts

static const FlagSpec FLAGS[] = {
    {"--data", NULL, FLAG_DATA, 0, 0, 0, 0, 0},
    {"--train", NULL, FLAG_TEXT, FIELD(train_pattern), 0, 0, 0},
    {"--val", NULL, FLAG_TEXT, FIELD(val_pattern), 0, 0, 0},
    {"--encoder", NULL, FLAG_TEXT, FIELD(encoder_path), 0, 0, 0},
    {"--bpe", NULL, FLAG_TEXT, FIELD(bpe_path), 0, 0, 0},
    {"--data-delay-us", NULL, FLAG_INT, FIELD(data_delay_us), 0, 10000000, 0},
    {"--data-threads", NULL, FLAG_INT, FIELD(data_threads), 1, 8, 0},
    {"--model", NULL, FLAG_MODEL, 0, 0, 0, 0,
     GIVEN_LAYERS | GIVEN_HEADS | GIVEN_CHANNELS | GIVEN_MAX_SEQ_LEN},
    {"--layers", NULL, FLAG_INT, FIELD(model.num_layers), 1, MANY, GIVEN_LAYERS},
    {"--heads", NULL, FLAG_INT, FIELD(model.num_heads), 1, MANY, GIVEN_HEADS},
    {"--channels", NULL, FLAG_INT, FIELD(model.channels), 1, MANY, GIVEN_CHANNELS},
    {"--max-seq-len", NULL, FLAG_INT, FIELD(model.max_seq_len), 1, MANY, GIVEN_MAX_SEQ_LEN},
    {"--padded-vocab", NULL, FLAG_INT, FIELD(model.padded_vocab_size), 1, MANY,
     GIVEN_PADDED_VOCAB},
    {"--tied", NULL, FLAG_SWITCH, FIELD(model.tied), 1, 1, GIVEN_TIED},
    {"--untied", NULL, FLAG_SWITCH, FIELD(model.tied), 0, 0, GIVEN_TIED},
    {"--init-from", NULL, FLAG_TEXT, FIELD(init_from), 0, 0, 0},
    {"--batch", "-b", FLAG_INT, FIELD(B), 1, MANY, GIVEN_BATCH},
    {"--seq-len", "-t", FLAG_INT, FIELD(T), 1, MANY, GIVEN_SEQ_LEN},
    {"--grad-accum", NULL, FLAG_INT, FIELD(grad_accum), 1, GRAD_ACCUM_MAX, 0},
    {"--recompute", NULL, FLAG_RECOMPUTE, FIELD(recompute), 0, 0, 0},
    {"--no-master-weights", NULL, FLAG_SWITCH, FIELD(no_master_weights), 1, 1, 0},
    {"--update-in-backward", NULL, FLAG_SWITCH, FIELD(update_in_backward), 1, 1, 0},
    {"--offload-optimizer", NULL, FLAG_SWITCH, FIELD(offload_optimizer), 1, 1, 0},
    {"--shard-optimizer", NULL, FLAG_SWITCH, FIELD(shard_optimizer), 1, 1, 0},
    {"--steps", NULL, FLAG_INT, FIELD(steps), 1, MANY, GIVEN_STEPS},
    {"--lr", NULL, FLAG_FLOAT, FIELD(lr.max_lr), 0, 1e30, 0},
    {"--warmup", NULL, FLAG_INT, FIELD(lr.warmup_steps), 0, MANY, 0},
    {"--min-lr-frac", NULL, FLAG_FLOAT, FIELD(lr.min_lr_fraction), 0, 1, 0},
    {"--weight-decay", NULL, FLAG_FLOAT, FIELD(adamw.weight_decay), 0, 1e30, 0},
    {"--grad-clip", NULL, FLAG_FLOAT, FIELD(grad_clip), 0, 1e30, 0},
    {"--seed", NULL, FLAG_SEED, 0, 0, 0, 0, 0},
    {"--val-every", NULL, FLAG_INT, FIELD(val_every), 0, MANY, 0},
    {"--val-batches", NULL, FLAG_INT, FIELD(val_batches), 1, MANY, 0},
    {"--sample-every", NULL, FLAG_INT, FIELD(sample_every), 0, MANY, 0},
    {"--sample-tokens", NULL, FLAG_INT, FIELD(sample_tokens), 0, MANY, 0},
    {"--checkpoint-every", NULL, FLAG_INT, FIELD(checkpoint_every), 0, MANY, 0},
    {"--checkpoint-dir", NULL, FLAG_TEXT, FIELD(checkpoint_dir), 0, 0, GIVEN_CHECKPOINT_DIR},
    {"--resume", NULL, FLAG_TEXT, FIELD(resume_from), 0, 0, 0},
    {"--log-every", NULL, FLAG_INT, FIELD(log_every), 1, MANY, 0},
    {"--nccl-id-file", NULL, FLAG_TEXT, FIELD(nccl_id_file), 0, 0, 0},
    {"--comm-timeout", NULL, FLAG_FLOAT, FIELD(comm_timeout_s), 1, 1e6, 0},
};

static const FlagSpec *find_flag(const char *arg) {
    for (size_t i = 0; i < sizeof FLAGS / sizeof FLAGS[0]; i++)
        if (!strcmp(arg, FLAGS[i].name) || (FLAGS[i].alias && !strcmp(arg, FLAGS[i].alias)))
            return &FLAGS[i];
    return NULL;
}

int train_options_takes_value(const char *arg) {
    const FlagSpec *f = find_flag(arg);
    return f != NULL && f->kind != FLAG_SWITCH;
}

// Sets the flag's field from value (NULL for a switch).
static int apply_flag(TrainOptions *o, const FlagSpec *f, const char *value, char *err) {
    char *field = (char *)o + f->offset;
    switch (f->kind) {
    case FLAG_INT: return parse_int(f->name, value, (long)f->min, (long)f->max, (int *)field, err);
    case FLAG_FLOAT: return parse_float(f->name, value, f->min, f->max, (float *)field, err);
    case FLAG_TEXT: return copy_string(f->name, value, field, f->size, err);
    case FLAG_SWITCH: *(int *)field = (int)f->min; return 0;
    case FLAG_DATA: return set_data_dir(o, value, err);
    case FLAG_MODEL: return apply_preset(&o->model, value, err);
    case FLAG_SEED: return parse_seed(f->name, value, &o->seed, err);
    case FLAG_RECOMPUTE: return parse_recompute(f->name, value, (Recompute *)field, err);
    }
    return fail(err, "%s: unhandled kind of flag", f->name);  // not reached
}

// What no single flag can check: flags against each other, derived values.
static int check_together(TrainOptions *o, char *err) {
    if (o->init_from[0] && o->resume_from[0])
        return fail(err, "--init-from and --resume: give one or the other (--resume continues "
                         "a run; --init-from starts a new one from a model's weights)");
    // Every token needs its row in wte and lm_head: fewer rows is no model.
    if (o->model.padded_vocab_size < o->model.vocab_size)
        return fail(err, "--padded-vocab %d is smaller than the vocabulary, %d tokens: it "
                         "counts wte's and lm_head's rows, one per token, then the padding",
                    o->model.padded_vocab_size, o->model.vocab_size);
    if (!(o->given & GIVEN_SEQ_LEN)) o->T = o->model.max_seq_len;
    // With --init-from or --resume the model's shape is the checkpoint's:
    // prepare_run checks the shape flags and T against it.
    if (!o->init_from[0] && !o->resume_from[0]) {
        if (o->T > o->model.max_seq_len)
            return fail(err, "--seq-len: %d exceeds the model's --max-seq-len %d", o->T,
                        o->model.max_seq_len);
        char why[ERR_LEN];
        if (gpt2_config_validate(&o->model, why))
            return fail(err, "the model's shape (--layers, --heads, --channels, ...): %s", why);
    }
    o->lr.total_steps = o->steps;
    if (o->lr.warmup_steps > o->steps) o->lr.warmup_steps = o->steps;
    return 0;
}

static int is_help(const char *arg) { return !strcmp(arg, "-h") || !strcmp(arg, "--help"); }

int train_options_parse(TrainOptions *o, int argc, char **argv, char *err) {
    // --help is answered once the whole line is read: it hides no mistake.
    int help = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (is_help(arg)) {
            help = 1;
            continue;
        }
        const FlagSpec *f = find_flag(arg);
        if (!f && arg[0] == '-') return fail(err, "unknown flag '%s' (see --help)", arg);
        if (!f)
            return fail(err, "unexpected argument '%s': every value follows its flag "
                             "(see --help)", arg);
        const char *value = NULL;
        if (f->kind != FLAG_SWITCH) {
            if (i + 1 >= argc) return fail(err, "%s: missing value (see --help)", arg);
            value = argv[++i];
            if (find_flag(value) || is_help(value))
                return fail(err, "%s: missing value (the next word is the flag %s)", arg,
                            value);
        }
        if (apply_flag(o, f, value, err)) return -1;
        o->given |= f->given;
    }
    if (check_together(o, err)) return -1;
    return help;
}
