// tokenizer.c: see tokenizer.h. GPT-2's byte-level BPE, token for token the
// same as tiktoken's `encode_ordinary`.
//
// The pipeline, for one text:
//   1. check that the text is valid UTF-8 (pretokenize.c);
//   2. cut it into pieces with GPT-2's pattern (pretokenize.c);
//   3. for each piece: if its bytes are one token, that is the answer;
//      else start from one token per byte and merge adjacent pairs, always
//      the pair whose merged token has the lowest rank first (leftmost on a
//      tie), until no adjacent pair forms a token.
// In GPT-2 a token's rank is its id: the 256 one-byte tokens come first, then
// merge number i of vocab.bpe makes token 256 + i (we check this at load).
//
// Three hash tables make it fast: token bytes -> id (the vocabulary), a pair
// of ids -> the id of their concatenation (the merges), and, during one call,
// piece bytes -> its ids (a cache: real text repeats its words).
#include "data/tokenizer.h"

#include <stdio.h>

#include <stdlib.h>
#include <string.h>

#include "data/pretokenize.h"
#include "util/util.h"

#define GPT2_VOCAB_SIZE 50257
#define GPT2_EOT_STRING "<|endoftext|>"
#define NO_TOKEN INT32_MAX  // "this pair does not merge": ranks above every real one

// ---- growable buffers ----------------------------------------------------

void token_ids_push(TokenIds *t, int32_t id) {
    if (t->len == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 256;
        int32_t *bigger = realloc(t->ids, t->cap * sizeof(int32_t));
        if (!bigger) die("out of memory growing a token list to %zu ids", t->cap);
        t->ids = bigger;
    }
    t->ids[t->len++] = id;
}

void token_ids_free(TokenIds *t) {
    free(t->ids);
    t->ids = NULL;
    t->len = t->cap = 0;
}

typedef struct {
    uint8_t *data;
    size_t len, cap;
} Bytes;

static void bytes_push(Bytes *b, uint8_t c) {
    if (b->len == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 1 << 16;
        uint8_t *bigger = realloc(b->data, b->cap);
        if (!bigger) die("out of memory growing a byte buffer to %zu bytes", b->cap);
        b->data = bigger;
    }
    b->data[b->len++] = c;
}

// ---- hashing -------------------------------------------------------------

// FNV-1a, 64-bit: simple, and fast enough for pieces of a few bytes.
static uint64_t hash_bytes(const uint8_t *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
    return h;
}

// Pairs of ids are keyed as one 64-bit number; a multiplicative hash (by 2^64
// divided by the golden ratio) spreads them, and we use its top bits.
static uint64_t pair_key(int32_t a, int32_t b) {
    return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
}
static size_t pair_slot(uint64_t key, int shift) {
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> shift);
}

static size_t pow2_at_least(size_t n) {
    size_t p = 1;
    while (p < n) p *= 2;
    return p;
}

// ---- the tokenizer -------------------------------------------------------

typedef struct {
    uint32_t hash;  // low 32 bits of the key's hash: most mismatches end here
    int32_t id;     // -1: empty slot
} VocabSlot;

struct Tokenizer {
    int vocab_size;
    int eot;
    // Token bytes: token id's bytes are bytes[offset[id] .. offset[id] + length[id]).
    uint8_t *bytes;
    uint32_t *offset, *length;
    int32_t byte_token[256];  // the one-byte tokens
    // Vocabulary: bytes -> id, open addressing with linear probing.
    VocabSlot *vocab;
    size_t vocab_mask;
    // Merges: (left id, right id) -> id of the concatenation, or absent.
    uint64_t *pair_keys;  // UINT64_MAX: empty slot
    int32_t *pair_vals;
    size_t pair_mask;
    int pair_shift;
};

static int32_t vocab_find_hashed(const Tokenizer *tok, const uint8_t *s, size_t n, uint64_t h) {
    for (size_t i = h & tok->vocab_mask;; i = (i + 1) & tok->vocab_mask) {
        VocabSlot slot = tok->vocab[i];
        if (slot.id < 0) return -1;
        if (slot.hash == (uint32_t)h && tok->length[slot.id] == n &&
            memcmp(tok->bytes + tok->offset[slot.id], s, n) == 0)
            return slot.id;
    }
}

static int32_t vocab_find(const Tokenizer *tok, const uint8_t *s, size_t n) {
    return vocab_find_hashed(tok, s, n, hash_bytes(s, n));
}

