// train_gpt2.c: train GPT-2 on the GPU; the book's main program.
//
//   build/train_gpt2_fp32 --chapter 0                 the FP32 baseline
//   build/train_gpt2_fp32 --chapter 1 --no-tensor-cores   an ablation
//   build/train_gpt2_bf16 --chapter 2                 mixed precision (bf16)
//   build/train_gpt2_fp32 --list-chapters
//   build/train_gpt2_fp32 --check-state MODEL.bin STATE.bin
//
// Built twice, for fp32 and for bf16 storage (kernels/precision.h): each
// binary runs the chapters of its precision (the table's precision column)
// and refuses the others; `make train CH=N` picks the right one.
//
// Every step prints its loss, time, throughput, TFLOP/s, MFU and where the
// time went; --bench-csv appends the medians of a run to a CSV file.
//
// Exit status (exit_status.h, the CPU trainer's too, printed by --help): 0
// done; 1 the run failed while running (a diverged loss, a device error, no
// device, a read or a write that failed); 2 the command line, or a file it
// names, is wrong, found before the first step; 130 or 143 stopped by Ctrl-C
// or SIGTERM.
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/check_state.h"
#include "train/exit_status.h"
#include "model/flops.h"
#include "gpu/memory_plan.h"
#include "precision.h"
#include "profiler.h"
#include "train/stop_signal.h"
#include "data/tokenizer.h"
#include "train/train_common.h"
#include "train/train_gpu.h"
#include "util/spread.h"

// The binary's name for messages: build/train_gpt2_fp32 or build/train_gpt2_bf16.
#define TRAINER_NAME "build/train_gpt2_" PRECISION_NAME

// Room for the marks of one profiled step: a launch, and in chapters 00-02 a
// wait after it, for each of the ~700 kernels of a 124M step.
#define PROFILE_MARKS_PER_STEP 4096

// The command line, read: one struct for each thing it says.
//
// What the run measures and prints besides its step lines.
typedef struct {
    const char *bench_csv, *bench_label;
    int bench_warmup;
    double peak_tflops;  // 0: from the device name
    int count_syncs;     // print the host-device synchronizations per step
    int profile_steps;   // profile this many steps after the warm-up (0: none)
    const char *profile_csv;
    int memory;          // print the device memory, tensor by tensor
} ReportOptions;

typedef struct {
    TrainOptions run;        // what to train and for how long: the CPU trainer's flags too
    int chapter;             // how: the chapter, and its switches after the
    Optimizations switches;  // command line's --SWITCH and --no-SWITCH (chapters.h)
    ReportOptions report;
    // Modes that train nothing.
    const char *check_model, *check_state;  // --check-state MODEL STATE: compare, then exit
    int help;                // --help: print the usage
    int list_chapters;       // --list-chapters: print the table
} CommandLine;

// A chapter runs only in the build of its precision.
static int check_chapter_precision(int chapter, char *err) {
    const Chapter *ch = chapter_get(chapter);
    if (!strcmp(ch->precision, PRECISION_NAME)) return 0;
    return fail(err, "chapter %02d (%s) runs in %s, and this trainer is built for %s: run "
                     "build/train_gpt2_%s --chapter %d (make train CH=%d picks it)",
                chapter, ch->title, ch->precision, PRECISION_NAME, ch->precision, chapter,
                chapter);
}

// A whole number >= 0, or a number > 0, or an error naming the flag.
static int parse_count(const char *flag, const char *s, int *out, char *err) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > 1000000000)
        return fail(err, "%s: expected a whole number >= 0, got '%s'", flag, s);
    *out = (int)v;
    return 0;
}

static int parse_positive(const char *flag, const char *s, double *out, char *err) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v > 0) || v > 1e9)
        return fail(err, "%s: expected a number > 0, got '%s'", flag, s);
    *out = v;
    return 0;
}

// ---- this program's own flags ---------------------------------------------------
// One row per flag, as in train_options.c: its name, what it takes, and
// where its value goes in CommandLine. A chapter switch (--NAME, --no-NAME) is
// not a row: the chapter table (chapters.c) knows those. Everything else is
// handed on, with its value, to train_options_parse.
typedef enum {
    GPU_FLAG_CHAPTER,    // --chapter N: read before the switches (take_gpu_flags)
    GPU_FLAG_CHECK,      // --check-state MODEL STATE: two values
    GPU_FLAG_TEXT,       // a const char * field: the value itself
    GPU_FLAG_COUNT,      // an int field, a whole number >= 0
    GPU_FLAG_POSITIVE,   // a double field, a number > 0
    GPU_FLAG_ON,         // no value: sets an int field to 1
    GPU_FLAG_PRECISION,  // --bf16, --fp32, ...: refused, the precision is a build
} GpuFlagKind;

