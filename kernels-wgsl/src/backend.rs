//! [`WgpuBackend`]: adapter and device set-up, the shared state behind every handle,
//! readback and device errors. The `Backend` impl is in `ops.rs`.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::{Context, Poll, Waker};

use tinygpt_tensor::{Precision, TensorError};

use crate::coop::CoopPlan;
use crate::error::WgpuBackendError;
use crate::flash_attention::FlashAttention;
use crate::pipelines::{Kernel, Pipelines};
use crate::pool::{Bind, Counters, GpuBuffer, Pool, Staging};
use crate::precision::{self, MatmulKernels, MatmulPrecision};
use crate::profile::{self, KernelTime, Profiler};
use crate::recorder::Recorder;
use crate::reductions::RowReductions;
use crate::tuning::Tuning;

/// What the backend runs on, for logs, benchmark lines and capability panels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdapterSummary {
    /// The adapter's name, e.g. `"NVIDIA H200"` or `"llvmpipe (LLVM 15.0.6, 256 bits)"`.
    pub name: String,
    /// The graphics API underneath: `"vulkan"`, `"metal"`, `"webgpu"`, ...
    pub api: String,
    /// `"DiscreteGpu"`, `"IntegratedGpu"`, `"Cpu"` (a software rasterizer), ...
    pub device_type: String,
    /// The largest storage buffer one binding may hold.
    pub max_storage_buffer_binding_size: u64,
    /// The most workgroups one dispatch dimension may have.
    pub max_compute_workgroups_per_dimension: u32,
    /// Whether the adapter offers WGSL's `f16` (`shader-f16`). The device asks for it only
    /// for [`Precision::Mixed`], whose matmul then rounds its inputs to f16 once its
    /// start-up self-test passes ([`WgpuBackend::matmul_precision`] says what runs).
    pub shader_f16: bool,
    /// Whether the adapter offers subgroup operations (`subgroups`). The device asks for
    /// them natively for [`Precision::Mixed`], whose row reductions then run on them
    /// ([`WgpuBackend::row_reductions`] says which run).
    pub subgroups: bool,
}

/// Objects created so far (cumulative). In a steady training loop `buffers` and
/// `bind_groups` stop growing after the first step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WgpuStats {
    /// Buffers created.
    pub buffers: u64,
    /// Bind groups created.
    pub bind_groups: u64,
    /// Pipelines created.
    pub pipelines: u64,
    /// Command submissions.
    pub submissions: u64,
    /// Compute dispatches.
    pub dispatches: u64,
}

pub(crate) struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub adapter: AdapterSummary,
    pub pool: Arc<Pool>,
    pub pipelines: Pipelines,
    pub recorder: Mutex<Recorder>,
    pub counters: Arc<Counters>,
    pub tuning: Tuning,
    /// What the matmul runs, decided (once) when the device opened.
    pub matmul_precision: OnceLock<MatmulPrecision>,
    /// The first error the device reported (validation, out of memory, loss); sticky.
    pub device_error: Arc<Mutex<Option<TensorError>>>,
}

/// Which matmul kernel runs (see `shaders/matmul.wgsl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatmulPath {
    /// Workgroup-memory tiles of 64² or 128² with 4×4 or 8×8 outputs per invocation: the
    /// fast path on GPUs.
    Tiled,
    /// 4×4 outputs per invocation straight from storage, no barriers: faster on software
    /// adapters, which run barriers as context switches.
    Direct,
}

