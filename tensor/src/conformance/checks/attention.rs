//! Causal multi-head attention forward (output and saved probabilities) and backward.

use crate::conformance::finite_diff::check_gradient;
use crate::conformance::harness::{normal, read, weighted_sum};
use crate::conformance::reference::attention as reference;
use crate::conformance::Tolerance;
use crate::{AttentionDims, Backend, Rng};

/// `(batch, seq, heads, head_dim)`: all ones, seq 1, odd head counts and widths.
const CASES: [(usize, usize, usize, usize); 6] =
    [(1, 1, 1, 1), (1, 1, 3, 4), (2, 5, 3, 4), (1, 9, 1, 7), (3, 4, 5, 2), (2, 17, 2, 8)];

fn dims_of((batch, seq, heads, head_dim): (usize, usize, usize, usize)) -> AttentionDims {
    AttentionDims { batch, seq, heads, head_dim, dropout: None }
}

pub async fn attention<B: Backend>(backend: &B) {
    let mut rng = Rng::new(0xA77);
    for case in CASES {
        let dims = dims_of(case);
        let len = dims.batch * dims.seq * dims.channels();
        let (q, k, v) = (normal(&mut rng, len, 1.0), normal(&mut rng, len, 1.0), normal(&mut rng, len, 1.0));
        let res = backend.attention(&backend.upload(&q), &backend.upload(&k), &backend.upload(&v), dims);
        let (out, probs) = (read(backend, &res.out, "out").await, read(backend, &res.probs, "probs").await);
        let (rout, rprobs) = reference::attention(&q, &k, &v, dims);
        let what = format!("attention {dims:?}");
        Tolerance::ACCUMULATED.assert_close(&format!("{what} out"), &out, &rout);
        Tolerance::ACCUMULATED.assert_close(&format!("{what} probs"), &probs, &rprobs);
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
/// backend's attention output.
pub async fn attention_backward<B: Backend>(backend: &B) {
    let mut rng = Rng::new(0xA77B);
    for case in CASES {
        let dims = dims_of(case);
        attention_backward_case(backend, dims, &mut rng, &format!("attention_backward {dims:?}")).await;
    }
}

/// One shape of the backward check, shared with the dropout checks (whose `dims` carry a
/// mask): `dq`, `dk`, `dv` against the f64 reference and finite differences of the
/// backend's forward output.
pub(super) async fn attention_backward_case<B: Backend>(
    backend: &B,
    dims: AttentionDims,
    rng: &mut Rng,
    what: &str,
) {
    let len = dims.batch * dims.seq * dims.channels();
    let (q, k, v) = (normal(rng, len, 1.0), normal(rng, len, 1.0), normal(rng, len, 1.0));
    let dout = normal(rng, len, 1.0);
    let (uq, uk, uv) = (backend.upload(&q), backend.upload(&k), backend.upload(&v));
    let probs = backend.attention(&uq, &uk, &uv, dims).probs;
    let g = backend.attention_backward(&backend.upload(&dout), &uq, &uk, &uv, &probs, dims);
    let (dq, dk, dv) = (
        read(backend, &g.dq, "dq").await,
        read(backend, &g.dk, "dk").await,
        read(backend, &g.dv, "dv").await,
    );

    let (rdq, rdk, rdv) = reference::attention_backward(&dout, &q, &k, &v, dims);
    Tolerance::ACCUMULATED.assert_close(&format!("{what} dq"), &dq, &rdq);
    Tolerance::ACCUMULATED.assert_close(&format!("{what} dk"), &dk, &rdk);
    Tolerance::ACCUMULATED.assert_close(&format!("{what} dv"), &dv, &rdv);

    let loss = async |q: &B::Storage, k: &B::Storage, v: &B::Storage| {
        weighted_sum(&read(backend, &backend.attention(q, k, v, dims).out, "attention").await, &dout)
    };
    check_gradient(&format!("{what} dq"), &q, &dq, rng, async |x| loss(&backend.upload(x), &uk, &uv).await)
        .await;
    check_gradient(&format!("{what} dk"), &k, &dk, rng, async |x| loss(&uq, &backend.upload(x), &uv).await)
        .await;
    check_gradient(&format!("{what} dv"), &v, &dv, rng, async |x| loss(&uq, &uk, &backend.upload(x)).await)
        .await;
}
