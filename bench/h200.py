#!/usr/bin/env python3
"""Issue 38 in one device call: our GPU paths against the PyTorch twin run as people run
nanoGPT, on the lent H200. Writes `$OUT/h200.json` (every raw figure, the summaries) and
`$OUT/h200.md` (the table), rewritten after every process so a call cut short still
leaves what it measured; each process's output goes to `$OUT/logs/`.

Parts (`--only bench,matmul,recipe`, the default all three, run in that order):
- bench:  `tinygpt bench --backend wgpu --config CFG --precision P` for P in f32, mixed, and
  `pytorch_twin.py --config CFG` eager fp32 (sdpa) and `--as-nanogpt`; `--rounds` rounds,
  the four in turn, the order reversed every other round (ABCD DCBA ...); ms/step each.
- matmul: kernels-wgsl's `gpu_matmul_bench 4096x4096x4096` once per path in
  `--matmul-paths` ("name=extra args;...", default "f32=--precision f32;mixed=--precision
  mixed"; each line names the kernels that ran: f32, shader-f16 or cooperative matrix).
- recipe: for each seed in `--seeds` (1337,1338,1339), the four in turn (reversed every
  other seed): `tinygpt train --config CFG(seed) --backend wgpu --precision P` and
  `pytorch_recipe.py --seed S [--as-nanogpt] --stop-at-val TARGET`. CFG(seed) is a copy of
  CFG with training.seed = S, early_stop_patience (3, `--patience`) where it has none, and
  checkpoint_interval = eval_interval. Each run ends at the first evaluation with val ≤
  `--target` (1.47): ours is killed once the checkpoint of that evaluation is saved, and its
  training seconds are read from that checkpoint's trainer_state.json (`wall_time_sec`:
  `tinygpt train`'s training clock at that step); the twin stops itself. Figures: training
  seconds and steps to the target, the process's wall seconds.

On the lent H200 (no cargo, no registry; python3 there has torch). Here first:

    bench/h200_prepare.sh

(`cargo build --release -p tinygpt-cli`, `cargo build --release -p tinygpt-kernels-wgsl
--example gpu_matmul_bench`, both stripped into target/h200/ — unstripped, tinygpt alone
is over the 64 MiB a call carries — and the Vulkan loader's .debs into .gl/). Then a device
call with carry ["target/h200", ".gl"] (both git-ignored; data/, configs/ and bench/ are
tracked and travel) and the command (TOOLCHAIN.md's loader steps, then the script):

    for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig; \
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; \
    python3 bench/h200.py --out $OUT --seeds 1337

(`--vulkan-debs .gl` does the loader steps itself.) The binaries default to target/h200/,
else target/release/. Budget: no process starts after `--deadline` seconds (540) and the
running one is cut there (the twin's recipe is told to stop itself 20 s before), so the
call ends inside a 10-minute device call with h200.json written. Estimates on the H200: the
bench part ≈ 2 minutes (3 rounds; the first torch.compile ≈ 1 minute, later ones read
inductor's cache in /tmp), matmul seconds, a recipe seed ≈ 4–4.5 minutes (ours ≈ 70 s at
f32, less mixed; the twin ≈ 70 s eager, as-nanogpt ≈ 40 s plus compilation). So three
seeds take three calls, or two if the second fits:

    call 1: python3 bench/h200.py --out $OUT --seeds 1337 --call 1             (≈ 7 min)
    call 2: python3 bench/h200.py --out $OUT --only recipe --seeds 1338,1339 --call 2
    (a run the deadline cut: copy call 2's h200.json to target/h200/done2.json, carry it,
     and rerun call 2's command with `--skip-done target/h200/done2.json`)
    here:   python3 bench/h200.py --merge CALL1/h200.json CALL2/h200.json --out DIR

`--precisions f32,mixed` (default) needs `--precision` on `tinygpt bench` and `train`;
a binary without it is refused at the start with that reason (`--precisions default`
runs it without the flag). `--matmul-paths` (or $H200_MATMUL_PATHS) overrides the matmul
runs, e.g. "f32=--precision f32" alone.

Testing without a GPU: `--backend cpu --twin-device cpu --threads 2 --config TINY.json`
(`--precisions default` for a binary without `--precision`); `--dry-run` prints the commands.
"""

