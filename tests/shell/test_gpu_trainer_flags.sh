#!/usr/bin/env bash
# test_gpu_trainer_flags.sh: the GPU trainers read and check their whole
# command line before they look for a device, so a bad flag exits 2, naming
# it, on any machine: these cases run without a GPU. (Skipped where the GPU
# trainers were not built: no nvcc.)
source "$(dirname "$0")/lib.sh"

fp32=build/train_gpt2_fp32
bf16=build/train_gpt2_bf16
data=(--data data/tinyshakespeare --sample-tokens 0)

# refused BINARY TEXT FLAGS...: exit 2, and stderr says TEXT (FLAGS come last,
# so they override the data flags).
refused() {
  local bin=$1 text=$2
  shift 2
  expect_status 2 "$bin" "${data[@]}" "$@" || return 1
  says "$work/err" "$text"
}

help_prints_the_gpu_defaults() {
  local bin
  for bin in $fp32 $bf16; do
    expect_status 0 $bin --help || return 1
    says "$work/out" "preset: tiny, small, or GPT-2's 124m, 355m, 774m, 1558m" &&
    says "$work/out" "                        (default 124m)" &&
    says "$work/out" "sequences per step (default 16)" &&
    says "$work/out" "tokens per sequence (default: the model's max, 1024)" &&
    says "$work/out" "a resumed run continues to N (default 50)" &&
    says "$work/out" "peak learning rate (default 0.0006)" &&
    says "$work/out" "batches per validation (default 1)" &&
    says "$work/out" "tokens per sample, 0 = no sampling (default 64)" || return 1
  done
}

counts_are_parsed_whole() {
  refused $fp32 "--bench-warmup: expected a whole number >= 0, got '3x'" --bench-warmup 3x &&
  refused $fp32 "--peak-tflops: expected a number > 0, got '-5'" --peak-tflops -5 &&
  refused $fp32 "--profile: expected a whole number >= 0, got 'two'" --profile two
}

# --memory-limit GIB: a number of GiB > 0, fractions allowed; anything else
# is refused by name before a device is looked for.
a_memory_limit_is_a_positive_number_of_gib() {
  refused $bf16 "--memory-limit: expected a number > 0, got '0'" --memory-limit 0 &&
  refused $bf16 "--memory-limit: expected a number > 0, got '-2'" --memory-limit -2 &&
  refused $fp32 "--memory-limit: expected a number > 0, got '16GiB'" --memory-limit 16GiB &&
  refused $bf16 "--memory-limit: expected a number > 0, got 'nan'" --memory-limit nan &&
  refused $bf16 "--memory-limit: expected a number > 0, got 'inf'" --memory-limit inf &&
  refused $bf16 "--memory-limit: missing value (see --help)" --memory-limit &&
  refused $bf16 "--memory-limit: missing value (the next word is the flag --memory)" \
    --memory-limit --memory || return 1
  expect_status 0 $bf16 --help || return 1
  says "$work/out" "--memory-limit GIB    the most device memory the run may take"
}

a_flag_without_its_value_is_named() {
  refused $fp32 "--profile: missing value (the next word is the flag --memory)" \
    --profile --memory &&
  refused $fp32 "--profile-csv: missing value (see --help)" --profile-csv
}

unknown_flags_and_stray_words_are_named() {
  refused $fp32 "unknown flag '--profiles'" --profiles 2 &&
  refused $bf16 "unexpected argument 'stray'" stray
}

a_switch_of_the_other_build_is_refused() {
  refused $fp32 "--kernel-fusion: a switch of the bf16 build" --kernel-fusion &&
  refused $bf16 "--no-tensor-cores: a switch of the fp32 build" --no-tensor-cores &&
  refused $fp32 "the precision is not a switch but a build" --bf16
}

# Chapter 14's --recompute takes a level's name; the error lists the levels.
a_recompute_level_is_named() {
  refused $bf16 "--recompute: expected none, gelu, norms or block, got 'all'" --recompute all &&
  refused $fp32 "--recompute: expected none, gelu, norms or block, got '1'" --recompute 1 &&
  refused $bf16 "--recompute: missing value (the next word is the flag --steps)" \
    --recompute --steps 3 &&
  refused $fp32 "--recompute: missing value (see --help)" --recompute || return 1
  expect_status 0 $bf16 --help || return 1
  says "$work/out" "--recompute LEVEL" && says "$work/out" "chapter 14; default none)"
}

# Chapter 14's --no-master-weights: the bf16 build's, and only with the
# fused optimizer (whose kernels round stochastically); refused by name
# before a device is looked for. The CPU trainer refuses it too.
no_master_weights_needs_bf16_and_the_fused_optimizer() {
  refused $fp32 "--no-master-weights: the bf16 build's" --no-master-weights &&
  refused $bf16 "--no-master-weights needs --fused-optimizer (chapter 09)" \
    --chapter 8 --no-master-weights &&
  refused $bf16 "--no-master-weights needs --fused-optimizer (chapter 09)" \
    --no-master-weights --no-fused-optimizer || return 1
  expect_status 2 build/train_gpt2_cpu "${data[@]}" --model tiny --no-master-weights || return 1
  says "$work/err" "--no-master-weights: the GPU trainer's bf16 build" || return 1
  expect_status 0 $bf16 --help || return 1
  says "$work/out" "--no-master-weights   keep no fp32 master copy of the weights"
}

