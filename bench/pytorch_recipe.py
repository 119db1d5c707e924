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
  step, whose time is setup (CUDA's lazy initialisation here; our kernels' compilation).

Eager float32, TF32 off, `--attention sdpa` (the default, PyTorch's fastest eager
attention here) or `manual`. Prints one line per evaluation like `tinygpt train`, then
{"backend":"pytorch","best_val_loss","best_step","train_seconds_to_best","ms_per_step",...}.
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
from pytorch_twin import VOCAB, Gpt, device_name, from_config  # noqa: E402

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
    args = ap.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    device = torch.device(args.device)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    _, (layers, d, heads, ctx, batch), dropout = from_config(args.config)
    with open(args.config) as f:
        t = json.load(f)["training"]
    torch.manual_seed(args.seed if args.seed is not None else t.get("seed", 1337))
    patience = args.patience if args.patience is not None else t.get("early_stop_patience") or 3
    model = Gpt(layers, d, heads, ctx, args.attention, dropout).to(device)

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
        return F.cross_entropy(model(inputs).reshape(-1, VOCAB), targets.reshape(-1))

    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": t["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}],
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
    train_seconds, step = 0.0, 0
    sync()
    window = time.perf_counter()
    while step < t["max_steps"]:
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
            # initialisation, cuBLAS handles, the attention kernel's choice.
            sync()
            window = time.perf_counter()
        if step % t["eval_interval"] == 0 or step == t["max_steps"]:
            train_loss = loss.item()
            sync()
            train_seconds += time.perf_counter() - window
            val = evaluate()
            print(f"step {step:>6}  train {train_loss:.4f}  val {val:.4f}", flush=True)
            if val < best:
                best, best_step, to_best, since_best = val, step, train_seconds, 0
            else:
                since_best += 1
                if since_best >= patience:
                    break
            sync()
            window = time.perf_counter()

    print(
        json.dumps(
            {
                "backend": "pytorch",
                "torch": torch.__version__,
                "device": device_name(device),
                "attention": args.attention,
                "best_val_loss": round(best, 4),
                "best_step": best_step,
                "train_seconds_to_best": round(to_best, 2),
                "step": step,
                "train_seconds": round(train_seconds, 2),
                "ms_per_step": round(train_seconds * 1000.0 / max(step - 1, 1), 3),
            }
        )
    )


if __name__ == "__main__":
    main()
