// gpt2_cpu_f64.c: the CPU reference compiled with REAL = double (see gpt2_cpu.h).
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <tgmath.h>

#include "model/gpt2_cpu.h"
#include "util/util.h"

#define REAL double
#define FN(name) name##_f64
#include "model/gpt2_cpu_layers.inc"
#include "model/gpt2_cpu_model.inc"
