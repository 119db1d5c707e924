//! Checkpoint coordination over the in-memory store (the browser stores share its trait and
//! are tested by the ckpt crate in Chromium).

use serde_json::json;
use tinygpt_ckpt::MemoryStore;
use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_tensor::block_on;
use tinygpt_worker::checkpoints::{restore, snapshot, Checkpoints};
use tinygpt_worker::clock::SystemClock;
use tinygpt_worker::protocol::{DatasetInput, EngineKind, ErrorCode, OutMessage, RunState, StoreKind};
use tinygpt_worker::session::TrainRequest;
use tinygpt_worker::Session;

fn shakespeare() -> DatasetInput {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/tinyshakespeare.txt");
    DatasetInput { name: "tinyshakespeare.txt".into(), bytes: std::fs::read(path).unwrap() }
}

fn tiny_session(max_steps: usize) -> Session<CpuBackend> {
    let mut s = Session::new(CpuBackend::new(1), EngineKind::Wasm);
    let training = json!({"max_steps": max_steps, "eval_interval": 4, "eval_batches": 2});
    let request =
        TrainRequest { preset: Some("tiny".into()), training_config: Some(training), ..Default::default() };
    s.start(request, shakespeare(), 0.0).unwrap();
    s
}

/// Steps (and evaluations) until `step`, one unit per tick, returning the step losses.
fn train_to(s: &mut Session<CpuBackend>, step: usize) -> Vec<f32> {
    let clock = SystemClock::default();
    let mut losses = Vec::new();
    while s.run().unwrap().step() < step {
        for m in s.tick(0.0, &clock).unwrap().messages {
            if let OutMessage::Progress(p) = m {
                losses.extend(p.points.iter().filter(|p| p.val_loss.is_none()).map(|p| p.train_loss));
            }
        }
    }
    losses
}

#[test]
fn save_list_load_and_resume_continues_exactly() {
    let store = Checkpoints::new(MemoryStore::new(), StoreKind::Memory);
    let mut straight = tiny_session(10);
    let clock = SystemClock::default();
    let mut all = Vec::new();
    while straight.is_busy() {
        for m in straight.tick(0.0, &clock).unwrap().messages {
            if let OutMessage::Progress(p) = m {
                all.extend(p.points);
            }
        }
    }

    let mut first = tiny_session(10);
    train_to(&mut first, 6);
    let (id, bytes) =
        block_on(store.save(&block_on(snapshot(first.run().unwrap().trainer())).unwrap())).unwrap();
    assert!(bytes > 0);
    let items = block_on(store.list()).unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!((items[0].id.as_str(), items[0].step, items[0].max_steps), (id.as_str(), 6, 10));
    assert_eq!(items[0].dataset_name, "tinyshakespeare.txt");
    assert_eq!(items[0].model_name, "tinygpt-tiny");

    let ckpt = block_on(store.load(&id)).unwrap();
    let trainer = restore(first.backend(), ckpt, &shakespeare()).unwrap();
    let mut second = Session::new(CpuBackend::new(1), EngineKind::Wasm);
    let started = second.install(trainer, Some(id.clone()), RunState::Paused, 0.0);
    let OutMessage::RunStarted { run } = &started[0] else { panic!("{started:?}") };
    assert_eq!(run.step, 6);
    // The restored history is the whole learning curve: every step, val loss at step 4.
    assert_eq!(run.history.iter().map(|p| p.step).collect::<Vec<_>>(), (1..=6).collect::<Vec<_>>());
    let evals: Vec<usize> = run.history.iter().filter(|p| p.val_loss.is_some()).map(|p| p.step).collect();
    assert_eq!(evals, [4], "the eval point at step 4");
    assert!(!second.run().unwrap().needs_save());
    second.resume(0.0).unwrap();
    let mut resumed = Vec::new();
    while second.is_busy() {
        for m in second.tick(0.0, &clock).unwrap().messages {
            if let OutMessage::Progress(p) = m {
                resumed.extend(p.points);
            }
        }
    }
    // Progress may carry a step's validation loss in a later message: compare merged by step.
    let tail: Vec<_> = by_step(&all).into_iter().filter(|(step, _)| *step > 6).collect();
    assert_eq!(by_step(&resumed), tail, "the resumed run takes the very steps the straight one took");
}

/// Loss points merged by step: `(step, (train bits, val bits))`, bit patterns for exactness.
fn by_step(points: &[tinygpt_worker::protocol::LossPoint]) -> Vec<(usize, (u32, Option<u32>))> {
    let mut merged = std::collections::BTreeMap::new();
    for p in points {
        let entry = merged.entry(p.step).or_insert((p.train_loss.to_bits(), None));
        entry.1 = p.val_loss.map(f32::to_bits).or(entry.1);
    }
    merged.into_iter().collect()
}

#[test]
fn another_text_is_refused_by_name_and_export_import_round_trips() {
    let store = Checkpoints::new(MemoryStore::new(), StoreKind::Memory);
    let mut s = tiny_session(10);
    train_to(&mut s, 2);
    let (id, _) = block_on(store.save(&block_on(snapshot(s.run().unwrap().trainer())).unwrap())).unwrap();

    let mut other = shakespeare();
    other.name = "other.txt".into();
    other.bytes.truncate(50_000);
    let err = restore(s.backend(), block_on(store.load(&id)).unwrap(), &other).unwrap_err();
    assert_eq!(err.code, ErrorCode::DatasetMismatch);
    assert!(
        err.message.contains("tinyshakespeare.txt") && err.message.contains("other.txt"),
        "{}",
        err.message
    );

    let (name, file) = block_on(store.export(None)).unwrap();
    assert_eq!(name, "tinygpt-tiny-step2.safetensors");
    let (new_id, step, _) = block_on(store.import(&file)).unwrap();
    assert_eq!(step, 2);
    assert_ne!(new_id, id);
    let a = block_on(store.load(&id)).unwrap();
    let b = block_on(store.load(&new_id)).unwrap();
    assert_eq!(a, b, "an exported and re-imported checkpoint is the same checkpoint");

    assert_eq!(block_on(store.delete(&new_id)).unwrap_err().code, ErrorCode::DeleteRefused);
    block_on(store.delete(&id)).unwrap();
    assert_eq!(block_on(store.list()).unwrap().len(), 1);
    let bad = block_on(store.import(b"not a safetensors file")).unwrap_err();
    assert_eq!(bad.code, ErrorCode::BadCheckpoint);
    assert_eq!(block_on(store.load("gen-999999")).unwrap_err().code, ErrorCode::CheckpointNotFound);
}
