#!/usr/bin/env python3
"""figures.py: draw the book's diagrams. Run by `make figures`.

The plots of measurements are tools/plots.py's (results/<gpu>/plots/). These
are the drawings that explain: they use no measurement, only the formats'
bit layouts, the H100's datasheet figures and the model's shapes, all of
which the chapters state in their text. Each is written twice under one base
name in book/figures/: NAME.svg for the HTML book, NAME.pdf for the PDF.

    float_formats_tf32   fp32, TF32, fp16, bf16 bit by bit; TF32's dropped bits
    float_formats_bf16   the same, bf16 as the top half of fp32 (chapter 02)
    warp_per_row         chapter 00's CUDA primer: blocks, warps, lanes, and a
                         coalesced read of one row
    roofline_h100        the H100's roofline, with our kernels' arithmetic
                         intensities (chapter 00)
    timelines            host and GPU over time, with a wait after every
                         launch (chapter 02) and without (chapter 03)
    causal_tiles         flash attention's tiles of a (T, T) score matrix:
                         which are computed, masked and skipped, and the
                         order each kernel's blocks visit them (chapter 05)
    fusion_traffic       the passes over memory of the residual add and
                         layernorm, and of the classifier, eager and fused
                         (chapter 04)
    vocab_padding        where the rows of the logits start at 50257, 50264
                         and 50304 values, and the last tile of 128 columns
                         (chapter 06)
    comm_overlap         two GPUs' step over time, the model's stream and the
                         communication stream: the gradients averaged after
                         the backward pass, or a layer at a time beside it
                         (chapter 15; a schematic: no measurement)
    attention_overlap    one thread block of the flash forward pass over time:
                         chapter 05's v3, then chapter 12's three steps (a
                         producer warp and the TMA, the softmax beside the
                         next product, two warpgroups in turn), and when the
                         tensor cores are busy (a schematic: no measurement)

The output is deterministic, as tools/plots.py's is: the same script gives
byte-identical files, and a file whose bytes would not change is not
rewritten.

    /usr/bin/python3 tools/figures.py        (make figures)
"""

import io
import os
import sys

try:
    import matplotlib
except ImportError:
    sys.exit(f"figures: matplotlib is not installed for {sys.executable} (make deps; "
             "or PLOTS_PYTHON=/path/to/python3 make figures)")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import patches, ticker  # noqa: E402

matplotlib.rcParams.update({
    "svg.hashsalt": "gpt2-fast-figures",
    "svg.fonttype": "path",
    "pdf.fonttype": 42,
    "font.size": 10,
    "figure.dpi": 100,
})
METADATA = {
    "svg": {"Date": None, "Creator": None},
    "pdf": {"CreationDate": None, "ModDate": None, "Creator": None, "Producer": None},
}
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(REPO, "book", "figures")

SIGN, EXPONENT, MANTISSA, DROPPED = "#c44e52", "#4c72b0", "#55a868", "#d9d9d9"
HOST, KERNEL, WAIT, IDLE = "#8172b3", "#4c72b0", "#dd8452", "#eeeeee"
INK, GREY = "#222222", "#666666"

# ---- the H100 SXM's datasheet figures (dense, no 2:4 sparsity) -------------
HBM_TB_S = 3.35          # HBM3 bandwidth, TB/s
FP32_TFLOPS = 66.9       # the FP32 pipes ("CUDA cores")
TF32_TFLOPS = 494.7      # tensor cores, TF32
BF16_TFLOPS = 989.4      # tensor cores, bf16


def save(fig, name):
    os.makedirs(OUT, exist_ok=True)
    written = []
    for fmt in ("svg", "pdf"):
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, metadata=METADATA[fmt])
        data = buf.getvalue()
        path = os.path.join(OUT, f"{name}.{fmt}")
        old = open(path, "rb").read() if os.path.exists(path) else None
        if old != data:
            with open(path, "wb") as f:
                f.write(data)
            written.append(os.path.relpath(path, REPO))
    plt.close(fig)
    return written


# ---- bit layouts ----------------------------------------------------------
FORMATS = [  # name, sign, exponent, mantissa kept, mantissa dropped (of 32), note
    ("fp32", 1, 8, 23, 0, "1 + 8 + 23 bits"),
    ("TF32", 1, 8, 10, 13, "1 + 8 + 10, held in 32 bits"),
    ("fp16", 1, 5, 10, 0, "1 + 5 + 10 bits"),
    ("bf16", 1, 8, 7, 0, "1 + 8 + 7 bits"),
]


