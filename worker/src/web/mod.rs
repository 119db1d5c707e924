//! The JavaScript face of the worker (wasm32 only): `new WorkerApp(post, env)`, then
//! `handle(message)` for each page message and `tick(budgetMs)` while `tick` resolves to
//! true. `www/worker.js` owns the event loop and calls these one at a time (a promise
//! queue).
//!
//! Ownership across `await`s: a call that needs the session (an [`Engine`]: the `Session` on
//! the backend `init` chose, see `backend_choice.rs`) takes it out of its slot
//! for its whole duration ([`Held`], which puts it back when dropped), so the session can
//! be used across awaited device readbacks (a WebGPU `mapAsync` resolves only when the event
//! loop turns) without a `RefCell` borrow living across an `await`. The other cells are
//! borrowed only between awaits.

mod backend_choice;
mod storage;

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Function, Promise};
use serde::Serialize;
use tinygpt_ckpt::web::WebStore;
use tinygpt_model::data::dataset_id;
use tinygpt_optim::TrainingConfig;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::{future_to_promise, JsFuture};

use crate::abandon::Abandon;
use crate::adapters::{Adapters, BaseModel};
use crate::checkpoints::Checkpoints;
use crate::clock::{Clock, SystemClock};
use crate::engine::{Engine, Snapshot};
use crate::error::WorkerError;
use crate::incoming::{unreadable, Received};
use crate::interrupt::Interrupt;
use crate::locks::{adapter_lock_name, run_lock_name, STORE_LOCK};
use crate::presets::preset_infos;
use crate::protocol::{
    BackendChoice, BaseSource, Capabilities, EngineKind, ErrorCode, InMessage, OutMessage, StoreChoice,
    StoreKind, WebgpuInfo,
};
use crate::session::{resolve_configs, AdapterRequest, SampleRequest, TrainRequest};

/// What only the JS side can see, passed to the constructor.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Environment {
    simd: bool,
    relaxed_simd: bool,
    cross_origin_isolated: bool,
    hardware_threads: usize,
    /// The adapter `navigator.gpu.requestAdapter()` gave, if any (probed by worker.js).
    webgpu: Option<WebgpuInfo>,
    /// Why there is no adapter, in one line, when there is none.
    webgpu_note: Option<String>,
}

/// This build's CPU kernels: SIMD when compiled with `+simd128`, on threads in the
/// `threads` builds, with relaxed SIMD's multiply-add when compiled with `+relaxed-simd`.
const WASM_BACKEND: EngineKind = if cfg!(all(feature = "threads", target_feature = "relaxed-simd")) {
    EngineKind::WasmRelaxedSimdThreads
} else if cfg!(feature = "threads") {
    EngineKind::WasmSimdThreads
} else if cfg!(target_feature = "relaxed-simd") {
    EngineKind::WasmRelaxedSimd
} else if cfg!(target_feature = "simd128") {
    EngineKind::WasmSimd
} else {
    EngineKind::Wasm
};

/// The session while no call holds it (see the module docs).
type Slot = RefCell<Option<Engine>>;

/// The session taken out of its [`Slot`] by the call running; dropping it puts it back.
struct Held<'a> {
    slot: &'a Slot,
    session: Option<Engine>,
}

impl std::ops::Deref for Held<'_> {
    type Target = Engine;
    fn deref(&self) -> &Self::Target {
        self.session.as_ref().expect("held until dropped")
    }
}

impl std::ops::DerefMut for Held<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.session.as_mut().expect("held until dropped")
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        *self.slot.borrow_mut() = self.session.take();
    }
}

struct Inner {
    session: Slot,
    store: RefCell<Option<Rc<Checkpoints<WebStore>>>>,
    /// LoRA adapters (a second store of the same kind).
    adapters: RefCell<Option<Rc<Adapters<WebStore>>>>,
    /// Why training is not on WebGPU, once `init` chose the engine (`None`: it is).
    backend_note: RefCell<Option<String>>,
    /// The first `init` chose the engine; later ones keep it (a run may exist).
    engine_chosen: RefCell<bool>,
    /// Why the chosen storage could not be opened.
    storage_note: RefCell<Option<String>>,
    /// A run without storage reports that once, not at every checkpoint interval.
    warned_no_storage: RefCell<bool>,
    post: Function,
    /// Raised by [`WorkerApp::interrupt`] as a page message arrives (see [`Interrupt`]).
    interrupt: Interrupt,
    /// Gives up the CPU unit in progress when the page's shared counter says a message
    /// waits ([`crate::abandon`]); never, without a counter.
    abandon: Rc<Abandon>,
    env: Environment,
    clock: SystemClock,
    /// `{hold(name, wait), release(name)}` from worker.js (Web Locks); absent: no locking.
    locks: Option<(Function, Function)>,
    /// Run locks held now (see [`crate::locks`]): the training run's, briefly two while a
    /// new run replaces a training one.
    held_runs: RefCell<Vec<String>>,
}

