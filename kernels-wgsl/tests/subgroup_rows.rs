//! The subgroup row reductions (issue 34; `reductions.rs`) against the workgroup-memory
//! ones: LayerNorm (forward and backward) and cross-entropy (loss and gradient) on the
//! `mixed` device, which reduces rows on subgroups where the adapter offers them (lavapipe:
//! subgroups of 8), and on the `f32` device, which never does. These ops have no matmul, so
//! the two devices compute the same f32 terms and differ only in the order they add them:
//! a tolerance of reordering alone, far tighter than the kit's mixed one (which the f16
//! products set). Row lengths below, at and above one subgroup, one LayerNorm row of 32
//! lanes and one 64-invocation block, and row counts that leave workgroups part-empty.

use tinygpt_kernels_wgsl::testing::{shared_backend, shared_backend_with};
use tinygpt_kernels_wgsl::{RowReductions, WgpuBackend};
use tinygpt_tensor::{block_on, read_vec, Backend, Precision};

/// Values in [-scale, scale), reproducible.
fn data(len: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// Summing n terms in two orders differs by at most 2(n − 1)·ε·Σ|t| (ε = 2⁻²⁴, to first
/// order). Outputs here are O(1) functions of sums of O(1) terms (means, variances,
/// softmax denominators), so allow 4·n·ε relative to max(1, |value|): a factor of two for
/// what exp, sqrt and the divisions pass on.
fn assert_reordered(what: &str, got: &[f32], want: &[f32], n: usize) {
    assert_eq!(got.len(), want.len(), "{what}");
    let tol = 4.0 * n as f32 * f32::EPSILON / 2.0;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g - w).abs();
        assert!(err <= tol * w.abs().max(1.0), "{what}[{i}]: {g} vs {w} (row length {n}, tol {tol})");
    }
}

fn backends() -> Option<(WgpuBackend, WgpuBackend)> {
    let f32 = shared_backend()?;
    let mixed = shared_backend_with(Precision::Mixed)?;
    assert_eq!(f32.row_reductions(), RowReductions::Workgroup, "f32 must keep its reductions");
    if cfg!(not(target_arch = "wasm32")) && mixed.adapter().subgroups && mixed.adapter().shader_f16 {
        assert_eq!(mixed.row_reductions(), RowReductions::Subgroup, "a silent fallback tests nothing");
    }
    Some((mixed, f32))
}

fn read(b: &WgpuBackend, s: &<WgpuBackend as Backend>::Storage) -> Vec<f32> {
    block_on(read_vec(b, s)).expect("readback")
}

#[test]
fn layer_norm_rows_match_the_workgroup_reductions() {
    let Some((mixed, f32)) = backends() else { return };
    for (rows, dim) in [(1, 5), (13, 8), (9, 32), (17, 48), (8, 100), (11, 768)] {
        let x = data(rows * dim, 1 + dim as u64, 3.0);
        let gamma = data(dim, 2, 1.5);
        let beta = data(dim, 3, 0.5);
        let dout = data(rows * dim, 4, 1.0);
        let run = |b: &WgpuBackend| {
            let (x, gamma, beta, dout) = (b.upload(&x), b.upload(&gamma), b.upload(&beta), b.upload(&dout));
            let saved = b.layer_norm(&x, &gamma, &beta, rows, dim, 1e-5);
            let grads = b.layer_norm_backward(&dout, &x, &gamma, &saved, rows, dim, None);
            [&saved.out, &saved.mean, &saved.rstd, &grads.dx, &grads.dgamma, &grads.dbeta].map(|s| read(b, s))
        };
        let (got, want) = (run(&mixed), run(&f32));
        for (what, (g, w)) in
            ["out", "mean", "rstd", "dx", "dgamma", "dbeta"].iter().zip(got.iter().zip(&want))
        {
            assert_reordered(&format!("{what} ({rows}x{dim})"), g, w, dim.max(rows));
        }
    }
}

#[test]
fn cross_entropy_rows_match_the_workgroup_reductions() {
    let Some((mixed, f32)) = backends() else { return };
    for (rows, vocab) in [(1, 3), (5, 8), (7, 64), (9, 65), (4, 300), (3, 2000)] {
        let logits = data(rows * vocab, 5 + vocab as u64, 4.0);
        let targets: Vec<u32> = (0..rows).map(|r| ((r * 7919) % vocab) as u32).collect();
        let run = |b: &WgpuBackend| {
            let (logits, targets) = (b.upload(&logits), b.upload_indices(&targets));
            let loss = b.cross_entropy(&logits, &targets, rows, vocab, false).loss;
            let dlogits = b.cross_entropy_backward(&logits, &targets, None, &b.upload(&[1.0]), rows, vocab);
            [read(b, &loss), read(b, &dlogits)]
        };
        let (got, want) = (run(&mixed), run(&f32));
        assert_reordered(&format!("loss ({rows}x{vocab})"), &got[0], &want[0], vocab);
        assert_reordered(&format!("dlogits ({rows}x{vocab})"), &got[1], &want[1], vocab);
    }
}
