//! The run loop's events on a small run: evaluations, saves, early stop, the end.

use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_model::{Dataset, Preset};
use tinygpt_tensor::block_on;

use super::*;
use crate::{TrainedSet, TrainingConfig};

const TEXT: &[u8] = include_bytes!("../../../data/tinyshakespeare.txt");

fn run(config: TrainingConfig) -> TrainingRun<CpuBackend> {
    let model = Preset::by_name("tiny").unwrap().model;
    let dataset = Dataset::new("shakespeare", &TEXT[..50_000], model.context_length, config.seed).unwrap();
    let trained = TrainedSet::whole_model(&CpuBackend::new(1), model);
    TrainingRun::new(Trainer::new(trained, config, dataset, None).unwrap())
}

/// Every event of `run` driven to its end in units of `rows`.
fn drive(run: &mut TrainingRun<CpuBackend>, rows: usize) -> Vec<RunEvent> {
    let mut events = Vec::new();
    while !run.is_over() {
        events.extend(block_on(run.advance(rows, &Unhurried)).unwrap());
    }
    events
}

/// The events that are not steps, with the time left out.
fn milestones(events: &[RunEvent]) -> Vec<RunEvent> {
    events
        .iter()
        .filter(|e| !matches!(e, RunEvent::StepDone(_)))
        .map(|e| match e {
            RunEvent::Evaluated { step, train_loss, val_loss, best } => RunEvent::Evaluated {
                step: *step,
                train_loss: *train_loss,
                val_loss: *val_loss,
                best: BestEval { train_seconds: None, ..*best },
            },
            other => other.clone(),
        })
        .collect()
}

#[test]
fn evaluations_saves_and_the_end_come_in_order() {
    let config = TrainingConfig {
        batch_size: 4,
        max_steps: 7,
        warmup_steps: 1,
        eval_interval: 3,
        eval_batches: 2,
        checkpoint_interval: 2,
        ..Default::default()
    };
    let mut r = run(config);
    let events = drive(&mut r, 4);
    let steps: Vec<usize> = events
        .iter()
        .filter_map(|e| if let RunEvent::StepDone(d) = e { Some(d.step) } else { None })
        .collect();
    assert_eq!(steps, [1, 2, 3, 4, 5, 6, 7]);
    let kinds: Vec<String> = milestones(&events)
        .iter()
        .map(|e| match e {
            RunEvent::Evaluated { step, .. } => format!("eval {step}"),
            RunEvent::SaveDue { step } => format!("save {step}"),
            RunEvent::StoppedEarly { step } => format!("early {step}"),
            RunEvent::Finished { step } => format!("end {step}"),
            RunEvent::StepDone(_) => unreachable!(),
        })
        .collect();
    // Step 6 is both: the save waits for the evaluation. Step 7 (max_steps) is evaluated
    // and ends the run with one last save.
    assert_eq!(kinds, ["save 2", "eval 3", "save 4", "eval 6", "save 6", "eval 7", "save 7", "end 7"]);
    assert_eq!(r.trainer().history().len(), 7, "every step's loss was read");
    assert!(block_on(r.advance(4, &Unhurried)).unwrap().is_empty(), "nothing after the end");
}

#[test]
fn early_stopping_ends_the_run_with_a_save() {
    // A learning rate this high makes the validation loss worse from the first evaluation.
    let config = TrainingConfig {
        batch_size: 4,
        max_steps: 200,
        warmup_steps: 0,
        learning_rate: 0.5,
        min_lr: 0.05,
        eval_interval: 2,
        eval_batches: 1,
        early_stop_patience: Some(2),
        ..Default::default()
    };
    let mut r = run(config);
    let events = milestones(&drive(&mut r, 4));
    let ends: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, RunEvent::StoppedEarly { .. } | RunEvent::Finished { .. }))
        .collect();
    let [&RunEvent::StoppedEarly { step }] = ends[..] else { panic!("{events:?}") };
    assert!(step < 200);
    assert_eq!(events[events.len() - 2], RunEvent::SaveDue { step });
    let best = r.best().unwrap();
    assert_eq!(crate::early_stop::evals_since_best(r.trainer().history()), 2);
    assert!(best.step < step);
    // Continued past the stop (the CLI's --resume --steps), it trains to its next
    // evaluation before early stopping can end it again.
    let mut more = TrainingRun::new(r.into_trainer()).stopping_at(step + 10);
    let next = milestones(&drive(&mut more, 4));
    assert!(matches!(next[0], RunEvent::Evaluated { step: s, .. } if s == step + 2), "{next:?}");
}

#[test]
fn parts_and_whole_batches_give_the_same_events() {
    let config = TrainingConfig {
        batch_size: 4,
        max_steps: 4,
        eval_interval: 2,
        eval_batches: 1,
        ..Default::default()
    };
    let (mut whole, mut parts) = (run(config.clone()), run(config));
    let (a, b) = (drive(&mut whole, 4), drive(&mut parts, 2));
    let kinds = |e: &[RunEvent]| e.iter().map(std::mem::discriminant).collect::<Vec<_>>();
    assert_eq!(kinds(&a), kinds(&b));
    assert_eq!(whole.trainer().history().len(), parts.trainer().history().len());
}
