// train_gpu.c: see train_gpu.h.
#include "train/train_gpu.h"

#include <math.h>
#include <nvtx3/nvToolsExt.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt2_cpu.h"
#include "gpu/memory_plan.h"
#include "model/model_shape.h"
#include "profiler.h"
#include "model/sampling.h"
#include "softmax_crossentropy.h"
#include "train/stop_signal.h"
#include "train/train_common.h"

// ANCHOR: fit_to_switches
// A checkpoint's weights in the shape the chapter's switches give the model
// (apply_model_switches): a padding of the vocabulary is added or removed
// (gpt2_params_repad: the same model); an untied model cannot be tied (that
// would be another model), and a resumed run keeps its checkpoint's shape,
// which its training state has too.
static int fit_to_switches(const char *path, int resuming, const Optimizations *o,
                           GPT2Config *cfg, float **params, char *err) {
    GPT2Config want = *cfg;
    apply_model_switches(o, &want);
    if (want.tied && !cfg->tied)
        return fail(err, "%s: an untied model, and the chapter ties lm_head to wte "
                         "(--weight-tying): tying it would make another model (--no-weight-tying "
                         "trains it untied)", path);
    if (want.padded_vocab_size == cfg->padded_vocab_size) return 0;
    if (resuming)
        return fail(err, "%s: %d vocabulary rows, and the chapter pads them to %d: a resumed run "
                         "keeps its shape (--no-vocab-padding; or --init-from it)", path,
                    cfg->padded_vocab_size, want.padded_vocab_size);
    float *fitted = xmalloc(gpt2_num_params(&want) * sizeof(float));
    if (gpt2_params_repad(cfg, *params, &want, fitted, err)) {
        free(fitted);
        return -1;
    }
    printf("%s: vocabulary rows %d -> %d (--vocab-padding)\n", path, cfg->padded_vocab_size,
           want.padded_vocab_size);
    free(*params);
    *params = fitted;
    *cfg = want;
    return 0;
}
// ANCHOR_END: fit_to_switches

// The host copy of the initial weights: a checkpoint's or GPT-2's init, with
// the switches' changes to the model's shape.
static int initial_params(const TrainOptions *opt, const Optimizations *o, GPT2Config *cfg,
                          float **params, char *err) {
    const char *path = opt->resume_from[0] ? opt->resume_from : opt->init_from;
    if (path[0]) {
        if (load_model_for_run(path, opt->T, cfg, params, err)) return -1;
        if (cfg->vocab_size != opt->model.vocab_size) {
            free(*params);
            return fail(err, "%s: the model's vocabulary (%d) differs from the data's (%d)", path,
                        cfg->vocab_size, opt->model.vocab_size);
        }
        if (fit_to_switches(path, opt->resume_from[0] != 0, o, cfg, params, err)) {
            free(*params);
            *params = NULL;
            return -1;
        }
        return 0;
    }
    *cfg = opt->model;
    apply_model_switches(o, cfg);
    *params = xmalloc(gpt2_num_params(cfg) * sizeof(float));
    gpt2_init_params(cfg, *params, opt->seed);
    return 0;
}

// ANCHOR: restore_fp8_scales
// Chapter 13: the FP8 scales and amax histories saved with the checkpoint
// (train_state.h, version 4). Restored where this run's GEMMs are FP8: its
// casts then use the scales the run that never stopped would have, and it
// continues bit for bit. Otherwise the model and its moments are the run,
// and the scales only how chapter 13 cast its operands; so rather than
// refuse, as a state of another model is refused:
//  - a run without FP8 GEMMs (a chapter before 13, --no-fp8, the fp32
//    build, a GPU without FP8 tensor cores) leaves them out: it casts
//    nothing, and a checkpoint must resume on any GPU, as chapter 10's 8-bit
//    moments do in chapter 09;
//  - a run with FP8 resuming a state without them (chapter 12's, or chapter
//    13's of version 2 or 3) starts its scales afresh, as a new run does:
//    its first step runs current scaling (fp8_layers.h).
// Either says so: the run is no longer the one that was saved. A state of
// another shape, or of another FP8_HISTORY, is refused by the reader and by
// gpt2_gpu_set_fp8_state.
static int restore_fp8_scales(GpuTrainer *tr, const Fp8State *saved, char *err) {
    char state[1024];
    if (state_path_for_model(tr->opt.resume_from, state, sizeof state, err)) return -1;
    if (saved->tensors > 0 && tr->model.fp8_on) {
        char why[ERR_LEN];
        if (gpt2_gpu_set_fp8_state(&tr->model, saved, why))
            return fail(err, "%s: %s: not resumed (--no-fp8 resumes it without them)", state,
                        why);
        return 0;
    }
    if (saved->tensors > 0)
        printf("resume: %s holds chapter 13's FP8 scales, and this run's linear layers do not "
               "multiply in FP8 (--fp8 off, the fp32 build, or a GPU without FP8 tensor cores): "
               "they are left out\n", state);
    else if (tr->model.fp8_on)
        printf("resume: %s holds no FP8 scales (saved without FP8 GEMMs, or before state "
               "version 4): they start afresh, the first step with current scaling\n", state);
    return 0;
}
// ANCHOR_END: restore_fp8_scales

