// fuzz_vocab_bpe.c: any bytes as vocab.bpe, checked against GPT-2's real
// vocabulary (tokenizer_check_merges_file, the check tokenizer_load makes).
#include "fuzz_tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const Tokenizer *tok = fuzz_gpt2_tokenizer();
    const char *path = fuzz_input_file("vocab.bpe", data, size);
    char err[ERR_LEN] = "";
    fuzz_check_refusal(tokenizer_check_merges_file(tok, path, err), err, path);
    return 0;
}
