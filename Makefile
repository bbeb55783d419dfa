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

# Without CUDA: where there is no nvcc (try it: make NVCC=/nonexistent test),
# everything CUDA is left out: the kernels, the GPU trainers and tests, and
# the host files that include CUDA's headers (CUDA_HOST_SRCS). The CPU
# trainer, the tools and the CPU tests build and run alone; `make test` and
# `make run` say that the GPU parts were skipped, and a target that needs
# nvcc says so (NVCC_CHECK).
CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(CUDA_HOME)/bin/nvcc
HAVE_NVCC := $(shell command -v $(NVCC) >/dev/null 2>&1 && echo 1)
CUDA_HOST_SRCS := $(wildcard common/gpu/*.c) common/data/data_workers.c common/train/train_gpu.c \
                  $(wildcard solutions/03_sync_avoidance/loss_readback.c \
                             exercises/03_sync_avoidance/loss_readback.c)
without_cuda = $(if $(HAVE_NVCC),$(1),$(filter-out $(CUDA_HOST_SRCS),$(1)))
GPU_SKIPPED := nvcc not found ($(NVCC)): the CUDA code, the GPU trainers and the GPU tests \
               were SKIPPED (set CUDA_HOME or NVCC to build them)
define NVCC_CHECK
	@if [ "$(HAVE_NVCC)" != 1 ]; then \
	  echo "$<: needs nvcc, and there is none at $(NVCC): set CUDA_HOME or NVCC" \
	       "(make run and make test work without it, on the CPU)" >&2; exit 1; fi
endef

# common/: the host code, a folder per concern (model, optim, files, data,
# gpu, train, util; README.md says what each holds). Every .c file is
# library code, except the programs' mains (train/train_gpt2*.c).
COMMON_MAINS := $(wildcard common/train/train_gpt2*.c)
COMMON_SRCS  := $(call without_cuda,$(filter-out $(COMMON_MAINS),$(wildcard common/*/*.c)))
COMMON_OBJS  := $(COMMON_SRCS:%.c=$(BUILD)/obj/%.o)
LIBCOMMON    := $(BUILD)/libcommon.a

