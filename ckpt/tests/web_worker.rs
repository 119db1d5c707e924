//! Browser stores in a dedicated worker, where OPFS uses sync access handles, under
//! wasm-bindgen-test in headless Chromium; with a save/load timing of the `large` preset.
#![cfg(target_arch = "wasm32")]

mod common;
mod web_common;

use tinygpt_ckpt::web::{IdbStore, OpfsStore, WebStore};
use tinygpt_ckpt::{BlobStore, Checkpoint, CheckpointStore};
use tinygpt_model::Preset;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_dedicated_worker);

#[wasm_bindgen_test]
async fn opfs_with_sync_access_handles_round_trip() {
    let opfs = OpfsStore::open("ckpt-worker-opfs").await.unwrap();
    assert!(opfs.uses_sync_access_handles());
    web_common::round_trip(&opfs).await;
}

#[wasm_bindgen_test]
async fn opfs_with_sync_access_handles_interrupted_saves() {
    web_common::interrupted_saves(&OpfsStore::open("ckpt-worker-opfs-crash").await.unwrap()).await;
}

#[wasm_bindgen_test]
async fn indexed_db_in_a_worker() {
    let idb = IdbStore::open("ckpt-worker-idb").await.unwrap();
    web_common::round_trip(&idb).await;
    web_common::quota_exceeded(&idb).await;
}

async fn time_save_load<S: BlobStore>(kind: &str, storage: &S, ckpt: &Checkpoint) {
    web_common::clear(storage).await;
    let store = CheckpointStore::new(storage);
    let t = web_common::now_ms();
    let bytes = store.save(ckpt).await.unwrap().bytes;
    let save_ms = web_common::now_ms() - t;
    let t = web_common::now_ms();
    let back = store.load_latest().await.unwrap();
    let load_ms = web_common::now_ms() - t;
    assert_eq!(back.weights.len(), ckpt.weights.len());
    let line = format!(
        "{{\"store\":\"{kind}\",\"preset\":\"large\",\"bytes\":{bytes},\"save_ms\":{save_ms:.1},\"load_ms\":{load_ms:.1},\"save_bytes_per_s\":{},\"load_bytes_per_s\":{}}}",
        (bytes as f64 / save_ms * 1e3) as u64,
        (bytes as f64 / load_ms * 1e3) as u64
    );
    console_log!("{line}");
    web_common::clear(storage).await;
}

#[wasm_bindgen_test]
async fn large_preset_save_and_load_timing() {
    let config = Preset::by_name("large").unwrap().model;
    let ckpt = common::checkpoint_for(config, 100, 1);
    let auto = WebStore::open("ckpt-worker-bench").await.unwrap();
    assert_eq!(auto.kind(), "opfs");
    time_save_load("opfs-sync-access", &auto, &ckpt).await;
    time_save_load("indexeddb", &IdbStore::open("ckpt-worker-bench-idb").await.unwrap(), &ckpt).await;
}
