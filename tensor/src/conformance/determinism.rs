//! Determinism across thread counts, for backends that promise it (the trait's contract:
//! one variant gives the same bits at any thread count, work being split by problem size).
//!
//! ```ignore
//! // kernels-foo/tests/determinism.rs
//! tinygpt_tensor::backend_determinism_tests!(|threads| FooBackend::new(threads), [1, 2, 3]);
//! ```
//!
//! A failure names the op, its shape and the thread count, and the first element whose
//! bits differ.

use crate::{
    read_vec, AdamWStep, AttentionCache, AttentionDims, AttentionKeep, Backend, MatmulDims, MatmulFused, Rng,
};

/// Runs [`op_results`] on the backend `make` builds for each of `threads` and panics, naming
/// the op and the thread count, unless every result has the bits of the first count's.
pub async fn same_bits_across_threads<B: Backend>(make: impl Fn(usize) -> B, threads: &[usize]) {
    let Some((&first, rest)) = threads.split_first() else { return };
    let want = op_results(&make(first)).await;
    for &t in rest {
        let got = op_results(&make(t)).await;
        assert_same_bits(&want, &got, &format!("{t} threads against {first}"));
    }
}

/// Panics unless `got` holds the bits of `want`, op by op; `what` says which two runs.
pub fn assert_same_bits(want: &[(String, Vec<f32>)], got: &[(String, Vec<f32>)], what: &str) {
    for ((name, w), (_, g)) in want.iter().zip(got) {
        if let Some(i) = w.iter().zip(g).position(|(a, b)| a.to_bits() != b.to_bits()) {
            panic!("{name}: {what} differ first at [{i}]: {} against {}", g[i], w[i]);
        }
        assert_eq!(w.len(), g.len(), "{name}: {what} differ in length");
    }
}

