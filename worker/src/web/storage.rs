//! The browser's stores for the router ([`Storage`]): OPFS directories and IndexedDB
//! databases through `tinygpt_ckpt::web::WebStore`, or memory; the router chooses which.

use tinygpt_ckpt::web::WebStore;
use tinygpt_ckpt::CkptError;

use crate::protocol::StoreKind;
use crate::router::Storage;

/// OPFS, IndexedDB and memory stores, and the quota (`navigator.storage`).
pub struct BrowserStorage;

impl Storage for BrowserStorage {
    type Store = WebStore;

    async fn open(&self, kind: StoreKind, name: &str) -> Result<WebStore, CkptError> {
        match kind {
            StoreKind::Opfs => WebStore::opfs(name).await,
            StoreKind::Indexeddb => WebStore::indexed_db(name).await,
            StoreKind::Memory => Ok(WebStore::memory()),
            StoreKind::None => {
                Err(CkptError::Unavailable { what: name.into(), reason: "no storage was asked for".into() })
            }
        }
    }

    /// `navigator.storage.estimate()`.
    async fn estimate(&self) -> Option<(f64, f64)> {
        let e = tinygpt_ckpt::web::estimate().await.ok()?;
        Some((e.quota_bytes as f64, e.usage_bytes as f64))
    }
}
