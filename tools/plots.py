#!/usr/bin/env python3
"""plots.py: draw the benchmark results as figures for the book. Run by `make plots`.

For every folder results/<gpu>/ that holds a results.csv (written by
tools/bench.sh, `make bench`), this reads

    results/<gpu>/results.csv       one row per run (median over the timed steps)
    results/<gpu>/environment.txt   the GPU's name and the benchmark's settings
    results/<gpu>/logs/chNN.txt     each chapter's run, step by step

and writes results/<gpu>/plots/, each figure twice under one base name,
NAME.svg for the HTML book and NAME.pdf for the PDF book:

    throughput   tok/s per chapter, and beside each chapter the PyTorch run
                 that is its fair comparison (CHAPTER_PYTORCH below), run in
                 the chapter's session
    speedup      tok/s over chapter 00's, PyTorch's best run (the fastest of
                 its rows in chapter 00's session) as a line: the chapters of
                 chapter 00's session only (a ratio)
    waterfall    ms per step from chapter to chapter, each change a bar; a
                 change between two sessions hatched, without a number
    phases       ms per step split into data, forward, backward, optimizer
    loss_curves  loss per step of every chapter (they should overlap: each
                 chapter computes the same model), and each one's difference
                 from chapter 00's
    heatmap      tok/s per chapter (rows) and step (columns)
    profile_kinds  each chapter's profiled step (profile_chNN.csv), its kernels'
                 time grouped by kind (GEMMs, attention, ...), stacked on a
                 linear scale in two panels; the table, with each step's
                 launches (calls_per_step summed), is written beside it, as
                 profile_kinds.csv, with a row for each profile_chNN_BM.csv
                 (a larger batch, not drawn)
    optimizer    chapters 08 and 09's optimizer kernels (their profiles), and
                 the update's bytes at the memory's bandwidth
    final_roofline  the last chapter's step at the larger batch, its GEMMs and
                 attention on the bf16 roofline, from the benchmark's own
                 profile_chNN_BM.csv beside results.csv (the same session)
    roofline_chNN_BM  the same for chapter 11's demo's step
                 (last_mile/profile_chNN_BM.csv, the demo's session)
    gemm_roofline  from gemm_shapes.csv (chapter 01's demo), when present:
                 every GEMM of a step, fp32 and TF32, on the GPU's roofline

and beside results.csv, step_times.csv: each run's fastest and slowest timed
step, from its log (logs/ and the demos' logs/).

A results.csv may hold several sessions of `make bench` (APPEND=1 adds one and
says so in environment.txt): a figure compares rows only within a session,
and marks where the sessions change.

"Chapter" rows are those labelled exactly chNN, at the benchmark's base batch;
ablations (ch01-no-tensor-cores) and the larger batch (ch00-B32) are left out.

The output is deterministic: the same inputs give byte-identical files (no
dates, fixed SVG ids), and a file whose bytes would not change is not
rewritten, so regenerating leaves git and make alone.

    /usr/bin/python3 tools/plots.py [RESULTS_DIR]     (default: results)

It needs matplotlib. `make deps` installs Debian's python3-matplotlib, which
Debian's /usr/bin/python3 sees (a pyenv or venv python3 does not): `make
plots` runs /usr/bin/python3 unless another python3 has matplotlib, or
PLOTS_PYTHON names one.
"""

import csv
import io
import os
import re
import sys
import textwrap

# ---- chapter -> the PyTorch row that is its fair comparison --------------
# Chapter N's bar in throughput.svg stands beside the PyTorch run (a `label`
# in results.csv, written by tools/pytorch_reference.py) that uses the same
# numerics, so that the comparison is like for like:
#   0  FP32 baseline             eager PyTorch in FP32, TF32 off
#   1  FP32 GEMMs on tensor cores eager PyTorch with TF32 matmuls
# A tuple names several rows with the same numerics: the fastest of them in
# the chapter's session is the bar. PyTorch's best recipe (torch.compile, flash
# attention, fused AdamW) has two: pytorch-compile-bf16-flash, whose compiled
# forward returns the logits with the loss, and pytorch-lossonly, whose forward
# returns only the loss.
# A chapter not listed, or whose row is not in results.csv, gets no PyTorch bar.
BEST = ("pytorch-compile-bf16-flash", "pytorch-lossonly")
CHAPTER_PYTORCH = {
    0: "pytorch-eager-fp32",
    1: "pytorch-eager-tf32",
    2: "pytorch-eager-bf16",
    3: "pytorch-eager-bf16",  # eager bf16 already leaves loss.item() out of the step
    4: "pytorch-compile-bf16",  # torch.compile, the eager attention
    5: "pytorch-compile-bf16-sdpa",
    6: "pytorch-compile-bf16-sdpa-vocab",
    7: "pytorch-compile-bf16-sdpa-vocab-tied",
    8: BEST,  # + fused AdamW: PyTorch's best, the stronger of its two forms
    9: BEST,
    10: BEST,
    11: BEST,
    12: BEST,
}

# The first chapter whose model is not chapter 00's: weight tying (07) shares
# lm_head with wte, so its loss is another model's. The plot of losses that
# should agree stops before it; tying_loss compares it with chapter 06.
FIRST_OTHER_MODEL = 7

PHASES = [  # results.csv column, legend label, colour
    ("data_ms", "data", "#8c8c8c"),
    ("forward_ms", "forward", "#4c72b0"),
    ("backward_ms", "backward", "#dd8452"),
    ("optimizer_ms", "optimizer", "#55a868"),
]
OURS_COLOUR = "#4c72b0"
TORCH_COLOUR = "#ee4c2c"  # PyTorch's orange-red
FIGURES = ("throughput", "speedup", "waterfall", "phases", "loss_curves", "heatmap",
           "profile_kinds", "optimizer", "final_roofline", "roofline_chNN_BM", "gemm_roofline")
# Datasheet figures by GPU (the name in environment.txt), for the roofline:
# memory bandwidth in TB/s, dense FP32 and TF32 peaks in TFLOP/s. For a GPU
# not listed, the peaks come from gemm_shapes.csv itself (its TFLOP/s over
# its fraction of the peak) and the memory roof is left out.
DATASHEET = {"NVIDIA H100 80GB HBM3": {"hbm_tb_s": 3.35, "fp32": 66.9, "tf32": 494.7,
                                       "bf16": 989.4, "fp8": 1978.9}}

try:
    import matplotlib
except ImportError:
    sys.exit(
        f"plots: matplotlib is not installed for {sys.executable}.\n"
        "plots: `make deps` installs Debian's python3-matplotlib, for /usr/bin/python3;\n"
        "plots: or run `PLOTS_PYTHON=/path/to/python3 make plots` with one that has it."
    )
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import colors, ticker  # noqa: E402

matplotlib.rcParams.update({
    "svg.hashsalt": "gpt2-fast",  # fixed ids inside the SVG: reproducible files
    "svg.fonttype": "path",       # text drawn as paths: looks the same in every browser
    "pdf.fonttype": 42,           # TrueType fonts embedded in the PDF
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.axisbelow": True,
    "figure.dpi": 100,
})
# No creation dates or software versions in the files.
METADATA = {
    "svg": {"Date": None, "Creator": None},
    "pdf": {"CreationDate": None, "ModDate": None, "Creator": None, "Producer": None},
}

CHAPTER_LABEL = re.compile(r"^ch(\d\d)$")
STEP_LINE = re.compile(
    r"^step\s+(\d+)/(\d+)\s*\|\s*loss\s+(\S+)\s*\|.*?\|\s*([\d.]+)\s*ms\s*\|\s*([\d.]+)\s*tok/s")


