// check_cpu.h: the check mode on the CPU. Reads an llm.c-format model
// checkpoint and debug state (written by llm.c's train_gpt2.py or by
// tools/pytorch_reference.py), runs the FP32 CPU reference model forward and
// backward on the state's batch, and prints, tensor by tensor, how far our
// logits, loss and gradients are from the state's: the relative largest
// difference, against tolerances.h's fp32 check tolerances. Gradients are
// compared on their real rows only (debug_state.h: debug_grad_real_sizes).
// The GPU trainer's --check-state does the same for the GPU model.
#ifndef CHECK_CPU_H
#define CHECK_CPU_H

#include "files/debug_state.h"
#include "model/gpt2_config.h"

// Reads the two files of a check: the model's checkpoint, then a debug state
// of its shape. Both or neither: on failure nothing is left allocated (free
// *params and debug_state_free *ds after a success), and err names the file
// and what is wrong. The GPU's check mode (check_state.h) reads them here too.
int check_files_read(const char *model_path, const char *state_path, GPT2Config *cfg,
                     float **params, DebugState *ds, char *err);

// Returns the exit status (exit_status.h): 0 when everything is within
// tolerance, 1 when a tensor is not, 2 when a file cannot be read or is not
// what it should be (the message names the file).
int check_state_cpu(const char *model_path, const char *state_path);

#endif
