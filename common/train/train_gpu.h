// train_gpu.h: the training loop around the GPU model (gpt2_gpu.h): the same
// steps as the CPU trainer (train_cpu.h), timed phase by phase with CUDA
// events, with the chapter's optimizations switched on.
#ifndef TRAIN_GPU_H
#define TRAIN_GPU_H

#include "train/chapters.h"
#include "data/data_workers.h"
#include "data/dataloader.h"
#include "encoder.h"
#include "gpu/gpt2_gpu.h"
#include "gpu/gpu_comm.h"
#include "gpu/loss_readback.h"
#include "gpu/step_graph.h"
#include "train/train_options.h"
#include "util/util.h"

typedef struct {
    int step;                   // 1-based: the step these numbers are of
    float loss, grad_norm, lr;
    double ms;                  // wall time of the whole step (see gpu_trainer_read_stats)
    double data_ms;             // host: the next batch from the loader (chapter 08: the wait
                                // for the workers' next batch, and queuing its copies)
    double forward_ms, backward_ms, optimizer_ms;  // device, from CUDA events
} GpuStepStats;

// The most steps whose numbers gpu_trainer_read_stats has not returned yet.
#define GPU_MAX_PENDING_STEPS 64

typedef struct {
    TrainOptions opt;           // what to train, and for how long
    RunPlan plan;               // how: built once from the chapter's switches (run_plan.h)
    GpuContext ctx;
    GpuComm comm;               // chapter 15: this rank's NCCL communicator (one rank: empty)
    GPT2Gpu model;
    DataLoader train, val;
    int has_val;
    int step;                   // optimizer steps completed (queued, in chapter 03)
    Rng sampler;
    // The training batches on the host: one, pageable, in chapters 00-02; two,
    // pinned, used in turn, in chapter 03 (train_gpu.c says why two), each
    // with an event recorded after the copies that read it.
    HostBatch batches[2];
    cudaEvent_t copied[2];
    HostBatch eval_batch;       // pageable: validation and sampling
    // Chapter 08: the training batches come from worker threads instead
    // (data_workers.h), which own tr->train while they run.
    DataWorkers workers;
    int workers_running;
    // The steps not yet returned by gpu_trainer_read_stats, oldest first.
    // Chapter 03 reads each step's numbers late, so each pending step has its
    // own events (forward start, backward start, optimizer start, end) and
    // its own two floats on the device (its loss, its gradient norm);
    // chapters 00-02 read them at once and use the first of each.
    int pending;
    GpuStepStats pending_stats[GPU_MAX_PENDING_STEPS];
    cudaEvent_t step_events[GPU_MAX_PENDING_STEPS][4];
    float *step_scalars;        // device, 2 floats per pending step
    LossReadback readback;      // chapter 03: reads step_scalars back at gpu_trainer_read_stats
    double interval_start;      // wall clock (ms) when the first pending step began
    int batches_loaded;         // training batches read so far by this run
    // Chapter 11: the step's graphs (step_graph.h), and the two floats (loss,
    // norm) a replayed step writes, copied to its step_scalars after it. The
    // run's first step runs without a graph: it makes every GEMM's plan
    // (cuBLASLt allocates and times then, which a capture may not do).
    StepGraphs graphs;
    float *graph_scalars;       // device, 2 floats
    int warmed_up;
    // The run's device memory (memory_budget.h): its budget, set when the
    // plan was checked (budget.free_bytes: what the GPU had free then,
    // before the model was allocated), and the most it has held since, as
    // gpu_trainer_check_memory measures it.
    MemoryBudget budget;
    size_t memory_peak;
} GpuTrainer;

// Builds the run's plan from the switches (run_plan.h), the model on the
// plan's GPU (random init on the host from opt->seed, or opt->init_from, or
// opt->resume_from with its training state) once its memory plan fits its
// budget (what the GPU has free, or opt->memory_limit_gib when smaller),
// and the data loaders. Returns 0, or -1 with a reason in err: a switch the
// step cannot take, a file, or a run too large for its budget, each named,
// the last with the changes that would make it fit (memory_budget.h).
int gpu_trainer_init(GpuTrainer *tr, const TrainOptions *opt, const Optimizations *optim,
                     char *err);
void gpu_trainer_free(GpuTrainer *tr);

// What the run holds on the device now beyond what it held when its plan was
// checked (its CUDA context): what the GPU had free then less what it has
// free now. On a GPU that other processes use, what they allocated since
// counts too.
size_t gpu_trainer_memory_held(const GpuTrainer *tr);

// Measures that, keeps the most in tr->memory_peak, and, for a run under
// --memory-limit, returns -1 with err when it is over the budget (CUDA's
// libraries took more than the plan allows them); else 0. The trainer calls
// it once everything is allocated and at every log line.
int gpu_trainer_check_memory(GpuTrainer *tr, char *err);

// One optimizer step: the same function for every chapter, which reads the
// run's plan. Chapter 11 runs it as --grad-accum N micro-batches (1 by
// default), each replayed from a CUDA graph with --cuda-graphs; the split by
// phase is then not measured (forward_ms, backward_ms, optimizer_ms stay
// NaN). A step past the device's schedule (--steps) is refused. Chapters 00-02
// wait for the device and return the step's numbers, complete, in *stats.
// Chapter 03 (sync-avoidance) queues the step on the device and returns
// without waiting: *stats then holds only what the host knows (step, lr,
// data_ms), and NaN for the rest, which gpu_trainer_read_stats returns
// later. In chapter 03 at most GPU_MAX_PENDING_STEPS steps may be pending:
// the next step fails, saying so, until they are read.
int gpu_trainer_step(GpuTrainer *tr, GpuStepStats *stats, char *err);
int gpu_trainer_pending(const GpuTrainer *tr);  // steps not yet read

// The numbers of the steps not yet read, oldest first, into out (room for
// GPU_MAX_PENDING_STEPS); returns how many. Chapters 00-02: what each step
// returned (the last GPU_MAX_PENDING_STEPS of them), without waiting.
// Chapter 03: here the host waits for the device, once (the loss readback),
// then fills in each step's loss, gradient norm and device times (from the
// CUDA events each step recorded); ms, for each step, is the wall time
// since the first of them began divided by their number.
int gpu_trainer_read_stats(GpuTrainer *tr, GpuStepStats *out);

int gpu_trainer_val_loss(GpuTrainer *tr, float *loss, char *err);
int gpu_trainer_save(GpuTrainer *tr, char *model_path, size_t cap, char *err);
// Up to n tokens after an end-of-text prompt; out holds n + 1 ids. Returns
// how many were drawn: n, or fewer when a stop was requested (Ctrl-C,
// stop_signal.h) while sampling.
int gpu_trainer_sample(GpuTrainer *tr, int32_t *out, int n, int eot);

#endif