// Inserts token `id` (its bytes already in place); returns the id that
// already has these bytes, or -1 if none did.
static int32_t vocab_insert(Tokenizer *tok, int32_t id) {
    const uint8_t *s = tok->bytes + tok->offset[id];
    size_t n = tok->length[id];
    uint64_t h = hash_bytes(s, n);
    int32_t old = vocab_find_hashed(tok, s, n, h);
    if (old >= 0) return old;
    size_t i = h & tok->vocab_mask;
    while (tok->vocab[i].id >= 0) i = (i + 1) & tok->vocab_mask;
    tok->vocab[i] = (VocabSlot){(uint32_t)h, id};
    return -1;
}

// The id of the token that is a's bytes followed by b's, or NO_TOKEN. Because
// an id is its rank, this is also the rank of the pair.
static inline int32_t pair_merge(const Tokenizer *tok, int32_t a, int32_t b) {
    uint64_t key = pair_key(a, b);
    for (size_t i = pair_slot(key, tok->pair_shift);; i = (i + 1) & tok->pair_mask) {
        if (tok->pair_keys[i] == key) return tok->pair_vals[i];
        if (tok->pair_keys[i] == UINT64_MAX) return NO_TOKEN;
    }
}

static void pair_insert(Tokenizer *tok, int32_t a, int32_t b, int32_t merged) {
    uint64_t key = pair_key(a, b);
    size_t i = pair_slot(key, tok->pair_shift);
    while (tok->pair_keys[i] != UINT64_MAX && tok->pair_keys[i] != key)
        i = (i + 1) & tok->pair_mask;
    tok->pair_keys[i] = key;
    tok->pair_vals[i] = merged;
}

int tokenizer_vocab_size(const Tokenizer *tok) { return tok->vocab_size; }
int tokenizer_eot(const Tokenizer *tok) { return tok->eot; }

const uint8_t *tokenizer_token_bytes(const Tokenizer *tok, int id, size_t *len) {
    if (id < 0 || id >= tok->vocab_size) return NULL;
    *len = tok->length[id];
    return tok->bytes + tok->offset[id];
}

void tokenizer_free(Tokenizer *tok) {
    if (!tok) return;
    free(tok->bytes);
    free(tok->offset);
    free(tok->length);
    free(tok->vocab);
    free(tok->pair_keys);
    free(tok->pair_vals);
    free(tok);
}

// ---- GPT-2's byte alphabet -----------------------------------------------

// encoder.json and vocab.bpe do not write token bytes as bytes: they map each
// byte to one printable Unicode character, so that a token is a readable
// string with no spaces or control characters in it. Bytes that are
// printable in Latin-1 ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) stand for
// themselves; the other 68 (controls, the space, DEL, U+0080..U+00A0 and the
// soft hyphen U+00AD), in increasing order, become U+0100, U+0101, ...
// So a space is written 'Ġ' (U+0120) and a newline 'Ċ' (U+010A).
#define ALPHABET_END 0x144  // 256 + 68: every character of the alphabet is below

static void byte_alphabet(int16_t char_to_byte[ALPHABET_END]) {
    for (int c = 0; c < ALPHABET_END; c++) char_to_byte[c] = -1;
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        char_to_byte[printable ? b : 256 + extra++] = (int16_t)b;
    }
}

// ---- encoder.json --------------------------------------------------------

// A strict parser for exactly what encoder.json is: one JSON object whose
// keys are strings and whose values are non-negative integers. Each key's
// characters are turned back into bytes through the byte alphabet as it is
// read, and appended to the token bytes.
typedef struct {
    const char *path;
    const uint8_t *s;
    size_t len, pos;
    const int16_t *char_to_byte;
    char *err;
} Json;

static void json_skip_space(Json *j) {
    while (j->pos < j->len && (j->s[j->pos] == ' ' || j->s[j->pos] == '\t' ||
                               j->s[j->pos] == '\n' || j->s[j->pos] == '\r'))
        j->pos++;
}

static int json_expect(Json *j, char c, const char *where) {
    json_skip_space(j);
    if (j->pos >= j->len)
        return fail(j->err, "%s: byte offset %zu: unexpected end of file, expected '%c' %s",
                    j->path, j->pos, c, where);
    if (j->s[j->pos] != c)
        return fail(j->err, "%s: byte offset %zu: expected '%c' %s", j->path, j->pos, c, where);
    j->pos++;
    return 0;
}

