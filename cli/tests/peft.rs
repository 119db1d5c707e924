//! `tinygpt lora export|import --format peft` and `tinygpt lora logits` on the GPT-2 fixture:
//! an adapter `peft` made (ckpt/tests/fixtures/peft_gpt2) imports and gives `peft`'s logits
//! through the sampling path; one trained here exports to PEFT's folder and imports back
//! to the same logits, bit for bit.

mod common;

use std::path::{Path, PathBuf};

use common::{assert_clean_error, assert_ok, lora_train, ok, s, scratch, tinygpt};
use safetensors::SafeTensors;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../ckpt/tests/fixtures")
}

fn imported_base(dir: &Path) -> PathBuf {
    let run = dir.join("gpt2");
    ok(&["import", "--format", "hf-gpt2", "--in", s(&fixtures().join("hf_gpt2")), "--out", s(&run)]);
    run
}

/// `lora logits` of `adapter` on `base` at `ids`.
fn logits(dir: &Path, base: &Path, adapter: &Path, ids: &str) -> Vec<f32> {
    let out = dir.join("logits.safetensors");
    let args = ["lora", "logits", "--base", s(base), "--adapter", s(adapter), "--ids", ids, "--threads", "1"];
    ok(&[&args[..], &["--out", s(&out)]].concat());
    let bytes = std::fs::read(&out).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    st.tensor("logits")
        .unwrap()
        .data()
        .chunks_exact(4)
        .map(|x| f32::from_le_bytes(x.try_into().unwrap()))
        .collect()
}

#[test]
fn an_adapter_made_with_peft_imports_and_gives_its_logits() {
    let dir = scratch("peft-in");
    let base = imported_base(&dir);
    let adapter = base.join("adapters/peft");
    let out = ok(&[
        "lora",
        "import",
        "--format",
        "peft",
        "--base",
        s(&base),
        "--in",
        s(&fixtures().join("peft_gpt2")),
        "--out",
        s(&adapter),
    ]);
    let said = common::stderr(&out);
    assert!(said.contains("c_attn as q_proj, k_proj and v_proj"), "{said}");
    let reference = std::fs::read(fixtures().join("peft_gpt2/logits.safetensors")).unwrap();
    let reference = SafeTensors::deserialize(&reference).unwrap();
    for i in 0..2 {
        let ids: Vec<String> = reference
            .tensor(&format!("ids.{i}"))
            .unwrap()
            .data()
            .chunks_exact(8)
            .map(|x| i64::from_le_bytes(x.try_into().unwrap()).to_string())
            .collect();
        let want: Vec<f32> = reference
            .tensor(&format!("logits.{i}"))
            .unwrap()
            .data()
            .chunks_exact(4)
            .map(|x| f32::from_le_bytes(x.try_into().unwrap()))
            .collect();
        let got = logits(&dir, &base, &adapter, &ids.join(","));
        assert_eq!(got.len(), want.len());
        for (k, (&g, &w)) in got.iter().zip(&want).enumerate() {
            // The kit's ACCUMULATED tolerance.
            assert!((g - w).abs() <= 1e-4 + 1e-4 * w.abs(), "sequence {i} logit {k}: ours {g}, peft {w}");
        }
    }
}

#[test]
fn an_adapter_trained_here_goes_to_peft_and_back_unchanged() {
    let dir = scratch("peft-out");
    let base = imported_base(&dir);
    let data = dir.join("text.txt");
    std::fs::write(&data, "Now is the winter of our discontent, made glorious summer. ".repeat(80)).unwrap();
    let trained = base.join("adapters/trained");
    let flags = ["--steps", "3", "--batch", "2", "--preset", "qvo-r8", "--lr", "0.05"];
    assert_ok(&lora_train(&base, &data, &trained, &flags));
    let folder = dir.join("peft");
    let export = ["lora", "export", "--format", "peft", "--base", s(&base), "--adapter", s(&trained)];
    ok(&[&export[..], &["--out", s(&folder)]].concat());
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(folder.join("adapter_config.json")).unwrap()).unwrap();
    assert_eq!(config["target_modules"], serde_json::json!(["attn.c_attn", "attn.c_proj"]), "{config}");
    assert_eq!((config["r"].as_u64(), config["fan_in_fan_out"].as_bool()), (Some(8), Some(true)), "{config}");
    assert!(folder.join("adapter_model.safetensors").is_file());
    // Again into the same folder: PEFT's two files are replaced, nothing else is there.
    ok(&[&export[..], &["--out", s(&folder)]].concat());

    let back = base.join("adapters/back");
    let import = ["lora", "import", "--format", "peft", "--base", s(&base), "--in", s(&folder)];
    let out = ok(&[&import[..], &["--out", s(&back)]].concat());
    assert!(common::stderr(&out).contains("exactly as TinyGPT exported it"), "{}", common::stderr(&out));
    let ids = "5,17,300,42,999,0,77";
    let (a, b) = (logits(&dir, &base, &trained, ids), logits(&dir, &base, &back, ids));
    assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()), "the round trip changed the logits");
    let plain = dir.join("plain.safetensors");
    ok(&["lora", "logits", "--base", s(&base), "--ids", ids, "--out", s(&plain)]);
    let bytes = std::fs::read(&plain).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let base_logits = st.tensor("logits").unwrap().data().to_vec();
    let trained_bytes: Vec<u8> = a.iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_ne!(base_logits, trained_bytes, "the trained adapter moves the logits");

    // Our export remembers its base: onto another of the same shape (base + adapter merged)
    // it is refused, naming both.
    let other = dir.join("merged");
    ok(&["lora", "merge", "--base", s(&base), "--adapter", s(&trained), "--out", s(&other)]);
    let out = tinygpt(
        &[&import[..4], &["--base", s(&other), "--in", s(&folder), "--out", s(&other.join("adapters/x"))]]
            .concat(),
    );
    assert_clean_error(&out, &["trained on base", "weights sha256"]);

    // A folder holding something else is not written into; a file is not a PEFT folder.
    std::fs::write(folder.join("notes.txt"), "mine").unwrap();
    let out = tinygpt(&[&export[..], &["--out", s(&folder)]].concat());
    assert_clean_error(&out, &["notes.txt", "choose another --out"]);
    let out = tinygpt(&[
        "lora",
        "import",
        "--format",
        "peft",
        "--base",
        s(&base),
        "--in",
        s(&folder.join("adapter_config.json")),
        "--out",
        s(&base.join("adapters/x")),
    ]);
    assert_clean_error(&out, &["reads a folder"]);
}
