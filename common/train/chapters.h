// chapters.h: the book's chapters as two tables. Chapter N is chapter N-1
// with one more optimization switched on; `--chapter N` selects a row, and a
// named switch (`--tensor-cores`, `--no-tensor-cores`, ...) overrides one
// field afterwards, which is how ablations are run.
//
//   CHAPTERS  one row per chapter: number, folder, title, precision
//   SWITCHES  one row per optimization: its flag, its field in Optimizations,
//             the chapter that turns it on, and the build it means something in
//
// One change is not a run-time switch: the precision of storage, fp32 or
// bf16, is chosen when the trainer is built (kernels/precision.h), so there
// are two trainers, build/train_gpt2_fp32 and build/train_gpt2_bf16. Each
// chapter names the precision it runs in; chapter 02 is the row where it
// changes (it has no switch: there is no --bf16 or --no-bf16), and a trainer
// refuses a chapter of the other precision, or a switch that means nothing in
// its build. `make train CH=N` reads the precision from the table and runs the
// trainer built for it.
//
// What a switch changes in the code is in three places only, and no other
// code reads a switch:
//   gpu_ops_select()        (common/gpu/gpu_ops.c) picks the kernels the model
//                           calls and how every launch is made;
//   apply_model_switches()  below, changes the model's shape;
//   run_plan_build()        (common/gpu/run_plan.c) decides everything else, once,
//                           into the run's plan: the buffers the model keeps,
//                           its update, and how the step runs (the host's
//                           waits, the data workers, graphs, micro-batches).
// A switch is on or off. What is a number or a choice (a batch,
// micro-batches, chapter 14's level of --recompute, later a count of GPUs) is
// a flag of the run (train_options.h), which the plan takes beside the
// switches.
#ifndef CHAPTERS_H
#define CHAPTERS_H

#include "model/gpt2_config.h"

// One field per optimization, each 0 (off) or 1 (on). Every switch of the
// chapters up to the one selected is on.
#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int tensor_cores;    // 01: fp32 GEMMs on the tensor cores, in TF32
    int sync_avoidance;  // 03: the host never waits for the device inside a step
    int kernel_fusion;   // 04: fused kernels, GEMM epilogues, 16-byte vectors
    int flash_attention; // 05: attention in one kernel each way, no (T,T) scores stored
    int vocab_padding;   // 06: wte and lm_head rounded up to 128 rows (50257 -> 50304)
    int weight_tying;    // 07: lm_head is wte, GPT-2's own model
    int data_workers;    // 08: batches read and checked on worker threads, copied on a stream of their own
    int fused_optimizer; // 09: one AdamW launch for every tensor, lr and step read from the device
    int adamw_8bit;      // 10: the weight matrices' AdamW moments in one byte each, block-wise
    int cuda_graphs;     // 11: the step captured once as a CUDA graph, then replayed
    int gemm_autotune;   // 11: each GEMM shape's cuBLASLt kernel picked by timing its candidates
    int tuned_layernorm; // 11: the layernorm backward's column sums in 16-byte vectors
    int fast_attention;  // 12: Hopper's flash attention: TMA, warp specialization, overlap (v4)
    int fp8;             // 13: the linear layers' GEMMs on FP8 operands, with delayed scales
    int fit_memory;      // 14: a run over its budget takes the cheapest --recompute level that fits
    int overlap_comm;    // 15: on several GPUs, each layer's gradients averaged over the ranks
                         //     while the backward pass goes on (else all of them after it)
} Optimizations;

typedef struct {
    int number;
    const char *slug;       // its folder: chapters/<slug>/
    const char *title;
    const char *precision;  // "fp32" or "bf16": the trainer build that runs it
} Chapter;

typedef struct {
    const char *name;       // the flag: --NAME turns it on, --no-NAME off
    int chapter;            // the chapter whose one change it is
    const char *precision;  // "fp32", "bf16", or "any": the builds it means something in
} Switch;

int chapter_count(void);
const Chapter *chapter_get(int number);  // NULL when there is no such chapter
// The (first) switch that chapter `number` turns on; NULL for the baseline and
// for 02. Every chapter has one, but chapter 11, which has three.
const Switch *chapter_switch(int number);
int switch_count(void);
const Switch *switch_get(int i);         // i in [0, switch_count())
int switch_value(const Optimizations *o, const Switch *s);

// The first chapter that runs in `precision` ("fp32", "bf16"): each trainer's
// default chapter. -1 when there is none.
int chapter_first_of_precision(const char *precision);

// The optimizations of chapter `number`: the switch of every chapter up to it on.
Optimizations chapter_optimizations(int number);

// Applies "--NAME" (on) or "--no-NAME" (off) when NAME is a switch, for the
// trainer built for `precision`. Returns 1 when `flag` was a switch, 0 when it
// is not one, and -1 with a reason in err (ERR_LEN bytes) when it is a switch
// of the other build.
int optimizations_apply_flag(Optimizations *o, const char *flag, const char *precision,
                             char *err);

// The rows the vocabulary is padded to a multiple of (chapter 06).
#define VOCAB_PADDING_MULTIPLE 128

// The shape changes of the switches (vocabulary padding, weight tying: from
// chapter 06 on), made to the model's config before anything is allocated.
// Every trainer and check calls it on the config it is about to build. A
// switch that is off leaves its part of the shape as it was (so that
// --padded-vocab and --tied still choose it).
void apply_model_switches(const Optimizations *o, GPT2Config *cfg);

// Prints the table (`--list-chapters`: chapter, precision, switches (comma-
// separated), title), and
// one line with the switches' state.
void chapters_print_table(void);
void optimizations_print(const Optimizations *o);

#ifdef __cplusplus
}
#endif

#endif