// The checkpoint's moments, in the model's layout: a state of another layout
// (chapter 09's fp32 moments resumed in chapter 10, or the reverse) is
// quantized or dequantized on the way (adam_state_convert); and chapter 13's
// FP8 scales (restore_fp8_scales).
static int restore_state(GpuTrainer *tr, char *err) {
    TrainProgress p;
    AdamState saved, mine;
    Fp8State scales;
    if (load_state_for_run(tr->opt.resume_from, &tr->opt, &tr->model.config, &p, &saved, &scales,
                           err))
        return -1;
    int rc = dataloader_seek(&tr->train, p.data, err);
    if (rc == 0) rc = restore_fp8_scales(tr, &scales, err);
    if (rc == 0) {
        adam_state_alloc(&mine, &tr->model.adam);
        adam_state_convert(&saved, &mine);
        gpt2_gpu_set_state(&tr->model, &mine);
        adam_state_free(&mine);
        tr->step = p.step;
        tr->sampler.state = p.sampler_rng;
    }
    adam_state_free(&saved);
    fp8_state_free(&scales);
    return rc;
}

// ANCHOR: place_rank
// Chapter 15: the plan's rank among the launcher's processes, and its GPU:
// the launcher's local rank, which this host must have.
static int place_rank(RunPlan *plan, const TrainOptions *opt, char *err) {
    const Launch *l = &opt->launch;
    plan->rank = l->rank, plan->world_size = l->world_size, plan->device = l->local_rank;
    if (l->world_size == 1) return 0;
    const int gpus = gpu_device_count();
    // A process that sees one GPU runs on it, whatever its local rank: its
    // launcher gave it that one (srun --gpus-per-task=1, or a
    // CUDA_VISIBLE_DEVICES of its own).
    if (gpus == 1) plan->device = 0;
    else if (l->local_rank >= gpus)
        return fail(err, "rank %d of %d is to run on GPU %d of its host (%s's local rank), and "
                         "the host has %d: start at most %d processes a host", l->rank,
                    l->world_size, l->local_rank, l->by, gpus, gpus);
    if (opt->update_in_backward)
        return fail(err, "--update-in-backward with %d ranks: a layer's update would wait for "
                         "its gradients' mean over the ranks, and so would the backward pass "
                         "behind it; run it on one GPU", l->world_size);
    return 0;
}
// ANCHOR_END: place_rank

// Chapter 15's --shard-optimizer: each rank's part of the optimizer state,
// for the fused update's tables (a shard is a table's slices of tensors),
// with the moments on the GPU (the host's blocks of --offload-optimizer are
// a layer's, not a shard's).
static int plan_shards(RunPlan *plan, const Optimizations *o, const TrainOptions *opt,
                       const GPT2Config *cfg, char *err) {
    plan->shard_optimizer = opt->shard_optimizer;
    if (!opt->shard_optimizer) return 0;
    if (run_plan_check_shard_optimizer(o, opt->shard_optimizer, opt->offload_optimizer, err))
        return -1;
    OptimizerShard s;
    const AdamLayout whole = adam_layout_for(cfg, plan->moments_8bit);
    return optimizer_shard_for(&s, &whole, plan->rank, plan->world_size, err);
}

// ANCHOR: fit_memory
// Chapter 14's --fit-memory (the plan's fit_memory): a run over its budget
// that a higher --recompute level brings under it takes the cheapest such
// level (memory_plan_fit), says so, and is planned again at it. Recompute
// trains the same bits (recompute.h): the run spends time, never a value.
static int fit_memory(GpuTrainer *tr, const GPT2Config *cfg, RunRequest *asked, char *err) {
    char said[ERR_LEN];
    if (!memory_plan_fit(cfg, asked, &tr->budget, said, sizeof said)) return 0;
    printf("memory: %s\n", said);
    tr->opt.recompute = asked->recompute;
    if (run_plan_build(&tr->plan, &asked->switches, cfg->padded_vocab_size, asked->grad_accum,
                       asked->recompute, !asked->no_master_weights, asked->update_in_backward,
                       asked->offload_optimizer, err))
        return -1;
    // The new plan on this rank's GPU too, with its shard.
    return place_rank(&tr->plan, &tr->opt, err) ||
           plan_shards(&tr->plan, &asked->switches, &tr->opt, cfg, err);
}
// ANCHOR_END: fit_memory

