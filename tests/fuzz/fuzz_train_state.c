// fuzz_train_state.c: train_state_read_progress, train_state_read and
// train_state_read_adam (versions 2 and 3) on any bytes, for the shape whose
// parameter count the header names (fuzz_shapes.h: the tiny one, or the
// smallest whose state chapter 10 writes with 8-bit moments); then, as a
// resumed run does with what train_state_read_adam returns (train_gpu.c's
// restore_state), the moments converted into chapter 09's layout and
// chapter 10's: dequantized, quantized or copied, whatever the file held.
#include <stdlib.h>
#include "fuzz.h"
#include "fuzz_shapes.h"
#include "train_state.h"

// s converted into the layout of the shape's model with or without 8-bit
// moments.
static void convert_to(const AdamState *s, const GPT2Config *cfg, int quantize8) {
    AdamLayout l = adam_layout_for(cfg, quantize8);
    AdamState dst;
    adam_state_alloc(&dst, &l);
    adam_state_convert(s, &dst);
    adam_state_free(&dst);
}

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
    err[0] = '\0';
    int rc = train_state_read_adam(path, &cfg, &p, &s, err);
    fuzz_check_refusal(rc, err, path);
    if (rc == 0) {
        convert_to(&s, &cfg, 0);
        convert_to(&s, &cfg, 1);
        adam_state_free(&s);
    }
    return 0;
}
