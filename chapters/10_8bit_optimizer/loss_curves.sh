#!/usr/bin/env bash
# loss_curves.sh: chapter 10's demo, `make demo-10`. The 8-bit optimizer
# changes the arithmetic of every step, so its loss is not chapter 09's:
# this trains both, fp32 moments (chapter 09) and 8-bit moments (chapter 10),
# for STEPS steps (500) on TinyShakespeare from GPT-2's initialisation, with
# the same seed and the same batches, and the validation loss every 25 steps.
# Each run's log, with its --memory report, goes to
# results/<gpu>/logs/adamw8bit-ch09.txt and adamw8bit-ch10.txt, from which
# `make plots` draws results/<gpu>/plots/adamw8bit_loss.svg.
#
# Settings (environment variables): STEPS (500), B (16), T (1024),
# TRAINER_BF16 (build/train_gpt2_bf16), LOGS (results/<gpu>/logs).
set -euo pipefail
cd "$(dirname "$0")/../.."
STEPS=${STEPS:-500} B=${B:-16} T=${T:-1024} TRAINER=${TRAINER_BF16:-build/train_gpt2_bf16}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oiE 'H100|H200|A100|L40S|L4' \
      | head -1 | tr 'A-Z' 'a-z')
logs=${LOGS:-results/${gpu:-gpu}/logs}
mkdir -p "$logs"
for ch in 9 10; do
  log=$logs/adamw8bit-ch$(printf %02d "$ch").txt
  echo "== chapter $ch, $STEPS steps: $log"
  "$TRAINER" --chapter "$ch" -b "$B" -t "$T" --steps "$STEPS" --val-every 25 --sample-tokens 0 \
    --log-every 1 --memory > "$log" 2>&1
  grep -E "^model:|memory: .* on the device|AdamW|val loss" "$log" | tail -6
done