# tools/: each .c file is one program, build/<name>.
TOOL_SRCS := $(wildcard tools/*.c)
TOOLS     := $(TOOL_SRCS:tools/%.c=$(BUILD)/%)

PROGRAMS := $(BUILD)/train_gpt2_cpu $(if $(HAVE_NVCC),$(BUILD)/train_gpt2_fp32 $(BUILD)/train_gpt2_bf16) \
            $(TOOLS)

# kernels/: CUDA, compiled by nvcc into one library that C code reaches
# through the extern "C" launchers declared in kernels/*.h, for one GPU
# architecture: GPU_ARCH, the compute capability without its dot (80: A100,
# 86: RTX 3090, 89: L4 and RTX 4090, 90: H100 and H200, 100 and 120:
# Blackwell). By default the GPU present, as nvidia-smi reports it; without
# one, 90. Every chapter runs from 80 on (bf16 and TF32 need it). The
# machine code is for that GPU alone, with its PTX beside it, which the
# driver compiles for a newer GPU at the first run.
#   make GPU_ARCH=80     for an A100, on a machine without one
GPU_PRESENT := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | \
                 head -1 | tr -d '. ')
GPU_ARCH  ?= $(or $(GPU_PRESENT),90)
CUDA_ARCH ?= -gencode arch=compute_$(GPU_ARCH),code=[sm_$(GPU_ARCH),compute_$(GPU_ARCH)]
NVCCFLAGS ?= -O3 -g -lineinfo
NVCCFLAGS += $(CUDA_ARCH) -DGPU_BUILD_ARCH=$(GPU_ARCH) -std=c++17 -Icommon -Ikernels \
             -Xcompiler -Wall,-Wextra --Werror all-warnings -MMD -MP
KERNEL_SRCS := $(wildcard kernels/*.cu)
# Hopper's warpgroup products (wgmma) exist on sm_90a only, code that runs on
# compute capability 9.0 and on no other: for GPU_ARCH=90 the files that
# use them (and the TMA) are built for it, with WITH_WGMMA defined, and the
# context tells the launchers whether the GPU present runs them
# (gpu_context.h: hopper). Elsewhere their launchers are stubs that say what
# they need.
ifeq ($(GPU_ARCH),90)
HOPPER_ARCH := -gencode arch=compute_90a,code=sm_90a
NVCCFLAGS += -DWITH_WGMMA
HOPPER_OBJS := $(foreach f,attention_flash_hopper attention_flash_ws attention_flash_wide \
  attention_flash_bwd gemm_steps,\
  $(BUILD)/obj/kernels/$(f).o $(BUILD)/obj_bf16/kernels/$(f).o)
$(HOPPER_OBJS): CUDA_ARCH := $(HOPPER_ARCH)
endif
# The architecture the objects were built for: a new GPU_ARCH rebuilds them
# (every .o of nvcc depends on this stamp, as the exercises' archives do on
# theirs).
ARCH_STAMP := $(BUILD)/gpu_arch
$(shell mkdir -p $(BUILD) && [ "$$(cat $(ARCH_STAMP) 2>/dev/null)" = "$(GPU_ARCH)" ] \
        || echo "$(GPU_ARCH)" > $(ARCH_STAMP))
$(ARCH_STAMP): ;
KERNEL_OBJS := $(KERNEL_SRCS:%.cu=$(BUILD)/obj/%.o)
LIBKERNELS  := $(BUILD)/libkernels.a
CUDA_LIBS   := -L$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lcudart -lstdc++ -ldl -lpthread -lrt
# ANCHOR: nccl_detection
# NCCL (chapter 15, several GPUs): the toolkit's copy where it has one, else
# the nvidia-nccl-cu13 wheel's, which PyTorch installs (found through
# python3). Without either the trainers are built for one GPU, and say so
# when a launcher asks for more (gpu_comm.h).
NCCL_PY   := $(shell python3 -c 'import nvidia.nccl as n; print(n.__path__[0])' 2>/dev/null)
NCCL_HOME ?= $(firstword $(foreach d,$(CUDA_HOME) $(NCCL_PY),$(if $(wildcard $(d)/include/nccl.h),$(d))))
NCCL_LIB  := $(firstword $(wildcard $(NCCL_HOME)/lib64/libnccl.so.2 $(NCCL_HOME)/lib/libnccl.so.2))
ifneq ($(NCCL_LIB),)
CFLAGS    += -DWITH_NCCL -I$(NCCL_HOME)/include
CUDA_LIBS += -L$(dir $(NCCL_LIB)) -l:libnccl.so.2 -Wl,-rpath,$(dir $(NCCL_LIB))
endif
# ANCHOR_END: nccl_detection

# tests/gpu/: Criterion tests that call the kernels; they skip without a GPU.
# Every file is built into both builds' test binaries, but *_bf16.c files
# into the bf16 one only and *_fp32.c files into the fp32 one only (the bf16
# block below).
GPU_TEST_SRCS := $(filter-out %_bf16.c,$(wildcard tests/gpu/*.c))
GPU_TEST_OBJS := $(GPU_TEST_SRCS:%.c=$(BUILD)/obj/%.o)
GPU_TESTS     := $(BUILD)/tests/gpu_tests

# tests/cpu/: every file is linked into one Criterion binary.
CPU_TEST_SRCS := $(wildcard tests/cpu/*.c)
CPU_TEST_OBJS := $(CPU_TEST_SRCS:%.c=$(BUILD)/obj/%.o)
CPU_TESTS     := $(BUILD)/tests/cpu_tests

.PHONY: all deps deps-run data run train train-multi bench test test-cpu test-gpu test-shell gpu-tests-run bench-tokenizer clean
all: $(PROGRAMS)

deps:
	@bash tools/deps.sh

# What training needs, and no more: make run and make data.
deps-run:
	@bash tools/deps.sh run

# ---- build ---------------------------------------------------------------
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(LIBCOMMON): $(COMMON_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^

# (With the C exercises' archive, added below: chapter 10's block
# quantization is one, and the CPU trainer reads 8-bit checkpoints through it.)
$(BUILD)/train_gpt2_cpu: $(BUILD)/obj/common/train/train_gpt2_cpu.o $(LIBCOMMON)
	$(CC) $(CFLAGS) -Wl,--start-group $^ -Wl,--end-group -o $@ $(LDLIBS)

# The GPU trainer, built for fp32 storage (chapters 00-01).
# libcommon and libkernels call each other: link them as a group.
$(BUILD)/train_gpt2_fp32: $(BUILD)/obj/common/train/train_gpt2.o $(LIBKERNELS) $(LIBCOMMON)
	$(CC) $(CFLAGS) -Wl,--start-group $^ -Wl,--end-group -o $@ $(CUDA_LIBS) $(LDLIBS)

$(BUILD)/%: $(BUILD)/obj/tools/%.o $(LIBCOMMON)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/obj/%.o: %.cu $(ARCH_STAMP)
	$(NVCC_CHECK)
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

# make check-gpu-archs: the build for each GPU_ARCH of GPU_ARCHS_CHECKED
# (the A100's 80 and the L4's and RTX 4090's 89 by default) compiles and
# links, each in a folder of its own, build/smNN/: no GPU needed (CI runs it).
# The Hopper build is the default one, GPU_ARCH=90, where no GPU is present.
GPU_ARCHS_CHECKED ?= 80 89
.PHONY: check-gpu-archs
check-gpu-archs:
	@if [ "$(HAVE_NVCC)" != 1 ]; then echo "check-gpu-archs: $(GPU_SKIPPED)"; exit 0; fi; \
	for a in $(GPU_ARCHS_CHECKED); do \
	  $(MAKE) --no-print-directory BUILD=$(BUILD)/sm$$a GPU_ARCH=$$a \
	    $(BUILD)/sm$$a/train_gpt2_fp32 $(BUILD)/sm$$a/train_gpt2_bf16 >$(BUILD)/sm$$a.log 2>&1 \
	    || { tail -20 $(BUILD)/sm$$a.log; echo "check-gpu-archs: sm_$$a: FAILED"; exit 1; }; \
	  echo "check-gpu-archs: sm_$$a: both trainers compile and link"; done

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

data: deps-run
	@$(MAKE) --no-print-directory $(SHAKESPEARE)

# ---- run -----------------------------------------------------------------
# The GPU trainer where a GPU is found, else the CPU trainer, with a notice.
HAVE_GPU = $(shell nvidia-smi -L >/dev/null 2>&1 && echo 1)

run: deps-run
	@$(MAKE) --no-print-directory $(SHAKESPEARE) $(PROGRAMS)
	@if [ "$(HAVE_NVCC)" != 1 ]; then \
	  echo "run: $(GPU_SKIPPED)"; \
	  echo "run: training the small model on the CPU instead"; \
	  $(BUILD)/train_gpt2_cpu --data $(DATA)/tinyshakespeare \
	    --encoder $(RAW)/gpt2_encoder.json --bpe $(RAW)/gpt2_vocab.bpe; \
	elif [ "$(HAVE_GPU)" = 1 ]; then \
	  last=$$($(BUILD)/train_gpt2_fp32 --list-chapters | awk 'END {print $$1}'); \
	  $(MAKE) --no-print-directory train CH=$$last; \
	else \
	  echo "run: no GPU found: training the small model on the CPU instead"; \
	  $(BUILD)/train_gpt2_cpu --data $(DATA)/tinyshakespeare \
	    --encoder $(RAW)/gpt2_encoder.json --bpe $(RAW)/gpt2_vocab.bpe; \
	fi

# ANCHOR: make_train
# make train CH=N: chapter N's trainer on TinyShakespeare (ARGS adds flags).
# The chapter table (--list-chapters) says which precision, so which of
# build/train_gpt2_fp32 and build/train_gpt2_bf16, runs chapter N.
CH ?= 0
train: $(SHAKESPEARE) $(BUILD)/train_gpt2_fp32 $(BUILD)/train_gpt2_bf16
	@prec=$$($(BUILD)/train_gpt2_fp32 --list-chapters | awk -v ch='$(CH)' \
	         'NR > 1 && ch ~ /^[0-9]+$$/ && $$1 + 0 == ch + 0 {print $$2}'); \
	set -x; $(BUILD)/train_gpt2_$${prec:-fp32} --chapter $(CH) --data $(DATA)/tinyshakespeare \
	  --encoder $(RAW)/gpt2_encoder.json --bpe $(RAW)/gpt2_vocab.bpe $(ARGS)
# ANCHOR_END: make_train

# ANCHOR: make_train_multi
# make train-multi GPUS=N CH=M: chapter M on N GPUs of this host, one process
# a GPU (tools/launch_local.sh, or `torchrun --no-python --nproc-per-node N`
# with --nccl-id-file: chapter 15). ARGS as for make train; -b is per GPU.
GPUS ?= 2
train-multi: $(SHAKESPEARE) $(BUILD)/train_gpt2_fp32 $(BUILD)/train_gpt2_bf16
	@prec=$$($(BUILD)/train_gpt2_fp32 --list-chapters | awk -v ch='$(CH)' \
	         'NR > 1 && ch ~ /^[0-9]+$$/ && $$1 + 0 == ch + 0 {print $$2}'); \
	set -x; bash tools/launch_local.sh $(GPUS) $(BUILD)/train_gpt2_$${prec:-fp32} \
	  --chapter $(CH) --data $(DATA)/tinyshakespeare --encoder $(RAW)/gpt2_encoder.json \
	  --bpe $(RAW)/gpt2_vocab.bpe $(ARGS)
# ANCHOR_END: make_train_multi

# Every chapter at the same settings, PyTorch beside them: results/<gpu>/.
bench: $(BUILD)/train_gpt2_fp32 $(BUILD)/train_gpt2_bf16 $(SHAKESPEARE)
	bash tools/bench.sh

# ---- tests ---------------------------------------------------------------
# On a machine without a GPU the GPU tests still build (CUDA that does not
# compile fails here) and report themselves skipped.
# The GPU tests first: without a GPU they all skip, and the CPU tests' summary
# (what actually ran) is the last word.
# Without nvcc, the CPU tests alone, and a notice, first and last.
test: deps
ifeq ($(HAVE_NVCC),1)
	@if [ -n "$(GPU_TEST_SRCS)" ]; then $(MAKE) --no-print-directory gpu-tests-run; fi
else
	@echo "test: $(GPU_SKIPPED)"
endif
	@$(MAKE) --no-print-directory test-shell
	@$(MAKE) --no-print-directory test-cpu
ifneq ($(HAVE_NVCC),1)
	@echo "test: the CPU tests ran; $(GPU_SKIPPED)"
endif

# Criterion's summary does not count skipped tests, so list them: without a
# GPU every GPU test must say SKIP, never pass in silence.
gpu-tests-run: $(GPU_TESTS)
	@for t in $(GPU_TESTS) $(GPU_TESTS_BF16); do \
	  echo "$$t --jobs 1 --verbose"; \
	  set -o pipefail; $$t --jobs 1 --verbose 2>&1 | tee $(BUILD)/tests/last.log | grep -v '^\[RUN \]' \
	    || exit 1; \
	  echo "$$t: $$(grep -c '^\[SKIP\]' $(BUILD)/tests/last.log) tests skipped" \
	       "(Criterion's synthesis above counts only the tests that ran)"; \
	done

# On a GPU machine: every GPU test of both builds, then compute-sanitizer's
# memcheck and racecheck over both builds' kernel and exercise tests.
# racecheck does not model the waits inside cuBLASLt's own Hopper kernels
# (their TMA copies and barriers) and reports hazards there; chapter 11's
# autotune test runs eight of those kernels a shape, and chapter 13's FP8
# GEMM tests run its FP8 ones (nvjet_sm90_qqtst..., where it reported 32
# hazards a kernel on the H100). memcheck runs them all.
# Appendix E's GEMM steps are racechecked on their odd shapes, where every
# edge of a tile is met: at GPT-2's shapes racecheck's instrumented shared
# memory takes minutes a GEMM (memcheck runs those, and their determinism
# tests, which run 2048 rows of fc).
SANITIZED_TESTS := '@(kernels|exercise)*/*'
RACECHECKED_TESTS := '@(kernels|exercise)*/!(autotuned*|gemms_match_cpu|fast_accumulation*|*_at_gpt2_shapes|*steps_are_deterministic)'
# ANCHOR: test_gpu
COMPUTE_SANITIZER ?= $(CUDA_HOME)/bin/compute-sanitizer
test-gpu: $(GPU_TESTS)
	$(GPU_TESTS) --jobs 1
	$(GPU_TESTS_BF16) --jobs 1
	for t in $(GPU_TESTS) $(GPU_TESTS_BF16); do \
	  $(COMPUTE_SANITIZER) --tool memcheck --error-exitcode 1 $$t --jobs 1 \
	    --filter $(SANITIZED_TESTS) || exit 1; \
	  $(COMPUTE_SANITIZER) --tool racecheck --error-exitcode 1 $$t --jobs 1 \
	    --filter $(RACECHECKED_TESTS) || exit 1; done
# ANCHOR_END: test_gpu

test-cpu: $(CPU_TESTS) $(PROGRAMS) $(SHAKESPEARE)
	@# Criterion runs tests in parallel; one OpenMP thread each avoids oversubscription.
	OMP_NUM_THREADS=1 DATA_DIR=$(DATA) $(CPU_TESTS) --jobs 2

# tests/shell/: the set-up scripts' own tests (bash; tests/shell/lib.sh).
# The first-run tests hold GPU memory with tests/tools/gpu_ballast.c, so
# that a chapter meets a card of 10, 16 or 24 GiB.
SHELL_TESTS := $(wildcard tests/shell/test_*.sh)
BALLAST := $(if $(HAVE_NVCC),$(BUILD)/tests/gpu_ballast)
$(BUILD)/tests/gpu_ballast: tests/tools/gpu_ballast.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< -o $@ -L$(CUDA_HOME)/lib64 -lcudart
test-shell: $(PROGRAMS) $(SHAKESPEARE) $(BALLAST)
	@for t in $(SHELL_TESTS); do bash $$t || exit 1; done

# Tokenizer throughput on TinyShakespeare (target: >= 5 MB/s on one core).
bench-tokenizer: $(BUILD)/tokenizer $(RAW_FILES)
	$(BUILD)/tokenizer bench $(RAW)/tinyshakespeare.txt \
	  --encoder $(RAW)/gpt2_encoder.json --bpe $(RAW)/gpt2_vocab.bpe

clean:
	rm -rf $(BUILD)
.SECONDARY:

# ---- exercises -----------------------------------------------------------
# solutions/NN_slug/*.cu: the pieces that chapter NN's exercise asks the
# reader to write, complete: the code the trainer runs. exercises/NN_slug/:
# the same files with those pieces cut out, generated from solutions/ by
# tools/make_exercises.py (exercises/README.md). Each set is compiled apart:
#   solutions/ -> build/obj/solutions/ -> build/libsolutions.a -> build/tests/gpu_tests
#   exercises/ -> build/obj/exercises/ -> build/libexercises.a -> build/exercises/tests/gpu_tests
# and the trainer, build/train_gpt2_fp32, links the set that EXERCISE_DIR
# names: solutions/, or exercises/ with EXERCISES=1 (make train CH=0 EXERCISES=1).
EXERCISES     ?= 0
EXERCISE_DIR  := $(if $(filter 1,$(EXERCISES)),exercises,solutions)
# Exercises in C (host code: chapter 02's bf16 conversions, chapter 03's
# loss readback, which calls the CUDA runtime) are compiled by gcc like
# common/, go into the same archives, and are linked into the CPU tests too:
# build/tests/cpu_tests (solutions/) and build/exercises/tests/cpu_tests
# (exercises/), each from an archive of the C files alone (below).
SOLUTION_C_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(call without_cuda,$(wildcard solutions/*/*.c)))
EXERCISE_C_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(call without_cuda,$(wildcard exercises/*/*.c)))
SOLUTION_OBJS := $(patsubst %.cu,$(BUILD)/obj/%.o,$(wildcard solutions/*/*.cu)) $(SOLUTION_C_OBJS)
EXERCISE_OBJS := $(patsubst %.cu,$(BUILD)/obj/%.o,$(wildcard exercises/*/*.cu)) $(EXERCISE_C_OBJS)
LIBSOLUTIONS  := $(BUILD)/libsolutions.a
LIBEXERCISES  := $(BUILD)/libexercises.a
EXERCISE_GPU_TESTS := $(BUILD)/exercises/tests/gpu_tests
EXERCISE_CPU_TESTS := $(BUILD)/exercises/tests/cpu_tests
# Chapter -> exercise -> Criterion filter of its tests.
EXERCISE_TABLE := tools/exercise_tests.txt
# The set the trainer was last linked with. When EXERCISES changes, this line
# rewrites the stamp; the archives depend on it, so the trainer relinks.
EXERCISE_STAMP := $(BUILD)/exercise_dir
$(shell mkdir -p $(BUILD) && [ "$$(cat $(EXERCISE_STAMP) 2>/dev/null)" = $(EXERCISE_DIR) ] \
        || echo $(EXERCISE_DIR) > $(EXERCISE_STAMP))
