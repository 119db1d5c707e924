//! Crash-safe saves as generations under one root, behind a pointer.
//!
//! ```text
//! <root>/latest.json      {"format_version": 1, "latest": "gen-000042", "previous": ["gen-000041"]}
//! <root>/gen-000041/…     an older checkpoint in the layout (see `layout`)
//! <root>/gen-000042/…     the checkpoint `load_latest` reads
//! ```
//! A save writes a new generation completely (trainer_state.json last), reads every file
//! back and compares it with what was written, and only then replaces latest.json with
//! [`BlobStore::put_atomic`]. A save interrupted anywhere before that flip leaves
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
//! Beside the newest generations the store keeps the *best* one, the generation with the
//! lowest validation loss measured on exactly its weights (a loss point at its own step):
//!
//! ```text
//! <root>/best.json        {"format_version": 1, "best": "gen-000040", "step": 8000,
//!                          "val_loss": 1.4672, "trainer_state_sha256": "…"}
//! ```
//! best.json is flipped with the same [`BlobStore::put_atomic`] as latest.json, after it
//! (an interrupted save leaves the old best pointed at and unpruned), and records the
//! sha256 of the generation's trainer_state.json (which checksums every other file), so a
//! pointer that no longer matches its generation is refused by name. Pruning never removes
//! the best generation. A missing or corrupt best.json is not trusted: the next save (and
//! [`CheckpointStore::load_best`], which says why) recomputes the best from the
//! generations that verify.
//!
//! One writer per root: two processes saving into the same root at once is not supported
//! (natively, `WriterLock` enforces it).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::checkpoint::Checkpoint;
use crate::decode::{read_checkpoint, LoadOptions};
use crate::encode::encode;
use crate::error::{CkptError, Result};
use crate::json::{from_json, to_json};
use crate::layout::{sha256_hex, FILES, FORMAT_VERSION, TRAINER_STATE};
use crate::store::BlobStore;

/// The pointer's key.
pub const POINTER: &str = "latest.json";
/// The best generation's pointer key.
pub const BEST_POINTER: &str = "best.json";
const MAX_POINTER_BYTES: u64 = 64 << 10;

/// latest.json: the current generation and the older ones still kept, newest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Pointer {
    format_version: u32,
    latest: String,
    previous: Vec<String>,
}

/// best.json: the generation with the lowest validation loss at its own step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BestPointer {
    format_version: u32,
    best: String,
    step: usize,
    val_loss: f32,
    /// sha256 of the generation's trainer_state.json.
    trainer_state_sha256: String,
}

/// The best generation: the one with the lowest validation loss measured at its own step.
#[derive(Clone, Debug, PartialEq)]
pub struct BestInfo {
    /// The generation's id.
    pub id: String,
    /// Its step.
    pub step: usize,
    /// Its validation loss.
    pub val_loss: f32,
}

/// What [`CheckpointStore::load_best`] read.
#[derive(Clone, Debug, PartialEq)]
pub struct BestLoad {
    /// Which generation is best.
    pub best: BestInfo,
    /// That generation.
    pub checkpoint: Checkpoint,
    /// Why best.json was not used (missing or corrupt, naming it), when the best was
    /// recomputed from the generations that verify instead.
    pub fallback: Option<String>,
}

/// The validation loss measured on `ckpt`'s own weights: its history's point at its step.
pub fn val_loss_at_step(ckpt: &Checkpoint) -> Option<f32> {
    ckpt.loss_history.iter().rev().find(|p| p.step == ckpt.progress.step).and_then(|p| p.val_loss)
}

/// What a save wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaveReport {
    /// The new generation, e.g. `gen-000042`.
    pub id: String,
    /// The step saved.
    pub step: usize,
    /// Bytes written (all files of the generation).
    pub bytes: u64,
    /// Generations deleted after the pointer moved.
    pub pruned: Vec<String>,
    /// Whether best.json now names this generation.
    pub best: bool,
}

/// One saved generation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenerationInfo {
    /// The generation's id.
    pub id: String,
    /// Its step.
    pub step: usize,
    /// Its size in bytes.
    pub bytes: u64,
    /// Whether latest.json points at it.
    pub latest: bool,
    /// Whether best.json points at it (and matches it).
    pub best: bool,
}

