//! nanoGPT export/import: the bit-exact round trip, nanoGPT's names and layouts, and one
//! clear refusal for each thing TinyGPT cannot run.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::collections::HashMap;

use common::{assert_same, checkpoint, manifest};
use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};
use tinygpt_ckpt::{export_nanogpt, import_nanogpt, ImportDefaults};
use tinygpt_run::TrainingConfig;

fn defaults() -> ImportDefaults {
    ImportDefaults { training: TrainingConfig::default(), dataset: manifest() }
}

/// The f32 values of `name` in `ckpt`'s weights (canonical names).
fn ours(ckpt: &tinygpt_ckpt::Checkpoint, name: &str) -> Vec<f32> {
    let spec = ckpt.model_config.tensor_specs().into_iter().find(|s| s.name == name).unwrap();
    ckpt.weights[spec.offset..spec.offset + spec.numel()].to_vec()
}

fn values(view: &TensorView<'_>) -> Vec<f32> {
    view.data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
}

/// The tensors and metadata of a file, to rewrite into a variant.
struct Parts {
    tensors: Vec<(String, Dtype, Vec<usize>, Vec<u8>)>,
    metadata: HashMap<String, String>,
}

fn parts(bytes: &[u8]) -> Parts {
    let st = SafeTensors::deserialize(bytes).unwrap();
    let tensors = st
        .tensors()
        .into_iter()
        .map(|(n, v)| (n, v.dtype(), v.shape().to_vec(), v.data().to_vec()))
        .collect();
    let (_, header) = SafeTensors::read_metadata(bytes).unwrap();
    let metadata = header.metadata().as_ref().unwrap().iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    Parts { tensors, metadata }
}

impl Parts {
    fn bytes(&self) -> Vec<u8> {
        let views = self
            .tensors
            .iter()
            .map(|(n, d, s, b)| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap()))
            .collect::<Vec<_>>();
        let metadata = self.metadata.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        safetensors::serialize(views, Some(metadata)).unwrap()
    }

    fn tensor(&mut self, name: &str) -> &mut (String, Dtype, Vec<usize>, Vec<u8>) {
        self.tensors.iter_mut().find(|t| t.0 == name).unwrap()
    }
}

