//! Crash-safe saves as generations under one root, behind a pointer.
//!
//! ```text
//! <root>/latest.json      {"format_version": 1, "latest": "gen-000042", "previous": ["gen-000041"]}
//! <root>/gen-000041/…     an older checkpoint in the layout (see `layout`)
//! <root>/gen-000042/…     the checkpoint `load_latest` reads
//! ```
//! A save writes a new generation completely (trainer_state.json last), reads every file
//! back and compares it with what was written, and only then replaces latest.json with
//! [`Storage::put_atomic`]. A save interrupted anywhere before that flip leaves
//! latest.json and the generations it names untouched; the abandoned generation is removed
//! by the next successful save. After the flip, generations not named by the pointer
//! (beyond the newest `keep`) are deleted.
//!
//! `load_latest` reads the pointed generation and reports its errors as they are: it does
//! not silently fall back to an older one, since that would quietly lose training. The
//! caller can [`CheckpointStore::list`] the generations and [`CheckpointStore::load`] an
//! older one. A root without latest.json that directly holds the layout's files (a plain
//! checkpoint directory written by another tool) is loaded as it is.
//!
//! One writer per root: two processes saving into the same root at once is not supported.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::checkpoint::Checkpoint;
use crate::decode::{read_checkpoint, LoadOptions};
use crate::encode::encode;
use crate::error::{CkptError, Result};
use crate::json::{from_json, to_json};
use crate::layout::{FILES, FORMAT_VERSION, TRAINER_STATE};
use crate::store::Storage;

/// The pointer's key.
pub const POINTER: &str = "latest.json";
const MAX_POINTER_BYTES: u64 = 64 << 10;

/// latest.json: the current generation and the older ones still kept, newest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Pointer {
    format_version: u32,
    latest: String,
    previous: Vec<String>,
}

/// What a save wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaveReport {
    /// The new generation, e.g. `gen-000042`.
    pub id: String,
    pub step: usize,
    /// Bytes written (all files of the generation).
    pub bytes: u64,
    /// Generations deleted after the pointer moved.
    pub pruned: Vec<String>,
}

/// One saved generation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenerationInfo {
    pub id: String,
    pub step: usize,
    pub bytes: u64,
    /// Whether latest.json points at it.
    pub latest: bool,
}

/// Saves, loads and lists checkpoints in a [`Storage`].
#[derive(Debug)]
pub struct CheckpointStore<S> {
    storage: S,
    keep: usize,
    options: LoadOptions,
}

/// What the root holds.
#[derive(Default)]
struct RootScan {
    /// Generation number → (file names, total bytes).
    generations: BTreeMap<u64, (Vec<String>, u64)>,
    /// Layout files directly in the root (a plain checkpoint directory).
    bare_files: Vec<String>,
    foreign: Vec<String>,
}

fn generation_id(n: u64) -> String {
    format!("gen-{n:06}")
}

