//! The tied head's cross-entropy in row chunks: the value and gradients of one product and
//! one cross-entropy, and chunks only where the head is large.

use tinygpt_autograd::{Tape, Var};
use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_model::head_loss::{head_chunk_rows, head_cross_entropy_in_chunks, CHUNK_MULTIPLY_ADDS};
use tinygpt_model::Preset;
use tinygpt_tensor::{Rng, Tensor};

fn randn(b: &CpuBackend, shape: &[usize], seed: u64) -> Tensor<CpuBackend> {
    let mut rng = Rng::new(seed);
    let v: Vec<f32> = (0..shape.iter().product()).map(|_| rng.normal() as f32).collect();
    Tensor::from_slice(b, &v, shape)
}

/// Loss, dx and dtable of the head over 2 × 5 rows of width 6 and a vocabulary of 11, in
/// chunks of `chunk` rows.
fn loss_and_grads(chunk: usize) -> [Vec<f32>; 3] {
    let b = CpuBackend::new(1);
    let tape = Tape::new();
    let x = tape.leaf(&randn(&b, &[2, 5, 6], 1), true);
    let table = tape.leaf(&randn(&b, &[11, 6], 2), true);
    let targets: Vec<u32> = (0..10).map(|i| (i * 7 % 11) as u32).collect();
    let loss = head_cross_entropy_in_chunks(&tape, &x, &table, &targets, chunk);
    let grads = tape.backward(&loss);
    let read = |v: &Var<CpuBackend>| v.value().to_vec().unwrap();
    [read(&loss), grads.get(&x).unwrap().to_vec().unwrap(), grads.get(&table).unwrap().to_vec().unwrap()]
}

/// Tolerance: 1e-6 absolute + 1e-5 relative, the f32 rounding of sums taken in another
/// order (chunk means weighted and added, gradients gathered chunk by chunk).
#[test]
fn chunks_give_the_value_and_gradients_of_one_product() {
    let whole = loss_and_grads(10);
    for chunk in [1, 3, 4, 9] {
        let parts = loss_and_grads(chunk);
        for (name, (w, p)) in ["loss", "dx", "dtable"].iter().zip(whole.iter().zip(&parts)) {
            assert_eq!(w.len(), p.len());
            for (i, (a, b)) in w.iter().zip(p).enumerate() {
                assert!((a - b).abs() <= 1e-6 + 1e-5 * a.abs(), "chunks of {chunk}: {name}[{i}] {a} vs {b}");
            }
        }
    }
}

#[test]
fn only_a_large_head_is_cut_by_the_workers_budget() {
    // Every preset's byte vocabulary, and nanoGPT's Shakespeare recipe (65 characters):
    // one chunk, the ops as before.
    for p in Preset::all() {
        let rows = p.batch_size * p.model.context_length;
        assert_eq!(
            head_chunk_rows(rows, p.model.d_model, p.model.vocab_size, CHUNK_MULTIPLY_ADDS),
            rows,
            "{}",
            p.name
        );
    }
    assert_eq!(head_chunk_rows(64 * 256, 384, 65, CHUNK_MULTIPLY_ADDS), 64 * 256);
    // GPT-2-124M at batch 4 × 256: 55 rows of 768 × 50,257 a chunk, each under the bound.
    let rows = head_chunk_rows(4 * 256, 768, 50_257, CHUNK_MULTIPLY_ADDS);
    assert_eq!(rows, 55);
    assert!(rows * 768 * 50_257 <= CHUNK_MULTIPLY_ADDS);
    assert!((rows + 1) * 768 * 50_257 > CHUNK_MULTIPLY_ADDS);
    assert_eq!(head_chunk_rows(3, 1 << 20, 1 << 20, CHUNK_MULTIPLY_ADDS), 1, "at least a row");
}

/// A model takes its head whole unless a caller sets a budget, and a budget changes the
/// chunks, not the loss or the gradients (the tolerance of the test above).
#[test]
fn a_models_chunk_budget_changes_no_loss_or_gradient() {
    let b = CpuBackend::new(1);
    let config = tinygpt_model::ModelConfig {
        context_length: 5,
        n_layers: 1,
        n_heads: 2,
        d_model: 8,
        d_mlp: 16,
        ..tinygpt_model::ModelConfig::reference()
    };
    let mut model = tinygpt_model::Gpt::init(&b, config, &mut Rng::new(3)).unwrap();
    assert_eq!(model.head_chunk_budget(), None, "native callers take the head whole");
    let inputs: Vec<u32> = (0..10).map(|i| (i * 37 % 256) as u32).collect();
    let targets: Vec<u32> = (0..10).map(|i| (i * 91 % 256) as u32).collect();
    let run = |model: &tinygpt_model::Gpt<CpuBackend>| {
        let tape = Tape::new();
        let mut vars = Vec::new();
        let ids = tinygpt_tensor::Indices::new(&b, &inputs);
        let loss = model.loss_into(&tape, None, &ids, &targets, 2, 5, None, &mut vars);
        let grads = tape.backward(&loss);
        let mut out = loss.value().to_vec().unwrap();
        for v in &vars {
            out.extend(grads.get(v).unwrap().to_vec().unwrap());
        }
        out
    };
    let whole = run(&model);
    // 3 rows of 8 × 256 a chunk: chunks of 3, 3, 3 and 1 rows.
    model.set_head_chunk_budget(Some(3 * 8 * 256));
    let chunked = run(&model);
    assert_eq!(whole.len(), chunked.len());
    for (i, (a, c)) in whole.iter().zip(&chunked).enumerate() {
        assert!((a - c).abs() <= 1e-6 + 1e-5 * a.abs(), "value {i}: whole {a}, chunked {c}");
    }
}
