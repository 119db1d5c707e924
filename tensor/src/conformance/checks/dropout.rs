//! Dropout: the mask each backend draws is the rule's (`crate::dropout`), bit for bit, so
//! every backend draws the same one; its statistics; `dropout_add`; gradients by finite
//! differences with the mask held fixed; attention with dropped-out probabilities.

use super::attention::{attention_backward_case, AttentionPath};
use crate::conformance::finite_diff::check_gradient;
use crate::conformance::harness::{assert_inputs_unchanged, normal, read, weighted_sum};
use crate::conformance::reference::attention as reference;
use crate::{AttentionDims, AttentionKeep, Backend, DropoutMask, Precision, Rng};

/// Lengths around SIMD widths and workgroup sizes, and a multi-chunk size.
const LENS: [usize; 4] = [1, 7, 257, 40_001];
/// Drop probabilities: none, nanoGPT's, half, most.
const PS: [f32; 4] = [0.0, 0.2, 0.5, 0.9];

fn masks() -> Vec<DropoutMask> {
    let mut out = Vec::new();
    for (i, &p) in PS.iter().enumerate() {
        // A part of a batch starts at an offset; the second mask starts mid-way.
        out.push(DropoutMask::new(p, 1337, 5, i as u64, 0));
        out.push(DropoutMask::new(p, 42, 1_000_000, 7, 123_457));
    }
    out
}

/// `x` with no zeros, so a 0 in the output can only be a dropped element.
fn nonzero(rng: &mut Rng, len: usize) -> Vec<f32> {
    normal(rng, len, 1.0).into_iter().map(|v| if v == 0.0 { 1.0 } else { v }).collect()
}

/// `dropout` against the reference mask.
pub async fn dropout<B: Backend>(backend: &B, _precision: Precision) {
    let mut rng = Rng::new(0xD80);
    for len in LENS {
        let x = nonzero(&mut rng, len);
        let ux = backend.upload(&x);
        for mask in masks() {
            let got = read(backend, &backend.dropout(&ux, &mask, len, None), "dropout").await;
            let what = format!("dropout [{len}] {mask:?}");
            for (i, (&g, &v)) in got.iter().zip(&x).enumerate() {
                // The rule's mask and one f32 multiply: exact, on every backend.
                let want = v * mask.factor(i);
                assert!(g.to_bits() == want.to_bits(), "{what}: element {i} is {g}, the rule gives {want}");
            }
            assert_inputs_unchanged(backend, &what, &[(&ux, &x, "x")]).await;
            if len >= 10_000 {
                // Binomial: the dropped fraction lies within 5 standard deviations of p.
                let p = mask.threshold as f64 / 4_294_967_296.0;
                let dropped = got.iter().filter(|&&g| g == 0.0).count() as f64 / len as f64;
                let sd = (p * (1.0 - p) / len as f64).sqrt();
                assert!((dropped - p).abs() <= 5.0 * sd + 1e-9, "{what}: dropped {dropped}, p {p}");
                // Inverted scaling keeps the mean: E[factor] = 1.
                let mean_factor = (0..len).map(|i| mask.factor(i) as f64).sum::<f64>() / len as f64;
                assert!(
                    (mean_factor - 1.0).abs() <= 5.0 * sd / (1.0 - p),
                    "{what}: mean factor {mean_factor}"
                );
            }
        }
    }
}

/// `dropout_add` against `add` of `dropout`.
pub async fn dropout_add<B: Backend>(backend: &B, _precision: Precision) {
    let mut rng = Rng::new(0xD8A);
    for len in LENS {
        let (r, x) = (normal(&mut rng, len, 1.0), nonzero(&mut rng, len));
        let (ur, ux) = (backend.upload(&r), backend.upload(&x));
        for mask in masks() {
            let got = read(backend, &backend.dropout(&ux, &mask, len, Some(&ur)), "dropout_add").await;
            let what = format!("dropout_add [{len}] {mask:?}");
            for (i, ((&g, &r), &v)) in got.iter().zip(&r).zip(&x).enumerate() {
                // Within two f32 roundings of the operands' size (a GPU may fuse the multiply
                // and add; a sum that cancels keeps the operands' absolute error).
                let kept = v as f64 * mask.factor(i) as f64;
                let err = (g as f64 - (r as f64 + kept)).abs();
                assert!(
                    err <= 2.0 * f32::EPSILON as f64 * (r.abs() as f64 + kept.abs()),
                    "{what}: element {i} is {g}, want {} ({r} + {kept})",
                    r as f64 + kept
                );
            }
            for (i, (&g, &r)) in got.iter().zip(&r).enumerate() {
                // A dropped element passes the residual through untouched.
                assert!(
                    mask.keeps(i) || g.to_bits() == r.to_bits(),
                    "{what}: dropped element {i} is {g}, not {r}"
                );
            }
        }
    }
}

