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

# A stand-in GPU ($GPU_COUNT of them, default 1), and a stand-in trainer
# that answers --list-chapters with the real table, writes a row for
# --bench-csv and a header for --profile-csv, and logs its arguments to
# $work/calls; a command line that matches $REFUSE (a bash regular
# expression) it refuses, as the trainer refuses a plan over --memory-limit
# (exit status 2). Started as one of several ranks (RANK and WORLD_SIZE, as
# tools/launch_local.sh sets them), its line in $work/calls begins with
# "rank R/N: ", and only rank 0 writes the row, as the trainer.
stand_ins() {
  mkdir -p "$work/bin"
  cat >"$work/bin/nvidia-smi" <<'SMI'
#!/bin/sh
case "$*" in
  -L) i=0
      while [ $i -lt "${GPU_COUNT:-1}" ]; do echo "GPU $i: Stand-in GPU (UUID: GPU-$i)"; i=$((i + 1)); done ;;
  *driver_version*) echo "0.0" ;;
  *name*) echo "Stand-in GPU" ;;
esac
SMI
  cat >"$work/trainer" <<'TRAINER'
#!/usr/bin/env bash
[ "$1" = --list-chapters ] && exec "$TABLE_FROM" --list-chapters
echo "${RANK:+rank $RANK/$WORLD_SIZE: }$*" >>"$CALLS"
if [ -n "${REFUSE:-}" ] && [[ $* =~ $REFUSE ]]; then
  echo "error: the run does not fit in --memory-limit 16: B=4, T=1024 needs about 19.9 GiB" >&2
  exit 2
fi
while [ $# -gt 0 ]; do
  case $1 in
    -b) b=$2 ;; --bench-label) label=$2 ;; --bench-csv) csv=$2 ;; --profile-csv) prof=$2 ;;
  esac
  shift
done
[ -n "${csv:-}" ] && [ "${RANK:-0}" = 0 ] && echo "$label,0,$b,1024,3,1.0,1,1,0.1,1,,,," >>"$csv" && echo "bench: $label"
[ -n "${prof:-}" ] && echo "kernel,calls_per_step,ms_per_step,share" >"$prof"
exit 0
TRAINER
  chmod +x "$work/bin/nvidia-smi" "$work/trainer"
}

# The headline batch (HEAD_B): the last three chapters each get a row at it,
# the last two a profile at it beside their profiles at B; every chapter a
# row at B. Nothing goes to results/ when RESULTS names another folder.
on_a_gpu_the_last_three_chapters_run_at_the_headline_batch() {
  [ -x build/train_gpt2_fp32 ] || { skip "no build/train_gpt2_fp32 (nvcc)"; return; }
  stand_ins
  local chapters last before third written
  chapters=$(build/train_gpt2_fp32 --list-chapters | awk 'NR > 1 {printf "ch%02d\n", $1}')
  last=$(tail -1 <<<"$chapters") before=$(tail -2 <<<"$chapters" | head -1)
  third=$(tail -3 <<<"$chapters" | head -1)
  PATH="$work/bin:$PATH" TABLE_FROM=build/train_gpt2_fp32 CALLS="$work/calls" \
    RESULTS="$work/results" TRAINER_FP32="$work/trainer" TRAINER_BF16="$work/trainer" \
    PYTHON=false PYTORCH=0 EXTRAS=0 B=16 HEAD_B=64 expect_status 0 bash tools/bench.sh || return 1
  written=$(find results -newer "$work/trainer")
  [ -z "$written" ] || fail "bench wrote into results/: $written" || return 1
  local csv=$work/results/results.csv label ch
  for label in $chapters "$third-B64" "$before-B64" "$last-B64"; do
    grep -q "^$label,[^,]*,\(16\|64\)," "$csv" || fail "no row $label in results.csv: $(cut -d, -f1 "$csv" | tr '\n' ' ')" || return 1
  done
  for label in "$third" "$before" "$last"; do
    grep -q "^$label-B64,[^,]*,64," "$csv" || fail "the headline row $label-B64 is not at B=64" || return 1
  done
  [ "$(grep -c -- '-B64,' "$csv")" = 3 ] || fail "headline rows other than three: $(cut -d, -f1 "$csv" | tr '\n' ' ')" || return 1
  [ -f "$work/results/profile_$last.csv" ] || fail "no profile_$last.csv" || return 1
  for ch in "$before" "$last"; do
    [ -f "$work/results/profile_${ch}_B64.csv" ] || fail "no profile_${ch}_B64.csv" || return 1
    grep -q -- "--chapter $((10#${ch#ch})) -b 64 .*--profile-csv $work/results/profile_${ch}_B64.csv" "$work/calls" \
      || fail "the headline profile's command: $(grep -- --profile-csv "$work/calls" | tail -1)" || return 1
  done
  says "$work/results/environment.txt" "head_B=64"
}

