// train_options.h: the trainer's command line, parsed into one struct.
//
// Every flag has a default, so `train_gpt2_cpu --data data/tinyshakespeare`
// trains. Sizes of the model are flags too; --model picks a preset first and
// the size flags after it override single fields.
#ifndef TRAIN_OPTIONS_H
#define TRAIN_OPTIONS_H

#include <stdint.h>

#include "gpt2_config.h"
#include "optimizer.h"

typedef struct {
    // data
    char train_pattern[512], val_pattern[512];  // shard globs
    char encoder_path[512], bpe_path[512];      // for decoding samples
    // model
    GPT2Config model;
    char init_from[512];     // start from this checkpoint instead of random init
    // batch
    int B, T;
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
    char resume_from[512];   // a checkpoint directory + step: DIR/model_NNNNNN.bin
    int log_every;
} TrainOptions;

// The defaults: a small model that trains on a CPU in minutes.
TrainOptions train_options_default(void);

// Parses argv over the defaults. Returns 0; 1 when --help was asked (usage is
// printed); -1 with a reason in err naming the flag and what is wrong.
int train_options_parse(TrainOptions *o, int argc, char **argv, char *err);

void train_options_usage(const char *program);

#endif
