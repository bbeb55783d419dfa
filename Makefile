# GPT-2 training, made fast one chapter at a time.
#
#   make run     install what is missing, fetch the data, train (CPU for now)
#   make test    install what is missing, fetch the data, run every test
#
# Everything is built under build/; data goes to data/. See README.md.

SHELL   := /bin/bash
CC      ?= gcc
WERROR  ?= -Werror
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -Wall -Wextra -Wshadow $(WERROR) -fopenmp -Icommon -MMD -MP \
           -I$(CUDA_HOME)/include -Ikernels
LDLIBS  := -lutf8proc -lm -fopenmp

BUILD := build
DATA  := data
RAW   := $(DATA)/raw

# common/: every .c file is library code, except the programs' mains (train_gpt2*.c).
COMMON_MAINS := $(wildcard common/train_gpt2*.c)
COMMON_SRCS  := $(filter-out $(COMMON_MAINS),$(wildcard common/*.c))
COMMON_OBJS  := $(COMMON_SRCS:%.c=$(BUILD)/obj/%.o)
LIBCOMMON    := $(BUILD)/libcommon.a

# tools/: each .c file is one program, build/<name>.
TOOL_SRCS := $(wildcard tools/*.c)
TOOLS     := $(TOOL_SRCS:tools/%.c=$(BUILD)/%)

PROGRAMS := $(BUILD)/train_gpt2_cpu $(BUILD)/train_gpt2_fp32 $(TOOLS)

# kernels/: CUDA, compiled by nvcc for Hopper (sm_90) into one library that C
# code reaches through the extern "C" launchers declared in kernels/*.h.
CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(CUDA_HOME)/bin/nvcc
CUDA_ARCH ?= -gencode arch=compute_90,code=sm_90
NVCCFLAGS ?= -O3 -g -lineinfo
NVCCFLAGS += $(CUDA_ARCH) -std=c++17 -Icommon -Ikernels -Xcompiler -Wall,-Wextra \
             --Werror all-warnings -MMD -MP
KERNEL_SRCS := $(wildcard kernels/*.cu)
KERNEL_OBJS := $(KERNEL_SRCS:%.cu=$(BUILD)/obj/%.o)
LIBKERNELS  := $(BUILD)/libkernels.a
CUDA_LIBS   := -L$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lcudart -lstdc++ -ldl -lpthread -lrt

# tests/gpu/: Criterion tests that call the kernels; they skip without a GPU.
GPU_TEST_SRCS := $(wildcard tests/gpu/*.c)
GPU_TEST_OBJS := $(GPU_TEST_SRCS:%.c=$(BUILD)/obj/%.o)
GPU_TESTS     := $(BUILD)/tests/gpu_tests

# tests/cpu/: every file is linked into one Criterion binary.
CPU_TEST_SRCS := $(wildcard tests/cpu/*.c)
CPU_TEST_OBJS := $(CPU_TEST_SRCS:%.c=$(BUILD)/obj/%.o)
CPU_TESTS     := $(BUILD)/tests/cpu_tests

.PHONY: all deps data run test test-cpu test-gpu bench-tokenizer clean
all: $(PROGRAMS)

deps:
	@bash tools/deps.sh

# ---- build ---------------------------------------------------------------
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(LIBCOMMON): $(COMMON_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^

$(BUILD)/train_gpt2_cpu: $(BUILD)/obj/common/train_gpt2_cpu.o $(LIBCOMMON)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# The GPU trainer, built for fp32 storage (chapters 00-01).
# libcommon and libkernels call each other: link them as a group.
$(BUILD)/train_gpt2_fp32: $(BUILD)/obj/common/train_gpt2.o $(LIBKERNELS) $(LIBCOMMON)
	$(CC) $(CFLAGS) -Wl,--start-group $^ -Wl,--end-group -o $@ $(CUDA_LIBS) $(LDLIBS)

$(BUILD)/%: $(BUILD)/obj/tools/%.o $(LIBCOMMON)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/obj/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(LIBKERNELS): $(KERNEL_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^

$(GPU_TESTS): $(GPU_TEST_OBJS) $(LIBKERNELS) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Wl,--start-group $^ -Wl,--end-group -o $@ -lcriterion $(CUDA_LIBS) $(LDLIBS)

$(CPU_TESTS): $(CPU_TEST_OBJS) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ -lcriterion $(LDLIBS)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# ---- data ----------------------------------------------------------------
# Raw files come from $DATA_MIRROR when set, else from their canonical
# addresses; tools/fetch_data.sh checks their sha256 either way.
RAW_FILES := $(RAW)/tinyshakespeare.txt $(RAW)/gpt2_encoder.json $(RAW)/gpt2_vocab.bpe
SHAKESPEARE := $(DATA)/tinyshakespeare/train.bin $(DATA)/tinyshakespeare/val.bin

$(RAW_FILES) &: tools/fetch_data.sh tools/data.sha256
	@bash tools/fetch_data.sh $(RAW)

$(SHAKESPEARE) &: $(RAW_FILES) $(BUILD)/prepare_data
	$(BUILD)/prepare_data --text $(RAW)/tinyshakespeare.txt \
	  --encoder $(RAW)/gpt2_encoder.json --bpe $(RAW)/gpt2_vocab.bpe \
	  --out $(DATA)/tinyshakespeare

data: deps
	@$(MAKE) --no-print-directory $(SHAKESPEARE)

# ---- run -----------------------------------------------------------------
run: deps
	@$(MAKE) --no-print-directory $(SHAKESPEARE) $(BUILD)/train_gpt2_cpu
	$(BUILD)/train_gpt2_cpu --data $(DATA)/tinyshakespeare \
	  --encoder $(RAW)/gpt2_encoder.json --bpe $(RAW)/gpt2_vocab.bpe

# ---- tests ---------------------------------------------------------------
# On a machine without a GPU the GPU tests still build (CUDA that does not
# compile fails here) and report themselves skipped.
test: deps
	@$(MAKE) --no-print-directory test-cpu
	@if [ -n "$(GPU_TEST_SRCS)" ]; then $(MAKE) --no-print-directory gpu-tests-run; fi

# Criterion's summary does not count skipped tests, so list them: without a
# GPU every GPU test must say SKIP, never pass in silence.
gpu-tests-run: $(GPU_TESTS)
	set -o pipefail; $(GPU_TESTS) --jobs 1 --verbose 2>&1 | grep -v '^\[RUN \]'

# On a GPU machine: every GPU test, then compute-sanitizer over the kernel tests.
test-gpu: $(GPU_TESTS)
	$(GPU_TESTS) --jobs 1
	compute-sanitizer --tool memcheck --error-exitcode 1 $(GPU_TESTS) --jobs 1 --filter 'kernels*/*'
	compute-sanitizer --tool racecheck --error-exitcode 1 $(GPU_TESTS) --jobs 1 --filter 'kernels*/*'

test-cpu: $(CPU_TESTS) $(PROGRAMS) $(SHAKESPEARE)
	@# Criterion runs tests in parallel; one OpenMP thread each avoids oversubscription.
	OMP_NUM_THREADS=1 DATA_DIR=$(DATA) $(CPU_TESTS) --jobs 2

# Tokenizer throughput on TinyShakespeare (target: >= 5 MB/s on one core).
bench-tokenizer: $(BUILD)/tokenizer $(RAW_FILES)
	$(BUILD)/tokenizer bench $(RAW)/tinyshakespeare.txt \
	  --encoder $(RAW)/gpt2_encoder.json --bpe $(RAW)/gpt2_vocab.bpe

clean:
	rm -rf $(BUILD)
.SECONDARY:
