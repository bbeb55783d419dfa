#!/usr/bin/env bash
# test_cpu_trainer_checkpoints.sh: whose checkpoints go where, from the
# command line: a new run refuses a directory that holds another run's
# checkpoints (exit 2, before any step, nothing written), and a resumed run
# saves beside the checkpoint it resumed, not in the default directory. The
# GPU trainers decide this in the same place (prepare_run).
source "$(dirname "$0")/lib.sh"

cpu=$root/build/train_gpt2_cpu
small=(--data "$root/data/tinyshakespeare" --sample-tokens 0 --val-every 0 --layers 2
       --heads 4 --channels 64 --max-seq-len 32 -b 4 --checkpoint-every 1)

# Each case runs in $work, so that the default build/checkpoints is its own.
first_run() {
  cd "$work" && expect_status 0 "$cpu" "${small[@]}" --steps 1 --checkpoint-dir "$work/ck"
}

a_new_run_refuses_another_runs_checkpoints() {
  first_run || return 1
  expect_status 2 "$cpu" "${small[@]}" --steps 2 --checkpoint-dir "$work/ck" || return 1
  says "$work/err" "--checkpoint-dir $work/ck holds the checkpoints of another run" || return 1
  says "$work/err" "--resume $work/ck" || return 1
  [ "$(ls "$work/ck")" = "$(printf 'model_000001.bin\nstate_000001.bin')" ] ||
    fail "the directory changed: $(ls "$work/ck")"
}

a_resumed_run_saves_beside_its_checkpoint() {
  first_run || return 1
  expect_status 0 "$cpu" "${small[@]}" --steps 2 --resume "$work/ck" || return 1
  says "$work/out" "checkpoints: saved in $work/ck, beside the resumed checkpoint" || return 1
  [ -e "$work/ck/model_000002.bin" ] && [ -e "$work/ck/state_000002.bin" ] ||
    fail "step 2 not saved in ck: $(ls "$work/ck")" || return 1
  [ ! -e "$work/build/checkpoints" ] || fail "saved in the default: $(ls "$work/build/checkpoints")"
}

if [ ! -x "$cpu" ] || [ ! -e data/tinyshakespeare/train.bin ]; then
  echo "[SKIP] $(basename "$0" .sh): build/train_gpt2_cpu or data/tinyshakespeare missing" \
       "(make build/train_gpt2_cpu data)"
  exit 0
fi
check a_new_run_refuses_another_runs_checkpoints
check a_resumed_run_saves_beside_its_checkpoint
finish
