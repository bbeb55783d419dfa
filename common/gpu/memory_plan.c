// memory_plan.c: see memory_plan.h.
#include "gpu/memory_plan.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

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
    AdamLayout l = adam_layout_for(cfg, run->moments_8bit);
    // Chapter 15's --shard-optimizer: the moments and master weights of the
    // rank's shard, the parameters and gradients padded to the shards.
    size_t padded = n, master = n;
    OptimizerShard shard;
    char err[ERR_LEN];
    if (run->shard_optimizer &&
        !optimizer_shard_for(&shard, &l, run->rank, run->world_size, err)) {
        l = shard.local;
        padded = shard.padded_values, master = shard.shard_values;
    }
    p.params = padded * sizeof(floatX);
    // Chapter 14's --update-in-backward keeps one layer's gradients at a time.
    p.grads = (run->update_in_backward ? layer_grads_for(cfg).values : padded) * sizeof(floatX);
    if (run->offload_optimizer) {  // chapter 14: two layers' and the rest's on the GPU
        p.adam_offload = optimizer_offload_device_bytes(cfg, &l);
    } else {
        p.adam_fp32 = 2 * l.fp32_values * sizeof(float);
        p.adam_8bit = 2 * (l.q8_values + l.q8_blocks * sizeof(float));
    }
#ifdef PRECISION_BF16
    p.master = run->master_weights ? master * sizeof(float) : 0;  // 0: --no-master-weights
#else
    (void)master;  // the fp32 build's weights are the parameters
#endif
    p.activations = activations_bytes(cfg, B, T, run);
    p.scratch = memory_plan_scratch_floats(cfg, B, T, run) * sizeof(float);
    p.batch = device_batch_bytes(B, T);
    p.scalars = 3 * sizeof(float) + sizeof(AdamWStep);
    if (run->update_in_backward) p.scalars += (size_t)cfg->num_layers * sizeof(float);
    if (run->shard_optimizer) p.scalars += (size_t)run->world_size * sizeof(float);
    p.fp8 = run->fp8 ? fp8_layers_bytes(cfg, B, T, run->recompute) : 0;
    p.model = p.params + p.grads + p.adam_fp32 + p.adam_8bit + p.adam_offload + p.master +
              p.activations +
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

int memory_plan_request(const GPT2Config *cfg, const RunRequest *r, MemoryPlan *out, char *err) {
    RunPlan run;
    if (run_plan_build(&run, &r->switches, cfg->padded_vocab_size, r->grad_accum, r->recompute,
                       !r->no_master_weights, r->update_in_backward, r->offload_optimizer, err))
        return -1;
    *out = memory_plan(cfg, r->B, r->T, &run);
    return 0;
}

// memory_budget.h's planner: the total of a run's plan, for the search of
// the changes that fit.
static int plan_total(const RunRequest *r, void *cfg, size_t *bytes) {
    MemoryPlan p;
    char err[ERR_LEN];
    if (memory_plan_request(cfg, r, &p, err)) return -1;
    *bytes = p.total;
    return 0;
}

MemorySearch memory_plan_search(const GPT2Config *cfg, size_t budget) {
    return (MemorySearch){plan_total, (void *)cfg, budget, PRECISION_NAME};
}

static double gib(size_t bytes) { return bytes / (double)(1 << 30); }

int memory_plan_check(const GPT2Config *cfg, const RunRequest *asked, const MemoryBudget *budget,
                      char *err) {
    MemoryPlan p;
    if (memory_plan_request(cfg, asked, &p, err)) return -1;
    if (p.total <= budget->bytes) return 0;
    char need[192];
    snprintf(need, sizeof need,
             "B=%d, T=%d needs about %.1f GiB (activations %.1f, the rest of the model %.1f, "
             "libraries and buffers %.1f)", asked->B, asked->T, gib(p.total),
             gib(p.activations), gib(p.model - p.activations), gib(p.total - p.model));
    const MemorySearch search = memory_plan_search(cfg, budget->bytes);
    return memory_budget_refuse(asked, budget, &search, need, err);
}

// ANCHOR: memory_plan_fit
int memory_plan_fit(const GPT2Config *cfg, RunRequest *asked, const MemoryBudget *budget,
                    char *said, size_t cap) {
    const MemorySearch search = memory_plan_search(cfg, budget->bytes);
    RunRequest fitted;
    size_t bytes, asked_bytes;
    // No level fits (the check then refuses the run, naming what would), or
    // the run fits at the level it asked for: nothing changes.
    if (memory_budget_fit_recompute(asked, &search, &fitted, &bytes) != 0 ||
        fitted.recompute == asked->recompute)
        return 0;
    // (A run planned at a higher level can be planned at its own.)
    if (plan_total(asked, (void *)cfg, &asked_bytes) != 0) return 0;
    memory_budget_describe_fit(asked, asked_bytes, &fitted, bytes, budget, said, cap);
    *asked = fitted;
    return 1;
}
// ANCHOR_END: memory_plan_fit

// ---- `--memory` -----------------------------------------------------------------

// One row of the table: a part of the plan, under its category's heading.
typedef struct {
    const char *category;
    const char *name;  // NULL: the activations, tensor by tensor (activations_print)
    size_t offset;     // of its bytes in MemoryPlan
} PlanRow;

