// test_gpu_ops.c: the machinery every chapter enters through: the slots that
// gpu_ops_select fills from the switches, the activation table sized by them,
// and the per-kernel profiler. Built into both builds.
#include <math.h>

#include "gpu/activations.h"
#include "gpu/gpu_ops.h"
#include "gpu_test.h"
#include "profiler.h"
#include "gpu/run_plan.h"
#include "softmax_crossentropy.h"

TestSuite(gpu_ops, .init = gpu_test_init, .fini = gpu_test_fini);

// Every slot is filled, but classifier_backward, which a fused classifier
// leaves empty, and the launch settings follow the switches.
Test(gpu_ops, every_chapter_fills_every_slot) {
    for (int n = chapter_first_of_precision(PRECISION_NAME); n < chapter_count(); n++) {
        const Chapter *ch = chapter_get(n);
        if (strcmp(ch->precision, PRECISION_NAME) != 0) continue;
        Optimizations o = chapter_optimizations(n);
        GpuLaunchSettings launch;
        GpuOps ops = gpu_ops_select(&o, &launch);
        cr_assert(ops.encoder_forward && ops.layernorm_forward &&
                      ops.residual_layernorm_forward && ops.matmul_forward &&
                      ops.attention_forward && ops.classifier_forward && ops.matmul_backward &&
                      ops.attention_backward && ops.layernorm_backward && ops.encoder_backward,
                  "chapter %d: an empty slot", n);
        cr_assert_eq(launch.sync_after_launch, !o.sync_avoidance, "chapter %d", n);
        cr_assert_eq(launch.tensor_cores, o.tensor_cores, "chapter %d", n);
        cr_assert_eq(launch.gemm_autotune, o.gemm_autotune, "chapter %d", n);
    }
}

// The table allocates what the switches need, in one piece, every tensor
// inside it and aligned for vector loads, and nothing overlaps.
Test(gpu_ops, activations_are_one_allocation_of_aligned_tensors) {
    GPT2Config cfg = {.max_seq_len = 32, .vocab_size = 250, .padded_vocab_size = 256,
                      .num_layers = 2, .num_heads = 4, .channels = 64, .tied = 0};
    Optimizations o = chapter_optimizations(chapter_first_of_precision(PRECISION_NAME));
    const RunPlan plan = run_plan_for_model(&o, cfg.padded_vocab_size);
    GpuActivations a;
    activations_alloc(&a, &cfg, 4, 32, &plan);
    const char *lo = a.memory, *hi = lo + a.bytes;
    const void *some[] = {a.encoded, a.ln1, a.ln1_mean, a.qkv, a.att, a.fch_gelu, a.logits,
                          a.losses, a.d.residual, a.d.fch, a.d.logits, a.d.losses};
    for (size_t i = 0; i < sizeof some / sizeof some[0]; i++) {
        const char *p = some[i];
        cr_assert(p != NULL && p >= lo && p < hi, "tensor %zu outside the allocation", i);
        cr_assert((uintptr_t)p % 256 == 0, "tensor %zu not 256-byte aligned", i);
    }
    // Consecutive rows of the table do not overlap: ln1 (L,B,T,C) ends where
    // ln1_mean begins, rounded up to the alignment.
    size_t ln1_bytes = (size_t)2 * 4 * 32 * 64 * sizeof(floatX);
    cr_assert((const char *)a.ln1_mean - (const char *)a.ln1 >= (ptrdiff_t)ln1_bytes);
    activations_free(&a);
    cr_assert(a.memory == NULL && a.logits == NULL);
}

