#!/usr/bin/env python3
"""PyTorch twin of TinyGPT's training step, for same-machine speed ratios (issues 8 and 9).

Not part of CI (it needs torch, and for the GPU a CUDA device). Run it right after
`tinygpt bench` on the same machine, e.g. in one command:

    tinygpt bench --backend wgpu --preset large --steps 20
    python3 bench/pytorch_twin.py --presets large --steps 20

or on the CPU with the same thread count as ours (`cargo xtask bench --pytorch PYTHON`
runs both back to back):

    tinygpt bench --preset medium --steps 10 --threads 2
    python3 bench/pytorch_twin.py --device cpu --threads 2 --presets medium --steps 10

It prints one JSON line per preset and attention variant:
    {"backend":"pytorch","torch":...,"device":...,"attention":"manual","preset":...,
     "params":...,"ms_per_step":...,"tok_per_s":...}

The model is ours op for op (model/src/gpt.rs; presets from model/src/config.rs, checked
by the parameter count, which matches `tinygpt bench`'s `params`):
- byte vocabulary 256, learned positions, `n_layers` pre-LN blocks, d_mlp = 4 d_model;
- separate q/k/v/o projections with biases, causal softmax attention, GELU (tanh);
- final LayerNorm, logits through the token embedding transposed (tied), mean
  cross-entropy;
- AdamW (beta 0.9/0.95, eps 1e-8, weight decay 0.1 on matrices and embeddings only,
  torch's default multi-tensor implementation), global gradient-norm clipping at 1.0;
- eager float32 with TF32 off (`torch.backends.*.allow_tf32 = False`, matmul precision
  "highest"), no torch.compile, no CUDA graphs; on the CPU `--threads N` sets
  `torch.set_num_threads(N)` (intra-op threads, as ours) and one inter-op thread.

`--as-nanogpt` runs the same model the way nanoGPT's train.py runs it instead (issue 38):
bf16 autocast around forward and loss (`torch.autocast(device_type, torch.bfloat16)`; on
"cpu" too), `torch.compile(model)` in its default mode, `torch.optim.AdamW(..., fused=True)`
on CUDA (nanoGPT's test: the argument exists and the device is CUDA; elsewhere the default
implementation), `F.scaled_dot_product_attention(is_causal=True)` whatever `--attention`
says, and TF32 allowed (`torch.backends.cuda.matmul.allow_tf32 = True`, cudnn too, as
train.py sets them). No GradScaler: nanoGPT enables one for float16 only. The printed
line's `mode` is `as-nanogpt` (else `eager-fp32`); `warmup_seconds` is the untimed steps'
time, which holds the compilation (raise `--warmup` if a later step still compiles).

`--config FILE` (a `tinygpt train --config` file with a `model` section, e.g.
configs/nanogpt-shakespeare-char.json) times that model at its `training.batch_size`
instead of presets, with its `dropout` in nanoGPT's places as ours (on the embedding sum,
the attention probabilities, and the outputs of o_proj and fc_out; the same as
`tinygpt bench --config`).

`--attention manual` (the default) spells attention out as ours computes it (scores,
mask, softmax, probabilities times values; the probabilities are kept for backward);
`sdpa` uses `F.scaled_dot_product_attention(is_causal=True)`; `both` runs each.
A step is what `tinygpt bench` times: draw a batch, forward, backward, clip, AdamW step,
and read the loss back to the host (`loss.item()`, which waits for the GPU). Batches are
random bytes drawn on the GPU (ours samples text; the model's cost does not depend on
the values). The learning rate is fixed (ours follows a schedule computed on the host;
either is one scalar per step). Warm-up steps run first; the timed steps are bracketed
by `torch.cuda.synchronize()` (on the GPU).
"""

import argparse
import contextlib
import inspect
import json
import math
import platform
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# (name, layers, d_model, heads, context, batch) as in model/src/config.rs.
PRESETS = {
    "tiny": (2, 48, 3, 32, 16),
    "small": (3, 96, 3, 64, 16),
    "medium": (4, 128, 4, 96, 16),
    "large": (6, 192, 6, 128, 12),
    "xl": (8, 256, 8, 128, 8),
    "huge": (12, 256, 8, 256, 8),
}
VOCAB = 256
LN_EPS = 1e-5


class Block(nn.Module):
    def __init__(self, d, heads, attention, dropout):
        super().__init__()
        self.heads = heads
        self.attention = attention
        self.dropout = dropout
        self.ln1 = nn.LayerNorm(d, eps=LN_EPS)
        self.q_proj = nn.Linear(d, d)
        self.k_proj = nn.Linear(d, d)
        self.v_proj = nn.Linear(d, d)
        self.o_proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d, eps=LN_EPS)
        self.fc_in = nn.Linear(d, 4 * d)
        self.fc_out = nn.Linear(4 * d, d)

    def attend(self, h):
        b, t, c = h.shape
        hd = c // self.heads

        def split(x):
            return x.view(b, t, self.heads, hd).transpose(1, 2)

        q, k, v = split(self.q_proj(h)), split(self.k_proj(h)), split(self.v_proj(h))
        if self.attention == "sdpa":
            p = self.dropout if self.training else 0.0
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        else:
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
            mask = torch.ones(t, t, dtype=torch.bool, device=h.device).tril()
            probs = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = F.dropout(probs, self.dropout, self.training) @ v
        return y.transpose(1, 2).contiguous().view(b, t, c)

    def forward(self, x):
        drop = lambda y: F.dropout(y, self.dropout, self.training)
        x = x + drop(self.o_proj(self.attend(self.ln1(x))))
        return x + drop(self.fc_out(F.gelu(self.fc_in(self.ln2(x)), approximate="tanh")))


