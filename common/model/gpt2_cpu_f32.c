// gpt2_cpu_f32.c: the CPU reference compiled with REAL = float (see gpt2_cpu.h).
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <tgmath.h>

#include "model/gpt2_cpu.h"
#include "util/util.h"

#define REAL float
#define FN(name) name
#include "model/gpt2_cpu_layers.inc"
#include "model/gpt2_cpu_model.inc"
