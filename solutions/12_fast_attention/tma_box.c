// tma_box.c: chapter 12's exercise: the TMA's description of one head's
// tiles (common/gpu/tma_box.h says what it must hold). solutions/12_fast_attention/
// has it complete; exercises/12_fast_attention/ has its body cut out.
#include "gpu/tma_box.h"

#include <string.h>

#include "exercise.h"
#include "util/util.h"

#define BF16_BYTES 2

// ANCHOR: tma_box
int tma_box_for_heads(TmaBox *box, int B, int T, int width, int ld, int head_size, int rows,
                      char *err) {
    if (B < 1 || T < 1 || width < 1 || head_size < 1 || rows < 1)
        return fail(err, "TMA box: B=%d, T=%d, width=%d, head size %d, %d rows: each must be "
                         "at least 1", B, T, width, head_size, rows);
    if (width > ld || width % head_size != 0)
        return fail(err, "TMA box: %d values a row in rows of %d, heads of %d: the values must "
                         "fit the row and be whole heads", width, ld, head_size);
    // EXERCISE BEGIN: the limits first (rows 16-byte aligned and below 2^40 bytes, the box 1..256 in each dimension, its rows a multiple of 16 bytes and at most the 128-byte swizzle), then dims = {width, T, B}, strides = {ld, T*ld} in bytes, box = {head_size, rows, 1}
    // EXERCISE STUB: memset(box, 0, sizeof *box);  // an empty description, which cuTensorMapEncodeTiled refuses
    const uint64_t row_bytes = (uint64_t)ld * BF16_BYTES, sequence_bytes = row_bytes * T;
    if (row_bytes % TMA_STRIDE_ALIGN != 0)
        return fail(err, "TMA box: rows of %d bf16 values are %llu bytes apart, not a multiple "
                         "of %d", ld, (unsigned long long)row_bytes, TMA_STRIDE_ALIGN);
    if (sequence_bytes >= TMA_STRIDE_LIMIT)
        return fail(err, "TMA box: sequences %llu bytes apart, past the TMA's 2^40",
                    (unsigned long long)sequence_bytes);
    if (head_size > TMA_BOX_LIMIT || rows > TMA_BOX_LIMIT)
        return fail(err, "TMA box: a box of %d x %d, past the TMA's %d in a dimension", rows,
                    head_size, TMA_BOX_LIMIT);
    const int box_row_bytes = head_size * BF16_BYTES;
    if (box_row_bytes % TMA_STRIDE_ALIGN != 0 || box_row_bytes > TMA_SWIZZLE_BYTES)
        return fail(err, "TMA box: a head of %d bf16 values is %d bytes, and the 128-byte "
                         "swizzle wants a multiple of %d up to %d", head_size, box_row_bytes,
                    TMA_STRIDE_ALIGN, TMA_SWIZZLE_BYTES);
    *box = (TmaBox){.dims = {(uint64_t)width, (uint64_t)T, (uint64_t)B},
                    .strides = {row_bytes, sequence_bytes},
                    .box = {(uint32_t)head_size, (uint32_t)rows, 1}};
    // EXERCISE END
    // EXERCISE LAUNCH-CHECK: the TMA's description of a head's tiles
    return 0;
}
// ANCHOR_END: tma_box