// ANCHOR: check_memory
// The run's memory, planned from the model's shape, the batch and the
// switches (memory_plan.h), against its budget: what the GPU has free, or
// --memory-limit when that is less (memory_budget.h). A run that cannot fit
// is refused here, before anything is allocated, naming the changes that
// make it fit, each planned again, rather than failing halfway through its
// first step; in chapter 14, only once no --recompute level fits.
static int check_memory(GpuTrainer *tr, const Optimizations *o, const GPT2Config *cfg,
                        char *err) {
    const TrainOptions *opt = &tr->opt;
    size_t free_bytes, total;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
    tr->budget = memory_budget(free_bytes, opt->memory_limit_gib);
    RunRequest asked = {*o, opt->B, opt->T, opt->grad_accum, opt->recompute,
                        opt->no_master_weights, opt->update_in_backward, opt->offload_optimizer};
    // Chapter 13's FP8 operands only where the GPU multiplies in FP8: on one
    // that does not (an A100, an RTX 30), the model runs chapter 12's bf16
    // GEMMs and allocates none (gpt2_gpu_init), so none are planned.
    if (!tr->ctx.fp8) asked.switches.fp8 = 0;
    if (tr->plan.fit_memory && fit_memory(tr, cfg, &asked, err)) return -1;
    return memory_plan_check(cfg, &asked, &tr->budget, err);
}
// ANCHOR_END: check_memory

// Everything a step uses is made here, before the first step: nothing is
// allocated or freed inside one, since cudaMallocHost, cudaFreeHost and
// cudaFree wait for the device, and so, at times, does cudaMalloc.
static void alloc_step_buffers(GpuTrainer *tr) {
    const int B = tr->opt.B, T = tr->opt.T, V = tr->model.config.vocab_size;
    const int async = tr->plan.async;
    for (int b = 0; b < (async ? 2 : 1); b++) {
        host_batch_init(&tr->batches[b], B, T, V, async);
        // Only waited for, never timed: cheaper to record.
        CUDA_CHECK(cudaEventCreateWithFlags(&tr->copied[b], cudaEventDisableTiming));
    }
    host_batch_init(&tr->eval_batch, B, T, V, 0);
    tr->step_scalars = gpu_malloc(2 * GPU_MAX_PENDING_STEPS * sizeof(float),
                                  "per-step losses and gradient norms");
    tr->graph_scalars = gpu_malloc(2 * sizeof(float), "a replayed step's loss and norm");
    for (int i = 0; i < GPU_MAX_PENDING_STEPS; i++)
        for (int e = 0; e < 4; e++) CUDA_CHECK(cudaEventCreate(&tr->step_events[i][e]));
    if (async) loss_readback_init(&tr->readback, 2 * GPU_MAX_PENDING_STEPS);
}

static void free_step_buffers(GpuTrainer *tr) {
    // A step still queued may be reading the buffers: let it finish first.
    gpu_stream_sync(&tr->ctx, "the last steps, before freeing their buffers");
    for (int b = 0; b < 2; b++) {
        if (tr->batches[b].inputs) host_batch_free(&tr->batches[b]);
        if (tr->copied[b]) CUDA_CHECK(cudaEventDestroy(tr->copied[b]));
    }
    if (tr->eval_batch.inputs) host_batch_free(&tr->eval_batch);
    gpu_free(tr->step_scalars);
    gpu_free(tr->graph_scalars);
    step_graphs_free(&tr->graphs);
    for (int i = 0; i < GPU_MAX_PENDING_STEPS; i++)
        for (int e = 0; e < 4; e++)
            if (tr->step_events[i][e]) CUDA_CHECK(cudaEventDestroy(tr->step_events[i][e]));
    if (tr->readback.host) loss_readback_free(&tr->readback);
}

// ANCHOR: join_ranks
// A hash of the command line as the run uses it, the launcher's variables
// left out: what every rank must share (FNV-1a over the options' bytes,
// which train_options_default zeroes first, padding included).
static uint64_t options_hash(const TrainOptions *opt, const Optimizations *o) {
    TrainOptions same;
    memcpy(&same, opt, sizeof same);  // every byte, the zeroed padding too
    memset(&same.launch, 0, sizeof same.launch);
    uint64_t h = 1469598103934665603ull;
    const unsigned char *parts[] = {(const unsigned char *)&same, (const unsigned char *)o};
    const size_t sizes[] = {sizeof same, sizeof *o};
    for (int p = 0; p < 2; p++)
        for (size_t i = 0; i < sizes[p]; i++) h = (h ^ parts[p][i]) * 1099511628211ull;
    return h;
}

