// test_memory_budget.c: the budget of --memory-limit, and the changes a
// refusal suggests (common/train/memory_budget.h), over a plan of the test's
// own whose numbers are easy to follow: each suggestion fits, is the
// smallest that does, and, its flags applied as the command line applies
// them, plans what it said. tests/gpu/test_memory_plan.c runs the same
// search over the real plan (its host suite, without a GPU).
#include <criterion/criterion.h>
#include <string.h>

#include "suggested_flags.h"
#include "train/memory_budget.h"
#include "util/util.h"

#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)

// A model of the test's own, in MiB: a fixed part, AdamW's moments (fp32,
// or 8-bit with --adamw-8bit), and activations per sequence of a
// micro-batch. As run_plan_build, it takes --grad-accum only with the fused
// optimizer (and sync avoidance).
typedef struct {
    size_t fixed, adam_fp32, adam_8bit, per_sequence;
} ToyModel;

static const ToyModel TOY = {1000, 4000, 1000, 500};

static int toy_plan(const RunRequest *r, void *arg, size_t *bytes) {
    const ToyModel *m = arg;
    if (r->grad_accum > 1 && !(r->switches.fused_optimizer && r->switches.sync_avoidance))
        return -1;
    const size_t adam = r->switches.adamw_8bit ? m->adam_8bit : m->adam_fp32;
    *bytes = (m->fixed + adam + (size_t)r->B * m->per_sequence) * MIB;
    return 0;
}

static size_t toy_bytes(const RunRequest *r) {
    size_t bytes = 0;
    cr_assert_eq(toy_plan(r, (void *)&TOY, &bytes), 0);
    return bytes;
}

// Chapter 11's switches (micro-batches planned) but the 8-bit moments off,
// or chapter 08's (no fused optimizer: no micro-batches); B=16 plans
// 1000 + 4000 + 16 x 500 = 13000 MiB.
static RunRequest asked_in(int chapter) {
    RunRequest r = {.switches = chapter_optimizations(chapter), .B = 16, .T = 1024,
                    .grad_accum = 1};
    r.switches.adamw_8bit = 0;
    return r;
}

static MemorySearch search(size_t budget_mib) {
    return (MemorySearch){toy_plan, (void *)&TOY, budget_mib * MIB, "bf16"};
}

// Every suggestion, its flags applied to the asked run, makes the run it
// says, and that run's plan fits the budget.
static void assert_fixes_fit(const RunRequest *asked, const MemorySearch *s,
                             const MemoryFix *fixes, int n) {
    for (int i = 0; i < n; i++) {
        const RunRequest r = apply_suggested_flags(asked, fixes[i].flags, s->precision);
        cr_assert_eq(r.B, fixes[i].run.B, "%s", fixes[i].flags);
        cr_assert_eq(r.grad_accum, fixes[i].run.grad_accum, "%s", fixes[i].flags);
        cr_assert(!memcmp(&r.switches, &fixes[i].run.switches, sizeof r.switches), "%s",
                  fixes[i].flags);
        cr_assert_eq(toy_bytes(&r), fixes[i].bytes, "%s", fixes[i].flags);
        cr_assert_leq(fixes[i].bytes, s->budget, "%s", fixes[i].flags);
    }
}

Test(memory_budget, the_budget_is_the_smaller_of_the_limit_and_the_free_memory) {
    MemoryBudget b = memory_budget(10 * GIB, 0);
    cr_assert_eq(b.bytes, 10 * GIB);
    cr_assert_eq(b.limit_bytes, 0);
    cr_assert_not(memory_budget_is_limit(&b));
    b = memory_budget(10 * GIB, 16);
    cr_assert_eq(b.bytes, 10 * GIB, "the GPU has less than the limit: the GPU decides");
    cr_assert_not(memory_budget_is_limit(&b));
    b = memory_budget(80 * GIB, 0.5);
    cr_assert_eq(b.bytes, GIB / 2, "fractions of a GiB");
    cr_assert(memory_budget_is_limit(&b));
    char text[160];
    memory_budget_describe(&b, text, sizeof text);
    cr_assert_str_eq(text, "the budget is 0.5 GiB (--memory-limit 0.5; the GPU has 80.0 GiB free)");
    b = memory_budget(80 * GIB, 1e-15);
    cr_assert_eq(b.bytes, 1, "a limit below a byte is still a limit");
}

