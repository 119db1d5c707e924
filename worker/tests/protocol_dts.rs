//! Keeps `www/protocol.d.ts` in step with `worker/src/protocol.rs`, both ways:
//! - every Rust message (one sample per variant, every optional field filled) serializes to
//!   JSON that the d.ts type accepts: the `type` tag, every field name, every field's type,
//!   nested objects and enum values;
//! - every message in the d.ts unions has a Rust variant, every d.ts field is produced by
//!   some sample, and each string-literal union equals the Rust enum's serialized values.
//!
//! The `match`es below list every variant, so adding one to the protocol does not compile
//! until it has a sample here (and so a check against the d.ts).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{json, Value};
use tinygpt_model::{Dataset, ModelConfig};
use tinygpt_optim::TrainingConfig;
use tinygpt_worker::protocol::*;

// ---- a small reader for the subset of TypeScript the d.ts uses ---------------------------

#[derive(Debug, Default)]
struct Dts {
    /// interface → [(field, optional, type)], inherited fields included.
    interfaces: BTreeMap<String, Vec<(String, bool, String)>>,
    /// type alias → its union members.
    aliases: BTreeMap<String, Vec<String>>,
    /// interface → the interface it extends.
    parents: BTreeMap<String, String>,
}

fn strip_comments(src: &str) -> String {
    let mut out = String::new();
    let mut rest = src;
    while let Some(start) = rest.find("/*") {
        out.push_str(&rest[..start]);
        rest = &rest[start + rest[start..].find("*/").expect("unclosed comment") + 2..];
    }
    out.push_str(rest);
    out.lines().map(|l| l.split("//").next().unwrap()).collect::<Vec<_>>().join("\n")
}

fn parse_dts(src: &str) -> Dts {
    let src = strip_comments(src);
    let mut dts = Dts::default();
    let mut extends = Vec::new();
    let mut rest = src.as_str();
    while let Some(at) = rest.find("export ") {
        rest = &rest[at + "export ".len()..];
        if let Some(body) = rest.strip_prefix("interface ") {
            let open = body.find('{').unwrap();
            let close = body.find('}').unwrap();
            let mut head = body[..open].split_whitespace();
            let name = head.next().unwrap().to_string();
            if head.next() == Some("extends") {
                extends.push((name.clone(), head.next().unwrap().to_string()));
            }
            let fields = body[open + 1..close]
                .split(';')
                .map(str::trim)
                .filter(|f| !f.is_empty())
                .map(|f| {
                    let (key, ty) = f.split_once(':').unwrap_or_else(|| panic!("bad field {f:?} in {name}"));
                    let optional = key.trim().ends_with('?');
                    (key.trim().trim_end_matches('?').to_string(), optional, ty.trim().to_string())
                })
                .collect();
            dts.interfaces.insert(name, fields);
            rest = &body[close..];
        } else if let Some(body) = rest.strip_prefix("type ") {
            let (name, def) = body.split_once('=').unwrap();
            let end = def.find(';').unwrap();
            let members =
                def[..end].split('|').map(str::trim).filter(|m| !m.is_empty()).map(String::from).collect();
            dts.aliases.insert(name.trim().to_string(), members);
            rest = &def[end..];
        }
    }
    for (child, parent) in extends {
        dts.parents.insert(child.clone(), parent.clone());
        let inherited = dts.interfaces[&parent].clone();
        dts.interfaces.get_mut(&child).unwrap().extend(inherited);
    }
    dts
}

/// Checks `value` against the d.ts type `ty`; records which interface fields were seen.
struct Checker<'a> {
    dts: &'a Dts,
    seen: BTreeMap<String, BTreeSet<String>>,
}

