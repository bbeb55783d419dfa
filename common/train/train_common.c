// train_common.c: see train_common.h.
#define _POSIX_C_SOURCE 200809L  // mkdir, stat, opendir, getpid
#include "train/train_common.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "files/checkpoint.h"
#include "train/stop_signal.h"
#include "data/tokenizer.h"
#include "util/util.h"

void line_buffered_stdout(void) { setvbuf(stdout, NULL, _IOLBF, 0); }

// ---- the checkpoint directory -------------------------------------------------------

// mkdir -p: each missing component of dir, from the root down.
static int make_dirs(const char *dir, char *err) {
    char path[1024];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        return fail(err, "%s: path too long", dir);
    for (char *p = path + 1;; p++) {
        int last = *p == '\0';
        if (*p != '/' && !last) continue;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            return fail(err, "%s: cannot create the directory %s: %s", dir, path,
                        strerror(errno));
        if (last) break;
        *p = '/';
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return fail(err, "%s: exists and is not a directory", dir);
    return 0;
}

// What a save cut short leaves in dir, or NULL: its temporaries, after a
// SIGKILL or a power cut (a Ctrl-C never leaves them: stop_signal.h), and a
// state without its model, when it died between the renames (save_run puts
// the model in place last). Neither is a checkpoint. Only our names qualify.
static const char *leftover_of_a_save(const char *dir, const char *name) {
    size_t n = strlen(name);
    if ((!strncmp(name, "model_", 6) || !strncmp(name, "state_", 6)) && n > 8 &&
        !strcmp(name + n - 8, ".bin.tmp"))
        return "left by a save that was cut short";
    if (strncmp(name, "state_", 6) != 0) return NULL;
    char model[1280];
    snprintf(model, sizeof model, "%s/model_%s", dir, name + 6);
    if (step_of_model_path(model) >= 0 && access(model, F_OK) != 0)
        return "a state without its model, left by a save cut short between its renames";
    return NULL;
}

static void remove_leftovers(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[1280];
    while ((e = readdir(d)) != NULL) {
        const char *why = leftover_of_a_save(dir, e->d_name);
        if (!why) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) == 0) printf("checkpoints: removed %s, %s\n", path, why);
    }
    closedir(d);
}

int prepare_checkpoint_dir(const char *dir, char *err) {
    char why[ERR_LEN];
    if (make_dirs(dir, why)) return fail(err, "--checkpoint-dir %s", why);
    char probe[1100];
    snprintf(probe, sizeof probe, "%s/.write_test_%ld", dir, (long)getpid());
    FILE *fp = fopen(probe, "wb");
    if (!fp)
        return fail(err, "--checkpoint-dir %s: cannot write in it: %s", dir, strerror(errno));
    fclose(fp);
    remove(probe);
    remove_leftovers(dir);
    return 0;
}

// ---- prepare_run's steps --------------------------------------------------------------

// --resume DIR: the latest complete pair in DIR.
static int resolve_resume_dir(TrainOptions *opt, char *err) {
    struct stat st;
    if (stat(opt->resume_from, &st) != 0 || !S_ISDIR(st.st_mode)) return 0;  // a file: as is
    char dir[512], model[1024];
    snprintf(dir, sizeof dir, "%s", opt->resume_from);
    if (latest_checkpoint(dir, model, sizeof model) < 0)
        return fail(err, "--resume %s: no complete checkpoint in it (a model_NNNNNN.bin with "
                         "its state_NNNNNN.bin)", dir);
    size_t len = strlen(model);
    if (len >= sizeof opt->resume_from) return fail(err, "%s: path too long", model);
    memcpy(opt->resume_from, model, len + 1);
    printf("resume: the latest complete checkpoint in %s is %s\n", dir, model);
    return 0;
}

