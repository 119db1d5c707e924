//! The JavaScript face of the worker (wasm32 only): `new WorkerApp(post, env)`, then
//! `handle(message)` for each page message and `tick(budgetMs)` while `tick` resolves to
//! true. `www/worker.js` owns the event loop and calls these one at a time (a promise
//! queue), so the `RefCell`s here are never borrowed twice; no borrow is held across an
//! `await` either.

mod storage;

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Function, Promise};
use serde::Serialize;
use tinygpt_ckpt::web::WebStorage;
use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_optim::TrainingConfig;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use crate::checkpoints::{restore, snapshot, Checkpoints};
use crate::clock::{Clock, SystemClock};
use crate::error::WorkerError;
use crate::presets::preset_infos;
use crate::protocol::{
    BackendKind, Capabilities, ErrorCode, InMessage, OutMessage, RunState, StorageChoice, StorageKind,
};
use crate::session::{SampleRequest, Session, TrainRequest};

/// What only the JS side can see, passed to the constructor.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Environment {
    simd: bool,
    cross_origin_isolated: bool,
    hardware_threads: usize,
}

/// The build running: SIMD when compiled with `+simd128`.
const BACKEND: BackendKind =
    if cfg!(target_feature = "simd128") { BackendKind::WasmSimd } else { BackendKind::Wasm };

struct Inner {
    session: RefCell<Session<CpuBackend>>,
    store: RefCell<Option<Rc<Checkpoints<WebStorage>>>>,
    /// Why the chosen storage could not be opened.
    storage_note: RefCell<Option<String>>,
    /// A run without storage reports that once, not at every checkpoint interval.
    warned_no_storage: RefCell<bool>,
    post: Function,
    env: Environment,
    clock: SystemClock,
}

#[wasm_bindgen]
pub struct WorkerApp {
    inner: Rc<Inner>,
}

#[wasm_bindgen]
impl WorkerApp {
    /// `post(message)` delivers a worker → page message; `env` is `{simd,
    /// crossOriginIsolated, hardwareThreads}`.
    #[wasm_bindgen(constructor)]
    pub fn new(post: Function, env: JsValue) -> Result<WorkerApp, JsValue> {
        console_error_panic_hook::set_once();
        let env: Environment = serde_wasm_bindgen::from_value(env).unwrap_or_default();
        let inner = Inner {
            session: RefCell::new(Session::new(CpuBackend::new(1), BACKEND)),
            store: RefCell::new(None),
            storage_note: RefCell::new(None),
            warned_no_storage: RefCell::new(false),
            post,
            env,
            clock: SystemClock::default(),
        };
        Ok(WorkerApp { inner: Rc::new(inner) })
    }

    /// Handles one page message; resolves when its answers are posted. Errors are posted
    /// as `error` messages, never thrown.
    pub fn handle(&self, message: JsValue) -> Promise {
        let inner = Rc::clone(&self.inner);
        future_to_promise(async move {
            let result = match serde_wasm_bindgen::from_value::<InMessage>(message) {
                Ok(m) => inner.dispatch(m).await,
                Err(e) => Err(WorkerError::new(ErrorCode::BadMessage, format!("Unreadable message: {e}"))),
            };
            if let Err(e) = result {
                inner.post(&e.to_message());
            }
            Ok(JsValue::UNDEFINED)
        })
    }

