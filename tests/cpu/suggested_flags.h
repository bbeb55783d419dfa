// suggested_flags.h: a refusal's suggested flags (memory_budget.h's
// MemoryFix.flags), applied to the run it refused as the GPU trainer's
// command line applies them: the switches by optimizations_apply_flag, -b
// and --grad-accum by train_options_parse. The tests then plan the result
// again: a suggestion is only as good as the flags it prints.
// (tests/cpu/test_memory_budget.c; tests/gpu/test_memory_plan.c.)
#ifndef SUGGESTED_FLAGS_H
#define SUGGESTED_FLAGS_H

#include <criterion/criterion.h>
#include <string.h>

#include "train/memory_budget.h"
#include "train/train_options.h"
#include "util/util.h"

static inline RunRequest apply_suggested_flags(const RunRequest *asked, const char *flags,
                                               const char *precision) {
    char words[128], err[ERR_LEN] = "";
    snprintf(words, sizeof words, "%s", flags);
    RunRequest r = *asked;
    TrainOptions o = train_options_default();
    o.B = asked->B, o.grad_accum = asked->grad_accum, o.recompute = asked->recompute;
    o.T = o.model.max_seq_len = asked->T;  // never a suggestion's: the parser's default for T
    char *argv[16] = {"trainer"};
    int argc = 1;
    for (char *w = strtok(words, " "); w; w = strtok(NULL, " ")) {
        const int is_switch = optimizations_apply_flag(&r.switches, w, precision, err);
        cr_assert_geq(is_switch, 0, "'%s': %s", flags, err);
        if (!is_switch) {
            cr_assert_lt(argc, 16);
            argv[argc++] = w;
        }
    }
    cr_assert_eq(train_options_parse(&o, argc, argv, err), 0, "'%s': %s", flags, err);
    r.B = o.B, r.grad_accum = o.grad_accum, r.recompute = o.recompute;
    r.no_master_weights = r.no_master_weights || o.no_master_weights;
    r.update_in_backward = r.update_in_backward || o.update_in_backward;
    r.offload_optimizer = r.offload_optimizer || o.offload_optimizer;
    // --update-in-backward is only ever suggested with --grad-clip 0.
    if (o.update_in_backward) cr_assert_eq(o.grad_clip, 0.0f, "'%s' without --grad-clip 0", flags);
    return r;
}

#endif
