// fuzz_train_state.c: train_state_read_progress, train_state_read and
// train_state_read_adam (versions 2 and 3) on any bytes, for the tiny model's
// parameter count (fuzz_shapes.h).
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
    AdamState s;
    err[0] = '\0';
    int rc = train_state_read_adam(path, &cfg, &p, &s, err);
    fuzz_check_refusal(rc, err, path);
    if (rc == 0) adam_state_free(&s);
    return 0;
}
