//! The tied head's cross-entropy in row chunks (`tinygpt_model::head_loss`) on wgpu against
//! the CPU backend: the row copies, chunked products and the chunks' weighted sum give the
//! CPU's loss and gradients.

use tinygpt_autograd::{Tape, Var};
use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_kernels_wgsl::testing::shared_backend;
use tinygpt_model::head_loss::head_cross_entropy_in_chunks;
use tinygpt_tensor::{Backend, Rng, Tensor};

/// Loss, dx and dtable over 3 × 7 rows of width 16 and a vocabulary of 40, in chunks of
/// `chunk` rows.
fn loss_and_grads<B: Backend>(backend: &B, chunk: usize) -> Vec<Vec<f32>> {
    let mut rng = Rng::new(3);
    let mut randn = |n: usize| -> Vec<f32> { (0..n).map(|_| rng.normal() as f32).collect() };
    let tape = Tape::new();
    let x = tape.leaf(&Tensor::from_slice(backend, &randn(21 * 16), [3, 7, 16]), true);
    let table = tape.leaf(&Tensor::from_slice(backend, &randn(40 * 16), [40, 16]), true);
    let targets: Vec<u32> = (0..21).map(|i| (i * 11 % 40) as u32).collect();
    let loss = head_cross_entropy_in_chunks(&tape, &x, &table, &targets, chunk);
    let grads = tape.backward(&loss);
    let read = |t: &Tensor<B>| t.to_vec().unwrap();
    let grad = |v: &Var<B>| read(grads.get(v).unwrap());
    vec![read(loss.value()), grad(&x), grad(&table)]
}

/// Tolerance: 1e-5 absolute + 1e-4 relative (sums of 16 to 21 products, in another order
/// on the GPU).
#[test]
fn chunked_head_on_wgpu_matches_the_cpu() {
    let Some(gpu) = shared_backend() else { return };
    let cpu = CpuBackend::new(1);
    for chunk in [1, 5, 21] {
        let (on_gpu, on_cpu) = (loss_and_grads(&gpu, chunk), loss_and_grads(&cpu, chunk));
        for (name, (g, c)) in ["loss", "dx", "dtable"].iter().zip(on_gpu.iter().zip(&on_cpu)) {
            assert_eq!(g.len(), c.len());
            for (i, (a, b)) in g.iter().zip(c).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-5 + 1e-4 * b.abs(),
                    "chunks of {chunk}: {name}[{i}] wgpu {a}, cpu {b}"
                );
            }
        }
    }
}
