//! What each page message does (see `PROTOCOL.md` for the messages and their answers).

use std::rc::Rc;

use tinygpt_model::data::dataset_id;

use super::{Router, Storage};
use crate::adapters::BaseModel;
use crate::error::WorkerError;
use crate::locks::{adapter_lock_name, run_lock_name, LockManager};
use crate::protocol::{BaseSource, ErrorCode, HfFiles, InMessage, OutMessage};
use crate::session::{resolve_configs, AdapterRequest, SampleRequest, TrainRequest};

impl<S: Storage, L: LockManager> Router<S, L> {
    pub(super) async fn dispatch(&self, message: InMessage) -> Result<(), WorkerError> {
        match message {
            InMessage::Init { backend, storage, checked } => self.init(backend, storage, checked).await,
            InMessage::Train { model_config, preset, training_config, dataset } => {
                let request = TrainRequest { model_config, preset, training_config };
                let (model, training) = resolve_configs(request.clone())?;
                let lock = run_lock_name(&model, &training, &dataset_id(&dataset.bytes));
                self.hold_run(&lock, &model.model_name, &dataset.name).await?;
                let out = self.session()?.start(request, dataset, self.now())?;
                self.warned_no_storage.set(false);
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
                let store = self.stores.borrow().require_checkpoints()?;
                let ckpt = store.load(&id).await?;
                self.post_all(self.session()?.load(ckpt, id, &dataset, self.now()))
            }
            InMessage::Delete { id } => {
                let store = self.stores.borrow().require_checkpoints()?;
                self.with_store_lock(store.delete(&id)).await?;
                self.post(&OutMessage::Deleted { id });
                self.post_list().await
            }
            InMessage::Export { id } => {
                let store = self.stores.borrow().require_checkpoints()?;
                let (file_name, bytes) = store.export(id.as_deref()).await?;
                self.post(&OutMessage::Exported { file_name, bytes });
                Ok(())
            }
            InMessage::Import { bytes } => {
                let store = self.stores.borrow().require_checkpoints()?;
                let (id, step, bytes) = self.with_store_lock(store.import(&bytes)).await?;
                self.post(&OutMessage::CheckpointSaved { id, step, bytes });
                self.post_list().await
            }
            InMessage::LoadBase { source, id, bytes, name, url, files } => {
                let base = self.base_model(BaseRequest { source, id, bytes, name, url, files }).await?;
                base.check_tokenizer()?;
                let out = self.session()?.load_base(Rc::new(base));
                out.iter().for_each(|m| self.post(m));
                self.post_adapters().await
            }
            InMessage::TrainAdapter {
                name,
                preset,
                rank,
                alpha,
                targets,
                training_config,
                context,
                dataset,
            } => {
                let lock = adapter_lock_name(&name);
                self.hold_run(&lock, &format!("adapter {name}"), &dataset.name).await?;
                let request = AdapterRequest { name, preset, rank, alpha, targets, training_config, context };
                let out = self.session()?.start_adapter(request, dataset, self.now())?;
                self.warned_no_storage.set(false);
                out.iter().for_each(|m| self.post(m));
                Ok(())
            }
            InMessage::ListAdapters => self.post_adapters().await,
            InMessage::LoadAdapter { name, dataset, context } => {
                let adapters = self.stores.borrow().require_adapters()?;
                let base = self.session()?.base().ok_or_else(|| {
                    WorkerError::new(
                        ErrorCode::NoBase,
                        "Load a base model first, then load an adapter onto it.",
                    )
                })?;
                let ckpt = adapters.load(&name, &base).await?;
                let out = self.session()?.load_adapter(name, ckpt, dataset.as_ref(), context, self.now());
                self.post_all(out)
            }
            InMessage::ListBases => self.post_bases().await,
            InMessage::DeleteBase { url } => self.delete_base(&url).await,
        }
    }

    /// The base a `loadBase` names: the bundled one or an upload (from its bytes), a saved
    /// run of the checkpoint store, or a GPT-2 folder (by URL, or its files).
    async fn base_model(&self, request: BaseRequest) -> Result<BaseModel, WorkerError> {
        let BaseRequest { source, id, bytes, name, url, files } = request;
        match source {
            BaseSource::Builtin => BaseModel::builtin(&require_bytes(bytes, "the bundled base's file")?),
            BaseSource::Upload => {
                let name = name.unwrap_or_else(|| "uploaded base".into());
                BaseModel::from_safetensors(name, source, &require_bytes(bytes, "the uploaded file")?)
            }
            BaseSource::Url => self.hf_base_from_url(url.as_deref().unwrap_or(""), name).await,
            BaseSource::Files => {
                let files = files.ok_or_else(|| {
                    WorkerError::new(
                        ErrorCode::BadMessage,
                        "A \"loadBase\" of picked files needs its \"files\": the bytes of config.json, \
                         model.safetensors, vocab.json and merges.txt.",
                    )
                })?;
                BaseModel::from_hf(name.unwrap_or_else(|| "picked GPT-2 files".into()), source, &files)
            }
            BaseSource::Checkpoint => {
                let id = id.ok_or_else(|| {
                    WorkerError::new(
                        ErrorCode::BadMessage,
                        "A \"loadBase\" from a checkpoint needs its \"id\": send the id of a checkpoint that \
                         \"listCheckpoints\" returned.",
                    )
                })?;
                let store = self.stores.borrow().require_checkpoints()?;
                let ckpt = store.load(&id).await?;
                let name = name.unwrap_or_else(|| {
                    format!("{} on {} (checkpoint {id})", ckpt.model_config.model_name, ckpt.dataset.name)
                });
                BaseModel::new(name, source, ckpt)
            }
        }
    }
}

/// A `loadBase`'s fields.
struct BaseRequest {
    source: BaseSource,
    id: Option<String>,
    bytes: Option<Vec<u8>>,
    name: Option<String>,
    url: Option<String>,
    files: Option<HfFiles>,
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
