//! Saves and the lists that follow them: a full run's checkpoint goes to the checkpoint
//! store (`checkpointSaved`, then `checkpoints`), an adapter run's adapter to the adapter
//! store (`adapterSaved`, then `adapters`), each write holding the store lock.

use super::{Router, Storage};
use crate::engine::Snapshot;
use crate::error::WorkerError;
use crate::locks::LockManager;
use crate::protocol::{OutMessage, StoreKind};

impl<S: Storage, L: LockManager> Router<S, L> {
    /// Saves the current run. `explicit` (the `save` message) reports a missing run or
    /// storage every time; an automatic save (a checkpoint interval, a stop) reports a
    /// missing storage once per run and a missing run never.
    pub(super) async fn save(&self, explicit: bool) -> Result<(), WorkerError> {
        let store = match self.stores.borrow().require_checkpoints() {
            Ok(s) => s,
            Err(e) if explicit || !self.warned_no_storage.get() => {
                self.warned_no_storage.set(true);
                return Err(e);
            }
            Err(_) => return Ok(()),
        };
        let snapshot = self.session()?.snapshot().await;
        let ckpt = match snapshot {
            Some(snapshot) => snapshot?,
            None if explicit => return Err(WorkerError::no_run("save")),
            None => return Ok(()),
        };
        match ckpt {
            Snapshot::Run(ckpt) => {
                let step = ckpt.progress.step;
                let (id, bytes) = self.with_store_lock(store.save(&ckpt)).await?;
                self.session()?.mark_saved(step, &id);
                self.post(&OutMessage::CheckpointSaved { id, step, bytes });
                self.post_list().await
            }
            Snapshot::Adapter { name, ckpt } => {
                let adapters = self.stores.borrow().require_adapters()?;
                let step = ckpt.progress.step;
                let (id, bytes) = self.with_store_lock(adapters.save(&name, &ckpt)).await?;
                self.session()?.mark_saved(step, &name);
                self.post(&OutMessage::AdapterSaved { name, id, step, bytes });
                self.post_adapters().await
            }
        }
    }

    /// `checkpoints`: the store's generations, newest first (none without a store).
    pub(super) async fn post_list(&self) -> Result<(), WorkerError> {
        let Some(store) = self.stores.borrow().checkpoints() else {
            self.post(&OutMessage::Checkpoints { items: Vec::new(), storage: StoreKind::None });
            return Ok(());
        };
        let items = store.list().await?;
        self.post(&OutMessage::Checkpoints { items, storage: store.kind() });
        Ok(())
    }

    /// `adapters`: the stored adapters, each marked whether it fits the loaded base.
    pub(super) async fn post_adapters(&self) -> Result<(), WorkerError> {
        let Some(adapters) = self.stores.borrow().adapters() else {
            self.post(&OutMessage::Adapters { items: Vec::new(), storage: StoreKind::None });
            return Ok(());
        };
        let base = self.session()?.base();
        let items = adapters.list(base.as_deref()).await?;
        self.post(&OutMessage::Adapters { items, storage: adapters.kind() });
        Ok(())
    }
}
