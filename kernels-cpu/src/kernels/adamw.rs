//! AdamW with global-norm clipping and decoupled weight decay, in place.
//!
//! adamw: param, grad, m, v [len], grad_sumsq [1] -> param, m, v updated in place
//!
//! Exactly the update documented on `tinygpt_tensor::AdamWStep`. The per-step scalars
//! (clip factor, bias corrections `1 - beta^t`) are computed in f64 and rounded once;
//! the per-element update is f32.

use tinygpt_tensor::AdamWStep;

use crate::kernels::elementwise::ELEMENTWISE_CHUNK;
use crate::parallel::Parallel;

/// Added to the gradient norm before dividing, so an all-zero gradient does not divide by 0.
const CLIP_EPS: f64 = 1e-6;

/// `min(1, max_norm / (norm + 1e-6))`, or 1 without clipping.
fn clip_factor(grad_sumsq: f32, max_grad_norm: Option<f32>) -> f32 {
    match max_grad_norm {
        Some(max) => (max as f64 / ((grad_sumsq as f64).sqrt() + CLIP_EPS)).min(1.0) as f32,
        None => 1.0,
    }
}

pub(crate) struct AdamWBufs<'a> {
    pub param: &'a mut [f32],
    pub m: &'a mut [f32],
    pub v: &'a mut [f32],
}

pub(crate) fn adamw(par: &Parallel, bufs: AdamWBufs<'_>, grad: &[f32], grad_sumsq: f32, hp: &AdamWStep) {
    assert!(hp.step >= 1, "adamw: step is 1-based (bias correction), got 0");
    let clip = clip_factor(grad_sumsq, hp.max_grad_norm);
    let t = hp.step as i32;
    let bc1 = (1.0 - (hp.beta1 as f64).powi(t)) as f32;
    let bc2 = (1.0 - (hp.beta2 as f64).powi(t)) as f32;
    let AdamWStep { lr, beta1, beta2, eps, weight_decay, .. } = *hp;
    par.zip3_chunks_mut(bufs.param, bufs.m, bufs.v, ELEMENTWISE_CHUNK, |i, param, m, v| {
        let grad = &grad[i * ELEMENTWISE_CHUNK..][..param.len()];
        for (((p, m), v), &g) in param.iter_mut().zip(m).zip(v).zip(grad) {
            let g = g * clip;
            *m = beta1 * *m + (1.0 - beta1) * g;
            *v = beta2 * *v + (1.0 - beta2) * g * g;
            let update = (*m / bc1) / ((*v / bc2).sqrt() + eps);
            *p -= lr * (update + weight_decay * *p);
        }
    });
}