# ---- reading -------------------------------------------------------------
def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def read_rows(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        for key in list(row):
            if key not in ("label", "chapter"):
                row[key] = number(row[key])
    return rows


def read_environment(path):
    env = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep:
                    env[key.strip()] = value.strip()
    settings = dict(re.findall(r"(\w+)=(\d+)", env.get("settings", "")))
    env["warmup"] = int(settings["warmup"]) if "warmup" in settings else None
    return env


APPENDED = re.compile(r"^appended:\s*(\S+), commit (\w+): chapters ([\d ]+)")


def read_sessions(env_path, rows):
    """The `make bench` session of each row of results.csv, {label: k}, and the
    sessions [(date, commit)]: 0 is the run that wrote the file, k the k-th
    'appended:' line of environment.txt (tools/bench.sh, APPEND=1). An appended
    session adds its rows after the others, beginning with a chapter it names;
    every row after that, PyTorch's included, is its own until the next one."""
    env = read_environment(env_path)
    sessions = [(env.get("date", "")[:16].replace("T", " "), env.get("commit", ""))]
    appended = []
    if os.path.exists(env_path):
        with open(env_path) as f:
            for line in f:
                m = APPENDED.match(line.strip())
                if m:
                    sessions.append((m.group(1)[:16].replace("T", " "), m.group(2)))
                    appended.append({int(c) for c in m.group(3).split()})
    of, current = {}, 0
    for row in rows:
        m = re.match(r"^ch(\d\d)", row["label"])
        while m and current < len(appended) and int(m.group(1)) in appended[current]:
            current += 1  # this row opens the next appended session
            break
        of[row["label"]] = current
    return of, sessions


def read_log(path):
    """Steps of one trainer run: {'title', 'steps': [(step, loss, ms, tok/s)], 'total'}."""
    run = {"title": "", "model": "", "steps": [], "total": None}
    # A log's samples are GPT-2's tokens decoded one at a time: a character of
    # several bytes may be split across two tokens, and not be UTF-8 alone.
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.match(r"^chapter\s+\d+:\s*(.*)$", line)
            if m and not run["title"]:
                run["title"] = m.group(1).strip()
            m = re.match(r"^model:\s*L=(\d+)\s+H=(\d+)\s+C=(\d+)", line)
            if m and not run["model"]:
                run["model"] = f"{m.group(1)} layers, {m.group(2)} heads, {m.group(3)} channels"
            m = STEP_LINE.match(line)
            if m:
                step, total = int(m.group(1)), int(m.group(2))
                run["steps"].append((step, number(m.group(3)), float(m.group(4)), float(m.group(5))))
                run["total"] = total
    return run


# ---- drawing helpers -----------------------------------------------------
def rel(path):
    """A path as the reader finds it in the repository."""
    return os.path.relpath(path, REPO)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def thousands(x):
    return f"{x:,.0f}"


def k_tokens(x, _pos=None):
    return f"{x / 1000:,.0f}k" if x >= 1000 else f"{x:,.0f}"


def short_title(title):
    """A chapter's title for a tick: without "The" and its parentheses' words."""
    title = re.sub(r"^The ", "", title)
    m = re.match(r"^(.*?) \((.*)\)$", title)  # "Tensor cores (TF32)" -> "TF32 tensor cores"
    if m:
        title = f"{m.group(2)} {m.group(1)[0].lower()}{m.group(1)[1:]}"
    return title


# A chapter's name under its bar, where fifteen bars share a figure's width:
# the chapter's title in a word or two. A chapter not listed gets its title.
TICK_NAMES = {0: "FP32", 1: "TF32", 2: "bf16", 3: "no syncs", 4: "fusion", 5: "flash\nattention",
              6: "vocab.\npadding", 7: "tying", 8: "data\nworkers", 9: "fused\nAdamW",
              10: "8-bit\nAdamW", 11: "last\nmile", 12: "Hopper\nattention",
              14: "fit\nmemory"}


def chapter_tick(ch, title, width=9):
    name = f"ch{ch:02d}"
    words = TICK_NAMES.get(ch) or "\n".join(textwrap.wrap(short_title(title), width))
    return name + ("\n" + words if words else "")


# Every figure is drawn at most FIGURE_WIDTH inches wide, which the PDF prints at
# about 6.1 inches (its text width) and the HTML at its column's width: so a
# label of 8 points prints at about 7, and none is drawn under 7.5.
FIGURE_WIDTH = 7.0


def new_figure(n_columns=None, height=4.4, width=FIGURE_WIDTH):
    return plt.subplots(figsize=(width, height))


def finish(ctx, fig, title, subtitle, sources, name, after_layout=None):
    """Title, subtitle and the source footnote; then write NAME.svg and NAME.pdf."""
    height = fig.get_figheight()  # inches: the header and footnote keep their size
    fig.text(0.01, 1 - 0.12 / height, title, fontsize=12, fontweight="bold", ha="left",
             va="top")
    lines = subtitle.count("\n") + 1
    fig.text(0.01, 1 - 0.42 / height, subtitle, fontsize=8.5, color="#444444", ha="left",
             va="top", linespacing=1.4)
    # The footnote, wrapped to the figure's width (7.5 pt DejaVu Sans: ~17 characters an inch).
    foot = textwrap.wrap("Source: " + sources + ctx["when"], int(fig.get_figwidth() * 17))
    fig.text(0.01, 0.08 / height, "\n".join(foot), fontsize=7.5, color="#666666", ha="left",
             va="bottom", linespacing=1.3)
    top = 0.55 + 0.17 * lines
    fig.tight_layout(rect=(0, (0.2 + 0.14 * len(foot)) / height, 1, 1 - top / height))
    if after_layout:
        after_layout()
    out_dir = ctx["out"]
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for fmt in ("svg", "pdf"):
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, metadata=METADATA[fmt])
        data = buf.getvalue()
        path = os.path.join(out_dir, f"{name}.{fmt}")
        if not os.path.exists(path) or read_bytes(path) != data:
            with open(path, "wb") as f:
                f.write(data)
            written.append(rel(path))
    plt.close(fig)
    return written


def label_bars(ax, bars, texts, size=7.5, rotation=0):
    """Each bar's value above it, on white so that a line behind does not hide it."""
    for bar, text in zip(bars, texts):
        x = bar.get_x() + bar.get_width() / 2
        ax.annotate(text, (x, bar.get_y() + bar.get_height()), xytext=(0, 2),
                    textcoords="offset points", ha="center", va="bottom", fontsize=size,
                    color="#222222", zorder=4, rotation=rotation,
                    bbox={"boxstyle": "square,pad=0.05", "fc": "white", "ec": "none"})


def mark_sessions(ax, chapters, ctx):
    """A dotted line between chapters measured in different `make bench` sessions,
    and each later session's number above its first chapter. Returns the note
    for the footnote, or "" when every chapter is of one session."""
    ids = [ch["session"] for ch in chapters]
    if len(set(ids)) < 2:
        return ""
    top = ax.get_ylim()[1]
    for x in range(1, len(chapters)):
        if ids[x] != ids[x - 1]:
            ax.axvline(x - 0.5, color="#999999", lw=0.8, ls=":", zorder=1)
            ax.text(x - 0.45, top, f"session {ids[x] + 1}", fontsize=7.5, color="#666666",
                    ha="left", va="top")
    sessions = ctx["sessions"]
    listed = "; ".join(f"{k + 1}: {sessions[k][0]} UTC, commit {sessions[k][1]}"
                       for k in sorted(set(ids)))
    return (f". The chapters come from {len(set(ids))} sessions of make bench ({listed}): "
            "compare bars within a session, not across the dotted lines")


def session_torch(ctx, ch, wanted):
    """The PyTorch row named `wanted` (a label, or a tuple of labels: the fastest of
    them) from chapter ch's session."""
    names = (wanted,) if isinstance(wanted, str) else wanted
    rows = [row for row in ctx["torch"].values()
            if row["label"] in names and ctx["session_of"][row["label"]] == ch["session"]]
    return max(rows, key=lambda r: r["tok_per_s"]) if rows else None