// The ranks meet (gpu_comm.h) and check that they run the same command line.
static int join_ranks(GpuTrainer *tr, const Optimizations *o, char *err) {
    const RunPlan *plan = &tr->plan;
    tr->ctx.rank = plan->rank, tr->ctx.world_size = plan->world_size;
    if (gpu_comm_init(&tr->comm, &tr->ctx, plan->rank, plan->world_size, tr->opt.nccl_id_file,
                      tr->opt.comm_timeout_s, err))
        return -1;
    return gpu_comm_same_everywhere(&tr->comm, &tr->ctx, options_hash(&tr->opt, o),
                                    "command line", err);
}
// ANCHOR_END: join_ranks

// The data, the weights, then the plan (which needs the model's shape), the
// GPU the plan names and the memory it needs, the model, and the step's own
// buffers; on a failure everything made so far is given back.
int gpu_trainer_init(GpuTrainer *tr, const TrainOptions *opt, const Optimizations *optim,
                     char *err) {
    memset(tr, 0, sizeof(*tr));
    tr->opt = *opt;
    rng_seed(&tr->sampler, opt->seed ^ 0x5A5A5A5Aull);
    if (open_data(opt, &tr->train, &tr->val, &tr->has_val, err)) return -1;
    GPT2Config cfg;
    float *params = NULL;
    if (initial_params(opt, optim, &cfg, &params, err) ||
        run_plan_build(&tr->plan, optim, cfg.padded_vocab_size, opt->grad_accum, opt->recompute,
                       !opt->no_master_weights, opt->update_in_backward,
                       opt->offload_optimizer, err) ||
        place_rank(&tr->plan, opt, err) || plan_shards(&tr->plan, optim, opt, &cfg, err)) {
        free(params);
        dataloader_free(&tr->train);
        if (tr->has_val) dataloader_free(&tr->val);
        return -1;
    }
    const RunPlan *plan = &tr->plan;
    dataloader_set_rank(&tr->train, plan->rank, plan->world_size);
    gpu_context_init(&tr->ctx, plan->device);
    // Chapter 15 before the plan's check: NCCL's buffers are the GPU's too.
    if (join_ranks(tr, optim, err) || check_memory(tr, optim, &cfg, err)) {
        free(params);
        gpu_comm_free(&tr->comm);
        gpu_context_free(&tr->ctx);
        dataloader_free(&tr->train);
        if (tr->has_val) dataloader_free(&tr->val);
        return -1;
    }
    gpt2_gpu_init(&tr->model, &tr->ctx, &cfg, params, opt->B, opt->T, plan);
    free(params);
    if (plan->world_size > 1) tr->model.comm = &tr->comm;
    alloc_step_buffers(tr);
    if (opt->resume_from[0] && restore_state(tr, err)) {
        gpu_trainer_free(tr);
        return -1;
    }
    // Chapter 11: every step's values on the device, from the step the run is at.
    if (plan->device_schedule)
        gpt2_gpu_set_schedule(&tr->model, &opt->lr, &opt->adamw, opt->steps, tr->step);
    // Chapter 08: the workers start reading where the run is, after a resume's seek.
    if (plan->workers) {
        if (data_workers_start(&tr->workers, &tr->ctx, &tr->train, opt->B, opt->T,
                               cfg.vocab_size, opt->data_threads, opt->data_delay_us, err)) {
            gpu_trainer_free(tr);
            return -1;
        }
        tr->workers_running = 1;
    }
    return 0;
}

size_t gpu_trainer_memory_held(const GpuTrainer *tr) {
    size_t free_bytes, total;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
    return free_bytes < tr->budget.free_bytes ? tr->budget.free_bytes - free_bytes : 0;
}

