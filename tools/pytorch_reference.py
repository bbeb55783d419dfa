#!/usr/bin/env python3
"""pytorch_reference.py: our GPT-2 written in plain PyTorch, as an outside
reference for the C/CUDA trainer: it writes llm.c-format model checkpoints and
debug states for the trainer's check mode, and it times PyTorch's training
step in the recipes the book compares against.

The model below is written for this project (no HuggingFace, no nanoGPT) and
computes exactly what common/model/gpt2_cpu_layers.inc computes:
  * token + position embedding;
  * L blocks of  x = x + attn(ln1(x));  x = x + mlp(ln2(x)),
    layernorm eps 1e-5 (biased variance), attention scores scaled by
    1/sqrt(hs) with a causal mask, MLP  C -> 4C -> C  with GELU's tanh form;
  * a final layernorm and logits = x @ lm_head^T (lm_head is wte when tied);
  * the mean cross-entropy over the first V of the Vp logits: the padding
    rows of wte and lm_head are not tokens, so their logits are sliced off
    before the softmax, and their gradients are zero.
Parameters are per-layer modules here; the checkpoint stacks them over L, in
common/model/gpt2_config.h's order:
  wte (Vp,C) wpe (T,C) ln1w ln1b (L,C) qkvw (L,3C,C) qkvb (L,3C)
  attprojw (L,C,C) attprojb ln2w ln2b (L,C) fcw (L,4C,C) fcb (L,4C)
  fcprojw (L,C,4C) fcprojb (L,C) lnfw lnfb (C) [lm_head (Vp,C) when untied]

Commands (from the repository root; `--help` on each for every option):

  # a checkpoint and a debug state (one batch: inputs, targets, logits, loss,
  # gradients) for a tiny model, in FP32 with TF32 off
  python3 tools/pytorch_reference.py write-state --out-model M.bin --out-state S.bin \
      --B 4 --T 32 --layers 2 --heads 4 --channels 64 --max-seq-len 32 --vocab 256

  # the same for the 124M model, on a batch from a token shard, plus the loss
  # of 10 AdamW steps on that batch
  python3 tools/pytorch_reference.py write-state --out-model M.bin --out-state S.bin \
      --B 4 --T 64 --tokens data/tinyshakespeare/tiny_shakespeare_val.bin \
      --steps 10 --lr 1e-4 --out-losses losses.txt

  # re-read both files and recompute them, reporting the largest differences
  python3 tools/pytorch_reference.py verify --model M.bin --state S.bin

  # time PyTorch's training step (see bench's docstring for the modes, or
  # `bench --list-modes`)
  python3 tools/pytorch_reference.py bench --mode compile-bf16-sdpa-vocab-tied-fused \
      --B 16 --T 1024 --steps 30 --warmup 10 --out-csv results/pytorch.csv --label pytorch-best

  # PyTorch's best recipe in DistributedDataParallel on 2 GPUs (B per GPU;
  # the row's tok/s the total); --zero also shards AdamW's state
  torchrun --standalone --nproc-per-node 2 tools/pytorch_reference.py bench \
      --mode compile-bf16-sdpa-vocab-tied-fused-lossonly --B 16 --T 1024 \
      --out-csv results/pytorch.csv --label pytorch-ddp-g2 [--zero]

  # the same step with the blocks' linear layers in float8 through torchao
  # (which this mode alone imports: tools/fetch_torchao.sh fetches its wheel);
  # the lm_head stays in bf16, as bench's docstring explains
  python3 tools/pytorch_reference.py bench \
      --mode compile-bf16-sdpa-vocab-tied-fused-lossonly-float8 --B 16 --T 1024

  # GPT-2 XL (--model 1558m), eager, every block checkpointed, torchao's
  # 8-bit AdamW (the same wheel): PyTorch beside chapter 14's memory budget
  python3 tools/pytorch_reference.py bench --model 1558m --B 4 --T 1024 \
      --mode eager-bf16-sdpa-vocab-tied-fused-lossonly-ckpt-8bit

File formats (little-endian, as common/files/checkpoint.h and common/files/debug_state.h):
  checkpoint   256 int32 header: [0]=20240326 [1]=3 [2]=max_seq_len [3]=V [4]=L
               [5]=H [6]=C [7]=Vp [8]=1 if untied else 0, the rest 0; then every
               tensor above as float32, wte and lm_head with Vp rows (padding 0).
  debug state  256 int32 header: [0]=20240327 [1]=2 [2]=B [3]=T, the rest 0;
               then x (B*T int32), y (B*T int32), logits (B*T*V float32, V
               UNPADDED), the loss (1 float32), and the gradient of every tensor
               in checkpoint order, wte's and lm_head's with Vp rows, as llm.c
               writes them (the padding rows' gradients are zeros).
               When tied, wte's gradient holds both of its uses.
  token shard  (--tokens) 256 int32 header: [0]=20240520 [1]=1 [2]=count; then
               count uint16 tokens. The batch is B*T+1 consecutive tokens from
               --token-offset: x = tokens[:-1], y = tokens[1:], row-major (B,T).
  losses       (--out-losses) one line per step: "step loss", the loss of the
               forward pass before that step's update (step 0 is the debug
               state's loss), loss printed with 9 significant digits.
Both .bin files are written to a temporary file in the same folder and renamed.

Randomness: the weights come from a CPU torch.Generator seeded with --seed and
the random batch from one seeded with --seed + 1, so a run on the CPU and one
on a GPU write the same weights and the same batch.
"""
import argparse
import importlib
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, fields, replace

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel

CHECKPOINT_MAGIC, CHECKPOINT_VERSION_FP32 = 20240326, 3
DEBUG_STATE_MAGIC, DEBUG_STATE_VERSION = 20240327, 2
SHARD_MAGIC, SHARD_VERSION = 20240520, 1
HEADER_INTS = 256
HEADER_BYTES = HEADER_INTS * 4

PARAM_NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w",
               "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb", "lm_head"]
# Weight decay applies to matrices only: gpt2_param_is_decayed in common/model/gpt2_config.c.
DECAYED = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw", "lm_head"}