$(EXERCISE_STAMP): ;

$(LIBSOLUTIONS): $(SOLUTION_OBJS) $(EXERCISE_STAMP)
$(LIBEXERCISES): $(EXERCISE_OBJS) $(EXERCISE_STAMP)
$(LIBSOLUTIONS) $(LIBEXERCISES):
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $(filter %.o,$^)

$(BUILD)/train_gpt2_fp32: $(BUILD)/lib$(EXERCISE_DIR).a
$(GPU_TESTS): $(LIBSOLUTIONS)
$(EXERCISE_GPU_TESTS): $(GPU_TEST_OBJS) $(LIBKERNELS) $(LIBEXERCISES) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Wl,--start-group $^ -Wl,--end-group -o $@ -lcriterion $(CUDA_LIBS) $(LDLIBS)
# The CPU tests take the C files from archives of their own, so that the
# linker pulls in only those a CPU test calls: chapter 03's C solution
# (loss_readback.c) calls the CUDA runtime, which the CPU tests do not link.
SOLUTION_C_LIB := $(BUILD)/libsolutions_c.a
EXERCISE_C_LIB := $(BUILD)/libexercises_c.a
$(SOLUTION_C_LIB): $(SOLUTION_C_OBJS)
$(EXERCISE_C_LIB): $(EXERCISE_C_OBJS)
$(SOLUTION_C_LIB) $(EXERCISE_C_LIB):
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $(filter %.o,$^)
$(CPU_TESTS): $(SOLUTION_C_LIB)
$(BUILD)/train_gpt2_cpu: $(BUILD)/lib$(EXERCISE_DIR)_c.a
# (A group: common/data/batch_ring.c calls chapter 08's exercise, batch_ring_worker.)
$(EXERCISE_CPU_TESTS): $(CPU_TEST_OBJS) $(EXERCISE_C_LIB) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Wl,--start-group $^ -Wl,--end-group -o $@ -lcriterion $(LDLIBS)

