//! The worker under misuse (issue 7): messages it cannot read, samples too long or
//! superseded, a finished run resumed, progress after a validation-only slice, refusals in
//! plain words. Natively, on the session the browser runs.

use std::cell::Cell;

use serde_json::json;
use tinygpt_ckpt::MemoryStore;
use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_model::{training_memory_bytes, ModelConfig, Preset};
use tinygpt_tensor::block_on;
use tinygpt_worker::checkpoints::{snapshot, Checkpoints};
use tinygpt_worker::clock::{Clock, SystemClock};
use tinygpt_worker::incoming::read_json;
use tinygpt_worker::protocol::{DatasetInput, EngineKind, ErrorCode, OutMessage, RunState, StoreKind};
use tinygpt_worker::session::{SampleRequest, TrainRequest, MAX_SAMPLE_TOKENS};
use tinygpt_worker::Session;

fn shakespeare() -> DatasetInput {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/tinyshakespeare.txt");
    DatasetInput { name: "tinyshakespeare.txt".into(), bytes: std::fs::read(path).unwrap() }
}

fn tiny(training: serde_json::Value) -> TrainRequest {
    TrainRequest { preset: Some("tiny".into()), training_config: Some(training), ..Default::default() }
}

fn session() -> Session<CpuBackend> {
    Session::new(CpuBackend::new(1), EngineKind::Wasm)
}

fn sample(max_tokens: usize) -> SampleRequest {
    SampleRequest {
        prompt: "ROMEO:".into(),
        max_tokens,
        temperature: 0.8,
        top_k: 40,
        seed: 7,
        top_p: 1.0,
        stop: vec![],
        adapter: None,
    }
}

/// A clock that moves 10 ms each time it is read, so slices and progress are deterministic.
struct StepClock(Cell<f64>);

impl Clock for StepClock {
    fn now_ms(&self) -> f64 {
        let t = self.0.get();
        self.0.set(t + 10.0);
        t
    }
}

#[test]
fn a_null_message_is_a_bad_message_that_says_what_to_send() {
    for value in [json!(null), json!(42), json!("pause"), json!([1])] {
        let err = read_json(value.clone()).unwrap_err();
        assert_eq!(err.code, ErrorCode::BadMessage, "{value}");
        assert!(
            err.message.contains("instead of a message") && err.message.contains("type"),
            "{}",
            err.message
        );
    }
}

#[test]
fn a_bad_message_says_what_is_wrong_in_protocol_terms_not_serde_text() {
    let cases = [
        (json!({}), vec!["without a \"type\"", "pause", "listCheckpoints"]),
        (json!({"type": "dance"}), vec!["type \"dance\"", "train"]),
        (
            json!({"type": "sample", "prompt": "x"}),
            vec!["\"sample\" message", "\"maxTokens\" field is missing"],
        ),
        (
            json!({"type": "sample", "prompt": "x", "maxTokens": "many", "temperature": 1, "topK": 0, "seed": 1}),
            vec!["\"sample\" message", "the string \"many\"", "whole number"],
        ),
        (json!({"type": "init", "backend": "cuda"}), vec!["\"init\" message", "\"cuda\""]),
    ];
    for (value, wanted) in cases {
        let err = read_json(value.clone()).unwrap_err();
        assert_eq!(err.code, ErrorCode::BadMessage, "{value}");
        for w in wanted {
            assert!(err.message.contains(w), "{value}: {w:?} not in {:?}", err.message);
        }
        for serde_words in ["internally tagged", "InMessage", "variant", "usize", "`"] {
            assert!(!err.message.contains(serde_words), "{value}: {serde_words:?} in {:?}", err.message);
        }
        assert!(err.message.contains("PROTOCOL.md"), "says where the messages are listed: {}", err.message);
    }
    assert!(read_json(json!({"type": "pause"})).is_ok());
}

#[test]
fn a_sample_longer_than_the_documented_cap_is_refused() {
    let mut s = session();
    s.start(tiny(json!({"max_steps": 2})), shakespeare(), 0.0).unwrap();
    s.pause().unwrap();
    let err = s.sample(sample(1_000_000_000), 0.0).unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidConfig);
    assert!(err.message.contains(&MAX_SAMPLE_TOKENS.to_string()), "{}", err.message);
    assert!(!s.is_busy(), "nothing was started");
    assert_eq!(s.sample(sample(0), 0.0).unwrap_err().code, ErrorCode::InvalidConfig);
    s.sample(sample(MAX_SAMPLE_TOKENS), 0.0).unwrap();
    let doc = include_str!("../PROTOCOL.md");
    assert!(doc.contains("`maxTokens` 1 to 10,000"), "PROTOCOL.md documents the cap");
    assert_eq!(MAX_SAMPLE_TOKENS, 10_000);
}

