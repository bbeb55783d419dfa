#!/usr/bin/env bash
# test_cpu_trainer.sh: the CPU trainer as a user meets it, on a tiny model:
# --help prints its defaults and the exit statuses and hides no mistake; bad
# input exits 2, however late it is found before the first step; a run that
# diverges in its validation stops, saying so; OMP_NUM_THREADS cannot ask for
# more threads than the machine has; --check-state frees what it read when a
# file is bad (under valgrind, where it is installed); one Ctrl-C stops a
# long final sample.
source "$(dirname "$0")/lib.sh"

cpu=build/train_gpt2_cpu
tiny=(--data data/tinyshakespeare --model tiny -b 2 --sample-tokens 0)

# checkpoint [DIR [FLAGS...]]: a tiny model after one step, saved in DIR
# ($work/ck); prints its path.
checkpoint() {
  local dir=${1:-$work/ck}
  shift
  $cpu "${tiny[@]}" --steps 1 --val-every 0 --checkpoint-every 1 --checkpoint-dir "$dir" "$@" \
    >"$work/ck.out" 2>&1 || { fail "the CPU trainer: $(tail -2 "$work/ck.out")"; return 1; }
  echo "$dir/model_000001.bin"
}

# overwrite_tail FILE BYTES PATTERN: FILE's last BYTES bytes become PATTERN
# (printf's escapes), repeated.
overwrite_tail() {
  local file=$1 n=$2
  printf "$3" >"$work/pattern"
  while [ "$(stat -c %s "$work/pattern")" -lt "$n" ]; do
    cat "$work/pattern" "$work/pattern" >"$work/pattern2" && mv "$work/pattern2" "$work/pattern"
  done
  head -c "$n" "$work/pattern" | dd of="$file" bs=1M seek=$(($(stat -c %s "$file") - n)) \
    oflag=seek_bytes conv=notrunc status=none
}

help_prints_the_cpu_defaults() {
  expect_status 0 $cpu --help || return 1
  says "$work/out" "preset: tiny, small, or GPT-2's 124m, 355m, 774m, 1558m" &&
  says "$work/out" "                        (default small)" &&
  says "$work/out" "sequences per step (default 8)" &&
  says "$work/out" "tokens per sequence (default: the model's max, 64)" &&
  says "$work/out" "a resumed run continues to N (default 100)" &&
  says "$work/out" "peak learning rate (default 0.001)" &&
  says "$work/out" "batches per validation (default 4)" &&
  says "$work/out" "tokens per sample, 0 = no sampling (default 48)"
}

help_hides_no_mistake() {
  expect_status 2 $cpu --help --bogus || return 1
  says "$work/err" "unknown flag '--bogus'"
}

help_states_the_exit_statuses() {
  expect_status 0 $cpu --help || return 1
  says "$work/out" "exit status:" &&
  says "$work/out" "  2        the command line, or a file it names, is wrong" &&
  says "$work/out" "  1        the run failed while running"
}

# bad_input TEXT FLAGS...: exit 2 (exit_status.h), and stderr says TEXT.
bad_input() {
  local text=$1
  shift
  expect_status 2 "$@" || return 1
  says "$work/err" "$text"
}