.PHONY: test-exercises check-exercises check-exercises-generated
# check-exercises is not part of `make test`: a reader halfway through an
# exercise has edited exercises/, and `make test` must still work for them.
# CI runs both (.ci/run).

# A CUDA device here? (The tests also skip by themselves where there is none.)
EXERCISE_HAVE_GPU := nvidia-smi -L 2>/dev/null | grep -q '^GPU '

# make test-exercises CH=N: chapter N's exercise tests, built against
# exercises/. They fail, naming the exercise, until you have written it.
# Only the test binary that the exercise needs is built: a CPU exercise
# (tests column "cpu" in the table) needs no nvcc.
EXERCISE_KIND := $(shell awk -v ch='$(CH)' '$$1 !~ /^\#/ && NF >= 3 && ch ~ /^[0-9]+$$/ && \
                   $$1 + 0 == ch + 0 {print ($$4 == "cpu" || $$4 == "bf16" ? $$4 : "gpu")}' $(EXERCISE_TABLE))
test-exercises: $(if $(filter cpu,$(EXERCISE_KIND)),$(EXERCISE_CPU_TESTS),$(if $(filter bf16,$(EXERCISE_KIND)),$(EXERCISE_GPU_TESTS_BF16),$(if $(EXERCISE_KIND),$(EXERCISE_GPU_TESTS))))
	@row=$$(awk -v ch='$(CH)' '$$1 !~ /^#/ && NF >= 3 && ch ~ /^[0-9]+$$/ && $$1 + 0 == ch + 0' \
	        $(EXERCISE_TABLE)); \
	if [ -z "$$row" ]; then \
	  echo "test-exercises: no exercise for chapter '$(CH)' in $(EXERCISE_TABLE) (make test-exercises CH=N)"; \
	  exit 2; \
	fi; \
	read -r ch ex filter tests <<< "$$row"; \
	bin=$(EXERCISE_GPU_TESTS); [ "$$tests" = cpu ] && bin=$(EXERCISE_CPU_TESTS); \
	[ "$$tests" = bf16 ] && bin=$(EXERCISE_GPU_TESTS_BF16); \
	if [ "$$tests" != cpu ] && ! $(EXERCISE_HAVE_GPU); then \
	  $$bin --filter "$$filter" --verbose 2>&1 | grep '^\[SKIP\].*no CUDA device'; \
	  echo "test-exercises: no GPU here: the tests of exercise $$ex were SKIPPED, nothing was checked"; \
	  exit 1; \
	fi; \
	echo "test-exercises: exercise $$ex: $$bin --filter '$$filter'"; \
	if $$bin --filter "$$filter"; then \
	  echo "test-exercises: exercise $$ex passes its tests: done"; \
	else \
	  echo "test-exercises: exercise $$ex does not pass yet: see exercises/$$ex/README.md"; \
	  exit 1; \
	fi

# Generation is current, both sets compile (warnings are errors) and link
# with every GPU test; with a GPU, every exercise's tests pass against
# solutions/ and fail, naming the exercise, against exercises/.
check-exercises-generated:
	python3 tools/make_exercises.py --check

