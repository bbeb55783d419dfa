// pretokenize.h: GPT-2's pre-tokenization, the step before BPE.
//
// GPT-2 never merges bytes across the boundaries of the "pieces" that this
// regular expression finds in the text (tiktoken's r50k/gpt2 pattern):
//
//     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// We do not run a regex engine: pretokenize_next() is a small hand-written
// matcher over code points that tries the alternatives in this order, as a
// backtracking engine (tiktoken uses Rust's fancy-regex) does, and returns
// the first one that matches. The character classes are
//   \s     Unicode White_Space: the 25 code points U+0009..U+000D, U+0020,
//          U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F,
//          U+205F, U+3000
//   \p{L}  general category L* (Lu Ll Lt Lm Lo), from utf8proc
//   \p{N}  general category N* (Nd Nl No), from utf8proc
// and every other code point (punctuation, symbols, emoji, combining marks,
// controls, unassigned...) is "other", the [^\s\p{L}\p{N}] class.
//
// The text must be valid UTF-8; utf8_validate() checks it strictly first.
#ifndef PRETOKENIZE_H
#define PRETOKENIZE_H

#include <stddef.h>
#include <stdint.h>

// The four classes of code points the pattern distinguishes.
typedef enum { CP_OTHER = 0, CP_LETTER, CP_NUMBER, CP_SPACE } CpClass;

CpClass cp_class(uint32_t cp);

// Decodes one UTF-8 sequence at s[0..len) (len >= 1), strictly: rejects stray
// continuation bytes, overlong forms, surrogates (U+D800..U+DFFF), code points
// above U+10FFFF and sequences cut short. Returns the sequence's length (1-4)
// and the code point in *cp, or 0 with a short static reason in *why.
int utf8_decode(const uint8_t *s, size_t len, uint32_t *cp, const char **why);

// Checks that all of text is valid UTF-8. Returns 0, or -1 with
// "invalid UTF-8 at byte offset N: <why>" in err (ERR_LEN bytes).
int utf8_validate(const char *text, size_t len, char *err);

// The end (exclusive byte offset) of the piece that starts at byte offset
// pos < len. Requires valid UTF-8 and pos at a piece boundary (0 or the end
// of the previous piece). Pieces are never empty and together cover the text.
size_t pretokenize_next(const char *text, size_t len, size_t pos);

// All pieces of a text, as byte ranges; for tests and for learners to print.
typedef struct {
    size_t start, len;
} Piece;
typedef struct {
    Piece *items;
    size_t len, cap;
} PieceList;

// Validates text, then appends its pieces to out. Returns 0, or -1 with the
// UTF-8 error in err (out unchanged).
int pretokenize(const char *text, size_t len, PieceList *out, char *err);
void piece_list_free(PieceList *p);

#endif
