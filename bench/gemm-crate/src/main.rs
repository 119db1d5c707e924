//! The `gemm` crate against kernels-cpu's fast matmul, back to back in one process, at the
//! model's product shapes: issue 9 asked for the faster of the two to be kept, with figures.
//!
//! ```sh
//! cargo run --release --manifest-path bench/gemm-crate/Cargo.toml -- --threads 1,2
//! ```
//!
//! Shapes are `MxNxK[:nt|tn|tt]` as for kernels-cpu's `matmul_bench` (C `[m, n]` = op(A)
//! `[m, k]` · op(B) `[k, n]`); without any, three MLP products at the `medium` and `large`
//! presets: fc_in's forward (`nt`), fc_in's input gradient (`nn`) and fc_out's weight
//! gradient (`tn`).
//! Per shape and thread count: each side's fastest call over about 0.3 s, twice, alternating;
//! one JSON line with both GFLOP/s, their ratio, and the largest difference between the two
//! results relative to the largest output (both compute the same product in f32).
//!
//! How `gemm` (0.19) picks its kernels: at run time, the first time it is called
//! (`is_x86_feature_detected!("avx512f")`, then `"fma"`), so no `target-cpu` flag is
//! needed; but its AVX-512 kernels are compiled in only with its `x86-v4` cargo feature
//! (without it an AVX-512 machine gets its AVX2+FMA kernels), which this crate turns on.
//! Threads: `gemm` takes `Parallelism::Rayon(n)` and runs on the rayon pool it is called in
//! (a pool of `n` threads here); ours runs as the CLI's backend does, on the calling thread
//! plus `n - 1` threads that stay awake between calls. For wasm32, `gemm` has a
//! `wasm-simd128-enable` feature; this comparison is native only.
//!
//! Standalone (its own workspace and lock file), so the main build, the tests and CI never
//! compile `gemm`.

use std::cell::RefCell;

use gemm::Parallelism;
use tinygpt_kernels_cpu::{CpuBackend, Kernels};
use tinygpt_tensor::{
block_on, read_vec, Backend, MatmulDims, MatmulFused};

/// kernels-cpu's benchmark helpers (`--threads`, the fastest-call timer), shared as they are.
#[path = "../../../kernels-cpu/examples/common/mod.rs"]
mod common;
use common::{fastest_secs, take_threads};

const DEFAULT_SHAPES: [&str; 6] = [
    "1536x512x128:nt",
    "1536x128x512",
    "128x512x1536:tn",
    "1536x768x192:nt",
    "1536x192x768",
    "192x768x1536:tn",
];

fn main() -> Result<(), String> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let threads = take_threads(&mut args)?;
    let shapes = if args.is_empty() { DEFAULT_SHAPES.map(String::from).to_vec() } else { args };
    for shape in &shapes {
        let dims: MatmulDims = shape.parse()?;
        let MatmulDims { m, k, n, .. } = dims;
        let mut rng = tinygpt_tensor::Rng::new(9);
        let a: Vec<f32> = (0..m * k).map(|_| rng.normal() as f32).collect();
        let b: Vec<f32> = (0..k * n).map(|_| rng.normal() as f32).collect();
        for &t in &threads {
            let ours =
                CpuBackend::try_new_on_this_thread(t).map_err(|e| e.to_string())?.with_kernels(Kernels::Fast);
            let pool = rayon::ThreadPoolBuilder::new().num_threads(t).build().map_err(|e| e.to_string())?;
            let (a_dev, b_dev) = (ours.upload(&a), ours.upload(&b));
            let theirs = RefCell::new(vec![0f32; m * n]);
            let mut best = [f64::INFINITY; 2];
            for _ in 0..2 {
                best[0] = best[0]
                    .min(fastest_secs(&|| drop(ours.matmul(&a_dev, &b_dev, dims, MatmulFused::none()).out)));
                best[1] = best[1].min(fastest_secs(&|| {
                    let mut c = theirs.borrow_mut();
                    let c = &mut c[..];
                    pool.install(|| gemm_crate(c, &a, &b, dims, t))
                }));
            }
            let theirs = theirs.into_inner();
            let want = block_on(read_vec(ours, &ours.matmul(&a_dev, &b_dev, dims, MatmulFused::none()).out))
                .map_err(|e| e.to_string())?;
            let scale = want.iter().fold(1e-30f32, |s, x| s.max(x.abs()));
            let diff = want.iter().zip(&theirs).fold(0f32, |d, (x, y)| d.max((x - y).abs())) / scale;
            let gflops = best.map(|secs| 2.0 * (m * n * k) as f64 / secs / 1e9);
            let line = serde_json::json!({
                "op": "matmul",
                "m": m, "n": n, "k": k,
                "layout": shape.split_once(':').map_or("nn", |(_, l)| l),
                "threads": t,
                "ours": ours.variant().name(),
                "ours_gflops": round1(gflops[0]),
                "gemm_crate_gflops": round1(gflops[1]),
                "ours_over_gemm_crate": (gflops[0] / gflops[1] * 1000.0).round() / 1000.0,
                "max_rel_diff": diff,
            });
            println!("{line}");
        }
    }
    Ok(())
}

/// `c = op(a) · op(b)` through `gemm` (row-major C, strides for the transposed operands),
/// on the rayon pool it is called in when `threads > 1`.
fn gemm_crate(c: &mut [f32], a: &[f32], b: &[f32], dims: MatmulDims, threads: usize) {
    let MatmulDims { m, k, n, trans_a, trans_b } = dims;
    assert!(c.len() == m * n && a.len() == m * k && b.len() == k * n);
    // (column stride, row stride) of op(A) [m, k] and op(B) [k, n] as stored.
    let (a_cs, a_rs) = if trans_a { (m, 1) } else { (1, k) };
    let (b_cs, b_rs) = if trans_b { (k, 1) } else { (1, n) };
    let parallelism = if threads > 1 { Parallelism::Rayon(threads) } else { Parallelism::None };
    // SAFETY: every stride stays inside its slice for the asserted sizes; `read_dst` is
    // false, so `c`'s old values are not read (alpha 0, beta 1: c = a · b).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr(),
            a_cs as isize,
            a_rs as isize,
            b.as_ptr(),
            b_cs as isize,
            b_rs as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        )
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}