typedef struct {
    const char *name;
    GpuFlagKind kind;
    size_t offset;  // the field in CommandLine, for TEXT, COUNT, POSITIVE, ON
} GpuFlagSpec;

#define GPU_FIELD(f) offsetof(CommandLine, f)

static const GpuFlagSpec GPU_FLAGS[] = {
    {"--chapter", GPU_FLAG_CHAPTER, 0},
    {"--check-state", GPU_FLAG_CHECK, 0},
    {"--bench-csv", GPU_FLAG_TEXT, GPU_FIELD(report.bench_csv)},
    {"--bench-label", GPU_FLAG_TEXT, GPU_FIELD(report.bench_label)},
    {"--bench-warmup", GPU_FLAG_COUNT, GPU_FIELD(report.bench_warmup)},
    {"--peak-tflops", GPU_FLAG_POSITIVE, GPU_FIELD(report.peak_tflops)},
    {"--count-syncs", GPU_FLAG_ON, GPU_FIELD(report.count_syncs)},
    {"--profile", GPU_FLAG_COUNT, GPU_FIELD(report.profile_steps)},
    {"--profile-csv", GPU_FLAG_TEXT, GPU_FIELD(report.profile_csv)},
    {"--memory", GPU_FLAG_ON, GPU_FIELD(report.memory)},
    {"--memory-limit", GPU_FLAG_POSITIVE, GPU_FIELD(run.memory_limit_gib)},
    {"--help", GPU_FLAG_ON, GPU_FIELD(help)},
    {"-h", GPU_FLAG_ON, GPU_FIELD(help)},
    {"--list-chapters", GPU_FLAG_ON, GPU_FIELD(list_chapters)},
    {"--bf16", GPU_FLAG_PRECISION, 0},
    {"--no-bf16", GPU_FLAG_PRECISION, 0},
    {"--fp32", GPU_FLAG_PRECISION, 0},
    {"--no-fp32", GPU_FLAG_PRECISION, 0},
};

static const GpuFlagSpec *find_gpu_flag(const char *arg) {
    for (size_t i = 0; i < sizeof GPU_FLAGS / sizeof GPU_FLAGS[0]; i++)
        if (!strcmp(arg, GPU_FLAGS[i].name)) return &GPU_FLAGS[i];
    return NULL;
}

static int values_taken(const GpuFlagSpec *g) {
    if (g->kind == GPU_FLAG_ON || g->kind == GPU_FLAG_PRECISION) return 0;
    return g->kind == GPU_FLAG_CHECK ? 2 : 1;
}

// The values of argv[i], a flag that takes n of them, are there and are not
// flags themselves ("--profile --memory" forgot the count).
static int check_values(int argc, char **argv, int i, int n, char *err) {
    for (int k = 1; k <= n; k++) {
        if (i + k >= argc) return fail(err, "%s: missing value (see --help)", argv[i]);
        if (!strncmp(argv[i + k], "--", 2))
            return fail(err, "%s: missing value (the next word is the flag %s)", argv[i],
                        argv[i + k]);
    }
    return 0;
}

static int parse_chapter(const char *s, int *chapter, char *err) {
    int n;
    if (parse_count("--chapter", s, &n, err) || !chapter_get(n))
        return fail(err, "--chapter: no chapter '%s' (see --list-chapters)", s);
    *chapter = n;
    return 0;
}

