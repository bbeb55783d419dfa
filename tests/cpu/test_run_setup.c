// test_run_setup.c: what happens before a run trains and as it goes: the
// command line (every mistake named, none silently ignored), prepare_run
// (flags against the files they name, the checkpoint directory made and
// tested at start-up), the checks of a diverged step and of a validation
// loss that is not finite, the parameter count's line, and the stop signals
// (a first Ctrl-C waits for the step, a second one leaves no temporary
// behind).
#define _POSIX_C_SOURCE 200809L  // for file_helpers.h; fork, kill
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "train/stop_signal.h"
#include "train/train_common.h"
#include "train/train_cpu.h"
#include "training_fixture.h"

static void setup(void) {
    make_learnable_shards();
    cr_redirect_stdout();  // usage text and prepare_run's notices
}

TestSuite(run_setup, .init = setup, .fini = remove_tmpdir);

// ---- the command line ---------------------------------------------------------------
// Parses the words (the program's name first) over the defaults.
static int parse(TrainOptions *o, char *err, int argc, ...) {
    char *argv[16] = {"train"};
    va_list ap;
    va_start(ap, argc);
    for (int i = 1; i < argc; i++) argv[i] = va_arg(ap, char *);
    va_end(ap);
    *o = train_options_default();
    return train_options_parse(o, argc, argv, err);
}

static void assert_parse_fails(const char *says, int argc, ...) {
    char *argv[16] = {"train"};
    va_list ap;
    va_start(ap, argc);
    for (int i = 1; i < argc; i++) argv[i] = va_arg(ap, char *);
    va_end(ap);
    TrainOptions o = train_options_default();
    char err[ERR_LEN] = "";
    cr_assert_eq(train_options_parse(&o, argc, argv, err), -1, "should fail saying \"%s\"", says);
    cr_assert(strstr(err, says), "error \"%s\" does not say \"%s\"", err, says);
}

Test(run_setup, every_mistake_on_the_command_line_is_named) {
    assert_parse_fails("unknown flag '--bogus'", 2, "--bogus");
    assert_parse_fails("unknown flag '--bogus'", 4, "--steps", "5", "--bogus");
    assert_parse_fails("unknown flag '--bogus'", 3, "--help", "--bogus");  // --help hides nothing
    assert_parse_fails("--steps: missing value (the next word is the flag --help)", 3, "--steps",
                       "--help");
    assert_parse_fails("unexpected argument 'data'", 2, "data");
    assert_parse_fails("unexpected argument '7'", 4, "--steps", "5", "7");
    assert_parse_fails("--steps: missing value", 2, "--steps");
    assert_parse_fails("--data: missing value (the next word is the flag --steps)", 4, "--data",
                       "--steps", "5");
    assert_parse_fails("--steps: expected an integer from 1", 3, "--steps", "ten");
    assert_parse_fails("--steps: expected an integer from 1", 3, "--steps", "0");
    assert_parse_fails("--lr: expected a number from 0", 3, "--lr", "fast");
    assert_parse_fails("--lr: expected a number from 0", 3, "--lr", "nan");
    assert_parse_fails("--min-lr-frac: expected a number from 0 to 1", 3, "--min-lr-frac", "2");
    assert_parse_fails("--seed: expected a non-negative integer", 3, "--seed", "-1");
    assert_parse_fails("--model: unknown preset 'huge'", 3, "--model", "huge");
    assert_parse_fails("--init-from and --resume", 5, "--init-from", "a.bin", "--resume", "b.bin");
    assert_parse_fails("must be divisible", 5, "--channels", "100", "--heads", "3");
    assert_parse_fails("--padded-vocab 100 is smaller than the vocabulary, 50257 tokens", 3,
                       "--padded-vocab", "100");
}

