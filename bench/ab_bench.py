#!/usr/bin/env python3
"""Two `tinygpt` binaries' training speed, run alternately (A B A B…), and the median of the
pairs' ratios: "no step slower than the noise" for a change that must not cost speed (issue
36's trait rewrite, for one). Any `tinygpt bench` flags after `--` reach both binaries.

    python3 bench/ab_bench.py BEFORE_BIN AFTER_BIN --rounds 5 -- --preset medium --threads 1 --steps 10

Prints each run's JSON line, then {"after_over_before_median": …, "ratios": […], …}
(tok/s of AFTER over BEFORE: above 1 is faster).
"""

import argparse
import json
import statistics
import subprocess
import sys


def tok_per_s(binary, flags):
    out = subprocess.run([binary, "bench", *flags], check=True, capture_output=True, text=True).stdout
    line = json.loads(out.strip().splitlines()[-1])
    print(json.dumps({"binary": binary, **line}), flush=True)
    return line["tok_per_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--rounds", type=int, default=5)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args = ap.parse_args(argv[:cut])
    flags = argv[cut + 1 :]
    ratios = []
    for _ in range(args.rounds):
        a = tok_per_s(args.before, flags)
        b = tok_per_s(args.after, flags)
        ratios.append(b / a)
    print(
        json.dumps(
            {
                "flags": flags,
                "rounds": args.rounds,
                "ratios": [round(r, 3) for r in ratios],
                "after_over_before_median": round(statistics.median(ratios), 3),
            }
        )
    )


if __name__ == "__main__":
    main()
