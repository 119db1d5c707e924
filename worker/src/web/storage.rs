//! Which browser checkpoint store the worker uses: the page's choice (`auto`: OPFS, else
//! IndexedDB; `?storage=idb` forces IndexedDB; `memory` keeps nothing across reloads),
//! opened through `tinygpt_ckpt::web::WebStore`.

use tinygpt_ckpt::web::WebStore;

use crate::protocol::{StoreChoice, StoreKind};

/// The OPFS directory and the IndexedDB database checkpoints live in.
pub const STORE_NAME: &str = "tinygpt-checkpoints";

/// The OPFS directory and the IndexedDB database LoRA adapters live in (all of them,
/// whatever their base: see `tinygpt_ckpt::AdapterShelf`).
pub const ADAPTER_STORE_NAME: &str = "tinygpt-adapters";

/// Opens the storage `choice` asks for, called `name`: the store (`None` when nothing could
/// be opened), and a note saying why the preferred one was not used, if it was not.
pub async fn open(choice: StoreChoice, name: &str) -> (Option<WebStore>, Option<String>) {
    let opened = match choice {
        StoreChoice::Memory => Ok((WebStore::memory(), None)),
        StoreChoice::Idb => WebStore::indexed_db(name).await.map(|s| (s, None)),
        StoreChoice::Opfs => WebStore::opfs(name).await.map(|s| (s, None)),
        StoreChoice::Auto => WebStore::open_noting_fallback(name).await,
    };
    match opened {
        Ok((store, passed_over)) => (Some(store), passed_over.map(|e| e.to_string())),
        Err(e) => (None, Some(e.to_string())),
    }
}

/// The protocol's name for `store`.
pub fn kind(store: &WebStore) -> StoreKind {
    match store {
        WebStore::Opfs(_) => StoreKind::Opfs,
        WebStore::Idb(_) => StoreKind::Indexeddb,
        WebStore::Memory(_) => StoreKind::Memory,
    }
}
