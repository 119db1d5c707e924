//! A save interrupted after any write — in memory and on disk — leaves the previous
//! checkpoint loadable and byte-for-byte intact; the next save cleans up.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::collections::BTreeMap;

use common::{assert_same, checkpoint};
use tinygpt_ckpt::{BlobStore, CheckpointStore, CkptError, DirStore, Fault, FaultyStore, MemoryStore};
use tinygpt_tensor::block_on;

/// Every blob of `storage`, read through the trait.
fn contents<S: BlobStore>(storage: &S) -> BTreeMap<String, Vec<u8>> {
    let blobs = block_on(storage.list("")).unwrap();
    blobs.into_iter().map(|b| (b.key.clone(), block_on(storage.get(&b.key)).unwrap().unwrap())).collect()
}

/// The blobs of generation `id` and the pointer.
fn committed(all: &BTreeMap<String, Vec<u8>>, id: &str) -> BTreeMap<String, Vec<u8>> {
    all.iter()
        .filter(|(k, _)| k.starts_with(id) || *k == "latest.json")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
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

/// Saves two generations, then a third whose `n`-th write fails with `fault`, for every
/// `n`; checks what must survive. `fresh` gives an empty store for each attempt.
fn interrupt_every_write<S: BlobStore>(fresh: impl Fn() -> S, fault: Fault) {
    let (a1, a2, b, c) = (checkpoint(10, 1), checkpoint(20, 2), checkpoint(30, 3), checkpoint(40, 4));

    let storage = fresh();
    let store = CheckpointStore::new(&storage);
    block_on(store.save(&a1)).unwrap();
    block_on(store.save(&a2)).unwrap();
    let counting = FaultyStore::counting(&storage);
    let b_bytes = block_on(CheckpointStore::new(&counting).save(&b)).unwrap().bytes;
    // Writes 0..8 are the files, 8 flips the pointer, 9 flips best.json (b has the lowest
    // validation loss), 10 prunes gen-000001 (a delete, which a quota never refuses).
    assert_eq!(counting.writes(), 11);
    let pointer_bytes = contents(&storage)["latest.json"].len() as u64;
    let flip = 8;
    let best_flip = 9;
    let writes = if fault == Fault::QuotaExceeded { best_flip + 1 } else { 11 };

    for n in 0..writes {
        let storage = fresh();
        let store = CheckpointStore::new(&storage);
        block_on(store.save(&a1)).unwrap();
        block_on(store.save(&a2)).unwrap();
        let before = committed(&contents(&storage), "gen-000002/");

        let faulty = FaultyStore::new(&storage, fault, n);
        let err = block_on(CheckpointStore::new(&faulty).save(&b)).expect_err("the fault must surface");
        assert!(faulty.fired());

        if n <= flip {
            if fault == Fault::QuotaExceeded {
                let needed = if n < flip { b_bytes } else { pointer_bytes };
                assert!(
                    matches!(err, CkptError::QuotaExceeded { needed_bytes } if needed_bytes == needed),
                    "{err}"
                );
                assert!(
                    !generations(&storage).contains(&"gen-000003".to_string()),
                    "the partial save is removed"
                );
            }
            assert_same(&block_on(store.load_latest()).unwrap(), &a2);
            assert_same(&block_on(store.load("gen-000001")).unwrap(), &a1);
            let after = committed(&contents(&storage), "gen-000002/");
            assert_eq!(before, after, "write {n}: the previous checkpoint changed");
        } else if n == best_flip {
            // latest.json moved, best.json did not: the old best is kept and still verifies.
            assert!(matches!(err, CkptError::BestPointer { .. }), "{err}");
            assert_same(&block_on(store.load_latest()).unwrap(), &b);
            let best = block_on(store.load_best()).unwrap();
            assert_eq!(best.fallback, None, "best.json is intact");
            assert_same(&best.checkpoint, &a2);
        } else {
            // Both flips happened; only pruning failed.
            assert!(matches!(err, CkptError::Prune { .. }), "{err}");
            assert_same(&block_on(store.load_latest()).unwrap(), &b);
        }
        // best.json always names a generation that verifies: the old best or the new one.
        let best = block_on(store.load_best()).unwrap();
        assert_eq!(best.fallback, None, "write {n}: best.json must verify");
        assert_same(&best.checkpoint, if n > best_flip { &b } else { &a2 });

        let report = block_on(store.save(&c)).unwrap();
        assert_same(&block_on(store.load_latest()).unwrap(), &c);
        assert_same(&block_on(store.load_best()).unwrap().checkpoint, &c);
        let kept = generations(&storage);
        assert_eq!(kept.len(), 2, "write {n}: leftovers were not pruned: {kept:?}");
        assert_eq!(kept[1], report.id);
    }
}

#[test]
fn memory_crash_after_each_write() {
    interrupt_every_write(MemoryStore::new, Fault::Crash);
}

#[test]
fn memory_quota_exceeded_at_each_write() {
    interrupt_every_write(MemoryStore::new, Fault::QuotaExceeded);
}

/// [`interrupt_every_write`] over native stores, each in a fresh directory.
fn native_interrupt_every_write(fault: Fault) {
    let tmp = tempfile::tempdir().unwrap();
    let counter = std::cell::Cell::new(0);
    interrupt_every_write(
        || {
            counter.set(counter.get() + 1);
            DirStore::open(tmp.path().join(format!("run{}", counter.get()))).unwrap()
        },
        fault,
    );
}

#[test]
fn native_crash_after_each_write() {
    native_interrupt_every_write(Fault::Crash);
}

#[test]
fn native_quota_exceeded_at_each_write() {
    native_interrupt_every_write(Fault::QuotaExceeded);
}

#[test]
fn native_leftover_temp_files_are_ignored_and_pruned() {
    let tmp = tempfile::tempdir().unwrap();
    let storage = DirStore::open(tmp.path()).unwrap();
    let store = CheckpointStore::new(&storage);
    block_on(store.save(&checkpoint(10, 1))).unwrap();
    // What a kill between write and rename leaves: a temp file in a new generation, and
    // one next to the pointer.
    std::fs::create_dir(tmp.path().join("gen-000002")).unwrap();
    std::fs::write(tmp.path().join("gen-000002/.weights.f32.tmp"), b"partial").unwrap();
    std::fs::write(tmp.path().join(".latest.json.tmp"), b"{\"format_version\": 1, \"lat").unwrap();
    assert_same(&block_on(store.load_latest()).unwrap(), &checkpoint(10, 1));
    let report = block_on(store.save(&checkpoint(20, 2))).unwrap();
    assert_eq!(report.id, "gen-000003");
    assert_eq!(report.pruned, ["gen-000002"]);
    assert!(!tmp.path().join("gen-000002").exists());
}
