// pretokenize.c: see pretokenize.h. GPT-2's pre-tokenization pattern,
//
//     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// matched by hand, one alternative after the other, over code points.
#include "data/pretokenize.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "util/util.h"

// ---- character classes ---------------------------------------------------

// Unicode's White_Space property, outside ASCII (inside ASCII: U+0009..U+000D
// and U+0020). This is what \s means in tiktoken's regex engine. Note that it
// is not C's isspace() and not Python's str.isspace() (which adds U+001C..U+001F).
static int is_unicode_space(uint32_t cp) {
    return cp == 0x0085 || cp == 0x00A0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// ASCII, the common case, by a table: letters, digits, the six ASCII spaces,
// and everything else (punctuation, symbols, controls) is "other".
static const uint8_t ascii_class[128] = {
    ['\t'] = CP_SPACE, ['\n'] = CP_SPACE, ['\v'] = CP_SPACE, ['\f'] = CP_SPACE,
    ['\r'] = CP_SPACE, [' '] = CP_SPACE,
    ['0'] = CP_NUMBER, ['1'] = CP_NUMBER, ['2'] = CP_NUMBER, ['3'] = CP_NUMBER,
    ['4'] = CP_NUMBER, ['5'] = CP_NUMBER, ['6'] = CP_NUMBER, ['7'] = CP_NUMBER,
    ['8'] = CP_NUMBER, ['9'] = CP_NUMBER,
    ['A'] = CP_LETTER, ['B'] = CP_LETTER, ['C'] = CP_LETTER, ['D'] = CP_LETTER,
    ['E'] = CP_LETTER, ['F'] = CP_LETTER, ['G'] = CP_LETTER, ['H'] = CP_LETTER,
    ['I'] = CP_LETTER, ['J'] = CP_LETTER, ['K'] = CP_LETTER, ['L'] = CP_LETTER,
    ['M'] = CP_LETTER, ['N'] = CP_LETTER, ['O'] = CP_LETTER, ['P'] = CP_LETTER,
    ['Q'] = CP_LETTER, ['R'] = CP_LETTER, ['S'] = CP_LETTER, ['T'] = CP_LETTER,
    ['U'] = CP_LETTER, ['V'] = CP_LETTER, ['W'] = CP_LETTER, ['X'] = CP_LETTER,
    ['Y'] = CP_LETTER, ['Z'] = CP_LETTER,
    ['a'] = CP_LETTER, ['b'] = CP_LETTER, ['c'] = CP_LETTER, ['d'] = CP_LETTER,
    ['e'] = CP_LETTER, ['f'] = CP_LETTER, ['g'] = CP_LETTER, ['h'] = CP_LETTER,
    ['i'] = CP_LETTER, ['j'] = CP_LETTER, ['k'] = CP_LETTER, ['l'] = CP_LETTER,
    ['m'] = CP_LETTER, ['n'] = CP_LETTER, ['o'] = CP_LETTER, ['p'] = CP_LETTER,
    ['q'] = CP_LETTER, ['r'] = CP_LETTER, ['s'] = CP_LETTER, ['t'] = CP_LETTER,
    ['u'] = CP_LETTER, ['v'] = CP_LETTER, ['w'] = CP_LETTER, ['x'] = CP_LETTER,
    ['y'] = CP_LETTER, ['z'] = CP_LETTER,
};

CpClass cp_class(uint32_t cp) {
    if (cp < 128) return (CpClass)ascii_class[cp];
    if (is_unicode_space(cp)) return CP_SPACE;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
        return CP_LETTER;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
        return CP_NUMBER;
    default:
        return CP_OTHER;
    }
}

// ---- UTF-8 ---------------------------------------------------------------

int utf8_decode(const uint8_t *s, size_t len, uint32_t *cp, const char **why) {
    uint8_t b = s[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    // The lead byte gives the length and the first payload bits. The range
    // of the second byte is narrower after some leads: that is where
    // overlong forms (E0, F0), surrogates (ED) and values above U+10FFFF (F4)
    // are ruled out, as in the table of RFC 3629 section 4.
    int n;
    uint8_t lo = 0x80, hi = 0xBF;
    uint32_t c;
    if (b < 0xC0) {
        *why = "unexpected continuation byte";
        return 0;
    } else if (b < 0xC2) {
        *why = "overlong encoding";
        return 0;
    } else if (b < 0xE0) {
        n = 2, c = b & 0x1F;
    } else if (b < 0xF0) {
        n = 3, c = b & 0x0F;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
    } else if (b < 0xF5) {
        n = 4, c = b & 0x07;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
    } else if (b < 0xF8) {
        *why = "code point above U+10FFFF";
        return 0;
    } else {
        *why = "byte that never appears in UTF-8 (0xF8..0xFF)";
        return 0;
    }
    for (int i = 1; i < n; i++) {
        if ((size_t)i >= len) {
            *why = "truncated sequence at end of text";
            return 0;
        }
        uint8_t t = s[i];
        if (t < 0x80 || t > 0xBF) {
            *why = "missing continuation byte";
            return 0;
        }
        if (i == 1 && (t < lo || t > hi)) {
            *why = b == 0xED ? "surrogate code point"
                 : b == 0xF4 ? "code point above U+10FFFF"
                             : "overlong encoding";
            return 0;
        }
        c = (c << 6) | (t & 0x3F);
    }
    *cp = c;
    return n;
}

int utf8_validate(const char *text, size_t len, char *err) {
    const uint8_t *s = (const uint8_t *)text;
    size_t i = 0;
    while (i < len) {
        // Skip ASCII eight bytes at a time: most text is mostly ASCII.
        while (i + 8 <= len) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= len) break;
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        const char *why = "";
        int n = utf8_decode(s + i, len - i, &cp, &why);
        if (n == 0) return fail(err, "invalid UTF-8 at byte offset %zu: %s", i, why);
        i += (size_t)n;
    }
    return 0;
}

