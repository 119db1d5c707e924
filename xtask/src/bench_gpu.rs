//! `cargo xtask bench-gpu [--presets small,medium,large,xl,huge] [--steps N]`: training
//! speed on the wgpu backend (one `tinygpt bench --backend wgpu` JSON line per preset),
//! then matmul throughput (`{m, n, k, gflops}` lines from kernels-wgsl's `gpu_matmul_bench`
//! example) at 4096³ and at the `huge` preset's shapes. Release builds; the GPU is
//! whatever adapter wgpu picks (`WGPU_ADAPTER_NAME` / `VK_DRIVER_FILES` choose another).

use std::path::Path;
use std::process::Command;

use crate::util::{self, parse_options, workspace_root};

/// `huge`: batch·ctx = 8·256 = 2048 rows, d = 256, d_mlp = 1024, vocabulary 256. Forward
/// layouts (`nt`: x · Wᵀ), input gradients (`nn`), weight gradients (`tn`: dyᵀ · x).
pub const MATMUL_SHAPES: [&str; 8] = [
    "4096x4096x4096",
    "2048x256x256:nt",
    "2048x1024x256:nt",
    "2048x256x1024:nt",
    "2048x256x1024:nn",
    "256x256x2048:tn",
    "256x1024x2048:tn",
    "1024x256x2048:tn",
];

pub fn run(args: &[String]) -> Result<(), String> {
    let mut presets = "small,medium,large,xl,huge".to_string();
    let mut steps = "20".to_string();
    for (name, value) in parse_options(args, &["--presets", "--steps"])? {
        match name {
            "--presets" => presets = value.into(),
            _ => steps = value.into(),
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
    util::run(Command::new(env!("CARGO")).current_dir(&root).args([
        "build",
        "--release",
        "-q",
        "-p",
        "tinygpt-kernels-wgsl",
        "--example",
        "gpu_matmul_bench",
    ]))?;
    let release = root.join("target/release");
    for preset in presets.split(',') {
        run_exe(
            &release.join("tinygpt"),
            &["bench", "--backend", "wgpu", "--preset", preset, "--steps", &steps],
        )?;
    }
    run_exe(&release.join("examples/gpu_matmul_bench"), &MATMUL_SHAPES)
}

fn run_exe(exe: &Path, args: &[&str]) -> Result<(), String> {
    let status =
        Command::new(exe).args(args).status().map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{} {} failed", exe.display(), args.join(" ")))
    }
}
