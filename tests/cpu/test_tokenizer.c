// test_tokenizer.c: GPT-2's tokenizer (common/data/tokenizer.c, common/data/pretokenize.c)
// against tiktoken, token for token.
//
// The references in tests/data/ were written by tiktoken itself
// (tools/tiktoken_reference.py; tests/data/README.md has the commands).
// GPT-2's files and TinyShakespeare are read from $DATA_DIR/raw/ (DATA_DIR
// defaults to "data"; `make data` fetches them). Run from the repository root.
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/pretokenize.h"
#include "data/tokenizer.h"
#include "util/util.h"

// ---- helpers -------------------------------------------------------------

static Tokenizer *tok;
static char encoder_path[1024], bpe_path[1024], shakespeare_path[1024];

static void data_path(char *out, const char *name) {
    const char *dir = getenv("DATA_DIR");
    snprintf(out, 1024, "%s/raw/%s", dir && *dir ? dir : "data", name);
}

static void suite_init(void) {
    data_path(encoder_path, "gpt2_encoder.json");
    data_path(bpe_path, "gpt2_vocab.bpe");
    data_path(shakespeare_path, "tinyshakespeare.txt");
    char err[ERR_LEN];
    tok = tokenizer_load(encoder_path, bpe_path, err);
    cr_assert_not_null(tok, "cannot load the tokenizer (run `make data`?): %s", err);
}

// A fresh folder for the bad-file tests' files, removed by suite_fini even
// when an assertion ends the test early.
typedef struct {
    char dir[64];
    char enc[128], bpe[128];
} Scratch;
static Scratch scratch;

static void suite_fini(void) {
    tokenizer_free(tok);
    tok = NULL;
    if (scratch.dir[0]) {
        remove(scratch.enc);
        remove(scratch.bpe);
        rmdir(scratch.dir);
        scratch.dir[0] = '\0';
    }
}

TestSuite(tokenizer, .init = suite_init, .fini = suite_fini, .timeout = 30);

static char *must_read(const char *path, size_t *len) {
    char err[ERR_LEN];
    char *text = read_file(path, len, err);
    cr_assert_not_null(text, "%s", err);
    return text;
}

static TokenIds must_encode(const char *text, size_t len) {
    TokenIds ids = {0};
    char err[ERR_LEN] = "";
    cr_assert_eq(tokenizer_encode(tok, text, len, &ids, err), 0, "encode failed: %s", err);
    return ids;
}

// Parses whitespace-separated ids (the format of tests/data/*.ids).
static TokenIds parse_ids(const char *path) {
    size_t len;
    char *text = must_read(path, &len);
    TokenIds ids = {0};
    char *p = text;
    for (;;) {
        while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t') p++;
        if (!*p) break;
        char *end;
        long v = strtol(p, &end, 10);
        cr_assert(end != p && v >= 0 && v < 50257, "%s: bad id at byte offset %ld",
                  path, (long)(p - text));
        token_ids_push(&ids, (int32_t)v);
        p = end;
    }
    free(text);
    return ids;
}

// FNV-1a, 64-bit, over each id as 4 little-endian bytes (as in
// tools/tiktoken_reference.py).
static uint64_t fnv1a64_ids(const TokenIds *ids) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < ids->len; i++) {
        uint32_t v = (uint32_t)ids->ids[i];
        for (int b = 0; b < 4; b++) h = (h ^ ((v >> (8 * b)) & 0xFF)) * 0x100000001b3ull;
    }
    return h;
}

// Appends the decoded bytes of ids[from..to) to buf (for messages), as a C
// string with control characters escaped.
static void describe(const TokenIds *ids, size_t from, size_t to, char *buf, size_t cap) {
    size_t n = strlen(buf);
    for (size_t i = from; i < to && i < ids->len && n + 16 < cap; i++) {
        size_t len;
        const uint8_t *b = tokenizer_token_bytes(tok, ids->ids[i], &len);
        n += (size_t)snprintf(buf + n, cap - n, "%s%d", i > from ? " " : "", ids->ids[i]);
        if (!b) continue;
        buf[n++] = '[';
        for (size_t k = 0; k < len && n + 8 < cap; k++)
            n += (size_t)(b[k] < 0x20 || b[k] == 0x7F
                              ? snprintf(buf + n, cap - n, "\\x%02x", b[k])
                              : snprintf(buf + n, cap - n, "%c", b[k]));
        buf[n++] = ']';
        buf[n] = '\0';
    }
}

