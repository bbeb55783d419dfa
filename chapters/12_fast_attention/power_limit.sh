#!/usr/bin/env bash
# power_limit.sh: chapter 12's look at the power limit, `make demo-12-power`.
# What clock did each kernel and each training step run at? Under full load
# an H100 draws its power limit and lowers its clock to stay there, by as
# much as the work draws: a kernel's time is its clocks over the clock rate,
# and this run says which of the two a difference came from. In one session
# of the GPU, with nvidia-smi logging the SM clock and the power every 100 ms:
#
#   ch11-BN, ch12-BN     chapters 11 and 12 trained at B=N (64) for 45 steps
#   sweep rows           our flash attention (v2, v3, v4) and cuDNN's, forward
#                        and backward at B=N, T=1024, each graph held HOLD_MS
#                        (3000) before it is timed
#   the step's kernels   (where Nsight Compute is) chapter 12's attention
#                        kernels inside its step at B=N: their time per call
#                        from the trainer's profile, their clocks from ncu on
#                        one step (at ncu's fixed clock, the caches as the step
#                        leaves them), so their clock rate in the step
#
# Every line of theirs is stamped as it is printed (logs/), and
# tools/clocks_by_row.py gives each row the mean clock and power of its
# window, and each kernel of the step its clocks over its time:
# clocks_by_row.csv in results/<gpu>/fast_attention/power/.
#
# Settings (environment variables): B (64), T (1024), HOLD_MS (3000), STEPS
# (45), WARMUP (5: steps left out of a trainer's row), TRAINER
# (build/train_gpt2_bf16), SWEEP (build/demos/attention_sweep), PYTHON
# (python3; PYTHON=none leaves cuDNN's rows out), DEMO_DIR.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tools/demo_env.sh
B=${B:-64} T=${T:-1024} HOLD_MS=${HOLD_MS:-3000} STEPS=${STEPS:-45} WARMUP=${WARMUP:-5}
TRAINER=${TRAINER:-build/train_gpt2_bf16} SWEEP=${SWEEP:-build/demos/attention_sweep}
PYTHON=${PYTHON:-python3}
gpu=$(gpu_slug)
out=${DEMO_DIR:-results/${gpu:-gpu}/fast_attention/power}
mkdir -p "$out/logs"
rm -f "$out/sweep.csv"
[ "$PYTHON" = none ] && torch= || torch=$PYTHON
PYTHON=$torch write_environment "$out/environment.txt" \
  "B=$B T=$T: chapters 11 and 12, $STEPS steps ($WARMUP left out); attention held ${HOLD_MS} ms"
log_clocks "$out/logs/clocks.csv" 100
trap stop_clocks EXIT
for ch in 11 12; do
  echo "== chapter $ch at B=$B: $out/logs/ch$ch-B$B.txt"
  "$TRAINER" --chapter "$ch" -b "$B" -t "$T" --steps "$STEPS" --val-every 0 --sample-tokens 0 \
    --log-every 1 2>&1 | stamp_lines > "$out/logs/ch$ch-B$B.txt" || {
    tail -3 "$out/logs/ch$ch-B$B.txt"; echo "chapter $ch failed (above)"; exit 1; }
done
echo "== our flash attention, B=$B T=$T, each graph held ${HOLD_MS} ms"
stdbuf -oL "$SWEEP" "$out/sweep.csv" --batch "$B" --min-seq "$T" --max-seq "$T" --flash-only \
  --hold-ms "$HOLD_MS" 2>&1 | stamp_lines | tee "$out/logs/sweep.txt"
if [ -n "$torch" ]; then
  echo "== cuDNN's attention"
  "$torch" -u chapters/05_flash_attention/sdpa_sweep.py "$out/sweep.csv" --batch "$B" \
    --min-seq "$T" --max-seq "$T" --backend cudnn --hold-ms "$HOLD_MS" 2>&1 | stamp_lines |
    tee "$out/logs/sdpa_sweep.txt"
fi
sleep 1  # the last window's samples
stop_clocks
step=()
if command -v ncu > /dev/null; then
  echo "== chapter 12's attention kernels in its step at B=$B: the profile's time, ncu's clocks"
  "$TRAINER" --chapter 12 -b "$B" -t "$T" --steps $((WARMUP + 5)) --val-every 0 --sample-tokens 0 \
    --log-every 1 --bench-warmup "$WARMUP" --profile 5 --profile-csv "$out/profile_ch12-B$B.csv" \
    > "$out/logs/ch12-B$B-profile.txt" 2>&1 || {
    tail -3 "$out/logs/ch12-B$B-profile.txt"; echo "the profile failed (above)"; exit 1; }
  per_step=$(awk -F, '/^"flash_attention/ {n += $2} END {print n + 0}' "$out/profile_ch12-B$B.csv")
  # The step after the warm-up, as the profile's; CUDA graphs off, so that
  # each kernel is launched, and counted, by itself.
  ncu --csv --log-file "$out/logs/ncu_step.csv" --cache-control none \
    --kernel-name regex:flash_attention_ --launch-skip $((per_step * WARMUP)) \
    --launch-count "$per_step" --metrics sm__cycles_elapsed.max,gpu__time_duration.sum \
    "$TRAINER" --chapter 12 -b "$B" -t "$T" --steps $((WARMUP + 1)) --val-every 0 \
    --sample-tokens 0 --no-cuda-graphs > "$out/logs/ch12-B$B-ncu.txt" 2>&1 || {
    tail -3 "$out/logs/ch12-B$B-ncu.txt"; echo "ncu failed (above)"; exit 1; }
  step=(--ncu "$out/logs/ncu_step.csv" --profile "$out/profile_ch12-B$B.csv")
else
  echo "== no Nsight Compute (ncu) here: the step's kernels left out"
fi
logs=("$out/logs/ch11-B$B.txt" "$out/logs/ch12-B$B.txt" "$out/logs/sweep.txt")
[ -z "$torch" ] || logs+=("$out/logs/sdpa_sweep.txt")
python3 tools/clocks_by_row.py "$out/logs/clocks.csv" "${logs[@]}" --hold-ms "$HOLD_MS" \
  --warmup "$WARMUP" ${step[@]+"${step[@]}"} > "$out/clocks_by_row.csv"
cat "$out/clocks_by_row.csv"
echo "wrote $out/clocks_by_row.csv"
