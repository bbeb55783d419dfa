// fuzz_checkpoint.c: checkpoint_read and checkpoint_read_config on any bytes.
#include <stdlib.h>
#include "files/checkpoint.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_input_file("checkpoint", data, size);
    char err[ERR_LEN] = "";
    GPT2Config cfg;
    fuzz_check_refusal(checkpoint_read_config(path, &cfg, err), err, path);
    float *params = NULL;
    err[0] = '\0';
    fuzz_check_refusal(checkpoint_read(path, &cfg, &params, err), err, path);
    free(params);
    return 0;
}
