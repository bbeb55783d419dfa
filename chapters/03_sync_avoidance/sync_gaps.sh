#!/usr/bin/env bash
# sync_gaps.sh: chapter 03's demo. The bf16 trainer, chapter 02 against
# chapter 03, at the same settings: how often the host waits for the GPU, per
# step, and how long the GPU sits idle because of it.
#
#   bash chapters/03_sync_avoidance/sync_gaps.sh      (or: make demo-03)
#
# Settings (environment variables): TRAINER (build/train_gpt2_bf16), B (16),
# T (1024), STEPS (25), LOG_EVERY (5), WARMUP (5: steps left out of the
# numbers), LOGS (build/demos/03: each run's log), DEMO_CSV (also write the
# table there). Needs data/tinyshakespeare (make data) and a GPU.
#
# Three runs: chapter 02, chapter 03, and chapter 03 reading its losses back
# after every step (--log-every 1, as `make bench` runs every chapter). Each
# runs with --count-syncs, which prints after every log line the waits of
# the steps since the last one, by kind (kernels/gpu_context.h).
#
# How the idle time is measured. Each step records four CUDA events on the
# stream (before its batch upload, then before its backward pass, before its
# optimizer, after it), so the device span of a step, from its first event
# to its last, is "fwd + bwd + opt" in the log. That span counts the GPU's
# idle gaps inside the step: in chapter 02 the GPU idles after every kernel
# while the host checks it and launches the next. In chapter 03 the host runs
# ahead (it queues steps without waiting, and waits only for a free upload
# buffer, two steps ahead), so the GPU always has the next kernel queued: its
# span of a step is the kernels' own time, back to back. The two chapters
# run the same kernels on the same data (bit-identical results), so
#   busy    = chapter 03's median device span per step
#   idle    = wall time per step - busy
# and, for chapter 02, idle inside the step (between its kernels) = its
# device span - busy; idle between steps = its wall time - its device span.
# This is an estimate, not a trace: it assumes chapter 03's span has no gap
# left (its event waits, counted, show that the host was ahead) and that a
# kernel takes as long after an idle gap as after another kernel.
set -euo pipefail
cd "$(dirname "$0")/../.."
TRAINER=${TRAINER:-build/train_gpt2_bf16}
B=${B:-16} T=${T:-1024} STEPS=${STEPS:-25} LOG_EVERY=${LOG_EVERY:-5} WARMUP=${WARMUP:-5}
LOGS=${LOGS:-build/demos/03}
mkdir -p "$LOGS"

run() {  # label chapter log_every
  local log="$LOGS/$1.txt"
  echo "== $1: $TRAINER --chapter $2 --log-every $3 (log: $log)" >&2
  "$TRAINER" --chapter "$2" -b "$B" -t "$T" --steps "$STEPS" --val-every 0 --sample-tokens 0 \
    --log-every "$3" --count-syncs > "$log" 2>&1 || { tail -5 "$log" >&2; exit 1; }
}

# Medians over the steps after WARMUP, and the waits per step over the log
# intervals that start after it. Prints one line of numbers:
#   steps ms span fwd bwd opt syncs launch copies stream event device
summarize() {
  awk -v warmup="$WARMUP" '
    function median(a, n,   i, j, t) {
      for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
      return n == 0 ? 0 : (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2)
    }
    /^step +[0-9]+\/[0-9]+ \| loss/ {
      split($2, s, "/"); if (s[1] + 0 <= warmup) next
      n++
      for (i = 1; i <= NF; i++) {
        if ($(i + 1) == "ms" && $(i - 1) == "|") ms[n] = $i
        if ($i == "fwd") f[n] = $(i + 1)
        if ($i == "bwd") b[n] = $(i + 1)
        if ($i == "opt") o[n] = $(i + 1)
      }
      span[n] = f[n] + b[n] + o[n]
    }
    /^syncs \| steps/ {
      split($4, r, "-"); if (r[1] + 0 <= warmup) next
      k = r[2] - r[1] + 1; nsteps += k
      line = $0; sub(/^[^|]*\|[^|]*\|[^|]*\| /, "", line)
      m = split(line, kinds, ", ")
      for (i = 1; i <= m; i++) { c = split(kinds[i], w, " "); kind_total[i] += w[c] * k }
      total += $6 * k
    }
    END {
      printf "%d %.2f %.2f %.2f %.2f %.2f %.2f", n, median(ms, n), median(span, n), median(f, n),
             median(b, n), median(o, n), nsteps ? total / nsteps : 0
      for (i = 1; i <= 5; i++) printf " %.2f", nsteps ? kind_total[i] / nsteps : 0
      printf "\n"
    }' "$1"
}

