// test_data_parallel.c: chapter 15's data parallel, gradient by gradient,
// and its ZeRO-1 (--shard-optimizer), on 2 GPUs of one host: two ranks in
// one process, a thread each, which meet over NCCL as two processes do (the
// same rendezvous file, the same communicators). Skipped with fewer GPUs.
//  - 2 ranks at B each against 1 GPU at B with --grad-accum 2 (the same
//    sequences a step): every gradient tensor of the first step by cosine
//    and norm (the ranks' mean is half the micro-batches' sum), each rank's
//    gradients the same bits as the other's, the first loss, and the change
//    of every weight tensor over three steps by cosine. Without FP8: each
//    rank's FP8 scales follow its own activations (chapter 13's amax), which
//    would compare two scalings rather than two ways of summing.
//  - ZeRO-1 against plain data parallel: the gradients' mean each rank
//    owns, the losses, the weights (fp32 and bf16) and AdamW's moments after
//    three steps, bit for bit at --grad-clip 0 (with two ranks a mean is
//    (a + b) / 2 whichever collective takes it); with a clip that clips
//    every step, the norm (the ranks' parts added in another order) within
//    1e-6 of the whole's and the weights within 1e-5; with the gradients
//    averaged per layer (--overlap-comm) and all at once (a reduce-scatter),
//    with 8-bit moments, and without master weights.
#define _POSIX_C_SOURCE 200809L  // for file_helpers.h
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "training_checks.h"
#include "util/tolerances.h"

enum { STEPS = 3 };

// One rank's run (or one GPU's): its options in, its numbers out.
typedef struct {
    TrainOptions o;
    Optimizations optim;
    int failed;
    char err[ERR_LEN];
    size_t n, first, last;  // the parameters; the shard this rank owns ([0, n) unsharded)
    float loss[STEPS], norm[STEPS];
    float *grads;           // after the first step: the gradient buffer, as floats
    float *start;           // the weights of record before the first step
    float *params, *weights, *m, *v;  // after the last (rank 0's whole, when sharded)
} RankRun;

static void read_step(GpuTrainer *tr, RankRun *r, int i) {
    GpuStepStats s, got[GPU_MAX_PENDING_STEPS];
    if (gpu_trainer_step(tr, &s, r->err)) {
        r->failed = 1;
        return;
    }
    const int k = gpu_trainer_read_stats(tr, got);  // waits for the step
    r->loss[i] = got[k - 1].loss, r->norm[i] = got[k - 1].grad_norm;
}

// The run of one rank, on the thread that calls it (its GPU is the
// thread's). Collective calls (the sharded weights and moments) are made by
// every rank in the same order.
static void *run_rank(void *arg) {
    RankRun *r = arg;
    GpuTrainer tr;
    if (gpu_trainer_init(&tr, &r->o, &r->optim, r->err)) {
        r->failed = 1;
        return NULL;
    }
    GPT2Gpu *m = &tr.model;
    r->n = m->num_params;
    r->first = m->plan.shard_optimizer ? m->shard.first : 0;
    r->last = m->plan.shard_optimizer ? m->shard.last : r->n;
    r->start = xmalloc(r->n * sizeof(float));
    gpt2_gpu_get_params(m, r->start);
    for (int i = 0; i < STEPS && !r->failed; i++) {
        read_step(&tr, r, i);
        if (i > 0 || r->failed) continue;
        r->grads = xmalloc(r->n * sizeof(float));
        gpt2_gpu_download_floatx(m, m->grads, r->grads, r->n);
    }
    if (!r->failed) {
        r->params = xmalloc(r->n * sizeof(float));
        r->weights = xmalloc(r->n * sizeof(float));
        r->m = xmalloc(r->n * sizeof(float));
        r->v = xmalloc(r->n * sizeof(float));
        gpt2_gpu_get_params(m, r->params);
        gpt2_gpu_download_floatx(m, m->params, r->weights, r->n);
        gpt2_gpu_get_moments(m, r->m, r->v);
    }
    gpu_trainer_free(&tr);
    return NULL;
}

static void free_run(RankRun *r) {
    free(r->grads), free(r->start), free(r->params), free(r->weights), free(r->m), free(r->v);
}

