//! CPU GELU forward and backward per kernel variant, one JSON line per (length, variant, threads).
//!
//! ```sh
//! cargo run --release -p tinygpt-kernels-cpu --example gelu_bench -- --threads 1,2 786432
//! ```
//!
//! Lengths are element counts; without them it times the `small` and `medium` presets' MLP
//! activations (`B·T · 4d`). Every supported variant is timed back to back, ~0.3 s per line
//! after one warm-up call; each figure is the fastest call (robust to other processes on a
//! shared machine, so a best case, not an average). `ns_per_elem` divides by the length.

mod common;

use tinygpt_tensor::Backend;

/// `small` (1024 tokens · 384) and `medium` (1536 tokens · 512).
const PRESETS: [usize; 2] = [1024 * 384, 1536 * 512];

fn main() -> Result<(), String> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let threads = common::take_threads(&mut args)?;
    let lens = if args.is_empty() {
        PRESETS.to_vec()
    } else {
        args.iter().map(|a| a.parse().map_err(|_| format!("bad length {a:?}"))).collect::<Result<_, _>>()?
    };
    for &len in &lens {
        let data = |m: usize| (0..len).map(|i| ((i * m) % 97) as f32 * 0.1 - 4.8).collect::<Vec<_>>();
        for &t in &threads {
            for variant in common::supported_variants() {
                let backend = common::backend(t, variant)?;
                let (x, dout) = (backend.upload(&data(3)), backend.upload(&data(5)));
                let forward = || drop(backend.gelu(&x, len));
                let backward = || drop(backend.gelu_backward(&x, &dout, len));
                let secs = [common::fastest_secs(&forward), common::fastest_secs(&backward)];
                let line = serde_json::json!({
                    "op": "gelu",
                    "len": len,
                    "kernels": variant.name(),
                    "threads": t,
                    "forward_ms": (secs[0] * 1e5).round() / 100.0,
                    "backward_ms": (secs[1] * 1e5).round() / 100.0,
                    "forward_ns_per_elem": (secs[0] / len as f64 * 1e11).round() / 100.0,
                    "backward_ns_per_elem": (secs[1] / len as f64 * 1e11).round() / 100.0,
                });
                println!("{line}");
            }
        }
    }
    Ok(())
}