static int hex4(Json *j, uint32_t *out) {
    if (j->len - j->pos < 4)
        return fail(j->err, "%s: byte offset %zu: truncated \\u escape", j->path, j->pos);
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        uint8_t c = j->s[j->pos + i];
        int d = c >= '0' && c <= '9' ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return fail(j->err, "%s: byte offset %zu: bad hex digit in \\u escape",
                        j->path, j->pos + i);
        v = v * 16 + (uint32_t)d;
    }
    j->pos += 4;
    *out = v;
    return 0;
}

// Reads a string (j->pos at its opening quote) and appends its bytes to out.
static int json_key(Json *j, Bytes *out) {
    size_t start = j->pos;
    j->pos++;  // the opening quote
    for (;;) {
        if (j->pos >= j->len)
            return fail(j->err, "%s: byte offset %zu: unterminated string", j->path, start);
        size_t at = j->pos;
        uint8_t c = j->s[j->pos];
        uint32_t cp;
        if (c == '"') {
            j->pos++;
            return 0;
        } else if (c == '\\') {
            if (j->pos + 1 >= j->len)
                return fail(j->err, "%s: byte offset %zu: unterminated string", j->path, start);
            uint8_t e = j->s[j->pos + 1];
            j->pos += 2;
            switch (e) {
            case '"': cp = '"'; break;
            case '\\': cp = '\\'; break;
            case '/': cp = '/'; break;
            case 'b': cp = '\b'; break;
            case 'f': cp = '\f'; break;
            case 'n': cp = '\n'; break;
            case 'r': cp = '\r'; break;
            case 't': cp = '\t'; break;
            case 'u':
                if (hex4(j, &cp)) return -1;
                if (cp >= 0xDC00 && cp <= 0xDFFF)
                    return fail(j->err, "%s: byte offset %zu: lone low surrogate \\u%04X",
                                j->path, at, cp);
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    // A high surrogate must be followed by \uDC00..\uDFFF:
                    // together they are one code point above U+FFFF.
                    uint32_t low;
                    if (j->len - j->pos < 2 || j->s[j->pos] != '\\' || j->s[j->pos + 1] != 'u')
                        return fail(j->err, "%s: byte offset %zu: high surrogate \\u%04X "
                                    "not followed by a low surrogate", j->path, at, cp);
                    j->pos += 2;
                    if (hex4(j, &low)) return -1;
                    if (low < 0xDC00 || low > 0xDFFF)
                        return fail(j->err, "%s: byte offset %zu: high surrogate \\u%04X "
                                    "followed by \\u%04X, not a low surrogate",
                                    j->path, at, cp, low);
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                }
                break;
            default:
                return fail(j->err, "%s: byte offset %zu: invalid escape '\\%c'",
                            j->path, at, e >= 0x20 && e < 0x7F ? e : '?');
            }
        } else if (c < 0x20) {
            return fail(j->err, "%s: byte offset %zu: control character 0x%02X in a string",
                        j->path, at, c);
        } else {
            const char *why = "";
            int n = utf8_decode(j->s + j->pos, j->len - j->pos, &cp, &why);
            if (n == 0)
                return fail(j->err, "%s: byte offset %zu: invalid UTF-8: %s", j->path, at, why);
            j->pos += (size_t)n;
        }
        if (cp >= ALPHABET_END || j->char_to_byte[cp] < 0)
            return fail(j->err, "%s: byte offset %zu: character U+%04X is not in GPT-2's "
                        "byte alphabet", j->path, at, cp);
        bytes_push(out, (uint8_t)j->char_to_byte[cp]);
    }
}

// Reads a non-negative integer below `limit` (strict JSON: no leading zeros,
// no sign, no fraction or exponent).
static int json_id(Json *j, int limit, int32_t *out) {
    json_skip_space(j);
    size_t start = j->pos;
    if (j->pos >= j->len)
        return fail(j->err, "%s: byte offset %zu: unexpected end of file, expected an id",
                    j->path, j->pos);
    if (j->s[j->pos] == '-')
        return fail(j->err, "%s: byte offset %zu: negative id", j->path, start);
    if (j->s[j->pos] < '0' || j->s[j->pos] > '9')
        return fail(j->err, "%s: byte offset %zu: expected an integer id", j->path, start);
    long long v = 0;
    while (j->pos < j->len && j->s[j->pos] >= '0' && j->s[j->pos] <= '9') {
        v = v * 10 + (j->s[j->pos] - '0');
        if (v >= limit)
            return fail(j->err, "%s: byte offset %zu: id out of range (the vocabulary "
                        "has %d entries, ids 0..%d)", j->path, start, limit, limit - 1);
        j->pos++;
    }
    if (j->s[start] == '0' && j->pos - start > 1)
        return fail(j->err, "%s: byte offset %zu: leading zero in a number", j->path, start);
    if (j->pos < j->len && (j->s[j->pos] == '.' || j->s[j->pos] == 'e' || j->s[j->pos] == 'E'))
        return fail(j->err, "%s: byte offset %zu: id is not an integer", j->path, start);
    *out = (int32_t)v;
    return 0;
}

