#!/usr/bin/env python3
"""The PyTorch twin trained on a `tinygpt train --config` recipe, for a same-call time-to-best.

Issue 13 asks for nanoGPT's shakespeare-char result in less training time than PyTorch.
Lent GPUs differ from call to call (the same build's training seconds moved by 6% between
two calls), so a fair figure runs both back to back on one machine:

    tinygpt train --config CFG --backend wgpu --out /tmp/ours
    python3 bench/pytorch_recipe.py --config CFG

Not part of CI (it needs torch and a CUDA device). The model is `pytorch_twin.py`'s (ours
op for op, dropout in nanoGPT's places); the run is `tinygpt train`'s:
- the text `data/tinyshakespeare.txt` as bytes, the first 90% for training, the rest for
  validation; each batch `batch_size` windows of `context_length + 1` bytes at uniform
  random starts;
- AdamW with the config's betas and weight decay (on matrices and embeddings only),
  eps 1e-8, the global gradient norm clipped at `grad_clip`;
- the learning rate warmed up linearly (`lr · (step + 1) / warmup_steps`), then cosine to
  `min_lr` at `max_steps` (optim/src/schedule.rs);
- every `eval_interval` steps the mean loss over `eval_batches` validation batches (dropout
  off), the best kept, and a stop after `early_stop_patience` evaluations without a better
  one (`--patience`; 3 where the config sets none: the best comes long before `max_steps`);
- training seconds counted as ours counts them: the device's work from one evaluation to
  the next, evaluations excluded (`torch.cuda.synchronize()` around each), and the first
  step, whose time is setup (CUDA's lazy initialisation here; our kernels' compilation;
  with `--as-nanogpt`, torch.compile's tracing and code generation of the training graph,
  which all happen in that first step; the evaluation graph compiles in the first
  evaluation, which is left out as every evaluation is). `setup_seconds` in the JSON is
  that first step's time.

Eager float32, TF32 off, `--attention sdpa` (the default, PyTorch's fastest eager
attention here) or `manual`; or `--as-nanogpt`: the way nanoGPT's train.py runs
(bf16 autocast around forward and loss, evaluation included, `torch.compile(model)`,
fused AdamW on CUDA, sdpa, TF32 allowed; see pytorch_twin.py).

`--seed N` seeds torch (the model's initialisation, the batches' starts and dropout;
default the config's training.seed). Stops that leave the schedule as the config has it
(`max_steps` still shapes the cosine): `--stop-at-val X` ends the run at the first
evaluation with val ≤ X (the figure issue 38 compares: seconds and steps to reach it),
`--max-steps N` after step N, `--time-limit S` at the first step past S wall-clock seconds
since the script started (to keep a device call inside its limit; `stopped` says which).

Prints one line per evaluation like `tinygpt train`, with the training seconds so far
appended (`step 1500  train 1.2446  val 1.4674  seconds 50.52`), then one JSON line
{"backend":"pytorch","mode","seed","best_val_loss","best_step","train_seconds_to_best",
"target_val","target_step","train_seconds_to_target","setup_seconds","ms_per_step",...}.
"""

import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_twin import (  # noqa: E402
    VOCAB,
    Gpt,
    adamw,
    autocast,
    device_name,
    from_config,
    mode_name,
    set_matmul_precision,
)

TEXT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "tinyshakespeare.txt")


