#!/usr/bin/env bash
# attention_sweep.sh: chapter 12's demo, `make demo-12`. Causal attention at
# GPT-2's heads (12 of 64), forward and backward, at T = 256 .. 4096 and at
# each batch of BATCHES, all in one session of the GPU:
#
#   flash-v2, flash-v3     chapter 05's kernels (v3: what chapter 11 runs on a Hopper)
#   flash-v4               chapter 12's (what it runs on a Hopper)
#   pytorch-sdpa-flash     PyTorch's FlashAttention-2 (SDPBackend.FLASH_ATTENTION)
#   pytorch-sdpa-cudnn     cuDNN's fused attention (SDPBackend.CUDNN_ATTENTION)
#
# (chapters/05_flash_attention/attention_sweep.cu and sdpa_sweep.py, which
# say how each pass is timed) into results/<gpu>/fast_attention/
# attention_sweep.csv, labelled IMPL-PASS-T at B=16 and IMPL-PASS-T-BN at
# another batch N; then the kernel lab's attention family (every version,
# v4's forward in its three steps) at the lab's B=16, T=1024, into lab.csv.
#
# Every graph is held at load for HOLD_MS before it is timed (attention_sweep.cu
# says why), and the GPU's clock, power and temperature are logged every
# 250 ms while the sweeps run (logs/clocks.csv, where nvidia-smi is).
#
# Settings (environment variables): BATCHES (16,64), HOLD_MS (1000), SWEEP
# (build/demos/attention_sweep), LAB (build/kernel_lab_bf16), PYTHON (python3;
# PYTHON=none leaves PyTorch's rows out), DEMO_DIR (results/<gpu>/fast_attention).
# v3 and v4 run on a Hopper only: elsewhere their rows are left out.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tools/demo_env.sh
BATCHES=${BATCHES:-16,64} HOLD_MS=${HOLD_MS:-1000} SWEEP=${SWEEP:-build/demos/attention_sweep}
LAB=${LAB:-build/kernel_lab_bf16} PYTHON=${PYTHON:-python3}
gpu=$(gpu_slug)
out=${DEMO_DIR:-results/${gpu:-gpu}/fast_attention}
mkdir -p "$out/logs"
csv=$out/attention_sweep.csv
[ "$PYTHON" = none ] && torch= || torch=$PYTHON
PYTHON=$torch write_environment "$out/environment.txt" \
  "B=$BATCHES, 12 heads of 64, T=256..4096; lab.csv at the lab's own B=16, T=1024"
if command -v nvidia-smi > /dev/null; then
  log_clocks "$out/logs/clocks.csv" 250
  trap stop_clocks EXIT
fi
echo "== our flash attention, B=$BATCHES, each graph held ${HOLD_MS} ms: $csv"
"$SWEEP" "$csv" --batch "$BATCHES" --flash-only --hold-ms "$HOLD_MS" 2>&1 |
  tee "$out/logs/sweep.txt"
if [ -n "$torch" ]; then
  echo "== PyTorch's FlashAttention-2 and cuDNN's attention, B=$BATCHES"
  "$torch" chapters/05_flash_attention/sdpa_sweep.py "$csv" --batch "$BATCHES" \
    --backend flash,cudnn --hold-ms "$HOLD_MS" 2>&1 | tee "$out/logs/sdpa_sweep.txt"
fi
echo "== the kernel lab's attention: $out/lab.csv"
# Each row named family-version-shape (attention_forward-v4-s2-v3-head-groups-B64-T1024-NH12),
# for the book: the lab times the flash versions at two batches.
lab_family_csv attention "$out" shape
echo "wrote $csv and $out/lab.csv"