/// The wgpu backend. Cloning shares the device, its queue and its pools.
#[derive(Clone)]
pub struct WgpuBackend {
    pub(crate) gpu: Arc<Gpu>,
    pub(crate) matmul_path: MatmulPath,
    /// Slices of k for every tiled matmul, instead of the tuning's choice (tests).
    pub(crate) matmul_split_k: Option<usize>,
    /// A storage-binding limit below the adapter's, forced by tests only
    /// ([`WgpuBackend::with_max_binding_for_tests`]).
    pub(crate) max_binding_for_tests: Option<u64>,
    /// The matmul rounds its inputs to f16 (the device's mixed path; see `precision.rs`).
    pub(crate) mixed: bool,
    /// When the training attention pair runs flash attention (`flash_attention.rs`).
    pub(crate) flash: FlashAttention,
    /// The mixed matmul runs on cooperative matrices where it can (`coop.rs`).
    pub(crate) coop: Option<CoopPlan>,
    /// How the softmax, LayerNorm and cross-entropy kernels reduce their rows
    /// (`reductions.rs`): on subgroups only when `mixed` and the device has them.
    pub(crate) rows: RowReductions,
}

impl fmt::Debug for WgpuBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WgpuBackend({} via {})", self.gpu.adapter.name, self.gpu.adapter.api)
    }
}

const NAME: &str = "wgpu";

