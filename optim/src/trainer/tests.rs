//! The trainer's unit tests: parts against whole steps, given-up parts, deferred reads.

use tinygpt_autograd::Tape;
use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_model::{Dataset, Preset, Split};
use tinygpt_tensor::{block_on, Indices};

use super::*;
use crate::evaluation::Evaluation;
use crate::schedule::learning_rate;

const TEXT: &[u8] = include_bytes!("../../../data/tinyshakespeare.txt");

fn trainer(batch_size: usize) -> Trainer<CpuBackend> {
    let model = Preset::by_name("tiny").unwrap().model;
    let config = TrainingConfig {
        batch_size,
        max_steps: 100,
        warmup_steps: 2,
        learning_rate: 3e-3,
        ..Default::default()
    };
    let dataset = Dataset::new("shakespeare", &TEXT[..100_000], model.context_length, config.seed).unwrap();
    Trainer::new(TrainedSet::whole_model(&CpuBackend::new(1), model), config, dataset, None).unwrap()
}

/// The step as it was before steps could be split (one forward and backward over the
/// whole batch, AdamW, then the loss read back): the oracle for a one-part step.
async fn reference_step(t: &mut Trainer<CpuBackend>) -> f32 {
    let (batch, seq) = (t.config.batch_size, t.model.config().context_length);
    let data = t.dataset.batch(Split::Train, batch, seq, &mut t.rng);
    let backend = t.model.params().tensors()[0].backend().clone();
    let inputs = Indices::new(&backend, &data.inputs);
    let targets = Indices::new(&backend, &data.targets);
    let tape = Tape::new();
    let (loss, fwd) = t.model.loss(&tape, &inputs, &targets, batch, seq);
    let mut grads = tape.backward(&loss);
    let grads: Vec<_> = fwd.params.iter().map(|p| grads.take(p)).collect();
    drop(tape);
    let lr = learning_rate(&t.config, t.progress.step);
    t.optimizer.update(t.model.params().tensors(), &grads, lr, &t.config);
    let train_loss = loss.value().read().await.unwrap()[0];
    t.progress.step += 1;
    t.progress.rng_state = t.rng.state();
    train_loss
}

fn state(t: &Trainer<CpuBackend>) -> ResumeState {
    block_on(t.resume_state()).unwrap()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn relative(a: f32, b: f32) -> f32 {
    (a - b).abs() / b.abs().max(1e-12)
}

#[test]
fn one_part_of_the_whole_batch_is_the_plain_step_bit_for_bit() {
    let (mut reference, mut one_part, mut plain) = (trainer(8), trainer(8), trainer(8));
    for _ in 0..4 {
        let expected = block_on(reference_step(&mut reference));
        let part = one_part.step_part(8).unwrap().expect("a whole-batch part ends the step");
        let step = plain.step().unwrap();
        assert_eq!(part.train_loss.to_bits(), expected.to_bits(), "{} vs {expected}", part.train_loss);
        assert_eq!(step, part);
    }
    let (r, p, s) = (state(&reference), state(&one_part), state(&plain));
    for other in [&p, &s] {
        assert_eq!(bits(&other.weights), bits(&r.weights), "weights");
        assert_eq!(bits(&other.adam_m), bits(&r.adam_m), "adam_m");
        assert_eq!(bits(&other.adam_v), bits(&r.adam_v), "adam_v");
        assert_eq!(other.progress.rng_state, r.progress.rng_state, "batch sampler");
    }
}

#[test]
fn several_parts_match_the_whole_step_within_rounding() {
    let (mut whole, mut parts) = (trainer(12), trainer(12));
    for _ in 0..5 {
        let w = whole.step().unwrap();
        // Uneven parts: 5 + 5 + the 2 rows left.
        assert_eq!(parts.step_part(5).unwrap(), None);
        assert_eq!(parts.rows_done(), 5);
        assert_eq!(parts.step_part(5).unwrap(), None);
        let p = parts.step_part(5).unwrap().expect("the last rows end the step");
        assert_eq!(parts.rows_done(), 0);
        assert_eq!((p.step, p.lr.to_bits(), p.tokens), (w.step, w.lr.to_bits(), w.tokens));
        let rel = relative(p.train_loss, w.train_loss);
        assert!(rel <= 1e-5, "step {}: {} vs {} (relative {rel:e})", w.step, p.train_loss, w.train_loss);
    }
    let (w, p) = (state(&whole), state(&parts));
    assert_eq!(p.progress, w.progress, "same step count, tokens and sampler state");
    // Rounding in the summed gradients moves each AdamW update (about lr = 3e-3 a step) by
    // far less than 1e-5 over these 5 steps (about 1.4e-6 at worst when written).
    for (name, a, b) in [("weights", &w.weights, &p.weights), ("adam_m", &w.adam_m, &p.adam_m)] {
        let worst = a.iter().zip(b.iter()).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max);
        assert!(worst <= 1e-5, "{name}: worst difference {worst:e}");
    }
}

