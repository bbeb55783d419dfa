#!/usr/bin/env bash
# test_clocks_by_row.sh: tools/clocks_by_row.py, which gives each row of a
# timed run the SM clock and power nvidia-smi logged during it (chapter 12's
# power_limit.sh), on a made-up log: 1500 MHz at 700 W for the first five
# seconds, 1900 MHz at 500 W after, a sample every 100 ms; and each kernel of
# a training step its clocks (ncu's) over its time (the trainer's profile).
source "$(dirname "$0")/lib.sh"

clocks() {
  python3 - <<'PY'
import datetime
t0 = datetime.datetime(2026, 11, 27, 10, 0, 0)
print("timestamp, clocks.current.sm [MHz], power.draw.instant [W], temperature.gpu")
for i in range(101):
    t = t0 + datetime.timedelta(milliseconds=100 * i)
    mhz, w = (1500, 700.0) if i < 50 else (1900, 500.0)
    print(f"{t:%Y/%m/%d %H:%M:%S}.{t.microsecond // 1000:03d}, {mhz} MHz, {w:.2f} W, 60")
print("2026/11/27 10:00:10.1")  # cut short when nvidia-smi was stopped
PY
}

sweep_log() {
  cat <<'LOG'
2026/11/27 10:00:00.500 impl     pass        B     T         ms   TFLOP/s   kept MiB  scratch MiB
2026/11/27 10:00:04.000 flash-v4 forward    64  1024     0.3492     295.2        3.0          3.0
2026/11/27 10:00:09.000 pytorch-sdpa-cudnn backward   16  1024     0.2960     233.5   Memset + x
2026/11/27 10:01:00.000 flash-v4 backward   64  1024     1.0255     251.3        3.0          3.0
LOG
}

# Steps 1 and 2 are the warm-up; 3 to 6 take 100, 110, 120 and 130 ms, all
# past the fifth second.
trainer_log() {
  cat <<'LOG'
2026/11/27 10:00:03.000 chapter 12: Attention at Hopper's pace
2026/11/27 10:00:05.000 step     1/6 | loss 10.8792 | lr 6.00e-05 | norm 21.428 | 2000.0 ms | 22636 tok/s
2026/11/27 10:00:05.900 step     2/6 | loss 9.8449 | lr 1.20e-04 | norm 8.038 | 900.0 ms | 547136 tok/s
2026/11/27 10:00:06.100 step     3/6 | loss 9.3799 | lr 1.80e-04 | norm 3.808 | 100.0 ms | 544225 tok/s
2026/11/27 10:00:06.210 step     4/6 | loss 9.4719 | lr 2.40e-04 | norm 4.632 | 110.0 ms | 561280 tok/s
2026/11/27 10:00:06.330 step     5/6 | loss 8.9907 | lr 3.00e-04 | norm 2.886 | 120.0 ms | 557833 tok/s
2026/11/27 10:00:06.460 step     6/6 | loss 8.8388 | lr 3.60e-04 | norm 2.853 | 130.0 ms | 570204 tok/s
LOG
}

each_row_gets_the_clock_of_its_own_window() {
  clocks >"$work/clocks.csv"
  sweep_log >"$work/sweep.txt"
  trainer_log >"$work/ch12-B64.txt"
  expect_status 0 python3 tools/clocks_by_row.py "$work/clocks.csv" "$work/ch12-B64.txt" \
    "$work/sweep.txt" --hold-ms 3000 --warmup 2 || return 1
  cp "$work/out" "$work/rows.csv"
  says "$work/rows.csv" "label,ms,sm_mhz,power_w,samples,kclocks" || return 1
  # The trainer: the median of steps 3 to 6, the samples from 6.0 to 6.4 s.
  says "$work/rows.csv" "ch12-B64,115.0000,1900,500,5,218500" || return 1
  # The sweep: the 3 s before each line, 1.0 to 4.0 s and 6.0 to 9.0 s; B=16
  # names no batch.
  says "$work/rows.csv" "flash-v4-forward-1024-B64,0.3492,1500,700,31,524" || return 1
  says "$work/rows.csv" "pytorch-sdpa-cudnn-backward-1024,0.2960,1900,500,31,562" || return 1
  # A row no sample saw: its clock left empty, not made up.
  says "$work/rows.csv" "flash-v4-backward-1024-B64,1.0255,,,0," || return 1
  [ "$(wc -l <"$work/rows.csv")" = 5 ] || fail "rows: $(cat "$work/rows.csv")"
}

a_window_mixing_two_clocks_averages_them() {
  clocks >"$work/clocks.csv"
  echo "2026/11/27 10:00:06.000 flash-v3 forward    64  1024     0.4000     230.1" >"$work/sweep.txt"
  expect_status 0 python3 tools/clocks_by_row.py "$work/clocks.csv" "$work/sweep.txt" \
    --hold-ms 2000 || return 1
  # 4.0 to 6.0 s: 10 samples at 1500 and 11 at 1900.
  says "$work/out" "flash-v3-forward-1024-B64,0.4000,1710,595,21,684"
}