# ---- the model ---------------------------------------------------------------
@dataclass
class GPT2Config:
    max_seq_len: int = 1024
    vocab_size: int = 50257
    padded_vocab_size: int = 50257
    num_layers: int = 12
    num_heads: int = 12
    channels: int = 768
    tied: bool = False

    def validate(self):
        c = self
        for name in ("max_seq_len", "vocab_size", "num_layers", "num_heads", "channels"):
            if getattr(c, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(c, name)}")
        if c.padded_vocab_size < c.vocab_size:
            raise ValueError(f"padded vocab ({c.padded_vocab_size}) is smaller than the vocab "
                             f"({c.vocab_size})")
        if c.channels % c.num_heads:
            raise ValueError(f"channels ({c.channels}) must be divisible by heads ({c.num_heads})")

    def tensor_shapes(self):
        """(name, shape) of the 17 tensors in checkpoint order (wte and lm_head
        with Vp rows); lm_head is left out when tied."""
        Vr = self.padded_vocab_size
        T, L, C = self.max_seq_len, self.num_layers, self.channels
        shapes = [("wte", (Vr, C)), ("wpe", (T, C)), ("ln1w", (L, C)), ("ln1b", (L, C)),
                  ("qkvw", (L, 3 * C, C)), ("qkvb", (L, 3 * C)), ("attprojw", (L, C, C)),
                  ("attprojb", (L, C)), ("ln2w", (L, C)), ("ln2b", (L, C)),
                  ("fcw", (L, 4 * C, C)), ("fcb", (L, 4 * C)), ("fcprojw", (L, C, 4 * C)),
                  ("fcprojb", (L, C)), ("lnfw", (C,)), ("lnfb", (C,))]
        if not self.tied:
            shapes.append(("lm_head", (Vr, C)))
        return shapes


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention. qkv holds q, k, v one after another
    along the output features, each split into heads of hs = C/H channels.
    attention="manual" materializes the (B,H,T,T) scores, masks, softmaxes and
    multiplies by v (chapter 00's algorithm); "sdpa" calls
    F.scaled_dot_product_attention (flash attention on a recent GPU)."""

    def __init__(self, cfg, attention="manual"):
        super().__init__()
        self.n_head, self.attention = cfg.num_heads, attention
        self.qkv = nn.Linear(cfg.channels, 3 * cfg.channels)
        self.proj = nn.Linear(cfg.channels, cfg.channels)
        if attention == "manual":
            mask = torch.ones(cfg.max_seq_len, cfg.max_seq_len, dtype=torch.bool).tril()
            self.register_buffer("causal", mask, persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, hs).transpose(1, 2) for t in (q, k, v))  # (B,H,T,hs)
        if self.attention == "manual":
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B,H,T,T)
            scores = scores.masked_fill(~self.causal[:T, :T], float("-inf"))
            y = F.softmax(scores, dim=-1) @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.fc = nn.Linear(cfg.channels, 4 * cfg.channels)
        self.gelu = nn.GELU(approximate="tanh")
        self.proj = nn.Linear(4 * cfg.channels, cfg.channels)

    def forward(self, x):
        return self.proj(self.gelu(self.fc(x)))


class Block(nn.Module):
    def __init__(self, cfg, attention):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.channels, eps=1e-5)
        self.attn = CausalSelfAttention(cfg, attention)
        self.ln2 = nn.LayerNorm(cfg.channels, eps=1e-5)
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT2(nn.Module):
    """checkpoint_blocks=True (the bench's -ckpt modes) wraps every block in
    torch.utils.checkpoint (use_reentrant=False): the forward keeps only each
    block's input, and the backward runs the block's forward again for the
    rest. It computes the same values."""

    def __init__(self, cfg, attention="manual", checkpoint_blocks=False):
        super().__init__()
        cfg.validate()
        self.cfg = cfg
        self.checkpoint_blocks = checkpoint_blocks
        self.wte = nn.Embedding(cfg.padded_vocab_size, cfg.channels)
        self.wpe = nn.Embedding(cfg.max_seq_len, cfg.channels)
        self.blocks = nn.ModuleList(Block(cfg, attention) for _ in range(cfg.num_layers))
        self.lnf = nn.LayerNorm(cfg.channels, eps=1e-5)
        self.lm_head = nn.Linear(cfg.channels, cfg.padded_vocab_size, bias=False)
        if cfg.tied:
            self.lm_head.weight = self.wte.weight

    def forward(self, idx, targets=None):
        """logits (B,T,Vp) and, given targets, the mean cross-entropy over the
        first V logits of each position."""
        B, T = idx.shape
        if T > self.cfg.max_seq_len:
            raise ValueError(f"T={T} exceeds max_seq_len={self.cfg.max_seq_len}")
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for block in self.blocks:
            if self.checkpoint_blocks and torch.is_grad_enabled():
                x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        logits = self.lm_head(self.lnf(x))
        if targets is None:
            return logits, None
        V = self.cfg.vocab_size
        loss = F.cross_entropy(logits[..., :V].reshape(-1, V).float(), targets.reshape(-1))
        return logits, loss

    # -- the checkpoint's view: 17 tensors stacked over layers --------------------
    def tensor_lists(self):
        """For each checkpoint tensor, in order, its name and the parameters it
        stacks (one for wte, wpe, lnf*, lm_head; L for the per-layer ones)."""
        bl = self.blocks
        out = [("wte", [self.wte.weight]), ("wpe", [self.wpe.weight]),
               ("ln1w", [b.ln1.weight for b in bl]), ("ln1b", [b.ln1.bias for b in bl]),
               ("qkvw", [b.attn.qkv.weight for b in bl]), ("qkvb", [b.attn.qkv.bias for b in bl]),
               ("attprojw", [b.attn.proj.weight for b in bl]),
               ("attprojb", [b.attn.proj.bias for b in bl]),
               ("ln2w", [b.ln2.weight for b in bl]), ("ln2b", [b.ln2.bias for b in bl]),
               ("fcw", [b.mlp.fc.weight for b in bl]), ("fcb", [b.mlp.fc.bias for b in bl]),
               ("fcprojw", [b.mlp.proj.weight for b in bl]),
               ("fcprojb", [b.mlp.proj.bias for b in bl]),
               ("lnfw", [self.lnf.weight]), ("lnfb", [self.lnf.bias])]
        if not self.cfg.tied:
            out.append(("lm_head", [self.lm_head.weight]))
        return out

    def checkpoint_tensors(self, grads=False):
        """The 17 (16 when tied) tensors in checkpoint order and shape, as float32
        on the CPU: the parameters, or with grads=True their gradients."""
        per_layer = set(PARAM_NAMES[2:14])
        result = []
        for name, params in self.tensor_lists():
            ts = [(p.grad if grads else p).detach().float().cpu() for p in params]
            result.append((name, torch.stack(ts) if name in per_layer else ts[0]))
        return result

    @torch.no_grad()
    def load_checkpoint_tensors(self, tensors):
        """The inverse of checkpoint_tensors: tensors is [(name, array)]."""
        per_layer = set(PARAM_NAMES[2:14])
        for (name, params), (name2, value) in zip(self.tensor_lists(), tensors):
            assert name == name2, (name, name2)
            value = torch.as_tensor(value)
            for l, p in enumerate(params):
                p.copy_(value[l] if name in per_layer else value)

    @torch.no_grad()
    def init_weights(self, seed):
        """GPT-2's initialization, seeded: normal(0, 0.02) for wte (real rows
        only: padding rows are 0), wpe, lm_head (real rows) and the weights of
        qkv and fc; normal(0, 0.02/sqrt(2L)) for the two projections into the
        residual stream (attention proj, MLP proj); biases 0, layernorm scales 1.
        Drawn on the CPU in checkpoint order, so every device gets the same."""
        gen = torch.Generator().manual_seed(seed)
        std, residual_std = 0.02, 0.02 / math.sqrt(2 * self.cfg.num_layers)
        V = self.cfg.vocab_size
        for name, params in self.tensor_lists():
            for p in params:
                if name in ("ln1w", "ln2w", "lnfw"):
                    value = torch.ones(p.shape)
                elif name.endswith("b"):  # every bias and layernorm shift
                    value = torch.zeros(p.shape)
                elif name in ("wte", "lm_head"):
                    value = torch.zeros(p.shape)
                    value[:V] = torch.randn((V, p.shape[1]), generator=gen) * std
                elif name in ("attprojw", "fcprojw"):
                    value = torch.randn(p.shape, generator=gen) * residual_std
                else:
                    value = torch.randn(p.shape, generator=gen) * std
                p.copy_(value)

    def param_groups(self, weight_decay):
        """AdamW groups: weight decay on the matrices (DECAYED), none elsewhere."""
        decay, no_decay = [], []
        for name, params in self.tensor_lists():
            (decay if name in DECAYED else no_decay).extend(params)
        return [{"params": decay, "weight_decay": weight_decay},
                {"params": no_decay, "weight_decay": 0.0}]

    def num_params(self):
        """Every parameter counted once (tied: wte once), padding rows included:
        gpt2_num_params in common/model/gpt2_config.c."""
        return sum(p.numel() for p in self.parameters())


# ---- files -------------------------------------------------------------------
def header(*values):
    h = np.zeros(HEADER_INTS, dtype="<i4")
    h[:len(values)] = values
    return h


def write_atomically(path, chunks):
    """Writes the numpy arrays / tensors in chunks to path through path.tmp.PID
    and a rename, so a reader never sees half a file."""
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            for c in chunks:
                if isinstance(c, torch.Tensor):
                    c = c.detach().cpu().contiguous().numpy()
                f.write(np.ascontiguousarray(c).astype(c.dtype.newbyteorder("<")).tobytes())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def write_checkpoint(path, model):
    c = model.cfg
    h = header(CHECKPOINT_MAGIC, CHECKPOINT_VERSION_FP32, c.max_seq_len, c.vocab_size,
               c.num_layers, c.num_heads, c.channels, c.padded_vocab_size, 0 if c.tied else 1)
    write_atomically(path, [h] + [t.float() for _, t in model.checkpoint_tensors()])


def write_debug_state(path, model, x, y, logits, loss):
    c, (B, T) = model.cfg, x.shape
    V = c.vocab_size
    # llm.c's layout: wte's and lm_head's gradients with all Vp rows (the
    # padding rows' are zero: the loss reads only the first V logits).
    grads = [g for _, g in model.checkpoint_tensors(grads=True)]
    chunks = [header(DEBUG_STATE_MAGIC, DEBUG_STATE_VERSION, B, T),
              x.to(torch.int32), y.to(torch.int32),
              logits[..., :V].float(), torch.tensor([loss], dtype=torch.float32)] + grads
    write_atomically(path, chunks)


class FileError(Exception):
    pass


def read_header(path, f, magic, version):
    raw = f.read(HEADER_BYTES)
    if len(raw) != HEADER_BYTES:
        raise FileError(f"{path}: shorter than its {HEADER_BYTES}-byte header")
    h = np.frombuffer(raw, dtype="<i4")
    if h[0] != magic:
        raise FileError(f"{path}: magic {h[0]}, expected {magic}")
    if h[1] != version:
        raise FileError(f"{path}: version {h[1]}, expected {version}")
    return h


def check_length(path, expected):
    size = os.path.getsize(path)
    if size != expected:
        raise FileError(f"{path}: {size} bytes, expected {expected}")


def read_array(path, f, dtype, count):
    a = np.fromfile(f, dtype=dtype, count=count)
    if a.size != count:
        raise FileError(f"{path}: truncated")
    return a


def read_checkpoint(path):
    """Returns (GPT2Config, [(name, float32 array)]) after checking the header
    and the file's exact length."""
    with open(path, "rb") as f:
        h = read_header(path, f, CHECKPOINT_MAGIC, CHECKPOINT_VERSION_FP32)
        if h[8] not in (0, 1):
            raise FileError(f"{path}: header[8] (untied) is {h[8]}, expected 0 or 1")
        cfg = GPT2Config(max_seq_len=int(h[2]), vocab_size=int(h[3]), num_layers=int(h[4]),
                         num_heads=int(h[5]), channels=int(h[6]),
                         padded_vocab_size=int(h[7]), tied=bool(h[8] == 0))
        try:
            cfg.validate()
        except ValueError as e:
            raise FileError(f"{path}: {e}")
        shapes = cfg.tensor_shapes()
        check_length(path, HEADER_BYTES + 4 * sum(math.prod(s) for _, s in shapes))
        tensors = [(n, read_array(path, f, "<f4", math.prod(s)).reshape(s)) for n, s in shapes]
    return cfg, tensors


def read_debug_state(path, cfg):
    """Returns dict(B, T, x, y, logits, loss, grads=[(name, array)]) for a model
    of shape cfg, after checking the header and the exact length."""
    V = cfg.vocab_size
    shapes = cfg.tensor_shapes()
    with open(path, "rb") as f:
        h = read_header(path, f, DEBUG_STATE_MAGIC, DEBUG_STATE_VERSION)
        B, T = int(h[2]), int(h[3])
        if B <= 0 or T <= 0 or T > cfg.max_seq_len:
            raise FileError(f"{path}: B={B}, T={T} (max_seq_len {cfg.max_seq_len})")
        N = B * T
        n_grads = sum(math.prod(s) for _, s in shapes)
        check_length(path, HEADER_BYTES + 4 * (2 * N + N * V + 1 + n_grads))
        x = read_array(path, f, "<i4", N).reshape(B, T)
        y = read_array(path, f, "<i4", N).reshape(B, T)
        for name, a in (("x", x), ("y", y)):
            if a.min() < 0 or a.max() >= V:
                raise FileError(f"{path}: {name} holds tokens outside [0, {V})")
        logits = read_array(path, f, "<f4", N * V).reshape(B, T, V)
        loss = float(read_array(path, f, "<f4", 1)[0])
        grads = [(n, read_array(path, f, "<f4", math.prod(s)).reshape(s)) for n, s in shapes]
    return dict(B=B, T=T, x=x, y=y, logits=logits, loss=loss, grads=grads)


def read_shard_batch(path, B, T, offset, vocab_size):
    """B*T+1 tokens from a token shard, from position offset: (x, y) int64."""
    with open(path, "rb") as f:
        h = read_header(path, f, SHARD_MAGIC, SHARD_VERSION)
        count = int(h[2])
        if count < 0:
            raise FileError(f"{path}: negative token count {count}")
        check_length(path, HEADER_BYTES + 2 * count)
        need = B * T + 1
        if offset < 0 or offset + need > count:
            raise FileError(f"{path}: {count} tokens, the batch needs {need} from {offset}")
        f.seek(HEADER_BYTES + 2 * offset)
        tokens = read_array(path, f, "<u2", need).astype(np.int64)
    if tokens.max() >= vocab_size:
        raise FileError(f"{path}: token {tokens.max()} is not below the vocab size {vocab_size}")
    tokens = torch.from_numpy(tokens)
    return tokens[:-1].view(B, T), tokens[1:].view(B, T)


# ---- precision switches ------------------------------------------------------
def set_tf32(enabled):
    """TF32 on or off for matmuls and cuDNN convolutions. Off, FP32 matmuls are
    true FP32 ("highest" precision)."""
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    torch.set_float32_matmul_precision("high" if enabled else "highest")


def pick_device(name):
    if name:
        return torch.device(name)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def strict_fp32(device):
    """FP32 everywhere, TF32 off, deterministic kernels where PyTorch has them."""
    if device.type == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    set_tf32(False)
    torch.use_deterministic_algorithms(True, warn_only=True)


def forward_backward(model, x, y):
    model.zero_grad(set_to_none=True)
    logits, loss = model(x, y)
    loss.backward()
    return logits.detach(), loss.detach()


# ---- write-state -------------------------------------------------------------
def cmd_write_state(a):
    device = pick_device(a.device)
    strict_fp32(device)
    if a.init_from:
        cfg, tensors = read_checkpoint(a.init_from)
        model = GPT2(cfg).to(device)
        model.load_checkpoint_tensors(tensors)
    else:
        cfg = GPT2Config(max_seq_len=a.max_seq_len, vocab_size=a.vocab,
                         padded_vocab_size=a.padded_vocab or a.vocab, num_layers=a.layers,
                         num_heads=a.heads, channels=a.channels, tied=a.tied)
        model = GPT2(cfg).to(device)
        model.init_weights(a.seed)
    if a.T > cfg.max_seq_len:
        sys.exit(f"write-state: T={a.T} exceeds max_seq_len={cfg.max_seq_len}")
    if a.tokens:
        x, y = read_shard_batch(a.tokens, a.B, a.T, a.token_offset, cfg.vocab_size)
    else:
        gen = torch.Generator().manual_seed(a.seed + 1)
        tokens = torch.randint(0, cfg.vocab_size, (a.B, a.T + 1), generator=gen)
        x, y = tokens[:, :-1], tokens[:, 1:]
    x, y = x.contiguous(), y.contiguous()
    print(f"model {cfg} ({model.num_params()} parameters) on {device}", file=sys.stderr)

    # The checkpoint holds the weights BEFORE any update.
    write_checkpoint(a.out_model, model)
    logits, loss = forward_backward(model, x.to(device), y.to(device))
    write_debug_state(a.out_state, model, x, y, logits, loss.item())
    print(f"loss {loss.item():.9g}; wrote {a.out_model} and {a.out_state}")

    if a.steps > 0:
        losses = train_steps(model, x.to(device), y.to(device), a)
        if a.out_losses:
            text = "".join(f"{i} {l:.9g}\n" for i, l in enumerate(losses))
            write_atomically(a.out_losses, [np.frombuffer(text.encode(), dtype=np.uint8)])
        if a.out_model_after:
            write_checkpoint(a.out_model_after, model)
        for i, l in enumerate(losses):
            print(f"step {i} loss {l:.9g}")


def train_steps(model, x, y, a):
    """a.steps AdamW steps on the batch (x, y) at a constant learning rate:
    torch.optim.AdamW, betas (0.9, 0.95), eps 1e-8, weight decay on matrices
    only, the per-parameter (foreach=False, fused=False) implementation. With
    --grad-clip > 0 the gradients are first scaled by
    min(1, grad_clip / (norm + 1e-6)), norm the global L2 norm (as the C
    trainer's grad_clip_factor). Returns the loss before each update."""
    opt = torch.optim.AdamW(model.param_groups(a.weight_decay), lr=a.lr, betas=(0.9, 0.95),
                            eps=1e-8, foreach=False, fused=False)
    losses = []
    for _ in range(a.steps):
        _, loss = forward_backward(model, x, y)
        losses.append(loss.item())
        if a.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip, foreach=False)
        opt.step()
    return losses