# ---- the figures ---------------------------------------------------------
def plot_throughput(ctx):
    chapters = ctx["chapters"]
    fig, ax = new_figure(height=4.6)
    xs = list(range(len(chapters)))
    # Each chapter beside PyTorch's recipe with its numerics, run in its session.
    paired = [session_torch(ctx, ch, CHAPTER_PYTORCH.get(ch["n"], "")) for ch in chapters]
    any_torch = any(paired)
    width = 0.4 if any_torch else 0.6
    off = width / 2 if any_torch else 0
    value = thousands if len(chapters) <= 4 else (lambda v: f"{v / 1000:.0f}k")
    ours = ax.bar([x - off for x in xs], [ch["row"]["tok_per_s"] for ch in chapters], width,
                  color=OURS_COLOUR, label="ours (C/CUDA)")
    label_bars(ax, ours, [value(ch["row"]["tok_per_s"]) for ch in chapters], rotation=90)
    pairs = [(x, row) for x, row in zip(xs, paired) if row]
    if pairs:
        tb = ax.bar([x + off for x, _ in pairs], [row["tok_per_s"] for _, row in pairs], width,
                    color=TORCH_COLOUR, label="PyTorch, the same numerics, the same session")
        label_bars(ax, tb, [value(row["tok_per_s"]) for _, row in pairs], rotation=90)
    ax.set_xticks(xs, [chapter_tick(ch["n"], ch["title"]) for ch in chapters], fontsize=7.5)
    ax.set_ylabel("tokens per second")
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(k_tokens))
    ax.tick_params(axis="y", labelsize=8)
    ax.grid(axis="y", color="#dddddd")
    ax.set_ylim(0, max(ch["row"]["tok_per_s"] for ch in chapters) * 1.55)
    ax.set_xlim(-0.6, len(chapters) - 0.4)
    ax.legend(loc="upper left", frameon=False, fontsize=8)
    note = mark_sessions(ax, chapters, ctx)
    sources = rel(ctx["csv"]) + "; PyTorch beside " + ", ".join(
        f"ch{ch['n']:02d}: {row['label']}" for ch, row in zip(chapters, paired) if row)
    return finish(ctx, fig, "Training throughput by chapter", ctx["subtitle"], sources + note,
                  "throughput")


def plot_speedup(ctx):
    """tok/s over chapter 00's: a ratio, so only of the chapters measured in chapter
    00's session, and PyTorch's best recipe of that session as the line to reach."""
    base = next((ch for ch in ctx["chapters"] if ch["n"] == 0), None)
    if base is None:
        return None, "no ch00 row to compare with"
    chapters = [ch for ch in ctx["chapters"] if ch["session"] == base["session"]]
    later = [ch for ch in ctx["chapters"] if ch["session"] != base["session"]]
    base_tps = base["row"]["tok_per_s"]
    fig, ax = new_figure(height=4.2)
    xs = list(range(len(chapters)))
    ups = [ch["row"]["tok_per_s"] / base_tps for ch in chapters]
    bars = ax.bar(xs, ups, 0.6, color=OURS_COLOUR, label="ours (C/CUDA)")
    label_bars(ax, bars, [f"{u:.2f}×" for u in ups], size=8)
    ax.axhline(1.0, color="#888888", lw=0.8, ls=":")
    top = max(ups + [1.0])
    torch = [r for r in ctx["torch"].values() if ctx["session_of"][r["label"]] == base["session"]]
    if torch:
        best = max(torch, key=lambda r: r["tok_per_s"])
        up = best["tok_per_s"] / base_tps
        ax.axhline(up, color=TORCH_COLOUR, lw=1.5, ls="--", zorder=3,
                   label=f"PyTorch's best here ({best['label']}): {up:.2f}×")
        top = max(top, up)  # the target line must be on the chart
    ax.set_xticks(xs, [chapter_tick(ch["n"], ch["title"]) for ch in chapters], fontsize=8)
    ax.set_ylabel("speed-up over chapter 00 (tok/s ÷ tok/s)")
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}×"))
    ax.set_ylim(0, top * 1.18)
    ax.grid(axis="y", color="#dddddd")
    ax.legend(loc="upper left", frameon=False, fontsize=8)
    note = ""
    if later:
        note = (". Chapters " + ", ".join(f"{ch['n']:02d}" for ch in later) + " were measured in "
                "later sessions (environment.txt): a ratio to chapter 00 would cross sessions, "
                "so they are not drawn")
    return finish(ctx, fig, "Speed-up over the baseline (chapter 00)", ctx["subtitle"],
                  rel(ctx["csv"]) + note, "speedup"), None


def plot_phases(ctx):
    chapters = [ch for ch in ctx["chapters"]
                if all(ch["row"].get(col) is not None for col, _, _ in PHASES)]
    if not chapters:
        return None, "no phase columns"
    left_out = [ch for ch in ctx["chapters"] if ch not in chapters]
    fig, ax = new_figure(height=4.6)
    xs = list(range(len(chapters)))
    totals = [sum(ch["row"][col] for col, _, _ in PHASES) for ch in chapters]
    bottom = [0.0] * len(chapters)
    for col, name, colour in PHASES:
        vals = [ch["row"][col] for ch in chapters]
        ax.bar(xs, vals, 0.66, bottom=bottom, color=colour, label=name)
        for x, b, v, total in zip(xs, bottom, vals, totals):  # label segments big enough
            if v >= 0.1 * max(totals):
                ax.text(x, b + v / 2, f"{v:.0f}\n{100 * v / total:.0f}%", ha="center",
                        va="center", fontsize=7.5, color="white")
        bottom = [b + v for b, v in zip(bottom, vals)]
    for x, ch, top in zip(xs, chapters, bottom):
        ax.annotate(f"{ch['row']['ms_per_step']:.1f}", (x, top), xytext=(0, 2),
                    textcoords="offset points", ha="center", va="bottom", fontsize=7.5)
    ax.set_xticks(xs, [chapter_tick(ch["n"], ch["title"]) for ch in chapters], fontsize=7.5)
    ax.set_ylabel("milliseconds per step (lower is better)")
    ax.set_ylim(0, max(bottom) * 1.12)
    ax.set_xlim(-0.6, len(chapters) - 0.4)
    ax.grid(axis="y", color="#dddddd")
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles[::-1], labels[::-1], loc="upper center", bbox_to_anchor=(0.5, 1.0),
              frameon=False, fontsize=8)
    note = ", columns " + ", ".join(col for col, _, _ in PHASES) + (
        ": the median of each phase; on top of each bar, the median step (ms)")
    if left_out:
        note += ("; no phases for " + ", ".join(f"ch{ch['n']:02d}" for ch in left_out)
                 + " (a replayed CUDA graph is not split by phase)")
    note += mark_sessions(ax, chapters, ctx)
    return finish(ctx, fig, "Where a training step's time goes, by chapter", ctx["subtitle"],
                  rel(ctx["csv"]) + note, "phases"), None


def log_sources(chapters):
    folder = rel(os.path.dirname(chapters[0]["log_path"]))
    return f"{folder}/chNN.txt for " + ", ".join(f"ch{ch['n']:02d}" for ch in chapters)


def log_chapters(ctx):
    return [ch for ch in ctx["chapters"] if ch["log"] and ch["log"]["steps"]]


def plot_loss(ctx):
    chapters = [ch for ch in log_chapters(ctx) if ch["n"] < FIRST_OTHER_MODEL]
    if not chapters:
        return None, "no logs"
    base = next((ch for ch in chapters if ch["n"] == 0), None)
    fig, (ax, dax) = plt.subplots(2, 1, sharex=True, figsize=(FIGURE_WIDTH, 5.4),
                                  gridspec_kw={"height_ratios": [3, 1.4]})
    cmap = plt.get_cmap("tab10")
    styles = ["-", "--", "-.", ":"]
    for i, ch in enumerate(chapters):
        steps = [s for s, *_ in ch["log"]["steps"]]
        loss = [l for _, l, _, _ in ch["log"]["steps"]]
        ax.plot(steps, loss, color=cmap(i % 10), ls=styles[i % 4], lw=2.6 if i == 0 else 1.6,
                label=f"ch{ch['n']:02d} {ch['title']}")
        if base is not None and ch is not base:
            ref = {s: l for s, l, _, _ in base["log"]["steps"]}
            pts = [(s, l - ref[s]) for s, l in zip(steps, loss)
                   if s in ref and l is not None and ref[s] is not None]
            dax.plot([p[0] for p in pts], [p[1] for p in pts], color=cmap(i % 10),
                     ls=styles[i % 4], lw=1.2, marker="o", ms=2.5)
    ax.set_ylabel("training loss")
    ax.grid(color="#eeeeee")
    ax.legend(frameon=False, fontsize=8.5)
    dax.axhline(0, color="#888888", lw=0.8)
    dax.set_xlabel("step")
    dax.set_ylabel("loss − ch00's")
    dax.grid(color="#eeeeee")
    lim = max([abs(v) for line in dax.get_lines() for v in line.get_ydata()] + [1e-4])
    dax.set_ylim(-1.3 * lim, 1.3 * lim)
    dax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:+.1e}" if v else "0"))
    last = max(s for ch in chapters for s, *_ in ch["log"]["steps"])
    dax.set_xlim(0.5, last + 0.5)
    dax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True, steps=[1, 2, 5, 10]))
    dax.xaxis.set_minor_locator(ticker.MultipleLocator(1))
    if base is None:
        dax.text(0.5, 0.5, "no ch00 log to compare with", transform=dax.transAxes, ha="center")
    ax.set_title("The logs print the loss to 4 decimals: differences of ±1e-4 are rounding",
                 fontsize=8, color="#666666", loc="right")
    sources = log_sources(chapters)
    return finish(ctx, fig, "Loss per step: every chapter trains the same model",
                  ctx["subtitle_log"], sources, "loss_curves"), None