/// Runs a chain of ops (every op kind, at sizes large enough to be split into many
/// parallel pieces) and returns every result, read back.
pub async fn op_results<B: Backend>(backend: &B) -> Vec<(String, Vec<f32>)> {
    let mut rng = Rng::new(2024);
    let mut normal = |len: usize| -> B::Storage {
        backend.upload(&(0..len).map(|_| rng.normal() as f32).collect::<Vec<_>>())
    };
    let mut results: Vec<(String, B::Storage)> = Vec::new();

    // The second and third shapes span several pieces in every direction of the fast
    // matmul (48-row, 256- or 768-column pieces, 256-deep k slices); the last is a few-row
    // one.
    for (m, k, n) in [(150, 67, 133), (101, 600, 530), (400, 40, 1600), (3, 600, 530)] {
        let (a, b, bias) = (normal(m * k), normal(k * n), normal(n));
        for (trans_a, trans_b) in [(false, false), (false, true), (true, false), (true, true)] {
            let dims = MatmulDims { m, k, n, trans_a, trans_b };
            let name = format!("matmul {m}x{k}x{n} {trans_a} {trans_b}");
            results.push((name, backend.matmul(&a, &b, dims, MatmulFused::bias(Some(&bias))).out));
        }
    }

    let dims = AttentionDims { batch: 2, seq: 33, heads: 3, head_dim: 16, dropout: None, cache: None };
    let len = dims.batch * dims.seq * dims.channels();
    let (q, kk, v, dout) = (normal(len), normal(len), normal(len), normal(len));
    let att = backend.attention(&q, &kk, &v, dims, AttentionKeep::Probs);
    let probs = att.saved.expect("the probabilities");
    let g = backend.attention_backward(&dout, &q, &kk, &v, &probs, dims, AttentionKeep::Probs);
    results.extend([("attention out", att.out), ("attention probs", probs)].map(|(s, b)| (s.to_string(), b)));
    results.extend([("dq", g.dq), ("dk", g.dk), ("dv", g.dv)].map(|(s, b)| (s.to_string(), b)));
    // The training pair (flash-style in the fast variants: saved log-sum-exp, not probs).
    let training = backend.attention(&q, &kk, &v, dims, AttentionKeep::Backward);
    let saved = training.saved.expect("the training state");
    let g = backend.attention_backward(&dout, &q, &kk, &v, &saved, dims, AttentionKeep::Backward);
    results.extend(
        [("training out", training.out), ("saved", saved), ("saved dq", g.dq), ("saved dk", g.dk)]
            .map(|(s, b)| (s.to_string(), b)),
    );
    results.push(("saved dv".to_string(), g.dv));

    // Decoding: 40 new rows after 20 cached ones, a piece per head in the fast variants.
    let cache = Some(AttentionCache { past: 20, capacity: 64 });
    let cached = AttentionDims { batch: 1, seq: 40, cache, ..dims };
    let (kc, vc) = (normal(64 * 48), normal(64 * 48));
    let q_new = normal(40 * 48);
    let out = backend.attention(&q_new, &kc, &vc, cached, AttentionKeep::Nothing).out;
    results.push(("cached_attention".into(), out));

    let (rows, dim) = (300, 130);
    let (x, gamma, beta, dy) = (normal(rows * dim), normal(dim), normal(dim), normal(rows * dim));
    let ln = backend.layer_norm(&x, &gamma, &beta, rows, dim, 1e-5);
    let lg = backend.layer_norm_backward(&dy, &x, &gamma, &ln, rows, dim, None);
    results.extend(
        [("ln out", ln.out), ("ln dx", lg.dx), ("ln dgamma", lg.dgamma), ("ln dbeta", lg.dbeta)]
            .map(|(s, b)| (s.to_string(), b)),
    );
    results.push(("sum_rows".into(), backend.sum_rows(&x, rows, dim)));
    results.push(("sum_squares".into(), backend.sum_squares(&x, rows * dim)));
    results.push(("gelu".into(), backend.gelu(&x, rows * dim)));

    let (rows, vocab) = (200, 256);
    let logits = normal(rows * vocab);
    let targets: Vec<u32> = (0..rows as u32).map(|r| (r * 37) % vocab as u32).collect();
    let targets = backend.upload_indices(&targets);
    results.push(("cross_entropy".into(), backend.cross_entropy(&logits, &targets, rows, vocab, false).loss));
    let dlogits =
        backend.cross_entropy_backward(&logits, &targets, None, &backend.upload(&[1.0]), rows, vocab);
    results.push(("dlogits".into(), dlogits));
    // The training pair (fused in the fast variants: each row's normaliser saved).
    let trained = backend.cross_entropy(&logits, &targets, rows, vocab, true);
    let dloss = backend.upload(&[0.5]);
    let dlogits =
        backend.cross_entropy_backward(&logits, &targets, trained.saved.as_ref(), &dloss, rows, vocab);
    results.extend([("training loss".to_string(), trained.loss), ("saved dlogits".to_string(), dlogits)]);
    results.extend(trained.saved.map(|s| ("cross_entropy saved".to_string(), s)));

    let plen = 50_000;
    let (param, grad, m, v) = (normal(plen), normal(plen), backend.zeros(plen), backend.zeros(plen));
    let sumsq = backend.sum_squares(&grad, plen);
    for step in 1..=3 {
        let hp = AdamWStep {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-8,
            weight_decay: 0.1,
            step,
            max_grad_norm: Some(1.0),
        };
        backend.adamw(&param, &grad, &m, &v, &sumsq, &hp, plen);
    }
    results.extend([("adamw param", param), ("adamw m", m), ("adamw v", v)].map(|(s, b)| (s.to_string(), b)));

    let mut read = Vec::with_capacity(results.len());
    for (name, buf) in results {
        let values = read_vec(backend, &buf).await.unwrap_or_else(|e| panic!("{name}: readback failed: {e}"));
        read.push((name, values));
    }
    read
}
