#!/usr/bin/env python3
"""clocks_by_row.py: the SM clock and the power the GPU ran at during each row
of a timed run, from nvidia-smi's log and the run's own output, its lines
stamped as they were printed (tools/demo_env.sh: log_clocks, stamp_lines).

    python3 tools/clocks_by_row.py CLOCKS_CSV LOG [LOG...] [--hold-ms MS]
        [--warmup N] [--ncu NCU_CSV --profile PROFILE_CSV] > OUT_CSV

Why: an H100 at its power limit lowers its clock to stay there, by as much
as the work draws, so two kernels timed apart may have run at different
clocks. A kernel's time is its clocks divided by the clock rate; this says
which of the two a difference in time came from.

CLOCKS_CSV is nvidia-smi's --format=csv log (timestamp, clocks.sm and
power.draw.instant or power.draw, by their headers). Each LOG line starts
with the time it was printed, as nvidia-smi writes its timestamps
("2026/11/27 04:38:36.471 text"). Two kinds of lines are rows:

  a sweep's row (attention_sweep.cu, sdpa_sweep.py): "IMPL PASS B T MS ...",
      timed after a hold of --hold-ms; its window is the --hold-ms before
      the line was printed: the end of the hold and the timing, when the
      GPU ran nothing but that graph. Labelled as the sweeps label their CSV rows:
      IMPL-PASS-T, with -BN at a batch N other than 16.
  a trainer's step: "step N/M | ... | MS ms | ...", the window the MS before
      the line. A log's steps past the first --warmup make one row,
      labelled by the log's file name (logs/ch12-B64.txt: ch12-B64), with
      the median step's ms.

Inside a training step nvidia-smi's samples are too far apart to tell one
kernel from the next, so a kernel's clock there comes from two runs of the
step: with --ncu, Nsight Compute's CSV (--csv, the metric
sm__cycles_elapsed.max) of the kernels of one step, and with --profile, the
trainer's --profile-csv. A kernel takes the same clocks at any clock rate
as long as it is bound by its own work, so its cycles over its time per
call in the profile are the clock it ran at in the step. One row per kernel
that both name, labelled as the profile labels it; its power is empty.

Each row of the output: label, ms, the mean SM clock in MHz and the mean
power in W over the samples in its windows, how many samples, and kclocks =
ms x MHz, the thousands of clocks the row's time is at its mean clock. A
row whose windows hold no sample has empty fields.
"""
import argparse
import csv
import datetime
import os
import re
import statistics
import sys

STAMP = "%Y/%m/%d %H:%M:%S.%f"
UNSUFFIXED_B = 16  # the batch whose sweep rows' labels name no batch
SWEEP_ROW = re.compile(r"^(\S+)\s+(forward|backward)\s+(\d+)\s+(\d+)\s+([\d.]+)\s")
STEP_ROW = re.compile(r"^step\s+(\d+)/\d+\s.*\|\s*([\d.]+) ms\s*\|")


def parse_time(text):
    return datetime.datetime.strptime(text.strip(), STAMP)


