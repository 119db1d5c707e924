//! The start-up self-test of the mixed matmul: before a device runs `mixed`, its
//! shader-f16 matmul must agree with its own f32 matmul on a few seeded products, on
//! every matmul path, or the backend falls back to f32 and says why.
//!
//! What it checks, for each of [`SHAPES`] (whole tiles, sizes off every tile, a long k,
//! each transpose) on the direct path, the tiled path and the tiled path split over k:
//! - every output within [`BOUND`] units of its f16 rounding scale of the f32 output:
//!   `|mixed - f32| <= BOUND · 2⁻¹¹ · √Σ_k (op(A)[i,k]·op(B)[k,j])²`. Rounding each input
//!   to nearest f16 moves a term by at most `2·2⁻¹¹·|a·b|`, in random directions, so on a
//!   correct device the worst of these ratios stays near 2 to 3 (2.27 on lavapipe); a
//!   rounding toward zero would about double it; a miscompiled variant lands far outside;
//! - that something was rounded at all: inputs drawn uniformly from [-1, 1) are almost
//!   never f16 values, so results identical to f32's bit for bit mean the adapter dropped
//!   the rounding (and `mixed` would be a slower f32). The NVIDIA H200's driver did, with
//!   WGSL's f32→f16→f32 conversions: hence the rounding on the bits (see `matmul.rs`);
//! - the row sums `matmul` fuses (a bias gradient, a reduction) equal f32's bit for
//!   bit: mixed narrows products only;
//! - no GPU error while compiling or running the variants (caught in error scopes, so a
//!   failed `enable f16;` never becomes the device's sticky error).

use tinygpt_tensor::{Backend, MatmulDims, MatmulFused, Rng};

use crate::pool::GpuBuffer;
use crate::{MatmulPath, WgpuBackend};

/// The largest accepted error, in units of `2⁻¹¹ · √Σ(a·b)²` (see the module doc).
pub(crate) const BOUND: f64 = 8.0;

/// `(m, k, n, trans_a, trans_b)`: whole 64² and 128² tiles (vec4 stages on the tiled path and
/// the cooperative-matrix kernel's tiles), sizes
/// off every tile with B transposed, a long k with A transposed, odd sizes both
/// transposed, and a single value.
const SHAPES: [(usize, usize, usize, bool, bool); 6] = [
    (64, 64, 64, false, false),
    (128, 64, 128, false, false),
    (33, 70, 9, false, true),
    (5, 300, 17, true, false),
    (129, 40, 65, true, true),
    (1, 1, 1, false, false),
];

