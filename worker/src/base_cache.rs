//! Where a GPT-2 folder fetched by URL is kept, so the next `loadBase` of that URL (after a
//! reload, say) reads it from browser storage instead of downloading it again: one group
//! per URL in the bases store, its four files, then `source.json` naming the URL and the
//! files' sizes and SHA-256s, written atomically last. A group without that pointer is a
//! download cut short and is not read, as a checkpoint generation without its pointer is
//! not; a file whose size or hash differs from the pointer's (storage that lost or changed
//! bytes) makes the copy unread too, so the base is downloaded again rather than imported
//! with damaged weights.
//!
//! The page lists the kept copies ([`BaseCache::list`]: URL, bytes, when fetched) and
//! deletes one ([`BaseCache::delete`]): the pointer goes first, so a delete cut short leaves
//! files no reader takes (the next download of that URL replaces them), never a copy with
//! files missing. The store holds nothing else, so nothing else is touched.

use serde::{Deserialize, Serialize};
use tinygpt_ckpt::BlobStore;
use tinygpt_model::data::dataset_id;

use crate::checkpoints::ckpt_error;
use crate::error::WorkerError;
use crate::hf_base::HF_FILES;
use crate::protocol::{CachedBase, ErrorCode, HfFiles, StoreKind};

/// The pointer that makes a group complete.
const SOURCE: &str = "source.json";

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

    /// Every kept copy, by group: its URL, the bytes its group holds, when it was fetched.
    /// A group without a readable pointer (a download cut short) is not a copy.
    pub async fn list(&self) -> Result<Vec<CachedBase>, WorkerError> {
        let blobs = self.store.list("").await.map_err(ckpt_error)?;
        let mut items = Vec::new();
        for pointer in blobs.iter().filter(|b| b.key.ends_with(&format!("/{SOURCE}"))) {
            let group = &pointer.key[..pointer.key.len() - SOURCE.len()];
            let Some(bytes) = self.store.get(&pointer.key).await.map_err(ckpt_error)? else { continue };
            let Ok(source) = serde_json::from_slice::<Source>(&bytes) else { continue };
            if format!("{}/", group_of(&source.url)) != group {
                continue;
            }
            let bytes = blobs.iter().filter(|b| b.key.starts_with(group)).map(|b| b.bytes).sum();
            items.push(CachedBase { url: source.url, bytes, fetched_ms: source.fetched_ms });
        }
        items.sort_by(|a, b| a.url.cmp(&b.url));
        Ok(items)
    }

    /// Deletes the copy of the folder at `url`: its pointer first (from then on no reader
    /// finds a copy), then its files. `baseNotFound` when none is kept.
    pub async fn delete(&self, url: &str) -> Result<(), WorkerError> {
        let group = group_of(url);
        let pointer = format!("{group}/{SOURCE}");
        if self.store.get(&pointer).await.map_err(ckpt_error)?.is_none() {
            return Err(WorkerError::new(
                ErrorCode::BaseNotFound,
                format!(
                    "No copy of the model at {url} is kept in this browser, so there is nothing to delete. \
                     Pick one from the list of kept bases."
                ),
            ));
        }
        self.store.delete(&pointer).await.map_err(ckpt_error)?;
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
    /// copy; until the pointer is written last, a reader finds no copy.
    pub async fn write(&self, url: &str, files: &HfFiles, fetched_ms: f64) -> Result<(), WorkerError> {
        let group = group_of(url);
        self.store.delete(&format!("{group}/")).await.map_err(ckpt_error)?;
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
    format!("url-{}", &dataset_id(url.as_bytes())[..32])
}

/// Files in [`HF_FILES`] order as the protocol's struct.
pub fn in_order(files: Vec<Vec<u8>>) -> HfFiles {
    let [config_json, vocab_json, merges_txt, model_safetensors]: [Vec<u8>; 4] =
        files.try_into().expect("four files");
    HfFiles { config_json, model_safetensors, vocab_json, merges_txt }
}
