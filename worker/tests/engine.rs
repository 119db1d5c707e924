//! The worker's engine natively: the WebGPU session is the same session code on the wgpu
//! backend (here Mesa's lavapipe, as the kernels-wgsl tests use), it passes the self-test
//! `init {backend: "auto"}` runs, trains reporting `webgpu`, and its checkpoint loads into
//! a CPU engine that continues the run.

use std::rc::Rc;

use serde_json::json;
use tinygpt_kernels_wgsl::testing::shared_backend;
use tinygpt_tensor::{block_on, Precision};
use tinygpt_worker::abandon::Abandon;
use tinygpt_worker::clock::SystemClock;
use tinygpt_worker::engine::{Engine, Snapshot};
use tinygpt_worker::interrupt::Interrupt;
use tinygpt_worker::protocol::{DatasetInput, EngineKind, OutMessage, RunState};
use tinygpt_worker::self_test::self_test;
use tinygpt_worker::session::TrainRequest;

fn shakespeare() -> DatasetInput {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/tinyshakespeare.txt");
    DatasetInput { name: "tinyshakespeare.txt".into(), bytes: std::fs::read(path).unwrap() }
}

/// Ticks until idle, returning every progress message.
fn train_until_idle(engine: &mut Engine) -> Vec<OutMessage> {
    let clock = SystemClock::default();
    let mut messages = Vec::new();
    for _ in 0..10_000 {
        let outcome = block_on(engine.tick_async(50.0, &clock, &Interrupt::default())).unwrap();
        messages.extend(outcome.messages);
        if !outcome.busy {
            return messages;
        }
    }
    panic!("the engine did not become idle");
}

fn losses(messages: &[OutMessage]) -> Vec<f32> {
    messages
        .iter()
        .filter_map(|m| match m {
            OutMessage::Progress(p) => Some(p.points.iter().map(|p| p.train_loss).collect::<Vec<_>>()),
            _ => None,
        })
        .flatten()
        .collect()
}

#[test]
fn the_wgpu_backend_passes_the_self_test() {
    let Some(gpu) = shared_backend() else { return };
    block_on(self_test(&gpu)).unwrap();
}

#[test]
fn a_webgpu_engine_trains_reports_webgpu_and_its_checkpoint_continues_on_the_cpu() {
    let Some(gpu) = shared_backend() else { return };
    let mut engine = Engine::webgpu(gpu.clone(), gpu);
    assert_eq!(engine.kind(), EngineKind::Webgpu);
    assert_eq!(engine.mixed_matmul("").map(|m| m.kernels), Some("f32".into()), "an f32 device's mixed path");
    let request = TrainRequest {
        preset: Some("tiny".into()),
        training_config: Some(json!({"max_steps": 12, "eval_interval": 100, "learning_rate": 3e-3,
                                      "warmup_steps": 2, "checkpoint_interval": 100})),
        ..Default::default()
    };
    engine.start(request, shakespeare(), 0.0).unwrap();
    // A tick with a 1 ms budget runs one unit: one step of `tiny` (one part).
    let clock = SystemClock::default();
    let mut messages = Vec::new();
    for _ in 0..6 {
        messages.extend(block_on(engine.tick_async(1.0, &clock, &Interrupt::default())).unwrap().messages);
    }
    messages.extend(block_on(engine.stop_async()).unwrap());
    assert!(messages.iter().any(|m| matches!(m, OutMessage::Done { step: 6, .. })), "{messages:?}");
    assert!(engine.needs_save());
    let Snapshot::Run(ckpt) = block_on(engine.snapshot()).expect("a run").unwrap() else {
        panic!("a full run snapshots a full checkpoint")
    };
    assert_eq!(ckpt.progress.step, 6);

    // A run saved at mixed (as on a GPU with shader-f16) continues on a CPU build at f32:
    // the page offers exactly that after a lost device, and the CPU has no narrow matmul.
    let mut mixed_ckpt = ckpt.clone();
    mixed_ckpt.training_config.precision = Precision::Mixed;
    let mut cpu = Engine::cpu(EngineKind::WasmSimd, Rc::new(Abandon::never()));
    let loaded =
        cpu.load(mixed_ckpt, "ckpt-6".into(), &shakespeare(), 0.0).expect("a mixed run continues here");
    let precision = loaded.iter().find_map(|m| match m {
        OutMessage::RunStarted { run } => Some(run.training_config.precision),
        _ => None,
    });
    assert_eq!(precision, Some(Precision::F32));

    let mut cpu = Engine::cpu(EngineKind::WasmSimd, Rc::new(Abandon::never()));
    let loaded = cpu.load(ckpt, "ckpt-6".into(), &shakespeare(), 0.0).unwrap();
    assert!(matches!(loaded.last(), Some(OutMessage::Status { state: RunState::Paused, step: 6 })));
    assert_eq!(cpu.run_summary().unwrap().model_name, "tinygpt-tiny");
    cpu.resume(0.0).unwrap();
    let cpu_messages = train_until_idle(&mut cpu);
    assert!(matches!(cpu_messages.last(), Some(OutMessage::Done { step: 12, .. })));
    messages.extend(cpu_messages);
    let backends: Vec<EngineKind> = messages
        .iter()
        .filter_map(|m| match m {
            OutMessage::Progress(p) => Some(p.backend),
            _ => None,
        })
        .collect();
    assert_eq!(backends.first(), Some(&EngineKind::Webgpu));
    assert_eq!(backends.last(), Some(&EngineKind::WasmSimd));
    // The CPU run's last point comes twice: with its training loss, then with its validation loss.
    let mut all = losses(&messages);
    all.dedup();
    assert_eq!(all.len(), 12, "a loss for every step, 6 on each backend: {all:?}");
    assert!(all[11] < all[0], "loss falls across the switch: {all:?}");
}
