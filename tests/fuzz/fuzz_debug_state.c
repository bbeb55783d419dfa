// fuzz_debug_state.c: debug_state_read on any bytes, for a model whose shape
// the input's first FUZZ_CONFIG_BYTES bytes give (fuzz_shapes.h): tied or
// untied, padded or not, of a few layers, heads and channels, or no valid
// shape at all (the reader's "bad model config"). The rest of the input is
// the file. tests/fuzz/make_seeds.c writes valid ones, of a tied and an
// untied shape, and one with a bad shape.
#include "files/debug_state.h"
#include "fuzz.h"
#include "fuzz_shapes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < FUZZ_CONFIG_BYTES) return 0;
    GPT2Config cfg = fuzz_config_from_bytes(data);
    const char *path =
        fuzz_input_file("debug_state", data + FUZZ_CONFIG_BYTES, size - FUZZ_CONFIG_BYTES);
    char err[ERR_LEN] = "";
    DebugState ds = {0};
    fuzz_check_refusal(debug_state_read(path, &cfg, &ds, err), err, path);
    debug_state_free(&ds);
    return 0;
}
