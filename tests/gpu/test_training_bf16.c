// test_training_bf16.c: the bf16 trainer (chapter 02) end to end, on the
// synthetic shards of test_gpu_training.c: it follows the fp32 CPU trainer's
// losses within bf16's tolerance, and a run resumed from a checkpoint (fp32
// master weights, fp32 moments) continues bit-identically. Chapter 03 (sync
// avoidance) is bit-identical to chapter 02, and waits for the device only
// where it says it does. Chapter 08 (data workers) is bit-identical to
// chapter 07, resumes where the model was (not where the workers were), and
// reports a bad shard as chapter 07 does. Chapter 09 (fused optimizer) is
// bit-identical to its per-tensor update, and updates in one AdamW launch.
// Chapter 14 (--fit-memory) is chapter 13 where the run fits; where only a
// --recompute level fits, it takes the cheapest and trains its bits.
// Built into build/tests/gpu_tests_bf16 only (Makefile: *_bf16.c).
#define _POSIX_C_SOURCE 200809L  // for file_helpers.h
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gpu/memory_plan.h"
#include "profiler.h"
#include "util/compare.h"
#include "files/checkpoint.h"
#include "files/shard.h"
#include "files/train_state.h"
#include "sync_parity.h"
#include "util/tolerances.h"
#include "training_checks.h"

TestSuite(gpu_training_bf16, .init = training_setup, .fini = training_teardown);

Test(gpu_training_bf16, follows_the_cpu_trainer) {
    check_follows_cpu_trainer(chapter_optimizations(2), TOL_GPU_TRAINING_BF16);
}

Test(gpu_training_bf16, resumed_run_continues_bit_identically) {
    check_resume_bit_identical(chapter_optimizations(2));
}

// Chapter 03 against chapter 02: the same losses, norms, master weights,
// bf16 weights and moments after N = 6 steps, bit for bit (sync_parity.h).
Test(gpu_training_bf16, chapter_03_is_bit_identical_to_chapter_02) {
    Optimizations ch02 = chapter_optimizations(2), ch03 = chapter_optimizations(3);
    Optimizations ch03_off = ch03;
    ch03_off.sync_avoidance = 0;
    cr_assert(memcmp(&ch02, &ch03_off, sizeof ch02) == 0, "chapter 03 is chapter 02 + one switch");
    sp_check_sync_avoidance(ch02);
}

// The waits, counted (gpu_context.h). Chapter 02, per step: one after every
// launch, four copies (the inputs and the targets up, from pageable memory;
// the loss and the gradient norm down), one event at the end of the step.
// Chapter 03: none inside the steps but the waits for a free upload buffer
// (when the host is two steps ahead), and one when their numbers are read.
Test(gpu_training_bf16, waits_only_where_it_says) {
    enum { N = 5 };
    TrainOptions o = tiny_train_options(N);
    const int read_each[] = {1, 2, 3, 4, 5}, read_once[] = {5};
    SpRun two, three;
    sp_run(&two, &o, chapter_optimizations(2), N, read_each, 0);
    sp_run(&three, &o, chapter_optimizations(3), N, read_once, 0);
    const unsigned long long *c2 = two.syncs.count, *c3 = three.syncs.count;
    cr_assert_eq(c2[GPU_SYNC_COPY], 4 * N, "chapter 02: %llu copies", c2[GPU_SYNC_COPY]);
    cr_assert_eq(c2[GPU_SYNC_EVENT], N, "chapter 02: %llu event waits", c2[GPU_SYNC_EVENT]);
    cr_assert_gt(c2[GPU_SYNC_LAUNCH_CHECK], 50 * N, "chapter 02: a wait after each launch");
    cr_assert_eq(c2[GPU_SYNC_STREAM] + c2[GPU_SYNC_DEVICE], 0);
    cr_assert_eq(c3[GPU_SYNC_LAUNCH_CHECK], 0, "chapter 03 waited after a launch");
    cr_assert_eq(c3[GPU_SYNC_COPY], 0, "chapter 03 made a synchronous copy");
    cr_assert_eq(c3[GPU_SYNC_STREAM] + c3[GPU_SYNC_DEVICE], 0);
    cr_assert(c3[GPU_SYNC_EVENT] >= 1 && c3[GPU_SYNC_EVENT] <= 1 + (N - 2),
              "chapter 03: %llu event waits: one for the readback, at most one per step from "
              "the third for an upload buffer", c3[GPU_SYNC_EVENT]);
    sp_assert_identical(&three, &two, "chapter 03 vs 02, read once");
    sp_free(&two);
    sp_free(&three);
}