// Sets the flag's field from its values (argv[i + 1], argv[i + 2]).
static int apply_gpu_flag(CommandLine *cl, const GpuFlagSpec *g, char **argv, int i, char *err) {
    char *field = (char *)cl + g->offset;
    switch (g->kind) {
    case GPU_FLAG_CHAPTER: return 0;  // already read: see take_gpu_flags
    case GPU_FLAG_CHECK: cl->check_model = argv[i + 1], cl->check_state = argv[i + 2]; return 0;
    case GPU_FLAG_TEXT: *(const char **)field = argv[i + 1]; return 0;
    case GPU_FLAG_COUNT: return parse_count(g->name, argv[i + 1], (int *)field, err);
    case GPU_FLAG_POSITIVE: return parse_positive(g->name, argv[i + 1], (double *)field, err);
    case GPU_FLAG_ON: *(int *)field = 1; return 0;
    case GPU_FLAG_PRECISION:
        return fail(err, "%s: the precision is not a switch but a build: "
                         "build/train_gpt2_fp32 runs the fp32 chapters, "
                         "build/train_gpt2_bf16 the bf16 ones (see --list-chapters)", g->name);
    }
    return fail(err, "%s: unhandled kind of flag", g->name);  // not reached
}

// Takes this program's flags and the chapter switches out of argv, leaving
// the rest (flags of train_options_parse, with their values, and anything
// unknown, which it names) in argv[1 .. *argc - 1].
static int take_gpu_flags(CommandLine *cl, int *argc, char **argv, char *err) {
    // Two passes: --chapter first, so switches given anywhere override it.
    for (int i = 1; i < *argc; i++) {
        if (train_options_takes_value(argv[i])) i++;  // its value is not a flag
        else if (!strcmp(argv[i], "--chapter")) {
            if (check_values(*argc, argv, i, 1, err) ||
                parse_chapter(argv[i + 1], &cl->chapter, err))
                return -1;
            i++;
        }
    }
    cl->switches = chapter_optimizations(cl->chapter);
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        if (train_options_takes_value(a)) {  // hand it on, with its value
            argv[out++] = argv[i];
            if (i + 1 < *argc) argv[out++] = argv[++i];
            continue;
        }
        int is_switch = optimizations_apply_flag(&cl->switches, a, PRECISION_NAME, err);
        if (is_switch < 0) return -1;  // a switch of the other build
        if (is_switch) continue;
        const GpuFlagSpec *g = find_gpu_flag(a);
        if (!g) {
            argv[out++] = argv[i];
            continue;
        }
        int n = values_taken(g);
        if (check_values(*argc, argv, i, n, err) || apply_gpu_flag(cl, g, argv, i, err)) return -1;
        i += n;
    }
    *argc = out;
    return check_chapter_precision(cl->chapter, err);
}

// Everything the command line says, checked before a device is looked for,
// so that a mistake exits 2 at once on any machine, with a GPU or without:
// this program's flags, then train_options_parse's, then the files they name
// (prepare_run; check_state_files). --check-state takes switches only.
// --help and --list-chapters are answered only after the whole line is read,
// so that they hide no mistake in it; they run nothing, so the files named
// are not looked at.
static int parse_command_line(CommandLine *cl, int argc, char **argv, char *err) {
    if (take_gpu_flags(cl, &argc, argv, err)) return -1;
    if (cl->check_model && argc > 1)
        return fail(err, "--check-state MODEL STATE: only --chapter and switches go with it, "
                         "not '%s'", argv[1]);
    if (!cl->check_model && train_options_parse(&cl->run, argc, argv, err) < 0) return -1;
    // Chapter 14's --no-master-weights and --update-in-backward, and
    // chapter 15's --shard-optimizer, against the build, the switches and
    // the clipping (run_plan_build and the trainer's plan check them again).
    if (run_plan_check_master_weights(&cl->switches, !cl->run.no_master_weights, err) ||
        run_plan_check_update_in_backward(&cl->switches, cl->run.update_in_backward,
                                          cl->run.grad_accum, cl->run.grad_clip, err) ||
        run_plan_check_shard_optimizer(&cl->switches, cl->run.shard_optimizer,
                                       cl->run.offload_optimizer, err))
        return -1;
    if (cl->help || cl->list_chapters) return 0;
    if (cl->check_model) return check_state_files(cl->check_model, cl->check_state, err);
    return prepare_run(&cl->run, err);
}