# ---- verify ------------------------------------------------------------------
def cmd_verify(a):
    """Reads a checkpoint and a debug state, recomputes the forward and the
    backward on the state's batch, and prints the largest differences."""
    device = pick_device(a.device)
    strict_fp32(device)
    try:
        cfg, tensors = read_checkpoint(a.model)
        ds = read_debug_state(a.state, cfg)
    except FileError as e:
        sys.exit(f"verify: {e}")
    print(f"{a.model}: {cfg}")
    print(f"{a.state}: B={ds['B']} T={ds['T']} loss={ds['loss']:.9g}")
    V = cfg.vocab_size
    for name, t in tensors:
        if name in ("wte", "lm_head") and np.any(t[V:] != 0):
            print(f"WARNING: {name} has non-zero padding rows")
    model = GPT2(cfg).to(device)
    model.load_checkpoint_tensors(tensors)
    x = torch.from_numpy(ds["x"].astype(np.int64)).to(device)
    y = torch.from_numpy(ds["y"].astype(np.int64)).to(device)
    logits, loss = forward_backward(model, x, y)

    def report(name, got, want):
        got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
        diff = np.abs(got - want)
        scale = max(np.abs(want).max(), 1e-30)
        rel = diff.max() / scale
        print(f"  {name:10s} max|diff| {diff.max():.3e}  max|diff|/max|ref| {rel:.3e}")
        return rel

    worst = report("logits", logits[..., :V].cpu().numpy(), ds["logits"])
    worst = max(worst, report("loss", [loss.item()], [ds["loss"]]))
    for (name, g), (_, want) in zip(model.checkpoint_tensors(grads=True), ds["grads"]):
        g = g[:V] if name in ("wte", "lm_head") else g
        worst = max(worst, report("d" + name, g.numpy(), want))
    print(f"worst relative difference {worst:.3e}")
    if worst > a.tolerance:
        sys.exit(f"verify: FAILED (tolerance {a.tolerance:g})")
    print("verify: OK")