/// Runs the checks of the module doc with `mixed` against `f32`, two handles on one
/// device. `Ok` carries the worst error (in [`BOUND`]'s units); `Err`, why the mixed
/// matmul must not be used, as the end of a sentence.
pub(crate) async fn check_mixed(f32: &WgpuBackend, mixed: &WgpuBackend) -> Result<f64, String> {
    let device = &f32.gpu.device;
    // (Thread-local scopes, popped in reverse order before the first await.)
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let memory = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let internal = device.push_error_scope(wgpu::ErrorFilter::Internal);
    let mut rng = Rng::new(0x5E1F_7E57);
    let mut cases = Vec::new();
    for (m, k, n, trans_a, trans_b) in SHAPES {
        let dims = MatmulDims { m, k, n, trans_a, trans_b };
        let a: Vec<f32> = (0..m * k).map(|_| (rng.uniform() * 2.0 - 1.0) as f32).collect();
        let b: Vec<f32> = (0..k * n).map(|_| (rng.uniform() * 2.0 - 1.0) as f32).collect();
        for (path, split) in
            [(MatmulPath::Direct, None), (MatmulPath::Tiled, None), (MatmulPath::Tiled, Some(3))]
        {
            let [f, x] = [f32, mixed].map(|be| be.with_matmul_path(path).with_matmul_split_k(split));
            let (fa, fb, xa, xb) = (f.upload(&a), f.upload(&b), x.upload(&a), x.upload(&b));
            let mut reads = vec![
                f.read_buffer(&f.matmul(&fa, &fb, dims, MatmulFused::none()).out),
                x.read_buffer(&x.matmul(&xa, &xb, dims, MatmulFused::none()).out),
            ];
            // Row sums: the tiled path's, of an A stored transposed.
            if trans_a && path == MatmulPath::Tiled {
                reads.push(f.read_buffer(&row_sums(&f, &fa, &fb, dims)));
                reads.push(x.read_buffer(&row_sums(&x, &xa, &xb, dims)));
            }
            let what = format!("{m}×{k}×{n}{}{} {path:?}", tag(trans_a, " Aᵀ"), tag(trans_b, " Bᵀ"));
            cases.push((what, dims, a.clone(), b.clone(), reads));
        }
    }
    // Every command is submitted by now (a read submits when it is made): the scopes hold
    // any error of compiling or running the variants.
    let (internal, memory, validation) = (internal.pop(), memory.pop(), validation.pop());
    if let Some(error) = [internal.await, memory.await, validation.await].into_iter().flatten().next() {
        // (On one line: the report is one.)
        let error = error.to_string().split_whitespace().collect::<Vec<_>>().join(" ");
        return Err(format!("a GPU error: {error}"));
    }
    let (mut worst, mut worst_at, mut rounded) = (0f64, String::new(), false);
    for (what, dims, a, b, reads) in cases {
        let mut values = Vec::new();
        for read in reads {
            values.push(read.await.map_err(|e| format!("{what}: {e}"))?);
        }
        let (f, x) = (&values[0], &values[1]);
        if let [_, _, f_sums, x_sums] = &values[..] {
            if f_sums.iter().zip(x_sums).any(|(p, q)| p.to_bits() != q.to_bits()) {
                return Err(format!("{what}: its row sums differ from f32's (they must not narrow)"));
            }
        }
        for (idx, (&fv, &xv)) in f.iter().zip(x).enumerate() {
            rounded |= fv.to_bits() != xv.to_bits();
            let scale = f16_scale(&a, &b, dims, idx / dims.n, idx % dims.n);
            let ratio = if scale > 0.0 {
                (xv as f64 - fv as f64).abs() / scale
            } else if xv == fv {
                0.0
            } else {
                f64::INFINITY
            };
            // (A NaN ratio counts as the worst.)
            if ratio.is_nan() || ratio > worst {
                (worst, worst_at) = (ratio, format!("{what} [{idx}]: {xv} against f32's {fv}"));
            }
        }
    }
    if worst.is_nan() || worst > BOUND {
        return Err(format!("worst error {worst:.1} units of 2⁻¹¹·√Σ(ab)², bound {BOUND}, at {worst_at}"));
    }
    if !rounded {
        return Err("its results equal f32's bit for bit: the adapter drops the f16 rounding".into());
    }
    Ok(worst)
}

fn tag(on: bool, text: &str) -> &str {
    if on {
        text
    } else {
        ""
    }
}

/// `2⁻¹¹ · √Σ_k (op(A)[i,k]·op(B)[k,j])²`: the scale of output (i, j)'s error when its
/// inputs are rounded to f16.
fn f16_scale(a: &[f32], b: &[f32], d: MatmulDims, i: usize, j: usize) -> f64 {
    let sq: f64 = (0..d.k)
        .map(|kk| {
            let av = if d.trans_a { a[kk * d.m + i] } else { a[i * d.k + kk] } as f64;
            let bv = if d.trans_b { b[j * d.k + kk] } else { b[kk * d.n + j] } as f64;
            (av * bv).powi(2)
        })
        .sum();
    sq.sqrt() * 2f64.powi(-11)
}

/// `A`'s column sums as the matmul that fuses them computes them.
fn row_sums(b: &WgpuBackend, a: &GpuBuffer<f32>, bb: &GpuBuffer<f32>, dims: MatmulDims) -> GpuBuffer<f32> {
    let fused = MatmulFused { sum_rows: true, ..MatmulFused::none() };
    b.matmul(a, bb, dims, fused).sums.expect("matmul: sums asked for")
}
