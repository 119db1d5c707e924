//! `tinygpt lora train` runs the loop every run uses (`tinygpt_optim::TrainingRun`): an
//! adapter whose config asks for early stopping and a checkpoint interval (as the page's
//! adapter runs may) stops early and saves on that interval when the CLI continues it.

use tinygpt_ckpt::{AdapterStore, DirStore};
use tinygpt_tensor::block_on;

mod common;

use common::{assert_ok, lora_train, scratch, stderr, steps_of, tiny_base_and_code};

#[test]
fn lora_train_honours_early_stop_patience_and_checkpoint_interval() {
    let (base, data) = tiny_base_and_code(&scratch("honours"));
    let adapter = base.join("adapters").join("code");
    // One step, saved: an adapter at step 1 whose config we then change as a page would
    // have set it (a new generation, so every checksum holds).
    assert_ok(&lora_train(&base, &data, &adapter, &["--steps", "1"]));
    let store = AdapterStore::new(DirStore::open(&adapter).unwrap());
    let model =
        serde_json::from_str(&std::fs::read_to_string(base_file(&base, "model_config.json")).unwrap())
            .unwrap();
    let mut ckpt = block_on(store.load_latest(&model)).unwrap();
    let c = &mut ckpt.training_config;
    // A learning rate this small leaves the adapter as it is: no evaluation improves on the
    // first (equal is no improvement), as in `best.rs`.
    (c.max_steps, c.learning_rate, c.min_lr, c.warmup_steps) = (200, 1e-12, 1e-12, 0);
    (c.eval_interval, c.eval_batches, c.checkpoint_interval, c.early_stop_patience) = (2, 2, 3, Some(2));
    block_on(store.save(&ckpt)).unwrap();

    let out = lora_train(&base, &data, &adapter, &["--resume"]);
    assert_ok(&out);
    let err = stderr(&out);
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    let steps = line["steps"].as_u64().unwrap() as usize;
    assert!(err.contains(&format!("stopped early at step {steps}")), "{err}");
    // The first session evaluated its last step (1), which stays the best; the evaluations
    // at 2 and 4 do not improve on it (patience 2), so the run ends at 4.
    assert_eq!(steps, 4, "{err}");
    // Evaluated every 2 steps from step 2; the run stops at an evaluation.
    let evaluated = steps_of(&err, "step ", "  train");
    assert_eq!(evaluated, (2..=steps).step_by(2).collect::<Vec<_>>(), "{err}");
    // Saved every 3 steps and once more at the end.
    let saved = steps_of(&err, "at step ", " (");
    let mut expected: Vec<usize> = (3..=steps).step_by(3).collect();
    if expected.last() != Some(&steps) {
        expected.push(steps);
    }
    assert_eq!(saved, expected, "{err}");
}

/// The latest generation's `name` file of a run folder.
fn base_file(run: &std::path::Path, name: &str) -> std::path::PathBuf {
    let pointer: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("latest.json")).unwrap()).unwrap();
    run.join(pointer["latest"].as_str().unwrap()).join(name)
}

#[test]
fn lora_train_takes_early_stop_patience_and_checkpoint_interval_as_flags() {
    let (base, data) = tiny_base_and_code(&scratch("flags"));
    let adapter = base.join("adapters").join("code");
    // A learning rate this small leaves the adapter as it is, so no evaluation improves on
    // the first (at step 2): patience 2 ends the run at the evaluation of step 6.
    let flags = ["--steps", "200", "--lr", "1e-12", "--eval-interval", "2", "--checkpoint-interval", "5"];
    let out = lora_train(&base, &data, &adapter, &[&flags[..], &["--early-stop-patience", "2"]].concat());
    assert_ok(&out);
    let err = stderr(&out);
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    assert_eq!(line["steps"], 6, "{err}");
    assert!(err.contains("stopped early at step 6"), "{err}");
    assert_eq!(steps_of(&err, "step ", "  train"), vec![2, 4, 6], "{err}");
    assert_eq!(steps_of(&err, "at step ", " ("), vec![5, 6], "{err}");
}

#[test]
fn lora_train_compare_full_fine_tunes_the_whole_base_on_the_same_steps() {
    let (base, data) = tiny_base_and_code(&scratch("compare_full"));
    let adapter = base.join("adapters").join("code");
    let flags = ["--steps", "4", "--eval-interval", "2", "--compare-full", "--full-lr", "3e-4"];
    let out = lora_train(&base, &data, &adapter, &flags);
    assert_ok(&out);
    let err = stderr(&out);
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    let full = line["full_val_loss"].as_f64().expect("full_val_loss");
    assert!(full.is_finite() && full != line["adapter_val_loss"].as_f64().unwrap(), "{line}");
    assert_eq!(line["full_learning_rate"].as_f64().unwrap() as f32, 3e-4);
    // Every parameter trained: the base's count, far more than the adapter's.
    let params = line["full_trainable_params"].as_u64().unwrap();
    assert!(params > 10 * line["adapter_file_bytes"].as_u64().unwrap() / 4, "{line}");
    // The same evaluations as the adapter run (steps 2 and 4), and nothing saved for it.
    assert_eq!(steps_of(&err, "full   ", "  train"), vec![2, 4], "{err}");
    let without = lora_train(&base, &data, &base.join("adapters").join("plain"), &["--steps", "2"]);
    assert_ok(&without);
    let line: serde_json::Value = serde_json::from_slice(&without.stdout).unwrap();
    assert!(line["full_val_loss"].is_null());
}
