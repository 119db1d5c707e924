//! LayerNorm forward (output and saved statistics) and backward.

use crate::conformance::finite_diff::check_gradient;
use crate::conformance::harness::{assert_inputs_unchanged, assert_same_bits, normal, read, weighted_sum};
use crate::conformance::reference::layers;
use crate::conformance::Tolerance;
use crate::{Backend, Precision, Rng};

const EPS: f32 = 1e-5;
/// `(rows, dim)`: 1×1 (zero variance: the output is `beta`), a single row, odd widths, a
/// width past 128.
const CASES: [(usize, usize); 6] = [(1, 1), (1, 3), (4, 7), (3, 64), (2, 130), (6, 33)];

/// `x` (scale 2, shifted so the mean matters), `gamma` near 1 and small `beta`.
fn inputs(rng: &mut Rng, rows: usize, dim: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let x = normal(rng, rows * dim, 2.0).into_iter().map(|v| v + 0.5).collect();
    let gamma = normal(rng, dim, 0.2).into_iter().map(|v| v + 1.0).collect();
    (x, gamma, normal(rng, dim, 0.1))
}

/// LayerNorm forward and backward against the f64 reference.
pub async fn layer_norm<B: Backend>(backend: &B, _precision: Precision) {
    let mut rng = Rng::new(0x1A7);
    for (rows, dim) in CASES {
        let (x, gamma, beta) = inputs(&mut rng, rows, dim);
        let (ux, ug, ub) = (backend.upload(&x), backend.upload(&gamma), backend.upload(&beta));
        let saved = backend.layer_norm(&ux, &ug, &ub, rows, dim, EPS);
        let (out, mean, rstd) = layers::layer_norm(&x, &gamma, &beta, dim, EPS);
        let what = format!("layer_norm [{rows}, {dim}]");
        Tolerance::ACCUMULATED.assert_close(
            &format!("{what} out"),
            &read(backend, &saved.out, "out").await,
            &out,
        );
        Tolerance::ACCUMULATED.assert_close(
            &format!("{what} mean"),
            &read(backend, &saved.mean, "mean").await,
            &mean,
        );
        Tolerance::ACCUMULATED.assert_close(
            &format!("{what} rstd"),
            &read(backend, &saved.rstd, "rstd").await,
            &rstd,
        );
        assert_inputs_unchanged(
            backend,
            &what,
            &[(&ux, &x, "x"), (&ug, &gamma, "gamma"), (&ub, &beta, "beta")],
        )
        .await;
    }
}

/// `dx`, `dgamma`, `dbeta` against the f64 reference and against finite differences of
/// the backend's `layer_norm` output.
pub async fn layer_norm_backward<B: Backend>(backend: &B, _precision: Precision) {
    let mut rng = Rng::new(0x1A7B);
    for (rows, dim) in CASES {
        let (x, gamma, beta) = inputs(&mut rng, rows, dim);
        let dout = normal(&mut rng, rows * dim, 1.0);
        let (ux, ug, ub) = (backend.upload(&x), backend.upload(&gamma), backend.upload(&beta));
        let saved = backend.layer_norm(&ux, &ug, &ub, rows, dim, EPS);
        let udout = backend.upload(&dout);
        let g = backend.layer_norm_backward(&udout, &ux, &ug, &saved, rows, dim, None);
        let (dx, dgamma, dbeta) = (
            read(backend, &g.dx, "dx").await,
            read(backend, &g.dgamma, "dgamma").await,
            read(backend, &g.dbeta, "dbeta").await,
        );
        let what = format!("layer_norm_backward [{rows}, {dim}]");

        let (rdx, rdgamma, rdbeta) = layers::layer_norm_backward(&dout, &x, &gamma, dim, EPS);
        Tolerance::ACCUMULATED.assert_close(&format!("{what} dx"), &dx, &rdx);
        Tolerance::ACCUMULATED.assert_close(&format!("{what} dgamma"), &dgamma, &rdgamma);
        Tolerance::ACCUMULATED.assert_close(&format!("{what} dbeta"), &dbeta, &rdbeta);
        let inputs = [(&udout, &dout[..], "dout"), (&ux, &x[..], "x"), (&ug, &gamma[..], "gamma")];
        assert_inputs_unchanged(backend, &what, &inputs).await;

        let loss = async |x: &B::Storage, g: &B::Storage, b: &B::Storage| {
            weighted_sum(
                &read(backend, &backend.layer_norm(x, g, b, rows, dim, EPS).out, "layer_norm").await,
                &dout,
            )
        };
        check_gradient(&format!("{what} dx"), &x, &dx, &mut rng, async |v| {
            loss(&backend.upload(v), &ug, &ub).await
        })
        .await;
        check_gradient(&format!("{what} dgamma"), &gamma, &dgamma, &mut rng, async |v| {
            loss(&ux, &backend.upload(v), &ub).await
        })
        .await;
        check_gradient(&format!("{what} dbeta"), &beta, &dbeta, &mut rng, async |v| {
            loss(&ux, &ug, &backend.upload(v)).await
        })
        .await;
    }
}

