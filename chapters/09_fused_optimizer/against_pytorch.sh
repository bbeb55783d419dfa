#!/usr/bin/env bash
# against_pytorch.sh: chapter 09's demo, `make demo-09`. The optimizer's time
# in one session of the GPU, ours and PyTorch's, each with and without its
# fused AdamW:
#
#   ch08                         chapter 08: 16 AdamW launches, the clipping a pass of its own
#   ch09                         chapter 09: one launch (--fused-optimizer)
#   pytorch-...-tied             PyTorch's chapter 07 recipe: AdamW one tensor at a time
#   pytorch-...-tied-fused       the same with AdamW(fused=True): PyTorch's best recipe
#
# and the kernel lab's optimizer family (v1 over one tensor, v1 per tensor,
# v2 fused) into lab.csv.
#
# Settings (environment variables): TRAINER (build/train_gpt2_bf16), LAB
# (build/kernel_lab_bf16), PYTHON (python3), B (16), T (1024), STEPS (25),
# WARMUP (5), DEMO_DIR (results/<gpu>/fused_optimizer: runs.csv, lab.csv,
# environment.txt and every log). Needs data/tinyshakespeare, PyTorch and a GPU.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tools/demo_env.sh
TRAINER=${TRAINER:-build/train_gpt2_bf16} LAB=${LAB:-build/kernel_lab_bf16} PYTHON=${PYTHON:-python3}
B=${B:-16} T=${T:-1024} STEPS=${STEPS:-25} WARMUP=${WARMUP:-5}
gpu=$(gpu_slug)
out=${DEMO_DIR:-results/${gpu:-gpu}/fused_optimizer}
mkdir -p "$out/logs"
csv=$out/runs.csv
write_environment "$out/environment.txt" "B=$B T=$T steps=$STEPS warmup=$WARMUP; data TinyShakespeare (ours), random tokens (PyTorch)"
echo "label,chapter,B,T,steps,ms_per_step,tok_per_s,tflops,mfu,peak_mem_gib,data_ms,forward_ms,backward_ms,optimizer_ms" > "$csv"

ours() {  # label, chapter, flags...
  local label=$1 ch=$2; shift 2
  "$TRAINER" --chapter "$ch" "$@" -b "$B" -t "$T" --steps "$STEPS" --val-every 0 --sample-tokens 0 \
    --log-every 1 --bench-csv "$csv" --bench-warmup "$WARMUP" --bench-label "$label" \
    > "$out/logs/$label.txt" 2>&1 || { echo "$label failed: $(tail -1 "$out/logs/$label.txt")"; exit 1; }
  grep '^bench:' "$out/logs/$label.txt"
}

pytorch() {  # label, mode
  $PYTHON tools/pytorch_reference.py bench --mode "$2" --B "$B" --T "$T" \
    --steps $((STEPS - WARMUP)) --warmup "$WARMUP" --label "$1" --out-csv "$csv.torch" \
    > "$out/logs/$1.txt" 2>&1 || { echo "$1 failed: $(tail -3 "$out/logs/$1.txt")"; exit 1; }
  tail -1 "$out/logs/$1.txt"
}

ours ch08 8
ours ch09 9
pytorch pytorch-compile-bf16-sdpa-vocab-tied compile-bf16-sdpa-vocab-tied
pytorch pytorch-compile-bf16-sdpa-vocab-tied-fused compile-bf16-sdpa-vocab-tied-fused
grep -v '^label,' "$csv.torch" >> "$csv" && rm -f "$csv.torch"
# Each row named family-version (adamw_update-v2-fused), for the book to quote.
lab_family_csv optimizer "$out"
echo "wrote $csv and $out/lab.csv"