check-exercises: check-exercises-generated $(GPU_TESTS) $(EXERCISE_GPU_TESTS) $(CPU_TESTS) \
                 $(EXERCISE_CPU_TESTS)
	@set -o pipefail; bad=0; gpu=1; $(EXERCISE_HAVE_GPU) || gpu=0; \
	while read -r ch ex filter tests; do \
	  case "$$ch" in '#'* | '') continue ;; esac; \
	  if [ "$$tests" = cpu ]; then sol=$(CPU_TESTS); exe=$(EXERCISE_CPU_TESTS); \
	  elif [ $$gpu = 1 ] && [ "$$tests" = bf16 ]; then sol=$(GPU_TESTS_BF16); exe=$(EXERCISE_GPU_TESTS_BF16); \
	  elif [ $$gpu = 1 ]; then sol=$(GPU_TESTS); exe=$(EXERCISE_GPU_TESTS); \
	  else \
	    echo "check-exercises: $$ex: generated and built; no GPU here, so running its tests"; \
	    echo "check-exercises: (pass against solutions/, fail against exercises/) was SKIPPED"; \
	    continue; \
	  fi; \
	  log=$(BUILD)/exercises/check-$$ex.log; \
	  echo "check-exercises: $$ex against solutions/: '$$filter' must pass"; \
	  if ! $$sol --filter "$$filter"; then \
	    echo "check-exercises: FAILED: solutions/$$ex does not pass its tests"; bad=1; \
	  fi; \
	  echo "check-exercises: $$ex against exercises/: '$$filter' must fail, naming the exercise"; \
	  if $$exe --filter "$$filter" 2>&1 | tee $$log; then \
	    echo "check-exercises: FAILED: the unfinished exercises/$$ex passes its tests"; bad=1; \
	  elif ! grep -q "^exercise $$ex (.*) is not finished yet: " $$log; then \
	    echo "check-exercises: FAILED: exercises/$$ex fails without saying it is unfinished"; bad=1; \
	  else \
	    echo "check-exercises: $$ex: fails as it should, with its TODO message"; \
	  fi; \
	done < $(EXERCISE_TABLE); \
	if [ $$bad = 0 ]; then echo "check-exercises: every exercise that ran fails unfinished and passes solved"; fi; \
	exit $$bad

# ---- demos ---------------------------------------------------------------
# chapters/NN_slug/*.cu: each chapter's demo, a program of its own, compiled
# like the kernels and linked with them and with the exercise set that
# EXERCISE_DIR names. `make test` builds them: a demo that no longer compiles
# fails CI like any other CUDA file.
DEMOS := $(BUILD)/demos/gemm_shapes $(BUILD)/demos/tf32_rounding
.PHONY: demo-01 demo-01-rounding

# make demo-01: chapter 01's GEMMs at GPT-2's shapes, fp32 against TF32 (and the
# exercise's kernel); DEMO_CSV=path also writes the table there.
demo-01: $(BUILD)/demos/gemm_shapes
	@if $(EXERCISE_HAVE_GPU); then $< $(DEMO_CSV); else echo "demo-01: no GPU here: built $<, not run"; fi

$(BUILD)/demos/gemm_shapes: $(BUILD)/obj/chapters/01_tensor_cores/gemm_shapes.o \
                            $(BUILD)/lib$(EXERCISE_DIR).a $(LIBKERNELS) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(NVCC) $(CUDA_ARCH) $^ -o $@ -lcublasLt -lcublas -lgomp

# make demo-01-rounding: what TF32 GEMMs do with the 13 low bits of their fp32
# operands (truncate or round), found with products by the identity; DEMO_CSV=path
# also writes the table there.
demo-01-rounding: $(BUILD)/demos/tf32_rounding
	@if $(EXERCISE_HAVE_GPU); then $< $(DEMO_CSV); else echo "demo-01-rounding: no GPU here: built $<, not run"; fi

$(BUILD)/demos/tf32_rounding: $(BUILD)/obj/chapters/01_tensor_cores/tf32_rounding.o $(LIBKERNELS) \
                              $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(NVCC) $(CUDA_ARCH) $^ -o $@ -lcublasLt -lcublas -lgomp

gpu-tests-run: $(DEMOS)

# make demo-06: chapter 06's padded vocabulary on chapter 03's lm_head GEMM
# (cuBLAS, unpadded rows) and on chapter 05's (cuBLASLt on a padded copy),
# each with and without --vocab-padding (chapters/06_vocab_padding/
# padded_vs_unpadded.sh): results/<gpu>/vocab_padding/.
.PHONY: demo-06
demo-06: $(BUILD)/train_gpt2_bf16 $(SHAKESPEARE)
	@if $(EXERCISE_HAVE_GPU); then bash chapters/06_vocab_padding/padded_vs_unpadded.sh; \
	else echo "demo-06: no GPU here: nothing was run"; fi

# make demo-07: chapters 06 (untied) and 07 (tied) trained for 300 steps,
# their loss and validation loss side by side (chapters/07_weight_tying/
# loss_curves.sh); `make plots` then draws them.
.PHONY: demo-07
demo-07: $(BUILD)/train_gpt2_bf16 $(SHAKESPEARE)
	@if $(EXERCISE_HAVE_GPU); then bash chapters/07_weight_tying/loss_curves.sh; \
	else echo "demo-07: no GPU here: nothing was run"; fi

# make demo-08: chapter 07 against chapter 08 (one, two and four worker
# threads) when every batch costs what slow storage would (--data-delay-us)
# (chapters/08_data_workers/slow_storage.sh): results/<gpu>/data_workers/.
.PHONY: demo-08
demo-08: $(BUILD)/train_gpt2_bf16 $(SHAKESPEARE)
	@if $(EXERCISE_HAVE_GPU); then bash chapters/08_data_workers/slow_storage.sh; \
	else echo "demo-08: no GPU here: nothing was run"; fi

# make demo-09: chapters 08 and 09 and PyTorch's AdamW, one tensor at a time
# and fused, in one session, and the kernel lab's optimizer rows
# (chapters/09_fused_optimizer/against_pytorch.sh): results/<gpu>/fused_optimizer/.
.PHONY: demo-09
demo-09: $(BUILD)/train_gpt2_bf16 $(BUILD)/kernel_lab_bf16 $(SHAKESPEARE)
	@if $(EXERCISE_HAVE_GPU); then bash chapters/09_fused_optimizer/against_pytorch.sh; \
	else echo "demo-09: no GPU here: nothing was run"; fi

# make demo-10: chapters 09 (fp32 moments) and 10 (8-bit moments) trained for
# 500 steps side by side (chapters/10_8bit_optimizer/loss_curves.sh); `make
# plots` then draws them.
.PHONY: demo-10
demo-10: $(BUILD)/train_gpt2_bf16 $(SHAKESPEARE)
	@if $(EXERCISE_HAVE_GPU); then bash chapters/10_8bit_optimizer/loss_curves.sh; \
	else echo "demo-10: no GPU here: nothing was run"; fi

