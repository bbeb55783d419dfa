// test_chapters.c: the chapter table (common/chapters.h): each row adds one
// change to the row before it, and each names the precision it runs in, the
// trainer build (build/train_gpt2_fp32 or build/train_gpt2_bf16) that runs it.
#include <criterion/criterion.h>
#include <string.h>

#include "chapters.h"

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
    cr_assert(ch->switch_name == NULL, "the precision is a build, not a switch");
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
    cr_assert(optimizations_apply_flag(&two, "--no-bf16") == 0, "there is no bf16 switch");
    cr_assert(optimizations_apply_flag(&two, "--bf16") == 0);
}

// Chapter 03 is chapter 02 plus one switch, sync-avoidance, in bf16; it
// changes no arithmetic, which its GPU tests prove bit for bit.
Test(chapters, chapter_03_adds_sync_avoidance) {
    const Chapter *ch = chapter_get(3);
    cr_assert(ch != NULL);
    cr_assert_str_eq(ch->slug, "03_sync_avoidance");
    cr_assert_str_eq(ch->title, "Sync avoidance");
    cr_assert_str_eq(ch->switch_name, "sync-avoidance");
    cr_assert_str_eq(ch->precision, "bf16");
    Optimizations two = chapter_optimizations(2), three = chapter_optimizations(3);
    cr_assert(two.sync_avoidance == 0 && three.sync_avoidance == 1);
    cr_assert(three.tensor_cores == 1, "chapter 03 keeps every earlier switch");
    cr_assert(optimizations_apply_flag(&three, "--no-sync-avoidance") == 1);
    cr_assert(memcmp(&two, &three, sizeof two) == 0, "--no-sync-avoidance is chapter 02");
    cr_assert(optimizations_apply_flag(&two, "--sync-avoidance") == 1 && two.sync_avoidance == 1);
}
