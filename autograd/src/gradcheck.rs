//! Finite-difference gradient checking, for tests of every op and of whole models.
//!
//! The function under test maps input vars to an output of any shape; it is reduced to a
//! scalar `L = Σ r ⊙ out` with a fixed random `r`, whose analytic gradient comes from
//! [`Tape::backward_from`] and whose numeric gradient comes from central differences,
//! summed in f64 so that the check's own rounding stays far below the tolerance.

use tinygpt_tensor::{Backend, Rng, Tensor};

use crate::tape::{Tape, Var};

/// How far an analytic gradient may sit from the numeric one: `|a - n| <= abs + rel * |n|`.
#[derive(Clone, Copy, Debug)]
pub struct Tolerance {
    /// Absolute difference always accepted.
    pub abs: f64,
    /// Difference accepted relative to the larger gradient's magnitude.
    pub rel: f64,
}

/// Settings of one check.
#[derive(Clone, Copy, Debug)]
pub struct GradCheck {
    /// Finite-difference step.
    pub eps: f32,
    /// When an analytic and a numeric gradient agree.
    pub tolerance: Tolerance,
    /// At most this many elements of each input are perturbed (chosen by `seed`).
    pub max_elements: usize,
    /// Seeds the choice of elements to check.
    pub seed: u64,
}

impl Default for GradCheck {
    fn default() -> Self {
        GradCheck { eps: 1e-2, tolerance: Tolerance { abs: 2e-3, rel: 2e-2 }, max_elements: 64, seed: 1 }
    }
}

/// One disagreement between analytic and numeric gradients.
#[derive(Clone, Debug)]
pub struct Mismatch {
    /// Which input (in the order given).
    pub input: usize,
    /// Which element of it.
    pub element: usize,
    /// The gradient the backward pass computed.
    pub analytic: f64,
    /// The gradient by central finite differences.
    pub numeric: f64,
}

impl GradCheck {
    /// Checks `f`'s gradient with respect to every input; returns the worst mismatches
    /// (empty when all elements pass). Panics if `f` gives no gradient for an input.
    pub fn run<B: Backend>(
        &self,
        inputs: &[Tensor<B>],
        f: impl Fn(&Tape<B>, &[Var<B>]) -> Var<B>,
    ) -> Vec<Mismatch> {
        let backend = inputs[0].backend().clone();
        let mut rng = Rng::new(self.seed);
        let eval = |values: &[Tensor<B>], tape: &Tape<B>| -> Var<B> {
            let vars: Vec<Var<B>> = values.iter().map(|t| tape.leaf(t, true)).collect();
            f(tape, &vars)
        };

        let tape = Tape::new();
        let vars: Vec<Var<B>> = inputs.iter().map(|t| tape.leaf(t, true)).collect();
        let out = f(&tape, &vars);
        let weights: Vec<f32> = (0..out.value().numel()).map(|_| rng.normal() as f32).collect();
        let seed = Tensor::from_slice(&backend, &weights, out.value().shape().clone());
        let grads = tape.backward_from(&out, seed);

        // Probed on a recording tape like the analytic pass: what runs only in training
        // (dropout, with its masks fixed by the caller) must run in the probes too.
        let objective = |values: &[Tensor<B>]| -> f64 {
            let out = eval(values, &Tape::new()).value().to_vec().expect("readback");
            out.iter().zip(&weights).map(|(&o, &w)| o as f64 * w as f64).sum()
        };

        let mut mismatches = Vec::new();
        for (i, input) in inputs.iter().enumerate() {
            let analytic = grads
                .get(&vars[i])
                .unwrap_or_else(|| panic!("no gradient reached input {i}"))
                .to_vec()
                .expect("readback");
            let host = input.to_vec().expect("readback");
            let picks: Vec<usize> = if host.len() <= self.max_elements {
                (0..host.len()).collect()
            } else {
                (0..self.max_elements).map(|_| rng.below(host.len() as u64) as usize).collect()
            };
            for e in picks {
                let perturbed = |delta: f32| {
                    let mut h = host.clone();
                    h[e] += delta;
                    let mut values = inputs.to_vec();
                    values[i] = Tensor::from_slice(&backend, &h, input.shape().clone());
                    objective(&values)
                };
                let numeric = (perturbed(self.eps) - perturbed(-self.eps)) / (2.0 * self.eps as f64);
                let a = analytic[e] as f64;
                if (a - numeric).abs() > self.tolerance.abs + self.tolerance.rel * numeric.abs() {
                    mismatches.push(Mismatch { input: i, element: e, analytic: a, numeric });
                }
            }
        }
        mismatches
    }
}
