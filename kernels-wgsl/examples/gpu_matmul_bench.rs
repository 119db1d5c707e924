//! Matmul throughput on the wgpu backend, one JSON line per shape and precision:
//! `{m, n, k, layout, precision, kernels, gflops, ms, adapter, path}`.
//!
//! ```sh
//! cargo run --release -p tinygpt-kernels-wgsl --example gpu_matmul_bench -- 4096x4096x4096 2048x256x1024
//! cargo run --release -p tinygpt-kernels-wgsl --example gpu_matmul_bench -- --precision f32,mixed 4096x4096x4096
//! ```
//!
//! Shapes are `MxNxK` (C [m, n] = A [m, k] · B [k, n]); an optional suffix `:nt`, `:tn` or
//! `:tt` transposes B, A or both (the layouts a linear layer's forward and weight
//! gradient use). `--precision` takes `f32` (the default), `mixed` or both, comma-separated;
//! for each, the matmul precision report (which kernels run and why, the start-up
//! self-test's worst error) goes to stderr first, so stdout stays JSON. Each shape is
//! timed over enough repetitions to fill ~0.5 s after one warm-up, the GPU waited on at
//! the end (`sync`).

use std::time::Instant;

use tinygpt_kernels_wgsl::WgpuBackend;
use tinygpt_tensor::{block_on, Backend, MatmulDims, MatmulFused, Precision};

fn main() -> Result<(), String> {
    let mut precisions = vec![Precision::F32];
    let mut shapes = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--precision" {
            let list = args.next().ok_or("--precision needs f32, mixed or f32,mixed")?;
            precisions = list.split(',').map(str::parse).collect::<Result<_, String>>()?;
        } else {
            shapes.push(arg);
        }
    }
    if shapes.is_empty() {
        shapes.push("4096x4096x4096".to_string());
    }
    let dims: Vec<MatmulDims> = shapes.iter().map(|s| s.parse()).collect::<Result<_, _>>()?;
    for precision in precisions {
        let backend = WgpuBackend::new_with_precision(precision).map_err(|e| e.to_string())?;
        let adapter = backend.adapter();
        eprintln!(
            "{precision}: {} ({}, {}), shader-f16 {}: {}",
            adapter.name,
            adapter.api,
            adapter.device_type,
            adapter.shader_f16,
            backend.matmul_precision()
        );
        for (shape, &dims) in shapes.iter().zip(&dims) {
            let MatmulDims { m, k, n, .. } = dims;
            // Values that are not all equal, so a kernel that mixes up rows would show in
            // a profile's numbers as well as here.
            let a = backend.upload(&(0..m * k).map(|i| (i % 7) as f32 * 0.1 - 0.3).collect::<Vec<_>>());
            let b = backend.upload(&(0..k * n).map(|i| (i % 5) as f32 * 0.1 - 0.2).collect::<Vec<_>>());
            let run = |reps: usize| -> Result<f64, String> {
                let t = Instant::now();
                for _ in 0..reps {
                    drop(backend.matmul(&a, &b, dims, MatmulFused::none()).out);
                }
                block_on(backend.sync()).map_err(|e| e.to_string())?;
                Ok(t.elapsed().as_secs_f64())
            };
            run(1)?;
            let flop = 2.0 * m as f64 * n as f64 * k as f64;
            let once = run(3)? / 3.0;
            let reps = ((0.5 / once.max(1e-6)) as usize).clamp(3, 2000);
            let secs = run(reps)? / reps as f64;
            println!(
                "{{\"m\":{m},\"n\":{n},\"k\":{k},\"layout\":\"{}\",\"precision\":\"{precision}\",\"kernels\":\"{}\",\"gflops\":{:.1},\"ms\":{:.4},\"adapter\":\"{}\",\"path\":\"{:?}\"}}",
                shape.split_once(':').map_or("nn", |(_, l)| l),
                backend.matmul_precision().kernels,
                flop / secs / 1e9,
                secs * 1e3,
                adapter.name,
                backend.matmul_path(),
            );
        }
    }
    Ok(())
}
