// memory_budget.c: see memory_budget.h.
#include "train/memory_budget.h"

#include <stdio.h>
#include <string.h>

#include "train/train_options.h"
#include "util/util.h"

static const double GIB = 1024.0 * 1024.0 * 1024.0;

static double gib(size_t bytes) { return bytes / GIB; }

MemoryBudget memory_budget(size_t free_bytes, double limit_gib) {
    MemoryBudget b = {.bytes = free_bytes, .free_bytes = free_bytes, .limit_gib = limit_gib};
    if (limit_gib > 0) {
        b.limit_bytes = (size_t)(limit_gib * GIB);
        if (b.limit_bytes == 0) b.limit_bytes = 1;  // a limit too small for a byte is still one
        if (b.limit_bytes < b.bytes) b.bytes = b.limit_bytes;
    }
    return b;
}

int memory_budget_is_limit(const MemoryBudget *b) {
    return b->limit_bytes > 0 && b->limit_bytes < b->free_bytes;
}

void memory_budget_describe(const MemoryBudget *b, char *out, size_t cap) {
    if (memory_budget_is_limit(b))
        snprintf(out, cap, "the budget is %.1f GiB (--memory-limit %g; the GPU has %.1f GiB free)",
                 gib(b->bytes), b->limit_gib, gib(b->free_bytes));
    else if (b->limit_bytes > 0)
        snprintf(out, cap, "the GPU has %.1f GiB free, within --memory-limit %g",
                 gib(b->free_bytes), b->limit_gib);
    else
        snprintf(out, cap, "the GPU has %.1f GiB free", gib(b->free_bytes));
}

// ---- the changes a refusal may suggest ------------------------------------------

// 1 when run r can be planned and its plan fits the budget; its bytes in *bytes.
static int fits(const MemorySearch *s, const RunRequest *r, size_t *bytes) {
    return s->plan(r, s->arg, bytes) == 0 && *bytes <= s->budget;
}

// A switch turned on as the command line turns it on (optimizations_apply_flag):
// 0, or -1 when it is on already or is a switch of the other build.
static int switch_on(RunRequest *r, const char *flag, const char *precision) {
    const Optimizations before = r->switches;
    char err[ERR_LEN];
    if (optimizations_apply_flag(&r->switches, flag, precision, err) != 1) return -1;
    return memcmp(&before, &r->switches, sizeof before) ? 0 : -1;  // all ints: no padding
}

// --recompute LEVEL, as the row's flag names it, where it recomputes more
// than the run asked for: 0, or -1 when the run already recomputes as much.
static int recompute_more(RunRequest *r, const char *flag, const char *precision) {
    (void)precision;  // both builds recompute
    Recompute level;
    if (recompute_from_name(flag + strcspn(flag, " ") + 1, &level) || level <= r->recompute)
        return -1;
    r->recompute = level;
    return 0;
}

// --no-master-weights, where the run keeps them and the build has them: 0,
// or -1. (The plan refuses it without --fused-optimizer: never suggested there.)
static int drop_master_weights(RunRequest *r, const char *flag, const char *precision) {
    (void)flag;
    if (r->no_master_weights || strcmp(precision, "bf16") != 0) return -1;
    r->no_master_weights = 1;
    return 0;
}

// --offload-optimizer (chapter 14), where the run keeps its moments on the
// GPU: 0, or -1. (The plan refuses it without --fused-optimizer: never
// suggested there.)
static int offload_moments(RunRequest *r, const char *flag, const char *precision) {
    (void)flag, (void)precision;
    if (r->offload_optimizer) return -1;
    r->offload_optimizer = 1;
    return 0;
}

// --update-in-backward --grad-clip 0 (chapter 14), where the run updates
// after its backward pass: 0, or -1. (The plan refuses it with micro-batches
// or without --fused-optimizer: never suggested there.)
static int update_in_backward(RunRequest *r, const char *flag, const char *precision) {
    (void)flag, (void)precision;
    if (r->update_in_backward) return -1;
    r->update_in_backward = 1;
    return 0;
}

typedef struct {
    const char *flag;  // as the command line writes it
    int (*apply)(RunRequest *r, const char *flag, const char *precision);
} SwitchFix;

