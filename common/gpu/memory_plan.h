// memory_plan.h: the device memory a run takes, counted before any of it is
// allocated, so that a run too large for its budget (memory_budget.h: the
// GPU's free memory, or --memory-limit GIB when smaller) is refused at once,
// naming the changes that would make it fit, instead of failing in its
// first step.
//
// A GPU's memory goes to the model's own buffers, which gpt2_gpu_init
// allocates and whose sum is exactly GPT2Gpu.device_bytes (a test checks it),
// and to what the run keeps beside them: cuBLASLt's workspace and padded
// weight copies, chapter 08's device batches, chapter 11's trial buffers,
// and what CUDA's libraries load on their own. The last is no one's
// allocation we can count: it is an allowance, measured (the trainer's
// peak against this plan, results/h100/first_run/), and the one uncertain
// number here; the step's few scalars and chapter 11's schedule (bytes a
// step) fall in it too. `--memory` prints it as a row of its own.
//
// How a run keeps to its budget: the plan is checked before the first
// allocation (train_gpu.c's check_memory), and every buffer allocated
// after it is one the plan counts; what the run holds on the device is then
// measured (cudaMemGetInfo: what the GPU had free at the check less what it
// has free now) once everything is allocated and at every log line, and a
// run under --memory-limit that holds more than its budget stops, saying so
// (gpu_trainer_check_memory). The most it held is printed at the end.
//
// At 124M and B=16, T=1024 the activations dominate through chapter 04: the
// eager attention keeps its (L,B,NH,T,T) probabilities, 9.7 GB in fp32;
// from chapter 05 the flash kernels keep one float per row instead.
#ifndef MEMORY_PLAN_H
#define MEMORY_PLAN_H

#include <stddef.h>
#include <stdio.h>

#include "model/gpt2_config.h"
#include "gpu/run_plan.h"
#include "train/memory_budget.h"

typedef struct {
    // The model's buffers (gpt2_gpu.h), in bytes.
    size_t params, grads;   // num_params floatX each
    size_t adam_fp32;       // AdamW's fp32 m and v
    size_t adam_8bit;       // chapter 10: the 8-bit m and v and their scales
    size_t adam_offload;    // chapter 14's --offload-optimizer instead of the two above: two
                            // layers' moments in transit and the rest's (optimizer_offload.h)
    size_t master;          // the fp32 master weights: the bf16 build
    size_t activations;     // activations.h's table for (B, T)
    size_t scratch;         // the kernels' one scratch buffer
    size_t batch;           // the model's device batch: tokens, targets, buckets
    size_t scalars;         // the mean loss, the norm, the clip factor, the AdamW step
    size_t fp8;             // chapter 13: the FP8 operands and their scales (fp8_layers.h)
    size_t model;           // their sum: what gpt2_gpu_init allocates
    // Beside the model.
    size_t gemm;            // cuBLASLt's workspace and padded weight copies (chapter 04 on)
    size_t workers;         // chapter 08: the device batches the workers fill
    size_t autotune;        // chapter 11: what a GEMM's first call holds while it tries kernels
    size_t libraries;       // what CUDA's libraries take on their own: an allowance
    size_t total;
} MemoryPlan;

// The memory of a run of the model cfg at batches of (B, T), as its plan
// (run_plan.h) runs it.
MemoryPlan memory_plan(const GPT2Config *cfg, int B, int T, const RunPlan *run);

// Floats of the model's scratch buffer (part of the plan; gpt2_gpu_init
// allocates this many).
size_t memory_plan_scratch_floats(const GPT2Config *cfg, int B, int T, const RunPlan *run);

// The plan of a run as its command line asks for it (memory_budget.h):
// its RunPlan built as the trainer builds it (run_plan_build), then its
// memory. Returns 0, or -1 with err when run_plan_build refuses the switches.
int memory_plan_request(const GPT2Config *cfg, const RunRequest *r, MemoryPlan *out, char *err);

// The search of the changes that fit (memory_budget.h) over this plan, for
// the model cfg and a budget of `budget` bytes.
MemorySearch memory_plan_search(const GPT2Config *cfg, size_t budget);

// When the plan of `asked` does not fit the budget (memory_budget.h): 0
// fits; else -1, and err says what the run needs (activations, the rest of
// the model, and libraries and buffers, the allowance among them), the
// budget, and the changes that make it fit, each planned again here
// (memory_budget_refuse). Also -1 when the switches cannot be planned.
int memory_plan_check(const GPT2Config *cfg, const RunRequest *asked, const MemoryBudget *budget,
                      char *err);

// Chapter 14's --fit-memory, before the check: when the plan of `asked` is
// over the budget and a higher --recompute level brings it under, asked's
// level is raised to the cheapest such level (memory_budget_fit_recompute)
// and `said` (cap bytes) is the line that says so; returns 1. Else 0 and
// asked as it was: it fits, or no level fits and the check refuses it.
int memory_plan_fit(const GPT2Config *cfg, RunRequest *asked, const MemoryBudget *budget,
                    char *said, size_t cap);

// `--memory`: the plan of a run at batches of (B, T) by category, every
// buffer, and every activation tensor from the activations' table
// (activations.h): the parameters, the gradients, the optimizer's state
// (fp32 moments, 8-bit moments, master weights), the activations, the FP8
// operands, the workspaces and buffers, the libraries' allowance, the total,
// and, when budget is not NULL, the budget and what is left of it.
void memory_plan_print(FILE *out, const GPT2Config *cfg, int B, int T, const RunPlan *run,
                       const MemoryBudget *budget);

#endif
