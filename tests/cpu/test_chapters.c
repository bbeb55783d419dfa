// test_chapters.c: the chapter and switch tables (common/train/chapters.h): each
// chapter adds one change to the one before it, and each names the precision
// it runs in, the trainer build (build/train_gpt2_fp32 or
// build/train_gpt2_bf16) that runs it.
#include <criterion/criterion.h>
#include <string.h>

#include "train/chapters.h"
#include "util/util.h"

// Every switch belongs to a chapter that exists, which runs in a build the
// switch means something in; every chapter but the baseline and 02 (a
// build) has a switch, exactly one but chapter 11 (whose three changes are
// measured one by one); and chapter N's optimizations are chapter N-1's with
// its switches turned on.
Test(chapters, the_switch_table_matches_the_chapters) {
    for (int i = 0; i < switch_count(); i++) {
        const Switch *s = switch_get(i);
        const Chapter *ch = chapter_get(s->chapter);
        cr_assert(ch != NULL, "switch %s: no chapter %d", s->name, s->chapter);
        cr_assert(!strcmp(s->precision, "any") || !strcmp(s->precision, ch->precision),
                  "switch %s (%s) belongs to chapter %d, which runs in %s", s->name,
                  s->precision, s->chapter, ch->precision);
        if (s->chapter != 11)
            cr_assert(chapter_switch(s->chapter) == s, "chapter %d has two switches", s->chapter);
    }
    cr_assert(switch_get(switch_count()) == NULL);
    for (int n = 0; n < chapter_count(); n++) {
        const Switch *s = chapter_switch(n);
        cr_assert((s == NULL) == (n == 0 || n == 2), "chapter %d's switch", n);
        Optimizations now = chapter_optimizations(n);
        Optimizations before = n > 0 ? chapter_optimizations(n - 1) : now;
        for (int i = 0; i < switch_count(); i++) {
            const Switch *t = switch_get(i);
            int want = t->chapter <= n;
            cr_assert_eq(switch_value(&now, t), want, "chapter %d: switch %s", n, t->name);
            if (t->chapter != n) cr_assert_eq(switch_value(&before, t), switch_value(&now, t));
        }
    }
}

// A trainer refuses the switches of the other build, naming the flag.
Test(chapters, a_switch_of_the_other_build_is_refused) {
    Optimizations o = chapter_optimizations(3);
    char err[ERR_LEN] = "";
    cr_assert_eq(optimizations_apply_flag(&o, "--no-tensor-cores", "bf16", err), -1);
    cr_assert(strstr(err, "--no-tensor-cores") && strstr(err, "fp32"), "got: %s", err);
    cr_assert_eq(optimizations_apply_flag(&o, "--no-tensor-cores", "fp32", err), 1);
    cr_assert_eq(o.tensor_cores, 0);
    cr_assert_eq(optimizations_apply_flag(&o, "--sync-avoidance", "fp32", err), 1);
    cr_assert_eq(optimizations_apply_flag(&o, "--no-such-switch", "fp32", err), 0);
    cr_assert_eq(optimizations_apply_flag(&o, "sync-avoidance", "fp32", err), 0);
}