// Two ranks, a thread each, meeting at a fresh id file.
static void run_two_ranks(RankRun ranks[2], const TrainOptions *o, Optimizations optim) {
    static int meeting;
    char id[64];
    snprintf(id, sizeof id, "nccl_id_%d", meeting++);
    pthread_t threads[2];
    for (int r = 0; r < 2; r++) {
        memset(&ranks[r], 0, sizeof ranks[r]);
        ranks[r].o = *o, ranks[r].optim = optim;
        ranks[r].o.launch = (Launch){.rank = r, .world_size = 2, .local_rank = r, .by = "test"};
        snprintf(ranks[r].o.nccl_id_file, sizeof ranks[r].o.nccl_id_file, "%s", tmp_path(id));
        ranks[r].o.comm_timeout_s = 120;
    }
    for (int r = 0; r < 2; r++) pthread_create(&threads[r], NULL, run_rank, &ranks[r]);
    for (int r = 0; r < 2; r++) pthread_join(threads[r], NULL);
    for (int r = 0; r < 2; r++) cr_assert(!ranks[r].failed, "rank %d: %s", r, ranks[r].err);
}

static void run_one_gpu(RankRun *one, const TrainOptions *o, Optimizations optim) {
    memset(one, 0, sizeof *one);
    one->o = *o, one->optim = optim;
    run_rank(one);
    cr_assert(!one->failed, "one GPU: %s", one->err);
}

// The last chapter's switches in this build, FP8 off (see the top).
static Optimizations ranks_optimizations(void) {
#ifdef PRECISION_BF16
    Optimizations o = chapter_optimizations(15);
    o.fp8 = 0;
#else
    Optimizations o = chapter_optimizations(1);
    o.sync_avoidance = 1, o.fused_optimizer = 1, o.overlap_comm = 1;
#endif
    return o;
}

static void skip_without_two_gpus(void) {
    if (gpu_device_count() < 2) cr_skip_test("needs 2 GPUs");
}

