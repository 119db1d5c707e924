//! One generations protocol for runs and adapters: each store prunes only its own kind's
//! generations and refuses a root holding anything else before it writes; a run's root
//! keeps `adapters/`; a corrupt pointer is rewritten by a save from an intact generation;
//! a reader whose generation a writer prunes meanwhile reads the newer one.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::cell::Cell;

use common::checkpoint;
use tinygpt_ckpt::{
    base_weights_sha256, AdapterCheckpoint, AdapterStore, BaseRef, BlobInfo, BlobStore, CheckpointStore,
    CkptError, DirStore, MemoryStore, ADAPTERS_GROUP,
};
use tinygpt_model::{Dataset, LoraConfig, Preset};
use tinygpt_run::{LossPoint, TrainerProgress, TrainingConfig};
use tinygpt_tensor::block_on;

fn adapter(step: usize) -> AdapterCheckpoint {
    let model_config = Preset::by_name("tiny").unwrap().model;
    let lora = LoraConfig::preset("qv-r4").unwrap();
    let n = lora.param_count(&model_config);
    let dataset = Dataset::new("code", &[b'x'; 2000], model_config.context_length, 1).unwrap();
    AdapterCheckpoint {
        base: BaseRef { name: "tiny".into(), weights_sha256: base_weights_sha256(&[1.0]) },
        model_config,
        lora,
        context_length: None,
        training_config: TrainingConfig::default(),
        dataset: dataset.manifest().clone(),
        progress: TrainerProgress {
            step,
            tokens_seen: 1,
            best_val_loss: None,
            wall_time_sec: 0.0,
            rng_state: 1,
            loss_scale: None,
        },
        loss_history: vec![LossPoint { step, train_loss: 2.0, val_loss: Some(3.0 - step as f32 / 100.0) }],
        weights: vec![0.5; n],
        adam_m: Vec::new(),
        adam_v: Vec::new(),
    }
}

#[test]
fn an_adapter_store_refuses_a_runs_generations_and_deletes_nothing() {
    let mem = MemoryStore::new();
    let run = CheckpointStore::new(&mem);
    for step in [10, 20, 30] {
        block_on(run.save(&checkpoint(step, 1))).unwrap();
    }
    // The run lost its pointer: its generations are still not the adapter's to prune.
    mem.set_raw("latest.json", None);
    let before = mem.snapshot();
    let store = AdapterStore::new(&mem);
    let err = block_on(store.check_writable()).unwrap_err();
    assert!(matches!(err, CkptError::ForeignFiles { what: "LoRA adapter", .. }), "{err}");
    assert!(err.to_string().contains("gen-000002/"), "names what is there: {err}");
    let err = block_on(store.save(&adapter(1))).unwrap_err();
    assert!(matches!(err, CkptError::ForeignFiles { .. }), "{err}");
    assert_eq!(mem.snapshot(), before, "nothing written, nothing deleted");
    // And a run store refuses an adapter's generations the same way.
    let mem = MemoryStore::new();
    block_on(AdapterStore::new(&mem).save(&adapter(1))).unwrap();
    let before = mem.snapshot();
    let err = block_on(CheckpointStore::new(&mem).save(&checkpoint(10, 1))).unwrap_err();
    assert!(err.to_string().contains("adapter"), "{err}");
    assert_eq!(mem.snapshot(), before);
}

#[test]
fn a_run_root_keeps_its_adapters_folder_through_saves_and_prunes() {
    let tmp = tempfile::tempdir().unwrap();
    let run = CheckpointStore::new(DirStore::open(tmp.path()).unwrap());
    block_on(run.save(&checkpoint(10, 1))).unwrap();
    let adapters = tmp.path().join(ADAPTERS_GROUP).join("code");
    block_on(AdapterStore::new(DirStore::open(&adapters).unwrap()).save(&adapter(1))).unwrap();
    for step in [20, 30, 40] {
        let report = block_on(run.save(&checkpoint(step, 1))).unwrap();
        assert!(!report.pruned.iter().any(|p| p.contains(ADAPTERS_GROUP)), "{report:?}");
    }
    assert_eq!(block_on(run.load_latest()).unwrap().progress.step, 40);
    let model = Preset::by_name("tiny").unwrap().model;
    let back = block_on(AdapterStore::new(DirStore::open(&adapters).unwrap()).load_latest(&model)).unwrap();
    assert_eq!(back, adapter(1));
}