#ifdef PRECISION_BF16
// Chapter 05 keeps one fp32 log-sum-exp per row of attention scores, and no
// (L,B,NH,T,T) probabilities; chapter 04 the reverse.
Test(gpu_ops, flash_attention_keeps_lse_not_probabilities) {
    GPT2Config cfg = {.max_seq_len = 32, .vocab_size = 250, .padded_vocab_size = 256,
                      .num_layers = 2, .num_heads = 4, .channels = 64, .tied = 0};
    Optimizations four = chapter_optimizations(4), five = chapter_optimizations(5);
    const RunPlan p4 = run_plan_for_model(&four, 256), p5 = run_plan_for_model(&five, 256);
    GpuActivations a4, a5;
    activations_alloc(&a4, &cfg, 4, 32, &p4);
    activations_alloc(&a5, &cfg, 4, 32, &p5);
    cr_assert(a4.att != NULL && a4.att_lse == NULL);
    cr_assert(a5.att == NULL && a5.att_lse != NULL);
    const size_t att = (size_t)2 * 4 * 4 * 32 * 32 * sizeof(floatX);
    const size_t lse = (size_t)2 * 4 * 4 * 32 * sizeof(float);
    cr_assert_eq(a4.bytes - a5.bytes, att - lse, "chapter 05 saves %zu bytes, not %zu",
                 a4.bytes - a5.bytes, att - lse);
    activations_free(&a4);
    activations_free(&a5);
}

// Which kernels fill the slots is arithmetic on the switches: these run
// without a GPU.
TestSuite(gpu_ops_host);

// Chapter 12 changes the two attention slots and nothing else; where the
// flash attention is off (--no-flash-attention) it changes nothing at all.
Test(gpu_ops_host, chapter_12_changes_the_attention_slots_only) {
    Optimizations o11 = chapter_optimizations(11), o12 = chapter_optimizations(12);
    GpuLaunchSettings l11, l12;
    GpuOps a = gpu_ops_select(&o11, &l11), b = gpu_ops_select(&o12, &l12);
    cr_assert(a.attention_forward != b.attention_forward, "the forward slot");
    cr_assert(a.attention_backward != b.attention_backward, "the backward slot");
    b.attention_forward = a.attention_forward, b.attention_backward = a.attention_backward;
    cr_assert(memcmp(&a, &b, sizeof a) == 0, "chapter 12 changed another slot");
    cr_assert(memcmp(&l11, &l12, sizeof l11) == 0, "chapter 12 changed a launch setting");
    o11.flash_attention = 0, o12.flash_attention = 0;
    a = gpu_ops_select(&o11, &l11), b = gpu_ops_select(&o12, &l12);
    cr_assert(memcmp(&a, &b, sizeof a) == 0, "fast-attention without flash-attention");
}
#endif

// Three launches and a wait: the profile names each kernel with its calls
// and puts the wait's idle time on its own row; the rows add up to the total.
Test(gpu_ops, profile_names_every_kernel_and_the_waits) {
    float *d = gt_device_alloc(1 << 20, "values");
    gt_ctx.sync_after_launch = 0;
    GpuProfiler *p = gpu_profiler_new(64);
    gpu_profiler_start(p, &gt_ctx);
    dlosses_fill_v1(&gt_ctx, d, 512, 512);
    dlosses_fill_v1(&gt_ctx, d, 512, 512);
    gpu_stream_sync(&gt_ctx, "the test's stream");
    loss_mean_v1(&gt_ctx, d, d, 512, 512);
    gpu_profiler_stop(p, 1);
    GpuProfileRow rows[8];
    double total;
    int n = gpu_profiler_results(p, rows, 8, &total);
    cr_assert_eq(n, 3, "%d rows", n);
    double sum = 0, fill = -1, mean = -1, idle = -1;
    for (int i = 0; i < n; i++) {
        sum += rows[i].ms;
        if (!strcmp(rows[i].name, "fill_kernel_v1")) fill = rows[i].calls;
        if (!strcmp(rows[i].name, "loss_mean_kernel_v1")) mean = rows[i].calls;
        if (strstr(rows[i].name, "idle")) idle = rows[i].calls;
        cr_assert(rows[i].ms >= 0 && rows[i].share >= 0 && rows[i].share <= 1);
        if (i > 0) cr_assert(rows[i].ms <= rows[i - 1].ms, "rows sorted by time");
    }
    cr_assert(fill == 2 && mean == 1 && idle == 1, "calls: fill %g, mean %g, idle %g", fill, mean,
              idle);
    cr_assert(fabs(sum - total) <= 1e-9 + 1e-6 * total);
    gpu_profiler_free(p);
    // Stopped: marks are no longer recorded (nothing to crash on).
    cr_assert_eq(gpu_profiling(&gt_ctx), 0);
    dlosses_fill_v1(&gt_ctx, d, 512, 512);
}