# HEAD_CHAPTERS picks a chapter's own headline (chapter 12's: 11 and 12), at
# HEAD_B, with the profiles of those two at that batch.
head_chapters_pick_the_headline() {
  [ -x build/train_gpt2_fp32 ] || { skip "no build/train_gpt2_fp32 (nvcc)"; return; }
  stand_ins
  PATH="$work/bin:$PATH" TABLE_FROM=build/train_gpt2_fp32 CALLS="$work/calls" \
    RESULTS="$work/results" TRAINER_FP32="$work/trainer" TRAINER_BF16="$work/trainer" \
    PYTHON=false PYTORCH=0 EXTRAS=0 B=16 HEAD_B=64 CHAPTERS="11 12" HEAD_CHAPTERS="11 12" \
    expect_status 0 bash tools/bench.sh || return 1
  local csv=$work/results/results.csv
  [ "$(cut -d, -f1 "$csv" | tr '\n' ' ')" = "label ch11 ch12 ch11-B64 ch12-B64 " ] ||
    fail "results.csv: $(cut -d, -f1 "$csv" | tr '\n' ' ')" || return 1
  local ch
  for ch in ch11 ch12; do
    [ -f "$work/results/profile_${ch}_B64.csv" ] || fail "no profile_${ch}_B64.csv" || return 1
  done
}

# For PyTorch's rows without PyTorch: a stand-in chapter table of chapters
# 0 to $1, for the stand-in trainer's --list-chapters; and a stand-in Python
# that has pip (an install makes torchao/ and test/ in its --target), has
# neither torch nor torchao of its own (every -c fails), and, run as
# pytorch_reference.py (or as torchrun, -m torch.distributed.run, running
# it), logs its command line to $work/calls after what its PYTHONPATH's
# first folder holds, and writes and prints a row; a command line that
# matches $FAIL_PY (a bash regular expression) fails as PyTorch out of memory.
pytorch_stand_ins() {
  stand_ins
  cat >"$work/table" <<TABLE
#!/bin/sh
echo "chapter  precision  switch  title"
i=0
while [ \$i -le $1 ]; do echo "      \$i  bf16  -  Chapter \$i"; i=\$((i + 1)); done
TABLE
  cat >"$work/python" <<'PY'
#!/usr/bin/env bash
case "$1 $2" in
  "-m pip")
    [ "$3" = install ] || exit 0
    echo "pip $*" >>"$CALLS"
    while [ $# -gt 0 ]; do [ "$1" = --target ] && mkdir -p "$2/torchao" "$2/test"; shift; done
    exit 0 ;;
  "tools/pytorch_reference.py bench" | "-m torch.distributed.run") ;;
  *) exit 1 ;;
esac
first=${PYTHONPATH%%:*}
echo "torchao=$([ -n "$first" ] && [ -d "$first/torchao" ] && echo yes || echo no)" \
  "test=$([ -n "$first" ] && [ -d "$first/test" ] && echo yes || echo no) PYTHONPATH=${PYTHONPATH:-} $*" >>"$CALLS"
