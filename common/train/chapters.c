// chapters.c: see chapters.h.
#include "train/chapters.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "util/util.h"

// The tables. Adding a chapter is a row in each (none in SWITCHES when the
// chapter changes the build, as 02 does), its field in Optimizations, and its
// lines in gpu_ops_select(), apply_model_switches() or run_plan_build().
// ANCHOR: chapter_table
static const Chapter CHAPTERS[] = {
    {0, "00_baseline", "The FP32 baseline", "fp32"},
    {1, "01_tensor_cores", "Tensor cores (TF32)", "fp32"},
    // Chapter 02's change is the build: bf16 storage (kernels/precision.h).
    {2, "02_mixed_precision", "Mixed precision (bf16)", "bf16"},
    {3, "03_sync_avoidance", "Sync avoidance", "bf16"},
    {4, "04_kernel_fusion", "Kernel fusion", "bf16"},
    {5, "05_flash_attention", "Flash attention", "bf16"},
    {6, "06_vocab_padding", "Vocabulary padding", "bf16"},
    {7, "07_weight_tying", "Weight tying", "bf16"},
    {8, "08_data_workers", "Data workers", "bf16"},
    {9, "09_fused_optimizer", "Fused optimizer", "bf16"},
    {10, "10_8bit_optimizer", "8-bit optimizer", "bf16"},
    {11, "11_last_mile", "The last mile", "bf16"},
    {12, "12_fast_attention", "Attention at Hopper's pace", "bf16"},
    {13, "13_fp8", "FP8 GEMMs", "bf16"},
    {14, "14_largest_model", "The largest GPT-2 a small card can train", "bf16"},
    {15, "15_multi_gpu", "Several GPUs", "bf16"},
};

typedef struct {
    Switch s;
    size_t field;  // offsetof(Optimizations, ...)
} SwitchRow;

static const SwitchRow SWITCHES[] = {
    // TF32 is how fp32 GEMMs use the tensor cores; bf16 GEMMs always do.
    {{"tensor-cores", 1, "fp32"}, offsetof(Optimizations, tensor_cores)},
    {{"sync-avoidance", 3, "any"}, offsetof(Optimizations, sync_avoidance)},
    {{"kernel-fusion", 4, "bf16"}, offsetof(Optimizations, kernel_fusion)},
    // Our own kernels on bf16 tensor cores: there is no fp32 version.
    {{"flash-attention", 5, "bf16"}, offsetof(Optimizations, flash_attention)},
    // The model's shape: any build can run it (an fp32 ablation, say).
    {{"vocab-padding", 6, "any"}, offsetof(Optimizations, vocab_padding)},
    {{"weight-tying", 7, "any"}, offsetof(Optimizations, weight_tying)},
    // How the step is fed and how the update is launched: any build.
    {{"data-workers", 8, "any"}, offsetof(Optimizations, data_workers)},
    {{"fused-optimizer", 9, "any"}, offsetof(Optimizations, fused_optimizer)},
    // The optimizer's state: any build (its kernels are written for both).
    {{"adamw-8bit", 10, "any"}, offsetof(Optimizations, adamw_8bit)},
    // Chapter 11 is three measured changes, each a switch of its own so that
    // each can be turned off alone: the step replayed from a graph (any
    // build), each GEMM's kernel chosen by the clock, and the layernorm's
    // parameter gradients retuned (the bf16 build's).
    {{"cuda-graphs", 11, "any"}, offsetof(Optimizations, cuda_graphs)},
    {{"gemm-autotune", 11, "bf16"}, offsetof(Optimizations, gemm_autotune)},
    {{"tuned-layernorm", 11, "bf16"}, offsetof(Optimizations, tuned_layernorm)},
    // Chapter 05's flash attention again, its kernels rewritten for Hopper:
    // bf16 tensor cores, like chapter 05's (on other GPUs it runs chapter
    // 05's kernels: gpu_ops.c).
    {{"fast-attention", 12, "bf16"}, offsetof(Optimizations, fast_attention)},
    // The linear layers' GEMMs on FP8 operands, cast from bf16 (on a GPU
    // without FP8 tensor cores it runs chapter 12's bf16 GEMMs: gpt2_gpu.c).
    {{"fp8", 13, "bf16"}, offsetof(Optimizations, fp8)},
    // A run over its memory budget takes the cheapest --recompute level that
    // fits, instead of being refused: any build (both recompute).
    {{"fit-memory", 14, "any"}, offsetof(Optimizations, fit_memory)},
    // How the gradients' mean over several GPUs is taken: a layer at a time,
    // as the backward pass completes them, beside it (any build; with one
    // GPU there is nothing to average, and it changes nothing).
    {{"overlap-comm", 15, "any"}, offsetof(Optimizations, overlap_comm)},
};
// ANCHOR_END: chapter_table
#define NUM_CHAPTERS ((int)(sizeof CHAPTERS / sizeof CHAPTERS[0]))
#define NUM_SWITCHES ((int)(sizeof SWITCHES / sizeof SWITCHES[0]))