#[wasm_bindgen]
pub struct WorkerApp {
    inner: Rc<Inner>,
}

#[wasm_bindgen]
impl WorkerApp {
    /// `post(message)` delivers a worker → page message; `env` is `{simd, relaxedSimd,
    /// crossOriginIsolated, hardwareThreads}`; `locks` is `{hold(name, wait) → Promise<bool>,
    /// release(name)}` over `navigator.locks` (undefined: no locking); `pending` is the
    /// page's message counter from `init.pendingMessages` (an `Int32Array` over a
    /// `SharedArrayBuffer`, above zero while a page message waits; see
    /// [`crate::abandon`]), or undefined: then steps are taken in row parts.
    #[wasm_bindgen(constructor)]
    pub fn new(post: Function, env: JsValue, locks: JsValue, pending: JsValue) -> Result<WorkerApp, JsValue> {
        console_error_panic_hook::set_once();
        let env: Environment = serde_wasm_bindgen::from_value(env).unwrap_or_default();
        let function = |name: &str| {
            js_sys::Reflect::get(&locks, &JsValue::from_str(name))
                .ok()
                .and_then(|f| f.dyn_into::<Function>().ok())
        };
        let locks = function("hold").zip(function("release"));
        let abandon = Rc::new(match pending.dyn_into::<js_sys::Int32Array>() {
            // `Atomics.load`: the page's main thread writes it while this call runs.
            Ok(counter) => {
                let waiting = |element: u32| {
                    let counter = counter.clone();
                    move || js_sys::Atomics::load(&counter, element).is_ok_and(|n| n > 0)
                };
                let abandon = Abandon::new(waiting(0));
                // Element 1, where the page has it, counts the waiting `pause` and `stop` alone.
                if counter.length() > 1 {
                    abandon.with_commands(waiting(1))
                } else {
                    abandon
                }
            }
            Err(_) => Abandon::never(),
        });
        let inner = Inner {
            session: RefCell::new(Some(Engine::cpu(WASM_BACKEND, Rc::clone(&abandon)))),
            backend_note: RefCell::new(None),
            engine_chosen: RefCell::new(false),
            store: RefCell::new(None),
            adapters: RefCell::new(None),
            storage_note: RefCell::new(None),
            warned_no_storage: RefCell::new(false),
            post,
            interrupt: Interrupt::default(),
            abandon,
            env,
            clock: SystemClock::default(),
            locks,
            held_runs: RefCell::new(Vec::new()),
        };
        Ok(WorkerApp { inner: Rc::new(inner) })
    }

    /// Handles one page message; resolves when its answers are posted. Errors are posted
    /// as `error` messages, never thrown.
    pub fn handle(&self, message: JsValue) -> Promise {
        let inner = Rc::clone(&self.inner);
        future_to_promise(async move {
            let result = match read_message(message) {
                Ok(m) => inner.dispatch(m).await,
                Err(e) => Err(e),
            };
            if let Err(e) = result {
                inner.post(&e.to_message());
            }
            inner.sync_run_locks();
            Ok(JsValue::UNDEFINED)
        })
    }

    /// A page message has arrived: the tick waiting for the GPU (if any) stops waiting and
    /// resolves, so the message is handled next instead of after the device finishes.
    /// Call it as the message arrives, before queueing it.
    pub fn interrupt(&self) {
        self.inner.interrupt.raise();
    }