// Chapter 08 against chapter 07: the same losses, norms, weights and moments,
// bit for bit, however the workers run: one thread or three, reads slower
// than the tiny model's steps (the trainer waits for batches), and a device
// kept busy while the host runs ahead, so that the ring fills with batches
// whose copies have not run and the trainer must wait for a slot.
Test(gpu_training_bf16, chapter_08_is_bit_identical_to_chapter_07) {
    enum { N = 14 };
    const int read_twice[] = {2, N}, read_once[] = {N};
    Optimizations ch07 = chapter_optimizations(7), ch08 = chapter_optimizations(8);
    Optimizations ch08_off = ch08;
    ch08_off.data_workers = 0;
    cr_assert(memcmp(&ch07, &ch08_off, sizeof ch07) == 0, "chapter 08 is chapter 07 + one switch");
    TrainOptions o = tiny_train_options(N);
    SpRun base;
    sp_run(&base, &o, ch07, N, read_twice, 0);
    const struct {
        int threads, delay_us, busy_after;
        const char *what;
    } cases[] = {
        {1, 0, 0, "chapter 08 (one worker) vs 07"},
        {3, 0, 0, "chapter 08 (three workers) vs 07"},
        {3, 3000, 0, "chapter 08 (three workers, 3 ms reads) vs 07"},
        {2, 0, 2, "chapter 08 (host far ahead of a busy device) vs 07"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        TrainOptions oc = o;
        oc.data_threads = cases[c].threads;
        oc.data_delay_us = cases[c].delay_us;
        SpRun run;
        sp_run(&run, &oc, ch08, N, cases[c].busy_after ? read_once : read_twice,
               cases[c].busy_after);
        if (cases[c].busy_after)
            cr_assert(run.syncs.count[GPU_SYNC_EVENT] >= 2,
                      "the trainer never waited for a slot of the ring (%llu event waits): the "
                      "device was not kept busy long enough for this test to mean anything",
                      run.syncs.count[GPU_SYNC_EVENT]);
        sp_assert_identical(&run, &base, cases[c].what);
        sp_free(&run);
    }
    sp_free(&base);
}

// A checkpoint taken while the workers are ahead holds the position after the
// batches the model consumed: the resumed run sees the batches the straight
// run saw (training_checks.h waits until the workers are 3 batches ahead).
Test(gpu_training_bf16, chapter_08_resumes_bit_identically_with_the_workers_ahead) {
    check_resume_bit_identical(chapter_optimizations(8));
}

// A shard that cannot be loaded fails the step that needs it, naming the
// file, at the same step with and without the workers; their error reaches
// the trainer thread.
static int step_that_fails(Optimizations optim, char *err) {
    TrainOptions o = tiny_train_options(200);
    o.val_every = 0;
    GpuTrainer tr;
    cr_assert(gpu_trainer_init(&tr, &o, &optim, err) == 0, "%s", err);
    int failed_at = 0;
    for (int i = 1; i <= 200 && !failed_at; i++) {
        GpuStepStats s;
        if (gpu_trainer_step(&tr, &s, err) != 0) failed_at = i;
        GpuStepStats read[GPU_MAX_PENDING_STEPS];
        gpu_trainer_read_stats(&tr, read);
    }
    gpu_trainer_free(&tr);
    return failed_at;
}

Test(gpu_training_bf16, chapter_08_reports_a_bad_shard_at_the_step_that_needs_it) {
    int32_t tokens[1000];
    for (int i = 0; i < 1000; i++) tokens[i] = i % 64;
    tokens[500] = 64;  // outside the vocabulary (V = 64): found when the shard is loaded
    char err[ERR_LEN], err7[ERR_LEN], err8[ERR_LEN];
    cr_assert(shard_write(tmp_path("train_001.bin"), tokens, 1000, err) == 0, "%s", err);
    int at7 = step_that_fails(chapter_optimizations(7), err7);
    int at8 = step_that_fails(chapter_optimizations(8), err8);
    cr_assert(at7 > 0, "chapter 07 trained through a bad shard");
    cr_assert_eq(at8, at7, "chapter 08 failed at step %d, chapter 07 at %d", at8, at7);
    cr_assert_str_eq(err8, err7);
    cr_assert(strstr(err8, "train_001.bin") != NULL, "the error names the shard: %s", err8);
}

// ---- chapter 09: the fused optimizer ------------------------------------------------

// Chapter 09 with its data workers off: they are chapter 08's change, and
// these tests are about the update's.
static Optimizations chapter_09_without_workers(void) {
    Optimizations o = chapter_optimizations(9);
    o.data_workers = 0;
    return o;
}

// Chapter 09 against itself with the fused optimizer off (chapter 08's
// per-tensor update): the same losses, norms, master weights, bf16 weights
// and moments after N = 6 steps, bit for bit, at the three clips
// (sync_parity.h).
Test(gpu_training_bf16, chapter_09_is_bit_identical_to_its_per_tensor_update) {
    Optimizations on = chapter_09_without_workers(), off = on;
    off.fused_optimizer = 0;
    Optimizations ch08 = chapter_optimizations(8);
    ch08.data_workers = 0;
    cr_assert(memcmp(&off, &ch08, sizeof off) == 0, "chapter 09 is chapter 08 + one switch");
    sp_check_switch(off, on, "fused optimizer", NULL);
}

// The kernels of one gpt2_gpu_update, counted by the profiler (profiler.h),
// after one training step (gradients to update, every kernel loaded).
typedef struct {
    double total, per_tensor, fused, begin_step;  // launches
} UpdateLaunches;

static UpdateLaunches update_launches(Optimizations optim) {
    TrainOptions o = tiny_train_options(1);
    GpuTrainer tr;
    char err[ERR_LEN];
    cr_assert(gpu_trainer_init(&tr, &o, &optim, err) == 0, "%s", err);
    GpuStepStats s;
    cr_assert(gpu_trainer_step(&tr, &s, err) == 0, "%s", err);
    const AdamWConfig cfg = adamw_default_config();
    GpuProfiler *p = gpu_profiler_new(256);
    gpu_profiler_start(p, &tr.ctx);
    gpt2_gpu_update(&tr.model, 1e-3f, &cfg, 1.0f, 2, tr.model.norm);
    gpu_profiler_stop(p, 1);
    GpuProfileRow rows[64];
    double total_ms;
    const int n = gpu_profiler_results(p, rows, 64, &total_ms);
    UpdateLaunches u = {0};
    for (int i = 0; i < n; i++) {
        cr_assert(strstr(rows[i].name, "idle") == NULL, "the update waited for the device");
        u.total += rows[i].calls;
        if (!strcmp(rows[i].name, "adamw_kernel_v1")) u.per_tensor = rows[i].calls;
        if (!strcmp(rows[i].name, "adamw_fused_kernel_v2")) u.fused = rows[i].calls;
        if (!strcmp(rows[i].name, "adamw_begin_step_kernel_v2")) u.begin_step = rows[i].calls;
    }
    gpu_profiler_free(p);
    gpu_trainer_free(&tr);
    return u;
}

// Chapter 08's update: the norm (2 launches), the clip factor, the scaling,
// and AdamW once per tensor: 16 of the tied model's 17 (lm_head is wte).
// Chapter 09's: the norm, the step's values, and one AdamW launch.
Test(gpu_training_bf16, chapter_09_updates_every_tensor_in_one_launch) {
    Optimizations on = chapter_09_without_workers(), off = on;
    off.fused_optimizer = 0;
    UpdateLaunches a = update_launches(off), b = update_launches(on);
    cr_assert(a.per_tensor == 16 && a.fused == 0 && a.begin_step == 0 && a.total == 20,
              "per tensor: %g AdamW launches, %g fused, %g begin-step, %g in all", a.per_tensor,
              a.fused, a.begin_step, a.total);
    cr_assert(b.per_tensor == 0 && b.fused == 1 && b.begin_step == 1 && b.total == 4,
              "fused: %g per-tensor AdamW launches, %g fused, %g begin-step, %g in all",
              b.per_tensor, b.fused, b.begin_step, b.total);
}

// ---- chapter 10: the 8-bit optimizer -------------------------------------------------

// The weights of record after `steps` steps of the tiny model with optim, and
// (when start is not NULL) before the first.
static float *weights_after(Optimizations optim, int steps, float **start) {
    TrainOptions o = tiny_train_options(steps);
    GpuTrainer tr;
    char err[ERR_LEN];
    cr_assert(gpu_trainer_init(&tr, &o, &optim, err) == 0, "%s", err);
    const size_t n = tr.model.num_params;
    if (start) {
        *start = xmalloc(n * sizeof(float));
        gpt2_gpu_get_params(&tr.model, *start);
    }
    gpu_steps(&tr, steps, NULL);
    float *w = xmalloc(n * sizeof(float));
    gpt2_gpu_get_params(&tr.model, w);
    gpu_trainer_free(&tr);
    return w;
}

// The change `steps` steps of the tiny model make to its weights, chapter 10
// against chapter 09, tensor by tensor; with strict set, each tensor's within
// 1e-3 of the largest value of chapter 09's change, else (tensors of at
// least 4096 values) in direction and length within TOL_ADAMW8BIT_*.
static size_t compare_changes(int steps, int strict) {
    Optimizations o9 = chapter_optimizations(9), o10 = chapter_optimizations(10);
    float *start;
    float *w9 = weights_after(o9, steps, &start), *w10 = weights_after(o10, steps, NULL);
    TrainOptions o = tiny_train_options(steps);
    GPT2Config cfg = o.model;
    apply_model_switches(&o10, &cfg);
    const AdamLayout l = adam_layout_for(&cfg, 1);
    size_t quantized = 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        const size_t p = l.param_offset[i], n = l.size[i];
        if (n == 0 || (!strict && n < 4096)) continue;
        float *d9 = xmalloc(n * sizeof(float)), *d10 = xmalloc(n * sizeof(float));
        for (size_t j = 0; j < n; j++)
            d9[j] = w9[p + j] - start[p + j], d10[j] = w10[p + j] - start[p + j];
        char what[96];
        snprintf(what, sizeof what, "%s after %d steps", gpt2_param_names[i], steps);
        if (strict) {
            gt_compare(what, d10, d9, n, 1e-3);
        } else {
            const double cosine = cosine_similarity(d10, d9, n), ratio = norm_ratio(d10, d9, n);
            cr_assert(cosine >= TOL_ADAMW8BIT_COSINE, "%s: cosine %.6f", what, cosine);
            cr_assert(fabs(ratio - 1) <= TOL_ADAMW8BIT_NORM_RATIO, "%s: norm ratio %.6f", what,
                      ratio);
        }
        quantized += l.quantized[i] ? n : 0;
        free(d9), free(d10);
    }
    free(start), free(w9), free(w10);
    return quantized;
}

