"""Issue 38's report: the raw figures `h200.py` collects, summarised (median and spread per
path), ours over the twin, and the Markdown table. No torch, no processes: the same code
writes a call's report and merges several calls' `h200.json` into one (`h200.py --merge`).

Raw records (the `raw` object of h200.json; every list is concatenated by a merge):
- `bench`:  {"call", "round", "variant", "ms_per_step", "line", "wall_seconds", "error"}
- `recipe`: {"call", "seed", "variant", "reached", "target_step", "train_seconds_to_target",
             "target_val", "how", "evals", "wall_seconds", "error", ...}
- `matmul`: {"call", "path", "tflops", "ms", "line", "error"}
A variant is `ours:f32`, `ours:mixed` (`ours:default` when the binary is run without
`--precision`), `twin:eager-fp32` or `twin:as-nanogpt`. Every figure is lower-is-better
except TFLOP/s, so `ours/twin` below 1 means ours is ahead.
"""

import statistics

# What each clock leaves out, by figure and side: in short for the table's last column, in
# full beneath it.
SHORT = {
    "bench": "ours: start-up, 2 warm-up steps; twin: start-up, warm-up steps (compilation)",
    "recipe": "both: the first step (setup; the twin's compilation), evaluations; ours: checkpoint saves",
    "wall": "nothing (the whole process)",
}
CLOCKS = {
    "bench": {
        "ours": "process start, adapter and device open, kernel compilation, 2 warm-up steps; "
        "the timed steps are bracketed by a device flush (`tinygpt bench`)",
        "twin": "import, CUDA start, the `--warmup` steps (they hold torch.compile's compilation); "
        "timed steps bracketed by cuda.synchronize; batches are random bytes drawn on the GPU",
    },
    "recipe": {
        "ours": "the first step (setup: kernel compilation), every evaluation, checkpoint saves; "
        "counted read to read of the losses (`tinygpt train`'s training clock)",
        "twin": "the first step (setup: CUDA start, torch.compile of the training graph), every "
        "evaluation (with the evaluation graph's compilation); synchronize around each window",
    },
    "wall": {
        "ours": "nothing: the whole process, as the harness timed it",
        "twin": "nothing: the whole process, as the harness timed it",
    },
}

FIGURES = [
    ("bench", "ms_per_step", "ms/step at the recipe's shape", "bench"),
    ("recipe", "train_seconds_to_target", "training seconds to val ≤ {target}", "recipe"),
    ("recipe", "target_step", "steps to val ≤ {target}", "recipe"),
    ("recipe", "wall_seconds", "process wall seconds of a recipe run", "wall"),
]


def stats(values):
    """median, min, max, spread (max − min) and n of the non-null values."""
    values = [v for v in values if v is not None]
    if not values:
        return {"n": 0, "median": None, "min": None, "max": None, "spread": None, "values": []}
    return {
        "n": len(values),
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "spread": max(values) - min(values),
        "values": values,
    }


def variants_of(records):
    seen = []
    for r in records:
        if r["variant"] not in seen:
            seen.append(r["variant"])
    return seen


def summarize(raw, target):
    """Per figure and variant, `stats` of the figure; then ours over twin for each pair."""
    summary = {"figures": {}, "ratios": [], "reached": {}, "matmul": {}}
    for part, key, label, _ in FIGURES:
        records = [r for r in raw.get(part, []) if not r.get("error")]
        if part == "recipe" and key != "wall_seconds":
            records = [r for r in records if r.get("reached")]
        by_variant = {v: stats([r.get(key) for r in records if r["variant"] == v]) for v in variants_of(raw.get(part, []))}
        summary["figures"][label.format(target=target)] = by_variant
    for v in variants_of(raw.get("recipe", [])):
        runs = [r for r in raw["recipe"] if r["variant"] == v]
        summary["reached"][v] = f"{sum(1 for r in runs if r.get('reached'))}/{len(runs)}"
    for label, by_variant in summary["figures"].items():
        ours = [v for v in by_variant if v.startswith("ours:")]
        twin = [v for v in by_variant if v.startswith("twin:")]
        for o in ours:
            for t in twin:
                mo, mt = by_variant[o]["median"], by_variant[t]["median"]
                ratio = mo / mt if mo is not None and mt else None
                summary["ratios"].append({"figure": label, "ours": o, "twin": t, "ratio": ratio})
    for r in raw.get("matmul", []):
        entry = summary["matmul"].setdefault(r["path"], {"tflops": [], "errors": []})
        if r.get("error"):
            entry["errors"].append(r["error"])
        elif r.get("tflops") is not None:
            entry["tflops"].append(r["tflops"])
    for path, entry in summary["matmul"].items():
        entry["best_tflops"] = max(entry["tflops"]) if entry["tflops"] else None
    return summary


