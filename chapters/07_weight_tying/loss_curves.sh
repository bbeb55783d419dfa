#!/usr/bin/env bash
# loss_curves.sh: chapter 07's demo, `make demo-07`. Weight tying changes the
# model, so its loss is not chapter 06's: this trains both, untied (chapter
# 06) and tied (chapter 07), for STEPS steps (300) on TinyShakespeare from
# GPT-2's initialisation, with the same seed and the same batches, and the
# validation loss every 25 steps. Each run's log, with its --memory report,
# goes to results/<gpu>/logs/tying-ch06.txt and tying-ch07.txt, from which
# `make plots` draws results/<gpu>/plots/tying_loss.svg.
#
# Settings (environment variables): STEPS (300), B (16), T (1024),
# TRAINER_BF16 (build/train_gpt2_bf16), LOGS (results/<gpu>/logs).
set -euo pipefail
cd "$(dirname "$0")/../.."
STEPS=${STEPS:-300} B=${B:-16} T=${T:-1024} TRAINER=${TRAINER_BF16:-build/train_gpt2_bf16}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oiE 'H100|H200|A100|L40S|L4' \
      | head -1 | tr 'A-Z' 'a-z')
logs=${LOGS:-results/${gpu:-gpu}/logs}
mkdir -p "$logs"
for ch in 6 7; do
  log=$logs/tying-ch0$ch.txt
  echo "== chapter 0$ch, $STEPS steps: $log"
  "$TRAINER" --chapter "$ch" -b "$B" -t "$T" --steps "$STEPS" --val-every 25 --sample-tokens 0 \
    --log-every 1 --memory > "$log" 2>&1
  grep -E "^model:|memory: .* on the device|val loss" "$log" | tail -4
done