// This chapter changes the optimizer, so the tests are tolerances.
//  - One step: the moments start at zero, and the update uses the new fp32
//    moments before they are quantized, so the first step is fp32 AdamW's but
//    for the order of roundings (chapter 10's kernel rounds each product,
//    chapter 09's fuses some): every tensor's change within 1e-3 of the
//    largest.
//  - Five steps: from step 2 on the moments are the dequantized ones, and the
//    runs part: each tensor's change points where chapter 09's does and has
//    its length, within TOL_ADAMW8BIT_* (tolerances.h says why those).
Test(gpu_training_bf16, chapter_10_follows_chapter_09_within_the_8bit_tolerance) {
    Optimizations o9 = chapter_optimizations(9), o10 = chapter_optimizations(10);
    Optimizations o10_off = o10;
    o10_off.adamw_8bit = 0;
    cr_assert(memcmp(&o9, &o10_off, sizeof o9) == 0, "chapter 10 is chapter 09 + one switch");
    cr_assert(compare_changes(1, 1) > 0, "the tiny model has no 8-bit tensors: the test means nothing");
    cr_assert(compare_changes(5, 0) > 0);
}

// Checkpoints keep the 8-bit state (train_state.h, version 3): a resumed run
// continues bit for bit.
Test(gpu_training_bf16, chapter_10_resumes_bit_identically) {
    check_resume_bit_identical(chapter_optimizations(10));
}