import argparse
import datetime
import json
import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import h200_report  # noqa: E402

EVAL_LINE = re.compile(r"^step\s+(\d+)\s+train\s+(\S+)\s+val\s+(\S+)(?:\s+seconds\s+(\S+))?")
CHECKPOINT_LINE = re.compile(r"^checkpoint\s+(\S+)\s+at step\s+(\d+)")
STARTED = time.monotonic()


def say(message):
    """A progress line: wall time, seconds since the start."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M:%S")
    print(f"[{now} +{time.monotonic() - STARTED:6.1f}s] {message}", flush=True)


def json_lines(lines):
    out = []
    for line in lines:
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


class Runner:
    """Runs processes with a timeout (cut at the call's deadline), streaming their lines."""

    def __init__(self, args, logs):
        self.args = args
        self.logs = logs
        self.count = 0

    def left(self):
        return self.args.deadline - (time.monotonic() - STARTED)

    def run(self, name, cmd, timeout, watch=None, env=None):
        """(rc, stdout lines, stderr lines, wall seconds, note). `watch(stream, line)` returning
        True kills the process group (rc then None, note "stopped by the harness")."""
        self.count += 1
        say(f"start {name}: {shlex.join(cmd)}")
        if self.args.dry_run:
            return 0, [], [], 0.0, "dry run"
        limit = min(timeout, self.left())
        if limit < 5:
            say(f"skip {name}: {self.left():.0f} s left before the deadline")
            return None, [], [], 0.0, "skipped: deadline"
        log = open(os.path.join(self.logs, f"{self.count:02d}-{re.sub(r'[^A-Za-z0-9.-]+', '_', name)}.log"), "w", buffering=1)
        log.write(f"$ {shlex.join(cmd)}\n")
        started = time.monotonic()
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            env=env,
            start_new_session=True,
        )
        lines = queue.Queue()

        def pump(stream, tag):
            for line in stream:
                lines.put((tag, line.rstrip("\n")))
            lines.put((tag, None))

        for stream, tag in [(proc.stdout, "out"), (proc.stderr, "err")]:
            threading.Thread(target=pump, args=(stream, tag), daemon=True).start()
        out, err, open_streams, note = [], [], 2, None
        while open_streams:
            remaining = limit - (time.monotonic() - started)
            try:
                tag, line = lines.get(timeout=max(remaining, 0.01))
            except queue.Empty:
                note = f"timed out after {limit:.0f} s"
                self.kill(proc)
                break
            if line is None:
                open_streams -= 1
                continue
            (out if tag == "out" else err).append(line)
            log.write(f"{time.monotonic() - started:8.2f} {tag} {line}\n")
            if EVAL_LINE.match(line):
                say(f"  {name}: {line.strip()}")
            if watch and watch(tag, line):
                note = "stopped by the harness"
                self.kill(proc)
                break
        try:
            rc = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill(proc)
            rc = proc.wait()
        if note:
            rc = None
        wall = time.monotonic() - started
        log.write(f"# rc {rc}, {wall:.2f} s, {note or ''}\n")
        log.close()
        say(f"end {name}: rc {rc}, {wall:.1f} s{', ' + note if note else ''}")
        return rc, out, err, wall, note

    @staticmethod
    def kill(proc):
        """SIGKILL to the group of the process this harness started (its own session)."""
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def failure(rc, out, err, note):
    """The reason a process did not give its figure, for the report: its last lines."""
    tail = [l.strip() for l in err[-2:] + out[-1:] if l.strip() and "NumPy" not in l and "_conversion_method" not in l]
    return f"{note or f'exit {rc}'}: {' | '.join(tail)}"[:400]


# ---------------------------------------------------------------------------- commands


def ours_precision_args(args, precision):
    return [] if precision == "default" else ["--precision", precision]


def ours_threads(args):
    return ["--threads", str(args.threads)] if args.threads else []