// Chapters 00-05 keep the model's shape; 06 pads the vocabulary to 50304
// rows, 07 also ties lm_head to wte; a switch turned off undoes its part.
Test(chapters, model_switches_change_the_shape_from_chapter_06) {
    const GPT2Config base = gpt2_config_124m();
    for (int n = 0; n < chapter_count(); n++) {
        GPT2Config c = base;
        Optimizations o = chapter_optimizations(n);
        apply_model_switches(&o, &c);
        cr_assert_eq(c.padded_vocab_size, n >= 6 ? 50304 : 50257, "chapter %d", n);
        cr_assert_eq(c.tied, n >= 7, "chapter %d", n);
        GPT2Config rest = c;
        rest.padded_vocab_size = base.padded_vocab_size, rest.tied = base.tied;
        cr_assert(memcmp(&rest, &base, sizeof rest) == 0, "chapter %d changed more", n);
    }
    GPT2Config c = base;
    Optimizations seven = chapter_optimizations(7);
    char err[ERR_LEN];
    cr_assert_eq(optimizations_apply_flag(&seven, "--no-vocab-padding", "bf16", err), 1);
    apply_model_switches(&seven, &c);
    cr_assert(c.padded_vocab_size == 50257 && c.tied == 1);
    // Padding rounds up to a multiple of 128, and leaves one alone.
    GPT2Config tiny = {.max_seq_len = 32, .vocab_size = 250, .padded_vocab_size = 250,
                       .num_layers = 2, .num_heads = 4, .channels = 64, .tied = 0};
    Optimizations six = chapter_optimizations(6);
    apply_model_switches(&six, &tiny);
    cr_assert_eq(tiny.padded_vocab_size, 256);
    apply_model_switches(&six, &tiny);
    cr_assert_eq(tiny.padded_vocab_size, 256);
}

Test(chapters, numbered_in_order_with_a_precision_each) {
    for (int i = 0; i < chapter_count(); i++) {
        const Chapter *ch = chapter_get(i);
        cr_assert(ch != NULL && ch->number == i, "chapter %d missing", i);
        cr_assert(!strcmp(ch->precision, "fp32") || !strcmp(ch->precision, "bf16"),
                  "chapter %d: precision '%s'", i, ch->precision);
    }
    cr_assert(chapter_get(chapter_count()) == NULL);
}

Test(chapters, mixed_precision_is_chapter_02s_build) {
    cr_assert_str_eq(chapter_get(0)->precision, "fp32");
    cr_assert_str_eq(chapter_get(1)->precision, "fp32");
    const Chapter *ch = chapter_get(2);
    cr_assert_str_eq(ch->slug, "02_mixed_precision");
    cr_assert_str_eq(ch->precision, "bf16");
    cr_assert(chapter_switch(2) == NULL, "the precision is a build, not a switch");
    // Every later chapter keeps bf16: precision only ever changes at 02.
    for (int i = 2; i < chapter_count(); i++)
        cr_assert_str_eq(chapter_get(i)->precision, "bf16", "chapter %d", i);
    cr_assert(chapter_first_of_precision("fp32") == 0);
    cr_assert(chapter_first_of_precision("bf16") == 2);
    cr_assert(chapter_first_of_precision("fp8") == -1);
}

Test(chapters, chapter_02_keeps_chapter_01s_switches) {
    Optimizations one = chapter_optimizations(1), two = chapter_optimizations(2);
    cr_assert(memcmp(&one, &two, sizeof one) == 0, "chapter 02 changes the build, no switch");
    cr_assert(two.tensor_cores == 1);
    cr_assert(chapter_optimizations(0).tensor_cores == 0);
    char err[ERR_LEN];
    cr_assert(optimizations_apply_flag(&two, "--no-bf16", "bf16", err) == 0,
              "there is no bf16 switch");
    cr_assert(optimizations_apply_flag(&two, "--bf16", "bf16", err) == 0);
}

// Chapter 03 is chapter 02 plus one switch, sync-avoidance, in bf16; it
// changes no arithmetic, which its GPU tests prove bit for bit.
Test(chapters, chapter_03_adds_sync_avoidance) {
    const Chapter *ch = chapter_get(3);
    cr_assert(ch != NULL);
    cr_assert_str_eq(ch->slug, "03_sync_avoidance");
    cr_assert_str_eq(ch->title, "Sync avoidance");
    cr_assert_str_eq(chapter_switch(3)->name, "sync-avoidance");
    cr_assert_str_eq(ch->precision, "bf16");
    Optimizations two = chapter_optimizations(2), three = chapter_optimizations(3);
    cr_assert(two.sync_avoidance == 0 && three.sync_avoidance == 1);
    cr_assert(three.tensor_cores == 1, "chapter 03 keeps every earlier switch");
    char err[ERR_LEN];
    cr_assert(optimizations_apply_flag(&three, "--no-sync-avoidance", "bf16", err) == 1);
    cr_assert(memcmp(&two, &three, sizeof two) == 0, "--no-sync-avoidance is chapter 02");
    cr_assert(optimizations_apply_flag(&two, "--sync-avoidance", "bf16", err) == 1 &&
              two.sync_avoidance == 1);
}