// ANCHOR: switch_fixes
// The switches a refusal may turn on, the smallest change first: each keeps
// the batch, and so every step's tokens. Rows of one flag with different
// values are its levels, the cheapest first: once one fits, the costlier
// ones are not suggested (is_costlier_level).
static const SwitchFix SWITCH_FIXES[] = {
    // Chapter 14: activations computed again in the backward pass, a row per
    // level, the cheapest first; before --adamw-8bit, since they compute the
    // same values again where the 8-bit moments round the state.
    {"--recompute gelu", recompute_more},
    {"--recompute norms", recompute_more},
    {"--recompute block", recompute_more},
    // Chapter 14: the layers' moments on the host; the same values too, at
    // the cost of the bus.
    {"--offload-optimizer", offload_moments},
    // Chapter 10: the weight matrices' moments in one byte each.
    {"--adamw-8bit", switch_on},
    // Chapter 14: no fp32 master weights, the update rounded stochastically
    // into the bf16 ones; then one layer's gradients, at the cost of the
    // clipping: last, since they change the values the run computes.
    {"--no-master-weights", drop_master_weights},
    {"--update-in-backward --grad-clip 0", update_in_backward},
};
// ANCHOR_END: switch_fixes
#define NUM_SWITCH_FIXES ((int)(sizeof SWITCH_FIXES / sizeof SWITCH_FIXES[0]))

// 1 when rows i and j set the same flag ("--recompute gelu", "--recompute
// block"): its levels, in the table's order.
static int same_flag(int i, int j) {
    const char *a = SWITCH_FIXES[i].flag, *b = SWITCH_FIXES[j].flag;
    const size_t n = strcspn(a, " ");
    return n == strcspn(b, " ") && !strncmp(a, b, n);
}

// 1 when row i is a costlier level of a flag whose cheaper level fits.
static int is_costlier_level(int i, const int fits_alone[]) {
    for (int j = 0; j < i; j++)
        if (fits_alone[j] && same_flag(i, j)) return 1;
    return 0;
}

// The largest b < B whose run fits with --grad-accum making up the same
// sequences a step (b divides them), into *out: where the plan takes
// micro-batches (chapter 11), the same step in less memory. -1 when none.
static int split_batch(const MemorySearch *s, const RunRequest *r, RunRequest *out,
                       size_t *bytes) {
    const int sequences = r->B * r->grad_accum;
    for (int b = r->B - 1; b >= 1; b--) {
        RunRequest t = *r;
        t.B = b;
        t.grad_accum = sequences / b;
        if (sequences % b == 0 && t.grad_accum <= GRAD_ACCUM_MAX && fits(s, &t, bytes)) {
            *out = t;
            return 0;
        }
    }
    return -1;
}

// The largest b < B whose run fits with the micro-batches as asked: fewer
// sequences a step, another run, where the plan cannot take more of them.
static int shrink_batch(const MemorySearch *s, const RunRequest *r, RunRequest *out,
                        size_t *bytes) {
    for (int b = r->B - 1; b >= 1; b--) {
        RunRequest t = *r;
        t.B = b;
        if (fits(s, &t, bytes)) {
            *out = t;
            return 0;
        }
    }
    return -1;
}

static int smaller_batch(const MemorySearch *s, const RunRequest *r, RunRequest *out,
                         size_t *bytes) {
    return split_batch(s, r, out, bytes) == 0 ? 0 : shrink_batch(s, r, out, bytes);
}

static void batch_flags(const RunRequest *asked, const RunRequest *r, char *out, size_t cap) {
    if (r->grad_accum != asked->grad_accum)
        snprintf(out, cap, "-b %d --grad-accum %d", r->B, r->grad_accum);
    else
        snprintf(out, cap, "-b %d", r->B);
}

// The rows of `mask` (bit i: SWITCH_FIXES[i]) applied to t in the table's
// order: 1, or 0 when one of them is on already or two are levels of one
// flag.
static int apply_rows(int mask, RunRequest *t, const char *precision) {
    for (int i = 0; i < NUM_SWITCH_FIXES; i++) {
        if (!(mask >> i & 1)) continue;
        for (int j = 0; j < i; j++)
            if ((mask >> j & 1) && same_flag(i, j)) return 0;
        if (SWITCH_FIXES[i].apply(t, SWITCH_FIXES[i].flag, precision)) return 0;
    }
    return 1;
}

