//! `matmul_gelu` and `matmul_gelu_backward`: a product fused with the GELU after it (or
//! with GELU's derivative, on the way back), against the f64 reference of the two ops.

use crate::conformance::finite_diff::check_gradient;
use crate::conformance::harness::{assert_inputs_unchanged, normal, read, weighted_sum};
use crate::conformance::reference::{dense, layers};
use crate::conformance::Tolerance;
use crate::{Backend, MatmulDims, Rng};

/// `(m, k, n)`: one value, sizes off multiples of 4 and 8, a few rows, a long k, and a
/// block of rows as wide as a small model's MLP.
const SHAPES: [(usize, usize, usize); 7] =
    [(1, 1, 1), (5, 9, 17), (13, 7, 33), (2, 129, 70), (4, 300, 33), (64, 32, 128), (33, 70, 9)];

fn layouts() -> impl Iterator<Item = (bool, bool)> {
    [(false, false), (false, true), (true, false), (true, true)].into_iter()
}

/// f64 values as f32 (the references feed f32 inputs to the next reference).
fn narrow(x: &[f64]) -> Vec<f32> {
    x.iter().map(|&v| v as f32).collect()
}

/// Both outputs, every layout, with and without bias: `pre` against the f64 product and
/// `post` against the f64 GELU of it.
pub async fn matmul_gelu<B: Backend>(backend: &B) {
    let mut rng = Rng::new(0x6E1A);
    for (m, k, n) in SHAPES {
        for (trans_a, trans_b) in layouts() {
            let dims = MatmulDims { m, k, n, trans_a, trans_b };
            let (a, b, bias) =
                (normal(&mut rng, m * k, 0.5), normal(&mut rng, k * n, 0.5), normal(&mut rng, n, 1.0));
            let (ua, ub, ubias) = (backend.upload(&a), backend.upload(&b), backend.upload(&bias));
            for with_bias in [false, true] {
                let bias_here = with_bias.then_some(&bias[..]);
                let (pre, post) = backend.matmul_gelu(&ua, &ub, with_bias.then_some(&ubias), dims);
                let what = format!("matmul_gelu {dims:?} bias {with_bias}");
                let want_pre = dense::matmul(&a, &b, bias_here, dims);
                let got = read(backend, &pre, "matmul_gelu pre").await;
                Tolerance::ACCUMULATED.assert_close(&format!("{what} pre"), &got, &want_pre);
                let got = read(backend, &post, "matmul_gelu post").await;
                let want_post = layers::gelu(&narrow(&want_pre));
                Tolerance::ACCUMULATED.assert_close(&format!("{what} post"), &got, &want_post);
            }
            let inputs = [(&ua, &a[..], "a"), (&ub, &b[..], "b"), (&ubias, &bias[..], "bias")];
            assert_inputs_unchanged(backend, "matmul_gelu", &inputs).await;
        }
    }
}

/// Every layout against the f64 reference; then, for a linear's layout (`dY · W`, both
/// plain), against finite differences of `L(x) = Σ dY ⊙ (gelu(x) · Wᵀ)` through the
/// backend's own `gelu` and `matmul`.
pub async fn matmul_gelu_backward<B: Backend>(backend: &B) {
    let mut rng = Rng::new(0x6E1C);
    for (m, k, n) in SHAPES {
        for (trans_a, trans_b) in layouts() {
            let dims = MatmulDims { m, k, n, trans_a, trans_b };
            let (a, b, x) =
                (normal(&mut rng, m * k, 0.5), normal(&mut rng, k * n, 0.5), normal(&mut rng, m * n, 2.0));
            let (ua, ub, ux) = (backend.upload(&a), backend.upload(&b), backend.upload(&x));
            let dx =
                read(backend, &backend.matmul_gelu_backward(&ua, &ub, &ux, dims), "matmul_gelu_backward")
                    .await;
            let what = format!("matmul_gelu_backward {dims:?}");
            let dout = narrow(&dense::matmul(&a, &b, None, dims));
            Tolerance::ACCUMULATED.assert_close(&what, &dx, &layers::gelu_backward(&x, &dout));
            assert_inputs_unchanged(backend, &what, &[(&ua, &a, "a"), (&ub, &b, "b"), (&ux, &x, "x")]).await;
            if trans_a || trans_b {
                continue;
            }
            // a = dY [m, k], b = W [k, n]: the forward is y = gelu(x) · Wᵀ, [m, k].
            let forward = MatmulDims { m, k: n, n: k, trans_a: false, trans_b: true };
            check_gradient(&what, &x, &dx, &mut rng, async |x| {
                let act = backend.gelu(&backend.upload(x), m * n);
                let y = read(backend, &backend.matmul(&act, &ub, None, forward), "matmul").await;
                weighted_sum(&y, &a)
            })
            .await;
        }
    }
}