VAL_LINE = re.compile(r"^step\s+(\d+)\s*\|\s*val loss\s+(\S+)")


def read_losses(path):
    """Training losses [(step, loss)] and validation losses [(step, loss)] of a log."""
    train, val = [], []
    with open(path) as f:
        for line in f:
            m = STEP_LINE.match(line)
            if m:
                train.append((int(m.group(1)), number(m.group(3))))
            m = VAL_LINE.match(line)
            if m:
                val.append((int(m.group(1)), number(m.group(2))))
    return train, val


def plot_two_runs(ctx, runs, demo, title, name, ylim, batch=16):
    """Two runs of a demo side by side: [(log name, label, colour)] from logs/, their
    training and validation losses, and the second's validation loss minus the first's."""
    logs = os.path.join(os.path.dirname(ctx["out"]), "logs")
    paths = [os.path.join(logs, log) for log, _, _ in runs]
    names = " and ".join(log for log, _, _ in runs)
    if not all(os.path.exists(p) for p in paths):
        return None, f"no logs/{names} ({demo})"
    fig, (ax, dax) = plt.subplots(2, 1, sharex=True, figsize=(FIGURE_WIDTH, 5.4),
                                  gridspec_kw={"height_ratios": [3, 1.4]})
    vals = []
    for path, (_, label, colour) in zip(paths, runs):
        train, val = read_losses(path)
        vals.append(dict(val))
        ax.plot([s for s, _ in train], [l for _, l in train], color=colour, lw=0.8, alpha=0.45)
        ax.plot([s for s, _ in val], [l for _, l in val], color=colour, lw=1.8, marker="o",
                ms=3.5, label=f"{label}: validation loss (training loss: thin)")
    ax.set_ylim(*ylim)
    ax.set_ylabel("loss (from 11 at step 0)")
    ax.grid(color="#eeeeee")
    ax.legend(frameon=False, fontsize=8.5)
    steps = sorted(set(vals[0]) & set(vals[1]))
    dax.bar(steps, [vals[1][s] - vals[0][s] for s in steps], width=12, color="#8172b3")
    dax.axhline(0, color="#888888", lw=0.8)
    first, second = (label.split(",")[0] for _, label, _ in runs)
    dax.set_ylabel(f"validation loss,\n{second} − {first}")
    dax.set_xlabel("step")
    dax.grid(color="#eeeeee")
    quiet = dict(ctx, when="")  # the demo's own run, not the benchmark's
    return finish(quiet, fig, title,
                  f"GPT-2 124M, B={batch}, T=1024, the same seed and batches\ndata: TinyShakespeare, "
                  "validation on its held-out tenth", f"{rel(logs)}/{names}, written by {demo}",
                  name), None


def plot_tying(ctx):
    """Chapter 07's demo: the untied and the tied model trained side by side."""
    return plot_two_runs(ctx, [("tying-ch06.txt", "ch06, untied lm_head", "#4c72b0"),
                               ("tying-ch07.txt", "ch07, lm_head tied to wte", "#c44e52")],
                         "make demo-07",
                         "Weight tying changes the model: untied and tied, side by side",
                         "tying_loss", (3.5, 8))


def plot_data_workers(ctx):
    """Chapter 08's demo: step time against the time to read a batch."""
    folder = os.path.join(os.path.dirname(ctx["out"]), "data_workers")
    path = os.path.join(folder, "runs.csv")
    if not os.path.exists(path):
        return None, "no data_workers/runs.csv (make demo-08)"
    rows = read_rows(path)
    lines = [("ch07-d", "ch07: read on the trainer's thread, numbers read every step", "#c44e52", "o"),
             ("ch07-log20-d", "ch07: the same, numbers read every 20 steps", "#dd8452", "s"),
             ("ch08-w1-d", "ch08: one worker thread", "#4c72b0", "^"),
             ("ch08-w2-d", "ch08: two worker threads", "#55a868", "v"),
             ("ch08-w4-d", "ch08: four worker threads", "#8172b3", "D")]
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 4.8))
    delays = []
    for prefix, name, colour, marker in lines:
        pts = sorted((number(r["label"][len(prefix):]), r["ms_per_step"]) for r in rows
                     if r["label"].startswith(prefix) and r["label"][len(prefix):].isdigit())
        delays += [d for d, _ in pts]
        ax.plot([d for d, _ in pts], [m for _, m in pts], color=colour, marker=marker, ms=4,
                lw=1.5, label=name)
    top = max(delays)
    ax.plot([0, top], [0, top], color="#999999", lw=0.8, ls=":", label="the read alone")
    ax.set_xlabel("time to read one batch (ms, --data-delay-us)")
    ax.set_ylabel("ms per step (median)")
    ax.set_ylim(bottom=0)
    ax.grid(color="#eeeeee")
    ax.legend(frameon=False, fontsize=8.5)
    env = read_environment(os.path.join(folder, "environment.txt"))
    when = ", ".join(x for x in (f"measured {env['date'][:10]}" if env.get("date") else "",
                                 f"commit {env['commit']}" if env.get("commit") else "") if x)
    quiet = dict(ctx, when=f" ({when})" if when else "")
    return finish(quiet, fig, "Data workers: reads slower than the step, hidden or not",
                  f"{env.get('gpu', '')}  ·  GPT-2 124M, B=16, T=1024, chapters 07 and 08\n"
                  "each batch followed by a simulated read (the reading thread sleeps)",
                  f"{rel(path)}, written by make demo-08", "data_workers"), None


def plot_adamw8bit(ctx):
    """Chapter 10's demo: fp32 and 8-bit AdamW moments, side by side."""
    return plot_two_runs(ctx, [("adamw8bit-ch09.txt", "ch09, fp32 moments", "#4c72b0"),
                               ("adamw8bit-ch10.txt", "ch10, 8-bit moments", "#c44e52")],
                         "make demo-10", "8-bit AdamW moments against fp32, side by side",
                         "adamw8bit_loss", (2.5, 8))


def plot_fp8(ctx):
    """Chapter 13's demo: bf16 and FP8 GEMMs, side by side."""
    return plot_two_runs(ctx, [("fp8-ch12.txt", "ch12, bf16 GEMMs", "#4c72b0"),
                               ("fp8-ch13.txt", "ch13, FP8 GEMMs", "#c44e52")],
                         "make demo-13", "FP8 GEMMs against bf16, side by side",
                         "fp8_loss", (2.5, 8), batch=4)


def plot_heatmap(ctx):
    chapters = log_chapters(ctx)
    if not chapters:
        return None, "no logs"
    n_steps = max(s for ch in chapters for s, *_ in ch["log"]["steps"])
    grid = [[float("nan")] * n_steps for _ in chapters]
    for r, ch in enumerate(chapters):
        for s, _, _, tps in ch["log"]["steps"]:
            grid[r][s - 1] = tps
    values = [v for row in grid for v in row if v == v]
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 2.3 + 0.3 * len(chapters)))
    norm = colors.LogNorm(vmin=min(values), vmax=max(values)) if min(values) > 0 else None
    im = ax.imshow(grid, aspect="auto", cmap="viridis", norm=norm, interpolation="nearest",
                   extent=(0.5, n_steps + 0.5, len(chapters) - 0.5, -0.5))
    cut = colour_middle(norm, values)
    for r, row in enumerate(grid):
        for c, v in enumerate(row):
            if v == v:
                ax.text(c + 1, r, f"{v / 1000:.0f}", ha="center", va="center", fontsize=7,
                        color="black" if v >= cut else "white")
    ax.set_yticks(range(len(chapters)), [f"ch{ch['n']:02d}" for ch in chapters], fontsize=8)
    ax.set_xticks(range(1, n_steps + 1, 2), [str(s) for s in range(1, n_steps + 1, 2)],
                  fontsize=7.5)
    ax.set_xlabel("step", fontsize=8.5)
    for side in ("top", "right"):
        ax.spines[side].set_visible(True)
    warmup = ctx["env"].get("warmup")
    if warmup and warmup < n_steps:
        ax.axvline(warmup + 0.5, color="white", lw=2)
        ax.text(warmup / 2 + 0.5, -0.55, "warm-up", ha="center", va="bottom",
                fontsize=7.5, color="#444444")
        ax.text((warmup + n_steps) / 2 + 0.5, -0.55, "timed steps: their median goes to results.csv",
                ha="center", va="bottom", fontsize=7.5, color="#444444")
    bar = fig.colorbar(im, ax=ax, pad=0.015, fraction=0.035)
    bar.set_label("tokens per second", fontsize=8)
    bar.ax.tick_params(labelsize=7.5)
    bar.ax.yaxis.set_major_formatter(ticker.FuncFormatter(k_tokens))
    bar.ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    bar.ax.yaxis.set_major_locator(ticker.MaxNLocator(5))
    sources = log_sources(chapters) + "; cells: thousands of tok/s, colour on a log scale"
    return finish(ctx, fig, "Throughput at every step of each chapter's run", ctx["subtitle_log"],
                  sources, "heatmap"), None


