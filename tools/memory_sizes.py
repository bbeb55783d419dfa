#!/usr/bin/env python3
"""memory_sizes.py: chapter 14's Figure 14.1, the device memory of GPT-2's four
sizes, predicted with and without each of the chapter's tools, and measured.
Run by `make plots` (after tools/plots.py).

The prediction is the count that chapter 14's text makes by hand, byte for
byte, before anything is measured (the same count as the trainer's planner,
common/gpu/memory_plan.c, which `--memory` prints):

    per parameter     bf16 weight 2, bf16 gradient 2, fp32 master weight 4
                      (0 with --no-master-weights), AdamW's m and v 8 in fp32,
                      or, for the blocks' four weight matrices with
                      --adamw-8bit (chapter 10), 1 byte each and an fp32 scale
                      each per 256 values; chapter 13's FP8 copies of those
                      matrices, 1 byte as rows and 1 as their transpose
    per token, layer  the activations the forward pass keeps (activations.c's
                      table), as many layers of each as --recompute keeps
                      (recompute.h), and chapter 13's FP8 layer inputs
    per token         the tensors of one layer, the logits, the backward
                      pass's gradients, the FP8 casts' shared buffers
    per run           cuBLASLt's workspace (32 MiB), autotuning's trial copy
                      of the lm_head's gradient and its L2 flush, and the
                      allowance for CUDA's libraries (256 MiB)

Buffers under a few MiB (the scratch, the token batches, the FP8 scales and
partial sums) are left out: at every point of the table the planner's total
is less than 2.5 MiB above this one.

The predicted lines, at T=1024 and B=4 (left) and B=8 (right), one per set
of switches, each adding one tool to the line above it:

    fp32 moments      chapter 13 with --no-adamw-8bit
    chapter 13        as it is: 8-bit moments, FP8 products, master weights
    recompute         + --recompute block
    no master         + --no-master-weights

and on them the peak device memory measured on the H100 (the trainer's
peak_mem_gib, the whole card's use, its CUDA context included), from

    results/h100/sizes/results.csv          chapter 14's rows and PyTorch's
    results/h100/gpt2_sizes/results.csv     chapter 13 as it is (ch13-*)
    results/h100/recompute/sizes/results.csv  XL with --recompute block alone

PyTorch's peak is torch.cuda.max_memory_allocated: its tensors alone,
without its CUDA context or its allocator's cache.

Writes results/h100/plots/memory_sizes.svg and .pdf, and the prediction as a
table, results/h100/plots/memory_sizes.csv (every part of every point, in
GiB; the chapter's text quotes it). The output is deterministic, as
tools/plots.py's is, and a file whose bytes would not change is not
rewritten.

    /usr/bin/python3 tools/memory_sizes.py      (make plots)

It needs matplotlib (Debian's python3-matplotlib: `make deps`).
"""

import csv
import io
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "results", "h100")
OUT = os.path.join(RESULTS, "plots")
GIB = float(1 << 30)
MIB = float(1 << 20)

# ---- the model ----------------------------------------------------------------
# GPT-2's four sizes (common/train/train_options.c's presets): layers, heads,
# channels. Every one has a context of 1024 and the vocabulary padded to 50304
# (chapter 06), tied to the lm_head (chapter 07).
SIZES = [("124m", "124M", 12, 12, 768), ("355m", "355M", 24, 16, 1024),
         ("774m", "774M", 36, 20, 1280), ("1558m", "1558M", 48, 25, 1600)]
VP = 50304
T_MAX = 1024
X = 2  # bytes of a bf16 value


def num_params(L, C):
    """wte (Vp, C), wpe (T, C), per layer 12 C^2 weights and 13 C biases and
    layernorm values, and the final layernorm's 2 C."""
    return VP * C + T_MAX * C + L * (12 * C * C + 13 * C) + 2 * C


def matrix_params(L, C):
    """The blocks' four weight matrices: qkv 3C x C, its projection C x C, fc
    4C x C and its projection C x 4C."""
    return 12 * L * C * C