static int *field_of(Optimizations *o, const SwitchRow *row) {
    return (int *)((char *)o + row->field);
}

static const SwitchRow *row_of(const Switch *s) { return (const SwitchRow *)s; }

int chapter_count(void) { return NUM_CHAPTERS; }
int switch_count(void) { return NUM_SWITCHES; }
const Switch *switch_get(int i) { return i >= 0 && i < NUM_SWITCHES ? &SWITCHES[i].s : NULL; }

int switch_value(const Optimizations *o, const Switch *s) {
    return *(const int *)((const char *)o + row_of(s)->field);
}

const Chapter *chapter_get(int number) {
    for (int i = 0; i < NUM_CHAPTERS; i++)
        if (CHAPTERS[i].number == number) return &CHAPTERS[i];
    return NULL;
}

const Switch *chapter_switch(int number) {
    for (int i = 0; i < NUM_SWITCHES; i++)
        if (SWITCHES[i].s.chapter == number) return &SWITCHES[i].s;
    return NULL;
}

int chapter_first_of_precision(const char *precision) {
    for (int i = 0; i < NUM_CHAPTERS; i++)
        if (!strcmp(CHAPTERS[i].precision, precision)) return CHAPTERS[i].number;
    return -1;
}

static const SwitchRow *find_switch(const char *name) {
    for (int i = 0; i < NUM_SWITCHES; i++)
        if (!strcmp(SWITCHES[i].s.name, name)) return &SWITCHES[i];
    return NULL;
}

Optimizations chapter_optimizations(int number) {
    Optimizations o;
    memset(&o, 0, sizeof o);
    for (int i = 0; i < NUM_SWITCHES; i++)
        if (SWITCHES[i].s.chapter <= number) *field_of(&o, &SWITCHES[i]) = 1;
    return o;
}

int optimizations_apply_flag(Optimizations *o, const char *flag, const char *precision,
                             char *err) {
    if (strncmp(flag, "--", 2) != 0) return 0;
    const char *name = flag + 2;
    int value = 1;
    if (!strncmp(name, "no-", 3)) name += 3, value = 0;
    const SwitchRow *row = find_switch(name);
    if (!row) return 0;
    if (strcmp(row->s.precision, "any") != 0 && strcmp(row->s.precision, precision) != 0)
        return fail(err, "%s: a switch of the %s build (chapter %02d), and this trainer is "
                         "built for %s, where it means nothing (see --list-chapters)",
                    flag, row->s.precision, row->s.chapter, precision);
    *field_of(o, row) = value;
    return 1;
}

// ANCHOR: apply_model_switches
void apply_model_switches(const Optimizations *o, GPT2Config *cfg) {
    // Chapter 06: wte's and lm_head's rows rounded up to a multiple of 128,
    // 50257 to 50304; the new rows are zeros and stay zeros.
    if (o->vocab_padding) {
        const int m = VOCAB_PADDING_MULTIPLE;
        cfg->padded_vocab_size = (cfg->vocab_size + m - 1) / m * m;
    }
    // Chapter 07: the logits are made with the embedding's own rows.
    if (o->weight_tying) cfg->tied = 1;
}
// ANCHOR_END: apply_model_switches

// A chapter's switches, comma-separated ("-" for none), into out (cap bytes).
static void chapter_switch_names(int number, char *out, size_t cap) {
    snprintf(out, cap, "-");
    size_t used = 0;
    for (int i = 0; i < NUM_SWITCHES; i++) {
        if (SWITCHES[i].s.chapter != number) continue;
        int n = snprintf(out + used, cap - used, "%s%s", used ? "," : "", SWITCHES[i].s.name);
        if (n < 0 || (size_t)n >= cap - used) break;
        used += (size_t)n;
    }
}

void chapters_print_table(void) {
    printf("chapter  precision  switch                                     title\n");
    for (int i = 0; i < NUM_CHAPTERS; i++) {
        char names[160];
        chapter_switch_names(CHAPTERS[i].number, names, sizeof names);
        printf("%7d  %-9s  %-41s  %s\n", CHAPTERS[i].number, CHAPTERS[i].precision, names,
               CHAPTERS[i].title);
    }
}

void optimizations_print(const Optimizations *o) {
    printf("optimizations:");
    for (int i = 0; i < NUM_SWITCHES; i++)
        printf(" %s%s", switch_value(o, &SWITCHES[i].s) ? "+" : "-", SWITCHES[i].s.name);
    printf("\n");
}
