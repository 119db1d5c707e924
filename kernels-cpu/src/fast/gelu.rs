//! GELU (tanh form) without libm's `tanhf`: `0.5 x (1 + tanh(u)) = x · σ(2u)`, with
//! `σ(z) = 1 / (1 + e^-z)` and `e^z` from a polynomial, all plain arithmetic the compiler
//! vectorises at the width of the `#[target_feature]` entry point that inlines it.
//!
//! gelu_forward:  x [len] -> out [len]
//! gelu_backward: x [len], dout [len] -> dx [len]
//!
//! The σ form also avoids the cancellation of `1 + tanh(u)` for negative inputs:
//! `gelu'(x) = s + 2 x s (1 - s) u'(x)`, `s = σ(2u)`, `u' = sqrt(2/π) (1 + 3·0.044715 x²)`.
//! `exp` is accurate to about 2e-7 relative, well inside the kit's TRANSCENDENTAL tolerance.

use crate::fast::math::exp;
use crate::fast::simd::Simd;

/// `sqrt(2/π)`: `u(x) = A (x + 0.044715 x³) = x (A + B x²)`.
const A: f32 = 0.797_884_6;
/// `sqrt(2/π) · 0.044715`.
const B: f32 = 0.035_677_408;

/// `e^{-2u(x)}`, so `σ(2u) = 1 / (1 + e^{-2u})`: `-2u = x (-2A - 2B x²)`, one multiply-add.
#[inline(always)]
fn exp_minus_2u<S: Simd>(x: f32) -> f32 {
    exp::<S>(x * S::fma(x * x, -2.0 * B, -2.0 * A))
}

/// `x · σ(2u)` as one division `x / (1 + e^{-2u})` (the division is this loop's slowest
/// instruction; a reciprocal and a multiply would be two).
#[inline(always)]
pub(crate) fn forward<S: Simd>(out: &mut [f32], x: &[f32]) {
    for (o, &x) in out.iter_mut().zip(x) {
        *o = x / (1.0 + exp_minus_2u::<S>(x));
    }
}

/// `g · s (1 + 2x (1 - s) u')`, `u' = A + 3B x²`: the header's `s + 2 x s (1 - s) u'` with
/// `s` factored out, two multiply-adds.
#[inline(always)]
pub(crate) fn backward<S: Simd>(dx: &mut [f32], x: &[f32], dout: &[f32]) {
    for ((d, &x), &g) in dx.iter_mut().zip(x).zip(dout) {
        let s = 1.0 / (1.0 + exp_minus_2u::<S>(x));
        let du = S::fma(x * x, 3.0 * B, A);
        *d = g * s * S::fma(2.0 * x * (1.0 - s), du, 1.0);
    }
}