// Fails at the first position where got and want differ, with the tokens
// around it (id[bytes]) on both sides.
static void assert_same_ids(const TokenIds *got, const TokenIds *want, const char *what) {
    size_t n = got->len < want->len ? got->len : want->len, i = 0;
    while (i < n && got->ids[i] == want->ids[i]) i++;
    if (i == n && got->len == want->len) return;
    size_t from = i >= 4 ? i - 4 : 0;
    char g[2048] = "", w[2048] = "";
    describe(got, from, i + 5, g, sizeof(g));
    describe(want, from, i + 5, w, sizeof(w));
    cr_assert_fail("%s: %zu ids, tiktoken %zu; first difference at id %zu\n"
                   "  ours     from %zu: %s\n  tiktoken from %zu: %s",
                   what, got->len, want->len, i, from, g, from, w);
}

static void assert_roundtrip(const char *text, size_t len, const char *what) {
    TokenIds ids = must_encode(text, len);
    char *back = xmalloc(len + 1);
    size_t n = 0;
    for (size_t i = 0; i < ids.len; i++) {
        size_t k;
        const uint8_t *b = tokenizer_token_bytes(tok, ids.ids[i], &k);
        cr_assert_not_null(b, "%s: id %d has no bytes", what, ids.ids[i]);
        cr_assert_leq(n + k, len, "%s: decoding gives more bytes than the text", what);
        memcpy(back + n, b, k);
        n += k;
    }
    cr_assert_eq(n, len, "%s: decoded %zu bytes, text has %zu", what, n, len);
    size_t i = 0;
    while (i < len && back[i] == text[i]) i++;
    cr_assert_eq(i, len, "%s: decode(encode(x)) differs from x at byte %zu", what, i);
    free(back);
    token_ids_free(&ids);
}

// ---- the vocabulary ------------------------------------------------------

Test(tokenizer, vocabulary_basics) {
    cr_assert_eq(tokenizer_vocab_size(tok), 50257);
    cr_assert_eq(tokenizer_eot(tok), 50256);
    size_t len;
    const uint8_t *b = tokenizer_token_bytes(tok, 0, &len);
    cr_assert(b && len == 1 && b[0] == '!', "token 0 is \"!\"");
    b = tokenizer_token_bytes(tok, 220, &len);
    cr_assert(b && len == 1 && b[0] == ' ', "token 220 is a space (\"\\u0120\" in encoder.json)");
    b = tokenizer_token_bytes(tok, 198, &len);
    cr_assert(b && len == 1 && b[0] == '\n', "token 198 is a newline");
    b = tokenizer_token_bytes(tok, 262, &len);
    cr_assert(b && len == 4 && memcmp(b, " the", 4) == 0, "token 262 is \" the\"");
    b = tokenizer_token_bytes(tok, 50256, &len);
    cr_assert(b && len == 13 && memcmp(b, "<|endoftext|>", 13) == 0);
    cr_assert_null(tokenizer_token_bytes(tok, -1, &len));
    cr_assert_null(tokenizer_token_bytes(tok, 50257, &len));
}

// ---- parity with tiktoken ------------------------------------------------

Test(tokenizer, unicode_sample_matches_tiktoken) {
    size_t len;
    char *text = must_read("tests/data/unicode_sample.txt", &len);
    TokenIds got = must_encode(text, len);
    TokenIds want = parse_ids("tests/data/unicode_sample.ids");
    assert_same_ids(&got, &want, "tests/data/unicode_sample.txt");
    token_ids_free(&got);
    token_ids_free(&want);
    free(text);
}

