//! `matmul` in all four transpose layouts, and its gradients computed the way autograd
//! computes them: more `matmul`s with flipped transpose flags, plus `sum_rows` for the bias.

use crate::conformance::finite_diff::check_gradient;
use crate::conformance::harness::{
    assert_inputs_unchanged, assert_same_bits, assert_unchanged, normal, read, weighted_sum,
};
use crate::conformance::reference::dense;
use crate::conformance::Tolerance;
use crate::{Backend, MatmulDims, MatmulFused, Precision, Rng};

/// `(m, k, n)`: ones, sizes off multiples of 4 and 8, an exact 4x8 tile, a long k; then the
/// few-row shapes of decoding one token (or two) at a time, with odd k and n and a k past
/// 128 (vector lanes plus a tail), a few blocks of rows, and one row past the CPU's
/// few-row path (16 rows).
const SHAPES: [(usize, usize, usize); 15] = [
    (1, 1, 1),
    (1, 5, 3),
    (3, 1, 7),
    (4, 8, 8),
    (5, 9, 17),
    (13, 7, 33),
    (33, 70, 9),
    (8, 16, 24),
    (1, 37, 65),
    (2, 129, 70),
    (2, 7, 3),
    (3, 16, 5),
    (4, 300, 33),
    (9, 33, 17),
    (17, 19, 40),
];

fn layouts() -> impl Iterator<Item = (bool, bool)> {
    [(false, false), (false, true), (true, false), (true, true)].into_iter()
}

/// `matmul` (every transpose, with and without bias) against the f64 reference.
pub async fn matmul<B: Backend>(backend: &B, precision: Precision) {
    let mut rng = Rng::new(0x3A7);
    for (m, k, n) in SHAPES {
        for (trans_a, trans_b) in layouts() {
            let dims = MatmulDims { m, k, n, trans_a, trans_b };
            let (a, b, bias) =
                (normal(&mut rng, m * k, 1.0), normal(&mut rng, k * n, 1.0), normal(&mut rng, n, 1.0));
            let (ua, ub, ubias) = (backend.upload(&a), backend.upload(&b), backend.upload(&bias));
            let tol = Tolerance::products(precision, k);
            let got = read(backend, &backend.matmul(&ua, &ub, dims, MatmulFused::none()).out, "matmul").await;
            tol.assert_close(&format!("matmul {dims:?}"), &got, &dense::matmul(&a, &b, None, dims));
            let got =
                read(backend, &backend.matmul(&ua, &ub, dims, MatmulFused::bias(Some(&ubias))).out, "matmul")
                    .await;
            let want = dense::matmul(&a, &b, Some(&bias), dims);
            tol.assert_close(&format!("matmul {dims:?} with bias"), &got, &want);
            assert_unchanged(backend, &ua, &a, "matmul a").await;
            assert_unchanged(backend, &ub, &b, "matmul b").await;
        }
    }
}

/// `matmul_sum_rows` (A stored transposed, B either way) against the f64 reference: the
/// product and A's column sums. The sums are a bias gradient, a reduction, not a product:
/// f32's tolerance in every precision.
pub async fn matmul_sum_rows<B: Backend>(backend: &B, precision: Precision) {
    let mut rng = Rng::new(0x3A75);
    for (m, k, n) in SHAPES {
        for trans_b in [false, true] {
            let dims = MatmulDims { m, k, n, trans_a: true, trans_b };
            let (a, b) = (normal(&mut rng, m * k, 1.0), normal(&mut rng, k * n, 1.0));
            let (ua, ub) = (backend.upload(&a), backend.upload(&b));
            let (out, sums) = {
                let o = backend.matmul(&ua, &ub, dims, MatmulFused { sum_rows: true, ..MatmulFused::none() });
                (o.out, o.sums.unwrap())
            };
            let what = format!("matmul_sum_rows {dims:?}");
            let got = read(backend, &out, "matmul_sum_rows out").await;
            Tolerance::products(precision, k).assert_close(&what, &got, &dense::matmul(&a, &b, None, dims));
            let got = read(backend, &sums, "matmul_sum_rows sums").await;
            Tolerance::ACCUMULATED.assert_close(&format!("{what} sums"), &got, &dense::sum_rows(&a, m));
            assert_unchanged(backend, &ua, &a, "matmul_sum_rows a").await;
            assert_unchanged(backend, &ub, &b, "matmul_sum_rows b").await;
        }
    }
}

