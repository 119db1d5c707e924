//! LoRA adapters in PEFT's folder for GPT-2 (`export_peft` / `import_peft`): an export
//! imports back to the same tensors, bit for bit; its tensors, read with PEFT's
//! arithmetic (`W += s·(B·A)ᵀ` on GPT-2's `[in, out]` Conv1D weights), change the base as
//! ours do; and an adapter made with `peft` on the hf_gpt2 fixture base
//! (`fixtures/peft_gpt2/make_fixture.py`, outside CI) gives, imported here on our import
//! of that base, the logits `peft` gave within the kit's accumulated tolerance.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};
use tinygpt_autograd::Tape;
use tinygpt_ckpt::{
    base_weights_sha256, export_peft, import_hf_gpt2, import_peft, AdapterCheckpoint, BaseRef, CkptError,
    HfTokenizer, ImportDefaults, PEFT_CONFIG, PEFT_WEIGHTS, TINYGPT_METADATA,
};
use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_model::lora::merge;
use tinygpt_model::{Gpt, Lora, LoraConfig, ModelConfig, Params, Preset, Tokenizer};
use tinygpt_run::{TrainerProgress, TrainingConfig};
use tinygpt_tensor::{Indices, Rng};

const HF_CONFIG: &[u8] = include_bytes!("fixtures/hf_gpt2/config.json");
const HF_MODEL: &[u8] = include_bytes!("fixtures/hf_gpt2/model.safetensors");
const VOCAB: &[u8] = include_bytes!("fixtures/hf_gpt2/vocab.json");
const MERGES: &[u8] = include_bytes!("fixtures/hf_gpt2/merges.txt");
const PEFT_CONFIG_JSON: &[u8] = include_bytes!("fixtures/peft_gpt2/adapter_config.json");
const PEFT_MODEL: &[u8] = include_bytes!("fixtures/peft_gpt2/adapter_model.safetensors");
const PEFT_LOGITS: &[u8] = include_bytes!("fixtures/peft_gpt2/logits.safetensors");

fn hf_base() -> tinygpt_ckpt::Checkpoint {
    let tok = Tokenizer::bpe(VOCAB, MERGES).unwrap();
    let hf = HfTokenizer { name: tok.name().to_string(), vocab_size: tok.vocab_size() };
    let defaults = ImportDefaults { training: TrainingConfig::default(), dataset: common::manifest() };
    import_hf_gpt2(HF_CONFIG, HF_MODEL, &hf, defaults).unwrap()
}

/// An adapter of `lora` on `model` with every value random (B too, so nothing is zero).
fn adapter(model: &ModelConfig, lora: LoraConfig, seed: u64) -> AdapterCheckpoint {
    let mut rng = Rng::new(seed);
    let weights = (0..lora.param_count(model)).map(|_| rng.normal() as f32).collect();
    AdapterCheckpoint {
        base: BaseRef { name: "gpt2-fixture".into(), weights_sha256: base_weights_sha256(&[3.0]) },
        model_config: model.clone(),
        lora,
        context_length: None,
        training_config: TrainingConfig::default(),
        dataset: common::manifest(),
        progress: TrainerProgress {
            step: 0,
            tokens_seen: 0,
            best_val_loss: None,
            wall_time_sec: 0.0,
            rng_state: 0,
            loss_scale: None,
        },
        loss_history: Vec::new(),
        weights,
        adam_m: Vec::new(),
        adam_v: Vec::new(),
    }
}

fn shapes() -> Vec<LoraConfig> {
    vec![
        LoraConfig::preset("qv-r4").unwrap(),
        LoraConfig::preset("qvo-r8").unwrap(),
        LoraConfig::new(3, 5.5, &["k_proj"]).unwrap(),
        LoraConfig::new(2, 2.0, &["o_proj", "fc_in", "fc_out"]).unwrap(),
        LoraConfig::new(4, 1.0, &["q_proj", "k_proj", "v_proj", "o_proj", "fc_in", "fc_out"]).unwrap(),
    ]
}

