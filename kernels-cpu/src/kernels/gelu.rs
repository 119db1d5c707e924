//! GELU, tanh approximation (as in GPT-2).
//!
//! gelu_forward:  x [len] -> out [len]
//! gelu_backward: x [len], dout [len] -> dx [len]
//!
//! gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/π) (x + 0.044715 x³)
//! gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh²(u)) sqrt(2/π) (1 + 3·0.044715 x²)

use crate::kernels::elementwise::ELEMENTWISE_CHUNK;
use crate::parallel::Parallel;

const SQRT_2_OVER_PI: f32 = 0.797_884_6;
const CUBIC: f32 = 0.044_715;

pub(crate) fn gelu_forward(par: &Parallel, out: &mut [f32], x: &[f32]) {
    par.chunks_mut(out, ELEMENTWISE_CHUNK, |i, out| {
        let x = &x[i * ELEMENTWISE_CHUNK..][..out.len()];
        for (o, &x) in out.iter_mut().zip(x) {
            let u = SQRT_2_OVER_PI * (x + CUBIC * x * x * x);
            *o = 0.5 * x * (1.0 + u.tanh());
        }
    });
}

pub(crate) fn gelu_backward(par: &Parallel, dx: &mut [f32], x: &[f32], dout: &[f32]) {
    par.chunks_mut(dx, ELEMENTWISE_CHUNK, |i, dx| {
        let start = i * ELEMENTWISE_CHUNK;
        let (x, dout) = (&x[start..start + dx.len()], &dout[start..start + dx.len()]);
        for ((d, &x), &g) in dx.iter_mut().zip(x).zip(dout) {
            let t = (SQRT_2_OVER_PI * (x + CUBIC * x * x * x)).tanh();
            let du = SQRT_2_OVER_PI * (1.0 + 3.0 * CUBIC * x * x);
            *d = g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du);
        }
    });
}
