// model_shape.h: a model's parameters moved between the shapes that
// chapters 06 and 07 give it, without changing the function it computes.
//
//   - Padding (chapter 06): wte and lm_head get rows past the vocabulary,
//     vocab_size .. padded_vocab_size - 1, that are zeros. No token is
//     embedded with them, and the logits they make are never read, so a
//     model with more or fewer such rows computes the same thing.
//     gpt2_params_repad moves a model from one padding to another; the
//     trainer uses it to start chapter 06 and later from a checkpoint of
//     another padding (--init-from).
//   - Tying (chapter 07): a tied model makes its logits with wte, an untied
//     one with its own lm_head. An untied model whose lm_head is a copy of
//     wte computes the same logits as the tied one, and its two gradients
//     add up to the tied model's one: the tied wte is used twice, and the
//     gradient of a shared tensor is the sum of the gradients of its uses.
//     gpt2_params_untie and gpt2_grads_tie are those two facts in code.
//
// Layouts as gpt2_config.h: one flat buffer of gpt2_num_params(cfg) floats.
// These functions are chapters 06's and 07's exercises:
// solutions/06_vocab_padding/repad.c and solutions/07_weight_tying/untie.c.
#ifndef MODEL_SHAPE_H
#define MODEL_SHAPE_H

#include "model/gpt2_config.h"

// dst (a model of shape `to`) = src (of shape `from`), `to` differing from
// `from` in padded_vocab_size alone: every tensor copied, but wte and (when
// untied) lm_head row by row, their first vocab_size rows copied and the
// rest of dst's rows zeros. Returns 0; or -1, with a reason in err
// (ERR_LEN bytes) naming the tensor and the row, when a row that `to` has
// no room for is not zero (dropping it would change the model).
int gpt2_params_repad(const GPT2Config *from, const float *src, const GPT2Config *to, float *dst,
                      char *err);

// untied (a model of shape `tied` with tied = 0) = tied's parameters, with
// lm_head a copy of wte: the same logits from the same weights.
void gpt2_params_untie(const GPT2Config *tied, const float *src, float *untied);

// The tied model's gradient from the untied one's, at a point where lm_head
// is wte: every tensor's gradient copied, and wte's the sum of the untied
// wte's and lm_head's. `tied` is the tied model's shape; untied_grads has
// the untied layout (lm_head last), tied_grads the tied one.
void gpt2_grads_tie(const GPT2Config *tied, const float *untied_grads, float *tied_grads);

#endif
