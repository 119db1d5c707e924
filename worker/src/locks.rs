//! Web Locks (`navigator.locks`) that keep two tabs of one origin from corrupting each
//! other's checkpoints. The tabs share one checkpoint store (OPFS or IndexedDB), so:
//!
//! - A run holds [`run_lock_name`] while it trains. A second tab that tries to train the
//!   same run (say, "Resume last run" on the run another tab is training) is refused with
//!   `runLocked`; once the first tab pauses, stops or closes, it may.
//! - An adapter run holds [`adapter_lock_name`] (one per adapter name) the same way.
//! - Every write to the store (save, delete, import) holds [`STORE_LOCK`], so two tabs'
//!   saves never interleave (the store supports one writer at a time).
//!
//! The browser drops a context's locks when it ends, so a closed or crashed tab never
//! leaves a run locked. This file only names the locks (tested natively); `web` holds them
//! through `www/worker.js`.

use tinygpt_model::ModelConfig;
use tinygpt_optim::TrainingConfig;

/// Held (waiting for it) around every write to the checkpoint store.
pub const STORE_LOCK: &str = "tinygpt-checkpoints/write";

/// The lock a run holds while training. A run is its model, its training config and its
/// text: the same three train the same weights, step for step, so they are one run
/// whether started fresh or resumed from any of its checkpoints.
pub fn run_lock_name(model: &ModelConfig, training: &TrainingConfig, dataset_id: &str) -> String {
    let configs = serde_json::to_string(&(model, training)).unwrap_or_default();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325; // FNV-1a
    for b in configs.bytes().chain(dataset_id.bytes()) {
        hash = (hash ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    format!("tinygpt-run/{}/{hash:016x}", model.model_name)
}

/// The lock an adapter run holds while training: one per adapter name, since every run of
/// that name saves into the same adapter in the shared store.
pub fn adapter_lock_name(name: &str) -> String {
    format!("tinygpt-adapter/{name}")
}

#[cfg(test)]
mod tests {
    use tinygpt_model::Preset;

    use super::*;

    #[test]
    fn one_run_one_name_and_another_run_another() {
        let tiny = Preset::by_name("tiny").unwrap().model;
        let training = TrainingConfig::default();
        let name = run_lock_name(&tiny, &training, "ab");
        assert_eq!(name, run_lock_name(&tiny.clone(), &training.clone(), "ab"));
        assert_ne!(name, run_lock_name(&tiny, &training, "cd"), "other text");
        assert_ne!(name, run_lock_name(&tiny, &TrainingConfig { seed: 1, ..training.clone() }, "ab"));
        assert!(name.starts_with("tinygpt-run/tinygpt-tiny/"), "{name}");
    }
}
