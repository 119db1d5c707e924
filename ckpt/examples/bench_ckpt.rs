//! Save and load time of a full checkpoint (weights + both AdamW moments) in a local
//! directory, as one JSON line:
//! `{preset, params, bytes, save_ms, load_ms, save_bytes_per_s, load_bytes_per_s}`.
//!
//! `cargo run --release -p tinygpt-ckpt --example bench_ckpt [-- --preset large] [--dir D]`
//!
//! A save includes encoding, SHA-256 of every file, fsync of every file and directory,
//! reading everything back to verify it, the pointer flip and pruning; a load includes
//! reading, checksum verification, parsing and the finiteness check. Each figure is the
//! median of 5 runs after one warm-up.

#[cfg(target_arch = "wasm32")]
fn main() {
    eprintln!("bench_ckpt measures the native directory store; run it natively");
}

#[cfg(not(target_arch = "wasm32"))]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    native::main()
}

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use std::time::Instant;

    use tinygpt_ckpt::{Checkpoint, CheckpointDir};
    use tinygpt_model::{DatasetManifest, Preset};
    use tinygpt_run::{LossPoint, TrainerProgress, TrainingConfig};
    use tinygpt_tensor::Rng;

    fn arg(name: &str) -> Option<String> {
        let args: Vec<String> = std::env::args().collect();
        args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
    }

    fn median(mut xs: Vec<f64>) -> f64 {
        xs.sort_by(f64::total_cmp);
        xs[xs.len() / 2]
    }

    pub fn main() -> Result<(), Box<dyn std::error::Error>> {
        let preset_name = arg("--preset").unwrap_or_else(|| "large".into());
        let preset = Preset::by_name(&preset_name)?;
        let n = preset.model.param_count();
        let mut rng = Rng::new(1);
        let mut values =
            |scale: f64| -> Vec<f32> { (0..n).map(|_| ((rng.uniform() - 0.5) * scale) as f32).collect() };
        let ckpt = Checkpoint {
            model_config: preset.model.clone(),
            training_config: TrainingConfig { batch_size: preset.batch_size, ..TrainingConfig::default() },
            dataset: DatasetManifest {
                dataset_id: "0".repeat(64),
                name: "bench".into(),
                raw_bytes: 1_115_394,
                token_count: 1_115_394,
                tokenizer: "byte-v1".into(),
                train_split: 0.9,
                val_split: 0.1,
                seed: 1337,
            },
            progress: TrainerProgress {
                step: 2000,
                tokens_seen: 2000 * 12 * 128,
                best_val_loss: Some(1.9),
                wall_time_sec: 3600.0,
                rng_state: 42,
                loss_scale: None,
            },
            loss_history: (1..=2000)
                .map(|s| LossPoint { step: s, train_loss: 2.0, val_loss: (s % 100 == 0).then_some(2.1) })
                .collect(),
            weights: values(0.04),
            adam_m: values(2e-3),
            adam_v: values(1e-5),
        };

        let tmp;
        let root = match arg("--dir") {
            Some(dir) => std::path::PathBuf::from(dir),
            None => {
                tmp = std::env::temp_dir().join(format!("tinygpt-bench-ckpt-{}", std::process::id()));
                tmp.clone()
            }
        };
        let dir = CheckpointDir::open(&root)?;
        let (mut save_s, mut load_s, mut bytes) = (Vec::new(), Vec::new(), 0);
        for run in 0..6 {
            let t = Instant::now();
            bytes = dir.save(&ckpt)?.bytes;
            let saved = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let back = dir.load_latest()?;
            let loaded = t.elapsed().as_secs_f64();
            assert_eq!(back.weights.len(), n);
            if run > 0 {
                save_s.push(saved);
                load_s.push(loaded);
            }
        }
        if arg("--dir").is_none() {
            std::fs::remove_dir_all(&root)?;
        }
        let (save, load) = (median(save_s), median(load_s));
        println!(
        "{{\"preset\":\"{preset_name}\",\"params\":{n},\"bytes\":{bytes},\"save_ms\":{:.1},\"load_ms\":{:.1},\"save_bytes_per_s\":{},\"load_bytes_per_s\":{}}}",
        save * 1e3,
        load * 1e3,
        (bytes as f64 / save) as u64,
        (bytes as f64 / load) as u64,
    );
        Ok(())
    }
}