impl Checker<'_> {
    fn check(&mut self, value: &Value, ty: &str, path: &str) -> Result<(), String> {
        let ty = ty.trim();
        let fail = |what: &str| Err(format!("{path}: {value} is not {what}"));
        match ty {
            "number" => return if value.is_number() { Ok(()) } else { fail("a number") },
            "string" => return if value.is_string() { Ok(()) } else { fail("a string") },
            "boolean" => return if value.is_boolean() { Ok(()) } else { fail("a boolean") },
            // serde_bytes natively: an array of byte values (a Uint8Array in the browser).
            "Uint8Array" => {
                let bytes =
                    value.as_array().is_some_and(|a| a.iter().all(|b| b.as_u64().is_some_and(|b| b < 256)));
                return if bytes { Ok(()) } else { fail("a Uint8Array") };
            }
            _ => {}
        }
        if let Some(literal) = ty.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')) {
            return if value.as_str() == Some(literal) { Ok(()) } else { fail(ty) };
        }
        if let Some(inner) = ty.strip_suffix("[]") {
            let items = value.as_array().ok_or_else(|| format!("{path}: {value} is not an array"))?;
            return items
                .iter()
                .enumerate()
                .try_for_each(|(i, v)| self.check(v, inner, &format!("{path}[{i}]")));
        }
        if let Some(inner) = ty.strip_prefix("Partial<").and_then(|t| t.strip_suffix('>')) {
            return self.check_object(value, inner, path, true);
        }
        if let Some(members) = self.dts.aliases.get(ty) {
            // A tagged union: the member whose `type` literal is the value's tag.
            if let Some(tag) = value.get("type").and_then(Value::as_str) {
                let member = members.iter().find(|m| {
                    self.dts
                        .interfaces
                        .get(*m)
                        .is_some_and(|f| f.iter().any(|(k, _, t)| k == "type" && t.trim_matches('\'') == tag))
                });
                return match member {
                    Some(m) => self.check(value, &m.clone(), path),
                    None => Err(format!("{path}: no member of {ty} has type '{tag}'")),
                };
            }
            let members = members.clone();
            return if members.iter().any(|m| self.check(value, m, path).is_ok()) {
                Ok(())
            } else {
                fail(ty)
            };
        }
        if self.dts.interfaces.contains_key(ty) {
            return self.check_object(value, ty, path, false);
        }
        Err(format!("{path}: the d.ts has no type {ty}"))
    }

    fn check_object(
        &mut self,
        value: &Value,
        interface: &str,
        path: &str,
        partial: bool,
    ) -> Result<(), String> {
        let object =
            value.as_object().ok_or_else(|| format!("{path}: {value} is not an object ({interface})"))?;
        let fields = self.dts.interfaces[interface].clone();
        for key in object.keys() {
            if !fields.iter().any(|(k, _, _)| k == key) {
                return Err(format!(
                    "{path}: field {key:?} is missing from interface {interface} in protocol.d.ts"
                ));
            }
        }
        for (key, optional, ty) in &fields {
            match object.get(key) {
                Some(v) => {
                    self.seen.entry(interface.to_string()).or_default().insert(key.clone());
                    self.check(v, ty, &format!("{path}.{key}"))?;
                }
                None if *optional || partial => {}
                None => {
                    return Err(format!(
                        "{path}: required field {key:?} of {interface} is absent in the Rust JSON"
                    ))
                }
            }
        }
        Ok(())
    }
}

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
        },
        InMessage::TrainAdapter {
            name: "code".into(),
            preset: Some("qv-r4".into()),
            rank: Some(4),
            alpha: Some(8.0),
            targets: Some(vec!["q_proj".into(), "v_proj".into()]),
            training_config: Some(serde_json::to_value(TrainingConfig::default()).unwrap()),
            dataset: dataset_input(),
        },
        InMessage::ListAdapters,
        InMessage::LoadAdapter { name: "code".into(), dataset: Some(dataset_input()) },
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
            | InMessage::LoadAdapter { .. } => {}
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
        OutMessage::AdapterSaved { name: "code".into(), id: "gen-000001".into(), step: 2, bytes: 32768 },
        OutMessage::Adapters {
            items: vec![AdapterInfo {
                name: "code".into(),
                rank: 4,
                alpha: 8.0,
                target_modules: vec!["q_proj".into()],
                base_name: "builtin".into(),
                fits_base: true,
            }],
            storage: StoreKind::Opfs,
        },
        OutMessage::AdapterLoaded { name: "code".into(), step: 2, resumable: false },
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
            | OutMessage::AdapterSaved { .. }
            | OutMessage::Adapters { .. }
            | OutMessage::AdapterLoaded { .. }
            | OutMessage::Error { .. } => {}
        }
    }
    samples
}