// Chapter 05 is chapter 04 plus flash-attention, a switch of the bf16 build:
// its kernels run on bf16 tensor cores and have no fp32 version.
Test(chapters, chapter_05_adds_flash_attention) {
    const Chapter *ch = chapter_get(5);
    cr_assert(ch != NULL);
    cr_assert_str_eq(ch->slug, "05_flash_attention");
    cr_assert_str_eq(chapter_switch(5)->name, "flash-attention");
    cr_assert_str_eq(ch->precision, "bf16");
    Optimizations four = chapter_optimizations(4), five = chapter_optimizations(5);
    cr_assert(four.flash_attention == 0 && five.flash_attention == 1);
    char err[ERR_LEN] = "";
    cr_assert_eq(optimizations_apply_flag(&five, "--no-flash-attention", "bf16", err), 1);
    cr_assert(memcmp(&four, &five, sizeof four) == 0, "--no-flash-attention is chapter 04");
    cr_assert_eq(optimizations_apply_flag(&five, "--flash-attention", "fp32", err), -1);
    cr_assert(strstr(err, "--flash-attention"), "got: %s", err);
}

// Chapters 06 and 07 are one switch each, both a change of the model's shape
// that any build can run.
Test(chapters, chapters_06_and_07_pad_and_tie) {
    cr_assert_str_eq(chapter_get(6)->slug, "06_vocab_padding");
    cr_assert_str_eq(chapter_switch(6)->name, "vocab-padding");
    cr_assert_str_eq(chapter_get(7)->slug, "07_weight_tying");
    cr_assert_str_eq(chapter_switch(7)->name, "weight-tying");
    Optimizations o = chapter_optimizations(5);
    char err[ERR_LEN];
    cr_assert_eq(optimizations_apply_flag(&o, "--weight-tying", "fp32", err), 1);
    cr_assert_eq(optimizations_apply_flag(&o, "--vocab-padding", "fp32", err), 1);
    cr_assert(o.weight_tying == 1 && o.vocab_padding == 1);
}

// Chapter 11 is three switches, each measured alone; every other chapter
// from 03 on is one.
Test(chapters, chapter_11_has_three_switches_and_the_others_one) {
    for (int n = 0; n < chapter_count(); n++) {
        int count = 0;
        for (int i = 0; i < switch_count(); i++) count += switch_get(i)->chapter == n;
        const int want = n == 0 || n == 2 ? 0 : n == 11 ? 3 : 1;
        cr_assert_eq(count, want, "chapter %d has %d switches", n, count);
    }
    cr_assert_str_eq(chapter_switch(11)->name, "cuda-graphs");
}

// Chapter 12 is chapter 11 plus fast-attention, a switch of the bf16 build
// (its kernels, like chapter 05's, run on bf16 tensor cores); turned off, it
// is chapter 11 again.
Test(chapters, chapter_12_adds_fast_attention) {
    const Chapter *ch = chapter_get(12);
    cr_assert(ch != NULL);
    cr_assert_str_eq(ch->slug, "12_fast_attention");
    cr_assert_str_eq(ch->title, "Attention at Hopper's pace");
    cr_assert_str_eq(ch->precision, "bf16");
    cr_assert_str_eq(chapter_switch(12)->name, "fast-attention");
    cr_assert_str_eq(chapter_switch(12)->precision, "bf16");
    Optimizations eleven = chapter_optimizations(11), twelve = chapter_optimizations(12);
    cr_assert(eleven.fast_attention == 0 && twelve.fast_attention == 1);
    cr_assert(twelve.flash_attention == 1 && twelve.cuda_graphs == 1,
              "chapter 12 keeps every earlier switch");
    char err[ERR_LEN] = "";
    cr_assert_eq(optimizations_apply_flag(&twelve, "--no-fast-attention", "bf16", err), 1);
    cr_assert(memcmp(&eleven, &twelve, sizeof eleven) == 0, "--no-fast-attention is chapter 11");
    cr_assert_eq(optimizations_apply_flag(&eleven, "--fast-attention", "fp32", err), -1);
    cr_assert(strstr(err, "--fast-attention") && strstr(err, "chapter 12"), "got: %s", err);
    // The model's shape is chapter 11's.
    GPT2Config c11 = gpt2_config_124m(), c12 = c11;
    Optimizations o11 = chapter_optimizations(11), o12 = chapter_optimizations(12);
    apply_model_switches(&o11, &c11);
    apply_model_switches(&o12, &c12);
    cr_assert(memcmp(&c11, &c12, sizeof c11) == 0);
}

