//! One config through the CLI's `tinygpt train` (the binary) and the web worker's session
//! (natively, in this process): both drive `tinygpt_optim::TrainingRun`, so they evaluate,
//! save and end at the same steps, and their losses are the same bits (issue 35: one run
//! loop).

use serde_json::{json, Value};
use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_worker::clock::SystemClock;
use tinygpt_worker::protocol::{DatasetInput, DoneReason, EngineKind, OutMessage};
use tinygpt_worker::session::TrainRequest;
use tinygpt_worker::Session;

mod common;

use common::{ok, s, scratch, steps_of};

const TEXT: &[u8] = include_bytes!("../../data/tinyshakespeare.txt");

/// What a run did, as each caller sees it.
#[derive(Debug, PartialEq)]
struct Outcome {
    /// Every step's `(step, train_loss bits, val_loss bits)`.
    history: Vec<(usize, u32, Option<u32>)>,
    /// Steps evaluated, in order.
    evaluated: Vec<usize>,
    /// Steps a checkpoint was written at, in order.
    saved: Vec<usize>,
    /// Whether early stopping ended the run, and its last step.
    end: (bool, usize),
}

fn bits(history: &[tinygpt_optim::LossPoint]) -> Vec<(usize, u32, Option<u32>)> {
    history.iter().map(|p| (p.step, p.train_loss.to_bits(), p.val_loss.map(f32::to_bits))).collect()
}

fn via_cli(name: &str, training: &Value) -> Outcome {
    let dir = scratch(name);
    let (config, data, run) = (dir.join("config.json"), dir.join("data.txt"), dir.join("run"));
    std::fs::write(&config, json!({"preset": "tiny", "training": training}).to_string()).unwrap();
    std::fs::write(&data, &TEXT[..60_000]).unwrap();
    let out = ok(&["train", "--config", s(&config), "--data", s(&data), "--threads", "1", "--out", s(&run)]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let stopped = steps_of(&err, "stopped early at step ", ":");
    let saved = steps_of(&err, " at step ", " (");
    let pointer: Value = serde_json::from_slice(&std::fs::read(run.join("latest.json")).unwrap()).unwrap();
    let latest = run.join(pointer["latest"].as_str().unwrap());
    let history: Vec<tinygpt_optim::LossPoint> =
        serde_json::from_slice(&std::fs::read(latest.join("loss_history.json")).unwrap()).unwrap();
    let last = history.last().map_or(0, |p| p.step);
    Outcome {
        history: bits(&history),
        evaluated: steps_of(&err, "step ", "  train"),
        end: (!stopped.is_empty(), last),
        saved,
    }
}

fn via_worker(training: &Value) -> Outcome {
    let mut session = Session::new(CpuBackend::new(1), EngineKind::Wasm);
    let request = TrainRequest {
        preset: Some("tiny".into()),
        training_config: Some(training.clone()),
        ..Default::default()
    };
    let data = DatasetInput { name: "data.txt".into(), bytes: TEXT[..60_000].to_vec() };
    session.start(request, data, 0.0).unwrap();
    let run = session.run().unwrap();
    assert_eq!(
        run.rows_per_part(),
        run.trainer().config().batch_size,
        "whole batches, as the CLI takes them"
    );
    let (mut evaluated, mut saved, mut end) = (Vec::new(), Vec::new(), None);
    let clock = SystemClock::default();
    loop {
        let tick = session.tick(50.0, &clock).unwrap();
        for message in tick.messages {
            match message {
                OutMessage::Progress(p) => {
                    evaluated.extend(p.points.iter().filter(|q| q.val_loss.is_some()).map(|q| q.step))
                }
                OutMessage::Done { reason, step } => end = Some((reason == DoneReason::EarlyStopped, step)),
                _ => {}
            }
        }
        if tick.save_due {
            saved.push(session.run().unwrap().step());
        }
        if !tick.busy {
            break;
        }
    }
    evaluated.dedup();
    Outcome {
        history: bits(session.run().unwrap().trainer().history()),
        evaluated,
        saved,
        end: end.expect("the run ends with done"),
    }
}

/// A run that learns: evaluations at 4, 8, 12 and the last step, saves every 5 and at the end.
#[test]
fn a_learning_run_takes_the_same_steps_in_the_terminal_and_the_worker() {
    let training = json!({"batch_size": 8, "max_steps": 14, "learning_rate": 3e-3, "warmup_steps": 2,
        "eval_interval": 4, "eval_batches": 2, "checkpoint_interval": 5});
    let (cli, worker) = (via_cli("learning", &training), via_worker(&training));
    assert_eq!(cli, worker);
    assert_eq!(
        (cli.evaluated.as_slice(), cli.saved.as_slice(), cli.end),
        (&[4, 8, 12, 14][..], &[5, 10, 14][..], (false, 14))
    );
    let losses: Vec<f32> = cli.history.iter().map(|p| f32::from_bits(p.1)).collect();
    assert!(losses[13] < losses[0] - 0.3, "it learns: {losses:?}");
}

/// A run that stalls (a learning rate too small to move a weight): the evaluations at 8 and
/// 12 do not improve on the one at 4, so early stopping (patience 2) ends it at 12, both
/// places; saves every 5 steps and at the end.
#[test]
fn early_stopping_and_saves_come_at_the_same_steps_in_the_terminal_and_the_worker() {
    let training = json!({"batch_size": 8, "max_steps": 40, "learning_rate": 1e-12, "min_lr": 1e-12,
        "schedule": "constant", "weight_decay": 0.0, "warmup_steps": 0, "eval_interval": 4,
        "eval_batches": 2, "checkpoint_interval": 5, "early_stop_patience": 2});
    let (cli, worker) = (via_cli("stalling", &training), via_worker(&training));
    assert_eq!(cli, worker);
    assert_eq!(
        (cli.evaluated.as_slice(), cli.saved.as_slice(), cli.end),
        (&[4, 8, 12][..], &[5, 10, 12][..], (true, 12))
    );
}
