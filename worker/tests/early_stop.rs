//! The worker honours the model's dropout and `early_stop_patience`: a run with a stalled
//! validation loss ends with `done {reason: "earlyStopped"}`, and `resume` then says why
//! there is nothing to resume.

use serde_json::json;
use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_model::{ModelConfig, Preset};
use tinygpt_worker::clock::SystemClock;
use tinygpt_worker::protocol::{DatasetInput, DoneReason, EngineKind, ErrorCode, OutMessage, RunState};
use tinygpt_worker::session::{TickOutcome, TrainRequest};
use tinygpt_worker::Session;

fn shakespeare() -> DatasetInput {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/tinyshakespeare.txt");
    DatasetInput { name: "tinyshakespeare.txt".into(), bytes: std::fs::read(path).unwrap() }
}

fn run_until_idle(s: &mut Session<CpuBackend>) -> Vec<OutMessage> {
    let clock = SystemClock::default();
    let mut messages = Vec::new();
    for _ in 0..10_000 {
        let TickOutcome { messages: m, busy, .. } = s.tick(30.0, &clock).unwrap();
        messages.extend(m);
        if !busy {
            return messages;
        }
    }
    panic!("the session did not become idle");
}

#[test]
fn a_stalled_run_stops_early_saying_so_and_keeps_its_dropout() {
    let mut s = Session::new(CpuBackend::new(1), EngineKind::Wasm);
    // A learning rate too small to move the weights: the validation loss stalls at once.
    let training = json!({"max_steps": 30, "eval_interval": 1, "eval_batches": 1, "checkpoint_interval": 100,
                          "learning_rate": 1e-12, "min_lr": 1e-12, "schedule": "constant", "weight_decay": 0.0,
                          "early_stop_patience": 1, "batch_size": 2});
    let model = ModelConfig { dropout: 0.2, ..Preset::by_name("tiny").unwrap().model };
    let request = TrainRequest {
        preset: Some("tiny".into()),
        model_config: Some(model),
        training_config: Some(training),
    };
    let started = s.start(request, shakespeare(), 0.0).unwrap();
    match &started[0] {
        OutMessage::RunStarted { run } => assert_eq!(run.model_config.dropout, 0.2),
        other => panic!("unexpected {other:?}"),
    }
    let messages = run_until_idle(&mut s);
    let Some(OutMessage::Done { reason: DoneReason::EarlyStopped, step }) = messages.last() else {
        panic!("expected done earlyStopped, got {:?}", messages.last());
    };
    assert!(*step < 30, "stopped at {step}");
    assert_eq!(s.run().unwrap().state, RunState::Finished);
    let err = s.resume(0.0).unwrap_err();
    assert_eq!(err.code, ErrorCode::RunFinished);
    assert!(err.message.contains("stopped early"), "{}", err.message);
}
