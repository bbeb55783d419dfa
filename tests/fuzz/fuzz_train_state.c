// fuzz_train_state.c: train_state_read_progress, train_state_read and
// train_state_read_run (versions 2, 3 and 4: chapter 13's FP8 state too) on
// any bytes, for the shape whose parameter count the header names
// (fuzz_shapes.h: the tiny one, or the smallest whose state chapter 10
// writes with 8-bit moments).
//
// It stops where the reader does. A resumed run goes on to convert the
// moments into its own layout (adam_state_convert); the harness once did
// too, and 500,000 inputs ran clean through it, but the quantization made
// each input twelve times slower, for arithmetic on values that the reader
// has already checked to be finite.
#include <stdlib.h>
#include "fuzz.h"
#include "fuzz_shapes.h"
#include "files/train_state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_input_file("train_state", data, size);
    GPT2Config cfg = fuzz_train_state_config(data, size);
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
    Fp8State fp8;
    err[0] = '\0';
    int rc = train_state_read_run(path, &cfg, &p, &s, &fp8, err);
    fuzz_check_refusal(rc, err, path);
    if (rc == 0) adam_state_free(&s), fp8_state_free(&fp8);
    return 0;
}
