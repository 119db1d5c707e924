//! Resume is exact through a checkpoint: N+M steps in one run equal N steps, a save to
//! disk (and an export to one file), a load, and M more steps — bit for bit, on the CPU
//! backend.
#![cfg(not(target_arch = "wasm32"))]

use tinygpt_ckpt::{
    check_compatible, export_safetensors, import_safetensors, Checkpoint, CheckpointDir, LoadOptions,
};
use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_model::{Dataset, Preset, Split};
use tinygpt_optim::{ResumeState, TrainedSet, Trainer, TrainingConfig};
use tinygpt_tensor::block_on;

const TEXT: &[u8] = include_bytes!("../../data/tinyshakespeare.txt");

fn steps(t: &mut Trainer<CpuBackend>, n: usize) {
    for _ in 0..n {
        let r = t.step().unwrap();
        if r.eval_due {
            let val = t.evaluate(Split::Val).unwrap();
            t.record_eval(r.train_loss, val);
        }
    }
}

fn snapshot(t: &Trainer<CpuBackend>) -> Checkpoint {
    block_on(t.checkpoint()).unwrap()
}

fn resume(backend: &CpuBackend, ckpt: Checkpoint, dataset: Dataset) -> Trainer<CpuBackend> {
    check_compatible(&ckpt, &ckpt.model_config, dataset.manifest()).unwrap();
    let (trained, config, state) = ResumeState::from_checkpoint(backend, ckpt);
    Trainer::new(trained, config, dataset, Some(state)).unwrap()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn n_plus_m_steps_equal_n_steps_checkpointed_and_m_more() {
    let backend = CpuBackend::new(2);
    let model = Preset::by_name("tiny").unwrap().model;
    let training = TrainingConfig {
        batch_size: 4,
        max_steps: 10,
        warmup_steps: 3,
        eval_interval: 4,
        ..Default::default()
    };
    let dataset = Dataset::new("shakespeare", &TEXT[..200_000], model.context_length, training.seed).unwrap();

    let mut straight = Trainer::new(
        TrainedSet::whole_model(&backend, model.clone()),
        training.clone(),
        dataset.clone(),
        None,
    )
    .unwrap();
    steps(&mut straight, 10);
    let want = snapshot(&straight);
    assert_eq!(want.loss_history.iter().map(|p| p.step).collect::<Vec<_>>(), (1..=10).collect::<Vec<_>>());
    let evals = want.loss_history.iter().filter(|p| p.val_loss.is_some()).map(|p| p.step);
    assert_eq!(evals.collect::<Vec<_>>(), [4, 8, 10]);

    let mut first =
        Trainer::new(TrainedSet::whole_model(&backend, model), training, dataset.clone(), None).unwrap();
    steps(&mut first, 6);
    let tmp = tempfile::tempdir().unwrap();
    let dir = CheckpointDir::open(tmp.path()).unwrap();
    dir.save(&snapshot(&first)).unwrap();
    let one_file = export_safetensors(&snapshot(&first), true).unwrap();
    drop(first);

    for (how, loaded) in [
        ("directory", dir.load_latest().unwrap()),
        ("safetensors", import_safetensors(&one_file, &LoadOptions::default()).unwrap()),
    ] {
        let mut resumed = resume(&backend, loaded, dataset.clone());
        steps(&mut resumed, 4);
        let got = snapshot(&resumed);
        assert_eq!(bits(&got.weights), bits(&want.weights), "{how}: weights");
        assert_eq!(bits(&got.adam_m), bits(&want.adam_m), "{how}: adam_m");
        assert_eq!(bits(&got.adam_v), bits(&want.adam_v), "{how}: adam_v");
        assert_eq!(got.loss_history, want.loss_history, "{how}: loss history");
        assert_eq!(got.progress, want.progress, "{how}: progress");
    }
}
