// exit_status.h: what the trainers' exit statuses mean: one rule for
// build/train_gpt2_cpu and build/train_gpt2_fp32 and _bf16, which --help
// prints (EXIT_STATUS_HELP).
//
//   0        done
//   1        the run failed while running: a diverged loss, a device error,
//            a read or a write that failed (die() exits 1); and --check-state
//            when a tensor is out of its tolerance
//   2        the command line, or a file it names, is wrong: found before the
//            first step (a flag, the data, the checkpoint to start from or to
//            resume and its state, the tokenizer's files, --check-state's
//            files), whether by the parser, by prepare_run, or while the
//            trainer is built from those files
//   130/143  stopped by Ctrl-C or SIGTERM (stop_signal.h)
//
// So a user or a script can tell "fix the command" (2) from "the run went
// wrong" (1) without reading the message.
#ifndef EXIT_STATUS_H
#define EXIT_STATUS_H

#include <stdio.h>

#define EXIT_RUN_FAILED 1
#define EXIT_BAD_INPUT 2

#define EXIT_STATUS_HELP                                                                      \
    "exit status:\n"                                                                          \
    "  0        done (--check-state: every tensor within its tolerance)\n"                    \
    "  1        the run failed while running: a diverged loss, a device error, a\n"           \
    "           failed read or write (--check-state: a tensor out of tolerance)\n"            \
    "  2        the command line, or a file it names, is wrong: found before the\n"           \
    "           first step\n"                                                                 \
    "  130/143  stopped by Ctrl-C / SIGTERM (after saving, when checkpoints are on)\n"

// Says what is wrong with the input on stderr, as die() says it, and returns
// EXIT_BAD_INPUT for main to return.
static inline int bad_input(const char *reason) {
    fprintf(stderr, "error: %s\n", reason);
    return EXIT_BAD_INPUT;
}

#endif
