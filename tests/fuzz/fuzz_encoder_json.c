// fuzz_encoder_json.c: tokenizer_load with any bytes as encoder.json (and the
// real vocab.bpe, which is read only after the encoder is accepted).
#include "fuzz.h"
#include "data/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_input_file("encoder.json", data, size);
    char err[ERR_LEN] = "";
    Tokenizer *tok =
        tokenizer_load(path, fuzz_data_path("FUZZ_BPE", "data/raw/gpt2_vocab.bpe"), err);
    fuzz_check_refusal(tok == NULL ? -1 : 0, err, NULL);
    tokenizer_free(tok);
    return 0;
}