def float_formats(highlight):
    cell = 0.22
    fig, ax = plt.subplots(figsize=(8.2, 3.0))
    ax.set_xlim(-1.2, 32 * cell + 2.6)
    ax.set_ylim(-0.55, len(FORMATS) * 0.62 + 0.15)
    ax.axis("off")
    for row, (name, s, e, m, dropped, note) in enumerate(FORMATS):
        y = (len(FORMATS) - 1 - row) * 0.62
        fields = [(s, SIGN), (e, EXPONENT), (m, MANTISSA), (dropped, DROPPED)]
        x = 0.0
        for n, colour in fields:
            for _ in range(n):
                hatch = "////" if colour == DROPPED else None
                ax.add_patch(patches.Rectangle((x, y), cell, 0.36, facecolor=colour,
                                               edgecolor="white", lw=0.8, hatch=hatch))
                x += cell
        bold = "bold" if name.lower() == highlight else "normal"
        ax.text(-0.15, y + 0.18, name, ha="right", va="center", fontsize=10, fontweight=bold,
                color=INK)
        ax.text(32 * cell + 0.15, y + 0.18, note, ha="left", va="center", fontsize=8.5,
                color=INK if bold == "bold" else GREY)
        if name == "TF32" and highlight == "tf32":
            x0 = (s + e + m) * cell
            ax.annotate("", xy=(x0, y - 0.06), xytext=(32 * cell, y - 0.06),
                        arrowprops={"arrowstyle": "|-|", "color": INK, "lw": 0.8,
                                    "shrinkA": 0, "shrinkB": 0, "mutation_scale": 3})
            ax.text((x0 + 32 * cell) / 2, y - 0.1, "13 bits dropped: rounded, or cut?",
                    ha="center", va="top", fontsize=8, color=INK)
        if name == "bf16" and highlight == "bf16":
            ax.plot([16 * cell, 16 * cell], [y - 0.08, len(FORMATS) * 0.62 - 0.2], color=INK,
                    lw=0.8, ls=":")
            ax.text(16 * cell + 0.08, y - 0.12, "bf16 = the top 16 bits of fp32",
                    ha="left", va="top", fontsize=8, color=INK)
    legend = [patches.Patch(facecolor=SIGN, label="sign"),
              patches.Patch(facecolor=EXPONENT, label="exponent"),
              patches.Patch(facecolor=MANTISSA, label="mantissa"),
              patches.Patch(facecolor=DROPPED, hatch="////", label="dropped")]
    ax.legend(handles=legend, loc="upper center", bbox_to_anchor=(0.45, 1.08), ncol=4,
              frameon=False, fontsize=8.5)
    fig.tight_layout()
    return save(fig, f"float_formats_{highlight}")


# ---- chapter 00's CUDA primer: a warp per row --------------------------------
def warp_per_row():
    fig, ax = plt.subplots(figsize=(8.4, 4.1))
    ax.set_xlim(0, 10.4)
    ax.set_ylim(0, 5.2)
    ax.axis("off")
    # the grid of blocks
    ax.text(0.05, 5.0, "grid: 2,048 blocks", fontsize=9, fontweight="bold", va="center", color=INK)
    for b in range(6):
        x = 0.05 + b * 0.42
        ax.add_patch(patches.Rectangle((x, 4.3), 0.36, 0.45, facecolor="#dde6f3" if b else "#9fb8dc",
                                       edgecolor=EXPONENT, lw=0.8))
    ax.text(0.05 + 6 * 0.42 + 0.05, 4.52, "...", fontsize=11, va="center", color=INK)
    ax.text(0.05, 3.45, "block b: 256 threads = 8 warps,\nrows 8·b to 8·b + 7 of the\n"
            "B·T = 16,384 rows", fontsize=8, va="top", color=GREY)
    # one block: 8 warps, each a row
    ax.add_patch(patches.FancyArrowPatch((0.23, 4.28), (3.55, 3.85), arrowstyle="-|>",
                                         mutation_scale=8, color=GREY, lw=0.8,
                                         connectionstyle="arc3,rad=0.25"))
    ax.text(3.6, 5.0, "one block: warp w takes row 8·b + w", fontsize=9, fontweight="bold",
            va="center", color=INK)
    for w in range(8):
        y = 4.6 - w * 0.2
        ax.add_patch(patches.Rectangle((3.6, y - 0.08), 0.7, 0.16, facecolor=KERNEL, edgecolor="white",
                                       lw=0.6))
        ax.text(3.95, y, f"warp {w}", fontsize=6.5, color="white", ha="center", va="center")
        ax.plot([4.32, 9.9], [y, y], color="#cccccc", lw=3, solid_capstyle="butt")
    ax.text(9.9, 4.72, "each row: C = 768 floats", fontsize=7.5, color=GREY, ha="right",
            va="bottom")
    # one row, lane by lane
    ax.text(0.05, 2.55, "one warp, one row: lane ℓ reads elements ℓ, ℓ + 32, ℓ + 64, ...",
            fontsize=9, fontweight="bold", va="center", color=INK)
    y0, h = 1.75, 0.42
    chunk_w = 9.6 / 8
    for c in range(8):
        x = 0.05 + c * chunk_w
        label = ["0-31", "32-63", "64-95", "96-127", "128-159", "160-191", "...", "736-767"][c]
        for lane in range(32):
            if c == 6:
                break
            shade = 0.35 + 0.65 * lane / 31
            ax.add_patch(patches.Rectangle((x + lane * chunk_w / 32, y0), chunk_w / 32, h,
                                           facecolor=matplotlib.colors.to_rgba(KERNEL, shade),
                                           edgecolor="none"))
        if c == 6:
            ax.text(x + chunk_w / 2, y0 + h / 2, "...", ha="center", va="center", fontsize=12)
        else:
            ax.add_patch(patches.Rectangle((x, y0), chunk_w, h, facecolor="none",
                                           edgecolor="white", lw=1.5))
        ax.text(x + chunk_w / 2, y0 - 0.08, f"elements {label}", ha="center", va="top",
                fontsize=7, color=GREY)
        it = "iteration " + (str(c) if c < 6 else "...") if c != 7 else "iteration 23"
        ax.text(x + chunk_w / 2, y0 + h + 0.06, it, ha="center", va="bottom", fontsize=7,
                color=INK)
    ax.annotate("lanes 0 to 31 of one load instruction:\n32 consecutive floats, 128 bytes, "
                "one transaction", xy=(0.05 + chunk_w / 2, y0), xytext=(0.3, 0.55),
                fontsize=8, color=INK, va="center",
                arrowprops={"arrowstyle": "-|>", "color": GREY, "lw": 0.8, "mutation_scale": 8})
    ax.text(5.2, 0.75, "then warp_sum: 5 shuffles (offsets 16, 8, 4, 2, 1)\n"
            "add the 32 lanes' partial sums in registers,\nno memory and no barrier",
            fontsize=8, color=INK, va="center")
    fig.tight_layout(pad=0.3)
    return save(fig, "warp_per_row")


