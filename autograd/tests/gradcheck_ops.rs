//! Every tape op's backward against central finite differences (f64 objective), on the
//! CPU reference backend. Tolerance: `GradCheck::default()` (|a-n| <= 2e-3 + 2e-2·|n|, eps 1e-2).

use tinygpt_autograd::gradcheck::GradCheck;
use tinygpt_autograd::Tape;
use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_tensor::{Indices, Rng, Tensor};

fn backend() -> CpuBackend {
    CpuBackend::new(1)
}

fn randn(b: &CpuBackend, shape: &[usize], seed: u64, scale: f64) -> Tensor<CpuBackend> {
    let mut rng = Rng::new(seed);
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|_| (rng.normal() * scale) as f32).collect();
    Tensor::from_slice(b, &v, shape)
}

fn assert_passes(name: &str, mismatches: Vec<tinygpt_autograd::gradcheck::Mismatch>) {
    assert!(mismatches.is_empty(), "{name}: analytic and numeric gradients disagree: {mismatches:#?}");
}

#[test]
fn add_scale_reshape() {
    let b = backend();
    let inputs = [randn(&b, &[3, 4], 1, 1.0), randn(&b, &[3, 4], 2, 1.0)];
    let m = GradCheck::default().run(&inputs, |t, v| {
        let s = t.add(&v[0], &t.scale(&v[1], -1.5));
        t.reshape(&t.add(&s, &v[0]), &[4, 3])
    });
    assert_passes("add/scale/reshape", m);
}

#[test]
fn matmul_every_transpose_combination_with_bias_and_leading_dims() {
    let b = backend();
    let (m, k, n) = (5, 3, 4);
    for (ta, tb) in [(false, false), (false, true), (true, false), (true, true)] {
        let a_shape = if ta { vec![k, m] } else { vec![m, k] };
        let b_shape = if tb { vec![n, k] } else { vec![k, n] };
        let inputs = [randn(&b, &a_shape, 3, 1.0), randn(&b, &b_shape, 4, 1.0), randn(&b, &[n], 5, 1.0)];
        let mm = GradCheck::default().run(&inputs, |t, v| t.matmul(&v[0], &v[1], Some(&v[2]), ta, tb));
        assert_passes(&format!("matmul trans_a={ta} trans_b={tb}"), mm);
    }
    // x [2, 3, k] · Wᵀ: leading dimensions fold into rows.
    let inputs = [randn(&b, &[2, 3, k], 6, 1.0), randn(&b, &[n, k], 7, 1.0)];
    assert_passes("linear 3-d", GradCheck::default().run(&inputs, |t, v| t.linear(&v[0], &v[1], None)));
}

#[test]
fn linear_onto_a_stream_with_and_without_bias() {
    let b = backend();
    let (k, n) = (3, 4);
    let inputs = [
        randn(&b, &[2, 3, n], 20, 1.0),
        randn(&b, &[2, 3, k], 21, 1.0),
        randn(&b, &[n, k], 22, 1.0),
        randn(&b, &[n], 23, 1.0),
    ];
    let check = GradCheck::default();
    let with = check.run(&inputs, |t, v| t.linear_onto(&v[0], &v[1], &v[2], Some(&v[3])));
    assert_passes("linear_onto with bias", with);
    let without = check.run(&inputs[..3], |t, v| t.linear_onto(&v[0], &v[1], &v[2], None));
    assert_passes("linear_onto without bias", without);
}

/// A residual block's `linear_onto` must give the same bits as the `linear` then `add` it
/// replaced (values and every gradient), or training would change with it.
#[test]
fn linear_onto_is_linear_then_add_bit_for_bit() {
    let b = backend();
    let (rows, k, n) = (37, 40, 48);
    let (stream, x) = (randn(&b, &[rows, n], 24, 1.0), randn(&b, &[rows, k], 25, 1.0));
    let (w, bias) = (randn(&b, &[n, k], 26, 0.2), randn(&b, &[n], 27, 0.2));
    let targets = Indices::new(&b, &(0..rows as u32).map(|i| i * 7 % n as u32).collect::<Vec<_>>());
    let run = |fused: bool| {
        let tape = Tape::new();
        let vars = [&stream, &x, &w, &bias].map(|t| tape.leaf(t, true));
        let y = if fused {
            tape.linear_onto(&vars[0], &vars[1], &vars[2], Some(&vars[3]))
        } else {
            tape.add(&vars[0], &tape.linear(&vars[1], &vars[2], Some(&vars[3])))
        };
        let grads = tape.backward(&tape.cross_entropy(&y, &targets));
        let mut out = vec![y.value().to_vec().unwrap()];
        out.extend(vars.iter().map(|v| grads.get(v).unwrap().to_vec().unwrap()));
        out
    };
    let (fused, unfused) = (run(true), run(false));
    for (i, (f, u)) in fused.iter().zip(&unfused).enumerate() {
        let same = f.iter().zip(u).all(|(f, u)| f.to_bits() == u.to_bits());
        assert!(same, "output {i} (value, then the gradients of stream, x, weight, bias) differs");
    }
}

