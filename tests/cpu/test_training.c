// test_training.c: the CPU training loop end to end, on synthetic shards:
// the loss falls, runs are deterministic, and a resumed run continues
// bit-identically (from chapter 13's version 4 state too, its FP8 scales
// left out).
#define _POSIX_C_SOURCE 200809L  // for file_helpers.h
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files/checkpoint.h"
#include "train/train_cpu.h"
#include "files/train_state.h"
#include "training_fixture.h"

static void run_steps(CpuTrainer *tr, int n, float *losses) {
    char err[ERR_LEN];
    for (int i = 0; i < n; i++) {
        StepStats s;
        cr_assert(cpu_trainer_step(tr, &s, err) == 0, "%s", err);
        if (losses) losses[i] = s.loss;
    }
}

TestSuite(training, .init = make_learnable_shards, .fini = remove_tmpdir);

Test(training, loss_falls_on_a_learnable_corpus) {
    TrainOptions o = tiny_train_options(40);
    CpuTrainer tr;
    char err[ERR_LEN];
    cr_assert(cpu_trainer_init(&tr, &o, err) == 0, "%s", err);
    float before, after, losses[40];
    cr_assert(cpu_trainer_val_loss(&tr, &before, err) == 0, "%s", err);
    run_steps(&tr, 40, losses);
    cr_assert(cpu_trainer_val_loss(&tr, &after, err) == 0, "%s", err);
    // ln(64) = 4.16 at the start; the motif is deterministic, so a model
    // that has learned it predicts far better than chance.
    cr_assert(before > 3.9f, "initial val loss %f", before);
    cr_assert(after < 1.0f, "val loss after 40 steps %f (from %f)", after, before);
    cr_assert(losses[39] < losses[0] / 3, "train loss %f -> %f", losses[0], losses[39]);
    cpu_trainer_free(&tr);
}

Test(training, same_seed_same_run) {
    TrainOptions o = tiny_train_options(40);
    CpuTrainer a, b;
    char err[ERR_LEN];
    cr_assert(cpu_trainer_init(&a, &o, err) == 0, "%s", err);
    cr_assert(cpu_trainer_init(&b, &o, err) == 0, "%s", err);
    float la[6], lb[6];
    run_steps(&a, 6, la);
    run_steps(&b, 6, lb);
    cr_assert(memcmp(la, lb, sizeof la) == 0);
    cr_assert(memcmp(a.model.params, b.model.params, a.model.num_params * sizeof(float)) == 0);
    cpu_trainer_free(&a);
    cpu_trainer_free(&b);
}

Test(training, checkpoint_round_trip_keeps_parameters) {
    TrainOptions o = tiny_train_options(40);
    CpuTrainer tr;
    char err[ERR_LEN], path[512];
    cr_assert(cpu_trainer_init(&tr, &o, err) == 0, "%s", err);
    run_steps(&tr, 2, NULL);
    cr_assert(cpu_trainer_save(&tr, path, sizeof path, err) == 0, "%s", err);
    GPT2Config cfg;
    float *params;
    cr_assert(checkpoint_read(path, &cfg, &params, err) == 0, "%s", err);
    cr_assert(memcmp(&cfg, &tr.model.config, sizeof cfg) == 0);
    cr_assert(memcmp(params, tr.model.params, tr.model.num_params * sizeof(float)) == 0);
    free(params);
    cpu_trainer_free(&tr);
}

Test(training, resumed_run_continues_bit_identically) {
    // 4000 tokens hold 62 windows of B*T = 64: interrupting at step 60 and
    // running to 70 makes the resumed run cross into the second epoch, whose
    // shuffled order must come out the same too.
    enum { TOTAL = 70, FIRST = 60 };
    TrainOptions o = tiny_train_options(40);
    o.steps = TOTAL;
    CpuTrainer straight, first, second;
    char err[ERR_LEN], path[512];
    float ls[TOTAL], lr[TOTAL - FIRST];
    cr_assert(cpu_trainer_init(&straight, &o, err) == 0, "%s", err);
    run_steps(&straight, TOTAL, ls);

    // Interrupted: FIRST steps, save, then a fresh trainer resumes from the files.
    cr_assert(cpu_trainer_init(&first, &o, err) == 0, "%s", err);
    run_steps(&first, FIRST, NULL);
    cr_assert(cpu_trainer_save(&first, path, sizeof path, err) == 0, "%s", err);
    cpu_trainer_free(&first);
    TrainOptions resumed = o;
    snprintf(resumed.resume_from, sizeof resumed.resume_from, "%s", path);
    cr_assert(cpu_trainer_init(&second, &resumed, err) == 0, "%s", err);
    cr_assert(second.step == FIRST);
    run_steps(&second, TOTAL - FIRST, lr);

    cr_assert(memcmp(ls + FIRST, lr, sizeof lr) == 0, "losses differ after resuming");
    size_t bytes = straight.model.num_params * sizeof(float);
    cr_assert(memcmp(straight.model.params, second.model.params, bytes) == 0,
              "parameters differ after resuming");
    cr_assert(memcmp(straight.m, second.m, bytes) == 0);
    cr_assert(memcmp(straight.v, second.v, bytes) == 0);
    cpu_trainer_free(&straight);
    cpu_trainer_free(&second);
}

