//! AdamW over several steps against the f64 reference, with and without clipping and
//! weight decay; the update must land in the shared buffers, in place.

use crate::conformance::harness::{assert_unchanged, normal, read};
use crate::conformance::reference::adamw::AdamWState;
use crate::conformance::Tolerance;
use crate::{AdamWStep, Backend, Precision, Rng};

const STEPS: u32 = 5;

/// `(name, weight_decay, max_grad_norm)`. Gradients have norm ≈ sqrt(len), so a
/// threshold of 1 clips every step (len > 1) and 1e6 never does.
const CONFIGS: [(&str, f32, Option<f32>); 4] = [
    ("plain", 0.0, None),
    ("weight decay", 0.1, None),
    ("clipped + weight decay", 0.1, Some(1.0)),
    ("clip above the norm", 0.0, Some(1e6)),
];

/// `adamw_step` against the f64 reference, with and without clipping and weight decay.
pub async fn adamw<B: Backend>(backend: &B, _precision: Precision) {
    let mut rng = Rng::new(0xADA);
    for len in [1, 37, 20_001] {
        for (name, weight_decay, max_grad_norm) in CONFIGS {
            let init = normal(&mut rng, len, 1.0);
            let (param, m, v) = (backend.upload(&init), backend.zeros(len), backend.zeros(len));
            let alias = param.clone();
            let mut reference = AdamWState::new(&init);
            for step in 1..=STEPS {
                let hp = AdamWStep {
                    lr: 1e-2,
                    beta1: 0.9,
                    beta2: 0.95,
                    eps: 1e-8,
                    weight_decay,
                    step,
                    max_grad_norm,
                };
                let grad = normal(&mut rng, len, 1.0);
                let sumsq = grad.iter().map(|&g| g as f64 * g as f64).sum::<f64>() as f32;
                let ugrad = backend.upload(&grad);
                backend.adamw(&param, &ugrad, &m, &v, &backend.upload(&[sumsq]), &hp, len);
                reference.step(&grad, sumsq as f64, &hp);

                let what = format!("adamw [{len}] {name}, step {step}");
                Tolerance::OPTIMIZER.assert_close(
                    &format!("{what} param"),
                    &read(backend, &param, "param").await,
                    &reference.param,
                );
                Tolerance::OPTIMIZER.assert_close(
                    &format!("{what} m"),
                    &read(backend, &m, "m").await,
                    &reference.m,
                );
                Tolerance::OPTIMIZER.assert_close(
                    &format!("{what} v"),
                    &read(backend, &v, "v").await,
                    &reference.v,
                );
                Tolerance::OPTIMIZER.assert_close(
                    &format!("{what} via a cloned handle"),
                    &read(backend, &alias, "param").await,
                    &reference.param,
                );
                assert_unchanged(backend, &ugrad, &grad, "adamw grad").await;
            }
        }
    }
}