// The memory the 8-bit state saves is what the layout says: 8 bytes of fp32
// moments per quantized value, against 2 bytes and two scales per 256.
Test(gpu_training_bf16, chapter_10_saves_the_memory_it_predicts) {
    TrainOptions o = tiny_train_options(1);
    Optimizations o9 = chapter_optimizations(9), o10 = chapter_optimizations(10);
    GpuTrainer t9, t10;
    char err[ERR_LEN];
    cr_assert(gpu_trainer_init(&t9, &o, &o9, err) == 0, "%s", err);
    cr_assert(gpu_trainer_init(&t10, &o, &o10, err) == 0, "%s", err);
    const AdamLayout *l = &t10.model.adam;
    const size_t q = t10.model.num_params - l->fp32_values;
    const size_t want = 8 * q - (2 * l->q8_values + 8 * l->q8_blocks);
    cr_assert(q > 0);
    cr_assert_eq(t9.model.device_bytes - t10.model.device_bytes, want,
                 "saved %zu bytes, the layout says %zu",
                 t9.model.device_bytes - t10.model.device_bytes, want);
    gpu_trainer_free(&t9);
    gpu_trainer_free(&t10);
}

// A checkpoint of one kind of state resumes in the other chapter: chapter
// 09's fp32 moments quantized on the way into chapter 10, chapter 10's 8-bit
// moments dequantized into chapter 09: the device then holds exactly the
// host's conversion of the file (adam_state_convert).
static void check_resumes_across(Optimizations from, Optimizations to) {
    TrainOptions o = tiny_train_options(8);
    GpuTrainer a, b;
    char err[ERR_LEN], path[512], state_path[512];
    cr_assert(gpu_trainer_init(&a, &o, &from, err) == 0, "%s", err);
    gpu_steps(&a, 4, NULL);
    cr_assert(gpu_trainer_save(&a, path, sizeof path, err) == 0, "%s", err);
    GPT2Config cfg = a.model.config;
    gpu_trainer_free(&a);
    TrainOptions r = o;
    snprintf(r.resume_from, sizeof r.resume_from, "%s", path);
    cr_assert(gpu_trainer_init(&b, &r, &to, err) == 0, "%s", err);
    cr_assert_eq(b.step, 4);
    AdamState file, want, got;
    TrainProgress p;
    cr_assert(state_path_for_model(path, state_path, sizeof state_path, err) == 0, "%s", err);
    cr_assert(train_state_read_adam(state_path, &cfg, &p, &file, err) == 0, "%s", err);
    adam_state_alloc(&want, &b.model.adam);
    adam_state_alloc(&got, &b.model.adam);
    adam_state_convert(&file, &want);
    gpt2_gpu_get_state(&b.model, &got);
    const AdamLayout *l = &got.layout;
    gt_assert_identical("fp32 m", got.m, want.m, l->fp32_values);
    gt_assert_identical("fp32 v", got.v, want.v, l->fp32_values);
    cr_assert(memcmp(got.m_q, want.m_q, l->q8_values) == 0, "8-bit m");
    cr_assert(memcmp(got.v_q, want.v_q, l->q8_values) == 0, "8-bit v");
    gt_assert_identical("m's scales", got.m_absmax, want.m_absmax, l->q8_blocks);
    gt_assert_identical("v's scales", got.v_absmax, want.v_absmax, l->q8_blocks);
    gpu_steps(&b, 4, NULL);  // and it trains on
    adam_state_free(&file), adam_state_free(&want), adam_state_free(&got);
    gpu_trainer_free(&b);
}