def plot_gemm_roofline(ctx):
    path = os.path.join(os.path.dirname(ctx["csv"]), "gemm_shapes.csv")
    if not os.path.exists(path):
        return None, "no gemm_shapes.csv (make demo-01 DEMO_CSV=...)"
    rows = [r for r in read_rows(path) if r.get("M") and r.get("fp32_tflops")]
    if not rows:
        return None, "no GEMM rows in gemm_shapes.csv"
    sheet = DATASHEET.get(ctx["env"].get("gpu", ""), {})
    peaks = {}
    for kind in ("fp32", "tf32"):
        ratios = sorted(r[f"{kind}_tflops"] / r[f"{kind}_of_peak"] for r in rows
                        if r.get(f"{kind}_of_peak"))
        peaks[kind] = sheet.get(kind, ratios[len(ratios) // 2])
    bandwidth = sheet.get("hbm_tb_s")
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 5.0))
    xs = [10 ** (k / 50) for k in range(0, 176)]  # 1 .. 3000 FLOP/byte
    for kind, colour, name in (("tf32", "#dd8452", "TF32 tensor cores"),
                               ("fp32", OURS_COLOUR, "FP32 pipes")):
        peak = peaks[kind]
        ys = [min(peak, bandwidth * x) if bandwidth else peak for x in xs]
        ax.plot(xs, ys, color=colour, lw=1.6, alpha=0.8, label=f"{name}: {peak:.1f} TFLOP/s peak")
    if bandwidth:
        ax.text(3.2, bandwidth * 3.2 * 1.35, f"memory: {bandwidth:g} TB/s", rotation=31,
                fontsize=8, rotation_mode="anchor")

    def intensity(r):  # FLOPs per byte: 2MNK over A, B and C read or written once, fp32
        m, n, k = r["M"], r["N"], r["K"]
        return 2 * m * n * k / (4 * (m * k + n * k + m * n))
    groups = [("attn", "attention (per head)", "^"), ("lmhead", "lm_head", "s"),
              ("", "linear layers", "o")]
    for prefix, name, marker in groups:
        sel = [r for r in rows if r["label"].startswith(prefix)
               and not any(r["label"].startswith(p) for p, _, _ in groups if p and p != prefix)]
        ax.scatter([intensity(r) for r in sel], [r["fp32_tflops"] for r in sel], marker=marker,
                   facecolor="white", edgecolor=OURS_COLOUR, s=36, zorder=4,
                   label=f"{name}, fp32 (measured)")
        ax.scatter([intensity(r) for r in sel], [r["tf32_tflops"] for r in sel], marker=marker,
                   color="#dd8452", s=36, zorder=4, label=f"{name}, TF32 (measured)")
    for r in rows:
        if r["label"] in ("qkv-fwd", "lmhead-fwd", "attn-scores-fwd"):
            ax.annotate(r["label"], (intensity(r), r["tf32_tflops"]), xytext=(6, -3),
                        textcoords="offset points", fontsize=7.5, color="#444444")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(3, 3000)
    ax.set_ylim(10, 1000)
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("arithmetic intensity: FLOPs per byte (A, B and C moved once, fp32)")
    ax.set_ylabel("TFLOP/s (log scale)")
    ax.grid(color="#eeeeee", which="both")
    ax.legend(loc="upper left", frameon=False, fontsize=7.5, ncol=2)
    subtitle = (f"{ctx['env'].get('gpu', '')}  ·  every GEMM of a GPT-2 124M step at B·T = 16384, "
                "timed alone by chapter 01's demo\nroofs: the datasheet's peaks and memory "
                "bandwidth")
    quiet = dict(ctx, when="")  # the demo's own run (its log), not the benchmark's session
    return finish(quiet, fig, "GEMM by GEMM: fp32 and TF32 on the roofline", subtitle,
                  rel(path) + ", columns M, N, K, fp32_tflops, tf32_tflops", "gemm_roofline"), None


def plot_waterfall(ctx):
    """The step's time from the first chapter to the last, each chapter's change a
    bar from the step before it to its own. A change between chapters measured in
    two sessions is drawn hatched, without a number: it is not a measurement."""
    chapters = ctx["chapters"]
    if len(chapters) < 2:
        return None, "fewer than two chapters"
    ms = [ch["row"]["ms_per_step"] for ch in chapters]
    # Two panels: the large changes at full scale, up to the first chapter whose
    # step is under a tenth of the first's; then from there on a scale of its own.
    cut = next((i for i, m in enumerate(ms) if m < ms[0] / 10), None)
    groups = [range(0, cut + 1), range(cut, len(chapters))] if cut and cut < len(ms) - 1 \
        else [range(len(chapters))]
    fig, axes = plt.subplots(1, len(groups), figsize=(FIGURE_WIDTH, 4.4), squeeze=False,
                             gridspec_kw={"width_ratios": [len(g) for g in groups]})
    crossed = []
    for k, (ax, group) in enumerate(zip(axes[0], groups)):
        top, low_end = max(ms[i] for i in group), min(ms[i] for i in group)
        floor = 0 if k == 0 else low_end * 0.92
        for x, i in enumerate(group):
            ch = chapters[i]
            if x == 0:  # the panel's first step, whole
                ax.bar(x, ms[i] - floor, 0.7, bottom=floor, color="#8c8c8c")
                ax.annotate(f"{ms[i]:.2f}", (x, ms[i]), xytext=(0, 2), textcoords="offset points",
                            ha="center", va="bottom", fontsize=7.5)
                continue
            before, after = ms[i - 1], ms[i]
            low, high = min(before, after), max(before, after)
            ax.plot([x - 1.35, x + 0.35], [before, before], color="#999999", lw=0.6, ls=":")
            if ch["session"] == chapters[i - 1]["session"]:
                ax.bar(x, high - low, 0.7, bottom=low,
                       color=OURS_COLOUR if after < before else "#c44e52")
                ax.annotate(f"{after - before:+.2f}".replace("-", "−"), (x, low), xytext=(0, -2),
                            textcoords="offset points", ha="center", va="top", fontsize=7.5)
            else:
                ax.bar(x, high - low, 0.7, bottom=low, color="white", edgecolor="#999999",
                       hatch="////", lw=0.6)
                pair = f"ch{chapters[i - 1]['n']:02d}-ch{ch['n']:02d}"
                if pair not in crossed:
                    crossed.append(pair)
        ax.set_xticks(range(len(group)), [f"ch{chapters[i]['n']:02d}" for i in group], fontsize=8)
        ax.set_ylim(floor, top * (1.08 if k == 0 else 1.03))
        ax.set_xlim(-0.6, len(group) - 0.4)
        ax.grid(axis="y", color="#dddddd")
        ax.tick_params(axis="y", labelsize=8)
        if k:
            ax.set_title(f"from ch{chapters[group[0]]['n']:02d}, on a scale of its own, "
                         f"from {floor:.0f} ms", fontsize=8.5, color="#444444")
    axes[0][0].set_ylabel("milliseconds per step")
    note = ("; each bar: the change from the chapter before, in ms (blue faster, red slower)")
    if crossed:
        note += ("; hatched, without a number: " + ", ".join(crossed) + ", whose rows come from "
                 "two sessions of make bench (environment.txt), so that their difference is not "
                 "a measurement")
    return finish(ctx, fig, "The step, chapter by chapter: what each change took off",
                  ctx["subtitle"], rel(ctx["csv"]) + ", column ms_per_step" + note,
                  "waterfall"), None