// Chapter 14's --recompute takes a level's name; anything else is named,
// with the levels there are. The CPU trainer keeps every activation: it
// refuses a level, as it refuses the GPU trainer's --grad-accum.
Test(run_setup, recompute_takes_a_level_by_name) {
    TrainOptions o;
    char err[ERR_LEN];
    cr_assert_eq(parse(&o, err, 1), 0, "%s", err);
    cr_assert_eq(o.recompute, RECOMPUTE_NONE, "the default keeps every activation");
    const char *names[] = {"none", "gelu", "norms", "block"};
    for (int r = 0; r < RECOMPUTE_LEVELS; r++) {
        cr_assert_eq(parse(&o, err, 3, "--recompute", names[r]), 0, "%s", err);
        cr_assert_eq(o.recompute, (Recompute)r, "--recompute %s", names[r]);
        cr_assert_str_eq(recompute_name(o.recompute), names[r]);
    }
    assert_parse_fails("--recompute: expected none, gelu, norms or block, got 'all'", 3,
                       "--recompute", "all");
    assert_parse_fails("--recompute: expected none, gelu, norms or block, got 'Block'", 3,
                       "--recompute", "Block");
    assert_parse_fails("--recompute: expected none, gelu, norms or block, got '2'", 3,
                       "--recompute", "2");
    assert_parse_fails("--recompute: missing value", 2, "--recompute");
    assert_parse_fails("--recompute: missing value (the next word is the flag --steps)", 4,
                       "--recompute", "--steps", "5");
    TrainOptions t = tiny_train_options(2);
    t.recompute = RECOMPUTE_NORMS;
    CpuTrainer tr;
    err[0] = 0;
    cr_assert_eq(cpu_trainer_init(&tr, &t, err), -1);
    cr_assert(strstr(err, "--recompute norms: the GPU trainer's (chapter 14)"), "got: %s", err);
}

// GPT-2's four sizes, tied, with the unpadded vocabulary of 50,257: the
// parameter counts the sizes are named after (124M, 355M, 774M, 1558M).
Test(run_setup, the_presets_are_gpt2s_four_sizes) {
    const struct {
        const char *name;
        size_t params;
    } sizes[] = {{"124m", 124439808}, {"355m", 354823168}, {"774m", 774030080},
                 {"1558m", 1557611200}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        TrainOptions o;
        char err[ERR_LEN];
        cr_assert_eq(parse(&o, err, 4, "--model", sizes[i].name, "--tied"), 0, "%s", err);
        cr_assert_eq(o.model.channels / o.model.num_heads, 64, "%s: heads of 64", sizes[i].name);
        cr_assert_eq(gpt2_num_params(&o.model), sizes[i].params, "%s: %zu parameters",
                     sizes[i].name, gpt2_num_params(&o.model));
    }
}

Test(run_setup, the_flags_given_are_recorded) {
    TrainOptions o;
    char err[ERR_LEN];
    cr_assert_eq(parse(&o, err, 6, "--model", "tiny", "-b", "2", "--untied"), 0, "%s", err);
    unsigned want = GIVEN_LAYERS | GIVEN_HEADS | GIVEN_CHANNELS | GIVEN_MAX_SEQ_LEN |
                    GIVEN_BATCH | GIVEN_TIED;
    cr_assert_eq(o.given, want);
    cr_assert_eq(o.B, 2);
    cr_assert_eq(o.T, 32, "T defaults to the model's context");
    cr_assert_eq(parse(&o, err, 2, "--help"), 1);
    cr_assert_eq(parse(&o, err, 4, "-b", "3", "-h"), 1);
}

Test(run_setup, the_value_parsers_are_exported_for_other_programs) {
    int n;
    double x;
    char err[ERR_LEN];
    cr_assert_eq(parse_int("--bench-warmup", "3", 0, 100, &n, err), 0);
    cr_assert_eq(n, 3);
    cr_assert_eq(parse_int("--bench-warmup", "3x", 0, 100, &n, err), -1);
    cr_assert(strstr(err, "--bench-warmup: expected an integer from 0 to 100, got '3x'"), "%s", err);
    cr_assert_eq(parse_double("--peak-tflops", "989.5", 0, 1e6, &x, err), 0);
    cr_assert_eq(x, 989.5);
    cr_assert_eq(parse_double("--peak-tflops", "", 0, 1e6, &x, err), -1);
}