static int rows_in(int mask) {
    int n = 0;
    for (; mask; mask &= mask - 1) n++;
    return n;
}

// Where no one switch fits: the fewest of the table's switches that fit
// together; of as many, the earliest rows (the cheapest levels, the changes
// that keep the values). Their flags into `flags`; 0, or -1 when none do.
static int switches_together(const RunRequest *asked, const MemorySearch *s, RunRequest *out,
                             char *flags, size_t cap, size_t *bytes) {
    int best = 0;
    for (int mask = 1; mask < 1 << NUM_SWITCH_FIXES; mask++) {
        const int n = rows_in(mask), diff = mask ^ best;
        if (n < 2 || (best && (n > rows_in(best) || (n == rows_in(best) &&
                                                     !(diff & -diff & mask)))))
            continue;  // more rows than the best, or as many and later ones
        RunRequest t = *asked;
        size_t b;
        if (apply_rows(mask, &t, s->precision) && fits(s, &t, &b))
            best = mask, *out = t, *bytes = b;
    }
    if (!best) return -1;
    size_t len = 0;
    flags[0] = 0;
    for (int i = 0; i < NUM_SWITCH_FIXES && len < cap; i++)
        if (best >> i & 1)
            len += (size_t)snprintf(flags + len, cap - len, "%s%s", len ? " " : "",
                                    SWITCH_FIXES[i].flag);
    return 0;
}

static void add_fix(MemoryFix *fixes, int *n, const char *sw, const char *batch,
                    const RunRequest *r, size_t bytes) {
    if (*n == MEMORY_MAX_FIXES) return;
    MemoryFix *f = &fixes[(*n)++];
    snprintf(f->flags, sizeof f->flags, "%s%s%s", sw, sw[0] && batch[0] ? " " : "", batch);
    f->run = *r;
    f->bytes = bytes;
}

// ANCHOR: memory_budget_fixes
int memory_budget_fixes(const RunRequest *asked, const MemorySearch *s,
                        MemoryFix fixes[MEMORY_MAX_FIXES]) {
    int n = 0;
    size_t bytes;
    char batch[48];
    RunRequest t, smaller;
    // 1. One switch, the batch kept.
    int fits_alone[NUM_SWITCH_FIXES];
    for (int i = 0; i < NUM_SWITCH_FIXES; i++) {
        t = *asked;
        fits_alone[i] = SWITCH_FIXES[i].apply(&t, SWITCH_FIXES[i].flag, s->precision) == 0 &&
                        fits(s, &t, &bytes);
        if (fits_alone[i] && !is_costlier_level(i, fits_alone))
            add_fix(fixes, &n, SWITCH_FIXES[i].flag, "", &t, bytes);
    }
    // 1b. Where none fits alone: the fewest switches that fit together.
    char together[sizeof fixes[0].flags];
    if (n == 0 && switches_together(asked, s, &t, together, sizeof together, &bytes) == 0)
        add_fix(fixes, &n, together, "", &t, bytes);
    // 2. A smaller batch.
    int batch_alone = 0;
    if (smaller_batch(s, asked, &smaller, &bytes) == 0) {
        batch_flags(asked, &smaller, batch, sizeof batch);
        add_fix(fixes, &n, "", batch, &smaller, bytes);
        batch_alone = smaller.B;
    }
    // 3. A switch with a smaller batch, where the switch buys a larger batch.
    for (int i = 0; i < NUM_SWITCH_FIXES; i++) {
        t = *asked;
        if (fits_alone[i] || SWITCH_FIXES[i].apply(&t, SWITCH_FIXES[i].flag, s->precision))
            continue;
        if (smaller_batch(s, &t, &smaller, &bytes) || smaller.B <= batch_alone) continue;
        batch_flags(asked, &smaller, batch, sizeof batch);
        add_fix(fixes, &n, SWITCH_FIXES[i].flag, batch, &smaller, bytes);
    }
    return n;
}
// ANCHOR_END: memory_budget_fixes

// What a fix does to the step: "the same 16 sequences a step", or "8
// sequences a step instead of 16" (another run), or nothing (a switch).
static void fix_effect(const RunRequest *asked, const MemoryFix *f, char *out, size_t cap) {
    const int want = asked->B * asked->grad_accum, got = f->run.B * f->run.grad_accum;
    out[0] = 0;
    if (f->run.B == asked->B) return;
    if (got == want) snprintf(out, cap, ", the same %d sequences a step", want);
    else snprintf(out, cap, ", %d sequences a step instead of %d", got, want);
}

