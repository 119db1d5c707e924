//! The CPU backend gives the same bits on any number of threads (the training loop's
//! "same seed and thread count → same losses" promise rests on this, and in fact holds
//! across thread counts), and its constructor rejects bad thread counts with an error.

use tinygpt_kernels_cpu::{CpuBackend, CpuBackendError};
use tinygpt_tensor::{block_on, AdamWStep, AttentionDims, Backend, MatmulDims, Rng};

type Buf = <CpuBackend as Backend>::Storage;

/// Runs a chain of ops large enough to be split into many parallel pieces and returns
/// every result, read back.
fn run_ops(backend: &CpuBackend) -> Vec<(String, Vec<f32>)> {
    let mut rng = Rng::new(2024);
    let mut normal =
        |len: usize| -> Buf { backend.upload(&(0..len).map(|_| rng.normal() as f32).collect::<Vec<_>>()) };
    let mut results: Vec<(String, Buf)> = Vec::new();

    let (m, k, n) = (150, 67, 133);
    let (a, b, bias) = (normal(m * k), normal(k * n), normal(n));
    for (trans_a, trans_b) in [(false, false), (false, true), (true, false), (true, true)] {
        let dims = MatmulDims { m, k, n, trans_a, trans_b };
        results.push((format!("matmul {trans_a} {trans_b}"), backend.matmul(&a, &b, Some(&bias), dims)));
    }

    let dims = AttentionDims { batch: 2, seq: 33, heads: 3, head_dim: 16, dropout: None };
    let len = dims.batch * dims.seq * dims.channels();
    let (q, kk, v, dout) = (normal(len), normal(len), normal(len), normal(len));
    let att = backend.attention(&q, &kk, &v, dims);
    let g = backend.attention_backward(&dout, &q, &kk, &v, &att.probs, dims);
    results.extend(
        [("attention out", att.out), ("attention probs", att.probs)].map(|(s, b)| (s.to_string(), b)),
    );
    results.extend([("dq", g.dq), ("dk", g.dk), ("dv", g.dv)].map(|(s, b)| (s.to_string(), b)));

    let (rows, dim) = (300, 130);
    let (x, gamma, beta, dy) = (normal(rows * dim), normal(dim), normal(dim), normal(rows * dim));
    let ln = backend.layer_norm(&x, &gamma, &beta, rows, dim, 1e-5);
    let lg = backend.layer_norm_backward(&dy, &x, &gamma, &ln, rows, dim);
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
    results.push(("cross_entropy".into(), backend.cross_entropy(&logits, &targets, rows, vocab)));
    let dlogits = backend.cross_entropy_backward(&logits, &targets, &backend.upload(&[1.0]), rows, vocab);
    results.push(("dlogits".into(), dlogits));

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

    results
        .into_iter()
        .map(|(name, buf)| (name, block_on(backend.read(&buf)).expect("cpu readback")))
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn results_are_bit_identical_for_1_2_and_3_threads() {
    let reference = run_ops(&CpuBackend::new(1));
    for threads in [2, 3] {
        let other = run_ops(&CpuBackend::new(threads));
        for ((name, want), (_, got)) in reference.iter().zip(&other) {
            assert!(bits(want) == bits(got), "{name}: {threads} threads differ from 1 thread");
        }
    }
}

#[test]
fn thread_counts_are_validated() {
    assert!(matches!(CpuBackend::try_new(0), Err(CpuBackendError::ZeroThreads)));
    assert_eq!(CpuBackend::default().threads(), 1);
    assert_eq!(CpuBackend::new(3).threads(), 3);
    assert_eq!(CpuBackend::new(1).name(), "cpu");
}