static int load_encoder(Tokenizer *tok, const char *path, const int16_t *char_to_byte,
                        char *err) {
    size_t len;
    char *text = read_file(path, &len, err);
    if (!text) return -1;
    int n = GPT2_VOCAB_SIZE;
    tok->vocab_size = n;
    tok->offset = xmalloc(n * sizeof(uint32_t));
    tok->length = xmalloc(n * sizeof(uint32_t));
    uint8_t *seen = xcalloc(n, 1);
    tok->vocab_mask = pow2_at_least(2 * (size_t)n) - 1;
    tok->vocab = xmalloc((tok->vocab_mask + 1) * sizeof(VocabSlot));
    for (size_t i = 0; i <= tok->vocab_mask; i++) tok->vocab[i].id = -1;

    Bytes bytes = {0};
    Json j = {path, (const uint8_t *)text, len, 0, char_to_byte, err};
    int count = 0, rc = -1;
    if (json_expect(&j, '{', "at the start of the object")) goto done;
    json_skip_space(&j);
    if (j.pos < j.len && j.s[j.pos] == '}') {
        j.pos++;
    } else {
        for (;;) {
            json_skip_space(&j);
            size_t key_at = j.pos;
            if (j.pos >= j.len || j.s[j.pos] != '"') {
                fail(err, "%s: byte offset %zu: expected a string key", path, j.pos);
                goto done;
            }
            size_t key_start = bytes.len;
            if (json_key(&j, &bytes)) goto done;
            if (bytes.len > UINT32_MAX) {
                fail(err, "%s: byte offset %zu: keys too long", path, key_at);
                goto done;
            }
            if (bytes.len == key_start) {
                fail(err, "%s: byte offset %zu: empty token string", path, key_at);
                goto done;
            }
            int32_t id = 0;
            if (json_expect(&j, ':', "after a key") || json_id(&j, n, &id)) goto done;
            if (seen[id]) {
                fail(err, "%s: byte offset %zu: id %d is used twice", path, key_at, id);
                goto done;
            }
            seen[id] = 1;
            count++;
            // The token's bytes stay where json_key put them.
            tok->bytes = bytes.data;  // (vocab_insert reads through tok)
            tok->offset[id] = (uint32_t)key_start;
            tok->length[id] = (uint32_t)(bytes.len - key_start);
            if (vocab_insert(tok, id) >= 0) {
                fail(err, "%s: byte offset %zu: duplicate key", path, key_at);
                goto done;
            }
            json_skip_space(&j);
            if (j.pos < j.len && j.s[j.pos] == ',') {
                j.pos++;
                continue;
            }
            if (json_expect(&j, '}', "or ',' after a value")) goto done;
            break;
        }
    }
    json_skip_space(&j);
    if (j.pos != j.len) {
        fail(err, "%s: byte offset %zu: unexpected data after the object", path, j.pos);
        goto done;
    }
    if (count != n) {
        // Ids are in 0..n-1 and never repeat, so n entries use each id once.
        fail(err, "%s: has %d entries, expected %d (GPT-2's vocabulary)", path, count, n);
        goto done;
    }
    tok->bytes = bytes.data;
    bytes.data = NULL;
    tok->eot = vocab_find(tok, (const uint8_t *)GPT2_EOT_STRING, strlen(GPT2_EOT_STRING));
    if (tok->eot < 0) {
        fail(err, "%s: has no \"%s\" token", path, GPT2_EOT_STRING);
        goto done;
    }
    for (int b = 0; b < 256; b++) {
        uint8_t byte = (uint8_t)b;
        tok->byte_token[b] = vocab_find(tok, &byte, 1);
        if (tok->byte_token[b] < 0) {
            fail(err, "%s: has no token for the single byte 0x%02X", path, b);
            goto done;
        }
    }
    rc = 0;
done:
    if (bytes.data) {
        free(bytes.data);
        tok->bytes = NULL;
    }
    free(seen);
    free(text);
    return rc;
}

