// test_checkpoint_pair.c: how save_run puts a checkpoint's two files in place:
// the state first, the model last (its rename is the commit point), then the
// directory synced; and what a save cut short leaves: never a model without
// its state, and --resume DIR takes the pair before.
//
// To watch a save, this file gives the test binary its own rename() and
// fsync() in place of the C library's (a program's own definition of a
// function wins over the shared library's, for every object linked into it).
// They do what the library's do, and note each call in a journal; a test can
// also end the process right after a rename, as a power cut would (no
// cleanup, no atexit handler), or make a directory's fsync fail. Tests that
// arm nothing see the library's behaviour: Criterion runs each test in a
// process of its own, so nothing armed here outlives its test.
#define _POSIX_C_SOURCE 200809L  // for file_helpers.h; renameat, fork
#define _DEFAULT_SOURCE          // syscall
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "train/train_common.h"
#include "training_fixture.h"

// ---- rename and fsync, watched ------------------------------------------------------
static char journal[16][64];
static int journal_len;
static int renames_until_power_cut;  // 0: none armed
static int directory_fsync_error;    // an errno for a directory's fsync; 0: none

static void note(const char *what, const char *path) {
    const char *slash = strrchr(path, '/');
    if (journal_len < 16)
        snprintf(journal[journal_len++], sizeof journal[0], "%s %s", what,
                 slash ? slash + 1 : path);
}

int rename(const char *from, const char *to) {
    int rc = renameat(AT_FDCWD, from, AT_FDCWD, to);
    if (rc == 0) note("rename to", to);
    if (rc == 0 && renames_until_power_cut > 0 && --renames_until_power_cut == 0) _exit(0);
    return rc;
}

int fsync(int fd) {
    struct stat st;
    int directory = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
    note("fsync", directory ? "a directory" : "a file");
    if (directory && directory_fsync_error) {
        errno = directory_fsync_error;
        return -1;
    }
    return (int)syscall(SYS_fsync, fd);
}

// ---- a tiny run's checkpoints -------------------------------------------------------
static void setup(void) {
    make_learnable_shards();
    cr_redirect_stdout();  // prepare_run's notices
}

TestSuite(checkpoint_pair, .init = setup, .fini = remove_tmpdir);

// save_run of the fixture's model at `step`, its parameters all `step`.
static int save_step(const TrainOptions *o, int step, char *err) {
    size_t n = gpt2_num_params(&o->model);
    float *params = xmalloc(n * sizeof(float)), *m = xcalloc(n, sizeof(float));
    float *v = xcalloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++) params[i] = (float)step;
    AdamState s = adam_state_view_full(&o->model, m, v);
    TrainProgress p = {.step = step, .B = o->B, .T = o->T};
    int rc = save_run(o->checkpoint_dir, &o->model, params, &s, NULL, &p, NULL, 0, err);
    free(params), free(m), free(v);
    return rc;
}

// The checkpoint that --resume DIR takes, after prepare_run (with
// checkpoints on, so that it tidies the directory too).
static const char *resumed_from_dir(const TrainOptions *o) {
    static char model[512];
    TrainOptions r = *o;
    r.checkpoint_every = 10;
    snprintf(r.resume_from, sizeof r.resume_from, "%s", o->checkpoint_dir);
    char err[ERR_LEN];
    cr_assert_eq(prepare_run(&r, err), 0, "%s", err);
    snprintf(model, sizeof model, "%s", r.resume_from);
    return model;
}

static int exists(const char *name) { return access(tmp_path(name), F_OK) == 0; }

// ---- the order -------------------------------------------------------------------------
Test(checkpoint_pair, the_state_then_the_model_then_the_directory) {
    TrainOptions o = tiny_train_options(40);
    char err[ERR_LEN];
    cr_assert_eq(mkdir(o.checkpoint_dir, 0755), 0);
    journal_len = 0;
    cr_assert_eq(save_step(&o, 2, err), 0, "%s", err);
    const char *want[] = {"fsync a file", "fsync a file", "rename to state_000002.bin",
                          "rename to model_000002.bin", "fsync a directory"};
    const int n = sizeof want / sizeof want[0];
    for (int i = 0; i < journal_len || i < n; i++)
        cr_assert(i < journal_len && i < n && !strcmp(journal[i], want[i]),
                  "call %d of the save: \"%s\", expected \"%s\"", i + 1,
                  i < journal_len ? journal[i] : "(none)", i < n ? want[i] : "(none)");
}

