#!/usr/bin/env bash
# test_gpu_multi.sh: chapter 15, the trainer on several GPUs of one host, one
# process a GPU, over NCCL. Needs 2 GPUs (and NCCL at build time): skipped,
# saying so, elsewhere.
#  - 2 GPUs at B each train what 1 GPU trains at B with --grad-accum 2 (the
#    same sequences a step, the mean of two halves' gradients): every step's
#    loss and gradient norm within bf16's tolerance (the two sum in another
#    order: the all-reduce of bf16 gradients, the micro-batches' accumulation
#    in bf16);
#  - run to run, 2 GPUs give the same bits: every step's numbers and the
#    checkpoint written at the end;
#  - launched by torchrun --no-python (where PyTorch is), by mpirun's and
#    srun's variables set by hand, and over NCCL's sockets instead of NVLink
#    (what a network between hosts is), the same run trains the same steps;
#  - the overlap (chapter 15's switch) changes when the gradients are
#    averaged, not what: with 2 ranks each value's mean is (a + b) / 2
#    whichever all-reduce takes it, so --no-overlap-comm trains the same bits;
#  - a checkpoint moves between GPU counts: 2 GPUs' step 3 resumed on 1 GPU
#    with --grad-accum 2, and the reverse, train steps 4-6 as the run that
#    never stopped does, within bf16's tolerance;
#  - ZeRO-1 (--shard-optimizer) trains the bits of plain data parallel at
#    --grad-clip 0, and its checkpoint, gathered from the ranks' shards, is
#    the same bytes as plain data parallel's; its checkpoints move between
#    GPU counts too; each rank's master weights and moments take half the
#    memory;
#  - a rank on a GPU its host does not have (one more rank than it has
#    GPUs), a rank whose command line differs, a rank that is killed: the
#    others stop, saying why, not hang.
source "$(dirname "$0")/lib.sh"

gpus() { nvidia-smi -L 2>/dev/null | grep -c '^GPU'; }
last_chapter() { build/train_gpt2_bf16 --list-chapters | awk 'END {print $1}'; }
trainer=build/train_gpt2_bf16
# GPT-2 124M, 6 steps of 4 sequences of 256 tokens a GPU.
small() {
  echo --chapter "$(last_chapter)" --data data/tinyshakespeare -b 4 -t 256 --steps 6 \
    --val-every 0 --sample-tokens 0 --log-every 1 --comm-timeout 60
}

# The relative tolerance of the runs against each other (tolerances.h says why).
tol=$(sed -n 's/^#define TOL_RANKS_VS_MICRO_BATCHES \([0-9.e-]*\).*/\1/p' common/util/tolerances.h)

# The step lines' loss and norm, one step a line: "loss norm".
numbers() { sed -n 's/^step *[0-9]*\/[0-9]* | loss \([^ ]*\) | lr [^|]*| norm \([^ ]*\) .*/\1 \2/p' "$1"; }

# within A B TOL: |A - B| <= TOL * |B| for every pair of lines of two files.
within() {
  paste -d' ' "$1" "$2" | awk -v tol="$3" '
    { for (i = 1; i <= 2; i++) { a = $i; b = $(i + 2); d = a - b; if (d < 0) d = -d;
        m = b < 0 ? -b : b; if (d > tol * m) { print "line " NR ": " a " vs " b; bad = 1 } } }
    END { exit bad }'
}

two_gpus_train_what_one_trains_with_two_micro_batches() {
  expect_status 0 bash tools/launch_local.sh 2 $trainer $(small) || return 1
  numbers "$work/out" >"$work/two"
  expect_status 0 $trainer $(small) --grad-accum 2 || return 1
  numbers "$work/out" >"$work/one"
  [ "$(wc -l <"$work/two")" = 6 ] || fail "2 GPUs: $(cat "$work/two")" || return 1
  within "$work/two" "$work/one" "$tol" >"$work/diff" ||
    fail "2 GPUs against --grad-accum 2: $(head -3 "$work/diff")"
}

two_gpus_give_the_same_bits_run_to_run() {
  local run
  for run in a b; do
    expect_status 0 bash tools/launch_local.sh 2 $trainer $(small) --checkpoint-every 6 \
      --checkpoint-dir "$work/$run" || return 1
    numbers "$work/out" >"$work/$run.numbers"
  done
  cmp "$work/a.numbers" "$work/b.numbers" || fail "the steps' numbers differ" || return 1
  cmp "$work/a/model_000006.bin" "$work/b/model_000006.bin" &&
    cmp "$work/a/state_000006.bin" "$work/b/state_000006.bin" ||
    fail "the checkpoints differ"
}

