//! The worker's message router, plain Rust over small platform traits, so that it is
//! tested natively (`worker/tests/router*.rs`): each page message ([`Router::handle`]) and
//! each time slice ([`Router::tick`]) is routed to the session (an [`Engine`] on the
//! backend `init` chose), the checkpoint and adapter stores ([`storage`]) and the Web Locks
//! ([`crate::locks`]); every answer goes out through the [`Outbox`].
//!
//! The platform gives: an [`Outbox`], a [`Clock`], a [`Storage`] (opens OPFS, IndexedDB or
//! memory stores, each a `tinygpt_ckpt::BlobStore`), a [`LockManager`] and a [`Fetch`]. In the browser
//! these are `web`'s (wasm32 only), a thin shim that also turns JS values into protocol
//! types; `www/worker.js` calls it one call at a time (a promise queue).
//!
//! Layout: `dispatch.rs` (what each message does), `init.rs` (engine, storage, `ready`),
//! `saving.rs` (explicit and automatic saves, to the checkpoint or the adapter store),
//! `hf_download.rs` (a GPT-2 base by URL), [`slot`] (the session held across awaits), [`storage`] (which store), [`engine_choice`]
//! (which engine), [`outbox`] (where answers go).

mod dispatch;
pub mod engine_choice;
mod hf_download;
mod init;
pub mod outbox;
mod saving;
pub mod slot;
pub mod storage;

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;

pub use init::{BrowserFacts, Environment};
pub use outbox::Outbox;
pub use storage::Storage;

use crate::abandon::Abandon;
use crate::clock::Clock;
use crate::engine::Engine;
use crate::error::WorkerError;
use crate::fetch::Fetch;
use crate::interrupt::Interrupt;
use crate::locks::{LockManager, Locks, STORE_LOCK};
use crate::protocol::{ErrorCode, OutMessage};
use slot::{Held, Slot};
use storage::Stores;

/// What the router runs on: the platform's side of each trait.
pub struct Platform<S, L> {
    pub outbox: Box<dyn Outbox>,
    pub clock: Box<dyn Clock>,
    pub storage: S,
    pub locks: L,
    /// Gives up the CPU unit in progress when a page message waits ([`crate::abandon`]);
    /// [`Abandon::never`] without the page's counter.
    pub abandon: Rc<Abandon>,
    /// Downloads (a GPT-2 base by URL); [`crate::fetch::NoFetch`] where there is no network.
    pub fetch: Box<dyn Fetch>,
}

/// The worker: one session, its stores and its locks, driven by page messages and ticks.
pub struct Router<S: Storage, L: LockManager> {
    slot: Slot,
    stores: RefCell<Stores<S::Store>>,
    /// Why training is not on WebGPU, once `init` chose the engine (`None`: it is).
    backend_note: RefCell<Option<String>>,
    /// The first `init` chose the engine; later ones keep it (a run may exist).
    engine_chosen: Cell<bool>,
    /// A run without storage reports that once, not at every checkpoint interval.
    warned_no_storage: Cell<bool>,
    outbox: Box<dyn Outbox>,
    clock: Box<dyn Clock>,
    storage: S,
    /// Run locks (the training run's, briefly two while a new run replaces a training one)
    /// and the store lock while a write runs.
    locks: Locks<L>,
    /// Raised by [`Router::interrupt`] as a page message arrives (see [`Interrupt`]).
    interrupt: Interrupt,
    abandon: Rc<Abandon>,
    fetch: Box<dyn Fetch>,
    env: Environment,
}

impl<S: Storage, L: LockManager> Router<S, L> {
    /// A router on this build's CPU kernels until `init` chooses the engine, without storage
    /// until `init` opens it.
    pub fn new(platform: Platform<S, L>, env: Environment) -> Self {
        let Platform { outbox, clock, storage, locks, abandon, fetch } = platform;
        Router {
            slot: Slot::new(Engine::cpu(env.cpu, Rc::clone(&abandon))),
            stores: RefCell::new(Stores::none()),
            backend_note: RefCell::new(None),
            engine_chosen: Cell::new(false),
            warned_no_storage: Cell::new(false),
            outbox,
            clock,
            storage,
            locks: Locks::new(locks),
            interrupt: Interrupt::default(),
            abandon,
            fetch,
            env,
        }
    }