# make demo-11: chapters 10 and 11 at B=64, chapter 11 with each of its
# switches off, and its profile at B=64 (chapters/11_last_mile/large_batch.sh):
# results/<gpu>/last_mile/.
.PHONY: demo-11
demo-11: $(BUILD)/train_gpt2_bf16 $(SHAKESPEARE)
	@if $(EXERCISE_HAVE_GPU); then bash chapters/11_last_mile/large_batch.sh; \
	else echo "demo-11: no GPU here: nothing was run"; fi

# make demo-03: chapter 02 against chapter 03 in the bf16 trainer: the
# host-device waits per step, by kind, and the GPU's idle time per step
# (chapters/03_sync_avoidance/sync_gaps.sh says how it is measured);
# DEMO_CSV=path also writes the table there. A script: nothing to build but
# the trainer.
.PHONY: demo-03
demo-03: $(BUILD)/train_gpt2_bf16 $(SHAKESPEARE)
	@if $(EXERCISE_HAVE_GPU); then DEMO_CSV=$(DEMO_CSV) bash chapters/03_sync_avoidance/sync_gaps.sh; \
	else echo "demo-03: no GPU here: nothing was run"; fi

# ---- plots ---------------------------------------------------------------
# make plots: the book's figures, results/<gpu>/plots/NAME.svg (HTML) and
# NAME.pdf (PDF), drawn by tools/plots.py from each results/<gpu>/results.csv
# and logs/ that `make bench` measured; then chapter 14's memory against
# model size, predicted and measured (tools/memory_sizes.py). No GPU needed.
# matplotlib is Debian's python3-matplotlib (`make deps` installs it), which
# Debian's /usr/bin/python3 sees and a pyenv or venv python3 does not: the
# first of /usr/bin/python3 and python3 that imports matplotlib draws them.
# PLOTS_PYTHON=/path/to/python3 picks another.
PLOTS_PYTHON ?= $(firstword $(foreach py,/usr/bin/python3 python3,$(shell \
                  $(py) -c 'import matplotlib' 2>/dev/null && echo $(py))) /usr/bin/python3)
.PHONY: plots figures reset
plots: deps
	$(PLOTS_PYTHON) tools/plots.py
	$(PLOTS_PYTHON) tools/memory_sizes.py

# make figures: the book's diagrams (bit layouts, the roofline, timelines), drawn
# by tools/figures.py from datasheet figures and shapes alone: book/figures/.
figures: deps
	$(PLOTS_PYTHON) tools/figures.py