# ---- the levels of --recompute (recompute.h) ----------------------------------
NONE, GELU, NORMS, BLOCK = range(4)

# activations.c's stacked tensors: (name, bytes a token as a function of C and
# NH, the level from which one layer of it is kept instead of L). The
# layernorms' mean and rstd are fp32, attention's log-sum-exp too (one per
# head and row: flash attention, chapter 05).
STACKED = [
    ("ln1", lambda C, NH: C * X, NORMS),
    ("ln1 mean, rstd", lambda C, NH: 8, NORMS),
    ("qkv", lambda C, NH: 3 * C * X, BLOCK),
    ("atty", lambda C, NH: C * X, BLOCK),
    ("att_lse", lambda C, NH: 4 * NH, BLOCK),
    ("attproj", lambda C, NH: C * X, BLOCK),
    ("residual2", lambda C, NH: C * X, BLOCK),
    ("ln2", lambda C, NH: C * X, NORMS),
    ("ln2 mean, rstd", lambda C, NH: 8, NORMS),
    ("fch", lambda C, NH: 4 * C * X, BLOCK),
    ("fch_gelu", lambda C, NH: 4 * C * X, GELU),
    ("fcproj", lambda C, NH: C * X, BLOCK),
    ("residual3", lambda C, NH: C * X, BLOCK + 1),  # always kept: the residual stream
]
# Chapter 13's FP8 transposes of each linear layer's input, a byte a value:
# (width in C, the level from which the backward pass casts it again,
# fp8_layers.c's CAST_AGAIN_FROM).
FP8_INPUTS = [(1, NORMS), (1, BLOCK), (1, NORMS), (4, GELU)]  # qkv, attproj, fc, fcproj


def activation_bytes(L, C, NH, BT, level):
    kept = sum(f(C, NH) * (1 if level >= lvl else L) for _, f, lvl in STACKED)
    # Once per run: the embedding's output, the final layernorm (and its
    # statistics), the logits (the fused classifier writes their gradient in
    # place), the losses; the backward pass's one layer of gradients:
    # residual, ln, qkv, atty, fch, lnf.
    once = C * X + C * X + 8 + VP * X + 4 + (1 + 1 + 3 + 1 + 4 + 1) * C * X
    return BT * (kept + once)


def fp8_bytes(L, C, BT, level):
    weights = 2 * matrix_params(L, C)  # rows and transpose
    inputs = sum(w * C * (1 if level >= lvl else L) for w, lvl in FP8_INPUTS)
    shared = 3 * 4 * C  # a layer input's rows, a gradient's rows and transpose, (BT, 4C)
    return weights + BT * (inputs + shared)


