//! `check_compatible`: which differences refuse a resume, and how they are named.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use common::{checkpoint, manifest, small_config};
use tinygpt_ckpt::{check_compatible, CkptError};

#[test]
fn the_same_model_and_data_resume() {
    let mut renamed = small_config();
    renamed.model_name = "a label only".into();
    check_compatible(&checkpoint(5, 1), &renamed, &manifest()).unwrap();
}

#[test]
fn a_different_architecture_names_the_field() {
    let ckpt = checkpoint(5, 1);
    let mut other = small_config();
    other.n_heads = 4;
    let err = check_compatible(&ckpt, &other, &manifest()).unwrap_err();
    assert!(matches!(err, CkptError::ConfigMismatch { field: "n_heads", .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("n_heads is 2 in the checkpoint but 4 was requested"), "{msg}");

    let mut other = small_config();
    other.d_mlp = 64;
    assert!(matches!(
        check_compatible(&ckpt, &other, &manifest()),
        Err(CkptError::ConfigMismatch { field: "d_mlp", .. })
    ));
}

#[test]
fn different_data_is_a_dataset_mismatch_the_cli_can_override() {
    let ckpt = checkpoint(5, 1);
    let mut data = manifest();
    data.dataset_id = "0".repeat(64);
    data.raw_bytes = 2000;
    let err = check_compatible(&ckpt, &small_config(), &data).unwrap_err();
    assert!(matches!(err, CkptError::DatasetMismatch { field: "dataset_id", .. }), "{err}");
    assert!(err.to_string().contains("--force"), "{err}");

    let mut data = manifest();
    data.seed = 8;
    assert!(matches!(
        check_compatible(&ckpt, &small_config(), &data),
        Err(CkptError::DatasetMismatch { field: "seed", .. })
    ));

    let mut data = manifest();
    data.tokenizer = "bpe-v9".into();
    let err = check_compatible(&ckpt, &small_config(), &data).unwrap_err();
    assert!(matches!(err, CkptError::TokenizerMismatch { .. }), "{err}");
}