# ---- bench -------------------------------------------------------------------
@dataclass(frozen=True)
class BenchMode:
    """One PyTorch training recipe: the book's switches, each on or off."""
    chapters: str          # the book's chapters whose rows this one stands beside
    tf32: bool             # TF32 for the matmuls that stay in fp32
    bf16: bool             # bf16 autocast (fp32 weights and optimizer state)
    sync_every_step: bool  # loss.item() in every step: a host-device sync
    compile: bool          # torch.compile: Inductor fuses the elementwise ops
    attention: str         # "manual": (B,H,T,T) scores, mask, softmax, @v; "sdpa": flash
    pad_vocab: bool        # Vp = V rounded up to 128 (50257 -> 50304); else Vp = V
    tied: bool             # lm_head is wte; else a separate (Vp,C) matrix
    fused_adamw: bool      # AdamW(fused=True), foreach clipping; else one tensor at a time
    foreach_adamw: bool = False  # not fused: AdamW(foreach=True), PyTorch's default on a GPU
    loss_only: bool = False  # the (compiled) forward returns the loss alone, not the logits
    float8: bool = False   # torchao float8 training for the blocks' linears (not lm_head)
    checkpoint: bool = False  # torch.utils.checkpoint around every block (use_reentrant=False)
    adamw8bit: bool = False  # torchao.optim.AdamW8bit (8-bit moments) instead of torch's AdamW


# The PyTorch ladder. From compile-bf16 on, each row is the row above it plus
# one switch, as each chapter of the book is the previous one plus one.
MODES = {
    #             chapters tf32    bf16    sync    compile  attention  pad     tied    fused
    "eager-fp32":
        BenchMode("00",    False,  False,  True,   False,   "manual",  False,  False,  False),
    "eager-tf32":
        BenchMode("01",    True,   False,  True,   False,   "manual",  False,  False,  False),
    "eager-bf16":
        BenchMode("02-03", True,   True,   False,  False,   "manual",  False,  False,  False),
    "compile-bf16":
        BenchMode("04",    True,   True,   False,  True,    "manual",  False,  False,  False),
    "compile-bf16-sdpa":
        BenchMode("05",    True,   True,   False,  True,    "sdpa",    False,  False,  False),
    "compile-bf16-sdpa-vocab":
        BenchMode("06",    True,   True,   False,  True,    "sdpa",    True,   False,  False),
    "compile-bf16-sdpa-vocab-tied":
        BenchMode("07",    True,   True,   False,  True,    "sdpa",    True,   True,   False),
    "compile-bf16-sdpa-vocab-tied-fused":
        BenchMode("08-12", True,   True,   False,  True,    "sdpa",    True,   True,   True),
    # Beside the ladder: PyTorch's default AdamW (foreach, not fused), the
    # unfused baseline a PyTorch user would start from (chapter 09's row);
    # and the best recipe with a forward that returns only the loss, so that
    # the (B,T,Vp) logits are not an output kept alive to the step's end.
    "compile-bf16-sdpa-vocab-tied-foreach":
        BenchMode("09",    True,   True,   False,  True,    "sdpa",    True,   True,   False,
                  foreach_adamw=True),
    "compile-bf16-sdpa-vocab-tied-fused-lossonly":
        BenchMode("08-12", True,   True,   False,  True,    "sdpa",    True,   True,   True,
                  loss_only=True),
    # The same, with the blocks' matrix products in float8 (torchao), beside
    # chapter 13's FP8 GEMMs. It needs torchao (tools/fetch_torchao.sh).
    "compile-bf16-sdpa-vocab-tied-fused-lossonly-float8":
        BenchMode("13",    True,   True,   False,  True,    "sdpa",    True,   True,   True,
                  loss_only=True, float8=True),
    # Beside chapter 14 (GPT-2 medium and XL in a memory budget: bench
    # --model): the lossonly recipe run eagerly (the PyTorch measurements the
    # chapter starts from were eager), then + activation checkpointing of
    # every block, then + torchao's 8-bit AdamW (tools/fetch_torchao.sh, as
    # the float8 mode).
    "eager-bf16-sdpa-vocab-tied-fused-lossonly":
        BenchMode("14",    True,   True,   False,  False,   "sdpa",    True,   True,   True,
                  loss_only=True),
    "eager-bf16-sdpa-vocab-tied-fused-lossonly-ckpt":
        BenchMode("14",    True,   True,   False,  False,   "sdpa",    True,   True,   True,
                  loss_only=True, checkpoint=True),
    "eager-bf16-sdpa-vocab-tied-fused-lossonly-ckpt-8bit":
        BenchMode("14",    True,   True,   False,  False,   "sdpa",    True,   True,   True,
                  loss_only=True, checkpoint=True, adamw8bit=True),
}
# Old names, kept so that rows measured under them still read right. The row
# records the name it was asked for (its `chapter` column: pytorch:NAME).
ALIASES = {"compile-bf16-flash": "compile-bf16-sdpa-vocab-tied-fused"}

