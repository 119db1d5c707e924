#!/usr/bin/env python3
"""Reads the JSON lines of `tinygpt bench --backend wgpu` and `bench/pytorch_twin.py`
(mixed, in any order) on stdin and prints, per preset, our tok/s over PyTorch's: one JSON
line `{"preset", "wgpu_tok_per_s", "pytorch_manual_tok_per_s", "pytorch_sdpa_tok_per_s",
"ratio_vs_manual", "ratio_vs_sdpa", "ratio_vs_best"}` (a variant that did not run is
left out). A preset run several times counts with its fastest run on each side. Lines
that are not such JSON are ignored."""

import json
import sys

ours, theirs = {}, {}
for line in sys.stdin:
    try:
        row = json.loads(line)
    except ValueError:
        continue
    if not isinstance(row, dict) or "preset" not in row or "tok_per_s" not in row:
        continue
    preset, tok = row["preset"], row["tok_per_s"]
    if row.get("backend") == "wgpu":
        ours[preset] = max(ours.get(preset, 0), tok)
    elif row.get("backend") == "pytorch":
        variants = theirs.setdefault(preset, {})
        variants[row["attention"]] = max(variants.get(row["attention"], 0), tok)

for preset, tok in ours.items():
    out = {"preset": preset, "wgpu_tok_per_s": tok}
    variants = theirs.get(preset, {})
    for attention, t in sorted(variants.items()):
        out[f"pytorch_{attention}_tok_per_s"] = t
        out[f"ratio_vs_{attention}"] = round(tok / t, 3)
    if variants:
        out["ratio_vs_best"] = round(tok / max(variants.values()), 3)
    print(json.dumps(out))
