//! Every kind of bad checkpoint gives its own typed error, naming the file.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use common::checkpoint;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tinygpt_ckpt::{CheckpointDir, CheckpointStore, CkptError, LoadOptions, MemoryStore};
use tinygpt_tensor::block_on;

const GEN: &str = "gen-000001/";

fn saved() -> MemoryStore {
    let mem = MemoryStore::new();
    block_on(CheckpointStore::new(mem.clone()).save(&checkpoint(25, 1))).unwrap();
    mem
}

fn file(mem: &MemoryStore, name: &str) -> Vec<u8> {
    mem.snapshot()[&format!("{GEN}{name}")].clone()
}

fn load(mem: &MemoryStore) -> CkptError {
    block_on(CheckpointStore::new(mem.clone()).load_latest()).expect_err("the corruption must be noticed")
}

/// Replaces `name` and records its new size and checksum in trainer_state.json, so the
/// load gets past the checksums to the check under test.
fn replace_sealed(mem: &MemoryStore, name: &str, bytes: Vec<u8>) {
    let mut state: Value = serde_json::from_slice(&file(mem, "trainer_state.json")).unwrap();
    let sha: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    state["files"][name] = json!({"bytes": bytes.len(), "sha256": sha});
    // Without its own checksum the edited state loads as a checkpoint written before
    // `state_sha256` existed did.
    state.as_object_mut().unwrap().remove("state_sha256");
    mem.set_raw(&format!("{GEN}{name}"), Some(bytes));
    mem.set_raw(&format!("{GEN}trainer_state.json"), Some(serde_json::to_vec(&state).unwrap()));
}

fn edit_json(mem: &MemoryStore, name: &str, edit: impl FnOnce(&mut Value)) {
    let mut value: Value = serde_json::from_slice(&file(mem, name)).unwrap();
    edit(&mut value);
    replace_sealed(mem, name, serde_json::to_vec(&value).unwrap());
}

fn assert_names(err: &CkptError, needles: &[&str]) {
    let msg = err.to_string();
    for needle in needles {
        assert!(msg.contains(needle), "{msg:?} does not mention {needle:?}");
    }
}

#[test]
fn missing_files() {
    for name in ["weights.f32", "adam_v.f32", "loss_history.json", "trainer_state.json", "model_config.json"]
    {
        let mem = saved();
        mem.set_raw(&format!("{GEN}{name}"), None);
        let err = load(&mem);
        assert!(matches!(err, CkptError::MissingFile { .. }), "{err}");
        assert_names(&err, &[&format!("memory:{GEN}{name}"), "missing"]);
    }
}

#[test]
fn truncated_and_oversized_tensor_files() {
    let mem = saved();
    let mut w = file(&mem, "weights.f32");
    w.truncate(w.len() - 4);
    mem.set_raw(&format!("{GEN}weights.f32"), Some(w));
    let err = load(&mem);
    assert!(matches!(err, CkptError::SizeMismatch { expected: 15488, actual: 15484, .. }), "{err}");
    assert_names(&err, &["weights.f32", "truncated"]);

    // Oversized, with trainer_state.json agreeing: the config still decides.
    let mem = saved();
    let mut m = file(&mem, "adam_m.f32");
    m.extend_from_slice(&[0; 8]);
    replace_sealed(&mem, "adam_m.f32", m);
    let err = load(&mem);
    assert!(matches!(err, CkptError::SizeMismatch { expected: 15488, actual: 15496, .. }), "{err}");
    assert_names(&err, &["adam_m.f32", "oversized"]);
}

#[test]
fn checksum_mismatches() {
    for name in
        ["weights.f32", "adam_v.f32", "loss_history.json", "model_config.json", "dataset_manifest.json"]
    {
        let mem = saved();
        let mut bytes = file(&mem, name);
        let at = bytes.len() / 2;
        bytes[at] ^= 0x01;
        mem.set_raw(&format!("{GEN}{name}"), Some(bytes));
        let err = load(&mem);
        assert!(matches!(err, CkptError::ChecksumMismatch { .. }), "{name}: {err}");
        assert_names(&err, &[name, "sha256", "corrupt"]);
    }
}

