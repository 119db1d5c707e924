//! The browser checkpoint storage behind one type: whichever store could be opened.
//!
//! `Storage` has async methods, so it is not object-safe; an enum delegating to the
//! concrete stores lets the worker pick one at run time (`auto`: OPFS, else IndexedDB;
//! `?storage=idb` forces IndexedDB; `memory` keeps nothing across reloads).

use tinygpt_ckpt::{BlobInfo, MemoryStorage, Result, Storage};

#[derive(Debug)]
pub enum BrowserStorage {
    Memory(MemoryStorage),
}

macro_rules! delegate {
    ($self:ident, $s:ident => $call:expr) => {
        match $self {
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
