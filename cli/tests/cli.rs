//! The `tinygpt` binary end to end: a short run, and one clear line for every kind of bad input.

use std::path::PathBuf;
use std::process::Command;

mod common;

use common::{assert_clean_error, scratch, tinygpt};

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
    // One file out and back in: the imported model samples the same text.
    let file = dir.join("model.safetensors");
    let out = tinygpt(&["export", "--model", model, "--out", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let imported = dir.join("imported");
    let out = tinygpt(&["import", "--in", file.to_str().unwrap(), "--out", imported.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let sample =
        |m: &str| tinygpt(&["sample", "--model", m, "--prompt", "A", "--tokens", "30", "--seed", "5"]).stdout;
    assert_eq!(sample(model), sample(imported.to_str().unwrap()));
}

/// The weights of the latest checkpoint generation in `dir`.
fn latest_weights(dir: &std::path::Path) -> Vec<u8> {
    let pointer: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("latest.json")).unwrap()).unwrap();
    std::fs::read(dir.join(pointer["latest"].as_str().unwrap()).join("weights.f32")).unwrap()
}

#[test]
fn resume_continues_exactly_and_refuses_other_data() {
    let dir = scratch("resume");
    let (straight, split) = (dir.join("straight"), dir.join("split"));
    let base = ["train", "--preset", "tiny", "--threads", "2"];
    let run = |extra: &[&str]| {
        let out = tinygpt(&[&base[..], extra].concat());
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    run(&["--steps", "6", "--out", straight.to_str().unwrap()]);
    // 6 steps = 3 steps, then 3 more resumed from the checkpoint (max_steps grows by --steps).
    run(&["--steps", "3", "--out", split.to_str().unwrap()]);
    let out = tinygpt(&["train", "--resume", split.to_str().unwrap(), "--steps", "3", "--threads", "1"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        latest_weights(&straight) == latest_weights(&split),
        "resumed weights differ from a straight run"
    );

    let other = dir.join("other.txt");
    std::fs::write(&other, "All the world's a stage, and all the men and women merely players. ".repeat(20))
        .unwrap();
    let resume_other =
        ["train", "--resume", split.to_str().unwrap(), "--steps", "1", "--data", other.to_str().unwrap()];
    assert_clean_error(&tinygpt(&resume_other), &["dataset_id"]);
    let forced = tinygpt(&[&resume_other[..], &["--force"]].concat());
    assert!(forced.status.success(), "{}", String::from_utf8_lossy(&forced.stderr));
}

#[test]
fn ctrl_c_saves_a_checkpoint_before_exiting() {
    use std::io::{BufRead, BufReader, Read};

    let dir = scratch("ctrlc").join("run");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tinygpt"))
        .args([
            "train",
            "--preset",
            "small",
            "--steps",
            "100000",
            "--threads",
            "1",
            "--out",
            dir.to_str().unwrap(),
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The "training …" line comes after the Ctrl-C handler is installed; then let it step.
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    assert!(first.starts_with("training "), "{first}");
    std::thread::sleep(std::time::Duration::from_secs(1));
    Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{rest}");
    assert!(rest.contains("interrupted at step"), "{rest}");
    assert!(!latest_weights(&dir).is_empty());
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
        (vec!["import".into(), "--in".into(), p(&short), "--out".into(), p(&dir.join("imp"))], "short.txt"),
        (vec!["bench".into(), "--steps".into(), "-3".into()], "--steps must be positive"),
    ];
    for (args, needle) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_clean_error(&tinygpt(&args), &[needle]);
    }
    // Refused before the default --out folder is created.
    assert!(!std::path::Path::new("out").exists(), "bad input created ./out");
}

#[test]
fn bench_times_the_model_of_a_config_file() {
    let dir = scratch("bench-config");
    let config = dir.join("config.json");
    let model = r#"{"model_name": "bench-me", "vocab_size": 256, "context_length": 16, "n_layers": 1,
        "n_heads": 2, "d_model": 16, "d_mlp": 64, "dropout": 0.2, "tie_embeddings": true,
        "dtype": "float32"}"#;
    std::fs::write(&config, format!(r#"{{"model": {model}, "training": {{"batch_size": 3}}}}"#)).unwrap();
    let out = tinygpt(&["bench", "--config", config.to_str().unwrap(), "--steps", "1", "--threads", "1"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    assert_eq!(line["preset"], "bench-me", "{line}");
    let params = line["params"].as_u64().unwrap_or_else(|| panic!("params in {line}"));
    assert!(params > 0 && params < 20_000, "{line}");
    let out = tinygpt(&["bench", "--config", "/nonexistent/config.json", "--steps", "1"]);
    assert_clean_error(&out, &["cannot read config file"]);
}

#[test]
fn bench_reports_the_kernel_variant_it_ran() {
    for (flag, want) in [("reference", Some("reference")), ("fast", None)] {
        let out =
            tinygpt(&["bench", "--preset", "tiny", "--steps", "1", "--threads", "1", "--kernels", flag]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let line: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
        let kernels = line["kernels"].as_str().unwrap_or_else(|| panic!("kernels in {line}"));
        match want {
            Some(want) => assert_eq!(kernels, want),
            None => assert!(["avx512", "avx2-fma", "reference"].contains(&kernels), "{line}"),
        }
    }
    let out = tinygpt(&["bench", "--preset", "tiny", "--steps", "1", "--kernels", "simd"]);
    assert_clean_error(&out, &["possible values: reference, fast"]);
}
