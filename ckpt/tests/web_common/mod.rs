//! Store tests shared by the page and the worker test binaries (wasm32 only): the same
//! checks as the native tests, awaited instead of blocked on.
#![allow(dead_code)]

use std::collections::BTreeMap;

use crate::common::{assert_same, checkpoint, digest, GOLDEN_LAYOUT};
use tinygpt_ckpt::{BlobStore, CheckpointStore, CkptError, Fault, FaultyStore};

/// Removes everything, so a test starts from an empty store.
pub async fn clear<S: BlobStore>(storage: &S) {
    let mut groups: Vec<String> = Vec::new();
    for blob in storage.list("").await.unwrap() {
        match blob.key.split_once('/') {
            Some((group, _)) => groups.push(format!("{group}/")),
            None => storage.delete(&blob.key).await.unwrap(),
        }
    }
    groups.dedup();
    for group in groups {
        storage.delete(&group).await.unwrap();
    }
    assert!(storage.list("").await.unwrap().is_empty());
}

pub async fn contents<S: BlobStore>(storage: &S) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for blob in storage.list("").await.unwrap() {
        let bytes = storage.get(&blob.key).await.unwrap().unwrap();
        assert_eq!(bytes.len() as u64, blob.bytes, "{}", blob.key);
        out.insert(blob.key, bytes);
    }
    out
}

/// Save, load, list, keep 2, and the very bytes the native build writes.
pub async fn round_trip<S: BlobStore>(storage: &S) {
    clear(storage).await;
    let store = CheckpointStore::new(storage);
    let ckpt = checkpoint(25, 1);
    let report = store.save(&ckpt).await.unwrap();
    assert_eq!(report.id, "gen-000001");
    assert_same(&store.load_latest().await.unwrap(), &ckpt);
    assert_eq!(digest(&contents(storage).await), GOLDEN_LAYOUT, "the browser wrote other bytes than native");

    for step in [30, 35, 40] {
        store.save(&checkpoint(step, step as u64)).await.unwrap();
    }
    let list = store.list().await.unwrap();
    let ids: Vec<_> = list.iter().map(|g| (g.id.as_str(), g.step, g.latest)).collect();
    assert_eq!(ids, [("gen-000003", 35, false), ("gen-000004", 40, true)]);
    assert_same(&store.load("gen-000003").await.unwrap(), &checkpoint(35, 35));
    let weights_only = checkpoint(45, 4).weights_only();
    store.save(&weights_only).await.unwrap();
    assert_same(&store.load_latest().await.unwrap(), &weights_only);
    assert!(matches!(store.delete("gen-000005").await, Err(CkptError::DeleteLatest { .. })));
    store.delete("gen-000004").await.unwrap();
    assert_eq!(store.list().await.unwrap().len(), 1);
}

/// A crash after each write of a save leaves the previous checkpoint loadable and
/// intact; the next save prunes the leftovers.
pub async fn interrupted_saves<S: BlobStore>(storage: &S) {
    let (a1, a2, b, c) = (checkpoint(10, 1), checkpoint(20, 2), checkpoint(30, 3), checkpoint(40, 4));
    // Writes 0..8 are the files, 8 flips latest.json, 9 flips best.json (b has the lowest
    // validation loss), 10 prunes gen-000001 (as in the native interrupted-save test).
    for n in 0..11 {
        clear(storage).await;
        let store = CheckpointStore::new(storage);
        store.save(&a1).await.unwrap();
        store.save(&a2).await.unwrap();
        let before: BTreeMap<_, _> =
            contents(storage).await.into_iter().filter(|(k, _)| !k.starts_with("gen-000001/")).collect();
        let faulty = FaultyStore::new(storage, Fault::Crash, n);
        let err = CheckpointStore::new(&faulty).save(&b).await.expect_err("the fault must surface");
        if n <= 8 {
            assert_same(&store.load_latest().await.unwrap(), &a2);
            let after: BTreeMap<_, _> = contents(storage)
                .await
                .into_iter()
                .filter(|(k, _)| !k.starts_with("gen-000001/") && !k.starts_with("gen-000003/"))
                .collect();
            assert_eq!(before, after, "write {n}: the previous checkpoint changed");
        } else if n == 9 {
            // latest.json moved, best.json did not: the old best is kept and still verifies.
            assert!(matches!(err, CkptError::BestPointer { .. }), "{err}");
            assert_same(&store.load_latest().await.unwrap(), &b);
        } else {
            assert!(matches!(err, CkptError::Prune { .. }), "{err}");
            assert_same(&store.load_latest().await.unwrap(), &b);
        }
        let best = store.load_best().await.unwrap();
        assert_eq!(best.fallback, None, "write {n}: best.json must verify");
        assert_same(&best.checkpoint, if n > 9 { &b } else { &a2 });
        store.save(&c).await.unwrap();
        assert_same(&store.load_latest().await.unwrap(), &c);
        assert_same(&store.load_best().await.unwrap().checkpoint, &c);
        let mut groups: Vec<String> = storage
            .list("")
            .await
            .unwrap()
            .into_iter()
            .filter_map(|b| Some(b.key.split_once('/')?.0.to_string()))
            .collect();
        groups.dedup();
        assert_eq!(groups.len(), 2, "write {n}: {groups:?}");
    }
}

/// A full store: the save fails with the bytes the generation needs, removes its partial
/// files and leaves the previous checkpoint.
pub async fn quota_exceeded<S: BlobStore>(storage: &S) {
    clear(storage).await;
    let store = CheckpointStore::new(storage);
    store.save(&checkpoint(10, 1)).await.unwrap();
    let faulty = FaultyStore::new(storage, Fault::QuotaExceeded, 4);
    let err = CheckpointStore::new(&faulty).save(&checkpoint(20, 2)).await.unwrap_err();
    let CkptError::QuotaExceeded { needed_bytes } = err else { panic!("{err}") };
    let reference = tinygpt_ckpt::MemoryStore::new();
    let expected = CheckpointStore::new(&reference).save(&checkpoint(20, 2)).await.unwrap().bytes;
    assert_eq!(needed_bytes, expected);
    assert!(!storage.list("").await.unwrap().iter().any(|b| b.key.starts_with("gen-000002")));
    assert_same(&store.load_latest().await.unwrap(), &checkpoint(10, 1));
}

/// Milliseconds since an arbitrary origin (`performance.now()`).
pub fn now_ms() -> f64 {
    let performance = js_sys::Reflect::get(&js_sys::global(), &"performance".into()).unwrap();
    let now: js_sys::Function = js_sys::Reflect::get(&performance, &"now".into()).unwrap().into();
    now.call0(&performance).unwrap().as_f64().unwrap()
}
