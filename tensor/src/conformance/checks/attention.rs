//! Causal multi-head attention forward (output and saved probabilities) and backward, and
//! the training pair (`attention_for_training`, `attention_backward_saved`) whose saved
//! state is the backend's own: checked against the reference, the backend's unfused pair
//! and finite differences.

use crate::conformance::finite_diff::check_gradient;
use crate::conformance::harness::{assert_inputs_unchanged, normal, read, weighted_sum};
use crate::conformance::reference::attention as reference;
use crate::conformance::Tolerance;
use crate::{AttentionCache, AttentionDims, AttentionKeep, Backend, DropoutMask, Precision, Rng};

/// `(batch, seq, heads, head_dim)`: all ones, seq 1, odd head counts and widths.
const CASES: [(usize, usize, usize, usize); 6] =
    [(1, 1, 1, 1), (1, 1, 3, 4), (2, 5, 3, 4), (1, 9, 1, 7), (3, 4, 5, 2), (2, 17, 2, 8)];

fn dims_of((batch, seq, heads, head_dim): (usize, usize, usize, usize)) -> AttentionDims {
    AttentionDims { batch, seq, heads, head_dim, dropout: None, cache: None }
}

/// The tolerance of attention's outputs and gradients in `precision`: products over a head
/// (`head_dim`) chained with products over the positions (`seq`); see
/// [`Tolerance::products`].
pub(super) fn tolerance(precision: Precision, dims: AttentionDims) -> Tolerance {
    Tolerance::products(precision, dims.head_dim + dims.seq)
}

/// Attention forward and backward (fused and unfused) against the f64 reference.
pub async fn attention<B: Backend>(backend: &B, precision: Precision) {
    let mut rng = Rng::new(0xA77);
    for case in CASES {
        let dims = dims_of(case);
        let len = dims.batch * dims.seq * dims.channels();
        let (q, k, v) = (normal(&mut rng, len, 1.0), normal(&mut rng, len, 1.0), normal(&mut rng, len, 1.0));
        let (uq, uk, uv) = (backend.upload(&q), backend.upload(&k), backend.upload(&v));
        let res = backend.attention(&uq, &uk, &uv, dims, AttentionKeep::Probs);
        let probs = res.saved.expect("attention keeping Probs returns them");
        let (out, probs) = (read(backend, &res.out, "out").await, read(backend, &probs, "probs").await);
        let kept_nothing = backend.attention(&uq, &uk, &uv, dims, AttentionKeep::Nothing);
        assert!(kept_nothing.saved.is_none(), "attention keeping Nothing returned saved state");
        let kept_nothing = read(backend, &kept_nothing.out, "out keeping nothing").await;
        let (rout, rprobs) = reference::attention(&q, &k, &v, dims);
        let what = format!("attention {dims:?}");
        assert_inputs_unchanged(backend, &what, &[(&uq, &q, "q"), (&uk, &k, "k"), (&uv, &v, "v")]).await;
        let tol = tolerance(precision, dims);
        tol.assert_close(&format!("{what} out"), &out, &rout);
        tol.assert_close(&format!("{what} out keeping nothing"), &kept_nothing, &rout);
        tol.assert_close(&format!("{what} probs"), &probs, &rprobs);
        // The contract says zero above the diagonal, not "small".
        let seq = dims.seq;
        for (i, &p) in probs.iter().enumerate() {
            let (t, u) = ((i / seq) % seq, i % seq);
            assert!(
                u <= t || p == 0.0,
                "{what}: probs[{i}] (t {t}, u {u}) is {p}, must be 0 above the diagonal"
            );
        }
    }
}

/// `dq`, `dk`, `dv` against the f64 reference and against finite differences of the
/// backend's attention output (f32 only, as in [`super::matmul_backward`]).
pub async fn attention_backward<B: Backend>(backend: &B, precision: Precision) {
    let mut rng = Rng::new(0xA77B);
    for case in CASES {
        let dims = dims_of(case);
        let what = format!("attention_backward {dims:?}");
        attention_backward_case(backend, precision, dims, &mut rng, &what, AttentionPath::Probs).await;
    }
}

/// Which pair of attention methods a check drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AttentionPath {
    /// `attention` / `attention_backward`, through the probabilities.
    Probs,
    /// `attention_for_training` / `attention_backward_saved`, through the backend's own state.
    Saved,
}

