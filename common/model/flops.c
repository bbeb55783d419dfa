// flops.c: see flops.h.
#include "model/flops.h"

#include <string.h>

// ANCHOR: flops_per_token
double flops_per_token(const GPT2Config *c, int T) {
    size_t sizes[NUM_PARAM_TENSORS];
    gpt2_param_sizes(c, sizes);
    double n = (double)gpt2_num_params(c) - (double)sizes[PARAM_WTE] - (double)sizes[PARAM_WPE];
    if (c->tied) n += (double)sizes[PARAM_WTE];  // wte is the lm_head too
    return 6.0 * n + 12.0 * c->num_layers * c->channels * (double)T;
}
// ANCHOR_END: flops_per_token

double peak_bf16_tflops(const char *name) {
    // Dense (no 2:4 sparsity) bf16 with fp32 accumulation.
    if (strstr(name, "H100") && strstr(name, "PCIe")) return 756.0;
    if (strstr(name, "H100") && strstr(name, "NVL")) return 835.0;
    if (strstr(name, "H100") || strstr(name, "H200") || strstr(name, "GH200")) return 989.4;
    if (strstr(name, "A100")) return 312.0;
    return 0.0;
}

double peak_hbm_tbps(const char *name) {
    if (strstr(name, "H100") && strstr(name, "PCIe")) return 2.0;
    if (strstr(name, "H100") && strstr(name, "NVL")) return 3.9;
    if (strstr(name, "H100")) return 3.35;  // SXM5, HBM3
    if (strstr(name, "H200") || strstr(name, "GH200")) return 4.8;
    if (strstr(name, "A100")) return 2.0;
    return 0.0;
}