fn floats(view: &TensorView<'_>) -> Vec<f32> {
    view.data().chunks_exact(4).map(|x| f32::from_le_bytes(x.try_into().unwrap())).collect()
}

#[test]
fn an_export_imports_back_to_the_same_tensors_bit_for_bit() {
    let model = Preset::by_name("tiny").unwrap().model;
    for (i, lora) in shapes().into_iter().enumerate() {
        let ckpt = adapter(&model, lora.clone(), i as u64);
        let files = export_peft(&ckpt, "gpt2").unwrap();
        assert_eq!(export_peft(&ckpt, "gpt2").unwrap(), files, "the same adapter exports to the same bytes");
        let back = import_peft(&files.config_json, &files.safetensors, &model).unwrap();
        assert_eq!(back.lora, lora);
        assert_eq!(back.base.as_ref(), Some(&ckpt.base));
        let same = back.weights.iter().zip(&ckpt.weights).all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same && back.weights.len() == ckpt.weights.len(), "{:?}: the tensors changed", lora);
        assert!(back.note.contains("exactly"), "{}", back.note);
    }
}

#[test]
fn the_export_is_in_peft_names_and_config_for_gpt2() {
    let model = Preset::by_name("tiny").unwrap().model;
    let d = model.d_model;
    // q and v at rank 4 share c_attn at rank 8 (alpha 16: the same scale 2); o_proj keeps 4.
    let ckpt = adapter(&model, LoraConfig::preset("qvo-r8").unwrap(), 9);
    let files = export_peft(&ckpt, "openai-community/gpt2").unwrap();
    let config: serde_json::Value = serde_json::from_slice(&files.config_json).unwrap();
    for (key, want) in [
        ("peft_type", serde_json::json!("LORA")),
        ("task_type", serde_json::json!("CAUSAL_LM")),
        ("base_model_name_or_path", serde_json::json!("openai-community/gpt2")),
        ("r", serde_json::json!(8)),
        ("lora_alpha", serde_json::json!(16)),
        ("target_modules", serde_json::json!(["attn.c_attn", "attn.c_proj"])),
        ("rank_pattern", serde_json::json!({"attn.c_attn": 16})),
        ("alpha_pattern", serde_json::json!({"attn.c_attn": 32})),
        ("fan_in_fan_out", serde_json::json!(true)),
        ("bias", serde_json::json!("none")),
        ("lora_dropout", serde_json::json!(0.0)),
    ] {
        assert_eq!(config[key], want, "{key}");
    }
    let st = SafeTensors::deserialize(&files.safetensors).unwrap();
    let mut names = st.names();
    names.sort();
    assert_eq!(names.len(), model.n_layers * 4);
    assert_eq!(names[0], "base_model.model.transformer.h.0.attn.c_attn.lora_A.weight");
    let b = st.tensor("base_model.model.transformer.h.1.attn.c_attn.lora_B.weight").unwrap();
    assert_eq!((b.dtype(), b.shape()), (Dtype::F32, &[3 * d, 16][..]));
    let (_, meta) = SafeTensors::read_metadata(&files.safetensors).unwrap();
    let meta = meta.metadata().clone().unwrap();
    assert_eq!(meta["format"], "pt");
    assert!(meta[TINYGPT_METADATA].contains("\"weights_sha256\""));
}

