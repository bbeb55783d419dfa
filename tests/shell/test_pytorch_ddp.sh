#!/usr/bin/env bash
# test_pytorch_ddp.sh: tools/pytorch_reference.py bench under torchrun, the
# code path of bench.sh's pytorch-ddp-gN rows, on the CPU: two processes
# over gloo (--device cpu) on a tiny model, without torch.compile. It checks
# the plumbing (the process group, DDP, ZeRO-1, rank 0's one row, the total
# tok/s), not speed; skipped where $PYTHON (python3) has no torch.
source "$(dirname "$0")/lib.sh"
PYTHON=${PYTHON:-python3}
MODE=compile-bf16-sdpa-vocab-tied-fused-lossonly
TINY=(--device cpu --no-compile --layers 2 --heads 4 --channels 64 --max-seq-len 32 --vocab 250
      --B 2 --T 32 --steps 3 --warmup 2 --mode "$MODE")

have_torch() {
  $PYTHON -c 'import torch.distributed as d; assert d.is_available() and d.is_gloo_available()' \
    >/dev/null 2>&1
}

# bench on N CPU processes under torchrun (the Python's own), more flags after.
ranks() {
  local n=$1; shift
  $PYTHON -m torch.distributed.run --standalone --nproc-per-node "$n" \
    tools/pytorch_reference.py bench "${TINY[@]}" --out-csv "$work/rows.csv" "$@"
}

# Two ranks write one row, rank 0's: B each rank's, tok/s the total of both
# (2 * B * T / the median ms), the chapter column naming DDP over 2; with
# --zero the same training (ZeRO-1 shards the optimizer, not the math), so
# rank 0 prints the same losses.
two_ranks_write_one_row_with_the_total_and_zero_trains_the_same() {
  have_torch || { skip "$PYTHON has no torch.distributed with gloo"; return; }
  expect_status 0 ranks 2 --label ddp-g2 || return 1
  grep '^# losses (rank 0): ' "$work/err" | sed 's/; timed.*//' >"$work/losses_ddp"
  expect_status 0 ranks 2 --label ddp-zero-g2 --zero || return 1
  grep '^# losses (rank 0): ' "$work/err" | sed 's/; timed.*//' >"$work/losses_zero"
  [ "$(grep -c . "$work/rows.csv")" = 3 ] || fail "rows: $(cat "$work/rows.csv")" || return 1
  grep -q "^ddp-g2,pytorch:$MODE:no-compile:ddp2,2,32,3," "$work/rows.csv" \
    && grep -q "^ddp-zero-g2,pytorch:$MODE:no-compile:ddp2-zero,2,32,3," "$work/rows.csv" \
    || fail "rows: $(cat "$work/rows.csv")" || return 1
  awk -F, '/^ddp/ { want = 2 * $3 * $4 / ($6 / 1e3)
                    if ($7 < 0.99 * want || $7 > 1.01 * want) { print $1 ": " $7 " tok/s, not " want; bad = 1 } }
           END { exit bad }' "$work/rows.csv" || fail "tok/s is not the total of both ranks" || return 1
  [ -s "$work/losses_ddp" ] && cmp -s "$work/losses_ddp" "$work/losses_zero" \
    || fail "losses: DDP $(cat "$work/losses_ddp"), ZeRO $(cat "$work/losses_zero")"
}

# Without torchrun, one process as before (no DDP in the chapter column);
# --zero there stops with one line.
one_process_is_unchanged_and_refuses_zero() {
  have_torch || { skip "$PYTHON has no torch.distributed with gloo"; return; }
  expect_status 0 $PYTHON tools/pytorch_reference.py bench "${TINY[@]}" --out-csv "$work/rows.csv" \
    --label one || return 1
  grep -q "^one,pytorch:$MODE:no-compile,2,32,3," "$work/rows.csv" || fail "row: $(cat "$work/rows.csv")" || return 1
  expect_status 1 $PYTHON tools/pytorch_reference.py bench "${TINY[@]}" --zero || return 1
  says "$work/err" "bench: --zero shards the optimizer over torchrun's processes"
}

check two_ranks_write_one_row_with_the_total_and_zero_trains_the_same
check one_process_is_unchanged_and_refuses_zero
finish
