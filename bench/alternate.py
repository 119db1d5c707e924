"""Two commands that each print a JSON line with "tok_per_s", run alternately (A B A B…):
the brief's rule for a speed ratio on a noisy machine is the median of such pairs, never a
best-of. Shared by ab_bench.py (a binary before and after a change) and lora_cpu_ratio.py
(ours against PyTorch + peft)."""

import json
import statistics
import subprocess


def json_line(cmd, cwd=None, tag=None):
    """Runs `cmd`, echoes its last stdout line (a JSON object, with `tag` merged in) and
    returns it."""
    out = subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True).stdout
    line = json.loads(out.strip().splitlines()[-1])
    print(json.dumps({**(tag or {}), **line}), flush=True)
    return line


def alternate(first, second, rounds, cwd=None, tags=(None, None)):
    """`rounds` pairs of (first, second), each pair run back to back. Returns the two sides'
    tok/s, the pairs' ratios second/first ("ratios", "median": a change over its baseline)
    and first/second ("inverse", "inverse_median": ours over a peer run second)."""
    a, b = [], []
    for _ in range(rounds):
        a.append(json_line(first, cwd, tags[0])["tok_per_s"])
        b.append(json_line(second, cwd, tags[1])["tok_per_s"])
    ratios = [y / x for x, y in zip(a, b)]
    inverse = [x / y for x, y in zip(a, b)]
    return {
        "first": a,
        "second": b,
        "ratios": [round(r, 3) for r in ratios],
        "median": round(statistics.median(ratios), 3),
        "inverse": [round(r, 3) for r in inverse],
        "inverse_median": round(statistics.median(inverse), 3),
        "first_median": statistics.median(a),
        "second_median": statistics.median(b),
    }
