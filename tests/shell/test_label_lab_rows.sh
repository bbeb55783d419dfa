#!/usr/bin/env bash
# test_label_lab_rows.sh: tools/demo_env.sh's label_lab_rows, which names the
# kernel lab's rows for the book (family-version, and the shape's name with
# `shape`), reads the lab's CSV by position: it must name the rows of a file
# from before the lab wrote min_ms, max_ms and l2 and of one with them alike,
# and keep every column of each.
source "$(dirname "$0")/lib.sh"
source tools/demo_env.sh

before() {
  cat <<'CSV'
family,version,precision,chapter,shape,ms,bytes,flops,rate,peak_fraction,error,tolerance,check
attention_forward,v3 flash wgmma,bf16,5,"B64 T1024 NH12 hs64",0.42400,0,2.062e+11,486.32,0.4917,3.5e-03,3.0e-02,ok
matmul_forward,v2 lt,bf16,4,"lm_head 50304 16384x50304x768",1.88100,1750794240,1.266e+12,673.04,0.6805,2.7e-03,3.0e-02,ok
CSV
}

# The same rows as the lab writes them now: three more columns at the end.
after() {
  before | awk 'NR == 1 {print $0 ",min_ms,max_ms,l2"; next} {print $0 ",0.40000,0.45000,flushed"}'
}

rows_are_named_alike_before_and_after_the_new_columns() {
  before >"$work/before.csv"
  after >"$work/after.csv"
  for shape in "" shape; do
    label_lab_rows "$work/before.csv" $shape | cut -d, -f1 >"$work/names_before"
    label_lab_rows "$work/after.csv" $shape | cut -d, -f1 >"$work/names_after"
    cmp -s "$work/names_before" "$work/names_after" ||
      fail "with '$shape': $(paste -d' ' "$work/names_before" "$work/names_after" | tr '\n' ';')"
  done
  label_lab_rows "$work/after.csv" shape >"$work/labelled.csv"
  says "$work/labelled.csv" "label,family,version,precision,chapter,shape,ms,bytes,flops,rate,peak_fraction,error,tolerance,check,min_ms,max_ms,l2" || return 1
  says "$work/labelled.csv" "attention_forward-v3-flash-wgmma-B64-T1024-NH12,attention_forward," || return 1
  says "$work/labelled.csv" "matmul_forward-v2-lt-lm_head-50304,matmul_forward," || return 1
  says "$work/labelled.csv" ",ok,0.40000,0.45000,flushed"
}

# lab_family_csv: the named rows of one family from a stand-in lab, its
# output kept; a lab that fails stops the script with its output and a word.
lab_family_csv_names_the_rows_and_stops_on_a_failed_lab() {
  mkdir -p "$work/demo/logs"
  after >"$work/after.csv"
  printf '%s\n' '#!/usr/bin/env bash' \
    '[ "$1 $2" = "--only attention" ] || { echo "lab: not asked for attention: $*"; exit 1; }' \
    'echo "the lab'"'"'s table"' \
    "cat '$work/after.csv' >\"\$4\"" >"$work/lab"
  chmod +x "$work/lab"
  LAB=$work/lab expect_status 0 bash -c "source tools/demo_env.sh; lab_family_csv attention '$work/demo' shape" || return 1
  says "$work/demo/lab.csv" "attention_forward-v3-flash-wgmma-B64-T1024-NH12,attention_forward," || return 1
  says "$work/demo/logs/lab.txt" "the lab's table" || return 1
  [ ! -e "$work/demo/lab_raw.csv" ] || fail "lab_raw.csv left behind" || return 1
  LAB=$work/lab expect_status 1 bash -c "source tools/demo_env.sh; lab_family_csv optimizer '$work/demo'; echo went on" || return 1
  says "$work/out" "the kernel lab failed (above)" || return 1
  says "$work/out" "lab: not asked for attention" || return 1
  ! grep -q "went on" "$work/out" || fail "the script went on after the failed lab"
}

check rows_are_named_alike_before_and_after_the_new_columns
check lab_family_csv_names_the_rows_and_stops_on_a_failed_lab
finish
