//! À la carte: a model that is not the GPT — a two-layer MLP that learns whether a point
//! lies inside a circle — built on `tinygpt-tensor` + `tinygpt-autograd` + one kernel crate,
//! with plain SGD written out (no `tinygpt-model`, `-optim` or `-ckpt`).
//!
//!     cargo run --release -p tinygpt-autograd --example mlp

use tinygpt_autograd::Tape;
use tinygpt_kernels_cpu::CpuBackend;
use tinygpt_tensor::{Indices, Rng, Tensor, TensorError};

const POINTS: usize = 256;
const HIDDEN: usize = 32;

fn main() -> Result<(), TensorError> {
    let backend = CpuBackend::new(1);
    let mut rng = Rng::new(42);
    let mut normal = |n: usize, std: f32| -> Vec<f32> { (0..n).map(|_| rng.normal() as f32 * std).collect() };

    // The data: points in [-1, 1]², class 1 inside the circle of radius 0.6.
    let xy = normal(POINTS * 2, 0.6);
    let labels: Vec<u32> = xy.chunks(2).map(|p| u32::from(p[0] * p[0] + p[1] * p[1] < 0.36)).collect();
    let x = Tensor::from_slice(&backend, &xy, [POINTS, 2]);
    let y = Indices::new(&backend, &labels);

    // Parameters, PyTorch's Linear layout (`[out, in]`).
    let mut params = [
        Tensor::from_slice(&backend, &normal(HIDDEN * 2, 0.7), [HIDDEN, 2]),
        Tensor::zeros(&backend, [HIDDEN]),
        Tensor::from_slice(&backend, &normal(2 * HIDDEN, 0.2), [2, HIDDEN]),
        Tensor::zeros(&backend, [2]),
    ];

    for step in 0..=300 {
        let tape = Tape::new();
        let [w1, b1, w2, b2] = params.each_ref().map(|p| tape.leaf(p, true));
        let hidden = tape.gelu(&tape.linear(&tape.constant(&x), &w1, Some(&b1)));
        let logits = tape.linear(&hidden, &w2, Some(&b2));
        let loss = tape.cross_entropy(&logits, &y);
        let grads = tape.backward(&loss);
        for (param, var) in params.iter_mut().zip([&w1, &b1, &w2, &b2]) {
            *param = param.add(&grads.get(var).expect("every parameter gets a gradient").scale(-0.5));
        }
        if step % 50 == 0 {
            let predicted = logits.value().to_vec()?;
            let correct =
                predicted.chunks(2).zip(&labels).filter(|(l, &c)| u32::from(l[1] > l[0]) == c).count();
            println!("step {step:3}  loss {:.4}  accuracy {correct}/{POINTS}", loss.value().to_scalar()?);
        }
    }
    Ok(())
}
