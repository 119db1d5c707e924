//! CPU training attention (forward `attention` keeping `AttentionKeep::Backward`, and its
//! `attention_backward`) per kernel variant, one JSON line per (shape, variant, threads).
//!
//! ```sh
//! cargo run --release -p tinygpt-kernels-cpu --example attention_bench -- --threads 1,2 16x96x4x32
//! ```
//!
//! Shapes are `BxTxHxHD` (batch, context, heads, head dim); without shapes it times the
//! `small` and `medium` presets' layers. `--dropout P` drops attention probabilities with
//! probability `P` (a fixed mask). `gflops` counts the causal half of the products
//! (forward 2, backward 4 `T²/2 · hd` multiply-adds per head, without recomputation), so the
//! figure compares variants, not FLOP-exact work. Every supported variant is timed back to
//! back, ~0.3 s per line after one warm-up call; each figure is the fastest call (robust to
//! other processes on a shared machine, so a best case, not an average).

mod common;

use tinygpt_tensor::{AttentionDims, AttentionKeep, Backend, DropoutMask};

const PRESETS: [&str; 2] = ["16x64x3x32", "16x96x4x32"];

fn parse(shape: &str) -> Result<AttentionDims, String> {
    let parts: Vec<usize> = shape
        .split('x')
        .map(|p| p.parse().map_err(|_| format!("bad shape {shape:?}: want BxTxHxHD")))
        .collect::<Result<_, _>>()?;
    match parts[..] {
        [batch, seq, heads, head_dim] => {
            Ok(AttentionDims { batch, seq, heads, head_dim, dropout: None, cache: None })
        }
        _ => Err(format!("bad shape {shape:?}: want BxTxHxHD")),
    }
}

fn main() -> Result<(), String> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let threads = common::take_threads(&mut args)?;
    let (mut dropout, mut dropout_p) = (None, None);
    if let Some(i) = args.iter().position(|a| a == "--dropout") {
        let p: f32 = args.get(i + 1).and_then(|p| p.parse().ok()).ok_or("--dropout needs a probability")?;
        if !(0.0..1.0).contains(&p) {
            return Err(format!("--dropout {p} outside [0, 1)"));
        }
        (dropout, dropout_p) = (Some(DropoutMask::new(p, 1, 2, 3, 0)), Some(p));
        args.drain(i..i + 2);
    }
    let shapes = if args.is_empty() { PRESETS.map(String::from).to_vec() } else { args };
    for shape in &shapes {
        let dims = AttentionDims { dropout, ..parse(shape)? };
        let len = dims.batch * dims.seq * dims.channels();
        let data = |m: usize| (0..len).map(|i| ((i * m) % 17) as f32 * 0.1 - 0.8).collect::<Vec<_>>();
        for &t in &threads {
            for variant in common::supported_variants() {
                let backend = common::backend(t, variant)?;
                let (q, k, v, dout) = (
                    backend.upload(&data(3)),
                    backend.upload(&data(5)),
                    backend.upload(&data(7)),
                    backend.upload(&data(11)),
                );
                let saved = backend.attention(&q, &k, &v, dims, AttentionKeep::Backward);
                let forward = || drop(backend.attention(&q, &k, &v, dims, AttentionKeep::Backward));
                let backward = || {
                    drop(backend.attention_backward(
                        &dout,
                        &q,
                        &k,
                        &v,
                        saved.kept(),
                        dims,
                        AttentionKeep::Backward,
                    ))
                };
                let secs = [common::fastest_secs(&forward), common::fastest_secs(&backward)];
                let half = (dims.batch * dims.heads * dims.seq * dims.seq * dims.head_dim) as f64 / 2.0;
                let line = serde_json::json!({
                    "op": "attention",
                    "shape": shape,
                    "dropout": dropout_p,
                    "kernels": variant.name(),
                    "threads": t,
                    "forward_ms": (secs[0] * 1e5).round() / 100.0,
                    "backward_ms": (secs[1] * 1e5).round() / 100.0,
                    "forward_gflops": (2.0 * 2.0 * half / secs[0] / 1e7).round() / 100.0,
                    "backward_gflops": (2.0 * 4.0 * half / secs[1] / 1e7).round() / 100.0,
                });
                println!("{line}");
            }
        }
    }
    Ok(())
}