def predict(L, NH, C, B, T, master=True, moments_8bit=True, fp8=True, level=NONE):
    """The parts of a run's device memory, in bytes."""
    n, m = num_params(L, C), matrix_params(L, C)
    BT = B * T
    parts = {
        "weights": X * n,
        "grads": X * n,
        "master": 4 * n if master else 0,
        "moments": (8 * (n - m) + 2 * m + 2 * 4 * m // 256) if moments_8bit else 8 * n,
        "fp8": fp8_bytes(L, C, BT, level) if fp8 else 0,
        "activations": activation_bytes(L, C, NH, BT, level),
        # cuBLASLt's workspace; autotuning's copy of the widest weight
        # gradient (the lm_head's, Vp x C) and its L2 flush allowance; CUDA's
        # libraries' allowance (memory_plan.c).
        "buffers": 32 * MIB + (VP * C * X + 256 * MIB) + 256 * MIB,
    }
    parts["total"] = sum(parts.values())
    return parts


# The predicted lines, each one more tool than the line before.
CONFIGS = [
    ("fp32-moments", "chapter 13, fp32 moments (--no-adamw-8bit)",
     dict(moments_8bit=False), "#c44e52"),
    ("ch13", "chapter 13 (8-bit moments, master weights)", dict(), "#dd8452"),
    ("block", "+ --recompute block", dict(level=BLOCK), "#4c72b0"),
    ("block-nomaster", "+ --no-master-weights", dict(level=BLOCK, master=False), "#55a868"),
]
# In the table, not drawn: the last line without FP8's copies (--no-fp8).
EXTRA = [("block-nomaster-nofp8", dict(level=BLOCK, master=False, fp8=False))]
BATCHES = [1, 4, 8]
DRAWN_BATCHES = [4, 8]
T = 1024

# The measured points: (file, row label, size, B, the line it belongs to).
OURS = [
    ("gpt2_sizes/results.csv", "ch13-355m-B8", "355m", 8, "ch13"),
    ("gpt2_sizes/results.csv", "ch13-774m-B4", "774m", 4, "ch13"),
    ("gpt2_sizes/results.csv", "ch13-1558m-B4", "1558m", 4, "ch13"),
    ("recompute/sizes/results.csv", "xl-block-nolimit", "1558m", 4, "block"),
    ("sizes/results.csv", "ch14-medium-8g", "355m", 8, "block"),
    ("sizes/results.csv", "ch14-xl-16g", "1558m", 4, "block-nomaster"),
]
# PyTorch's (eager bf16 autocast, fp32 weights, gradients and AdamW state):
# suffix of the label -> (marker, legend).
TORCH = [("", "s", "PyTorch, eager"),
         ("-ckpt", "^", "PyTorch, blocks checkpointed"),
         ("-ckpt-8bit", "D", "PyTorch, checkpointed, AdamW8bit")]
TORCH_SIZE = {"medium": ("355m", 8), "xl": ("1558m", 4)}


def read_rows(path):
    with open(path, newline="") as f:
        return {r["label"]: r for r in csv.DictReader(f)}


def write_if_changed(path, data):
    old = open(path, "rb").read() if os.path.exists(path) else None
    if old == data:
        return []
    with open(path, "wb") as f:
        f.write(data)
    return [os.path.relpath(path, REPO)]


def prediction_table():
    """[(label, size, params, B, config, parts)] for every size, batch and config."""
    table = []
    for key, _, L, NH, C in SIZES:
        for B in BATCHES:
            for name, kw in [(c[0], c[2]) for c in CONFIGS] + EXTRA:
                table.append((f"{key}-B{B}-{name}", key, num_params(L, C), B, name,
                              predict(L, NH, C, B, T, **kw)))
    return table


def table_csv(table):
    cols = ["weights", "grads", "master", "moments", "fp8", "activations", "buffers", "total"]
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["label", "model", "params", "B", "T", "config"] + [c + "_gib" for c in cols])
    for label, key, n, B, name, parts in table:
        w.writerow([label, key, n, B, T, name] + [f"{parts[c] / GIB:.3f}" for c in cols])
    return out.getvalue().encode()