impl WgpuBackend {
    /// Opens the default (high-performance) adapter, waiting on the calling thread. Not
    /// for the browser, where [`WgpuBackend::new_async`] must be awaited.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new() -> Result<Self, WgpuBackendError> {
        tinygpt_tensor::block_on(Self::new_async())
    }

    /// Opens the default adapter (`WGPU_BACKEND` and `WGPU_ADAPTER_NAME` apply) and a
    /// device with every limit the adapter offers and no optional features.
    pub async fn new_async() -> Result<Self, WgpuBackendError> {
        Self::open(false, Precision::F32).await
    }

    /// [`WgpuBackend::new`] whose matmul computes in `precision`, as far as the adapter
    /// allows: for [`Precision::Mixed`] the device asks for `shader-f16` when the adapter
    /// offers it, and the mixed matmul runs only after its start-up self-test passed on
    /// this device; otherwise the matmul stays f32. [`WgpuBackend::matmul_precision`]
    /// says which and why. [`Precision::F32`] is [`WgpuBackend::new`].
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new_with_precision(precision: Precision) -> Result<Self, WgpuBackendError> {
        tinygpt_tensor::block_on(Self::new_async_with_precision(precision))
    }

    /// [`WgpuBackend::new_with_precision`], awaited (the browser's way).
    pub async fn new_async_with_precision(precision: Precision) -> Result<Self, WgpuBackendError> {
        Self::open(false, precision).await
    }

    /// [`WgpuBackend::new_with_precision`] on a device that can time every dispatch (see
    /// [`WgpuBackend::set_profiling`]); an error when the adapter has no timestamp queries
    /// inside compute passes.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new_profiled(precision: Precision) -> Result<Self, WgpuBackendError> {
        tinygpt_tensor::block_on(Self::open(true, precision))
    }

    async fn open(profiled: bool, precision: Precision) -> Result<Self, WgpuBackendError> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                force_fallback_adapter: false,
                compatible_surface: None,
                apply_limit_buckets: false,
            })
            .await
            .map_err(|e| WgpuBackendError::NoAdapter { reason: e.to_string() })?;
        let info = adapter.get_info();
        let limits = adapter.limits();
        let profile_features = if profiled { profile::features() } else { wgpu::Features::empty() };
        if !adapter.features().contains(profile_features) {
            return Err(WgpuBackendError::RequestDevice {
                adapter: info.name.clone(),
                reason: "no timestamp queries inside compute passes, so no profile".into(),
            });
        }
        let shader_f16 = adapter.features().contains(wgpu::Features::SHADER_F16);
        let mixed = precision == Precision::Mixed && shader_f16;
        // The cooperative-matrix matmul's features, only where it may run (`coop.rs`).
        let coop = if mixed { precision::coop_plan(&adapter) } else { Err(String::new()) };
        let coop_features = wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX | wgpu::Features::SUBGROUP;
        // (Intersected with the adapter's: `TINYGPT_WGPU_COOP=force` plans it anyway.)
        let coop_features =
            if coop.is_ok() { coop_features & adapter.features() } else { wgpu::Features::empty() };
        // Subgroups for the row reductions of mixed precision (`reductions.rs`).
        let subgroup_rows = RowReductions::wanted(precision, &adapter);
        let required_features = profile_features
            | coop_features
            | if subgroup_rows { wgpu::Features::SUBGROUP } else { wgpu::Features::empty() }
            | if mixed { wgpu::Features::SHADER_F16 } else { wgpu::Features::empty() };
        let experimental_features = if !coop_features.is_empty() {
            // SAFETY: wgpu marks cooperative matrices experimental (its SPIR-V for them may
            // have bugs). The kernel that uses them runs only after the start-up self-test
            // compared it with the f32 matmul on this device (`precision.rs`).
            unsafe { wgpu::ExperimentalFeatures::enabled() }
        } else {
            wgpu::ExperimentalFeatures::default()
        };
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("tinygpt"),
                required_features,
                required_limits: limits.clone(),
                experimental_features,
                memory_hints: wgpu::MemoryHints::Performance,
                trace: wgpu::Trace::Off,
            })
            .await
            .map_err(|e| WgpuBackendError::RequestDevice {
                adapter: info.name.clone(),
                reason: e.to_string(),
            })?;

        let device_error: Arc<Mutex<Option<TensorError>>> = Arc::new(Mutex::new(None));
        let sink = Arc::clone(&device_error);
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            let error = match &e {
                wgpu::Error::OutOfMemory { .. } => {
                    TensorError::OutOfMemory { backend: NAME.into(), reason: e.to_string() }
                }
                _ => TensorError::Readback { backend: NAME.into(), reason: format!("GPU error: {e}") },
            };
            record_error(&sink, error);
        }));
        let sink = Arc::clone(&device_error);
        device.set_device_lost_callback(move |reason, message| {
            let error = TensorError::DeviceLost {
                backend: NAME.into(),
                reason: format!("device lost ({reason:?}): {message}"),
            };
            record_error(&sink, error);
        });

        let counters = Arc::new(Counters::default());
        let tuning = Tuning::from_env();
        let mut recorder = Recorder::new(&device, &counters, tuning.submit_every);
        if profiled {
            recorder.profiler = Some(Profiler::new(&device, &queue));
        }
        let adapter_summary = AdapterSummary {
            name: info.name.clone(),
            api: format!("{:?}", info.backend).to_lowercase(),
            device_type: format!("{:?}", info.device_type),
            max_storage_buffer_binding_size: limits.max_storage_buffer_binding_size as u64,
            max_compute_workgroups_per_dimension: limits.max_compute_workgroups_per_dimension,
            shader_f16,
            subgroups: adapter.features().contains(wgpu::Features::SUBGROUP),
        };
        let gpu = Gpu {
            pool: Arc::new(Pool::new(device.clone(), Arc::clone(&counters))),
            pipelines: Pipelines::new(device.clone(), Arc::clone(&counters)),
            recorder: Mutex::new(recorder),
            device,
            queue,
            adapter: adapter_summary,
            counters,
            tuning,
            matmul_precision: OnceLock::new(),
            device_error,
        };
        let matmul_path =
            if info.device_type == wgpu::DeviceType::Cpu { MatmulPath::Direct } else { MatmulPath::Tiled };
        let f32 = WgpuBackend {
            gpu: Arc::new(gpu),
            matmul_path,
            matmul_split_k: None,
            max_binding_for_tests: None,
            mixed: false,
            flash: FlashAttention::from_env(),
            coop: None,
            rows: RowReductions::Workgroup,
        };
        let (chosen, coop) = precision::choose(&f32, precision, &adapter, coop).await;
        let mixed = chosen.kernels != MatmulKernels::F32;
        f32.gpu.matmul_precision.set(chosen).expect("the matmul precision is chosen once");
        let rows = if mixed && subgroup_rows { RowReductions::Subgroup } else { RowReductions::Workgroup };
        Ok(WgpuBackend { mixed, coop, rows, ..f32 })
    }

    /// The same device with another matmul kernel (the default: [`MatmulPath::Direct`] on
    /// software adapters, [`MatmulPath::Tiled`] elsewhere).
    pub fn with_matmul_path(&self, path: MatmulPath) -> Self {
        WgpuBackend { matmul_path: path, ..self.clone() }
    }

    /// The same device with every tiled matmul split into `slices` slices of k (fewer when
    /// k is short; see `shaders/matmul.wgsl`), or, with `None`, as many as the product's
    /// shape calls for (the default). For tests and tuning.
    pub fn with_matmul_split_k(&self, slices: Option<usize>) -> Self {
        WgpuBackend { matmul_split_k: slices, ..self.clone() }
    }

    /// The matmul kernels in use.
    pub fn matmul_path(&self) -> MatmulPath {
        self.matmul_path
    }

    /// The adapter this backend runs on.
    pub fn adapter(&self) -> &AdapterSummary {
        &self.gpu.adapter
    }

    /// What the matmul runs (f32, or the shader-f16 path of mixed precision) and why, as
    /// chosen when the device opened; print it with `{}`.
    pub fn matmul_precision(&self) -> &MatmulPrecision {
        self.gpu.matmul_precision.get().expect("chosen when the device opened")
    }

    /// How the softmax, LayerNorm and cross-entropy rows are reduced: on subgroups with
    /// mixed precision on a native device that offers them, else in workgroup memory
    /// (always on `f32`, whose results stay bit for bit what they were).
    pub fn row_reductions(&self) -> RowReductions {
        self.rows
    }

    /// Counters since the backend was made.
    pub fn stats(&self) -> WgpuStats {
        let c = &self.gpu.counters;
        WgpuStats {
            buffers: c.buffers.load(Ordering::Relaxed),
            bind_groups: c.bind_groups.load(Ordering::Relaxed),
            pipelines: c.pipelines.load(Ordering::Relaxed),
            submissions: c.submissions.load(Ordering::Relaxed),
            dispatches: c.dispatches.load(Ordering::Relaxed),
        }
    }

    /// Starts (or stops) timing every dispatch on a device from
    /// [`WgpuBackend::new_profiled`]; false (and nothing changes) on any other device.
    /// Profiling waits for the GPU at every submission: time steps with it off.
    pub fn set_profiling(&self, on: bool) -> bool {
        let mut rec = self.recorder();
        rec.submit(&self.gpu.queue, &self.gpu.counters);
        match rec.profiler.as_mut() {
            Some(profiler) => {
                profiler.enabled = on;
                true
            }
            None => false,
        }
    }

    /// GPU time per kernel label since the last call (or since profiling started), largest
    /// first; submits what is recorded so it is counted. Empty without a profiler.
    pub fn take_profile(&self) -> Vec<KernelTime> {
        let mut rec = self.recorder();
        rec.submit(&self.gpu.queue, &self.gpu.counters);
        rec.profiler.as_mut().map(Profiler::take).unwrap_or_default()
    }

    /// Submits every recorded command without waiting for it, and reports an error the
    /// device has raised so far (`Backend::flush` also waits).
    pub fn submit(&self) -> Result<(), TensorError> {
        self.recorder().submit(&self.gpu.queue, &self.gpu.counters);
        self.check()
    }

    /// Submits every recorded command and waits until the GPU has run them (for timing).
    pub async fn sync(&self) -> Result<(), TensorError> {
        let probe = self.gpu.pool.storage::<f32>(1);
        self.read_buffer(&probe).await.map(|_| ())
    }

    pub(crate) fn recorder(&self) -> MutexGuard<'_, Recorder> {
        self.gpu.recorder.lock().expect("a kernel panicked while recording")
    }

    /// The sticky device error, if any.
    pub(crate) fn check(&self) -> Result<(), TensorError> {
        match self.gpu.device_error.lock().expect("device error lock").clone() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// **Test-only**: the same device, acting as if its largest storage binding were `bytes`
    /// (at most the adapter's): `alloc` refuses larger tensors and
    /// `Backend::max_tensor_len` reports `bytes / 4`, so buffer sharding can be tested on an
    /// adapter whose real limit (128 MiB on lavapipe) no small model reaches. Nothing outside
    /// tests should call it: the real limit is the adapter's.
    pub fn with_max_binding_for_tests(&self, bytes: u64) -> Self {
        let bytes = bytes.min(self.gpu.adapter.max_storage_buffer_binding_size);
        WgpuBackend { max_binding_for_tests: Some(bytes), ..self.clone() }
    }

    /// The largest storage binding this backend uses: the adapter's, or the tests' override.
    pub(crate) fn max_binding(&self) -> u64 {
        self.max_binding_for_tests.unwrap_or(self.gpu.adapter.max_storage_buffer_binding_size)
    }

    /// A new uninitialised buffer of `len` elements.
    ///
    /// Every buffer is bound whole, so one above the adapter's largest storage binding could
    /// never be used: record a sticky error that names the sizes (reported by the next
    /// `flush` or `read`, as ops do not wait) before wgpu's own validation message.
    pub(crate) fn alloc<T>(&self, len: usize) -> GpuBuffer<T> {
        let bytes = len as u64 * 4;
        let limit = self.max_binding();
        if bytes > limit {
            let reason = format!(
                "a tensor of {len} elements ({bytes} bytes) is larger than this adapter's largest \
                 storage binding ({limit} bytes)"
            );
            record_error(&self.gpu.device_error, TensorError::OutOfMemory { backend: NAME.into(), reason });
        }
        self.gpu.pool.storage(len)
    }

    /// Records `kernel` (with `defines`) over `grid` workgroups.
    pub(crate) fn run(
        &self,
        kernel: &Kernel,
        defines: &str,
        params: &[u32],
        buffers: &[Bind<'_>],
        grid: [u32; 3],
    ) {
        let pipeline = self.gpu.pipelines.get(kernel, defines);
        let gpu = &self.gpu;
        let label = || profile::label(kernel.entry, defines, params, grid);
        self.recorder().dispatch(
            &gpu.device,
            &gpu.queue,
            &gpu.counters,
            &pipeline,
            params,
            buffers,
            grid,
            label,
        );
    }

    /// Records `kernel` over `groups` workgroups in a 1-D (or folded 2-D) grid.
    pub(crate) fn run_1d(&self, kernel: &Kernel, params: &[u32], buffers: &[Bind<'_>], groups: usize) {
        let grid = self.recorder().grid_1d(groups);
        self.run(kernel, "", params, buffers, grid);
    }

    /// Records a row kernel (one 64-invocation row per workgroup) over `groups`
    /// workgroups, with the backend's `block_sum`/`block_max` (`reductions.rs`).
    pub(crate) fn run_rows(&self, kernel: &Kernel, params: &[u32], buffers: &[Bind<'_>], groups: usize) {
        let grid = self.recorder().grid_1d(groups);
        self.run(kernel, self.rows.block(), params, buffers, grid);
    }

    /// Copies `src` to the host: one submission, then a wait for the mapping.
    pub(crate) fn read_buffer<T: bytemuck::Pod>(
        &self,
        src: &GpuBuffer<T>,
    ) -> impl Future<Output = Result<Vec<T>, TensorError>> + 'static {
        let backend = self.clone();
        let len = src.len();
        let bytes = (len as u64 * 4).max(4);
        let staging = self.gpu.pool.staging(bytes);
        {
            let mut rec = self.recorder();
            rec.transfer(&self.gpu.device).copy_buffer_to_buffer(src.buffer(), 0, &staging.buffer, 0, bytes);
            rec.submit(&self.gpu.queue, &self.gpu.counters);
        }
        let state = Arc::new(Mutex::new(MapState::default()));
        let callback_state = Arc::clone(&state);
        let pool = Arc::clone(&self.gpu.pool);
        staging.buffer.map_async(wgpu::MapMode::Read, 0..bytes, move |result| {
            let mut s = callback_state.lock().expect("map state lock");
            s.fired = true;
            if let Some(orphan) = s.orphan.take() {
                drop(s);
                if result.is_ok() {
                    orphan.buffer.unmap();
                    pool.return_staging(orphan);
                }
                return;
            }
            s.result = Some(result.map_err(|e| e.to_string()));
            if let Some(w) = s.waker.take() {
                w.wake();
            }
        });
        let mut pending = PendingRead {
            staging: Some(staging),
            state: Arc::clone(&state),
            pool: Arc::clone(&self.gpu.pool),
        };
        let wait = MapWait { state, device: self.gpu.device.clone() };
        async move {
            let mapped = wait.await;
            let out = mapped.and_then(|()| {
                let staging = pending.staging.as_ref().expect("held until the read ends");
                let view = staging.buffer.get_mapped_range(0..bytes).map_err(|e| e.to_string())?;
                Ok(bytemuck::cast_slice::<u8, T>(&view)[..len].to_vec())
            });
            if out.is_ok() {
                let staging = pending.staging.take().expect("held until the read ends");
                staging.buffer.unmap();
                backend.gpu.pool.return_staging(staging);
            }
            backend.check()?;
            out.map_err(|reason| TensorError::Readback { backend: NAME.into(), reason })
        }
    }
}

/// The staging buffer of a read in flight. A read whose future is dropped before its
/// mapping completes (the worker stops waiting when a page message arrives, see
/// `worker/src/interrupt.rs`) must still hand the buffer back to the pool: this guard
/// leaves it to the `map_async` callback (`MapState::orphan`), or returns it itself when
/// the callback has already fired.
struct PendingRead {
    staging: Option<Staging>,
    state: Arc<Mutex<MapState>>,
    pool: Arc<Pool>,
}

impl Drop for PendingRead {
    fn drop(&mut self) {
        let Some(staging) = self.staging.take() else { return };
        let Ok(mut s) = self.state.lock() else { return };
        if !s.fired {
            s.orphan = Some(staging);
            return;
        }
        let mapped = matches!(s.result, Some(Ok(())));
        drop(s);
        // A failed mapping leaves a buffer the failed device owns: not worth keeping.
        if mapped {
            staging.buffer.unmap();
            self.pool.return_staging(staging);
        }
    }
}

fn record_error(sink: &Mutex<Option<TensorError>>, error: TensorError) {
    if let Ok(mut slot) = sink.lock() {
        slot.get_or_insert(error);
    }
}

#[derive(Default)]
struct MapState {
    result: Option<Result<(), String>>,
    /// The callback has run (its result may have been taken since).
    fired: bool,
    waker: Option<Waker>,
    /// The staging buffer of a read abandoned before its mapping completed; the callback
    /// returns it to the pool.
    orphan: Option<Staging>,
}

/// Resolves when a `map_async` callback has fired. Natively it drives the device itself
/// (a blocking poll); in a browser the event loop fires the callback and wakes the task.
struct MapWait {
    state: Arc<Mutex<MapState>>,
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    device: wgpu::Device,
}

impl Future for MapWait {
    type Output = Result<(), String>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some(r) = self.state.lock().expect("map state lock").result.take() {
            return Poll::Ready(r);
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            if let Err(e) = self.device.poll(wgpu::PollType::wait_indefinitely()) {
                return Poll::Ready(Err(format!("waiting for the GPU failed: {e}")));
            }
            if let Some(r) = self.state.lock().expect("map state lock").result.take() {
                return Poll::Ready(r);
            }
        }
        let mut s = self.state.lock().expect("map state lock");
        if let Some(r) = s.result.take() {
            return Poll::Ready(r);
        }
        s.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}
