//! The protocol's messages on the wire: one sample of every message (every optional field
//! filled) round-trips through JSON, the page's shorthand parses, and every field name the
//! samples carry is declared in `www/protocol.d.ts`. The d.ts itself is generated from the
//! types (`protocol::typescript`'s test keeps it fresh), so its shapes need no check here.
//!
//! The `match`es below list every variant, so adding one to the protocol does not compile
//! until it has a sample here.

use std::collections::BTreeSet;

use serde_json::{json, Value};
use tinygpt_model::{Dataset, ModelConfig};
use tinygpt_optim::TrainingConfig;
use tinygpt_worker::protocol::*;

// ---- one sample of everything ------------------------------------------------------------

fn dataset_input() -> DatasetInput {
    DatasetInput { name: "tiny.txt".into(), bytes: vec![104, 105] }
}

fn in_samples() -> Vec<InMessage> {
    let samples = vec![
        InMessage::Init { backend: BackendChoice::WasmSimd, storage: StoreChoice::Idb, checked: true },
        InMessage::Train {
            model_config: Some(ModelConfig::reference()),
            preset: Some("tiny".into()),
            training_config: Some(serde_json::to_value(TrainingConfig::default()).unwrap()),
            dataset: dataset_input(),
        },
        InMessage::Pause,
        InMessage::Resume,
        InMessage::Stop,
        InMessage::Sample {
            prompt: "ROMEO:".into(),
            max_tokens: 300,
            temperature: 0.8,
            top_k: 40,
            seed: 1,
            top_p: Some(0.9),
            stop: Some(vec!["\n\n".into()]),
            adapter: Some(true),
        },
        InMessage::Save,
        InMessage::ListCheckpoints,
        InMessage::Load { id: "gen-000001".into(), dataset: dataset_input() },
        InMessage::Delete { id: "gen-000001".into() },
        InMessage::Export { id: Some("gen-000001".into()) },
        InMessage::Import { bytes: vec![1, 2, 3] },
        InMessage::LoadBase {
            source: BaseSource::Checkpoint,
            id: Some("gen-000001".into()),
            bytes: Some(vec![1, 2]),
            name: Some("my base".into()),
            url: None,
            files: None,
        },
        InMessage::LoadBase {
            source: BaseSource::Url,
            id: None,
            bytes: None,
            name: None,
            url: Some("https://example.org/gpt2/".into()),
            files: None,
        },
        InMessage::TrainAdapter {
            name: "code".into(),
            preset: Some("qv-r4".into()),
            rank: Some(4),
            alpha: Some(8.0),
            targets: Some(vec!["q_proj".into(), "v_proj".into()]),
            training_config: Some(serde_json::to_value(TrainingConfig::default()).unwrap()),
            context: Some(128),
            dataset: dataset_input(),
        },
        InMessage::ListAdapters,
        InMessage::LoadAdapter { name: "code".into(), dataset: Some(dataset_input()), context: Some(64) },
        InMessage::ListBases,
        InMessage::DeleteBase { url: "https://example.org/gpt2/".into() },
    ];
    for s in &samples {
        match s {
            InMessage::Init { .. }
            | InMessage::Train { .. }
            | InMessage::Pause
            | InMessage::Resume
            | InMessage::Stop
            | InMessage::Sample { .. }
            | InMessage::Save
            | InMessage::ListCheckpoints
            | InMessage::Load { .. }
            | InMessage::Delete { .. }
            | InMessage::Export { .. }
            | InMessage::Import { .. }
            | InMessage::LoadBase { .. }
            | InMessage::TrainAdapter { .. }
            | InMessage::ListAdapters
            | InMessage::LoadAdapter { .. }
            | InMessage::ListBases
            | InMessage::DeleteBase { .. } => {}
        }
    }
    samples
}

fn loss_points() -> Vec<LossPoint> {
    vec![
        LossPoint { step: 1, train_loss: 5.5, val_loss: None },
        LossPoint { step: 2, train_loss: 5.4, val_loss: Some(5.45) },
    ]
}

