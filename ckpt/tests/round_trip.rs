//! Save → load round trips in memory and on disk, generations, and the layout's bytes.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::fs;

use common::{assert_same, checkpoint, digest, GOLDEN_LAYOUT};
use tinygpt_ckpt::{CheckpointDir, CheckpointStore, CkptError, MemoryStore};
use tinygpt_tensor::block_on;

#[test]
fn memory_round_trip_is_bit_exact() {
    let store = CheckpointStore::new(MemoryStore::new());
    let ckpt = checkpoint(25, 1);
    let report = block_on(store.save(&ckpt)).unwrap();
    assert_eq!((report.id.as_str(), report.step), ("gen-000001", 25));
    assert_same(&block_on(store.load_latest()).unwrap(), &ckpt);
    let list = block_on(store.list()).unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!((list[0].step, list[0].bytes, list[0].latest), (25, report.bytes, true));
}

#[test]
fn the_layout_bytes_are_a_pure_function_of_the_checkpoint() {
    let a = MemoryStore::new();
    let b = MemoryStore::new();
    block_on(CheckpointStore::new(a.clone()).save(&checkpoint(25, 1))).unwrap();
    block_on(CheckpointStore::new(b.clone()).save(&checkpoint(25, 1))).unwrap();
    assert_eq!(a.snapshot(), b.snapshot());
    let got = digest(&a.snapshot());
    assert_eq!(got, GOLDEN_LAYOUT, "layout bytes changed; if intended, update GOLDEN_LAYOUT to:\n{got}");
}

#[test]
fn the_json_files_follow_the_documented_layout() {
    let mem = MemoryStore::new();
    let ckpt = checkpoint(25, 1);
    block_on(CheckpointStore::new(mem.clone()).save(&ckpt)).unwrap();
    let files = mem.snapshot();
    let json = |name: &str| -> serde_json::Value { serde_json::from_slice(&files[name]).unwrap() };

    let config = json("gen-000001/model_config.json");
    assert_eq!(config["d_model"], 8);
    assert_eq!(config["dtype"], "float32");
    let tensors = config["tensors"].as_array().unwrap();
    assert_eq!(tensors.len(), 4 + 16 * 2);
    assert_eq!(
        tensors[1],
        serde_json::json!({"name": "position_embedding", "shape": [8, 8], "offset": 2048})
    );

    let state = json("gen-000001/trainer_state.json");
    assert_eq!(state["format_version"], 1);
    assert_eq!(state["step"], 25);
    assert_eq!(state["rng_state"].as_u64(), Some(0xDEAD_BEEF_CAFE_F00D ^ 1));
    let entries = state["files"].as_object().unwrap();
    assert_eq!(entries.len(), 7, "every file but trainer_state.json");
    let weights = &files["gen-000001/weights.f32"];
    assert_eq!(entries["weights.f32"]["bytes"], weights.len());
    assert_eq!(weights.len(), 4 * ckpt.weights.len());
    assert_eq!(f32::from_le_bytes(weights[4..8].try_into().unwrap()).to_bits(), ckpt.weights[1].to_bits());

    let history = json("gen-000001/loss_history.json");
    assert_eq!(history.as_array().unwrap().len(), 25, "every point, not truncated");
    assert!(history[8].get("val_loss").is_none() && history[9]["val_loss"].is_number());
    assert_eq!(
        json("latest.json"),
        serde_json::json!({"format_version": 1, "latest": "gen-000001", "previous": []})
    );
}

#[test]
fn the_last_k_generations_are_kept_and_older_ones_load() {
    let mem = MemoryStore::new();
    let store = CheckpointStore::new(mem.clone()).with_keep(3);
    for step in 1..=5 {
        let report = block_on(store.save(&checkpoint(step * 10, step as u64))).unwrap();
        assert_eq!(report.pruned, if step > 3 { vec![format!("gen-{:06}", step - 3)] } else { vec![] });
    }
    let ids: Vec<_> = block_on(store.list()).unwrap().into_iter().map(|g| (g.id, g.step, g.latest)).collect();
    assert_eq!(
        ids,
        [("gen-000003".into(), 30, false), ("gen-000004".into(), 40, false), ("gen-000005".into(), 50, true)]
    );
    assert_same(&block_on(store.load("gen-000004")).unwrap(), &checkpoint(40, 4));
    assert_same(&block_on(store.load_latest()).unwrap(), &checkpoint(50, 5));

    let err = block_on(store.delete("gen-000005")).unwrap_err();
    assert!(matches!(err, CkptError::DeleteLatest { .. }), "{err}");
    block_on(store.delete("gen-000004")).unwrap();
    assert!(matches!(block_on(store.delete("gen-000004")), Err(CkptError::GenerationNotFound { .. })));
    assert!(matches!(block_on(store.load("../etc")), Err(CkptError::GenerationNotFound { .. })));
    let pointer: serde_json::Value = serde_json::from_slice(&mem.snapshot()["latest.json"]).unwrap();
    assert_eq!(pointer["previous"], serde_json::json!(["gen-000003"]));
    block_on(store.save(&checkpoint(60, 6))).unwrap();
    let ids: Vec<_> = block_on(store.list()).unwrap().into_iter().map(|g| g.id).collect();
    assert_eq!(ids, ["gen-000003", "gen-000005", "gen-000006"]);
}

