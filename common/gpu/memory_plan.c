// memory_plan.c: see memory_plan.h.
#include "gpu/memory_plan.h"

#include <stdio.h>

#include "gpu/activations.h"
#include "optim/adam_state.h"
#include "adamw.h"
#include "attention.h"
#include "attention_flash.h"
#include "gpu/gpt2_gpu.h"
#include "layernorm.h"
#include "matmul.h"
#include "matmul_lt.h"
#include "precision.h"
#include "util/util.h"

// What CUDA's libraries take beyond our allocations and beyond the context
// that exists when the plan is checked: cuBLAS's own workspace, the kernels
// of cuBLAS, cuBLASLt and ours as they are loaded (lazily, at first use),
// CUDA graphs' executable copies. Measured on the H100 at 124M, B=16
// (results/h100/first_run/memory.csv): in every chapter the most in use,
// which counts the CUDA context (about 0.6 GiB: a card of 10 GiB has 9.42
// free when the plan is checked) and the plan does not, is at most 0.37 GiB
// above the plan with this allowance, so what the libraries add is under it.
#define LIBRARIES_ALLOWANCE ((size_t)256 << 20)
// Chapter 11's GEMM autotuning flushes the L2 cache with a write of twice
// its size: 100 MB on the H100, 120 MB on the H200; room for newer GPUs.
#define L2_FLUSH_ALLOWANCE ((size_t)256 << 20)

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

// One scratch buffer serves every kernel: none keeps anything in it between
// calls. The eager attention's is the largest by far (its (B,NH,T,T)
// scores); flash attention needs one float per row (chapter 12's v4 too).
size_t memory_plan_scratch_floats(const GPT2Config *c, int B, int T, const RunPlan *run) {
    int C = c->channels, NH = c->num_heads;
    size_t n = GRAD_NORM_MAX_BLOCKS;
    if (!run->keeps_scores) {  // flash attention
        n = max_size(n, attention_backward_v2_scratch_floats(B, T, NH));
    } else {
        n = max_size(n, attention_forward_scratch_floats(B, T, C, NH));
        n = max_size(n, attention_backward_scratch_floats(B, T, C, NH));
    }
    n = max_size(n, layernorm_backward_scratch_floats(B, T, C));
    n = max_size(n, matmul_backward_scratch_floats(B, T, 4 * C));  // the widest biased matmul
    n = max_size(n, matmul_backward_v2_scratch_floats(4 * C));
    return n;
}

// Chapter 04's GEMMs on cuBLASLt: its workspace, and the lm_head's weight
// and gradient copied to a width that is a multiple of 8 when the
// vocabulary is not padded (matmul_lt.h).
static size_t gemm_bytes(const GPT2Config *c, const RunPlan *run) {
    if (!run->lt_gemms) return 0;
    return matmul_lt_workspace_bytes() +
           2 * matmul_lt_padded_weight_bytes(c->padded_vocab_size, c->channels);
}

MemoryPlan memory_plan(const GPT2Config *cfg, int B, int T, const RunPlan *run) {
    MemoryPlan p = {0};
    const size_t n = gpt2_num_params(cfg);
    const AdamLayout l = adam_layout_for(cfg, run->moments_8bit);
    p.params = p.grads = n * sizeof(floatX);
    p.adam_fp32 = 2 * l.fp32_values * sizeof(float);
    p.adam_8bit = 2 * (l.q8_values + l.q8_blocks * sizeof(float));
#ifdef PRECISION_BF16
    p.master = n * sizeof(float);
#endif
    p.activations = activations_bytes(cfg, B, T, run);
    p.scratch = memory_plan_scratch_floats(cfg, B, T, run) * sizeof(float);
    p.batch = device_batch_bytes(B, T);
    p.scalars = 3 * sizeof(float) + sizeof(AdamWStep);
    p.fp8 = run->fp8 ? fp8_layers_bytes(cfg, B, T, run->recompute) : 0;
    p.model = p.params + p.grads + p.adam_fp32 + p.adam_8bit + p.master + p.activations +
              p.scratch + p.batch + p.scalars + p.fp8;
    p.gemm = gemm_bytes(cfg, run);
    p.workers = run->workers ? 2 * device_batch_bytes(B, T) : 0;
    // The largest output a trial keeps a copy of: a weight's gradient.
    const size_t widest = max_size((size_t)cfg->padded_vocab_size, 4 * (size_t)cfg->channels);
    p.autotune = run->launch.gemm_autotune
                     ? widest * cfg->channels * sizeof(floatX) + L2_FLUSH_ALLOWANCE : 0;
    p.libraries = LIBRARIES_ALLOWANCE;
    p.total = p.model + p.gemm + p.workers + p.autotune + p.libraries;
    return p;
}