fn out_samples() -> Vec<OutMessage> {
    let text = b"First Citizen: before we proceed any further, hear me speak. ".repeat(20);
    let manifest = Dataset::new("tiny.txt", &text, 8, 1).unwrap().manifest().clone();
    let samples = vec![
        OutMessage::Ready {
            capabilities: Capabilities {
                backend: EngineKind::WasmSimd,
                checked: true,
                simd: true,
                relaxed_simd: true,
                cross_origin_isolated: true,
                storage: StoreKind::Opfs,
                storage_note: Some("note".into()),
                quota_bytes: Some(1e10),
                usage_bytes: Some(1e6),
                hardware_threads: 2,
                threads: Some(2),
                backend_note: Some("No WebGPU adapter: training on wasm-simd.".into()),
                webgpu: Some(WebgpuInfo {
                    adapter: "google swiftshader".into(),
                    fallback_adapter: true,
                    limits: WebgpuLimits {
                        max_storage_buffer_binding_size: 1073741824.0,
                        max_buffer_size: 1073741824.0,
                        max_compute_workgroup_size_x: 256,
                        max_compute_invocations_per_workgroup: 256,
                        max_compute_workgroup_storage_size: 32768,
                        max_compute_workgroups_per_dimension: 65535,
                        max_storage_buffers_per_shader_stage: 10,
                    },
                    features: vec!["subgroups".into()],
                }),
                mixed_matmul: Some(MatmulInfo {
                    kernels: "f32".into(),
                    reason: "mixed was asked for but SwiftShader has no shader-f16".into(),
                    self_test_worst: Some(0.5),
                }),
            },
            presets: tinygpt_worker::presets::preset_infos(),
            default_training_config: TrainingConfig::default(),
        },
        OutMessage::RunStarted {
            run: RunInfo {
                model_config: ModelConfig::reference(),
                // A mixed run writes its precision (f32 is the default, left out).
                training_config: TrainingConfig {
                    precision: tinygpt_tensor::Precision::Mixed,
                    ..TrainingConfig::default()
                },
                dataset: manifest,
                params: 842_496,
                step: 2,
                max_steps: 10,
                history: loss_points(),
                checkpoint_id: Some("gen-000001".into()),
                adapter: Some(RunAdapter {
                    name: "code".into(),
                    rank: 4,
                    alpha: 8.0,
                    target_modules: vec!["q_proj".into(), "v_proj".into()],
                    params: 8192,
                    base_name: "builtin".into(),
                }),
            },
        },
        OutMessage::Progress(TrainingProgress {
            step: 2,
            max_steps: 10,
            train_loss: 5.4,
            val_loss: Some(5.45),
            tokens_per_second: 1000.0,
            backend: EngineKind::Wasm,
            eta_seconds: 3.0,
            points: loss_points(),
        }),
        OutMessage::Status { state: RunState::Paused, step: 2 },
        OutMessage::SampleChunk { text: "RO".into() },
        OutMessage::SampleDone { text: "ROMEO".into(), tokens_per_second: 50.0, cancelled: false },
        OutMessage::CheckpointSaved { id: "gen-000001".into(), step: 2, bytes: 1234 },
        OutMessage::Checkpoints {
            items: vec![CheckpointInfo {
                id: "gen-000001".into(),
                step: 2,
                max_steps: 10,
                bytes: 1234,
                model_name: "tinygpt-tiny".into(),
                dataset_name: "tiny.txt".into(),
                dataset_id: "ab".into(),
                best_val_loss: Some(5.45),
                best: true,
            }],
            storage: StoreKind::Indexeddb,
        },
        OutMessage::Deleted { id: "gen-000001".into() },
        OutMessage::Exported { file_name: "x.safetensors".into(), bytes: vec![0, 255] },
        OutMessage::Done { reason: DoneReason::Stopped, step: 2 },
        OutMessage::BaseLoaded {
            base: BaseInfo {
                name: "builtin".into(),
                source: BaseSource::Builtin,
                model_config: ModelConfig::reference(),
                params: 838_400,
                weights_sha256: "ab".into(),
            },
        },
        OutMessage::BaseDownload {
            file: "model.safetensors".into(),
            bytes_done: 1024,
            bytes_total: Some(4096),
            cached: false,
        },
        OutMessage::AdapterSaved { name: "code".into(), id: "gen-000001".into(), step: 2, bytes: 32768 },
        OutMessage::Adapters {
            items: vec![AdapterInfo {
                name: "code".into(),
                rank: 4,
                alpha: 8.0,
                target_modules: vec!["q_proj".into()],
                base_name: "builtin".into(),
                fits_base: true,
                context: Some(64),
            }],
            storage: StoreKind::Opfs,
        },
        OutMessage::AdapterLoaded { name: "code".into(), step: 2, resumable: false },
        OutMessage::Bases {
            items: vec![CachedBase {
                url: "https://example.org/gpt2/".into(),
                bytes: 548_000_000,
                fetched_ms: Some(1.7e12),
                complete: true,
            }],
            storage: StoreKind::Opfs,
        },
        OutMessage::BaseDeleted { url: "https://example.org/gpt2/".into() },
        OutMessage::Error { code: ErrorCode::EmptyDataset, message: "empty".into() },
    ];
    for s in &samples {
        match s {
            OutMessage::Ready { .. }
            | OutMessage::RunStarted { .. }
            | OutMessage::Progress(_)
            | OutMessage::Status { .. }
            | OutMessage::SampleChunk { .. }
            | OutMessage::SampleDone { .. }
            | OutMessage::CheckpointSaved { .. }
            | OutMessage::Checkpoints { .. }
            | OutMessage::Deleted { .. }
            | OutMessage::Exported { .. }
            | OutMessage::Done { .. }
            | OutMessage::BaseLoaded { .. }
            | OutMessage::BaseDownload { .. }
            | OutMessage::AdapterSaved { .. }
            | OutMessage::Adapters { .. }
            | OutMessage::AdapterLoaded { .. }
            | OutMessage::Bases { .. }
            | OutMessage::BaseDeleted { .. }
            | OutMessage::Error { .. } => {}
        }
    }
    samples
}

