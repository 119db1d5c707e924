//! Browser storage (wasm32 only): OPFS and IndexedDB stores, the fallback between them
//! (or memory, keeping nothing), and the storage quota.
//!
//! ```ignore
//! let storage = WebStore::open("tinygpt-checkpoints").await?; // OPFS, else IndexedDB
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

pub use idb::IdbStore;
pub use opfs::OpfsStore;
pub use quota::{estimate, request_persistence, StorageEstimate};

use crate::error::{CkptError, Result};
use crate::fallback::opfs_else_indexed_db;
use crate::memory::MemoryStore;
use crate::store::{BlobInfo, BlobStore};

/// One browser store chosen at run time (`BlobStore` has async methods, so it is not
/// object-safe; this enum delegates instead): OPFS where available, else IndexedDB, or
/// memory for a session that should keep nothing once the tab closes.
#[derive(Debug)]
pub enum WebStore {
    /// The Origin Private File System.
    Opfs(OpfsStore),
    /// IndexedDB.
    Idb(IdbStore),
    /// Memory only: nothing survives the tab.
    Memory(MemoryStore),
}

impl WebStore {
    /// Opens OPFS directory `name`, or, where OPFS is unavailable (old browsers, some
    /// private modes), IndexedDB database `name`.
    pub async fn open(name: &str) -> Result<Self> {
        Ok(Self::open_noting_fallback(name).await?.0)
    }

    /// [`WebStore::open`], also returning why OPFS was passed over when it fell back to
    /// IndexedDB, so a page can say why its checkpoints are not where it expects them.
    pub async fn open_noting_fallback(name: &str) -> Result<(Self, Option<CkptError>)> {
        let opfs = OpfsStore::open(name).await;
        Self::or_indexed_db(opfs, name).await
    }

    /// `opfs` if it opened, else IndexedDB with the OPFS error; if neither opened, one error
    /// naming both reasons.
    async fn or_indexed_db(opfs: Result<OpfsStore>, name: &str) -> Result<(Self, Option<CkptError>)> {
        opfs_else_indexed_db(async { opfs.map(WebStore::Opfs) }, || async {
            IdbStore::open(name).await.map(WebStore::Idb)
        })
        .await
    }

    /// OPFS directory `name` only, with no fallback.
    pub async fn opfs(name: &str) -> Result<Self> {
        Ok(WebStore::Opfs(OpfsStore::open(name).await?))
    }

    /// IndexedDB database `name` only, even where OPFS works (to use or test that path).
    pub async fn indexed_db(name: &str) -> Result<Self> {
        Ok(WebStore::Idb(IdbStore::open(name).await?))
    }

    /// A store in this tab's memory: nothing survives a reload. Keys read as `memory:<key>`.
    pub fn memory() -> Self {
        WebStore::Memory(MemoryStore::with_label("memory:"))
    }

    /// `"opfs"`, `"indexeddb"` or `"memory"`.
    pub fn kind(&self) -> &'static str {
        match self {
            WebStore::Opfs(_) => "opfs",
            WebStore::Idb(_) => "indexeddb",
            WebStore::Memory(_) => "memory",
        }
    }
}

macro_rules! delegate {
    ($self:ident, $s:ident => $call:expr) => {
        match $self {
            WebStore::Opfs($s) => $call,
            WebStore::Idb($s) => $call,
            WebStore::Memory($s) => $call,
        }
    };
}

impl BlobStore for WebStore {
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
        let (store, why) = WebStore::or_indexed_db(no_opfs, "ckpt-fallback-test").await.unwrap();
        assert_eq!(store.kind(), "indexeddb");
        assert!(why.is_some_and(|e| e.to_string().contains("SecurityError")), "the OPFS error is kept");
        store.put("a/b.json", b"{}").await.unwrap();
        assert_eq!(store.get("a/b.json").await.unwrap().as_deref(), Some(&b"{}"[..]));
        store.delete("a/").await.unwrap();
        assert!(store.list("").await.unwrap().is_empty());
    }

    #[wasm_bindgen_test]
    async fn each_store_can_be_chosen_and_says_its_kind() {
        let idb = WebStore::indexed_db("ckpt-forced-idb-test").await.unwrap();
        assert_eq!(idb.kind(), "indexeddb", "forced even where OPFS opens");
        let (auto, why) = WebStore::open_noting_fallback("ckpt-auto-test").await.unwrap();
        assert_eq!((auto.kind(), why.is_none()), ("opfs", true), "Chromium has OPFS: {why:?}");

        let memory = WebStore::memory();
        assert_eq!(memory.kind(), "memory");
        memory.put("run/x.json", b"[1]").await.unwrap();
        assert_eq!(memory.get("run/x.json").await.unwrap().as_deref(), Some(&b"[1]"[..]));
        assert_eq!(memory.location("run/x.json"), "memory:run/x.json");
        assert!(WebStore::memory().list("").await.unwrap().is_empty(), "each memory store starts empty");
    }
}
