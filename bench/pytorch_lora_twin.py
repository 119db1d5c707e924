#!/usr/bin/env python3
"""PyTorch + peft twin of a TinyGPT LoRA step on the CPU, for same-machine speed ratios
(issue 37: a GPT-2-124M-shaped base, batch 4 x context 256, 2 threads).

Not part of CI (it needs torch and peft in a venv). The base is bench/pytorch_twin.py's
model, ours op for op (separate q/k/v/o projections, tied head), at the shape of
configs/gpt2-124m-lora.json (12 layers, d_model 768, 12 heads, vocabulary 50,257) with
random weights: the arithmetic of a step does not depend on the values, and real GPT-2
weights cannot be downloaded here. `peft.get_peft_model` adds the same adapter as ours
(`--lora qvo-r8`: rank 8, alpha 16 on q_proj, v_proj and o_proj, no dropout); the base is
frozen. PyTorch at its strongest on a CPU: `F.scaled_dot_product_attention`, AdamW with
`fused=True` where this torch offers it on the CPU (else foreach), `torch.set_num_threads`
as ours; `--compile` adds `torch.compile` (off by default: on two cores its compile takes
minutes and the step was no faster in our trial).

A step is what `tinygpt bench --lora` times (bench/lora_cpu_ratio.py runs both alternately): draw a batch (random tokens), forward, mean
cross-entropy, backward, clip, AdamW on the adapter, and `loss.item()`. Prints one JSON
line: {"backend":"pytorch+peft","torch":...,"peft":...,"threads":...,"lora":...,
"trainable":...,"params":...,"ms_per_step":...,"tok_per_s":...}.
"""

import argparse
import inspect
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_twin  # noqa: E402

PRESETS = {"qv-r4": (4, 8.0, ["q_proj", "v_proj"]), "qvo-r8": (8, 16.0, ["q_proj", "v_proj", "o_proj"])}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/gpt2-124m-lora.json")
    ap.add_argument("--lora", default="qvo-r8", choices=sorted(PRESETS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--compile", action="store_true")
    args = ap.parse_args()

    import peft

    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    with open(args.config) as f:
        cfg = json.load(f)
    m = cfg["model"]
    pytorch_twin.VOCAB = m["vocab_size"]
    layers, d, heads, context = m["n_layers"], m["d_model"], m["n_heads"], m["context_length"]
    batch = cfg["training"]["batch_size"]
    torch.manual_seed(1337)
    base = pytorch_twin.Gpt(layers, d, heads, context, "sdpa", 0.0)
    params = sum(p.numel() for p in base.parameters())
    rank, alpha, targets = PRESETS[args.lora]
    lora = peft.LoraConfig(r=rank, lora_alpha=alpha, target_modules=targets, lora_dropout=0.0, bias="none")
    model = peft.get_peft_model(base, lora)
    trainable = [p for p in model.parameters() if p.requires_grad]
    kwargs = dict(lr=2e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    if "fused" in inspect.signature(torch.optim.AdamW).parameters:
        kwargs["fused"] = True
    try:
        opt = torch.optim.AdamW(trainable, **kwargs)
    except (RuntimeError, TypeError):
        kwargs.pop("fused", None)
        opt = torch.optim.AdamW(trainable, **kwargs)
    forward = torch.compile(model) if args.compile else model
    model.train()

    def step():
        tokens = torch.randint(0, m["vocab_size"], (batch, context + 1))
        logits = forward(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        return loss.item()

    for _ in range(args.warmup):
        step()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    seconds = time.perf_counter() - start
    print(
        json.dumps(
            {
                "backend": "pytorch+peft",
                "torch": torch.__version__,
                "peft": peft.__version__,
                "threads": args.threads,
                "compile": args.compile,
                "fused_adamw": kwargs.get("fused", False),
                "lora": args.lora,
                "trainable": sum(p.numel() for p in trainable),
                "params": params,
                "steps": args.steps,
                "ms_per_step": round(1000 * seconds / args.steps, 1),
                "tok_per_s": round(batch * context * args.steps / seconds, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
