//! Where a GPT-2 folder fetched by URL is kept, so the next `loadBase` of that URL (after a
//! reload, say) reads it from browser storage instead of downloading it again: one group
//! per URL in the bases store holding `started.json` (the URL and when its write began),
//! its four files, then `source.json` naming the URL and the files' sizes and SHA-256s,
//! written atomically last. A group without that pointer is a download cut short (the tab
//! closed while hundreds of megabytes were being written) and is not read, as a checkpoint
//! generation without its pointer is not; a file whose size or hash differs from the
//! pointer's (storage that lost or changed bytes) makes the copy unread too, so the base is
//! downloaded again rather than imported with damaged weights.
//!
//! The marker comes first so that a group cut short still names its URL: the page lists it
//! as an incomplete download with the space it takes, and deletes it by that URL. The files
//! are downloaded into memory and only written once all four arrived and imported, so a
//! download that fails or is closed before then keeps nothing (no marker for a mistyped
//! address either); a write that fails (a full storage) removes what it wrote, since the
//! error already tells the user. Only a write the worker did not live to finish leaves a
//! group behind.
//!
//! The page lists the kept copies ([`BaseCache::list`]: URL, bytes, when fetched, whether
//! complete) and deletes one ([`BaseCache::delete`]): the pointer goes first, so a delete
//! cut short leaves an incomplete group, never a copy with files missing. The store holds
//! nothing else, so nothing else is touched.

use serde::{Deserialize, Serialize};
use tinygpt_ckpt::BlobStore;
use tinygpt_model::data::dataset_id;

use crate::checkpoints::ckpt_error;
use crate::error::WorkerError;
use crate::hf_base::HF_FILES;
use crate::protocol::{CachedBase, ErrorCode, HfFiles, StoreKind};

/// The pointer that makes a group complete.
const SOURCE: &str = "source.json";

/// The marker written before the files: a group without [`SOURCE`] still names its URL.
const STARTED: &str = "started.json";

/// Every group's name starts so ([`group_of`]).
const GROUP_PREFIX: &str = "url-";

#[derive(Serialize, Deserialize)]
struct Source {
    url: String,
    /// Each file's size, in [`HF_FILES`] order.
    bytes: Vec<u64>,
    /// Each file's SHA-256 (lower-case hex), in [`HF_FILES`] order.
    sha256: Vec<String>,
    /// When it was kept ([`crate::clock::Clock::now_ms`]: `Date.now()` in the browser);
    /// absent in pointers written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fetched_ms: Option<f64>,
}

#[derive(Serialize, Deserialize)]
struct Started {
    url: String,
    /// When the write began ([`crate::clock::Clock::now_ms`]).
    started_ms: f64,
}

/// The bases store.
pub struct BaseCache<S> {
    store: S,
    kind: StoreKind,
}

impl<S: BlobStore> BaseCache<S> {
    pub fn new(store: S, kind: StoreKind) -> Self {
        BaseCache { store, kind }
    }

    /// The kind of store it is (the checkpoints' kind).
    pub fn kind(&self) -> StoreKind {
        self.kind
    }

    /// Every group, by URL: the bytes it holds, when it was fetched (or its write began),
    /// and whether it is complete (has its pointer) or a download cut short (only its
    /// marker names the URL).
    ///
    /// A group that names no URL at all is removed here instead of listed: older versions
    /// wrote no marker, so their downloads cut short left such groups, and with no URL
    /// there is nothing to show the user or to download again by, only space to free.
    /// Call it holding the store lock: every write holds it from the group's first key to
    /// its pointer, so under the lock a group without a pointer is never one being written.
    pub async fn list(&self) -> Result<Vec<CachedBase>, WorkerError> {
        let blobs = self.store.list("").await.map_err(ckpt_error)?;
        let mut groups: Vec<&str> = blobs
            .iter()
            .filter_map(|b| b.key.split_once('/').map(|(group, _)| group))
            .filter(|group| group.starts_with(GROUP_PREFIX))
            .collect();
        groups.dedup();
        let mut items = Vec::new();
        for group in groups {
            let prefix = format!("{group}/");
            let bytes = blobs.iter().filter(|b| b.key.starts_with(&prefix)).map(|b| b.bytes).sum();
            if let Some(source) = self.json::<Source>(group, SOURCE, |s| &s.url).await? {
                items.push(CachedBase {
                    url: source.url,
                    bytes,
                    fetched_ms: source.fetched_ms,
                    complete: true,
                });
            } else if let Some(started) = self.json::<Started>(group, STARTED, |s| &s.url).await? {
                items.push(CachedBase {
                    url: started.url,
                    bytes,
                    fetched_ms: Some(started.started_ms),
                    complete: false,
                });
            } else {
                self.store.delete(&prefix).await.map_err(ckpt_error)?;
            }
        }
        items.sort_by(|a, b| a.url.cmp(&b.url));
        Ok(items)
    }

