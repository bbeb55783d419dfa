// adamw_schedule.h: chapter 11's table of the values each AdamW step takes
// from the host: its learning rate and the two bias corrections. Plain C: the
// table is host arithmetic, made once before the run, and chapter 11's
// exercise.
//
// Through chapter 10 the host computes these three floats as a step is
// launched and passes them to adamw_begin_step_v2 as arguments. A CUDA graph
// replays its launches with the arguments they were captured with, so chapter
// 11 computes every step's values before the first step, copies the table to
// the device once, and adamw_begin_step_v3 reads entry t - 1 of it, t being a
// counter the device advances itself (kernels/adamw.h):
//
//   step t:        1        2        3      ...   steps
//   entry:         0        1        2      ...   steps - 1
//   lr:            lr_at_step(schedule, t - 1)    (optimizer.h: steps 0-based)
//   correction1:   adamw_bias_correction(beta1, t)
//   correction2:   adamw_bias_correction(beta2, t)
//
// They are the functions the host calls in chapters 00-10, so each entry has
// the bits of the arguments chapter 10 would have passed at that step.
#ifndef ADAMW_SCHEDULE_H
#define ADAMW_SCHEDULE_H

#include "optim/optimizer.h"

typedef struct {
    float lr;
    float correction1, correction2;
} AdamWScheduleEntry;

// Fills table[0 .. steps) as above; steps <= 0 writes nothing.
void adamw_schedule_build(AdamWScheduleEntry *table, int steps, const LrSchedule *lr,
                          const AdamWConfig *cfg);

#endif
