// gpt2_config.h: the shape of a GPT-2 model and the layout of its parameters.
//
// Every size is a parameter: the 124M model is
//   max_seq_len=1024, vocab_size=50257, num_layers=12, num_heads=12, channels=768,
// and the tests use tiny ones (for example T=32, V=256, L=2, H=4, C=64).
//
// Parameters live in ONE flat float buffer; the tensors below sit in it one
// after another, in exactly this order (llm.c's order, and the order of the
// checkpoint file). Shapes, row-major, with Vp = padded_vocab_size,
// T = max_seq_len, L = num_layers, C = channels:
//
//   0  wte       (Vp, C)     token embedding; rows >= vocab_size are padding, kept 0
//   1  wpe       (T, C)      position embedding
//   2  ln1w      (L, C)      layernorm before attention: scale
//   3  ln1b      (L, C)                                  shift
//   4  qkvw      (L, 3C, C)  attention input projection (q, k, v stacked)
//   5  qkvb      (L, 3C)
//   6  attprojw  (L, C, C)   attention output projection
//   7  attprojb  (L, C)
//   8  ln2w      (L, C)      layernorm before the MLP
//   9  ln2b      (L, C)
//  10  fcw       (L, 4C, C)  MLP up-projection
//  11  fcb       (L, 4C)
//  12  fcprojw   (L, C, 4C)  MLP down-projection
//  13  fcprojb   (L, C)
//  14  lnfw      (C)         final layernorm
//  15  lnfb      (C)
//  16  lm_head   (Vp, C)     untied models only; a tied model reuses wte
//
// Weight matrices are stored (out_features, in_features), as PyTorch's
// nn.Linear does, so y = x W^T + b.
#ifndef GPT2_CONFIG_H
#define GPT2_CONFIG_H

#include <stddef.h>

// The tensors' indices, in the order above: the host code names a tensor
// (params_of[PARAM_LNFW]), never its number.
typedef enum {
    PARAM_WTE, PARAM_WPE,
    PARAM_LN1W, PARAM_LN1B, PARAM_QKVW, PARAM_QKVB, PARAM_ATTPROJW, PARAM_ATTPROJB,
    PARAM_LN2W, PARAM_LN2B, PARAM_FCW, PARAM_FCB, PARAM_FCPROJW, PARAM_FCPROJB,
    PARAM_LNFW, PARAM_LNFB,
    PARAM_LM_HEAD,
    NUM_PARAM_TENSORS  // 17: the 16 of llm.c plus lm_head (empty when tied)
} ParamTensor;
#define LM_HEAD_INDEX PARAM_LM_HEAD

typedef struct {
    int max_seq_len;        // T_max: positions the model has embeddings for
    int vocab_size;         // V: real tokens (50257 for GPT-2)
    int padded_vocab_size;  // Vp >= V: rows of wte/lm_head (50304 from chapter 06)
    int num_layers;         // L
    int num_heads;          // H; channels must be divisible by it
    int channels;           // C
    int tied;               // 1: logits use wte (GPT-2, llm.c); 0: a separate lm_head
} GPT2Config;

// The 124M model with V=50257, unpadded and untied (chapter 00's model).
GPT2Config gpt2_config_124m(void);

// Checks that every size is positive and consistent. Returns 0, or -1 with a
// reason in err (err is ERR_LEN bytes; see util.h).
int gpt2_config_validate(const GPT2Config *cfg, char *err);

// Element counts of the 17 tensors (lm_head's is 0 when tied), and their sum.
void gpt2_param_sizes(const GPT2Config *cfg, size_t sizes[NUM_PARAM_TENSORS]);
size_t gpt2_num_params(const GPT2Config *cfg);

// The tensors' names ("wte", "wpe", ...), for messages and reports.
extern const char *const gpt2_param_names[NUM_PARAM_TENSORS];

// Weight decay applies to matrices (embeddings and linear weights), not to
// biases or layernorm parameters: the usual GPT-2 recipe.
int gpt2_param_is_decayed(int tensor_index);

#endif
