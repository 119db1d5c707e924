//! Which store checkpoints and adapters go to: the page's choice (`auto`: OPFS, else
//! IndexedDB; `idb` forces IndexedDB; `memory` keeps nothing across reloads), or none when
//! nothing could be opened (a private window), with one line saying why. The platform
//! ([`Storage`]) only opens a store of a given kind.

use std::rc::Rc;

use tinygpt_ckpt::{opfs_else_indexed_db, BlobStore, CkptError};

use crate::adapters::Adapters;
use crate::base_cache::BaseCache;
use crate::checkpoints::Checkpoints;
use crate::error::WorkerError;
use crate::protocol::{ErrorCode, StoreChoice, StoreKind};

/// The OPFS directory and the IndexedDB database checkpoints live in.
pub const STORE_NAME: &str = "tinygpt-checkpoints";

/// The OPFS directory and the IndexedDB database LoRA adapters live in (all of them,
/// whatever their base: see `tinygpt_ckpt::AdapterShelf`).
pub const ADAPTER_STORE_NAME: &str = "tinygpt-adapters";

/// The OPFS directory and the IndexedDB database GPT-2 folders fetched by URL are kept in
/// (`crate::base_cache`).
pub const BASE_STORE_NAME: &str = "tinygpt-bases";

/// Where stores come from: the browser's OPFS, IndexedDB and memory, or a test's.
///
/// Futures are not required to be `Send`: browser handles are bound to their thread.
#[allow(async_fn_in_trait)]
pub trait Storage {
    type Store: BlobStore;

    /// Opens the store of `kind` (`Opfs`, `Indexeddb` or `Memory`, never `None`) called
    /// `name`, or says why it cannot be opened.
    async fn open(&self, kind: StoreKind, name: &str) -> Result<Self::Store, CkptError>;

    /// `(quota, usage)` in bytes, when the platform tells.
    async fn estimate(&self) -> Option<(f64, f64)>;
}

/// Opens what `choice` asks for, called `name`: the store and its kind (`None` when nothing
/// could be opened), and a note saying why the preferred one was not used, if it was not.
pub async fn open<S: Storage>(
    storage: &S,
    choice: StoreChoice,
    name: &str,
) -> (Option<(S::Store, StoreKind)>, Option<String>) {
    let only = |kind: StoreKind| async move { storage.open(kind, name).await.map(|s| (s, kind, None)) };
    let opened = match choice {
        StoreChoice::Memory => only(StoreKind::Memory).await,
        StoreChoice::Idb => only(StoreKind::Indexeddb).await,
        StoreChoice::Opfs => only(StoreKind::Opfs).await,
        StoreChoice::Auto => opfs_else_indexed_db(storage.open(StoreKind::Opfs, name), || {
            storage.open(StoreKind::Indexeddb, name)
        })
        .await
        .map(|(store, passed_over)| {
            let kind = if passed_over.is_some() { StoreKind::Indexeddb } else { StoreKind::Opfs };
            (store, kind, passed_over)
        }),
    };
    match opened {
        Ok((store, kind, passed_over)) => (Some((store, kind)), passed_over.map(|e| e.to_string())),
        Err(e) => (None, Some(e.to_string())),
    }
}

/// The stores `init` opened: checkpoints, and adapters and downloaded bases beside them (the
/// same kind of store).
pub struct Stores<B> {
    checkpoints: Option<Rc<Checkpoints<B>>>,
    adapters: Option<Rc<Adapters<B>>>,
    bases: Option<Rc<BaseCache<B>>>,
    /// Why the chosen storage could not be opened, or why the preferred one was passed over.
    note: Option<String>,
}

impl<B: BlobStore> Stores<B> {
    /// Before `init`: no storage yet.
    pub fn none() -> Self {
        Stores { checkpoints: None, adapters: None, bases: None, note: None }
    }

    /// Opens the checkpoint store `choice` asks for, and the adapter store of the kind it got.
    pub async fn open<S: Storage<Store = B>>(storage: &S, choice: StoreChoice) -> Self {
        let (checkpoints, note) = open(storage, choice, STORE_NAME).await;
        let kind = checkpoints.as_ref().map_or(StoreKind::None, |(_, kind)| *kind);
        let adapter_choice = match kind {
            StoreKind::Opfs => StoreChoice::Opfs,
            StoreKind::Indexeddb => StoreChoice::Idb,
            StoreKind::Memory => StoreChoice::Memory,
            StoreKind::None => choice,
        };
        let (adapters, _) = open(storage, adapter_choice, ADAPTER_STORE_NAME).await;
        let (bases, _) = open(storage, adapter_choice, BASE_STORE_NAME).await;
        Stores {
            checkpoints: checkpoints.map(|(s, kind)| Rc::new(Checkpoints::new(s, kind))),
            adapters: adapters.map(|(s, kind)| Rc::new(Adapters::new(s, kind))),
            bases: bases.map(|(s, kind)| Rc::new(BaseCache::new(s, kind))),
            note,
        }
    }

    /// The checkpoint store's kind (`None` without one).
    pub fn kind(&self) -> StoreKind {
        self.checkpoints.as_ref().map_or(StoreKind::None, |c| c.kind())
    }

    pub fn note(&self) -> Option<String> {
        self.note.clone()
    }

    pub fn checkpoints(&self) -> Option<Rc<Checkpoints<B>>> {
        self.checkpoints.clone()
    }

    pub fn adapters(&self) -> Option<Rc<Adapters<B>>> {
        self.adapters.clone()
    }

    /// Where GPT-2 folders fetched by URL are kept (none: they download every time).
    pub fn bases(&self) -> Option<Rc<BaseCache<B>>> {
        self.bases.clone()
    }

    /// The checkpoint store, or `storageUnavailable` saying why there is none.
    pub fn require_checkpoints(&self) -> Result<Rc<Checkpoints<B>>, WorkerError> {
        self.checkpoints().ok_or_else(|| {
            let why = self.note.clone().unwrap_or_else(|| "no storage could be opened".into());
            WorkerError::new(
                ErrorCode::StorageUnavailable,
                format!(
                    "Browser storage is not available ({why}). This happens in private windows. Training still \
                     works, but checkpoints cannot be saved."
                ),
            )
        })
    }

    /// The bases store, or `storageUnavailable` (the checkpoint store's reason first).
    pub fn require_bases(&self) -> Result<Rc<BaseCache<B>>, WorkerError> {
        self.require_checkpoints()?;
        self.bases().ok_or_else(|| {
            WorkerError::new(
                ErrorCode::StorageUnavailable,
                "Browser storage for downloaded models could not be opened.",
            )
        })
    }

    /// The adapter store, or `storageUnavailable` (the checkpoint store's reason first).
    pub fn require_adapters(&self) -> Result<Rc<Adapters<B>>, WorkerError> {
        self.require_checkpoints()?;
        self.adapters().ok_or_else(|| {
            WorkerError::new(
                ErrorCode::StorageUnavailable,
                "Browser storage for adapters could not be opened.",
            )
        })
    }
}
