//! The worker's state: at most one run (a [`Trainer`] plus its lifecycle) and at most one
//! sample in progress, advanced in time-budgeted [`Session::tick`]s.
//!
//! Why slices: the worker must answer `pause` and `stop` within 200 ms, but a wasm call
//! cannot be interrupted. So the JS glue calls `tick(budget)` repeatedly and yields to the
//! event loop in between. A tick runs units of work (a training step or a part of one, a
//! validation batch or a part of one, a sampled token; cut by [`crate::row_parts`]) until the
//! budget is spent, and does not start a unit that the last one's duration says would
//! overrun it. So a tick lasts at most about the budget or one unit, whichever is longer,
//! and so does the wait of a command — except that on the CPU, when the page shares its
//! message counter, a unit during which a message arrives is given up at once and taken
//! again later ([`crate::abandon`]), so units can be whole steps. A tick started while
//! sampling samples instead of training.
//!
//! Async: every readback from the device is awaited ([`Session::tick_async`],
//! [`Session::stop_async`]), because a WebGPU readback completes only when the browser's
//! event loop turns. A training step reads nothing back at f32 (at mixed precision, one value:
//! loss scaling's decision, awaited once the device has finished the step); the losses of the
//! steps since the last progress message are read when the next one is due (or an evaluation
//! starts, or the run ends). Native callers use the blocking wrappers ([`Session::tick`], [`Session::stop`]).
//!
//! A tick waits for each unit on the device (so its budget rule sees real durations) but
//! stops waiting when a page message raises the [`Interrupt`]; `stop` answers before the
//! device has finished (its last `progress` follows `done`). So commands stay prompt on a
//! GPU whose units take longer than the 200 ms a command may wait.

use std::rc::Rc;

use serde_json::{Map, Value};
use tinygpt_ckpt::{AdapterCheckpoint, BaseRef};
use tinygpt_model::head_loss::CHUNK_MULTIPLY_ADDS;
use tinygpt_model::{Dataset, Gpt, ModelConfig, SampleConfig, Tokenizer};
use tinygpt_optim::{Overrides, Recipe, TrainedSet, Trainer, TrainingConfig};
use tinygpt_tensor::{block_on, Backend, Precision};

use crate::abandon::{Abandon, Abandonable, SkipWhenAbandoned};
use crate::adapters::BaseModel;
use crate::clock::Clock;
use crate::error::WorkerError;
use crate::fits::{check_fits_one_buffer, check_fits_wasm32};
use crate::interrupt::Interrupt;
use crate::protocol::{DatasetInput, DoneReason, EngineKind, ErrorCode, OutMessage, RunState};
use crate::row_parts::unit_rows;
use crate::sampler::Sampler;

mod active_run;
mod lora;

use active_run::run_info;
pub use active_run::ActiveRun;
use lora::merged_model;
pub use lora::{adapter_snapshot, AdapterRequest};

/// Progress goes out at most this often (and whenever something notable happens), so the
/// page gets several updates a second without a message per step.
pub const PROGRESS_INTERVAL_MS: f64 = 250.0;

/// The most tokens one `sample` may ask for (documented in PROTOCOL.md): enough for pages
/// of text, while a request for a billion cannot keep the worker busy for hours.
pub const MAX_SAMPLE_TOKENS: usize = 10_000;

/// What `train` asks for, before validation.
#[derive(Clone, Debug, Default)]
pub struct TrainRequest {
    pub model_config: Option<ModelConfig>,
    pub preset: Option<String>,
    pub training_config: Option<Value>,
}

/// A sampling request (`sample` message).
#[derive(Clone, Debug, PartialEq)]
pub struct SampleRequest {
    pub prompt: String,
    pub max_tokens: usize,
    pub temperature: f32,
    pub top_k: usize,
    pub seed: u64,
    /// 1 keeps every token.
    pub top_p: f32,
    /// Byte sequences that end the sample.
    pub stop: Vec<Vec<u8>>,
    /// LoRA: `Some(false)` the base alone, `Some(true)` base + adapter, `None` the current
    /// model (see `InMessage::Sample`).
    pub adapter: Option<bool>,
}

