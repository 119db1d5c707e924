//! One-file export/import: round trips, the tensor names, the checks an import makes,
//! and Python's `safetensors` reading the file.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::process::Command;

use common::{assert_same, checkpoint};
use safetensors::{Dtype, SafeTensors};
use sha2::{Digest, Sha256};
use tinygpt_ckpt::{export_safetensors, import_safetensors, CkptError, LoadOptions};

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn export_then_import_round_trips_with_and_without_moments() {
    let ckpt = checkpoint(25, 1);
    let full = export_safetensors(&ckpt, true).unwrap();
    assert_same(&import_safetensors(&full, &LoadOptions::default()).unwrap(), &ckpt);

    let light = export_safetensors(&ckpt, false).unwrap();
    assert!(light.len() < full.len() / 2);
    let back = import_safetensors(&light, &LoadOptions::default()).unwrap();
    assert!(!back.has_moments());
    assert_same(&back, &ckpt.weights_only());
}

#[test]
fn tensors_carry_canonical_names_and_shapes() {
    let ckpt = checkpoint(25, 1);
    let bytes = export_safetensors(&ckpt, true).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    assert_eq!(st.len(), 36 * 3);
    for spec in ckpt.model_config.tensor_specs() {
        for name in [spec.name.clone(), format!("adam_m.{}", spec.name), format!("adam_v.{}", spec.name)] {
            let view = st.tensor(&name).unwrap();
            assert_eq!((view.dtype(), view.shape()), (Dtype::F32, spec.shape.as_slice()), "{name}");
        }
    }
    let q = st.tensor("blocks.1.attn.q_proj.weight").unwrap();
    let offset = ckpt
        .model_config
        .tensor_specs()
        .iter()
        .find(|s| s.name == "blocks.1.attn.q_proj.weight")
        .unwrap()
        .offset;
    assert_eq!(q.data()[..4], ckpt.weights[offset].to_le_bytes());
    let (_, header) = SafeTensors::read_metadata(&bytes).unwrap();
    let metadata = header.metadata().as_ref().unwrap();
    let mut keys: Vec<_> = metadata.keys().cloned().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "dataset_manifest.json",
            "loss_history.json",
            "model_config.json",
            "trainer_state.json",
            "training_config.json"
        ]
    );
}

#[test]
fn exports_are_deterministic() {
    let a = export_safetensors(&checkpoint(25, 1), true).unwrap();
    let b = export_safetensors(&checkpoint(25, 1), true).unwrap();
    assert_eq!(a, b);
    // Also across processes (the crate's metadata map is a hash map): a fixed digest.
    assert_eq!(sha(&a), common::GOLDEN_EXPORT, "export bytes changed; if intended update GOLDEN_EXPORT");
}

#[test]
fn imports_check_what_a_directory_load_checks() {
    let ckpt = checkpoint(25, 1);
    let good = export_safetensors(&ckpt, true).unwrap();
    let opts = LoadOptions::default();

    let err = import_safetensors(b"definitely not a safetensors file", &opts).unwrap_err();
    assert!(matches!(err, CkptError::Safetensors { .. }), "{err}");

    // A flipped bit in the tensor data: the checksum from trainer_state.json catches it.
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0x40;
    let err = import_safetensors(&bad, &opts).unwrap_err();
    assert!(matches!(err, CkptError::ChecksumMismatch { .. }), "{err}");
    assert!(err.to_string().contains("safetensors:"), "{err}");

    // A file with only tensors and no metadata (e.g. saved by another tool).
    let st = SafeTensors::deserialize(&good).unwrap();
    let views: Vec<_> = st.tensors().into_iter().filter(|(n, _)| !n.contains("adam")).collect();
    let bare = safetensors::serialize(views.clone(), None).unwrap();
    let err = import_safetensors(&bare, &opts).unwrap_err();
    assert!(err.to_string().contains("__metadata__"), "{err}");

    // An extra tensor.
    let (_, header) = SafeTensors::read_metadata(&good).unwrap();
    let meta = header.metadata().clone();
    let mut extra = views.clone();
    extra.push(("lm_head.weight".to_string(), views[0].1.clone()));
    let err = import_safetensors(&safetensors::serialize(extra, meta.clone()).unwrap(), &opts).unwrap_err();
    assert!(err.to_string().contains("\"lm_head.weight\" is not a parameter"), "{err}");

    // NaN weights are refused unless allowed.
    let mut nan = ckpt.weights_only();
    nan.weights[7] = f32::NAN;
    let bytes: Vec<u8> = nan.weights.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut with_nan: Vec<_> = views.iter().map(|(n, v)| (n.clone(), v.clone())).collect();
    let emb = with_nan.iter_mut().find(|(n, _)| n == "token_embedding").unwrap();
    emb.1 = safetensors::tensor::TensorView::new(Dtype::F32, vec![256, 8], &bytes[..256 * 8 * 4]).unwrap();
    let mut nan_meta = meta.unwrap();
    let weights_only = export_safetensors(&ckpt, false).unwrap();
    let (_, light_header) = SafeTensors::read_metadata(&weights_only).unwrap();
    let resealed = light_header.metadata().as_ref().unwrap()["trainer_state.json"]
        .replace(&sha(&f32s(&ckpt.weights)), &sha(&bytes));
    // Edited by hand, so without its own checksum (as checkpoints from before it load).
    let mut state: serde_json::Value = serde_json::from_str(&resealed).unwrap();
    state.as_object_mut().unwrap().remove("state_sha256");
    nan_meta.insert("trainer_state.json".into(), state.to_string());
    let file = safetensors::serialize(with_nan, Some(nan_meta)).unwrap();
    let err = import_safetensors(&file, &opts).unwrap_err();
    assert!(
        matches!(err, CkptError::NonFinite { .. }) && err.to_string().contains("token_embedding[7]"),
        "{err}"
    );
    let back = import_safetensors(&file, &LoadOptions { allow_non_finite: true }).unwrap();
    assert!(back.weights[7].is_nan());
}