#[test]
fn weights_only_checkpoints_have_no_moment_files() {
    let mem = MemoryStore::new();
    let store = CheckpointStore::new(mem.clone());
    let ckpt = checkpoint(3, 2).weights_only();
    block_on(store.save(&ckpt)).unwrap();
    let keys: Vec<_> = mem.snapshot().into_keys().collect();
    assert!(!keys.iter().any(|k| k.contains("adam")), "{keys:?}");
    let back = block_on(store.load_latest()).unwrap();
    assert!(!back.has_moments());
    assert_same(&back, &ckpt);
}

#[test]
fn inconsistent_checkpoints_are_not_saved() {
    let store = CheckpointStore::new(MemoryStore::new());
    let mut short = checkpoint(3, 2);
    short.weights.pop();
    let err = block_on(store.save(&short)).unwrap_err().to_string();
    assert!(err.contains("weights has 3871 values, the config needs 3872"), "{err}");

    let mut one_moment = checkpoint(3, 2);
    one_moment.adam_v.clear();
    assert!(matches!(block_on(store.save(&one_moment)), Err(CkptError::InvalidCheckpoint { .. })));

    let mut nan = checkpoint(3, 2);
    nan.weights[2048 + 5] = f32::NAN;
    let err = block_on(store.save(&nan)).unwrap_err().to_string();
    assert!(err.contains("weights.f32") && err.contains("position_embedding[5]"), "{err}");

    let mut diverged = checkpoint(3, 2);
    diverged.loss_history[1].train_loss = f32::INFINITY;
    let err = block_on(store.save(&diverged)).unwrap_err().to_string();
    assert!(err.contains("loss_history.json") && err.contains("step 2 train_loss"), "{err}");
    assert!(block_on(store.list()).unwrap().is_empty(), "nothing was written");
}

#[test]
fn native_round_trip_writes_the_layout_to_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("run");
    let dir = CheckpointDir::open(&root).unwrap();
    let first = checkpoint(10, 1);
    let second = checkpoint(20, 2);
    dir.save(&first).unwrap();
    let report = dir.save(&second).unwrap();
    assert_eq!(report.id, "gen-000002");
    assert_same(&dir.load_latest().unwrap(), &second);
    assert_same(&dir.load("gen-000001").unwrap(), &first);
    assert_eq!(fs::metadata(root.join("gen-000002/weights.f32")).unwrap().len(), 4 * 3872);
    let mut names: Vec<_> = fs::read_dir(root.join("gen-000002"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "adam_m.f32",
            "adam_v.f32",
            "dataset_manifest.json",
            "loss_history.json",
            "model_config.json",
            "trainer_state.json",
            "training_config.json",
            "weights.f32"
        ]
    );

    // The same bytes as the memory store writes.
    let mem = MemoryStore::new();
    let store = CheckpointStore::new(mem.clone());
    block_on(store.save(&first)).unwrap();
    block_on(store.save(&second)).unwrap();
    for (key, bytes) in mem.snapshot() {
        assert_eq!(fs::read(root.join(&key)).unwrap(), bytes, "{key}");
    }

    dir.save(&checkpoint(30, 3)).unwrap();
    assert!(!root.join("gen-000001").exists(), "pruned to the last 2");
}

#[test]
fn a_plain_checkpoint_directory_loads_without_generations() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    CheckpointDir::open(&run).unwrap().save(&checkpoint(10, 1)).unwrap();
    let plain = tmp.path().join("plain");
    fs::create_dir(&plain).unwrap();
    for entry in fs::read_dir(run.join("gen-000001")).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), plain.join(entry.file_name())).unwrap();
    }
    let dir = CheckpointDir::open(&plain).unwrap();
    assert_same(&dir.load_latest().unwrap(), &checkpoint(10, 1));
    let err = dir.save(&checkpoint(11, 1)).unwrap_err();
    assert!(matches!(err, CkptError::ForeignFiles { .. }), "{err}");
}

#[test]
fn foreign_directories_files_and_empty_places_are_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let other = tmp.path().join("photos");
    fs::create_dir(&other).unwrap();
    fs::write(other.join("cat.jpg"), b"meow").unwrap();
    let dir = CheckpointDir::open(&other).unwrap();
    for err in [dir.save(&checkpoint(1, 1)).unwrap_err(), dir.load_latest().unwrap_err()] {
        let msg = err.to_string();
        assert!(matches!(err, CkptError::ForeignFiles { .. }), "{msg}");
        assert!(msg.contains("photos") && msg.contains("cat.jpg"), "{msg}");
    }
    assert_eq!(fs::read(other.join("cat.jpg")).unwrap(), b"meow", "nothing was touched");

    let file = tmp.path().join("notes.txt");
    fs::write(&file, b"x").unwrap();
    let err = CheckpointDir::open(&file).unwrap_err();
    assert!(matches!(err, CkptError::NotADirectory { .. }) && err.to_string().contains("notes.txt"), "{err}");

    let empty = CheckpointDir::open(tmp.path().join("nothing-here")).unwrap();
    let err = empty.load_latest().unwrap_err();
    assert!(err.to_string().contains("nothing-here") && err.to_string().contains("empty"), "{err}");
}