// The shape flags and the fields they set, for comparing with a checkpoint.
static const struct {
    unsigned given;
    const char *flag, *unit;
    size_t offset;
} SHAPE_FLAGS[] = {
    {GIVEN_LAYERS, "--layers (or --model)", "layers", offsetof(GPT2Config, num_layers)},
    {GIVEN_HEADS, "--heads (or --model)", "heads", offsetof(GPT2Config, num_heads)},
    {GIVEN_CHANNELS, "--channels (or --model)", "channels", offsetof(GPT2Config, channels)},
    {GIVEN_MAX_SEQ_LEN, "--max-seq-len (or --model)", "positions",
     offsetof(GPT2Config, max_seq_len)},
    {GIVEN_PADDED_VOCAB, "--padded-vocab", "vocabulary rows",
     offsetof(GPT2Config, padded_vocab_size)},
};

static int shape_field(const GPT2Config *c, size_t offset) {
    return *(const int *)((const char *)c + offset);
}

// --init-from / --resume: the model's shape is the checkpoint's.
static int adopt_checkpoint_shape(TrainOptions *opt, char *err) {
    const char *flag = opt->resume_from[0] ? "--resume" : "--init-from";
    const char *path = opt->resume_from[0] ? opt->resume_from : opt->init_from;
    GPT2Config c;
    if (checkpoint_read_config(path, &c, err)) return -1;
    const char *leave_out = "leave the shape flags out, or make them agree";
    for (size_t i = 0; i < sizeof SHAPE_FLAGS / sizeof SHAPE_FLAGS[0]; i++) {
        int want = shape_field(&opt->model, SHAPE_FLAGS[i].offset);
        int has = shape_field(&c, SHAPE_FLAGS[i].offset);
        if ((opt->given & SHAPE_FLAGS[i].given) && want != has)
            return fail(err, "%s asks for %d %s, but %s %s has %d: %s", SHAPE_FLAGS[i].flag,
                        want, SHAPE_FLAGS[i].unit, flag, path, has, leave_out);
    }
    if ((opt->given & GIVEN_TIED) && opt->model.tied != c.tied)
        return fail(err, "%s, but %s %s is %s: %s", opt->model.tied ? "--tied" : "--untied", flag,
                    path, c.tied ? "tied" : "untied", leave_out);
    if (c.vocab_size != opt->model.vocab_size)
        return fail(err, "%s %s: the model's vocabulary (%d) differs from the data's (%d)", flag,
                    path, c.vocab_size, opt->model.vocab_size);
    opt->model = c;
    if (!(opt->given & GIVEN_SEQ_LEN)) opt->T = c.max_seq_len;
    if (opt->T > c.max_seq_len)
        return fail(err, "--seq-len %d exceeds the max_seq_len %d of %s %s", opt->T,
                    c.max_seq_len, flag, path);
    return 0;
}

// The directory of a file's path: "a/b/model.bin" -> "a/b"; "model.bin" -> ".".
static void dir_of(const char *path, char *dir, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, cap, ".");
    else snprintf(dir, cap, "%.*s", slash == path ? 1 : (int)(slash - path), path);
}

// Why a model has no state beside it, and where a complete pair is.
static int missing_state(const char *model_path, const char *state_path, char *err) {
    char dir[1024], latest[1024];
    dir_of(model_path, dir, sizeof dir);
    int step = latest_checkpoint(dir, latest, sizeof latest);
    return fail(err, "%s: no training state beside it (%s is missing): %s%s; or --init-from "
                     "it to start afresh from its weights",
                model_path, state_path,
                step >= 0 ? "the latest complete checkpoint there is " : "there is no complete "
                                                                         "checkpoint there",
                step >= 0 ? latest : "");
}