// ANCHOR: keep_to_budget
// The plan counts every buffer the run allocates, and the plan fit the
// budget: what can still take more is CUDA's libraries (cuBLAS's workspace,
// kernels loaded at their first launch, cuBLASLt's plans, graphs), which the
// plan only allows for. Measured here, after the allocations and at every
// log line; a transient allocation between two measures (chapter 11's
// autotuning trials, freed after the first step) is not seen, but under a
// real limit (a smaller card, or the ballast of tests/shell/
// test_gpu_memory_limit.sh) it would have failed in cudaMalloc, by name.
int gpu_trainer_check_memory(GpuTrainer *tr, char *err) {
    const size_t held = gpu_trainer_memory_held(tr);
    if (held > tr->memory_peak) tr->memory_peak = held;
    if (tr->budget.limit_bytes == 0 || held <= tr->budget.bytes) return 0;
    const double gib = 1 << 30;
    const MemoryPlan p = memory_plan(&tr->model.config, tr->opt.B, tr->opt.T, &tr->plan);
    return fail(err, "the run holds %.2f GiB on the device, more than its budget of %.2f GiB "
                     "(--memory-limit %g): it planned %.2f GiB, of which %.0f MiB is the "
                     "allowance for CUDA's libraries (memory_plan.c), and they took more; or "
                     "another process on this GPU allocated meanwhile",
                held / gib, tr->budget.bytes / gib, tr->budget.limit_gib, p.total / gib,
                p.libraries / (1024.0 * 1024.0));
}
// ANCHOR_END: keep_to_budget

void gpu_trainer_free(GpuTrainer *tr) {
    free_step_buffers(tr);
    if (tr->workers_running) data_workers_stop(&tr->workers);
    gpt2_gpu_free(&tr->model);
    gpu_comm_free(&tr->comm);
    gpu_context_free(&tr->ctx);
    dataloader_free(&tr->train);
    if (tr->has_val) dataloader_free(&tr->val);
    memset(tr, 0, sizeof(*tr));
}

static double event_ms(cudaEvent_t a, cudaEvent_t b) {
    float ms;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms;
}

// Chapters 00-02 keep the numbers of the last GPU_MAX_PENDING_STEPS steps
// for gpu_trainer_read_stats, dropping the oldest.
static void drop_oldest_stats(GpuTrainer *tr) {
    memmove(tr->pending_stats, tr->pending_stats + 1,
            (GPU_MAX_PENDING_STEPS - 1) * sizeof tr->pending_stats[0]);
    tr->pending--;
}

// The host batch this step loads into. Chapters 00-02: the one pageable
// batch, free again as soon as the last step's synchronous copies returned.
//
// Chapter 03 uploads from pinned memory with cudaMemcpyAsync, and that is
// the subtle part. From pageable memory the driver copies the bytes into a
// staging buffer of its own before the call returns, so the host may
// overwrite its buffer at once. From pinned memory nothing is copied when
// the call returns: the copy is only queued, and the GPU's copy engine reads
// the host buffer later, when the stream reaches the copy, which can be a
// whole step or two later, since the host now runs ahead of the device.
// Until then the buffer still belongs to the copy. If the host loaded the
// next batch into it, the step already queued would train on the wrong
// tokens: no error, no crash, only a different model, which chapter 03's
// bit-identity test with chapter 02 would catch.
//
// Hence two buffers, used in turn, and an event recorded on the stream right
// after the copies that read each one. Before writing into a buffer, the host
// waits for its event: the copies of two steps ago must have been done. That
// wait costs nothing in the steady state: when the host is two steps ahead,
// the device still has a whole step queued, so it never runs dry while the
// host waits. With one buffer the host could not prepare step k+1's batch
// until step k's copy had run; with two it can, while the device is still
// busy with step k-1.
static int next_host_batch(GpuTrainer *tr) {
    if (!tr->plan.async) return 0;
    const int b = tr->batches_loaded % 2;
    // ANCHOR: wait_for_buffer
    // Done, or never recorded: the buffer is free. Else the host is two steps
    // ahead of the device, and waits (or an earlier kernel failed: the wait
    // reports it).
    if (cudaEventQuery(tr->copied[b]) != cudaSuccess)
        gpu_event_sync(&tr->ctx, tr->copied[b], "a free upload buffer");
    // ANCHOR_END: wait_for_buffer
    return b;
}

// Chapters 00-07: the next batch, read on this thread, and as long as a read
// from storage would take (--data-delay-us).
static int read_batch(GpuTrainer *tr, HostBatch *hb, char *err) {
    if (dataloader_next(&tr->train, hb->inputs, hb->targets, err)) return -1;
    tr->batches_loaded++;
    simulated_storage_delay(tr->opt.data_delay_us);
    return 0;
}

// What the host knows of the next step when it starts it; the rest is NaN
// until the step's numbers are read.
static GpuStepStats step_stats_new(const GpuTrainer *tr) {
    return (GpuStepStats){.step = tr->step + 1, .lr = lr_at_step(&tr->opt.lr, tr->step),
                          .data_ms = 0, .loss = NAN, .grad_norm = NAN, .ms = NAN,
                          .forward_ms = NAN, .backward_ms = NAN, .optimizer_ms = NAN};
}