#[test]
fn bad_sampling_options_are_refused_by_name() {
    let mut s = session();
    s.start(tiny(json!({"max_steps": 2})), shakespeare(), 0.0).unwrap();
    s.pause().unwrap();
    for top_p in [0.0, 1.5, f32::NAN] {
        let err = s.sample(SampleRequest { top_p, ..sample(10) }, 0.0).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidConfig);
        assert!(err.message.starts_with("TopP must be"), "{}", err.message);
    }
    let err = s.sample(SampleRequest { stop: vec![vec![]], ..sample(10) }, 0.0).unwrap_err();
    assert!(err.message.contains("stop"), "{}", err.message);
    s.sample(SampleRequest { top_p: 0.9, stop: vec![b"\n".to_vec()], ..sample(10) }, 0.0).unwrap();
}

#[test]
fn a_new_sample_cancels_the_previous_one_which_gets_sample_done_cancelled() {
    let mut s = session();
    let clock = SystemClock::default();
    s.start(tiny(json!({"max_steps": 2})), shakespeare(), 0.0).unwrap();
    s.pause().unwrap();
    assert!(s.sample(sample(500), 0.0).unwrap().is_empty(), "nothing to cancel yet");
    // A few tokens (an untrained model may begin inside a multi-byte character).
    let mut streamed = String::new();
    for _ in 0..20 {
        for m in s.tick(0.0, &clock).unwrap().messages {
            let OutMessage::SampleChunk { text } = m else { panic!("{m:?}") };
            streamed.push_str(&text);
        }
    }
    let cancelled = s.sample(sample(5), clock.now_ms()).unwrap();
    match &cancelled[..] {
        [OutMessage::SampleDone { text, cancelled: true, .. }] => assert_eq!(text, &streamed),
        other => panic!("expected the first sample's sampleDone {{cancelled: true}}, got {other:?}"),
    }
    let mut rest = Vec::new();
    while s.is_busy() {
        rest.extend(s.tick(50.0, &clock).unwrap().messages);
    }
    let dones: Vec<_> = rest.iter().filter(|m| matches!(m, OutMessage::SampleDone { .. })).collect();
    assert!(matches!(dones[..], [OutMessage::SampleDone { cancelled: false, .. }]), "{dones:?}");

    // A new run cancels a sample too, before it says it started.
    s.sample(sample(500), 0.0).unwrap();
    let started = s.start(tiny(json!({"max_steps": 2})), shakespeare(), 0.0).unwrap();
    assert!(matches!(started[0], OutMessage::SampleDone { cancelled: true, .. }), "{:?}", started[0]);
    assert!(matches!(started[1], OutMessage::RunStarted { .. }));
}

#[test]
fn progress_keeps_the_training_throughput_after_a_slice_that_only_ran_validation() {
    let mut s = session();
    // Long validations (40 batches, a tick each) send progress from slices without training.
    let config = json!({"max_steps": 6, "eval_interval": 2, "eval_batches": 40});
    s.start(tiny(config), shakespeare(), 0.0).unwrap();
    let clock = StepClock(Cell::new(0.0));
    let mut progress = Vec::new();
    while s.is_busy() {
        let outcome = s.tick(0.0, &clock).unwrap();
        progress.extend(outcome.messages.into_iter().filter_map(|m| match m {
            OutMessage::Progress(p) => Some(p),
            _ => None,
        }));
    }
    assert!(progress.len() > 6, "validation slices sent progress: {}", progress.len());
    for p in &progress {
        assert!(p.tokens_per_second > 0.0, "step {}: tokensPerSecond {}", p.step, p.tokens_per_second);
    }
}

#[test]
fn resuming_a_finished_run_answers_run_finished_as_documented() {
    let mut s = session();
    s.start(tiny(json!({"max_steps": 2, "eval_interval": 2, "eval_batches": 1})), shakespeare(), 0.0)
        .unwrap();
    let clock = SystemClock::default();
    while s.is_busy() {
        s.tick(50.0, &clock).unwrap();
    }
    assert_eq!(s.run().unwrap().state, RunState::Finished);
    let err = s.resume(0.0).unwrap_err();
    assert_eq!(err.code, ErrorCode::RunFinished);
    assert!(err.message.contains("all 2 of its steps") && err.message.contains("new run"), "{}", err.message);
    assert_eq!(s.run().unwrap().state, RunState::Finished, "the run stays as it was");
    let doc = include_str!("../PROTOCOL.md");
    assert!(doc.contains("`runFinished`"), "PROTOCOL.md lists the answer");
    let dts = include_str!("../../www/protocol.d.ts");
    assert!(dts.contains("\"runFinished\""), "the generated protocol.d.ts names it");
}