/// `matmul_onto` (every transpose, with and without a bias) against the f64 reference
/// `onto + (op(A)·op(B) + bias)`, and bit for bit against the backend's own `matmul` then
/// `add`: autograd adds a gradient onto the one an input already has with it, and a
/// residual block adds a linear's output onto the stream with it, and each must get the
/// sum it got before.
pub async fn matmul_onto<B: Backend>(backend: &B, precision: Precision) {
    let mut rng = Rng::new(0x3A70);
    for (m, k, n) in SHAPES {
        for (trans_a, trans_b) in layouts() {
            for with_bias in [false, true] {
                let dims = MatmulDims { m, k, n, trans_a, trans_b };
                let (a, b, onto) = (
                    normal(&mut rng, m * k, 1.0),
                    normal(&mut rng, k * n, 1.0),
                    normal(&mut rng, m * n, 1.0),
                );
                let bias = with_bias.then(|| normal(&mut rng, n, 1.0));
                let (ua, ub, uonto) = (backend.upload(&a), backend.upload(&b), backend.upload(&onto));
                let ubias = bias.as_deref().map(|bias| backend.upload(bias));
                let what = format!("matmul_onto {dims:?}, bias {with_bias}");
                let fused = backend
                    .matmul(
                        &ua,
                        &ub,
                        dims,
                        MatmulFused { onto: Some(&uonto), ..MatmulFused::bias(ubias.as_ref()) },
                    )
                    .out;
                let got = read(backend, &fused, &what).await;
                let product = dense::matmul(&a, &b, bias.as_deref(), dims);
                let want: Vec<f64> = onto.iter().zip(&product).map(|(&o, p)| o as f64 + p).collect();
                Tolerance::products(precision, k).assert_close(&what, &got, &want);
                let unfused = backend.add(
                    &uonto,
                    &backend.matmul(&ua, &ub, dims, MatmulFused::bias(ubias.as_ref())).out,
                    m * n,
                );
                assert_same_bits(&what, &got, &read(backend, &unfused, "matmul then add").await);
                let inputs = [(&uonto, &onto[..], "onto"), (&ua, &a[..], "a"), (&ub, &b[..], "b")];
                assert_inputs_unchanged(backend, &what, &inputs).await;
            }
        }
    }
}

/// Gradients of `C = op(A)·op(B) + bias` for `dC = w`, expressed as backend matmuls.
struct MatmulGrads<S> {
    da: S,
    db: S,
    dbias: S,
}

fn grads<B: Backend>(
    backend: &B,
    a: &B::Storage,
    b: &B::Storage,
    w: &B::Storage,
    d: MatmulDims,
) -> MatmulGrads<B::Storage> {
    let MatmulDims { m, k, n, trans_a, trans_b } = d;
    // d op(A) = dC · op(B)ᵀ; stored transposed when trans_a.
    let da = if trans_a {
        backend
            .matmul(
                b,
                w,
                MatmulDims { m: k, k: n, n: m, trans_a: trans_b, trans_b: true },
                MatmulFused::none(),
            )
            .out
    } else {
        backend
            .matmul(
                w,
                b,
                MatmulDims { m, k: n, n: k, trans_a: false, trans_b: !trans_b },
                MatmulFused::none(),
            )
            .out
    };
    // d op(B) = op(A)ᵀ · dC; stored transposed when trans_b.
    let db = if trans_b {
        backend
            .matmul(
                w,
                a,
                MatmulDims { m: n, k: m, n: k, trans_a: true, trans_b: trans_a },
                MatmulFused::none(),
            )
            .out
    } else {
        backend
            .matmul(
                a,
                w,
                MatmulDims { m: k, k: m, n, trans_a: !trans_a, trans_b: false },
                MatmulFused::none(),
            )
            .out
    };
    MatmulGrads { da, db, dbias: backend.sum_rows(w, m, n) }
}