impl AttentionPath {
    /// The forward output and what the backward of this path takes.
    fn forward<B: Backend>(
        self,
        backend: &B,
        q: &B::Storage,
        k: &B::Storage,
        v: &B::Storage,
        dims: AttentionDims,
    ) -> (B::Storage, B::Storage) {
        let keep = match self {
            AttentionPath::Probs => AttentionKeep::Probs,
            AttentionPath::Saved => AttentionKeep::Backward,
        };
        let res = backend.attention(q, k, v, dims, keep);
        (res.out, res.saved.unwrap_or_else(|| panic!("attention keeping {keep:?} returned nothing")))
    }
}

/// `(batch, seq, heads, head_dim, dropout)` cases of the training pair: [`CASES`] without
/// dropout, then the longest ones with a mask, one longer than a 16-position block, and
/// the head widths of the presets (16, 32, 64) over sequences that end inside a block of
/// 32 and of 64 positions (the tiles of fused GPU kernels), with and without a mask.
fn training_cases() -> Vec<AttentionDims> {
    let mask = Some(DropoutMask::new(0.3, 7, 3, 1, 99));
    let mut cases: Vec<AttentionDims> = CASES.iter().map(|&c| dims_of(c)).collect();
    cases.extend([(2, 5, 3, 4), (2, 17, 2, 8)].map(|c| AttentionDims { dropout: mask, ..dims_of(c) }));
    cases.push(dims_of((1, 40, 2, 19)));
    cases.push(dims_of((2, 33, 1, 64)));
    cases.extend([(1, 70, 2, 16), (1, 129, 1, 32)].map(|c| AttentionDims { dropout: mask, ..dims_of(c) }));
    cases
}

/// The training forward's output against the reference and against the backend's own
/// `attention` (the unfused composition).
pub async fn attention_for_training<B: Backend>(backend: &B, precision: Precision) {
    let mut rng = Rng::new(0xA77F);
    for dims in training_cases() {
        let len = dims.batch * dims.seq * dims.channels();
        let (q, k, v) = (normal(&mut rng, len, 1.0), normal(&mut rng, len, 1.0), normal(&mut rng, len, 1.0));
        let (uq, uk, uv) = (backend.upload(&q), backend.upload(&k), backend.upload(&v));
        let fused =
            read(backend, &backend.attention(&uq, &uk, &uv, dims, AttentionKeep::Backward).out, "out").await;
        let unfused =
            read(backend, &backend.attention(&uq, &uk, &uv, dims, AttentionKeep::Probs).out, "out").await;
        let what = format!("attention_for_training {dims:?}");
        assert_inputs_unchanged(backend, &what, &[(&uq, &q, "q"), (&uk, &k, "k"), (&uv, &v, "v")]).await;
        let tol = tolerance(precision, dims);
        tol.assert_close(&format!("{what} out"), &fused, &reference::attention(&q, &k, &v, dims).0);
        tol.assert_close(&format!("{what} out vs attention"), &fused, &widen(&unfused));
    }
}

/// The training backward from its saved state: against the reference, the backend's
/// `attention_backward` and finite differences of `attention_for_training`.
pub async fn attention_backward_saved<B: Backend>(backend: &B, precision: Precision) {
    let mut rng = Rng::new(0xA77C);
    for dims in training_cases() {
        let what = format!("attention_backward_saved {dims:?}");
        attention_backward_case(backend, precision, dims, &mut rng, &what, AttentionPath::Saved).await;
    }
}