// ---- prepare_run: the files the flags name ---------------------------------------------
// A run of the fixture's tiny model saved after 2 steps; returns the model's path.
static const char *saved_run(void) {
    static char path[512];
    TrainOptions o = tiny_train_options(40);
    CpuTrainer tr;
    char err[ERR_LEN];
    cr_assert(cpu_trainer_init(&tr, &o, err) == 0, "%s", err);
    StepStats s;
    for (int i = 0; i < 2; i++) cr_assert(cpu_trainer_step(&tr, &s, err) == 0, "%s", err);
    cr_assert(cpu_trainer_save(&tr, path, sizeof path, err) == 0, "%s", err);
    cpu_trainer_free(&tr);
    return path;
}

// The fixture's options for resuming from `model` with the command line's
// `given` bits, as if the flags had been typed.
static TrainOptions resume_options(const char *model, unsigned given) {
    TrainOptions o = tiny_train_options(40);
    snprintf(o.resume_from, sizeof o.resume_from, "%s", model);
    o.given = given;
    return o;
}

static void assert_prepare_fails(TrainOptions o, const char *says1, const char *says2) {
    char err[ERR_LEN] = "";
    cr_assert_eq(prepare_run(&o, err), -1, "should fail saying \"%s\"", says1);
    assert_error_says(err, says1, says2);
}

Test(run_setup, resume_takes_the_shape_and_batch_from_the_checkpoint) {
    const char *model = saved_run();
    TrainOptions o = resume_options(model, 0);
    o.model.num_layers = 7, o.model.channels = 48, o.B = 99, o.T = 3;  // defaults give way
    char err[ERR_LEN];
    cr_assert_eq(prepare_run(&o, err), 0, "%s", err);
    cr_assert_eq(o.model.num_layers, 2);
    cr_assert_eq(o.model.channels, 32);
    cr_assert_eq(o.B, 4);
    cr_assert_eq(o.T, 16);
}

Test(run_setup, shape_flags_that_disagree_with_the_checkpoint_are_an_error) {
    const char *model = saved_run();
    TrainOptions o = resume_options(model, GIVEN_LAYERS);
    o.model.num_layers = 3;
    assert_prepare_fails(o, "--layers (or --model) asks for 3 layers", "has 2");
    o = resume_options(model, GIVEN_TIED);
    o.model.tied = 1;
    assert_prepare_fails(o, "--tied", "is untied");
    o = resume_options(model, GIVEN_PADDED_VOCAB);
    o.model.padded_vocab_size = 128;
    assert_prepare_fails(o, "--padded-vocab asks for 128", "has 64");
    o = resume_options(model, GIVEN_BATCH);
    o.B = 8;
    assert_prepare_fails(o, "--batch 8", "B = 4");
    // The same with --init-from: shape flags must agree there too.
    o = tiny_train_options(40);
    snprintf(o.init_from, sizeof o.init_from, "%s", model);
    o.given = GIVEN_CHANNELS;
    o.model.channels = 64;
    assert_prepare_fails(o, "--channels (or --model) asks for 64 channels", "--init-from");
    // Agreeing flags are fine.
    o = resume_options(model, GIVEN_LAYERS | GIVEN_TIED | GIVEN_BATCH);
    char err[ERR_LEN];
    cr_assert_eq(prepare_run(&o, err), 0, "%s", err);
}

Test(run_setup, steps_not_beyond_the_resumed_step_are_an_error) {
    const char *model = saved_run();
    TrainOptions o = resume_options(model, GIVEN_STEPS);
    o.steps = 2;
    assert_prepare_fails(o, "--steps 2", "already at step 2");
    o.steps = 3;
    char err[ERR_LEN];
    cr_assert_eq(prepare_run(&o, err), 0, "%s", err);
}

