//! `f32` stays bit for bit what it was before mixed precision came (issue 34): the f32
//! matmul's outputs on every path (tiled, direct, split over k, whole-tile vec4 stages,
//! transposes, bias, prior, row sums, attention's batched products) and three training
//! steps of the `tiny` preset (their losses and the weights after them) hash to the values
//! recorded on lavapipe before the matmul learnt to narrow its inputs.
//!
//! Bits depend on the adapter's compiler, so the recorded values are compared only on the
//! adapter they were recorded on ([`RECORDED_ADAPTER`]); elsewhere the test prints its
//! values and passes (the parity and conformance tests still hold everywhere).

use tinygpt_kernels_wgsl::testing::own_backend;
use tinygpt_kernels_wgsl::{MatmulPath, WgpuBackend};
use tinygpt_model::{Dataset, Preset};
use tinygpt_optim::{TrainedSet, Trainer, TrainingConfig};
use tinygpt_tensor::{
    block_on, read_vec, AttentionDims, AttentionKeep, Backend, MatmulDims, MatmulFused, Rng,
};

/// The adapter the values below were recorded on.
const RECORDED_ADAPTER: &str = "llvmpipe (LLVM 15.0.6, 256 bits)";
/// FNV-1a of every matmul output's bits, in the order [`matmul_hash`] makes them.
const RECORDED_MATMULS: u64 = 0xeaf5_eb7d_59b9_27cf;
/// The three training losses' bits and FNV-1a of the weights' bits after them.
const RECORDED_TRAINING: ([u32; 3], u64) = ([0x40b0_e969, 0x40b1_8bb3, 0x40b0_085c], 0x39ec_fdc7_5948_6f6b);

const TEXT: &[u8] = include_bytes!("../../data/tinyshakespeare.txt");

fn fnv(hash: &mut u64, values: &[f32]) {
    for v in values {
        for byte in v.to_bits().to_le_bytes() {
            *hash = (*hash ^ byte as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
}

fn normal(rng: &mut Rng, len: usize) -> Vec<f32> {
    (0..len).map(|_| rng.normal() as f32).collect()
}

fn matmul_hash(backend: &WgpuBackend) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325;
    let mut rng = Rng::new(0xB175);
    let paths = [
        backend.clone(),
        backend.with_matmul_path(MatmulPath::Tiled),
        backend.with_matmul_path(MatmulPath::Direct),
        backend.with_matmul_path(MatmulPath::Tiled).with_matmul_split_k(Some(3)),
    ];
    for (m, k, n) in [(128, 64, 128), (33, 70, 9), (5, 300, 17), (64, 8, 256), (1, 1, 1)] {
        for (trans_a, trans_b) in [(false, false), (false, true), (true, false), (true, true)] {
            let dims = MatmulDims { m, k, n, trans_a, trans_b };
            let (a, b) = (normal(&mut rng, m * k), normal(&mut rng, k * n));
            let (bias, onto) = (normal(&mut rng, n), normal(&mut rng, m * n));
            for be in &paths {
                let (ua, ub) = (be.upload(&a), be.upload(&b));
                let (ubias, uonto) = (be.upload(&bias), be.upload(&onto));
                let mut outs = vec![
                    be.matmul(&ua, &ub, dims, MatmulFused::none()).out,
                    be.matmul(&ua, &ub, dims, MatmulFused::bias(Some(&ubias))).out,
                    be.matmul(&ua, &ub, dims, MatmulFused { onto: Some(&uonto), ..MatmulFused::bias(None) })
                        .out,
                ];
                if trans_a {
                    let (out, sums) = {
                        let o =
                            be.matmul(&ua, &ub, dims, MatmulFused { sum_rows: true, ..MatmulFused::none() });
                        (o.out, o.sums.unwrap())
                    };
                    outs.extend([out, sums]);
                }
                for out in outs {
                    fnv(&mut hash, &block_on(read_vec(be, &out)).unwrap());
                }
            }
        }
    }
    for (batch, seq, heads, head_dim) in [(2, 17, 2, 8), (1, 70, 2, 16)] {
        let dims = AttentionDims { batch, seq, heads, head_dim, dropout: None, cache: None };
        let len = batch * seq * dims.channels();
        let (q, k, v, dout) =
            (normal(&mut rng, len), normal(&mut rng, len), normal(&mut rng, len), normal(&mut rng, len));
        for be in &paths {
            let (uq, uk, uv) = (be.upload(&q), be.upload(&k), be.upload(&v));
            let res = be.attention(&uq, &uk, &uv, dims, AttentionKeep::Probs);
            let g = be.attention_backward(
                &be.upload(&dout),
                &uq,
                &uk,
                &uv,
                res.kept(),
                dims,
                AttentionKeep::Probs,
            );
            for out in [res.out.clone(), res.kept().clone(), g.dq, g.dk, g.dv] {
                fnv(&mut hash, &block_on(read_vec(be, &out)).unwrap());
            }
        }
    }
    hash
}

fn training(backend: &WgpuBackend) -> ([u32; 3], u64) {
    let preset = Preset::by_name("tiny").unwrap();
    let config = TrainingConfig { batch_size: 4, max_steps: 3, warmup_steps: 2, ..Default::default() };
    let dataset =
        Dataset::new("shakespeare", &TEXT[..100_000], preset.model.context_length, config.seed).unwrap();
    let mut trainer =
        Trainer::new(TrainedSet::whole_model(backend, preset.model), config, dataset, None).unwrap();
    let losses = [(); 3].map(|()| trainer.step().unwrap().train_loss.to_bits());
    let mut hash = 0xcbf2_9ce4_8422_2325;
    for p in trainer.model().params().tensors() {
        fnv(&mut hash, &block_on(p.read()).unwrap());
    }
    (losses, hash)
}

#[test]
fn f32_matmuls_and_training_keep_their_recorded_bits() {
    let Some(backend) = own_backend() else { return };
    let matmuls = matmul_hash(&backend);
    let steps = training(&backend);
    let adapter = &backend.adapter().name;
    eprintln!("adapter {adapter:?}: matmuls {matmuls:#018x}, training {steps:#x?}");
    if adapter != RECORDED_ADAPTER {
        eprintln!("not compared: recorded on {RECORDED_ADAPTER:?}");
        return;
    }
    assert_eq!(matmuls, RECORDED_MATMULS, "the f32 matmuls' bits changed on {adapter}");
    assert_eq!(steps, RECORDED_TRAINING, "f32 training's losses or weights changed on {adapter}");
}