// One micro-batch's work, as the stream gets it, and what a graph records.
typedef struct {
    GpuTrainer *tr;
    GpuStepStats *s;       // the step's numbers: those the host reads at once (00-02)
    float *loss, *norm;    // the step's, on the device
    cudaEvent_t *events;   // the phases' marks (plan.phase_events), or NULL
    int first, last;       // of the step's micro-batches
} MicroStep;

// ANCHOR: micro_step
static void micro_step_work(void *arg) {
    const MicroStep *m = arg;
    GPT2Gpu *model = &m->tr->model;
    const RunPlan *plan = &m->tr->plan;
    const TrainOptions *opt = &m->tr->opt;
    const int n = plan->micro_batches;
    // One micro-batch: its mean loss is the step's. Several: each one's into
    // the model's float, then into the step's mean, on the device.
    float *loss = n == 1 ? m->loss : model->mean_loss;
    gpt2_gpu_forward(model, GPT2_TRAIN, loss);
    if (n > 1) loss_accumulate_v1(model->ctx, m->loss, loss, m->first, m->last ? n : 0);
    // Chapters 00-02 read the loss back every step, as `loss.item()` does: the
    // host waits here for the whole forward pass.
    if (!plan->async)
        gpu_memcpy_sync(model->ctx, &m->s->loss, m->loss, sizeof(float), cudaMemcpyDeviceToHost);
    if (m->events) CUDA_CHECK(cudaEventRecord(m->events[1], model->ctx->stream));
    // Chapter 14's --update-in-backward: the step's values first, for the
    // backward pass that updates each layer as its gradients are complete.
    if (plan->update_in_backward) {
        if (plan->device_schedule) gpt2_gpu_update_begin_scheduled(model, &opt->adamw, m->norm);
        else gpt2_gpu_update_begin(model, m->s->lr, &opt->adamw, m->s->step, m->norm);
    }
    // Chapter 15: the last micro-batch's backward pass averages the
    // gradients over the ranks as it completes them.
    model->sync_grads = m->last;
    // The gradients: from zero at the first micro-batch, added after it.
    if (m->first) gpt2_gpu_backward(model);
    else gpt2_gpu_backward_add(model);
    if (m->events) CUDA_CHECK(cudaEventRecord(m->events[2], model->ctx->stream));
    if (!m->last) return;
    // The update's values: the host's through chapter 10, the device's table's
    // in chapter 11. Chapters 00-02 get the norm back; later chapters NaN.
    m->s->grad_norm =
        plan->device_schedule
            ? gpt2_gpu_update_scheduled(model, &opt->adamw, opt->grad_clip, m->norm)
            : gpt2_gpu_update(model, m->s->lr, &opt->adamw, opt->grad_clip, m->s->step, m->norm);
    // Chapter 15: the step's loss is the mean of the ranks' (the norm is the
    // same on every rank: the mean's).
    if (model->comm) gpu_comm_mean_floats(model->comm, model->ctx, m->loss, 1);
}
// ANCHOR_END: micro_step

// Where the step's loss and norm go on the device, and the stats it keeps:
// chapters 00-02 read a step's numbers at once and keep the last
// GPU_MAX_PENDING_STEPS (dropping the oldest), in slot 0; chapter 03 reads
// them late, each pending step in a slot of its own.
static int step_slot(GpuTrainer *tr, char *err) {
    if (tr->pending == GPU_MAX_PENDING_STEPS) {
        if (tr->plan.async)
            return fail(err, "%d steps are pending: gpu_trainer_read_stats must read them first",
                        GPU_MAX_PENDING_STEPS);
        drop_oldest_stats(tr);
    }
    return tr->plan.async ? tr->pending : 0;
}

