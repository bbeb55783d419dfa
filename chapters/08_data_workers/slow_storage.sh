#!/usr/bin/env bash
# slow_storage.sh: chapter 08's demo, `make demo-08`. TinyShakespeare is read
# from memory in microseconds, so the data workers have nothing to hide; here
# every training batch costs what a read from slow storage would
# (--data-delay-us: the reading thread sleeps that long after each batch),
# and chapter 07 (batches read on the trainer's thread) runs beside chapter 08
# with one, two and four worker threads, at each delay, in one session:
#
#   ch07-dDD         chapter 07, DD ms per batch, its numbers read every step
#                    (--log-every 1, as make bench runs every chapter)
#   ch07-log20-dDD   the same, its numbers read every 20 steps (--log-every 20)
#   ch08-wN-dDD      chapter 08, N worker threads, DD ms per batch, every step
#
# The medians leave out the first WARMUP steps, enough for the ring of batches
# that the workers fill while the model is built to run dry when the workers
# are slower than the steps: what is measured is the rate they can sustain.
#
# Each row has the step's phases (runs.csv: data_ms is the host's time for the
# batch: reading it in chapter 07, waiting for the workers in chapter 08).
#
# Settings (environment variables): TRAINER (build/train_gpt2_bf16), B (16),
# T (1024), STEPS (80), WARMUP (50: steps left out of the medians), DELAYS_MS
# ("0 10 20 30 40 60"), DEMO_DIR (results/<gpu>/data_workers: runs.csv and
# environment.txt and every log). Needs data/tinyshakespeare and a GPU.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tools/demo_env.sh
TRAINER=${TRAINER:-build/train_gpt2_bf16} B=${B:-16} T=${T:-1024} STEPS=${STEPS:-80}
WARMUP=${WARMUP:-50} DELAYS_MS=${DELAYS_MS:-"0 10 20 30 40 60"}
gpu=$(gpu_slug)
out=${DEMO_DIR:-results/${gpu:-gpu}/data_workers}
mkdir -p "$out/logs"
csv=$out/runs.csv
write_environment "$out/environment.txt" "B=$B T=$T steps=$STEPS warmup=$WARMUP delays_ms=$DELAYS_MS; data TinyShakespeare"
echo "label,chapter,B,T,steps,ms_per_step,tok_per_s,tflops,mfu,peak_mem_gib,data_ms,forward_ms,backward_ms,optimizer_ms" > "$csv"

run() {  # label, chapter, flags...
  local label=$1 ch=$2; shift 2
  "$TRAINER" --chapter "$ch" --log-every 1 "$@" -b "$B" -t "$T" --steps "$STEPS" --val-every 0 \
    --sample-tokens 0 --bench-warmup "$WARMUP" --bench-csv "$csv" \
    --bench-label "$label" > "$out/logs/$label.txt" 2>&1 \
    || { echo "$label failed: $(tail -1 "$out/logs/$label.txt")"; exit 1; }
  grep '^bench:' "$out/logs/$label.txt"
}

for d in $DELAYS_MS; do
  us=$((d * 1000))
  run "ch07-d$d" 7 --data-delay-us "$us"
  run "ch07-log20-d$d" 7 --data-delay-us "$us" --log-every 20
  for w in 1 2 4; do run "ch08-w$w-d$d" 8 --data-threads "$w" --data-delay-us "$us"; done
done
echo "wrote $csv"
