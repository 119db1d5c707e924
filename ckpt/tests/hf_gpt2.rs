//! Hugging Face GPT-2 import: a randomly initialised `GPT2LMHeadModel` (n_layer 2, n_embd
//! 64, n_head 4, n_positions 128, the 1,000-token BPE of model/tests/fixtures/bpe) made
//! with `transformers` (`fixtures/hf_gpt2/make_fixture.py`, outside CI) gives the logits
//! `transformers` gave, on the CPU backend and on wgpu (lavapipe in CI, the f32 path); and
//! each thing TinyGPT cannot run is refused, named.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};
use tinygpt_autograd::Tape;
use tinygpt_ckpt::{import_hf_gpt2, CkptError, HfTokenizer, ImportDefaults};
use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_kernels_wgsl::WgpuBackend;
use tinygpt_model::{Gpt, Params, Tokenizer};
use tinygpt_run::TrainingConfig;
use tinygpt_tensor::{Backend, Indices};

const CONFIG: &[u8] = include_bytes!("fixtures/hf_gpt2/config.json");
const MODEL: &[u8] = include_bytes!("fixtures/hf_gpt2/model.safetensors");
const VOCAB: &[u8] = include_bytes!("fixtures/hf_gpt2/vocab.json");
const MERGES: &[u8] = include_bytes!("fixtures/hf_gpt2/merges.txt");
const LOGITS: &[u8] = include_bytes!("fixtures/hf_gpt2/logits.safetensors");

fn tokenizer() -> (Tokenizer, HfTokenizer) {
    let tok = Tokenizer::bpe(VOCAB, MERGES).unwrap();
    let hf = HfTokenizer { name: tok.name().to_string(), vocab_size: tok.vocab_size() };
    (tok, hf)
}

fn defaults() -> ImportDefaults {
    ImportDefaults { training: TrainingConfig::default(), dataset: common::manifest() }
}

fn import(config: &[u8], model: &[u8]) -> Result<tinygpt_ckpt::Checkpoint, CkptError> {
    import_hf_gpt2(config, model, &tokenizer().1, defaults())
}

fn refusal(config: &[u8], model: &[u8]) -> String {
    let err = import(config, model).unwrap_err();
    assert!(matches!(err, CkptError::HfGpt2 { .. }), "{err}");
    err.to_string()
}

#[test]
fn logits_equal_transformers_on_the_cpu() {
    let worst = logits_match_transformers(&CpuBackend::new(1));
    eprintln!("cpu: largest |ours - transformers| over the logits: {worst:e}");
}

#[test]
fn logits_equal_transformers_on_wgpu() {
    let backend =
        WgpuBackend::new().expect("a Vulkan adapter (lavapipe: apt-get install mesa-vulkan-drivers)");
    let worst = logits_match_transformers(&backend);
    eprintln!("wgpu: largest |ours - transformers| over the logits: {worst:e}");
}

/// Imports the fixture, runs each reference sequence through `b` and checks every logit
/// against transformers' within the kit's accumulated tolerance; returns the largest error.
fn logits_match_transformers<B: Backend>(b: &B) -> f64 {
    let ckpt = import(CONFIG, MODEL).unwrap();
    let c = &ckpt.model_config;
    assert_eq!((c.n_layers, c.d_model, c.n_heads, c.context_length, c.vocab_size), (2, 64, 4, 128, 1000));
    assert_eq!(c.tokenizer, tokenizer().0.name());
    let model = Gpt::new(c.clone(), Params::from_flat(b, c, &ckpt.weights).unwrap()).unwrap();
    let reference = SafeTensors::deserialize(LOGITS).unwrap();
    let texts = reference.metadata_texts();
    let (tok, _) = tokenizer();
    let mut worst = 0f64;
    for (i, text) in texts.iter().enumerate() {
        let ids: Vec<u32> = reference
            .tensor(&format!("ids.{i}"))
            .unwrap()
            .data()
            .chunks_exact(8)
            .map(|x| i64::from_le_bytes(x.try_into().unwrap()) as u32)
            .collect();
        assert_eq!(tok.encode(text.as_bytes()), ids, "our BPE gives transformers' input ids");
        let want: Vec<f32> = reference
            .tensor(&format!("logits.{i}"))
            .unwrap()
            .data()
            .chunks_exact(4)
            .map(|x| f32::from_le_bytes(x.try_into().unwrap()))
            .collect();
        let tape = Tape::no_grad();
        let got = model.forward(&tape, &Indices::new(b, &ids), 1, ids.len()).logits.value().to_vec().unwrap();
        assert_eq!(got.len(), want.len());
        for (k, (&g, &w)) in got.iter().zip(&want).enumerate() {
            // The kit's ACCUMULATED tolerance.
            let err = (g as f64 - w as f64).abs();
            assert!(
                err <= 1e-4 + 1e-4 * (w as f64).abs(),
                "{}: sequence {i} logit {k}: ours {g}, transformers {w}",
                b.name()
            );
            worst = worst.max(err);
        }
    }
    worst
}

trait Texts {
    fn metadata_texts(&self) -> Vec<String>;
}

impl Texts for SafeTensors<'_> {
    fn metadata_texts(&self) -> Vec<String> {
        // The header's __metadata__ is not exposed by SafeTensors; read it from the file.
        let (_, meta) = SafeTensors::read_metadata(LOGITS).unwrap();
        let texts = meta.metadata().as_ref().unwrap()["texts"].clone();
        texts.split("\n---\n").map(str::to_string).collect()
    }
}

/// `config.json` with `key` set to `value` (JSON).
fn config_with(key: &str, value: &str) -> Vec<u8> {
    let mut json: serde_json::Value = serde_json::from_slice(CONFIG).unwrap();
    json[key] = serde_json::from_str(value).unwrap();
    serde_json::to_vec(&json).unwrap()
}