if [ -n "${FAIL_PY:-}" ] && [[ $* =~ $FAIL_PY ]]; then
  echo "bench: out of memory at B=16, T=1024 in mode a-mode" >&2
  exit 1
fi
while [ $# -gt 0 ]; do
  case $1 in --B) b=$2 ;; --label) label=$2 ;; --out-csv) csv=$2 ;; esac
  shift
done
echo "$label,pytorch,$b,1024,3,1.0,1,1,0.1,1,,,," | tee -a "$csv"
PY
  chmod +x "$work/table" "$work/python"
  mkdir -p "$work/wheels"
  : >"$work/wheels/torchao-0.18.0-py3-none-any.whl"
}

# bench.sh with the stand-ins, PyTorch's rows only; extra settings first.
pytorch_bench() {
  env PATH="$work/bin:$PATH" TABLE_FROM="$work/table" CALLS="$work/calls" \
    RESULTS="$work/results" TRAINER_FP32="$work/trainer" TRAINER_BF16="$work/trainer" \
    PYTHON="$work/python" OURS=0 EXTRAS=0 B=16 HEAD_B=64 WHEELS="$work/wheels" "$@" \
    bash tools/bench.sh
}

# From chapter 13 on, PyTorch's float8 recipe gets two rows, at B and at
# HEAD_B, each right after the lossonly row of its batch, run with torchao
# installed from the wheel into a folder of its own that is on their
# PYTHONPATH (without the wheel's test package) and is gone afterwards.
with_chapter_13_the_float8_rows_run_with_the_torchao_wheel() {
  pytorch_stand_ins 13
  expect_status 0 pytorch_bench || return 1
  local mode=compile-bf16-sdpa-vocab-tied-fused-lossonly-float8 site labels
  grep -q "^pip -m pip install --quiet --no-deps --no-index --target [^ ]* $work/wheels/torchao-0.18.0-py3-none-any.whl$" "$work/calls" \
    || fail "no pip install of the wheel: $(cat "$work/calls")" || return 1
  site=$(grep '^pip ' "$work/calls" | sed 's/.*--target \([^ ]*\) .*/\1/')
  grep -q "^torchao=yes test=no PYTHONPATH=$site tools/pytorch_reference.py bench --mode $mode --B 16 --T 1024 .*--label pytorch-float8 " "$work/calls" \
    || fail "pytorch-float8's command: $(grep -- -float8 "$work/calls")" || return 1
  grep -q "^torchao=yes test=no PYTHONPATH=$site tools/pytorch_reference.py bench --mode $mode --B 64 --T 1024 .*--label pytorch-float8-B64 " "$work/calls" \
    || fail "pytorch-float8-B64's command: $(grep -- -float8 "$work/calls")" || return 1
  [ ! -e "$site" ] || fail "torchao's folder $site is still there" || return 1
  labels=$(grep -o -- '--label [^ ]*' "$work/calls" | cut -d' ' -f2)
  grep -A1 -x pytorch-lossonly <<<"$labels" | grep -qx pytorch-float8 \
    && grep -A1 -x pytorch-lossonly-B64 <<<"$labels" | grep -qx pytorch-float8-B64 \
    || fail "the float8 rows are not after the lossonly rows: $(echo $labels)" || return 1
  grep -q "^pytorch-float8,pytorch,16," "$work/results/results.csv" \
    && grep -q "^pytorch-float8-B64,pytorch,64," "$work/results/results.csv" \
    || fail "results.csv: $(cut -d, -f1,3 "$work/results/results.csv" | tr '\n' ' ')" || return 1
  ! grep -q -- "--model" "$work/calls" || fail "chapter 14's rows ran without SIZES" || return 1
  says "$work/results/environment.txt" "torchao: torchao-0.18.0-py3-none-any.whl"
}