# bench --model: GPT-2's four sizes as (layers, heads, channels), the C
# trainer's presets of the same names (common/train/train_options.c).
MODEL_SIZES = {"124m": (12, 12, 768), "355m": (24, 16, 1024), "774m": (36, 20, 1280),
               "1558m": (48, 25, 1600)}

# Dense BF16 tensor-core peaks (TFLOP/s), the default MFU denominator for every
# mode, so that rows of one table divide by the same number.
BF16_PEAK_TFLOPS = [("H100 PCIe", 756.0), ("H100", 989.4), ("H200", 989.4), ("H800", 989.4),
                    ("A100", 312.0), ("L40S", 362.05), ("RTX 4090", 165.2)]


def mode_changes(before, after):
    """The switches that differ between two modes, as 'name=value' strings."""
    names = [f.name for f in fields(BenchMode) if f.name != "chapters"]
    return [f"{n}={getattr(after, n)}" for n in names if getattr(before, n) != getattr(after, n)]


def print_modes():
    """The ladder, one row a line, with what each row changes over the one above."""
    names = list(MODES)
    for prev, name in zip([None] + names, names):
        change = "-" if prev is None else ", ".join(mode_changes(MODES[prev], MODES[name]))
        print(f"{name:36s} chapters {MODES[name].chapters:6s} {change}")
    for alias, name in ALIASES.items():
        print(f"{alias:36s} the same as {name}")


def flops_per_token(model, T):
    """FLOPs of one training step per token (forward + backward), exactly as
    common/model/flops.c counts them:
        6 * N  +  12 * L * C * T
    N counts the weights that take part in matrix products: every transformer
    block's and the lm_head's (wte's when tied); the embedding lookups (wte
    when untied, wpe) multiply nothing. 6N is 2 FLOPs per weight forward and 4
    backward; 12*L*C*T (= 12*L*H*hs*T) counts attention's QK^T and AV
    products, forward and backward, without halving for the causal mask."""
    c = model.cfg
    vp = c.padded_vocab_size
    n = model.num_params() - vp * c.channels - c.max_seq_len * c.channels
    if c.tied:
        n += vp * c.channels
    return 6 * n + 12 * c.num_layers * c.channels * T


def is_out_of_memory(e):
    """True when e, or an exception it wraps (torch.compile wraps errors raised
    while it compiles), is PyTorch's out-of-memory error."""
    while e is not None:
        if isinstance(e, torch.cuda.OutOfMemoryError):
            return True
        e = e.__cause__ or e.__context__
    return False


def attention_rewrites():
    """How many times Inductor's fuse_attention pass has replaced an attention
    written out by hand with scaled_dot_product_attention in this process. For
    the manual-attention modes it must stay 0: torch.compile may fuse the
    elementwise ops around the (B,H,T,T) scores, but not skip the scores."""
    from torch._dynamo.utils import counters  # PyTorch's own compile statistics
    return counters["inductor"]["fuse_attention"]


def import_torchao(mode_name, module, *names):
    """Names from one of torchao's modules, imported only for the modes that
    need torchao (float8, 8-bit AdamW): the other modes, --help and
    --list-modes need none. Without torchao the run ends with one line saying
    where to get it."""
    try:
        found = importlib.import_module(module)
        return tuple(getattr(found, name) for name in names)
    except (ImportError, AttributeError) as e:
        sys.exit(f"bench: mode {mode_name} needs the Python package torchao, which does not "
                 f"import here ({e}): run tools/fetch_torchao.sh, which puts its wheel in "
                 f"build/wheels for tools/bench.sh to install, or pip install torchao==0.18.0")


def convert_blocks_to_float8(model, device, mode_name):
    """Swaps the four nn.Linear of every block (attn.qkv, attn.proj, mlp.fc,
    mlp.proj) for torchao's Float8Linear, in place. Each of their matrix
    products, forward and backward, then multiplies float8 copies of its
    operands (e4m3 for activations and weights, e5m2 for the output's
    gradient), each scaled by one number computed at every call from that
    tensor's largest magnitude: the "tensorwise" recipe, torchao's default.
    The weights, their gradients and AdamW's state keep their dtypes. The
    lm_head (and so wte, tied to it) stays as the bf16 recipe has it: see
    cmd_bench's docstring for why. Returns the number of layers converted."""
    Float8LinearConfig, convert_to_float8_training = import_torchao(
        mode_name, "torchao.float8", "Float8LinearConfig", "convert_to_float8_training")
    config = Float8LinearConfig.from_recipe_name("tensorwise")
    if device.type != "cuda":
        # The CPU smoke test has no float8 matrix units: torchao then
        # multiplies the float8 values in higher precision instead.
        config = replace(config, emulate=True)
    converted = []

    def in_a_block(module, fqn):  # fqn: "blocks.3.mlp.fc"; the lm_head's is "lm_head"
        if fqn.startswith("blocks."):
            converted.append(fqn)
            return True
        return False

    convert_to_float8_training(model, module_filter_fn=in_a_block, config=config)
    expected = 4 * model.cfg.num_layers
    if len(converted) != expected:  # the model's layout changed under this filter
        sys.exit(f"bench: float8 converted {len(converted)} linear layers, expected {expected}")
    return len(converted)