Test(run_setup, resume_from_a_directory_takes_its_latest_complete_pair) {
    const char *model = saved_run();  // ckpt/model_000002.bin with its state
    size_t n;
    char err[ERR_LEN];
    char *bytes = read_file(model, &n, err);
    cr_assert_not_null(bytes, "%s", err);
    write_bytes(tmp_path("ckpt/model_000005.bin"), bytes, n);  // its state removed, say
    free(bytes);
    TrainOptions o = resume_options(tmp_path("ckpt"), 0);
    cr_assert_eq(prepare_run(&o, err), 0, "%s", err);
    cr_assert_str_eq(o.resume_from, model);
    // The lone model names the pair to use instead.
    o = resume_options(tmp_path("ckpt/model_000005.bin"), 0);
    assert_prepare_fails(o, "no training state beside it", "model_000002.bin");
    o = resume_options(tmp_path("empty"), 0);
    cr_assert_eq(mkdir(tmp_path("empty"), 0755), 0);
    assert_prepare_fails(o, "no complete checkpoint", NULL);
}

Test(run_setup, val_batches_are_cut_to_what_the_shards_hold) {
    TrainOptions o = tiny_train_options(40);
    o.val_batches = 100000;
    char err[ERR_LEN];
    cr_assert_eq(prepare_run(&o, err), 0, "%s", err);
    cr_assert_eq(o.val_batches, 15, "1000 tokens hold 15 windows of 4 x 16 + 1");
}

Test(run_setup, missing_data_is_found_before_the_run) {
    TrainOptions o = tiny_train_options(40);
    snprintf(o.val_pattern, sizeof o.val_pattern, "%s", tmp_path("nothing_*.bin"));
    assert_prepare_fails(o, "validation data", "nothing_");
}

// A FIFO named by mistake: refused at once, where fopen would wait for a writer.
Test(run_setup, a_fifo_to_start_from_is_refused_without_waiting, .timeout = 10) {
    char fifo[512];  // tmp_path's buffers rotate: the options' paths would overwrite it
    snprintf(fifo, sizeof fifo, "%s", tmp_path("model_000002.bin"));
    make_fifo(fifo);
    TrainOptions o = tiny_train_options(40);
    snprintf(o.init_from, sizeof o.init_from, "%s", fifo);
    assert_prepare_fails(o, fifo, "not a regular file but a FIFO");
    assert_prepare_fails(resume_options(fifo, 0), fifo, "not a regular file but a FIFO");
}

// ---- prepare_run: the checkpoint directory, at start-up ---------------------------------
Test(run_setup, the_checkpoint_directory_is_made_and_tested_at_start_up) {
    TrainOptions o = tiny_train_options(40);
    o.checkpoint_every = 10;
    snprintf(o.checkpoint_dir, sizeof o.checkpoint_dir, "%s", tmp_path("a/b/c"));
    char err[ERR_LEN];
    cr_assert_eq(prepare_run(&o, err), 0, "%s", err);
    cr_assert_eq(access(tmp_path("a/b/c"), W_OK), 0, "nested directories are made");
    // A path through a file cannot be a directory: said before any step.
    write_bytes(tmp_path("file"), "x", 1);
    snprintf(o.checkpoint_dir, sizeof o.checkpoint_dir, "%s", tmp_path("file/ckpt"));
    assert_prepare_fails(o, "--checkpoint-dir", "file/ckpt");
    snprintf(o.checkpoint_dir, sizeof o.checkpoint_dir, "%s", tmp_path("file"));
    assert_prepare_fails(o, "--checkpoint-dir", "not a directory");
}

