// GENERATED from solutions/07_weight_tying/untie.c by tools/make_exercises.py.
// Yours to write: the regions marked TODO(exercise 07_weight_tying); what to do and
// how to test it: exercises/07_weight_tying/README.md.
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
    // TODO(exercise 07_weight_tying): the tied model's tensors come first in the same order; the untied model appends lm_head: a copy of wte (the first wte floats of src)
    // Replace this stub, which makes the tests fail, with your code.
    (void)src, (void)wte;
    memset(untied, 0, n * sizeof(float));  // no weights at all: every test fails
    // TODO(exercise 07_weight_tying): delete this call once the code above is written.
    exercise_unfinished("07_weight_tying", "untie a model",
                        "the tied model's tensors come first in the same order; the untied model appends lm_head: a copy of wte (the first wte floats of src)");
}
// ANCHOR_END: untie

// ANCHOR: grads_tie
void gpt2_grads_tie(const GPT2Config *tied, const float *untied_grads, float *tied_grads) {
    const size_t n = gpt2_num_params(tied);
    const size_t wte = (size_t)tied->padded_vocab_size * tied->channels;
    // TODO(exercise 07_weight_tying): copy the 16 tensors' gradients, then add lm_head's (the wte floats after them in untied_grads) into wte's: both uses of the shared tensor
    // Replace this stub, which makes the tests fail, with your code.
    (void)untied_grads, (void)wte;
    memset(tied_grads, 0, n * sizeof(float));  // no gradient: every test fails
    // TODO(exercise 07_weight_tying): delete this call once the code above is written.
    exercise_unfinished("07_weight_tying", "the tied gradient",
                        "copy the 16 tensors' gradients, then add lm_head's (the wte floats after them in untied_grads) into wte's: both uses of the shared tensor");
}
// ANCHOR_END: grads_tie
