//! The hook: every op's inputs are read back and checked before it runs, its outputs
//! after; the first breach is kept and returned by the next `read` or `flush`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tinygpt_tensor::{
    block_on, read_vec, Backend, BadValue, Effect, Flow, Hook, Hooked, Op, Operand, TensorError,
};

/// A backend that runs `B` and checks each op's operands (lengths against the op's sizes,
/// NaN and infinities everywhere, probabilities within [0, 1], variances and losses ≥ 0):
/// `B` wrapped in [`Hooked`] with the [`Checks`] hook. `Checked::new(inner)` wraps;
/// `breach()` (the hook's, through the wrapper) asks.
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
pub type Checked<B> = Hooked<B, Checks>;

/// The checking hook of [`Checked`]; clones share the call count and the breach.
#[derive(Clone, Debug, Default)]
pub struct Checks {
    state: Arc<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Ops that write or compute, so far: a breach's call number.
    calls: AtomicU64,
    /// The op now running's call number.
    current: AtomicU64,
    first_breach: Mutex<Option<TensorError>>,
}

impl Checks {
    /// The first breach found so far, if any (also returned by the next read or flush).
    pub fn breach(&self) -> Option<TensorError> {
        self.state.first_breach.lock().unwrap().clone()
    }

    fn record(&self, op: &Op<'_, impl Sized>, (operand, detail): (String, String)) {
        let error = TensorError::BadValue(Box::new(BadValue {
            op: op.name.into(),
            index: self.state.current.load(Ordering::Relaxed),
            shape: op.shape(),
            operand,
            detail,
        }));
        *self.state.first_breach.lock().unwrap() = Some(error);
    }

    /// The first operand that breaks its rule, as (`"input x"`, what is wrong); panics on an
    /// operand too short for the op's sizes.
    fn first_breach<B: Backend>(
        inner: &B,
        op: &str,
        operands: &[Operand<B::Storage>],
        role: &str,
    ) -> Option<(String, String)> {
        operands.iter().find_map(|operand| {
            let detail = match block_on(read_vec(inner, &operand.buffer)) {
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
}

impl<B: Backend> Hook<B> for Checks {
    fn name(&self, inner: &B) -> String {
        format!("checked {}", inner.name())
    }

    /// Uploads are the caller's data, passed on as given; the ops that use them check
    /// them. An input breach is recorded before `B` runs: `B` may panic on it (a short buffer).
    fn before(&self, inner: &B, op: &Op<'_, B::Storage>) -> Flow {
        if op.effect == Effect::Memory {
            return Flow::Run;
        }
        let index = self.state.calls.fetch_add(1, Ordering::Relaxed);
        self.state.current.store(index, Ordering::Relaxed);
        if self.breach().is_none() {
            if let Some(found) = Self::first_breach(inner, op.name, &op.inputs(), "input") {
                self.record(op, found);
            }
        }
        Flow::Run
    }

    fn after(&self, inner: &B, op: &Op<'_, B::Storage>, outputs: &dyn Fn() -> Vec<Operand<B::Storage>>) {
        if self.breach().is_none() {
            if let Some(found) = Self::first_breach(inner, op.name, &outputs(), "output") {
                self.record(op, found);
            }
        }
    }

    /// `Err` with the first breach, if there was one.
    fn verdict(&self) -> Result<(), TensorError> {
        self.breach().map_or(Ok(()), Err)
    }
}