#[test]
fn invalid_and_unknown_version_json() {
    let mem = saved();
    mem.set_raw(&format!("{GEN}trainer_state.json"), Some(b"{\"format_version\": 1, \"step\": ".to_vec()));
    let err = load(&mem);
    assert!(matches!(err, CkptError::InvalidJson { .. }), "{err}");
    assert_names(&err, &["trainer_state.json", "invalid"]);

    let mem = saved();
    let mut state: Value = serde_json::from_slice(&file(&mem, "trainer_state.json")).unwrap();
    state["format_version"] = json!(2);
    state["a_field_from_the_future"] = json!(true);
    mem.set_raw(&format!("{GEN}trainer_state.json"), Some(serde_json::to_vec(&state).unwrap()));
    let err = load(&mem);
    assert!(matches!(err, CkptError::UnsupportedVersion { found: 2, supported: 1, .. }), "{err}");
    assert_names(&err, &["trainer_state.json", "format_version 2"]);

    let mem = saved();
    edit_json(&mem, "training_config.json", |v| v["learning_rat"] = json!(1.0));
    assert_names(&load(&mem), &["training_config.json", "learning_rat"]);

    let mem = saved();
    edit_json(&mem, "training_config.json", |v| v["learning_rate"] = json!(-1.0));
    let err = load(&mem);
    assert!(matches!(err, CkptError::InvalidTrainingConfig { .. }), "{err}");
    assert_names(&err, &["training_config.json", "learning_rate"]);

    let mem = saved();
    edit_json(&mem, "loss_history.json", |v| v[3]["train_loss"] = json!("low"));
    assert_names(&load(&mem), &["loss_history.json", "invalid"]);

    let mem = saved();
    let mut state: Value = serde_json::from_slice(&file(&mem, "trainer_state.json")).unwrap();
    state["files"].as_object_mut().unwrap().remove("weights.f32");
    state.as_object_mut().unwrap().remove("state_sha256");
    mem.set_raw(&format!("{GEN}trainer_state.json"), Some(serde_json::to_vec(&state).unwrap()));
    assert_names(&load(&mem), &["trainer_state.json", "no entry for weights.f32"]);
}