def read_profile(path):
    with open(path, newline="") as f:
        return [(r["kernel"], float(r["calls_per_step"]), float(r["ms_per_step"]))
                for r in csv.DictReader(f)]


OPTIMIZER_KERNELS = [  # name fragment, legend, colour
    ("adamw", "the update (AdamW)", "#8172b3"),
    ("scale_by", "the clipping's pass over the gradients", "#c44e52"),
    ("sum_", "the gradient norm", "#55a868"),
    ("", "the step's values, the clipping factor", "#937860"),
]


def plot_optimizer(ctx):
    """Chapter 09: the optimizer's kernels in chapter 08's and chapter 09's profiled
    steps, beside the floor of the update's bytes at the memory's bandwidth."""
    folder = os.path.dirname(ctx["csv"])
    runs = []
    for n in (8, 9):
        ch = next((c for c in ctx["chapters"] if c["n"] == n), None)
        path = os.path.join(folder, f"profile_ch{n:02d}.csv")
        if ch is None or not os.path.exists(path):
            return None, f"no profile_ch{n:02d}.csv"
        runs.append((ch, read_profile(path)))
    if runs[0][0]["session"] != runs[1][0]["session"]:
        return None, "chapters 08 and 09 come from two sessions"
    lab = os.path.join(folder, "fused_optimizer", "lab.csv")
    sheet = DATASHEET.get(ctx["env"].get("gpu", ""), {})
    floor = None
    if os.path.exists(lab) and sheet.get("hbm_tb_s"):
        row = next((r for r in read_rows(lab) if r["label"] == "adamw_update-v2-fused"), None)
        if row:
            floor = row["bytes"] / (sheet["hbm_tb_s"] * 1e9)  # bytes / (TB/s) in ms
    fig, ax = new_figure(height=3.9)
    xs = [0, 1]
    bottom = [0.0, 0.0]
    for frag, name, colour in OPTIMIZER_KERNELS:
        vals = [sum(ms for kernel, _, ms in prof if kernel_kind_optimizer(kernel) == frag)
                for _, prof in runs]
        ax.barh(xs, vals, 0.55, left=bottom, color=colour, label=name)
        for x, b, v in zip(xs, bottom, vals):
            if v > 0.12:
                ax.text(b + v / 2, x, f"{v:.2f}", ha="center", va="center", fontsize=8,
                        color="white")
        bottom = [b + v for b, v in zip(bottom, vals)]
    for x, total, (_, prof) in zip(xs, bottom, runs):
        launches = sum(c for k, c, _ in prof if kernel_kind_optimizer(k) is not None)
        ax.text(total + 0.02, x, f"{total:.2f} ms, {launches:.0f} launches", va="center",
                fontsize=8)
    if floor:
        ax.axvline(floor, color="#222222", lw=1, ls="--")
        ax.text(floor + 0.02, 1.62, f"the update's bytes at {sheet['hbm_tb_s']:g} TB/s: "
                f"{floor:.2f} ms", fontsize=8, ha="left", va="bottom")
    ax.set_yticks(xs, ["ch08: 16 launches\nof AdamW, one per\ntensor; the clipping\na pass of its own",
                       "ch09: one launch\nover every tensor,\nthe clipping folded\ninto the update"],
                  fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(bottom) * 1.5)
    ax.set_ylim(1.75, -1.0)
    ax.set_xlabel("milliseconds per step, the optimizer's kernels", fontsize=8.5)
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(axis="x", color="#dddddd")
    ax.legend(loc="upper center", ncol=2, frameon=True, framealpha=1, edgecolor="none",
              fontsize=7.5).set_zorder(5)
    sources = (f"{rel(os.path.join(folder, 'profile_ch08.csv'))} and profile_ch09.csv (one session "
               "of make bench, steps that clip)"
               + (f"; the floor: {rel(lab)}, row adamw_update-v2-fused, its bytes" if floor else ""))
    date, commit = ctx["sessions"][runs[0][0]["session"]]
    quiet = dict(ctx, when=f" (measured {date[:10]}, commit {commit})")
    return finish(quiet, fig, "The optimizer, before and after fusing it", ctx["subtitle"],
                  sources, "optimizer"), None


def kernel_kind_optimizer(kernel):
    """Which part of the optimizer a kernel of a profile is, or None."""
    name = kernel.lower()
    if "adamw_begin" in name or "grad_clip_factor" in name:
        return ""
    for frag, _, _ in OPTIMIZER_KERNELS[:-1]:
        if name.startswith(frag):
            return frag
    return None


# A GEMM's line in a profile: "matmul_forward_v2: gelu 3072x16384x768", and
# chapter 13's "matmul_backward_v2: fp8 (dinp) 768x65536x3072" (FP8 operands).
GEMM_NAME = re.compile(r"^matmul_(forward|backward)_v\d+:\s*(fp8\s+)?(?:\(([^)]*)\)\s*)?"
                       r"(?:gelu\s+)?(\d+)x(\d+)x(\d+)")


def larger_batch_profiles(folder):
    """The profile_chNN_BM.csv files of a folder (a chapter's step profiled at
    batch M), sorted by chapter and batch."""
    pattern = re.compile(r"profile_ch(\d\d)_B(\d+)\.csv$")
    if not os.path.isdir(folder):
        return []
    found = [(int(m.group(1)), int(m.group(2)), f) for f in os.listdir(folder)
             for m in [pattern.match(f)] if m]
    return [f for _, _, f in sorted(found)]


LEGEND_OF_KIND = {"GEMM": "GEMMs (bf16)", "FP8 GEMM": "GEMMs (FP8 operands)",
                  "attention": "flash attention"}


def plot_final_roofline(ctx):
    """The last chapter's step at the larger batch (the benchmark's own
    profile_chNN_BM.csv beside results.csv, of the same session as its rows) on the
    roofline."""
    return plot_step_roofline(ctx, os.path.dirname(ctx["csv"]), False)


def plot_demo_roofline(ctx):
    """Chapter 11's step at its demo's batch (last_mile/profile_chNN_BM.csv, the
    demo's session) on the roofline: roofline_chNN_BM."""
    return plot_step_roofline(ctx, os.path.join(os.path.dirname(ctx["csv"]), "last_mile"), True)


