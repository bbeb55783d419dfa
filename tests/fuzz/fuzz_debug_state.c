// fuzz_debug_state.c: debug_state_read on any bytes, for a tiny model whose
// file is small enough for the fuzzer to reach (tests/fuzz/make_seeds.c
// writes a valid one of this shape as the seed).
#include "debug_state.h"
#include "fuzz.h"
#include "fuzz_shapes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_input_file("debug_state", data, size);
    GPT2Config cfg = fuzz_tiny_config();
    char err[ERR_LEN] = "";
    DebugState ds = {0};
    fuzz_check_refusal(debug_state_read(path, &cfg, &ds, err), err, path);
    debug_state_free(&ds);
    return 0;
}