# Without the wheel (and no torchao in that Python), each float8 row and
# each 8-bit AdamW row (SIZES) says it was skipped and how to get torchao;
# the other rows run as before.
without_the_torchao_wheel_the_float8_rows_are_skipped_saying_why() {
  pytorch_stand_ins 14
  rm "$work/wheels/torchao-0.18.0-py3-none-any.whl"
  expect_status 0 pytorch_bench SIZES=1 || return 1
  says "$work/out" "== pytorch-float8 (B=16) skipped: no torchao wheel in $work/wheels: run tools/fetch_torchao.sh" || return 1
  says "$work/out" "== pytorch-float8-B64 (B=64) skipped: no torchao wheel" || return 1
  says "$work/out" "== pytorch-xl-ckpt-8bit (B=4) skipped: no torchao wheel" || return 1
  ! grep -q -- '-float8\|-8bit\|^pip ' "$work/calls" || fail "ran: $(grep -- '-float8\|-8bit\|^pip ' "$work/calls")" || return 1
  grep -q -- "--label pytorch-lossonly-B64 " "$work/calls" || fail "no lossonly row at B=64" || return 1
  grep -q -- "--label pytorch-xl-ckpt " "$work/calls" || fail "no checkpointed XL row" || return 1
  says "$work/results/environment.txt" "torchao: none: the float8 and 8-bit AdamW rows were skipped"
}

# SIZES=only, appended to a session: chapter 14's rows and no other. Our
# trainer's GPT-2 medium in 8 GiB and XL in 16 GiB (refused here, as the
# trainer refuses its plan: a line says so and the bench goes on), then
# PyTorch's three recipes for each, with torchao from the wheel; the rows
# are added to results.csv, and environment.txt gets a line that says so.
sizes_only_runs_chapter_14s_rows_and_reports_a_refused_run() {
  pytorch_stand_ins 14
  mkdir -p "$work/results"
  printf 'label,chapter\nch13,13,16,1024,3,1.0,1,1,0.1,1,,,,\n' >"$work/results/results.csv"
  echo "gpu: the first session's" >"$work/results/environment.txt"
  expect_status 0 pytorch_bench OURS=1 APPEND=1 SIZES=only REFUSE='--model 1558m' || return 1
  local flags="--recompute block -b" csv=$work/results/results.csv labels expected
  [ "$(grep -c -- '--chapter' "$work/calls")" = 3 ] || fail "our runs: $(grep -- --chapter "$work/calls")" || return 1
  grep -q -- "^--chapter 14 --model 355m --memory-limit 8 $flags 8 -t 1024 .*--bench-label ch14-medium-8g$" "$work/calls" \
    && grep -q -- "^--chapter 14 --model 1558m --memory-limit 16 --recompute block --no-master-weights -b 4 -t 1024 .*--bench-label ch14-xl-16g$" "$work/calls" \
    && grep -q -- "^--chapter 14 --model 1558m --memory-limit 16 --recompute block --update-in-backward --grad-clip 0 --offload-optimizer -b 4 -t 1024 .*--bench-label ch14-xl-16g-master$" "$work/calls" \
    || fail "our runs: $(grep -- --chapter "$work/calls")" || return 1
  says "$work/out" "!! ch14-xl-16g at B=4 refused: error: the run does not fit in --memory-limit 16" || return 1
  labels=$(grep -o -- '--label [^ ]*' "$work/calls" | cut -d' ' -f2 | tr '\n' ' ')
  expected="pytorch-medium pytorch-medium-ckpt pytorch-medium-ckpt-8bit pytorch-xl pytorch-xl-ckpt pytorch-xl-ckpt-8bit "
  [ "$labels" = "$expected" ] || fail "PyTorch's rows: $labels" || return 1
  local recipe=eager-bf16-sdpa-vocab-tied-fused-lossonly
  grep -q "^torchao=yes .* bench --mode $recipe-ckpt-8bit --B 4 --T 1024 .*--label pytorch-xl-ckpt-8bit .* --model 1558m$" "$work/calls" \
    && grep -q " bench --mode $recipe --B 8 --T 1024 .*--label pytorch-medium .* --model 355m$" "$work/calls" \
    && grep -q " bench --mode $recipe-ckpt --B 4 --T 1024 .*--label pytorch-xl-ckpt .* --model 1558m$" "$work/calls" \
    || fail "PyTorch's commands: $(grep -- --mode "$work/calls")" || return 1
  [ "$(cut -d, -f1 "$csv" | tr '\n' ' ')" = "label ch13 ch14-medium-8g ${expected}" ] \
    || fail "results.csv: $(cut -d, -f1 "$csv" | tr '\n' ' ')" || return 1
  says "$work/results/environment.txt" "gpu: the first session's" || return 1
  grep -q "^appended: .*: chapter 14's GPT-2 medium and XL rows (SIZES=only) .*; torchao: torchao-0.18.0" \
    "$work/results/environment.txt" || fail "environment.txt: $(cat "$work/results/environment.txt")"
}

