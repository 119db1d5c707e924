//! Matmul throughput on the wgpu backend, one JSON line `{m, n, k, gflops, ...}` per shape.
//!
//! ```sh
//! cargo run --release -p tinygpt-kernels-wgsl --example gpu_matmul_bench -- 4096x4096x4096 2048x256x1024
//! ```
//!
//! Shapes are `MxNxK` (C [m, n] = A [m, k] · B [k, n]); an optional suffix `:nt`, `:tn` or
//! `:tt` transposes B, A or both (the layouts a linear layer's forward and weight
//! gradient use). Each shape is timed over enough repetitions to fill ~0.5 s after one
//! warm-up, the GPU waited on at the end (`sync`).

use std::time::Instant;

use tinygpt_kernels_wgsl::WgpuBackend;
use tinygpt_tensor::{block_on, Backend, MatmulDims};

fn main() -> Result<(), String> {
    let shapes: Vec<String> = std::env::args().skip(1).collect();
    let shapes = if shapes.is_empty() { vec!["4096x4096x4096".to_string()] } else { shapes };
    let backend = WgpuBackend::new().map_err(|e| e.to_string())?;
    for shape in shapes {
        let dims: MatmulDims = shape.parse()?;
        let MatmulDims { m, k, n, .. } = dims;
        let a = backend.upload(&vec![0.5f32; m * k]);
        let b = backend.upload(&vec![0.25f32; k * n]);
        let run = |reps: usize| -> Result<f64, String> {
            let t = Instant::now();
            for _ in 0..reps {
                drop(backend.matmul(&a, &b, None, dims));
            }
            block_on(backend.sync()).map_err(|e| e.to_string())?;
            Ok(t.elapsed().as_secs_f64())
        };
        run(1)?;
        let flop = 2.0 * m as f64 * n as f64 * k as f64;
        let once = run(3)? / 3.0;
        let reps = ((0.5 / once.max(1e-6)) as usize).clamp(3, 2000);
        let secs = run(reps)? / reps as f64;
        let line = format!(
            "{{\"m\":{m},\"n\":{n},\"k\":{k},\"layout\":\"{}\",\"gflops\":{:.1},\"ms\":{:.4},\"adapter\":\"{}\",\"path\":\"{:?}\"}}",
            shape.split_once(':').map_or("nn", |(_, l)| l),
            flop / secs / 1e9,
            secs * 1e3,
            backend.adapter().name,
            backend.matmul_path(),
        );
        println!("{line}");
    }
    Ok(())
}
