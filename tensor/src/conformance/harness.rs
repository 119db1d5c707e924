//! Small helpers shared by the checks: random inputs, readback, objectives.

use crate::{read_vec, Backend, Rng};

/// `len` values drawn from N(0, std²), rounded to f32.
pub(crate) fn normal(rng: &mut Rng, len: usize, std: f64) -> Vec<f32> {
    (0..len).map(|_| (rng.normal() * std) as f32).collect()
}

/// `len` ids drawn uniformly from `0..bound`.
pub(crate) fn ids(rng: &mut Rng, len: usize, bound: usize) -> Vec<u32> {
    (0..len).map(|_| rng.below(bound as u64) as u32).collect()
}

/// Reads a buffer back, panicking (naming `what`) if the backend reports an error.
/// Awaited, never blocked on, so the checks also run where a readback completes only when
/// the event loop turns (WebGPU in a browser).
pub(crate) async fn read<B: Backend>(backend: &B, storage: &B::Storage, what: &str) -> Vec<f32> {
    read_vec(backend, storage).await.unwrap_or_else(|e| panic!("{what}: readback failed: {e}"))
}

/// Reads a one-element buffer.
pub(crate) async fn read_scalar<B: Backend>(backend: &B, storage: &B::Storage, what: &str) -> f32 {
    let v = read(backend, storage, what).await;
    assert_eq!(v.len(), 1, "{what}: expected one value, got {}", v.len());
    v[0]
}

/// `Σ w_i · out_i` in f64: the scalar objective whose gradient with respect to `out` is
/// `w`, used to turn any op into a function finite differences can probe.
pub(crate) fn weighted_sum(out: &[f32], w: &[f32]) -> f64 {
    assert_eq!(out.len(), w.len(), "weighted_sum: lengths differ");
    out.iter().zip(w).map(|(&o, &w)| o as f64 * w as f64).sum()
}

/// Asserts that `storage` still holds `expected` bit for bit: ops must not write their inputs.
/// The message names the first changed element, its value before and after.
pub(crate) async fn assert_unchanged<B: Backend>(
    backend: &B,
    storage: &B::Storage,
    expected: &[f32],
    what: &str,
) {
    let now = read(backend, storage, what).await;
    assert_eq!(now.len(), expected.len(), "{what}: an op changed its input buffer's length");
    if let Some(i) = now.iter().zip(expected).position(|(a, b)| a.to_bits() != b.to_bits()) {
        panic!("{what}: an op modified its input buffer: [{i}] was {}, is now {}", expected[i], now[i]);
    }
}

/// Asserts that a fused op gave the very values of the ops it fuses (`want`), naming the
/// first element that differs.
pub(crate) fn assert_same_bits(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a.to_bits() != b.to_bits()) {
        panic!("{what}: [{i}] is {}, the unfused ops give {}", got[i], want[i]);
    }
}

/// [`assert_unchanged`] for each `(buffer, uploaded values, operand name)` of one op call,
/// named `what` (the op and its shape).
pub(crate) async fn assert_inputs_unchanged<B: Backend>(
    backend: &B,
    what: &str,
    inputs: &[(&B::Storage, &[f32], &str)],
) {
    for &(storage, expected, operand) in inputs {
        assert_unchanged(backend, storage, expected, &format!("{what}: input {operand}")).await;
    }
}
