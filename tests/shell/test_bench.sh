#!/usr/bin/env bash
# test_bench.sh: `make bench` (tools/bench.sh) on a machine without a GPU
# fails, saying why, and writes nothing into results/; on a GPU, the runs it
# makes and the labels it gives them. Runs everywhere: a stand-in nvidia-smi
# goes first on the PATH (finding no GPU, or one), and stand-in trainers
# record their command lines instead of training.
source "$(dirname "$0")/lib.sh"

without_a_gpu_bench_fails_and_writes_nothing() {
  mkdir -p "$work/bin"
  printf '#!/bin/sh\necho "No devices were found" >&2\nexit 6\n' >"$work/bin/nvidia-smi"
  chmod +x "$work/bin/nvidia-smi"
  local before after
  before=$(find results -newer "$work/bin/nvidia-smi" | sort)
  PATH="$work/bin:$PATH" expect_status 1 bash tools/bench.sh || return 1
  says "$work/err" "bench: no GPU here" || return 1
  after=$(find results -newer "$work/bin/nvidia-smi" | sort)
  [ "$before" = "$after" ] || fail "bench wrote: $after"
}

# A stand-in GPU, and a stand-in trainer that answers --list-chapters with
# the real table, writes a row for --bench-csv and a header for
# --profile-csv, and logs its arguments to $work/calls.
stand_ins() {
  mkdir -p "$work/bin"
  cat >"$work/bin/nvidia-smi" <<'SMI'
#!/bin/sh
case "$*" in
  -L) echo "GPU 0: Stand-in GPU (UUID: GPU-0)" ;;
  *driver_version*) echo "0.0" ;;
  *name*) echo "Stand-in GPU" ;;
esac
SMI
  cat >"$work/trainer" <<'TRAINER'
#!/usr/bin/env bash
[ "$1" = --list-chapters ] && exec "$TABLE_FROM" --list-chapters
echo "$*" >>"$CALLS"
while [ $# -gt 0 ]; do
  case $1 in
    -b) b=$2 ;; --bench-label) label=$2 ;; --bench-csv) csv=$2 ;; --profile-csv) prof=$2 ;;
  esac
  shift
done
[ -n "${csv:-}" ] && echo "$label,0,$b,1024,3,1.0,1,1,0.1,1,,,," >>"$csv" && echo "bench: $label"
[ -n "${prof:-}" ] && echo "kernel,calls_per_step,ms_per_step,share" >"$prof"
exit 0
TRAINER
  chmod +x "$work/bin/nvidia-smi" "$work/trainer"
}

# The headline batch (HEAD_B): the last two chapters each get a row at it,
# the last chapter a profile at it beside its profile at B; every chapter a
# row at B. Nothing goes to results/ when RESULTS names another folder.
on_a_gpu_the_last_two_chapters_run_at_the_headline_batch() {
  [ -x build/train_gpt2_fp32 ] || { skip "no build/train_gpt2_fp32 (nvcc)"; return; }
  stand_ins
  local chapters last before written
  chapters=$(build/train_gpt2_fp32 --list-chapters | awk 'NR > 1 {printf "ch%02d\n", $1}')
  last=$(tail -1 <<<"$chapters") before=$(tail -2 <<<"$chapters" | head -1)
  PATH="$work/bin:$PATH" TABLE_FROM=build/train_gpt2_fp32 CALLS="$work/calls" \
    RESULTS="$work/results" TRAINER_FP32="$work/trainer" TRAINER_BF16="$work/trainer" \
    PYTHON=false PYTORCH=0 EXTRAS=0 B=16 HEAD_B=64 expect_status 0 bash tools/bench.sh || return 1
  written=$(find results -newer "$work/trainer")
  [ -z "$written" ] || fail "bench wrote into results/: $written" || return 1
  local csv=$work/results/results.csv label
  for label in $chapters "$before-B64" "$last-B64"; do
    grep -q "^$label,[^,]*,\(16\|64\)," "$csv" || fail "no row $label in results.csv: $(cut -d, -f1 "$csv" | tr '\n' ' ')" || return 1
  done
  grep -q "^$before-B64,[^,]*,64," "$csv" && grep -q "^$last-B64,[^,]*,64," "$csv" \
    || fail "the headline rows are not at B=64" || return 1
  [ "$(grep -c -- '-B64,' "$csv")" = 2 ] || fail "more headline rows than two: $(cut -d, -f1 "$csv" | tr '\n' ' ')" || return 1
  [ -f "$work/results/profile_$last.csv" ] || fail "no profile_$last.csv" || return 1
  [ -f "$work/results/profile_${last}_B64.csv" ] || fail "no profile_${last}_B64.csv" || return 1
  grep -q -- "--chapter $((10#${last#ch})) -b 64 .*--profile-csv $work/results/profile_${last}_B64.csv" "$work/calls" \
    || fail "the headline profile's command: $(grep -- --profile-csv "$work/calls" | tail -1)" || return 1
  says "$work/results/environment.txt" "head_B=64"
}

check without_a_gpu_bench_fails_and_writes_nothing
check on_a_gpu_the_last_two_chapters_run_at_the_headline_batch
finish
