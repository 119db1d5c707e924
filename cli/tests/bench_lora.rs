//! `tinygpt bench --lora`: LoRA steps on a frozen model of a config file's shape, here one
//! with a BPE vocabulary (the `tokenizer` field a config file may now carry), as the
//! GPT-2-124M CPU comparison runs it (configs/gpt2-124m-lora.json, bench/pytorch_lora_twin.py).

mod common;

use common::{ok, s, scratch};

#[test]
fn bench_times_adapter_steps_on_a_bpe_shaped_model() {
    let dir = scratch("bench_lora");
    let config = dir.join("config.json");
    std::fs::write(
        &config,
        r#"{"model": {"model_name": "wide-vocab", "vocab_size": 1000, "tokenizer": "bpe-0000000000000000",
            "context_length": 32, "n_layers": 2, "n_heads": 2, "d_model": 32, "d_mlp": 128, "dropout": 0.0, "tie_embeddings": true,
            "dtype": "float32"},
            "training": {"batch_size": 2}}"#,
    )
    .unwrap();
    let out = ok(&["bench", "--config", s(&config), "--lora", "qvo-r8", "--steps", "1", "--threads", "1"]);
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(line["lora"], "qvo-r8");
    assert_eq!(line["preset"], "wide-vocab");
    // Rank 8 on q, v and o of 2 layers: 3 × 2 × 8 × (32 + 32).
    assert_eq!(line["trainable"], 3 * 2 * 8 * 64);
    assert!(line["params"].as_u64().unwrap() > 1000 * 32, "{line}");
    assert!(line["tok_per_s"].as_f64().unwrap() > 0.0, "{line}");

    let whole = ok(&["bench", "--config", s(&config), "--steps", "1", "--threads", "1"]);
    let line: serde_json::Value = serde_json::from_slice(&whole.stdout).unwrap();
    assert!(line["lora"].is_null());
    assert_eq!(line["trainable"], line["params"]);
}