def twin_common(args, mode):
    cmd = ["--device", args.twin_device]
    if args.threads and args.twin_device == "cpu":
        cmd += ["--threads", str(args.threads)]
    if mode == "as-nanogpt":
        cmd.append("--as-nanogpt")
    return cmd


def bench_command(args, variant):
    side, what = variant.split(":", 1)
    if side == "ours":
        return [args.tinygpt, "bench", "--backend", args.backend, "--config", args.config, "--steps", str(args.bench_steps)] + (
            ours_precision_args(args, what) + ours_threads(args)
        )
    return [
        args.python,
        os.path.join(HERE, "pytorch_twin.py"),
        "--config",
        args.config,
        "--steps",
        str(args.bench_steps),
        "--warmup",
        str(args.twin_warmup),
        "--attention",
        "sdpa",
    ] + twin_common(args, what)


def recipe_command(args, variant, cfg, out_dir, seed, seconds):
    """`seconds`: what is left for the run; the twin stops itself a little before it."""
    side, what = variant.split(":", 1)
    if side == "ours":
        return [args.tinygpt, "train", "--config", cfg, "--backend", args.backend, "--out", out_dir] + (
            ours_precision_args(args, what) + ours_threads(args)
        )
    cmd = [args.python, os.path.join(HERE, "pytorch_recipe.py"), "--config", cfg, "--seed", str(seed)]
    cmd += ["--stop-at-val", str(args.target)] + twin_common(args, what)
    if args.twin_max_steps:
        cmd += ["--max-steps", str(args.twin_max_steps)]
    if seconds - 20 > 0:
        cmd += ["--time-limit", str(int(seconds - 20))]
    return cmd


def seed_config(args, tmp, seed):
    """CFG with training.seed = seed; patience where it has none; a save at every evaluation."""
    with open(args.config) as f:
        cfg = json.load(f)
    t = cfg.setdefault("training", {})
    t["seed"] = seed
    if not t.get("early_stop_patience"):
        t["early_stop_patience"] = args.patience
    if "eval_interval" in t:
        t["checkpoint_interval"] = t["eval_interval"]
    path = os.path.join(tmp, f"config-seed{seed}.json")
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2)
    return path


# ---------------------------------------------------------------------------- parts


def run_bench(args, runner, report, save):
    variants = args.variants
    for rnd in range(1, args.rounds + 1):
        order = variants if rnd % 2 else list(reversed(variants))
        for variant in order:
            rc, out, err, wall, note = runner.run(f"bench {variant} round {rnd}", bench_command(args, variant), args.bench_timeout)
            lines = [l for l in json_lines(out) if "ms_per_step" in l]
            rec = {"call": args.call, "round": rnd, "variant": variant, "wall_seconds": round(wall, 2)}
            if lines and rc == 0:
                rec.update(ms_per_step=lines[-1]["ms_per_step"], line=lines[-1])
            elif not args.dry_run:
                rec["error"] = failure(rc, out, err, note)
            report["raw"]["bench"].append(rec)
            save()


def run_matmul(args, runner, report, save):
    for item in [p for p in args.matmul_paths.split(";") if p.strip()]:
        name, _, extra = item.partition("=")
        cmd = [args.matmul_bench] + shlex.split(extra) + [args.matmul_shape]
        rc, out, err, wall, note = runner.run(f"matmul {name.strip()}", cmd, args.matmul_timeout)
        lines = [l for l in json_lines(out) if "gflops" in l]
        rec = {"call": args.call, "path": name.strip()}
        report_lines = [l.strip() for l in err if l.strip() and "XDG_RUNTIME_DIR" not in l]
        if report_lines:
            rec["precision_report"] = report_lines[-1]
        if lines and rc == 0:
            line = lines[-1]
            if rec["path"] == "default":
                rec["path"] = f"default ({line.get('kernels') or line.get('path')})"
            rec.update(tflops=line["gflops"] / 1000.0, ms=line.get("ms"), line=line)
        elif not args.dry_run:
            rec["error"] = failure(rc, out, err, note)
        report["raw"]["matmul"].append(rec)
        save()


