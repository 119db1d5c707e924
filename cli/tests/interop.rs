//! The way out and back through the binary: nanoGPT export/import, and `debug-state`
//! compared between backends.

use std::collections::BTreeMap;
use std::process::Command;

use safetensors::{Dtype, SafeTensors};
use tinygpt_kernels_wgsl::testing;

mod common;

use common::{assert_ok, ok, scratch, tinygpt};

/// A tiny model trained for 3 steps in `dir/model`.
fn trained(dir: &std::path::Path) -> String {
    let model = dir.join("model").to_str().unwrap().to_string();
    ok(&["train", "--preset", "tiny", "--steps", "3", "--threads", "1", "--out", &model]);
    model
}

#[test]
fn nanogpt_export_then_import_samples_the_same_text() {
    let dir = scratch("nanogpt");
    let model = trained(&dir);
    let file = dir.join("nano.safetensors");
    let file = file.to_str().unwrap();
    ok(&["export", "--format", "nanogpt", "--model", &model, "--out", file]);
    let back = dir.join("back");
    let back = back.to_str().unwrap();
    ok(&["import", "--format", "nanogpt", "--in", file, "--out", back]);
    let sample =
        |m: &str| ok(&["sample", "--model", m, "--prompt", "A", "--tokens", "30", "--seed", "5"]).stdout;
    assert_eq!(sample(&model), sample(back));
    let eval = |m: &str| ok(&["eval", "--model", m, "--threads", "1"]).stdout;
    assert_eq!(eval(&model), eval(back));

    // Our importer refuses a nanoGPT file (and the reverse) in one line.
    let out = tinygpt(&["import", "--in", file, "--out", dir.join("x").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    let ours = dir.join("ours.safetensors");
    ok(&["export", "--model", &model, "--out", ours.to_str().unwrap()]);
    let out = tinygpt(&[
        "import",
        "--format",
        "nanogpt",
        "--in",
        ours.to_str().unwrap(),
        "--out",
        dir.join("y").to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("not a nanoGPT file") && stderr.contains("n_layer"), "{stderr}");
}

/// A state file's tensors (F32 as f32s, I32 as f32s too) and metadata.
fn read_state(path: &std::path::Path) -> (BTreeMap<String, Vec<f32>>, BTreeMap<String, String>) {
    let bytes = std::fs::read(path).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let tensors = st
        .tensors()
        .into_iter()
        .map(|(name, view)| {
            let values = view
                .data()
                .chunks_exact(4)
                .map(|b| {
                    let b: [u8; 4] = b.try_into().unwrap();
                    match view.dtype() {
                        Dtype::I32 => i32::from_le_bytes(b) as f32,
                        _ => f32::from_le_bytes(b),
                    }
                })
                .collect();
            (name, values)
        })
        .collect();
    let (_, header) = SafeTensors::read_metadata(&bytes).unwrap();
    let meta = header.metadata().as_ref().unwrap().iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    (tensors, meta)
}

fn worst(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max)
}

fn largest(a: &[f32]) -> f32 {
    a.iter().fold(0f32, |m, v| m.max(v.abs()))
}

/// `debug-state` on the cpu and the wgpu backend (lavapipe where no GPU is configured)
/// from the same checkpoint and batch. Tolerances (f32 kernels that sum in different
/// orders): the batch is identical; logits within 1e-4 × the largest logit; the loss and
/// the 10 losses after it within 1e-5 relative; each gradient within 1e-4 × its tensor's
/// largest magnitude, floored at 1e-4 × the largest gradient of the model (a key bias's
/// gradient is rounding noise: softmax ignores a per-row shift). Measured on lavapipe:
/// about 1e-7 relative everywhere.
#[test]
fn debug_state_agrees_between_cpu_and_wgpu() {
    let dir = scratch("debug-state");
    let model = trained(&dir);
    let state = |backend: &str| {
        let out = dir.join(format!("{backend}.safetensors"));
        let mut command = Command::new(env!("CARGO_BIN_EXE_tinygpt"));
        command.args(["debug-state", "--model", &model, "--batch", "3", "--seed", "7", "--threads", "2"]);
        command.args(["--backend", backend, "--out", out.to_str().unwrap()]);
        let lavapipe = std::path::Path::new(testing::LAVAPIPE_ICD);
        if std::env::var_os("VK_ICD_FILENAMES").is_none() && lavapipe.exists() {
            command.env("VK_ICD_FILENAMES", lavapipe).env("XDG_RUNTIME_DIR", std::env::temp_dir());
        }
        let result = command.output().unwrap();
        (result, out)
    };
    let (out, cpu_file) = state("cpu");
    assert_ok(&out);
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(line["losses"].as_array().unwrap().len(), 10);
    let (out, gpu_file) = state("wgpu");
    if !out.status.success() && testing::no_gpu_allowed() {
        eprintln!("skipped: no GPU adapter (TINYGPT_ALLOW_NO_GPU=1)");
        return;
    }
    assert_ok(&out);
    let (cpu, cpu_meta) = read_state(&cpu_file);
    let (gpu, gpu_meta) = read_state(&gpu_file);
    assert_eq!(cpu.keys().collect::<Vec<_>>(), gpu.keys().collect::<Vec<_>>());
    assert!(cpu.contains_key("grads.transformer.h.1.attn.c_attn.weight"), "{:?}", cpu.keys());
    assert_eq!(cpu["x"].len(), 3 * 32);
    assert_eq!((cpu["x"].clone(), cpu["y"].clone()), (gpu["x"].clone(), gpu["y"].clone()));
    assert_eq!(cpu["x"][1..32], cpu["y"][..31], "targets are the inputs shifted by one");
    assert_eq!(cpu_meta["batch"], "3");
    assert_ne!(cpu_meta["backend"], gpu_meta["backend"]);

    let logits = worst(&cpu["logits"], &gpu["logits"]);
    assert!(logits <= 1e-4 * largest(&cpu["logits"]), "logits differ by {logits}");
    for key in ["loss", "losses"] {
        for (c, g) in cpu[key].iter().zip(&gpu[key]) {
            assert!((c - g).abs() <= 1e-5 * c.abs(), "{key}: cpu {c}, wgpu {g}");
        }
    }
    let floor = 1e-3
        * cpu.iter().filter(|(k, _)| k.starts_with("grads.")).map(|(_, v)| largest(v)).fold(0., f32::max);
    for (name, c) in cpu.iter().filter(|(k, _)| k.starts_with("grads.")) {
        let diff = worst(c, &gpu[name]);
        let bound = (1e-4 * largest(c)).max(floor);
        assert!(diff <= bound, "{name}: cpu and wgpu differ by {diff} (bound {bound})");
    }
}
