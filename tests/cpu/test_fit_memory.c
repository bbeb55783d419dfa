// test_fit_memory.c: chapter 14's exercise, --fit-memory's search for the
// cheapest --recompute level at which a run fits its memory budget
// (memory_budget_fit_recompute, common/train/memory_budget.h), over a plan
// of the test's own whose numbers are easy to follow. tests/gpu/
// test_memory_plan.c runs it over the real plan (suite memory_plan_host, no
// GPU needed), and tests/shell/test_gpu_memory_limit.sh in the trainer.
#include <criterion/criterion.h>
#include <string.h>

#include "train/memory_budget.h"

#define MIB ((size_t)1 << 20)

// A model whose activations shrink level by level, in MiB: a fixed 1000,
// and per sequence of the batch 500 without recompute, 400 with gelu, 300
// with norms and 100 with block. At B=16 it plans 9000, 7400, 5800 and 2600
// MiB. A level in `unplannable` is one its planner refuses, as
// run_plan_build refuses switches that cannot go together.
typedef struct {
    size_t fixed, per_sequence[RECOMPUTE_LEVELS];
    int unplannable[RECOMPUTE_LEVELS];
} LevelModel;

static const LevelModel MODEL = {1000, {500, 400, 300, 100}, {0}};

static int level_plan(const RunRequest *r, void *arg, size_t *bytes) {
    const LevelModel *m = arg;
    if (m->unplannable[r->recompute]) return -1;
    *bytes = (m->fixed + (size_t)r->B * m->per_sequence[r->recompute]) * MIB;
    return 0;
}

// GPT-2's shape at B=16 in chapter 14, at the level `level`.
static RunRequest asked_at(Recompute level) {
    return (RunRequest){.switches = chapter_optimizations(14), .B = 16, .T = 1024,
                        .grad_accum = 1, .recompute = level};
}

static MemorySearch search(const LevelModel *m, size_t budget_mib) {
    return (MemorySearch){level_plan, (void *)m, budget_mib * MIB, "bf16"};
}

// The search's answer, which must be "fits": its level and bytes checked.
static void assert_fits_at(const RunRequest *asked, const MemorySearch *s, Recompute want,
                           size_t want_mib) {
    RunRequest fitted;
    size_t bytes = 0;
    cr_assert_eq(memory_budget_fit_recompute(asked, s, &fitted, &bytes), 0,
                 "a budget of %zu MiB: no level found, and --recompute %s fits", s->budget / MIB,
                 recompute_name(want));
    cr_assert_eq(fitted.recompute, want, "a budget of %zu MiB: --recompute %s, expected %s",
                 s->budget / MIB, recompute_name(fitted.recompute), recompute_name(want));
    cr_assert_eq(bytes, want_mib * MIB, "the plan's bytes at --recompute %s",
                 recompute_name(want));
}

// A run that fits as asked keeps its level: the budget holds its plan to
// the byte.
Test(fit_memory, a_run_that_fits_keeps_its_level) {
    const RunRequest asked = asked_at(RECOMPUTE_NONE);
    const MemorySearch exact = search(&MODEL, 9000), roomy = search(&MODEL, 80000);
    assert_fits_at(&asked, &exact, RECOMPUTE_NONE, 9000);
    assert_fits_at(&asked, &roomy, RECOMPUTE_NONE, 9000);
}

// Over the budget, the cheapest level that fits, not a costlier one that
// fits too: at 8000 MiB gelu (7400), at 7000 norms (5800), at 3000 only
// block (2600).
Test(fit_memory, the_cheapest_level_that_fits_is_taken) {
    const RunRequest asked = asked_at(RECOMPUTE_NONE);
    const MemorySearch s8000 = search(&MODEL, 8000), s7000 = search(&MODEL, 7000),
                       s3000 = search(&MODEL, 3000);
    assert_fits_at(&asked, &s8000, RECOMPUTE_GELU, 7400);
    assert_fits_at(&asked, &s7000, RECOMPUTE_NORMS, 5800);
    assert_fits_at(&asked, &s3000, RECOMPUTE_BLOCK, 2600);
}

// A run asked for a level keeps at least that one, though a cheaper level
// would fit: the reader asked for it.
Test(fit_memory, never_below_the_level_asked_for) {
    const RunRequest norms = asked_at(RECOMPUTE_NORMS), block = asked_at(RECOMPUTE_BLOCK);
    const MemorySearch s8000 = search(&MODEL, 8000), s3000 = search(&MODEL, 3000);
    assert_fits_at(&norms, &s8000, RECOMPUTE_NORMS, 5800);
    assert_fits_at(&norms, &s3000, RECOMPUTE_BLOCK, 2600);
    assert_fits_at(&block, &s8000, RECOMPUTE_BLOCK, 2600);
}

// The level is all that changes: the batch, the micro-batches, the
// switches and the master weights are the run's as asked, so that the run
// computes the same values (recompute.h).
Test(fit_memory, only_the_level_changes) {
    RunRequest asked = asked_at(RECOMPUTE_NONE);
    asked.B = 8, asked.grad_accum = 2, asked.no_master_weights = 1;  // 1000 + 8 x 300 at norms
    const MemorySearch s = search(&MODEL, 3500);
    RunRequest fitted;
    size_t bytes = 0;
    cr_assert_eq(memory_budget_fit_recompute(&asked, &s, &fitted, &bytes), 0);
    cr_assert_eq(fitted.recompute, RECOMPUTE_NORMS);
    cr_assert_eq(bytes, 3400 * MIB);
    cr_assert_eq(fitted.B, 8);
    cr_assert_eq(fitted.T, 1024);
    cr_assert_eq(fitted.grad_accum, 2);
    cr_assert_eq(fitted.no_master_weights, 1);
    cr_assert(!memcmp(&fitted.switches, &asked.switches, sizeof asked.switches),
              "the switches changed");
}

// Where not even block fits (2600 MiB), no level is found: the trainer
// then refuses the run, naming the changes that do fit.
Test(fit_memory, when_no_level_fits_none_is_found) {
    const RunRequest asked = asked_at(RECOMPUTE_NONE);
    const MemorySearch s = search(&MODEL, 2599);
    RunRequest fitted;
    size_t bytes = 0;
    cr_assert_eq(memory_budget_fit_recompute(&asked, &s, &fitted, &bytes), -1);
}

// A level the planner cannot make is passed over, to the next that fits;
// a run it can make at no level fits at none.
Test(fit_memory, a_level_that_cannot_be_planned_is_passed_over) {
    LevelModel gaps = MODEL;
    gaps.unplannable[RECOMPUTE_GELU] = 1;
    const RunRequest asked = asked_at(RECOMPUTE_NONE);
    const MemorySearch s = search(&gaps, 8000);
    assert_fits_at(&asked, &s, RECOMPUTE_NORMS, 5800);
    LevelModel none = MODEL;
    for (int l = 0; l < RECOMPUTE_LEVELS; l++) none.unplannable[l] = 1;
    const MemorySearch nothing = search(&none, 80000);
    RunRequest fitted;
    size_t bytes = 0;
    cr_assert_eq(memory_budget_fit_recompute(&asked, &nothing, &fitted, &bytes), -1);
}
