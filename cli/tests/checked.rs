//! `--backend checked`: a real run is bit-identical to the plain CPU backend's (the checks
//! only read), and a run that blows up stops with one line naming the first op that did.

use std::path::Path;

mod common;

use common::{ok, scratch, tinygpt};

/// The weights of the latest checkpoint generation in `dir`.
fn latest_weights(dir: &Path) -> Vec<u8> {
    let pointer: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("latest.json")).unwrap()).unwrap();
    std::fs::read(dir.join(pointer["latest"].as_str().unwrap()).join("weights.f32")).unwrap()
}

#[test]
fn checked_training_matches_the_cpu_backend_bit_for_bit() {
    let dir = scratch("parity");
    let train = |backend: &str| {
        let out = dir.join(backend.replace(':', "-"));
        let args = ["train", "--preset", "tiny", "--steps", "3", "--threads", "1", "--backend", backend];
        ok(&[&args[..], &["--out", out.to_str().unwrap()]].concat());
        latest_weights(&out)
    };
    assert!(train("cpu") == train("checked"), "the checks changed the training");
}

/// A learning rate of 1e30 blows the weights up within two steps: the plain backend can only
/// say that the loss diverged; the checked one names the op whose output first overflowed.
/// Which op that is depends on the kernels' arithmetic (the fused fast LayerNorm already
/// returns `rstd` 0, one op earlier), so the scalar reference kernels, the same on every
/// machine, pin it.
#[test]
fn a_diverging_run_names_the_first_op_that_overflowed() {
    let dir = scratch("diverge");
    let out = dir.join("run");
    let args = [
        "train",
        "--preset",
        "tiny",
        "--steps",
        "10",
        "--threads",
        "1",
        "--lr",
        "1e30",
        "--backend",
        "checked",
        "--kernels",
        "reference",
    ];
    let out = tinygpt(&[&args[..], &["--out", out.to_str().unwrap()]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "panic: {stderr}");
    let error = stderr.lines().last().unwrap();
    assert!(error.starts_with("tinygpt: error: the checked backend stopped at op #"), "{error}");
    assert!(error.contains("`matmul` (m 512, k 48, n 48, layout nt): output out: "), "{error}");
    assert!(error.contains("values are not finite ("), "{error}");
}
