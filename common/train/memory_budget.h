// memory_budget.h: the device memory a run may take, and, for a run whose
// plan is over it, the changes to its command line that bring it under.
//
// The budget is the smaller of two numbers: --memory-limit GIB, when it is
// given, and what the GPU has free once the run's CUDA context exists, when
// the plan is checked. The context (CUDA's own, with cuBLAS's handle: about
// 0.6 GiB on the H100) is made before, so it is in neither the plan nor the
// budget: --memory-limit G asks "would this run fit a card that has G GiB
// free for it?", and a GPU that has less free than the limit is the budget.
//
// A run over its budget is refused before anything is allocated (exit 2),
// with the changes that make it fit. None is guessed: each is the asked run
// with its flags changed as the command line would change them, planned
// again (memory_plan.h), and kept only when that plan fits. They come
// smallest change first:
//   1. one switch that keeps the batch (SWITCH_FIXES in memory_budget.c:
//      --recompute's levels, of which only the cheapest that fits is named;
//      --offload-optimizer; --adamw-8bit; --no-master-weights;
//      --update-in-backward --grad-clip 0); where none does alone, the
//      fewest that fit together, the earliest rows of as many;
//   2. a smaller -b: with --grad-accum making up the same sequences a step
//      where the run's plan can take micro-batches (chapter 11), alone
//      (fewer sequences a step: another run) where it cannot;
//   3. a switch with a smaller -b, where the switch lets a larger batch fit
//      than the batch change alone.
//
// From chapter 14 on (--fit-memory) one of those changes is made rather
// than suggested: a higher --recompute level, the cheapest that fits. It
// trains the same bits (recompute.h), so it spends time, never a value; a
// change that alters what the run computes (--adamw-8bit, the stochastic
// rounding of --no-master-weights, fewer sequences or micro-batches) is
// the reader's to choose, and is still only named, by the refusal of a run
// that no level fits.
//
// The plan is passed in as a function (MemoryPlanner): memory_plan.c's needs
// the kernels' buffer sizes and so CUDA, while this file is plain host code,
// tested on any machine with a plan of the test's own
// (tests/cpu/test_memory_budget.c); tests/gpu/test_memory_plan.c runs the
// search over the real plan (its memory_plan_host suite needs no GPU either).
#ifndef MEMORY_BUDGET_H
#define MEMORY_BUDGET_H

#include <stddef.h>

#include "train/chapters.h"
#include "train/recompute.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    size_t bytes;        // the budget: the smaller of the two below
    size_t free_bytes;   // what the GPU had free when the plan was checked
    size_t limit_bytes;  // --memory-limit, in bytes; 0: none given
    double limit_gib;    // as given, for messages
} MemoryBudget;

// The budget of a GPU with free_bytes free under --memory-limit limit_gib
// (0: no limit; the flag takes only numbers > 0).
MemoryBudget memory_budget(size_t free_bytes, double limit_gib);

// 1 when the limit, not the GPU, sets the budget.
int memory_budget_is_limit(const MemoryBudget *b);

// "the GPU has 9.4 GiB free", or "the budget is 16.0 GiB (--memory-limit 16;
// the GPU has 78.6 GiB free)": what a refusal measures the run against.
void memory_budget_describe(const MemoryBudget *b, char *out, size_t cap);

// A run as its command line asks for it: what a suggested change edits.
typedef struct {
    Optimizations switches;  // --chapter and the --SWITCH flags
    int B, T;                // -b, -t
    int grad_accum;          // --grad-accum: micro-batches of B sequences a step
    Recompute recompute;     // --recompute (chapter 14)
    int no_master_weights;   // --no-master-weights (chapter 14): 0 keeps the fp32 copy
    int update_in_backward;  // --update-in-backward (chapter 14): 0 keeps every gradient
    int offload_optimizer;   // --offload-optimizer (chapter 14): 0 keeps the moments on the GPU
} RunRequest;

// The bytes of the plan of run r into *bytes, 0; or -1 when its switches and
// numbers cannot be planned together (run_plan_build refuses --grad-accum
// without --fused-optimizer, say): such a change is never suggested. arg is
// the planner's own (memory_plan.c's: the model's config).
typedef int (*MemoryPlanner)(const RunRequest *r, void *arg, size_t *bytes);

typedef struct {
    MemoryPlanner plan;
    void *arg;
    size_t budget;          // bytes
    const char *precision;  // the trainer's build: a switch of the other is not suggested
} MemorySearch;

// One change that fits: the flags to add to the command line, the run they
// make, and its plan's bytes.
typedef struct {
    char flags[128];  // "--adamw-8bit", "-b 8 --grad-accum 2", "--adamw-8bit -b 4"
    RunRequest run;
    size_t bytes;
} MemoryFix;

#define MEMORY_MAX_FIXES 3

// The changes that bring `asked` under s->budget, smallest first (above), at
// most MEMORY_MAX_FIXES; returns how many (0: none does).
int memory_budget_fixes(const RunRequest *asked, const MemorySearch *s,
                        MemoryFix fixes[MEMORY_MAX_FIXES]);

// The refusal of a run over its budget: returns -1 with err = "the run does
// not fit on the GPU" (or "in --memory-limit G"), `need` (what the run
// needs, memory_plan.h's words), the budget, and the changes that fit:
// "... it fits with -b 8 --grad-accum 2 (about 9.1 GiB, the same 16 sequences
// a step); or with --adamw-8bit (about 15.2 GiB)"; when none does, "not even
// -b 1 fits (about X GiB)", and what is left to try.
int memory_budget_refuse(const RunRequest *asked, const MemoryBudget *b, const MemorySearch *s,
                         const char *need, char *err);

// Chapter 14's --fit-memory: the cheapest --recompute level, from the one
// `asked` names up, at which its plan fits s->budget. 0 with *fitted (asked
// at that level, nothing else changed) and *bytes (its plan); -1 when no
// level fits, or none can be planned. A run that fits as asked keeps its
// level. (Chapter 14's exercise: solutions/14_largest_model/fit_recompute.c.)
int memory_budget_fit_recompute(const RunRequest *asked, const MemorySearch *s,
                                RunRequest *fitted, size_t *bytes);

// The line --fit-memory prints when it raised the level: "--fit-memory:
// --recompute norms, the cheapest level that fits: 7.41 GiB planned (9.05
// GiB with --recompute none), within the budget of 8.00 GiB (--memory-limit
// 8)"; asked_bytes is the plan of the run as asked, fitted's is bytes.
void memory_budget_describe_fit(const RunRequest *asked, size_t asked_bytes,
                                const RunRequest *fitted, size_t bytes, const MemoryBudget *b,
                                char *out, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
