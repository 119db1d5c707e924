//! What the session reads back from the device, counted on a CPU backend that counts its
//! `read` calls: a training step reads nothing; the losses are read when a progress message
//! is due. (On WebGPU each read is a `mapAsync` the tick must await.)

use std::cell::Cell;

use serde_json::json;
use tinygpt_kernels_cpu::counting::Counting;
use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_worker::clock::Clock;
use tinygpt_worker::protocol::{DatasetInput, EngineKind, OutMessage};
use tinygpt_worker::session::TrainRequest;
use tinygpt_worker::Session;

/// A clock that moves only when told.
struct Manual(Cell<f64>);

impl Clock for Manual {
    fn now_ms(&self) -> f64 {
        self.0.get()
    }
}

#[test]
fn a_step_reads_nothing_back_and_the_losses_come_back_when_progress_is_due() {
    let backend = Counting::new(CpuBackend::new(1));
    let mut s = Session::new(backend.clone(), EngineKind::Wasm);
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/tinyshakespeare.txt");
    let dataset = DatasetInput { name: "tinyshakespeare.txt".into(), bytes: std::fs::read(path).unwrap() };
    let config = json!({"max_steps": 100, "eval_interval": 1000, "checkpoint_interval": 1000});
    let request =
        TrainRequest { preset: Some("tiny".into()), training_config: Some(config), ..Default::default() };
    s.start(request, dataset, 0.0).unwrap();

    // The clock stands still: a budget of 0 is one unit (one whole step of `tiny`) a tick,
    // and no progress message is due.
    let clock = Manual(Cell::new(0.0));
    for step in 1..=5 {
        let outcome = s.tick(0.0, &clock).unwrap();
        assert!(outcome.messages.is_empty(), "{:?}", outcome.messages);
        assert_eq!(s.run().unwrap().step(), step);
        assert_eq!(backend.count_of("read"), 0, "step {step} read something back");
    }

    // Progress is due: the six steps' losses are read, one each, and all reported.
    clock.0.set(1_000.0);
    let messages = s.tick(0.0, &clock).unwrap().messages;
    assert_eq!(backend.count_of("read"), 6);
    let [OutMessage::Progress(p)] = &messages[..] else { panic!("{messages:?}") };
    assert_eq!(p.points.iter().map(|p| p.step).collect::<Vec<_>>(), [1, 2, 3, 4, 5, 6]);
    assert!(p.points.iter().all(|p| p.train_loss.is_finite() && p.train_loss > 4.0));
    assert_eq!(p.train_loss, p.points[5].train_loss);
}