/// `dA`, `dB` and `dbias` against finite differences of the backend's own forward
/// matmul, and against the f64 reference.
///
/// In [`Precision::Mixed`] only against the reference (dA and dB within
/// [`Tolerance::products`], dbias, a reduction, within f32's): a forward that rounds its
/// inputs to f16 is a step function of them, whose differences over a step of
/// [`crate::conformance::FD_EPS`] say little about the gradient (f32 runs of the kit check
/// the same gradient formulas against finite differences).
pub async fn matmul_backward<B: Backend>(backend: &B, precision: Precision) {
    let mut rng = Rng::new(0x3A7B);
    for (m, k, n) in [(1, 5, 3), (3, 1, 7), (5, 9, 17), (13, 7, 33)] {
        for (trans_a, trans_b) in layouts() {
            let dims = MatmulDims { m, k, n, trans_a, trans_b };
            let (a, b, bias) =
                (normal(&mut rng, m * k, 1.0), normal(&mut rng, k * n, 1.0), normal(&mut rng, n, 1.0));
            let w = normal(&mut rng, m * n, 1.0);
            let (ua, ub, ubias) = (backend.upload(&a), backend.upload(&b), backend.upload(&bias));
            let g = grads(backend, &ua, &ub, &backend.upload(&w), dims);
            let (da, db, dbias) = (
                read(backend, &g.da, "dA").await,
                read(backend, &g.db, "dB").await,
                read(backend, &g.dbias, "dbias").await,
            );
            let what = format!("matmul_backward {dims:?}");

            let ref_c = |a: &[f32], b: &[f32]| dense::matmul(a, b, None, dims);
            let (wa, wb) = (ref_grad_a(&w, &b, dims, ref_c), ref_grad_b(&a, &w, dims, ref_c));
            // dA sums over n, dB over m.
            Tolerance::products(precision, n).assert_close(&format!("{what} dA"), &da, &wa);
            Tolerance::products(precision, m).assert_close(&format!("{what} dB"), &db, &wb);
            Tolerance::ACCUMULATED.assert_close(&format!("{what} dbias"), &dbias, &dense::sum_rows(&w, n));
            if precision != Precision::F32 {
                continue;
            }

            let loss = async |a: &B::Storage, b: &B::Storage, bias: &B::Storage| {
                weighted_sum(
                    &read(backend, &backend.matmul(a, b, dims, MatmulFused::bias(Some(bias))).out, "matmul")
                        .await,
                    &w,
                )
            };
            check_gradient(&format!("{what} dA"), &a, &da, &mut rng, async |x| {
                loss(&backend.upload(x), &ub, &ubias).await
            })
            .await;
            check_gradient(&format!("{what} dB"), &b, &db, &mut rng, async |x| {
                loss(&ua, &backend.upload(x), &ubias).await
            })
            .await;
            check_gradient(&format!("{what} dbias"), &bias, &dbias, &mut rng, async |x| {
                loss(&ua, &ub, &backend.upload(x)).await
            })
            .await;
        }
    }
}

/// f64 `∂(Σ w ⊙ C)/∂A` in A's stored layout, one probe per element of A: the objective
/// is linear in A, so `ref_c` at a unit A gives the derivative exactly.
fn ref_grad_a(w: &[f32], b: &[f32], d: MatmulDims, ref_c: impl Fn(&[f32], &[f32]) -> Vec<f64>) -> Vec<f64> {
    unit_probes(d.m * d.k, |unit| dot64(&ref_c(unit, b), w))
}

fn ref_grad_b(a: &[f32], w: &[f32], d: MatmulDims, ref_c: impl Fn(&[f32], &[f32]) -> Vec<f64>) -> Vec<f64> {
    unit_probes(d.k * d.n, |unit| dot64(&ref_c(a, unit), w))
}

fn unit_probes(len: usize, f: impl Fn(&[f32]) -> f64) -> Vec<f64> {
    let mut unit = vec![0f32; len];
    (0..len)
        .map(|i| {
            unit[i] = 1.0;
            let v = f(&unit);
            unit[i] = 0.0;
            v
        })
        .collect()
}

fn dot64(x: &[f64], w: &[f32]) -> f64 {
    x.iter().zip(w).map(|(a, &b)| a * b as f64).sum()
}
