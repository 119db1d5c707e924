//! f64 reference for the AdamW step documented on [`AdamWStep`].

use crate::AdamWStep;

/// Parameters and moments, held in f64 across steps.
pub(crate) struct AdamWState {
    pub param: Vec<f64>,
    pub m: Vec<f64>,
    pub v: Vec<f64>,
}

impl AdamWState {
    pub fn new(param: &[f32]) -> Self {
        let len = param.len();
        AdamWState { param: param.iter().map(|&p| p as f64).collect(), m: vec![0.0; len], v: vec![0.0; len] }
    }

    /// One step with gradient `grad` and squared global norm `grad_sumsq`.
    pub fn step(&mut self, grad: &[f32], grad_sumsq: f64, hp: &AdamWStep) {
        let clip = hp.max_grad_norm.map_or(1.0, |max| (max as f64 / (grad_sumsq.sqrt() + 1e-6)).min(1.0));
        let (b1, b2) = (hp.beta1 as f64, hp.beta2 as f64);
        let t = hp.step as i32;
        let (bc1, bc2) = (1.0 - b1.powi(t), 1.0 - b2.powi(t));
        let moments = self.m.iter_mut().zip(self.v.iter_mut());
        for ((p, (m, v)), &g) in self.param.iter_mut().zip(moments).zip(grad) {
            let g = g as f64 * clip;
            *m = b1 * *m + (1.0 - b1) * g;
            *v = b2 * *v + (1.0 - b2) * g * g;
            let update = (*m / bc1) / ((*v / bc2).sqrt() + hp.eps as f64);
            *p -= hp.lr as f64 * (update + hp.weight_decay as f64 * *p);
        }
    }
}