# ---- the roofline -------------------------------------------------------------
# Arithmetic intensity (FLOPs per byte of DRAM traffic, each tensor read or
# written once) of some of chapter 00's kernels, in fp32. The GEMMs' are
# 2MNK / (4 (MK + NK + MN)); the others count a few FLOPs per element.
KERNELS = [  # label, intensity, label offset (points)
    ("residual add\n1 FLOP / 12 bytes", 1 / 12, (4, -30)),
    ("layernorm, softmax,\nGELU, AdamW: ~1", 1.0, (-70, 8)),
    ("attention's GEMMs\n(per head, K = 64): 28", 2 * 1024 * 1024 * 64
     / (4 * (2 * 1024 * 64 + 1024 * 1024)), (8, -28)),
    ("QKV GEMM: 278", 2 * 16384 * 2304 * 768 / (4 * (16384 * 768 + 2304 * 768 + 16384 * 2304)),
     (-40, 8)),
    ("lm_head GEMM: 362", 2 * 16384 * 50257 * 768
     / (4 * (16384 * 768 + 50257 * 768 + 16384 * 50257)), (6, -16)),
]


def roofline():
    fig, ax = plt.subplots(figsize=(8.2, 4.8))
    xs = [10 ** (k / 50) for k in range(-75, 176)]  # 0.03 .. 3000 FLOP/byte
    roofs = [("bf16 tensor cores", BF16_TFLOPS, "#c44e52"),
             ("TF32 tensor cores", TF32_TFLOPS, "#dd8452"),
             ("FP32 pipes", FP32_TFLOPS, EXPONENT)]
    for name, peak, colour in roofs:
        ys = [min(peak, HBM_TB_S * x) for x in xs]
        ax.plot(xs, ys, color=colour, lw=2, label=f"{name}: {peak:g} TFLOP/s")
        ridge = peak / HBM_TB_S
        ax.plot([ridge], [peak], "o", color=colour, ms=4)
        ax.annotate(f"ridge {ridge:.0f}", (ridge, peak), xytext=(4, 4), textcoords="offset points",
                    fontsize=7.5, color=colour)
    ax.text(0.12, HBM_TB_S * 0.12 * 1.7, f"memory: {HBM_TB_S:g} TB/s", rotation=33.5,
            fontsize=8, color=INK, rotation_mode="anchor")
    for label, ai, off in KERNELS:
        y = min(FP32_TFLOPS, HBM_TB_S * ai)
        ax.plot([ai], [y], "s", color=INK, ms=4, zorder=5)
        ax.annotate(label, (ai, y), xytext=off, textcoords="offset points", fontsize=7.5,
                    color=INK, va="bottom")
    ax.axvspan(0.06, 1.5, color="#f2f2f2", zorder=0)
    ax.text(0.3, 400, "elementwise kernels,\nreductions, softmaxes", ha="center", fontsize=8,
            color=GREY)
    fp32_ridge = FP32_TFLOPS / HBM_TB_S
    ax.plot([fp32_ridge, fp32_ridge], [0.05, FP32_TFLOPS], color=EXPONENT, lw=0.8, ls="--")
    ax.text(fp32_ridge / 1.15, 0.07, "memory-bound in FP32", ha="right", fontsize=7.5,
            color=EXPONENT)
    ax.text(fp32_ridge * 1.15, 0.07, "compute-bound in FP32", ha="left", fontsize=7.5,
            color=EXPONENT)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(0.03, 3000)
    ax.set_ylim(0.05, 2500)
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("arithmetic intensity: FLOPs per byte moved to or from memory")
    ax.set_ylabel("TFLOP/s at most")
    ax.grid(color="#eeeeee", which="major")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.legend(loc="center right", bbox_to_anchor=(1.0, 0.3), frameon=False, fontsize=8)
    ax.set_title("The H100 SXM's roofline, and where chapter 00's kernels sit (fp32)",
                 fontsize=11, loc="left", fontweight="bold")
    fig.text(0.01, 0.01, "A kernel's time is at least max(FLOPs / peak, bytes / bandwidth). "
             "Roofs: the datasheet's dense peaks and HBM3 bandwidth.\nSquares: the most each "
             "kernel could do at its intensity on the FP32 pipes; computed, not measured.",
             fontsize=7, color=GREY, linespacing=1.4)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return save(fig, "roofline_h100")