Test(training, resume_rejects_a_missing_state_file) {
    TrainOptions o = tiny_train_options(40);
    CpuTrainer tr;
    char err[ERR_LEN], path[512];
    cr_assert(cpu_trainer_init(&tr, &o, err) == 0, "%s", err);
    cr_assert(cpu_trainer_save(&tr, path, sizeof path, err) == 0, "%s", err);
    cpu_trainer_free(&tr);
    char state[1024];
    cr_assert(state_path_for_model(path, state, sizeof state, err) == 0);
    cr_assert(unlink(state) == 0);
    snprintf(o.resume_from, sizeof o.resume_from, "%s", path);
    cr_assert(cpu_trainer_init(&tr, &o, err) == -1);
    cr_assert(strstr(err, "state_000000.bin"), "error does not name the state file: %s", err);
}

// ---- a state must belong to the model it is resumed with ----------------------------
// Saves after `steps` steps of a run of options o into o.checkpoint_dir.
static void save_after(TrainOptions o, int steps, char *model_path) {
    CpuTrainer tr;
    char err[ERR_LEN];
    cr_assert(cpu_trainer_init(&tr, &o, err) == 0, "%s", err);
    run_steps(&tr, steps, NULL);
    cr_assert(cpu_trainer_save(&tr, model_path, 512, err) == 0, "%s", err);
    cpu_trainer_free(&tr);
}

static void copy_file(const char *from, const char *to) {
    size_t n;
    char err[ERR_LEN];
    char *bytes = read_file(from, &n, err);
    cr_assert_not_null(bytes, "%s", err);
    write_bytes(to, bytes, n);
    free(bytes);
}

// Resuming from model_path must fail, naming the state and saying why.
static void assert_resume_fails(TrainOptions o, const char *model_path, const char *why) {
    snprintf(o.resume_from, sizeof o.resume_from, "%s", model_path);
    CpuTrainer tr;
    char err[ERR_LEN];
    cr_assert_eq(cpu_trainer_init(&tr, &o, err), -1, "resumed with a state that is not its own");
    cr_assert(strstr(err, "state_"), "error does not name the state file: %s", err);
    cr_assert(strstr(err, why), "error \"%s\" does not say \"%s\"", err, why);
}

Test(training, resume_refuses_the_state_of_another_step) {
    TrainOptions o = tiny_train_options(40);
    char m2[512], m4[512], s2[1024], s4[1024], err[ERR_LEN];
    save_after(o, 2, m2);
    save_after(o, 4, m4);
    cr_assert(state_path_for_model(m2, s2, sizeof s2, err) == 0);
    cr_assert(state_path_for_model(m4, s4, sizeof s4, err) == 0);
    copy_file(s4, s2);
    assert_resume_fails(o, m2, "holds step 4");
}

Test(training, resume_refuses_the_state_of_another_run) {
    TrainOptions a = tiny_train_options(40), b = a;
    b.seed = a.seed + 1;
    snprintf(b.checkpoint_dir, sizeof b.checkpoint_dir, "%s", tmp_path("other_run"));
    char ma[512], mb[512], sa[1024], sb[1024], err[ERR_LEN];
    save_after(a, 3, ma);
    save_after(b, 3, mb);
    cr_assert(state_path_for_model(ma, sa, sizeof sa, err) == 0);
    cr_assert(state_path_for_model(mb, sb, sizeof sb, err) == 0);
    copy_file(sb, sa);  // same step, same shape, another run's moments
    assert_resume_fails(a, ma, "does not belong to");
}

