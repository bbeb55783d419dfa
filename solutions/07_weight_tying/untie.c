// untie.c: chapter 07's exercise: a tied model as an untied one computing
// the same logits, and the tied model's gradient from the untied one's
// (common/model/model_shape.h says what each must do). solutions/07_weight_tying/
// has them complete; exercises/07_weight_tying/ has their bodies cut out.
#include <string.h>

#include "exercise.h"
#include "model/model_shape.h"

// ANCHOR: untie
void gpt2_params_untie(const GPT2Config *tied, const float *src, float *untied) {
    const size_t n = gpt2_num_params(tied);  // the 16 tensors, lm_head absent
    const size_t wte = (size_t)tied->padded_vocab_size * tied->channels;
    // EXERCISE BEGIN: the tied model's tensors come first in the same order; the untied model appends lm_head: a copy of wte (the first wte floats of src)
    // EXERCISE STUB: (void)src, (void)wte;
    // EXERCISE STUB: memset(untied, 0, n * sizeof(float));  // no weights at all: every test fails
    memcpy(untied, src, n * sizeof(float));
    memcpy(untied + n, src, wte * sizeof(float));
    // EXERCISE END
    // EXERCISE LAUNCH-CHECK: untie a model
}
// ANCHOR_END: untie

// ANCHOR: grads_tie
void gpt2_grads_tie(const GPT2Config *tied, const float *untied_grads, float *tied_grads) {
    const size_t n = gpt2_num_params(tied);
    const size_t wte = (size_t)tied->padded_vocab_size * tied->channels;
    // EXERCISE BEGIN: copy the 16 tensors' gradients, then add lm_head's (the wte floats after them in untied_grads) into wte's: both uses of the shared tensor
    // EXERCISE STUB: (void)untied_grads, (void)wte;
    // EXERCISE STUB: memset(tied_grads, 0, n * sizeof(float));  // no gradient: every test fails
    memcpy(tied_grads, untied_grads, n * sizeof(float));
    const float *lm_head = untied_grads + n;
    for (size_t i = 0; i < wte; i++) tied_grads[i] += lm_head[i];
    // EXERCISE END
    // EXERCISE LAUNCH-CHECK: the tied gradient
}
// ANCHOR_END: grads_tie