the_overlap_changes_when_not_what() {
  expect_status 0 bash tools/launch_local.sh 2 $trainer $(small) --checkpoint-every 6 \
    --checkpoint-dir "$work/on" || return 1
  numbers "$work/out" >"$work/on.numbers"
  expect_status 0 bash tools/launch_local.sh 2 $trainer $(small) --no-overlap-comm \
    --checkpoint-every 6 --checkpoint-dir "$work/off" || return 1
  numbers "$work/out" >"$work/off.numbers"
  cmp "$work/on.numbers" "$work/off.numbers" && cmp "$work/on/model_000006.bin" \
    "$work/off/model_000006.bin" || fail "--no-overlap-comm trained other bits"
}

# moved FROM TO: a run on FROM (its launch command) saved at step 3 and
# resumed on TO, against FROM's own steps 4-6.
moved() {
  expect_status 0 $1 $trainer $(small) --checkpoint-every 3 --checkpoint-dir "$work/from" ||
    return 1
  numbers "$work/out" | tail -3 >"$work/straight"
  expect_status 0 $2 $trainer $(small) --resume "$work/from/model_000003.bin" \
    --checkpoint-dir "$work/to" || return 1
  numbers "$work/out" >"$work/resumed"
  [ "$(wc -l <"$work/resumed")" = 3 ] || fail "resumed: $(cat "$work/resumed")" || return 1
  within "$work/resumed" "$work/straight" "$tol" >"$work/diff" ||
    fail "resumed from $1 on $2: $(head -3 "$work/diff")"
  rm -rf "$work/from" "$work/to"
}

# One GPU with --grad-accum 2 is the launch command "with_two_micro_batches".
with_two_micro_batches() { "$@" --grad-accum 2; }

checkpoints_move_between_gpu_counts() {
  moved "bash tools/launch_local.sh 2" with_two_micro_batches &&
    moved with_two_micro_batches "bash tools/launch_local.sh 2"
}

# 2 GPUs with --shard-optimizer, as a launch command for `moved`.
sharded_on_two() { bash tools/launch_local.sh 2 "$@" --shard-optimizer; }

# The MiB of one line of --memory's plan (its name's start) in a run's output.
planned_mib() { sed -n "s/^memory: *$2.* \([0-9.]*\) MiB.*/\1/p" "$1" | head -1; }

zero1_trains_and_saves_what_data_parallel_does() {
  expect_status 0 bash tools/launch_local.sh 2 $trainer $(small) --grad-clip 0 --memory \
    --checkpoint-every 6 --checkpoint-dir "$work/plain" || return 1
  numbers "$work/out" >"$work/plain.numbers"
  cp "$work/out" "$work/plain.out"
  expect_status 0 sharded_on_two $trainer $(small) --grad-clip 0 --memory \
    --checkpoint-every 6 --checkpoint-dir "$work/sharded" || return 1
  numbers "$work/out" >"$work/sharded.numbers"
  cmp "$work/plain.numbers" "$work/sharded.numbers" ||
    fail "--shard-optimizer trained other numbers" || return 1
  cmp "$work/plain/model_000006.bin" "$work/sharded/model_000006.bin" &&
    cmp "$work/plain/state_000006.bin" "$work/sharded/state_000006.bin" ||
    fail "the gathered checkpoint differs from plain data parallel's" || return 1
  # Half the master weights on each rank (a shard of 256-value blocks: a
  # little more than half).
  local whole half
  whole=$(planned_mib "$work/plain.out" "master weights") half=$(planned_mib "$work/out" "master weights")
  awk -v w="$whole" -v h="$half" 'BEGIN { exit !(w > 0 && h >= w / 2 && h < w / 2 + 1) }' ||
    fail "master weights: $half MiB a rank sharded, $whole MiB whole"
}

zero1_checkpoints_move_between_gpu_counts() {
  moved sharded_on_two with_two_micro_batches &&
    moved with_two_micro_batches sharded_on_two
}