int memory_plan_largest_batch(const GPT2Config *cfg, int B, int T, const RunPlan *run,
                              size_t free_bytes) {
    for (int b = B; b >= 1; b /= 2)
        if (memory_plan(cfg, b, T, run).total <= free_bytes) return b;
    return 0;
}

static double gib(size_t bytes) { return bytes / (double)(1 << 30); }

int memory_plan_check(const GPT2Config *cfg, int B, int T, const RunPlan *run,
                      size_t free_bytes, char *err) {
    const MemoryPlan p = memory_plan(cfg, B, T, run);
    if (p.total <= free_bytes) return 0;
    char need[160];
    snprintf(need, sizeof need,
             "B=%d, T=%d needs about %.1f GiB of device memory (activations %.1f, the rest of "
             "the model %.1f, libraries and buffers %.1f), and the GPU has %.1f GiB free", B, T,
             gib(p.total), gib(p.activations), gib(p.model - p.activations),
             gib(p.total - p.model), gib(free_bytes));
    const int fits = memory_plan_largest_batch(cfg, B, T, run, free_bytes);
    if (fits == 0)
        return fail(err, "%s: not even -b 1 fits (%.1f GiB); a shorter -t, or a GPU with more "
                         "memory", need, gib(memory_plan(cfg, 1, T, run).total));
    // Chapter 11's micro-batches train the same step in the memory of the
    // smaller batch; they need what its graphs need (run_plan.c).
    if (run->async && run->fused_update && B % fits == 0)
        return fail(err, "%s: -b %d fits (about %.1f GiB), and -b %d --grad-accum %d trains "
                         "the same %d sequences a step", need, fits,
                    gib(memory_plan(cfg, fits, T, run).total), fits, B / fits, B);
    return fail(err, "%s: -b %d fits (about %.1f GiB)", need, fits,
                gib(memory_plan(cfg, fits, T, run).total));
}

void memory_plan_print(const MemoryPlan *p, FILE *out) {
    const double mib = 1024.0 * 1024.0;
    const struct {
        const char *name;
        size_t bytes;
    } rows[] = {
        {"parameters (" PRECISION_NAME ")", p->params},
        {"gradients (" PRECISION_NAME ")", p->grads},
        {"AdamW m and v (fp32)", p->adam_fp32},
        {"AdamW m and v (8-bit)", p->adam_8bit},
        {"master weights (fp32)", p->master},
        {"activations", p->activations},
        {"scratch (fp32)", p->scratch},
        {"batch (tokens)", p->batch + p->scalars},
        {"FP8 operands and scales", p->fp8},
        {"cuBLASLt workspace, copies", p->gemm},
        {"data workers' batches", p->workers},
        {"autotuning's trials", p->autotune},
        {"libraries (allowance)", p->libraries},
    };
    fprintf(out, "memory: %.1f MiB planned on the device, the model %.1f MiB of it\n",
            p->total / mib, p->model / mib);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (rows[i].bytes > 0)
            fprintf(out, "memory:   %-29s %10.1f MiB\n", rows[i].name, rows[i].bytes / mib);
}