# What is wrong with the command line or the files it names is the input's,
# however late before the first step it is found: exit 2.
bad_input_exits_2() {
  local a b
  a=$(checkpoint "$work/a" --seed 1) || return 1
  b=$(checkpoint "$work/b" --seed 2) || return 1
  # b's state beside a's model: a state of another model.
  cp "$work/b/state_000001.bin" "$work/a/state_000001.bin"
  bad_input "state_000001.bin does not belong to $a" \
    $cpu "${tiny[@]}" --resume "$a" --steps 2 || return 1
  # A NaN in the weights (element 1250 of wte).
  cp "$b" "$work/nan.bin"
  printf '\x00\x00\xc0\x7f' | dd of="$work/nan.bin" bs=1 seek=$((1024 + 4 * 1250)) \
    conv=notrunc status=none
  bad_input "nan.bin: tensor wte has a non-finite value (nan) at element 1250" \
    $cpu "${tiny[@]}" --init-from "$work/nan.bin" --steps 2 || return 1
  cp "$work/nan.bin" "$b"
  bad_input "non-finite value (nan)" $cpu "${tiny[@]}" --resume "$b" --steps 2 || return 1
  bad_input "--grad-accum: the GPU trainer's" $cpu "${tiny[@]}" --grad-accum 2 || return 1
  bad_input "--recompute block: the GPU trainer's (chapter 14)" \
    $cpu "${tiny[@]}" --recompute block || return 1
  bad_input "$work/missing.json: cannot open" \
    $cpu "${tiny[@]}" --sample-tokens 4 --encoder "$work/missing.json" || return 1
  bad_input "$work/missing.bin: cannot open" $cpu --check-state "$work/missing.bin" "$b"
}

a_validation_loss_that_is_not_finite_stops_the_run() {
  local model
  model=$(checkpoint) || return 1
  # lm_head (an untied model's last tensor) at +-1e30: finite weights, whose
  # logits put the whole probability on a few tokens, so the loss is infinite.
  overwrite_tail "$model" $((50257 * 64 * 4)) '\xca\xf2\x49\x71\xca\xf2\x49\x71\xca\xf2\x49\xf1'
  expect_status 1 $cpu "${tiny[@]}" --init-from "$model" --steps 2 --val-every 1 || return 1
  says "$work/err" "step 0: the validation loss is infinite: the run has diverged"
}

more_threads_than_libgomp_can_start_are_capped() {
  OMP_NUM_THREADS=100000 expect_status 0 $cpu "${tiny[@]}" --steps 2 --val-every 0 \
    --sample-tokens 4
}

check_state_with_a_bad_state_leaks_nothing() {
  command -v valgrind >/dev/null || { skip "valgrind is not installed"; return; }
  local model
  model=$(checkpoint) || return 1
  head -c 5000 /dev/zero | tr '\0' x >"$work/garbage.bin"
  expect_status 2 valgrind -q --leak-check=full --error-exitcode=99 \
    $cpu --check-state "$model" "$work/garbage.bin" || return 1
  says "$work/err" "$work/garbage.bin"
}

# A sample of 100000 tokens takes many minutes: one Ctrl-C while it is being
# drawn ends it within seconds, with the signal's status, what was drawn printed.
a_ctrl_c_stops_the_final_sample() {
  $cpu --data data/tinyshakespeare --steps 1 --val-every 0 --sample-tokens 100000 \
    >"$work/out" 2>"$work/err" &
  local pid=$! status=0 i
  wait_for "$work/out" "step     1/1" 60 || { kill -9 $pid; return 1; }
  sleep 0.5  # into the sample
  kill -INT $pid
  for ((i = 0; i < 100; i++)); do
    kill -0 $pid 2>/dev/null || break
    sleep 0.05
  done
  if kill -0 $pid 2>/dev/null; then
    kill -9 $pid
    fail "still sampling 5 s after SIGINT"
    return 1
  fi
  wait $pid || status=$?
  [ "$status" = 130 ] || fail "exit status $status, expected 130: $(tail -3 "$work/err")" ||
    return 1
  says "$work/out" "---- sample after step 1 ----" &&
  says "$work/err" "sample: stopped by SIGINT after"
}

if [ ! -x $cpu ]; then
  echo "[SKIP] test_cpu_trainer: $cpu not built"
  exit 0
fi
check help_prints_the_cpu_defaults
check help_hides_no_mistake
check help_states_the_exit_statuses
check bad_input_exits_2
check a_validation_loss_that_is_not_finite_stops_the_run
check more_threads_than_libgomp_can_start_are_capped
check check_state_with_a_bad_state_leaks_nothing
check a_ctrl_c_stops_the_final_sample
finish