    /// Works for about `budget_ms` (training, evaluating or sampling), saving a checkpoint
    /// when one is due; resolves to whether more ticks are needed.
    pub fn tick(&self, budget_ms: f64) -> Promise {
        let inner = Rc::clone(&self.inner);
        future_to_promise(async move {
            // Messages that arrived before this tick are handled already (one queue).
            inner.interrupt.clear();
            let mut session = match inner.session() {
                Ok(s) => s,
                Err(e) => {
                    inner.post(&e.to_message());
                    return Ok(JsValue::FALSE);
                }
            };
            let outcome = session.tick_async(budget_ms, &inner.clock, &inner.interrupt).await;
            let busy = match outcome {
                Ok(outcome) => {
                    drop(session);
                    for m in &outcome.messages {
                        inner.post(m);
                    }
                    if outcome.save_due {
                        if let Err(e) = inner.save(false).await {
                            inner.post(&e.to_message());
                        }
                    }
                    outcome.busy
                }
                Err(e) => {
                    // A failed step (a diverged loss) ends training; the run stays for saving.
                    inner.post(&e.to_message());
                    if let Ok(stopped) = session.stop_async().await {
                        stopped.iter().for_each(|m| inner.post(m));
                    }
                    drop(session);
                    false
                }
            };
            inner.sync_run_locks();
            Ok(JsValue::from_bool(busy))
        })
    }
}

impl Inner {
    fn post(&self, message: &OutMessage) {
        let serializer = serde_wasm_bindgen::Serializer::new().serialize_maps_as_objects(true);
        match message.serialize(&serializer) {
            Ok(value) => {
                let _ = self.post.call1(&JsValue::NULL, &value);
            }
            Err(e) => web_sys_log(&format!("cannot serialize {message:?}: {e}")),
        }
    }

    fn now(&self) -> f64 {
        self.clock.now_ms()
    }

