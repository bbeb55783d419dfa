// train_options.h: the trainer's command line, parsed into one struct.
//
// Every flag has a default, so `train_gpt2_cpu --data data/tinyshakespeare`
// trains. Sizes of the model are flags too; --model picks a preset first and
// the size flags after it override single fields.
#ifndef TRAIN_OPTIONS_H
#define TRAIN_OPTIONS_H

#include <stdint.h>

#include "model/gpt2_config.h"
#include "optim/optimizer.h"
#include "train/launch.h"
#include "train/recompute.h"

typedef struct {
    // data
    char train_pattern[512], val_pattern[512];  // shard globs
    char encoder_path[512], bpe_path[512];      // for decoding samples
    // model
    GPT2Config model;
    char init_from[512];     // start from this checkpoint instead of random init
    int data_delay_us;       // a pause after each training batch is read: slow storage, simulated
    int data_threads;        // chapter 08's worker threads (--data-workers)
    // batch
    int B, T;
    int grad_accum;          // micro-batches of (B,T) summed into each step (GPU, chapter 11)
    Recompute recompute;     // activations the backward pass computes again (GPU, chapter 14)
    int no_master_weights;   // no fp32 master copy; stochastic rounding (GPU bf16, chapter 14)
    int update_in_backward;  // each layer updated in the backward pass (GPU, chapter 14)
    int offload_optimizer;   // the layers' moments in host memory (GPU, chapter 14)
    int shard_optimizer;     // each rank keeps 1/N of the optimizer state (GPU, chapter 15)
    // device memory
    double memory_limit_gib; // GPU: --memory-limit, the most the run may plan (memory_budget.h);
                             // 0: what the GPU has free
    // optimization
    int steps;               // total steps; the schedule's length
    LrSchedule lr;
    AdamWConfig adamw;
    float grad_clip;         // max global gradient norm; <= 0: no clipping
    uint64_t seed;
    // evaluation, sampling, checkpoints
    int val_every, val_batches;
    int sample_every, sample_tokens;
    int checkpoint_every;
    char checkpoint_dir[512];
    char resume_from[512];   // DIR/model_NNNNNN.bin, or a DIR (prepare_run resolves it)
    int log_every;
    // several GPUs (chapter 15)
    Launch launch;           // this process's rank, world and GPU: the launcher's (launch.h)
    char nccl_id_file[512];  // --nccl-id-file: where the ranks meet (rendezvous.h)
    float comm_timeout_s;    // --comm-timeout: the most seconds a rank waits without progress
    unsigned given;          // which flags the command line gave: GIVEN_* bits
} TrainOptions;

// The flags whose use train_options_parse records in TrainOptions.given: a
// model read with --init-from or --resume brings its own shape (and a resumed
// state its own B and T), and a flag that was given must agree with it
// (prepare_run in train_common.h checks), where a default simply gives way.
enum {
    GIVEN_LAYERS = 1u << 0,       // --layers, or --model
    GIVEN_HEADS = 1u << 1,        // --heads, or --model
    GIVEN_CHANNELS = 1u << 2,     // --channels, or --model
    GIVEN_MAX_SEQ_LEN = 1u << 3,  // --max-seq-len, or --model
    GIVEN_PADDED_VOCAB = 1u << 4, // --padded-vocab
    GIVEN_TIED = 1u << 5,         // --tied or --untied
    GIVEN_BATCH = 1u << 6,        // -b, --batch
    GIVEN_SEQ_LEN = 1u << 7,      // -t, --seq-len
    GIVEN_STEPS = 1u << 8,        // --steps
    GIVEN_CHECKPOINT_DIR = 1u << 9, // --checkpoint-dir
};

// The most micro-batches --grad-accum takes.
#define GRAD_ACCUM_MAX 1024

// The defaults: a small model that trains on a CPU in minutes.
TrainOptions train_options_default(void);

// Parses argv over the defaults. Returns 0; 1 when --help was asked and the
// rest of the line is good (the program prints train_options_usage with its
// defaults); -1 with a reason in err naming the flag and what is wrong: an
// unknown flag, a word that is not a flag, a flag without its value, a value
// that is not a number in the flag's range, flags that contradict each other.
// What needs the files the flags name (a checkpoint's shape, a resumed
// state's step) is checked after, by prepare_run (train_common.h).
int train_options_parse(TrainOptions *o, int argc, char **argv, char *err);

// Prints the flags, each with its default as `defaults` has it: the program's
// own (the CPU trainer's train_options_default, the GPU trainer's 124M).
void train_options_usage(const char *program, const TrainOptions *defaults);

// 1 when arg is one of train_options_parse's flags that takes a value, else 0:
// for a program that reads flags of its own first (the GPU trainer) and must
// hand such a flag on with its value, unread.
int train_options_takes_value(const char *arg);

// The value parsers behind every flag, for programs with flags of their own.
// Each accepts the whole string s as a number within [min, max], or fails
// naming the flag: "--steps: expected an integer from 1 to 1000000000, got 'ten'".
int parse_int(const char *flag, const char *s, long min, long max, int *out, char *err);
int parse_double(const char *flag, const char *s, double min, double max, double *out, char *err);
int parse_float(const char *flag, const char *s, double min, double max, float *out, char *err);

#endif