// "it fits with A (about X GiB); or with B (...)".
static void describe_fixes(const RunRequest *asked, const MemoryFix *fixes, int n, char *out,
                           size_t cap) {
    size_t len = 0;
    for (int i = 0; i < n && len < cap; i++) {
        char effect[64];
        fix_effect(asked, &fixes[i], effect, sizeof effect);
        len += (size_t)snprintf(out + len, cap - len, "%s %s (about %.1f GiB%s)",
                                i ? "; or with" : "it fits with", fixes[i].flags,
                                gib(fixes[i].bytes), effect);
    }
}

// When nothing fits: what -b 1 needs, with every switch the table may turn on.
static void describe_no_fix(const RunRequest *asked, const MemorySearch *s, char *out,
                            size_t cap) {
    RunRequest one = *asked;
    one.B = 1;
    char with[160] = "";
    size_t len = 0;
    for (int i = 0; i < NUM_SWITCH_FIXES && len < sizeof with; i++) {
        const int last_level = i + 1 == NUM_SWITCH_FIXES || !same_flag(i, i + 1);
        if (SWITCH_FIXES[i].apply(&one, SWITCH_FIXES[i].flag, s->precision) == 0 && last_level)
            len += (size_t)snprintf(with + len, sizeof with - len, "%s%s", len ? " " : ", with ",
                                    SWITCH_FIXES[i].flag);
    }
    size_t bytes = 0;
    if (s->plan(&one, s->arg, &bytes)) {  // the switches together cannot be planned: without
        with[0] = 0;
        one = *asked;
        one.B = 1;
        if (s->plan(&one, s->arg, &bytes)) bytes = 0;
    }
    snprintf(out, cap, "not even -b 1 fits (about %.1f GiB%s): a shorter -t, a smaller model, "
                       "or more memory", gib(bytes), with);
}

int memory_budget_refuse(const RunRequest *asked, const MemoryBudget *b, const MemorySearch *s,
                         const char *need, char *err) {
    char where[48], have[160], advice[ERR_LEN];
    if (memory_budget_is_limit(b))
        snprintf(where, sizeof where, "in --memory-limit %g", b->limit_gib);
    else
        snprintf(where, sizeof where, "on the GPU");
    memory_budget_describe(b, have, sizeof have);
    MemoryFix fixes[MEMORY_MAX_FIXES];
    int n = memory_budget_fixes(asked, s, fixes);
    if (n == 0) describe_no_fix(asked, s, advice, sizeof advice);
    // As many suggestions as the message holds whole: a cut one would name
    // flags that do not fit.
    for (; n > 0; n--) {
        describe_fixes(asked, fixes, n, advice, sizeof advice);
        if (snprintf(NULL, 0, "the run does not fit %s: %s, and %s: %s", where, need, have,
                     advice) < ERR_LEN)
            break;
    }
    return fail(err, "the run does not fit %s: %s, and %s: %s", where, need, have, advice);
}

// ---- chapter 14: --fit-memory ------------------------------------------------------
// (The search itself, memory_budget_fit_recompute, is chapter 14's exercise:
// solutions/14_largest_model/fit_recompute.c.)

// "--memory-limit 8", or "what the GPU has free": what set the budget.
static void budget_source(const MemoryBudget *b, char *out, size_t cap) {
    if (memory_budget_is_limit(b)) snprintf(out, cap, "--memory-limit %g", b->limit_gib);
    else snprintf(out, cap, "what the GPU has free");
}

void memory_budget_describe_fit(const RunRequest *asked, size_t asked_bytes,
                                const RunRequest *fitted, size_t bytes, const MemoryBudget *b,
                                char *out, size_t cap) {
    char source[64];
    budget_source(b, source, sizeof source);
    snprintf(out, cap, "--fit-memory: --recompute %s, the cheapest level that fits: %.2f GiB "
                       "planned (%.2f GiB with --recompute %s), within the budget of %.2f GiB (%s)",
             recompute_name(fitted->recompute), gib(bytes), gib(asked_bytes),
             recompute_name(asked->recompute), gib(b->bytes), source);
}