/// One shape of the backward check, shared with the dropout checks (whose `dims` carry a
/// mask): `dq`, `dk`, `dv` against the f64 reference and (in f32: a forward that rounds
/// its inputs to f16 is a step function of them, see [`super::matmul_backward`]) finite
/// differences of the backend's forward output.
pub(super) async fn attention_backward_case<B: Backend>(
    backend: &B,
    precision: Precision,
    dims: AttentionDims,
    rng: &mut Rng,
    what: &str,
    path: AttentionPath,
) {
    let len = dims.batch * dims.seq * dims.channels();
    let (q, k, v) = (normal(rng, len, 1.0), normal(rng, len, 1.0), normal(rng, len, 1.0));
    let dout = normal(rng, len, 1.0);
    let (uq, uk, uv) = (backend.upload(&q), backend.upload(&k), backend.upload(&v));
    let udout = backend.upload(&dout);
    let saved = path.forward(backend, &uq, &uk, &uv, dims).1;
    let g = match path {
        AttentionPath::Probs => {
            backend.attention_backward(&udout, &uq, &uk, &uv, &saved, dims, AttentionKeep::Probs)
        }
        AttentionPath::Saved => {
            backend.attention_backward(&udout, &uq, &uk, &uv, &saved, dims, AttentionKeep::Backward)
        }
    };
    let (dq, dk, dv) = (
        read(backend, &g.dq, "dq").await,
        read(backend, &g.dk, "dk").await,
        read(backend, &g.dv, "dv").await,
    );

    let inputs = [(&udout, &dout[..], "dout"), (&uq, &q[..], "q"), (&uk, &k[..], "k"), (&uv, &v[..], "v")];
    assert_inputs_unchanged(backend, what, &inputs).await;
    let (rdq, rdk, rdv) = reference::attention_backward(&dout, &q, &k, &v, dims);
    let tol = tolerance(precision, dims);
    tol.assert_close(&format!("{what} dq"), &dq, &rdq);
    tol.assert_close(&format!("{what} dk"), &dk, &rdk);
    tol.assert_close(&format!("{what} dv"), &dv, &rdv);
    if path == AttentionPath::Saved {
        // The fused pair against the backend's own unfused composition.
        let probs =
            backend.attention(&uq, &uk, &uv, dims, AttentionKeep::Probs).saved.expect("the probabilities");
        let u = backend.attention_backward(&udout, &uq, &uk, &uv, &probs, dims, AttentionKeep::Probs);
        for (name, got, unfused) in [("dq", &dq, u.dq), ("dk", &dk, u.dk), ("dv", &dv, u.dv)] {
            let unfused = read(backend, &unfused, name).await;
            tol.assert_close(&format!("{what} {name} vs attention_backward"), got, &widen(&unfused));
        }
    }
    if precision != Precision::F32 {
        return;
    }

    let loss = async |q: &B::Storage, k: &B::Storage, v: &B::Storage| {
        let out = path.forward(backend, q, k, v, dims).0;
        weighted_sum(&read(backend, &out, "attention").await, &dout)
    };
    check_gradient(&format!("{what} dq"), &q, &dq, rng, async |x| loss(&backend.upload(x), &uk, &uv).await)
        .await;
    check_gradient(&format!("{what} dk"), &k, &dk, rng, async |x| loss(&uq, &backend.upload(x), &uv).await)
        .await;
    check_gradient(&format!("{what} dv"), &v, &dv, rng, async |x| loss(&uq, &uk, &backend.upload(x)).await)
        .await;
}

fn widen(x: &[f32]) -> Vec<f64> {
    x.iter().map(|&v| v as f64).collect()
}

/// Attention with a key/value cache ([`AttentionCache`]): the new rows against caches of `past + rows` written positions (and
/// NaN beyond them, which must never be read) equal those rows of full causal attention
/// over all the positions (the f64 reference), for a prefill (`past` 0), single-position
/// decoding steps and a few rows at once.
pub async fn cached_attention<B: Backend>(backend: &B, precision: Precision) {
    let mut rng = Rng::new(0xCAC4E);
    // (seq, heads, head_dim, past): rows = seq - past.
    for (seq, heads, head_dim, past) in [
        (1, 1, 1, 0),
        (5, 3, 4, 0),
        (5, 3, 4, 4),
        (9, 1, 7, 8),
        (17, 2, 8, 11),
        (70, 2, 3, 69),
        (70, 4, 16, 0),
        (97, 4, 33, 96),
        (50, 2, 32, 30),
    ] {
        let dims = dims_of((1, seq, heads, head_dim));
        let c = dims.channels();
        let (q, k, v) =
            (normal(&mut rng, seq * c, 1.0), normal(&mut rng, seq * c, 1.0), normal(&mut rng, seq * c, 1.0));
        let (full, _) = reference::attention(&q, &k, &v, dims);
        let capacity = seq + 3;
        let cache = |x: &[f32]| {
            let mut buf = x.to_vec();
            buf.resize(capacity * c, f32::NAN);
            backend.upload(&buf)
        };
        let cached =
            AttentionDims { seq: seq - past, cache: Some(AttentionCache { past, capacity }), ..dims };
        let res = backend.attention(
            &backend.upload(&q[past * c..]),
            &cache(&k),
            &cache(&v),
            cached,
            AttentionKeep::Nothing,
        );
        assert!(res.saved.is_none(), "cached attention returned saved state");
        let out = read(backend, &res.out, "out").await;
        let tol = tolerance(precision, dims);
        tol.assert_close(&format!("cached attention {cached:?}"), &out, &full[past * c..]);
    }
}