#[test]
fn the_pointer_is_checked_too() {
    let mem = saved();
    mem.set_raw("latest.json", Some(b"not json".to_vec()));
    assert_names(&load(&mem), &["memory:latest.json", "invalid"]);

    mem.set_raw(
        "latest.json",
        Some(br#"{"format_version": 7, "latest": "gen-000001", "previous": []}"#.to_vec()),
    );
    assert!(matches!(load(&mem), CkptError::UnsupportedVersion { found: 7, .. }));

    mem.set_raw(
        "latest.json",
        Some(br#"{"format_version": 1, "latest": "../../etc", "previous": []}"#.to_vec()),
    );
    assert_names(&load(&mem), &["latest.json", "not a generation name"]);

    mem.set_raw(
        "latest.json",
        Some(br#"{"format_version": 1, "latest": "gen-000009", "previous": []}"#.to_vec()),
    );
    assert_names(&load(&mem), &["gen-000009", "no generation", "the saved ones are gen-000001"]);

    mem.set_raw("latest.json", None);
    let err = load(&mem);
    assert!(matches!(err, CkptError::NoCheckpoint { .. }), "{err}");
    // The generation is complete: the message says what is missing, not "interrupted".
    assert_names(&err, &["gen-000001", "latest.json", "is missing"]);
    assert!(err.to_string().starts_with("memory: no checkpoint found"), "{err}");
    assert!(!err.to_string().contains("interrupted"), "{err}");
    mem.set_raw("gen-000001/trainer_state.json", None);
    assert_names(&load(&mem), &["gen-000001", "interrupted"]);
}

#[test]
fn a_tensor_table_that_disagrees_with_the_config() {
    let mem = saved();
    edit_json(&mem, "model_config.json", |v| v["tensors"][5]["shape"] = json!([4, 16]));
    let err = load(&mem);
    assert!(matches!(err, CkptError::TensorTableMismatch { .. }), "{err}");
    assert_names(&err, &["model_config.json", "blocks.0.attn.q_proj.bias"]);

    let mem = saved();
    edit_json(&mem, "model_config.json", |v| v["tensors"].as_array_mut().unwrap().pop().map(drop).unwrap());
    assert_names(&load(&mem), &["model_config.json", "35 tensors listed, the config has 36"]);

    // A config that no longer matches the weights' size.
    let mem = saved();
    edit_json(&mem, "model_config.json", |v| {
        v["d_mlp"] = json!(64);
        v["tensors"] = json!([]);
    });
    assert!(matches!(load(&mem), CkptError::TensorTableMismatch { .. }));
}

#[test]
fn configs_too_large_to_allocate_are_refused_by_validation() {
    let mem = saved();
    edit_json(&mem, "model_config.json", |v| {
        v["n_layers"] = json!(1_000_000_000_000u64);
        v["d_model"] = json!(1_000_000);
    });
    let err = load(&mem);
    assert!(matches!(err, CkptError::InvalidConfig { .. }), "{err}");
    assert_names(&err, &["model_config.json"]);

    let mem = saved();
    edit_json(&mem, "model_config.json", |v| v["n_heads"] = json!(3));
    assert_names(&load(&mem), &["model_config.json", "not divisible by n_heads"]);
}

#[test]
fn non_finite_values_are_refused_unless_allowed() {
    for (name, index) in [("weights.f32", 2048 + 3), ("adam_v.f32", 5)] {
        let mem = saved();
        let mut bytes = file(&mem, name);
        bytes[index * 4..index * 4 + 4].copy_from_slice(&f32::NAN.to_le_bytes());
        replace_sealed(&mem, name, bytes);
        let err = load(&mem);
        assert!(matches!(err, CkptError::NonFinite { .. }), "{err}");
        let tensor = if name == "weights.f32" { "position_embedding[3]" } else { "token_embedding[5]" };
        assert_names(&err, &[name, tensor, "NaN", "diverged"]);

        let lenient =
            CheckpointStore::new(mem.clone()).with_load_options(LoadOptions { allow_non_finite: true });
        let back = block_on(lenient.load_latest()).unwrap();
        let values = if name == "weights.f32" { &back.weights } else { &back.adam_v };
        assert!(values[index].is_nan());
    }
}

#[test]
fn foreign_files_inside_a_generation() {
    let mem = saved();
    mem.set_raw(&format!("{GEN}notes.txt"), Some(b"hello".to_vec()));
    let err = load(&mem);
    assert!(matches!(err, CkptError::ForeignFiles { .. }), "{err}");
    assert_names(&err, &["gen-000001", "notes.txt"]);

    let mem = saved();
    mem.set_raw("other-project/data.bin", Some(vec![1, 2, 3]));
    let err = block_on(CheckpointStore::new(mem.clone()).save(&checkpoint(30, 2))).unwrap_err();
    assert_names(&err, &["other-project/", "not part of a TinyGPT checkpoint"]);
}

#[test]
fn native_errors_name_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = CheckpointDir::open(tmp.path()).unwrap();
    dir.save(&checkpoint(5, 1)).unwrap();
    let weights = tmp.path().join("gen-000001/weights.f32");
    let bytes = std::fs::read(&weights).unwrap();
    std::fs::write(&weights, &bytes[..100]).unwrap();
    let err = dir.load_latest().unwrap_err();
    assert_names(&err, &[&weights.display().to_string(), "truncated"]);

    std::fs::remove_file(&weights).unwrap();
    std::fs::create_dir(&weights).unwrap();
    let err = dir.load_latest().unwrap_err();
    assert!(matches!(err, CkptError::ForeignFiles { .. }), "{err}");
}