// Decodes the code point at s (valid UTF-8 already checked); returns its length.
static inline size_t decode_valid(const uint8_t *s, uint32_t *cp) {
    uint8_t b = s[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    if (b < 0xE0) {
        *cp = ((uint32_t)(b & 0x1F) << 6) | (s[1] & 0x3F);
        return 2;
    }
    if (b < 0xF0) {
        *cp = ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        return 3;
    }
    *cp = ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
          ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
    return 4;
}

static inline CpClass class_at(const uint8_t *s, size_t *n) {
    if (s[0] < 0x80) {  // fast path, no decoding
        *n = 1;
        return (CpClass)ascii_class[s[0]];
    }
    uint32_t cp;
    *n = decode_valid(s, &cp);
    return cp_class(cp);
}

// ---- the matcher ---------------------------------------------------------

size_t pretokenize_next(const char *text, size_t len, size_t pos) {
    const uint8_t *s = (const uint8_t *)text;
    size_t n;
    CpClass cls = class_at(s + pos, &n);

    // 's|'t|'re|'ve|'m|'ll|'d
    // An apostrophe (U+0027 only, not U+2019) and one of seven lowercase
    // endings. Case-sensitive: "'S" is not a contraction here.
    if (s[pos] == '\'' && pos + 1 < len) {
        uint8_t a = s[pos + 1];
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return pos + 2;
        if (pos + 2 < len) {
            uint8_t b = s[pos + 2];
            if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
                return pos + 3;
        }
        // Not a contraction: the apostrophe is "other" and starts a
        // punctuation run below, like any other symbol.
    }

    // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`
    // An optional plain space (U+0020; a tab or U+00A0 does not count), then
    // a run of letters, or of numbers, or of "others". The classes do not
    // overlap, so the first code point of the run decides which of the three
    // alternatives matches, and the run goes on as long as the class stays
    // the same (the `+` is greedy and nothing after it needs backtracking).
    size_t run = pos;
    if (s[pos] == ' ' && pos + 1 < len) {
        size_t m;
        CpClass next = class_at(s + pos + 1, &m);
        if (next != CP_SPACE) {  // the space is the optional prefix
            cls = next;
            run = pos + 1;
            n = m;
        }
    }
    if (cls != CP_SPACE) {
        size_t end = run + n;
        while (end < len) {
            size_t m;
            if (class_at(s + end, &m) != cls) break;
            end += m;
        }
        return end;
    }

    // Only whitespace is left: a space not followed by a non-space, or any
    // other White_Space code point. Find the whole run of whitespace,
    // remembering where its last code point starts.
    size_t last = pos, end = pos + n;
    while (end < len) {
        size_t m;
        if (class_at(s + end, &m) != CP_SPACE) break;
        last = end;
        end += m;
    }

    // `\s+(?!\S)`
    // The greedy run, provided no non-space follows it. At the end of the
    // text nothing follows: the whole run is one piece.
    if (end == len) return end;
    // A non-space follows, so the engine backtracks one code point: the run
    // minus its last code point is followed by whitespace (that last code
    // point), and (?!\S) holds. The last code point is left for the next
    // piece: a plain space then becomes the ` ?` of a word, number or
    // punctuation run; any other whitespace becomes a piece of its own below.
    // A run of a single code point cannot give back anything: \s+ needs one.
    if (last > pos) return last;

    // `\s+`
    // A single whitespace code point followed by a non-space (for example
    // "\n" before a word, or the U+00A0 in "a\u00A0b").
    return end;
}

int pretokenize(const char *text, size_t len, PieceList *out, char *err) {
    if (utf8_validate(text, len, err) != 0) return -1;
    size_t pos = 0;
    while (pos < len) {
        size_t end = pretokenize_next(text, len, pos);
        if (out->len == out->cap) {
            out->cap = out->cap ? 2 * out->cap : 64;
            Piece *bigger = realloc(out->items, out->cap * sizeof(Piece));
            if (!bigger) die("out of memory growing a piece list");
            out->items = bigger;
        }
        out->items[out->len++] = (Piece){pos, end - pos};
        pos = end;
    }
    return 0;
}

void piece_list_free(PieceList *p) {
    free(p->items);
    p->items = NULL;
    p->len = p->cap = 0;
}