static void usage_extra(void) {
    printf("GPU flags:\n"
           "  --chapter N           the optimizations of chapter N (default %d, the first\n"
           "                        chapter in %s)\n"
           "  --list-chapters       print the chapter table\n"
           "  --SWITCH, --no-SWITCH turn one optimization on or off after --chapter\n"
           "                        (there is no --bf16 or --no-bf16: this binary is built\n"
           "                        for %s and runs the chapters of that precision only;\n"
           "                        build/train_gpt2_fp32 and build/train_gpt2_bf16 are the two)\n"
           "  --check-state MODEL STATE  compare with a PyTorch-written debug state\n"
           "  --bench-csv FILE      append this run's medians to FILE\n"
           "  --bench-label NAME    the row's label (default chNN)\n"
           "  --bench-warmup N      steps left out of the medians (default 3)\n"
           "  --peak-tflops X       the GPU's bf16 dense peak, for MFU (default: detected)\n"
           "  --count-syncs         after each log line, the host-device synchronizations\n"
           "                        per step since the last one, by kind\n"
           "  --profile N           time every kernel of N steps after the warm-up and\n"
           "                        print where the device's time went, kernel by kernel\n"
           "  --profile-csv FILE    write that table as CSV too\n"
           "  --memory              print the device memory by category (parameters,\n"
           "                        gradients, optimizer state, activations tensor by tensor,\n"
           "                        FP8 operands, workspaces, the libraries' allowance), its\n"
           "                        total and the budget\n"
           "  --memory-limit GIB    the most device memory the run may take beyond its CUDA\n"
           "                        context, in GiB (fractions allowed; default: what the\n"
           "                        GPU has free, and the smaller of the two is the budget):\n"
           "                        a run whose plan is over it is refused before anything is\n"
           "                        allocated, naming the flags that make it fit; one that\n"
           "                        holds more while it runs stops (exit 1). With\n"
           "                        --fit-memory (chapter 14) a run that a higher --recompute\n"
           "                        level makes fit takes the cheapest such level instead\n"
           "several GPUs (chapter 15): one process a GPU, started by torchrun --no-python,\n"
           "mpirun, srun or make train-multi GPUS=N, whose variables name each one's rank\n"
           "  --nccl-id-file PATH   where the processes meet: rank 0 writes NCCL's id there,\n"
           "                        the others read it; a path that does not exist yet, on a\n"
           "                        filesystem every host sees (required with several)\n"
           "  --comm-timeout S      a rank that makes no progress for S seconds (another\n"
           "                        rank stopped) stops too, saying so (default 300)\n"
           "  --shard-optimizer     ZeRO-1: each rank keeps the fp32 master weights and the\n"
           "                        moments of 1/N of the parameters, and updates those;\n"
           "                        the gradients' mean goes to each part's owner only, and\n"
           "                        the new weights from every owner to every rank\n",
           chapter_first_of_precision(PRECISION_NAME), PRECISION_NAME, PRECISION_NAME);
    fputs(EXIT_STATUS_HELP, stdout);
}

// Chapter 15: this process's place among the run's, from its launcher
// (launch.h). The ranks but 0 train in silence: rank 0 prints and saves
// for the run, and the others print only their errors.
static int find_my_rank(TrainOptions *opt, char *err) {
    if (launch_from_env(&opt->launch, err)) return -1;
    if (opt->launch.world_size == 1) return 0;
    if (!opt->nccl_id_file[0])
        return fail(err, "%s started %d processes: they need --nccl-id-file PATH, where they "
                         "meet (a path that does not exist yet)", opt->launch.by,
                    opt->launch.world_size);
    if (opt->launch.rank > 0 && !freopen("/dev/null", "w", stdout))
        return fail(err, "rank %d: cannot silence its output", opt->launch.rank);
    return 0;
}

// The defaults of the GPU trainer: GPT-2 124M at B=16, T=1024.
static TrainOptions gpu_defaults(void) {
    TrainOptions o = train_options_default();
    o.model = gpt2_config_124m();
    o.B = 16;
    o.T = 1024;
    o.steps = 50;
    o.lr = (LrSchedule){.max_lr = 6e-4f, .min_lr_fraction = 0.1f, .warmup_steps = 10,
                        .total_steps = 50};
    o.val_every = 25;
    o.val_batches = 1;
    o.sample_tokens = 64;
    o.log_every = 1;
    return o;
}

// Chapter 11's --grad-accum: a step is that many (B,T) batches; chapter
// 15's ranks each take as many: the step's tokens are all of theirs.
static double tokens_per_step(const TrainOptions *opt) {
    return (double)opt->B * opt->T * opt->grad_accum * opt->launch.world_size;
}

static double median(double *x, int n) { return spread_of(x, n).median; }

// Per-step numbers kept for the medians of --bench-csv.
typedef struct {
    double *ms, *data, *fwd, *bwd, *opt;
    int n;
} StepLog;