// ---- vocab.bpe -----------------------------------------------------------

// Turns one merge half (characters of the byte alphabet, UTF-8 in the file)
// into bytes. Returns the number of bytes, or -1.
static long merge_half(const uint8_t *s, size_t n, const int16_t *char_to_byte, uint8_t *out,
                       const char *path, int line, char *err) {
    size_t i = 0, k = 0;
    while (i < n) {
        uint32_t cp;
        const char *why = "";
        int m = utf8_decode(s + i, n - i, &cp, &why);
        if (m == 0) return fail(err, "%s: line %d: invalid UTF-8: %s", path, line, why);
        if (cp >= ALPHABET_END || char_to_byte[cp] < 0)
            return fail(err, "%s: line %d: character U+%04X is not in GPT-2's byte alphabet",
                        path, line, cp);
        out[k++] = (uint8_t)char_to_byte[cp];
        i += (size_t)m;
    }
    return (long)k;
}

// Reads the merges and checks them against the vocabulary: merge i joins two
// tokens into the token with id 256 + i. (tiktoken's loader checks the same:
// that encoder.json's ids are the merges' ranks.)
static int load_merges(Tokenizer *tok, const char *path, const int16_t *char_to_byte,
                       char *err) {
    size_t len;
    char *text = read_file(path, &len, err);
    if (!text) return -1;
    const uint8_t *s = (const uint8_t *)text;
    uint8_t *buf = xmalloc(len + 1);  // a line's bytes are never more than the file's
    const char *header = "#version: 0.2\n";
    int rc = -1;
    if (len < strlen(header) || memcmp(s, header, strlen(header)) != 0) {
        fail(err, "%s: line 1: expected the header \"#version: 0.2\"", path);
        goto done;
    }
    int want = tok->vocab_size - 256 - 1;  // all tokens but the bytes and <|endoftext|>
    int merges = 0, line = 1;
    size_t pos = strlen(header);
    while (pos < len) {
        line++;
        const uint8_t *nl = memchr(s + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - s) : len;
        const uint8_t *sp = memchr(s + pos, ' ', end - pos);
        if (!sp || sp == s + pos || sp + 1 == s + end || memchr(sp + 1, ' ', s + end - sp - 1)) {
            fail(err, "%s: line %d: expected two tokens separated by one space", path, line);
            goto done;
        }
        size_t n1 = (size_t)(sp - (s + pos)), n2 = end - (size_t)(sp + 1 - s);
        long a_len = merge_half(s + pos, n1, char_to_byte, buf, path, line, err);
        if (a_len < 0) goto done;
        long b_len = merge_half(sp + 1, n2, char_to_byte, buf + a_len, path, line, err);
        if (b_len < 0) goto done;
        int32_t a = vocab_find(tok, buf, (size_t)a_len);
        int32_t b = vocab_find(tok, buf + a_len, (size_t)b_len);
        int32_t ab = vocab_find(tok, buf, (size_t)(a_len + b_len));
        if (a < 0 || b < 0 || ab < 0) {
            const char *what = a < 0 ? "its first token" : b < 0 ? "its second token"
                                                            : "the merged token";
            fail(err, "%s: line %d: merge \"%.*s\": %s is not in the vocabulary",
                 path, line, (int)(end - pos), (const char *)s + pos, what);
            goto done;
        }
        if (merges >= want) {
            fail(err, "%s: line %d: more than %d merges", path, line, want);
            goto done;
        }
        if (ab != 256 + merges) {
            fail(err, "%s: line %d: merge %d makes token %d, but its rank needs id %d",
                 path, line, merges, ab, 256 + merges);
            goto done;
        }
        merges++;
        pos = end + 1;
    }
    if (merges != want) {
        fail(err, "%s: has %d merges, expected %d", path, merges, want);
        goto done;
    }
    rc = 0;
done:
    free(buf);
    free(text);
    return rc;
}