def build_for_bench(mode, a, device):
    """The model and its optimizer, shaped and switched as the mode says;
    with --zero (under torchrun), the optimizer's state sharded over the ranks."""
    # Before any work: a missing torchao ends the run at once.
    if mode.float8:
        import_torchao(a.mode, "torchao.float8", "Float8LinearConfig",
                       "convert_to_float8_training")
    if mode.adamw8bit:
        (AdamW8bit,) = import_torchao(a.mode, "torchao.optim", "AdamW8bit")
    set_tf32(mode.tf32)
    torch.manual_seed(a.seed)
    V = a.vocab
    Vp = ((V + 127) // 128) * 128 if mode.pad_vocab else V  # 50257 -> 50304
    cfg = GPT2Config(max_seq_len=a.max_seq_len, vocab_size=V, padded_vocab_size=Vp,
                     num_layers=a.layers, num_heads=a.heads, channels=a.channels,
                     tied=mode.tied)
    if a.T > cfg.max_seq_len:
        sys.exit(f"bench: T={a.T} exceeds max_seq_len={cfg.max_seq_len}")
    model = GPT2(cfg, attention=mode.attention, checkpoint_blocks=mode.checkpoint).to(device)
    model.init_weights(a.seed)
    if mode.float8:
        # Before torch.compile (make_train_step), which then compiles the
        # casts and scalings together with the rest of the step; and before
        # the optimizer, though Float8Linear keeps the very same weight and
        # bias Parameters, so either order would give AdamW the same tensors.
        n = convert_blocks_to_float8(model, device, a.mode)
        print(f"# float8 (torchao, tensorwise): {n} linear layers of the blocks; "
              f"lm_head in bf16", file=sys.stderr)
    # Not fused: foreach=False asks for the loop over tensors (chapter 00's
    # AdamW); left unset, PyTorch would pick its multi-tensor version on a GPU,
    # which the foreach mode asks for by name.
    if mode.adamw8bit:
        # torchao's AdamW8bit: the two moments of every tensor of at least
        # 4096 values (a multiple of its block of 256) in 8 bits, one scale per
        # block, the others in fp32; the weights stay fp32. Its step runs a
        # function compiled by torch.compile once per tensor.
        opt = AdamW8bit(model.param_groups(0.1), lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    elif a.zero:
        # ZeRO-1, as chapter 15's second part: each rank keeps AdamW's moments
        # of about 1/world of the tensors (whole tensors, spread by size) and
        # updates only those; then every rank broadcasts what it updated.
        # parameters_as_bucket_view: the parameters of each rank lie side by
        # side in one buffer, so that this is one broadcast per rank rather
        # than one per tensor (about 150).
        opt = ZeroRedundancyOptimizer(model.param_groups(0.1), torch.optim.AdamW,
                                      parameters_as_bucket_view=True, lr=a.lr,
                                      betas=(0.9, 0.95), eps=1e-8,
                                      foreach=mode.foreach_adamw and not mode.fused_adamw,
                                      fused=mode.fused_adamw)
    else:
        opt = torch.optim.AdamW(model.param_groups(0.1), lr=a.lr, betas=(0.9, 0.95), eps=1e-8,
                                foreach=mode.foreach_adamw and not mode.fused_adamw,
                                fused=mode.fused_adamw)
    return model, opt


def make_train_step(model, opt, mode, a, device, data, ranks=None):
    """One training step on batch i: forward with the loss, backward, gradient
    clipping, AdamW, zero_grad. The loss comes back as a device tensor, read
    only after the timed loop, except where the mode syncs every step. Under
    torchrun (ranks) the forward is DistributedDataParallel's (data_parallel),
    whose backward also averages the gradients over the ranks."""
    def loss_only(x, y):
        return model(x, y)[1]

    if ranks:
        forward = data_parallel(model, mode, device)
    else:
        forward = loss_only if mode.loss_only else model
        if mode.compile:
            forward = torch.compile(forward)

    def step(i):
        x, y = data[i, :, :-1], data[i, :, 1:]
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=mode.bf16):
            out = forward(x, y)  # the cross-entropy over the first V logits only
            loss = out if mode.loss_only else out[1]
        loss.backward()
        if a.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip,
                                           foreach=mode.fused_adamw)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item() if mode.sync_every_step else loss.detach()
    return step


def time_steps(step, n, device):
    """Runs steps 0..n-1 and returns (ms of each step, loss of each step). On a
    GPU each step is bracketed by CUDA events, which time the GPU's work
    without waiting for it; one synchronize at the end. On the CPU (a smoke
    test, not a measurement) the wall clock."""
    losses, times = [], []
    if device.type == "cuda":
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for i in range(n):
            starts[i].record()
            losses.append(step(i))
            ends[i].record()
        torch.cuda.synchronize()
        times = [starts[i].elapsed_time(ends[i]) for i in range(n)]
    else:
        for i in range(n):
            t0 = time.perf_counter()
            losses.append(float(step(i)))
            times.append((time.perf_counter() - t0) * 1e3)
    return times, [float(l) for l in losses]  # the no-sync modes' losses: read only now


# ---- several GPUs: torchrun, one process a GPU -------------------------------
@dataclass(frozen=True)
class Ranks:
    """This process's place among torchrun's processes."""
    rank: int   # 0 .. world-1; rank 0 prints and writes the row
    world: int  # how many processes (GPUs)


def join_ranks(device_name):
    """Under torchrun, which gives every process RANK, LOCAL_RANK and
    WORLD_SIZE (and MASTER_ADDR, MASTER_PORT for the rendezvous): joins the
    process group and returns (Ranks, this process's device), GPU LOCAL_RANK
    over NCCL, or the CPU over gloo for a smoke test (--device cpu). Started
    without torchrun: (None, the device asked for), one process as before."""
    if not all(v in os.environ for v in ("RANK", "LOCAL_RANK", "WORLD_SIZE")):
        return None, torch.device(device_name)
    device = torch.device(device_name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            sys.exit("bench: needs a CUDA GPU (or --device cpu for a smoke test)")
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)  # before NCCL: its communicator is on this GPU
        dist.init_process_group("nccl", device_id=device)
    else:
        dist.init_process_group("gloo")
    return Ranks(dist.get_rank(), dist.get_world_size()), device


class LossOnly(nn.Module):
    """The model's forward returning the loss alone (the -lossonly modes) as a
    module, for DistributedDataParallel, which wraps modules, not functions."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, y):
        return self.model(x, y)[1]


def data_parallel(model, mode, device):
    """The forward of a step under torchrun: the model (or LossOnly(model)) in
    DistributedDataParallel, which broadcasts rank 0's weights once, here, and
    then in every backward averages each bucket of gradients (25 MiB, DDP's
    default) over the ranks as soon as the backward has produced it, on
    NCCL's stream, overlapped with the rest of the backward."""
    inner = LossOnly(model) if mode.loss_only else model
    if mode.compile:
        # Compile the module DDP wraps, then wrap it: the order PyTorch's
        # guide "Where to apply torch.compile?" gives for DDP (torch.compile
        # handles the DDP wrapper itself poorly). DDP's forward marks itself
        # active around its call of the compiled module, and Dynamo then cuts
        # the compiled graph at DDP's bucket boundaries (DDPOptimizer,
        # torch._dynamo.config.optimize_ddp, on by default), so that each
        # bucket's all-reduce starts when its part of the compiled backward
        # is done, as in eager DDP, rather than after the whole backward.
        # (DDP's older notes wrapped first and compiled the wrapper; Dynamo
        # cuts the graph at the buckets either way.)
        inner.compile()
    # gradient_as_bucket_view: the gradients are views of DDP's buckets, so
    # they are not copied into them and back (and take no second copy of
    # memory). static_graph: every step uses every parameter, the same way
    # (the tied wte twice, in the same order), so DDP may record the first
    # step's order and keep its buckets in it, with no search for unused
    # parameters. broadcast_buffers=False: the model's only buffer, the
    # causal mask of the manual-attention modes, never changes, so nothing
    # is sent before each forward.
    gpu = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(inner, device_ids=gpu, gradient_as_bucket_view=True,
                                   static_graph=True, broadcast_buffers=False)