def draw(table):
    try:
        import matplotlib
    except ImportError:
        sys.exit(f"memory_sizes: matplotlib is not installed for {sys.executable} (make deps; "
                 "or PLOTS_PYTHON=/path/to/python3 make plots)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    matplotlib.rcParams.update({
        "svg.hashsalt": "gpt2-fast-memory",
        "svg.fonttype": "path",
        "pdf.fonttype": 42,
        "font.size": 10,
        "axes.titlesize": 10.5,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.axisbelow": True,
        "figure.dpi": 100,
    })
    metadata = {"svg": {"Date": None, "Creator": None},
                "pdf": {"CreationDate": None, "ModDate": None, "Creator": None,
                        "Producer": None}}
    by = {(key, B, name): parts for _, key, _, B, name, parts in table}
    params_m = {key: num_params(L, C) / 1e6 for key, _, L, _, C in SIZES}
    colour = {c[0]: c[3] for c in CONFIGS}
    rows = {}
    for f in {o[0] for o in OURS} | {"sizes/results.csv"}:
        rows[f] = read_rows(os.path.join(RESULTS, f))

    # The sizes evenly spaced, left to right; PyTorch's markers a little to
    # the right of each size, so that they do not hide ours.
    at = {key: i for i, (key, *_) in enumerate(SIZES)}
    fig, axes = plt.subplots(1, 2, figsize=(7.0, 5.4), sharey=True)
    top = 56
    for ax, B in zip(axes, DRAWN_BATCHES):
        for card in (8, 12, 16, 24):
            ax.axhline(card, color="#888888", lw=0.9, ls=(0, (2, 2)), zorder=1)
        for name, label, _, c in CONFIGS:
            xs = [at[key] for key, *_ in SIZES]
            ys = [by[(key, B, name)]["total"] / GIB for key, *_ in SIZES]
            ax.plot(xs, ys, color=c, lw=1.8, zorder=2)
        for f, label, key, b, name in OURS:
            if b != B:
                continue
            y = float(rows[f][label]["peak_mem_gib"])
            ax.plot(at[key], y, "o", ms=7, color=colour[name], mec="black", mew=0.8, zorder=4)
        for run, (key, b) in TORCH_SIZE.items():
            if b != B:
                continue
            for suffix, marker, _ in TORCH:
                y = float(rows["sizes/results.csv"][f"pytorch-{run}{suffix}"]["peak_mem_gib"])
                ax.plot(at[key] + 0.22, y, marker, ms=6.5, mfc="white", mec="#333333", mew=1.2,
                        zorder=3)
        ax.set_title(f"B={B}, T={T}")
        ax.set_xticks(range(len(SIZES)))
        ax.set_xticklabels([name for _, name, *_ in SIZES])
        ax.set_xlim(-0.3, len(SIZES) - 0.55)
        ax.set_ylim(0, top)
        ax.set_xlabel("GPT-2, parameters")
        ax.set_yticks(range(0, top, 10))
    axes[0].set_ylabel("device memory (GiB)")
    for card in (8, 12, 16, 24):
        axes[1].annotate(f"{card} GiB", xy=(1.0, card), xycoords=("axes fraction", "data"),
                         xytext=(3, 0), textcoords="offset points", va="center", fontsize=8.5,
                         color="#555555")
    handles = [Line2D([], [], color=c, lw=1.8, label=label) for _, label, _, c in CONFIGS]
    handles.append(Line2D([], [], ls="", marker="o", ms=7, mfc="#bbbbbb", mec="black",
                          label="ours, measured"))
    handles += [Line2D([], [], ls="", marker=m, ms=6.5, mfc="white", mec="#333333", mew=1.2,
                       label=label) for _, m, label in TORCH]
    fig.legend(handles=handles, loc="lower center", ncol=2, frameon=False, fontsize=9,
               handlelength=2.0, columnspacing=1.5)
    fig.text(0.01, 0.995, "Memory against model size, with and without each tool",
             fontsize=12, fontweight="bold", ha="left", va="top")
    fig.text(0.01, 0.955, "lines: predicted by counting bytes; markers: the peak measured on "
             "an H100 (ours with the CUDA context,\nPyTorch's tensors alone); dotted: cards' "
             "sizes", fontsize=9, color="#444444", ha="left", va="top", linespacing=1.35)
    fig.tight_layout(rect=(0, 0.16, 0.95, 0.9))
    written = []
    os.makedirs(OUT, exist_ok=True)
    for fmt in ("svg", "pdf"):
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, metadata=metadata[fmt])
        written += write_if_changed(os.path.join(OUT, f"memory_sizes.{fmt}"), buf.getvalue())
    plt.close(fig)
    return written


def main():
    table = prediction_table()
    os.makedirs(OUT, exist_ok=True)
    written = write_if_changed(os.path.join(OUT, "memory_sizes.csv"), table_csv(table))
    written += draw(table)
    if written:
        print(f"memory_sizes: wrote {', '.join(written)}")
    else:
        print("memory_sizes: results/h100/plots/memory_sizes.* are up to date")


if __name__ == "__main__":
    main()