run ch02 2 "$LOG_EVERY"
run ch03 3 "$LOG_EVERY"
run ch03-log1 3 1
S2=$(summarize "$LOGS/ch02.txt") S3=$(summarize "$LOGS/ch03.txt") S1=$(summarize "$LOGS/ch03-log1.txt")

echo
grep -m1 '^device:' "$LOGS/ch02.txt"
echo "B=$B T=$T, $STEPS steps; steps $((WARMUP + 1))-$STEPS counted (times: medians; waits: mean per step)"
echo
# The table, and the CSV's rows; busy is chapter 03's device span per step.
awk -v le="$LOG_EVERY" -v csv="${DEMO_CSV:-}" -v s2="$S2" -v s3="$S3" -v s1="$S1" 'BEGIN {
  n = split(s2, t, " "); for (k = 1; k <= n; k++) r[1, k] = t[k]
  n = split(s3, t, " "); for (k = 1; k <= n; k++) r[2, k] = t[k]
  n = split(s1, t, " "); for (k = 1; k <= n; k++) r[3, k] = t[k]
  label[1] = "ch02"; label[2] = "ch03"; label[3] = "ch03-log1"
  chap[1] = 2; chap[2] = 3; chap[3] = 3; every[1] = le; every[2] = le; every[3] = 1
  busy = r[2, 3]
  printf "%-36s %12s %12s %12s\n", "", "ch02", "ch03", "ch03"
  printf "%-36s %12s %12s %12s\n", "", "log every " le, "log every " le, "log every 1"
  row("waits per step", 7, 0); row("  after launches", 8, 0); row("  cudaMemcpy", 9, 0)
  row("  stream", 10, 0); row("  event", 11, 0); row("  device", 12, 0)
  row("ms per step (wall)", 2, 1); row("device span per step (events)", 3, 1)
  printf "%-36s %12.2f %12.2f %12.2f\n", "GPU busy per step (ch03 span)", busy, busy, busy
  printf "%-36s %12.2f %12.2f %12.2f\n", "GPU idle per step (wall - busy)",
         r[1, 2] - busy, r[2, 2] - busy, r[3, 2] - busy
  printf "%-36s %12.2f %12.2f %12.2f\n", "  inside the steps (span - busy)",
         r[1, 3] - busy, r[2, 3] - busy, r[3, 3] - busy
  printf "%-36s %12.2f %12.2f %12.2f\n", "  between the steps (wall - span)",
         r[1, 2] - r[1, 3], r[2, 2] - r[2, 3], r[3, 2] - r[3, 3]
  if (csv != "") {
    print "run,chapter,log_every,steps,waits_per_step,launch_checks,copies,stream,event,device," \
          "ms_per_step,device_span_ms,forward_ms,backward_ms,optimizer_ms,busy_ms,idle_ms" > csv
    for (i = 1; i <= 3; i++)
      printf "%s,%d,%d,%d,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f\n",
             label[i], chap[i], every[i], r[i, 1], r[i, 7], r[i, 8], r[i, 9], r[i, 10], r[i, 11],
             r[i, 12], r[i, 2], r[i, 3], r[i, 4], r[i, 5], r[i, 6], busy, r[i, 2] - busy > csv
    print "wrote " csv
  }
}
function row(name, k, two) {
  printf(two ? "%-36s %12.2f %12.2f %12.2f\n" : "%-36s %12.1f %12.1f %12.1f\n", name, r[1, k],
         r[2, k], r[3, k])
}'

# The same losses and gradient norms, as printed, at every step both runs printed.
echo
awk -F'|' '
  $1 ~ /^step +[0-9]+\// { key = $1; gsub(/ /, "", key) }
  FNR == NR { if ($1 ~ /^step +[0-9]+\//) want[key] = $2 "|" $4; next }
  $1 ~ /^step +[0-9]+\// && key in want {
    n++
    if (want[key] != $2 "|" $4) { bad++; print "DIFFER at " key ": ch02" want[key] "; ch03" $2 "|" $4 }
  }
  END {
    if (bad) { print bad " of " n " steps differ between ch02 and ch03"; exit 1 }
    print "losses and gradient norms: the same in ch02 and ch03 at all " n " steps that ch02 printed"
  }' "$LOGS/ch02.txt" "$LOGS/ch03.txt"