# Before chapter 13 there are no float8 rows, and torchao is not installed;
# without GPUS, no multi-GPU row.
before_chapter_13_there_are_no_float8_rows() {
  pytorch_stand_ins 12
  expect_status 0 pytorch_bench || return 1
  ! grep -q -- '-float8\|^pip ' "$work/calls" "$work/out" || fail "float8: $(grep -- '-float8\|^pip ' "$work/calls" "$work/out")" || return 1
  ! grep -q -- 'torch.distributed.run\|-ddp-\|ch15-g' "$work/calls" || fail "multi-GPU rows without GPUS: $(grep -- 'ddp\|ch15-g' "$work/calls")" || return 1
  grep -q -- "--label pytorch-lossonly " "$work/calls" || fail "no lossonly row" || return 1
  ! grep -q "^torchao:" "$work/results/environment.txt" || fail "environment.txt names torchao"
}

# The last chapter's ablations: each switch off in turn, with the switches
# that need it (the graphs without sync avoidance or the fused optimizer;
# FP8 without kernel fusion's cuBLASLt GEMMs); none for fit-memory, which
# changes nothing in a run that fits.
each_ablation_turns_off_what_needs_its_switch() {
  [ -x build/train_gpt2_fp32 ] || { skip "no build/train_gpt2_fp32 (nvcc)"; return; }
  stand_ins
  PATH="$work/bin:$PATH" TABLE_FROM=build/train_gpt2_fp32 CALLS="$work/calls" \
    RESULTS="$work/results" TRAINER_FP32="$work/trainer" TRAINER_BF16="$work/trainer" \
    PYTHON=false PYTORCH=0 CHAPTERS=none HEADLINE=0 B=16 expect_status 0 bash tools/bench.sh || return 1
  grep -q -- "--no-sync-avoidance --no-cuda-graphs .*--bench-label ch[0-9]*-no-sync-avoidance" "$work/calls" \
    || fail "sync avoidance's ablation: $(grep -- -no-sync-avoidance "$work/calls")" || return 1
  if build/train_gpt2_fp32 --list-chapters | awk '$3 ~ /fp8/' | grep -q .; then
    grep -q -- "--no-kernel-fusion --no-fp8 .*--bench-label ch[0-9]*-no-kernel-fusion" "$work/calls" \
      || fail "kernel fusion's ablation: $(grep -- -no-kernel-fusion "$work/calls")" || return 1
  fi
  ! grep -q -- "--no-fit-memory" "$work/calls" || fail "an ablation of fit-memory ran" || return 1
  [ ! -s "$work/results/profile_ch00.csv" ] || fail "CHAPTERS=none profiled a chapter"
}

