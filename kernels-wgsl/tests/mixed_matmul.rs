//! The mixed matmul (issue 34) on the device against its definition, emulated on the host:
//! op(A) and op(B) rounded to nearest f16, the products summed in f64. Where the kit
//! (`conformance.rs`, module `mixed`) allows the error of f16 inputs, this allows only
//! f32's accumulation error, so it fails if any path narrows too little (an operand left
//! f32), too much (the bias, the prior, the partial sums or the output narrowed) or
//! differently (another rounding). Also: row sums stay f32 bit for bit, attention's
//! products narrow too, the report names the path, and a few training steps learn.

use std::time::Instant;

use tinygpt_kernels_wgsl::testing::{shared_backend, shared_backend_with};
use tinygpt_kernels_wgsl::{MatmulKernels, MatmulPath, WgpuBackend};
use tinygpt_model::{Dataset, Preset};
use tinygpt_optim::{TrainedSet, Trainer, TrainingConfig};
use tinygpt_tensor::conformance::Tolerance;
use tinygpt_tensor::{AttentionDims, AttentionKeep, Backend, MatmulDims, MatmulFused, Precision, Rng};

mod f16_emulation;

use f16_emulation::{emulated, f16_round, normal, read};

const TEXT: &[u8] = include_bytes!("../../data/tinyshakespeare.txt");

#[test]
fn f16_round_rounds_to_nearest_even() {
    assert_eq!(f16_round(1.0), 1.0);
    assert_eq!(f16_round(1.0 + 2f32.powi(-11)), 1.0, "a tie goes to even");
    assert_eq!(f16_round(1.0 + 3.0 * 2f32.powi(-11)), 1.0 + 2f32.powi(-9), "a tie goes to even");
    assert_eq!(f16_round(1.0 + 1.5 * 2f32.powi(-11)), 1.0 + 2f32.powi(-10));
    assert_eq!(f16_round(65504.0), 65504.0);
    assert_eq!(f16_round(1e-7), 2f32.powi(-24) * 2.0);
    assert_eq!(f16_round(-0.1), -0.099975586);
}

fn mixed() -> Option<WgpuBackend> {
    let backend = shared_backend_with(Precision::Mixed)?;
    if !backend.adapter().shader_f16 {
        eprintln!("skipped: {} has no shader-f16", backend.adapter().name);
        return None;
    }
    let chosen = backend.matmul_precision();
    // (Where cooperative matrices are offered, their kernel runs the products it takes.)
    assert_ne!(chosen.kernels, MatmulKernels::F32, "{chosen}");
    Some(backend)
}

/// Every path (direct, tiled, tiled split over k) on every layout, whole tiles (vec4
/// stages) and awkward sizes, with a bias, onto a prior and with row sums: the emulation
/// within f32's accumulation error; the row sums as f32 computes them, bit for bit.
#[test]
fn every_path_rounds_exactly_the_inputs_of_the_products() {
    let Some(mixed) = mixed() else { return };
    let f32 = shared_backend().unwrap();
    let tol = Tolerance::ACCUMULATED;
    let mut rng = Rng::new(0xF16);
    let mut differs = false;
    for (m, k, n) in [(128, 64, 128), (33, 70, 9), (5, 300, 17), (64, 8, 256), (1, 1, 1), (17, 129, 40)] {
        for (trans_a, trans_b) in [(false, false), (false, true), (true, false), (true, true)] {
            let dims = MatmulDims { m, k, n, trans_a, trans_b };
            let (a, b) = (normal(&mut rng, m * k), normal(&mut rng, k * n));
            let (bias, onto) = (normal(&mut rng, n), normal(&mut rng, m * n));
            let want = emulated(&a, &b, None, dims);
            let want_bias = emulated(&a, &b, Some(&bias), dims);
            let want_onto: Vec<f64> = want.iter().zip(&onto).map(|(w, &o)| w + o as f64).collect();
            for (path, split) in
                [(MatmulPath::Direct, None), (MatmulPath::Tiled, None), (MatmulPath::Tiled, Some(3))]
            {
                let what = format!("{dims:?} {path:?} split {split:?}");
                let x = mixed.with_matmul_path(path).with_matmul_split_k(split);
                let (ua, ub, ubias, uonto) = (x.upload(&a), x.upload(&b), x.upload(&bias), x.upload(&onto));
                let plain = read(&x, &x.matmul(&ua, &ub, dims, MatmulFused::none()).out);
                tol.assert_close(&what, &plain, &want);
                tol.assert_close(
                    &format!("{what} with bias"),
                    &read(&x, &x.matmul(&ua, &ub, dims, MatmulFused::bias(Some(&ubias))).out),
                    &want_bias,
                );
                tol.assert_close(
                    &format!("{what} onto"),
                    &read(
                        &x,
                        &x.matmul(
                            &ua,
                            &ub,
                            dims,
                            MatmulFused { onto: Some(&uonto), ..MatmulFused::bias(None) },
                        )
                        .out,
                    ),
                    &want_onto,
                );
                let f = f32.with_matmul_path(path).with_matmul_split_k(split);
                let (fa, fb) = (f.upload(&a), f.upload(&b));
                differs |= read(&f, &f.matmul(&fa, &fb, dims, MatmulFused::none()).out) != plain;
                if trans_a {
                    let (out, sums) = {
                        let o =
                            x.matmul(&ua, &ub, dims, MatmulFused { sum_rows: true, ..MatmulFused::none() });
                        (o.out, o.sums.unwrap())
                    };
                    let with_sums = read(&x, &out);
                    tol.assert_close(&format!("{what} matmul_sum_rows"), &with_sums, &want);
                    // The workgroups that sum rows stage op(A) as stored and narrow it after
                    // the sums: the product must still be the plain one's, bit for bit.
                    assert_eq!(with_sums, plain, "{what}: the product with row sums must be the plain one's");
                    let f_sums = read(
                        &f,
                        &{
                            let o = f.matmul(
                                &fa,
                                &fb,
                                dims,
                                MatmulFused { sum_rows: true, ..MatmulFused::none() },
                            );
                            (o.out, o.sums.unwrap())
                        }
                        .1,
                    );
                    assert_eq!(read(&x, &sums), f_sums, "{what}: row sums must be f32's, bit for bit");
                }
            }
        }
    }
    assert!(differs, "the mixed matmul gave f32's results everywhere: nothing was rounded");
}