Test(gpu_training_bf16, chapter_09_checkpoint_resumes_in_chapter_10_and_back) {
    check_resumes_across(chapter_optimizations(9), chapter_optimizations(10));
    check_resumes_across(chapter_optimizations(10), chapter_optimizations(9));
}

// ---- chapter 11: the last mile -------------------------------------------------------

// Chapter 11 changes how the step is launched (a graph), which GEMM kernels
// run (the same bits: matmul_lt.h) and the layernorm's column-sum kernels
// (the same operations in the same order): all against chapter 10, bit for
// bit, at the three clips, with the data workers' two device batches in turn
// (sync_parity.h).
Test(gpu_training_bf16, chapter_11_is_bit_identical_to_chapter_10) {
    sp_check_switch(chapter_optimizations(10), chapter_optimizations(11), "chapter 11", NULL);
}

// The first step runs as it is (it makes the GEMMs' plans); after it, each
// of the two device batches gets its graph, captured once and replayed.
Test(gpu_training_bf16, chapter_11_replays_a_graph_per_device_batch) {
    TrainOptions o = tiny_train_options(8);
    Optimizations optim = chapter_optimizations(11);
    GpuTrainer tr;
    char err[ERR_LEN];
    cr_assert(gpu_trainer_init(&tr, &o, &optim, err) == 0, "%s", err);
    gpu_steps(&tr, 1, NULL);
    cr_assert_eq(tr.graphs.captures, 0, "the first step is not captured");
    gpu_steps(&tr, 7, NULL);
    cr_assert_eq(tr.graphs.captures, 2, "steps 2-8: one graph per device batch, got %d",
                 tr.graphs.captures);
    gpu_trainer_free(&tr);
}

// The schedule on the device has an entry per step of --steps; a replayed
// graph reads its entry without the host's help, so the trainer checks the
// bound on every step, replayed or not, and refuses the step after the last.
Test(gpu_training_bf16, chapter_11_refuses_a_step_past_its_schedule) {
    TrainOptions o = tiny_train_options(3);
    Optimizations optim = chapter_optimizations(11);
    GpuTrainer tr;
    char err[ERR_LEN] = "";
    cr_assert(gpu_trainer_init(&tr, &o, &optim, err) == 0, "%s", err);
    gpu_steps(&tr, 3, NULL);  // the third a replay
    GpuStepStats s;
    cr_assert_eq(gpu_trainer_step(&tr, &s, err), -1, "a fourth step of a 3-step schedule ran");
    cr_assert(strstr(err, "step 4 is past the 3 steps"), "got: %s", err);
    gpu_trainer_free(&tr);
}

// A resumed run sets the device's step counter to the checkpoint's step and
// runs its first step without a graph, as a fresh run does: it continues
// bit for bit (training_checks.h).
Test(gpu_training_bf16, chapter_11_resumes_bit_identically) {
    check_resume_bit_identical(chapter_optimizations(11));
}

// --grad-accum 3: three micro-batches a step (first, middle, last: each its
// own graph per device batch) replayed from graphs, against the same steps
// launched one kernel at a time: bit for bit.
Test(gpu_training_bf16, chapter_11_accumulates_the_same_bits_with_graphs) {
    enum { N = 5 };
    const int read_each[] = {1, 2, 3, 4, 5}, read_once[] = {5};
    TrainOptions o = tiny_train_options(N);
    o.grad_accum = 3;
    Optimizations on = chapter_optimizations(11), off = on;
    off.cuda_graphs = 0;
    SpRun a, b;
    sp_run(&a, &o, off, N, read_each, 0);
    sp_run(&b, &o, on, N, read_once, 0);
    sp_assert_identical(&b, &a, "--grad-accum 3, graphs on vs off");
    cr_assert(a.loss[N - 1] < a.loss[0], "the loss did not fall");
    sp_free(&a), sp_free(&b);
}

// ---- chapter 12: attention at Hopper's pace ---------------------------------------
// The trainer's tiny model has heads of 16, where chapter 12's slots run
// chapter 05's kernels (v4 is for heads of 64: test_model_parity.c and the
// kernel tests check it): chapter 12 trains chapter 11's bits, graphs,
// clipping and all (sync_parity.h).
Test(gpu_training_bf16, chapter_12_is_chapter_11_where_v4_does_not_run) {
    Optimizations ch11 = chapter_optimizations(11), ch12 = chapter_optimizations(12);
    Optimizations ch12_off = ch12;
    ch12_off.fast_attention = 0;
    cr_assert(memcmp(&ch11, &ch12_off, sizeof ch11) == 0, "chapter 12 is chapter 11 + one switch");
    sp_check_switch(ch11, ch12, "chapter 12 (heads of 16)", NULL);
}

