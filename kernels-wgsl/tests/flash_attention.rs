//! Flash attention (the training pair on mixed precision, `src/flash_attention.rs`) against
//! the CPU's scalar reference (`CpuBackend::attention` and `attention_backward`, f32 with
//! the probabilities kept) at the model's sizes, which the kit's small cases do not reach:
//! the recipe's 64-wide heads over 256 positions, rows that end inside a 64-row block,
//! several heads, odd head widths, the recipe's dropout on the probabilities (the same mask
//! bits: a different mask would move the outputs by far more than the tolerance).
//!
//! Tolerance: [`Tolerance::products`] for mixed over `head_dim + seq`, the kit's. Every
//! product's inputs are rounded to f16 (relative error up to `u = 2⁻¹¹`) and summed in f32:
//! a score moves by about `√hd·u` (values of order 1), which moves the probabilities by as
//! much relative, and the weighted sums over `seq` positions add `√seq·u` more, so the
//! errors of `out`, `dq`, `dk`, `dv` (values of order 1 to 10 here) stay within
//! `4·√(hd + seq)·u` absolute plus `2u` relative on top of f32's `1e-4`. The measured worst
//! is printed in units of `u·√(hd + seq)` (`--nocapture`).
//!
//! Each test returns early, passing, only when there is no adapter and
//! `TINYGPT_ALLOW_NO_GPU=1`.

use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_kernels_wgsl::testing::shared_backend_with;
use tinygpt_kernels_wgsl::{FlashAttention, MatmulKernels, WgpuBackend};
use tinygpt_tensor::conformance::Tolerance;
use tinygpt_tensor::{
    block_on, read_vec, AttentionDims, AttentionKeep, Backend, DropoutMask, Precision, Rng,
};

fn mixed() -> Option<WgpuBackend> {
    let backend = shared_backend_with(Precision::Mixed)?;
    // Flash attention runs on the mixed path only (shader-f16 or cooperative matrices); a
    // fallback to f32 would test nothing.
    assert_ne!(backend.matmul_precision().kernels, MatmulKernels::F32, "{}", backend.matmul_precision());
    // By default flash attention runs only where the unfused pair cannot; here, always.
    Some(backend.with_flash_attention(FlashAttention::Always))
}

fn normal(rng: &mut Rng, len: usize) -> Vec<f32> {
    (0..len).map(|_| rng.normal() as f32).collect()
}

fn read(gpu: &WgpuBackend, s: &<WgpuBackend as Backend>::Storage) -> Vec<f32> {
    block_on(read_vec(gpu, s)).expect("wgpu readback")
}

/// `out`, `dq`, `dk`, `dv` of the GPU's training pair and of the CPU reference.
fn both(gpu: &WgpuBackend, dims: AttentionDims, seed: u64) -> ([Vec<f32>; 4], [Vec<f32>; 4]) {
    let cpu = CpuBackend::new(2);
    let mut rng = Rng::new(seed);
    let len = dims.batch * dims.seq * dims.channels();
    let [q, k, v, d] = [(); 4].map(|_| normal(&mut rng, len));
    let (gq, gk, gv, gd) = (gpu.upload(&q), gpu.upload(&k), gpu.upload(&v), gpu.upload(&d));
    let saved = gpu.attention(&gq, &gk, &gv, dims, AttentionKeep::Backward);
    let flash_len = dims.batch * dims.heads * dims.seq + len;
    assert_eq!(saved.kept().len(), flash_len, "{dims:?}: the training pair did not run flash attention");
    let g = gpu.attention_backward(&gd, &gq, &gk, &gv, saved.kept(), dims, AttentionKeep::Backward);
    let got = [&saved.out, &g.dq, &g.dk, &g.dv].map(|s| read(gpu, s));
    let (cq, ck, cv) = (cpu.upload(&q), cpu.upload(&k), cpu.upload(&v));
    let ca = cpu.attention(&cq, &ck, &cv, dims, AttentionKeep::Probs);
    let cg = cpu.attention_backward(&cpu.upload(&d), &cq, &ck, &cv, ca.kept(), dims, AttentionKeep::Probs);
    let want = [&ca.out, &cg.dq, &cg.dk, &cg.dv].map(|s| block_on(read_vec(&cpu, s)).expect("cpu readback"));
    (got, want)
}