fn parse_generation(id: &str) -> Option<u64> {
    let digits = id.strip_prefix("gen-")?;
    if digits.len() < 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

impl<S: Storage> CheckpointStore<S> {
    /// A store keeping the last 2 generations, loading strictly.
    pub fn new(storage: S) -> Self {
        CheckpointStore { storage, keep: 2, options: LoadOptions::default() }
    }

    /// Keeps the last `keep` generations (at least 1).
    pub fn with_keep(mut self, keep: usize) -> Self {
        self.keep = keep.max(1);
        self
    }

    pub fn with_load_options(mut self, options: LoadOptions) -> Self {
        self.options = options;
        self
    }

    pub fn storage(&self) -> &S {
        &self.storage
    }

    /// Writes `ckpt` as a new generation, verifies it, points latest.json at it and prunes.
    /// On failure the previous checkpoint is untouched; a quota error reports the bytes the
    /// whole generation needs.
    pub async fn save(&self, ckpt: &Checkpoint) -> Result<SaveReport> {
        let files = encode(ckpt, true)?;
        let scan = self.scan().await?;
        if !scan.foreign.is_empty() || !scan.bare_files.is_empty() {
            let mut found = scan.foreign.clone();
            found.extend(scan.bare_files.iter().cloned());
            return Err(self.foreign_error(&found));
        }
        let pointer = self.read_pointer().await?;
        let number = scan.generations.keys().next_back().map_or(1, |n| n + 1);
        let id = generation_id(number);
        let bytes: u64 = files.iter().map(|f| f.bytes.len() as u64).sum();

        if let Err(e) = self.write_generation(&id, &files).await {
            // Best effort: a crashed store refuses this too, and the next save prunes it.
            let _ = self.storage.delete(&format!("{id}/")).await;
            return Err(match e {
                CkptError::QuotaExceeded { .. } => CkptError::QuotaExceeded { needed_bytes: bytes },
                e => e,
            });
        }

        let mut previous = Vec::new();
        if let Some(p) = pointer {
            previous.push(p.latest);
            previous.extend(p.previous);
        }
        previous.truncate(self.keep - 1);
        let new_pointer = Pointer { format_version: FORMAT_VERSION, latest: id.clone(), previous };
        if let Err(e) = self.storage.put_atomic(POINTER, &to_json(POINTER, &new_pointer, 1)?).await {
            let _ = self.storage.delete(&format!("{id}/")).await;
            return Err(e);
        }

        let mut pruned = Vec::new();
        for &n in scan.generations.keys() {
            let old = generation_id(n);
            if !new_pointer.previous.contains(&old) {
                self.storage
                    .delete(&format!("{old}/"))
                    .await
                    .map_err(|e| CkptError::Prune { saved: id.clone(), reason: e.to_string() })?;
                pruned.push(old);
            }
        }
        Ok(SaveReport { id, step: ckpt.progress.step, bytes, pruned })
    }

    /// The checkpoint latest.json points at (see the module docs for what happens when it
    /// is corrupt).
    pub async fn load_latest(&self) -> Result<Checkpoint> {
        if let Some(pointer) = self.read_pointer().await? {
            return self.load(&pointer.latest).await;
        }
        let scan = self.scan().await?;
        if !scan.foreign.is_empty() {
            return Err(self.foreign_error(&scan.foreign));
        }
        if scan.bare_files.iter().any(|f| f == TRAINER_STATE) {
            if let Some((n, _)) = scan.generations.iter().next() {
                let found = format!("{} next to a plain checkpoint", generation_id(*n));
                return Err(self.foreign_error(&[found]));
            }
            return read_checkpoint(&self.storage, "", &self.options).await;
        }
        let detail = match scan.generations.keys().next_back() {
            Some(&n) => {
                format!("{} was never completed (no latest.json); the save was interrupted", generation_id(n))
            }
            None if scan.bare_files.is_empty() => "the location is empty".into(),
            None => "trainer_state.json is missing".into(),
        };
        Err(CkptError::NoCheckpoint { location: self.storage.location(""), detail })
    }

    /// The generation `id` (as in [`GenerationInfo::id`]).
    pub async fn load(&self, id: &str) -> Result<Checkpoint> {
        if parse_generation(id).is_none() {
            return Err(CkptError::GenerationNotFound {
                location: self.storage.location(""),
                id: id.to_string(),
            });
        }
        read_checkpoint(&self.storage, &format!("{id}/"), &self.options).await
    }

    /// Every generation whose trainer_state.json can be read, oldest first. Files are not
    /// verified here; [`CheckpointStore::load`] does that.
    pub async fn list(&self) -> Result<Vec<GenerationInfo>> {
        let scan = self.scan().await?;
        let latest = self.read_pointer().await?.map(|p| p.latest);
        let mut out = Vec::new();
        for (&n, (names, bytes)) in &scan.generations {
            let id = generation_id(n);
            if !names.iter().any(|f| f == TRAINER_STATE) {
                continue;
            }
            let key = format!("{id}/{TRAINER_STATE}");
            let Some(state) = self.storage.get(&key).await? else { continue };
            if let Ok(state) = crate::decode::parse_trainer_state(&key, &state) {
                let latest = latest.as_deref() == Some(id.as_str());
                out.push(GenerationInfo { id, step: state.step, bytes: *bytes, latest });
            }
        }
        Ok(out)
    }

    /// Deletes generation `id`; the latest one cannot be deleted.
    pub async fn delete(&self, id: &str) -> Result<()> {
        let not_found =
            || CkptError::GenerationNotFound { location: self.storage.location(""), id: id.to_string() };
        let n = parse_generation(id).ok_or_else(not_found)?;
        if !self.scan().await?.generations.contains_key(&n) {
            return Err(not_found());
        }
        if let Some(mut pointer) = self.read_pointer().await? {
            if pointer.latest == id {
                return Err(CkptError::DeleteLatest { id: id.to_string() });
            }
            if pointer.previous.iter().any(|p| p == id) {
                pointer.previous.retain(|p| p != id);
                self.storage.put_atomic(POINTER, &to_json(POINTER, &pointer, 1)?).await?;
            }
        }
        self.storage.delete(&format!("{id}/")).await
    }

    async fn write_generation(&self, id: &str, files: &[crate::encode::EncodedFile]) -> Result<()> {
        for f in files {
            self.storage.put(&format!("{id}/{}", f.name), &f.bytes).await?;
        }
        let listed = self.storage.list(&format!("{id}/")).await?;
        if listed.len() != files.len() {
            let names: Vec<_> = listed.iter().map(|b| b.key.as_str()).collect();
            return Err(CkptError::WriteVerification {
                file: self.storage.location(&format!("{id}/")),
                reason: format!("holds {names:?} after writing {} files", files.len()),
            });
        }
        for f in files {
            let key = format!("{id}/{}", f.name);
            let back = self.storage.get(&key).await?;
            if back.as_deref() != Some(&f.bytes[..]) {
                let reason = match back {
                    None => "the file is gone".to_string(),
                    Some(b) => format!("{} bytes read back, {} written", b.len(), f.bytes.len()),
                };
                return Err(CkptError::WriteVerification { file: self.storage.location(&key), reason });
            }
        }
        Ok(())
    }

    async fn read_pointer(&self) -> Result<Option<Pointer>> {
        let Some(bytes) = self.storage.get(POINTER).await? else { return Ok(None) };
        let file = self.storage.location(POINTER);
        if bytes.len() as u64 > MAX_POINTER_BYTES {
            return Err(CkptError::TooLarge { file, bytes: bytes.len() as u64, limit: MAX_POINTER_BYTES });
        }
        let value: serde_json::Value = from_json(&file, &bytes)?;
        match value.get("format_version").and_then(serde_json::Value::as_u64) {
            Some(v) if v == u64::from(FORMAT_VERSION) => {}
            Some(found) => {
                return Err(CkptError::UnsupportedVersion { file, found, supported: FORMAT_VERSION })
            }
            None => return Err(CkptError::InvalidJson { file, reason: "no numeric format_version".into() }),
        }
        let pointer: Pointer = from_json(&file, &bytes)?;
        if let Some(bad) =
            std::iter::once(&pointer.latest).chain(&pointer.previous).find(|g| parse_generation(g).is_none())
        {
            return Err(CkptError::InvalidJson { file, reason: format!("{bad:?} is not a generation name") });
        }
        Ok(Some(pointer))
    }

    async fn scan(&self) -> Result<RootScan> {
        let mut scan = RootScan::default();
        for blob in self.storage.list("").await? {
            match blob.key.split_once('/') {
                Some((group, name)) => match parse_generation(group) {
                    Some(n) => {
                        let entry = scan.generations.entry(n).or_default();
                        entry.0.push(name.to_string());
                        entry.1 += blob.bytes;
                    }
                    None => scan.foreign.push(format!("{group}/")),
                },
                None if blob.key == POINTER => {}
                None if FILES.contains(&blob.key.as_str()) => scan.bare_files.push(blob.key),
                None => scan.foreign.push(blob.key),
            }
        }
        scan.foreign.dedup();
        Ok(scan)
    }

    fn foreign_error(&self, found: &[String]) -> CkptError {
        let mut shown: Vec<String> = found.iter().take(3).map(|f| format!("{f:?}")).collect();
        if found.len() > 3 {
            shown.push(format!("and {} more", found.len() - 3));
        }
        CkptError::ForeignFiles { location: self.storage.location(""), found: shown.join(", ") }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_names_round_trip() {
        assert_eq!(generation_id(42), "gen-000042");
        assert_eq!(parse_generation("gen-000042"), Some(42));
        assert_eq!(parse_generation("gen-1234567"), Some(1_234_567));
        for bad in ["gen-42", "gen-00004x", "gen_000042", "gen-99999999999999999999999"] {
            assert_eq!(parse_generation(bad), None, "{bad}");
        }
    }
}
