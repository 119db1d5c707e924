//! Crash-safe saves as generations under one root, behind a pointer: one protocol for
//! every kind of generation (a run's checkpoint, a LoRA adapter; see [`GenerationKind`]).
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
//! What a root may hold is the kind's business: its generations' files, the two pointers,
//! and the groups it reserves for others (a run's `adapters/`). Anything else — another
//! kind's generations, stray files — is *foreign*: a save refuses the root before it writes
//! anything, and nothing foreign is ever pruned. [`Generations::check_writable`] runs the
//! same check before any work is done (before a step is trained). A pointer that cannot be
//! read does not stop a save from an intact generation: the save rewrites it atomically,
//! and prunes nothing but interrupted saves, since which generations were kept is unknown.
//!
//! Readers take no lock. A reader whose generation was pruned between reading the pointer
//! and reading the files (a writer saving every step moved on twice) reads the newer one.
//!
//! One writer per root: two processes saving into the same root at once is not supported
//! (natively, `WriterLock` enforces it).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::checkpoint::Checkpoint;
use crate::decode::{read_checkpoint, LoadOptions};
use crate::encode::{encode, EncodedFile};
use crate::error::{CkptError, Result};
use crate::json::{from_json, to_json};
use crate::layout::{sha256_hex, FILES, FORMAT_VERSION, TRAINER_STATE};
use crate::store::BlobStore;

/// The pointer's key.
pub const POINTER: &str = "latest.json";
/// The best generation's pointer key.
pub const BEST_POINTER: &str = "best.json";
const MAX_POINTER_BYTES: u64 = 64 << 10;
/// How often a reader follows a pointer that moved while it read (see the module docs).
const READ_ATTEMPTS: usize = 5;

/// What one generation holds and how it is written and read back. The protocol around it
/// (pointers, verification, pruning, the best generation, foreign files) is
/// [`Generations`]', the same for every kind; a kind only says which files are its own.
#[allow(async_fn_in_trait)]
pub trait GenerationKind {
    /// What a generation is read back as.
    type Value;
    /// What a generation is called in messages ("checkpoint", "LoRA adapter").
    const WHAT: &'static str;
    /// Every file a generation of this kind may hold; trainer_state.json (the same format
    /// for every kind: progress and the other files' checksums) among them.
    const FILES: &'static [&'static str];
    /// Groups beside the generations that belong to someone else: never foreign, never
    /// touched (a run's `adapters/`).
    const RESERVED_GROUPS: &'static [&'static str];
    /// Whether a root holding the files directly, without generations, is read as one.
    const BARE_ROOT: bool;

    /// The files of `value` in write order, trainer_state.json last.
    fn encode(&self, value: &Self::Value) -> Result<Vec<EncodedFile>>;
    /// The value whose files are `prefix + name` in `storage`, trusting nothing.
    async fn decode<S: BlobStore>(&self, storage: &S, prefix: &str) -> Result<Self::Value>;
    /// The step `value` was saved at.
    fn step(value: &Self::Value) -> usize;
    /// The validation loss measured on exactly `value`'s weights, if one was.
    fn val_loss_at_step(value: &Self::Value) -> Option<f32>;
}

/// A run's checkpoint: the layout's eight files (see `layout`), read with these options.
#[derive(Clone, Debug, Default)]
pub struct RunFiles {
    options: LoadOptions,
}

/// The folder in a run's root that holds its LoRA adapters (`<run>/adapters/<name>/`),
/// reserved by the run's store: one layout in which a run and its adapters live together.
pub const ADAPTERS_GROUP: &str = "adapters";

/// The folder in a run's root that holds a BPE model's tokenizer files (`vocab.json`,
/// `merges.txt`; `model_config.json`'s `tokenizer` names them), reserved like `adapters/`:
/// every generation of the run reads the same tokenizer.
pub const TOKENIZER_GROUP: &str = "tokenizer";

impl GenerationKind for RunFiles {
    type Value = Checkpoint;
    const WHAT: &'static str = "checkpoint";
    const FILES: &'static [&'static str] = &FILES;
    const RESERVED_GROUPS: &'static [&'static str] = &[ADAPTERS_GROUP, TOKENIZER_GROUP];
    const BARE_ROOT: bool = true;

    fn encode(&self, value: &Checkpoint) -> Result<Vec<EncodedFile>> {
        encode(value, true)
    }

    async fn decode<S: BlobStore>(&self, storage: &S, prefix: &str) -> Result<Checkpoint> {
        read_checkpoint(storage, prefix, &self.options).await
    }

    fn step(value: &Checkpoint) -> usize {
        value.progress.step
    }

    fn val_loss_at_step(value: &Checkpoint) -> Option<f32> {
        val_loss_at_step(value)
    }
}

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