/// The backward of dropout (and of `dropout_add`'s `x`) is dropout of `dout` with the same
/// mask: checked by finite differences of the forward op with the mask fixed.
pub async fn dropout_backward<B: Backend>(backend: &B, _precision: Precision) {
    let mut rng = Rng::new(0xD8B);
    for len in [7, 257] {
        let (x, r, dout) =
            (normal(&mut rng, len, 1.0), normal(&mut rng, len, 1.0), normal(&mut rng, len, 1.0));
        for mask in masks() {
            let dx =
                read(backend, &backend.dropout(&backend.upload(&dout), &mask, len, None), "dropout").await;
            let what = format!("dropout_backward [{len}] {mask:?}");
            check_gradient(&what, &x, &dx, &mut rng, async |x| {
                weighted_sum(
                    &read(backend, &backend.dropout(&backend.upload(x), &mask, len, None), "dropout").await,
                    &dout,
                )
            })
            .await;
            let ur = backend.upload(&r);
            check_gradient(&format!("{what} through dropout_add"), &x, &dx, &mut rng, async |x| {
                let out = backend.dropout(&backend.upload(x), &mask, len, Some(&ur));
                weighted_sum(&read(backend, &out, "dropout_add").await, &dout)
            })
            .await;
        }
    }
}

/// `(batch, seq, heads, head_dim)`, with a mask per case.
const CASES: [(usize, usize, usize, usize); 4] = [(1, 1, 1, 1), (2, 5, 3, 4), (1, 9, 1, 7), (2, 17, 2, 8)];

fn dropout_dims((batch, seq, heads, head_dim): (usize, usize, usize, usize), p: f32) -> AttentionDims {
    AttentionDims {
        batch,
        seq,
        heads,
        head_dim,
        dropout: Some(DropoutMask::new(p, 7, 3, 1, 99)),
        cache: None,
    }
}

/// Attention with dropped-out probabilities against the f64 reference (which applies the
/// rule's factors); the saved probabilities stay the undropped softmax.
pub async fn attention_dropout<B: Backend>(backend: &B, precision: Precision) {
    let mut rng = Rng::new(0xA7D);
    for case in CASES {
        for p in [0.2, 0.5] {
            let dims = dropout_dims(case, p);
            let len = dims.batch * dims.seq * dims.channels();
            let (q, k, v) =
                (normal(&mut rng, len, 1.0), normal(&mut rng, len, 1.0), normal(&mut rng, len, 1.0));
            let res = backend.attention(
                &backend.upload(&q),
                &backend.upload(&k),
                &backend.upload(&v),
                dims,
                AttentionKeep::Probs,
            );
            let (rout, rprobs) = reference::attention(&q, &k, &v, dims);
            let what = format!("attention with dropout {dims:?}");
            let tol = super::attention::tolerance(precision, dims);
            tol.assert_close(&format!("{what} out"), &read(backend, &res.out, "out").await, &rout);
            tol.assert_close(
                &format!("{what} probs"),
                &read(backend, &res.saved.expect("the probabilities"), "probs").await,
                &rprobs,
            );
        }
    }
}

/// Its backward against the reference and against finite differences of the backend's
/// forward with the same (fixed) mask.
pub async fn attention_dropout_backward<B: Backend>(backend: &B, precision: Precision) {
    let mut rng = Rng::new(0xA7DB);
    for case in CASES {
        let dims = dropout_dims(case, 0.3);
        let what = format!("attention_backward with dropout {dims:?}");
        attention_backward_case(backend, precision, dims, &mut rng, &what, AttentionPath::Probs).await;
    }
}
