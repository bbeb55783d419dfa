#!/usr/bin/env bash
# test_gpu_trainer_runs.sh: the GPU trainers stop a diverged run (exit 1,
# nothing saved) and stop cleanly on Ctrl-C (the step finished, the pair
# saved, exit 130; in the final sample, exit 130 too), in chapter 00 (fp32,
# the loss read every step) and in chapter 03 (bf16, the loss read late: the
# check is made when it arrives).
# The last chapter too, whichever it is (flash attention and the fused
# kernels from chapter 05 on). Needs a GPU: skipped, saying so, without one.
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
finish
