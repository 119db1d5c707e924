//! What `--precision mixed` gets on this machine's adapter (issue 34): the matmul
//! precision report (path, reason, start-up self-test), then f32 and mixed matmul
//! throughput side by side, one JSON line per shape and precision.
//!
//! ```sh
//! cargo run --release -p tinygpt-kernels-wgsl --example precision_report -- 1024x1024x1024 4096x4096x4096:nt
//! ```
//!
//! Shapes are `MxNxK` with an optional `:nt`, `:tn`, `:tt` (as in `gpu_matmul_bench`).
//! Each is timed over enough repetitions to fill ~0.5 s after one warm-up.

use std::time::Instant;

use tinygpt_kernels_wgsl::WgpuBackend;
use tinygpt_tensor::{block_on, Backend, MatmulDims, Precision};

fn main() -> Result<(), String> {
    let shapes: Vec<String> = std::env::args().skip(1).collect();
    let shapes = if shapes.is_empty() { vec!["1024x1024x1024".to_string()] } else { shapes };
    let f32 = WgpuBackend::new().map_err(|e| e.to_string())?;
    let mixed = WgpuBackend::new_with_precision(Precision::Mixed).map_err(|e| e.to_string())?;
    let adapter = mixed.adapter();
    println!(
        "adapter: {} ({}, {}), shader-f16 {}",
        adapter.name, adapter.api, adapter.device_type, adapter.shader_f16
    );
    println!("f32 asked:   {}", f32.matmul_precision());
    println!("mixed asked: {}", mixed.matmul_precision());
    for shape in shapes {
        let dims: MatmulDims = shape.parse()?;
        let MatmulDims { m, k, n, .. } = dims;
        for (name, backend) in [("f32", &f32), ("mixed", &mixed)] {
            let a = backend.upload(&(0..m * k).map(|i| (i % 7) as f32 * 0.1 - 0.3).collect::<Vec<_>>());
            let b = backend.upload(&(0..k * n).map(|i| (i % 5) as f32 * 0.1 - 0.2).collect::<Vec<_>>());
            let run = |reps: usize| -> Result<f64, String> {
                let t = Instant::now();
                for _ in 0..reps {
                    drop(backend.matmul(&a, &b, None, dims));
                }
                block_on(backend.sync()).map_err(|e| e.to_string())?;
                Ok(t.elapsed().as_secs_f64())
            };
            run(1)?;
            let once = run(3)? / 3.0;
            let reps = ((0.5 / once.max(1e-6)) as usize).clamp(3, 2000);
            let secs = run(reps)? / reps as f64;
            let gflops = 2.0 * m as f64 * n as f64 * k as f64 / secs / 1e9;
            println!(
                "{{\"shape\":\"{shape}\",\"precision\":\"{name}\",\"kernels\":\"{}\",\"gflops\":{gflops:.1},\"ms\":{:.4},\"path\":\"{:?}\"}}",
                backend.matmul_precision().kernels,
                secs * 1e3,
                backend.matmul_path()
            );
        }
    }
    Ok(())
}
