#!/usr/bin/env bash
# fp8_training.sh: chapter 13's demo, `make demo-13`. FP8 changes the
# arithmetic of every linear layer, so its loss is not chapter 12's: this
# trains both, bf16 GEMMs (chapter 12) and FP8 GEMMs (chapter 13), for STEPS
# steps (300: about four epochs of TinyShakespeare at B=4) from GPT-2's
# initialisation, with the same seed and the same batches, the validation
# loss every 25 steps on 8 batches; then chapter 13 once more, to show that
# a run gives the same bits every time: its final checkpoint (the fp32 master
# weights and the optimizer's state) must be the first run's, byte for byte.
# Logs: results/<gpu>/logs/fp8-ch12.txt, fp8-ch13.txt and fp8-ch13-again.txt,
# from which `make plots` draws results/<gpu>/plots/fp8_loss.svg; the
# validation losses side by side: results/<gpu>/fp8_training/validation.csv.
#
# Settings (environment variables): STEPS (300), B (4), T (1024),
# TRAINER_BF16 (build/train_gpt2_bf16).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tools/demo_env.sh
STEPS=${STEPS:-300} B=${B:-4} T=${T:-1024} TRAINER=${TRAINER_BF16:-build/train_gpt2_bf16}
gpu=$(gpu_slug)
logs=results/${gpu:-gpu}/logs out=results/${gpu:-gpu}/fp8_training
mkdir -p "$logs" "$out"
write_environment "$out/environment.txt" "B=$B T=$T steps=$STEPS; validation every 25 steps on 8 batches; data TinyShakespeare"
ckpt=$(mktemp -d)
trap 'rm -rf "$ckpt"' EXIT
run() {  # log name, chapter, checkpoint folder
  local log=$logs/$1.txt
  echo "== chapter $2, $STEPS steps: $log"
  "$TRAINER" --chapter "$2" -b "$B" -t "$T" --steps "$STEPS" --val-every 25 --val-batches 8 \
    --sample-tokens 0 --log-every 1 --checkpoint-every "$STEPS" --checkpoint-dir "$3" > "$log" 2>&1
  grep -E "val loss" "$log" | tail -1
}
run fp8-ch12 12 "$ckpt/ch12"
run fp8-ch13 13 "$ckpt/ch13"
run fp8-ch13-again 13 "$ckpt/ch13-again"
# The validation losses side by side, and chapter 13's against chapter 12's.
val_of() { grep -E "^step +$2 \| val loss" "$logs/$1.txt" | awk '{print $6}'; }
{
  echo "step,ch12,ch13,relative_difference"
  for s in $(seq 25 25 "$STEPS"); do
    a=$(val_of fp8-ch12 "$s") b=$(val_of fp8-ch13 "$s")
    [ -n "$a" ] && [ -n "$b" ] && echo "$s,$a,$b,$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.5f", (b - a) / a}')"
  done
} > "$out/validation.csv"
awk -F, 'NR == 1 || $1 % 100 == 0 {printf "%-6s %-8s %-8s %s\n", $1, $2, $3, $4}' "$out/validation.csv"
same=yes
for f in "$ckpt"/ch13/*; do cmp -s "$f" "$ckpt/ch13-again/$(basename "$f")" || same=no; done
echo "chapter 13 twice, the final checkpoint byte for byte the same: $same" | tee "$out/run_to_run.txt"
[ "$same" = yes ]