#define PART(field) offsetof(MemoryPlan, field)

// ANCHOR: memory_table
static const PlanRow PLAN_ROWS[] = {
    {"parameters", "parameters (" PRECISION_NAME ")", PART(params)},
    {"gradients", "gradients (" PRECISION_NAME ")", PART(grads)},
    {"optimizer state", "AdamW m and v (fp32)", PART(adam_fp32)},
    {"optimizer state", "AdamW m and v (8-bit)", PART(adam_8bit)},
    {"optimizer state", "AdamW m, v: 2 layers' + rest", PART(adam_offload)},
    {"optimizer state", "master weights (fp32)", PART(master)},
    {"activations", NULL, PART(activations)},
    {"FP8 operands", "FP8 operands and scales", PART(fp8)},
    {"workspaces and buffers", "scratch (fp32)", PART(scratch)},
    {"workspaces and buffers", "batch (tokens)", PART(batch)},
    {"workspaces and buffers", "loss, norm, clip, step", PART(scalars)},
    {"workspaces and buffers", "cuBLASLt workspace, copies", PART(gemm)},
    {"workspaces and buffers", "data workers' batches", PART(workers)},
    {"workspaces and buffers", "autotuning's trials", PART(autotune)},
    // The one part that is not counted but allowed for (LIBRARIES_ALLOWANCE).
    {"CUDA's libraries", "allowance, measured", PART(libraries)},
};
// ANCHOR_END: memory_table
#define NUM_PLAN_ROWS ((int)(sizeof PLAN_ROWS / sizeof PLAN_ROWS[0]))

static size_t row_bytes(const MemoryPlan *p, const PlanRow *r) {
    return *(const size_t *)((const char *)p + r->offset);
}

static size_t category_bytes(const MemoryPlan *p, const char *category) {
    size_t bytes = 0;
    for (int i = 0; i < NUM_PLAN_ROWS; i++)
        if (!strcmp(PLAN_ROWS[i].category, category)) bytes += row_bytes(p, &PLAN_ROWS[i]);
    return bytes;
}

// "MiB" right-aligned, or "-" for a part this run does not have.
static void print_mib(FILE *out, size_t bytes) {
    if (bytes) fprintf(out, " %10.1f MiB\n", bytes / (1024.0 * 1024.0));
    else fprintf(out, " %10s\n", "-");
}

static void print_budget(FILE *out, const MemoryBudget *b, size_t total) {
    char source[128];
    if (memory_budget_is_limit(b))
        snprintf(source, sizeof source, "--memory-limit %g; the GPU has %.1f GiB free",
                 b->limit_gib, gib(b->free_bytes));
    else if (b->limit_bytes)
        snprintf(source, sizeof source, "what the GPU has free, under --memory-limit %g",
                 b->limit_gib);
    else
        snprintf(source, sizeof source, "what the GPU has free");
    fprintf(out, "memory: %-37s %10.1f MiB  (%s)\n", "budget", b->bytes / (1024.0 * 1024.0),
            source);
    fprintf(out, "memory: %-37s", "left of it");
    print_mib(out, b->bytes > total ? b->bytes - total : 0);
}

void memory_plan_print(FILE *out, const GPT2Config *cfg, int B, int T, const RunPlan *run,
                       const MemoryBudget *budget) {
    const MemoryPlan p = memory_plan(cfg, B, T, run);
    fprintf(out, "memory: %.1f MiB planned on the device for B=%d, T=%d, the model %.1f MiB "
                 "of it\n", p.total / (1024.0 * 1024.0), B, T, p.model / (1024.0 * 1024.0));
    // Chapter 15's --shard-optimizer: the shards hold equal numbers of
    // parameters, not equal bytes of state (the embeddings' moments are
    // fp32, the matrices' 8-bit): the plan is this rank's.
    if (run->shard_optimizer && run->world_size > 1)
        fprintf(out, "memory: the optimizer state of rank %d's shard, 1/%d of the parameters\n",
                run->rank, run->world_size);
    const char *heading = NULL;
    for (int i = 0; i < NUM_PLAN_ROWS; i++) {
        const PlanRow *r = &PLAN_ROWS[i];
        if (!heading || strcmp(heading, r->category) != 0) {
            heading = r->category;
            fprintf(out, "memory: %-37s", heading);
            print_mib(out, category_bytes(&p, heading));
        }
        if (r->name) {
            fprintf(out, "memory:   %-35s", r->name);
            print_mib(out, row_bytes(&p, r));
        } else {
            activations_print(out, cfg, B, T, run);
        }
    }
    fprintf(out, "memory: %-37s", "total");
    print_mib(out, p.total);
    if (budget) print_budget(out, budget, p.total);
    // Chapter 14's --offload-optimizer: what the host holds instead (pinned).
    if (run->offload_optimizer) {
        const AdamLayout l = adam_layout_for(cfg, run->moments_8bit);
        fprintf(out, "memory: %-37s", "host (pinned): the layers' moments");
        print_mib(out, optimizer_offload_host_bytes(cfg, &l));
    }
}