/// What a tick did.
#[derive(Debug, Default)]
pub struct TickOutcome {
    pub messages: Vec<OutMessage>,
    /// A checkpoint should be written now (interval reached, or training ended).
    pub save_due: bool,
    /// More ticks are needed (training or sampling is in progress).
    pub busy: bool,
}

/// What an adapter run saves under, and on which base.
#[derive(Clone, Debug)]
pub struct AdapterRunInfo {
    pub name: String,
    pub base: BaseRef,
    /// The base's tokenizer, which the run's samples decode with.
    pub tokenizer: Tokenizer,
}

/// The model a sample runs on (chosen as it starts; see [`Session::sample`]).
#[derive(Debug)]
enum SampleModel<B: Backend> {
    /// The run's model (for an adapter run: the frozen base alone).
    Run,
    /// The adapter run's base with its adapter as it is now, merged once the readback is in.
    RunMerged,
    /// A model built for this sample: the loaded base, alone or with the selected adapter.
    Own(Box<Gpt<B>>),
}

#[derive(Debug)]
pub struct Session<B: Backend> {
    backend: B,
    /// The handle `precision: mixed` runs train on (its matmul narrows its inputs where the
    /// device chose the f16 path); `None` where this backend has no narrow matmul (the CPU
    /// builds), so mixed is refused ([`Session::backend_for`]).
    mixed: Option<B>,
    kind: EngineKind,
    /// How a unit of work is given up when a page message waits (see [`crate::abandon`]);
    /// `None` on a backend that cannot be ([`Session::new`]).
    abandon: Option<Rc<Abandon>>,
    run: Option<ActiveRun<B>>,
    sampler: Option<Sampler<B>>,
    sample_model: SampleModel<B>,
    /// LoRA: the frozen base adapters train on and sample with.
    base: Option<Rc<BaseModel>>,
    /// LoRA: an adapter `loadAdapter` selected for sampling (no run).
    selected: Option<(String, AdapterCheckpoint)>,
}