def ours_watch(args, state):
    """Watches `tinygpt train`'s stderr: the first evaluation at or below the target, then the
    checkpoint saved at that step (its training clock), then stop."""

    def watch(tag, line):
        m = EVAL_LINE.match(line)
        if m:
            step, train, val = int(m.group(1)), float(m.group(2)), float(m.group(3))
            state["evals"].append([step, train, val])
            if state.get("target_step") is None and val <= args.target:
                state["target_step"], state["target_val"] = step, val
            return False
        m = CHECKPOINT_LINE.match(line)
        if m and state.get("target_step") is not None and int(m.group(2)) == state["target_step"]:
            state["generation"] = m.group(1)
            return args.stop_at_target
        return False

    return watch


def trainer_state(out_dir, generation):
    try:
        with open(os.path.join(out_dir, generation, "trainer_state.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def ours_recipe_record(args, state, out, out_dir):
    """Training seconds to the target: the target's checkpoint, else the final line."""
    rec = {"evals": state["evals"]}
    final = [l for l in json_lines(out) if "best_val_loss" in l]
    if final:
        rec.update({k: final[-1].get(k) for k in ["best_val_loss", "best_step", "train_seconds_to_best", "step", "train_seconds"]})
    step = state.get("target_step")
    if step is None:
        return rec
    rec.update(reached=True, target_step=step, target_val=state["target_val"])
    ts = trainer_state(out_dir, state["generation"]) if state.get("generation") else None
    if ts and ts.get("step") == step:
        rec.update(train_seconds_to_target=round(ts["wall_time_sec"], 3), how="checkpoint")
    elif final and final[-1].get("best_step") == step and final[-1].get("train_seconds_to_best") is not None:
        rec.update(train_seconds_to_target=final[-1]["train_seconds_to_best"], how="best")
    elif final and final[-1].get("train_seconds_to_best") and (final[-1].get("best_step") or 0) > 1:
        f = final[-1]
        rec.update(train_seconds_to_target=f["train_seconds_to_best"] * (step - 1) / (f["best_step"] - 1), how="interpolated")
    else:
        rec["error"] = "reached the target but no training clock for it (no checkpoint at that step, no final line)"
    return rec


def run_recipe(args, runner, report, save, tmp):
    variants = args.variants
    for i, seed in enumerate(args.seeds):
        cfg = seed_config(args, tmp, seed)
        order = variants if i % 2 == 0 else list(reversed(variants))
        for variant in order:
            if (seed, variant) in args.done:
                say(f"skip recipe {variant} seed {seed}: reached in {args.done[(seed, variant)]}")
                continue
            out_dir = os.path.join(tmp, f"run-{variant.replace(':', '-')}-{seed}")
            state = {"evals": []}
            side = variant.split(":")[0]
            watch = ours_watch(args, state) if side == "ours" else None
            cmd = recipe_command(args, variant, cfg, out_dir, seed, min(args.recipe_timeout, runner.left()))
            rc, out, err, wall, note = runner.run(f"recipe {variant} seed {seed}", cmd, args.recipe_timeout, watch)
            rec = {"call": args.call, "seed": seed, "variant": variant, "reached": False, "wall_seconds": round(wall, 2)}
            if side == "ours":
                rec.update(ours_recipe_record(args, state, out, out_dir))
                rec["stopped"] = "at the target" if note == "stopped by the harness" else (note or f"exit {rc}")
                shutil.rmtree(out_dir, ignore_errors=True)
                ok = rc == 0 or note == "stopped by the harness"
            else:
                final = [l for l in json_lines(out) if "best_val_loss" in l]
                rec["evals"] = [
                    [int(m.group(1)), float(m.group(2)), float(m.group(3)), float(m.group(4) or "nan")]
                    for m in map(EVAL_LINE.match, out)
                    if m
                ]
                ok = rc == 0 and bool(final)
                if final:
                    f = final[-1]
                    rec.update({k: f.get(k) for k in ["best_val_loss", "best_step", "step", "train_seconds", "setup_seconds", "ms_per_step", "stopped", "torch", "device"]})
                    if f.get("target_step") is not None:
                        rec.update(
                            reached=True,
                            target_step=f["target_step"],
                            target_val=f["target_val"],
                            train_seconds_to_target=f["train_seconds_to_target"],
                            how="measured",
                        )
            if not ok and not args.dry_run:
                rec["error"] = rec.get("error") or failure(rc, out, err, note)
            report["raw"]["recipe"].append(rec)
            save()
            if args.dry_run:
                continue
            say(
                f"  {variant} seed {seed}: "
                + (f"val {rec['target_val']:.4f} at step {rec['target_step']} after {rec['train_seconds_to_target']:.2f} s of training" if rec.get("reached") and rec.get("train_seconds_to_target") is not None else (rec.get("error") or "target not reached"))
            )


# ---------------------------------------------------------------------------- setup


def preflight(args):
    """Refuses at once what would fail later: missing binaries, no --precision, no torch."""
    problems = []
    if not os.path.isfile(args.config):
        problems.append(f"no config at {args.config}")
    needs_ours = bool({"bench", "recipe"} & args.only) and any(v.startswith("ours:") for v in args.variants)
    if needs_ours:
        if not os.access(args.tinygpt, os.X_OK):
            problems.append(f"no tinygpt binary at {args.tinygpt} (cargo build --release -p tinygpt-cli, or --tinygpt PATH)")
        elif any(v != "ours:default" for v in args.variants if v.startswith("ours:")):
            for sub in (["bench"] if "bench" in args.only else []) + (["train"] if "recipe" in args.only else []):
                help_text = subprocess.run([args.tinygpt, sub, "--help"], capture_output=True, text=True, timeout=30).stdout
                if "--precision" not in help_text:
                    problems.append(
                        f"{args.tinygpt} {sub} has no --precision option: build tinygpt from a commit that has it "
                        "(issue 38's f32|mixed), or pass --precisions default to run it without the flag"
                    )
    if "matmul" in args.only and not os.access(args.matmul_bench, os.X_OK):
        problems.append(
            f"no gpu_matmul_bench at {args.matmul_bench} "
            "(cargo build --release -p tinygpt-kernels-wgsl --example gpu_matmul_bench, or --matmul-bench PATH)"
        )
    if bool({"bench", "recipe"} & args.only) and any(v.startswith("twin:") for v in args.variants):
        probe = subprocess.run([args.python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True, timeout=120)
        if probe.returncode != 0:
            problems.append(f"{args.python} cannot import torch: {probe.stderr.strip()[-200:]}")
        else:
            args.torch_version = probe.stdout.strip()
        if "twin:as-nanogpt" in args.variants and args.twin_device == "cuda":
            # Triton builds its small launcher with the system C compiler on first use.
            compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
            args.c_compiler = compiler
            if not compiler:
                say("warning: no C compiler (cc, gcc, clang or $CC): torch.compile's Triton launcher may fail to build")
            headers = subprocess.run(
                [args.python, "-c", "import os, sysconfig; print(os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))"],
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout.strip()
            if headers != "True":
                say("warning: no Python.h for this python: torch.compile's Triton launcher may fail to build")
    return problems


def setup_vulkan(debs):
    """TOOLCHAIN.md's loader steps on the lent GPU machine: unpack the carried .debs into /."""
    for name in sorted(os.listdir(debs)):
        if name.endswith(".deb"):
            subprocess.run(["dpkg", "-x", os.path.join(debs, name), "/"], check=True, timeout=120)
    subprocess.run(["ldconfig"], check=True, timeout=120)
    os.environ.setdefault("VK_DRIVER_FILES", "/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json")


def first_file(*candidates):
    """The first of these paths (under the repository) that exists, else the last."""
    paths = [os.path.join(ROOT, c) for c in candidates]
    return next((p for p in paths if os.path.exists(p)), paths[-1])


def device_label(args):
    try:
        line = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        ).stdout.strip()
        if line:
            return line.splitlines()[0]
    except (OSError, subprocess.SubprocessError):
        pass
    return f"no nvidia-smi ({args.backend} backend, twin on {args.twin_device})"


def write(report, out_dir):
    report["summary"] = h200_report.summarize(report["raw"], report["meta"]["target"])
    tmp = os.path.join(out_dir, "h200.json.tmp")
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1)
    os.replace(tmp, os.path.join(out_dir, "h200.json"))
    with open(os.path.join(out_dir, "h200.md"), "w") as f:
        f.write(h200_report.markdown(report))


def merge(paths, out_dir):
    reports = []
    for p in paths:
        with open(p) as f:
            reports.append(json.load(f))
    meta = dict(reports[0]["meta"])
    meta["calls"] = ", ".join(f"{r['meta'].get('call')} ({r['meta'].get('date')}, {r['meta'].get('device')})" for r in reports)
    raw = {k: [x for r in reports for x in r["raw"].get(k, [])] for k in ["bench", "matmul", "recipe"]}
    meta["seeds"] = sorted({r["seed"] for r in raw["recipe"]})
    report = {"meta": meta, "raw": raw}
    os.makedirs(out_dir, exist_ok=True)
    write(report, out_dir)
    say(f"merged {len(reports)} reports into {out_dir}/h200.json and h200.md")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--out", default=os.environ.get("OUT"), help="where h200.json, h200.md and logs/ go (default: $OUT)")
    ap.add_argument("--tinygpt", default=first_file("target/h200/tinygpt", "target/release/tinygpt"))
    ap.add_argument(
        "--matmul-bench", default=first_file("target/h200/gpu_matmul_bench", "target/release/examples/gpu_matmul_bench")
    )
    ap.add_argument("--python", default=sys.executable, help="the python with torch for the twin")
    ap.add_argument("--config", default=os.path.join(ROOT, "configs/nanogpt-shakespeare-char.json"))
    ap.add_argument("--only", default="bench,matmul,recipe", help="comma list of bench, matmul, recipe")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bench-steps", type=int, default=30)
    ap.add_argument("--twin-warmup", type=int, default=5, help="untimed twin steps (torch.compile happens in the first)")
    ap.add_argument("--seeds", default="1337,1338,1339")
    ap.add_argument("--target", type=float, default=1.47, help="the val loss whose reaching is timed")
    ap.add_argument("--patience", type=int, default=3, help="early_stop_patience for a config without one")
    ap.add_argument("--no-stop-at-target", dest="stop_at_target", action="store_false", help="let ours run to its early stop")
    ap.add_argument("--precisions", default=os.environ.get("H200_PRECISIONS", "f32,mixed"), help="ours; `default` passes no --precision")
    ap.add_argument("--twin-modes", default="eager-fp32,as-nanogpt")
    ap.add_argument("--twin-max-steps", type=int, help="a cap on the twin's steps (the schedule keeps the config's)")
    ap.add_argument("--matmul-shape", default="4096x4096x4096")
    ap.add_argument(
        "--matmul-paths",
        default=os.environ.get("H200_MATMUL_PATHS", "f32=--precision f32;mixed=--precision mixed"),
        help='"name=extra args;..." for gpu_matmul_bench, e.g. "f32=--precision f32;shader-f16=--precision mixed" '
        "(default: $H200_MATMUL_PATHS, else f32 and mixed)",
    )
    ap.add_argument("--backend", default="wgpu", help="ours' --backend (cpu for a test here)")
    ap.add_argument("--twin-device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--threads", type=int, help="CPU threads for ours and the twin (tests on the CPU)")
    ap.add_argument("--deadline", type=float, default=540.0, help="seconds after which no process runs (cut there)")
    ap.add_argument("--bench-timeout", type=float, default=240.0)
    ap.add_argument("--recipe-timeout", type=float, default=300.0)
    ap.add_argument("--matmul-timeout", type=float, default=90.0)
    ap.add_argument("--call", default=None, help="a name for this call in merged reports (default: the start time)")
    ap.add_argument("--vulkan-debs", help="a folder of .debs to unpack into / first (the lent H200's Vulkan loader)")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    ap.add_argument("--merge", nargs="+", metavar="H200_JSON", help="merge several calls' h200.json into --out")
    ap.add_argument(
        "--skip-done", nargs="+", metavar="H200_JSON", default=[], help="skip recipe runs (seed, variant) that reached the target there"
    )
    args = ap.parse_args()
    if not args.out:
        ap.error("--out (or $OUT) is required")
    if args.merge:
        merge(args.merge, args.out)
        return 0
    args.only = set(args.only.split(","))
    unknown = args.only - {"bench", "matmul", "recipe"}
    if unknown:
        ap.error(f"--only: unknown parts {sorted(unknown)}")
    args.seeds = [int(s) for s in args.seeds.split(",") if s]
    args.variants = [f"ours:{p}" for p in args.precisions.split(",") if p] + [f"twin:{m}" for m in args.twin_modes.split(",") if m]
    bad = [v for v in args.variants if v.split(":")[1] not in ("f32", "mixed", "default", "eager-fp32", "as-nanogpt")]
    if bad:
        ap.error(f"unknown precisions or twin modes: {bad}")
    args.call = args.call or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    args.torch_version = None
    args.c_compiler = None
    args.done = {}
    for path in args.skip_done:
        with open(path) as f:
            for r in json.load(f)["raw"].get("recipe", []):
                if r.get("reached") and r.get("train_seconds_to_target") is not None:
                    args.done[(r["seed"], r["variant"])] = r.get("call")
    for attr in ("tinygpt", "matmul_bench", "config"):
        setattr(args, attr, os.path.abspath(getattr(args, attr)))

    if args.vulkan_debs and not args.dry_run:
        setup_vulkan(args.vulkan_debs)
    problems = preflight(args)
    if problems:
        for p in problems:
            say(f"cannot run: {p}")
        if not args.dry_run:
            return 2
    os.makedirs(args.out, exist_ok=True)
    logs = os.path.join(args.out, "logs")
    os.makedirs(logs, exist_ok=True)
    report = {
        "meta": {
            "call": args.call,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "device": device_label(args),
            "config": os.path.relpath(args.config, ROOT) if args.config.startswith(ROOT + os.sep) else args.config,
            "target": args.target,
            "rounds": args.rounds,
            "bench_steps": args.bench_steps,
            "seeds": args.seeds if "recipe" in args.only else [],
            "variants": args.variants,
            "parts": sorted(args.only),
            "matmul_shape": args.matmul_shape,
            "tinygpt": args.tinygpt,
            "torch": args.torch_version,
            "c_compiler": args.c_compiler,
            "vk_driver_files": os.environ.get("VK_DRIVER_FILES"),
            "notes": "dry run: no figures" if args.dry_run else "",
        },
        "raw": {"bench": [], "matmul": [], "recipe": []},
    }
    say(f"issue 38 on {report['meta']['device']}: parts {sorted(args.only)}, variants {args.variants}, seeds {args.seeds}, deadline {args.deadline:.0f} s")
    runner = Runner(args, logs)

    def save():
        bench = [r for r in report["raw"]["bench"] if r.get("line")]
        adapters = sorted({r["line"].get("adapter") for r in bench if r["variant"].startswith("ours:") and r["line"].get("adapter")})
        report["meta"]["adapter"] = ", ".join(adapters)
        # What each of our paths says it ran (a mixed run that fell back to f32 shows here).
        ran = {}
        for r in bench:
            if r["variant"].startswith("ours:"):
                said = {k: v for k, v in r["line"].items() if any(w in k for w in ("precision", "matmul", "kernels"))}
                text = json.dumps(said, sort_keys=True)
                if text not in ran.setdefault(r["variant"], []):
                    ran[r["variant"]].append(text)
        report["meta"]["ours_ran"] = "; ".join(f"{v}: {' / '.join(t)}" for v, t in ran.items())
        write(report, args.out)

    tmp = tempfile.mkdtemp(prefix="h200-")
    try:
        if "bench" in args.only:
            run_bench(args, runner, report, save)
        if "matmul" in args.only:
            run_matmul(args, runner, report, save)
        if "recipe" in args.only:
            run_recipe(args, runner, report, save, tmp)
    finally:
        save()
        shutil.rmtree(tmp, ignore_errors=True)
    say(f"wrote {args.out}/h200.json and {args.out}/h200.md")
    if not args.dry_run:
        print(h200_report.markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
