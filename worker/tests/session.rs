//! The session natively on the CPU backend: the same code the browser runs, minus the JS glue.

use serde_json::json;
use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_model::tokenizer::decode;
use tinygpt_model::{Preset, SampleConfig, Split};
use tinygpt_optim::{TrainedSet, Trainer};
use tinygpt_tensor::block_on;
use tinygpt_worker::clock::{Clock, SystemClock};
use tinygpt_worker::protocol::{DatasetInput, DoneReason, EngineKind, ErrorCode, OutMessage, RunState};
use tinygpt_worker::session::{SampleRequest, TickOutcome, TrainRequest};
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

/// Ticks until the session is idle (bounded), collecting every message.
fn run_until_idle(s: &mut Session<CpuBackend>, budget_ms: f64) -> (Vec<OutMessage>, Vec<usize>) {
    let clock = SystemClock::default();
    let (mut messages, mut saves) = (Vec::new(), Vec::new());
    for _ in 0..10_000 {
        let TickOutcome { messages: m, save_due, busy } = s.tick(budget_ms, &clock).unwrap();
        messages.extend(m);
        if save_due {
            let run = s.run().unwrap();
            // A save at an evaluation step waits for that evaluation, so the checkpoint has it.
            if run.step().is_multiple_of(run.trainer().config().eval_interval) {
                assert_eq!(run.trainer().history().last().map(|p| p.step), Some(run.step()));
            }
            saves.push(run.step());
        }
        if !busy {
            return (messages, saves);
        }
    }
    panic!("the session did not become idle");
}

#[test]
fn a_tiny_run_trains_evaluates_reports_every_step_and_finishes() {
    let mut s = session();
    let config = json!({"max_steps": 40, "eval_interval": 20, "eval_batches": 2, "checkpoint_interval": 20,
                        "learning_rate": 3e-3, "warmup_steps": 5});
    let started = s.start(tiny(config), shakespeare(), 0.0).unwrap();
    match &started[..] {
        [OutMessage::RunStarted { run }, OutMessage::Status { state: RunState::Training, step: 0 }] => {
            assert_eq!(run.training_config.batch_size, 16, "the preset's batch size");
            assert_eq!(run.max_steps, 40);
            assert_eq!(run.params, Preset::by_name("tiny").unwrap().model.param_count());
        }
        other => panic!("unexpected start messages {other:?}"),
    }
    let (messages, saves) = run_until_idle(&mut s, 30.0);
    // A step's validation loss may arrive in a later message than its training loss: merge by step.
    let by_step = losses_by_step(&messages);
    assert_eq!(by_step.keys().copied().collect::<Vec<_>>(), (1..=40).collect::<Vec<_>>());
    let val_steps: Vec<usize> = by_step.iter().filter(|(_, v)| v.1.is_some()).map(|(s, _)| *s).collect();
    assert_eq!(val_steps, vec![20, 40]);
    let points: Vec<_> = by_step.values().collect();
    let mean =
        |r: std::ops::Range<usize>| points[r.clone()].iter().map(|p| p.0).sum::<f32>() / r.len() as f32;
    let (first, last) = (mean(0..5), mean(points.len() - 5..points.len()));
    assert!(last < first - 0.3, "loss should fall: first steps {first}, last steps {last}");
    assert_eq!(saves, vec![20, 40], "a save at the checkpoint interval and at the end");
    assert!(matches!(messages.last(), Some(OutMessage::Done { reason: DoneReason::Finished, step: 40 })));
    let trainer = s.run().unwrap().trainer();
    // The session's sliced evaluation scores the validation split as `Trainer::evaluate` does.
    let recorded = trainer.history().last().and_then(|p| p.val_loss).unwrap();
    assert_eq!(recorded.to_bits(), trainer.evaluate(Split::Val).unwrap().to_bits(), "{recorded}");
    assert_eq!(s.run().unwrap().state, RunState::Finished);
    assert_eq!(s.resume(0.0).unwrap_err().code, ErrorCode::RunFinished);
}

#[test]
fn pause_stops_stepping_resume_continues_and_stop_reports_done() {
    let mut s = session();
    let clock = SystemClock::default();
    s.start(tiny(json!({"max_steps": 1000})), shakespeare(), 0.0).unwrap();
    // A zero budget is one step (or one validation batch) per tick.
    s.tick(0.0, &clock).unwrap();
    assert_eq!(s.run().unwrap().step(), 1);
    assert!(matches!(s.pause().unwrap()[..], [OutMessage::Status { state: RunState::Paused, step: 1 }]));
    let idle = s.tick(50.0, &clock).unwrap();
    assert!(!idle.busy && idle.messages.is_empty());
    assert_eq!(s.run().unwrap().step(), 1);
    s.resume(clock.now_ms()).unwrap();
    s.tick(0.0, &clock).unwrap();
    assert_eq!(s.run().unwrap().step(), 2);
    let stopped = s.stop().unwrap();
    // `stop` answers without waiting for the device: status, done, then the last progress.
    assert!(matches!(
        &stopped[..2],
        [
            OutMessage::Status { state: RunState::Stopped, step: 2 },
            OutMessage::Done { reason: DoneReason::Stopped, step: 2 }
        ]
    ));
    assert!(!s.tick(50.0, &clock).unwrap().busy);
    assert!(s.run().unwrap().needs_save());
}

/// Every step's training loss and every validation loss, merged by step.
fn losses_by_step(messages: &[OutMessage]) -> std::collections::BTreeMap<usize, (f32, Option<f32>)> {
    let mut by_step = std::collections::BTreeMap::new();
    for m in messages {
        if let OutMessage::Progress(p) = m {
            for point in &p.points {
                let entry = by_step.entry(point.step).or_insert((point.train_loss, None));
                entry.1 = point.val_loss.or(entry.1);
            }
        }
    }
    by_step
}