// What chapter 11's step needs of the chapters before it, refused by name.
Test(gpu_training_bf16, chapter_11_refuses_what_a_graph_cannot_replay) {
    TrainOptions o = tiny_train_options(2);
    GpuTrainer tr;
    char err[ERR_LEN] = "";
    Optimizations no_fused = chapter_optimizations(11);
    no_fused.fused_optimizer = 0;
    cr_assert_eq(gpu_trainer_init(&tr, &o, &no_fused, err), -1);
    cr_assert(strstr(err, "--cuda-graphs") && strstr(err, "--fused-optimizer"), "got: %s", err);
    Optimizations no_async = chapter_optimizations(11);
    no_async.sync_avoidance = 0;
    cr_assert_eq(gpu_trainer_init(&tr, &o, &no_async, err), -1);
    cr_assert(strstr(err, "--sync-avoidance"), "got: %s", err);
    o.grad_accum = 2;
    Optimizations ch08 = chapter_optimizations(8);
    cr_assert_eq(gpu_trainer_init(&tr, &o, &ch08, err), -1);
    cr_assert(strstr(err, "--grad-accum") && strstr(err, "--fused-optimizer"), "got: %s", err);
}

// ---- chapter 13: FP8 GEMMs, resumed ---------------------------------------------------

// Chapter 13's tiny model, `steps` steps: heads of 64, as test_model_parity.c's
// FP8 runs and the runs without master weights below.
static TrainOptions fp8_train_options(int steps, int no_master) {
    TrainOptions o = tiny_train_options(steps);
    o.model.channels = 128, o.model.num_heads = 2;
    o.no_master_weights = no_master;
    return o;
}

// Where FP8 GEMMs do not run (a GPU before compute capability 8.9, or
// GPT2_PORTABLE_KERNELS=1), chapter 13 is chapter 12, whose resume the tests
// above check: these tests would prove nothing there, and skip.
static void skip_without_fp8(void) {
    if (gt_ctx.fp8) return;
    remove_tmpdir();  // a skipped test never reaches the suite's .fini (file_helpers.h)
    cr_skip_test("FP8 GEMMs need a GPU of compute capability 8.9 or later");
}

// Chapter 13 resumed: 70 steps straight against 60, a checkpoint and 10 (the
// last 10 within the 16 steps the amax histories look back over). A delayed
// scale is the largest amax of the last 16 steps (fp8.h); a resumed run
// that started its histories afresh would cast its first step with current
// scaling (through chapter 12's layernorm and a separate cast, not the
// fused FP8 layernorm) and the next ones with scales from fewer steps: other
// bits from step 61 on, and step 70's histories (the state file's) differ
// whatever the losses do. With the state's version 4, the resumed trainer
// holds the saved FP8 state as soon as it is made, and trains on bit for
// bit: losses, weights, and step 70's model and state files byte for byte.
Test(gpu_training_bf16, chapter_13_resumes_bit_identically_with_its_fp8_scales) {
    skip_without_fp8();
    TrainOptions o = fp8_train_options(70, 0);
    Optimizations ch13 = chapter_optimizations(13);
    // What the checks below compare is not trivial: after some steps the
    // histories hold amaxes, and a fresh trainer's are empty.
    GpuTrainer tr;
    char err[ERR_LEN];
    cr_assert(gpu_trainer_init(&tr, &o, &ch13, err) == 0, "%s", err);
    cr_assert(tr.model.fp8_on, "chapter 13 on a GPU with FP8 runs no FP8 GEMMs");
    Fp8State fresh, trained;
    gpt2_gpu_get_fp8_state(&tr.model, &fresh);
    gpu_steps(&tr, 3, NULL);
    gpt2_gpu_get_fp8_state(&tr.model, &trained);
    gpu_trainer_free(&tr);
    cr_assert(fresh.tensors == 2 * TRAIN_STATE_FP8_PER_LAYER && fresh.history_ready == 0);
    cr_assert(trained.history_ready == 1, "history_ready after 3 steps");
    for (int i = 0; i < fresh.tensors; i++) {
        cr_assert(fp8_state_tensor(&fresh, i)[2] == 0, "a fresh history holds an amax");
        cr_assert(fp8_state_tensor(&trained, i)[2] > 0, "FP8 tensor %d: no amax after 3 steps",
                  i);
    }
    fp8_state_free(&fresh), fp8_state_free(&trained);
    check_resume_bit_identical_with(ch13, o);
}

// Resumes model_path with options o and switches optim into *tr.
static void resume_into(GpuTrainer *tr, TrainOptions o, Optimizations optim,
                        const char *model_path) {
    char err[ERR_LEN];
    snprintf(o.resume_from, sizeof o.resume_from, "%s", model_path);
    cr_assert(gpu_trainer_init(tr, &o, &optim, err) == 0, "%s", err);
}

// 4 steps of options o and switches optim, saved into the directory `dir`;
// the model's path into model_path.
static void save_after_4(TrainOptions o, Optimizations optim, const char *dir,
                         char *model_path) {
    GpuTrainer tr;
    char err[ERR_LEN];
    snprintf(o.checkpoint_dir, sizeof o.checkpoint_dir, "%s", tmp_path(dir));
    cr_assert(gpu_trainer_init(&tr, &o, &optim, err) == 0, "%s", err);
    gpu_steps(&tr, 4, NULL);
    cr_assert(gpu_trainer_save(&tr, model_path, 512, err) == 0, "%s", err);
    gpu_trainer_free(&tr);
}