static void write_bench_row(const ReportOptions *report, int chapter, const GpuTrainer *tr,
                            StepLog *log, double flops_tok, double peak, double peak_mem_gib) {
    int skip = report->bench_warmup < log->n ? report->bench_warmup : 0, n = log->n - skip;
    double ms = median(log->ms + skip, n);
    double tok_s = tokens_per_step(&tr->opt) / (ms / 1e3);
    double tflops = flops_tok * tok_s / 1e12;
    FILE *fp = fopen(report->bench_csv, "a");
    if (!fp) die("%s: cannot open for appending", report->bench_csv);
    char label[32];
    snprintf(label, sizeof label, "ch%02d", chapter);
    // B is the step's sequences: --grad-accum's micro-batches together.
    fprintf(fp, "%s,%d,%d,%d,%d,%.2f,%.0f,%.2f,%.4f,%.2f,%.2f,",
            report->bench_label ? report->bench_label : label, chapter,
            tr->opt.B * tr->opt.grad_accum, tr->opt.T, n, ms, tok_s, tflops, peak > 0 ? tflops / peak : 0.0, peak_mem_gib,
            median(log->data + skip, n));
    // The split by phase, empty where it was not measured (chapter 11).
    if (isnan(log->fwd[skip])) fprintf(fp, ",,\n");
    else fprintf(fp, "%.2f,%.2f,%.2f\n", median(log->fwd + skip, n), median(log->bwd + skip, n),
                 median(log->opt + skip, n));
    fclose(fp);
    printf("bench: %s: median %.2f ms/step over %d steps, %.0f tok/s -> %s\n",
           report->bench_label ? report->bench_label : label, ms, n, tok_s, report->bench_csv);
}

static void print_sample(GpuTrainer *tr, const Tokenizer *tok, int n) {
    int32_t *ids = xmalloc((size_t)(n + 1) * sizeof(int32_t));
    const int drawn = gpu_trainer_sample(tr, ids, n, tokenizer_eot(tok));
    report_sample(tok, ids + 1, drawn, n, tr->step);  // ids[0] is the prompt
    free(ids);
}

static void print_val_loss(GpuTrainer *tr) {
    char err[ERR_LEN];
    float loss;
    if (gpu_trainer_val_loss(tr, &loss, err)) die("%s", err);
    if (check_val_loss_finite(tr->step, loss, err)) die("%s", err);
    printf("step %5d | val loss %.4f\n", tr->step, loss);
}

static double device_used_gib(void) {
    size_t free_bytes, total;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
    return (double)(total - free_bytes) / (1 << 30);
}

// The most the run held on the device beyond its CUDA context, against its
// plan and its budget: tests/shell/test_gpu_memory_limit.sh reads this line.
static void print_memory_held(GpuTrainer *tr, const MemoryPlan *plan) {
    char err[ERR_LEN];
    if (gpu_trainer_check_memory(tr, err)) die("%s", err);
    const double gib = 1 << 30;
    printf("memory: the run held at most %.2f GiB beyond its CUDA context (planned %.2f GiB, "
           "budget %.2f GiB)\n", tr->memory_peak / gib, plan->total / gib, tr->budget.bytes / gib);
}

// What the log lines need between two of them.
typedef struct {
    double peak, flops_tok;  // the GPU's peak TFLOP/s (0: unknown); FLOPs per token
    double peak_mem;         // GiB in use on the device, the most seen
    GpuSyncCounts syncs;     // the synchronization counts at the last line
} Report;

