//! Mean softmax cross-entropy and its gradient, including logits far outside the range
//! where an unstabilised `exp` overflows.

use crate::conformance::finite_diff::check_gradient;
use crate::conformance::harness::{assert_inputs_unchanged, ids, normal, read, read_scalar};
use crate::conformance::reference::layers;
use crate::conformance::Tolerance;
use crate::{Backend, Precision, Rng};

/// `(rows, vocab)`: a vocabulary of one (loss 0), small odd sizes, the byte vocabulary.
const CASES: [(usize, usize); 5] = [(1, 1), (1, 2), (7, 11), (5, 256), (16, 33)];

/// Logits of scale 2; with `shifted`, whole rows are moved by ±1000 (softmax is
/// shift-invariant, `exp(1000)` is not finite in f32) and one logit is raised by 500.
fn logits(rng: &mut Rng, rows: usize, vocab: usize, shifted: bool) -> Vec<f32> {
    let mut x = normal(rng, rows * vocab, 2.0);
    if shifted {
        for (r, row) in x.chunks_exact_mut(vocab).enumerate() {
            let shift = if r % 2 == 0 { 1000.0 } else { -1000.0 };
            row.iter_mut().for_each(|v| *v += shift);
            row[r % vocab] += 500.0;
        }
    }
    x
}

/// Softmax cross-entropy forward and backward against the f64 reference.
pub async fn cross_entropy<B: Backend>(backend: &B, _precision: Precision) {
    let mut rng = Rng::new(0xCE);
    for (rows, vocab) in CASES {
        for shifted in [false, true] {
            let (x, t) = (logits(&mut rng, rows, vocab, shifted), ids(&mut rng, rows, vocab));
            let ux = backend.upload(&x);
            let loss = backend.cross_entropy(&ux, &backend.upload_indices(&t), rows, vocab, false).loss;
            let got = read_scalar(backend, &loss, "cross_entropy").await;
            let what = format!("cross_entropy [{rows}, {vocab}] shifted {shifted}");
            Tolerance::ACCUMULATED.assert_close(&what, &[got], &[layers::cross_entropy(&x, &t, vocab)]);
            assert_inputs_unchanged(backend, &what, &[(&ux, &x, "logits")]).await;
        }
    }
}

/// Against the f64 reference (with `dloss` ≠ 1), and against finite differences of the
/// backend's `cross_entropy` scaled by `dloss`.
pub async fn cross_entropy_backward<B: Backend>(backend: &B, _precision: Precision) {
    let mut rng = Rng::new(0xCEB);
    let dloss = 0.7f32;
    let udloss = backend.upload(&[dloss]);
    for (rows, vocab) in CASES {
        for shifted in [false, true] {
            let (x, t) = (logits(&mut rng, rows, vocab, shifted), ids(&mut rng, rows, vocab));
            let ut = backend.upload_indices(&t);
            let ux = backend.upload(&x);
            let dx = read(
                backend,
                &backend.cross_entropy_backward(&ux, &ut, None, &udloss, rows, vocab),
                "dlogits",
            )
            .await;
            let what = format!("cross_entropy_backward [{rows}, {vocab}] shifted {shifted}");
            assert_inputs_unchanged(backend, &what, &[(&ux, &x, "logits"), (&udloss, &[dloss], "dloss")])
                .await;
            Tolerance::ACCUMULATED.assert_close(
                &what,
                &dx,
                &layers::cross_entropy_backward(&x, &t, dloss, vocab),
            );
            if !shifted {
                // (At ±1000 an f32 step of 1e-2 is below the logits' resolution.)
                check_gradient(&what, &x, &dx, &mut rng, async |x| {
                    let loss = backend.cross_entropy(&backend.upload(x), &ut, rows, vocab, false).loss;
                    dloss as f64 * read_scalar(backend, &loss, "cross_entropy").await as f64
                })
                .await;
            }
        }
    }
}

/// The training pair: `cross_entropy_for_training`, then `cross_entropy_backward_saved` on
/// what it saved (with `dloss` ≠ 1), against the f64 reference within
/// [`Tolerance::ACCUMULATED`], like the separate ops; plus a case of more rows than the CPU's
/// fused pieces (32 rows) hold.
pub async fn cross_entropy_for_training<B: Backend>(backend: &B, _precision: Precision) {
    let mut rng = Rng::new(0xCEF);
    let dloss = 0.7f32;
    let udloss = backend.upload(&[dloss]);
    for (rows, vocab) in CASES.into_iter().chain([(70, 65)]) {
        for shifted in [false, true] {
            let (x, t) = (logits(&mut rng, rows, vocab, shifted), ids(&mut rng, rows, vocab));
            let (ux, ut) = (backend.upload(&x), backend.upload_indices(&t));
            let what = format!("cross_entropy_for_training [{rows}, {vocab}] shifted {shifted}");
            let trained = backend.cross_entropy(&ux, &ut, rows, vocab, true);
            let loss = read_scalar(backend, &trained.loss, "cross_entropy_for_training").await;
            Tolerance::ACCUMULATED.assert_close(&what, &[loss], &[layers::cross_entropy(&x, &t, vocab)]);
            let dx = backend.cross_entropy_backward(&ux, &ut, trained.saved.as_ref(), &udloss, rows, vocab);
            let dx = read(backend, &dx, "dlogits").await;
            let want = layers::cross_entropy_backward(&x, &t, dloss, vocab);
            Tolerance::ACCUMULATED.assert_close(&format!("{what}: dlogits"), &dx, &want);
            assert_inputs_unchanged(backend, &what, &[(&ux, &x, "logits"), (&udloss, &[dloss], "dloss")])
                .await;
        }
    }
}