// The state beside the model file: there, its pair, and agreeing with the flags.
static int adopt_resumed_progress(TrainOptions *opt, char *err) {
    char state[1024];
    if (state_path_for_model(opt->resume_from, state, sizeof state, err)) return -1;
    if (access(state, F_OK) != 0) return missing_state(opt->resume_from, state, err);
    TrainProgress p;
    size_t n;
    if (train_state_read_progress(state, &p, &n, err)) return -1;
    if (n != gpt2_num_params(&opt->model))
        return fail(err, "%s: written for %zu parameters, but %s has %zu", state, n,
                    opt->resume_from, gpt2_num_params(&opt->model));
    int named = step_of_model_path(opt->resume_from);
    if (named >= 0 && named != p.step)
        return fail(err, "%s holds step %d, but its model's name says step %d: not a pair",
                    state, p.step, named);
    if ((opt->given & GIVEN_BATCH) && opt->B != p.B)
        return fail(err, "--batch %d, but the run in %s has B = %d: leave -b out to continue it",
                    opt->B, state, p.B);
    if ((opt->given & GIVEN_SEQ_LEN) && opt->T != p.T)
        return fail(err, "--seq-len %d, but the run in %s has T = %d: leave -t out to continue "
                         "it", opt->T, state, p.T);
    opt->B = p.B;
    opt->T = p.T;
    if (opt->steps <= p.step)
        return fail(err, "%s %d: %s is already at step %d, so there is nothing to train: ask "
                         "for more (--steps %d trains %d more)",
                    (opt->given & GIVEN_STEPS) ? "--steps" : "the default --steps", opt->steps,
                    opt->resume_from, p.step, p.step + 100, 100);
    return 0;
}

// The shards are there, and --val-batches does not ask for more than there is.
static int check_data(TrainOptions *opt, char *err) {
    DataLoader train, val;
    int has_val;
    if (open_data(opt, &train, &val, &has_val, err)) return -1;
    dataloader_free(&train);
    if (!has_val) return 0;
    size_t windows = dataloader_num_windows(&val);
    dataloader_free(&val);
    if ((size_t)opt->val_batches > windows) {
        printf("validation: --val-batches %d, but %s holds %zu batches of B x T = %d x %d: "
               "validating on those %zu\n", opt->val_batches, opt->val_pattern, windows, opt->B,
               opt->T, windows);
        opt->val_batches = (int)windows;
    }
    return 0;
}

// A resumed run saves where it was resumed from, unless told otherwise: the
// default directory is for new runs (and shared between them).
static void save_beside_the_resumed(TrainOptions *opt) {
    if (opt->given & GIVEN_CHECKPOINT_DIR) return;
    dir_of(opt->resume_from, opt->checkpoint_dir, sizeof opt->checkpoint_dir);
    printf("checkpoints: saved in %s, beside the resumed checkpoint (--checkpoint-dir DIR saves "
           "them elsewhere)\n", opt->checkpoint_dir);
}

// The model files in dir: how many, and the highest step (-1: none, or no dir).
static int latest_model_in(const char *dir, int *count) {
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) return -1;
    int latest = -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int step = step_of_model_path(e->d_name);
        if (step < 0) continue;
        (*count)++;
        if (step > latest) latest = step;
    }
    closedir(d);
    return latest;
}

// A new run saving into another run's directory would write over its
// checkpoints, and --resume DIR would then mix the two runs' files.
static int refuse_another_runs_dir(const TrainOptions *opt, char *err) {
    const char *dir = opt->checkpoint_dir;
    int count, latest = latest_model_in(dir, &count);
    if (latest < 0) return 0;
    return fail(err, "--checkpoint-dir %s%s holds the checkpoints of another run (%d model "
                     "file%s, the latest of step %d): this run would save over them; give it "
                     "a directory of its own (--checkpoint-dir ANOTHER), continue that run "
                     "(--resume %s), or remove its files", dir,
                (opt->given & GIVEN_CHECKPOINT_DIR) ? "" : " (the default)", count,
                count == 1 ? "" : "s", latest, dir);
}

// Where this run's checkpoints go, when it saves any: made ready, and
// another run's refused.
static int choose_checkpoint_dir(TrainOptions *opt, char *err) {
    if (opt->resume_from[0]) save_beside_the_resumed(opt);
    else if (refuse_another_runs_dir(opt, err)) return -1;
    return prepare_checkpoint_dir(opt->checkpoint_dir, err);
}

