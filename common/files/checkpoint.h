// checkpoint.h: model checkpoints, in llm.c's file format.
//
// Layout, little-endian:
//   header   256 int32   [0] = CHECKPOINT_MAGIC
//                        [1] = version: 3 = fp32 parameters (5 = bf16: not yet supported)
//                        [2] = max_seq_len   [3] = vocab_size   [4] = num_layers
//                        [5] = num_heads     [6] = channels     [7] = padded_vocab_size
//                        [8] = 1 for an untied model (lm_head appended), 0 for tied
//                        the rest zero
//   params   float32     every parameter tensor, one after another, in
//                        gpt2_config.h's order and sizes (wte has padded_vocab_size
//                        rows; lm_head is there only when untied)
// So the file is exactly 1024 + 4 * gpt2_num_params(cfg) bytes. A tied
// model's file is byte-for-byte what llm.c writes; llm.c never sets header[8].
#ifndef CHECKPOINT_H
#define CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "model/gpt2_config.h"
#include "util/util.h"

#define CHECKPOINT_MAGIC 20240326
#define CHECKPOINT_VERSION_FP32 3
#define CHECKPOINT_VERSION_BF16 5
#define CHECKPOINT_HEADER_INTS 256
#define CHECKPOINT_HEADER_BYTES (CHECKPOINT_HEADER_INTS * 4)

// Writes cfg and its gpt2_num_params(cfg) parameters to path (atomically).
// Refuses parameters that are not all finite (a diverged run), naming the
// first such tensor: the reader would refuse the file anyway.
// Returns 0, or -1 with a reason in err (ERR_LEN bytes).
int checkpoint_write(const char *path, const GPT2Config *cfg, const float *params, char *err);

// The same, up to the rename: the whole file is written and flushed under its
// temporary name (af->tmp_path). atomic_commit(af) then puts it in place, or
// atomic_abort(af) removes it. For writing a model and its training state as
// a pair (train_common.c): both finished before either appears.
int checkpoint_write_unrenamed(AtomicFile *af, const char *path, const GPT2Config *cfg,
                               const float *params, char *err);

// Reads a checkpoint: fills *cfg and sets *params to a fresh buffer of
// gpt2_num_params(cfg) floats (free() it). Checks the magic, the version, the
// untied flag, the config, the file's exact length and that every parameter
// is finite. On failure *params is NULL.
int checkpoint_read(const char *path, GPT2Config *cfg, float **params, char *err);

// Reads only the config, after the same checks of the header and of the
// file's length (not of the values): cheap, for checking a command line.
int checkpoint_read_config(const char *path, GPT2Config *cfg, char *err);

// A 64-bit fingerprint of n parameter values (of their bit patterns), by
// which a training state names the model it belongs to (train_state.h). It
// tells models apart; it is no defence against a forger.
uint64_t checkpoint_params_checksum(const float *params, size_t n);

// The same fingerprint of the parameters in the checkpoint file at path,
// read in pieces (the file is never all in memory at once).
int checkpoint_file_checksum(const char *path, uint64_t *checksum, char *err);

#endif
