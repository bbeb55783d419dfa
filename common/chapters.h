// chapters.h: the book's chapters as one table. Chapter N is chapter N-1 with
// one more optimization switched on; `--chapter N` selects a row, and a named
// switch (`--tensor-cores`, `--no-tensor-cores`, ...) overrides one field
// afterwards, which is how ablations are run.
//
// One change is not a run-time switch: the precision of storage, fp32 or
// bf16, is chosen when the trainer is built (kernels/precision.h), so there
// are two trainers, build/train_gpt2_fp32 and build/train_gpt2_bf16. Each row
// names the precision it runs in; chapter 02 is the row where it changes
// (its switch is "-": there is no --bf16 or --no-bf16), and a trainer refuses
// a chapter of the other precision. `make train CH=N` reads the precision
// from the table and runs the trainer built for it.
#ifndef CHAPTERS_H
#define CHAPTERS_H

// One field per optimization, each 0 (off) or 1 (on). A chapter's row sets
// its own field; every earlier row's field stays on.
typedef struct {
    int tensor_cores;    // 01: fp32 GEMMs on the tensor cores, in TF32
    int sync_avoidance;  // 03: the host never waits for the device inside a step
} Optimizations;

typedef struct {
    int number;
    const char *slug;    // its folder: chapters/<slug>/
    const char *title;
    const char *switch_name;  // the flag it turns on (NULL for the baseline and 02)
    const char *precision;    // "fp32" or "bf16": the trainer build that runs it
} Chapter;

int chapter_count(void);
const Chapter *chapter_get(int number);  // NULL when there is no such chapter

// The first chapter that runs in `precision` ("fp32", "bf16"): each trainer's
// default chapter. -1 when there is none.
int chapter_first_of_precision(const char *precision);

// The optimizations of chapter `number`: every switch of rows 1..number on.
Optimizations chapter_optimizations(int number);

// Applies "--NAME" (on) or "--no-NAME" (off) when NAME is a switch. Returns
// 1 when `flag` was a switch, 0 when it is not one.
int optimizations_apply_flag(Optimizations *o, const char *flag);

// Prints the table (`--list-chapters`: chapter, precision, switch, title), and
// one line with the switches' state.
void chapters_print_table(void);
void optimizations_print(const Optimizations *o);

#endif