// The pair table. tiktoken does not look merges up by the pair of tokens that
// vocab.bpe lists: it asks whether the concatenated bytes of two adjacent
// tokens are a token, and takes that token's rank. Many tokens can be cut
// into two tokens in more than one place (GPT-2 has about 58,000 such extra
// cuts beside the 50,000 listed merges), and tiktoken's rule accepts every
// cut. With GPT-2's files we found no text on which this changes the result,
// but to be tiktoken by definition rather than by luck, and still look up
// pairs of ids rather than bytes, we list every cut of every token into two
// tokens.
static void build_pairs(Tokenizer *tok) {
    size_t count = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            size_t slots = pow2_at_least(2 * count + 2);
            tok->pair_mask = slots - 1;
            tok->pair_shift = 64;
            for (size_t s = slots; s > 1; s /= 2) tok->pair_shift--;
            tok->pair_keys = xmalloc(slots * sizeof(uint64_t));
            tok->pair_vals = xmalloc(slots * sizeof(int32_t));
            for (size_t i = 0; i < slots; i++) tok->pair_keys[i] = UINT64_MAX;
        }
        for (int id = 0; id < tok->vocab_size; id++) {
            if (id == tok->eot) continue;
            const uint8_t *s = tok->bytes + tok->offset[id];
            size_t n = tok->length[id];
            for (size_t cut = 1; cut < n; cut++) {
                int32_t a = vocab_find(tok, s, cut), b = vocab_find(tok, s + cut, n - cut);
                if (a < 0 || b < 0 || a == tok->eot || b == tok->eot) continue;
                if (pass == 0) count++;
                else pair_insert(tok, a, b, id);
            }
        }
    }
}

Tokenizer *tokenizer_load(const char *encoder_json_path, const char *vocab_bpe_path, char *err) {
    int16_t char_to_byte[ALPHABET_END];
    byte_alphabet(char_to_byte);
    Tokenizer *tok = xcalloc(1, sizeof(Tokenizer));
    if (load_encoder(tok, encoder_json_path, char_to_byte, err) != 0 ||
        load_merges(tok, vocab_bpe_path, char_to_byte, err) != 0) {
        tokenizer_free(tok);
        return NULL;
    }
    build_pairs(tok);
    return tok;
}

int tokenizer_check_merges_file(const Tokenizer *tok, const char *vocab_bpe_path, char *err) {
    int16_t char_to_byte[ALPHABET_END];
    byte_alphabet(char_to_byte);
    return load_merges((Tokenizer *)tok, vocab_bpe_path, char_to_byte, err);  // only reads tok
}

// ---- BPE on one piece ----------------------------------------------------

// Pieces up to this many bytes are merged by the plain method below, longer
// ones with a heap (same result, but not quadratic in the piece's length).
#ifndef BPE_HEAP_MIN_LEN
#define BPE_HEAP_MIN_LEN 128
#endif

// The plain method, as tiktoken does it: keep the tokens of the piece in an
// array, with the rank of each adjacent pair; repeatedly merge the pair of
// lowest rank (the leftmost on a tie), and recompute the ranks of the two
// pairs that changed. O(n^2) for a piece of n bytes, fast for short pieces.
static void bpe_plain(const Tokenizer *tok, const uint8_t *p, size_t n, TokenIds *out) {
    int32_t ids[BPE_HEAP_MIN_LEN], rank[BPE_HEAP_MIN_LEN];  // rank[i]: pair (i, i+1)
    size_t m = n;
    for (size_t i = 0; i < n; i++) ids[i] = tok->byte_token[p[i]];
    for (size_t i = 0; i + 1 < m; i++) rank[i] = pair_merge(tok, ids[i], ids[i + 1]);
    for (;;) {
        size_t best = 0;
        int32_t best_rank = NO_TOKEN;
        for (size_t i = 0; i + 1 < m; i++)
            if (rank[i] < best_rank) best_rank = rank[i], best = i;
        if (best_rank == NO_TOKEN) break;
        // Merge ids[best] and ids[best + 1]; the new token's id is its rank.
        ids[best] = best_rank;
        memmove(ids + best + 1, ids + best + 2, (m - best - 2) * sizeof(int32_t));
        memmove(rank + best + 1, rank + best + 2, (m - best - 2) * sizeof(int32_t));
        m--;
        if (best > 0) rank[best - 1] = pair_merge(tok, ids[best - 1], ids[best]);
        if (best + 1 < m) rank[best] = pair_merge(tok, ids[best], ids[best + 1]);
    }
    for (size_t i = 0; i < m; i++) token_ids_push(out, ids[i]);
}

