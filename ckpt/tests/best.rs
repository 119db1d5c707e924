//! The best generation (lowest validation loss at its own step): best.json names it,
//! pruning keeps it, a corrupt best.json is refused by name and recomputed.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use common::{assert_same, checkpoint};
use tinygpt_ckpt::{BlobStore, Checkpoint, CheckpointStore, DirStore, MemoryStore, BEST_POINTER};
use tinygpt_tensor::block_on;

/// `checkpoint(step, seed)` whose validation loss at its own step is `val`.
fn with_val(step: usize, val: f32) -> Checkpoint {
    let mut ckpt = checkpoint(step, step as u64);
    ckpt.loss_history.last_mut().unwrap().val_loss = Some(val);
    ckpt
}

fn generations<S: BlobStore>(storage: &S) -> Vec<String> {
    let mut ids: Vec<String> = block_on(storage.list(""))
        .unwrap()
        .into_iter()
        .filter_map(|b| Some(b.key.split_once('/')?.0.to_string()))
        .collect();
    ids.dedup();
    ids
}

fn best_survives_pruning<S: BlobStore>(storage: S) {
    let store = CheckpointStore::new(&storage);
    let vals = [(10, 2.0), (20, 1.0), (30, 1.5), (40, 1.8), (50, 1.9)];
    for (step, val) in vals {
        let report = block_on(store.save(&with_val(step, val))).unwrap();
        assert_eq!(report.best, step <= 20, "step {step}");
    }
    // The newest 2 and the best.
    assert_eq!(generations(&storage), ["gen-000002", "gen-000004", "gen-000005"]);
    let best = block_on(store.load_best()).unwrap();
    assert_eq!((best.best.id.as_str(), best.best.step, best.best.val_loss), ("gen-000002", 20, 1.0));
    assert_eq!(best.fallback, None);
    assert_same(&best.checkpoint, &with_val(20, 1.0));
    let listed = block_on(store.list()).unwrap();
    let marked: Vec<_> = listed.iter().filter(|g| g.best).map(|g| g.id.as_str()).collect();
    assert_eq!(marked, ["gen-000002"]);

    // A new best moves the pointer; the old best is pruned like any old generation.
    let report = block_on(store.save(&with_val(60, 0.5))).unwrap();
    assert!(report.best);
    assert_eq!(report.pruned, ["gen-000002", "gen-000004"]);
    assert_eq!(block_on(store.load_best()).unwrap().best.id, "gen-000006");
    // A save without an evaluation at its step never becomes the best.
    let mut no_eval = checkpoint(70, 7);
    no_eval.loss_history.last_mut().unwrap().val_loss = None;
    assert!(!block_on(store.save(&no_eval)).unwrap().best);
    assert!(block_on(store.save(&with_val(80, 0.1))).unwrap().best);
}

#[test]
fn memory_store_keeps_the_best_generation_through_pruning() {
    best_survives_pruning(MemoryStore::new());
}

#[test]
fn native_store_keeps_the_best_generation_through_pruning() {
    let tmp = tempfile::tempdir().unwrap();
    best_survives_pruning(DirStore::open(tmp.path().join("run")).unwrap());
    assert!(tmp.path().join("run").join(BEST_POINTER).is_file());
}

#[test]
fn a_corrupt_best_json_is_refused_by_name_and_recomputed_from_verified_generations() {
    let tmp = tempfile::tempdir().unwrap();
    let storage = DirStore::open(tmp.path()).unwrap();
    let store = CheckpointStore::new(&storage);
    for (step, val) in [(10, 2.0), (20, 1.0), (30, 1.5)] {
        block_on(store.save(&with_val(step, val))).unwrap();
    }
    let path = tmp.path().join(BEST_POINTER);
    let good = std::fs::read_to_string(&path).unwrap();

    // Garbage.
    std::fs::write(&path, b"{\"format_version\": 1, \"be").unwrap();
    let loaded = block_on(store.load_best()).unwrap();
    assert_eq!(loaded.best.id, "gen-000002");
    let why = loaded.fallback.expect("says why best.json was not used");
    assert!(why.contains(&path.display().to_string()), "{why}");

    // Valid JSON that no longer matches its generation (the recorded checksum).
    std::fs::write(&path, good.replace("gen-000002", "gen-000003")).unwrap();
    let err = block_on(store.verified_best()).unwrap_err().to_string();
    assert!(err.contains("best.json") && err.contains("sha256"), "{err}");
    assert!(block_on(store.list()).unwrap().iter().all(|g| !g.best), "a corrupt best is not marked");

    // A corrupt best generation: best.json is refused, the best intact one is used.
    std::fs::write(&path, &good).unwrap();
    let weights = tmp.path().join("gen-000002/weights.f32");
    let mut bytes = std::fs::read(&weights).unwrap();
    bytes[0] ^= 1;
    std::fs::write(&weights, &bytes).unwrap();
    let loaded = block_on(store.load_best()).unwrap();
    assert_eq!(loaded.best.id, "gen-000003");
    assert!(loaded.fallback.unwrap().contains("gen-000002"));

    // The next save writes a verified best.json again.
    block_on(store.save(&with_val(40, 1.7))).unwrap();
    let best = block_on(store.verified_best()).unwrap().unwrap();
    assert_eq!(best.id, "gen-000003");
}

#[test]
fn without_any_evaluation_there_is_no_best() {
    let storage = MemoryStore::new();
    let store = CheckpointStore::new(&storage);
    block_on(store.save(&checkpoint(5, 1))).unwrap();
    assert!(block_on(storage.get(BEST_POINTER)).unwrap().is_none());
    let err = block_on(store.load_best()).unwrap_err().to_string();
    assert!(err.contains("no best generation") && err.contains("best.json is missing"), "{err}");
}

#[test]
fn deleting_the_best_generation_removes_best_json() {
    let storage = MemoryStore::new();
    let store = CheckpointStore::new(&storage).with_keep(3);
    block_on(store.save(&with_val(10, 1.0))).unwrap();
    block_on(store.save(&with_val(20, 2.0))).unwrap();
    block_on(store.delete("gen-000001")).unwrap();
    assert!(block_on(storage.get(BEST_POINTER)).unwrap().is_none());
    assert_eq!(block_on(store.load_best()).unwrap().best.id, "gen-000002");
}
