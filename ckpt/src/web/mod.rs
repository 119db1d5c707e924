//! Browser storage (wasm32 only): OPFS and IndexedDB stores, the fallback between them,
//! and the storage quota.
//!
//! ```ignore
//! let storage = WebStorage::open("tinygpt-checkpoints").await?; // OPFS, else IndexedDB
//! let persisted = request_persistence().await;                  // ask once, early
//! let store = CheckpointStore::new(storage);
//! match store.save(&ckpt).await {
//!     Err(CkptError::QuotaExceeded { needed_bytes }) => { /* tell the user; the previous checkpoint is intact */ }
//!     other => { other?; }
//! }
//! ```

mod idb;
mod js;
mod opfs;
mod quota;

pub use idb::IdbStorage;
pub use opfs::OpfsStorage;
pub use quota::{estimate, request_persistence, StorageEstimate};

use crate::error::{CkptError, Result};
use crate::store::{BlobInfo, Storage};

/// Whichever browser store could be opened: OPFS where available, else IndexedDB.
#[derive(Debug)]
pub enum WebStorage {
    Opfs(OpfsStorage),
    Idb(IdbStorage),
}

impl WebStorage {
    /// Opens OPFS directory `name`, or, where OPFS is unavailable (old browsers, some
    /// private modes), IndexedDB database `name`.
    pub async fn open(name: &str) -> Result<Self> {
        let opfs = OpfsStorage::open(name).await;
        Self::or_indexed_db(opfs, name).await
    }

    /// `opfs` if it opened, else IndexedDB; if neither, one error naming both reasons.
    async fn or_indexed_db(opfs: Result<OpfsStorage>, name: &str) -> Result<Self> {
        let opfs_error = match opfs {
            Ok(store) => return Ok(WebStorage::Opfs(store)),
            Err(e) => e,
        };
        match IdbStorage::open(name).await {
            Ok(store) => Ok(WebStorage::Idb(store)),
            Err(idb_error) => Err(CkptError::Unavailable {
                what: "browser storage".into(),
                reason: format!("OPFS: {opfs_error}; IndexedDB: {idb_error}"),
            }),
        }
    }

    /// `"opfs"` or `"indexeddb"`.
    pub fn kind(&self) -> &'static str {
        match self {
            WebStorage::Opfs(_) => "opfs",
            WebStorage::Idb(_) => "indexeddb",
        }
    }
}

macro_rules! delegate {
    ($self:ident, $s:ident => $call:expr) => {
        match $self {
            WebStorage::Opfs($s) => $call,
            WebStorage::Idb($s) => $call,
        }
    };
}

impl Storage for WebStorage {
    fn location(&self, key: &str) -> String {
        delegate!(self, s => s.location(key))
    }

    async fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        delegate!(self, s => s.put(key, bytes).await)
    }

    async fn put_atomic(&self, key: &str, bytes: &[u8]) -> Result<()> {
        delegate!(self, s => s.put_atomic(key, bytes).await)
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        delegate!(self, s => s.get(key).await)
    }

    async fn list(&self, prefix: &str) -> Result<Vec<BlobInfo>> {
        delegate!(self, s => s.list(prefix).await)
    }

    async fn delete(&self, key: &str) -> Result<()> {
        delegate!(self, s => s.delete(key).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_bindgen_test::*;

    wasm_bindgen_test_configure!(run_in_browser);

    #[wasm_bindgen_test]
    async fn without_opfs_the_same_api_falls_back_to_indexed_db() {
        let no_opfs =
            Err(CkptError::Unavailable { what: "OPFS".into(), reason: "SecurityError: denied".into() });
        let store = WebStorage::or_indexed_db(no_opfs, "ckpt-fallback-test").await.unwrap();
        assert_eq!(store.kind(), "indexeddb");
        store.put("a/b.json", b"{}").await.unwrap();
        assert_eq!(store.get("a/b.json").await.unwrap().as_deref(), Some(&b"{}"[..]));
        store.delete("a/").await.unwrap();
        assert!(store.list("").await.unwrap().is_empty());
    }
}