#[test]
fn flash_attention_matches_the_cpu_reference() {
    let Some(gpu) = mixed() else { return };
    let mask = Some(DropoutMask::new(0.2, 1337, 5, 3, 0));
    let cases = [
        AttentionDims { batch: 2, seq: 256, heads: 3, head_dim: 64, dropout: mask, cache: None },
        AttentionDims { batch: 1, seq: 300, heads: 2, head_dim: 16, dropout: mask, cache: None },
        AttentionDims { batch: 2, seq: 100, heads: 4, head_dim: 32, dropout: None, cache: None },
        AttentionDims { batch: 3, seq: 70, heads: 3, head_dim: 7, dropout: None, cache: None },
        AttentionDims { batch: 1, seq: 129, heads: 1, head_dim: 128, dropout: mask, cache: None },
    ];
    for (i, dims) in cases.into_iter().enumerate() {
        let (got, want) = both(&gpu, dims, 40 + i as u64);
        let depth = dims.head_dim + dims.seq;
        let tol = Tolerance::products(Precision::Mixed, depth);
        let unit = Tolerance::F16_ROUNDOFF * (depth as f64).sqrt();
        for ((name, got), want) in ["out", "dq", "dk", "dv"].iter().zip(&got).zip(&want) {
            let want: Vec<f64> = want.iter().map(|&w| w as f64).collect();
            tol.assert_close(&format!("flash attention {name} {dims:?}"), got, &want);
            let worst = got.iter().zip(&want).map(|(&g, &w)| (g as f64 - w).abs()).fold(0.0, f64::max);
            println!("{name} {dims:?}: worst error {:.2} units of 2⁻¹¹·√(hd + T)", worst / unit);
        }
    }
}

#[test]
fn flash_attention_is_deterministic() {
    let Some(gpu) = mixed() else { return };
    let dims = AttentionDims {
        batch: 2,
        seq: 130,
        heads: 2,
        head_dim: 24,
        dropout: Some(DropoutMask::new(0.2, 9, 1, 2, 0)),
        cache: None,
    };
    assert!(both(&gpu, dims, 7).0 == both(&gpu, dims, 7).0, "a second run gave other bits");
}

/// The flash pair never makes a `[B, H, T, T]` buffer: with the largest storage binding
/// forced below the probabilities' size, any buffer that large is refused with a device
/// error (`WgpuBackend::alloc`), which the reads would report. The unfused pair allocates
/// exactly that buffer, so this shape could not run it.
#[test]
fn flash_attention_allocates_no_square_buffer() {
    let Some(gpu) = mixed() else { return };
    let dims = AttentionDims { batch: 1, seq: 512, heads: 4, head_dim: 16, dropout: None, cache: None };
    let limit = 1 << 19;
    let probs_bytes = (dims.batch * dims.heads * dims.seq * dims.seq * 4) as u64;
    assert!(probs_bytes >= 8 * limit, "the probabilities ({probs_bytes} bytes) must exceed the limit");
    let small = gpu.with_max_binding_for_tests(limit);
    let (got, want) = both(&small, dims, 3);
    let tol = Tolerance::products(Precision::Mixed, dims.head_dim + dims.seq);
    for ((name, got), want) in ["out", "dq", "dk", "dv"].iter().zip(&got).zip(&want) {
        let want: Vec<f64> = want.iter().map(|&w| w as f64).collect();
        tol.assert_close(&format!("flash attention {name} {dims:?}"), got, &want);
    }
}

/// `f32` keeps the unfused pair (its saved state is the probabilities).
#[test]
fn f32_keeps_the_probabilities() {
    let Some(gpu) = shared_backend_with(Precision::F32) else { return };
    let dims = AttentionDims { batch: 1, seq: 9, heads: 2, head_dim: 8, dropout: None, cache: None };
    let x = gpu.upload(&vec![0.5; dims.seq * dims.channels()]);
    let saved = gpu.attention(&x, &x, &x, dims, AttentionKeep::Backward);
    assert_eq!(saved.kept().len(), dims.heads * dims.seq * dims.seq);
}
