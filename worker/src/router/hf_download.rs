//! `loadBase {source: "url"}`: a Hugging Face GPT-2 folder from the browser's cache or
//! downloaded file by file with `baseDownload` progress, its small files checked before the
//! weights are fetched, and kept for the next time once it imported. Every failure names
//! the file and the URL: an HTTP status (404: no such file there), a network error, a body
//! shorter than the server announced, a folder that is not GPT-2, a full storage. And the
//! kept copies: `listBases` and `deleteBase`, downloads cut short included.

use tinygpt_model::ModelConfig;

use crate::adapters::BaseModel;
use crate::error::WorkerError;
use crate::hf_base::{HfHead, HF_FILES};
use crate::locks::LockManager;
use crate::protocol::{BaseSource, ErrorCode, OutMessage, StoreKind};

use super::{Router, Storage};

/// Progress is posted at most once per this many bytes (and as each file starts and ends).
const PROGRESS_EVERY: u64 = 256 * 1024;

/// The largest `config.json`, `vocab.json` or `merges.txt` accepted (GPT-2's vocab.json is
/// about 1 MiB).
const MAX_SMALL_FILE: u64 = 64 << 20;

/// Room for a `model.safetensors` header beyond its f32 tensors.
const HEADER_ROOM: u64 = 16 << 20;

impl<S: Storage, L: LockManager> Router<S, L> {
    /// The GPT-2 folder at `url` as a base called `name` (the URL when absent).
    pub(super) async fn hf_base_from_url(
        &self,
        url: &str,
        name: Option<String>,
    ) -> Result<BaseModel, WorkerError> {
        let folder = folder_url(url)?;
        let name = name.unwrap_or_else(|| folder.clone());
        let cache = self.stores.borrow().bases();
        if let Some(cache) = &cache {
            let post = |file: &str, n: u64| self.post_progress(file, n, Some(n), true);
            if let Some(files) = cache.read(&folder, post).await? {
                match BaseModel::from_hf(name.clone(), BaseSource::Url, &files) {
                    Ok(base) => return Ok(base),
                    // A kept copy that no longer imports is dropped and fetched again.
                    Err(_) => cache.forget(&folder).await?,
                }
            }
        }
        let mut files = Vec::with_capacity(HF_FILES.len());
        let mut limit = MAX_SMALL_FILE;
        for file in HF_FILES {
            files.push(self.download(&folder, file, limit).await?);
            if let [config, vocab, merges] = &files[..] {
                // Refused here, a folder that is not GPT-2 costs no download of its weights.
                let head = HfHead::read(config, vocab, merges)?;
                limit = largest_weights_file(&head.config);
            }
        }
        let files = crate::base_cache::in_order(files);
        let base = BaseModel::from_hf(name, BaseSource::Url, &files)?;
        if let Some(cache) = cache {
            self.with_store_lock(cache.write(&folder, &files, self.now()))
                .await
                .map_err(|e| not_kept(e, &folder))?;
        }
        Ok(base)
    }

    /// `folder` + `file`, read whole with progress; refused past `limit` bytes.
    async fn download(&self, folder: &str, file: &str, limit: u64) -> Result<Vec<u8>, WorkerError> {
        let url = format!("{folder}{file}");
        let failed = |why: String| {
            WorkerError::new(
                ErrorCode::DownloadFailed,
                format!("{file} could not be downloaded from {url}: {why}."),
            )
        };
        let mut body = self.fetch.get(&url).await.map_err(|e| {
            failed(format!("{e} (is the address right, and does its server allow this page to fetch it?)"))
        })?;
        match body.status() {
            200 => {}
            404 => {
                return Err(failed(format!(
                    "the server has no such file (HTTP 404). Give the address of a folder that holds a Hugging Face \
                     GPT-2 model's {}",
                    HF_FILES.join(", ")
                )))
            }
            status => return Err(failed(format!("the server answered HTTP {status}"))),
        }
        let total = body.length();
        if let Some(n) = total.filter(|&n| n > limit) {
            return Err(failed(format!("it is {n} bytes, more than the {limit} this model's {file} can be")));
        }
        let mut bytes = Vec::with_capacity(total.unwrap_or(0).min(limit) as usize);
        self.post_progress(file, 0, total, false);
        let mut posted = 0;
        while let Some(chunk) =
            body.chunk().await.map_err(|e| failed(format!("the connection failed ({e})")))?
        {
            bytes.extend_from_slice(&chunk);
            let done = bytes.len() as u64;
            if done > limit || total.is_some_and(|n| done > n) {
                return Err(failed(format!(
                    "it is larger than the {} bytes announced",
                    total.unwrap_or(limit)
                )));
            }
            if done - posted >= PROGRESS_EVERY {
                self.post_progress(file, done, total, false);
                posted = done;
            }
        }
        let done = bytes.len() as u64;
        if let Some(n) = total.filter(|&n| n != done) {
            return Err(failed(format!(
                "the download ended after {done} of its {n} bytes (cut short); try again"
            )));
        }
        self.post_progress(file, done, total, false);
        Ok(bytes)
    }

