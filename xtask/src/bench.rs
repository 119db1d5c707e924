//! `cargo xtask bench [--presets small,medium,large,xl] [--steps N] [--threads 1,2]
//! [--kernels reference,fast] [--pytorch PYTHON] [--rounds N] [--no-matmul]`: native
//! training-step speed of the CPU backend, one JSON line per (preset, threads, kernels), each
//! printed by `tinygpt bench` from a release build.
//!
//! The kernel variants of one (preset, threads) run back to back, and so does the PyTorch
//! twin (`bench/pytorch_twin.py --device cpu`, same preset and thread count) when
//! `--pytorch` names a Python that can import torch. The group repeats `--rounds` times
//! (default 1), alternating, and a ratio line of the best run of each side follows it:
//! `{"preset":…,"threads":…,"fast_over_reference":…,"fast_over_pytorch":…}`. Last come the
//! matmul lines (GFLOP/s of every variant at the `large` preset's MLP shapes, from
//! kernels-cpu's `matmul_bench` example).
//!
//! `cargo xtask bench --quality` (alone) runs the quality recipe instead: nanoGPT's CPU
//! recipe on TinyShakespeare (`configs/nanogpt-cpu.json`, 2000 steps, all cores; about a
//! minute and a half on 2 cores), optim's ignored `quality` test in a release build. It
//! prints the commit (with `-dirty` for uncommitted changes), a line per evaluation, and
//! `{"recipe","steps","val_loss","threads","seconds"}`; it fails if the validation loss is
//! above 1.95. docs/benchmarks-log.md records its figure per commit. Not part of `cargo xtask test`
//! or CI: minutes of every core.

use std::process::Command;

use serde_json::Value;

use crate::util::{self, parse_options, workspace_root};

pub fn run(args: &[String]) -> Result<(), String> {
    if args.iter().any(|a| a == "--quality") {
        if args.len() > 1 {
            return Err("--quality takes no other options".into());
        }
        return quality();
    }
    let mut presets = "small,medium,large,xl".to_string();
    let mut steps = "5".to_string();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut threads = if cores > 1 { format!("1,{cores}") } else { "1".into() };
    let mut kernels = "reference,fast".to_string();
    let mut python = None;
    let mut matmul = true;
    let mut rounds = 1;
    let known = ["--presets", "--steps", "--threads", "--kernels", "--pytorch", "--rounds", "--no-matmul"];
    for (name, value) in parse_options(args, &known)? {
        match name {
            "--presets" => presets = value.into(),
            "--steps" => steps = value.into(),
            "--threads" => threads = value.into(),
            "--kernels" => kernels = value.into(),
            "--pytorch" => python = Some(value.to_string()),
            "--rounds" => {
                rounds = value.parse().map_err(|_| format!("--rounds wants a count, got {value:?}"))?
            }
            _ => matmul = false,
        }
    }
    let root = workspace_root();
    let build = ["build", "--release", "-q", "-p", "tinygpt-cli"];
    util::run(Command::new(env!("CARGO")).current_dir(&root).args(build))?;
    let exe = root.join("target/release/tinygpt");
    let twin = root.join("bench/pytorch_twin.py");
    for preset in presets.split(',') {
        for t in threads.split(',') {
            // The best tok/s of each side over the rounds.
            let mut speeds: Vec<(String, Option<f64>)> = Vec::new();
            let mut record = |name: &str, line: Value| {
                let best = speeds.iter().find(|(k, _)| k == name).and_then(|(_, s)| *s);
                let now = line["tok_per_s"].as_f64();
                speeds.retain(|(k, _)| k != name);
                speeds.push((name.to_string(), best.into_iter().chain(now).reduce(f64::max)));
            };
            for _ in 0..rounds {
                for k in kernels.split(',') {
                    let args =
                        ["bench", "--preset", preset, "--steps", &steps, "--threads", t, "--kernels", k];
                    let what = format!("tinygpt bench --preset {preset} --threads {t} --kernels {k}");
                    record(k, json_line(Command::new(&exe).args(args), &what)?);
                }
                if let Some(python) = &python {
                    let args = ["--device", "cpu", "--threads", t, "--presets", preset, "--steps", &steps];
                    let what = format!("{python} {}", twin.display());
                    record("pytorch", json_line(Command::new(python).arg(&twin).args(args), &what)?);
                }
            }
            let speed = |name: &str| speeds.iter().find(|(k, _)| k == name).and_then(|(_, s)| *s);
            let ratio =
                |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| (a / b * 1000.0).round() / 1000.0);
            let fast = speed("fast");
            let line = serde_json::json!({
                "preset": preset,
                "threads": t.parse::<usize>().ok(),
                "fast_over_reference": ratio(fast, speed("reference")),
                "fast_over_pytorch": ratio(fast, speed("pytorch")),
            });
            println!("{line}");
        }
    }
    if matmul {
        let build = ["build", "--release", "-q", "-p", "tinygpt-kernels-cpu", "--example", "matmul_bench"];
        util::run(Command::new(env!("CARGO")).current_dir(&root).args(build))?;
        let exe = root.join("target/release/examples/matmul_bench");
        let status = Command::new(&exe)
            .args(["--threads", &threads])
            .status()
            .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
        if !status.success() {
            return Err("matmul_bench failed".into());
        }
    }
    Ok(())
}

/// The quality recipe (see the module docs): optim's `quality` test, ignored by default.
fn quality() -> Result<(), String> {
    let root = workspace_root();
    let commit = util::output_of("git", &["-C", &root.to_string_lossy(), "describe", "--always", "--dirty"]);
    println!("quality recipe at commit {}", commit.as_deref().map_or("(unknown)", str::trim));
    let test = ["test", "--release", "-p", "tinygpt-optim", "--test", "quality"];
    util::run(Command::new(env!("CARGO")).current_dir(&root).args(test).args([
        "--",
        "--ignored",
        "--nocapture",
    ]))
}

/// Runs `command`, echoes its stdout and parses its last line as JSON.
fn json_line(command: &mut Command, what: &str) -> Result<Value, String> {
    let out = command.output().map_err(|e| format!("cannot run {what}: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    print!("{stdout}");
    if !out.status.success() {
        return Err(format!("{what} failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    let last = stdout.lines().last().unwrap_or("");
    serde_json::from_str(last).map_err(|e| format!("{what} printed no JSON line ({e}): {last:?}"))
}