/// PEFT's arithmetic on the exported tensors: each GPT-2 Conv1D weight `[in, out]` moves by
/// `s·(B·A)ᵀ`; for c_attn its columns `[q | k | v]` are ours transposed. Ours moved by
/// `tinygpt_model::lora::merge`. The two agree for every shape.
#[test]
fn peft_arithmetic_on_the_export_moves_the_weights_as_ours() {
    let model = Preset::by_name("tiny").unwrap().model;
    let (d, f) = (model.d_model, model.d_mlp);
    let base = vec![0f32; model.param_count()];
    let specs = model.tensor_specs();
    for (i, lora) in shapes().into_iter().enumerate() {
        let ckpt = adapter(&model, lora.clone(), 20 + i as u64);
        let merged = merge(&model, &lora, &base, &ckpt.weights).unwrap();
        let ours = |name: &str| {
            let s = specs.iter().find(|s| s.name == name).unwrap();
            &merged[s.offset..][..s.numel()]
        };
        let files = export_peft(&ckpt, "gpt2").unwrap();
        let config: serde_json::Value = serde_json::from_slice(&files.config_json).unwrap();
        let st = SafeTensors::deserialize(&files.safetensors).unwrap();
        for layer in 0..model.n_layers {
            for (module, parts, inp, out) in [
                ("attn.c_attn", vec!["attn.q_proj", "attn.k_proj", "attn.v_proj"], d, 3 * d),
                ("attn.c_proj", vec!["attn.o_proj"], d, d),
                ("mlp.c_fc", vec!["mlp.fc_in"], d, f),
                ("mlp.c_proj", vec!["mlp.fc_out"], f, d),
            ] {
                let name = |ab| format!("base_model.model.transformer.h.{layer}.{module}.lora_{ab}.weight");
                // PEFT's delta, [in, out] (zero where the module is not adapted).
                let mut delta = vec![0f64; inp * out];
                if let (Ok(a), Ok(b)) = (st.tensor(&name("A")), st.tensor(&name("B"))) {
                    let (a, b, r) = (floats(&a), floats(&b), a.shape()[0]);
                    let r_of =
                        config["rank_pattern"].get(module).map_or(config["r"].as_u64(), |v| v.as_u64());
                    let alpha = config["alpha_pattern"].get(module).unwrap_or(&config["lora_alpha"]);
                    assert_eq!(r_of, Some(r as u64), "{module}: the rank PEFT reads is the tensors'");
                    let s = alpha.as_f64().unwrap() / r as f64;
                    for i in 0..inp {
                        for o in 0..out {
                            let dot: f64 = (0..r).map(|k| b[o * r + k] as f64 * a[k * inp + i] as f64).sum();
                            delta[i * out + o] = s * dot;
                        }
                    }
                }
                let width = out / parts.len();
                for (p, part) in parts.iter().enumerate() {
                    let w = ours(&format!("blocks.{layer}.{part}.weight")); // [width, inp], base zero
                    for o in 0..width {
                        for i in 0..inp {
                            let (want, got) = (delta[i * out + p * width + o], w[o * inp + i] as f64);
                            assert!(
                                (want - got).abs() <= 1e-5 * (1.0 + want.abs()),
                                "{lora:?} layer {layer} {part}[{o}][{i}]: PEFT {want}, ours {got}"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// The fixture's adapter imported on our import of its base: peft's logits, within the kit's
/// accumulated tolerance, and far from the base's (the adapter matters).
#[test]
fn an_adapter_made_with_peft_gives_peft_logits() {
    let base = hf_base();
    let model = &base.model_config;
    let imported = import_peft(PEFT_CONFIG_JSON, PEFT_MODEL, model).unwrap();
    eprintln!("{}", imported.note);
    assert_eq!(imported.base, None, "peft records no TinyGPT base");
    // r 4 everywhere but c_fc (rank 2, alpha 6: scale 3): one rank 4, one scale 3, so
    // alpha 12; c_attn becomes q, k and v.
    assert_eq!(
        imported.lora,
        LoraConfig::new(4, 12.0, &["q_proj", "k_proj", "v_proj", "o_proj", "fc_in", "fc_out"]).unwrap()
    );
    for says in ["c_attn as q_proj", "padded with zeros to 4", "B scaled"] {
        assert!(imported.note.contains(says), "{}", imported.note);
    }

    let b = CpuBackend::new(1);
    let gpt = Gpt::new(model.clone(), Params::from_flat(&b, model, &base.weights).unwrap()).unwrap();
    let lora = Lora::from_flat(&b, model, imported.lora.clone(), &imported.weights).unwrap();
    let reference = SafeTensors::deserialize(PEFT_LOGITS).unwrap();
    let (mut worst, mut moved) = (0f64, 0f64);
    for i in 0..2 {
        let ids: Vec<u32> = reference
            .tensor(&format!("ids.{i}"))
            .unwrap()
            .data()
            .chunks_exact(8)
            .map(|x| i64::from_le_bytes(x.try_into().unwrap()) as u32)
            .collect();
        let want = floats(&reference.tensor(&format!("logits.{i}")).unwrap());
        let tokens = Indices::new(&b, &ids);
        let tape = Tape::no_grad();
        let got = lora.forward(&gpt, &tape, &tokens, 1, ids.len(), None).logits.value().to_vec().unwrap();
        let plain = gpt.forward(&tape, &tokens, 1, ids.len()).logits.value().to_vec().unwrap();
        assert_eq!(got.len(), want.len());
        for (k, (&g, &w)) in got.iter().zip(&want).enumerate() {
            let err = (g as f64 - w as f64).abs();
            // The kit's ACCUMULATED tolerance, as the GPT-2 import's test.
            assert!(err <= 1e-4 + 1e-4 * (w as f64).abs(), "sequence {i} logit {k}: ours {g}, peft {w}");
            worst = worst.max(err);
            moved = moved.max((plain[k] as f64 - w as f64).abs());
        }
    }
    eprintln!("largest |ours - peft| over the logits: {worst:e}; |base - peft| up to {moved:.3}");
    assert!(moved > 0.1, "the adapter moves the logits ({moved}), so the comparison means something");
}

/// peft → ours → PEFT → ours: the second import is exactly the first.
#[test]
fn a_peft_adapter_exported_again_imports_to_the_same_adapter() {
    let base = hf_base();
    let model = &base.model_config;
    let first = import_peft(PEFT_CONFIG_JSON, PEFT_MODEL, model).unwrap();
    let ckpt = AdapterCheckpoint {
        lora: first.lora.clone(),
        weights: first.weights.clone(),
        ..adapter(model, first.lora.clone(), 0)
    };
    let files = export_peft(&ckpt, "ckpt/tests/fixtures/hf_gpt2").unwrap();
    let second = import_peft(&files.config_json, &files.safetensors, model).unwrap();
    assert_eq!((second.lora, second.weights), (first.lora, first.weights));
}

fn refusal(config: &[u8], weights: &[u8], model: &ModelConfig) -> String {
    let err = import_peft(config, weights, model).unwrap_err();
    assert!(matches!(err, CkptError::Peft { .. } | CkptError::InvalidJson { .. }), "{err}");
    err.to_string()
}

/// The fixture's tensors with `edit` applied (names, shapes, values), and its metadata.
fn edited(edit: impl Fn(&mut Vec<(String, Vec<usize>, Vec<f32>)>)) -> Vec<u8> {
    let st = SafeTensors::deserialize(PEFT_MODEL).unwrap();
    let mut tensors: Vec<(String, Vec<usize>, Vec<f32>)> =
        st.tensors().into_iter().map(|(n, v)| (n, v.shape().to_vec(), floats(&v))).collect();
    edit(&mut tensors);
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .into_iter()
        .map(|(n, s, v)| (n, s, v.iter().flat_map(|x| x.to_le_bytes()).collect()))
        .collect();
    let views: Vec<(String, TensorView<'_>)> = bytes
        .iter()
        .map(|(n, s, d)| (n.clone(), TensorView::new(Dtype::F32, s.clone(), d).unwrap()))
        .collect();
    safetensors::serialize(views, None).unwrap()
}

#[test]
fn what_has_no_tinygpt_equivalent_is_refused_by_name() {
    let model = hf_base().model_config;
    let config_with = |key: &str, value: serde_json::Value| {
        let mut c: serde_json::Value = serde_json::from_slice(PEFT_CONFIG_JSON).unwrap();
        c[key] = value;
        serde_json::to_vec(&c).unwrap()
    };
    let err = refusal(&config_with("use_dora", serde_json::json!(true)), PEFT_MODEL, &model);
    assert!(err.contains(PEFT_CONFIG) && err.contains("DoRA"), "{err}");
    // An embedding LoRA (target_modules ["wte"]) has no equivalent: named.
    let wte = edited(|t| {
        t.push(("base_model.model.transformer.wte.lora_embedding_A".into(), vec![4, 1000], vec![0.0; 4000]))
    });
    let err = refusal(PEFT_CONFIG_JSON, &wte, &model);
    assert!(err.contains(PEFT_WEIGHTS) && err.contains("transformer.wte.lora_embedding_A"), "{err}");
    // A layer the base does not have.
    let deep = edited(|t| {
        t.iter_mut().for_each(|(n, _, _)| *n = n.replace(".h.1.", ".h.7."));
    });
    assert!(refusal(PEFT_CONFIG_JSON, &deep, &model).contains("h.7.attn.c_attn"));
    // A rank other than the config gives: PEFT's scale would be another.
    let err = refusal(&config_with("r", serde_json::json!(8)), PEFT_MODEL, &model);
    assert!(err.contains("rank 8") && err.contains("c_attn"), "{err}");
    // An A without its B.
    let lone =
        edited(|t| t.retain(|(n, _, _)| n != "base_model.model.transformer.h.0.mlp.c_fc.lora_B.weight"));
    assert!(refusal(PEFT_CONFIG_JSON, &lone, &model).contains("has no"));
    let nan = edited(|t| t[3].2[5] = f32::NAN);
    assert!(refusal(PEFT_CONFIG_JSON, &nan, &model).contains("NaN"));
}

/// Tensors saved in BF16 (a model trained in half precision) are widened exactly.
#[test]
fn half_precision_tensors_are_widened_exactly() {
    let model = hf_base().model_config;
    let st = SafeTensors::deserialize(PEFT_MODEL).unwrap();
    let tensors: Vec<(String, Vec<usize>, Vec<u8>)> = st
        .tensors()
        .into_iter()
        .map(|(n, v)| {
            (
                n,
                v.shape().to_vec(),
                floats(&v).iter().flat_map(|x| ((x.to_bits() >> 16) as u16).to_le_bytes()).collect(),
            )
        })
        .collect();
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|(n, s, d)| (n.clone(), TensorView::new(Dtype::BF16, s.clone(), d).unwrap()))
        .collect();
    let bf16 = safetensors::serialize(views, None).unwrap();
    let full = import_peft(PEFT_CONFIG_JSON, PEFT_MODEL, &model).unwrap();
    let half = import_peft(PEFT_CONFIG_JSON, &bf16, &model).unwrap();
    assert_eq!(half.lora, full.lora);
    for (h, f) in half.weights.iter().zip(&full.weights) {
        // Truncated to BF16 (8 bits of mantissa), then rescaled like the full one.
        assert!((h - f).abs() <= f.abs() / 128.0 + 1e-30, "{h} against {f}");
    }
}

/// A module adapted in some layers only (`layers_to_transform`) is zeros in the others.
#[test]
fn a_layer_without_a_module_is_zeros_there() {
    let model = hf_base().model_config;
    let one_layer = edited(|t| t.retain(|(n, _, _)| !n.contains(".h.1.mlp.c_fc.")));
    let imported = import_peft(PEFT_CONFIG_JSON, &one_layer, &model).unwrap();
    assert!(imported.note.contains("zeros where a layer had no adapter"), "{}", imported.note);
    let specs = imported.lora.tensor_specs(&model);
    for s in specs.iter().filter(|s| s.name.starts_with("blocks.1.mlp.fc_in.")) {
        assert!(imported.weights[s.offset..][..s.numel()].iter().all(|&v| v == 0.0), "{}", s.name);
    }
}
