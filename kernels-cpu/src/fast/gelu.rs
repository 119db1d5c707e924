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

const SQRT_2_OVER_PI: f32 = 0.797_884_6;
const CUBIC: f32 = 0.044_715;

/// `σ(2u(x))`.
#[inline(always)]
fn sigmoid_2u(x: f32) -> f32 {
    let u = SQRT_2_OVER_PI * (x + CUBIC * x * x * x);
    1.0 / (1.0 + exp(-2.0 * u))
}

#[inline(always)]
pub(crate) fn forward(out: &mut [f32], x: &[f32]) {
    for (o, &x) in out.iter_mut().zip(x) {
        *o = x * sigmoid_2u(x);
    }
}

#[inline(always)]
pub(crate) fn backward(dx: &mut [f32], x: &[f32], dout: &[f32]) {
    for ((d, &x), &g) in dx.iter_mut().zip(x).zip(dout) {
        let s = sigmoid_2u(x);
        let du = SQRT_2_OVER_PI * (1.0 + 3.0 * CUBIC * x * x);
        *d = g * (s + 2.0 * x * s * (1.0 - s) * du);
    }
}