def plot_step_roofline(ctx, folder, demo):
    """A chapter's step at a larger batch, kernel by kernel, on the roofline: each
    GEMM (FLOPs and bf16 bytes from the shape in its name) and flash attention's
    kernels (FLOPs of the causal half, bytes of q, k, v, the output and the
    gradients), at the rate the profile measured in the step. The last
    profile_chNN_BM.csv of the folder (by chapter, then batch)."""
    files = larger_batch_profiles(folder)
    sheet = DATASHEET.get(ctx["env"].get("gpu", ""), {})
    if not files or not sheet.get("bf16"):
        return None, (f"no {rel(folder)}/profile_chNN_BM.csv, or no datasheet for this GPU")
    path = os.path.join(folder, files[-1])
    m = re.match(r"profile_ch(\d\d)_B(\d+)\.csv$", files[-1])
    chapter, B = int(m.group(1)), int(m.group(2))
    T, C, NH, L = 1024, 768, 12, 12
    points, other, total = [], 0.0, 0.0
    for kernel, calls, ms in read_profile(path):
        total += ms
        g = GEMM_NAME.match(kernel)
        if g:
            a, b, k = (int(g.group(i)) for i in (4, 5, 6))
            flops = 2.0 * a * b * k * calls
            operand = 1.0 if g.group(2) else 2.0  # FP8's operands are one byte; outputs bf16
            moved = (operand * (a * k + k * b) + 2.0 * a * b) * calls
            points.append(("FP8 GEMM" if g.group(2) else "GEMM", kernel, flops, moved, ms))
            continue
        # Flash attention: each product of two (T, hs) by (hs, T) matrices, the
        # causal half, per head; the forward pass makes two (S = QK^T, O = PV), the
        # dK/dV kernel four (S, dP, dV, dK), the dQ kernel three (S, dP, dQ).
        # Bytes: the (B,T,C) tensors it reads and writes, once each.
        product = 2.0 * B * NH * T * T * (C // NH) / 2
        tensor = 2.0 * B * T * C
        for prefix, products, tensors in (("flash_attention_forward", 2, 4),
                                          ("flash_attention_backward_dkdv", 4, 6),
                                          ("flash_attention_backward_dq", 3, 5)):
            if kernel.startswith(prefix):
                points.append(("attention", kernel, products * product * calls,
                               tensors * tensor * calls, ms))
                break
        else:
            other += ms
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 4.8))
    xs = [10 ** (k / 50) for k in range(50, 176)]  # 10 .. 3000 FLOP/byte
    peak, bw = sheet["bf16"], sheet["hbm_tb_s"]
    ax.plot(xs, [min(peak, bw * x) for x in xs], color="#c44e52", lw=1.8,
            label=f"bf16 tensor cores: {peak:g} TFLOP/s, memory {bw:g} TB/s")
    if any(p[0] == "FP8 GEMM" for p in points) and sheet.get("fp8"):
        ax.plot(xs, [min(sheet["fp8"], bw * x) for x in xs], color="#c44e52", lw=1.2, ls="--",
                label=f"FP8 tensor cores: {sheet['fp8']:g} TFLOP/s")
    for kind, colour, marker in (("GEMM", OURS_COLOUR, "o"), ("FP8 GEMM", "#55a868", "s"),
                                 ("attention", "#dd8452", "^")):
        sel = [p for p in points if p[0] == kind]
        if not sel:
            continue
        ax.scatter([p[2] / p[3] for p in sel], [p[2] / (p[4] * 1e9) for p in sel],
                   s=[12 + 14 * p[4] for p in sel], color=colour, marker=marker, alpha=0.8,
                   edgecolor="white", lw=0.5, zorder=4,
                   label=f"{LEGEND_OF_KIND[kind]}: {sum(p[4] for p in sel):.1f} ms of the step")
    gemm = [p for p in points if p[0] in ("GEMM", "FP8 GEMM")]
    mean = sum(p[2] for p in gemm) / (sum(p[4] for p in gemm) * 1e9)
    ax.axhline(mean, color=OURS_COLOUR, lw=0.8, ls=":")
    ax.text(11, mean * 1.06, f"the GEMMs' FLOPs over their time: {mean:.0f} TFLOP/s",
            fontsize=8, color=OURS_COLOUR)
    offsets = {"forward": ((-8, 2), "right"), "backward_dkdv": ((8, 2), "left"),
               "backward_dq": ((8, -9), "left")}
    for p in points:
        if p[0] == "attention":
            name = re.sub(r"(_wgmma|_ws)?_kernel(_v\d+)?$", "",
                          p[1].replace("flash_attention_", ""))
            off, ha = offsets.get(name, ((8, 0), "left"))
            ax.annotate(name.replace("backward_", "backward, "),
                        (p[2] / p[3], p[2] / (p[4] * 1e9)), xytext=off, ha=ha,
                        textcoords="offset points", fontsize=7.5, color="#444444")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(10, 3000)
    ax.set_ylim(30, 2500)
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.tick_params(labelsize=8)
    ax.set_xlabel("FLOPs per byte (each operand moved once: bf16, or FP8 where marked)", fontsize=8.5)
    ax.set_ylabel("TFLOP/s in the step (log scale)", fontsize=8.5)
    ax.grid(color="#eeeeee", which="both")
    ax.legend(loc="lower right", frameon=False, fontsize=7.5)
    if demo:
        env = read_environment(os.path.join(folder, "environment.txt"))
        when = ", ".join(x for x in (f"measured {env['date'][:10]}" if env.get("date") else "",
                                     f"commit {env['commit']}" if env.get("commit") else "") if x)
        quiet = dict(ctx, when=f" ({when})" if when else "")
    else:
        quiet = ctx  # the session of results.csv
    subtitle = (f"{ctx['env'].get('gpu', '')}  ·  chapter {chapter:02d}'s step at B={B}, T={T}, "
                "kernel by kernel (--profile)\nmarker area: the kernel's time in the step; "
                f"not drawn: {other:.1f} of the {total:.1f} ms, the memory-bound kernels")
    title = (f"Chapter {chapter:02d}'s step on the H100's roofline" if demo
             else "The last chapter's step on the H100's roofline")
    name = f"roofline_ch{chapter:02d}_B{B}" if demo else "final_roofline"
    return finish(quiet, fig, title, subtitle,
                  f"{rel(path)}, written by " + ("make demo-11" if demo else "make bench")
                  + "; FLOPs and bytes from the shapes",
                  name), None


def write_step_times(ctx):
    """step_times.csv beside results.csv: for each run's log (logs/ and the demos'
    logs/ folders, labelled folder/run), the spread of its timed steps, after the
    warm-up: the fastest, the slowest and their difference, in ms as the log
    prints them (a profiled run's are left out)."""
    root = os.path.dirname(ctx["csv"])
    warmup = ctx["env"].get("warmup") or 0
    lines = ["label,folder,timed_steps,min_ms,max_ms,spread_ms"]
    for sub in sorted(["logs"] + [os.path.join(d, "logs") for d in os.listdir(root)
                                  if os.path.isdir(os.path.join(root, d, "logs"))]):
        folder = os.path.join(root, sub)
        if not os.path.isdir(folder):
            continue
        demo_env = read_environment(os.path.join(os.path.dirname(folder), "environment.txt"))
        skip = demo_env.get("warmup") if sub != "logs" and demo_env.get("warmup") else warmup
        for name in sorted(os.listdir(folder)):
            if not name.endswith(".txt"):
                continue
            steps = read_log(os.path.join(folder, name))["steps"]
            timed = [ms for s, _, ms, _ in steps if s > skip]
            if len(timed) < 2 or len(steps) > 100:
                continue
            label = name[:-len(".txt")]
            if label.endswith("-profile"):
                continue  # a profiled run's steps carry the profiler's events
            if sub != "logs":
                label = os.path.dirname(sub) + "/" + label
            lines.append(f"{label},{os.path.dirname(sub) or '.'},{len(timed)},{min(timed):.1f},"
                         f"{max(timed):.1f},{max(timed) - min(timed):.1f}")
    path = os.path.join(root, "step_times.csv")
    text = "\n".join(lines) + "\n"
    if not os.path.exists(path) or read_bytes(path).decode() != text:
        with open(path, "w") as f:
            f.write(text)
        return [rel(path)]
    return []


def colour_middle(norm, values):
    """The value at the middle of the colour scale: text is dark above it, light below."""
    lo, hi = min(values), max(values)
    return (lo * hi) ** 0.5 if norm is not None else (lo + hi) / 2


# ---- one results/<gpu>/ folder ---------------------------------------------
# Kernel names (profile_chNN.csv) -> the kind of work, first match wins.
KINDS = [  # kind, colour, name fragments
    ("GEMMs", "#4c72b0", ("matmul", "gemm")),
    ("attention", "#dd8452", ("attention", "split_heads", "merge_heads", "causal_softmax")),
    ("bias and GELU", "#da8bc3", ("bias", "gelu")),
    ("classifier and loss", "#c44e52", ("classifier", "softmax", "crossentropy", "loss", "dlosses")),
    ("layernorm and residual", "#55a868", ("layernorm", "residual")),
    ("optimizer", "#8172b3", ("adamw", "sum_squares", "sum_partials", "scale", "clip")),
    ("host waits (idle)", "#bbbbbb", ("idle",)),
    ("embedding, copies, memsets", "#937860", ("",)),
]


def kind_of(kernel):
    name = kernel.lower()
    return next(kind for kind, _, parts in KINDS if any(p in name for p in parts))


def profile_by_kind(path):
    """A profile_*.csv's milliseconds per step by kind, and its launches per step."""
    ms, launches = {kind: 0.0 for kind, _, _ in KINDS}, 0.0
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            ms[kind_of(row["kernel"])] += float(row["ms_per_step"])
            if "idle" not in row["kernel"]:
                launches += float(row["calls_per_step"])
    return ms, launches


