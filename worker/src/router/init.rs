//! `init`: the engine (on the first `init` only), the stores, and the `ready` answer with
//! what this worker can do.

use std::rc::Rc;

use tinygpt_optim::TrainingConfig;

use super::engine_choice::{self, GpuProbe};
use super::storage::Stores;
use super::{Router, Storage};
use crate::error::WorkerError;
use crate::locks::LockManager;
use crate::presets::preset_infos;
use crate::protocol::{BackendChoice, Capabilities, EngineKind, OutMessage, StoreChoice, WebgpuInfo};

/// What the platform is, told once to [`Router::new`].
#[derive(Clone, Debug)]
pub struct Environment {
    /// This build's CPU kernels (scalar, SIMD, relaxed SIMD, on threads or not).
    pub cpu: EngineKind,
    /// The CPU kernels' threads in the threads builds; `None` in the single-threaded ones.
    pub threads: Option<usize>,
    pub browser: BrowserFacts,
}

/// What only the JS side can see (`www/worker.js` passes it to the constructor).
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrowserFacts {
    pub simd: bool,
    pub relaxed_simd: bool,
    pub cross_origin_isolated: bool,
    pub hardware_threads: usize,
    /// The GPU `navigator.gpu.requestAdapter()` gave, if any (probed by worker.js).
    pub webgpu: Option<WebgpuInfo>,
    /// Why there is no GPU, in one line, when there is none.
    pub webgpu_note: Option<String>,
}

impl<S: Storage, L: LockManager> Router<S, L> {
    /// Chooses the engine (on the first `init` only: later ones keep it and its run), opens
    /// the storage, and answers `ready`.
    pub(super) async fn init(
        &self,
        backend: BackendChoice,
        choice: StoreChoice,
        checked: bool,
    ) -> Result<(), WorkerError> {
        let browser = &self.env.browser;
        if !self.engine_chosen.get() {
            let probe = GpuProbe { gpu: browser.webgpu.as_ref(), note: browser.webgpu_note.as_deref() };
            let abandon = Rc::clone(&self.abandon);
            let (engine, note) = engine_choice::choose(backend, probe, self.env.cpu, checked, abandon).await;
            *self.session()? = engine;
            *self.backend_note.borrow_mut() = note;
            self.engine_chosen.set(true);
        }
        let stores = Stores::open(&self.storage, choice).await;
        let (storage, storage_note) = (stores.kind(), stores.note());
        *self.stores.borrow_mut() = stores;
        let (quota_bytes, usage_bytes) = self.storage.estimate().await.unzip();
        // One hold of the session: two in one expression would overlap.
        let (backend, checked, mixed_matmul) = {
            let session = self.session()?;
            let gpu_name = browser.webgpu.as_ref().map_or("", |gpu| gpu.adapter.as_str());
            (session.kind(), session.is_checked(), session.mixed_matmul(gpu_name))
        };
        let capabilities = Capabilities {
            backend,
            checked,
            simd: browser.simd,
            relaxed_simd: browser.relaxed_simd,
            cross_origin_isolated: browser.cross_origin_isolated,
            storage,
            storage_note,
            quota_bytes,
            usage_bytes,
            hardware_threads: browser.hardware_threads,
            threads: self.env.threads,
            backend_note: self.backend_note.borrow().clone(),
            webgpu: browser.webgpu.clone(),
            mixed_matmul,
        };
        self.post(&OutMessage::Ready {
            capabilities,
            presets: preset_infos(),
            default_training_config: TrainingConfig::default(),
        });
        Ok(())
    }
}