// ANCHOR: training_step
// One step, every chapter's: for each micro-batch of the plan (one, but in
// chapter 11 with --grad-accum), the batch loaded and the micro-batch's work
// queued, or replayed from its graph (chapter 11); the phases timed apart
// where the plan can (one micro-batch, no graph); and in chapters 00-02 a
// wait for the end of the step.
int gpu_trainer_step(GpuTrainer *tr, GpuStepStats *s, char *err) {
    GpuContext *ctx = &tr->ctx;
    const RunPlan *plan = &tr->plan;
    const int slot = step_slot(tr, err);
    if (slot < 0) return -1;
    // A replayed graph reads its step's lr from the table without asking the
    // host: the bound is checked here, for every step.
    if (plan->device_schedule && tr->step + 1 > tr->model.schedule_steps)
        return fail(err, "step %d is past the %d steps of the device's schedule (--steps)",
                    tr->step + 1, tr->model.schedule_steps);
    *s = step_stats_new(tr);
    cudaEvent_t *ev = tr->step_events[slot];
    float *loss = tr->step_scalars + 2 * slot;  // and its norm at loss + 1
    // ANCHOR: graph_step
    // Replayed steps write their loss and norm to two fixed floats, copied to
    // this step's after the replay. The profiler times kernels one by one:
    // its steps run as they are.
    const int graphs = plan->graphs && tr->warmed_up && !gpu_profiling(ctx);
    float *step_loss = graphs ? tr->graph_scalars : loss;
    double start = 0;
    for (int i = 0; i < plan->micro_batches; i++) {
        // ANCHOR: step_data
        // Chapters 00-07 read the batch here, on this thread, into a host
        // batch (chapter 03: one of two pinned ones, which may mean a wait);
        // chapter 08 takes one that the workers prepared, and queues its
        // copies on their stream.
        const int b = plan->workers ? 0 : next_host_batch(tr);
        if (i == 0) start = now_ms();
        if (i == 0 && tr->pending == 0) tr->interval_start = start;
        const double before = now_ms();
        nvtxRangePushA("data");
        int rc = plan->workers ? data_workers_feed(&tr->workers, &tr->model, err)
                               : read_batch(tr, &tr->batches[b], err);
        nvtxRangePop();
        s->data_ms += now_ms() - before;
        // ANCHOR_END: step_data
        if (rc) return -1;
        if (i == 0 && plan->phase_events) CUDA_CHECK(cudaEventRecord(ev[0], ctx->stream));
        if (!plan->workers) {
            if (gpt2_gpu_upload_batch(&tr->model, &tr->batches[b], 1, tr->opt.B, tr->opt.T, err))
                return -1;
            // Chapter 03: the batch's buffers are free again once this event is done.
            if (plan->async) CUDA_CHECK(cudaEventRecord(tr->copied[b], ctx->stream));
        }
        MicroStep m = {tr, s, step_loss, step_loss + 1, plan->phase_events ? ev : NULL,
                       i == 0, i == plan->micro_batches - 1};
        if (graphs) {
            StepGraphKey key = {tr->model.batch, m.first, m.last};
            step_graphs_launch(&tr->graphs, ctx, key, micro_step_work, &m);
        } else {
            micro_step_work(&m);
        }
    }
    if (graphs)
        gpu_memcpy_async(ctx, loss, tr->graph_scalars, 2 * sizeof(float),
                         cudaMemcpyDeviceToDevice, "copy (a replayed step's loss and norm)");
    // ANCHOR_END: graph_step
    if (plan->phase_events) CUDA_CHECK(cudaEventRecord(ev[3], ctx->stream));
    // Chapters 00-02 wait for the end of the step; chapter 03 goes on to the next.
    if (!plan->async) gpu_event_sync(ctx, ev[3], "the end of the step");
    tr->step++;
    tr->warmed_up = 1;
    if (!plan->async) {
        s->ms = now_ms() - start;
        s->forward_ms = event_ms(ev[0], ev[1]);
        s->backward_ms = event_ms(ev[1], ev[2]);
        s->optimizer_ms = event_ms(ev[2], ev[3]);
    }
    tr->pending_stats[tr->pending++] = *s;
    return 0;
}
// ANCHOR_END: training_step

int gpu_trainer_pending(const GpuTrainer *tr) { return tr->pending; }

int gpu_trainer_read_stats(GpuTrainer *tr, GpuStepStats *out) {
    const int n = tr->pending;
    if (n == 0) return 0;
    memcpy(out, tr->pending_stats, (size_t)n * sizeof *out);
    tr->pending = 0;
    // Chapter 15: steps have finished, on every rank (each waited for the
    // others' gradients), once their numbers are here: the watchdog's clock
    // starts again.
    if (!tr->plan.async) {
        gpu_comm_progress(&tr->comm);
        return n;
    }
    // ANCHOR: read_stats_async
    // The one wait: for the copy of the pending steps' losses and norms,
    // queued after all of their work.
    float values[2 * GPU_MAX_PENDING_STEPS];
    loss_readback_start(&tr->readback, tr->step_scalars, 2 * n, tr->ctx.stream);
    loss_readback_finish(&tr->readback, &tr->ctx, values);
    double ms = (now_ms() - tr->interval_start) / n;
    for (int i = 0; i < n; i++) {
        cudaEvent_t *ev = tr->step_events[i];
        out[i].loss = values[2 * i];
        out[i].grad_norm = values[2 * i + 1];
        out[i].ms = ms;
        if (!tr->plan.phase_events) continue;  // no split by phase (train_gpu.h)
        out[i].forward_ms = event_ms(ev[0], ev[1]);
        out[i].backward_ms = event_ms(ev[1], ev[2]);
        out[i].optimizer_ms = event_ms(ev[2], ev[3]);
    }
    // ANCHOR_END: read_stats_async
    gpu_comm_progress(&tr->comm);
    return n;
}