/// `layer_norm_backward_onto`: `dx` added onto `onto`, what `layer_norm_backward` then
/// `add` give on the same backend to a few roundings ([`Tolerance::REROUNDED`]; `dgamma`
/// and `dbeta` unchanged, bit for bit), and close to the f64 reference.
pub async fn layer_norm_backward_onto<B: Backend>(backend: &B, _precision: Precision) {
    let mut rng = Rng::new(0x1A70);
    for (rows, dim) in CASES {
        let (x, gamma, beta) = inputs(&mut rng, rows, dim);
        let (dout, onto) = (normal(&mut rng, rows * dim, 1.0), normal(&mut rng, rows * dim, 1.0));
        let (ux, ug, ub) = (backend.upload(&x), backend.upload(&gamma), backend.upload(&beta));
        let (udout, uonto) = (backend.upload(&dout), backend.upload(&onto));
        let saved = backend.layer_norm(&ux, &ug, &ub, rows, dim, EPS);
        let what = format!("layer_norm_backward_onto [{rows}, {dim}]");
        let fused = backend.layer_norm_backward(&udout, &ux, &ug, &saved, rows, dim, Some(&uonto));
        let plain = backend.layer_norm_backward(&udout, &ux, &ug, &saved, rows, dim, None);
        let dx = read(backend, &fused.dx, "dx").await;
        let unfused = read(backend, &backend.add(&uonto, &plain.dx, rows * dim), "dx then add").await;
        // A GPU compiler may contract dx's multiply-adds differently in the fused and the
        // plain pipeline (WGSL allows it; NVIDIA's Vulkan driver does, on H100 and H200: a
        // few units in the last place, e.g. 0.1297639 against 0.12976396), so dx must match
        // its composition to a few roundings, not to the bit; lavapipe and the CPU kernels
        // give the same bits. dgamma and dbeta, plain sums, stay bit for bit.
        let unfused: Vec<f64> = unfused.iter().map(|&v| v as f64).collect();
        Tolerance::REROUNDED.assert_close(&format!("{what} dx against dx then add"), &dx, &unfused);
        for (got, want, name) in
            [(&fused.dgamma, &plain.dgamma, "dgamma"), (&fused.dbeta, &plain.dbeta, "dbeta")]
        {
            let (got, want) = (read(backend, got, name).await, read(backend, want, name).await);
            assert_same_bits(&format!("{what} {name}"), &got, &want);
        }
        let (rdx, _, _) = layers::layer_norm_backward(&dout, &x, &gamma, dim, EPS);
        let want: Vec<f64> = onto.iter().zip(&rdx).map(|(&o, d)| o as f64 + d).collect();
        Tolerance::ACCUMULATED.assert_close(&format!("{what} dx"), &dx, &want);
        let inputs = [(&uonto, &onto[..], "onto"), (&udout, &dout[..], "dout"), (&ux, &x[..], "x")];
        assert_inputs_unchanged(backend, &what, &inputs).await;
    }
}