// Chapter 14 is chapter 13 plus fit-memory, a switch of any build (both
// recompute): it changes no kernel and no shape, only what a run over its
// memory budget does (train_gpu.c's check_memory); turned off, it is
// chapter 13.
Test(chapters, chapter_14_adds_fit_memory) {
    const Chapter *ch = chapter_get(14);
    cr_assert(ch != NULL);
    cr_assert_str_eq(ch->slug, "14_largest_model");
    cr_assert_str_eq(ch->title, "The largest GPT-2 a small card can train");
    cr_assert_str_eq(ch->precision, "bf16");
    cr_assert_str_eq(chapter_switch(14)->name, "fit-memory");
    cr_assert_str_eq(chapter_switch(14)->precision, "any");
    Optimizations thirteen = chapter_optimizations(13), fourteen = chapter_optimizations(14);
    cr_assert(thirteen.fit_memory == 0 && fourteen.fit_memory == 1);
    cr_assert(fourteen.fp8 == 1 && fourteen.adamw_8bit == 1, "chapter 14 keeps every earlier switch");
    char err[ERR_LEN] = "";
    cr_assert_eq(optimizations_apply_flag(&fourteen, "--no-fit-memory", "bf16", err), 1);
    cr_assert(memcmp(&thirteen, &fourteen, sizeof thirteen) == 0, "--no-fit-memory is chapter 13");
    Optimizations fp32 = chapter_optimizations(1);
    cr_assert_eq(optimizations_apply_flag(&fp32, "--fit-memory", "fp32", err), 1, "%s", err);
    cr_assert_eq(fp32.fit_memory, 1);
    GPT2Config c13 = gpt2_config_124m(), c14 = c13;
    Optimizations o13 = chapter_optimizations(13), o14 = chapter_optimizations(14);
    apply_model_switches(&o13, &c13);
    apply_model_switches(&o14, &c14);
    cr_assert(memcmp(&c13, &c14, sizeof c13) == 0);
}

// Chapter 15 is chapter 14 plus overlap-comm, a switch of any build: on
// several GPUs each layer's gradients are averaged over the ranks while the
// backward pass goes on; on one GPU there is nothing to average, and it is
// chapter 14 (train_gpu.c, gpt2_gpu.c's mean_layer_grads).
Test(chapters, chapter_15_adds_overlap_comm) {
    const Chapter *ch = chapter_get(15);
    cr_assert(ch != NULL);
    cr_assert_str_eq(ch->slug, "15_multi_gpu");
    cr_assert_str_eq(ch->precision, "bf16");
    cr_assert_str_eq(chapter_switch(15)->name, "overlap-comm");
    cr_assert_str_eq(chapter_switch(15)->precision, "any");
    Optimizations fourteen = chapter_optimizations(14), fifteen = chapter_optimizations(15);
    cr_assert(fourteen.overlap_comm == 0 && fifteen.overlap_comm == 1);
    char err[ERR_LEN] = "";
    cr_assert_eq(optimizations_apply_flag(&fifteen, "--no-overlap-comm", "bf16", err), 1);
    cr_assert(memcmp(&fourteen, &fifteen, sizeof fourteen) == 0, "--no-overlap-comm is 14");
}