    /// `bases`: the GPT-2 folders kept in browser storage, downloads cut short among them
    /// (none without storage). Listed holding the store lock, so another tab's download
    /// being written is not taken for one cut short.
    pub(super) async fn post_bases(&self) -> Result<(), WorkerError> {
        let Some(cache) = self.stores.borrow().bases() else {
            self.post(&OutMessage::Bases { items: Vec::new(), storage: StoreKind::None });
            return Ok(());
        };
        let items = self.with_store_lock(cache.list()).await?;
        self.post(&OutMessage::Bases { items, storage: cache.kind() });
        Ok(())
    }

    /// `deleteBase`: drops the kept copy of the folder at `url`, complete or cut short (a
    /// loaded base stays loaded: it is in memory), then `baseDeleted` and `bases`.
    pub(super) async fn delete_base(&self, url: &str) -> Result<(), WorkerError> {
        if url.trim().is_empty() {
            return Err(WorkerError::new(
                ErrorCode::BadMessage,
                "A \"deleteBase\" needs its \"url\": one of the addresses \"listBases\" answered with.",
            ));
        }
        let folder = folder_url(url)?;
        let cache = self.stores.borrow().require_bases()?;
        self.with_store_lock(cache.delete(&folder)).await?;
        self.post(&OutMessage::BaseDeleted { url: folder });
        self.post_bases().await
    }

    fn post_progress(&self, file: &str, bytes_done: u64, bytes_total: Option<u64>, cached: bool) {
        self.post(&OutMessage::BaseDownload { file: file.to_string(), bytes_done, bytes_total, cached });
    }
}

/// The most bytes a GPT-2 `model.safetensors` of `config`'s shape can hold in f32: the
/// parameters, an untied copy of the head (`lm_head.weight`, which import checks is tied),
/// and the causal-mask buffers older files keep (`h.N.attn.bias`, 1 × 1 × T × T each).
fn largest_weights_file(config: &ModelConfig) -> u64 {
    let (v, c, t, l) = (config.vocab_size, config.d_model, config.context_length, config.n_layers);
    let values = config.param_count() + v * c + l * (t * t + 1);
    4 * values as u64 + HEADER_ROOM
}

/// `url` as a folder address ending in `/`, refusing an empty one.
pub(super) fn folder_url(url: &str) -> Result<String, WorkerError> {
    let url = url.trim();
    if url.is_empty() {
        return Err(WorkerError::new(
            ErrorCode::BadMessage,
            "A \"loadBase\" from a URL needs its \"url\": the address of a Hugging Face GPT-2 model's folder.",
        ));
    }
    Ok(if url.ends_with('/') { url.to_string() } else { format!("{url}/") })
}

/// A base that imported but could not be kept, in words that say what to do.
fn not_kept(e: WorkerError, folder: &str) -> WorkerError {
    if e.code != ErrorCode::QuotaExceeded {
        return e;
    }
    WorkerError::new(
        ErrorCode::QuotaExceeded,
        format!(
            "The model at {folder} does not fit in this browser's storage, so it was not loaded (it would download \
             again every time). Delete checkpoints or adapters, or allow this site more storage; or pick its four \
             files instead, which are not kept."
        ),
    )
}