Test(tokenizer, tinyshakespeare_count_and_hash_match_tiktoken) {
    size_t len;
    char *ref = must_read("tests/data/tinyshakespeare.ids.ref", &len);
    long long want_count = -1;
    unsigned long long want_hash = 0;
    cr_assert_eq(sscanf(ref, "count %lld fnv1a64 %llx", &want_count, &want_hash), 2,
                 "tests/data/tinyshakespeare.ids.ref: expected \"count N\\nfnv1a64 HEX\"");
    free(ref);
    cr_assert_eq(want_count, 338025);

    char *text = must_read(shakespeare_path, &len);
    TokenIds ids = must_encode(text, len);
    cr_assert_eq((long long)ids.len, want_count, "%s: %zu ids, tiktoken has %lld",
                 shakespeare_path, ids.len, want_count);
    cr_assert_eq(fnv1a64_ids(&ids), (uint64_t)want_hash,
                 "%s: ids hash to %016llx, tiktoken's to %016llx", shakespeare_path,
                 (unsigned long long)fnv1a64_ids(&ids), want_hash);
    cr_assert_eq(ids.ids[0], 5962, "\"First\" is 5962");  // "First Citizen:"
    token_ids_free(&ids);
    free(text);
}

Test(tokenizer, decode_of_encode_is_identity) {
    size_t len;
    char *text = must_read("tests/data/unicode_sample.txt", &len);
    assert_roundtrip(text, len, "tests/data/unicode_sample.txt");
    free(text);
    text = must_read(shakespeare_path, &len);
    assert_roundtrip(text, len, shakespeare_path);
    free(text);
}

