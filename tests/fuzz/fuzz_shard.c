// fuzz_shard.c: shard_read_header and shard_read on any bytes.
#include <stdlib.h>
#include "fuzz.h"
#include "files/shard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_input_file("shard", data, size);
    char err[ERR_LEN] = "";
    size_t n = 0;
    fuzz_check_refusal(shard_read_header(path, &n, err), err, path);
    uint16_t *tokens = NULL;
    err[0] = '\0';
    fuzz_check_refusal(shard_read(path, 50257, &tokens, &n, err), err, path);
    free(tokens);
    return 0;
}
