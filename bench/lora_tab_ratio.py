#!/usr/bin/env python3
"""Issue 37's tab goal: LoRA tokens/s in the browser tab (SIMD + threads) against PyTorch +
peft on the same machine, same adapter, run alternately (tab, PyTorch, tab, PyTorch…), the
median of the pairs' ratios. Not part of CI (it needs torch and peft, Chromium and the web
build): a venv's python runs it.

    /work/venv-tok/bin/python bench/make_gpt2_folder.py     # target/bench/gpt2-124m/
    cargo xtask build-web                                    # or an up-to-date dist/
    /work/venv-tok/bin/python bench/lora_tab_ratio.py --rounds 3

The tab: `cargo xtask bench-web --no-build` with TINYGPT_BENCH_LORA=qvo-r8 and
TINYGPT_BENCH_LORA_BASE_URL=/fixtures/bench/gpt2-124m/ (tests-web/bench.mjs): the page
loads the random-weight GPT-2-124M folder by URL as its LoRA base and times adapter steps at
the base's default batch (4) and window (256 tokens) on the `--backend` build. PyTorch:
bench/pytorch_lora_twin.py --config configs/gpt2-124m-lora.json (the same shape at context
256, batch 4) with the same adapter and thread count. Prints each side's JSON line, then
{"ratio_median": tab/PyTorch tok/s, "ratios": [...], ...}.
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
    ap.add_argument("--base-url", default="/fixtures/bench/gpt2-124m/")
    ap.add_argument("--backend", default="wasm-relaxed-simd-threads")
    ap.add_argument("--config", default="configs/gpt2-124m-lora.json")
    ap.add_argument("--lora", default="qvo-r8")
    ap.add_argument("--threads", type=int, default=2, help="PyTorch's (the tab uses the machine's)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    env = {
        "TINYGPT_BENCH_PRESETS": "",
        "TINYGPT_BENCH_BACKENDS": args.backend,
        "TINYGPT_BENCH_LORA": args.lora,
        "TINYGPT_BENCH_LORA_BASE_URL": args.base_url,
        "TINYGPT_BENCH_STEPS": str(args.steps),
        "TINYGPT_BENCH_MIN_MS": "1",
    }
    tab_cmd = ["env"] + [f"{k}={v}" for k, v in env.items()] + ["cargo", "xtask", "bench-web", "--no-build"]
    twin = os.path.join(ROOT, "bench/pytorch_lora_twin.py")
    torch_cmd = [sys.executable, twin, "--config", args.config, "--lora", args.lora]
    torch_cmd += ["--steps", str(args.steps), "--threads", str(args.threads)]
    pairs = alternate(tab_cmd, torch_cmd, args.rounds, cwd=ROOT, tags=({"side": "tab"}, {"side": "pytorch+peft"}))
    print(
        json.dumps(
            {
                "what": "lora tok/s, the tab over pytorch+peft",
                "backend": args.backend,
                "base_url": args.base_url,
                "config": args.config,
                "lora": args.lora,
                "threads": args.threads,
                "rounds": args.rounds,
                "ratios": pairs["inverse"],
                "ratio_median": pairs["inverse_median"],
                "tab_tok_per_s_median": pairs["first_median"],
                "theirs_tok_per_s_median": pairs["second_median"],
            }
        )
    )


if __name__ == "__main__":
    main()
