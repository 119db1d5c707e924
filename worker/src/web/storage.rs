//! The browser checkpoint storage behind one type: whichever store could be opened.
//!
//! `Storage` has async methods, so it is not object-safe; an enum delegating to the
//! concrete stores lets the worker pick one at run time (`auto`: OPFS, else IndexedDB;
//! `?storage=idb` forces IndexedDB; `memory` keeps nothing across reloads).

use tinygpt_ckpt::web::{IdbStorage, OpfsStorage};
use tinygpt_ckpt::{BlobInfo, MemoryStorage, Result, Storage};

use crate::protocol::{StorageChoice, StorageKind};

/// The OPFS directory and the IndexedDB database checkpoints live in.
pub const STORE_NAME: &str = "tinygpt-checkpoints";

#[derive(Debug)]
pub enum BrowserStorage {
    Opfs(OpfsStorage),
    Idb(IdbStorage),
    Memory(MemoryStorage),
}

/// Opens the storage `choice` asks for: the store and its kind (`None` when nothing could
/// be opened), and a note saying why the preferred one was not used, if it was not.
pub async fn open(choice: StorageChoice) -> (Option<(BrowserStorage, StorageKind)>, Option<String>) {
    let memory = || (BrowserStorage::Memory(MemoryStorage::with_label("memory:")), StorageKind::Memory);
    match choice {
        StorageChoice::Memory => (Some(memory()), None),
        StorageChoice::Idb => match IdbStorage::open(STORE_NAME).await {
            Ok(s) => (Some((BrowserStorage::Idb(s), StorageKind::Indexeddb)), None),
            Err(e) => (None, Some(format!("IndexedDB: {e}"))),
        },
        StorageChoice::Auto | StorageChoice::Opfs => match OpfsStorage::open(STORE_NAME).await {
            Ok(s) => (Some((BrowserStorage::Opfs(s), StorageKind::Opfs)), None),
            Err(opfs) if choice == StorageChoice::Auto => match IdbStorage::open(STORE_NAME).await {
                Ok(s) => {
                    (Some((BrowserStorage::Idb(s), StorageKind::Indexeddb)), Some(format!("OPFS: {opfs}")))
                }
                Err(idb) => (None, Some(format!("OPFS: {opfs}; IndexedDB: {idb}"))),
            },
            Err(opfs) => (None, Some(format!("OPFS: {opfs}"))),
        },
    }
}

macro_rules! delegate {
    ($self:ident, $s:ident => $call:expr) => {
        match $self {
            BrowserStorage::Opfs($s) => $call,
            BrowserStorage::Idb($s) => $call,
            BrowserStorage::Memory($s) => $call,
        }
    };
}

impl Storage for BrowserStorage {
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
