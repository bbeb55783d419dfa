# GPT-2 training, made fast one chapter at a time.
#
#   make run     install what is missing, fetch the data, train (CPU for now)
#   make test    install what is missing, fetch the data, run every test
#
# Everything is built under build/; data goes to data/. See README.md.

CC      ?= gcc
WERROR  ?= -Werror
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -Wall -Wextra -Wshadow $(WERROR) -fopenmp -Icommon -MMD -MP
LDLIBS  := -lutf8proc -lm -fopenmp

BUILD := build
DATA  := data
RAW   := $(DATA)/raw

# common/: every .c file is library code, except the programs' mains (train_*.c).
COMMON_MAINS := $(wildcard common/train_*.c)
COMMON_SRCS  := $(filter-out $(COMMON_MAINS),$(wildcard common/*.c))
COMMON_OBJS  := $(COMMON_SRCS:%.c=$(BUILD)/obj/%.o)
LIBCOMMON    := $(BUILD)/libcommon.a

# tools/: each .c file is one program, build/<name>.
TOOL_SRCS := $(wildcard tools/*.c)
TOOLS     := $(TOOL_SRCS:tools/%.c=$(BUILD)/%)

PROGRAMS := $(COMMON_MAINS:common/%.c=$(BUILD)/%) $(TOOLS)

# tests/cpu/: every file is linked into one Criterion binary.
CPU_TEST_SRCS := $(wildcard tests/cpu/*.c)
CPU_TEST_OBJS := $(CPU_TEST_SRCS:%.c=$(BUILD)/obj/%.o)
CPU_TESTS     := $(BUILD)/tests/cpu_tests

.PHONY: all deps data run test test-cpu bench-tokenizer clean
all: $(PROGRAMS)

deps:
	@bash tools/deps.sh

# ---- build ---------------------------------------------------------------
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(LIBCOMMON): $(COMMON_OBJS)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(BUILD)/train_%: $(BUILD)/obj/common/train_%.o $(LIBCOMMON)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/%: $(BUILD)/obj/tools/%.o $(LIBCOMMON)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

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
test: deps
	@$(MAKE) --no-print-directory test-cpu

test-cpu: $(CPU_TESTS) $(PROGRAMS) $(SHAKESPEARE)
	DATA_DIR=$(DATA) $(CPU_TESTS) --jobs 2

# Tokenizer throughput on TinyShakespeare (target: >= 5 MB/s on one core).
bench-tokenizer: $(BUILD)/tokenizer $(RAW_FILES)
	$(BUILD)/tokenizer bench $(RAW)/tinyshakespeare.txt \
	  --encoder $(RAW)/gpt2_encoder.json --bpe $(RAW)/gpt2_vocab.bpe

clean:
	rm -rf $(BUILD)