// A binary min-heap of candidate merges, each key = rank << 40 | position:
// the smallest key is the lowest rank, leftmost among equals, which is
// exactly the pair the plain method picks. (Positions below 2^40: a piece
// under a terabyte.)
static void heap_push(uint64_t *heap, size_t *n, uint64_t key) {
    size_t i = (*n)++;
    while (i > 0 && heap[(i - 1) / 2] > key) {
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = key;
}

static uint64_t heap_pop(uint64_t *heap, size_t *n) {
    uint64_t top = heap[0], last = heap[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && heap[c + 1] < heap[c]) c++;
        if (heap[c] >= last) break;
        heap[i] = heap[c];
        i = c;
    }
    if (*n > 0) heap[i] = last;
    return top;
}

// The heap method, for long pieces: the tokens form a linked list (a token
// is known by the position of its first byte), and every adjacent pair that
// merges sits in the heap. A heap entry may be stale (one of its tokens has
// merged since); we check it when it comes out. O(n log n).
static void bpe_heap(const Tokenizer *tok, const uint8_t *p, size_t n, TokenIds *out) {
    const size_t END = (size_t)-1;
    int32_t *ids = xmalloc(n * sizeof(int32_t));  // -1: merged into its left neighbour
    size_t *next = xmalloc(n * sizeof(size_t)), *prev = xmalloc(n * sizeof(size_t));
    uint64_t *heap = xmalloc(2 * n * sizeof(uint64_t));  // n - 1 pairs, + 2 per merge
    size_t heap_n = 0;
    for (size_t i = 0; i < n; i++) {
        ids[i] = tok->byte_token[p[i]];
        next[i] = i + 1 < n ? i + 1 : END;
        prev[i] = i > 0 ? i - 1 : END;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        int32_t r = pair_merge(tok, ids[i], ids[i + 1]);
        if (r != NO_TOKEN) heap_push(heap, &heap_n, (uint64_t)r << 40 | i);
    }
    while (heap_n > 0) {
        uint64_t key = heap_pop(heap, &heap_n);
        int32_t r = (int32_t)(key >> 40);
        size_t i = (size_t)(key & ((1ull << 40) - 1)), j = next[i];
        // Stale unless token i is alive, has a right neighbour, and the two
        // still make the token of rank r (equal rank means equal bytes).
        if (ids[i] < 0 || j == END || pair_merge(tok, ids[i], ids[j]) != r) continue;
        ids[i] = r;
        ids[j] = -1;
        next[i] = next[j];
        if (next[j] != END) prev[next[j]] = i;
        if (prev[i] != END) {
            int32_t left = pair_merge(tok, ids[prev[i]], r);
            if (left != NO_TOKEN) heap_push(heap, &heap_n, (uint64_t)left << 40 | prev[i]);
        }
        if (next[i] != END) {
            int32_t right = pair_merge(tok, r, ids[next[i]]);
            if (right != NO_TOKEN) heap_push(heap, &heap_n, (uint64_t)right << 40 | i);
        }
    }
    for (size_t i = 0; i != END; i = next[i]) token_ids_push(out, ids[i]);
    free(ids);
    free(next);
    free(prev);
    free(heap);
}

// ---- the cache -----------------------------------------------------------

// Piece bytes -> ids, for the pieces of one text that needed BPE. Keys point
// into the text itself, which outlives the cache (one tokenizer_encode call),
// so the Tokenizer stays read-only and can be shared by threads.
typedef struct {
    uint64_t hash;
    size_t start, len;        // the piece: text[start .. start + len); len 0: empty slot
    size_t ids_start, n_ids;  // its ids: cache.ids[ids_start .. ids_start + n_ids)
} CacheSlot;

typedef struct {
    const uint8_t *text;
    CacheSlot *slots;
    size_t mask, used;
    TokenIds ids;
} Cache;

static CacheSlot *cache_find(Cache *c, const uint8_t *s, size_t n, uint64_t h) {
    for (size_t i = h & c->mask;; i = (i + 1) & c->mask) {
        CacheSlot *slot = &c->slots[i];
        if (slot->len == 0) return slot;  // not there: the free slot to use
        if (slot->hash == h && slot->len == n && memcmp(c->text + slot->start, s, n) == 0)
            return slot;
    }
}

