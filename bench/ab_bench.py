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
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from alternate import alternate  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--rounds", type=int, default=5)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args = ap.parse_args(argv[:cut])
    flags = argv[cut + 1 :]
    before, after = [args.before, "bench", *flags], [args.after, "bench", *flags]
    tags = ({"binary": args.before}, {"binary": args.after})
    pairs = alternate(before, after, args.rounds, tags=tags)
    print(
        json.dumps(
            {
                "flags": flags,
                "rounds": args.rounds,
                "ratios": pairs["ratios"],
                "after_over_before_median": pairs["median"],
            }
        )
    )


if __name__ == "__main__":
    main()
