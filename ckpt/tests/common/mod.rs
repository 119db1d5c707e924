//! Checkpoints for tests: small, deterministic, with every field away from its default.
#![allow(dead_code)]

use tinygpt_ckpt::Checkpoint;
use tinygpt_model::{DatasetManifest, ModelConfig};
use tinygpt_run::{LossPoint, TrainerProgress, TrainingConfig};
use tinygpt_tensor::Rng;

/// 2 layers, d 8, 2 heads, ctx 8, d_mlp 32: 3,872 parameters.
pub fn small_config() -> ModelConfig {
    ModelConfig {
        model_name: "tinygpt-test".into(),
        context_length: 8,
        n_layers: 2,
        n_heads: 2,
        d_model: 8,
        d_mlp: 32,
        ..ModelConfig::reference()
    }
}

pub fn manifest() -> DatasetManifest {
    DatasetManifest {
        dataset_id: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad".into(),
        name: "test-text".into(),
        raw_bytes: 1000,
        token_count: 1000,
        tokenizer: "byte-v1".into(),
        train_split: 0.9,
        val_split: 0.1,
        seed: 7,
    }
}

/// A checkpoint of `config` at `step` whose every value derives from `seed`.
pub fn checkpoint_for(config: ModelConfig, step: usize, seed: u64) -> Checkpoint {
    let n = config.param_count();
    let mut rng = Rng::new(seed);
    // Only exact arithmetic (no ln/cos, whose last bit differs between libms), so native
    // and WASM tests build the very same checkpoint.
    let weights = (0..n).map(|_| ((rng.uniform() - 0.5) * 0.04) as f32).collect();
    let adam_m = (0..n).map(|_| ((rng.uniform() - 0.5) * 2e-3) as f32).collect();
    let adam_v = (0..n).map(|_| (rng.uniform() * 1e-5) as f32).collect();
    let loss_history = (1..=step)
        .map(|s| LossPoint {
            step: s,
            train_loss: 5.5 / (1.0 + s as f32 * 0.01) + (rng.uniform() as f32) * 1e-3,
            val_loss: (s % 10 == 0).then(|| 5.6 / (1.0 + s as f32 * 0.01)),
        })
        .collect();
    Checkpoint {
        model_config: config,
        training_config: TrainingConfig { max_steps: 500, seed: 99, ..TrainingConfig::default() },
        dataset: manifest(),
        progress: TrainerProgress {
            step,
            tokens_seen: step as u64 * 1024,
            best_val_loss: (step >= 10).then_some(3.25),
            wall_time_sec: 12.5 + step as f64 * 0.1,
            rng_state: 0xDEAD_BEEF_CAFE_F00D ^ seed,
            loss_scale: None,
        },
        loss_history,
        weights,
        adam_m,
        adam_v,
    }
}

pub fn checkpoint(step: usize, seed: u64) -> Checkpoint {
    checkpoint_for(small_config(), step, seed)
}

/// Equality that compares floats bit for bit and reports the first difference briefly
/// (a derived `Debug` of thousands of floats helps nobody).
pub fn assert_same(a: &Checkpoint, b: &Checkpoint) {
    assert_eq!(a.model_config, b.model_config);
    assert_eq!(a.training_config, b.training_config);
    assert_eq!(a.dataset, b.dataset);
    assert_eq!(a.progress.step, b.progress.step);
    assert_eq!(a.progress.tokens_seen, b.progress.tokens_seen);
    assert_eq!(a.progress.best_val_loss.map(f32::to_bits), b.progress.best_val_loss.map(f32::to_bits));
    assert_eq!(a.progress.wall_time_sec.to_bits(), b.progress.wall_time_sec.to_bits());
    assert_eq!(a.progress.rng_state, b.progress.rng_state);
    assert_eq!(a.loss_history.len(), b.loss_history.len());
    for (x, y) in a.loss_history.iter().zip(&b.loss_history) {
        assert_eq!((x.step, x.train_loss.to_bits()), (y.step, y.train_loss.to_bits()));
        assert_eq!(x.val_loss.map(f32::to_bits), y.val_loss.map(f32::to_bits));
    }
    for (name, x, y) in [
        ("weights", &a.weights, &b.weights),
        ("adam_m", &a.adam_m, &b.adam_m),
        ("adam_v", &a.adam_v, &b.adam_v),
    ] {
        assert_eq!(x.len(), y.len(), "{name} length");
        if let Some(i) = x.iter().zip(y.iter()).position(|(p, q)| p.to_bits() != q.to_bits()) {
            panic!("{name}[{i}]: {} vs {}", x[i], y[i]);
        }
    }
}

/// `key sha256` lines for every blob of a store, sorted by key.
pub fn digest(blobs: &std::collections::BTreeMap<String, Vec<u8>>) -> String {
    use sha2::{Digest, Sha256};
    let mut out = String::new();
    for (key, bytes) in blobs {
        let hex: String = Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect();
        out.push_str(&format!("{key} {hex}\n"));
    }
    out
}

/// [`digest`] of a memory store after one save of `checkpoint(25, 1)`. The native and
/// the WASM tests both check it, so both builds write the same bytes.
pub const GOLDEN_LAYOUT: &str = "\
gen-000001/adam_m.f32 bad19306c98036f2261b6ee0236604749ecae5cc68554e48eac90443062d54d3\n\
gen-000001/adam_v.f32 b7c267c24511d25344f29691b22358f06dbf19bac6f73ea5901fbd1f6626da0f\n\
gen-000001/dataset_manifest.json 9f832030db1fdfa16a920a6ce3c5c25c9e3c5128a4fe287d7f8c0bc4b6676b34\n\
gen-000001/loss_history.json 75b06b0e8eba6e30c06a050aeb4faa6a78eaddab21fcd27bab2dd7e9217b4e39\n\
gen-000001/model_config.json f9ced0d2cdddbb721795ed108ac3c4ba93b4fe746b7001990703542a11ca8575\n\
gen-000001/trainer_state.json 2b11d4390917c0cadccf703b0a5dcdd95344698b271af8c059b7d487d4c93db2\n\
gen-000001/training_config.json 3f4281541469905b458034fe498954169979dcea46ac647e34211f0daa9da6a4\n\
gen-000001/weights.f32 828c16a288535c11d1d777ad9c5441c45a87e49ae8a0902888b69846598a64ed\n\
latest.json ea1f973d2cafd15d050e89610c4900fb8a95200fd1bae563b3b82c78dfd3d37e\n\
";

/// SHA-256 of `export_safetensors(&checkpoint(25, 1), true)`, checked natively and in WASM.
pub const GOLDEN_EXPORT: &str = "b10f6094483359b0710e47a5b9bd7cf532eff6a9a56628626f0563f2da7bdbf3";
