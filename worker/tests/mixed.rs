//! `precision: mixed` in the worker (issue 34): the session trains it on WebGPU without ever
//! blocking on the device (the step is queued, the device waited for as after every unit,
//! then loss scaling's one readback awaited: `Trainer::queue_part` and
//! `Trainer::finish_update`) and takes exactly the steps the CLI's blocking trainer takes;
//! the CPU builds, which have no narrow matmul, refuse it naming the reason. Natively: the
//! WebGPU session on lavapipe (skipped without a GPU adapter), the CPU one on the CPU.

use serde_json::json;
use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_kernels_wgsl::testing::shared_backend_with;
use tinygpt_model::Dataset;
use tinygpt_optim::{LossScaleState, RowPart, TrainedSet, Trainer};
use tinygpt_tensor::{block_on, Precision};
use tinygpt_worker::clock::SystemClock;
use tinygpt_worker::protocol::{DatasetInput, EngineKind, ErrorCode};
use tinygpt_worker::session::{resolve_configs, TrainRequest};
use tinygpt_worker::Session;

fn shakespeare() -> DatasetInput {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/tinyshakespeare.txt");
    DatasetInput { name: "tinyshakespeare.txt".into(), bytes: std::fs::read(path).unwrap() }
}

fn tiny(training: serde_json::Value) -> TrainRequest {
    TrainRequest { preset: Some("tiny".into()), training_config: Some(training), ..Default::default() }
}

#[test]
fn the_cpu_builds_refuse_mixed_naming_the_reason() {
    for kind in [EngineKind::Wasm, EngineKind::WasmRelaxedSimdThreads] {
        let mut s = Session::new(CpuBackend::new(1), kind);
        let err = s.start(tiny(json!({"precision": "mixed"})), shakespeare(), 0.0).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidConfig);
        for part in ["\"mixed\" trains on WebGPU only", kind.name(), "f32", "no f16 matmul"] {
            assert!(err.message.contains(part), "{part:?} missing from: {}", err.message);
        }
        assert!(s.run().is_none(), "nothing was started");
        s.start(tiny(json!({"precision": "f32", "max_steps": 1})), shakespeare(), 0.0).expect("f32 trains");
    }
}

#[test]
fn queued_steps_with_an_awaited_decision_are_the_blocking_trainers_steps() {
    let config = json!({"precision": "mixed", "max_steps": 6, "eval_interval": 1000, "learning_rate": 3e-3});
    let (model, training) = resolve_configs(tiny(config.clone())).unwrap();
    assert_eq!(training.precision, Precision::Mixed);
    let data = shakespeare();
    let dataset = || Dataset::new(&data.name, &data.bytes, model.context_length, training.seed).unwrap();
    // lavapipe offers shader-f16, so this is the f16 matmul where the device chose it.
    let Some(gpu) = shared_backend_with(Precision::Mixed) else { return };
    eprintln!("mixed matmul: {}", gpu.matmul_precision());

    // The CLI's way: each step waits for loss scaling's readback inside.
    let mut blocking =
        Trainer::new(TrainedSet::whole_model(&gpu, model.clone()), training.clone(), dataset(), None)
            .unwrap();
    for _ in 0..6 {
        blocking.step().unwrap();
    }
    // The browser's way, by hand: the last part leaves the update pending; the trainer is
    // still at the step before until the awaited decision.
    let mut queued =
        Trainer::new(TrainedSet::whole_model(&gpu, model.clone()), training.clone(), dataset(), None)
            .unwrap();
    for step in 0..6 {
        assert_eq!(queued.queue_part(usize::MAX, || false), RowPart::MoreRows);
        assert!(queued.update_pending());
        assert_eq!(queued.progress().step, step, "still at the step before");
        assert_eq!(queued.queue_part(usize::MAX, || false), RowPart::MoreRows, "waits, does nothing");
        let done = block_on(queued.finish_update()).expect("the pending update");
        assert_eq!(done.step, step + 1);
        assert!(!queued.update_pending());
    }
    let losses = |t: &mut Trainer<_>| block_on(t.read_losses()).unwrap();
    let (a, b) = (blocking.history().to_vec(), losses(&mut queued));
    assert_eq!(a, b, "the same steps, bit for bit");
    assert_eq!(blocking.progress(), queued.progress(), "the same loss scale and counts");

    // And the session, tick by tick, as the worker runs it.
    let mut s = Session::new(gpu.clone(), EngineKind::Webgpu).with_mixed(gpu.clone());
    s.start(tiny(config), shakespeare(), 0.0).unwrap();
    let clock = SystemClock::default();
    for _ in 0..1000 {
        if !s.tick(50.0, &clock).unwrap().busy {
            break;
        }
    }
    let run = s.run().unwrap();
    assert_eq!(run.step(), 6);
    // (The session also scores the last step on validation text.)
    let train = |h: &[tinygpt_optim::LossPoint]| h.iter().map(|p| (p.step, p.train_loss)).collect::<Vec<_>>();
    assert_eq!(train(run.trainer().history()), train(&a), "the session's steps are the blocking trainer's");
}

#[test]
fn an_overflowing_step_taken_the_browsers_way_is_skipped_and_changes_no_weight() {
    // The decision path on any backend (the CPU's readback is ready at once): a loss scale of
    // 2¹⁰⁰ overflows the gradients' sum of squares, so the first step is skipped — weights
    // and moments stay bit for bit, the scale halves (and so for the next steps, still far
    // too large). That a clean step applies is the test above.
    let (model, training) = resolve_configs(tiny(json!({"precision": "mixed", "max_steps": 4}))).unwrap();
    let data = shakespeare();
    let dataset = || Dataset::new(&data.name, &data.bytes, model.context_length, training.seed).unwrap();
    let cpu = CpuBackend::new(1);
    let fresh = Trainer::new(TrainedSet::whole_model(&cpu, model.clone()), training.clone(), dataset(), None)
        .unwrap();
    let mut state = block_on(fresh.resume_state()).unwrap();
    let before = state.weights.clone();
    let huge = 2f32.powi(100);
    state.progress.loss_scale = Some(LossScaleState { scale: huge, growth_tracker: 0, skipped_steps: 0 });
    let mut t =
        Trainer::new(TrainedSet::whole_model(&cpu, model.clone()), training.clone(), dataset(), Some(state))
            .unwrap();
    assert_eq!(t.queue_part(usize::MAX, || false), RowPart::MoreRows);
    let done = block_on(t.finish_update()).expect("the pending update");
    assert_eq!(done.step, 1, "a skipped step is still a step");
    let after = block_on(t.resume_state()).unwrap();
    let bits = |w: &[f32]| w.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&after.weights), bits(&before), "no weight moved");
    assert!(after.adam_m.iter().chain(&after.adam_v).all(|&m| m == 0.0), "no moment moved");
    assert_eq!(
        after.progress.loss_scale,
        Some(LossScaleState { scale: huge / 2.0, growth_tracker: 0, skipped_steps: 1 })
    );
    for _ in 0..3 {
        t.queue_part(usize::MAX, || false);
        block_on(t.finish_update());
    }
    let w = block_on(t.resume_state()).unwrap();
    assert_eq!(w.progress.step, 4);
    assert_eq!(w.progress.loss_scale.unwrap().skipped_steps, 4, "2⁹⁹…2⁹⁷ overflow too: all skipped");
    assert_eq!(bits(&w.weights), bits(&before), "still no weight moved");
}