    /// Handles one page message; returns once its answers are posted. Errors are posted
    /// as `error` messages.
    pub async fn handle(&self, message: crate::protocol::InMessage) {
        if let Err(e) = self.dispatch(message).await {
            self.post(&e.to_message());
        }
        self.sync_run_locks();
    }

    /// Answers a message that could not be read (see [`crate::incoming`]).
    pub fn refuse(&self, error: &WorkerError) {
        self.post(&error.to_message());
    }

    /// A page message has arrived: the tick waiting for the GPU (if any) stops waiting and
    /// returns, so the message is handled next instead of after the device finishes.
    pub fn interrupt(&self) {
        self.interrupt.raise();
    }

    /// Works for about `budget_ms` (training, evaluating or sampling), saving a checkpoint
    /// when one is due; returns whether more ticks are needed.
    pub async fn tick(&self, budget_ms: f64) -> bool {
        // Messages that arrived before this tick are handled already (one queue).
        self.interrupt.clear();
        let mut session = match self.session() {
            Ok(s) => s,
            Err(e) => {
                self.post(&e.to_message());
                return false;
            }
        };
        let busy = match session.tick_async(budget_ms, self.clock.as_ref(), &self.interrupt).await {
            Ok(outcome) => {
                drop(session);
                outcome.messages.iter().for_each(|m| self.post(m));
                if outcome.save_due {
                    if let Err(e) = self.save(false).await {
                        self.post(&e.to_message());
                    }
                }
                outcome.busy
            }
            Err(e) => {
                // A failed step (a diverged loss) ends training; the run stays for saving.
                self.post(&e.to_message());
                if let Ok(stopped) = session.stop_async().await {
                    stopped.iter().for_each(|m| self.post(m));
                }
                drop(session);
                false
            }
        };
        self.sync_run_locks();
        busy
    }

    /// The locks this worker holds now (for tests and diagnostics).
    pub fn held_locks(&self) -> Vec<String> {
        self.locks.held()
    }

    fn post(&self, message: &OutMessage) {
        self.outbox.post(message);
    }

    fn post_all(&self, result: Result<Vec<OutMessage>, WorkerError>) -> Result<(), WorkerError> {
        result?.iter().for_each(|m| self.post(m));
        Ok(())
    }

    fn now(&self) -> f64 {
        self.clock.now_ms()
    }

    /// Takes the session for the call running (see [`slot`]).
    fn session(&self) -> Result<Held<'_>, WorkerError> {
        self.slot.take()
    }

    /// Holds the run lock `name` (a run of `model` on `data`) before training it, or refuses
    /// with `runLocked` when another tab trains that run.
    async fn hold_run(&self, name: &str, model: &str, data: &str) -> Result<(), WorkerError> {
        if self.locks.acquire(name, false).await {
            return Ok(());
        }
        Err(WorkerError::new(
            ErrorCode::RunLocked,
            format!(
                "Another tab of this site is training this run ({model} on \"{data}\"), so this tab cannot \
                 train it at the same time. Pause or stop it in that tab, or close that tab, then resume it \
                 here. Its checkpoints are safe."
            ),
        ))
    }

    /// Lets go of every lock but the training run's (after a pause, stop, finish, a diverged
    /// step, a replaced run, or a refused start). Called between calls' awaits, when no call
    /// holds the session and no store write runs.
    fn sync_run_locks(&self) {
        self.locks.release_all_but(self.slot.training_lock().as_deref());
    }

    /// Runs a store write holding [`STORE_LOCK`], so saves of two tabs never interleave.
    async fn with_store_lock<T>(&self, write: impl Future<Output = T>) -> T {
        self.locks.acquire(STORE_LOCK, true).await;
        let result = write.await;
        self.locks.release(STORE_LOCK);
        result
    }
}
