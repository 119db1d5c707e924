//! GELU (tanh form) forward and backward.

use crate::conformance::finite_diff::check_gradient;
use crate::conformance::harness::{assert_inputs_unchanged, normal, read, weighted_sum};
use crate::conformance::reference::layers;
use crate::conformance::Tolerance;
use crate::{Backend, Precision, Rng};

/// Inputs of scale 3 (both tails and the bend), with exact zero and large values up front.
fn inputs(rng: &mut Rng, len: usize) -> Vec<f32> {
    let mut x = normal(rng, len, 3.0);
    let special = [0.0, -10.0, 10.0, -0.5];
    let n = len.min(special.len());
    x[..n].copy_from_slice(&special[..n]);
    x
}

/// GELU forward and backward against the f64 reference.
pub async fn gelu<B: Backend>(backend: &B, _precision: Precision) {
    let mut rng = Rng::new(0x6E1);
    for len in [1, 7, 1000, 20_001] {
        let x = inputs(&mut rng, len);
        let ux = backend.upload(&x);
        let got = read(backend, &backend.gelu(&ux, len), "gelu").await;
        let what = format!("gelu [{len}]");
        Tolerance::TRANSCENDENTAL.assert_close(&what, &got, &layers::gelu(&x));
        assert_inputs_unchanged(backend, &what, &[(&ux, &x, "x")]).await;
    }
}

/// Against the f64 derivative, and against finite differences of the backend's `gelu`.
pub async fn gelu_backward<B: Backend>(backend: &B, _precision: Precision) {
    let mut rng = Rng::new(0x6E1B);
    for len in [1, 7, 50, 20_001] {
        let (x, dout) = (inputs(&mut rng, len), normal(&mut rng, len, 1.0));
        let (ux, udout) = (backend.upload(&x), backend.upload(&dout));
        let dx = read(backend, &backend.gelu_backward(&ux, &udout, len), "gelu_backward").await;
        let what = format!("gelu_backward [{len}]");
        Tolerance::TRANSCENDENTAL.assert_close(&what, &dx, &layers::gelu_backward(&x, &dout));
        assert_inputs_unchanged(backend, &what, &[(&ux, &x, "x"), (&udout, &dout, "dout")]).await;
        check_gradient(&what, &x, &dx, &mut rng, async |x| {
            weighted_sum(&read(backend, &backend.gelu(&backend.upload(x), len), "gelu").await, &dout)
        })
        .await;
    }
}
