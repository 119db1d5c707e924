//! The training attention pair (`attention` and `attention_backward` keeping `AttentionKeep::Backward`) at
//! one shape, wall-clock per call, three ways: `f32` (the unfused kernels: products, softmax and dropout over
//! the probabilities), `mixed` unfused (the same with products rounded to f16), and `mixed` flash attention
//! (`src/flash_attention.rs`, no `[B, H, T, T]` buffer; by default the backend runs it only where the unfused
//! pair does not fit, see `FlashAttention`). The defaults are the recipe's
//! (configs/nanogpt-shakespeare-char.json: batch 64, 256 positions, 6 heads of 64, attention dropout 0.2).
//!
//! ```sh
//! cargo run --release -p tinygpt-kernels-wgsl --example attention_time
//! cargo run --release -p tinygpt-kernels-wgsl --example attention_time -- --batch 4 --iters 3
//! ```
//!
//! One JSON line per way: `{"precision", "path", "matmul", "shape", "forward_ms",
//! "backward_ms", "pair_ms"}`, after 2 warm-up pairs, each the mean of `iters` calls
//! recorded back to back and waited for once (`backward_ms` is the pair's time less the
//! forward's). The matmul line (`WgpuBackend::matmul_precision`) goes to stderr.

use std::time::Instant;

use tinygpt_kernels_wgsl::{FlashAttention, WgpuBackend};
use tinygpt_tensor::{block_on, AttentionDims, AttentionKeep, Backend, DropoutMask, Precision, Rng};

const WARMUP: usize = 2;

fn options() -> Result<(AttentionDims, usize), String> {
    let (mut batch, mut seq, mut heads, mut head_dim, mut dropout, mut iters) = (64, 256, 6, 64, 0.2f32, 10);
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let [name, value] = pair else { return Err(format!("{} needs a value", pair[0])) };
        let number = || value.parse::<usize>().map_err(|_| format!("{name}: not a number: {value}"));
        match name.as_str() {
            "--batch" => batch = number()?,
            "--seq" => seq = number()?,
            "--heads" => heads = number()?,
            "--head-dim" => head_dim = number()?,
            "--iters" => iters = number()?.max(1),
            "--dropout" => {
                dropout = value.parse().map_err(|_| format!("--dropout: not a number: {value}"))?
            }
            _ => {
                return Err(format!(
                    "unknown option {name} (--batch, --seq, --heads, --head-dim, --dropout, --iters)"
                ))
            }
        }
    }
    let dropout = (dropout > 0.0).then(|| DropoutMask::new(dropout, 1337, 1, 0, 0));
    Ok((AttentionDims { batch, seq, heads, head_dim, dropout, cache: None }, iters))
}

fn main() -> Result<(), String> {
    let (dims, iters) = options()?;
    for precision in Precision::ALL {
        let backend = WgpuBackend::new_with_precision(precision).map_err(|e| e.to_string())?;
        eprintln!("{precision}: {}", backend.matmul_precision());
        let flash: &[FlashAttention] = match precision {
            Precision::F32 => &[FlashAttention::Never],
            Precision::Mixed => &[FlashAttention::Never, FlashAttention::Always],
        };
        for &mode in flash {
            time(&backend.with_flash_attention(mode), precision, dims, iters)?;
        }
    }
    Ok(())
}

fn time(
    backend: &WgpuBackend,
    precision: Precision,
    dims: AttentionDims,
    iters: usize,
) -> Result<(), String> {
    let err = |e: tinygpt_tensor::TensorError| e.to_string();
    let len = dims.batch * dims.seq * dims.channels();
    let mut rng = Rng::new(5);
    let [q, k, v, dout] = [(); 4].map(|_| {
        let x: Vec<f32> = (0..len).map(|_| rng.normal() as f32).collect();
        backend.upload(&x)
    });
    let pair = || {
        let saved = backend.attention(&q, &k, &v, dims, AttentionKeep::Backward);
        drop(backend.attention_backward(&dout, &q, &k, &v, saved.kept(), dims, AttentionKeep::Backward));
        saved.kept().len()
    };
    let mut saved_len = 0;
    for _ in 0..WARMUP {
        saved_len = pair();
    }
    block_on(backend.sync()).map_err(err)?;
    let t0 = Instant::now();
    for _ in 0..iters {
        drop(backend.attention(&q, &k, &v, dims, AttentionKeep::Backward));
    }
    block_on(backend.sync()).map_err(err)?;
    let forward = t0.elapsed().as_secs_f64();
    let t0 = Instant::now();
    for _ in 0..iters {
        pair();
    }
    block_on(backend.sync()).map_err(err)?;
    let both = t0.elapsed().as_secs_f64();
    let ms = |s: f64| (s * 1e3 / iters as f64 * 1e3).round() / 1e3;
    let path = if saved_len == dims.batch * dims.heads * dims.seq * dims.seq { "unfused" } else { "flash" };
    let AttentionDims { batch, seq, heads, head_dim, dropout, .. } = dims;
    println!(
        "{{\"precision\":\"{precision}\",\"path\":\"{path}\",\"matmul\":\"{}\",\"shape\":\"B={batch} T={seq} H={heads} hd={head_dim} dropout={}\",\"forward_ms\":{},\"backward_ms\":{},\"pair_ms\":{}}}",
        backend.matmul_precision().kernels,
        dropout.is_some(),
        ms(forward),
        ms(both - forward),
        ms(both)
    );
    Ok(())
}
