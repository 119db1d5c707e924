//! Browser stores in a page (OPFS through `createWritable`, IndexedDB), under
//! wasm-bindgen-test in headless Chromium.
#![cfg(target_arch = "wasm32")]

mod common;
mod web_common;

use common::{checkpoint, GOLDEN_EXPORT};
use sha2::{Digest, Sha256};
use tinygpt_ckpt::web::{estimate, request_persistence, IdbStore, OpfsStore, WebStore};
use tinygpt_ckpt::{export_safetensors, import_safetensors, CheckpointStore, LoadOptions};
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

#[wasm_bindgen_test]
async fn opfs_round_trip() {
    let opfs = OpfsStore::open("ckpt-page-opfs").await.unwrap();
    assert!(!opfs.uses_sync_access_handles(), "a page has no sync access handles");
    web_common::round_trip(&opfs).await;
}

#[wasm_bindgen_test]
async fn indexed_db_round_trip() {
    web_common::round_trip(&IdbStore::open("ckpt-page-idb").await.unwrap()).await;
}

#[wasm_bindgen_test]
async fn opfs_interrupted_saves() {
    web_common::interrupted_saves(&OpfsStore::open("ckpt-page-opfs-crash").await.unwrap()).await;
}

#[wasm_bindgen_test]
async fn indexed_db_interrupted_saves() {
    web_common::interrupted_saves(&IdbStore::open("ckpt-page-idb-crash").await.unwrap()).await;
}

#[wasm_bindgen_test]
async fn quota_errors_leave_the_previous_checkpoint() {
    web_common::quota_exceeded(&OpfsStore::open("ckpt-page-opfs-quota").await.unwrap()).await;
    web_common::quota_exceeded(&IdbStore::open("ckpt-page-idb-quota").await.unwrap()).await;
}

#[wasm_bindgen_test]
async fn web_storage_prefers_opfs_and_reports_the_quota() {
    let storage = WebStore::open("ckpt-page-auto").await.unwrap();
    assert_eq!(storage.kind(), "opfs");
    let persisted = request_persistence().await.unwrap();
    CheckpointStore::new(&storage).save(&checkpoint(10, 1)).await.unwrap();
    let e = estimate().await.unwrap();
    assert!(e.quota_bytes > 0 && e.usage_bytes <= e.quota_bytes, "{e:?}");
    console_log!("persist() granted: {persisted}; estimate: {e:?}");
}

#[wasm_bindgen_test]
fn safetensors_export_is_the_same_bytes_as_native() {
    let bytes = export_safetensors(&checkpoint(25, 1), true).unwrap();
    let sha: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(sha, GOLDEN_EXPORT);
    common::assert_same(&import_safetensors(&bytes, &LoadOptions::default()).unwrap(), &checkpoint(25, 1));
}
