# demo_env.sh: what the chapters' demo scripts share, sourced by them.
#   gpu_slug                the GPU's short name for results/<gpu>/ (h100, h200, ...)
#   write_environment F S   F: the GPU, driver, PyTorch (when PYTHON is set), date and
#                           commit (COMMIT names the code when the tree was copied
#                           without its .git folder), and S, the run's settings
#   label_lab_rows F [shape]  the kernel lab's CSV F with a first column, label:
#                           family-version, and with `shape` the shape's name too
#                           (its words but the last, the dimensions), for a family
#                           timed at several shapes; so that the book can name a row
#   log_clocks F MS         nvidia-smi's SM clock, power and temperature every MS ms
#                           into F, in the background until stop_clocks; the power
#                           as drawn at the sample (power.draw.instant) where the
#                           driver knows it, not its one-second average
#   stamp_lines             each line of its input with the time it came, as
#                           nvidia-smi stamps its samples (tools/clocks_by_row.py)
gpu_slug() {
  nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oiE 'H100|H200|A100|L40S|L4' \
    | head -1 | tr 'A-Z' 'a-z'
}

write_environment() {
  {
    echo "gpu: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
    echo "driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
    [ -n "${PYTHON:-}" ] && echo "pytorch: $($PYTHON -c 'import torch; print(torch.__version__)' 2>/dev/null)"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: ${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
    echo "settings: $2"
  } > "$1"
}

label_lab_rows() {
  awk -F, -v shape="${2:-}" 'NR == 1 {print "label," $0; next}
    {l = $1 "-" $2
     if (shape != "") {s = $5; gsub(/"/, "", s); n = split(s, w, " "); for (i = 1; i < n; i++) l = l "-" w[i]}
     gsub(/ /, "-", l); print l "," $0}' "$1"
}

# The kernel lab's rows of one family ($LAB --only FAMILY) into DIR/lab.csv,
# each named by label_lab_rows (with the shape's name when the third
# argument is `shape`); the lab's output to DIR/logs/lab.txt and the
# terminal. A lab that fails stops the demo, saying so.
lab_family_csv() {  # family dir [shape]
  rm -f "$2/lab.csv" "$2/lab_raw.csv"
  "$LAB" --only "$1" --csv "$2/lab_raw.csv" > "$2/logs/lab.txt" 2>&1 || {
    cat "$2/logs/lab.txt"; echo "the kernel lab failed (above)"; exit 1; }
  cat "$2/logs/lab.txt"
  label_lab_rows "$2/lab_raw.csv" "${3:-}" > "$2/lab.csv" && rm -f "$2/lab_raw.csv"
}

log_clocks() {  # file ms
  local power=power.draw.instant
  nvidia-smi --query-gpu=$power --format=csv,noheader > /dev/null 2>&1 || power=power.draw
  nvidia-smi --query-gpu=timestamp,clocks.sm,$power,temperature.gpu --format=csv -lms "$2" \
    > "$1" &
  clock_logger=$!
}

stop_clocks() {
  [ -z "${clock_logger:-}" ] || kill "$clock_logger" 2> /dev/null || true
  clock_logger=
}

# The local time, as nvidia-smi's timestamps are.
stamp_lines() {
  local line
  while IFS= read -r line; do printf '%s %s\n' "$(date +'%Y/%m/%d %H:%M:%S.%3N')" "$line"; done
}