/// Every object key in `value`, at any depth.
fn keys(value: &Value, into: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                into.insert(k.clone());
                keys(v, into);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| keys(v, into)),
        _ => {}
    }
}

#[test]
fn every_field_the_messages_carry_is_declared() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../www/protocol.d.ts");
    let dts = std::fs::read_to_string(path).expect("www/protocol.d.ts");
    let mut seen = BTreeSet::new();
    let messages = in_samples().iter().map(|m| serde_json::to_value(m).unwrap()).collect::<Vec<_>>();
    let replies = out_samples().iter().map(|m| serde_json::to_value(m).unwrap()).collect::<Vec<_>>();
    for m in messages.iter().chain(&replies) {
        let tag = m["type"].as_str().unwrap();
        assert!(
            dts.contains(&format!("\"type\": \"{tag}\"")),
            "message type {tag:?} is not in protocol.d.ts"
        );
        keys(m, &mut seen);
    }
    for key in seen {
        let declared = [":", "?:"].iter().any(|colon| dts.contains(&format!("  {key}{colon} ")));
        assert!(declared || key == "type", "field {key:?} of a message is not declared in protocol.d.ts");
    }
}

#[test]
fn messages_round_trip_and_parse_as_the_page_writes_them() {
    for m in in_samples() {
        let back: InMessage = serde_json::from_value(serde_json::to_value(&m).unwrap()).unwrap();
        assert_eq!(back, m);
    }
    for m in out_samples() {
        let back: OutMessage = serde_json::from_value(serde_json::to_value(&m).unwrap()).unwrap();
        assert_eq!(back, m);
    }
    let train: InMessage = serde_json::from_value(json!({
        "type": "train", "preset": "tiny", "trainingConfig": {"max_steps": 10},
        "dataset": {"name": "a.txt", "bytes": [104, 105]}
    }))
    .unwrap();
    assert!(matches!(train, InMessage::Train { preset: Some(ref p), .. } if p == "tiny"));
    let init: InMessage = serde_json::from_value(json!({"type": "init"})).unwrap();
    assert_eq!(
        init,
        InMessage::Init { backend: BackendChoice::Auto, storage: StoreChoice::Auto, checked: false }
    );
    assert!(serde_json::from_value::<InMessage>(json!({"type": "launch"})).is_err());
}