/// Saves, loads and lists checkpoints in a [`BlobStore`].
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

impl<S: BlobStore> CheckpointStore<S> {
    /// A store keeping the last 2 generations, loading strictly.
    pub fn new(storage: S) -> Self {
        CheckpointStore { storage, keep: 2, options: LoadOptions::default() }
    }

    /// Keeps the last `keep` generations (at least 1).
    pub fn with_keep(mut self, keep: usize) -> Self {
        self.keep = keep.max(1);
        self
    }

    /// These load options (e.g. verification) for every load.
    pub fn with_load_options(mut self, options: LoadOptions) -> Self {
        self.options = options;
        self
    }

    /// The underlying store.
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
        // The best so far, before anything changes: a missing or corrupt best.json is
        // recomputed from the generations that verify.
        let old_best = match self.verified_best().await {
            Ok(Some(best)) => Some(best),
            _ => self.recompute_best(None).await?.map(|(best, _)| best),
        };
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

        // The generations kept behind the new one: the newest that verify. A corrupt one is
        // never kept in place of an intact older one (it would be pruned first).
        let mut candidates: Vec<String> = Vec::new();
        if let Some(p) = pointer {
            candidates.push(p.latest);
            candidates.extend(p.previous);
        }
        for &n in scan.generations.keys().rev() {
            let older = generation_id(n);
            if !candidates.contains(&older) {
                candidates.push(older);
            }
        }
        let mut previous = Vec::new();
        for candidate in candidates {
            if previous.len() + 1 >= self.keep {
                break;
            }
            if self.load(&candidate).await.is_ok() {
                previous.push(candidate);
            }
        }
        let new_pointer = Pointer { format_version: FORMAT_VERSION, latest: id.clone(), previous };
        if let Err(e) = self.storage.put_atomic(POINTER, &to_json(POINTER, &new_pointer, 1)?).await {
            let _ = self.storage.delete(&format!("{id}/")).await;
            return Err(e);
        }

        // The new generation becomes the best when its own validation loss beats the best's.
        let new_val = val_loss_at_step(ckpt);
        let is_best = new_val.is_some_and(|v| old_best.as_ref().is_none_or(|b| v < b.val_loss));
        let kept_best = if is_best {
            let state =
                files.iter().find(|f| f.name == TRAINER_STATE).expect("encode writes trainer_state.json");
            let best = BestPointer {
                format_version: FORMAT_VERSION,
                best: id.clone(),
                step: ckpt.progress.step,
                val_loss: new_val.expect("is_best"),
                trainer_state_sha256: sha256_hex(&state.bytes),
            };
            // latest.json already names the new generation; on failure nothing is pruned,
            // so the old best stays pointed at and intact.
            self.storage
                .put_atomic(BEST_POINTER, &to_json(BEST_POINTER, &best, 1)?)
                .await
                .map_err(|e| CkptError::BestPointer { saved: id.clone(), reason: e.to_string() })?;
            Some(id.clone())
        } else {
            if let Some(best) = &old_best {
                // A recomputed best (best.json was missing or corrupt) is written back.
                if !matches!(self.verified_best().await, Ok(Some(ref b)) if b.id == best.id) {
                    self.write_best_pointer(&best.id)
                        .await
                        .map_err(|e| CkptError::BestPointer { saved: id.clone(), reason: e.to_string() })?;
                }
            }
            old_best.map(|b| b.id)
        };

