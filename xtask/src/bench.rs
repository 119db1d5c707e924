//! `cargo xtask bench [--presets tiny,small,medium] [--steps N] [--threads 1,2]`: native
//! training-step speed of the CPU backend, one JSON line per (preset, threads), each printed
//! by `tinygpt bench` from a release build.

use std::process::Command;

use crate::util::{self, parse_options, workspace_root};

pub fn run(args: &[String]) -> Result<(), String> {
    let mut presets = "tiny,small,medium".to_string();
    let mut steps = "5".to_string();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut threads = if cores > 1 { format!("1,{cores}") } else { "1".into() };
    for (name, value) in parse_options(args, &["--presets", "--steps", "--threads"])? {
        match name {
            "--presets" => presets = value.into(),
            "--steps" => steps = value.into(),
            _ => threads = value.into(),
        }
    }
    let root = workspace_root();
    util::run(Command::new(env!("CARGO")).current_dir(&root).args([
        "build",
        "--release",
        "-q",
        "-p",
        "tinygpt-cli",
    ]))?;
    let exe = root.join("target/release/tinygpt");
    for preset in presets.split(',') {
        for t in threads.split(',') {
            let status = Command::new(&exe)
                .args(["bench", "--preset", preset, "--steps", &steps, "--threads", t])
                .status()
                .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
            if !status.success() {
                return Err(format!("tinygpt bench --preset {preset} --threads {t} failed"));
            }
        }
    }
    Ok(())
}
