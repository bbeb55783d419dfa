#!/usr/bin/env bash
# large_batch.sh: chapter 11's demo, `make demo-11`. The book's target is a
# step of 64 sequences of 1024 tokens: this runs chapter 10 and chapter 11 at
# that batch, and chapter 11 with each of its three switches off in turn, all
# in one session, into results/<gpu>/last_mile/large_batch.csv (the columns of
# results.csv), with each run's log beside it; then chapter 11's step at that
# batch kernel by kernel (--profile), into profile_ch11_B64.csv there (`make
# plots` sums it by kind into profile_kinds.csv); and the kernel lab's rows of
# the kernels chapter 11 changed or tried, at 16 sequences, into lab.csv.
#
# Settings (environment variables): B (64), T (1024), STEPS (25: 5 warm-up +
# 20 timed), TRAINER (build/train_gpt2_bf16), LAB (build/kernel_lab_bf16).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tools/demo_env.sh
B=${B:-64} T=${T:-1024} STEPS=${STEPS:-25} WARMUP=5
TRAINER=${TRAINER:-build/train_gpt2_bf16} LAB=${LAB:-build/kernel_lab_bf16}
gpu=$(gpu_slug)
out=results/${gpu:-gpu}/last_mile
mkdir -p "$out/logs"
write_environment "$out/environment.txt" "B=$B T=$T steps=$STEPS warmup=$WARMUP; data TinyShakespeare; lab.csv at the lab's own B=16, T=1024"
csv=$out/large_batch.csv
echo "label,chapter,B,T,steps,ms_per_step,tok_per_s,tflops,mfu,peak_mem_gib,data_ms,forward_ms,backward_ms,optimizer_ms" > "$csv"
run() {  # label, chapter, flags...
  local label=$1 ch=$2; shift 2
  echo "== $label (B=$B): $out/logs/$label.txt"
  "$TRAINER" --chapter "$ch" "$@" -b "$B" -t "$T" --steps "$STEPS" --val-every 0 --sample-tokens 0 \
    --log-every 1 --bench-csv "$csv" --bench-warmup "$WARMUP" --bench-label "$label" \
    > "$out/logs/$label.txt" 2>&1
  grep '^bench:' "$out/logs/$label.txt"
}
run "ch10-B$B" 10
run "ch11-B$B" 11
for sw in cuda-graphs gemm-autotune tuned-layernorm; do run "ch11-B$B-no-$sw" 11 "--no-$sw"; done
echo "== ch11 at B=$B, kernel by kernel: $out/profile_ch11_B$B.csv"
"$TRAINER" --chapter 11 -b "$B" -t "$T" --steps $((WARMUP + 3)) --val-every 0 --sample-tokens 0 \
  --log-every 1 --bench-warmup "$WARMUP" --profile 3 --profile-csv "$out/profile_ch11_B$B.csv" \
  > "$out/logs/ch11-B$B-profile.txt" 2>&1
# The lab's families, each row named (label_lab_rows): the GEMMs by shape too.
echo "== the kernel lab: $out/lab.csv"
for family in matmul encoder layernorm classifier; do
  rm -f "$out/lab_$family.csv"
  "$LAB" --only "$family" --csv "$out/lab_$family.csv" > "$out/logs/lab_$family.txt" 2>&1
done
{ label_lab_rows "$out/lab_matmul.csv" shape
  for family in encoder layernorm classifier; do label_lab_rows "$out/lab_$family.csv" | tail -n +2; done
} > "$out/lab.csv"
rm -f "$out"/lab_*.csv
if command -v column >/dev/null; then column -s, -t < "$csv"; else cat "$csv"; fi