// Where the 8-bit moments alone fit (10000 MiB) and half the batch in two
// micro-batches too (9000 MiB): the switch first, then the batch.
Test(memory_budget, a_switch_that_fits_comes_before_a_smaller_batch) {
    const RunRequest asked = asked_in(11);
    const MemorySearch s = search(10500);
    MemoryFix fixes[MEMORY_MAX_FIXES];
    const int n = memory_budget_fixes(&asked, &s, fixes);
    cr_assert_eq(n, 2);
    cr_assert_str_eq(fixes[0].flags, "--adamw-8bit");
    cr_assert_str_eq(fixes[1].flags, "-b 8 --grad-accum 2");
    assert_fixes_fit(&asked, &s, fixes, n);
}

// At 8000 MiB neither fits alone: -b 4 in four micro-batches does, and the
// 8-bit moments buy a larger batch, -b 8 in two, so that is suggested too.
Test(memory_budget, a_switch_with_a_smaller_batch_when_it_buys_a_larger_one) {
    const RunRequest asked = asked_in(11);
    const MemorySearch s = search(8000);
    MemoryFix fixes[MEMORY_MAX_FIXES];
    const int n = memory_budget_fixes(&asked, &s, fixes);
    cr_assert_eq(n, 2);
    cr_assert_str_eq(fixes[0].flags, "-b 4 --grad-accum 4");
    cr_assert_str_eq(fixes[1].flags, "--adamw-8bit -b 8 --grad-accum 2");
    assert_fixes_fit(&asked, &s, fixes, n);
    // Each is the largest batch that fits: one more sequence in each
    // micro-batch would not (the next divisor up does not fit either).
    RunRequest more = fixes[0].run;
    more.B = 8, more.grad_accum = 2;
    cr_assert_gt(toy_bytes(&more), s.budget);
}

// Without the fused optimizer a step cannot be split into micro-batches:
// the smaller batch is a smaller step, the largest that fits (-b 6, 8000
// MiB), and the message says the step changes.
Test(memory_budget, without_micro_batches_a_smaller_step_and_the_message_says_so) {
    const RunRequest asked = asked_in(8);
    const MemorySearch s = search(8000);
    MemoryFix fixes[MEMORY_MAX_FIXES];
    const int n = memory_budget_fixes(&asked, &s, fixes);
    cr_assert_eq(n, 2);
    cr_assert_str_eq(fixes[0].flags, "-b 6");
    cr_assert_str_eq(fixes[1].flags, "--adamw-8bit -b 12");
    assert_fixes_fit(&asked, &s, fixes, n);
    char err[ERR_LEN] = "";
    const MemoryBudget b = memory_budget(80 * GIB, 8000.0 / 1024);
    cr_assert_eq(memory_budget_refuse(&asked, &b, &s, "B=16 needs 12.7 GiB", err), -1);
    cr_assert(strstr(err, "it fits with -b 6 (about 7.8 GiB, 6 sequences a step instead of 16)"),
              "%s", err);
}

// The refusal: where the run does not fit, what it needs, the budget, and
// the suggestions in order, each with its plan and what it does to a step.
Test(memory_budget, the_refusal_names_the_limit_the_need_and_each_fix) {
    const RunRequest asked = asked_in(11);
    const MemorySearch s = search(10500);
    const MemoryBudget b = memory_budget(80 * GIB, 10500.0 / 1024);
    char err[ERR_LEN] = "";
    cr_assert_eq(memory_budget_refuse(&asked, &b, &s, "B=16, T=1024 needs about 12.7 GiB", err),
                 -1);
    cr_assert_str_eq(err, "the run does not fit in --memory-limit 10.2539: B=16, T=1024 needs "
                          "about 12.7 GiB, and the budget is 10.3 GiB (--memory-limit 10.2539; "
                          "the GPU has 80.0 GiB free): it fits with --adamw-8bit (about 9.8 GiB); "
                          "or with -b 8 --grad-accum 2 (about 8.8 GiB, the same 16 sequences a "
                          "step)");
    const MemoryBudget gpu = memory_budget(10500 * MIB, 0);
    cr_assert_eq(memory_budget_refuse(&asked, &gpu, &s, "B=16 needs", err), -1);
    cr_assert(strstr(err, "the run does not fit on the GPU: B=16 needs, and the GPU has 10.3 GiB "
                          "free: it fits with"), "%s", err);
    const MemoryBudget under = memory_budget(10500 * MIB, 16);
    cr_assert_eq(memory_budget_refuse(&asked, &under, &s, "B=16 needs", err), -1);
    cr_assert(strstr(err, "the run does not fit on the GPU: B=16 needs, and the GPU has 10.3 GiB "
                          "free, within --memory-limit 16: it fits with"), "%s", err);
}