# make reset: deletes what is generated from the measurements, results/*/plots/
# and build/book/. It does NOT delete the measurements themselves,
# results/*/results.csv, environment.txt and logs/: only a GPU and `make bench`
# can remake those.
reset:
	rm -rf results/*/plots $(BUILD)/book

# ---- book ----------------------------------------------------------------
# make book: build/book/book.html (one self-contained file) and
# build/book/book.pdf, with pandoc and pdflatex, from book/preface.md, the
# chapters' README.md and book/appendix_*.md (book/README.md says how).
# make book-check: every listing, number, results table, image and link of
# the book checked against the sources and results/, nothing written; fast.
# make book-test: the filter's own tests (tests/book/test_filter.sh), then the
# book built and looked at as a reader would: titles, listings and figures in
# both files, screenshots and PDF pages to look at (tests/book/check_book.sh).
.PHONY: book book-html book-pdf book-check book-test
book: book-html book-pdf

book-html book-pdf:
	@bash tools/deps.sh book
	@bash tools/book_build.sh $(patsubst book-%,%,$@)

book-check:
	@bash tools/deps.sh
	@bash tools/book_build.sh check

book-test:
	@bash tools/deps.sh book-test
	@bash tests/book/test_filter.sh
	@$(MAKE) --no-print-directory book
	@bash tests/book/check_book.sh

# ---- bf16 build ----------------------------------------------------------
# Chapter 02 on: the trainer with bf16 storage (kernels/precision.h, floatX).
# Everything is compiled a second time with -DPRECISION_BF16: all of common/
# (a rule that cannot forget a file that touches floatX), every kernel,
# every CUDA solution and exercise, and the GPU tests. The objects go to
# build/obj_bf16/:
#   common/    -> build/libcommon_bf16.a
#   kernels/   -> build/libkernels_bf16.a
#   solutions/ -> build/libsolutions_bf16.a (exercises/ -> build/libexercises_bf16.a)
#   -> build/train_gpt2_bf16, and the GPU tests, every tests/gpu/ file but the
#      *_fp32.c ones, -> build/tests/gpu_tests_bf16
# The C solutions (bf16.c, loss_scaler.c, loss_readback.c) do not depend on
# floatX: both builds share them.
BF16_OBJ            := $(BUILD)/obj_bf16
LIBCOMMON_BF16      := $(BUILD)/libcommon_bf16.a
LIBKERNELS_BF16     := $(BUILD)/libkernels_bf16.a
LIBSOLUTIONS_BF16   := $(BUILD)/libsolutions_bf16.a
LIBEXERCISES_BF16   := $(BUILD)/libexercises_bf16.a
KERNEL_OBJS_BF16    := $(KERNEL_SRCS:%.cu=$(BF16_OBJ)/%.o)
SOLUTION_OBJS_BF16  := $(patsubst %.cu,$(BF16_OBJ)/%.o,$(wildcard solutions/*/*.cu)) $(SOLUTION_C_OBJS)
EXERCISE_OBJS_BF16  := $(patsubst %.cu,$(BF16_OBJ)/%.o,$(wildcard exercises/*/*.cu)) $(EXERCISE_C_OBJS)
COMMON_OBJS_BF16    := $(COMMON_SRCS:%.c=$(BF16_OBJ)/%.o)
GPU_TEST_SRCS_BF16  := $(filter-out %_fp32.c,$(wildcard tests/gpu/*.c))
GPU_TEST_OBJS_BF16  := $(GPU_TEST_SRCS_BF16:%.c=$(BF16_OBJ)/%.o)
GPU_TESTS_BF16      := $(BUILD)/tests/gpu_tests_bf16
EXERCISE_GPU_TESTS_BF16 := $(BUILD)/exercises/tests/gpu_tests_bf16

$(BF16_OBJ)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DPRECISION_BF16 -c $< -o $@

$(BF16_OBJ)/%.o: %.cu $(ARCH_STAMP)
	$(NVCC_CHECK)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -DPRECISION_BF16 -c $< -o $@

$(LIBCOMMON_BF16): $(COMMON_OBJS_BF16)
$(LIBKERNELS_BF16): $(KERNEL_OBJS_BF16)
$(LIBSOLUTIONS_BF16): $(SOLUTION_OBJS_BF16) $(EXERCISE_STAMP)
$(LIBEXERCISES_BF16): $(EXERCISE_OBJS_BF16) $(EXERCISE_STAMP)
$(LIBCOMMON_BF16) $(LIBKERNELS_BF16) $(LIBSOLUTIONS_BF16) $(LIBEXERCISES_BF16):
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $(filter %.o,$^)

$(BUILD)/train_gpt2_bf16: $(BF16_OBJ)/common/train/train_gpt2.o $(LIBKERNELS_BF16) \
                          $(BUILD)/lib$(EXERCISE_DIR)_bf16.a $(LIBCOMMON_BF16)
	$(CC) $(CFLAGS) -Wl,--start-group $^ -Wl,--end-group -o $@ $(CUDA_LIBS) $(LDLIBS)

$(GPU_TESTS_BF16): $(GPU_TEST_OBJS_BF16) $(LIBKERNELS_BF16) $(LIBSOLUTIONS_BF16) $(LIBCOMMON_BF16)
$(EXERCISE_GPU_TESTS_BF16): $(GPU_TEST_OBJS_BF16) $(LIBKERNELS_BF16) $(LIBEXERCISES_BF16) \
                            $(LIBCOMMON_BF16)
$(GPU_TESTS_BF16) $(EXERCISE_GPU_TESTS_BF16):
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Wl,--start-group $^ -Wl,--end-group -o $@ -lcriterion $(CUDA_LIBS) $(LDLIBS)

# `make test` (gpu-tests-run) and `make test-gpu` run them after the fp32 ones.
gpu-tests-run test-gpu: $(GPU_TESTS_BF16)
# (test-exercises builds only the binary its exercise needs: above)
check-exercises: $(EXERCISE_GPU_TESTS_BF16)

-include $(shell find $(BF16_OBJ) -name '*.d' 2>/dev/null)
# ---- end of the bf16 build -------------------------------------------------

# ---- chapter 05's demo (after the bf16 build, whose libraries it links) ----
# make demo-05: eager against flash attention, forward and backward, at
# T = 256 .. 4096 (chapters/05_flash_attention/attention_sweep.cu), then
# PyTorch's scaled_dot_product_attention on the same shapes (sdpa_sweep.py);
# DEMO_CSV=path writes both into one table.
.PHONY: demo-05
demo-05: $(BUILD)/demos/attention_sweep
	@if ! $(EXERCISE_HAVE_GPU); then echo "demo-05: no GPU here: built $<, not run"; exit 0; fi; \
	$< $(DEMO_CSV) && python3 chapters/05_flash_attention/sdpa_sweep.py $(DEMO_CSV)

# libcommon and libkernels (and the exercises') call each other: one group.
$(BUILD)/demos/attention_sweep: $(BF16_OBJ)/chapters/05_flash_attention/attention_sweep.o \
                                $(LIBKERNELS_BF16) $(BUILD)/lib$(EXERCISE_DIR)_bf16.a $(LIBCOMMON_BF16)
	@mkdir -p $(dir $@)
	$(NVCC) $(CUDA_ARCH) $< -Xlinker --start-group $(filter %.a,$^) -Xlinker --end-group -o $@ \
	  -lcublasLt -lcublas -lgomp -lutf8proc -lm

gpu-tests-run: $(BUILD)/demos/attention_sweep

# make demo-13: chapters 12 (bf16 GEMMs) and 13 (FP8 GEMMs) trained for 300
# steps side by side at B=4, then chapter 13 again, byte for byte the same
# (chapters/13_fp8/fp8_training.sh): results/<gpu>/fp8_training/ and logs/fp8-*.txt;
# `make plots` then draws them.
.PHONY: demo-13
demo-13: $(BUILD)/train_gpt2_bf16 $(SHAKESPEARE)
	@if $(EXERCISE_HAVE_GPU); then bash chapters/13_fp8/fp8_training.sh; \
	else echo "demo-13: no GPU here: nothing was run"; fi

# make demo-12: chapter 12's attention (v4) beside chapter 05's (v2, v3),
# PyTorch's FlashAttention-2 and cuDNN's attention, at B=16 and B=64, T = 256
# .. 4096 (the same two programs as demo-05), and the kernel lab's attention
# rows (chapters/12_fast_attention/attention_sweep.sh):
# results/<gpu>/fast_attention/.
.PHONY: demo-12
demo-12: $(BUILD)/demos/attention_sweep $(BUILD)/kernel_lab_bf16
	@if $(EXERCISE_HAVE_GPU); then bash chapters/12_fast_attention/attention_sweep.sh; \
	else echo "demo-12: no GPU here: built $^, nothing was run"; fi

# make demo-12-power: the SM clock and the power at which chapters 11 and 12
# train at B=64 and at which our attention and cuDNN's run, held, at B=64,
# T=1024, and (with Nsight Compute) the clock of chapter 12's attention
# kernels inside its step (chapters/12_fast_attention/power_limit.sh):
# results/<gpu>/fast_attention/power/.
.PHONY: demo-12-power
demo-12-power: $(BUILD)/train_gpt2_bf16 $(BUILD)/demos/attention_sweep $(SHAKESPEARE)
	@if $(EXERCISE_HAVE_GPU); then bash chapters/12_fast_attention/power_limit.sh; \
	else echo "demo-12-power: no GPU here: nothing was run"; fi

# make demo-gemm: appendix E's GEMM, each step from chapter 01's WMMA kernel
# toward cuBLAS, and cuBLASLt, checked and timed by the kernel lab's
# gemm_steps family alone (tools/gemm_steps_lab.sh):
# results/<gpu>/gemm_steps/lab.csv.
.PHONY: demo-gemm
demo-gemm: $(BUILD)/kernel_lab_bf16
	@if $(EXERCISE_HAVE_GPU); then bash tools/gemm_steps_lab.sh; \
	else echo "demo-gemm: no GPU here: built $^, nothing was run"; fi

# ---- the kernel lab (after the bf16 build, whose libraries it links) -------
# tools/kernel_lab/: every version of every kernel family, checked against the
# CPU reference and timed at GPT-2 124M's shapes (tools/kernel_lab/lab.h), in
# both builds: build/kernel_lab_fp32 and build/kernel_lab_bf16. `make
# kernel-bench` runs both into results/<gpu>/kernels.csv (LAB_CSV=path
# elsewhere); needs a GPU.
LAB_SRCS := $(wildcard tools/kernel_lab/*.c)
LABS     := $(BUILD)/kernel_lab_fp32 $(BUILD)/kernel_lab_bf16
.PHONY: kernel-bench
$(BUILD)/kernel_lab_fp32: $(LAB_SRCS:%.c=$(BUILD)/obj/%.o) $(LIBKERNELS) $(LIBSOLUTIONS) $(LIBCOMMON)
$(BUILD)/kernel_lab_bf16: $(LAB_SRCS:%.c=$(BUILD)/obj_bf16/%.o) $(LIBKERNELS_BF16) \
                          $(LIBSOLUTIONS_BF16) $(LIBCOMMON_BF16)
$(LABS):
	$(CC) $(CFLAGS) -Wl,--start-group $^ -Wl,--end-group -o $@ $(CUDA_LIBS) $(LDLIBS)

kernel-bench: $(LABS)
	@if ! $(EXERCISE_HAVE_GPU); then echo "kernel-bench: no GPU here: built $(LABS), not run"; exit 1; fi
	@gpu=$$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | \
	        grep -oiE 'H100|H200|A100|L40S|L4' | head -1 | tr 'A-Z' 'a-z'); \
	csv=$${LAB_CSV:-results/$${gpu:-gpu}/kernels.csv}; mkdir -p $$(dirname $$csv); rm -f $$csv; \
	$(BUILD)/kernel_lab_fp32 --csv $$csv && $(BUILD)/kernel_lab_bf16 --csv $$csv && \
	echo "kernel-bench: wrote $$csv"

gpu-tests-run: $(LABS)

# ---- fuzzing ---------------------------------------------------------------
# tests/fuzz/fuzz_NAME.c: a libFuzzer harness for each reader (checkpoint,
# shard, debug state, training state, encoder.json, vocab.bpe, encode,
# decode), built with clang, ASan and UBSan into build/fuzz/fuzz_NAME with
# the few common/ files the readers need, compiled the same way.
#   make fuzz        each harness for FUZZ_RUNS executions (default 1M)
#   make fuzz-smoke  a short pass of each, FUZZ_SMOKE_SECONDS at most (CI);
#                    skipped, saying so, without clang
# Each starts from valid files written by our writers (build/fuzz/seeds/,
# tests/fuzz/fuzz_seeds.h) and from tests/fuzz/corpus/NAME/: hand-made seeds
# and every input that once failed, kept as a regression test. New inputs go
# to build/fuzz/corpus/NAME/; a failing one to build/fuzz/crash-NAME-*.
FUZZ_CC     ?= clang
FUZZ_RUNS   ?= 1000000
FUZZ_SMOKE_RUNS ?= 20000
FUZZ_SMOKE_SECONDS ?= 10
FUZZ_NAMES  := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS   := $(FUZZ_NAMES:%=$(BUILD)/fuzz/fuzz_%)
FUZZ_LIB_SRCS := common/files/binfile.c common/files/checkpoint.c common/files/debug_state.c \
                 common/model/gpt2_config.c common/data/pretokenize.c common/files/shard.c \
                 common/data/tokenizer.c common/files/train_state.c \
                 common/optim/adam_state.c common/optim/quantize8.c common/optim/optimizer.c \
                 solutions/10_8bit_optimizer/quantize_blocks.c \
                 common/util/util.c
FUZZ_LIB_OBJS := $(FUZZ_LIB_SRCS:%.c=$(BUILD)/fuzz/obj/%.o)
FUZZ_SAN    := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS := -O1 -g -std=c11 -Wall -Wextra -Wshadow $(WERROR) -Icommon -Ikernels -Itests/fuzz -MMD -MP \
               $(FUZZ_SAN)
HAVE_FUZZ_CC = $(shell command -v $(FUZZ_CC) >/dev/null 2>&1 && echo 1)
.PHONY: fuzz fuzz-smoke fuzz-build

$(BUILD)/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(BUILD)/fuzz/fuzz_%: $(BUILD)/fuzz/obj/tests/fuzz/fuzz_%.o $(FUZZ_LIB_OBJS)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $^ -o $@ -lutf8proc -lm

$(BUILD)/fuzz/make_seeds: $(BUILD)/obj/tests/fuzz/make_seeds.o $(LIBCOMMON) $(SOLUTION_C_LIB)
	$(CC) $(CFLAGS) -Wl,--start-group $^ -Wl,--end-group -o $@ $(LDLIBS)

# The seeds are written afresh each time: a seed that fuzz_seeds.h no longer
# writes must not linger.
fuzz-build: $(FUZZ_BINS) $(BUILD)/fuzz/make_seeds $(RAW_FILES)
	@rm -rf $(BUILD)/fuzz/seeds && $(BUILD)/fuzz/make_seeds $(BUILD)/fuzz/seeds

# fuzz_run RUNS SECONDS: every harness, one after another, for RUNS
# executions or SECONDS (0: no limit), whichever comes first; stops at the
# first failure. (encoder_json is the slow one: every input that parses
# allocates a vocabulary of 50257 entries.)
define fuzz_run
	@for name in $(FUZZ_NAMES); do \
	  mkdir -p $(BUILD)/fuzz/corpus/$$name; \
	  start=$$(date +%s); \
	  $(BUILD)/fuzz/fuzz_$$name -runs=$(1) -max_total_time=$(2) \
	    -artifact_prefix=$(BUILD)/fuzz/crash-$$name- $(BUILD)/fuzz/corpus/$$name \
	    $(wildcard $(BUILD)/fuzz/seeds/$$name) $$(ls -d tests/fuzz/corpus/$$name 2>/dev/null) \
	    > $(BUILD)/fuzz/$$name.log 2>&1 \
	    || { tail -30 $(BUILD)/fuzz/$$name.log; echo "fuzz: $$name FAILED (log: $(BUILD)/fuzz/$$name.log)"; exit 1; }; \
	  echo "fuzz: $$name: clean, $$(grep -o 'Done [0-9]* runs' $(BUILD)/fuzz/$$name.log) in $$(( $$(date +%s) - start )) s"; \
	done
endef

fuzz:
	@if [ "$(HAVE_FUZZ_CC)" != 1 ]; then echo "fuzz: $(FUZZ_CC) not found: libFuzzer needs clang (make deps)"; exit 1; fi
	@$(MAKE) --no-print-directory fuzz-build
	$(call fuzz_run,$(FUZZ_RUNS),0)

fuzz-smoke:
	@if [ "$(HAVE_FUZZ_CC)" != 1 ]; then echo "fuzz-smoke: $(FUZZ_CC) not found: fuzzing SKIPPED"; exit 0; fi
	@$(MAKE) --no-print-directory fuzz-build
	$(call fuzz_run,$(FUZZ_SMOKE_RUNS),$(FUZZ_SMOKE_SECONDS))

-include $(shell find $(BUILD)/fuzz/obj -name '*.d' 2>/dev/null)
