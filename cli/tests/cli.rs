//! The `tinygpt` binary end to end: a short run, and one clear line for every kind of bad input.

use std::path::PathBuf;
use std::process::{Command, Output};

fn tinygpt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tinygpt")).args(args).output().expect("the binary runs")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tinygpt-cli-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Exit code 1, no panic, and exactly one stderr line that contains `needle`.
fn assert_clean_error(out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "panic: {stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one line expected: {stderr}");
    assert!(stderr.contains(needle), "expected {needle:?} in: {stderr}");
}

#[test]
fn train_then_sample_and_eval() {
    let dir = scratch("happy");
    let model = dir.join("model");
    let model = model.to_str().unwrap();
    let out = tinygpt(&["train", "--preset", "tiny", "--steps", "3", "--threads", "1", "--out", model]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out =
        tinygpt(&["sample", "--model", model, "--prompt", "ROMEO:", "--tokens", "20", "--temperature", "0"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("ROMEO:"));
    let out = tinygpt(&["eval", "--model", model]);
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    for key in ["train_loss", "val_loss", "tokens"] {
        assert!(line[key].is_number(), "{key} in {line}");
    }
}

#[test]
fn bad_input_gets_one_clear_line() {
    let dir = scratch("bad");
    let empty = dir.join("empty.txt");
    std::fs::write(&empty, "").unwrap();
    let short = dir.join("short.txt");
    std::fs::write(&short, "To be or not to be").unwrap();
    let config = dir.join("bad.json");
    std::fs::write(
        &config,
        r#"{"model": {"model_name": "x", "vocab_size": 256, "context_length": 32, "n_layers": 2,
            "n_heads": 5, "d_model": 48, "d_mlp": 192, "dropout": 0.0, "tie_embeddings": true,
            "dtype": "float32"}}"#,
    )
    .unwrap();
    let p = |p: &PathBuf| p.to_str().unwrap().to_string();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["train".into(), "--data".into(), p(&dir.join("missing.txt"))], "missing.txt"),
        (vec!["train".into(), "--data".into(), p(&empty)], "is empty"),
        (vec!["train".into(), "--preset".into(), "tiny".into(), "--data".into(), p(&short)], "too short"),
        (vec!["train".into(), "--config".into(), p(&config)], "not divisible by n_heads"),
        (vec!["train".into(), "--steps".into(), "0".into()], "--steps must be positive"),
        (vec!["train".into(), "--lr".into(), "-1".into()], "--lr must be positive"),
        (vec!["train".into(), "--batch".into(), "0".into()], "--batch must be positive"),
        (vec!["train".into(), "--preset".into(), "gigantic".into()], "unknown preset"),
        (vec!["sample".into(), "--model".into(), p(&dir.join("nowhere"))], "nowhere"),
        (vec!["eval".into(), "--model".into(), p(&empty)], "empty.txt"),
        (vec!["bench".into(), "--steps".into(), "-3".into()], "--steps must be positive"),
    ];
    for (args, needle) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_clean_error(&tinygpt(&args), needle);
    }
}
