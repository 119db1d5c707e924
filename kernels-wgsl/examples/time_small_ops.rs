//! Milliseconds per op on the wgpu backend at the `small` preset's sizes (batch 16, seq 64,
//! d 96): matmuls of each role, attention, LayerNorm, GELU, reductions, cross-entropy. A
//! timing, not a check: it asserts nothing (it was an `#[ignore]`d "test" in
//! `tests/training.rs`).
//!
//! ```sh
//! cargo run --release -p tinygpt-kernels-wgsl --example time_small_ops [-- FILTER]
//! ```
//!
//! `FILTER` keeps only the ops whose label contains it (e.g. `matmul`). Lavapipe is used
//! when no Vulkan driver is configured (`VK_ICD_FILENAMES`).

use std::time::Instant;

use tinygpt_kernels_wgsl::testing::prefer_lavapipe;
use tinygpt_kernels_wgsl::WgpuBackend;
use tinygpt_tensor::{block_on, AttentionDims, AttentionKeep, Backend, MatmulDims, MatmulFused};

const REPEATS: u32 = 5;

fn main() {
    prefer_lavapipe();
    let gpu = WgpuBackend::new().unwrap_or_else(|e| panic!("no wgpu adapter: {e}"));
    let only = std::env::args().nth(1).unwrap_or_default();
    let b = &gpu;
    // One untimed call (pipelines compile, the pool fills), then REPEATS timed ones.
    let time = |what: &str, f: &dyn Fn()| {
        if !what.contains(only.as_str()) {
            return;
        }
        f();
        block_on(gpu.sync()).unwrap();
        let started = Instant::now();
        for _ in 0..REPEATS {
            f();
        }
        block_on(gpu.sync()).unwrap();
        let ms = started.elapsed().as_secs_f64() * 1000.0 / f64::from(REPEATS);
        println!("{what}: {ms:.2} ms");
    };
    let x = b.upload(&vec![0.5f32; 1024 * 384]);
    let w = b.upload(&vec![0.5f32; 384 * 384]);
    let ids = b.upload_indices(&vec![3u32; 1024]);
    let mm = |m, k, n, trans_a, trans_b| MatmulDims { m, k, n, trans_a, trans_b };
    let xs = b.upload(&vec![0.5f32; 1024 * 96]);
    let wq = b.upload(&vec![0.1f32; 96 * 96]);
    time("matmul 1024x96x96 (q proj)", &|| {
        drop(b.matmul(&xs, &wq, mm(1024, 96, 96, false, true), MatmulFused::none()).out)
    });
    let w1 = b.upload(&vec![0.5f32; 384 * 96]);
    let w2 = b.upload(&vec![0.5f32; 256 * 96]);
    time("matmul 1024x96x384 (fc_in)", &|| {
        drop(b.matmul(&xs, &w1, mm(1024, 96, 384, false, true), MatmulFused::none()).out)
    });
    time("matmul 96x1024x384 (dW)", &|| {
        drop(b.matmul(&xs, &x, mm(96, 1024, 384, true, false), MatmulFused::none()).out)
    });
    time("matmul 1024x96x256 (logits)", &|| {
        drop(b.matmul(&xs, &w2, mm(1024, 96, 256, false, true), MatmulFused::none()).out)
    });
    let dims = AttentionDims { batch: 16, seq: 64, heads: 3, head_dim: 32, dropout: None, cache: None };
    let att = b.attention(&xs, &xs, &xs, dims, AttentionKeep::Probs);
    time("attention", &|| drop(b.attention(&xs, &xs, &xs, dims, AttentionKeep::Probs)));
    time("attention_backward", &|| {
        drop(b.attention_backward(&xs, &xs, &xs, &xs, att.kept(), dims, AttentionKeep::Probs))
    });
    let g = b.upload(&vec![1.0f32; 96]);
    let ln = b.layer_norm(&xs, &g, &g, 1024, 96, 1e-5);
    time("layer_norm", &|| drop(b.layer_norm(&xs, &g, &g, 1024, 96, 1e-5)));
    time("layer_norm_backward", &|| drop(b.layer_norm_backward(&xs, &xs, &g, &ln, 1024, 96, None)));
    time("gelu 1024x384", &|| drop(b.gelu(&x, 1024 * 384)));
    time("sum_rows 1024x384", &|| drop(b.sum_rows(&x, 1024, 384)));
    time("embedding_backward 256x96", &|| drop(b.embedding_backward(&xs, &ids, 1024, 256, 96)));
    let logits = b.upload(&vec![0.5f32; 1024 * 256]);
    time("cross_entropy", &|| drop(b.cross_entropy(&logits, &ids, 1024, 256, false).loss));
    let one = b.upload(&[1.0]);
    time("cross_entropy_backward", &|| drop(b.cross_entropy_backward(&logits, &ids, None, &one, 1024, 256)));
    time("sum_squares 147456", &|| drop(b.sum_squares(&w, 147456)));
}
