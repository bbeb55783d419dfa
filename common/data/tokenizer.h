// tokenizer.h: GPT-2's byte-level BPE tokenizer, encode and decode.
//
// Built from OpenAI's two files: encoder.json (token string -> id, 50257
// entries, "<|endoftext|>" = 50256) and vocab.bpe (50000 merges in rank order).
// Encoding is tiktoken's GPT-2 `encode_ordinary`: the text is split by GPT-2's
// pre-tokenization pattern
//     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// and each piece's UTF-8 bytes are merged by BPE rank. Special tokens in the
// text are ordinary text (never the end-of-text id).
// (common/data/pretokenize.h has the pattern's matcher; tools/tiktoken_reference.py
// writes tiktoken's ids for any file, for comparison.)
//
// A loaded Tokenizer is never modified: several threads may encode with the
// same one at once.
#ifndef TOKENIZER_H
#define TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef struct Tokenizer Tokenizer;

// A growable array of token ids.
typedef struct {
    int32_t *ids;
    size_t len, cap;
} TokenIds;

void token_ids_push(TokenIds *t, int32_t id);
void token_ids_free(TokenIds *t);

// Loads and validates both files. Returns NULL with a reason in err
// (ERR_LEN bytes) naming the file and what is wrong.
Tokenizer *tokenizer_load(const char *encoder_json_path, const char *vocab_bpe_path, char *err);
void tokenizer_free(Tokenizer *tok);

int tokenizer_vocab_size(const Tokenizer *tok);  // 50257
int tokenizer_eot(const Tokenizer *tok);         // the id of "<|endoftext|>"

// Appends the ids of `text` (len bytes of UTF-8) to out. Invalid UTF-8 is an
// error: returns -1 and err says at which byte offset. Returns 0 on success.
int tokenizer_encode(const Tokenizer *tok, const char *text, size_t len, TokenIds *out, char *err);

// The raw bytes of one token (not NUL-terminated); NULL for an id outside the
// vocabulary.
const uint8_t *tokenizer_token_bytes(const Tokenizer *tok, int id, size_t *len);

// Decodes text (len bytes): token ids written in decimal and separated by
// whitespace, as `build/tokenizer encode` prints them. Every id is checked
// before anything is returned: on success *bytes is a fresh buffer (free()
// it) of *n bytes; on failure it is NULL, and err names `name` (the file),
// the byte offset and the index of the bad id, and what is wrong with it.
int tokenizer_decode_ids_text(const Tokenizer *tok, const char *name, const char *text,
                              size_t len, uint8_t **bytes, size_t *n, char *err);

// Checks a vocab.bpe file against tok's vocabulary, as tokenizer_load does
// (the merges must be GPT-2's, in rank order). For tests and the fuzzer,
// which check many merge files against one vocabulary.
int tokenizer_check_merges_file(const Tokenizer *tok, const char *vocab_bpe_path, char *err);

// Prints a generated sample (n ids) between two rule lines, as the trainers
// do after training; `after_step` goes in the heading.
void tokenizer_print_sample(const Tokenizer *tok, const int32_t *ids, int n, int after_step);

#endif
