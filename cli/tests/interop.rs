//! The way out and back: nanoGPT export/import through the binary.

use std::path::PathBuf;
use std::process::{Command, Output};

fn tinygpt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tinygpt")).args(args).output().expect("the binary runs")
}

fn ok(out: Output) -> Output {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tinygpt-interop-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A tiny model trained for 3 steps in `dir/model`.
fn trained(dir: &std::path::Path) -> String {
    let model = dir.join("model").to_str().unwrap().to_string();
    ok(tinygpt(&["train", "--preset", "tiny", "--steps", "3", "--threads", "1", "--out", &model]));
    model
}

#[test]
fn nanogpt_export_then_import_samples_the_same_text() {
    let dir = scratch("nanogpt");
    let model = trained(&dir);
    let file = dir.join("nano.safetensors");
    let file = file.to_str().unwrap();
    ok(tinygpt(&["export", "--format", "nanogpt", "--model", &model, "--out", file]));
    let back = dir.join("back");
    let back = back.to_str().unwrap();
    ok(tinygpt(&["import", "--format", "nanogpt", "--in", file, "--out", back]));
    let sample = |m: &str| {
        ok(tinygpt(&["sample", "--model", m, "--prompt", "A", "--tokens", "30", "--seed", "5"])).stdout
    };
    assert_eq!(sample(&model), sample(back));
    let eval = |m: &str| ok(tinygpt(&["eval", "--model", m, "--threads", "1"])).stdout;
    assert_eq!(eval(&model), eval(back));

    // Our importer refuses a nanoGPT file (and the reverse) in one line.
    let out = tinygpt(&["import", "--in", file, "--out", dir.join("x").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    let ours = dir.join("ours.safetensors");
    ok(tinygpt(&["export", "--model", &model, "--out", ours.to_str().unwrap()]));
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