#[test]
fn a_part_given_up_changes_nothing_and_is_taken_again_the_same() {
    let (mut plain, mut gives_up) = (trainer(12), trainer(12));
    for _ in 0..3 {
        // A whole step given up, then taken.
        let before = state(&gives_up);
        assert_eq!(gives_up.queue_part(12, || true), RowPart::GivenUp);
        let after = state(&gives_up);
        assert_eq!(gives_up.rows_done(), 0);
        assert_eq!(after.progress, before.progress, "step count, tokens and sampler state");
        assert_eq!(bits(&after.weights), bits(&before.weights), "weights");
        assert_eq!(bits(&after.adam_m), bits(&before.adam_m), "adam_m");
        assert_eq!(gives_up.unread_losses(), plain.unread_losses());
        let expected = plain.step().unwrap();
        assert_eq!(gives_up.step().unwrap(), expected);
    }
    // Parts: the second of 6 + 6 rows given up once, then taken.
    let (mut parts, mut gives_up_parts) = (trainer(12), trainer(12));
    assert_eq!(parts.step_part(6).unwrap(), None);
    let expected = parts.step_part(6).unwrap().expect("the last rows end the step");
    assert_eq!(gives_up_parts.step_part(6).unwrap(), None);
    assert_eq!(gives_up_parts.queue_part(6, || true), RowPart::GivenUp);
    assert_eq!(gives_up_parts.rows_done(), 6, "the first part stays");
    assert_eq!(gives_up_parts.step_part(6).unwrap().expect("the last rows end the step"), expected);
    let (p, g) = (state(&parts), state(&gives_up_parts));
    assert_eq!(bits(&g.weights), bits(&p.weights), "weights");
    assert_eq!(bits(&g.adam_v), bits(&p.adam_v), "adam_v");
}

#[test]
fn deferred_steps_read_later_are_the_same_steps() {
    let (mut read_now, mut deferred) = (trainer(12), trainer(12));
    let mut expected = Vec::new();
    for _ in 0..9 {
        let a = read_now.step_part(5).unwrap();
        let b = deferred.step_part_deferred(5);
        assert_eq!(a.is_some(), b.is_some(), "the same parts end the same steps");
        if let (Some(a), Some(b)) = (a, b) {
            assert_eq!(
                (b.step, b.lr.to_bits(), b.tokens, b.eval_due),
                (a.step, a.lr.to_bits(), a.tokens, a.eval_due)
            );
            expected.push(a.train_loss);
        }
    }
    assert_eq!(expected.len(), 3, "9 parts of 5, 5, 2 rows are 3 steps");
    assert_eq!((deferred.unread_losses(), deferred.history().len()), (3, 0));
    // A checkpoint taken now still has every step in its history.
    let unread_state = state(&deferred);
    // The losses are read only now, after later steps changed the weights.
    let points = block_on(deferred.read_losses()).unwrap();
    assert_eq!(deferred.unread_losses(), 0);
    for history in [&points[..], deferred.history(), read_now.history(), &unread_state.history] {
        let steps: Vec<_> = history.iter().map(|p| p.step).collect();
        let losses: Vec<_> = history.iter().map(|p| p.train_loss.to_bits()).collect();
        assert_eq!(steps, [1, 2, 3]);
        assert_eq!(losses, bits(&expected));
    }
    assert_eq!(bits(&state(&deferred).weights), bits(&state(&read_now).weights));
}

#[test]
fn between_parts_the_trainer_is_still_at_the_step_before() {
    let mut t = trainer(8);
    t.step().unwrap();
    let before = state(&t);
    assert_eq!(t.step_part(3).unwrap(), None);
    let during = state(&t);
    assert_eq!(bits(&during.weights), bits(&before.weights));
    assert_eq!(during.progress, before.progress, "a checkpoint now would replay the whole step");
    let finished = t.step_part(8).unwrap().expect("the 5 rows left end the step");
    assert_eq!(finished.step, 2);

    let (model, config, data) = (t.model.config().clone(), t.config.clone(), t.dataset.clone());
    let mut resumed =
        Trainer::new(TrainedSet::whole_model(&CpuBackend::new(1), model), config, data, Some(before))
            .unwrap();
    let whole = resumed.step().unwrap();
    assert!(relative(finished.train_loss, whole.train_loss) <= 1e-5, "{finished:?} vs {whole:?}");
    assert_eq!(state(&resumed).progress, state(&t).progress);
}

#[test]
fn evaluation_in_parts_matches_whole_batches() {
    let mut t = trainer(8);
    t.step().unwrap();
    let expected = t.evaluate(Split::Val).unwrap();
    let score = |rows: usize| {
        let mut eval = Evaluation::new(&t, Split::Val);
        let mut parts = 0;
        loop {
            parts += 1;
            if let Some(loss) = block_on(eval.next_part(&t, rows)).unwrap() {
                return (loss, parts);
            }
        }
    };
    let batches = t.config.eval_batches;
    assert_eq!(score(8), (expected, batches), "one part a batch is next_batch bit for bit");
    let (split, parts) = score(3);
    assert_eq!(parts, 3 * batches, "3 + 3 + 2 rows a batch");
    assert!(relative(split, expected) <= 1e-6, "{split} vs {expected}");
}