def write_kinds_table(path, rows):
    """rows: (label, ms by kind, launches): one line each, with the total."""
    column = lambda kind: re.sub(r"[^a-z0-9]+", "_", kind.lower()).strip("_")  # noqa: E731
    lines = ["label," + ",".join(column(kind) for kind, _, _ in KINDS) + ",total,launches"]
    for label, ms, launches in rows:
        lines.append(f"{label}," + ",".join(f"{ms[k]:.2f}" for k, _, _ in KINDS)
                     + f",{sum(ms.values()):.2f},{launches:.0f}")
    text = "\n".join(lines) + "\n"
    if not os.path.exists(path) or read_bytes(path).decode() != text:
        with open(path, "w") as f:
            f.write(text)


def plot_profile_kinds(ctx):
    folder = os.path.dirname(ctx["csv"])
    chapters = []
    for ch in ctx["chapters"]:
        path = os.path.join(folder, f"profile_ch{ch['n']:02d}.csv")
        if os.path.exists(path):
            chapters.append((ch, *profile_by_kind(path)))
    if not chapters:
        return None, "no profile_chNN.csv"
    table = os.path.join(folder, "profile_kinds.csv")
    # The table also holds the benchmark's larger-batch profiles (profile_chNN_BM.csv,
    # labelled chNN-BM), which the figure leaves out.
    larger = [(f[len("profile_"):-len(".csv")].replace("_", "-"),
               *profile_by_kind(os.path.join(folder, f))) for f in larger_batch_profiles(folder)]
    write_kinds_table(table, [(f"ch{ch['n']:02d}", ms, n) for ch, ms, n in chapters] + larger)
    # Chapter 11's demo profiles its step at a larger batch (last_mile/profile_chNN_BM.csv).
    demo = os.path.join(folder, "last_mile")
    extra = larger_batch_profiles(demo)
    if extra:
        write_kinds_table(os.path.join(demo, "profile_kinds.csv"),
                          [(f[len("profile_"):-len(".csv")].replace("_", "-"),
                            *profile_by_kind(os.path.join(demo, f))) for f in extra])
    # Stacked bars on a linear scale, in two panels: the chapters whose steps take
    # over 100 ms, and the rest on a scale of their own, where they can be read.
    big = [c for c in chapters if sum(c[1].values()) > 100]
    small = [c for c in chapters if sum(c[1].values()) <= 100]
    panels = [p for p in (big, small) if p]
    fig, axes = plt.subplots(1, len(panels), figsize=(FIGURE_WIDTH, 4.8), squeeze=False,
                             gridspec_kw={"width_ratios": [len(p) for p in panels]})
    for ax, group in zip(axes[0], panels):
        xs = list(range(len(group)))
        bottom = [0.0] * len(group)
        for kind, colour, _ in KINDS:
            vals = [ms[kind] for _, ms, _ in group]
            ax.bar(xs, vals, 0.66, bottom=bottom, color=colour, label=kind)
            bottom = [b + v for b, v in zip(bottom, vals)]
        for x, top in zip(xs, bottom):
            ax.annotate(f"{top:.0f}" if top >= 100 else f"{top:.1f}", (x, top), xytext=(0, 2),
                        textcoords="offset points", ha="center", va="bottom", fontsize=7.5)
        ax.set_xticks(xs, [f"ch{ch['n']:02d}" for ch, _, _ in group], fontsize=8)
        ax.set_ylim(0, max(bottom) * 1.1)
        ax.grid(axis="y", color="#dddddd")
        ax.tick_params(axis="y", labelsize=8)
    axes[0][0].set_ylabel("milliseconds of kernels per step")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles[::-1], labels[::-1], loc="upper center", ncol=4, frameon=False,
               fontsize=7.5, bbox_to_anchor=(0.5, 1 - 0.95 / 4.8))
    sources = "profile_chNN.csv (--profile, the kernels of 5 steps after the warm-up), grouped " \
              "by kernel name into " + rel(table) + " (a step's kernels, not its wall time)"
    ids = {ch["session"] for ch, _, _ in chapters}
    if len(ids) > 1:
        sources += ("; the profiles come from " + str(len(ids)) + " sessions of make bench, as "
                    "their chapters' rows do (environment.txt)")
    if len(panels) == 2:
        sources += "; the right-hand panel, chapters whose kernels take under 100 ms, has a scale " \
                   "of its own"
    out = finish(ctx, fig, "A step's kernels by kind, chapter by chapter", ctx["subtitle"] + "\n\n",
                 sources, "profile_kinds")
    return out, None


def plot_gpu(folder):
    csv_path = os.path.join(folder, "results.csv")
    env = read_environment(os.path.join(folder, "environment.txt"))
    rows = read_rows(csv_path)
    gpu = env.get("gpu") or os.path.basename(folder)
    chapters = []
    for row in rows:
        m = CHAPTER_LABEL.match(row["label"])
        if m and row.get("tok_per_s"):
            log_path = os.path.join(folder, "logs", row["label"] + ".txt")
            log = read_log(log_path) if os.path.exists(log_path) else None
            chapters.append({"n": int(m.group(1)), "row": row, "log": log, "log_path": log_path,
                             "title": (log or {}).get("title", "")})
    chapters.sort(key=lambda ch: ch["n"])
    session_of, sessions = read_sessions(os.path.join(folder, "environment.txt"), rows)
    for ch in chapters:
        ch["session"] = session_of[ch["row"]["label"]]
    if not chapters:
        print(f"plots: {rel(csv_path)}: no chapter rows (chNN): nothing to draw")
        return []
    base_b, base_t = chapters[0]["row"]["B"], chapters[0]["row"]["T"]
    # PyTorch rows at the chapters' batch and sequence length.
    torch_rows = {r["label"]: r for r in rows if r["label"].startswith("pytorch")
                  and r.get("tok_per_s") and r["B"] == base_b and r["T"] == base_t}
    timed = chapters[0]["row"]["steps"]
    warmup = env.get("warmup")
    batch = f"B={base_b:.0f}, T={base_t:.0f}"
    median = f"median of {timed:.0f} timed steps" + (f", after {warmup} warm-up steps" if warmup else "")
    model = next((ch["log"]["model"] for ch in chapters if ch["log"] and ch["log"]["model"]), "")
    data = re.search(r"data (.*)$", env.get("settings", ""))
    gpt2 = f"GPT-2 ({model})" if model else "GPT-2"
    when = ", ".join(x for x in (f"measured {env['date'][:10]}" if env.get("date") else "",
                                 f"commit {env['commit']}" if env.get("commit") else "") if x)
    ctx = {
        "csv": csv_path, "env": env, "chapters": chapters, "torch": torch_rows,
        "session_of": session_of, "sessions": sessions,
        "out": os.path.join(folder, "plots"),
        "subtitle": f"{gpu}  ·  {batch}  ·  {median}\n{gpt2}"
                    + (f"  ·  data: {data.group(1)}" if data else ""),
        "subtitle_log": f"{gpu}  ·  {batch}  ·  every step of each chapter's benchmark run\n"
                        f"{gpt2}  ·  data: TinyShakespeare",
        "when": f" ({when})" if when else "",
    }
    written = write_step_times(ctx)
    for name, draw in (("throughput", lambda c: (plot_throughput(c), None)),
                       ("speedup", plot_speedup), ("phases", plot_phases),
                       ("loss_curves", plot_loss), ("heatmap", plot_heatmap),
                       ("gemm_roofline", plot_gemm_roofline), ("tying_loss", plot_tying),
                       ("data_workers", plot_data_workers), ("adamw8bit_loss", plot_adamw8bit),
                       ("fp8_loss", plot_fp8), ("profile_kinds", plot_profile_kinds), ("waterfall", plot_waterfall),
                       ("optimizer", plot_optimizer), ("final_roofline", plot_final_roofline),
                       ("roofline_chNN_BM", plot_demo_roofline)):
        files, why = draw(ctx)
        if files is None:
            print(f"plots: {rel(folder)}: no {name} plot: {why}")
        else:
            written += files
    return written


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv):
    results = argv[1] if len(argv) > 1 else os.path.join(REPO, "results")
    folders = sorted(os.path.join(results, d) for d in os.listdir(results)
                     if os.path.isfile(os.path.join(results, d, "results.csv")))
    if not folders:
        sys.exit(f"plots: no {results}/<gpu>/results.csv: run `make bench` on a GPU first")
    for folder in folders:
        written = plot_gpu(folder)
        out = rel(os.path.join(folder, "plots"))
        if written:
            print(f"plots: wrote {', '.join(written)}")
        else:
            print(f"plots: {out}/ is up to date")


if __name__ == "__main__":
    main(sys.argv)