// Reads the numbers of the steps since the last call and prints their lines.
// Chapters 00-02 print every log_every-th step; chapter 03 reads the steps'
// numbers only here, and prints a line for each of them.
static void report_steps(const ReportOptions *report, GpuTrainer *tr, Report *rep, StepLog *log) {
    const TrainOptions *opt = &tr->opt;
    GpuStepStats batch[GPU_MAX_PENDING_STEPS];
    int n = gpu_trainer_read_stats(tr, batch);
    GpuSyncCounts now = gpu_sync_counts(&tr->ctx);
    double used = device_used_gib();
    if (used > rep->peak_mem) rep->peak_mem = used;
    char err[ERR_LEN];
    if (gpu_trainer_check_memory(tr, err)) die("%s", err);
    for (int i = 0; i < n; i++) {
        const GpuStepStats *s = &batch[i];
        // Chapter 03 learns a step's loss only here, up to GPU_MAX_PENDING_STEPS
        // steps late: a diverged run stops here, before anything is saved.
        if (check_step_finite(s->step, s->loss, s->grad_norm, err)) die("%s", err);
        log->ms[log->n] = s->ms, log->data[log->n] = s->data_ms, log->fwd[log->n] = s->forward_ms;
        log->bwd[log->n] = s->backward_ms, log->opt[log->n] = s->optimizer_ms;
        log->n++;
        if (!tr->plan.async && s->step % opt->log_every != 0 && s->step != opt->steps)
            continue;
        double tok_s = tokens_per_step(opt) / (s->ms / 1e3);
        double tflops = rep->flops_tok * tok_s / 1e12;
        printf("step %5d/%d | loss %.4f | lr %.2e | norm %.3f | %.1f ms | %.0f tok/s | "
               "%.1f TFLOP/s",
               s->step, opt->steps, s->loss, s->lr, s->grad_norm, s->ms, tok_s, tflops);
        if (rep->peak > 0) printf(" | MFU %.1f%%", 100 * tflops / rep->peak);
        printf(" | %.1f GiB | data %.1f", rep->peak_mem, s->data_ms);
        // Chapter 11's steps are not split by phase (train_gpu.h).
        if (!isnan(s->forward_ms))
            printf(" fwd %.1f bwd %.1f opt %.1f", s->forward_ms, s->backward_ms, s->optimizer_ms);
        printf(" ms\n");
    }
    // ANCHOR: count_syncs_report
    if (report->count_syncs && n > 0) {
        GpuSyncCounts d;
        for (int k = 0; k < GPU_SYNC_KINDS; k++) d.count[k] = now.count[k] - rep->syncs.count[k];
        printf("syncs | steps %d-%d | %.1f per step |", batch[0].step, batch[n - 1].step,
               (double)gpu_sync_total(&d) / n);
        for (int k = 0; k < GPU_SYNC_KINDS; k++)
            printf(" %s %.1f%s", gpu_sync_kind_name((GpuSyncKind)k), (double)d.count[k] / n,
                   k + 1 < GPU_SYNC_KINDS ? "," : "\n");
    }
    // ANCHOR_END: count_syncs_report
    rep->syncs = now;
    fflush(stdout);
}

// Saves the model and its training state as a pair (train_common.h's
// save_run), and remembers the step.
static void save_checkpoint(GpuTrainer *tr, Report *rep, char *path, size_t cap,
                            int *saved_step) {
    char err[ERR_LEN];
    // Chapter 15: every rank holds the same model and state; rank 0 writes
    // them. With --shard-optimizer each rank holds a part of the state, and
    // every rank takes part in gathering it (gpu_trainer_save).
    if (tr->opt.launch.rank != 0) {
        if (tr->plan.shard_optimizer && gpu_trainer_save(tr, path, cap, err)) die("%s", err);
        *saved_step = tr->step;
        return;
    }
    if (gpu_trainer_save(tr, path, cap, err)) die("%s", err);
    printf("step %5d | saved %s\n", tr->step, path);
    *saved_step = tr->step;
    rep->syncs = gpu_sync_counts(&tr->ctx);  // the save's waits are not the steps'
}

// Ctrl-C or SIGTERM (stop_signal.h): the step in flight has finished. Read
// the steps not yet read (a diverged one stops the run there, unsaved), save
// when checkpoints are on, say where the run stopped, and exit 128 + signal.
static int stop_run(const ReportOptions *report, GpuTrainer *tr, Report *rep, StepLog *log,
                    char *path, size_t cap, int saved_step) {
    report_steps(report, tr, rep, log);
    if (tr->opt.checkpoint_every > 0 && saved_step != tr->step)
        save_checkpoint(tr, rep, path, cap, &saved_step);
    report_stopped_run(tr->step, tr->opt.steps, saved_step == tr->step ? path : NULL);
    return stop_exit_status();
}

