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
//! leaves a run locked. Which locks this worker holds is kept here alone ([`Locks`]): the
//! platform ([`LockManager`]; `www/worker.js` over `navigator.locks` in the browser) only
//! grants a lock and lets it go when its handle is dropped.

use std::cell::RefCell;
use std::collections::BTreeMap;

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

/// Where locks come from: the browser's Web Locks, or a test's stand-in for several tabs.
///
/// Futures are not required to be `Send`: browser handles are bound to their thread.
#[allow(async_fn_in_trait)]
pub trait LockManager {
    /// A granted lock; dropping it lets the lock go.
    type Lock;

    /// Asks for lock `name`: `Some` once it is granted, `None` when `wait` is false and
    /// another context holds it. A platform that cannot coordinate contexts (no Web Locks,
    /// or Web Locks that fail) grants every lock: training still works.
    async fn request(&self, name: &str, wait: bool) -> Option<Self::Lock>;
}

/// No coordination: every lock is granted at once (one context alone).
#[derive(Clone, Copy, Debug, Default)]
pub struct Unshared;

impl LockManager for Unshared {
    type Lock = ();

    async fn request(&self, _name: &str, _wait: bool) -> Option<()> {
        Some(())
    }
}

/// The locks this worker holds, by name, over a [`LockManager`].
pub struct Locks<M: LockManager> {
    manager: M,
    held: RefCell<BTreeMap<String, M::Lock>>,
}

impl<M: LockManager> Locks<M> {
    pub fn new(manager: M) -> Self {
        Locks { manager, held: RefCell::new(BTreeMap::new()) }
    }

    /// Holds lock `name`: true once held (at once when this worker holds it already), false
    /// when `wait` is false and another context holds it.
    pub async fn acquire(&self, name: &str, wait: bool) -> bool {
        if self.is_held(name) {
            return true;
        }
        // No borrow lives across the await: another call may look at the held locks.
        let Some(lock) = self.manager.request(name, wait).await else { return false };
        self.held.borrow_mut().insert(name.to_string(), lock);
        true
    }

    /// Lets lock `name` go (nothing when it is not held).
    pub fn release(&self, name: &str) {
        let lock = self.held.borrow_mut().remove(name);
        drop(lock);
    }

    pub fn is_held(&self, name: &str) -> bool {
        self.held.borrow().contains_key(name)
    }

    /// The names of the locks held now, sorted.
    pub fn held(&self) -> Vec<String> {
        self.held.borrow().keys().cloned().collect()
    }

    /// Lets every lock go but `keep` (called between calls, when no store write is in
    /// flight: only run locks are held then).
    pub fn release_all_but(&self, keep: Option<&str>) {
        let released: Vec<M::Lock> = {
            let mut held = self.held.borrow_mut();
            let names: Vec<String> = held.keys().filter(|n| Some(n.as_str()) != keep).cloned().collect();
            names.iter().filter_map(|n| held.remove(n)).collect()
        };
        // Dropped outside the borrow: a lock's release may call back into the platform.
        drop(released);
    }
}

#[cfg(test)]
mod tests {
    use tinygpt_model::Preset;
    use tinygpt_tensor::block_on;

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

    #[test]
    fn held_locks_are_kept_once_and_released_but_the_one_kept() {
        let locks = Locks::new(Unshared);
        assert!(block_on(locks.acquire("a", false)));
        assert!(block_on(locks.acquire("a", false)), "held already");
        assert!(block_on(locks.acquire("b", true)));
        assert_eq!(locks.held(), ["a", "b"]);
        locks.release_all_but(Some("b"));
        assert_eq!(locks.held(), ["b"]);
        locks.release("b");
        assert!(!locks.is_held("b"));
    }
}
