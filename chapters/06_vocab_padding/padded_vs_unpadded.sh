#!/usr/bin/env bash
# padded_vs_unpadded.sh: chapter 06's demo, `make demo-06`. The padded
# vocabulary in the two kinds of lm_head GEMM the book has: chapter 03's
# (cuBLAS on the model's own weight, rows of 50257 logits) and chapter 05's
# (chapter 04's cuBLASLt GEMM, which pads the width to 50264 itself, on a
# copy of the weight). Each runs with and without --vocab-padding, in one
# session of the GPU, so the four rows compare:
#
#   ch03                 chapter 03 as it is
#   ch03-vocab-padding   chapter 03, its wte and lm_head padded to 50304 rows
#   ch05                 chapter 05 as it is
#   ch06                 chapter 05 with --vocab-padding: chapter 06
#
# and both chapter 03 runs once more with --profile, kernel by kernel.
#
# Settings (environment variables): TRAINER (build/train_gpt2_bf16), B (16),
# T (1024), STEPS (25), WARMUP (5: steps left out of the medians),
# PROFILE_STEPS (5), DEMO_DIR (results/<gpu>/vocab_padding: runs.csv, the two
# profiles, every log). Needs data/tinyshakespeare (make data) and a GPU.
set -euo pipefail
cd "$(dirname "$0")/../.."
TRAINER=${TRAINER:-build/train_gpt2_bf16} B=${B:-16} T=${T:-1024} STEPS=${STEPS:-25}
WARMUP=${WARMUP:-5} PROFILE_STEPS=${PROFILE_STEPS:-5}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oiE 'H100|H200|A100|L40S|L4' \
      | head -1 | tr 'A-Z' 'a-z')
out=${DEMO_DIR:-results/${gpu:-gpu}/vocab_padding}
mkdir -p "$out/logs"
csv=$out/runs.csv
echo "label,chapter,B,T,steps,ms_per_step,tok_per_s,tflops,mfu,peak_mem_gib,data_ms,forward_ms,backward_ms,optimizer_ms" > "$csv"

run() {  # label, chapter, flags...
  local label=$1 ch=$2; shift 2
  "$TRAINER" --chapter "$ch" "$@" -b "$B" -t "$T" --steps "$STEPS" --val-every 0 --sample-tokens 0 \
    --log-every 1 --bench-csv "$csv" --bench-warmup "$WARMUP" --bench-label "$label" \
    > "$out/logs/$label.txt" 2>&1 || { echo "$label failed: $(tail -1 "$out/logs/$label.txt")"; exit 1; }
  grep '^bench:' "$out/logs/$label.txt"
}

profile() {  # name, chapter, flags...
  local name=$1 ch=$2; shift 2
  "$TRAINER" --chapter "$ch" "$@" -b "$B" -t "$T" --steps $((WARMUP + PROFILE_STEPS)) --val-every 0 \
    --sample-tokens 0 --log-every 1 --bench-warmup "$WARMUP" --profile "$PROFILE_STEPS" \
    --profile-csv "$out/$name.csv" > "$out/logs/$name.txt" 2>&1 \
    || { echo "$name failed: $(tail -1 "$out/logs/$name.txt")"; exit 1; }
  echo "wrote $out/$name.csv"
}

run ch03 3
run ch03-vocab-padding 3 --vocab-padding
run ch05 5
run ch06 5 --vocab-padding
profile profile_ch03 3
profile profile_ch03_vocab_padding 3 --vocab-padding
echo "wrote $csv"