// The run, from a checked command line. Returns the exit status.
static int train(const CommandLine *cl, const Tokenizer *tok) {
    const TrainOptions *opt = &cl->run;
    const ReportOptions *report = &cl->report;
    char err[ERR_LEN];
    GpuTrainer tr;
    // The trainer is built from the files the flags name (the data, the
    // checkpoint and its state) and from the switches: what it finds wrong
    // there is the input's, exit 2, as prepare_run's findings are. (A device
    // error inside exits 1, from CUDA_CHECK.)
    if (gpu_trainer_init(&tr, opt, &cl->switches, err)) return bad_input(err);
    const GPT2Config *c = &tr.model.config;
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, tr.ctx.device));
    double peak = report->peak_tflops > 0 ? report->peak_tflops : peak_bf16_tflops(prop.name);
    // Chapter 15: the tokens a second are all the ranks', and so is the peak.
    peak *= opt->launch.world_size;
    double flops_tok = flops_per_token(c, opt->T);
    const Chapter *ch = chapter_get(cl->chapter);
    printf("device: %s (compute capability %d.%d), %d SMs; %s; bf16 dense peak %s\n",
           prop.name, prop.major, prop.minor, prop.multiProcessorCount,
           tr.ctx.hopper ? "Hopper's wgmma kernels" : "the kernels of every GPU (no wgmma)",
           peak > 0 ? "known" : "unknown (MFU not shown; --peak-tflops sets it)");
    if (opt->launch.world_size > 1)
        printf("ranks: %d processes (%s), one a GPU, over NCCL; rank 0 prints and saves; B=%d "
               "is each rank's\n", opt->launch.world_size, opt->launch.by, opt->B);
    printf("chapter %02d: %s\n", ch->number, ch->title);
#ifdef PRECISION_BF16
    printf("precision: bf16 storage (%s); fp32 master weights, AdamW moments, layernorm "
           "statistics and losses\n", TRAINER_NAME);
#else
    printf("precision: fp32 (%s)\n", TRAINER_NAME);
#endif
    optimizations_print(&cl->switches);
    char count[160];
    describe_param_count(c, count, sizeof count);
    printf("model: L=%d H=%d C=%d T=%d V=%d (padded %d), %s, %.2f GiB on the device\n",
           c->num_layers, c->num_heads, c->channels, c->max_seq_len, c->vocab_size,
           c->padded_vocab_size, count, tr.model.device_bytes / (double)(1 << 30));
    printf("batch: B=%d T=%d; %.1f GFLOP per token (6N + 12LCT)\n", opt->B, opt->T,
           flops_tok / 1e9);
    if (opt->grad_accum > 1)
        printf("batch: %d micro-batches of B=%d a step (--grad-accum): %d sequences\n",
               opt->grad_accum, opt->B, opt->B * opt->grad_accum);
    if (tr.plan.recompute != RECOMPUTE_NONE)
        printf("recompute: %s: what the forward pass does not keep of a layer, the backward "
               "pass computes again (--memory lists it)\n",
               recompute_name(tr.plan.recompute));
#ifdef PRECISION_BF16
    if (!tr.plan.master_weights)
        printf("master weights: none (--no-master-weights): AdamW rounds each update into the "
               "bf16 weights stochastically\n");