static void cache_grow(Cache *c) {
    size_t old_n = c->mask + 1;
    CacheSlot *old = c->slots;
    c->mask = 2 * old_n - 1;
    c->slots = xcalloc(2 * old_n, sizeof(CacheSlot));
    for (size_t i = 0; i < old_n; i++) {
        if (old[i].len == 0) continue;
        size_t k = old[i].hash & c->mask;
        while (c->slots[k].len != 0) k = (k + 1) & c->mask;
        c->slots[k] = old[i];
    }
    free(old);
}

// ---- encode --------------------------------------------------------------

static void encode_piece(const Tokenizer *tok, Cache *cache, size_t start, size_t n,
                         TokenIds *out) {
    const uint8_t *s = cache->text + start;
    uint64_t h = hash_bytes(s, n);
    // 1. The whole piece is one token (" the", ",", "\n"): most pieces. tiktoken
    //    takes this shortcut too; with GPT-2's files, merging the bytes would
    //    reach the same token, so it only saves time.
    int32_t id = vocab_find_hashed(tok, s, n, h);
    if (id >= 0 && id != tok->eot) {
        token_ids_push(out, id);
        return;
    }
    // 2. Seen before in this text.
    CacheSlot *slot = cache_find(cache, s, n, h);
    if (slot->len != 0) {
        for (size_t i = 0; i < slot->n_ids; i++)
            token_ids_push(out, cache->ids.ids[slot->ids_start + i]);
        return;
    }
    // 3. Merge its bytes, and remember the result.
    size_t first = out->len;
    if (n <= BPE_HEAP_MIN_LEN) bpe_plain(tok, s, n, out);
    else bpe_heap(tok, s, n, out);
    *slot = (CacheSlot){h, start, n, cache->ids.len, out->len - first};
    for (size_t i = first; i < out->len; i++) token_ids_push(&cache->ids, out->ids[i]);
    if (++cache->used * 2 > cache->mask + 1) cache_grow(cache);
}

int tokenizer_encode(const Tokenizer *tok, const char *text, size_t len, TokenIds *out,
                     char *err) {
    if (utf8_validate(text, len, err) != 0) return -1;
    Cache cache = {(const uint8_t *)text, xcalloc(1024, sizeof(CacheSlot)), 1023, 0, {0}};
    size_t pos = 0;
    while (pos < len) {
        size_t end = pretokenize_next(text, len, pos);
        encode_piece(tok, &cache, pos, end - pos, out);
        pos = end;
    }
    free(cache.slots);
    token_ids_free(&cache.ids);
    return 0;
}

void tokenizer_print_sample(const Tokenizer *tok, const int32_t *ids, int n, int after_step) {
    printf("---- sample after step %d ----\n", after_step);
    for (int i = 0; i < n; i++) {
        size_t len;
        const uint8_t *bytes = tokenizer_token_bytes(tok, ids[i], &len);
        if (bytes) fwrite(bytes, 1, len, stdout);
    }
    printf("\n------------------------------\n");
    fflush(stdout);
}

// ---- decode --------------------------------------------------------------

static int is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

int tokenizer_decode_ids_text(const Tokenizer *tok, const char *name, const char *text,
                              size_t len, uint8_t **bytes, size_t *n, char *err) {
    Bytes out = {0};
    size_t pos = 0, index = 0;
    while (pos < len) {
        if (is_space(text[pos])) {
            pos++;
            continue;
        }
        size_t start = pos;
        while (pos < len && !is_space(text[pos])) pos++;
        size_t digits = pos - start;
        long long id = 0;
        int ok = digits <= 9;  // more digits than any id could have
        for (size_t i = start; ok && i < pos; i++) {
            if (text[i] < '0' || text[i] > '9') ok = 0;
            else id = id * 10 + (text[i] - '0');
        }
        size_t id_len = 0;
        const uint8_t *id_bytes = ok ? tokenizer_token_bytes(tok, (int)id, &id_len) : NULL;
        if (!id_bytes) {
            free(out.data);
            *bytes = NULL;
            if (!ok)
                return fail(err, "%s: byte offset %zu (id index %zu): \"%.*s\" is not a token id",
                            name, start, index, digits > 40 ? 40 : (int)digits, text + start);
            return fail(err, "%s: byte offset %zu (id index %zu): id %lld is out of range 0..%d",
                        name, start, index, id, tok->vocab_size - 1);
        }
        for (size_t i = 0; i < id_len; i++) bytes_push(&out, id_bytes[i]);
        index++;
    }
    *bytes = out.data ? out.data : xmalloc(1);
    *n = out.len;
    return 0;
}