/// Every value of each plain enum, by d.ts alias name; the matches make the lists complete.
fn enum_values() -> Vec<(&'static str, Vec<Value>)> {
    fn values<T: Serialize>(all: &[T]) -> Vec<Value> {
        all.iter().map(|v| serde_json::to_value(v).unwrap()).collect()
    }
    use ErrorCode as E;
    let codes = [
        E::BadMessage,
        E::EmptyDataset,
        E::DatasetTooShort,
        E::InvalidConfig,
        E::UnknownPreset,
        E::NoRun,
        E::RunFinished,
        E::RunLocked,
        E::StorageUnavailable,
        E::QuotaExceeded,
        E::CheckpointNotFound,
        E::BadCheckpoint,
        E::DatasetMismatch,
        E::DeleteRefused,
        E::Diverged,
        E::DeviceLost,
        E::NoBase,
        E::BaseMismatch,
        E::AdapterNotFound,
        E::Internal,
    ];
    for c in codes {
        match c {
            E::BadMessage
            | E::EmptyDataset
            | E::DatasetTooShort
            | E::InvalidConfig
            | E::UnknownPreset
            | E::NoRun
            | E::RunFinished
            | E::RunLocked
            | E::StorageUnavailable
            | E::QuotaExceeded
            | E::CheckpointNotFound
            | E::BadCheckpoint
            | E::DatasetMismatch
            | E::DeleteRefused
            | E::Diverged
            | E::DeviceLost
            | E::NoBase
            | E::BaseMismatch
            | E::AdapterNotFound
            | E::Internal => {}
        }
    }
    let backends = [
        EngineKind::Wasm,
        EngineKind::WasmSimd,
        EngineKind::WasmRelaxedSimd,
        EngineKind::WasmSimdThreads,
        EngineKind::WasmRelaxedSimdThreads,
        EngineKind::Webgpu,
    ];
    let storages = [StoreKind::Opfs, StoreKind::Indexeddb, StoreKind::Memory, StoreKind::None];
    let states = [RunState::Training, RunState::Paused, RunState::Finished, RunState::Stopped];
    let reasons = [DoneReason::Finished, DoneReason::Stopped, DoneReason::EarlyStopped];
    let choices = [
        BackendChoice::Auto,
        BackendChoice::Webgpu,
        BackendChoice::Wasm,
        BackendChoice::WasmSimd,
        BackendChoice::WasmRelaxedSimd,
        BackendChoice::WasmSimdThreads,
        BackendChoice::WasmRelaxedSimdThreads,
    ];
    let storage_choices = [StoreChoice::Auto, StoreChoice::Opfs, StoreChoice::Idb, StoreChoice::Memory];
    let sources = [BaseSource::Builtin, BaseSource::Checkpoint, BaseSource::Upload];
    for s in sources {
        match s {
            BaseSource::Builtin | BaseSource::Checkpoint | BaseSource::Upload => {}
        }
    }
    let schedules = [tinygpt_optim::ScheduleKind::Constant, tinygpt_optim::ScheduleKind::Cosine];
    for b in backends {
        match b {
            EngineKind::Wasm
            | EngineKind::WasmSimd
            | EngineKind::WasmRelaxedSimd
            | EngineKind::WasmSimdThreads
            | EngineKind::WasmRelaxedSimdThreads
            | EngineKind::Webgpu => {}
        }
    }
    for s in storages {
        match s {
            StoreKind::Opfs | StoreKind::Indexeddb | StoreKind::Memory | StoreKind::None => {}
        }
    }
    for s in states {
        match s {
            RunState::Training | RunState::Paused | RunState::Finished | RunState::Stopped => {}
        }
    }
    for c in choices {
        match c {
            BackendChoice::Auto
            | BackendChoice::Webgpu
            | BackendChoice::Wasm
            | BackendChoice::WasmSimd
            | BackendChoice::WasmRelaxedSimd
            | BackendChoice::WasmSimdThreads
            | BackendChoice::WasmRelaxedSimdThreads => {}
        }
    }
    for c in storage_choices {
        match c {
            StoreChoice::Auto | StoreChoice::Opfs | StoreChoice::Idb | StoreChoice::Memory => {}
        }
    }
    // d.ts union name → the Rust enum's values (EngineKind, StoreKind and StoreChoice keep
    // their older TypeScript names).
    vec![
        ("ErrorCode", values(&codes)),
        ("BackendKind", values(&backends)),
        ("StorageKind", values(&storages)),
        ("RunState", values(&states)),
        ("DoneReason", values(&reasons)),
        ("BackendChoice", values(&choices)),
        ("StorageChoice", values(&storage_choices)),
        ("ScheduleKind", values(&schedules)),
        ("BaseSource", values(&sources)),
    ]
}