def slowest_rank(times, device):
    """Each step's time on the rank that took longest (all_reduce MAX): the
    step is not over before its slowest rank's is."""
    t = torch.tensor(times, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def write_bench_row(a, chapter, model, device, times, world=1):
    """Prints the results.csv header and row (and appends the row to
    --out-csv): median ms/step, tok/s, TFLOP/s, MFU, peak device memory.
    With several ranks (world), B is each rank's: tok/s and TFLOP/s are the
    total of them all, MFU is against world times one GPU's peak, and the
    peak memory is this rank's (rank 0's)."""
    ms = statistics.median(times)
    tok_s = a.B * a.T * world / (ms / 1e3)
    flops = flops_per_token(model, a.T)
    tflops = flops * tok_s / 1e12
    on_gpu = device.type == "cuda"
    gpu = torch.cuda.get_device_name(device) if on_gpu else "cpu"
    peak = a.peak_tflops
    if peak is None and on_gpu:
        peak = next((p for key, p in BF16_PEAK_TFLOPS if key in gpu), None)
    mfu = tflops / (peak * world) if peak else float("nan")
    # Peak memory since the reset before the first step: weights, optimizer
    # state, gradients and the largest set of activations.
    mem = f"{torch.cuda.max_memory_allocated(device) / 2**30:.2f}" if on_gpu else ""
    print(f"# torch {torch.__version__}, {gpu}, {model.num_params()} parameters, "
          f"{flops} FLOPs/token, MFU against {peak} TFLOP/s", file=sys.stderr)
    # The columns of results.csv, shared with build/train_gpt2_fp32
    # --bench-csv; PyTorch has no phase split, so those columns stay empty.
    row = (f"{a.label or a.mode},{chapter},{a.B},{a.T},{len(times)},{ms:.2f},{tok_s:.0f},"
           f"{tflops:.2f},{mfu:.4f},{mem},,,,")
    cols = ("label,chapter,B,T,steps,ms_per_step,tok_per_s,tflops,mfu,peak_mem_gib,"
            "data_ms,forward_ms,backward_ms,optimizer_ms")
    print(cols)
    print(row)
    if a.out_csv:
        new = not os.path.exists(a.out_csv) or os.path.getsize(a.out_csv) == 0
        with open(a.out_csv, "a") as f:
            if new:
                f.write(cols + "\n")
            f.write(row + "\n")


def cmd_bench(a):
    """Times training steps: B*T synthetic random tokens per step (drawn
    beforehand, already on the device, so no mode pays for data loading),
    forward + loss, backward, gradient clipping at --grad-clip (0: none),
    AdamW (weight decay 0.1 on matrices, constant --lr) and zero_grad. Each
    step is bracketed by CUDA events; the result is the median ms/step over
    the --steps timed steps after --warmup steps (torch.compile compiles in
    the first step and may recompile in the second: keep --warmup >= 2).
    Peak memory is torch.cuda.max_memory_allocated.

    Modes (--list-modes prints them). From compile-bf16 on, each is the one
    above plus one change, beside the book's chapter of the same change:
      eager-fp32        00  FP32, TF32 off, manual attention (materializes the
                            (B,H,T,T) scores), V=50257 untied, AdamW
                            foreach=False fused=False (one tensor at a time),
                            loss.item() every step
      eager-tf32        01  the same with TF32 matmuls
      eager-bf16        02-03  + bf16 autocast, no loss.item() in the step
      compile-bf16      04  + torch.compile (attention still manual: q@k^T,
                            mask, softmax, @v; the run stops if Inductor
                            swaps it for scaled_dot_product_attention)
      compile-bf16-sdpa 05  + F.scaled_dot_product_attention(is_causal=True)
      compile-bf16-sdpa-vocab  06  + padded vocab Vp=50304
      compile-bf16-sdpa-vocab-tied  07  + lm_head tied to wte
      compile-bf16-sdpa-vocab-tied-fused  08-12  + AdamW(fused=True) and
                            foreach gradient clipping: PyTorch's best recipe.
                            Chapter 08 (data workers) has no PyTorch change:
                            the tokens already wait on the device. Chapters
                            10-12 compare against this row.
      compile-bf16-sdpa-vocab-tied-fused-lossonly  08-12  the same, with a
                            compiled forward that returns only the loss (no
                            (B,T,Vp) logits kept alive as an output)
      compile-bf16-sdpa-vocab-tied-fused-lossonly-float8  13  + torchao's
                            float8 training (torchao 0.18.0, not installed
                            with torch: tools/fetch_torchao.sh). Before
                            torch.compile, the four nn.Linear of every block
                            (attn.qkv, attn.proj, mlp.fc, mlp.proj) become
                            torchao's Float8Linear: each of their matrix
                            products, forward and backward, multiplies
                            float8 copies of its operands, each scaled by one
                            number from its largest magnitude, computed anew
                            at every call ("tensorwise" dynamic scaling,
                            torchao's default recipe). Weights, gradients
                            and AdamW's state keep their precision; MFU is
                            still against the BF16 peak.
                            The lm_head (the tied wte) stays in bf16. Its
                            output, the (B,T,Vp) logits with Vp=50304, is the
                            step's largest activation, over 16 times the widest
                            block output (4C=3072): tensorwise scaling of the
                            logits' gradient needs a reduction over all of it
                            and then a cast of all of it, far more casting
                            than any block layer's; and those logits go
                            straight into the softmax and the loss.
                            torchao's automatic filter
                            (_auto_filter_for_recipe) has another rule: it
                            leaves in high precision layers whose sizes are
                            not multiples of 16, and small ones (for
                            tensorwise, K <= 4096 with N <= 1024: here
                            attn.proj and mlp.proj, N=768), and by it the
                            lm_head would be converted. This mode does not
                            use that filter: it converts all four block
                            layers, so that its row has every block GEMM in
                            float8, and keeps the lm_head out for the
                            reasons above. Without torchao the run ends with
                            one line saying how to get it. On the CPU (the
                            smoke test) torchao emulates the float8 GEMMs.
      eager-bf16-sdpa-vocab-tied-fused-lossonly  14  the lossonly recipe
                            without torch.compile, for the larger models
                            (GPT-2 medium or XL: --model), beside chapter
                            14's memory budget
      eager-bf16-sdpa-vocab-tied-fused-lossonly-ckpt  14  + activation
                            checkpointing: every block runs under
                            torch.utils.checkpoint (use_reentrant=False), so
                            the forward keeps only the blocks' inputs and the
                            backward runs each block's forward again (as the
                            trainer's --recompute block). MFU still counts
                            the model's FLOPs only, not the recomputed ones.
      eager-bf16-sdpa-vocab-tied-fused-lossonly-ckpt-8bit  14  + torchao's
                            AdamW8bit (torchao.optim, the same wheel as the
                            float8 mode) instead of fused AdamW: both moments
                            of every tensor of at least 4096 values in 8
                            bits with a scale per block of 256, the weights
                            in fp32; its step calls a torch.compile'd
                            function once per tensor (compiled in the
                            warm-up). Without torchao, one line says how to
                            get it.
      compile-bf16-flash  an alias of compile-bf16-sdpa-vocab-tied-fused (its
                            old name, kept for the rows measured under it)
    The cross-entropy always excludes the padding logits (as the C trainer).
    No mode syncs inside the step but the eager fp32/tf32 ones' loss.item().
    Out of memory (a large --B with manual attention) ends the run with one
    line, "bench: out of memory at B=..", and exit status 1.
    --model 124m (the default), 355m, 774m or 1558m: GPT-2's four sizes
    (layers/heads/channels 12/12/768, 24/16/1024, 36/20/1280, 48/25/1600, the
    C trainer's presets); --layers, --heads, --channels override the
    preset's. A size other than 124m is named in the row's chapter column
    (pytorch:MODE:SIZE).
    --device cpu --no-compile runs any mode's forward and backward on the
    CPU, with wall-clock times and no peak memory: a smoke test only (the
    8-bit AdamW compiles its step even then: Inductor needs a C++ compiler).

    Several GPUs (beside chapter 15): under torchrun (torchrun --standalone
    --nproc-per-node N tools/pytorch_reference.py bench ...), each of the N
    processes takes GPU LOCAL_RANK, joins an NCCL process group and trains
    the model in DistributedDataParallel (data_parallel says how and why) on
    random batches of its own, --B sequences a step (seeded by its rank). The
    ranks start the first step together (a barrier), a step's time is its
    slowest rank's, and rank 0 alone prints and writes the row: B per GPU,
    tok/s and TFLOP/s the total over the ranks, MFU against N GPUs' peak,
    the peak memory rank 0's, the chapter column pytorch:MODE:ddpN. With
    N=1 it is DDP over one GPU: the single-process row plus the wrapper's
    cost. --zero also shards AdamW's state over the ranks (ZeRO-1:
    ZeroRedundancyOptimizer around the mode's AdamW; pytorch:MODE:ddpN-zero).
    --device cpu under torchrun runs the same over gloo: a smoke test."""
    if a.list_modes:
        print_modes()
        return
    name = ALIASES.get(a.mode, a.mode)
    mode = MODES[name]
    chapter = f"pytorch:{a.mode}" + ("" if a.model == "124m" else f":{a.model}")
    if a.no_compile and mode.compile:
        mode, chapter = replace(mode, compile=False), chapter + ":no-compile"
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("bench: needs a CUDA GPU (or --device cpu for a smoke test)")
    if a.zero and mode.adamw8bit:
        sys.exit(f"bench: --zero shards torch's AdamW, not the 8-bit AdamW of {a.mode}")
    ranks, device = join_ranks(a.device)
    if a.zero and not ranks:
        sys.exit("bench: --zero shards the optimizer over torchrun's processes: "
                 "run under torchrun --nproc-per-node N")
    bench_steps(a, mode, name, chapter, ranks, device)
    # (After an error, not: a rank that stops ends them all, torchrun's way.)
    if ranks:
        dist.destroy_process_group()


def bench_steps(a, mode, name, chapter, ranks, device):
    """cmd_bench's measurement, in this process: one rank of torchrun's
    (ranks) or the only process (ranks None)."""
    world, first = (ranks.world, ranks.rank == 0) if ranks else (1, True)
    if ranks:
        chapter += f":ddp{world}" + ("-zero" if a.zero else "")
    if a.mode != name and first:
        print(f"# {a.mode} is {name}", file=sys.stderr)
    try:
        model, opt = build_for_bench(mode, a, device)
        n = a.warmup + a.steps
        # Each rank its own batches (seed + 1 + rank): rank 0's are the
        # single process's.
        gen = torch.Generator().manual_seed(a.seed + 1 + (ranks.rank if ranks else 0))
        data = torch.randint(0, a.vocab, (n, a.B, a.T + 1), generator=gen).to(device)
        step = make_train_step(model, opt, mode, a, device, data, ranks)
        if device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        if ranks:
            dist.barrier()  # every rank starts its first step at once
        times, losses = time_steps(step, n, device)
        if ranks:
            times = slowest_rank(times, device)
    except Exception as e:
        if not is_out_of_memory(e):
            raise
        sys.exit(f"bench: out of memory at B={a.B}, T={a.T} in mode {a.mode}")
    if mode.compile and mode.attention == "manual" and attention_rewrites():
        sys.exit(f"bench: torch.compile replaced the manual attention with "
                 f"scaled_dot_product_attention: {a.mode} would not be eager attention")
    if not first:
        return
    times = times[a.warmup:]
    print(f"# losses{' (rank 0)' if ranks else ''}: first {losses[0]:.4f}, "
          f"last {losses[-1]:.4f}; timed ms min {min(times):.2f} max {max(times):.2f}"
          + (f"; {world} ranks, DDP{', ZeRO-1' if a.zero else ''}" if ranks else ""),
          file=sys.stderr)
    write_bench_row(a, chapter, model, device, times, world)


# ---- command line --------------------------------------------------------------
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)

    def model_shape(q, preset=False):  # preset: the three below default to --model's
        q.add_argument("--layers", type=int, default=None if preset else 12)
        q.add_argument("--heads", type=int, default=None if preset else 12)
        q.add_argument("--channels", type=int, default=None if preset else 768)
        q.add_argument("--max-seq-len", type=int, default=1024)
        q.add_argument("--vocab", type=int, default=50257, help="V, real tokens")

    w = sub.add_parser("write-state", help="write a checkpoint and a debug state")
    w.add_argument("--out-model", required=True)
    w.add_argument("--out-state", required=True)
    w.add_argument("--B", type=int, default=4)
    w.add_argument("--T", type=int, default=64)
    w.add_argument("--seed", type=int, default=0)
    model_shape(w)
    w.add_argument("--padded-vocab", type=int, default=0, help="Vp (default: V)")
    w.add_argument("--tied", action="store_true", help="lm_head is wte (default untied)")
    w.add_argument("--init-from", help="start from this checkpoint (its shape, not the flags)")
    w.add_argument("--tokens", help="take the batch from this token shard")
    w.add_argument("--token-offset", type=int, default=0)
    w.add_argument("--device", help="cuda or cpu (default: cuda when available)")
    w.add_argument("--steps", type=int, default=0, help="then this many AdamW steps")
    w.add_argument("--lr", type=float, default=1e-4)
    w.add_argument("--weight-decay", type=float, default=0.1)
    w.add_argument("--grad-clip", type=float, default=0.0, help="0: no clipping")
    w.add_argument("--out-losses", help="the loss of each step, one 'step loss' per line")
    w.add_argument("--out-model-after", help="the checkpoint after the steps")
    w.set_defaults(func=cmd_write_state)

    v = sub.add_parser("verify", help="re-read a checkpoint + debug state and recompute")
    v.add_argument("--model", required=True)
    v.add_argument("--state", required=True)
    v.add_argument("--device")
    v.add_argument("--tolerance", type=float, default=1e-4,
                   help="largest max|diff|/max|ref| accepted (default 1e-4)")
    v.set_defaults(func=cmd_verify)

    b = sub.add_parser("bench", help="time training steps", description=cmd_bench.__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    b.add_argument("--mode", choices=list(MODES) + list(ALIASES), default="eager-fp32")
    b.add_argument("--list-modes", action="store_true",
                   help="print the modes and what each changes, then exit")
    b.add_argument("--B", type=int, default=16)
    b.add_argument("--T", type=int, default=1024)
    b.add_argument("--steps", type=int, default=30, help="timed steps")
    b.add_argument("--warmup", type=int, default=10, help="untimed steps first")
    b.add_argument("--model", choices=list(MODEL_SIZES), default="124m",
                   help="GPT-2's size: its layers, heads and channels (default 124m)")
    model_shape(b, preset=True)
    b.add_argument("--lr", type=float, default=6e-4)
    b.add_argument("--grad-clip", type=float, default=1.0, help="0: no clipping")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--peak-tflops", type=float,
                   help="MFU denominator (default: the GPU's dense BF16 peak, when known)")
    b.add_argument("--out-csv", help="append the row here (header when new)")
    b.add_argument("--label", help="the row's label (default: the mode)")
    b.add_argument("--device", default="cuda",
                   help="cuda (default), or cpu for a smoke test (wall-clock times)")
    b.add_argument("--no-compile", action="store_true",
                   help="skip torch.compile (a smoke test of a compiled mode's model)")
    b.add_argument("--zero", action="store_true",
                   help="under torchrun: shard AdamW's state over the ranks "
                        "(ZeroRedundancyOptimizer, ZeRO-1)")
    b.set_defaults(func=cmd_bench)

    a = p.parse_args(argv)
    if a.command == "bench":  # --model's shape, where --layers/--heads/--channels leave it
        for name, value in zip(("layers", "heads", "channels"), MODEL_SIZES[a.model]):
            if getattr(a, name) is None:
                setattr(a, name, value)
    if getattr(a, "steps", 0) < 0 or (a.command == "bench" and (a.steps < 1 or a.warmup < 0)):
        p.error("--steps must be positive and --warmup non-negative")
    a.func(a)


if __name__ == "__main__":
    main()