def lr_at(step, t):
    lr, min_lr, warmup, max_steps = t["learning_rate"], t["min_lr"], t["warmup_steps"], t["max_steps"]
    if step < warmup:
        return lr * (step + 1) / warmup
    p = min(max((step - warmup) / max(max_steps - warmup, 1), 0.0), 1.0)
    return min_lr + (lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * p))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--attention", choices=["manual", "sdpa"], default="sdpa")
    ap.add_argument(
        "--patience",
        type=int,
        help="evaluations without a better val (default: the config's early_stop_patience, else 3)",
    )
    ap.add_argument("--seed", type=int, help="default: the config's training.seed")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: a smoke test")
    ap.add_argument("--threads", type=int, help="CPU threads (default: torch's, all cores)")
    ap.add_argument(
        "--as-nanogpt",
        action="store_true",
        help="bf16 autocast, torch.compile, fused AdamW, sdpa, TF32 on (default: eager fp32)",
    )
    ap.add_argument("--stop-at-val", type=float, help="end at the first evaluation with val <= this")
    ap.add_argument("--max-steps", type=int, help="end after this step (the schedule keeps the config's)")
    ap.add_argument("--time-limit", type=float, help="end at the first step past this many wall seconds")
    args = ap.parse_args()
    script_started = time.perf_counter()

    set_matmul_precision(args.as_nanogpt)
    device = torch.device(args.device)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
        torch.set_num_interop_threads(1)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    _, (layers, d, heads, ctx, batch), dropout = from_config(args.config)
    with open(args.config) as f:
        t = json.load(f)["training"]
    seed = args.seed if args.seed is not None else t.get("seed", 1337)
    torch.manual_seed(seed)
    patience = args.patience if args.patience is not None else t.get("early_stop_patience") or 3
    attention = "sdpa" if args.as_nanogpt else args.attention
    model = Gpt(layers, d, heads, ctx, attention, dropout).to(device)
    forward = torch.compile(model) if args.as_nanogpt else model
    last_step = min(t["max_steps"], args.max_steps or t["max_steps"])

    with open(TEXT, "rb") as f:
        data = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8).to(device=device, dtype=torch.long)
    cut = int(len(data) * 0.9)
    splits = {"train": data[:cut], "val": data[cut:]}
    offsets = torch.arange(ctx + 1, device=device)

    def get_batch(split):
        d = splits[split]
        starts = torch.randint(0, len(d) - ctx - 1, (batch, 1), device=device)
        windows = d[starts + offsets]
        return windows[:, :-1], windows[:, 1:]

    def loss_of(inputs, targets):
        with autocast(device, args.as_nanogpt):
            return F.cross_entropy(forward(inputs).reshape(-1, VOCAB), targets.reshape(-1))

    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = adamw(
        [{"params": decay, "weight_decay": t["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}],
        device,
        args.as_nanogpt,
        lr=t["learning_rate"],
        betas=(t["beta1"], t["beta2"]),
        eps=1e-8,
    )

    @torch.no_grad()
    def evaluate():
        model.eval()
        total = sum(loss_of(*get_batch("val")).item() for _ in range(t["eval_batches"]))
        model.train()
        return total / t["eval_batches"]

    best, best_step, to_best, since_best = math.inf, 0, None, 0
    target_val, target_step, to_target = None, None, None
    train_seconds, setup_seconds, step, stopped = 0.0, None, 0, "max_steps"
    sync()
    window = time.perf_counter()
    while step < last_step:
        for group in opt.param_groups:
            group["lr"] = lr_at(step, t)
        loss = loss_of(*get_batch("train"))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), t["grad_clip"])
        opt.step()
        step += 1
        if step == 1:
            # Setup, left out as `tinygpt train` leaves out its first step: CUDA's lazy
            # initialisation, cuBLAS handles, the attention kernel's choice; torch.compile.
            sync()
            setup_seconds = time.perf_counter() - window
            window = time.perf_counter()
        if step % t["eval_interval"] == 0 or step == last_step:
            train_loss = loss.item()
            sync()
            train_seconds += time.perf_counter() - window
            val = evaluate()
            print(f"step {step:>6}  train {train_loss:.4f}  val {val:.4f}  seconds {train_seconds:.2f}", flush=True)
            if val < best:
                best, best_step, to_best, since_best = val, step, train_seconds, 0
            else:
                since_best += 1
            if target_step is None and args.stop_at_val is not None and val <= args.stop_at_val:
                target_val, target_step, to_target = val, step, train_seconds
                stopped = "stop_at_val"
                break
            if since_best >= patience:
                stopped = "patience"
                break
            sync()
            window = time.perf_counter()
        if args.time_limit is not None and time.perf_counter() - script_started > args.time_limit:
            stopped = "time_limit"
            break

    print(
        json.dumps(
            {
                "backend": "pytorch",
                "torch": torch.__version__,
                "device": device_name(device),
                "attention": attention,
                "mode": mode_name(args.as_nanogpt),
                "seed": seed,
                "best_val_loss": round(best, 4) if best_step else None,
                "best_step": best_step,
                "train_seconds_to_best": round(to_best, 2) if to_best is not None else None,
                "target_val": round(target_val, 4) if target_val is not None else None,
                "target_step": target_step,
                "train_seconds_to_target": round(to_target, 2) if to_target is not None else None,
                "stopped": stopped,
                "step": step,
                "train_seconds": round(train_seconds, 2),
                "setup_seconds": round(setup_seconds, 2) if setup_seconds is not None else None,
                "ms_per_step": round(train_seconds * 1000.0 / max(step - 1, 1), 3),
            }
        )
    )


if __name__ == "__main__":
    main()