int prepare_run(TrainOptions *opt, char *err) {
    if (opt->resume_from[0] && resolve_resume_dir(opt, err)) return -1;
    if ((opt->resume_from[0] || opt->init_from[0]) && adopt_checkpoint_shape(opt, err)) return -1;
    if (opt->resume_from[0] && adopt_resumed_progress(opt, err)) return -1;
    if (check_data(opt, err)) return -1;
    if (opt->checkpoint_every > 0 && choose_checkpoint_dir(opt, err)) return -1;
    return 0;
}

void simulated_storage_delay(int us) {
    if (us <= 0) return;
    struct timespec left = {us / 1000000, (long)(us % 1000000) * 1000L};
    while (nanosleep(&left, &left) == -1 && errno == EINTR) {
    }
}

// ---- data, model, state -----------------------------------------------------------------

int open_data(const TrainOptions *opt, DataLoader *train, DataLoader *val, int *has_val,
              char *err) {
    int V = opt->model.vocab_size;
    *has_val = 0;
    if (dataloader_init(train, opt->train_pattern, opt->B, opt->T, V, 1, opt->seed, err)) return -1;
    if (opt->val_every <= 0) return 0;
    char val_err[ERR_LEN];
    if (dataloader_init(val, opt->val_pattern, opt->B, opt->T, V, 0, 0, val_err)) {
        dataloader_free(train);
        return fail(err, "validation data: %s", val_err);
    }
    *has_val = 1;
    return 0;
}

int load_model_for_run(const char *path, int T, GPT2Config *cfg, float **params, char *err) {
    if (checkpoint_read(path, cfg, params, err)) return -1;
    if (T > cfg->max_seq_len) {
        free(*params);
        *params = NULL;
        return fail(err, "%s: the model's max_seq_len is %d but --seq-len is %d", path,
                    cfg->max_seq_len, T);
    }
    return 0;
}

// The state is read; now whose it is.
static int check_state_pair(const char *model_path, const char *state_path,
                            const TrainOptions *opt, const TrainProgress *p, char *err) {
    if (p->B != opt->B || p->T != opt->T)
        return fail(err, "%s: saved with B=%d T=%d, but this run has B=%d T=%d", state_path, p->B,
                    p->T, opt->B, opt->T);
    int named = step_of_model_path(model_path);
    if (named >= 0 && named != p->step)
        return fail(err, "%s holds step %d, but its model's name says step %d: not a pair",
                    state_path, p->step, named);
    uint64_t checksum;
    if (checkpoint_file_checksum(model_path, &checksum, err)) return -1;
    if (checksum != p->model_checksum)
        return fail(err, "%s does not belong to %s: it was saved beside a model whose checksum "
                         "is %016llx, and this model's is %016llx (a model of another step or "
                         "another run)", state_path, model_path,
                    (unsigned long long)p->model_checksum, (unsigned long long)checksum);
    return 0;
}

int load_state_for_run(const char *model_path, const TrainOptions *opt, const GPT2Config *cfg,
                       TrainProgress *p, AdamState *s, Fp8State *fp8, char *err) {
    char state_path[1024];
    if (state_path_for_model(model_path, state_path, sizeof state_path, err)) return -1;
    if (access(state_path, F_OK) != 0) return missing_state(model_path, state_path, err);
    if (train_state_read_run(state_path, cfg, p, s, fp8, err)) return -1;
    if (check_state_pair(model_path, state_path, opt, p, err)) {
        adam_state_free(s);
        if (fp8) fp8_state_free(fp8);
        return -1;
    }
    return 0;
}

// Both files are whole on the disk, under their temporary names; now they
// appear. The model's rename is the commit point: the state goes first, so a
// model that is there has its state complete beside it, whenever the process
// dies. A model of the same step saved before goes before both (a resumed run
// saving over it): an old model must not meet the new state. Then the
// directory is synced, or a power cut could undo the renames.
static int publish_pair(const char *dir, AtomicFile *state, AtomicFile *model, char *err) {
    unlink(model->final_path);
    if (atomic_commit(state, err)) {
        atomic_abort(model);
        return -1;
    }
    if (atomic_commit(model, err)) {
        unlink(state->final_path);  // a state without its model is no checkpoint
        return -1;
    }
    return sync_directory(dir, err);
}