static double dot(const float *a, const float *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

// Tensor by tensor: the cosine of a and b, and the ratio of their norms
// against `ratio` (a's norm = ratio * b's).
static void assert_tensors_agree(const char *what, const GPT2Config *c, const float *a,
                                 const float *b, double ratio, int check_norm) {
    size_t sizes[NUM_PARAM_TENSORS], at = 0;
    gpt2_param_sizes(c, sizes);
    for (int i = 0; i < NUM_PARAM_TENSORS; at += sizes[i++]) {
        if (sizes[i] == 0) continue;
        const double aa = dot(a + at, a + at, sizes[i]), bb = dot(b + at, b + at, sizes[i]);
        if (aa == 0 && bb == 0) continue;
        const double cosine = dot(a + at, b + at, sizes[i]) / sqrt(aa * bb);
        cr_assert(cosine >= TOL_GPU_GRAD_COSINE_BF16, "%s: %s: cosine %.6f", what,
                  gpt2_param_names[i], cosine);
        const double r = sqrt(aa / bb) / ratio;
        cr_assert(!check_norm || fabs(r - 1) <= TOL_GRAD_NORM_RATIO,
                  "%s: %s: norm ratio %.6f of %.6f", what, gpt2_param_names[i], r * ratio, ratio);
    }
}

static void subtract(float *out, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = a[i] - b[i];
}

TestSuite(data_parallel, .init = training_setup, .fini = training_teardown);

Test(data_parallel, two_ranks_average_what_two_micro_batches_sum) {
    skip_without_two_gpus();
    TrainOptions o = tiny_train_options(STEPS);
    RankRun ranks[2], one;
    run_two_ranks(ranks, &o, ranks_optimizations());
    o.grad_accum = 2;
    run_one_gpu(&one, &o, ranks_optimizations());
    const size_t n = one.n;
    gt_assert_identical("rank 1's gradients against rank 0's", ranks[1].grads, ranks[0].grads, n);
    // The ranks' mean of two halves; the micro-batches' sum of the same two
    // (their mean is taken by the update): a norm half as large.
    assert_tensors_agree("gradients", &o.model, ranks[0].grads, one.grads, 0.5, 1);
    cr_assert(fabsf(ranks[0].loss[0] - one.loss[0]) <= TOL_RANKS_VS_MICRO_BATCHES * one.loss[0],
              "first loss %.6f on 2 ranks, %.6f on one GPU", ranks[0].loss[0], one.loss[0]);
    // Three steps: every weight tensor moved the same way.
    float *moved2 = xmalloc(n * sizeof(float)), *moved1 = xmalloc(n * sizeof(float));
    subtract(moved2, ranks[0].params, ranks[0].start, n);
    subtract(moved1, one.params, one.start, n);
    assert_tensors_agree("the weights' change over 3 steps", &o.model, moved2, moved1, 1.0, 0);
    free(moved2), free(moved1);
    for (int r = 0; r < 2; r++) free_run(&ranks[r]);
    free_run(&one);
}

static void assert_within(const char *what, const float *a, const float *b, size_t n, double tol) {
    for (size_t i = 0; i < n; i++)
        cr_assert(fabs((double)a[i] - b[i]) <= tol * fabs((double)b[i]) + 1e-12,
                  "%s: [%zu] %.9g vs %.9g", what, i, (double)a[i], (double)b[i]);
}

// ZeRO-1 against plain data parallel with the options o.
static void check_zero1(TrainOptions o, Optimizations optim, const char *what) {
    RankRun plain[2], sharded[2];
    run_two_ranks(plain, &o, optim);
    o.shard_optimizer = 1;
    run_two_ranks(sharded, &o, optim);
    char name[200];
    for (int r = 0; r < 2; r++) {
        const RankRun *s = &sharded[r];
        cr_assert(s->last > s->first, "%s: rank %d owns nothing", what, r);
        snprintf(name, sizeof name, "%s: rank %d's shard of the first gradients", what, r);
        gt_assert_identical(name, s->grads + s->first, plain[0].grads + s->first,
                            s->last - s->first);
    }
    const size_t n = plain[0].n;
    if (o.grad_clip > 0 && o.grad_clip < 1e-2f) {  // clipped every step
        for (int i = 0; i < STEPS; i++)
            cr_assert(fabsf(sharded[0].norm[i] - plain[0].norm[i]) <= 1e-6f * plain[0].norm[i],
                      "%s: step %d's norm %.9g, the whole's %.9g", what, i + 1,
                      sharded[0].norm[i], plain[0].norm[i]);
        snprintf(name, sizeof name, "%s: weights of record", what);
        assert_within(name, sharded[0].params, plain[0].params, n, 1e-5);
    } else {
        snprintf(name, sizeof name, "%s: losses", what);
        gt_assert_identical(name, sharded[0].loss, plain[0].loss, STEPS);
        snprintf(name, sizeof name, "%s: weights of record", what);
        gt_assert_identical(name, sharded[0].params, plain[0].params, n);
        snprintf(name, sizeof name, "%s: rank 1's weights", what);
        gt_assert_identical(name, sharded[1].weights, plain[1].weights, n);
        snprintf(name, sizeof name, "%s: AdamW m", what);
        gt_assert_identical(name, sharded[0].m, plain[0].m, n);
        snprintf(name, sizeof name, "%s: AdamW v", what);
        gt_assert_identical(name, sharded[0].v, plain[0].v, n);
    }
    for (int r = 0; r < 2; r++) free_run(&plain[r]), free_run(&sharded[r]);
}

Test(data_parallel, zero1_trains_the_bits_of_data_parallel) {
    skip_without_two_gpus();
    TrainOptions o = tiny_train_options(STEPS);
    o.grad_clip = 0.0f;
    Optimizations optim = ranks_optimizations();
    check_zero1(o, optim, "per layer");
    optim.overlap_comm = 0;
    check_zero1(o, optim, "reduce-scatter");
#ifdef PRECISION_BF16
    optim.overlap_comm = 1;
    o.no_master_weights = 1;
    check_zero1(o, optim, "--no-master-weights");
#endif
}

Test(data_parallel, zero1_clips_by_the_norm_of_the_ranks_parts) {
    skip_without_two_gpus();
    TrainOptions o = tiny_train_options(STEPS);
    o.grad_clip = 1e-4f;
    check_zero1(o, ranks_optimizations(), "clipped every step");
}