    /// Takes the session for the call running (see the module docs).
    fn session(&self) -> Result<Held<'_>, WorkerError> {
        let session = self.session.borrow_mut().take().ok_or_else(|| {
            WorkerError::new(ErrorCode::Internal, "Internal error: two calls into the worker overlapped.")
        })?;
        Ok(Held { slot: &self.session, session: Some(session) })
    }

    fn store(&self) -> Option<Rc<Checkpoints<WebStore>>> {
        self.store.borrow().clone()
    }

    fn require_store(&self) -> Result<Rc<Checkpoints<WebStore>>, WorkerError> {
        self.store().ok_or_else(|| {
            let why = self.storage_note.borrow().clone().unwrap_or_else(|| "no storage could be opened".into());
            WorkerError::new(
                ErrorCode::StorageUnavailable,
                format!(
                    "Browser storage is not available ({why}). This happens in private windows. Training still \
                     works, but checkpoints cannot be saved."
                ),
            )
        })
    }

    async fn dispatch(&self, message: InMessage) -> Result<(), WorkerError> {
        match message {
            InMessage::Init { backend, storage, checked } => self.init(backend, storage, checked).await,
            InMessage::Train { model_config, preset, training_config, dataset } => {
                let request = TrainRequest { model_config, preset, training_config };
                let (model, training) = resolve_configs(request.clone())?;
                let lock = run_lock_name(&model, &training, &dataset_id(&dataset.bytes));
                self.hold_run(&lock, &model.model_name, &dataset.name).await?;
                let out = self.session()?.start(request, dataset, self.now())?;
                *self.warned_no_storage.borrow_mut() = false;
                out.iter().for_each(|m| self.post(m));
                Ok(())
            }
            InMessage::Pause => self.post_all(self.session()?.pause()),
            InMessage::Resume => {
                if let Some(run) = self.session()?.run_summary() {
                    self.hold_run(&run.lock_name, &run.model_name, &run.dataset_name).await?;
                }
                self.post_all(self.session()?.resume(self.now()))
            }
            InMessage::Stop => {
                let needs_save = {
                    let mut session = self.session()?;
                    // `done` goes out before waiting for the device; the last progress after.
                    session.halt()?.iter().for_each(|m| self.post(m));
                    session.last_progress_async().await.iter().for_each(|m| self.post(m));
                    session.needs_save()
                };
                if needs_save {
                    self.save(false).await?;
                }
                Ok(())
            }
            InMessage::Sample { prompt, max_tokens, temperature, top_k, seed, top_p, stop, adapter } => {
                let top_p = top_p.unwrap_or(1.0);
                let stop = stop.unwrap_or_default().into_iter().map(String::into_bytes).collect();
                let request =
                    SampleRequest { prompt, max_tokens, temperature, top_k, seed, top_p, stop, adapter };
                self.post_all(self.session()?.sample(request, self.now()))
            }
            InMessage::Save => self.save(true).await,
            InMessage::ListCheckpoints => self.post_list().await,
            InMessage::Load { id, dataset } => {
                let store = self.require_store()?;
                let ckpt = store.load(&id).await?;
                let out = self.session()?.load(ckpt, id, &dataset, self.now())?;
                out.iter().for_each(|m| self.post(m));
                Ok(())
            }
            InMessage::Delete { id } => {
                let store = self.require_store()?;
                self.with_store_lock(store.delete(&id)).await?;
                self.post(&OutMessage::Deleted { id });
                self.post_list().await
            }
            InMessage::Export { id } => {
                let (file_name, bytes) = self.require_store()?.export(id.as_deref()).await?;
                self.post(&OutMessage::Exported { file_name, bytes });
                Ok(())
            }
            InMessage::Import { bytes } => {
                let store = self.require_store()?;
                let (id, step, bytes) = self.with_store_lock(store.import(&bytes)).await?;
                self.post(&OutMessage::CheckpointSaved { id, step, bytes });
                self.post_list().await
            }
            InMessage::LoadBase { source, id, bytes, name } => {
                let base = match source {
                    BaseSource::Builtin => {
                        BaseModel::builtin(&require_bytes(bytes, "the bundled base's file")?)?
                    }
                    BaseSource::Upload => {
                        let name = name.unwrap_or_else(|| "uploaded base".into());
                        BaseModel::from_safetensors(
                            name,
                            source,
                            &require_bytes(bytes, "the uploaded file")?,
                        )?
                    }
                    BaseSource::Checkpoint => {
                        let id = id.ok_or_else(|| {
                            WorkerError::new(
                                ErrorCode::BadMessage,
                                "A \"loadBase\" from a checkpoint needs its \"id\": send the id of a checkpoint that \"listCheckpoints\" returned.",
                            )
                        })?;
                        let ckpt = self.require_store()?.load(&id).await?;
                        let name = name.unwrap_or_else(|| {
                            format!(
                                "{} on {} (checkpoint {id})",
                                ckpt.model_config.model_name, ckpt.dataset.name
                            )
                        });
                        BaseModel::new(name, source, ckpt)?
                    }
                };
                let out = self.session()?.load_base(Rc::new(base));
                out.iter().for_each(|m| self.post(m));
                self.post_adapters().await
            }
            InMessage::TrainAdapter { name, preset, rank, alpha, targets, training_config, dataset } => {
                let lock = adapter_lock_name(&name);
                self.hold_run(&lock, &format!("adapter {name}"), &dataset.name).await?;
                let request = AdapterRequest { name, preset, rank, alpha, targets, training_config };
                let out = self.session()?.start_adapter(request, dataset, self.now())?;
                *self.warned_no_storage.borrow_mut() = false;
                out.iter().for_each(|m| self.post(m));
                Ok(())
            }
            InMessage::ListAdapters => self.post_adapters().await,
            InMessage::LoadAdapter { name, dataset } => {
                let adapters = self.require_adapters()?;
                let base = self.session()?.base().ok_or_else(|| {
                    WorkerError::new(
                        ErrorCode::NoBase,
                        "Load a base model first, then load an adapter onto it.",
                    )
                })?;
                let ckpt = adapters.load(&name, &base).await?;
                let out = self.session()?.load_adapter(name, ckpt, dataset.as_ref(), self.now())?;
                out.iter().for_each(|m| self.post(m));
                Ok(())
            }
        }
    }

    fn require_adapters(&self) -> Result<Rc<Adapters<WebStore>>, WorkerError> {
        self.require_store()?;
        self.adapters.borrow().clone().ok_or_else(|| {
            WorkerError::new(
                ErrorCode::StorageUnavailable,
                "Browser storage for adapters could not be opened.",
            )
        })
    }

    async fn post_adapters(&self) -> Result<(), WorkerError> {
        let adapters = self.adapters.borrow().clone();
        let Some(adapters) = adapters else {
            self.post(&OutMessage::Adapters { items: Vec::new(), storage: StoreKind::None });
            return Ok(());
        };
        let base = self.session()?.base();
        let items = adapters.list(base.as_deref()).await?;
        self.post(&OutMessage::Adapters { items, storage: adapters.kind() });
        Ok(())
    }

    /// Takes a Web Lock: true once held, false when `wait` is false and another context
    /// holds it. Without Web Locks every lock is granted.
    async fn hold(&self, name: &str, wait: bool) -> bool {
        let Some((hold, _)) = &self.locks else { return true };
        let promise = hold.call2(&JsValue::NULL, &JsValue::from_str(name), &JsValue::from_bool(wait));
        match promise.map(|p| JsFuture::from(Promise::from(p))) {
            Ok(future) => future.await.map(|granted| granted.as_bool() == Some(true)).unwrap_or(true),
            // A browser whose Web Locks fail cannot coordinate tabs; training still works.
            Err(_) => true,
        }
    }

    fn release(&self, name: &str) {
        if let Some((_, release)) = &self.locks {
            let _ = release.call1(&JsValue::NULL, &JsValue::from_str(name));
        }
    }

    /// Holds the run lock `name` (a run of `model` on `data`) before training it, or refuses
    /// with `runLocked` when another tab trains that run.
    async fn hold_run(&self, name: &str, model: &str, data: &str) -> Result<(), WorkerError> {
        if self.held_runs.borrow().iter().any(|h| h == name) {
            return Ok(());
        }
        if !self.hold(name, false).await {
            return Err(WorkerError::new(
                ErrorCode::RunLocked,
                format!(
                    "Another tab of this site is training this run ({model} on \"{data}\"), so this tab cannot \
                     train it at the same time. Pause or stop it in that tab, or close that tab, then resume it \
                     here. Its checkpoints are safe."
                ),
            ));
        }
        self.held_runs.borrow_mut().push(name.to_string());
        Ok(())
    }

    /// Lets go of every run lock but the training run's (after a pause, stop, finish, a
    /// diverged step, a replaced run, or a refused start).
    fn sync_run_locks(&self) {
        // Called between calls' awaits, when no call holds the session.
        let keep = self.session.borrow().as_ref().and_then(|s| s.training_lock());
        let released: Vec<String> = {
            let mut held = self.held_runs.borrow_mut();
            let (kept, released) = held.drain(..).partition(|h| Some(h) == keep.as_ref());
            *held = kept;
            released
        };
        released.iter().for_each(|name| self.release(name));
    }

    /// Runs a store write holding [`STORE_LOCK`], so saves of two tabs never interleave.
    async fn with_store_lock<T>(&self, write: impl std::future::Future<Output = T>) -> T {
        self.hold(STORE_LOCK, true).await;
        let result = write.await;
        self.release(STORE_LOCK);
        result
    }

    fn post_all(&self, result: Result<Vec<OutMessage>, WorkerError>) -> Result<(), WorkerError> {
        result?.iter().for_each(|m| self.post(m));
        Ok(())
    }

    /// Chooses the engine (on the first `init` only: later ones keep it and its run), opens
    /// the storage, and answers `ready`.
    async fn init(
        &self,
        backend: BackendChoice,
        choice: StoreChoice,
        checked: bool,
    ) -> Result<(), WorkerError> {
        if !*self.engine_chosen.borrow() {
            let probe = backend_choice::Probe {
                adapter: self.env.webgpu.as_ref(),
                note: self.env.webgpu_note.as_deref(),
            };
            let abandon = Rc::clone(&self.abandon);
            let (engine, note) = backend_choice::choose(backend, probe, WASM_BACKEND, checked, abandon).await;
            *self.session()? = engine;
            *self.backend_note.borrow_mut() = note;
            *self.engine_chosen.borrow_mut() = true;
        }
        let (storage, note) = storage::open(choice, storage::STORE_NAME).await;
        *self.storage_note.borrow_mut() = note.clone();
        let kind = storage.as_ref().map_or(StoreKind::None, storage::kind);
        *self.store.borrow_mut() = storage.map(|s| Rc::new(Checkpoints::new(s, kind)));
        // Adapters go where checkpoints go (the same kind of store, beside it).
        let adapter_choice = match kind {
            StoreKind::Opfs => StoreChoice::Opfs,
            StoreKind::Indexeddb => StoreChoice::Idb,
            StoreKind::Memory => StoreChoice::Memory,
            StoreKind::None => choice,
        };
        let (adapters, _) = storage::open(adapter_choice, storage::ADAPTER_STORE_NAME).await;
        *self.adapters.borrow_mut() = adapters.map(|s| {
            let kind = storage::kind(&s);
            Rc::new(Adapters::new(s, kind))
        });
        let (quota_bytes, usage_bytes) = estimate().await;
        // One borrow of the session: two in one expression would overlap.
        let (backend, checked, mixed_matmul) = {
            let session = self.session()?;
            (
                session.kind(),
                session.is_checked(),
                session.mixed_matmul(self.env.webgpu.as_ref().map_or("", |w| w.adapter.as_str())),
            )
        };
        let capabilities = Capabilities {
            backend,
            checked,
            simd: self.env.simd,
            relaxed_simd: self.env.relaxed_simd,
            cross_origin_isolated: self.env.cross_origin_isolated,
            storage: kind,
            storage_note: note,
            quota_bytes,
            usage_bytes,
            hardware_threads: self.env.hardware_threads,
            threads: threads(),
            backend_note: self.backend_note.borrow().clone(),
            webgpu: self.env.webgpu.clone(),
            mixed_matmul,
        };
        self.post(&OutMessage::Ready {
            capabilities,
            presets: preset_infos(),
            default_training_config: TrainingConfig::default(),
        });
        Ok(())
    }

    /// Saves the current run. `explicit` (the `save` message) reports a missing run or
    /// storage every time; an automatic save reports a missing storage once per run.
    async fn save(&self, explicit: bool) -> Result<(), WorkerError> {
        let store = match self.require_store() {
            Ok(s) => s,
            Err(e) if explicit || !*self.warned_no_storage.borrow() => {
                *self.warned_no_storage.borrow_mut() = true;
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
        let ckpt = match ckpt {
            Snapshot::Run(ckpt) => ckpt,
            Snapshot::Adapter { name, ckpt } => {
                let adapters = self.require_adapters()?;
                let step = ckpt.progress.step;
                let (id, bytes) = self.with_store_lock(adapters.save(&name, &ckpt)).await?;
                self.session()?.mark_saved(step, &name);
                self.post(&OutMessage::AdapterSaved { name, id, step, bytes });
                return self.post_adapters().await;
            }
        };
        let step = ckpt.progress.step;
        let (id, bytes) = self.with_store_lock(store.save(&ckpt)).await?;
        self.session()?.mark_saved(step, &id);
        self.post(&OutMessage::CheckpointSaved { id, step, bytes });
        self.post_list().await
    }

    async fn post_list(&self) -> Result<(), WorkerError> {
        let Some(store) = self.store() else {
            self.post(&OutMessage::Checkpoints { items: Vec::new(), storage: StoreKind::None });
            return Ok(());
        };
        let items = store.list().await?;
        self.post(&OutMessage::Checkpoints { items, storage: store.kind() });
        Ok(())
    }
}

/// The bytes a `loadBase` carries, or a plain refusal naming what is missing.
fn require_bytes(bytes: Option<Vec<u8>>, what: &str) -> Result<Vec<u8>, WorkerError> {
    bytes.ok_or_else(|| {
        WorkerError::new(
            ErrorCode::BadMessage,
            format!(
                "A \"loadBase\" of {what} needs its \"bytes\" (a Uint8Array): send the file's bytes with it."
            ),
        )
    })
}

/// Decodes a page message; what cannot be read is answered in the protocol's words.
fn read_message(message: JsValue) -> Result<InMessage, WorkerError> {
    let what = if message.is_null() {
        return Err(unreadable(Received::NotAnObject("null"), ""));
    } else if message.is_undefined() {
        return Err(unreadable(Received::NotAnObject("undefined"), ""));
    } else if js_sys::Array::is_array(&message) {
        return Err(unreadable(Received::NotAnObject("an array"), ""));
    } else if !message.is_object() {
        let kind = message.js_typeof().as_string().unwrap_or_default();
        return Err(unreadable(Received::NotAnObject(&format!("a {kind}")), ""));
    } else {
        match js_sys::Reflect::get(&message, &JsValue::from_str("type")).ok().and_then(|t| t.as_string()) {
            Some(t) => t,
            None => return Err(unreadable(Received::NoType, "")),
        }
    };
    serde_wasm_bindgen::from_value::<InMessage>(message)
        .map_err(|e| unreadable(Received::Type(&what), &e.to_string()))
}

/// `navigator.storage.estimate()`: `(quota, usage)` in bytes, when the browser tells.
async fn estimate() -> (Option<f64>, Option<f64>) {
    match tinygpt_ckpt::web::estimate().await {
        Ok(e) => (Some(e.quota_bytes as f64), Some(e.usage_bytes as f64)),
        Err(_) => (None, None),
    }
}

/// The CPU kernels' threads in the threads build; `None` in the single-threaded ones.
fn threads() -> Option<usize> {
    #[cfg(feature = "threads")]
    return Some(rayon::current_num_threads());
    #[cfg(not(feature = "threads"))]
    None
}

fn web_sys_log(text: &str) {
    web_sys::console::error_1(&JsValue::from_str(text));
}