# GPUS=2 on a machine of two GPUs: after every other row, the last chapter
# on 1 GPU (the trainer alone) and on 2 (tools/launch_local.sh: two ranks,
# one row, rank 0's), B per GPU; then PyTorch's best recipe under torchrun
# (the Python's own: -m torch.distributed.run) on 1 and 2 GPUs, and on 2
# with --zero; each with its log in logs/, and environment.txt says so.
with_gpus_2_chapter_15_and_pytorch_ddp_run_last() {
  pytorch_stand_ins 14
  expect_status 0 pytorch_bench OURS=1 GPUS=2 GPU_COUNT=2 || return 1
  local csv=$work/results/results.csv common ddp=compile-bf16-sdpa-vocab-tied-fused-lossonly site
  common="-b 16 -t 1024 --steps 25 --val-every 0 --sample-tokens 0 --log-every 1 --bench-csv $csv --bench-warmup 5"
  site=$(grep '^pip ' "$work/calls" | sed 's/.*--target \([^ ]*\) .*/\1/')
  local torchrun="torchao=yes test=no PYTHONPATH=$site -m torch.distributed.run --standalone"
  local flags="--B 16 --T 1024 --steps 20 --warmup 5"
  local expected=(
    "^--chapter 14 $common --bench-label ch15-g1$"
    "^rank [01]/2: --chapter 14 $common --bench-label ch15-g2 --nccl-id-file /[^ ]*/nccl_id$"
    "^rank [01]/2: --chapter 14 $common --bench-label ch15-g2 --nccl-id-file /[^ ]*/nccl_id$"
    "^rank [01]/2: --chapter 14 --no-overlap-comm $common --bench-label ch15-g2-no-overlap-comm --nccl-id-file /[^ ]*/nccl_id$"
    "^rank [01]/2: --chapter 14 --no-overlap-comm $common --bench-label ch15-g2-no-overlap-comm --nccl-id-file /[^ ]*/nccl_id$"
    "^rank [01]/2: --chapter 14 --shard-optimizer --no-overlap-comm $common --bench-label ch15-g2-zero1 --nccl-id-file /[^ ]*/nccl_id$"
    "^rank [01]/2: --chapter 14 --shard-optimizer --no-overlap-comm $common --bench-label ch15-g2-zero1 --nccl-id-file /[^ ]*/nccl_id$"
    "^rank [01]/2: --chapter 14 --shard-optimizer $common --bench-label ch15-g2-zero1-overlap-comm --nccl-id-file /[^ ]*/nccl_id$"
    "^rank [01]/2: --chapter 14 --shard-optimizer $common --bench-label ch15-g2-zero1-overlap-comm --nccl-id-file /[^ ]*/nccl_id$"
    "^$torchrun --nproc-per-node 1 tools/pytorch_reference.py bench --mode $ddp $flags --label pytorch-ddp-g1 --out-csv $csv.torch$"
    "^$torchrun --nproc-per-node 2 tools/pytorch_reference.py bench --mode $ddp $flags --label pytorch-ddp-g2 --out-csv $csv.torch$"
    "^$torchrun --nproc-per-node 2 tools/pytorch_reference.py bench --mode $ddp $flags --label pytorch-ddp-zero-g2 --out-csv $csv.torch --zero$")
  local i=0 line
  while IFS= read -r line; do
    [[ $line =~ ${expected[$i]} ]] || fail "run $((i + 1)) of the last twelve: $line" || return 1
    i=$((i + 1))
  done < <(tail -12 "$work/calls")
  [ "$(grep -c -- 'ch15-g\|-ddp-' "$work/calls")" = 12 ] || fail "multi-GPU runs: $(grep -- 'ch15-g\|-ddp-' "$work/calls")" || return 1
  grep -q '^rank 0/2: ' "$work/calls" && grep -q '^rank 1/2: ' "$work/calls" || fail "ranks: $(grep '^rank' "$work/calls")" || return 1
  local label
  for label in ch15-g1 ch15-g2 ch15-g2-no-overlap-comm ch15-g2-zero1 ch15-g2-zero1-overlap-comm \
               pytorch-ddp-g1 pytorch-ddp-g2 pytorch-ddp-zero-g2; do
    [ "$(grep -c "^$label,[^,]*,16," "$csv")" = 1 ] || fail "results.csv's $label rows: $(cut -d, -f1,3 "$csv" | tr '\n' ' ')" || return 1
    [ -s "$work/results/logs/$label.txt" ] || fail "no log of $label: $(ls "$work/results/logs" | tr '\n' ' ')" || return 1
  done
  [ "$(tail -3 "$csv" | cut -d, -f1 | tr '\n' ' ')" = "pytorch-ddp-g1 pytorch-ddp-g2 pytorch-ddp-zero-g2 " ] \
    || fail "results.csv ends: $(tail -5 "$csv" | cut -d, -f1 | tr '\n' ' ')" || return 1
  says "$work/out" "== pytorch-ddp-g2 (B=16 per GPU, torchrun on 2 GPUs): log in $work/results/logs/pytorch-ddp-g2.txt ==" || return 1
  says "$work/out" "== ch15-g2 (B=16, bash tools/launch_local.sh 2 $work/trainer): log in $work/results/logs/ch15-g2.txt ==" || return 1
  says "$work/results/environment.txt" "gpus: 2 of the 2 GPUs that nvidia-smi lists, B=16 per GPU: our last chapter on 1 2 GPUs (ch15-gK, tools/launch_local.sh); PyTorch's $ddp in DDP under torchrun on 1 and 2 GPUs and with --zero on 2"
}

