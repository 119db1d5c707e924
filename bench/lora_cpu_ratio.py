#!/usr/bin/env python3
"""Issue 37's CPU goal: LoRA tokens/s of ours against PyTorch + peft, same machine, same
model shape and adapter, run alternately (ours, theirs, ours, theirs…), the median of the
pairs' ratios. Not part of CI (it needs torch and peft: a venv's python runs this script).

    cargo build --release -p tinygpt-cli
    /path/to/venv/bin/python bench/lora_cpu_ratio.py --rounds 3 --steps 3 --threads 2

Ours: `tinygpt bench --config configs/gpt2-124m-lora.json --lora qvo-r8` (a GPT-2-124M
shape with random weights, batch 4 x 256, the base frozen); theirs:
bench/pytorch_lora_twin.py with the same config and preset. Prints every side's JSON line,
then {"ratio_median": ours/theirs tok/s, "ratios": [...], ...}.
"""

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from alternate import alternate  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tinygpt", default=os.path.join(ROOT, "target/release/tinygpt"))
    ap.add_argument("--config", default="configs/gpt2-124m-lora.json")
    ap.add_argument("--lora", default="qvo-r8")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    ours_cmd = [args.tinygpt, "bench", "--config", args.config, "--lora", args.lora]
    ours_cmd += ["--steps", str(args.steps), "--threads", str(args.threads)]
    twin = os.path.join(ROOT, "bench/pytorch_lora_twin.py")
    theirs_cmd = [sys.executable, twin, "--config", args.config, "--lora", args.lora]
    theirs_cmd += ["--steps", str(args.steps), "--threads", str(args.threads)]
    pairs = alternate(ours_cmd, theirs_cmd, args.rounds, cwd=ROOT)
    print(
        json.dumps(
            {
                "what": "lora tok/s, ours over pytorch+peft",
                "config": args.config,
                "lora": args.lora,
                "threads": args.threads,
                "rounds": args.rounds,
                "ratios": pairs["inverse"],
                "ratio_median": pairs["inverse_median"],
                "ours_tok_per_s_median": pairs["first_median"],
                "theirs_tok_per_s_median": pairs["second_median"],
            }
        )
    )


if __name__ == "__main__":
    main()