fn dts() -> Dts {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../www/protocol.d.ts");
    parse_dts(&std::fs::read_to_string(path).expect("www/protocol.d.ts"))
}

#[test]
fn every_rust_message_fits_the_declarations_and_every_declaration_is_produced() {
    let dts = dts();
    let mut checker = Checker { dts: &dts, seen: BTreeMap::new() };
    for (union, samples) in [
        ("InMessage", in_samples().iter().map(|m| serde_json::to_value(m).unwrap()).collect::<Vec<_>>()),
        ("OutMessage", out_samples().iter().map(|m| serde_json::to_value(m).unwrap()).collect()),
    ] {
        let rust_tags: BTreeSet<String> =
            samples.iter().map(|s| s["type"].as_str().unwrap().to_string()).collect();
        let dts_tags: BTreeSet<String> = dts.aliases[union]
            .iter()
            .map(|m| {
                let fields = &dts.interfaces[m];
                let (_, _, t) = fields.iter().find(|(k, _, _)| k == "type").expect("a tagged member");
                t.trim_matches('\'').to_string()
            })
            .collect();
        assert_eq!(rust_tags, dts_tags, "{union}: message tags differ between protocol.rs and protocol.d.ts");
        for s in &samples {
            if let Err(e) = checker.check(s, union, s["type"].as_str().unwrap()) {
                panic!("protocol.d.ts does not match the Rust type: {e}");
            }
        }
    }
    // Every declared field of every interface the messages use must have been produced.
    for (interface, fields) in &dts.interfaces {
        // A base interface's fields are produced through the interfaces extending it.
        let seen: BTreeSet<String> = checker
            .seen
            .iter()
            .filter(|(i, _)| *i == interface || dts.parents.get(*i) == Some(interface))
            .flat_map(|(_, keys)| keys.iter().cloned())
            .collect();
        for (key, _, _) in fields {
            assert!(
                seen.contains(key),
                "protocol.d.ts declares {interface}.{key}, but no Rust message produces it"
            );
        }
    }
}

#[test]
fn enum_values_are_the_same_in_both() {
    let dts = dts();
    for (alias, values) in enum_values() {
        let rust: BTreeSet<String> = values.iter().map(|v| format!("'{}'", v.as_str().unwrap())).collect();
        let declared: BTreeSet<String> =
            dts.aliases.get(alias).unwrap_or_else(|| panic!("no type {alias}")).iter().cloned().collect();
        assert_eq!(rust, declared, "the values of {alias}");
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
