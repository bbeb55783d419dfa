// fuzz_train_state.c: train_state_read_progress and train_state_read on any
// bytes, for the tiny model's parameter count (fuzz_shapes.h).
#include <stdlib.h>
#include "fuzz.h"
#include "fuzz_shapes.h"
#include "train_state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_input_file("train_state", data, size);
    GPT2Config cfg = fuzz_tiny_config();
    size_t n = gpt2_num_params(&cfg), found = 0;
    char err[ERR_LEN] = "";
    TrainProgress p;
    fuzz_check_refusal(train_state_read_progress(path, &p, &found, err), err, path);
    float *m = malloc(n * sizeof(float)), *v = malloc(n * sizeof(float));
    err[0] = '\0';
    fuzz_check_refusal(train_state_read(path, &p, m, v, n, err), err, path);
    free(m);
    free(v);
    return 0;
}
