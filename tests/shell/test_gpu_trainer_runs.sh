#!/usr/bin/env bash
# test_gpu_trainer_runs.sh: the GPU trainers stop a diverged run (exit 1,
# nothing saved) and stop cleanly on Ctrl-C (the step finished, the pair
# saved, exit 130; in the final sample, exit 130 too), in chapter 00 (fp32,
# the loss read every step) and in chapter 03 (bf16, the loss read late: the
# check is made when it arrives).
# The last chapter too, whichever it is (flash attention and the fused
# kernels from chapter 05 on). Chapter 13 resumed from the command line is
# bit-identical to the run that never stopped (its FP8 scales are in the
# state), with and without master weights, and resumes across the FP8
# switch, saying what it does with the scales. Needs a GPU: skipped, saying
# so, without one.
source "$(dirname "$0")/lib.sh"

small=(--data data/tinyshakespeare --val-every 0 --layers 2 --heads 4
       --channels 64 --max-seq-len 32 -b 4)

# diverges BINARY CHAPTER: a huge learning rate ruins the weights in a step
# or two; the run must say so, exit 1, and write no checkpoint.
diverges() {
  expect_status 1 "$1" --chapter "$2" "${small[@]}" --lr 1e30 --steps 200 \
    --checkpoint-every 100 --checkpoint-dir "$work/ck" || return 1
  says "$work/err" "the run has diverged" || return 1
  [ -z "$(ls "$work/ck" 2>/dev/null)" ] || fail "wrote: $(ls "$work/ck")"
}

# stops_on_sigint BINARY CHAPTER: Ctrl-C after a few steps saves the pair
# and exits 130, leaving no temporary behind.
stops_on_sigint() {
  "$1" --chapter "$2" "${small[@]}" --steps 1000000 --checkpoint-every 100000 \
    --checkpoint-dir "$work/ck" >"$work/out" 2>"$work/err" &
  local pid=$! status=0
  wait_for "$work/out" "step     5/" 120 || { kill -9 $pid; return 1; }
  kill -INT $pid
  wait $pid || status=$?
  [ "$status" = 130 ] || fail "exit status $status, expected 130: $(tail -3 "$work/err")" ||
    return 1
  says "$work/err" "stopped by SIGINT after step" || return 1
  ls "$work"/ck/model_*.bin >/dev/null 2>&1 || fail "no model saved" || return 1
  ls "$work"/ck/state_*.bin >/dev/null 2>&1 || fail "no state saved" || return 1
  [ -z "$(ls "$work"/ck/*.tmp 2>/dev/null)" ] || fail "temporaries left: $(ls "$work"/ck)"
}

# stops_in_the_final_sample BINARY CHAPTER: Ctrl-C while the final sample
# is drawn: every step is done, but the run exits 130, not 0.
stops_in_the_final_sample() {
  "$1" --chapter "$2" "${small[@]}" --steps 2 --sample-tokens 20000 >"$work/out" 2>"$work/err" &
  local pid=$! status=0
  wait_for "$work/out" "step     2/2" 120 || { kill -9 $pid; return 1; }
  sleep 0.5  # into the sample
  kill -INT $pid
  wait $pid || status=$?
  [ "$status" = 130 ] || fail "exit status $status, expected 130: $(tail -3 "$work/err")"
}

fp32_chapter_0_diverged_run_stops() { diverges build/train_gpt2_fp32 0; }
bf16_chapter_3_diverged_run_stops() { diverges build/train_gpt2_bf16 3; }
fp32_chapter_0_stops_on_sigint() { stops_on_sigint build/train_gpt2_fp32 0; }
bf16_chapter_3_stops_on_sigint() { stops_on_sigint build/train_gpt2_bf16 3; }
fp32_chapter_0_stops_in_the_final_sample() { stops_in_the_final_sample build/train_gpt2_fp32 0; }
last_chapter() { build/train_gpt2_bf16 --list-chapters | awk 'END {print $1}'; }

# cpu_checkpoint FLAGS...: the CPU trainer writes a small model after one
# step, in llm.c's format (a tied one byte for byte as llm.c writes it);
# prints its path.
cpu_checkpoint() {
  build/train_gpt2_cpu "${small[@]}" "$@" --steps 1 --checkpoint-every 1 \
    --checkpoint-dir "$work/cpu" >"$work/cpu.out" 2>&1 || { fail "the CPU trainer: $(tail -2 "$work/cpu.out")"; return 1; }
  ls "$work"/cpu/model_*.bin | head -1
}

