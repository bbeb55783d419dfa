#!/usr/bin/env python3
"""sdpa_sweep.py: chapter 05's demo, PyTorch's side, and chapter 12's. torch's
scaled_dot_product_attention(is_causal=True) on the shapes and with the timing
of build/demos/attention_sweep (attention_sweep.cu says how): B=16, 12 heads of
64, T = 256 .. 4096, forward and backward, bf16. q, k and v are views of one
(B, T, 3C) tensor, as in a GPT-2 whose qkv projection is one matmul; the
backward pass is the gradient with respect to q, k and v.

    python3 chapters/05_flash_attention/sdpa_sweep.py [CSV] [--batch B[,B...]]
        [--min-seq T] [--max-seq T] [--backend NAME[,NAME...]] [--hold-ms MS]

--backend runs PyTorch's choice (default) or forces one of its backends:
flash (FlashAttention-2, SDPBackend.FLASH_ATTENTION), cudnn (cuDNN's fused
attention, SDPBackend.CUDNN_ATTENTION), efficient; several, comma-separated,
each in turn (`make demo-12`: flash,cudnn). A backend that cannot run here
(PyTorch says why) is left out, saying so.

Rows are appended to CSV (written by attention_sweep, same columns), labelled
as there: pytorch-sdpa[-BACKEND]-PASS-T at B=16, with -BN after it at another
batch N (pytorch-sdpa-cudnn-forward-1024-B64). The kernels column names the
kernels that PyTorch ran (from its profiler), so that the table says which of
its attention backends it chose.
"""

import argparse
import sys
import time

import torch
import torch.nn.functional as F

NH, HS = 12, 64
K_PER_GRAPH, WARMUP, REPEATS = 20, 3, 15
UNSUFFIXED_B = 16  # the batch whose rows' labels name no batch (attention_sweep.cu)
BACKENDS = ("default", "flash", "cudnn", "efficient")


def time_graph(fn, stream, hold_ms=0.0):
    """Median ms of fn over REPEATS replays of a graph of K_PER_GRAPH calls,
    captured on `stream`: the stream the forward pass ran on, which autograd
    runs the backward pass on too. The graph is first replayed for hold_ms,
    untimed, as attention_sweep.cu's --hold-ms does."""
    with torch.cuda.stream(stream):  # warm-up on the capturing stream, outside the capture
        for _ in range(3):
            fn()
    stream.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for _ in range(K_PER_GRAPH):
            fn()
    times = []
    with torch.cuda.stream(stream):
        start_s = time.monotonic()
        while (time.monotonic() - start_s) * 1e3 < hold_ms:
            graph.replay()
            stream.synchronize()
        for i in range(WARMUP + REPEATS):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            if i >= WARMUP:
                times.append(start.elapsed_time(end) / K_PER_GRAPH)
    return sorted(times)[REPEATS // 2]


def kernel_names(fn):
    """The CUDA kernels one call of fn runs, by PyTorch's profiler."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    short = []
    for n in names:
        n = n.split("(")[0].split("<")[0].replace("void ", "").replace(",", ";").strip()
        if n and n not in short:
            short.append(n)
    return " + ".join(short) or "?"


def comma_list(kind, choices=None):
    """An argparse type: "16,64" -> [16, 64] (kind int), or names among choices."""
    def parse(text):
        try:
            values = [kind(x) for x in text.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: comma-separated {kind.__name__}s")
        bad = [v for v in values if (choices and v not in choices) or (kind is int and v < 1)]
        if bad:
            raise argparse.ArgumentTypeError(
                f"{bad[0]!r}: " + (f"one of {', '.join(choices)}" if choices else "positive"))
        return values
    return parse


def sweep_shape(B, T, backend, stream, out_file, hold_ms):
    """One backend at one shape: a row per pass."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION}
    C = NH * HS
    label = "pytorch-sdpa" if backend == "default" else f"pytorch-sdpa-{backend}"
    suffix = "" if B == UNSUFFIXED_B else f"-B{B}"
    # Everything on one side stream: autograd runs a backward op on the
    # stream its forward ran on, and a graph may capture only its own.
    with torch.cuda.stream(stream):
        g = torch.Generator(device="cuda").manual_seed(T)
        qkv = (torch.rand(B, T, 3 * C, device="cuda", generator=g) * 2 - 1).to(torch.bfloat16)
        qkv.requires_grad_(True)
        dout = (torch.rand(B, NH, T, HS, device="cuda", generator=g) * 2 - 1).to(torch.bfloat16)
        q, k, v = (x.view(B, T, NH, HS).transpose(1, 2) for x in qkv.split(C, dim=2))

        def forward():
            if backend == "default":
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)
            with sdpa_kernel(backends[backend]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)

        try:
            out = forward()
        except RuntimeError as e:  # a forced backend that cannot run these inputs here
            print(f"# {label}: left out at B={B}, T={T}: {str(e).splitlines()[0]}")
            return
    stream.synchronize()

    def backward():
        return torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)

    fwd_flops = 4.0 * B * NH * T * T * HS / 2
    kept = B * NH * T * 4 / 2**20  # its logsumexp, fp32, per row
    for name, fn, flops in (("forward", forward, fwd_flops),
                            ("backward", backward, 2.5 * fwd_flops)):
        # The kernels' names first: the row's line then comes as soon as it
        # is timed, and its time stamps the end of the hold (clocks_by_row.py).
        with torch.cuda.stream(stream):
            kernels = kernel_names(fn)
        ms = time_graph(fn, stream, hold_ms)
        tflops = flops / (ms * 1e9)
        print(f"{label:18s} {name:8s} {B:4d} {T:5d} {ms:10.4f} {tflops:9.1f}   {kernels}",
              flush=True)
        if out_file:
            out_file.write(f"{label}-{name}-{T}{suffix},{label},{name},{B},{T},{NH},{HS},{ms:.5f},"
                           f"{tflops:.1f},{kept:.1f},,{kernels}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="?")
    ap.add_argument("--batch", type=comma_list(int), default=[16],
                    help="batches, comma-separated (16,64)")
    ap.add_argument("--min-seq", type=int, default=256)
    ap.add_argument("--max-seq", type=int, default=4096)
    ap.add_argument("--backend", type=comma_list(str, BACKENDS), default=["default"],
                    help="PyTorch's choice (default), or forced: flash, cudnn, efficient; "
                         "comma-separated, each in turn")
    ap.add_argument("--hold-ms", type=float, default=0.0,
                    help="replay each graph this long, untimed, before timing it")
    a = ap.parse_args()
    if not 0 <= a.hold_ms <= 60000:
        sys.exit(f"sdpa_sweep: --hold-ms {a.hold_ms}: milliseconds from 0 to 60000")
    if not torch.cuda.is_available():
        sys.exit("sdpa_sweep: no CUDA device")
    out_file = open(a.csv, "a") if a.csv else None
    print(f"# torch {torch.__version__}, {torch.cuda.get_device_name()}, "
          f"backends {','.join(a.backend)}")
    stream = torch.cuda.Stream()
    for backend in a.backend:
        for B in a.batch:
            T = a.min_seq
            while T <= a.max_seq:
                sweep_shape(B, T, backend, stream, out_file, a.hold_ms)
                torch.cuda.empty_cache()
                T *= 2
    if out_file:
        out_file.close()


if __name__ == "__main__":
    main()
