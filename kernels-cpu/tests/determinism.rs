//! Each kernel variant of the CPU backend gives the same bits on any number of threads (the
//! training loop's "same seed and thread count → same losses" promise rests on this, and in
//! fact holds across thread counts), and its constructor rejects bad thread counts and
//! variants this CPU lacks with an error.

use tinygpt_kernels_cpu::{CpuBackend, CpuBackendError, KernelVariant, Kernels};
use tinygpt_tensor::{block_on, AdamWStep, AttentionDims, Backend, CachedAttentionDims, MatmulDims, Rng};

type Buf = <CpuBackend as Backend>::Storage;

/// Runs a chain of ops large enough to be split into many parallel pieces and returns
/// every result, read back.
fn run_ops(backend: &CpuBackend) -> Vec<(String, Vec<f32>)> {
    let mut rng = Rng::new(2024);
    let mut normal =
        |len: usize| -> Buf { backend.upload(&(0..len).map(|_| rng.normal() as f32).collect::<Vec<_>>()) };
    let mut results: Vec<(String, Buf)> = Vec::new();

    // The second and third shapes span several pieces in every direction of the fast
    // matmul (48-row, 256- or 768-column pieces, 256-deep k slices); the last is a few-row
    // one.
    for (m, k, n) in [(150, 67, 133), (101, 600, 530), (400, 40, 1600), (3, 600, 530)] {
        let (a, b, bias) = (normal(m * k), normal(k * n), normal(n));
        for (trans_a, trans_b) in [(false, false), (false, true), (true, false), (true, true)] {
            let dims = MatmulDims { m, k, n, trans_a, trans_b };
            let name = format!("matmul {m}x{k}x{n} {trans_a} {trans_b}");
            results.push((name, backend.matmul(&a, &b, Some(&bias), dims)));
        }
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
    // The training pair (flash-style in the fast variants: saved log-sum-exp, not probs).
    let saved = backend.attention_for_training(&q, &kk, &v, dims);
    let g = backend.attention_backward_saved(&dout, &q, &kk, &v, &saved.saved, dims);
    results.extend(
        [("training out", saved.out), ("saved", saved.saved), ("saved dq", g.dq), ("saved dk", g.dk)]
            .map(|(s, b)| (s.to_string(), b)),
    );
    results.push(("saved dv".to_string(), g.dv));

    // Decoding: 40 new rows after 20 cached ones, a piece per head in the fast variants.
    let cached = CachedAttentionDims { rows: 40, past: 20, capacity: 64, heads: 3, head_dim: 16 };
    let (kc, vc) = (normal(64 * 48), normal(64 * 48));
    let q_new = normal(40 * 48);
    results.push(("cached_attention".into(), backend.cached_attention(&q_new, &kc, &vc, cached)));

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
fn each_variant_is_bit_identical_for_1_2_and_3_threads() {
    let supported = KernelVariant::ALL.into_iter().filter(|v| v.is_supported());
    for variant in supported {
        let on = |threads| CpuBackend::new(threads).with_variant(variant).unwrap();
        let one = run_ops(&on(1));
        for threads in [2, 3] {
            let other = run_ops(&on(threads));
            for ((name, want), (_, got)) in one.iter().zip(&other) {
                assert!(bits(want) == bits(got), "{variant} {name}: {threads} threads differ from 1 thread");
            }
        }
    }
}

/// The global pool (how the threaded browser build runs: wasm-bindgen-rayon starts only
/// rayon's global pool) gives the same bits as one thread. This test binary's global pool
/// is sized here, before any other test can start it.
#[test]
fn the_global_pool_is_bit_identical_to_one_thread() {
    let _ = rayon::ThreadPoolBuilder::new().num_threads(3).build_global();
    let global = CpuBackend::on_global_pool();
    assert_eq!(global.threads(), rayon::current_num_threads());
    for variant in KernelVariant::ALL.into_iter().filter(|v| v.is_supported()) {
        let one = run_ops(&CpuBackend::new(1).with_variant(variant).unwrap());
        let other = run_ops(&global.clone().with_variant(variant).unwrap());
        for ((name, want), (_, got)) in one.iter().zip(&other) {
            assert!(bits(want) == bits(got), "{variant} {name}: the global pool differs from 1 thread");
        }
    }
}

#[test]
fn fast_is_the_best_supported_variant_and_unsupported_ones_are_refused() {
    assert_eq!(CpuBackend::new(2).variant(), KernelVariant::best_available());
    assert_eq!(CpuBackend::default().with_kernels(Kernels::Reference).variant(), KernelVariant::Reference);
    assert_eq!("fast".parse::<Kernels>(), Ok(Kernels::Fast));
    assert!("simd".parse::<Kernels>().unwrap_err().contains("reference or fast"));
    // simd128 exists only in a wasm32 build.
    let err = CpuBackend::new(1).with_variant(KernelVariant::Simd128).unwrap_err();
    assert!(matches!(err, CpuBackendError::Unsupported { variant: "simd128" }), "{err}");
}

#[test]
fn thread_counts_are_validated() {
    assert!(matches!(CpuBackend::try_new(0), Err(CpuBackendError::ZeroThreads)));
    assert_eq!(CpuBackend::default().threads(), 1);
    assert_eq!(CpuBackend::new(3).threads(), 3);
    assert_eq!(CpuBackend::new(1).name(), "cpu");
}