#[test]
fn a_big_batch_trains_in_parts_a_tick_each_pausing_between_them_like_whole_steps() {
    let mut s = session();
    let clock = SystemClock::default();
    let config = json!({"max_steps": 4, "batch_size": 64, "eval_interval": 2, "eval_batches": 2,
                        "learning_rate": 3e-3, "warmup_steps": 2});
    let mut messages = s.start(tiny(config), shakespeare(), 0.0).unwrap();
    let run = s.run().unwrap();
    assert_eq!(run.rows_per_part(), 22, "tiny at batch 64: 22 + 22 + 20 rows (see parts.rs)");
    let at = |s: &Session<CpuBackend>| (s.run().unwrap().step(), s.run().unwrap().trainer().rows_done());

    // A zero budget is one part per tick; a pause between parts holds the step where it is.
    messages.extend(s.tick(0.0, &clock).unwrap().messages);
    assert_eq!(at(&s), (0, 22));
    s.pause().unwrap();
    assert!(!s.tick(50.0, &clock).unwrap().busy);
    assert_eq!(at(&s), (0, 22));
    s.resume(clock.now_ms()).unwrap();
    messages.extend(s.tick(0.0, &clock).unwrap().messages);
    assert_eq!(at(&s), (0, 44));
    messages.extend(s.tick(0.0, &clock).unwrap().messages);
    assert_eq!(at(&s), (1, 0), "the last 20 rows end the step");
    messages.extend(run_until_idle(&mut s, 0.0).0);

    // The same run in whole steps: the same losses up to rounding in the summed gradients.
    let trainer = s.run().unwrap().trainer();
    let (model, training) = (trainer.model().config().clone(), trainer.config().clone());
    let mut whole = Trainer::new(
        TrainedSet::whole_model(&CpuBackend::new(1), model),
        training,
        trainer.dataset().clone(),
        None,
    )
    .unwrap();
    let mut expected = std::collections::BTreeMap::new();
    while !whole.is_finished() {
        let r = whole.step().unwrap();
        let val = r.eval_due.then(|| whole.evaluate(Split::Val).unwrap());
        expected.insert(r.step, (r.train_loss, val));
    }
    let got = losses_by_step(&messages);
    assert_eq!(got.keys().collect::<Vec<_>>(), expected.keys().collect::<Vec<_>>());
    let close = |a: f32, b: f32| (a - b).abs() <= 1e-5 * b.abs();
    for (step, (train, val)) in &got {
        let (want_train, want_val) = expected[step];
        assert!(close(*train, want_train), "step {step}: train {train} vs {want_train}");
        assert_eq!(val.is_some(), want_val.is_some(), "step {step}");
        if let (Some(v), Some(w)) = (val, want_val) {
            assert!(close(*v, w), "step {step}: val {v} vs {w}");
        }
    }
}

#[test]
fn bad_data_and_configs_give_codes_and_plain_words() {
    let mut s = session();
    let empty = DatasetInput { name: "empty.txt".into(), bytes: vec![] };
    let err = s.start(tiny(json!({})), empty, 0.0).unwrap_err();
    assert_eq!(err.code, ErrorCode::EmptyDataset);
    assert!(err.message.contains("empty"), "{}", err.message);

    let short = DatasetInput { name: "short.txt".into(), bytes: b"to be or not to be".to_vec() };
    let err = s.start(tiny(json!({})), short, 0.0).unwrap_err();
    assert_eq!(err.code, ErrorCode::DatasetTooShort);
    assert!(err.message.contains("18 bytes") && err.message.contains("330"), "{}", err.message);

    let err = s.start(tiny(json!({"learning_rat": 1})), shakespeare(), 0.0).unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidConfig);
    assert!(err.message.contains("learning_rat"), "{}", err.message);

    let unknown = TrainRequest { preset: Some("gigantic".into()), ..Default::default() };
    assert_eq!(s.start(unknown, shakespeare(), 0.0).unwrap_err().code, ErrorCode::UnknownPreset);
    assert!(s.run().is_none(), "failed starts leave no run behind");
    assert_eq!(s.pause().unwrap_err().code, ErrorCode::NoRun);
}

#[test]
fn sampling_streams_the_same_text_as_generate() {
    let mut s = session();
    s.start(tiny(json!({"max_steps": 3})), shakespeare(), 0.0).unwrap();
    s.pause().unwrap();
    let request = SampleRequest {
        prompt: "ROMEO:".into(),
        max_tokens: 40,
        temperature: 0.8,
        top_k: 40,
        seed: 7,
        top_p: 1.0,
        stop: vec![],
        adapter: None,
    };
    s.sample(request, 0.0).unwrap();
    let (messages, _) = run_until_idle(&mut s, 0.0);
    let chunks: String = messages
        .iter()
        .filter_map(|m| match m {
            OutMessage::SampleChunk { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let Some(OutMessage::SampleDone { text, tokens_per_second, cancelled: false }) = messages.last() else {
        panic!("no sampleDone in {messages:?}")
    };
    assert!(messages.len() > 2, "a zero budget streams many chunks");
    assert_eq!(&chunks, text);
    assert!(*tokens_per_second > 0.0);
    // The session passes the request through unchanged: the text of `Gpt::generate`'s bytes.
    let config =
        SampleConfig { max_tokens: 40, temperature: 0.8, top_k: 40, seed: 7, ..SampleConfig::default() };
    let model = s.run().unwrap().trainer().model();
    let expected = block_on(model.generate(b"ROMEO:", &config, |_| true)).unwrap();
    assert_eq!(text, &decode(&expected));
}