/// What [`Generations::load_best`] read.
#[derive(Clone, Debug, PartialEq)]
pub struct BestLoad<T = Checkpoint> {
    /// Which generation is best.
    pub best: BestInfo,
    /// That generation.
    pub checkpoint: T,
    /// Why best.json was not used (missing or corrupt, naming it), when the best was
    /// recomputed from the generations that verify instead.
    pub fallback: Option<String>,
}

/// What is wrong with a root's pointers, in words a person can act on (see
/// [`Generations::pointer_problems`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PointerProblems {
    /// Why latest.json cannot be followed (missing while generations exist, corrupt, or
    /// naming a generation that is gone), and what to do.
    pub latest: Option<String>,
    /// Why best.json is not used (the same words `load_best` reports), and which
    /// generation is the best of those that verify.
    pub best: Option<String>,
    /// The best recomputed from the generations that verify, when best.json is not used.
    pub recomputed_best: Option<BestInfo>,
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

/// Saves, loads and lists generations of kind `K` in a [`BlobStore`].
#[derive(Debug)]
pub struct Generations<S, K> {
    storage: S,
    keep: usize,
    kind: K,
}

/// A run's checkpoints: [`Generations`] of the layout's files.
pub type CheckpointStore<S> = Generations<S, RunFiles>;

/// What the root holds.
#[derive(Default)]
struct RootScan {
    /// Generation number → (file names, total bytes), only those of this kind.
    generations: BTreeMap<u64, (Vec<String>, u64)>,
    /// Layout files directly in the root (a plain checkpoint directory).
    bare_files: Vec<String>,
    foreign: Vec<String>,
    /// Generations holding a file that is not this kind's (also named in `foreign`): never
    /// pruned; a load of one reports the file.
    mixed: Vec<u64>,
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

/// Whether `name` could name a generation (`gen-` and at least six digits).
pub fn is_generation_name(name: &str) -> bool {
    parse_generation(name).is_some()
}

impl<S: BlobStore> CheckpointStore<S> {
    /// A store keeping the last 2 generations, loading strictly.
    pub fn new(storage: S) -> Self {
        Generations::with_kind(storage, RunFiles::default())
    }

    /// These load options (e.g. verification) for every load.
    pub fn with_load_options(mut self, options: LoadOptions) -> Self {
        self.kind.options = options;
        self
    }
}

impl<S: BlobStore, K: GenerationKind> Generations<S, K> {
    /// Generations of `kind` in `storage`, keeping the last 2.
    pub fn with_kind(storage: S, kind: K) -> Self {
        Generations { storage, keep: 2, kind }
    }

    /// Keeps the last `keep` generations (at least 1).
    pub fn with_keep(mut self, keep: usize) -> Self {
        self.keep = keep.max(1);
        self
    }

    /// The underlying store.
    pub fn storage(&self) -> &S {
        &self.storage
    }

    /// Refuses a root this store could not save into (foreign files or another kind's
    /// generations, named), so that a caller learns it before any work is done.
    pub async fn check_writable(&self) -> Result<()> {
        let scan = self.scan().await?;
        self.refuse_foreign(&scan)
    }

    fn refuse_foreign(&self, scan: &RootScan) -> Result<()> {
        if !scan.foreign.is_empty() || !scan.bare_files.is_empty() {
            let mut found = scan.foreign.clone();
            found.extend(scan.bare_files.iter().cloned());
            return Err(self.foreign_error(&found));
        }
        Ok(())
    }