def fmt(x, digits=2):
    if x is None:
        return "—"
    if isinstance(x, int) or (isinstance(x, float) and x.is_integer() and abs(x) >= 100):
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def cell(s, digits=2):
    if not s or s["n"] == 0:
        return "—"
    return f"{fmt(s['median'], digits)} ({fmt(s['min'], digits)}–{fmt(s['max'], digits)}, spread {fmt(s['spread'], digits)}, n {s['n']})"


def markdown(report):
    """The table a person reads: pairs of ours and the twin per figure, then matmul, runs, clocks."""
    meta, summary, raw = report["meta"], report["summary"], report["raw"]
    target = meta.get("target")
    out = [f"# Issue 38: ours against the PyTorch twin ({meta.get('device') or 'device unknown'})", ""]
    for k in ["date", "calls", "config", "target", "rounds", "seeds", "tinygpt", "adapter", "ours_ran", "torch", "notes"]:
        if meta.get(k) not in (None, "", []):
            out.append(f"- {k}: {meta[k]}")
    out += [
        "",
        "Median (min–max, spread = max − min, n runs). Lower is better; `ours/twin` is the ratio of medians"
        " (below 1: ours ahead). Bench rounds alternate the four paths (order reversed every other round);"
        " recipe runs alternate them per seed and stop at the first evaluation with val ≤ the target.",
        "",
        "| figure | ours | median (min–max, spread, n) | twin | median (min–max, spread, n) | ours/twin | the clocks leave out |",
        "|---|---|---|---|---|---|---|",
    ]
    clock_of = {label.format(target=target): clock for _, _, label, clock in FIGURES}
    for r in summary["ratios"]:
        by_variant = summary["figures"][r["figure"]]
        digits = 0 if r["figure"].startswith("steps") else 2
        out.append(
            f"| {r['figure']} | {r['ours']} | {cell(by_variant[r['ours']], digits)} | {r['twin']} | "
            f"{cell(by_variant[r['twin']], digits)} | {fmt(r['ratio'], 3)} | {SHORT[clock_of[r['figure']]]} |"
        )
    out += ["", "What each clock leaves out:"]
    for name, label in [("bench", "ms/step"), ("recipe", "training seconds")]:
        for side in ("ours", "twin"):
            out.append(f"- {label}, {side}: {CLOCKS[name][side]}.")
    if summary["reached"]:
        out += ["", "Recipe runs that reached the target: " + ", ".join(f"{v} {n}" for v, n in summary["reached"].items())]
    if summary["matmul"]:
        out += [
            "",
            f"Matmul {meta.get('matmul_shape', '')} (`gpu_matmul_bench`; GPU time of repeated products after one"
            " warm-up, synchronised at the end; uploads left out):",
            "",
            "| path | TFLOP/s (best) | all | errors |",
            "|---|---|---|---|",
        ]
        for path, e in summary["matmul"].items():
            errors = "; ".join(e["errors"])[:300] or "—"
            out.append(f"| {path} | {fmt(e['best_tflops'], 1)} | {', '.join(fmt(x, 1) for x in e['tflops']) or '—'} | {errors} |")
    if raw.get("recipe"):
        out += [
            "",
            "Recipe runs:",
            "",
            "| call | seed | variant | reached | step | train s | val | how | setup s | wall s | stopped / error |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in raw["recipe"]:
            out.append(
                f"| {r.get('call', '')} | {r['seed']} | {r['variant']} | {'yes' if r.get('reached') else 'no'} | "
                f"{fmt(r.get('target_step'), 0)} | {fmt(r.get('train_seconds_to_target'))} | {fmt(r.get('target_val'), 4)} | "
                f"{r.get('how') or '—'} | {fmt(r.get('setup_seconds'), 1)} | {fmt(r.get('wall_seconds'), 1)} | {(r.get('error') or r.get('stopped') or '')[:200]} |"
            )
    if raw.get("bench"):
        out += ["", "Bench rounds (ms/step):", "", "| call | round | variant | ms/step | wall s | error |", "|---|---|---|---|---|---|"]
        for r in raw["bench"]:
            out.append(
                f"| {r.get('call', '')} | {r['round']} | {r['variant']} | {fmt(r.get('ms_per_step'), 3)} | "
                f"{fmt(r.get('wall_seconds'), 1)} | {(r.get('error') or '')[:200]} |"
            )
    out += [
        "",
        "`how` (ours): `checkpoint` = the training clock of the checkpoint saved at the target's evaluation"
        " (exact); `best` = the run's train_seconds_to_best (exact, the target was the best); `interpolated` ="
        " train_seconds_to_best × (step − 1)/(best_step − 1). Twin: `measured` (its clock at that evaluation);"
        " `setup s` is the twin's first step (torch.compile's compilation with --as-nanogpt).",
        "",
    ]
    return "\n".join(out)