impl<B: Backend> Session<B> {
    pub fn new(backend: B, kind: EngineKind) -> Self {
        Session {
            backend,
            mixed: None,
            kind,
            abandon: None,
            run: None,
            sampler: None,
            sample_model: SampleModel::Run,
            base: None,
            selected: None,
        }
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// This session with `mixed` as the handle for `precision: mixed` runs (WebGPU).
    pub fn with_mixed(self, mixed: B) -> Self {
        Session { mixed: Some(mixed), ..self }
    }

    /// The handle a run at `precision` trains on, or why this backend cannot train it.
    /// The precision a saved run continues at here: its own, except that a run saved at
    /// `mixed` continues at `f32` on a backend without a narrow matmul (the CPU builds, a
    /// GPU run carried over to WebAssembly after its device was lost). Its master weights
    /// and optimizer state are f32 either way, as `--precision f32` on a resume does natively.
    pub fn continuing_precision(&self, saved: Precision) -> Precision {
        match (saved, &self.mixed) {
            (Precision::Mixed, None) => Precision::F32,
            (saved, _) => saved,
        }
    }

    pub fn backend_for(&self, precision: Precision) -> Result<&B, WorkerError> {
        match (precision, &self.mixed) {
            (Precision::F32, _) => Ok(&self.backend),
            (Precision::Mixed, Some(mixed)) => Ok(mixed),
            (Precision::Mixed, None) => Err(mixed_refused(self.kind)),
        }
    }

    /// Whether units of work can be given up when a page message waits, so the session
    /// takes whole steps (see [`crate::row_parts::unit_rows`]).
    pub fn abandons_units(&self) -> bool {
        self.abandon.as_ref().is_some_and(|a| a.is_available())
    }

    /// What `progress.backend` reports.
    pub fn kind(&self) -> EngineKind {
        self.kind
    }

    pub fn run(&self) -> Option<&ActiveRun<B>> {
        self.run.as_ref()
    }

    pub fn run_mut(&mut self) -> Option<&mut ActiveRun<B>> {
        self.run.as_mut()
    }

    /// The Web Lock the run holds while it trains ([`crate::locks`]); `None` when not training.
    pub fn training_lock(&self) -> Option<String> {
        self.run.as_ref().filter(|r| r.state == RunState::Training).map(ActiveRun::lock_name)
    }

    pub fn is_busy(&self) -> bool {
        self.sampler.is_some() || self.run.as_ref().is_some_and(|r| r.state == RunState::Training)
    }

    /// Starts a fresh run, replacing the current one: `runStarted`, `status`.
    pub fn start(
        &mut self,
        request: TrainRequest,
        dataset: DatasetInput,
        now_ms: f64,
    ) -> Result<Vec<OutMessage>, WorkerError> {
        let (model_config, training_config) = resolve_configs(request)?;
        check_fits_wasm32(&model_config, training_config.batch_size)?;
        let backend = self.backend_for(training_config.precision)?;
        check_fits_one_buffer(backend, &model_config, training_config.batch_size)?;
        let data =
            Dataset::new(&dataset.name, &dataset.bytes, model_config.context_length, training_config.seed)?;
        let trained = TrainedSet::whole_model(backend, model_config);
        let trainer = Trainer::new(trained, training_config, data, None)?;
        Ok(self.install(trainer, None, RunState::Training, now_ms))
    }

    /// Makes `trainer` the current run in `state` (a loaded checkpoint comes in paused):
    /// `runStarted` (with the history so far), `status`.
    pub fn install(
        &mut self,
        mut trainer: Trainer<B>,
        checkpoint_id: Option<String>,
        state: RunState,
        now_ms: f64,
    ) -> Vec<OutMessage> {
        // A step is given up only between ops: a GPT-2 vocabulary's head takes tens of
        // milliseconds a chunk rather than seconds whole (`tinygpt_model::head_loss`).
        trainer.model_mut().set_head_chunk_budget(Some(CHUNK_MULTIPLY_ADDS));
        let rows_per_part =
            unit_rows(trainer.model().config(), trainer.config().batch_size, self.abandons_units());
        let step = trainer.progress().step;
        let run = ActiveRun::new(trainer, checkpoint_id, state, rows_per_part, now_ms);
        let info = run_info(&run);
        self.run = Some(run);
        // The sample in progress came from the model this run replaces: it ends here.
        let mut out: Vec<OutMessage> = self.cancel_sample(now_ms).into_iter().collect();
        out.extend([OutMessage::RunStarted { run: info }, OutMessage::Status { state, step }]);
        out
    }

    pub fn pause(&mut self) -> Result<Vec<OutMessage>, WorkerError> {
        let run = self.run.as_mut().ok_or_else(|| WorkerError::no_run("pause"))?;
        if run.state == RunState::Training {
            run.state = RunState::Paused;
        }
        let out = vec![OutMessage::Status { state: run.state, step: run.step() }];
        self.forget_given_up();
        Ok(out)
    }

    /// A paused or stopped run starts afresh on units given up (see
    /// [`Abandon::forget_given_up`]), so the first units after a resume answer the next
    /// pause or stop at once however often the page paused before.
    fn forget_given_up(&self) {
        if let Some(abandon) = &self.abandon {
            abandon.forget_given_up();
        }
    }

    /// Continues a paused or stopped run.
    pub fn resume(&mut self, now_ms: f64) -> Result<Vec<OutMessage>, WorkerError> {
        let run = self.run.as_mut().ok_or_else(|| WorkerError::no_run("resume"))?;
        let trainer = run.trainer();
        if run.training.has_nothing_left() && trainer.should_stop_early() {
            return Err(WorkerError::new(
                ErrorCode::RunFinished,
                format!(
                    "This run stopped early: its validation loss has not improved for {} evaluations \
                     (early_stop_patience). Generate text with its best checkpoint, download it, or start a \
                     new run.",
                    trainer.config().early_stop_patience.unwrap_or(0)
                ),
            ));
        }
        if run.training.has_nothing_left() {
            return Err(WorkerError::new(
                ErrorCode::RunFinished,
                format!(
                    "This run has already trained all {} of its steps, so there is nothing to resume. Generate \
                     text with it, download it, or start a new run to train more.",
                    trainer.config().max_steps
                ),
            ));
        }
        run.resume_at(now_ms);
        Ok(vec![OutMessage::Status { state: run.state, step: run.step() }])
    }

    /// Stops training (the run stays, for sampling, saving and `resume`) without waiting
    /// for the device: `status`, `done {reason: "stopped"}`. [`Session::last_progress_async`]
    /// then reports the steps still unread.
    pub fn halt(&mut self) -> Result<Vec<OutMessage>, WorkerError> {
        let run = self.run.as_mut().ok_or_else(|| WorkerError::no_run("stop"))?;
        run.state = RunState::Stopped;
        let step = run.step();
        self.forget_given_up();
        Ok(vec![
            OutMessage::Status { state: RunState::Stopped, step },
            OutMessage::Done { reason: DoneReason::Stopped, step },
        ])
    }

    /// A `progress` with the losses not yet reported (it waits for the device), if any.
    pub async fn last_progress_async(&mut self) -> Vec<OutMessage> {
        let kind = self.kind;
        let Some(run) = self.run.as_mut() else { return Vec::new() };
        // A loss that cannot be read (a diverged step, a lost device) costs only the points.
        let _ = run.collect_points().await;
        run.progress(kind).map(OutMessage::Progress).into_iter().collect()
    }

    /// [`Session::halt`] then [`Session::last_progress_async`]: `status`, `done`, `progress`.
    pub async fn stop_async(&mut self) -> Result<Vec<OutMessage>, WorkerError> {
        let mut out = self.halt()?;
        out.extend(self.last_progress_async().await);
        Ok(out)
    }

    /// [`Session::stop_async`] for synchronous callers (see `tinygpt_tensor::block_on`).
    pub fn stop(&mut self) -> Result<Vec<OutMessage>, WorkerError> {
        block_on(self.stop_async())
    }

    /// Begins sampling with the current model; text arrives from later ticks. A sample
    /// still in progress is cancelled: its `sampleDone {cancelled: true}` is returned.
    pub fn sample(&mut self, request: SampleRequest, now_ms: f64) -> Result<Vec<OutMessage>, WorkerError> {
        if self.run.is_none() && self.base.is_none() {
            return Err(WorkerError::no_run("sample from"));
        }
        if !(request.temperature.is_finite() && request.temperature >= 0.0) {
            return Err(WorkerError::new(ErrorCode::InvalidConfig, "Temperature must be 0 or more."));
        }
        if !(1..=MAX_SAMPLE_TOKENS).contains(&request.max_tokens) {
            return Err(WorkerError::new(
                ErrorCode::InvalidConfig,
                format!(
                    "A sample can be 1 to {MAX_SAMPLE_TOKENS} tokens long, not {}. Ask for fewer tokens \
                     (and sample again to continue the text).",
                    request.max_tokens
                ),
            ));
        }
        let config = SampleConfig {
            max_tokens: request.max_tokens,
            temperature: request.temperature,
            top_k: request.top_k,
            top_p: request.top_p,
            seed: request.seed,
            stop: request.stop,
            cached: true,
        };
        if let Err(reason) = config.check() {
            let mut reason = reason.replace("top_p", "topP");
            reason[..1].make_ascii_uppercase();
            return Err(WorkerError::new(
                ErrorCode::InvalidConfig,
                format!("{reason}. Change this sampling setting and sample again."),
            ));
        }
        let model = self.sample_model_for(request.adapter)?;
        let tokenizer = self.tokenizer_of(&model);
        let cancelled = self.cancel_sample(now_ms);
        self.sample_model = model;
        self.sampler = Some(Sampler::new(request.prompt.as_bytes(), &tokenizer, config, now_ms));
        Ok(cancelled.into_iter().collect())
    }

    /// Ends the sample in progress, if any: its `sampleDone {cancelled: true}`.
    fn cancel_sample(&mut self, now_ms: f64) -> Option<OutMessage> {
        self.sample_model = SampleModel::Run;
        self.sampler.take().map(|s| s.done_message(now_ms, true))
    }

    /// Works for about `budget_ms`: samples if a sample is in progress, else trains. Ends
    /// early, without waiting for the device, when `interrupt` is raised.
    pub async fn tick_async(
        &mut self,
        budget_ms: f64,
        clock: &dyn Clock,
        interrupt: &Interrupt,
    ) -> Result<TickOutcome, WorkerError> {
        let start = clock.now_ms();
        let mut out = TickOutcome::default();
        if self.sampler.is_some() {
            self.sample_slice(start, budget_ms, clock, &mut out).await?;
        } else if let Some(run) = self.run.as_mut() {
            if run.state == RunState::Training {
                let abandon = self.abandon.as_deref();
                run.train_slice(self.kind, start, budget_ms, clock, interrupt, abandon, &mut out).await?;
            }
        }
        out.busy = self.is_busy();
        Ok(out)
    }

    /// [`Session::tick_async`] for synchronous callers (see `tinygpt_tensor::block_on`).
    pub fn tick(&mut self, budget_ms: f64, clock: &dyn Clock) -> Result<TickOutcome, WorkerError> {
        block_on(self.tick_async(budget_ms, clock, &Interrupt::default()))
    }

    async fn sample_slice(
        &mut self,
        start: f64,
        budget_ms: f64,
        clock: &dyn Clock,
        out: &mut TickOutcome,
    ) -> Result<(), WorkerError> {
        if matches!(self.sample_model, SampleModel::RunMerged) {
            if let Some(run) = self.run.as_ref() {
                self.sample_model = SampleModel::Own(Box::new(merged_model(run.trainer()).await?));
            }
        }
        let model = match (&self.sample_model, self.run.as_ref()) {
            (SampleModel::Own(model), _) => model,
            (_, Some(run)) => run.trainer().model(),
            (_, None) => return Ok(()),
        };
        let Some(sampler) = self.sampler.as_mut() else { return Ok(()) };
        let mut chunk = String::new();
        while !sampler.is_done() {
            chunk.push_str(&sampler.advance(model).await?);
            if clock.now_ms() - start >= budget_ms {
                break;
            }
        }
        if !chunk.is_empty() {
            out.messages.push(OutMessage::SampleChunk { text: chunk });
        }
        if sampler.is_done() {
            out.messages.push(sampler.done_message(clock.now_ms(), false));
            self.sampler = None;
            self.sample_model = SampleModel::Run;
        }
        Ok(())
    }
}

impl<B: Backend> Session<Abandonable<B>> {
    /// A session on `inner` whose units of work `abandon` can give up (see
    /// [`crate::abandon`]): whole steps when the page shares its message counter.
    pub fn abandonable(inner: B, kind: EngineKind, abandon: Rc<Abandon>) -> Self {
        let mut session =
            Session::new(Abandonable::with_hook(inner, SkipWhenAbandoned::new(Rc::clone(&abandon))), kind);
        session.abandon = Some(abandon);
        session
    }
}

/// A request's `trainingConfig`: its fields (none when left out or null), or an error
/// naming what came instead of an object.
pub(crate) fn training_fields(config: Option<Value>) -> Result<Map<String, Value>, WorkerError> {
    match config {
        Some(Value::Object(map)) => Ok(map),
        None | Some(Value::Null) => Ok(Map::new()),
        Some(other) => Err(WorkerError::new(
            ErrorCode::InvalidConfig,
            format!("The training config must be an object, not {other}."),
        )),
    }
}

/// The model config (explicit, or the preset's) and the training config: the given fields
/// over the documented defaults, with the preset's batch size unless one is given — the
/// rules of `tinygpt_optim::Recipe`, which the CLI builds its runs with too.
pub fn resolve_configs(request: TrainRequest) -> Result<(ModelConfig, TrainingConfig), WorkerError> {
    let training = training_fields(request.training_config)?;
    let recipe = Recipe {
        preset: request.preset,
        model: request.model_config,
        training,
        overrides: Overrides::default(),
    };
    let (model, training) = recipe.build()?;
    // `train` reads its text as bytes; a BPE model's ids would be the wrong tokens.
    if model.tokenizer != tinygpt_model::tokenizer::BYTE_V1 {
        return Err(WorkerError::new(
            ErrorCode::InvalidConfig,
            format!(
                "The page trains byte-level models only, and this model config names the tokenizer {}. Load a \
                 GPT-2 model as a LoRA base instead, or leave the tokenizer out.",
                model.tokenizer
            ),
        ));
    }
    Ok((model, training))
}

/// Why `precision: mixed` cannot train on `kind` (a CPU build), in the CLI's words.
fn mixed_refused(kind: EngineKind) -> WorkerError {
    WorkerError::new(
        ErrorCode::InvalidConfig,
        format!(
            "Precision \"mixed\" trains on WebGPU only: the {} backend computes in f32 (it has no f16 matmul). \
             Choose f32, or the webgpu backend where the browser offers it.",
            kind.name()
        ),
    )
}
