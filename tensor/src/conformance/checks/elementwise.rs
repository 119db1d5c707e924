//! `add`, `scale`, `sum_rows`, `sum_squares` against the f64 reference.
//!
//! `sum_rows` is also the bias gradient of `matmul`; `matmul_backward` checks it against
//! finite differences.

use crate::conformance::harness::{assert_inputs_unchanged, normal, read, read_scalar};
use crate::conformance::reference::dense;
use crate::conformance::Tolerance;
use crate::{Backend, Precision, Rng};

/// Lengths around SIMD widths and a multi-chunk size.
const LENS: [usize; 5] = [1, 7, 33, 1000, 20_001];

/// `add` against the f64 reference.
pub async fn add<B: Backend>(backend: &B, _precision: Precision) {
    let mut rng = Rng::new(0xADD);
    for len in LENS {
        let (a, b) = (normal(&mut rng, len, 1.0), normal(&mut rng, len, 1.0));
        let (ua, ub) = (backend.upload(&a), backend.upload(&b));
        let want: Vec<f64> = a.iter().zip(&b).map(|(&x, &y)| x as f64 + y as f64).collect();
        Tolerance::POINTWISE.assert_close(
            &format!("add [{len}]"),
            &read(backend, &backend.add(&ua, &ub, len), "add").await,
            &want,
        );
        // The same buffer on both sides must work (x + x).
        let want: Vec<f64> = a.iter().map(|&x| 2.0 * x as f64).collect();
        Tolerance::POINTWISE.assert_close(
            &format!("add [{len}] to itself"),
            &read(backend, &backend.add(&ua, &ua, len), "add").await,
            &want,
        );
        assert_inputs_unchanged(backend, &format!("add [{len}]"), &[(&ua, &a, "a"), (&ub, &b, "b")]).await;
    }
}

/// `scale` against the f64 reference.
pub async fn scale<B: Backend>(backend: &B, _precision: Precision) {
    let mut rng = Rng::new(0x5CA1E);
    for len in LENS {
        let a = normal(&mut rng, len, 1.0);
        let ua = backend.upload(&a);
        for alpha in [0.0f32, 1.0, -1.5, 3.25e-3] {
            let want: Vec<f64> = a.iter().map(|&x| alpha as f64 * x as f64).collect();
            let got = read(backend, &backend.scale(&ua, alpha, len), "scale").await;
            Tolerance::POINTWISE.assert_close(&format!("scale [{len}] by {alpha}"), &got, &want);
        }
        assert_inputs_unchanged(backend, &format!("scale [{len}]"), &[(&ua, &a, "a")]).await;
    }
}

/// `sum_rows` against the f64 reference.
pub async fn sum_rows<B: Backend>(backend: &B, _precision: Precision) {
    let mut rng = Rng::new(0x50_0305);
    for (rows, cols) in [(1, 1), (1, 9), (7, 1), (13, 70), (300, 130)] {
        let x = normal(&mut rng, rows * cols, 1.0);
        let ux = backend.upload(&x);
        let got = read(backend, &backend.sum_rows(&ux, rows, cols), "sum_rows").await;
        let what = format!("sum_rows [{rows}, {cols}]");
        Tolerance::ACCUMULATED.assert_close(&what, &got, &dense::sum_rows(&x, cols));
        assert_inputs_unchanged(backend, &what, &[(&ux, &x, "x")]).await;
    }
}

/// `sum_squares` against the f64 reference.
pub async fn sum_squares<B: Backend>(backend: &B, _precision: Precision) {
    let mut rng = Rng::new(0x5050);
    for len in [1, 7, 1000, 4097, 9000] {
        let x = normal(&mut rng, len, 1.0);
        let ux = backend.upload(&x);
        let got = read_scalar(backend, &backend.sum_squares(&ux, len), "sum_squares").await;
        let what = format!("sum_squares [{len}]");
        Tolerance::ACCUMULATED.assert_close(&what, &[got], &[dense::sum_squares(&x)]);
        assert_inputs_unchanged(backend, &what, &[(&ux, &x, "x")]).await;
    }
}
