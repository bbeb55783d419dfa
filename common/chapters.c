// chapters.c: see chapters.h.
#include "chapters.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

// The table. Adding a chapter is adding a row here and its field in
// Optimizations, plus an entry in SWITCHES.
// ANCHOR: chapter_table
static const Chapter CHAPTERS[] = {
    {0, "00_baseline", "The FP32 baseline", NULL, "fp32"},
    {1, "01_tensor_cores", "Tensor cores (TF32)", "tensor-cores", "fp32"},
    // Chapter 02's change is the build: bf16 storage (kernels/precision.h).
    // Its switch is none; tensor-cores stays on (bf16 GEMMs use them anyway).
    {2, "02_mixed_precision", "Mixed precision (bf16)", NULL, "bf16"},
    {3, "03_sync_avoidance", "Sync avoidance", "sync-avoidance", "bf16"},
};
// ANCHOR_END: chapter_table
#define NUM_CHAPTERS ((int)(sizeof CHAPTERS / sizeof CHAPTERS[0]))

// Each switch's name and where its field lives.
typedef struct {
    const char *name;
    size_t offset;
} Switch;

static const Switch SWITCHES[] = {
    {"tensor-cores", offsetof(Optimizations, tensor_cores)},
    {"sync-avoidance", offsetof(Optimizations, sync_avoidance)},
};
#define NUM_SWITCHES ((int)(sizeof SWITCHES / sizeof SWITCHES[0]))

static int *field(Optimizations *o, const Switch *s) { return (int *)((char *)o + s->offset); }
static int value_of(const Optimizations *o, const Switch *s) {
    return *(const int *)((const char *)o + s->offset);
}

int chapter_count(void) { return NUM_CHAPTERS; }

const Chapter *chapter_get(int number) {
    for (int i = 0; i < NUM_CHAPTERS; i++)
        if (CHAPTERS[i].number == number) return &CHAPTERS[i];
    return NULL;
}

int chapter_first_of_precision(const char *precision) {
    for (int i = 0; i < NUM_CHAPTERS; i++)
        if (!strcmp(CHAPTERS[i].precision, precision)) return CHAPTERS[i].number;
    return -1;
}

static const Switch *find_switch(const char *name) {
    for (int i = 0; i < NUM_SWITCHES; i++)
        if (!strcmp(SWITCHES[i].name, name)) return &SWITCHES[i];
    return NULL;
}

Optimizations chapter_optimizations(int number) {
    Optimizations o;
    memset(&o, 0, sizeof o);
    for (int i = 0; i < NUM_CHAPTERS && CHAPTERS[i].number <= number; i++)
        if (CHAPTERS[i].switch_name) *field(&o, find_switch(CHAPTERS[i].switch_name)) = 1;
    return o;
}

int optimizations_apply_flag(Optimizations *o, const char *flag) {
    if (strncmp(flag, "--", 2) != 0) return 0;
    const char *name = flag + 2;
    int value = 1;
    if (!strncmp(name, "no-", 3)) name += 3, value = 0;
    const Switch *s = find_switch(name);
    if (!s) return 0;
    *field(o, s) = value;
    return 1;
}

void chapters_print_table(void) {
    printf("chapter  precision  switch             title\n");
    for (int i = 0; i < NUM_CHAPTERS; i++)
        printf("%7d  %-9s  %-17s  %s\n", CHAPTERS[i].number, CHAPTERS[i].precision,
               CHAPTERS[i].switch_name ? CHAPTERS[i].switch_name : "-", CHAPTERS[i].title);
}

void optimizations_print(const Optimizations *o) {
    printf("optimizations:");
    for (int i = 0; i < NUM_SWITCHES; i++)
        printf(" %s%s", value_of(o, &SWITCHES[i]) ? "+" : "-", SWITCHES[i].name);
    printf("\n");
}