Test(run_setup, temporaries_of_a_save_cut_short_are_removed) {
    TrainOptions o = tiny_train_options(40);
    o.checkpoint_every = 10;
    cr_assert_eq(mkdir(o.checkpoint_dir, 0755), 0);
    char tmp[600], keep[600];
    snprintf(tmp, sizeof tmp, "%s/model_000010.bin.tmp", o.checkpoint_dir);
    snprintf(keep, sizeof keep, "%s/notes.tmp", o.checkpoint_dir);
    write_bytes(tmp, "x", 1);
    write_bytes(keep, "x", 1);
    char err[ERR_LEN];
    cr_assert_eq(prepare_run(&o, err), 0, "%s", err);
    cr_assert_neq(access(tmp, F_OK), 0, "our temporary is removed");
    cr_assert_eq(access(keep, F_OK), 0, "another file is not ours to remove");
}

// ---- prepare_run: whose checkpoints go where ---------------------------------------------
Test(run_setup, a_new_run_refuses_the_directory_of_another_runs_checkpoints) {
    saved_run();  // ckpt/model_000002.bin, the default of tiny_train_options
    char dir[512], err[ERR_LEN] = "";
    snprintf(dir, sizeof dir, "%s", tmp_path("ckpt"));
    TrainOptions o = tiny_train_options(40);
    o.checkpoint_every = 10;
    cr_assert_eq(prepare_run(&o, err), -1, "a new run would save over another's checkpoints");
    assert_error_says(err, "--checkpoint-dir", dir);
    assert_error_says(err, "(the default) holds the checkpoints of another run", "of step 2");
    assert_error_says(err, "--checkpoint-dir ANOTHER", "remove its files");
    char resume[600];
    snprintf(resume, sizeof resume, "--resume %s", dir);
    assert_error_says(err, resume, NULL);
    // A run that saves nothing does not care; one given a directory of its own saves there.
    o.checkpoint_every = 0;
    cr_assert_eq(prepare_run(&o, err), 0, "%s", err);
    o.checkpoint_every = 10;
    o.given |= GIVEN_CHECKPOINT_DIR;
    snprintf(o.checkpoint_dir, sizeof o.checkpoint_dir, "%s", tmp_path("ckpt_b"));
    cr_assert_eq(prepare_run(&o, err), 0, "%s", err);
}

Test(run_setup, a_resumed_run_saves_beside_the_checkpoint_it_resumed) {
    const char *model = saved_run();
    char dir[512], elsewhere[512], err[ERR_LEN];
    snprintf(dir, sizeof dir, "%s", tmp_path("ckpt"));
    snprintf(elsewhere, sizeof elsewhere, "%s", tmp_path("elsewhere"));
    const char *from[] = {model, dir};  // the model, or its directory
    for (int i = 0; i < 2; i++) {
        TrainOptions o = resume_options(from[i], 0);
        o.checkpoint_every = 10;
        snprintf(o.checkpoint_dir, sizeof o.checkpoint_dir, "%s", elsewhere);  // a default
        cr_assert_eq(prepare_run(&o, err), 0, "%s", err);
        cr_assert_str_eq(o.checkpoint_dir, dir, "--resume %s", from[i]);
    }
    // --checkpoint-dir given: there.
    TrainOptions o = resume_options(model, GIVEN_CHECKPOINT_DIR);
    o.checkpoint_every = 10;
    snprintf(o.checkpoint_dir, sizeof o.checkpoint_dir, "%s", elsewhere);
    cr_assert_eq(prepare_run(&o, err), 0, "%s", err);
    cr_assert_str_eq(o.checkpoint_dir, elsewhere);
}

// ---- as the run goes -------------------------------------------------------------------
Test(run_setup, a_diverged_step_is_named) {
    char err[ERR_LEN];
    cr_assert_eq(check_step_finite(3, 2.5f, 1.0f, err), 0);
    cr_assert_eq(check_step_finite(4, NAN, 1.0f, err), -1);
    assert_error_says(err, "step 4: the loss is NaN", "diverged");
    cr_assert_eq(check_step_finite(5, 2.5f, INFINITY, err), -1);
    assert_error_says(err, "step 5: the gradient norm is infinite", NULL);
}