    /// `group`'s `name` read as a `T`, if it is there, parses, and names (by `url_of`) a URL
    /// whose group this is.
    async fn json<T: for<'de> Deserialize<'de>>(
        &self,
        group: &str,
        name: &str,
        url_of: impl Fn(&T) -> &String,
    ) -> Result<Option<T>, WorkerError> {
        let Some(bytes) = self.store.get(&format!("{group}/{name}")).await.map_err(ckpt_error)? else {
            return Ok(None);
        };
        Ok(serde_json::from_slice::<T>(&bytes).ok().filter(|t| group_of(url_of(t)) == group))
    }

    /// Deletes what is kept of the folder at `url`, complete or cut short: its pointer
    /// first (from then on no reader finds a copy), then the rest of its group.
    /// `baseNotFound` when nothing is kept.
    pub async fn delete(&self, url: &str) -> Result<(), WorkerError> {
        let group = group_of(url);
        if self.store.list(&format!("{group}/")).await.map_err(ckpt_error)?.is_empty() {
            return Err(WorkerError::new(
                ErrorCode::BaseNotFound,
                format!(
                    "No copy of the model at {url} is kept in this browser, so there is nothing to delete. \
                     Pick one from the list of kept bases."
                ),
            ));
        }
        self.store.delete(&format!("{group}/{SOURCE}")).await.map_err(ckpt_error)?;
        self.store.delete(&format!("{group}/")).await.map_err(ckpt_error)
    }

    /// The folder at `url`, if a complete copy is kept; `on_file(name, bytes)` as each file
    /// is read.
    pub async fn read(
        &self,
        url: &str,
        mut on_file: impl FnMut(&str, u64),
    ) -> Result<Option<HfFiles>, WorkerError> {
        let group = group_of(url);
        let Some(source) = self.store.get(&format!("{group}/{SOURCE}")).await.map_err(ckpt_error)? else {
            return Ok(None);
        };
        let Ok(source) = serde_json::from_slice::<Source>(&source) else { return Ok(None) };
        if source.url != url || source.bytes.len() != HF_FILES.len() || source.sha256.len() != HF_FILES.len()
        {
            return Ok(None);
        }
        let mut files = Vec::with_capacity(HF_FILES.len());
        for ((name, &size), sha) in HF_FILES.iter().zip(&source.bytes).zip(&source.sha256) {
            match self.store.get(&format!("{group}/{name}")).await.map_err(ckpt_error)? {
                Some(bytes) if bytes.len() as u64 == size && dataset_id(&bytes) == *sha => {
                    on_file(name, size);
                    files.push(bytes);
                }
                _ => return Ok(None),
            }
        }
        Ok(Some(in_order(files)))
    }

    /// Keeps `files` as the folder at `url`, fetched at `fetched_ms`, replacing any earlier
    /// copy: the marker, the files, the pointer last (until then a reader finds no copy).
    /// A write that fails takes back what it wrote, so a full storage is not fuller after.
    pub async fn write(&self, url: &str, files: &HfFiles, fetched_ms: f64) -> Result<(), WorkerError> {
        let group = group_of(url);
        self.store.delete(&format!("{group}/")).await.map_err(ckpt_error)?;
        let written = self.write_group(&group, url, files, fetched_ms).await;
        if written.is_err() {
            // Best effort: the write's own error is the one to report.
            let _ = self.store.delete(&format!("{group}/")).await;
        }
        written
    }

    async fn write_group(
        &self,
        group: &str,
        url: &str,
        files: &HfFiles,
        fetched_ms: f64,
    ) -> Result<(), WorkerError> {
        let started = Started { url: url.to_string(), started_ms: fetched_ms };
        let started = serde_json::to_vec(&started).expect("plain data serializes");
        self.store.put_atomic(&format!("{group}/{STARTED}"), &started).await.map_err(ckpt_error)?;
        let contents = [&files.config_json, &files.vocab_json, &files.merges_txt, &files.model_safetensors];
        for (name, bytes) in HF_FILES.iter().zip(contents) {
            self.store.put(&format!("{group}/{name}"), bytes).await.map_err(ckpt_error)?;
        }
        let source = Source {
            url: url.to_string(),
            bytes: contents.iter().map(|b| b.len() as u64).collect(),
            sha256: contents.iter().map(|b| dataset_id(b)).collect(),
            fetched_ms: Some(fetched_ms),
        };
        let pointer = serde_json::to_vec(&source).expect("plain data serializes");
        self.store.put_atomic(&format!("{group}/{SOURCE}"), &pointer).await.map_err(ckpt_error)
    }

    /// Drops what is kept for `url` (a copy that no longer imports).
    pub async fn forget(&self, url: &str) -> Result<(), WorkerError> {
        self.store.delete(&format!("{}/", group_of(url))).await.map_err(ckpt_error)
    }
}

/// The group of `url`: store keys allow few characters, so the URL's hash names it.
fn group_of(url: &str) -> String {
    format!("{GROUP_PREFIX}{}", &dataset_id(url.as_bytes())[..32])
}

/// Files in [`HF_FILES`] order as the protocol's struct.
pub fn in_order(files: Vec<Vec<u8>>) -> HfFiles {
    let [config_json, vocab_json, merges_txt, model_safetensors]: [Vec<u8>; 4] =
        files.try_into().expect("four files");
    HfFiles { config_json, model_safetensors, vocab_json, merges_txt }
}
