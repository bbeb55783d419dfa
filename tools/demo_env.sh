# demo_env.sh: what the chapters' demo scripts share, sourced by them.
#   gpu_slug                the GPU's short name for results/<gpu>/ (h100, h200, ...)
#   write_environment F S   F: the GPU, driver, PyTorch (when PYTHON is set), date and
#                           commit (COMMIT names the code when the tree was copied
#                           without its .git folder), and S, the run's settings
#   label_lab_rows F [shape]  the kernel lab's CSV F with a first column, label:
#                           family-version, and with `shape` the shape's name too
#                           (its words but the last, the dimensions), for a family
#                           timed at several shapes; so that the book can name a row
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
