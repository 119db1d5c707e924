//! Dropout in training: masks are a function of (seed, step, site, element), so a resumed
//! run draws the masks the uninterrupted one draws (bit for bit), a step cut into row parts
//! draws the masks of the uncut step, and evaluation draws none.

use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_model::{Dataset, ModelConfig, Preset, Split};
use tinygpt_optim::{TrainedSet, Trainer, TrainingConfig};
use tinygpt_tensor::block_on;

const TEXT: &[u8] = include_bytes!("../../data/tinyshakespeare.txt");

fn setup(dropout: f32, batch_size: usize) -> (ModelConfig, TrainingConfig, Dataset) {
    let model = ModelConfig { dropout, ..Preset::by_name("tiny").unwrap().model };
    let training = TrainingConfig {
        batch_size,
        max_steps: 20,
        warmup_steps: 2,
        learning_rate: 3e-3,
        ..Default::default()
    };
    let dataset = Dataset::new("shakespeare", &TEXT[..200_000], model.context_length, training.seed).unwrap();
    (model, training, dataset)
}

fn trainer(dropout: f32, batch_size: usize) -> Trainer<CpuBackend> {
    let (model, training, dataset) = setup(dropout, batch_size);
    Trainer::new(TrainedSet::whole_model(&CpuBackend::new(2), model), training, dataset, None).unwrap()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn a_resumed_run_draws_the_masks_of_the_uninterrupted_one() {
    let mut straight = trainer(0.2, 4);
    let want: Vec<f32> = (0..6).map(|_| straight.step().unwrap().train_loss).collect();
    let mut first = trainer(0.2, 4);
    let mut got: Vec<f32> = (0..3).map(|_| first.step().unwrap().train_loss).collect();
    let state = block_on(first.resume_state()).unwrap();
    drop(first);
    let (model, training, dataset) = setup(0.2, 4);
    let mut resumed =
        Trainer::new(TrainedSet::whole_model(&CpuBackend::new(2), model), training, dataset, Some(state))
            .unwrap();
    got.extend((0..3).map(|_| resumed.step().unwrap().train_loss));
    assert_eq!(bits(&got), bits(&want), "losses {got:?} vs {want:?}");
    let (a, b) = (block_on(straight.resume_state()).unwrap(), block_on(resumed.resume_state()).unwrap());
    assert_eq!(bits(&a.weights), bits(&b.weights), "weights");

    // Dropout is on: the same run without it takes other steps.
    let mut plain = trainer(0.0, 4);
    let without: Vec<f32> = (0..6).map(|_| plain.step().unwrap().train_loss).collect();
    assert_ne!(bits(&without), bits(&want));
}

#[test]
fn a_step_in_row_parts_draws_the_masks_of_the_whole_step() {
    let (mut whole, mut parts) = (trainer(0.2, 12), trainer(0.2, 12));
    for _ in 0..3 {
        let w = whole.step().unwrap();
        assert_eq!(parts.step_part(5).unwrap(), None);
        assert_eq!(parts.step_part(5).unwrap(), None);
        let p = parts.step_part(5).unwrap().expect("the last rows end the step");
        // Rounding of the summed parts only (1e-5, as without dropout); a part drawing
        // other masks than its rows' would move the loss by about 1e-2.
        let rel = ((p.train_loss - w.train_loss) / w.train_loss).abs();
        assert!(rel <= 1e-5, "step {}: parts {} vs whole {}", w.step, p.train_loss, w.train_loss);
    }
}

#[test]
fn evaluation_draws_no_masks() {
    // The same weights evaluate to the same loss with and without dropout configured.
    let (with, without) = (trainer(0.5, 4), trainer(0.0, 4));
    let (a, b) = (with.evaluate(Split::Val).unwrap(), without.evaluate(Split::Val).unwrap());
    assert_eq!(a.to_bits(), b.to_bits(), "val loss with dropout 0.5 configured {a}, without {b}");
}