# The multi-GPU rows alone (the recipe of bench.sh's header), with one of
# our runs refused and one of PyTorch's failing: each says so in a line, and
# the bench goes on. GPUS must be 2 or more, and no more than the GPUs
# nvidia-smi lists; else the bench fails at once and writes nothing.
the_multi_gpu_rows_alone_report_a_refused_and_a_failed_run() {
  pytorch_stand_ins 14
  expect_status 0 pytorch_bench OURS=1 GPUS=2 GPU_COUNT=2 CHAPTERS=none HEADLINE=0 PYTORCH_ONLY=-ddp- \
    REFUSE='--bench-label ch15-g2' FAIL_PY='--zero' || return 1
  local labels
  labels=$(grep -o -- '--\(bench-\)\?label [^ ]*' "$work/calls" | cut -d' ' -f2 | uniq | tr '\n' ' ')
  [ "$labels" = "ch15-g1 ch15-g2 ch15-g2-no-overlap-comm ch15-g2-zero1 ch15-g2-zero1-overlap-comm pytorch-ddp-g1 pytorch-ddp-g2 pytorch-ddp-zero-g2 " ] \
    || fail "runs: $labels" || return 1
  says "$work/out" "!! ch15-g2 at B=16 refused: error: the run does not fit in --memory-limit 16" || return 1
  says "$work/out" "!! pytorch-ddp-zero-g2 at B=16 on 2 GPUs failed: bench: out of memory at B=16" || return 1
  [ "$(cut -d, -f1 "$work/results/results.csv" | tr '\n' ' ')" = "label ch15-g1 pytorch-ddp-g1 pytorch-ddp-g2 " ] \
    || fail "results.csv: $(cut -d, -f1 "$work/results/results.csv" | tr '\n' ' ')" || return 1
  local bad
  for bad in 1 x 4; do
    rm -rf "$work/results"
    expect_status 1 pytorch_bench GPUS=$bad GPU_COUNT=2 || return 1
    says "$work/err" "bench: GPUS=$bad" || return 1
    [ ! -e "$work/results" ] || fail "GPUS=$bad wrote $(ls "$work/results")" || return 1
  done
  says "$work/err" "but nvidia-smi lists 2 GPU(s): nothing was measured or written"
}

check without_a_gpu_bench_fails_and_writes_nothing
check each_ablation_turns_off_what_needs_its_switch
check on_a_gpu_the_last_three_chapters_run_at_the_headline_batch
check head_chapters_pick_the_headline
check with_chapter_13_the_float8_rows_run_with_the_torchao_wheel
check without_the_torchao_wheel_the_float8_rows_are_skipped_saying_why
check sizes_only_runs_chapter_14s_rows_and_reports_a_refused_run
check before_chapter_13_there_are_no_float8_rows
check with_gpus_2_chapter_15_and_pytorch_ddp_run_last
check the_multi_gpu_rows_alone_report_a_refused_and_a_failed_run
finish