# Chapter 07 trains on from a tied model padded to 50304 rows, as llm.c's
# GPT-2 checkpoints are.
bf16_chapter_7_continues_a_tied_llmc_checkpoint() {
  local model
  model=$(cpu_checkpoint --tied --padded-vocab 50304) || return 1
  expect_status 0 build/train_gpt2_bf16 --chapter 7 --init-from "$model" --data data/tinyshakespeare \
    --val-every 0 -b 4 --steps 5 || return 1
  says "$work/out" "step     5/5"
}

# Chapter 06 pads an unpadded checkpoint's vocabulary (the same model);
# chapter 07 refuses to tie an untied one (another model), saying why: bad
# input, found while the trainer is built, so exit 2 (exit_status.h).
bf16_chapters_6_and_7_fit_an_untied_checkpoint() {
  local model
  model=$(cpu_checkpoint) || return 1
  expect_status 0 build/train_gpt2_bf16 --chapter 6 --init-from "$model" --data data/tinyshakespeare \
    --val-every 0 -b 4 --steps 3 || return 1
  says "$work/out" "vocabulary rows 50257 -> 50304" || return 1
  expect_status 2 build/train_gpt2_bf16 --chapter 7 --init-from "$model" --data data/tinyshakespeare \
    --val-every 0 -b 4 --steps 3 || return 1
  says "$work/err" "an untied model, and the chapter ties lm_head to wte"
}
# ---- chapter 13 (FP8 GEMMs) resumed from the command line --------------------
# Heads of 64, as the Criterion tests' FP8 runs.
fp8_small=(--data data/tinyshakespeare --val-every 0 --sample-tokens 0 --log-every 1
           --layers 2 --heads 2 --channels 128 --max-seq-len 32 -b 4 --chapter 13)

# has_fp8: chapter 13's FP8 GEMMs run here (compute capability 8.9 or later,
# and GPT2_PORTABLE_KERNELS not 1): else chapter 13 is chapter 12.
has_fp8() {
  [ "${GPT2_PORTABLE_KERNELS:-}" != 1 ] &&
    nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 |
    awk '{ exit !($1 >= 8.9) }'
}

# state_version FILE: a training state's version (header[1]).
state_version() { od -An -t d4 -j 4 -N 4 "$1" | tr -d ' '; }

# The losses of steps 11-20 a run printed.
late_losses() { grep -oE 'step +(1[1-9]|20)/20 \| loss [0-9.]+' "$1"; }

# fp8_resumes_bit_identically FLAGS...: chapter 13, 20 steps saving at 10 and
# 20, against its own step 10 resumed into another directory and trained to
# 20. The resumed run takes the FP8 scales and amax histories saved at step
# 10 (train_state.h, version 4), so step 20's model and state are the
# straight run's byte for byte, and so are the losses of steps 11-20.
fp8_resumes_bit_identically() {
  has_fp8 || { skip "no FP8 GEMMs here (compute capability 8.9 or later)"; return; }
  local f
  expect_status 0 build/train_gpt2_bf16 "${fp8_small[@]}" "$@" --steps 20 \
    --checkpoint-every 10 --checkpoint-dir "$work/straight" || return 1
  cp "$work/out" "$work/straight.out"
  [ "$(state_version "$work/straight/state_000010.bin")" = 4 ] ||
    fail "step 10's state is version $(state_version "$work/straight/state_000010.bin"), not 4" ||
    return 1
  expect_status 0 build/train_gpt2_bf16 "${fp8_small[@]}" "$@" --steps 20 \
    --checkpoint-every 10 --resume "$work/straight/model_000010.bin" \
    --checkpoint-dir "$work/resumed" || return 1
  ! grep -q "FP8 scales" "$work/out" ||
    fail "the resumed run did not take its FP8 scales: $(grep "FP8 scales" "$work/out")" ||
    return 1
  for f in model_000020.bin state_000020.bin; do
    cmp "$work/straight/$f" "$work/resumed/$f" >"$work/cmp" 2>&1 ||
      fail "$f differs after resuming: $(cat "$work/cmp")" || return 1
  done
  late_losses "$work/straight.out" >"$work/straight.losses"
  late_losses "$work/out" >"$work/resumed.losses"
  [ "$(wc -l <"$work/resumed.losses")" = 10 ] ||
    fail "not the losses of steps 11-20: $(cat "$work/resumed.losses")" || return 1
  diff "$work/straight.losses" "$work/resumed.losses" >"$work/diff" ||
    fail "the losses of steps 11-20 differ: $(head -4 "$work/diff")"
}
bf16_chapter_13_resumes_bit_identically() { fp8_resumes_bit_identically; }
bf16_chapter_13_without_master_weights_resumes_bit_identically() {
  fp8_resumes_bit_identically --no-master-weights
}

