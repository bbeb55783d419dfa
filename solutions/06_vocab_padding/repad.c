// repad.c: chapter 06's exercise: a model's parameters from one padding of
// the vocabulary to another (common/model/model_shape.h says what it must do).
// solutions/06_vocab_padding/ has it complete, and the GPU trainer runs it
// when a chapter's padding differs from its checkpoint's (--init-from);
// exercises/06_vocab_padding/ has the body of copy_vocab_rows cut out.
#include <string.h>

#include "exercise.h"
#include "model/model_shape.h"
#include "util/util.h"

// ANCHOR: copy_vocab_rows
// One (rows, C) vocabulary tensor, from src_rows rows to dst_rows: the
// first V rows are the vocabulary's and are copied; dst's rows past them
// are zeros; a row of src past dst_rows that is not all zeros cannot be
// dropped. Returns the first such row, or -1.
static long copy_vocab_rows(float *dst, int dst_rows, const float *src, int src_rows, int V,
                            int C) {
    long first_kept = -1;  // the first row of src past dst_rows that is not zero
    // EXERCISE BEGIN: copy the V vocabulary rows, zero dst's rows from V to dst_rows, and set first_kept to the first row of src at or past dst_rows with a non-zero value (-1 when there is none)
    // EXERCISE STUB: (void)src, (void)src_rows, (void)V;
    // EXERCISE STUB: for (size_t i = 0; i < (size_t)dst_rows * C; i++) dst[i] = 1e30f;  // not a model: every test fails
    memcpy(dst, src, (size_t)V * C * sizeof(float));
    memset(dst + (size_t)V * C, 0, (size_t)(dst_rows - V) * C * sizeof(float));
    for (long r = dst_rows; r < src_rows && first_kept < 0; r++)
        for (int c = 0; c < C; c++)
            if (src[r * C + c] != 0.0f) {
                first_kept = r;
                break;
            }
    // EXERCISE END
    // EXERCISE LAUNCH-CHECK: the rows of the vocabulary, padded
    return first_kept;
}
// ANCHOR_END: copy_vocab_rows

int gpt2_params_repad(const GPT2Config *from, const float *src, const GPT2Config *to, float *dst,
                      char *err) {
    size_t src_sizes[NUM_PARAM_TENSORS], dst_sizes[NUM_PARAM_TENSORS];
    gpt2_param_sizes(from, src_sizes);
    gpt2_param_sizes(to, dst_sizes);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        if (i == PARAM_WTE || i == PARAM_LM_HEAD) {
            if (dst_sizes[i] == 0) continue;  // a tied model's lm_head
            long r = copy_vocab_rows(dst, to->padded_vocab_size, src, from->padded_vocab_size,
                                     from->vocab_size, from->channels);
            if (r >= 0)
                return fail(err, "%s row %ld (past the vocabulary of %d) is not zero: it cannot "
                                 "be dropped to pad the vocabulary to %d rows",
                            gpt2_param_names[i], r, from->vocab_size, to->padded_vocab_size);
        } else {
            memcpy(dst, src, src_sizes[i] * sizeof(float));
        }
        src += src_sizes[i];
        dst += dst_sizes[i];
    }
    return 0;
}
