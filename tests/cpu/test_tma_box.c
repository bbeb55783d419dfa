// test_tma_box.c: chapter 12's description of a head's tiles to the TMA
// (common/gpu/tma_box.h), the exercise of chapter 12: the numbers that
// cuTensorMapEncodeTiled takes for qkv and dout at GPT-2's shapes, and the
// tensors the TMA cannot copy refused, saying why.
#include <criterion/criterion.h>
#include <string.h>

#include "gpu/tma_box.h"
#include "util/util.h"

static TmaBox describe(int B, int T, int width, int ld) {
    TmaBox box;
    memset(&box, 0xab, sizeof box);
    char err[ERR_LEN] = "";
    cr_assert_eq(tma_box_for_heads(&box, B, T, width, ld, 64, 64, err), 0, "refused: %s", err);
    return box;
}

// qkv (B,T,3C) at 124M's C = 768: q, k and v are one tensor 2304 wide.
Test(tma_box, qkv_at_gpt2_shapes) {
    const TmaBox box = describe(64, 1024, 2304, 2304);
    cr_assert_eq(box.dims[0], 2304);
    cr_assert_eq(box.dims[1], 1024);
    cr_assert_eq(box.dims[2], 64);
    cr_assert_eq(box.strides[0], 2304 * 2, "a row is 2304 bf16 values, 4608 bytes");
    cr_assert_eq(box.strides[1], 1024ull * 2304 * 2, "a sequence is T rows");
    cr_assert_eq(box.box[0], 64);
    cr_assert_eq(box.box[1], 64);
    cr_assert_eq(box.box[2], 1, "one sequence at a time");
}

// dout (B,T,C), and an odd T: the box does not need T to be a multiple of
// its rows (the TMA fills the rows past T with zeros).
Test(tma_box, dout_and_an_odd_t) {
    const TmaBox box = describe(3, 1000, 768, 768);
    cr_assert_eq(box.dims[0], 768);
    cr_assert_eq(box.dims[1], 1000);
    cr_assert_eq(box.dims[2], 3);
    cr_assert_eq(box.strides[0], 1536);
    cr_assert_eq(box.strides[1], 1000ull * 1536);
}

// A narrower view of wider rows: width < ld is fine.
Test(tma_box, a_view_of_wider_rows) {
    const TmaBox box = describe(2, 16, 128, 384);
    cr_assert_eq(box.dims[0], 128);
    cr_assert_eq(box.strides[0], 768);
}

static void refused(int B, int T, int width, int ld, int head_size, int rows,
                    const char *why) {
    TmaBox box;
    char err[ERR_LEN] = "";
    cr_assert_eq(tma_box_for_heads(&box, B, T, width, ld, head_size, rows, err), -1,
                 "accepted B=%d T=%d width=%d ld=%d head %d rows %d", B, T, width, ld,
                 head_size, rows);
    cr_assert(strstr(err, why), "the reason '%s' does not say '%s'", err, why);
}

// What the TMA cannot do, refused before the driver sees it.
Test(tma_box, refuses_what_the_tma_cannot_copy) {
    refused(0, 1024, 768, 768, 64, 64, "at least 1");
    refused(4, 0, 768, 768, 64, 64, "at least 1");
    refused(4, 64, 800, 768, 64, 64, "fit the row");          // wider than the row
    refused(4, 64, 96, 96, 64, 64, "whole heads");             // 1.5 heads
    refused(4, 64, 64, 68, 64, 64, "multiple of 16");          // rows 136 bytes apart
    refused(4, 64, 128, 128, 128, 64, "swizzle");              // a head of 256 bytes
    refused(4, 64, 24, 24, 4, 64, "multiple of 16");           // a head of 8 bytes
}

// Heads of 32 (64 bytes a row of the box) fit the swizzle too.
Test(tma_box, heads_of_32) {
    TmaBox box;
    char err[ERR_LEN] = "";
    cr_assert_eq(tma_box_for_heads(&box, 4, 64, 96, 96, 32, 64, err), 0, "refused: %s", err);
    cr_assert_eq(box.box[0], 32);
}

Test(tma_box, refuses_boxes_past_256) {
    refused(4, 1024, 768, 768, 64, 512, "256");
}

// Sequences 2^40 bytes apart or more: T * ld * 2 >= 2^40.
Test(tma_box, refuses_sequences_past_2_to_the_40) {
    refused(2, 1 << 30, 1024, 1024, 64, 64, "2^40");
}