fn refused(bytes: &[u8]) -> String {
    let err = import_nanogpt(bytes, defaults()).unwrap_err().to_string();
    assert!(err.starts_with("not a nanoGPT file TinyGPT can import: "), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    err
}

#[test]
fn ours_to_nanogpt_to_ours_is_bit_exact() {
    let ckpt = checkpoint(25, 1).weights_only();
    let file = export_nanogpt(&ckpt).unwrap();
    let back = import_nanogpt(&file, defaults()).unwrap();
    assert_same(&back, &ckpt);
    assert_eq!(back, ckpt);
    // And again: the same checkpoint gives the same bytes.
    assert_eq!(export_nanogpt(&back).unwrap(), file);
}

#[test]
fn tensors_have_nanogpts_names_and_layouts() {
    let ckpt = checkpoint(25, 1);
    let file = export_nanogpt(&ckpt).unwrap();
    let st = SafeTensors::deserialize(&file).unwrap();
    let (d, f, ctx) = (8, 32, 8);
    let mut expected: Vec<(String, Vec<usize>)> = vec![
        ("transformer.wte.weight".into(), vec![256, d]),
        ("transformer.wpe.weight".into(), vec![ctx, d]),
        ("transformer.ln_f.weight".into(), vec![d]),
        ("transformer.ln_f.bias".into(), vec![d]),
        ("lm_head.weight".into(), vec![256, d]),
    ];
    for i in 0..2 {
        let h = format!("transformer.h.{i}");
        for (name, shape) in [
            ("ln_1.weight", vec![d]),
            ("ln_1.bias", vec![d]),
            ("attn.c_attn.weight", vec![3 * d, d]),
            ("attn.c_attn.bias", vec![3 * d]),
            ("attn.c_proj.weight", vec![d, d]),
            ("attn.c_proj.bias", vec![d]),
            ("ln_2.weight", vec![d]),
            ("ln_2.bias", vec![d]),
            ("mlp.c_fc.weight", vec![f, d]),
            ("mlp.c_fc.bias", vec![f]),
            ("mlp.c_proj.weight", vec![d, f]),
            ("mlp.c_proj.bias", vec![d]),
        ] {
            expected.push((format!("{h}.{name}"), shape));
        }
    }
    assert_eq!(st.len(), expected.len());
    for (name, shape) in &expected {
        let view = st.tensor(name).unwrap();
        assert_eq!((view.dtype(), view.shape()), (Dtype::F32, shape.as_slice()), "{name}");
    }
    // c_attn is [q; k; v] (rows, in that order), each torch Linear [out, in] as ours is.
    let c_attn = values(&st.tensor("transformer.h.1.attn.c_attn.weight").unwrap());
    let qkv: Vec<f32> = ["q_proj", "k_proj", "v_proj"]
        .iter()
        .flat_map(|p| ours(&ckpt, &format!("blocks.1.attn.{p}.weight")))
        .collect();
    assert_eq!(c_attn, qkv);
    let bias = values(&st.tensor("transformer.h.0.attn.c_attn.bias").unwrap());
    assert_eq!(bias[d..2 * d], ours(&ckpt, "blocks.0.attn.k_proj.bias"));
    assert_eq!(
        values(&st.tensor("transformer.h.0.mlp.c_fc.weight").unwrap()),
        ours(&ckpt, "blocks.0.mlp.fc_in.weight")
    );
    // The tied head is a copy of wte.
    assert_eq!(
        st.tensor("lm_head.weight").unwrap().data(),
        st.tensor("transformer.wte.weight").unwrap().data()
    );

    let meta = parts(&file).metadata;
    for (key, value) in [
        ("n_layer", "2"),
        ("n_head", "2"),
        ("n_embd", "8"),
        ("block_size", "8"),
        ("vocab_size", "256"),
        ("bias", "true"),
        ("dropout", "0"),
        ("format", "pt"),
    ] {
        assert_eq!(meta.get(key).map(String::as_str), Some(value), "{key}");
    }
}

#[test]
fn a_file_pytorch_wrote_imports_as_a_new_run() {
    let ckpt = checkpoint(25, 1);
    let mut p = parts(&export_nanogpt(&ckpt).unwrap());
    p.metadata.retain(|k, _| !k.starts_with("tinygpt."));
    // Without lm_head too: savers that drop tied duplicates leave it out.
    p.tensors.retain(|t| t.0 != "lm_head.weight");
    // nanoGPT's causal-mask buffer (no parameter) is skipped.
    p.tensors.push(("transformer.h.0.attn.bias".into(), Dtype::F32, vec![1, 1, 8, 8], vec![0; 256]));
    let back = import_nanogpt(&p.bytes(), defaults()).unwrap();
    assert_eq!(back.weights, ckpt.weights);
    assert_eq!(back.progress.step, 0);
    assert!(back.loss_history.is_empty());
    assert_eq!(back.training_config, TrainingConfig::default());
    assert_eq!(back.dataset, manifest());
    assert_eq!(back.model_config.model_name, "nanogpt-import");
}

#[test]
fn what_tinygpt_cannot_run_is_refused_by_name() {
    let good = export_nanogpt(&checkpoint(25, 1)).unwrap();
    let variant = |edit: &dyn Fn(&mut Parts)| {
        let mut p = parts(&good);
        edit(&mut p);
        p.bytes()
    };

    let err = refused(&variant(&|p| {
        p.metadata.insert("vocab_size".into(), "50304".into());
    }));
    assert!(err.contains("vocab_size is 50304") && err.contains("256"), "{err}");

    let err = refused(&variant(&|p| {
        p.metadata.insert("bias".into(), "False".into());
    }));
    assert!(err.contains("bias is \"False\""), "{err}");

    let err = refused(&variant(&|p| {
        p.metadata.remove("n_head");
    }));
    assert!(err.contains("\"n_head\""), "{err}");

    let err = refused(&variant(&|p| {
        p.tensor("lm_head.weight").3[5] ^= 1;
    }));
    assert!(err.contains("lm_head.weight differs from transformer.wte.weight"), "{err}");

    let err = refused(&variant(&|p| {
        let t = p.tensor("transformer.h.1.mlp.c_fc.weight");
        t.1 = Dtype::F16;
        t.2 = vec![32, 16];
    }));
    assert!(err.contains("transformer.h.1.mlp.c_fc.weight") && err.contains("F16"), "{err}");

    let err = refused(&variant(&|p| {
        let t = p.tensor("transformer.h.0.attn.c_attn.weight");
        t.2 = vec![8, 24];
    }));
    assert!(err.contains("c_attn.weight") && err.contains("[24, 8]"), "{err}");

    let err = refused(&variant(&|p| {
        p.tensors.retain(|t| t.0 != "transformer.ln_f.bias");
    }));
    assert!(err.contains("\"transformer.ln_f.bias\" is missing"), "{err}");

    let err = refused(&variant(&|p| {
        let extra = p.tensor("transformer.ln_f.bias").clone();
        p.tensors.push(("transformer.h.2.ln_1.bias".into(), extra.1, extra.2, extra.3));
    }));
    assert!(err.contains("transformer.h.2.ln_1.bias"), "{err}");

    let nan = variant(&|p| {
        p.tensor("transformer.wpe.weight").3[..4].copy_from_slice(&f32::NAN.to_le_bytes());
    });
    let err = import_nanogpt(&nan, defaults()).unwrap_err().to_string();
    assert!(err.contains("position_embedding[0] is NaN"), "{err}");
}

#[test]
fn a_model_without_nanogpts_mlp_width_is_not_exported() {
    let mut config = common::small_config();
    config.d_mlp = 24;
    let err = export_nanogpt(&common::checkpoint_for(config, 5, 1).weights_only()).unwrap_err().to_string();
    assert!(err.contains("d_mlp is 24") && err.contains("4 × n_embd = 32"), "{err}");
}