/// The model file rewritten by `edit` over (name, dtype, shape, bytes).
fn model_with(edit: impl FnOnce(&mut Vec<(String, Dtype, Vec<usize>, Vec<u8>)>)) -> Vec<u8> {
    let st = SafeTensors::deserialize(MODEL).unwrap();
    let mut tensors: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = st
        .tensors()
        .into_iter()
        .map(|(n, v)| (n.to_string(), v.dtype(), v.shape().to_vec(), v.data().to_vec()))
        .collect();
    edit(&mut tensors);
    let views: Vec<(String, TensorView<'_>)> =
        tensors.iter().map(|(n, d, s, b)| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap())).collect();
    safetensors::serialize(views, None).unwrap()
}

#[test]
fn names_without_the_transformer_prefix_and_a_tied_head_import_the_same() {
    let want = import(CONFIG, MODEL).unwrap();
    let bare = model_with(|t| {
        for (n, ..) in t.iter_mut() {
            *n = n.strip_prefix("transformer.").unwrap().to_string();
        }
    });
    assert_eq!(import(CONFIG, &bare).unwrap().weights, want.weights);
    let with_head = model_with(|t| {
        let wte = t.iter().find(|x| x.0 == "transformer.wte.weight").unwrap().clone();
        t.push(("lm_head.weight".into(), wte.1, wte.2, wte.3));
        t.push(("transformer.h.0.attn.bias".into(), Dtype::F32, vec![1], vec![0; 4]));
    });
    assert_eq!(import(CONFIG, &with_head).unwrap().weights, want.weights);
}

#[test]
fn half_precision_files_widen_exactly() {
    let want = import(CONFIG, MODEL).unwrap();
    // bf16 keeps the top half of each f32: the import must equal the f32 weights cut so.
    let bf16 = model_with(|t| {
        for (_, d, _, bytes) in t.iter_mut() {
            *d = Dtype::BF16;
            *bytes = bytes.chunks_exact(4).flat_map(|x| [x[2], x[3]]).collect();
        }
    });
    let got = import(CONFIG, &bf16).unwrap();
    let cut: Vec<f32> = want.weights.iter().map(|w| f32::from_bits(w.to_bits() & 0xffff_0000)).collect();
    assert_eq!(got.weights, cut);
}

#[test]
fn what_tinygpt_cannot_run_is_refused_by_name() {
    let err = refusal(&config_with("activation_function", r#""relu""#), MODEL);
    assert!(err.contains("activation_function") && err.contains("relu"), "{err}");
    let err = refusal(&config_with("activation_function", r#""gelu""#), MODEL);
    assert!(err.contains("tanh GELU"), "{err}");
    let err = refusal(&config_with("layer_norm_epsilon", "1e-6"), MODEL);
    assert!(err.contains("layer_norm_epsilon"), "{err}");
    let err = refusal(&config_with("scale_attn_by_inverse_layer_idx", "true"), MODEL);
    assert!(err.contains("scale_attn_by_inverse_layer_idx"), "{err}");
    let err = refusal(&config_with("tie_word_embeddings", "false"), MODEL);
    assert!(err.contains("tie_word_embeddings"), "{err}");
    let err = refusal(&config_with("model_type", r#""gpt_neox""#), MODEL);
    assert!(err.contains("model_type"), "{err}");
    let err = refusal(&config_with("vocab_size", "50257"), MODEL);
    assert!(err.contains("vocab_size is 50257") && err.contains("vocab.json has 1000"), "{err}");
    let err = refusal(&config_with("n_embd", "128"), MODEL);
    assert!(err.contains("shape") && err.contains("config.json"), "{err}");
    let err = refusal(&config_with("n_positions", "64"), MODEL);
    assert!(err.contains("wpe.weight") && err.contains("[128, 64]"), "{err}");
    let no_n_layer = {
        let mut json: serde_json::Value = serde_json::from_slice(CONFIG).unwrap();
        json.as_object_mut().unwrap().remove("n_layer");
        serde_json::to_vec(&json).unwrap()
    };
    let err = refusal(&no_n_layer, MODEL);
    assert!(err.contains("n_layer"), "{err}");
    let err = refusal(b"{not json", MODEL);
    assert!(err.contains("config.json"), "{err}");

    let missing = model_with(|t| t.retain(|x| x.0 != "transformer.h.1.mlp.c_fc.bias"));
    let err = refusal(CONFIG, &missing);
    assert!(err.contains("h.1.mlp.c_fc.bias"), "{err}");
    let extra = model_with(|t| {
        t.push(("transformer.h.7.attn.c_attn.weight".into(), Dtype::F32, vec![1], vec![0; 4]))
    });
    let err = refusal(CONFIG, &extra);
    assert!(err.contains("h.7.attn.c_attn.weight") && err.contains("not a parameter"), "{err}");
    let untied = model_with(|t| {
        let mut wte = t.iter().find(|x| x.0 == "transformer.wte.weight").unwrap().clone();
        wte.3[0] ^= 1;
        t.push(("lm_head.weight".into(), wte.1, wte.2, wte.3));
    });
    let err = refusal(CONFIG, &untied);
    assert!(err.contains("lm_head.weight") && err.contains("untied"), "{err}");
    let int = model_with(|t| {
        let x = t.iter_mut().find(|x| x.0 == "transformer.ln_f.bias").unwrap();
        x.1 = Dtype::I32;
    });
    let err = refusal(CONFIG, &int);
    assert!(err.contains("ln_f.bias") && err.contains("I32"), "{err}");
}
