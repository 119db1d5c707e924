//! The numerics check `init {backend: "auto" | "webgpu"}` runs before training on a GPU:
//! a few ops on the candidate backend, compared with the scalar CPU reference. A browser's
//! WebGPU stack can be present and still wrong (a driver bug, a software adapter cutting
//! corners), and a wrong backend trains into garbage without any error; a failed check
//! makes the worker train on WebAssembly instead and say why in one line.
//!
//! What runs (shapes deliberately not multiples of any tile or workgroup size, so edge
//! handling is exercised): one matmul with a transposed operand and a bias, `[33, 70] ·
//! [45, 70]ᵀ + b`, then a short forward and backward sequence `layer_norm → gelu → matmul
//! → cross_entropy` and `cross_entropy_backward`, every result read back and compared.
//!
//! Tolerance: [`SELF_TEST_TOLERANCE`] of each output's scale (its largest magnitude, at
//! least 1): the conformance kit's 1e-4 loosened 10× because this is a go/no-go check
//! for a whole backend (different summation orders in 70-term dot products and in row
//! reductions), not a per-kernel parity test; a broken kernel is off by far more.

use tinygpt_kernels_cpu::{CpuBackend, Kernels};
use tinygpt_tensor::{read_vec, Backend, MatmulDims, MatmulFused, TensorError};

/// Largest allowed `|candidate - reference|` as a fraction of the reference's scale.
pub const SELF_TEST_TOLERANCE: f32 = 1e-3;

/// Why a backend failed the check, in one line (for the capability panel's note).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SelfTestError {
    #[error("{op} differs from the CPU reference by {error:e} (allowed {allowed:e})")]
    Mismatch { op: &'static str, error: f32, allowed: f32 },
    #[error("{op} returned {got} values instead of {expected}")]
    WrongLength { op: &'static str, got: usize, expected: usize },
    #[error("the device failed during the check: {0}")]
    Device(#[from] TensorError),
}

/// Runs the check on `candidate`; `Ok` when every output matches the CPU reference.
pub async fn self_test<B: Backend>(candidate: &B) -> Result<(), SelfTestError> {
    // The scalar kernels, explicitly: `CpuBackend::new` picks the fast variant.
    let reference = CpuBackend::new(1).with_kernels(Kernels::Reference);
    let expected = run_ops(&reference).await?;
    let got = run_ops(candidate).await?;
    for ((op, want), (_, have)) in expected.iter().zip(&got) {
        compare(op, want, have)?;
    }
    Ok(())
}

/// Compares one output within [`SELF_TEST_TOLERANCE`] of its scale.
fn compare(op: &'static str, want: &[f32], have: &[f32]) -> Result<(), SelfTestError> {
    if want.len() != have.len() {
        return Err(SelfTestError::WrongLength { op, got: have.len(), expected: want.len() });
    }
    let scale = want.iter().fold(1.0f32, |m, x| m.max(x.abs()));
    let allowed = SELF_TEST_TOLERANCE * scale;
    // NaN on either side counts as a mismatch (`max` would skip it).
    let error = want.iter().zip(have).fold(0.0f32, |m, (a, b)| {
        let d = (a - b).abs();
        if d.is_nan() {
            f32::INFINITY
        } else {
            m.max(d)
        }
    });
    if error > allowed {
        return Err(SelfTestError::Mismatch { op, error, allowed });
    }
    Ok(())
}

/// The check's ops on `b`, every output read back, in a fixed order.
async fn run_ops<B: Backend>(b: &B) -> Result<Vec<(&'static str, Vec<f32>)>, SelfTestError> {
    const ROWS: usize = 33;
    const DIM: usize = 70;
    const OUT: usize = 45;
    let x = b.upload(&pseudo_random(ROWS * DIM, 1));
    let w = b.upload(&pseudo_random(OUT * DIM, 2));
    let bias = b.upload(&pseudo_random(OUT, 3));
    let gamma = b.upload(&pseudo_random(DIM, 4).iter().map(|g| 1.0 + 0.5 * g).collect::<Vec<_>>());
    let beta = b.upload(&pseudo_random(DIM, 5));
    let targets: Vec<u32> = (0..ROWS as u32).map(|r| (r * 7 + 3) % OUT as u32).collect();
    let targets = b.upload_indices(&targets);
    let dims = MatmulDims { m: ROWS, k: DIM, n: OUT, trans_a: false, trans_b: true };

    let matmul = b.matmul(&x, &w, dims, MatmulFused::bias(Some(&bias))).out;
    let normed = b.layer_norm(&x, &gamma, &beta, ROWS, DIM, 1e-5);
    let activated = b.gelu(&normed.out, ROWS * DIM);
    let logits = b.matmul(&activated, &w, dims, MatmulFused::bias(Some(&bias))).out;
    let loss = b.cross_entropy(&logits, &targets, ROWS, OUT, false).loss;
    let dlogits = b.cross_entropy_backward(&logits, &targets, None, &b.upload(&[1.0]), ROWS, OUT);
    // `dlogits` is O(1/ROWS): scaled up so its comparison is not dominated by the floor of 1.
    let dlogits = b.scale(&dlogits, ROWS as f32, ROWS * OUT);
    b.flush().await?;
    let mut out = Vec::new();
    for (op, buffer) in [
        ("matmul", &matmul),
        ("layer_norm", &normed.out),
        ("gelu", &activated),
        ("cross_entropy", &loss),
        ("cross_entropy_backward", &dlogits),
    ] {
        out.push((op, read_vec(b, buffer).await?));
    }
    Ok(out)
}

/// `len` values in [-1, 1) from a fixed linear congruential sequence (same on every
/// platform, no dependency).
fn pseudo_random(len: usize, seed: u32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(12_345);
    (0..len)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CPU backend's fast kernels against the scalar ones (where this CPU has a fast
    /// variant; the reference against itself elsewhere, which checks only the plumbing).
    #[test]
    fn the_fast_cpu_kernels_pass_the_check() {
        let fast = CpuBackend::new(1).with_kernels(Kernels::Fast);
        eprintln!("checked: the {} CPU kernels against the reference", fast.variant());
        tinygpt_tensor::block_on(self_test(&fast)).unwrap();
    }

    #[test]
    fn a_wrong_output_is_reported_with_its_op_and_size() {
        let err = compare("gelu", &[1.0, 2.0], &[1.0, 2.1]).unwrap_err();
        assert!(err.to_string().starts_with("gelu differs from the CPU reference by"), "{err}");
        assert!(compare("gelu", &[1.0], &[f32::NAN]).is_err(), "NaN is a mismatch");
        assert!(matches!(compare("gelu", &[1.0], &[1.0, 1.0]), Err(SelfTestError::WrongLength { .. })));
        compare("gelu", &[100.0, 0.0], &[100.05, 0.05]).unwrap();
    }

    #[test]
    fn pseudo_random_values_lie_in_the_unit_interval() {
        let v = pseudo_random(1000, 9);
        assert!(v.iter().all(|x| (-1.0..1.0).contains(x)));
        assert!(v.iter().any(|x| *x < -0.5) && v.iter().any(|x| *x > 0.5));
    }
}