Test(tokenizer, decode_of_id_text_checks_every_id_first) {
    const char *text = " 15496\t995\n50256 ";
    uint8_t *bytes;
    size_t n;
    char err[ERR_LEN];
    cr_assert_eq(tokenizer_decode_ids_text(tok, "ids.txt", text, strlen(text), &bytes, &n, err), 0,
                 "%s", err);
    cr_assert_eq(n, strlen("Hello world<|endoftext|>"));
    cr_assert_eq(memcmp(bytes, "Hello world<|endoftext|>", n), 0);
    free(bytes);
    cr_assert_eq(tokenizer_decode_ids_text(tok, "ids.txt", "", 0, &bytes, &n, err), 0);
    cr_assert_eq(n, 0);
    free(bytes);
    const char *bad[][2] = {{"1 2 x3", "byte offset 4 (id index 2): \"x3\" is not a token id"},
                            {"1 50257", "byte offset 2 (id index 1): id 50257 is out of range"},
                            {"12345678901", "\"12345678901\" is not a token id"},
                            {"-1", "\"-1\" is not a token id"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bytes = (uint8_t *)1;
        cr_assert_eq(tokenizer_decode_ids_text(tok, "ids.txt", bad[i][0], strlen(bad[i][0]),
                                               &bytes, &n, err), -1, "%s", bad[i][0]);
        cr_assert_null(bytes);
        cr_assert(strstr(err, "ids.txt: ") && strstr(err, bad[i][1]), "\"%s\" should say \"%s\"",
                  err, bad[i][1]);
    }
}

Test(tokenizer, special_token_is_ordinary_text) {
    const char *s = "<|endoftext|>";
    TokenIds ids = must_encode(s, strlen(s));
    int32_t want[] = {27, 91, 437, 1659, 5239, 91, 29};  // tiktoken's encode_ordinary
    cr_assert_eq(ids.len, 7);
    for (size_t i = 0; i < 7; i++) cr_assert_eq(ids.ids[i], want[i], "id %zu", i);
    token_ids_free(&ids);
}

Test(tokenizer, encode_appends_and_accepts_empty_text) {
    TokenIds ids = {0};
    char err[ERR_LEN];
    cr_assert_eq(tokenizer_encode(tok, "", 0, &ids, err), 0);
    cr_assert_eq(ids.len, 0);
    cr_assert_eq(tokenizer_encode(tok, "Hello", 5, &ids, err), 0);
    cr_assert_eq(tokenizer_encode(tok, " world", 6, &ids, err), 0);
    cr_assert_eq(ids.len, 2);
    cr_assert_eq(ids.ids[0], 15496);  // "Hello"
    cr_assert_eq(ids.ids[1], 995);    // " world"
    token_ids_free(&ids);
}

// ---- invalid UTF-8 -------------------------------------------------------

typedef struct {
    const char *bytes;
    size_t len;
    size_t offset;    // where the bad sequence starts
    const char *why;  // a word the reason must contain
} BadUtf8;

Test(tokenizer, invalid_utf8_is_an_error_with_the_byte_offset) {
    const BadUtf8 cases[] = {
        {"ab\x80", 3, 2, "continuation"},            // a stray continuation byte
        {"abc\xC0\xAF", 5, 3, "overlong"},           // '/' in two bytes
        {"a\xE0\x80\xAF", 4, 1, "overlong"},         // '/' in three bytes
        {"ab\xF0\x8F\xBF\xBF", 6, 2, "overlong"},    // U+FFFF in four bytes
        {"x\xED\xA0\x80y", 5, 1, "surrogate"},       // U+D800
        {"\xF4\x90\x80\x80", 4, 0, "10FFFF"},        // U+110000
        {"hi \xF5\x80\x80\x80", 7, 3, "10FFFF"},     // lead byte beyond U+10FFFF
        {"\xFF", 1, 0, "never"},                     // a byte UTF-8 never uses
        {"caf\xC3", 4, 3, "truncated"},              // cut at the end of the text
        {"\xE2\x82", 2, 0, "truncated"},             // cut after two of three bytes
        {"\xE2(\xA1", 3, 0, "continuation"},         // a continuation byte missing
        {"ok \xC3\xA9 then \xE2\x82 x", 15, 11, "continuation"},  // after valid é
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        TokenIds ids = {0};
        char err[ERR_LEN] = "";
        int rc = tokenizer_encode(tok, cases[i].bytes, cases[i].len, &ids, err);
        cr_assert_eq(rc, -1, "case %zu: invalid UTF-8 accepted", i);
        cr_assert_eq(ids.len, 0, "case %zu: ids appended despite the error", i);
        char where[64];
        snprintf(where, sizeof(where), "byte offset %zu:", cases[i].offset);
        cr_assert(strstr(err, where), "case %zu: \"%s\" should say \"%s\"", i, err, where);
        cr_assert(strstr(err, cases[i].why), "case %zu: \"%s\" should say \"%s\"", i, err,
                  cases[i].why);
        PieceList pieces = {0};
        cr_assert_eq(pretokenize(cases[i].bytes, cases[i].len, &pieces, err), -1);
        piece_list_free(&pieces);
    }
    // The largest code points of each length, and the edges around the
    // surrogates, are valid.
    const char *ok = "\x7F \xDF\xBF \xEF\xBF\xBF \xF4\x8F\xBF\xBF \xED\x9F\xBF \xEE\x80\x80";
    TokenIds ids = must_encode(ok, strlen(ok));
    token_ids_free(&ids);
}

// ---- the pattern, piece by piece -----------------------------------------

// Splits text and compares the pieces with want (a NULL-terminated list).
static void check_pieces(const char *text, const char *const *want) {
    PieceList got = {0};
    char err[ERR_LEN] = "";
    cr_assert_eq(pretokenize(text, strlen(text), &got, err), 0, "%s", err);
    size_t n = 0;
    while (want[n]) n++;
    char shown[1024] = "";
    for (size_t i = 0; i < got.len; i++) {
        size_t k = strlen(shown);
        snprintf(shown + k, sizeof(shown) - k, "%s\"%.*s\"", i ? ", " : "",
                 (int)got.items[i].len, text + got.items[i].start);
    }
    cr_assert_eq(got.len, n, "\"%s\": %zu pieces, want %zu: %s", text, got.len, n, shown);
    for (size_t i = 0; i < n; i++) {
        cr_assert(got.items[i].len == strlen(want[i]) &&
                      memcmp(text + got.items[i].start, want[i], got.items[i].len) == 0,
                  "\"%s\": piece %zu is wrong: %s", text, i, shown);
    }
    piece_list_free(&got);
}

#define PIECES(text, ...) check_pieces(text, (const char *const[]){__VA_ARGS__, NULL})

Test(tokenizer, pattern_contractions) {
    PIECES("it's", "it", "'s");
    PIECES("don't", "don", "'t");
    PIECES("we're I've I'm you'll he'd", "we", "'re", " I", "'ve", " I", "'m", " you", "'ll",
           " he", "'d");
    PIECES("X'S", "X", "'", "S");  // case-sensitive: "'S" is no contraction
    PIECES("I'M", "I", "'", "M");
    PIECES("it's'", "it", "'s", "'");
    PIECES("''s", "''", "s");  // the punctuation run takes both quotes
    PIECES("'ll've", "'ll", "'ve");
    PIECES(" 's", " '", "s");  // a space before: no contraction
    PIECES("'sss", "'s", "ss");
    PIECES("don\xE2\x80\x99t", "don", "\xE2\x80\x99", "t");  // U+2019 is not an apostrophe
}

Test(tokenizer, pattern_letters_numbers_other) {
    PIECES("123abc", "123", "abc");
    PIECES("ab12cd", "ab", "12", "cd");
    PIECES("Hello world!", "Hello", " world", "!");
    PIECES("!!! ...", "!!!", " ...");
    PIECES("\xF0\x9F\x98\x80\xF0\x9F\x98\x80", "\xF0\x9F\x98\x80\xF0\x9F\x98\x80");  // 😀😀
    PIECES("\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD ok", "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", " ok");
    PIECES("e\xCC\x81", "e", "\xCC\x81");  // a combining mark is "other"
    PIECES("\xEF\xBC\x91\xEF\xBC\x92\xEF\xBC\x93", "\xEF\xBC\x91\xEF\xBC\x92\xEF\xBC\x93");  // １２３
    PIECES(" \xD9\xA1\xD9\xA2\xD9\xA3" "abc", " \xD9\xA1\xD9\xA2\xD9\xA3", "abc");  // ١٢٣
    PIECES("\xE2\x85\xAB\xC2\xBD\xC2\xB2", "\xE2\x85\xAB\xC2\xBD\xC2\xB2");  // Ⅻ½²: Nl, No
    PIECES("\xE4\xB8\xAD\xE6\x96\x87 \xED\x95\x9C", "\xE4\xB8\xAD\xE6\x96\x87",
           " \xED\x95\x9C");  // 中文 한
}

Test(tokenizer, pattern_whitespace) {
    PIECES("  hello", " ", " hello");
    PIECES("a  \n b", "a", "  \n", " b");
    PIECES("hello world  ", "hello", " world", "  ");  // the end of the text
    PIECES("x   ", "x", "   ");
    PIECES(" ", " ");
    PIECES("\n\nx", "\n", "\n", "x");
    PIECES("a\tb", "a", "\t", "b");
    PIECES("a \tb", "a", " ", "\t", "b");  // the tab cannot be a ` ?` prefix
    PIECES("a\r\n\r\nb", "a", "\r\n\r", "\n", "b");
    PIECES("  \t\n", "  \t\n");
    PIECES("a\xC2\xA0" "b", "a", "\xC2\xA0", "b");                      // U+00A0
    PIECES("a \xC2\xA0" "b", "a", " ", "\xC2\xA0", "b");
    PIECES("x\xC2\xA0\xC2\xA0y", "x", "\xC2\xA0", "\xC2\xA0", "y");
    PIECES("\xE3\x80\x80x", "\xE3\x80\x80", "x");                       // U+3000
    PIECES("x\xE3\x80\x80\xE3\x80\x80!", "x", "\xE3\x80\x80", "\xE3\x80\x80", "!");
    PIECES("a\x1c" "b", "a", "\x1c", "b");  // U+001C is not White_Space: "other"
}

Test(tokenizer, character_classes) {
    // \s is exactly Unicode's White_Space: these 25 code points.
    const uint32_t spaces[] = {0x09,   0x0A,   0x0B,   0x0C,   0x0D,   0x20,   0x85,
                               0xA0,   0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004,
                               0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028,
                               0x2029, 0x202F, 0x205F, 0x3000};
    for (size_t i = 0; i < sizeof(spaces) / sizeof(spaces[0]); i++)
        cr_assert_eq(cp_class(spaces[i]), CP_SPACE, "U+%04X is White_Space", spaces[i]);
    // Not White_Space: the ASCII separators FS..US (Python's isspace() says
    // yes), zero-width space, Mongolian vowel separator (White_Space until
    // Unicode 6.3), BOM.
    const uint32_t others[] = {0x1C, 0x1D, 0x1E, 0x1F, 0x200B, 0x180E, 0xFEFF, 0x00AD};
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
        cr_assert_eq(cp_class(others[i]), CP_OTHER, "U+%04X is not White_Space", others[i]);
    cr_assert_eq(cp_class('a'), CP_LETTER);
    cr_assert_eq(cp_class(0x01C5), CP_LETTER);   // Dž, Lt
    cr_assert_eq(cp_class(0x02B0), CP_LETTER);   // ʰ, Lm
    cr_assert_eq(cp_class(0x4E2D), CP_LETTER);   // 中, Lo
    cr_assert_eq(cp_class(0x1D400), CP_LETTER);  // 𝐀, Lu above U+FFFF
    cr_assert_eq(cp_class('7'), CP_NUMBER);
    cr_assert_eq(cp_class(0x0663), CP_NUMBER);   // ٣, Nd
    cr_assert_eq(cp_class(0x216B), CP_NUMBER);   // Ⅻ, Nl
    cr_assert_eq(cp_class(0x00BD), CP_NUMBER);   // ½, No
    cr_assert_eq(cp_class(0x0301), CP_OTHER);    // combining acute, Mn
    cr_assert_eq(cp_class(0x0903), CP_OTHER);    // Devanagari visarga, Mc
    cr_assert_eq(cp_class(0x1F600), CP_OTHER);   // 😀, So
    cr_assert_eq(cp_class(0x10FFFF), CP_OTHER);  // unassigned
}

// ---- bad tokenizer files -------------------------------------------------

static Scratch *scratch_init(void) {
    Scratch *s = &scratch;
    snprintf(s->dir, sizeof(s->dir), "/tmp/test_tokenizer_XXXXXX");
    cr_assert_not_null(mkdtemp(s->dir));
    snprintf(s->enc, sizeof(s->enc), "%.63s/encoder.json", s->dir);
    snprintf(s->bpe, sizeof(s->bpe), "%.63s/vocab.bpe", s->dir);
    return s;
}

static void write_bytes(const char *path, const void *data, size_t len) {
    FILE *fp = fopen(path, "wb");
    cr_assert_not_null(fp, "cannot write %s", path);
    cr_assert_eq(fwrite(data, 1, len, fp), len);
    fclose(fp);
}

// Loads with the given files and checks the error mentions `path` and `what`.
static void expect_load_error(const char *enc, const char *bpe, const char *path,
                              const char *what) {
    char err[ERR_LEN] = "";
    Tokenizer *t = tokenizer_load(enc, bpe, err);
    cr_assert_null(t, "loading should fail with \"%s\"", what);
    cr_assert(strstr(err, path), "\"%s\" should name the file %s", err, path);
    cr_assert(strstr(err, what), "\"%s\" should say \"%s\"", err, what);
}

typedef struct {
    const char *json;
    const char *what;
} BadJson;

Test(tokenizer, bad_encoder_json_is_an_error_naming_the_file) {
    const Scratch *s = scratch_init();
    expect_load_error(s->enc, bpe_path, s->enc, "cannot open");  // missing

    const BadJson cases[] = {
        {"", "byte offset 0: unexpected end of file"},
        {"[]", "byte offset 0: expected '{'"},
        {"{\"a\": 1,}", "byte offset 8: expected a string key"},
        {"{\"a\" 1}", "byte offset 5: expected ':'"},
        {"{\"a\": 01}", "byte offset 6: leading zero"},
        {"{\"a\": -1}", "byte offset 6: negative id"},
        {"{\"a\": 1.5}", "byte offset 6: id is not an integer"},
        {"{\"a\": \"1\"}", "byte offset 6: expected an integer id"},
        {"{\"a\": 50257}", "byte offset 6: id out of range"},
        {"{\"a\": 1} x", "byte offset 9: unexpected data after the object"},
        {"{\"a\": 1", "byte offset 7: unexpected end of file"},
        {"{\"abc", "byte offset 1: unterminated string"},
        {"{\"a b\": 1}", "byte offset 3: character U+0020 is not in GPT-2's"},  // a space is written 'Ġ'
        {"{\"\\x\": 1}", "byte offset 2: invalid escape"},
        {"{\"\\u12G4\": 1}", "byte offset 6: bad hex digit"},
        {"{\"\\uD83D\": 1}", "byte offset 2: high surrogate \\uD83D not followed"},
        {"{\"\\uD83D\\u0041\": 1}", "byte offset 2: high surrogate \\uD83D followed by \\u0041"},
        {"{\"\\uDE00\": 1}", "byte offset 2: lone low surrogate"},
        {"{\"\\uD83D\\uDE00\": 1}", "byte offset 2: character U+1F600 is not in GPT-2's"},
        {"{\"\xE4\xB8\xAD\": 1}", "byte offset 2: character U+4E2D is not in GPT-2's"},
        {"{\"\xFF\": 1}", "byte offset 2: invalid UTF-8"},
        {"{\"a\nb\": 1}", "byte offset 3: control character"},
        {"{\"\": 1}", "byte offset 1: empty token string"},
        {"{\"a\": 1, \"a\": 2}", "byte offset 9: duplicate key"},
        {"{\"a\": 1, \"b\": 1}", "byte offset 9: id 1 is used twice"},
        {"{\"\\u0120\\u00e9\\/\": 7}", "has 1 entries, expected 50257"},  // valid escapes
        {"{}", "has 0 entries"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        write_bytes(s->enc, cases[i].json, strlen(cases[i].json));
        expect_load_error(s->enc, bpe_path, s->enc, cases[i].what);
    }

    // The real file with "<|endoftext|>" renamed: 50257 entries, no end of text.
    size_t len;
    char *real = must_read(encoder_path, &len);
    char *eot = strstr(real, "\"<|endoftext|>\"");
    cr_assert_not_null(eot);
    memcpy(eot, "\"<|endoftexx|>\"", 15);
    write_bytes(s->enc, real, len);
    expect_load_error(s->enc, bpe_path, s->enc, "has no \"<|endoftext|>\" token");
    free(real);
}

Test(tokenizer, a_directory_for_a_file_is_named_as_one) {
    const Scratch *s = scratch_init();
    expect_load_error(s->dir, bpe_path, s->dir, "is a directory");
    expect_load_error(encoder_path, s->dir, s->dir, "is a directory");
    char err[ERR_LEN];
    size_t len;
    cr_assert_null(read_file(s->dir, &len, err));
    cr_assert(strstr(err, "is a directory"), "%s", err);
    rmdir(s->dir);
}

// Writes the real vocab.bpe with line `line` (1-based) replaced by `text`
// (or with everything from that line on dropped, when text is NULL).
static void write_bpe_with(const char *path, const char *real, size_t len, int line,
                           const char *text) {
    FILE *fp = fopen(path, "wb");
    cr_assert_not_null(fp);
    const char *p = real, *end = real + len;
    for (int l = 1; p < end; l++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
        if (l == line && !text) break;
        if (l == line) fprintf(fp, "%s\n", text);
        else fwrite(p, 1, n, fp);
        p += n;
    }
    fclose(fp);
}

Test(tokenizer, bad_vocab_bpe_is_an_error_naming_the_file) {
    const Scratch *s = scratch_init();
    expect_load_error(encoder_path, s->bpe, s->bpe, "cannot open");  // missing

    size_t len;
    char *real = must_read(bpe_path, &len);
    write_bpe_with(s->bpe, real, len, 1, "#version: 0.3");
    expect_load_error(encoder_path, s->bpe, s->bpe, "line 1: expected the header");
    write_bpe_with(s->bpe, real, len, 3, "\xC4\xA0 a b");  // "Ġ a b"
    expect_load_error(encoder_path, s->bpe, s->bpe, "line 3: expected two tokens");
    write_bpe_with(s->bpe, real, len, 3, "");
    expect_load_error(encoder_path, s->bpe, s->bpe, "line 3: expected two tokens");
    write_bpe_with(s->bpe, real, len, 4, "h qqqqqqqqqq");
    expect_load_error(encoder_path, s->bpe, s->bpe, "line 4: merge \"h qqqqqqqqqq\": its second");
    write_bpe_with(s->bpe, real, len, 5, "\xE4\xB8\xAD x");  // 中 is not in the alphabet
    expect_load_error(encoder_path, s->bpe, s->bpe, "line 5: character U+4E2D");
    write_bpe_with(s->bpe, real, len, 2, "\xC4\xA0 a");  // "Ġ a" is merge 1, not 0
    expect_load_error(encoder_path, s->bpe, s->bpe, "line 2: merge 0 makes token 257");
    write_bpe_with(s->bpe, real, len, 12, NULL);  // only 10 merges
    expect_load_error(encoder_path, s->bpe, s->bpe, "has 10 merges, expected 50000");
    free(real);
}