int gpu_trainer_val_loss(GpuTrainer *tr, float *loss, char *err) {
    if (!tr->has_val) return fail(err, "no validation data");
    HostBatch *hb = &tr->eval_batch;
    dataloader_reset(&tr->val);
    double sum = 0;
    for (int i = 0; i < tr->opt.val_batches; i++) {
        if (dataloader_next(&tr->val, hb->inputs, hb->targets, err)) return -1;
        if (gpt2_gpu_upload_batch(&tr->model, hb, 1, tr->opt.B, tr->opt.T, err)) return -1;
        gpt2_gpu_forward(&tr->model, GPT2_LOSS, tr->model.mean_loss);
        sum += gpt2_gpu_read_loss(&tr->model);
    }
    *loss = (float)(sum / tr->opt.val_batches);
    return 0;
}

int gpu_trainer_save(GpuTrainer *tr, char *model_path, size_t cap, char *err) {
    GPT2Gpu *m = &tr->model;
    // Chapter 15: rank 0 alone writes. The other ranks hold what rank 0
    // holds and have nothing to do, but with --shard-optimizer, where each
    // sends rank 0 its shard (collectives) and keeps no copy on the host.
    const int writer = tr->plan.rank == 0;
    if (!writer && !tr->plan.shard_optimizer) return 0;
    float *params = writer ? xmalloc(m->num_params * sizeof(float)) : NULL;
    AdamState state;
    if (writer) adam_state_alloc(&state, &m->adam);
    // The weights of record: the fp32 master weights in the bf16 build, so a
    // checkpoint is fp32 (version 3) whichever build wrote it; the moments as
    // the model keeps them (8-bit ones too, from chapter 10); and chapter
    // 13's FP8 scales, where FP8 GEMMs run (else none).
    gpt2_gpu_get_params(m, params);
    gpt2_gpu_get_state(m, writer ? &state : NULL);
    if (!writer) return 0;
    Fp8State scales;
    gpt2_gpu_get_fp8_state(m, &scales);
    // With workers the loader is ahead of the model: the position of record is
    // after the last batch the model took.
    DataPosition data = tr->workers_running ? data_workers_position(&tr->workers)
                                            : dataloader_position(&tr->train);
    TrainProgress p = {.step = tr->step, .data = data, .sampler_rng = tr->sampler.state,
                       .B = tr->opt.B, .T = tr->opt.T};
    int rc = save_run(tr->opt.checkpoint_dir, &m->config, params, &state, &scales, &p,
                      model_path, cap, err);
    free(params);
    adam_state_free(&state);
    fp8_state_free(&scales);
    return rc;
}

// ANCHOR: sample
// Each new token reruns the whole context (no KV cache) in GPT2_LOGITS mode
// and draws from the softmax of the last position's logits, computed on the
// host. Every forward pass has the same shape, (1, window), window = the
// model's T or the sample's length if shorter: the context fills the first
// len positions and end-of-text tokens the rest. Causal attention lets
// position len - 1 see positions 0 .. len - 1 only, and every other layer
// works row by row, so the padding changes nothing that is read; and one
// shape means one set of GEMM plans, where a shape per length would make
// cuBLASLt a plan for every token (matmul_lt.h). Once the sample is longer
// than the window, the context slides and fills it.
int gpu_trainer_sample(GpuTrainer *tr, int32_t *out, int n, int eot) {
    const GPT2Config *c = &tr->model.config;
    const int window = n < tr->opt.T ? (n > 0 ? n : 1) : tr->opt.T;
    float *logits = xmalloc((size_t)c->vocab_size * sizeof(float));
    HostBatch *hb = &tr->eval_batch;
    char err[ERR_LEN];
    out[0] = eot;
    int t = 1;
    for (; t <= n && !stop_requested(); t++) {
        const int len = t < window ? t : window;
        memcpy(hb->inputs, out + t - len, (size_t)len * sizeof(int32_t));
        for (int i = len; i < window; i++) hb->inputs[i] = eot;
        if (gpt2_gpu_upload_batch(&tr->model, hb, 0, 1, window, err)) die("%s", err);
        gpt2_gpu_forward(&tr->model, GPT2_LOGITS, NULL);
        gpt2_gpu_download_logits(&tr->model, (size_t)len - 1, 1, c->vocab_size, logits);
        out[t] = sample_from_logits(logits, c->vocab_size, rng_uniform(&tr->sampler));
    }
    free(logits);
    return t - 1;
}
// ANCHOR_END: sample