#[test]
fn a_save_from_an_intact_generation_rewrites_a_corrupt_pointer_and_prunes_nothing_intact() {
    let mem = MemoryStore::new();
    let store = CheckpointStore::new(&mem).with_keep(2);
    for step in [10, 20, 30] {
        block_on(store.save(&checkpoint(step, 1))).unwrap();
    }
    let text = mem.snapshot()["latest.json"].clone();
    mem.set_raw("latest.json", Some(text[..text.len() / 2].to_vec()));
    // Listing still works, and says what is wrong and which generation to use.
    let ids: Vec<String> = block_on(store.list()).unwrap().into_iter().map(|g| g.id).collect();
    assert_eq!(ids, ["gen-000002", "gen-000003"]);
    let problems = block_on(store.pointer_problems()).unwrap();
    let latest = problems.latest.expect("the pointer is corrupt");
    assert!(latest.contains("latest.json") && latest.contains("--generation gen-000003"), "{latest}");
    assert!(block_on(store.load_latest()).is_err(), "a corrupt pointer is not silently skipped");
    // Resuming from gen-000002 saves; the pointer is rewritten and nothing intact goes.
    let resumed = block_on(store.load("gen-000002")).unwrap();
    let report = block_on(store.save(&checkpoint(resumed.progress.step + 5, 2))).unwrap();
    assert_eq!(report.pruned, Vec::<String>::new());
    assert_eq!(block_on(store.load_latest()).unwrap().progress.step, 25);
    assert_eq!(block_on(store.pointer_problems()).unwrap().latest, None);
    // The next save, with the pointer readable again, prunes as usual.
    let report = block_on(store.save(&checkpoint(26, 2))).unwrap();
    assert!(!report.pruned.is_empty());
}

/// A store whose first read of `victim`'s files comes after a writer saved twice more
/// and pruned `victim`, as happens to a reader of a folder `train` saves every step.
struct PrunedWhileReading<'a> {
    inner: &'a MemoryStore,
    victim: &'static str,
    fired: Cell<bool>,
}

impl BlobStore for PrunedWhileReading<'_> {
    fn location(&self, key: &str) -> String {
        self.inner.location(key)
    }

    async fn put(&self, key: &str, bytes: &[u8]) -> tinygpt_ckpt::Result<()> {
        self.inner.put(key, bytes).await
    }

    async fn put_atomic(&self, key: &str, bytes: &[u8]) -> tinygpt_ckpt::Result<()> {
        self.inner.put_atomic(key, bytes).await
    }

    async fn get(&self, key: &str) -> tinygpt_ckpt::Result<Option<Vec<u8>>> {
        if key.starts_with(self.victim) && !self.fired.replace(true) {
            let writer = CheckpointStore::new(self.inner);
            for step in [40, 50] {
                writer.save(&checkpoint(step, 3)).await?;
            }
        }
        self.inner.get(key).await
    }

    async fn list(&self, prefix: &str) -> tinygpt_ckpt::Result<Vec<BlobInfo>> {
        self.inner.list(prefix).await
    }

    async fn delete(&self, key: &str) -> tinygpt_ckpt::Result<()> {
        self.inner.delete(key).await
    }
}

#[test]
fn a_reader_whose_generation_is_pruned_meanwhile_reads_the_newer_one() {
    let mem = MemoryStore::new();
    let store = CheckpointStore::new(&mem);
    for step in [10, 20, 30] {
        block_on(store.save(&checkpoint(step, 1))).unwrap();
    }
    let racing = PrunedWhileReading { inner: &mem, victim: "gen-000003/", fired: Cell::new(false) };
    let back = block_on(CheckpointStore::new(&racing).load_latest()).unwrap();
    assert!(racing.fired.get(), "the writer ran in the middle of the read");
    assert_eq!(back.progress.step, 50);
}