    /// Writes `value` as a new generation, verifies it, points latest.json at it and prunes.
    /// On failure the previous generation is untouched; a quota error reports the bytes the
    /// whole generation needs.
    pub async fn save(&self, value: &K::Value) -> Result<SaveReport> {
        let files = self.kind.encode(value)?;
        let scan = self.scan().await?;
        self.refuse_foreign(&scan)?;
        // An unreadable pointer is rewritten; which generations it kept is then unknown,
        // so only interrupted saves are pruned (see the module docs).
        let pointer = self.read_pointer().await;
        let pointer_known = matches!(pointer, Ok(Some(_))) || scan.generations.is_empty();
        let pointer = pointer.ok().flatten();
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
        let new_val = K::val_loss_at_step(value);
        let is_best = new_val.is_some_and(|v| old_best.as_ref().is_none_or(|b| v < b.val_loss));
        let kept_best = if is_best {
            let state =
                files.iter().find(|f| f.name == TRAINER_STATE).expect("encode writes trainer_state.json");
            let best = BestPointer {
                format_version: FORMAT_VERSION,
                best: id.clone(),
                step: K::step(value),
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
        for (&n, (names, _)) in &scan.generations {
            let old = generation_id(n);
            let interrupted = !names.iter().any(|f| f == TRAINER_STATE);
            let kept = new_pointer.previous.contains(&old) || kept_best.as_ref() == Some(&old);
            if !kept && (pointer_known || interrupted) {
                self.storage
                    .delete(&format!("{old}/"))
                    .await
                    .map_err(|e| CkptError::Prune { saved: id.clone(), reason: e.to_string() })?;
                pruned.push(old);
            }
        }
        Ok(SaveReport { id, step: K::step(value), bytes, pruned, best: is_best })
    }

    /// The generation latest.json points at (see the module docs for what happens when it
    /// is corrupt, and when a writer prunes it meanwhile).
    pub async fn load_latest(&self) -> Result<K::Value> {
        let mut attempts = 0;
        loop {
            let Some(pointer) = self.read_pointer().await? else { return self.load_without_pointer().await };
            let error = match self.load(&pointer.latest).await {
                Ok(value) => return Ok(value),
                Err(e) => e,
            };
            attempts += 1;
            let moved = matches!(self.read_pointer().await, Ok(Some(ref p)) if p.latest != pointer.latest);
            if !moved || attempts == READ_ATTEMPTS {
                return Err(error);
            }
        }
    }

    async fn load_without_pointer(&self) -> Result<K::Value> {
        let scan = self.scan().await?;
        if !scan.foreign.is_empty() {
            return Err(self.foreign_error(&scan.foreign));
        }
        if scan.bare_files.iter().any(|f| f == TRAINER_STATE) {
            if let Some((n, _)) = scan.generations.iter().next() {
                let found = format!("{} next to a plain checkpoint", generation_id(*n));
                return Err(self.foreign_error(&[found]));
            }
            return self.kind.decode(&self.storage, "").await;
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
    pub async fn load(&self, id: &str) -> Result<K::Value> {
        let Some(n) = parse_generation(id) else { return Err(self.not_found(id).await) };
        let scan = self.scan().await?;
        if !scan.generations.contains_key(&n) && !scan.mixed.contains(&n) {
            return Err(self.not_found(id).await);
        }
        self.kind.decode(&self.storage, &format!("{id}/")).await
    }

    /// Every generation of this kind whose trainer_state.json can be read, oldest first.
    /// Files are not verified here; [`Generations::load`] does that. A corrupt pointer
    /// marks nothing (see [`Generations::pointer_problems`]).
    pub async fn list(&self) -> Result<Vec<GenerationInfo>> {
        let scan = self.scan().await?;
        let latest = self.read_pointer().await.ok().flatten().map(|p| p.latest);
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

    /// Every generation folder of this kind, listed or not by [`Generations::list`]
    /// (those whose trainer_state.json cannot be read are only here), oldest first.
    pub async fn generation_ids(&self) -> Result<Vec<String>> {
        Ok(self.scan().await?.generations.keys().map(|&n| generation_id(n)).collect())
    }

    /// What is wrong with latest.json and best.json, each in one sentence that says what
    /// happens next; nothing when both can be followed.
    pub async fn pointer_problems(&self) -> Result<PointerProblems> {
        let mut problems = PointerProblems::default();
        let has_generations = !self.scan().await?.generations.is_empty();
        let intact = || async { self.newest_intact(None).await.ok().flatten() };
        let use_intact = |found: Option<GenerationInfo>| {
            match found {
            Some(g) => format!(
                "the newest generation that verifies is {} (step {}): pass --generation {} to use it; the next save rewrites {POINTER}",
                g.id, g.step, g.id
            ),
            None => "no generation verifies".to_string(),
        }
        };
        match self.read_pointer().await {
            Ok(Some(p)) => {
                if !self.generation_ids().await?.contains(&p.latest) {
                    let file = self.storage.location(POINTER);
                    problems.latest = Some(format!(
                        "{file}: names {}, which is gone; {}",
                        p.latest,
                        use_intact(intact().await)
                    ));
                }
            }
            Ok(None) if has_generations => {
                let file = self.storage.location(POINTER);
                problems.latest = Some(format!("{file}: missing; {}", use_intact(intact().await)));
            }
            Ok(None) => {}
            Err(e) => problems.latest = Some(format!("{e}; {}", use_intact(intact().await))),
        }
        if let Some((why, best)) = self.best_fallback().await? {
            problems.best = Some(match &best {
                Some(b) => format!(
                    "{why}; the best generation that verifies is {} (step {}, val loss {:.4}), and the next save rewrites {BEST_POINTER}",
                    b.id, b.step, b.val_loss
                ),
                None => format!("{why}; no generation that verifies has a validation loss at its own step"),
            });
            problems.recomputed_best = best;
        }
        Ok(problems)
    }

    /// When best.json is not used: why, and the best recomputed from the generations
    /// that verify. `None` when best.json verifies, or when there is no best.json and no
    /// generation that could be one.
    async fn best_fallback(&self) -> Result<Option<(String, Option<BestInfo>)>> {
        let why = match self.verified_best().await {
            Ok(Some(_)) => return Ok(None),
            Ok(None) => format!("{} is missing", self.storage.location(BEST_POINTER)),
            Err(e) => e.to_string(),
        };
        let best = self.recompute_best(None).await?.map(|(best, _)| best);
        let missing = self.storage.get(BEST_POINTER).await?.is_none();
        if missing && best.is_none() {
            return Ok(None);
        }
        Ok(Some((why, best)))
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
        let value = self.load(&pointer.best).await.map_err(|e| CkptError::InvalidJson {
            file: file.clone(),
            reason: format!("it names {}, which does not load: {e}", pointer.best),
        })?;
        if K::val_loss_at_step(&value).map(f32::to_bits) != Some(pointer.val_loss.to_bits())
            || K::step(&value) != pointer.step
        {
            return Err(CkptError::InvalidJson {
                file,
                reason: format!("its step and val_loss do not match {}", pointer.best),
            });
        }
        Ok(Some(BestInfo { id: pointer.best, step: pointer.step, val_loss: pointer.val_loss }))
    }

    /// The best generation. When best.json is missing or corrupt, the best is recomputed
    /// from the generations that verify and [`BestLoad::fallback`] says why, in the words
    /// [`Generations::pointer_problems`] uses.
    pub async fn load_best(&self) -> Result<BestLoad<K::Value>> {
        let fallback = match self.verified_best().await {
            Ok(Some(best)) => {
                let checkpoint = self.load(&best.id).await?;
                return Ok(BestLoad { best, checkpoint, fallback: None });
            }
            Ok(None) => format!("{} is missing", self.storage.location(BEST_POINTER)),
            Err(e) => e.to_string(),
        };
        match self.recompute_best(None).await? {
            Some((best, checkpoint)) => {
                let why = format!(
                    "{fallback}; the best generation that verifies is {} (step {}, val loss {:.4}), and the next save rewrites {BEST_POINTER}",
                    best.id, best.step, best.val_loss
                );
                Ok(BestLoad { best, checkpoint, fallback: Some(why) })
            }
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
    async fn recompute_best(&self, except: Option<&str>) -> Result<Option<(BestInfo, K::Value)>> {
        let mut best: Option<(BestInfo, K::Value)> = None;
        for &n in self.scan().await?.generations.keys() {
            let id = generation_id(n);
            if Some(id.as_str()) == except {
                continue;
            }
            let Ok(value) = self.load(&id).await else { continue };
            let Some(val) = K::val_loss_at_step(&value) else { continue };
            if best.as_ref().is_none_or(|(b, _)| val < b.val_loss) {
                best = Some((BestInfo { id, step: K::step(&value), val_loss: val }, value));
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
        let value = self.load(id).await?;
        let best = BestPointer {
            format_version: FORMAT_VERSION,
            best: id.to_string(),
            step: K::step(&value),
            val_loss: K::val_loss_at_step(&value).ok_or_else(|| CkptError::InvalidJson {
                file: self.storage.location(BEST_POINTER),
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

    /// What the root holds, sorted into this kind's generations, bare layout files and
    /// foreign entries (including generations holding files that are not this kind's).
    async fn scan(&self) -> Result<RootScan> {
        let mut scan = RootScan::default();
        let mut not_ours: BTreeMap<u64, String> = BTreeMap::new();
        for blob in self.storage.list("").await? {
            match blob.key.split_once('/') {
                Some((group, name)) => match parse_generation(group) {
                    Some(n) => {
                        // An empty group ("gen-…/" alone) is an interrupted save of ours.
                        if !name.is_empty() && !K::FILES.contains(&name) {
                            not_ours.entry(n).or_insert_with(|| name.to_string());
                        }
                        let entry = scan.generations.entry(n).or_default();
                        if !name.is_empty() {
                            entry.0.push(name.to_string());
                        }
                        entry.1 += blob.bytes;
                    }
                    None if K::RESERVED_GROUPS.contains(&group) => {}
                    None => scan.foreign.push(format!("{group}/")),
                },
                None if blob.key == POINTER || blob.key == BEST_POINTER => {}
                None if K::BARE_ROOT && K::FILES.contains(&blob.key.as_str()) => {
                    scan.bare_files.push(blob.key)
                }
                None => scan.foreign.push(blob.key),
            }
        }
        for (n, name) in not_ours {
            scan.generations.remove(&n);
            scan.mixed.push(n);
            scan.foreign.push(format!(
                "{}/{name} (not a file of a {} generation)",
                generation_id(n),
                K::WHAT
            ));
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
        CkptError::ForeignFiles {
            location: self.storage.location(""),
            what: K::WHAT,
            found: shown.join(", "),
        }
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