        let mut pruned = Vec::new();
        for &n in scan.generations.keys() {
            let old = generation_id(n);
            if !new_pointer.previous.contains(&old) && kept_best.as_ref() != Some(&old) {
                self.storage
                    .delete(&format!("{old}/"))
                    .await
                    .map_err(|e| CkptError::Prune { saved: id.clone(), reason: e.to_string() })?;
                pruned.push(old);
            }
        }
        Ok(SaveReport { id, step: ckpt.progress.step, bytes, pruned, best: is_best })
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
            Some(&n) if scan.generations[&n].0.iter().any(|f| f == TRAINER_STATE) => {
                let ids: Vec<String> = scan.generations.keys().map(|&n| generation_id(n)).collect();
                format!(
                    "latest.json, which names the current generation, is missing; the folder holds {}",
                    ids.join(", ")
                )
            }
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
        let n = parse_generation(id);
        if n.is_none() || !self.scan().await?.generations.contains_key(&n.unwrap_or_default()) {
            return Err(self.not_found(id).await);
        }
        read_checkpoint(&self.storage, &format!("{id}/"), &self.options).await
    }

    /// Every generation whose trainer_state.json can be read, oldest first. Files are not
    /// verified here; [`CheckpointStore::load`] does that.
    pub async fn list(&self) -> Result<Vec<GenerationInfo>> {
        let scan = self.scan().await?;
        let latest = self.read_pointer().await?.map(|p| p.latest);
        let best = self.checked_best_pointer().await.ok().flatten().map(|b| b.best);
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
                let best = best.as_deref() == Some(id.as_str());
                out.push(GenerationInfo { id, step: state.step, bytes: *bytes, latest, best });
            }
        }
        Ok(out)
    }

    /// The newest generation that loads and verifies, other than `except` (the one that
    /// just failed), for naming in an error: a corrupt latest is not the end of a run.
    pub async fn newest_intact(&self, except: Option<&str>) -> Result<Option<GenerationInfo>> {
        for info in self.list().await?.into_iter().rev() {
            if Some(info.id.as_str()) != except && self.load(&info.id).await.is_ok() {
                return Ok(Some(info));
            }
        }
        Ok(None)
    }

    /// The generation latest.json names, if it can be read.
    pub async fn latest_id(&self) -> Result<Option<String>> {
        Ok(self.read_pointer().await?.map(|p| p.latest))
    }

    /// Deletes generation `id`; the latest one cannot be deleted.
    pub async fn delete(&self, id: &str) -> Result<()> {
        let n = parse_generation(id);
        if n.is_none() || !self.scan().await?.generations.contains_key(&n.unwrap_or_default()) {
            return Err(self.not_found(id).await);
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
        if matches!(self.read_best_pointer().await, Ok(Some(ref b)) if b.best == id) {
            self.storage.delete(BEST_POINTER).await?;
        }
        self.storage.delete(&format!("{id}/")).await
    }

    /// The best generation, verified: best.json names a generation whose
    /// trainer_state.json has the recorded sha256, which loads with every check, and whose
    /// own validation loss is the recorded one. `Ok(None)`: there is no best.json.
    pub async fn verified_best(&self) -> Result<Option<BestInfo>> {
        let Some(pointer) = self.checked_best_pointer().await? else { return Ok(None) };
        let file = self.storage.location(BEST_POINTER);
        let ckpt = self.load(&pointer.best).await.map_err(|e| CkptError::InvalidJson {
            file: file.clone(),
            reason: format!("it names {}, which does not load: {e}", pointer.best),
        })?;
        if val_loss_at_step(&ckpt).map(f32::to_bits) != Some(pointer.val_loss.to_bits())
            || ckpt.progress.step != pointer.step
        {
            return Err(CkptError::InvalidJson {
                file,
                reason: format!("its step and val_loss do not match {}", pointer.best),
            });
        }
        Ok(Some(BestInfo { id: pointer.best, step: pointer.step, val_loss: pointer.val_loss }))
    }

    /// The best generation's checkpoint. When best.json is missing or corrupt, the best is
    /// recomputed from the generations that verify and [`BestLoad::fallback`] says why.
    pub async fn load_best(&self) -> Result<BestLoad> {
        let fallback = match self.verified_best().await {
            Ok(Some(best)) => {
                let checkpoint = self.load(&best.id).await?;
                return Ok(BestLoad { best, checkpoint, fallback: None });
            }
            Ok(None) => format!("{} is missing", self.storage.location(BEST_POINTER)),
            Err(e) => e.to_string(),
        };
        match self.recompute_best(None).await? {
            Some((best, checkpoint)) => Ok(BestLoad { best, checkpoint, fallback: Some(fallback) }),
            None => Err(CkptError::NoCheckpoint {
                location: self.storage.location(""),
                detail: format!(
                    "no best generation: {fallback}, and no generation that verifies has a validation loss at its own step"
                ),
            }),
        }
    }

    /// The generation (other than `except`) with the lowest validation loss at its own
    /// step among those that load with every check.
    async fn recompute_best(&self, except: Option<&str>) -> Result<Option<(BestInfo, Checkpoint)>> {
        let mut best: Option<(BestInfo, Checkpoint)> = None;
        for &n in self.scan().await?.generations.keys() {
            let id = generation_id(n);
            if Some(id.as_str()) == except {
                continue;
            }
            let Ok(ckpt) = self.load(&id).await else { continue };
            let Some(val) = val_loss_at_step(&ckpt) else { continue };
            if best.as_ref().is_none_or(|(b, _)| val < b.val_loss) {
                best = Some((BestInfo { id, step: ckpt.progress.step, val_loss: val }, ckpt));
            }
        }
        Ok(best)
    }

    async fn write_best_pointer(&self, id: &str) -> Result<()> {
        let key = format!("{id}/{TRAINER_STATE}");
        let state = self
            .storage
            .get(&key)
            .await?
            .ok_or(CkptError::MissingFile { file: self.storage.location(&key) })?;
        let ckpt = self.load(id).await?;
        let best = BestPointer {
            format_version: FORMAT_VERSION,
            best: id.to_string(),
            step: ckpt.progress.step,
            val_loss: val_loss_at_step(&ckpt).ok_or_else(|| CkptError::InvalidCheckpoint {
                reason: format!("{id} has no validation loss at its step"),
            })?,
            trainer_state_sha256: sha256_hex(&state),
        };
        self.storage.put_atomic(BEST_POINTER, &to_json(BEST_POINTER, &best, 1)?).await
    }

    /// best.json parsed, with its sha256 checked against the generation's
    /// trainer_state.json (not the whole generation: see [`Self::verified_best`]).
    async fn checked_best_pointer(&self) -> Result<Option<BestPointer>> {
        let Some(pointer) = self.read_best_pointer().await? else { return Ok(None) };
        let file = self.storage.location(BEST_POINTER);
        let key = format!("{}/{TRAINER_STATE}", pointer.best);
        let actual = self.storage.get(&key).await?.map(|b| sha256_hex(&b));
        if actual.as_deref() != Some(pointer.trainer_state_sha256.as_str()) {
            let reason = match actual {
                None => format!("it names {}, which is gone", pointer.best),
                Some(actual) => format!(
                    "it records sha256 {} for {key}, which is {actual}; best.json or the generation is corrupt",
                    pointer.trainer_state_sha256
                ),
            };
            return Err(CkptError::InvalidJson { file, reason });
        }
        Ok(Some(pointer))
    }

    async fn read_best_pointer(&self) -> Result<Option<BestPointer>> {
        let Some(bytes) = self.storage.get(BEST_POINTER).await? else { return Ok(None) };
        let file = self.storage.location(BEST_POINTER);
        if bytes.len() as u64 > MAX_POINTER_BYTES {
            return Err(CkptError::TooLarge { file, bytes: bytes.len() as u64, limit: MAX_POINTER_BYTES });
        }
        let pointer: BestPointer = from_json(&file, &bytes)?;
        if pointer.format_version != FORMAT_VERSION {
            let found = u64::from(pointer.format_version);
            return Err(CkptError::UnsupportedVersion { file, found, supported: FORMAT_VERSION });
        }
        if parse_generation(&pointer.best).is_none() {
            return Err(CkptError::InvalidJson {
                file,
                reason: format!("{:?} is not a generation name", pointer.best),
            });
        }
        if !pointer.val_loss.is_finite() {
            return Err(CkptError::InvalidJson { file, reason: format!("val_loss is {}", pointer.val_loss) });
        }
        Ok(Some(pointer))
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
                None if blob.key == POINTER || blob.key == BEST_POINTER => {}
                None if FILES.contains(&blob.key.as_str()) => scan.bare_files.push(blob.key),
                None => scan.foreign.push(blob.key),
            }
        }
        scan.foreign.dedup();
        Ok(scan)
    }

    async fn not_found(&self, id: &str) -> CkptError {
        let saved = match self.scan().await {
            Ok(scan) if !scan.generations.is_empty() => {
                let ids: Vec<String> = scan.generations.keys().map(|&n| generation_id(n)).collect();
                format!("the saved ones are {}", ids.join(", "))
            }
            Ok(_) => "it holds none".to_string(),
            Err(e) => format!("the saved ones cannot be listed: {e}"),
        };
        CkptError::GenerationNotFound { location: self.storage.location(""), id: id.to_string(), saved }
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