# Chapter 15's --shard-optimizer: each rank updates its shard with the fused
# update's tables, its moments on the GPU; refused by name before a device
# is looked for.
shard_optimizer_needs_the_fused_optimizer_and_the_moments_on_the_gpu() {
  refused $bf16 "--shard-optimizer needs --fused-optimizer (chapter 09)" \
    --chapter 8 --shard-optimizer &&
  refused $bf16 "--shard-optimizer with --offload-optimizer" \
    --chapter 15 --shard-optimizer --offload-optimizer
}

a_padding_smaller_than_the_vocabulary_is_refused() {
  refused $fp32 "--padded-vocab 100 is smaller than the vocabulary, 50257 tokens" \
    --padded-vocab 100
}

a_chapter_of_the_other_precision_is_refused() {
  refused $fp32 "chapter 02 (Mixed precision (bf16)) runs in bf16" --chapter 2 &&
  refused $fp32 "--chapter: no chapter '99'" --chapter 99
}

files_are_checked_before_the_device() {
  refused $fp32 "nowhere/train*.bin: no file matches this pattern" --data "$work/nowhere" &&
  refused $fp32 "/nonexistent/model.bin" --init-from /nonexistent/model.bin &&
  refused $bf16 "$work/missing.json: cannot open" --sample-tokens 4 --encoder "$work/missing.json"
}

help_states_the_exit_statuses() {
  expect_status 0 $bf16 --help || return 1
  says "$work/out" "exit status:" &&
  says "$work/out" "  2        the command line, or a file it names, is wrong" &&
  says "$work/out" "  1        the run failed while running"
}

list_chapters_and_help_hide_no_mistake() {
  refused $fp32 "unknown flag '--bogus'" --list-chapters --bogus &&
  refused $bf16 "unknown flag '--bogus'" --bogus --list-chapters &&
  refused $fp32 "unknown flag '--bogus'" --help --bogus &&
  refused $bf16 "--profile: missing value (the next word is the flag --help)" --profile --help &&
  expect_status 0 $fp32 --list-chapters --no-tensor-cores || return 1
  says "$work/out" "chapter  precision"
}

# The files of --check-state are looked at before the device: a missing one
# is named, on any machine.
check_state_files_are_checked_before_the_device() {
  local model
  build/train_gpt2_cpu --data data/tinyshakespeare --model tiny --steps 1 --val-every 0 \
    --sample-tokens 0 --checkpoint-every 1 --checkpoint-dir "$work/ck" >"$work/ck.out" 2>&1 ||
    fail "the CPU trainer: $(tail -2 "$work/ck.out")" || return 1
  model=$work/ck/model_000001.bin
  expect_status 2 $fp32 --check-state "$work/missing.bin" "$work/state.bin" || return 1
  says "$work/err" "$work/missing.bin: cannot open: No such file or directory" || return 1
  expect_status 2 $bf16 --check-state "$model" "$work/missing_state.bin" || return 1
  says "$work/err" "$work/missing_state.bin: cannot open" || return 1
  expect_status 2 $fp32 --check-state "$model" "$work" || return 1
  says "$work/err" "$work: is a directory" || return 1
  head -c 2000 /dev/zero >"$work/zeros.bin"
  expect_status 2 $fp32 --check-state "$work/zeros.bin" "$model" || return 1
  says "$work/err" "$work/zeros.bin: bad magic 0"
}

check_state_takes_switches_only() {
  expect_status 2 $fp32 --check-state a.bin b.bin --steps 3 || return 1
  says "$work/err" "--check-state MODEL STATE: only --chapter and switches go with it, not '--steps'"
}

good_flags_reach_the_device_check() {
  # Without a GPU a good command line gets as far as the device: exit 1.
  nvidia-smi -L >/dev/null 2>&1 && { echo "    (a GPU here: skipped)"; return 0; }
  expect_status 1 $fp32 --profile 2 --profile-csv "$work/p.csv" --memory --bench-warmup 1 \
    --recompute block \
    --peak-tflops 989 --memory-limit 15.5 --steps 3 "${data[@]}" || return 1
  says "$work/err" "no CUDA device"
}

if [ ! -x $fp32 ] || [ ! -x $bf16 ]; then
  echo "[SKIP] test_gpu_trainer_flags: $fp32 and $bf16 not built (no nvcc)"
  exit 0
fi
check help_prints_the_gpu_defaults
check counts_are_parsed_whole
check a_memory_limit_is_a_positive_number_of_gib
check a_flag_without_its_value_is_named
check unknown_flags_and_stray_words_are_named
check a_switch_of_the_other_build_is_refused
check a_chapter_of_the_other_precision_is_refused
check a_recompute_level_is_named
check no_master_weights_needs_bf16_and_the_fused_optimizer
check shard_optimizer_needs_the_fused_optimizer_and_the_moments_on_the_gpu
check a_padding_smaller_than_the_vocabulary_is_refused
check files_are_checked_before_the_device
check help_states_the_exit_statuses
check list_chapters_and_help_hide_no_mistake
check check_state_files_are_checked_before_the_device
check check_state_takes_switches_only
check good_flags_reach_the_device_check
finish
