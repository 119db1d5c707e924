//! The host-side definition the mixed (f16-input) matmul kernels are held to, shared by
//! `mixed_matmul.rs` (shader-f16) and `coop_matmul.rs` (cooperative matrices): operands
//! rounded to the nearest f16, products summed in f64.

use tinygpt_kernels_wgsl::WgpuBackend;
use tinygpt_tensor::{block_on, read_vec, Backend, MatmulDims, Rng};

/// `x` rounded to the nearest f16 (ties to even), as an f32; past f16's range, infinity.
pub fn f16_round(x: f32) -> f32 {
    let a = x.abs();
    if x.is_nan() || a >= 65520.0 {
        return if x.is_nan() { x } else { f32::INFINITY.copysign(x) };
    }
    if a < 2f32.powi(-14) {
        // f16's subnormals: multiples of 2⁻²⁴.
        return (x * 2f32.powi(24)).round_ties_even() * 2f32.powi(-24);
    }
    let bits = x.to_bits();
    f32::from_bits((bits + 0x0FFF + ((bits >> 13) & 1)) & !0x1FFF)
}

/// `op(A)·op(B) (+ bias)` in f64 from f16-rounded operands.
pub fn emulated(a: &[f32], b: &[f32], bias: Option<&[f32]>, d: MatmulDims) -> Vec<f64> {
    let mut out = vec![0f64; d.m * d.n];
    for i in 0..d.m {
        for j in 0..d.n {
            let mut s = 0f64;
            for kk in 0..d.k {
                let av = if d.trans_a { a[kk * d.m + i] } else { a[i * d.k + kk] };
                let bv = if d.trans_b { b[j * d.k + kk] } else { b[kk * d.n + j] };
                s += f16_round(av) as f64 * f16_round(bv) as f64;
            }
            out[i * d.n + j] = s + bias.map_or(0.0, |bias| bias[j] as f64);
        }
    }
    out
}

/// `len` draws of a standard normal.
pub fn normal(rng: &mut Rng, len: usize) -> Vec<f32> {
    (0..len).map(|_| rng.normal() as f32).collect()
}

/// `s`'s values.
pub fn read(backend: &WgpuBackend, s: &<WgpuBackend as Backend>::Storage) -> Vec<f32> {
    block_on(read_vec(backend, s)).unwrap()
}