def lane_axes(ax, names, width, title):
    """A timeline's axes: one lane a name, top to bottom, over [0, width),
    with no frame and no time ticks (the durations are made up)."""
    ax.set_xlim(0, width)
    ax.set_ylim(0, len(names))
    ax.set_yticks([len(names) - 0.5 - i for i in range(len(names))], names, fontsize=7.5)
    ax.set_xticks([])
    ax.tick_params(axis="y", length=0)
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
    ax.set_title(title, fontsize=9, loc="left", fontweight="bold")


# ---- host and GPU over time -----------------------------------------------------
def timelines():
    fig, axes = plt.subplots(2, 1, figsize=(8.4, 4.6), sharex=True,
                             gridspec_kw={"height_ratios": [1.35, 1]})
    kernels = [1.6, 0.7, 2.2, 1.1, 0.5, 1.8, 0.9, 1.4]
    launch, notice = 0.18, 0.22
    for ax, title in zip(axes, ("Chapters 00-02: the host waits after every launch",
                                "Chapter 03: the host queues launches and does not wait")):
        ax.set_ylim(-0.9 if ax is axes[0] else -0.1, 2.3)
        ax.set_yticks([0.5, 1.6], ["GPU", "CPU (host)"])
        ax.set_title(title, fontsize=9.5, loc="left", fontweight="bold")
        for side in ("top", "right", "left", "bottom"):
            ax.spines[side].set_visible(False)
        ax.tick_params(axis="y", length=0)
        ax.set_xticks([])
    # chapter 02
    ax = axes[0]
    t = 0.2
    for i, k in enumerate(kernels):
        ax.add_patch(patches.Rectangle((t, 1.35), launch, 0.5, facecolor=HOST, edgecolor="white"))
        start = t + launch
        ax.add_patch(patches.Rectangle((start, 0.25), k, 0.5, facecolor=KERNEL, edgecolor="white"))
        ax.add_patch(patches.Rectangle((start, 1.35), k + notice, 0.5, facecolor=WAIT,
                                       edgecolor="white", alpha=0.55))
        end = start + k
        if i < len(kernels) - 1:
            ax.add_patch(patches.Rectangle((end, 0.25), notice + launch, 0.5, facecolor=IDLE,
                                           edgecolor="#bbbbbb", hatch="xx", lw=0.5))
        t = end + notice
        if t > 11.6:
            break
    ax.annotate("GPU idle: the host notices the kernel is done,\nlaunches the next, and it starts",
                xy=(0.2 + launch + kernels[0] + 0.2, 0.3), xytext=(2.6, -0.2), fontsize=7.5,
                color=INK, va="top", arrowprops={"arrowstyle": "-|>", "lw": 0.7, "color": GREY,
                                                  "mutation_scale": 7})
    # chapter 03
    ax = axes[1]
    t = 0.2
    gpu_free = 0.2
    for i, k in enumerate(kernels + kernels[:4]):
        ax.add_patch(patches.Rectangle((t, 1.35), launch, 0.5, facecolor=HOST, edgecolor="white"))
        start = max(t + launch, gpu_free)
        if start < 12:
            ax.add_patch(patches.Rectangle((start, 0.25), min(k, 12 - start), 0.5,
                                           facecolor=KERNEL, edgecolor="white"))
        gpu_free = start + k
        t += launch
    ax.text(t + 0.15, 1.6, "the host is ahead: it prepares the next batch\nwhile the queue "
            "keeps the GPU busy", fontsize=7.5, color=INK, va="center")
    ax.set_xlim(0, 12)
    axes[1].set_xlabel("time (not to scale)", fontsize=8.5, color=GREY)
    legend = [patches.Patch(facecolor=HOST, label="launch (queue a kernel)"),
              patches.Patch(facecolor=WAIT, alpha=0.55, label="host waits"),
              patches.Patch(facecolor=KERNEL, label="kernel runs"),
              patches.Patch(facecolor=IDLE, edgecolor="#bbbbbb", hatch="xx", label="GPU idle")]
    fig.legend(handles=legend, loc="lower center", ncol=4, frameon=False, fontsize=8)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return save(fig, "timelines")


# ---- flash attention's tiles ------------------------------------------------------
# T = 1024 in tiles of 128 queries x 64 keys (the forward pass) and of 64 x 64
# (the backward pass's two kernels), as attention_flash*.cu cut them.
COMPUTED, MASKED, SKIPPED = "#4c72b0", "#a1c3e8", "#f2f2f2"