#[test]
fn deleting_the_latest_checkpoint_is_refused_in_a_whole_sentence_that_says_what_to_do() {
    let store = Checkpoints::new(MemoryStore::new(), StoreKind::Memory);
    let mut s = session();
    s.start(tiny(json!({"max_steps": 4})), shakespeare(), 0.0).unwrap();
    let clock = SystemClock::default();
    s.tick(0.0, &clock).unwrap();
    let (older, _) = block_on(store.save(&block_on(snapshot(s.run().unwrap().trainer())).unwrap())).unwrap();
    s.tick(0.0, &clock).unwrap();
    let (latest, _) = block_on(store.save(&block_on(snapshot(s.run().unwrap().trainer())).unwrap())).unwrap();
    let err = block_on(store.delete(&latest)).unwrap_err();
    assert_eq!(err.code, ErrorCode::DeleteRefused);
    let m = &err.message;
    assert!(m.starts_with(&format!("Checkpoint {latest} is the newest one")), "{m}");
    assert!(m.contains("Delete an older checkpoint") && m.ends_with('.'), "{m}");
    block_on(store.delete(&older)).unwrap();
    let gone = block_on(store.load(&older)).unwrap_err();
    assert_eq!(gone.code, ErrorCode::CheckpointNotFound);
    assert!(gone.message.contains("Pick one from the checkpoint list"), "{}", gone.message);
}

#[test]
fn a_model_too_big_for_wasm32_memory_is_refused_with_invalid_config_before_allocating() {
    let mut s = session();
    // Valid (under every shape limit), but ~42 GiB to train: it would kill the worker.
    let huge =
        ModelConfig { n_layers: 48, d_model: 1536, n_heads: 12, d_mlp: 4 * 1536, ..ModelConfig::reference() };
    huge.validate().unwrap();
    let request = TrainRequest { model_config: Some(huge.clone()), ..Default::default() };
    let err = s.start(request, shakespeare(), 0.0).unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidConfig);
    assert!(err.message.contains("GiB") && err.message.contains("browser tab"), "{}", err.message);
    assert!(err.message.contains("smaller model"), "says what to do: {}", err.message);
    // The same estimate as the CLI's and the preset picker's.
    let expected = tinygpt_model::memory::human_bytes(training_memory_bytes(&huge, 16));
    assert!(err.message.contains(&expected), "{expected} in {}", err.message);
    assert!(s.run().is_none());
    // Every preset still fits.
    for p in Preset::all() {
        tinygpt_worker::fits::check_fits_wasm32(&p.model, p.batch_size).unwrap();
    }
}

#[test]
fn loading_a_checkpoint_too_big_for_wasm32_is_refused_before_its_weights_are_read() {
    let storage = MemoryStore::new();
    let store = Checkpoints::new(storage.clone(), StoreKind::Memory);
    let mut s = session();
    s.start(tiny(json!({"max_steps": 4})), shakespeare(), 0.0).unwrap();
    let (id, _) = block_on(store.save(&block_on(snapshot(s.run().unwrap().trainer())).unwrap())).unwrap();
    // A checkpoint of a model that passes validation but needs ~42 GiB to train.
    let huge =
        ModelConfig { n_layers: 48, d_model: 1536, n_heads: 12, d_mlp: 4 * 1536, ..ModelConfig::reference() };
    storage.set_raw(&format!("{id}/model_config.json"), Some(serde_json::to_vec(&huge).unwrap()));
    let err = block_on(store.load(&id)).unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidConfig, "{}", err.message);
    assert!(err.message.contains("browser tab"), "{}", err.message);
}

#[test]
fn uploading_a_checkpoint_too_big_for_wasm32_is_refused_from_its_header() {
    let store = Checkpoints::new(MemoryStore::new(), StoreKind::Memory);
    let mut s = session();
    s.start(tiny(json!({"max_steps": 4})), shakespeare(), 0.0).unwrap();
    block_on(store.save(&block_on(snapshot(s.run().unwrap().trainer())).unwrap())).unwrap();
    let (_, file) = block_on(store.export(None)).unwrap();
    // The same file claiming a model that needs ~42 GiB to train.
    let len = u64::from_le_bytes(file[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&file[8..8 + len]).unwrap();
    let huge =
        ModelConfig { n_layers: 48, d_model: 1536, n_heads: 12, d_mlp: 4 * 1536, ..ModelConfig::reference() };
    header["__metadata__"]["model_config.json"] = serde_json::to_string(&huge).unwrap().into();
    let mut header = serde_json::to_vec(&header).unwrap();
    header.resize(header.len().next_multiple_of(8), b' ');
    let mut forged = (header.len() as u64).to_le_bytes().to_vec();
    forged.extend(&header);
    forged.extend(&file[8 + len..]);
    let err = block_on(store.import(&forged)).unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidConfig, "{}", err.message);
    assert!(err.message.contains("browser tab"), "{}", err.message);
    // The genuine file still imports.
    block_on(store.import(&file)).unwrap();
}