int save_run(const char *dir, const GPT2Config *cfg, const float *params, const AdamState *s,
             const Fp8State *fp8, const TrainProgress *p, char *model_path, size_t cap,
             char *err) {
    const size_t num_params = s->layout.num_params;
    if (make_dirs(dir, err)) return -1;
    char mpath[1024], spath[1024];
    checkpoint_paths(dir, p->step, mpath, spath, sizeof mpath);
    TrainProgress named = *p;
    named.model_checksum = checkpoint_params_checksum(params, num_params);
    AtomicFile model, state;
    if (checkpoint_write_unrenamed(&model, mpath, cfg, params, err)) return -1;
    if (train_state_write_run_unrenamed(&state, spath, &named, s, fp8, err)) {
        atomic_abort(&model);
        return -1;
    }
    if (publish_pair(dir, &state, &model, err)) return -1;
    if (model_path) snprintf(model_path, cap, "%s", mpath);
    return 0;
}

// ---- as the run goes ------------------------------------------------------------------------

int check_step_finite(int step, float loss, float grad_norm, char *err) {
    if (isfinite(loss) && isfinite(grad_norm)) return 0;
    int bad_loss = !isfinite(loss);
    float x = bad_loss ? loss : grad_norm;
    return fail(err, "step %d: the %s is %s: the run has diverged; stopped, and nothing more is "
                     "saved (a lower --lr, or --grad-clip, may help)",
                step, bad_loss ? "loss" : "gradient norm", isnan(x) ? "NaN" : "infinite");
}

int check_val_loss_finite(int step, float val_loss, char *err) {
    if (isfinite(val_loss)) return 0;
    return fail(err, "step %d: the validation loss is %s: the run has diverged; stopped, and "
                     "nothing more is saved (a lower --lr, or --grad-clip, may help)",
                step, isnan(val_loss) ? "NaN" : "infinite");
}

void describe_param_count(const GPT2Config *cfg, char *buf, size_t cap) {
    double n = gpt2_num_params(cfg) / 1e6;
    if (cfg->tied) {
        snprintf(buf, cap, "%.2fM parameters (tied: lm_head is wte)", n);
        return;
    }
    GPT2Config tied = *cfg;
    tied.tied = 1;
    double head = n - gpt2_num_params(&tied) / 1e6;
    snprintf(buf, cap, "%.2fM parameters (untied: lm_head is %.2fM of them; tied, as in GPT-2, "
                       "%.2fM)", n, head, n - head);
}

void report_stopped_run(int step, int steps, const char *saved_model) {
    const char *sig = stop_signal_name(stop_requested());
    if (saved_model)
        fprintf(stderr, "stopped by %s after step %d of %d: saved %s (--resume %s continues)\n",
                sig, step, steps, saved_model, saved_model);
    else
        fprintf(stderr, "stopped by %s after step %d of %d: nothing saved (checkpoints are off; "
                        "--checkpoint-every N turns them on)\n", sig, step, steps);
}

void report_sample(const Tokenizer *tok, const int32_t *ids, int drawn, int n, int step) {
    tokenizer_print_sample(tok, ids, drawn, step);
    if (drawn < n)
        fprintf(stderr, "sample: stopped by %s after %d of %d tokens\n",
                stop_signal_name(stop_requested()), drawn, n);
}

int load_sample_tokenizer(const TrainOptions *opt, Tokenizer **tok, char *err) {
    *tok = NULL;
    if (opt->sample_tokens == 0) return 0;
    char why[ERR_LEN];
    if ((*tok = tokenizer_load(opt->encoder_path, opt->bpe_path, why))) return 0;
    return fail(err, "%s (needed to print samples; --sample-tokens 0 skips them)", why);
}
