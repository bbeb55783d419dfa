// fuzz_decode.c: tokenizer_decode_ids_text on any bytes (as `build/tokenizer
// decode FILE` reads them): ids in decimal, separated by whitespace.
#include <stdlib.h>
#include "fuzz_tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const Tokenizer *tok = fuzz_gpt2_tokenizer();
    char err[ERR_LEN] = "";
    uint8_t *bytes = NULL;
    size_t n = 0;
    int rc = tokenizer_decode_ids_text(tok, "ids.txt", (const char *)data, size, &bytes, &n, err);
    fuzz_check_refusal(rc, err, "ids.txt");
    free(bytes);
    return 0;
}
