// make_seeds.c: a valid file of each binary format, written by our own
// writers at the harnesses' tiny shape (fuzz_shapes.h), for the fuzzer to
// start from: a fuzzer that starts from valid files reaches the checks past
// the header at once. Usage: make_seeds DIR (writes DIR/<harness>/seed).
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include "checkpoint.h"
#include "debug_state.h"
#include "fuzz_shapes.h"
#include "shard.h"
#include "train_state.h"

static const char *seed_path(const char *dir, const char *harness) {
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, harness);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/%s/seed", dir, harness);
    return path;
}

static float *ramp(size_t n, float scale) {
    float *v = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) v[i] = scale * (float)(i % 13) - 0.5f;
    return v;
}

static int write_debug_state(const char *path, const GPT2Config *cfg, char *err) {
    enum { B = 1, T = 2 };
    int32_t x[B * T] = {1, 2}, y[B * T] = {2, 3};
    size_t n = gpt2_num_params(cfg);
    DebugState ds = {.B = B, .T = T, .x = x, .y = y, .loss = 1.5f, .num_grads = n};
    ds.logits = ramp((size_t)B * T * cfg->vocab_size, 0.1f);
    ds.grads = ramp(n, 0.01f);
    // llm.c writes the padding rows zero; so does the seed.
    debug_grads_from_param_layout(cfg, ds.grads, ds.grads);
    int rc = debug_state_write(path, cfg, &ds, err);
    free(ds.logits);
    free(ds.grads);
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 2) die("usage: make_seeds DIR");
    const char *dir = argv[1];
    mkdir(dir, 0777);
    GPT2Config cfg = fuzz_tiny_config();
    size_t n = gpt2_num_params(&cfg);
    float *params = ramp(n, 0.02f), *m = ramp(n, 0.001f), *v = ramp(n, 0.0f);
    for (size_t i = 0; i < n; i++) v[i] = 1e-4f;  // the second moment is never negative
    TrainProgress p = {.step = 3, .B = 1, .T = 2,
                       .model_checksum = checkpoint_params_checksum(params, n)};
    int32_t tokens[] = {1, 2, 3, 50256, 0, 6};
    char err[ERR_LEN];
    if (checkpoint_write(seed_path(dir, "checkpoint"), &cfg, params, err) != 0 ||
        shard_write(seed_path(dir, "shard"), tokens, 6, err) != 0 ||
        write_debug_state(seed_path(dir, "debug_state"), &cfg, err) != 0 ||
        train_state_write(seed_path(dir, "train_state"), &p, m, v, n, err) != 0)
        die("make_seeds: %s", err);
    free(params);
    free(m);
    free(v);
    return 0;
}
