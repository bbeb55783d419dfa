// fuzz_encode.c: tokenizer_encode on any bytes (invalid UTF-8 included), and
// the ids it gives decode back to exactly those bytes.
#include <stdlib.h>
#include <string.h>
#include "fuzz_tokenizer.h"

// Valid text round-trips: the bytes of its tokens, in order, are the text.
static void check_round_trip(const Tokenizer *tok, const uint8_t *data, size_t size,
                             const TokenIds *ids) {
    size_t at = 0;
    for (size_t i = 0; i < ids->len; i++) {
        size_t n = 0;
        const uint8_t *bytes = tokenizer_token_bytes(tok, ids->ids[i], &n);
        if (bytes == NULL || at + n > size || memcmp(data + at, bytes, n) != 0) {
            fprintf(stderr, "fuzz: token %zu (id %d) does not match the text at byte %zu\n", i,
                    ids->ids[i], at);
            abort();
        }
        at += n;
    }
    if (at != size) {
        fprintf(stderr, "fuzz: the tokens cover %zu of %zu bytes\n", at, size);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const Tokenizer *tok = fuzz_gpt2_tokenizer();
    char err[ERR_LEN] = "";
    TokenIds ids = {0};
    int rc = tokenizer_encode(tok, (const char *)data, size, &ids, err);
    fuzz_check_refusal(rc, err, NULL);
    if (rc == 0) check_round_trip(tok, data, size, &ids);
    token_ids_free(&ids);
    return 0;
}
