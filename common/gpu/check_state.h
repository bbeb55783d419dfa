// check_state.h: the check mode. Loads an llm.c-format model checkpoint and a
// debug state written by another implementation (tools/pytorch_reference.py),
// runs our GPU forward and backward on the state's batch, and reports per
// tensor how far our logits, loss and gradients are from the state's.
#ifndef CHECK_STATE_H
#define CHECK_STATE_H

#include <stddef.h>

#include "train/chapters.h"

// The two files of a check, before a device is looked for: each is there, a
// regular file and readable, and the model's header is a checkpoint's.
// Returns 0, or -1 with a reason in err naming the file.
int check_state_files(const char *model_path, const char *state_path, char *err);

// Prints the report; returns the exit status (exit_status.h): 0 when every
// tensor is within tolerance (tolerances.h), 1 when one is not, 2 with a
// message naming the file when a file is bad.
int check_state_run(const char *model_path, const char *state_path, const Optimizations *optim);

#endif