// A refusal names as many suggestions as its message holds whole
// (ERR_LEN): never one cut short, whose flags would be wrong.
Test(memory_budget, a_long_refusal_drops_suggestions_rather_than_cut_one) {
    const RunRequest asked = asked_in(11);
    const MemorySearch s = search(10500);
    const MemoryBudget b = memory_budget(10500 * MIB, 0);
    char need[400], err[ERR_LEN] = "";
    memset(need, 'x', sizeof need - 1);
    need[sizeof need - 1] = 0;
    cr_assert_eq(memory_budget_refuse(&asked, &b, &s, need, err), -1);
    cr_assert(strstr(err, "it fits with --adamw-8bit (about 9.8 GiB)"), "%s", err);
    cr_assert_null(strstr(err, "; or with"), "%s", err);
    cr_assert_lt(strlen(err), ERR_LEN - 1);
}

// A switch already on is not suggested; micro-batches already asked for
// are split further, keeping the step's sequences.
Test(memory_budget, what_is_on_already_is_not_suggested) {
    RunRequest asked = asked_in(11);
    asked.switches.adamw_8bit = 1;
    asked.B = 8, asked.grad_accum = 2;  // 1000 + 1000 + 4000 = 6000 MiB
    const MemorySearch s = search(5000);
    MemoryFix fixes[MEMORY_MAX_FIXES];
    const int n = memory_budget_fixes(&asked, &s, fixes);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(fixes[0].flags, "-b 4 --grad-accum 4");
    assert_fixes_fit(&asked, &s, fixes, n);
}

// When not even one sequence fits with every switch on, the refusal says
// how much that would need, and what is left to try.
Test(memory_budget, when_nothing_fits_it_says_so) {
    const RunRequest asked = asked_in(11);
    const MemorySearch s = search(1500);
    MemoryFix fixes[MEMORY_MAX_FIXES];
    cr_assert_eq(memory_budget_fixes(&asked, &s, fixes), 0);
    const MemoryBudget b = memory_budget(1500 * MIB, 0);
    char err[ERR_LEN] = "";
    cr_assert_eq(memory_budget_refuse(&asked, &b, &s, "B=16 needs", err), -1);
    // (The toy plan does not count recompute, the master weights or chapter
    // 14's layer updates: they change nothing there.)
    cr_assert(strstr(err, "not even -b 1 fits (about 2.4 GiB, with --recompute block "
                          "--offload-optimizer --adamw-8bit --no-master-weights "
                          "--update-in-backward --grad-clip 0): a shorter -t, a smaller model, "
                          "or more memory"),
              "%s", err);
}

// Chapter 14's --fit-memory says in one line which level it took, what the
// run plans at it and as asked, and the budget, with what set it.
Test(memory_budget, the_fit_names_the_level_the_plan_and_the_budget) {
    RunRequest asked = asked_in(14), fitted = asked;
    fitted.recompute = RECOMPUTE_NORMS;
    char line[ERR_LEN];
    const MemoryBudget limit = memory_budget(80 * GIB, 8);
    memory_budget_describe_fit(&asked, 9050 * MIB, &fitted, 7410 * MIB, &limit, line, sizeof line);
    cr_assert_str_eq(line, "--fit-memory: --recompute norms, the cheapest level that fits: 7.24 GiB "
                           "planned (8.84 GiB with --recompute none), within the budget of 8.00 "
                           "GiB (--memory-limit 8)");
    const MemoryBudget card = memory_budget(9420 * MIB, 16);
    asked.recompute = RECOMPUTE_GELU, fitted.recompute = RECOMPUTE_BLOCK;
    memory_budget_describe_fit(&asked, 12 * GIB, &fitted, 6 * GIB, &card, line, sizeof line);
    cr_assert_str_eq(line, "--fit-memory: --recompute block, the cheapest level that fits: 6.00 GiB "
                           "planned (12.00 GiB with --recompute gelu), within the budget of 9.20 "
                           "GiB (what the GPU has free)");
}
