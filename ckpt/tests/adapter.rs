//! Adapter checkpoints: round trip, base check, corruption, generations, PEFT safetensors.

use tinygpt_ckpt::{
    base_weights_sha256, export_adapter_safetensors, import_adapter_safetensors, AdapterCheckpoint,
    AdapterStore, BaseRef, BlobStore, MemoryStore, PEFT_PREFIX,
};
use tinygpt_model::{Dataset, LoraConfig, ModelConfig, Preset};
use tinygpt_run::{LossPoint, TrainerProgress, TrainingConfig};
use tinygpt_tensor::{block_on, Rng};

fn adapter(seed: u64, with_moments: bool) -> AdapterCheckpoint {
    let model_config = Preset::by_name("tiny").unwrap().model;
    let lora = LoraConfig::preset("qv-r4").unwrap();
    let n = lora.param_count(&model_config);
    let mut rng = Rng::new(seed);
    let mut values = |k: usize| (0..k).map(|_| rng.normal() as f32).collect::<Vec<_>>();
    let (weights, adam_m, adam_v) =
        if with_moments { (values(n), values(n), values(n)) } else { (values(n), Vec::new(), Vec::new()) };
    let dataset = Dataset::new("code", &[b'x'; 2000], model_config.context_length, 1).unwrap();
    AdapterCheckpoint {
        base: BaseRef { name: "tinygpt-tiny".into(), weights_sha256: base_weights_sha256(&[1.0, 2.0]) },
        model_config,
        lora,
        context_length: None,
        training_config: TrainingConfig::default(),
        dataset: dataset.manifest().clone(),
        progress: TrainerProgress {
            step: 7,
            tokens_seen: 99,
            best_val_loss: Some(1.5),
            wall_time_sec: 2.0,
            rng_state: 5,
            loss_scale: None,
        },
        loss_history: vec![LossPoint { step: 7, train_loss: 1.6, val_loss: Some(1.5) }],
        weights,
        adam_m,
        adam_v,
    }
}

fn model() -> ModelConfig {
    Preset::by_name("tiny").unwrap().model
}

#[test]
fn an_adapter_round_trips_and_keeps_one_previous_generation() {
    let store = AdapterStore::new(MemoryStore::new());
    for seed in 1..=3 {
        let mut ckpt = adapter(seed, seed != 2);
        // Each is better than the last, so best.json keeps no older one.
        ckpt.loss_history[0].val_loss = Some(2.0 - seed as f32 / 10.0);
        let id = block_on(store.save(&ckpt)).unwrap().id;
        assert_eq!(id, format!("gen-00000{seed}"));
        assert_eq!(block_on(store.load_latest(&model())).unwrap(), ckpt);
    }
    let keys: Vec<String> = store.storage().snapshot().into_keys().collect();
    assert!(keys.iter().all(|k| !k.starts_with("gen-000001/")), "the oldest generation is pruned: {keys:?}");
    assert!(
        keys.iter().any(|k| k == "gen-000002/adapter.f32")
            && keys.iter().any(|k| k == "gen-000003/adapter_m.f32")
    );
    assert!(!keys.iter().any(|k| k.contains("weights.f32")), "an adapter never holds base weights");
    let config = block_on(store.config()).unwrap();
    assert_eq!((config.rank, config.alpha, config.target_modules.len()), (4, 8.0, 2));
}

#[test]
fn a_different_base_is_refused_in_one_line_naming_both() {
    let ckpt = adapter(1, true);
    ckpt.check_base("tinygpt-tiny", &[1.0, 2.0]).unwrap();
    let err = ckpt.check_base("other-run", &[1.0, 2.5]).unwrap_err().to_string();
    assert!(!err.contains('\n'), "{err}");
    assert!(err.contains("tinygpt-tiny") && err.contains("other-run"), "{err}");
    assert!(
        err.contains(&ckpt.base.weights_sha256) && err.contains(&base_weights_sha256(&[1.0, 2.5])),
        "{err}"
    );
}