// Resumes model_path with o's options and trains n steps, their losses into losses.
static void resume_and_run(TrainOptions o, const char *model_path, int n, float *losses) {
    snprintf(o.resume_from, sizeof o.resume_from, "%s", model_path);
    CpuTrainer tr;
    char err[ERR_LEN];
    cr_assert(cpu_trainer_init(&tr, &o, err) == 0, "%s", err);
    run_steps(&tr, n, losses);
    cpu_trainer_free(&tr);
}

// A GPU run of chapter 13 saves its FP8 scales beside the moments
// (train_state.h, version 4). The CPU trainer casts nothing: it resumes such
// a state as it resumes the same state without them, bit for bit.
Test(training, resume_of_a_version_4_state_leaves_the_fp8_scales_out) {
    TrainOptions o = tiny_train_options(40);
    char model[512], state[1024], err[ERR_LEN];
    save_after(o, 3, model);
    cr_assert(state_path_for_model(model, state, sizeof state, err) == 0);
    float plain[2], with_fp8[2];
    resume_and_run(o, model, 2, plain);
    // The same state again, with an FP8 state: version 4.
    GPT2Config cfg;
    cr_assert(checkpoint_read_config(model, &cfg, err) == 0, "%s", err);
    TrainProgress p;
    AdamState s;
    cr_assert(train_state_read_adam(state, &cfg, &p, &s, err) == 0, "%s", err);
    Fp8State fp8;
    fp8_state_alloc(&fp8, cfg.num_layers * TRAIN_STATE_FP8_PER_LAYER, 16);
    for (int i = 0; i < fp8.tensors; i++) fp8_state_tensor(&fp8, i)[0] = 0.5f;
    fp8.history_ready = 1;
    AtomicFile af;
    cr_assert(train_state_write_run_unrenamed(&af, state, &p, &s, &fp8, err) == 0, "%s", err);
    cr_assert(atomic_commit(&af, err) == 0, "%s", err);
    adam_state_free(&s), fp8_state_free(&fp8);
    size_t n;
    int32_t header[2];
    FILE *f = fopen(state, "rb");
    cr_assert(f && fread(header, sizeof header[0], 2, f) == 2);
    fclose(f);
    cr_assert_eq(header[1], TRAIN_STATE_VERSION_FP8);
    cr_assert(train_state_read_progress(state, &p, &n, err) == 0, "%s", err);
    resume_and_run(o, model, 2, with_fp8);
    cr_assert(memcmp(plain, with_fp8, sizeof plain) == 0, "losses %.9g %.9g, without the FP8 "
              "state %.9g %.9g", (double)with_fp8[0], (double)with_fp8[1], (double)plain[0],
              (double)plain[1]);
}

Test(training, a_save_writes_the_pair_and_nothing_else) {
    TrainOptions o = tiny_train_options(40);
    snprintf(o.checkpoint_dir, sizeof o.checkpoint_dir, "%s", tmp_path("deep/er/ckpt"));
    char model[512];
    save_after(o, 1, model);
    DIR *d = opendir(o.checkpoint_dir);
    cr_assert_not_null(d, "the nested directory was not made");
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') {
            files++;
            cr_assert(!strcmp(e->d_name, "model_000001.bin") ||
                          !strcmp(e->d_name, "state_000001.bin"),
                      "unexpected file %s", e->d_name);
        }
    closedir(d);
    cr_assert_eq(files, 2);
}

Test(training, a_diverged_model_is_not_saved) {
    TrainOptions o = tiny_train_options(40);
    CpuTrainer tr;
    char err[ERR_LEN], path[512];
    cr_assert(cpu_trainer_init(&tr, &o, err) == 0, "%s", err);
    run_steps(&tr, 1, NULL);
    tr.model.params[tr.model.num_params - 1] = NAN;
    cr_assert_eq(cpu_trainer_save(&tr, path, sizeof path, err), -1);
    cr_assert(strstr(err, "non-finite") && strstr(err, "not written"), "%s", err);
    cr_assert_neq(access(tmp_path("ckpt/model_000001.bin"), F_OK), 0);
    cr_assert_neq(access(tmp_path("ckpt/state_000001.bin"), F_OK), 0);
    cr_assert_neq(access(tmp_path("ckpt/model_000001.bin.tmp"), F_OK), 0);
    cpu_trainer_free(&tr);
}