#[test]
fn embedding_with_repeated_ids() {
    let b = backend();
    let ids = Indices::new(&b, &[2, 0, 2, 5, 2]);
    let inputs = [randn(&b, &[6, 3], 8, 1.0)];
    assert_passes("embedding", GradCheck::default().run(&inputs, |t, v| t.embedding(&v[0], &ids)));
}

#[test]
fn layer_norm_gelu_attention() {
    let b = backend();
    let x = randn(&b, &[2, 3, 8], 9, 1.0);
    let gamma = randn(&b, &[8], 10, 0.5);
    let beta = randn(&b, &[8], 11, 0.5);
    let check = GradCheck::default();
    let ln = check.run(&[x.clone(), gamma, beta], |t, v| t.layer_norm(&v[0], &v[1], &v[2], 1e-5));
    assert_passes("layer_norm", ln);
    assert_passes("gelu", check.run(&[x], |t, v| t.gelu(&v[0])));
    let q = randn(&b, &[2, 4, 6], 12, 1.0);
    let k = randn(&b, &[2, 4, 6], 13, 1.0);
    let v = randn(&b, &[2, 4, 6], 14, 1.0);
    assert_passes("attention", check.run(&[q, k, v], |t, v| t.attention(&v[0], &v[1], &v[2], 3)));
}

#[test]
fn cross_entropy() {
    let b = backend();
    let targets = Indices::new(&b, &[1, 0, 6, 3]);
    let inputs = [randn(&b, &[2, 2, 7], 15, 2.0)];
    assert_passes(
        "cross_entropy",
        GradCheck::default().run(&inputs, |t, v| t.cross_entropy(&v[0], &targets)),
    );
}

#[test]
fn frozen_leaves_get_no_gradient_and_shared_vars_accumulate() {
    let b = backend();
    let tape = Tape::new();
    let x = tape.leaf(&randn(&b, &[2, 3], 16, 1.0), true);
    let w = tape.leaf(&randn(&b, &[4, 3], 17, 1.0), false);
    let y = tape.linear(&x, &w, None);
    let z = tape.add(&x, &x);
    let loss_y = tape.cross_entropy(&y, &Indices::new(&b, &[0, 3]));
    let grads = tape.backward(&loss_y);
    assert!(grads.get(&w).is_none(), "a frozen weight must get no gradient");
    assert!(grads.get(&x).is_some());
    let grads = tape.backward(&z);
    let gx = grads.get(&x).unwrap().to_vec().unwrap();
    assert!(gx.iter().all(|&g| (g - 2.0).abs() < 1e-6), "x + x sends 2 to x: {gx:?}");
}

#[test]
fn no_grad_tape_records_nothing() {
    let b = backend();
    let tape = Tape::no_grad();
    let x = tape.leaf(&randn(&b, &[2, 3], 18, 1.0), true);
    let y = tape.gelu(&x);
    assert!(!y.requires_grad());
    assert_eq!(y.value().dims(), &[2, 3]);
}

#[test]
fn rows_of_a_batch_taken_apart_and_summed() {
    let b = backend();
    let inputs = [randn(&b, &[2, 3, 4], 21, 1.0), randn(&b, &[5, 4], 22, 1.0)];
    // Overlapping and disjoint parts of the same var, each through a product: the gradient
    // of every row is the sum of its parts'.
    let m = GradCheck::default().run(&inputs, |t, v| {
        let head = t.matmul(&t.rows(&v[0], 0, 4), &v[1], None, false, true);
        let tail = t.matmul(&t.rows(&v[0], 2, 4), &v[1], None, false, true);
        t.add(&head, &t.scale(&tail, 0.5))
    });
    assert_passes("rows", m);
}
