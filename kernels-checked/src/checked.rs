//! The wrapper: every op's inputs are read back and checked before it runs, its outputs
//! after; the first breach is kept and returned by the next `read` or `flush`.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tinygpt_tensor::{block_on, Backend, BadValue, TensorError};

use crate::operand::Operand;

/// A backend that runs `B` and checks each op's operands (lengths against the op's sizes,
/// NaN and infinities everywhere, probabilities within [0, 1], variances and losses ≥ 0).
///
/// A buffer shorter than the op's sizes is a programming error and panics at once, naming
/// the op and the operand (the trait's rule for shape mistakes). Values cannot make an op
/// fail, so the first bad value is recorded, named by op, call number, sizes and
/// offending values, and comes back as [`TensorError::BadValue`] from the next
/// [`Backend::read`] or [`Backend::flush`] (where a training loop already looks for device
/// errors); later ops run unchecked. Checking reads every operand back with
/// [`block_on`], so it suits `B`s whose reads complete without an event loop: the CPU
/// backend anywhere, wgpu natively (not WebGPU in a browser, which needs one). It is a
/// debugging tool: expect a step to cost several times what `B` alone costs.
#[derive(Clone)]
pub struct Checked<B: Backend> {
    inner: B,
    state: Arc<State>,
}

#[derive(Default)]
struct State {
    calls: AtomicU64,
    first_breach: Mutex<Option<TensorError>>,
}

impl<B: Backend> fmt::Debug for Checked<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Checked").field("inner", &self.inner).field("breach", &self.breach()).finish()
    }
}

impl<B: Backend> Checked<B> {
    /// Checks every op `inner` runs.
    pub fn new(inner: B) -> Self {
        Checked { inner, state: Arc::default() }
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &B {
        &self.inner
    }

    /// The first breach found so far, if any (also returned by the next read or flush).
    pub fn breach(&self) -> Option<TensorError> {
        self.state.first_breach.lock().unwrap().clone()
    }

    /// Runs `run` on the inner backend, checking `inputs` before and the operands
    /// `outputs` picks from its result after. `shape` describes the op's sizes for the
    /// report; it is only formatted when something is wrong.
    pub(crate) fn op<R>(
        &self,
        op: &'static str,
        shape: impl FnOnce() -> String,
        inputs: Vec<Operand<B::Storage>>,
        run: impl FnOnce(&B) -> R,
        outputs: impl FnOnce(&R) -> Vec<Operand<B::Storage>>,
    ) -> R {
        let index = self.state.calls.fetch_add(1, Ordering::Relaxed);
        if self.breach().is_some() {
            return run(&self.inner);
        }
        // An input breach is recorded before `B` runs: `B` may panic on it (a short buffer).
        if let Some(found) = self.first_breach(op, &inputs, "input") {
            self.record(op, index, shape, found);
            return run(&self.inner);
        }
        let result = run(&self.inner);
        if let Some(found) = self.first_breach(op, &outputs(&result), "output") {
            self.record(op, index, shape, found);
        }
        result
    }

    fn record(
        &self,
        op: &str,
        index: u64,
        shape: impl FnOnce() -> String,
        (operand, detail): (String, String),
    ) {
        let error = TensorError::BadValue(Box::new(BadValue {
            op: op.into(),
            index,
            shape: shape(),
            operand,
            detail,
        }));
        *self.state.first_breach.lock().unwrap() = Some(error);
    }

    /// The first operand that breaks its rule, as (`"input x"`, what is wrong); panics on an
    /// operand too short for the op's sizes.
    fn first_breach(
        &self,
        op: &str,
        operands: &[Operand<B::Storage>],
        role: &str,
    ) -> Option<(String, String)> {
        operands.iter().find_map(|operand| {
            let detail = match block_on(self.inner.read(&operand.buffer)) {
                Ok(values) => {
                    if let Some(short) = operand.length_error(&values) {
                        panic!("{op}: {role} {} {short}", operand.name);
                    }
                    operand.breach(&values)?
                }
                Err(e) => format!("could not be read back ({e})"),
            };
            Some((format!("{role} {}", operand.name), detail))
        })
    }

    /// `Err` with the first breach, if there was one.
    pub(crate) fn verdict(&self) -> Result<(), TensorError> {
        self.breach().map_or(Ok(()), Err)
    }
}
