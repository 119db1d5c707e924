//! `tinygpt import --format hf-gpt2 DIR`, then `sample` and `eval` through the model's BPE:
//! the fixture is a random `GPT2LMHeadModel` made with `transformers`
//! (ckpt/tests/fixtures/hf_gpt2/make_fixture.py), whose greedy continuation it recorded.

mod common;

use std::path::{Path, PathBuf};

use common::{assert_clean_error, ok, s, scratch, tinygpt};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../ckpt/tests/fixtures/hf_gpt2")
}

fn imported(dir: &Path) -> PathBuf {
    let run = dir.join("gpt2");
    ok(&["import", "--format", "hf-gpt2", "--in", s(&fixture()), "--out", s(&run)]);
    run
}

#[test]
fn an_imported_gpt2_samples_transformers_greedy_tokens_and_evaluates() {
    let dir = scratch("greedy");
    let run = imported(&dir);
    assert!(run.join("tokenizer/vocab.json").is_file() && run.join("tokenizer/merges.txt").is_file());
    let greedy: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture().join("greedy.json")).unwrap()).unwrap();
    let prompt = greedy["prompt"].as_str().unwrap();
    let n = greedy["ids"].as_array().unwrap().len().to_string();
    let bytes: Vec<u8> =
        greedy["bytes"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap() as u8).collect();
    let sample = |extra: &[&str]| {
        let mut args =
            vec!["sample", "--model", s(&run), "--prompt", prompt, "--tokens", &n, "--temperature", "0"];
        args.extend_from_slice(extra);
        String::from_utf8(ok(&args).stdout).unwrap()
    };
    let cached = sample(&[]);
    let want = format!("{prompt}{}", String::from_utf8_lossy(&bytes));
    assert!(cached.starts_with(&want), "ours {cached:?}\ntransformers {want:?}");
    assert_eq!(sample(&["--no-cache"]), cached);

    let out = ok(&["eval", "--model", s(&run), "--threads", "1"]);
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let val = line["val_loss"].as_f64().unwrap();
    // A random model over 1,000 tokens: about ln 1000 = 6.9 nats, far from ln 256 = 5.5.
    assert!(val.is_finite() && val > 6.0 && val < 9.0, "{line}");
    let config = common::latest_file(&run, "model_config.json");
    assert!(config.contains(r#""tokenizer": "bpe-"#) && config.contains(r#""vocab_size": 1000"#), "{config}");
}

#[test]
fn a_folder_without_what_gpt2_needs_is_refused_by_name() {
    let dir = scratch("refusals");
    let partial = dir.join("partial");
    std::fs::create_dir_all(&partial).unwrap();
    for name in ["config.json", "model.safetensors", "vocab.json"] {
        std::fs::copy(fixture().join(name), partial.join(name)).unwrap();
    }
    let out = tinygpt(&["import", "--format", "hf-gpt2", "--in", s(&partial), "--out", s(&dir.join("a"))]);
    assert_clean_error(&out, &["merges.txt", "is missing"]);
    std::fs::copy(fixture().join("merges.txt"), partial.join("merges.txt")).unwrap();
    std::fs::remove_file(partial.join("model.safetensors")).unwrap();
    let out = tinygpt(&["import", "--format", "hf-gpt2", "--in", s(&partial), "--out", s(&dir.join("b"))]);
    assert_clean_error(&out, &["model.safetensors", "is missing"]);
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture().join("config.json")).unwrap()).unwrap();
    config["activation_function"] = "relu".into();
    std::fs::write(partial.join("config.json"), serde_json::to_vec(&config).unwrap()).unwrap();
    std::fs::copy(fixture().join("model.safetensors"), partial.join("model.safetensors")).unwrap();
    let out = tinygpt(&["import", "--format", "hf-gpt2", "--in", s(&partial), "--out", s(&dir.join("c"))]);
    assert_clean_error(&out, &["activation_function", "relu"]);
    let out = tinygpt(&[
        "import",
        "--format",
        "hf-gpt2",
        "--in",
        s(&fixture().join("config.json")),
        "--out",
        s(&dir.join("d")),
    ]);
    assert_clean_error(&out, &["reads a folder"]);
}

#[test]
fn a_bpe_model_file_imports_only_where_its_tokenizer_is() {
    let dir = scratch("roundtrip");
    let run = imported(&dir);
    let file = dir.join("gpt2.safetensors");
    ok(&["export", "--model", s(&run), "--out", s(&file)]);
    let out = tinygpt(&["import", "--in", s(&file), "--out", s(&dir.join("elsewhere"))]);
    assert_clean_error(&out, &["tokenizer", "vocab.json", "is missing"]);
    // Into the run that has it: a second generation, sampling as the first.
    ok(&["import", "--in", s(&file), "--out", s(&run)]);
    let out = ok(&["sample", "--model", s(&run), "--prompt", "KING", "--tokens", "5", "--seed", "3"]);
    assert!(out.stdout.starts_with(b"KING"));
}

#[test]
fn a_lora_adapter_on_an_imported_gpt2_trains_on_its_bpe_tokens() {
    let dir = scratch("lora");
    let run = imported(&dir);
    let data = dir.join("text.txt");
    std::fs::write(&data, "Now is the winter of our discontent, made glorious summer. ".repeat(80)).unwrap();
    let adapter = dir.join("adapter");
    let out = ok(&[
        "lora",
        "train",
        "--base",
        s(&run),
        "--data",
        s(&data),
        "--steps",
        "2",
        "--batch",
        "2",
        "--threads",
        "1",
        "--out",
        s(&adapter),
    ]);
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(line["adapter_val_loss"].as_f64().unwrap().is_finite(), "{line}");
    let manifest: serde_json::Value =
        serde_json::from_str(&common::latest_file(&adapter, "dataset_manifest.json")).unwrap();
    // The base's BPE, not bytes: fewer tokens than bytes, and the tokenizer named.
    let (tokens, bytes) =
        (manifest["token_count"].as_u64().unwrap(), manifest["raw_bytes"].as_u64().unwrap());
    assert!(tokens < bytes / 2, "{manifest}");
    assert!(manifest["tokenizer"].as_str().unwrap().starts_with("bpe-"), "{manifest}");
}