fn f32s(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

const PYTHON_CHECK: &str = r#"
import hashlib, json, sys
import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file

path = sys.argv[1]
tensors = load_file(path)
with safe_open(path, framework="np") as f:
    meta = f.metadata()
config = json.loads(meta["model_config.json"])
state = json.loads(meta["trainer_state.json"])
flat = np.concatenate([tensors[t["name"]].reshape(-1) for t in config["tensors"]]).astype("<f4")
print(json.dumps({
    "count": len(tensors),
    "dtype": str(tensors["token_embedding"].dtype),
    "shape": list(tensors["blocks.1.mlp.fc_in.weight"].shape),
    "value": float(tensors["position_embedding"][0, 3]),
    "weights_sha256": hashlib.sha256(flat.tobytes()).hexdigest(),
    "recorded_sha256": state["files"]["weights.f32"]["sha256"],
    "step": state["step"],
}))
"#;

/// Skipped, with a notice, where python3 with safetensors and numpy is missing; set
/// TINYGPT_REQUIRE_PYTHON=1 (CI) to make that a failure instead.
#[test]
fn python_safetensors_reads_the_export() {
    let available =
        Command::new("python3").args(["-c", "import safetensors, numpy"]).status().is_ok_and(|s| s.success());
    if !available {
        assert!(
            std::env::var_os("TINYGPT_REQUIRE_PYTHON").is_none(),
            "python3 with safetensors and numpy is required (TINYGPT_REQUIRE_PYTHON is set)"
        );
        eprintln!(
            "SKIPPED python_safetensors_reads_the_export: python3 -c 'import safetensors, numpy' failed"
        );
        return;
    }
    let ckpt = checkpoint(25, 1);
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("model.safetensors");
    std::fs::write(&path, export_safetensors(&ckpt, true).unwrap()).unwrap();
    let out = Command::new("python3").arg("-c").arg(PYTHON_CHECK).arg(&path).output().unwrap();
    assert!(out.status.success(), "python failed: {}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["count"], 108);
    assert_eq!(report["dtype"], "float32");
    assert_eq!(report["shape"], serde_json::json!([32, 8]));
    assert_eq!(report["value"].as_f64().unwrap(), ckpt.weights[2048 + 3] as f64);
    assert_eq!(
        report["weights_sha256"], report["recorded_sha256"],
        "Python rebuilt weights.f32 from the table"
    );
    assert_eq!(report["weights_sha256"], sha(&f32s(&ckpt.weights)));
    assert_eq!(report["step"], 25);
}

#[test]
fn duplicate_tensor_names_are_refused() {
    let good = export_safetensors(&checkpoint(25, 1), false).unwrap();
    let n = u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&good[8..8 + n]).unwrap();
    // Rename one tensor's key to another's: same data layout, one name twice.
    let twice = header.replacen("\"ln_final.bias\"", "\"ln_final.weight\"", 1);
    let mut file = (twice.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(twice.as_bytes());
    file.extend_from_slice(&good[8 + n..]);
    let err = import_safetensors(&file, &LoadOptions::default()).unwrap_err();
    assert!(err.to_string().contains("\"ln_final.weight\" twice"), "{err}");
}