# Across the FP8 switch (train_gpu.c's restore_fp8_scales): chapter 13's
# checkpoint resumed with --no-fp8 leaves the FP8 scales out and saves
# version 3 (8-bit moments, no FP8 state); that checkpoint resumed in
# chapter 13 starts the scales afresh. Each says so, and trains on.
bf16_chapter_13_resumes_across_the_fp8_switch_saying_so() {
  has_fp8 || { skip "no FP8 GEMMs here (compute capability 8.9 or later)"; return; }
  expect_status 0 build/train_gpt2_bf16 "${fp8_small[@]}" --steps 2 --checkpoint-every 2 \
    --checkpoint-dir "$work/fp8" || return 1
  expect_status 0 build/train_gpt2_bf16 "${fp8_small[@]}" --no-fp8 --steps 4 \
    --checkpoint-every 2 --resume "$work/fp8/model_000002.bin" --checkpoint-dir "$work/bf16" ||
    return 1
  says "$work/out" "holds chapter 13's FP8 scales, and this run's linear layers do not" ||
    return 1
  says "$work/out" "multiply in FP8 (--fp8 off" || return 1
  says "$work/out" "step     4/4" || return 1
  [ "$(state_version "$work/bf16/state_000004.bin")" = 3 ] ||
    fail "without FP8: a state of version $(state_version "$work/bf16/state_000004.bin")" ||
    return 1
  expect_status 0 build/train_gpt2_bf16 "${fp8_small[@]}" --steps 6 --checkpoint-every 2 \
    --resume "$work/bf16/model_000004.bin" --checkpoint-dir "$work/fp8_again" || return 1
  says "$work/out" "holds no FP8 scales" || return 1
  says "$work/out" "step     6/6" || return 1
  [ "$(state_version "$work/fp8_again/state_000006.bin")" = 4 ] ||
    fail "with FP8 again: a state of version $(state_version "$work/fp8_again/state_000006.bin")"
}

# ---- GPT-2's four sizes (chapter 14's --model) -------------------------------------
# Each preset at its own shape (layers, heads, channels; the full vocabulary)
# trains the last chapter for 3 steps at B=2, T=256 (the step's FP8 and
# Hopper attention included where the GPU has them), every step's loss a
# number near ln(50257) = 10.8, as a model of GPT-2's initialisation starts,
# and samples after the last. (Three steps show that a size runs, not that
# it learns: results/h100/xl_200_steps/ has XL's 200.)
bf16_every_gpt2_size_trains_a_few_steps() {
  local m losses
  for m in 124m 355m 774m 1558m; do
    expect_status 0 build/train_gpt2_bf16 --chapter "$(last_chapter)" --model "$m" -b 2 -t 256 \
      --data data/tinyshakespeare --steps 3 --lr 1e-4 --val-every 0 --sample-tokens 4 \
      --log-every 1 || return 1
    says "$work/out" "---- sample after step 3" || return 1
    losses=$(sed -n 's/^step *[0-9]*\/3 | loss \([^ ]*\) .*/\1/p' "$work/out" | tr '\n' ' ')
    echo "$losses" | awk '{ if (NF != 3) exit 1; for (i = 1; i <= NF; i++)
                            if (!($i > 9 && $i < 13)) exit 1 }' ||
      fail "--model $m: the losses of its 3 steps: '$losses'" || return 1
  done
}

bf16_last_chapter_diverged_run_stops() { diverges build/train_gpt2_bf16 "$(last_chapter)"; }
bf16_last_chapter_stops_on_sigint() { stops_on_sigint build/train_gpt2_bf16 "$(last_chapter)"; }

if ! nvidia-smi -L >/dev/null 2>&1 || [ ! -x build/train_gpt2_fp32 ]; then
  echo "[SKIP] test_gpu_trainer_runs: no GPU here (or no GPU trainers built)"
  exit 0
fi
check fp32_chapter_0_diverged_run_stops
check bf16_chapter_3_diverged_run_stops
check fp32_chapter_0_stops_on_sigint
check fp32_chapter_0_stops_in_the_final_sample
check bf16_chapter_3_stops_on_sigint
check bf16_last_chapter_diverged_run_stops
check bf16_last_chapter_stops_on_sigint
check bf16_chapter_7_continues_a_tied_llmc_checkpoint
check bf16_chapters_6_and_7_fit_an_untied_checkpoint
check bf16_chapter_13_resumes_bit_identically
check bf16_chapter_13_without_master_weights_resumes_bit_identically
check bf16_chapter_13_resumes_across_the_fp8_switch_saying_so
check bf16_every_gpt2_size_trains_a_few_steps
finish
