//! Which browser checkpoint store the worker uses: the page's choice (`auto`: OPFS, else
//! IndexedDB; `?storage=idb` forces IndexedDB; `memory` keeps nothing across reloads),
//! opened through `tinygpt_ckpt::web::WebStorage`.

use tinygpt_ckpt::web::WebStorage;

use crate::protocol::{StorageChoice, StorageKind};

/// The OPFS directory and the IndexedDB database checkpoints live in.
pub const STORE_NAME: &str = "tinygpt-checkpoints";

/// Opens the storage `choice` asks for: the store (`None` when nothing could be opened),
/// and a note saying why the preferred one was not used, if it was not.
pub async fn open(choice: StorageChoice) -> (Option<WebStorage>, Option<String>) {
    let opened = match choice {
        StorageChoice::Memory => Ok((WebStorage::memory(), None)),
        StorageChoice::Idb => WebStorage::indexed_db(STORE_NAME).await.map(|s| (s, None)),
        StorageChoice::Opfs => WebStorage::opfs(STORE_NAME).await.map(|s| (s, None)),
        StorageChoice::Auto => WebStorage::open_noting_fallback(STORE_NAME).await,
    };
    match opened {
        Ok((store, passed_over)) => (Some(store), passed_over.map(|e| e.to_string())),
        Err(e) => (None, Some(e.to_string())),
    }
}

/// The protocol's name for `store`.
pub fn kind(store: &WebStorage) -> StorageKind {
    match store {
        WebStorage::Opfs(_) => StorageKind::Opfs,
        WebStorage::Idb(_) => StorageKind::Indexeddb,
        WebStorage::Memory(_) => StorageKind::Memory,
    }
}
