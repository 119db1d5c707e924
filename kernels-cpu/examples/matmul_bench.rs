//! CPU matmul throughput per kernel variant, one JSON line per (shape, variant, threads).
//!
//! ```sh
//! cargo run --release -p tinygpt-kernels-cpu --example matmul_bench -- --threads 1,2 1536x768x192:nt
//! ```
//!
//! `--kernels simd128-relaxed` (a comma-separated list) times only those variants. Under
//! Node's WASI (one thread), as kernels-cpu/tests/wasi/run.mjs runs the conformance kit:
//!
//! ```sh
//! RUSTFLAGS="-C target-feature=+simd128,+relaxed-simd" cargo build --release \
//!   -p tinygpt-kernels-cpu --example matmul_bench --target wasm32-wasip1 \
//!   --target-dir target/wasi-relaxed-simd
//! node kernels-cpu/tests/wasi/run.mjs \
//!   target/wasi-relaxed-simd/wasm32-wasip1/release/examples/matmul_bench.wasm \
//!   --kernels simd128-relaxed 1024x768x768:nt
//! ```
//!
//! (`bench/wasm_matmul.sh` times a GPT-2-124M LoRA step's shapes that way.)
//!
//! Shapes are `MxNxK` (C [m, n] = op(A) [m, k] · op(B) [k, n]); a suffix `:nt`, `:tn` or `:tt`
//! transposes B, A or both (a linear layer's forward is `nt`, its weight gradient `tn`).
//! Without shapes it times the `large` preset's MLP (batch 12 × context 128 rows, d 192,
//! d_mlp 768): fc_in forward, fc_out's input gradient and fc_out's weight gradient. Every
//! supported variant is timed back to back, ~0.3 s per line after one warm-up call.
//!
//! First, per thread count and fast variant, an `"op":"fma_peak"` line: the multiply-add
//! peak those threads reach right now with the variant's instructions
//! (`KernelVariant::measured_fma_peak_gflops`, the fastest of short bursts); each matmul
//! line gives the mean call (`gflops`, `ms`) and the fastest (`ms_fastest`), and for a fast
//! variant what fraction of the peak the fastest call reached (`of_peak`): on a shared
//! machine the mean says how much of the cores the benchmark got, the fastest what the
//! kernel does with them (stable to a percent or two at 5-ms calls under a load average of 5).

use std::time::Instant;

mod common;
use tinygpt_tensor::{Backend, MatmulDims, MatmulFused};

const LARGE_MLP: [&str; 3] = ["1536x768x192:nt", "1536x192x768:nn", "192x768x1536:tn"];

fn main() -> Result<(), String> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let threads = common::take_threads(&mut args)?;
    let variants = common::take_variants(&mut args)?;
    let shapes = if args.is_empty() { LARGE_MLP.map(String::from).to_vec() } else { args };
    let mut peaks = Vec::new();
    for &t in &threads {
        for &variant in &variants {
            if let Some(gflops) = variant.measured_fma_peak_gflops(t) {
                let line = serde_json::json!({
                    "op": "fma_peak",
                    "kernels": variant.name(),
                    "threads": t,
                    "gflops": (gflops * 10.0).round() / 10.0,
                });
                println!("{line}");
                peaks.push(((variant, t), gflops));
            }
        }
    }
    for shape in &shapes {
        let dims: MatmulDims = shape.parse()?;
        let MatmulDims { m, k, n, .. } = dims;
        for &t in &threads {
            for &variant in &variants {
                let backend = common::backend(t, variant)?;
                let a = backend.upload(&(0..m * k).map(|i| (i % 7) as f32 * 0.1).collect::<Vec<_>>());
                let b = backend.upload(&(0..k * n).map(|i| (i % 5) as f32 * 0.1).collect::<Vec<_>>());
                // Total and fastest seconds of `reps` calls.
                let run = |reps: usize| {
                    let (mut total, mut fastest) = (0.0, f64::INFINITY);
                    for _ in 0..reps {
                        let started = Instant::now();
                        drop(backend.matmul(&a, &b, dims, MatmulFused::none()).out);
                        let secs = started.elapsed().as_secs_f64();
                        (total, fastest) = (total + secs, fastest.min(secs));
                    }
                    (total, fastest)
                };
                run(1);
                let once = run(2).0 / 2.0;
                let reps = ((0.3 / once.max(1e-6)) as usize).clamp(2, 5000);
                let (total, fastest) = run(reps);
                let secs = total / reps as f64;
                // In f64: `m · n · k` overflows a wasm32 `usize` at a 50,257-wide head.
                let gflops = 2.0 * m as f64 * n as f64 * k as f64 / secs / 1e9;
                let fastest_gflops = gflops * secs / fastest;
                let peak = peaks.iter().find(|(key, _)| *key == (variant, t)).map(|&(_, p)| p);
                let mut line = serde_json::json!({
                    "op": "matmul",
                    "m": m, "n": n, "k": k,
                    "layout": shape.split_once(':').map_or("nn", |(_, l)| l),
                    "kernels": variant.name(),
                    "threads": t,
                    "gflops": (gflops * 10.0).round() / 10.0,
                    "ms": (secs * 1e6).round() / 1e3,
                    // The fastest call: on a shared machine, the one least preempted.
                    "ms_fastest": (fastest * 1e6).round() / 1e3,
                    "gflops_fastest": (fastest_gflops * 10.0).round() / 10.0,
                });
                if let Some(peak) = peak {
                    line["of_peak"] = serde_json::json!((fastest_gflops / peak * 1000.0).round() / 1000.0);
                }
                println!("{line}");
            }
        }
    }
    Ok(())
}