/// Attention's products go through the matmul: on mixed its output differs from f32's
/// (and stays within the kit's tolerance, checked in `conformance.rs`).
#[test]
fn attention_narrows_with_the_matmul() {
    let Some(mixed) = mixed() else { return };
    let f32 = shared_backend().unwrap();
    let dims = AttentionDims { batch: 2, seq: 17, heads: 2, head_dim: 8, dropout: None, cache: None };
    let mut rng = Rng::new(0xA16);
    let len = dims.batch * dims.seq * dims.channels();
    let (q, k, v) = (normal(&mut rng, len), normal(&mut rng, len), normal(&mut rng, len));
    let out = |be: &WgpuBackend| {
        read(
            be,
            &be.attention(&be.upload(&q), &be.upload(&k), &be.upload(&v), dims, AttentionKeep::Probs).out,
        )
    };
    let (x, f) = (out(&mixed), out(&f32));
    assert_ne!(x, f, "attention on mixed gave f32's bits");
    let worst = x.iter().zip(&f).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(worst < 1e-2, "attention on mixed differs from f32 by {worst}");
}

/// What `tinygpt bench`/`train` print: the path and why, on this adapter.
#[test]
fn the_report_names_the_path_and_why() {
    let Some(f32) = shared_backend() else { return };
    let report = f32.matmul_precision();
    assert_eq!((report.requested, report.kernels), (Precision::F32, MatmulKernels::F32));
    assert_eq!(report.to_string(), "f32: f32 inputs, f32 accumulation (as asked)");
    let Some(mixed) = shared_backend_with(Precision::Mixed) else { return };
    let report = mixed.matmul_precision();
    eprintln!("{}: {report}", mixed.adapter().name);
    assert_eq!(report.requested, Precision::Mixed);
    if mixed.adapter().shader_f16 {
        let line = report.to_string();
        assert!(
            line.starts_with("shader-f16: f16 inputs, f32 accumulation (")
                || line.starts_with("cooperative-matrix: f16 inputs in 16×16×16 cooperative matrices"),
            "{report}"
        );
        assert!(report.self_test_worst.is_some_and(|w| w <= 8.0), "{report}");
    } else {
        assert!(report.to_string().starts_with("f32: mixed was asked for but"), "{report}");
    }
}

fn trainer(backend: &WgpuBackend, steps: usize) -> Trainer<WgpuBackend> {
    let preset = Preset::by_name("tiny").unwrap();
    let config = TrainingConfig { batch_size: 4, max_steps: steps, warmup_steps: 5, ..Default::default() };
    let dataset =
        Dataset::new("shakespeare", &TEXT[..100_000], preset.model.context_length, config.seed).unwrap();
    Trainer::new(TrainedSet::whole_model(backend, preset.model), config, dataset, None).unwrap()
}

/// 30 steps of `tiny` on mixed learn like f32 (the loss falls by 0.3 from the first
/// step's, 5.53, and ends within 2% of f32's),
/// with the step times of both printed (lavapipe is a software driver: its times say
/// nothing about a GPU's).
#[test]
fn mixed_training_learns_like_f32() {
    let Some(mixed) = mixed() else { return };
    let f32 = shared_backend().unwrap();
    let mut losses = Vec::new();
    for (name, backend) in [("f32", &f32), ("mixed", &mixed)] {
        let mut t = trainer(backend, 30);
        let first = t.step().unwrap().train_loss;
        let start = Instant::now();
        let mut loss = 0.0;
        for _ in 1..30 {
            loss = t.step().unwrap().train_loss;
        }
        let ms = start.elapsed().as_secs_f64() * 1e3 / 29.0;
        eprintln!("{name}: loss {loss} after 30 steps, {ms:.1} ms a step on {}", backend.adapter().name);
        assert!(loss < first - 0.3, "{name} should learn: loss {first} at step 1, {loss} at step 30");
        losses.push(loss);
    }
    let rel = ((losses[1] - losses[0]) / losses[0]).abs();
    assert!(rel < 0.02, "loss after 30 steps: f32 {}, mixed {}", losses[0], losses[1]);
}