lines_stamped_by_stamp_lines_are_read_back() {
  source tools/demo_env.sh
  local now  # a sample taken just before the row's line comes
  now=$(date +'%Y/%m/%d %H:%M:%S.%3N')
  printf 'flash-v4 forward    64  1024     0.3492     295.2\n' | stamp_lines >"$work/sweep.txt"
  printf 'timestamp, clocks.current.sm [MHz], power.draw [W]\n%s, 1755 MHz, 699.10 W\n' "$now" \
    >"$work/clocks.csv"
  expect_status 0 python3 tools/clocks_by_row.py "$work/clocks.csv" "$work/sweep.txt" \
    --hold-ms 60000 || return 1
  says "$work/out" "flash-v4-forward-1024-B64,0.3492,1755,699,1,613"
}

a_log_without_a_clock_column_is_refused() {
  printf 'timestamp, power.draw [W]\n' >"$work/clocks.csv"
  sweep_log >"$work/sweep.txt"
  expect_status 1 python3 tools/clocks_by_row.py "$work/clocks.csv" "$work/sweep.txt" || return 1
  says "$work/err" "clocks.csv: no SM clock column"
}

# ncu --csv of three launches of the forward pass, one of the dQ kernel and
# one of a kernel the profile does not time, among ncu's own notes.
ncu_csv() {
  local head='"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
  local fwd='<unnamed>::flash_attention_forward_persistent_kernel(CUtensorMap_st, __nv_bfloat16 *, float *, int, int, int, int)'
  local dq='void <unnamed>::flash_attention_backward_dq_tma_kernel<1>(CUtensorMap_st, CUtensorMap_st, __nv_bfloat16 *, float *)'
  echo "==PROF== Connected to process 1742"
  echo "$head"
  local i=0 kernel cycles
  for kernel_cycles in "$fwd|531,874" "$fwd|528000" "$fwd|535000" "$dq|704676" "other_kernel(int)|1000"; do
    kernel=${kernel_cycles%|*} cycles=${kernel_cycles#*|}
    echo "\"$i\",\"1\",\"train_gpt2_bf16\",\"127.0.0.1\",\"$kernel\",\"1\",\"13\",\"(128, 1, 1)\",\"(396, 1, 1)\",\"0\",\"9.0\",\"Command line profiler metrics\",\"gpu__time_duration.sum\",\"us\",\"370.70\""
    echo "\"$i\",\"1\",\"train_gpt2_bf16\",\"127.0.0.1\",\"$kernel\",\"1\",\"13\",\"(128, 1, 1)\",\"(396, 1, 1)\",\"0\",\"9.0\",\"Command line profiler metrics\",\"sm__cycles_elapsed.max\",\"cycle\",\"$cycles\""
    i=$((i + 1))
  done
  echo "==WARNING== Note: Running with uncontrolled GPU caches."
}

profile_csv() {
  cat <<'CSV'
kernel,calls_per_step,ms_per_step,share
"classifier_fused_kernel_v2",1.00,7.5383,0.0641
"flash_attention_backward_dq_tma_kernel",12.00,5.8920,0.0500
"flash_attention_forward_persistent_kernel",12.00,4.3440,0.0370
CSV
}

a_kernels_clock_in_the_step_is_its_clocks_over_its_time() {
  clocks >"$work/clocks.csv"
  : >"$work/empty.txt"
  ncu_csv >"$work/ncu.csv"
  profile_csv >"$work/profile.csv"
  expect_status 0 python3 tools/clocks_by_row.py "$work/clocks.csv" "$work/empty.txt" \
    --ncu "$work/ncu.csv" --profile "$work/profile.csv" || return 1
  # 4.344 ms over 12 calls is 0.362 ms; the median of the three launches,
  # 531,874 clocks, in it is 1469 MHz. The dQ kernel: 704,676 in 0.491 ms.
  says "$work/out" "flash_attention_forward_persistent_kernel,0.3620,1469,,3,532" || return 1
  says "$work/out" "flash_attention_backward_dq_tma_kernel,0.4910,1435,,1,705" || return 1
  ! grep -q other_kernel "$work/out" || fail "a kernel the profile does not time got a row"
  [ "$(wc -l <"$work/out")" = 3 ] || fail "rows: $(cat "$work/out")"
  expect_status 1 python3 tools/clocks_by_row.py "$work/clocks.csv" "$work/empty.txt" \
    --ncu "$work/ncu.csv" || return 1
  says "$work/err" "--ncu and --profile go together"
}

check each_row_gets_the_clock_of_its_own_window
check a_window_mixing_two_clocks_averages_them
check lines_stamped_by_stamp_lines_are_read_back
check a_log_without_a_clock_column_is_refused
check a_kernels_clock_in_the_step_is_its_clocks_over_its_time
finish