#endif
    const MemoryPlan plan = memory_plan(c, opt->B, opt->T, &tr.plan);
    printf("memory: %.2f GiB planned (the model %.2f GiB); %.2f GiB were free\n",
           plan.total / (double)(1 << 30), plan.model / (double)(1 << 30),
           tr.budget.free_bytes / (double)(1 << 30));
    if (tr.budget.limit_bytes)
        printf("memory: a budget of %.2f GiB (--memory-limit %g)\n",
               tr.budget.bytes / (double)(1 << 30), opt->memory_limit_gib);
    // Everything is allocated: the run holds no more than its budget (memory_plan.h).
    if (gpu_trainer_check_memory(&tr, err)) die("%s", err);
    if (report->memory) gpt2_gpu_print_memory(&tr.model, &tr.budget, stdout);
    // --profile: the steps after the warm-up, kernel by kernel (profiler.h).
    GpuProfiler *prof = NULL;
    const int profile_from = tr.step + report->bench_warmup;
    int profile_to = profile_from + report->profile_steps;
    if (profile_to > opt->steps) profile_to = opt->steps;
    if (report->profile_steps > 0 && profile_to > profile_from)
        prof = gpu_profiler_new(PROFILE_MARKS_PER_STEP * (profile_to - profile_from));

    StepLog log = {0};
    int steps = opt->steps - tr.step;
    double *bufs = xcalloc(5 * (size_t)(steps > 0 ? steps : 1), sizeof(double));
    log.ms = bufs, log.data = bufs + steps, log.fwd = bufs + 2 * steps;
    log.bwd = bufs + 3 * steps, log.opt = bufs + 4 * steps;
    Report rep = {.peak = peak, .flops_tok = flops_tok, .syncs = gpu_sync_counts(&tr.ctx)};
    char path[1024] = "";
    int saved_step = -1;
    while (tr.step < opt->steps) {
        if (opt->val_every > 0 && tr.step % opt->val_every == 0) {
            print_val_loss(&tr);
            rep.syncs = gpu_sync_counts(&tr.ctx);  // the validation's waits are not the steps'
        }
        GpuStepStats s;
        if (prof && tr.step == profile_from) gpu_profiler_start(prof, &tr.ctx);
        if (gpu_trainer_step(&tr, &s, err)) die("%s", err);
        if (prof && tr.step == profile_to) gpu_profiler_stop(prof, profile_to - profile_from);
        // Chapters 00-02 know the step's loss now: a diverged step has ruined
        // the weights, so stop at once and save nothing. (Chapter 03 checks
        // the numbers when they arrive, in report_steps.)
        if (!tr.plan.async && check_step_finite(s.step, s.loss, s.grad_norm, err))
            die("%s", err);
        // The steps' numbers are read at each log line. In chapter 03 that is
        // where the host waits for the device, so it is also done before
        // anything else that waits (validation, checkpoints), and when the
        // trainer holds as many unread steps as it can.
        int save = opt->checkpoint_every > 0 && tr.step % opt->checkpoint_every == 0;
        if (tr.step % opt->log_every == 0 || tr.step == opt->steps ||
            (opt->val_every > 0 && tr.step % opt->val_every == 0) || save ||
            gpu_trainer_pending(&tr) == GPU_MAX_PENDING_STEPS)
            report_steps(report, &tr, &rep, &log);
        if (save) save_checkpoint(&tr, &rep, path, sizeof path, &saved_step);
        if (stop_requested()) break;
    }
    if (stop_requested()) return stop_run(report, &tr, &rep, &log, path, sizeof path, saved_step);
    if (opt->checkpoint_every > 0 && saved_step != tr.step)
        save_checkpoint(&tr, &rep, path, sizeof path, &saved_step);
    double peak_mem = rep.peak_mem;
    if (opt->val_every > 0) print_val_loss(&tr);
    if (report->bench_csv && log.n > 0 && opt->launch.rank == 0)
        write_bench_row(report, cl->chapter, &tr, &log, flops_tok, peak, peak_mem);
    if (prof) {
        if (gpu_profiler_report(prof, stdout, report->profile_csv, err)) die("%s", err);
        gpu_profiler_free(prof);
    }
    // Chapter 15: rank 0 samples for the run (the other ranks print nothing).
    if (tok && opt->launch.rank == 0) print_sample(&tr, tok, opt->sample_tokens);
    print_memory_held(&tr, &plan);
    free(bufs);
    gpu_trainer_free(&tr);
    // Every step is done and saved, but a Ctrl-C after the last one (in the
    // sample, say) still gives the signal's status, not 0.
    return stop_exit_status();
}

int main(int argc, char **argv) {
    line_buffered_stdout();
    char err[ERR_LEN];
    CommandLine cl = {.run = gpu_defaults(),
                      .chapter = chapter_first_of_precision(PRECISION_NAME),
                      .report = {.bench_warmup = 3}};
    if (parse_command_line(&cl, argc, argv, err) || find_my_rank(&cl.run, err))
        return bad_input(err);
    if (cl.help) {
        TrainOptions defaults = gpu_defaults();
        train_options_usage(argv[0], &defaults);
        usage_extra();
        return 0;
    }
    if (cl.list_chapters) {
        chapters_print_table();
        return 0;
    }
    Tokenizer *tok = NULL;
    if (!cl.check_model && load_sample_tokenizer(&cl.run, &tok, err)) return bad_input(err);
    if (gpu_device_count() == 0) {
        fprintf(stderr, "error: no CUDA device: %s needs an NVIDIA GPU and its driver "
                        "(build/train_gpt2_cpu trains on the CPU)\n", argv[0]);
        if (tok) tokenizer_free(tok);
        return EXIT_RUN_FAILED;
    }
    if (cl.check_model) return check_state_run(cl.check_model, cl.check_state, &cl.switches);
    stop_signals_install();
    int status = train(&cl, tok);
    if (tok) tokenizer_free(tok);
    return status;
}