    /// Works for about `budget_ms` (training, evaluating or sampling), saving a checkpoint
    /// when one is due; resolves to whether more ticks are needed.
    pub fn tick(&self, budget_ms: f64) -> Promise {
        let inner = Rc::clone(&self.inner);
        future_to_promise(async move {
            let outcome = inner.session.borrow_mut().tick(budget_ms, &inner.clock);
            match outcome {
                Ok(outcome) => {
                    for m in &outcome.messages {
                        inner.post(m);
                    }
                    if outcome.save_due {
                        if let Err(e) = inner.save(false).await {
                            inner.post(&e.to_message());
                        }
                    }
                    Ok(JsValue::from_bool(outcome.busy))
                }
                Err(e) => {
                    // A failed step (a diverged loss) ends training; the run stays for saving.
                    inner.post(&e.to_message());
                    if let Ok(stopped) = inner.session.borrow_mut().stop() {
                        stopped.iter().for_each(|m| inner.post(m));
                    }
                    Ok(JsValue::FALSE)
                }
            }
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

    fn store(&self) -> Option<Rc<Checkpoints<WebStorage>>> {
        self.store.borrow().clone()
    }

    fn require_store(&self) -> Result<Rc<Checkpoints<WebStorage>>, WorkerError> {
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
            InMessage::Init { storage, .. } => self.init(storage).await,
            InMessage::Train { model_config, preset, training_config, dataset } => {
                let request = TrainRequest { model_config, preset, training_config };
                let out = self.session.borrow_mut().start(request, dataset, self.now())?;
                *self.warned_no_storage.borrow_mut() = false;
                out.iter().for_each(|m| self.post(m));
                Ok(())
            }
            InMessage::Pause => self.post_all(self.session.borrow_mut().pause()),
            InMessage::Resume => self.post_all(self.session.borrow_mut().resume(self.now())),
            InMessage::Stop => {
                let out = self.session.borrow_mut().stop()?;
                out.iter().for_each(|m| self.post(m));
                let needs_save = self.session.borrow().run().is_some_and(|r| r.needs_save());
                if needs_save {
                    self.save(false).await?;
                }
                Ok(())
            }
            InMessage::Sample { prompt, max_tokens, temperature, top_k, seed } => {
                let request = SampleRequest { prompt, max_tokens, temperature, top_k, seed };
                self.session.borrow_mut().sample(request, self.now())
            }
            InMessage::Save => self.save(true).await,
            InMessage::ListCheckpoints => self.post_list().await,
            InMessage::Load { id, dataset } => {
                let store = self.require_store()?;
                let ckpt = store.load(&id).await?;
                let mut session = self.session.borrow_mut();
                let trainer = restore(session.backend(), ckpt, &dataset)?;
                let out = session.install(trainer, Some(id), RunState::Paused, self.now());
                drop(session);
                out.iter().for_each(|m| self.post(m));
                Ok(())
            }
            InMessage::Delete { id } => {
                self.require_store()?.delete(&id).await?;
                self.post(&OutMessage::Deleted { id });
                self.post_list().await
            }
            InMessage::Export { id } => {
                let (file_name, bytes) = self.require_store()?.export(id.as_deref()).await?;
                self.post(&OutMessage::Exported { file_name, bytes });
                Ok(())
            }
            InMessage::Import { bytes } => {
                let (id, step, bytes) = self.require_store()?.import(&bytes).await?;
                self.post(&OutMessage::CheckpointSaved { id, step, bytes });
                self.post_list().await
            }
        }
    }

    fn post_all(&self, result: Result<Vec<OutMessage>, WorkerError>) -> Result<(), WorkerError> {
        result?.iter().for_each(|m| self.post(m));
        Ok(())
    }

    async fn init(&self, choice: StorageChoice) -> Result<(), WorkerError> {
        let (storage, note) = storage::open(choice).await;
        *self.storage_note.borrow_mut() = note.clone();
        let kind = storage.as_ref().map_or(StorageKind::None, storage::kind);
        *self.store.borrow_mut() = storage.map(|s| Rc::new(Checkpoints::new(s, kind)));
        let (quota_bytes, usage_bytes) = estimate().await;
        let capabilities = Capabilities {
            backend: BACKEND,
            simd: self.env.simd,
            cross_origin_isolated: self.env.cross_origin_isolated,
            storage: kind,
            storage_note: note,
            quota_bytes,
            usage_bytes,
            hardware_threads: self.env.hardware_threads,
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
        let ckpt = {
            let session = self.session.borrow();
            let Some(run) = session.run() else {
                return if explicit { Err(WorkerError::no_run("save")) } else { Ok(()) };
            };
            snapshot(run)?
        };
        let step = ckpt.progress.step;
        let (id, bytes) = store.save(&ckpt).await?;
        if let Some(run) = self.session.borrow_mut().run_mut() {
            run.saved_step = step;
            run.checkpoint_id = Some(id.clone());
        }
        self.post(&OutMessage::CheckpointSaved { id, step, bytes });
        self.post_list().await
    }

    async fn post_list(&self) -> Result<(), WorkerError> {
        let Some(store) = self.store() else {
            self.post(&OutMessage::Checkpoints { items: Vec::new(), storage: StorageKind::None });
            return Ok(());
        };
        let items = store.list().await?;
        self.post(&OutMessage::Checkpoints { items, storage: store.kind() });
        Ok(())
    }
}

/// `navigator.storage.estimate()`: `(quota, usage)` in bytes, when the browser tells.
async fn estimate() -> (Option<f64>, Option<f64>) {
    match tinygpt_ckpt::web::estimate().await {
        Ok(e) => (Some(e.quota_bytes as f64), Some(e.usage_bytes as f64)),
        Err(_) => (None, None),
    }
}

fn web_sys_log(text: &str) {
    web_sys::console::error_1(&JsValue::from_str(text));
}
