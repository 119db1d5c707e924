//! Browser storage (wasm32 only): OPFS and IndexedDB stores, the fallback between them
//! (or memory, keeping nothing), and the storage quota.
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
use crate::memory::MemoryStorage;
use crate::store::{BlobInfo, Storage};

/// One browser store chosen at run time (`Storage` has async methods, so it is not
/// object-safe; this enum delegates instead): OPFS where available, else IndexedDB, or
/// memory for a session that should keep nothing once the tab closes.
#[derive(Debug)]
pub enum WebStorage {
    Opfs(OpfsStorage),
    Idb(IdbStorage),
    Memory(MemoryStorage),
}

impl WebStorage {
    /// Opens OPFS directory `name`, or, where OPFS is unavailable (old browsers, some
    /// private modes), IndexedDB database `name`.
    pub async fn open(name: &str) -> Result<Self> {
        Ok(Self::open_noting_fallback(name).await?.0)
    }

    /// [`WebStorage::open`], also returning why OPFS was passed over when it fell back to
    /// IndexedDB, so a page can say why its checkpoints are not where it expects them.
    pub async fn open_noting_fallback(name: &str) -> Result<(Self, Option<CkptError>)> {
        let opfs = OpfsStorage::open(name).await;
        Self::or_indexed_db(opfs, name).await
    }

    /// `opfs` if it opened, else IndexedDB with the OPFS error; if neither opened, one error
    /// naming both reasons.
    async fn or_indexed_db(opfs: Result<OpfsStorage>, name: &str) -> Result<(Self, Option<CkptError>)> {
        let opfs_error = match opfs {
            Ok(store) => return Ok((WebStorage::Opfs(store), None)),
            Err(e) => e,
        };
        match IdbStorage::open(name).await {
            Ok(store) => Ok((WebStorage::Idb(store), Some(opfs_error))),
            Err(idb_error) => Err(CkptError::Unavailable {
                what: "browser storage".into(),
                reason: format!("OPFS: {opfs_error}; IndexedDB: {idb_error}"),
            }),
        }
    }

    /// OPFS directory `name` only, with no fallback.
    pub async fn opfs(name: &str) -> Result<Self> {
        Ok(WebStorage::Opfs(OpfsStorage::open(name).await?))
    }

    /// IndexedDB database `name` only, even where OPFS works (to use or test that path).
    pub async fn indexed_db(name: &str) -> Result<Self> {
        Ok(WebStorage::Idb(IdbStorage::open(name).await?))
    }

    /// A store in this tab's memory: nothing survives a reload. Keys read as `memory:<key>`.
    pub fn memory() -> Self {
        WebStorage::Memory(MemoryStorage::with_label("memory:"))
    }

    /// `"opfs"`, `"indexeddb"` or `"memory"`.
    pub fn kind(&self) -> &'static str {
        match self {
            WebStorage::Opfs(_) => "opfs",
            WebStorage::Idb(_) => "indexeddb",
            WebStorage::Memory(_) => "memory",
        }
    }
}

macro_rules! delegate {
    ($self:ident, $s:ident => $call:expr) => {
        match $self {
            WebStorage::Opfs($s) => $call,
            WebStorage::Idb($s) => $call,
            WebStorage::Memory($s) => $call,
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
        let (store, why) = WebStorage::or_indexed_db(no_opfs, "ckpt-fallback-test").await.unwrap();
        assert_eq!(store.kind(), "indexeddb");
        assert!(why.is_some_and(|e| e.to_string().contains("SecurityError")), "the OPFS error is kept");
        store.put("a/b.json", b"{}").await.unwrap();
        assert_eq!(store.get("a/b.json").await.unwrap().as_deref(), Some(&b"{}"[..]));
        store.delete("a/").await.unwrap();
        assert!(store.list("").await.unwrap().is_empty());
    }

    #[wasm_bindgen_test]
    async fn each_store_can_be_chosen_and_says_its_kind() {
        let idb = WebStorage::indexed_db("ckpt-forced-idb-test").await.unwrap();
        assert_eq!(idb.kind(), "indexeddb", "forced even where OPFS opens");
        let (auto, why) = WebStorage::open_noting_fallback("ckpt-auto-test").await.unwrap();
        assert_eq!((auto.kind(), why.is_none()), ("opfs", true), "Chromium has OPFS: {why:?}");

        let memory = WebStorage::memory();
        assert_eq!(memory.kind(), "memory");
        memory.put("run/x.json", b"[1]").await.unwrap();
        assert_eq!(memory.get("run/x.json").await.unwrap().as_deref(), Some(&b"[1]"[..]));
        assert_eq!(memory.location("run/x.json"), "memory:run/x.json");
        assert!(WebStorage::memory().list("").await.unwrap().is_empty(), "each memory store starts empty");
    }
}