Test(run_setup, a_validation_loss_that_is_not_finite_is_named) {
    char err[ERR_LEN];
    cr_assert_eq(check_val_loss_finite(25, 3.5f, err), 0);
    cr_assert_eq(check_val_loss_finite(25, NAN, err), -1);
    assert_error_says(err, "step 25: the validation loss is NaN", "diverged");
    cr_assert_eq(check_val_loss_finite(50, INFINITY, err), -1);
    assert_error_says(err, "step 50: the validation loss is infinite", NULL);
    cr_assert_eq(check_val_loss_finite(0, -INFINITY, err), -1);
}

Test(run_setup, the_parameter_count_says_untied) {
    GPT2Config c = gpt2_config_124m();
    char line[200];
    describe_param_count(&c, line, sizeof line);
    assert_error_says(line, "163.04M parameters (untied", "124.44M");
    c.tied = 1;
    describe_param_count(&c, line, sizeof line);
    assert_error_says(line, "124.44M parameters (tied", NULL);
}

// ---- the stop signals, in a child process each ------------------------------------------
// Runs body in a child; returns its wait status.
static int in_child(void (*body)(void)) {
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        body();
        _exit(0);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    return status;
}

// One signal: a flag, and a save still completes after it.
static void one_signal(void) {
    stop_signals_install();
    raise(SIGTERM);
    if (stop_requested() != SIGTERM || stop_exit_status() != 143) _exit(10);
    AtomicFile af;
    char err[ERR_LEN];
    if (atomic_open(&af, tmp_path("one.bin"), err) || atomic_write(&af, "abc", 3, err)) _exit(11);
    raise(SIGINT);  // a second signal now would stop at once; this is the test of the first
    _exit(12);
}

// Two signals while a file is being written: its temporary is removed, the
// process exits with 128 + the signal at once.
static void two_signals(void) {
    stop_signals_install();
    AtomicFile af;
    char err[ERR_LEN];
    if (atomic_open(&af, tmp_path("two.bin"), err) || atomic_write(&af, "abc", 3, err)) _exit(11);
    if (access(tmp_path("two.bin.tmp"), F_OK) != 0) _exit(12);
    raise(SIGINT);
    if (stop_requested() != SIGINT) _exit(13);
    raise(SIGINT);
    _exit(14);  // not reached
}

Test(run_setup, a_second_signal_stops_at_once_leaving_no_temporary) {
    cr_redirect_stderr();
    int status = in_child(two_signals);
    cr_assert(WIFEXITED(status), "the child was killed by its signal");
    cr_assert_eq(WEXITSTATUS(status), 130);
    cr_assert_neq(access(tmp_path("two.bin.tmp"), F_OK), 0, "the temporary was left behind");
    cr_assert_neq(access(tmp_path("two.bin"), F_OK), 0);
    status = in_child(one_signal);
    cr_assert(WIFEXITED(status));
    cr_assert_eq(WEXITSTATUS(status), 130, "the second raise stops it, status %d",
                 WEXITSTATUS(status));
    cr_assert_neq(access(tmp_path("one.bin.tmp"), F_OK), 0);
}

Test(run_setup, a_first_signal_lets_the_step_and_its_save_finish) {
    cr_redirect_stderr();
    TrainOptions o = tiny_train_options(40);
    CpuTrainer tr;
    char err[ERR_LEN], path[512];
    cr_assert(cpu_trainer_init(&tr, &o, err) == 0, "%s", err);
    stop_signals_install();
    raise(SIGINT);  // arrives mid-step, as it were: the step and the save go on
    StepStats s;
    cr_assert(cpu_trainer_step(&tr, &s, err) == 0, "%s", err);
    cr_assert_eq(stop_requested(), SIGINT);
    cr_assert(cpu_trainer_save(&tr, path, sizeof path, err) == 0, "%s", err);
    cr_assert_eq(access(tmp_path("ckpt/state_000001.bin"), F_OK), 0);
    cpu_trainer_free(&tr);
    signal(SIGINT, SIG_DFL);
}