#[test]
fn a_flipped_byte_or_a_wrong_shape_is_refused() {
    let storage = MemoryStore::new();
    let store = AdapterStore::new(&storage);
    block_on(store.save(&adapter(1, true))).unwrap();
    let key = "gen-000001/adapter.f32";
    let mut bytes = storage.snapshot()[key].clone();
    bytes[10] ^= 1;
    storage.set_raw(key, Some(bytes));
    let err = block_on(store.load_latest(&model())).unwrap_err().to_string();
    assert!(err.contains("adapter.f32") && err.contains("sha256"), "{err}");
    // The same adapter on a base of another width does not fit.
    let storage = MemoryStore::new();
    let store = AdapterStore::new(&storage);
    block_on(store.save(&adapter(1, true))).unwrap();
    let wider = Preset::by_name("small").unwrap().model;
    let err = block_on(store.load_latest(&wider)).unwrap_err().to_string();
    assert!(err.contains("adapter_config.json"), "{err}");
    // An empty folder is no adapter.
    let err = block_on(AdapterStore::new(MemoryStore::new()).load_latest(&model())).unwrap_err().to_string();
    assert!(err.contains("latest.json"), "{err}");
    let _ = block_on(storage.list(""));
}

#[test]
fn peft_safetensors_round_trip_with_peft_names_and_layouts() {
    let ckpt = adapter(4, true);
    let bytes = export_adapter_safetensors(&ckpt).unwrap();
    assert_eq!(
        bytes,
        export_adapter_safetensors(&ckpt).unwrap(),
        "the same adapter exports to the same bytes"
    );
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let a = st.tensor(&format!("{PEFT_PREFIX}blocks.1.attn.v_proj.lora_A.weight")).unwrap();
    let b = st.tensor(&format!("{PEFT_PREFIX}blocks.1.attn.v_proj.lora_B.weight")).unwrap();
    assert_eq!((a.shape(), b.shape()), (&[4, 48][..], &[48, 4][..]), "A [r, in], B [out, r]");
    let (config, lora, weights) = import_adapter_safetensors(&bytes, &model()).unwrap();
    assert_eq!(
        (config.base_model, lora, weights),
        (ckpt.base.clone(), ckpt.lora.clone(), ckpt.weights.clone())
    );
    let err = import_adapter_safetensors(&bytes, &Preset::by_name("small").unwrap().model).unwrap_err();
    assert!(err.to_string().contains("shape") || err.to_string().contains("expected"), "{err}");
    let err = import_adapter_safetensors(b"not a file", &model()).unwrap_err().to_string();
    assert!(err.contains("safetensors"), "{err}");
}

/// The window an adapter trains on is kept in adapter_config.json when it is known; a file
/// without it (written before it was recorded) reads as `None`; one longer than the base's
/// context is refused when saved, naming both.
#[test]
fn the_training_window_round_trips_and_is_optional() {
    let store = AdapterStore::new(MemoryStore::new());
    let ckpt = AdapterCheckpoint { context_length: Some(16), ..adapter(1, true) };
    block_on(store.save(&ckpt)).unwrap();
    assert_eq!(block_on(store.load_latest(&model())).unwrap().context_length, Some(16));
    assert_eq!(block_on(store.config()).unwrap().context_length, Some(16));

    let old = AdapterStore::new(MemoryStore::new());
    block_on(old.save(&adapter(2, true))).unwrap();
    let text =
        String::from_utf8(block_on(old.storage().get("gen-000001/adapter_config.json")).unwrap().unwrap())
            .unwrap();
    assert!(!text.contains("context_length"), "written as before: {text}");
    assert_eq!(block_on(old.load_latest(&model())).unwrap().context_length, None);

    let context = model().context_length;
    let long = AdapterCheckpoint { context_length: Some(context + 1), ..adapter(3, true) };
    let err = block_on(AdapterStore::new(MemoryStore::new()).save(&long)).unwrap_err().to_string();
    assert!(err.contains("context_length") && err.contains(&format!("{context}")), "{err}");
}