def read_clocks(path):
    """[(time, MHz, W)] from nvidia-smi's CSV, its columns found by header."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f, skipinitialspace=True))
    if not rows:
        sys.exit(f"clocks_by_row: {path}: empty")
    head = [h.strip() for h in rows[0]]

    def column(pred, what):
        for i, h in enumerate(head):
            if pred(h):
                return i
        sys.exit(f"clocks_by_row: {path}: no {what} column in its header {head}")

    t = column(lambda h: h == "timestamp", "timestamp")
    mhz = column(lambda h: h.startswith("clocks.") and ".sm " in h + " ", "SM clock")
    watts = column(lambda h: h.startswith("power.draw"), "power.draw")
    samples = []
    for r in rows[1:]:
        try:
            samples.append((parse_time(r[t]), float(r[mhz].split()[0]),
                            float(r[watts].split()[0])))
        except (IndexError, ValueError):
            continue  # a line nvidia-smi cut short when it was stopped
    return samples


def stamped_lines(path):
    """(time, text) of each line of a log that starts with a stamp."""
    with open(path, errors="replace") as f:
        for line in f:
            try:
                yield parse_time(line[:23]), line[24:].rstrip("\n")
            except ValueError:
                continue


def in_windows(samples, windows):
    return [s for s in samples if any(a <= s[0] <= b for a, b in windows)]


def row(label, ms, samples):
    if not samples:
        return [label, f"{ms:.4f}", "", "", "0", ""]
    mhz = statistics.fmean(s[1] for s in samples)
    watts = statistics.fmean(s[2] for s in samples)
    return [label, f"{ms:.4f}", f"{mhz:.0f}", f"{watts:.0f}", str(len(samples)),
            f"{ms * mhz:.0f}"]


def rows_of_log(path, samples, hold_ms, warmup):
    """The sweep rows of a log, one each, then its timed steps as one row."""
    out, steps = [], []
    for when, text in stamped_lines(path):
        m = SWEEP_ROW.match(text)
        if m:
            impl, pass_, B, T, ms = m.group(1), m.group(2), int(m.group(3)), m.group(4), float(m.group(5))
            label = f"{impl}-{pass_}-{T}" + ("" if B == UNSUFFIXED_B else f"-B{B}")
            window = (when - datetime.timedelta(milliseconds=hold_ms), when)
            out.append(row(label, ms, in_windows(samples, [window])))
            continue
        m = STEP_ROW.match(text)
        if m and int(m.group(1)) > warmup:
            ms = float(m.group(2))
            steps.append((when - datetime.timedelta(milliseconds=ms), when, ms))
    if steps:
        label = os.path.splitext(os.path.basename(path))[0]
        windows = [(a, b) for a, b, _ in steps]
        out.append(row(label, statistics.median(ms for _, _, ms in steps),
                       in_windows(samples, windows)))
    return out


def kernel_name(signature):
    """A kernel as the profile names it: ncu's "void <unnamed>::f<1>(int, ...)" -> f."""
    name = signature.replace("void ", "").replace("<unnamed>::", "")
    return name.split("(")[0].split("<")[0].rsplit("::", 1)[-1].strip()


def ncu_cycles(path):
    """{kernel: [sm__cycles_elapsed.max of each of its launches]} from ncu --csv."""
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu's own notes are not CSV
    cycles = {}
    for r in csv.DictReader(lines):
        if r.get("Metric Name") == "sm__cycles_elapsed.max":
            value = float(r["Metric Value"].replace(",", ""))
            cycles.setdefault(kernel_name(r["Kernel Name"]), []).append(value)
    if not cycles:
        sys.exit(f"clocks_by_row: {path}: no sm__cycles_elapsed.max in its CSV")
    return cycles


def rows_in_step(ncu_path, profile_path):
    """Each kernel of the ncu run that the profile times: its clock in the step."""
    with open(profile_path, newline="") as f:
        profile = {r["kernel"]: r for r in csv.DictReader(f)}
    out = []
    for kernel, cycles in ncu_cycles(ncu_path).items():
        if kernel not in profile:
            continue
        r = profile[kernel]
        ms = float(r["ms_per_step"]) / float(r["calls_per_step"])
        clocks = statistics.median(cycles)
        out.append([kernel, f"{ms:.4f}", f"{clocks / (ms * 1e3):.0f}", "", str(len(cycles)),
                    f"{clocks / 1e3:.0f}"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("clocks")
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--hold-ms", type=float, default=1000.0,
                    help="how long each sweep row's graph was held before it was timed")
    ap.add_argument("--warmup", type=int, default=5, help="a trainer's steps left out")
    ap.add_argument("--ncu", help="ncu --csv's sm__cycles_elapsed.max of a step's kernels")
    ap.add_argument("--profile", help="the trainer's --profile-csv of the same step")
    a = ap.parse_args()
    if a.hold_ms <= 0:
        sys.exit(f"clocks_by_row: --hold-ms {a.hold_ms}: a sweep row's window needs a hold")
    if (a.ncu is None) != (a.profile is None):
        sys.exit("clocks_by_row: --ncu and --profile go together")
    samples = read_clocks(a.clocks)
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(["label", "ms", "sm_mhz", "power_w", "samples", "kclocks"])
    for path in a.logs:
        w.writerows(rows_of_log(path, samples, a.hold_ms, a.warmup))
    if a.ncu:
        w.writerows(rows_in_step(a.ncu, a.profile))


if __name__ == "__main__":
    main()