def causal_grid(ax, rows, cols, row_tile, col_tile, title):
    """A (T, T) score matrix as tiles: below the diagonal computed, on it masked
    (some of its keys come after some of its queries), above it never visited."""
    T = rows * row_tile
    for r in range(rows):
        for c in range(cols):
            q0, q1, k0 = r * row_tile, (r + 1) * row_tile - 1, c * col_tile
            k1 = k0 + col_tile - 1
            colour = SKIPPED if k0 > q1 else MASKED if k1 > q0 else COMPUTED
            ax.add_patch(patches.Rectangle((k0, T - q1 - 1), col_tile, row_tile,
                                           facecolor=colour, edgecolor="white", lw=0.8))
    ax.plot([0, T], [T, 0], color=INK, lw=0.8, ls=":")
    ax.set_xlim(0, T)
    ax.set_ylim(0, T)
    ax.set_aspect("equal")
    ax.set_xticks([0, T // 2, T], ["0", f"{T // 2}", f"{T}"], fontsize=7)
    ax.set_yticks([0, T // 2, T], [f"{T}", f"{T // 2}", "0"], fontsize=7)
    ax.set_xlabel("key (column of S)", fontsize=8)
    ax.set_ylabel("query (row of S)", fontsize=8)
    ax.set_title(title, fontsize=9, loc="left", fontweight="bold")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def causal_tiles():
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 4.6))
    causal_grid(axes[0], 8, 16, 128, 64, "Forward: a block per row of tiles")
    causal_grid(axes[1], 16, 16, 64, 64, "Backward: dQ by rows, dK and dV by columns")
    arrow = {"arrowstyle": "-|>", "color": "#c44e52", "lw": 1.4, "mutation_scale": 10}
    # forward: the block of queries 640..767 walks its keys left to right
    label = {"fontsize": 7, "color": "#c44e52", "va": "center"}
    axes[0].annotate("", xy=(768, 1024 - 704), xytext=(8, 1024 - 704), arrowprops=arrow)
    axes[0].annotate("one block: queries 640-767,\n12 tiles of 64 keys, left to right",
                     xy=(660, 1024 - 700), xytext=(560, 860), **label,
                     arrowprops={"arrowstyle": "-", "color": "#c44e52", "lw": 0.6})
    # backward: a dq block walks its row, a dk/dv block walks down its column
    axes[1].annotate("", xy=(704, 1024 - 672), xytext=(8, 1024 - 672), arrowprops=arrow)
    axes[1].annotate("dQ: queries 640-703,\nkeys 0 to 703", xy=(600, 1024 - 668),
                     xytext=(640, 700), **label,
                     arrowprops={"arrowstyle": "-", "color": "#c44e52", "lw": 0.6})
    axes[1].annotate("", xy=(288, 6), xytext=(288, 1024 - 264), arrowprops=arrow)
    axes[1].annotate("dK, dV: keys 256-319,\nqueries 256 to 1023", xy=(292, 1024 - 280),
                     xytext=(440, 930), **label,
                     arrowprops={"arrowstyle": "-", "color": "#c44e52", "lw": 0.6})
    legend = [patches.Patch(facecolor=COMPUTED, label="computed"),
              patches.Patch(facecolor=MASKED, label="computed and masked (crosses the diagonal)"),
              patches.Patch(facecolor=SKIPPED, edgecolor="#dddddd",
                            label="never visited (every key after every query)")]
    fig.legend(handles=legend, loc="lower center", ncol=3, frameon=False, fontsize=7.5)
    fig.text(0.01, 0.955, "Causal attention at T = 1024: the tiles of the (T, T) scores that "
             "flash attention computes, for one head", fontsize=10, fontweight="bold", color=INK)
    fig.tight_layout(rect=(0, 0.06, 1, 0.94))
    return save(fig, "causal_tiles")


# ---- chapter 04: the bytes of a fusion --------------------------------------------
READ, WRITE, GONE = "#4c72b0", "#dd8452", "#f2f2f2"


def traffic_row(ax, y, passes, unit, label, total_note):
    """One way of doing the work: its passes over memory as blocks, left to right,
    each as wide as the tensor it moves; passes that fusion removes are drawn
    hollow and struck through, with what they were."""
    x = 0.0
    for kernel, kind, name, removed in passes:
        colour = GONE if removed else (READ if kind == "read" else WRITE)
        ax.add_patch(patches.Rectangle((x, y), unit, 0.5, facecolor=colour,
                                       edgecolor="#999999" if removed else "white", lw=0.8,
                                       hatch="xx" if removed else None))
        ax.text(x + unit / 2, y + 0.25, f"{kind}\n{name}", ha="center", va="center",
                fontsize=7.5, color=GREY if removed else "white")
        if kernel:
            ax.text(x, y + 0.58, kernel, ha="left", va="bottom", fontsize=7.5, color=INK)
            ax.plot([x, x], [y - 0.05, y + 0.62], color=INK, lw=0.8)
        x += unit
    ax.text(-0.15, y + 0.25, label, ha="right", va="center", fontsize=8.5, fontweight="bold",
            color=INK)
    ax.text(x + 0.15, y + 0.25, total_note, ha="left", va="center", fontsize=8, color=INK)


def fusion_traffic():
    fig, (a, b) = plt.subplots(2, 1, figsize=(7.0, 4.9), gridspec_kw={"height_ratios": [1, 1]})
    for ax in (a, b):
        ax.set_xlim(-1.3, 9.4)
        ax.set_ylim(-0.25, 2.15)
        ax.axis("off")
    mb = 16384 * 768 * 2 / 1e6  # one (B,T,C) tensor in bf16
    traffic_row(a, 1.25, [("residual_forward", "read", "a", False), (None, "read", "b", False),
                          (None, "write", "sum", False),
                          ("layernorm_forward", "read", "sum", False), (None, "write", "out", False)],
                1.0, "eager", f"5 x {mb:.1f} MB = {5 * mb:.1f} MB")
    traffic_row(a, 0.0, [("residual_layernorm_forward (fused)", "read", "a", False),
                         (None, "read", "b", False), (None, "write", "sum", False),
                         (None, "read", "sum", True), (None, "write", "out", False)],
                1.0, "fused", f"4 x {mb:.1f} MB = {4 * mb:.1f} MB")
    a.set_title(f"Residual add + layernorm, one call: a block is one (B,T,C) tensor in bf16, "
                f"{mb:.1f} MB", fontsize=9, loc="left", fontweight="bold")
    gb = 16384 * 50257 * 2 / 1e9  # the logits, (B*T, V) in bf16
    u = 0.8
    traffic_row(b, 1.25, [("softmax", "read", "logits", False), (None, "write", "probs", False),
                          ("loss", "read", "logits", False), ("memset", "write", "dlogits", False),
                          ("backward", "read", "probs", False), (None, "read", "dlogits", False),
                          (None, "write", "dlogits", False)],
                u, "eager", f"7 x {gb:.2f} GB\n= {7 * gb:.1f} GB")
    traffic_row(b, 0.0, [("classifier (fused): dlogits written over the logits", "read", "logits",
                          False), (None, "write", "dlogits", False)]
                + [(None, "", "", True)] * 5, u, "fused", f"2 x {gb:.2f} GB\n= {2 * gb:.1f} GB")
    b.set_title(f"The classifier, one step: a block is one (B·T, V) matrix in bf16, {gb:.2f} GB",
                fontsize=9, loc="left", fontweight="bold")
    legend = [patches.Patch(facecolor=READ, label="read from memory"),
              patches.Patch(facecolor=WRITE, label="written to memory"),
              patches.Patch(facecolor=GONE, edgecolor="#999999", hatch="xx",
                            label="a pass the fused kernel does not make")]
    fig.legend(handles=legend, loc="lower center", ncol=3, frameon=False, fontsize=8)
    fig.text(0.01, 0.065, "B·T = 16,384 rows, C = 768, V = 50,257. The fused classifier reads "
             "each row a second time, from the L2 cache, not from memory.", fontsize=7.5,
             color=GREY)
    fig.tight_layout(rect=(0, 0.09, 1, 1))
    return save(fig, "fusion_traffic")


# ---- chapter 06: 50257, 50264, 50304 ----------------------------------------------
def vocab_padding():
    fig, (a, b) = plt.subplots(1, 2, figsize=(7.0, 3.4), gridspec_kw={"width_ratios": [1.1, 1]})
    widths = [(50257, "50257"), (50264, "50264"), (50304, "50304")]
    # left: where each of eight consecutive rows of logits starts, modulo 16 bytes
    a.set_xlim(-1.6, 8.1)
    a.set_ylim(-0.2, 3.2)
    a.axis("off")
    for k, (w, name) in enumerate(widths):
        y = 2 - k
        a.text(-0.15, y + 0.3, name, ha="right", va="center", fontsize=8.5, color=INK)
        for r in range(8):
            off = (r * w * 2) % 16
            ok = off == 0
            a.add_patch(patches.Rectangle((r, y), 0.9, 0.6, facecolor=MANTISSA if ok else "#f4cccc",
                                          edgecolor="white"))
            a.text(r + 0.45, y + 0.3, f"+{off}", ha="center", va="center", fontsize=7.5,
                   color="white" if ok else SIGN)
    for r in range(8):
        a.text(r + 0.45, 2.68, str(r), ha="center", va="bottom", fontsize=7.5, color=GREY)
    a.text(-0.15, 2.68, "row", ha="right", va="bottom", fontsize=7.5, color=GREY)
    a.set_title("Where rows 0-7 of the logits start, in bytes\nafter a 16-byte boundary "
                "(2 bytes a value)", fontsize=8.5, loc="left", fontweight="bold")
    # right: the last tile of 128 columns
    b.set_xlim(50160, 50345)
    b.set_ylim(-0.2, 3.2)
    for side in ("top", "right", "left"):
        b.spines[side].set_visible(False)
    b.set_yticks([])
    last = 392 * 128  # the 393rd tile starts at column 50176
    for k, (w, name) in enumerate(widths):
        y = 2 - k
        b.add_patch(patches.Rectangle((last, y), min(w, 50257) - last, 0.6, facecolor=EXPONENT,
                                      edgecolor="white"))
        if w > 50257:
            b.add_patch(patches.Rectangle((50257, y), w - 50257, 0.6, facecolor="#c8c8c8",
                                          edgecolor="white", hatch="////"))
        b.add_patch(patches.Rectangle((last, y), 128, 0.6, facecolor="none", edgecolor=INK, lw=1))
        b.text(last + 128 + 3, y + 0.3, f"{w - last} of\n128", va="center", fontsize=7.5,
               color=INK)
    b.set_xticks([50176, 50257, 50304], ["50176", "50257", "50304"], fontsize=7.5)
    b.set_xlabel("column of the logits (a token)", fontsize=8)
    b.set_title("The last of 393 tiles of 128 columns:\ncomputed whole at every width",
                fontsize=8.5, loc="left", fontweight="bold")
    legend = [patches.Patch(facecolor=MANTISSA, label="on a 16-byte boundary (TMA can load it)"),
              patches.Patch(facecolor="#f4cccc", label="off it"),
              patches.Patch(facecolor=EXPONENT, label="a token's logit"),
              patches.Patch(facecolor="#c8c8c8", hatch="////", label="padding: zeros, not read")]
    fig.legend(handles=legend, loc="lower center", ncol=4, frameon=False, fontsize=7.5)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return save(fig, "vocab_padding")


# ---- chapter 12: what overlaps with what in the flash forward pass ----------------
# A schematic of one thread block (two consumer warpgroups, 64 queries each)
# visiting tiles of keys: the durations are made up, in the proportions of
# the argument (the load of a tile about as long as a product, the softmax a
# little shorter), not measured.
LOAD, SOFTMAX_COLOUR = "#55a868", WAIT
SPANS = {"copies": LOAD, "TMA": LOAD, "S": KERNEL, "PV": KERNEL, "softmax": SOFTMAX_COLOUR}


def overlap_panel(ax, title, lanes, width):
    """lanes: [(name, [(start, length, kind, half)])], half 0 (the whole lane),
    1 (its upper half: the products) or 2 (its lower half: the softmax); then a
    last lane, the tensor cores, busy wherever some lane runs a product."""
    names = [name for name, _ in lanes] + ["tensor cores"]
    busy = []
    for i, (_, spans) in enumerate(lanes):
        y = len(names) - 1 - i
        for start, length, kind, half in spans:
            if start >= width:
                continue
            length = min(length, width - start)
            y0, h = {0: (y + 0.12, 0.76), 1: (y + 0.5, 0.38), 2: (y + 0.12, 0.38)}[half]
            ax.add_patch(patches.Rectangle((start, y0), length, h, facecolor=SPANS[kind],
                                           edgecolor="white", lw=0.8))
            if length > 0.45:
                ax.text(start + length / 2, y0 + h / 2, kind, ha="center", va="center",
                        fontsize=6.5, color="white")
            if kind in ("S", "PV"):
                busy.append((start, start + length))
    busy.sort()
    t = 0.0
    for start, end in busy + [(width, width)]:
        if start > t + 1e-9:
            ax.add_patch(patches.Rectangle((t, 0.12), start - t, 0.76, facecolor=IDLE,
                                           edgecolor="#bbbbbb", hatch="xx", lw=0.5))
        if end > max(start, t):
            ax.add_patch(patches.Rectangle((max(start, t), 0.12), end - max(start, t), 0.76,
                                           facecolor=KERNEL, edgecolor="none", alpha=0.45))
        t = max(t, end)
    lane_axes(ax, names, width, title)


def attention_overlap():
    # Durations in made-up units: both warpgroups' product together takes s
    # (pv), one warpgroup's alone half of it; a softmax sm; the threads' own
    # copies of a tile and the block's barrier after them, copies.
    copies, s, sm, pv, width, first = 0.6, 1.0, 0.8, 1.0, 11.0, 0.6

    def producer(period):  # two tiles ahead, then one each time a stage is freed
        return [(0.0, 0.55, "TMA", 0), (first, 0.55, "TMA", 0)] + \
               [(first + i * period, 0.55, "TMA", 0) for i in range(1, 8)]

    # v3: every thread issues its part of the copies of a tile ahead
    # (cp.async), then the whole block meets at a barrier; both warpgroups
    # compute S = Q K^T, the softmax, O += P V, in step.
    v3 = []
    t = 0.0
    while t < width:
        v3 += [(t, copies, "copies", 0), (t + copies, s, "S", 0),
               (t + copies + s, sm, "softmax", 0), (t + copies + s + sm, pv, "PV", 0)]
        t += copies + s + sm + pv
    # Step 1: a producer warp keeps a ring of tiles full with the TMA (one
    # thread issues a tile's copy); the consumers wait on the stage's
    # mbarrier, which holds them only at the start.
    step1 = []
    t = first
    while t < width:
        step1 += [(t, s, "S", 0), (t + s, sm, "softmax", 0), (t + s + sm, pv, "PV", 0)]
        t += s + sm + pv
    # Step 2: the next tile's S is issued (wgmma is asynchronous) before this
    # tile's softmax, which runs beside it; P V waits for the softmax.
    step2 = [(first, s, "S", 1)]
    t = first + s
    while t < width:
        step2 += [(t, s, "S", 1), (t, sm, "softmax", 2), (t + max(s, sm), pv, "PV", 1)]
        t += max(s, sm) + pv
    # Step 3: the warpgroups take turns on the tensor cores, each turn one
    # warpgroup's P V and next S (at full speed: it has them alone), while
    # the other's softmax runs; a turn waits for its warpgroup's softmax.
    wgs = [[(first, s / 2, "S", 1)], [(first + s / 2, s / 2, "S", 1)]]
    free, softmax_done = first + s, [first + s / 2 + sm, first + s + sm]
    for wg in wgs:
        wg.append((wg[0][0] + s / 2, sm, "softmax", 2))
    while free < width:
        for w, wg in enumerate(wgs):
            turn = max(free, softmax_done[w])
            wg += [(turn, pv / 2, "PV", 1), (turn + pv / 2, s / 2, "S", 1),
                   (turn + (pv + s) / 2, sm, "softmax", 2)]
            free, softmax_done[w] = turn + (pv + s) / 2, turn + (pv + s) / 2 + sm
    wg1, wg2 = wgs
    panels = [
        ("Chapter 05's v3: every thread copies its part of a tile ahead, then a barrier; "
         "both warpgroups in step",
         [("warpgroups 1, 2", v3)]),
        ("Step 1: a producer warp issues each tile's copy to the TMA; an mbarrier says when it is in",
         [("producer warp", producer(s + sm + pv)), ("warpgroups 1, 2", step1)]),
        ("Step 2: each warpgroup's softmax beside its own next product",
         [("producer warp", producer(max(s, sm) + pv)), ("warpgroups 1, 2", step2)]),
        ("Step 3: the two warpgroups take turns: one's softmax, the other's products",
         [("producer warp", producer(s + pv)), ("warpgroup 1", wg1), ("warpgroup 2", wg2)]),
    ]
    heights = [len(lanes) + 1 for _, lanes in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(8.4, 7.4), sharex=True,
                             gridspec_kw={"height_ratios": heights})
    for ax, (title, lanes) in zip(axes, panels):
        overlap_panel(ax, title, lanes, width)
    axes[-1].set_xlabel("time (a schematic: not to scale)", fontsize=8.5, color=GREY)
    legend = [patches.Patch(facecolor=LOAD, label="a tile of K and V copied: by the threads "
                            "(cp.async, and a barrier), or by the TMA"),
              patches.Patch(facecolor=KERNEL, label="a product on the tensor cores (S = Q K^T, P V)"),
              patches.Patch(facecolor=SOFTMAX_COLOUR, label="softmax (max, exp, sum)"),
              patches.Patch(facecolor=IDLE, edgecolor="#bbbbbb", hatch="xx",
                            label="tensor cores idle")]
    fig.legend(handles=legend, loc="lower center", ncol=2, frameon=False, fontsize=7.5)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return save(fig, "attention_overlap")


COMM = "#55a868"


def stream_lanes(ax, title, lanes, width):
    """lanes: [(name, [(start, length, label, colour)])], top to bottom."""
    for i, (_, spans) in enumerate(lanes):
        y = len(lanes) - 1 - i
        for start, length, label, colour in spans:
            ax.add_patch(patches.Rectangle((start, y + 0.15), length, 0.7, facecolor=colour,
                                           edgecolor="white", lw=0.8))
            if label:
                ax.text(start + length / 2, y + 0.5, label, ha="center", va="center",
                        fontsize=6.5, color="white")
    lane_axes(ax, [name for name, _ in lanes], width, title)


def comm_overlap():
    # Made-up durations: the forward pass, lm_head's backward pass, each of
    # 6 layers' backward passes (12 in GPT-2), the encoder's, the update;
    # an all-reduce of one layer's gradients, of the embeddings', and of
    # all of them at once (a little less than their sum: one call).
    fwd, head, layer, enc, upd = 3.0, 0.8, 0.9, 0.4, 0.8
    ar_layer, ar_emb, ar_all = 0.35, 0.7, 2.6
    layers = 6
    model, comm_after, comm_beside = [(0, fwd, "forward", KERNEL)], [], []
    t = fwd
    model.append((t, head, "lm_head", KERNEL))
    t += head
    comm_t = 0.0
    for l in range(layers - 1, -1, -1):
        model.append((t, layer, f"layer {l}", KERNEL))
        t += layer
        comm_t = max(comm_t, t)
        comm_beside.append((comm_t, ar_layer, str(l), COMM))
        comm_t += ar_layer
    model.append((t, enc, "enc", KERNEL))
    t += enc
    backward_end = t
    comm_after.append((backward_end, ar_all, "every gradient", COMM))
    comm_beside.append((max(comm_t, backward_end), ar_emb, "emb", COMM))
    beside_end = max(comm_t, backward_end) + ar_emb
    after = model + [(backward_end + ar_all, upd, "update", KERNEL)]
    beside = model + [(beside_end, upd, "update", KERNEL)]
    width = backward_end + ar_all + upd + 0.9
    panels = [
        ("Without --overlap-comm: every gradient averaged once the backward pass is done",
         [("model's stream", after), ("communication stream", comm_after)]),
        ("With --overlap-comm (chapter 15): each layer's averaged beside the layers below it",
         [("model's stream", beside), ("communication stream", comm_beside)]),
    ]
    fig, axes = plt.subplots(2, 1, figsize=(8.4, 3.0), sharex=True)
    for ax, (title, lanes) in zip(axes, panels):
        stream_lanes(ax, title, lanes, width)
        end = [e for e in lanes[0][1] if e[2] == "update"][0]
        ax.axvline(end[0] + end[1], color=GREY, lw=0.8, ls=":")
    axes[-1].set_xlabel("time (a schematic: not to scale); the dotted line is the step's end",
                        fontsize=8.5, color=GREY)
    legend = [patches.Patch(facecolor=KERNEL, label="the model's kernels"),
              patches.Patch(facecolor=COMM, label="NCCL's all-reduce (a layer's gradients, "
                            "the embeddings', or all)")]
    fig.legend(handles=legend, loc="lower center", ncol=2, frameon=False, fontsize=7.5)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return save(fig, "comm_overlap")


def main():
    written = []
    written += float_formats("tf32")
    written += float_formats("bf16")
    written += warp_per_row()
    written += roofline()
    written += timelines()
    written += causal_tiles()
    written += fusion_traffic()
    written += vocab_padding()
    written += attention_overlap()
    written += comm_overlap()
    if written:
        print("figures: wrote " + ", ".join(written))
    else:
        print("figures: book/figures/ is up to date")


if __name__ == "__main__":
    main()