class Gpt(nn.Module):
    def __init__(self, layers, d, heads, context, attention, dropout=0.0):
        super().__init__()
        self.dropout = dropout
        self.token_embedding = nn.Embedding(VOCAB, d)
        self.position_embedding = nn.Embedding(context, d)
        self.blocks = nn.ModuleList(Block(d, heads, attention, dropout) for _ in range(layers))
        self.ln_final = nn.LayerNorm(d, eps=LN_EPS)
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02
                if name.endswith("o_proj.weight") or name.endswith("fc_out.weight"):
                    std = 0.02 / math.sqrt(2 * layers)
                nn.init.normal_(p, 0.0, std)
            elif name.endswith(".bias"):
                nn.init.zeros_(p)

    def forward(self, tokens):
        t = tokens.shape[1]
        x = self.token_embedding(tokens) + self.position_embedding.weight[:t]
        x = F.dropout(x, self.dropout, self.training)
        for block in self.blocks:
            x = block(x)
        return self.ln_final(x) @ self.token_embedding.weight.t()


def from_config(path):
    """(name, (layers, d, heads, context, batch), dropout) of a train --config file."""
    with open(path) as f:
        cfg = json.load(f)
    m = cfg["model"]
    assert m["d_mlp"] == 4 * m["d_model"], f"{path}: the twin has d_mlp = 4 d_model"
    shape = (m["n_layers"], m["d_model"], m["n_heads"], m["context_length"], cfg["training"]["batch_size"])
    return m["model_name"], shape, m.get("dropout", 0.0)


def set_matmul_precision(as_nanogpt):
    """Eager fp32: TF32 off, float32 matmuls at "highest". As nanoGPT: TF32 allowed."""
    torch.backends.cuda.matmul.allow_tf32 = as_nanogpt
    torch.backends.cudnn.allow_tf32 = as_nanogpt
    torch.set_float32_matmul_precision("high" if as_nanogpt else "highest")


def autocast(device, as_nanogpt):
    """The context forward and loss run in: bf16 autocast as nanoGPT, else none."""
    if not as_nanogpt:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def adamw(groups, device, as_nanogpt, **kwargs):
    """AdamW: fused on CUDA as nanoGPT (when this torch has the argument), else torch's default."""
    fused = as_nanogpt and device.type == "cuda" and "fused" in inspect.signature(torch.optim.AdamW).parameters
    if fused:
        kwargs["fused"] = True
    return torch.optim.AdamW(groups, **kwargs)


def mode_name(as_nanogpt):
    return "as-nanogpt" if as_nanogpt else "eager-fp32"


def bench(preset, attention, steps, warmup, device, shape=None, dropout=0.0, as_nanogpt=False):
    layers, d, heads, context, batch = shape or PRESETS[preset]
    torch.manual_seed(1337)
    model = Gpt(layers, d, heads, context, "sdpa" if as_nanogpt else attention, dropout).to(device)
    params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = adamw(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        device,
        as_nanogpt,
        lr=3e-4,
        betas=(0.9, 0.95),
        eps=1e-8,
    )
    forward = torch.compile(model) if as_nanogpt else model

    def step():
        data = torch.randint(0, VOCAB, (batch, context + 1), device=device)
        inputs, targets = data[:, :-1], data[:, 1:]
        with autocast(device, as_nanogpt):
            logits = forward(inputs)
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    started = time.perf_counter()
    for _ in range(warmup):
        step()
    sync()
    warmup_seconds = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(steps):
        loss = step()
    sync()
    ms = (time.perf_counter() - started) * 1000.0 / steps
    assert math.isfinite(loss), f"{preset}: loss {loss}"
    return {
        "backend": "pytorch",
        "torch": torch.__version__,
        "device": device_name(device),
        "threads": torch.get_num_threads() if device.type == "cpu" else None,
        "attention": "sdpa" if as_nanogpt else attention,
        "mode": mode_name(as_nanogpt),
        "preset": preset,
        "params": params,
        "ms_per_step": round(ms, 3),
        "tok_per_s": round(batch * context / (ms / 1000.0)),
        "warmup_seconds": round(warmup_seconds, 2),
    }


def device_name(device):
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--presets", default="small,medium,large,xl,huge")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--attention", choices=["manual", "sdpa", "both"], default="manual")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--threads", type=int, help="CPU threads (default: torch's, all cores)")
    ap.add_argument("--config", help="a train --config file: its model and batch instead of presets")
    ap.add_argument(
        "--as-nanogpt",
        action="store_true",
        help="bf16 autocast, torch.compile, fused AdamW, sdpa, TF32 on (default: eager fp32)",
    )
    args = ap.parse_args()
    set_matmul_precision(args.as_nanogpt)
    device = torch.device(args.device)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
        torch.set_num_interop_threads(1)
    variants = ["manual", "sdpa"] if args.attention == "both" else [args.attention]
    if args.as_nanogpt:
        variants = ["sdpa"]
    if args.config:
        name, shape, dropout = from_config(args.config)
        for attention in variants:
            line = bench(name, attention, args.steps, args.warmup, device, shape, dropout, args.as_nanogpt)
            print(json.dumps(line), flush=True)
        return
    for preset in args.presets.split(","):
        for attention in variants:
            line = bench(preset, attention, args.steps, args.warmup, device, as_nanogpt=args.as_nanogpt)
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