# by_hand VARS_OF_RANK_0 VARS_OF_RANK_1: the two processes started with the
# variables a launcher would set; rank 1's output to $work/out1.
by_hand() {
  local id=$work/id
  env $1 $trainer $(small) --nccl-id-file "$id" >"$work/out" 2>"$work/err" &
  local p0=$!
  env $2 $trainer $(small) --nccl-id-file "$id" >"$work/out1" 2>"$work/err1"
  local s1=$?
  wait $p0
  local s0=$?
  [ $s0 = 0 ] && [ $s1 = 0 ] || fail "statuses $s0 and $s1: $(tail -2 "$work/err" "$work/err1")"
}

every_launcher_trains_the_same_steps() {
  expect_status 0 bash tools/launch_local.sh 2 $trainer $(small) || return 1
  numbers "$work/out" >"$work/ours"
  by_hand "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=0" \
          "OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=1" || return 1
  numbers "$work/out" >"$work/mpirun"
  [ ! -s "$work/out1" ] || fail "rank 1 printed: $(head -2 "$work/out1")" || return 1
  by_hand "SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_LOCALID=0" \
          "SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_LOCALID=1" || return 1
  numbers "$work/out" >"$work/srun"
  cmp "$work/ours" "$work/mpirun" && cmp "$work/ours" "$work/srun" ||
    fail "the launchers' runs differ" || return 1
  if command -v torchrun >/dev/null; then
    expect_status 0 torchrun --no-python --nproc-per-node 2 $trainer $(small) \
      --nccl-id-file "$work/torchrun_id" || return 1
    numbers "$work/out" >"$work/torchrun"
    cmp "$work/ours" "$work/torchrun" || fail "torchrun's run differs" || return 1
  fi
  # NCCL over sockets on the loopback: the path between hosts.
  NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo \
    expect_status 0 bash tools/launch_local.sh 2 $trainer $(small) || return 1
  numbers "$work/out" >"$work/sockets"
  within "$work/sockets" "$work/ours" "$tol" >"$work/diff" ||
    fail "over sockets: $(head -3 "$work/diff")"
}

bad_set_ups_are_answered_not_hung() {
  # One rank more than the host has GPUs.
  local n
  n=$(gpus)
  RANK=$n WORLD_SIZE=$((n + 1)) LOCAL_RANK=$n expect_status 2 $trainer $(small) \
    --nccl-id-file "$work/id3" || return 1
  says "$work/err" "is to run on GPU $n of its host" || return 1
  # Two ranks with different command lines.
  env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 $trainer $(small) --nccl-id-file "$work/idm" \
    >"$work/out" 2>"$work/err" &
  local p0=$!
  RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 $trainer $(small) --lr 2e-4 --nccl-id-file "$work/idm" \
    >"$work/out1" 2>"$work/err1"
  local s1=$?
  wait $p0
  local s0=$?
  [ $s0 != 0 ] && [ $s1 != 0 ] || fail "statuses $s0 and $s1 with different flags" || return 1
  grep -q "rank 1's command line is not rank 0's" "$work/err" "$work/err1" ||
    fail "$(tail -1 "$work/err")" || return 1
  # A rank killed while the run trains: the other stops within its timeout.
  env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 $trainer $(small) --steps 100000 --comm-timeout 15 \
    --nccl-id-file "$work/idk" >"$work/out" 2>"$work/err" &
  p0=$!
  env RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 $trainer $(small) --steps 100000 --comm-timeout 15 \
    --nccl-id-file "$work/idk" >/dev/null 2>&1 &
  local p1=$!
  local t
  for t in $(seq 60); do grep -q "^step *20/" "$work/out" && break; sleep 1; done
  kill -KILL $p1
  wait $p0
  s0=$?
  [ $s0 != 0 ] || fail "rank 0 went on after rank 1 was killed" || return 1
  grep -Eq "rank 0 of 2: (NCCL reports|no progress in)" "$work/err" ||
    fail "rank 0 said: $(tail -2 "$work/err")"
}

if [ "$(gpus)" -lt 2 ] || [ ! -x $trainer ] || ! ldd $trainer | grep -q libnccl; then
  echo "[SKIP] test_gpu_multi: needs 2 GPUs and a trainer built with NCCL"
  exit 0
fi
check two_gpus_train_what_one_trains_with_two_micro_batches
check two_gpus_give_the_same_bits_run_to_run
check every_launcher_trains_the_same_steps
check the_overlap_changes_when_not_what
check checkpoints_move_between_gpu_counts
check zero1_trains_and_saves_what_data_parallel_does
check zero1_checkpoints_move_between_gpu_counts
check bad_set_ups_are_answered_not_hung
finish
