//! The cost of handing each op to the thread pool: many small `add`s (the `medium` preset's
//! residual, 1536 · 128 floats) on a pool started beside the calling thread
//! ([`CpuBackend::try_new`]) and on one whose callers run pieces too, beside threads kept awake
//! ([`CpuBackend::try_new_on_this_thread`]), alternated; one JSON line per round with the
//! fastest and the median call.
//!
//! ```sh
//! cargo run --release -p tinygpt-kernels-cpu --example handoff_bench -- --threads 2
//! ```

use std::time::Instant;

use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_tensor::Backend;

const LEN: usize = 1536 * 128;
const CALLS: usize = 2000;

fn time_adds(backend: &CpuBackend) -> (f64, f64) {
    let x = backend.upload(&(0..LEN).map(|i| (i % 13) as f32).collect::<Vec<_>>());
    let mut secs: Vec<f64> = (0..CALLS)
        .map(|_| {
            let started = Instant::now();
            drop(backend.add(&x, &x, LEN));
            started.elapsed().as_secs_f64()
        })
        .collect();
    secs.sort_by(f64::total_cmp);
    (secs[0], secs[CALLS / 2])
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let threads = match args.iter().position(|a| a == "--threads") {
        Some(i) => args.get(i + 1).and_then(|t| t.parse().ok()).ok_or("--threads needs a number")?,
        None => 2,
    };
    let beside = CpuBackend::try_new(threads).map_err(|e| e.to_string())?;
    let joined = CpuBackend::try_new_on_this_thread(threads).map_err(|e| e.to_string())?;
    for round in 0..3 {
        for (name, backend) in [("beside", &beside), ("this_thread", &joined)] {
            let (min, median) = time_adds(backend);
            let line = serde_json::json!({
                "op": "add", "len": LEN, "threads": threads, "round": round, "pool": name,
                "min_us": (min * 1e7).round() / 10.0, "median_us": (median * 1e7).round() / 10.0,
            });
            println!("{line}");
        }
    }
    Ok(())
}
