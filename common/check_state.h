// check_state.h: the check mode. Loads an llm.c-format model checkpoint and a
// debug state written by another implementation (tools/pytorch_reference.py),
// runs our GPU forward and backward on the state's batch, and reports per
// tensor how far our logits, loss and gradients are from the state's.
#ifndef CHECK_STATE_H
#define CHECK_STATE_H

#include <stddef.h>

#include "chapters.h"

// Prints the report; returns 0 when every tensor is within tolerance
// (tolerances.h), 1 when one is not, and exits with a message on a bad file.
int check_state_run(const char *model_path, const char *state_path, const Optimizations *optim);

#endif
