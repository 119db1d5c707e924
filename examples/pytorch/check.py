"""Checks TinyGPT against PyTorch on the same model and the same batches.

    python examples/pytorch/check.py --model runs/small [--tinygpt target/release/tinygpt]

It runs `tinygpt export --format nanogpt`, `tinygpt eval` and `tinygpt debug-state` on the
run folder, loads the export into the nanoGPT-style module of model.py, and compares:

1. `tinygpt eval`'s train and validation loss with PyTorch's on the same batches
   (sampler.py reproduces the sampler): within 1e-4 absolute (f32 sums in other orders).
2. debug-state's batch (exactly), logits (within 1e-4 x the largest logit), loss (1e-5
   relative), every gradient (within 1e-3 x its tensor's largest magnitude, floored at
   1e-4 x the model's largest gradient: a key bias's gradient is rounding noise, softmax
   ignoring a per-row shift) and the losses after 1..10 AdamW updates on that batch at the
   run's constant learning rate (1e-4 relative).

Prints one line per comparison and exits 1 if any is out of tolerance.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
from safetensors.numpy import load_file

import model as nano
import sampler

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def tinygpt_binary(arg):
    if arg:
        return arg
    for build in ("release", "debug"):
        path = os.path.join(REPO, "target", build, "tinygpt")
        if os.path.exists(path):
            return path
    return shutil.which("tinygpt") or sys.exit("no tinygpt binary: build it (cargo build --release -p tinygpt-cli) or pass --tinygpt")


class Report:
    def __init__(self):
        self.failed = 0

    def check(self, what, value, bound):
        ok = value <= bound
        self.failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {what}: {value:.3e} (tolerance {bound:.1e})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="a tinygpt run folder")
    ap.add_argument("--tinygpt", help="the tinygpt binary (default: target/release, target/debug, PATH)")
    ap.add_argument("--data", help="text file (default: the embedded TinyShakespeare)")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1337)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    exe = tinygpt_binary(args.tinygpt)
    data_args = ["--data", args.data] if args.data else []
    text = open(args.data or os.path.join(REPO, "data", "tinyshakespeare.txt"), "rb").read()
    report = Report()

    with tempfile.TemporaryDirectory() as tmp:
        export, state_file = os.path.join(tmp, "model.safetensors"), os.path.join(tmp, "state.safetensors")
        run = lambda *a: subprocess.run([exe, *a], check=True, capture_output=True, text=True).stdout
        run("export", "--format", "nanogpt", "--model", args.model, "--out", export)
        ours_eval = json.loads(run("eval", "--model", args.model, *data_args))
        run("debug-state", "--model", args.model, "--batch", str(args.batch), "--seed", str(args.seed),
            "--out", state_file, *data_args)
        model, meta = nano.load(export)
        state = load_file(state_file)
    cfg = nano.training_config(meta)
    model.eval()
    print(f"model: {meta['tinygpt.model_name']} ({sum(p.numel() for p in model.parameters())} parameters), "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")

    # 1. tinygpt eval: the same batches, the mean taken as TinyGPT takes it.
    train, val = sampler.splits(text)
    seq = model.config.block_size
    with torch.no_grad():
        for name, split in (("train", train), ("val", val)):
            batches = sampler.eval_batches(split, name, cfg["seed"], cfg["eval_batches"], cfg["batch_size"], seq)
            total = 0.0
            for x, y in batches:
                total += float(model(torch.from_numpy(x), torch.from_numpy(y))[1])
            ours = ours_eval[f"{name}_loss"]
            theirs = total / len(batches)
            print(f"     eval {name}_loss: tinygpt {ours:.6f}, pytorch {theirs:.6f}")
            report.check(f"eval {name}_loss |difference|", abs(ours - theirs), 1e-4)

    # 2. debug-state: the batch, logits, loss, gradients, then 10 AdamW steps.
    x, y = sampler.batch(train, args.batch, seq, sampler.Rng(args.seed))
    report.check("debug-state batch (x, y) mismatches", float((state["x"] != x).sum() + (state["y"] != y).sum()), 0)
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    # Evaluation mode, as debug-state forwards: no dropout; autograd works all the same.
    logits, loss = model(x, y)
    loss.backward()
    logits = logits.detach().numpy()
    report.check("logits max |difference| / largest logit",
                 float(np.abs(logits - state["logits"]).max() / np.abs(state["logits"]).max()), 1e-4)
    loss = loss.item()
    report.check("loss relative difference", abs(loss - float(state["loss"])) / float(state["loss"]), 1e-5)
    grads = {k[len("grads."):]: v for k, v in state.items() if k.startswith("grads.")}
    params = dict(model.named_parameters())
    assert set(grads) == set(params) - {"lm_head.weight"} or set(grads) == set(params), sorted(set(params) ^ set(grads))
    floor = 1e-4 * max(np.abs(g).max() for g in grads.values())
    worst, worst_name = 0.0, None
    for name, ours in grads.items():
        theirs = params[name].grad.numpy()
        ratio = np.abs(theirs - ours).max() / max(1e-3 * np.abs(ours).max(), floor)
        if ratio > worst:
            worst, worst_name = ratio, name
    report.check(f"gradients: worst |difference| / its tolerance ({worst_name})", float(worst), 1.0)

    opt = model.optimizer(cfg["learning_rate"], (cfg["beta1"], cfg["beta2"]), cfg["eps"], cfg["weight_decay"])
    losses = []
    for _ in range(len(state["losses"])):
        if cfg["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        _, loss = model(x, y)
        loss.backward()
        losses.append(loss.item())
    ours = state["losses"].astype(np.float64)
    print("     losses after 1..10 AdamW steps: tinygpt", " ".join(f"{v:.5f}" for v in ours))
    print("                                     pytorch", " ".join(f"{v:.5f}" for v in losses))
    report.check("AdamW losses max relative difference", float(np.max(np.abs(ours - losses) / ours)), 1e-4)
    print("all within tolerance" if not report.failed else f"{report.failed} check(s) out of tolerance")
    sys.exit(1 if report.failed else 0)


if __name__ == "__main__":
    main()