// Saves `step` in a child process that a power cut ends right after the
// save's first rename.
static void save_cut_after_one_rename(const TrainOptions *o, int step) {
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        char err[ERR_LEN];
        renames_until_power_cut = 1;
        save_step(o, step, err);
        _exit(10);  // not reached: the power cut ends the process first
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the save was not cut short");
}

// A model must not be there without its state; --resume DIR takes the pair
// before; the state that came first is a leftover, and start-up removes it.
Test(checkpoint_pair, a_save_cut_between_the_renames_leaves_no_model_without_its_state) {
    TrainOptions o = tiny_train_options(40);
    char err[ERR_LEN], model2[512];
    cr_assert_eq(save_step(&o, 2, err), 0, "%s", err);
    snprintf(model2, sizeof model2, "%s", tmp_path("ckpt/model_000002.bin"));
    save_cut_after_one_rename(&o, 4);
    cr_assert(!exists("ckpt/model_000004.bin") || exists("ckpt/state_000004.bin"),
              "a model without its state");
    cr_assert_str_eq(resumed_from_dir(&o), model2);
    cr_assert(!exists("ckpt/state_000004.bin"), "the lone state is left at start-up");
    cr_assert(!exists("ckpt/model_000004.bin.tmp"), "the model's temporary is left");
}

// A run resumed from step 2 saves step 4 over an older pair of step 4: cut
// short, it must not leave the old model beside the new state.
Test(checkpoint_pair, a_save_over_an_older_pair_cut_short_leaves_no_mixed_pair) {
    TrainOptions o = tiny_train_options(40);
    char err[ERR_LEN], model2[512];
    cr_assert_eq(save_step(&o, 2, err), 0, "%s", err);
    cr_assert_eq(save_step(&o, 4, err), 0, "%s", err);
    snprintf(model2, sizeof model2, "%s", tmp_path("ckpt/model_000002.bin"));
    save_cut_after_one_rename(&o, 4);
    cr_assert(!exists("ckpt/model_000004.bin"), "the old model beside the new state");
    cr_assert_str_eq(resumed_from_dir(&o), model2);
}

// The model's rename fails (a directory is in its way) after the state's:
// save_run fails naming the model, and takes the state back.
Test(checkpoint_pair, a_failed_model_rename_takes_its_state_back) {
    TrainOptions o = tiny_train_options(40);
    char err[ERR_LEN], model2[512];
    cr_assert_eq(save_step(&o, 2, err), 0, "%s", err);
    snprintf(model2, sizeof model2, "%s", tmp_path("ckpt/model_000002.bin"));
    cr_assert_eq(mkdir(tmp_path("ckpt/model_000004.bin"), 0755), 0);
    write_bytes(tmp_path("ckpt/model_000004.bin/x"), "x", 1);  // not empty: no rename over it
    cr_assert_eq(save_step(&o, 4, err), -1, "saved over a directory");
    assert_error_says(err, "model_000004.bin", "cannot rename into place");
    cr_assert(!exists("ckpt/state_000004.bin"), "the state stayed without its model");
    cr_assert(!exists("ckpt/state_000004.bin.tmp") && !exists("ckpt/model_000004.bin.tmp"));
    cr_assert_str_eq(resumed_from_dir(&o), model2);
}

// ---- the directory's sync ------------------------------------------------------------
Test(checkpoint_pair, a_failed_directory_sync_fails_the_save_naming_the_directory) {
    TrainOptions o = tiny_train_options(40);
    char err[ERR_LEN];
    directory_fsync_error = EIO;
    cr_assert_eq(save_step(&o, 2, err), -1, "a save that may not survive a power cut");
    assert_error_says(err, o.checkpoint_dir, "cannot sync the directory: Input/output error");
    directory_fsync_error = EINVAL;  // a file system that cannot sync directories
    cr_assert_eq(save_step(&o, 3, err), 0, "%s", err);
}

Test(checkpoint_pair, sync_directory_names_what_it_cannot_open) {
    char err[ERR_LEN];
    cr_assert_eq(sync_directory(tmpdir, err), 0, "%s", err);
    const char *missing = tmp_path("no_such_dir");
    assert_fails_with(sync_directory(missing, err), err, missing, "cannot open the directory",
                      "No such file");
    const char *file = tmp_path("train_000.bin");
    assert_fails_with(sync_directory(file, err), err, file, "cannot open the directory",
                      "Not a directory");
}