// Rewrites the state beside model_path with amax histories of `history`
// steps (the first of each kept), as a build of another FP8_HISTORY would
// have written it.
static void rewrite_fp8_history(const char *model_path, int history) {
    char state[1024], err[ERR_LEN];
    cr_assert(state_path_for_model(model_path, state, sizeof state, err) == 0, "%s", err);
    GPT2Config cfg;
    cr_assert(checkpoint_read_config(model_path, &cfg, err) == 0, "%s", err);
    TrainProgress p;
    AdamState s;
    Fp8State file, other;
    cr_assert(train_state_read_run(state, &cfg, &p, &s, &file, err) == 0, "%s", err);
    fp8_state_alloc(&other, file.tensors, history);
    other.history_ready = file.history_ready;
    for (int i = 0; i < file.tensors; i++)
        memcpy(fp8_state_tensor(&other, i), fp8_state_tensor(&file, i),
               (size_t)(2 + history) * sizeof(float));
    AtomicFile af;
    cr_assert(train_state_write_run_unrenamed(&af, state, &p, &s, &other, err) == 0, "%s", err);
    cr_assert(atomic_commit(&af, err) == 0, "%s", err);
    adam_state_free(&s), fp8_state_free(&file), fp8_state_free(&other);
}

// A checkpoint resumes across the FP8 switch, as train_gpu.c's
// restore_fp8_scales decides: chapter 13's in chapter 12 (bf16 GEMMs) with
// its FP8 state left out, chapter 12's in chapter 13 with the FP8 state
// started afresh, as a new run's; each trains on. A chapter 13 state whose
// histories are not this build's FP8_HISTORY long is refused, naming the file.
Test(gpu_training_bf16, chapter_13_checkpoint_resumes_in_chapter_12_and_back) {
    skip_without_fp8();
    TrainOptions o = fp8_train_options(8, 0);
    Optimizations ch12 = chapter_optimizations(12), ch13 = chapter_optimizations(13);
    char path12[512], path13[512];
    save_after_4(o, ch12, "ch12", path12);
    save_after_4(o, ch13, "ch13", path13);
    GpuTrainer tr;
    resume_into(&tr, o, ch12, path13);
    cr_assert(!tr.model.fp8_on && tr.step == 4);
    gpu_steps(&tr, 4, NULL);
    gpu_trainer_free(&tr);

    Fp8State fresh;
    char err[ERR_LEN] = "";
    cr_assert(gpu_trainer_init(&tr, &o, &ch13, err) == 0, "%s", err);
    gpt2_gpu_get_fp8_state(&tr.model, &fresh);
    gpu_trainer_free(&tr);
    resume_into(&tr, o, ch13, path12);
    cr_assert(tr.step == 4);
    assert_fp8_state_is(&tr, &fresh, "chapter 12's checkpoint resumed in chapter 13");
    gpu_steps(&tr, 4, NULL);
    gpu_trainer_free(&tr);
    fp8_state_free(&fresh);

    rewrite_fp8_history(path13, FP8_HISTORY / 2);
    TrainOptions r = o;
    snprintf(r.resume_from, sizeof r.resume_from, "%s", path13);
    cr_assert_eq(gpu_trainer_init(&tr, &r, &ch13, err), -1, "resumed another FP8_HISTORY's state");
    cr_assert(strstr(err, "state_000004.bin") && strstr(err, "amax histories of 8 steps") &&
                  strstr(err, "FP8_HISTORY"),
              "got: %s", err);
}

// ---- chapter 14: --no-master-weights -------------------------------------------------

// The losses of 3 steps of chapter 13's tiny model, with or without master
// weights, and the n weights after (without them: the bf16 weights as
// floats). Heads of 64, as test_model_parity.c's FP8 runs.
static float *run_master_weights(int no_master, float losses[3], size_t *n) {
    Optimizations optim = chapter_optimizations(13);
    TrainOptions o = tiny_train_options(3);
    o.model.channels = 128, o.model.num_heads = 2;
    o.no_master_weights = no_master;
    GpuTrainer tr;
    char err[ERR_LEN];
    cr_assert(gpu_trainer_init(&tr, &o, &optim, err) == 0, "%s", err);
    cr_assert_eq(tr.model.master == NULL, no_master, "master weights allocated: %d",
                 tr.model.master != NULL);
    gpu_steps(&tr, 3, losses);
    *n = tr.model.num_params;
    float *w = xmalloc(*n * sizeof(float));
    gpt2_gpu_get_params(&tr.model, w);
    gpu_trainer_free(&tr);
    return w;
}

// Without master weights the run is deterministic (stochastic rounding's
// bits come from the step and the index, never from the run), and its
// losses follow the master weights' within TOL_NO_MASTER_LOSS_BF16.
Test(gpu_training_bf16, no_master_weights_is_deterministic_and_follows_the_master_weights) {
    float with[3], without[3], again[3];
    size_t n;
    float *w_with = run_master_weights(0, with, &n);
    float *w_without = run_master_weights(1, without, &n);
    float *w_again = run_master_weights(1, again, &n);
    gt_assert_identical("losses without master weights, two runs", without, again, 3);
    gt_assert_identical("weights without master weights, two runs", w_without, w_again, n);
    cr_assert(memcmp(&with[0], &without[0], sizeof(float)) == 0,
              "the first loss comes before any update: %.9g vs %.9g", (double)with[0],
              (double)without[0]);
    gt_compare("losses without master weights", without, with, 3, TOL_NO_MASTER_LOSS_BF16);
    free(w_with), free(w_without), free(w_again);
}

// Without master weights, with chapter 13's FP8 GEMMs: the checkpoint holds
// the bf16 weights themselves (as floats: exact), a resumed run rounds them
// back to the same bf16, and stochastic rounding's bits come from the step
// and the value's index, never from the run; the FP8 state resumes as in
// chapter 13's test above. 70 steps straight against 60, a checkpoint and
// 10: the same losses, weights, and step 70's files byte for byte.
Test(gpu_training_bf16, no_master_weights_resumes_bit_identically_with_fp8) {
    skip_without_fp8();
    TrainOptions o = fp8_train_options(70, 1);
    Optimizations ch13 = chapter_optimizations(13);
    GpuTrainer tr;
    char err[ERR_LEN];
    cr_assert(gpu_trainer_init(&tr, &o, &ch13, err) == 0, "%s", err);
    cr_assert(tr.model.master == NULL && tr.model.fp8_on, "master %p, FP8 %d",
              (void *)tr.model.master, tr.model.fp8_on);
    gpu_trainer_free(&tr);
    check_resume_bit_identical_with(ch13, o);
}

// ---- chapter 14: --fit-memory ---------------------------------------------------------

// Chapter 14 changes nothing in a run that fits its budget: it trains
// chapter 13's bits, at the three clips (sync_parity.h).
Test(gpu_training_bf16, chapter_14_is_chapter_13_where_the_run_fits) {
    sp_check_switch(chapter_optimizations(13), chapter_optimizations(14),
                    "chapter 14 (a run that fits)", NULL);
}

// The plan of the run o with the switches `optim`, at the level `level`.
static size_t planned_at(const TrainOptions *o, Optimizations optim, Recompute level) {
    GPT2Config c = o->model;
    apply_model_switches(&optim, &c);
    const RunRequest r = {.switches = optim, .B = o->B, .T = o->T, .grad_accum = o->grad_accum,
                          .recompute = level, .no_master_weights = o->no_master_weights};
    MemoryPlan p;
    char err[ERR_LEN] = "";
    cr_assert_eq(memory_plan_request(&c, &r, &p, err), 0, "%s", err);
    return p.total;
}

// Under a --memory-limit that --recompute norms fits and gelu does not,
// chapter 13 is refused, naming norms; chapter 14 takes norms (not block,
// which fits too), builds the model at it, and trains the bits of chapter
// 13 asked for norms (which are none's: recompute.h). Three layers, so that
// one lies between the first and the last (test_recompute.c).
Test(gpu_training_bf16, chapter_14_fits_its_memory_by_recomputing) {
    enum { N = 4 };
    const int read_once[] = {N};
    TrainOptions o = tiny_train_options(N);
    o.model.num_layers = 3;
    const Optimizations ch13 = chapter_optimizations(13), ch14 = chapter_optimizations(14);
    const size_t norms = planned_at(&o, ch14, RECOMPUTE_NORMS);
    cr_assert_lt(norms, planned_at(&o, ch14, RECOMPUTE_GELU));
    o.memory_limit_gib = norms / 1073741824.0;
    GpuTrainer tr;
    char err[ERR_LEN] = "";
    cr_assert_eq(gpu_trainer_init(&tr, &o, &ch13, err), -1, "chapter 13 was not refused");
    cr_assert(strstr(err, "it fits with --recompute norms (about"), "%s", err);
    cr_assert_eq(gpu_trainer_init(&tr, &o, &ch14, err), 0, "%s", err);
    cr_assert_eq(tr.plan.recompute, RECOMPUTE_NORMS, "--recompute %s",
                 recompute_name(tr.plan.recompute));
    cr_assert_eq(tr.opt.recompute, RECOMPUTE_NORMS);
    cr_assert_eq(tr.model.plan.recompute, RECOMPUTE_NORMS, "the model was built at another level");
    gpu_trainer_free(&tr);
    SpRun fitted, asked;
    sp_run(&fitted, &o, ch14, N, read_once, 0);
    TrainOptions at_norms = o;
    at_norms.memory_limit_gib = 0;
    at_norms.recompute = RECOMPUTE_NORMS;
    sp_run(&asked, &at_norms, ch13, N, read_once, 0);
    sp_assert_identical(&fitted, &asked, "chapter 14 fitted to its limit vs chapter 13 at norms");
    sp_free(&fitted), sp_free(&asked);
}
