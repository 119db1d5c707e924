//! [`Hooked`]: the one wrapper backend. It runs every op on an inner backend and calls a
//! [`Hook`] around it, handing the hook the op's name, what kind of op it is, its sizes and
//! its operands. What a wrapper adds (checking values, counting calls, giving up a unit of
//! work) is a hook of a few dozen lines; the forwarding is written once, here, so no wrapper
//! can forget an op or leave it to a composition the inner backend never sees.
//!
//! ```
//! # use tinygpt_tensor::{Backend, Flow, Hook, Hooked, Op};
//! /// Logs every op's name.
//! #[derive(Clone, Debug, Default)]
//! struct Log;
//! impl<B: Backend> Hook<B> for Log {
//!     fn before(&self, _inner: &B, op: &Op<'_, B::Storage>) -> Flow {
//!         eprintln!("{}", op.name);
//!         Flow::Run
//!     }
//! }
//! # fn wrap<B: Backend>(inner: B) -> Hooked<B, Log> { Hooked::new(inner) }
//! ```

mod backend;
mod operand;
mod rule;

use std::fmt::Debug;

pub use operand::Operand;
pub use rule::Rule;

use crate::backend::Backend;
use crate::error::TensorError;

/// What an op does, for a hook deciding what to do around it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Allocates, uploads, reads back, waits or answers a question (`max_tensor_len`): no
    /// device work to check, and never skipped.
    Memory,
    /// Writes into buffers the caller passed (`copy`, `adamw`): its work outlives the call,
    /// so it is never skipped.
    Writes,
    /// Returns fresh buffers computed from its inputs: a hook may skip it (see [`Flow::Skip`]).
    Computes,
}

/// A hook's answer before an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Run the op on the inner backend.
    Run,
    /// Do not run it: its outputs are [`Hook::placeholder`]s of their documented sizes (a
    /// skipped `attention` keeping state keeps a softmax's worth). Honoured for
    /// [`Effect::Computes`] ops only; any other op runs.
    Skip,
}

/// An op as a hook sees it: its name in the trait, its [`Effect`], its sizes and its input
/// operands (built only when a hook asks for them, so a hook that only counts costs no
/// allocation).
pub struct Op<'a, S> {
    /// The trait method's name, e.g. `"matmul"`.
    pub name: &'static str,
    /// What the op does with its buffers.
    pub effect: Effect,
    inputs: &'a dyn Fn() -> Vec<Operand<S>>,
    shape: &'a dyn Fn() -> String,
}

impl<S> Op<'_, S> {
    /// The buffers the op reads, in argument order, with the part of each it reads and the
    /// rule its values must satisfy.
    pub fn inputs(&self) -> Vec<Operand<S>> {
        (self.inputs)()
    }

    /// The op's sizes in words, for a report (e.g. `"m 4, k 8, n 16, layout nt"`).
    pub fn shape(&self) -> String {
        (self.shape)()
    }
}

impl<S> Debug for Op<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Op").field("name", &self.name).field("effect", &self.effect).finish()
    }
}

/// What a wrapper adds around each op of the backend it wraps. Every method of
/// [`Backend`] but `name` passes through [`Hook::before`]; those that write or compute
/// (not [`Effect::Memory`]) also through [`Hook::after`] once they ran. `read` and `flush`
/// also report [`Hook::verdict`].
pub trait Hook<B: Backend>: Clone + Debug + 'static {
    /// The wrapped backend's name for logs, e.g. `"checked cpu"`. By default the inner one's.
    fn name(&self, inner: &B) -> String {
        inner.name()
    }

    /// Called before each op, with the inner backend (to read operands back, say).
    fn before(&self, inner: &B, op: &Op<'_, B::Storage>) -> Flow;

    /// Called after an op that writes or computes ran (not after a skipped one), with its outputs: the buffers it
    /// returned or wrote, built when called.
    fn after(&self, inner: &B, op: &Op<'_, B::Storage>, outputs: &dyn Fn() -> Vec<Operand<B::Storage>>) {
        let _ = (inner, op, outputs);
    }

    /// The output of `len` values of an op the hook skipped ([`Flow::Skip`]): by default
    /// fresh zeros. Nothing may rely on its values (they belong to work being given up),
    /// so a hook may hand the same buffer out again: the worker's does, because zeroing a
    /// fresh buffer for every skipped op of a GPT-2-sized step takes longer in a tab than
    /// the 200 ms that skipping is meant to keep a pause within.
    fn placeholder(&self, inner: &B, len: usize) -> B::Storage {
        inner.zeros(len)
    }

    /// An error that `read` and `flush` return instead of their own result
    /// (a read asks before it starts, a flush once the device is done). By default none.
    fn verdict(&self) -> Result<(), TensorError> {
        Ok(())
    }
}

/// `B` with `H` around every op. Results are `B`'s, bit for bit, unless the hook skips ops.
/// Dereferences to the hook, so a wrapper's own questions (`breach()`, `take()`) read as
/// the wrapper's.
#[derive(Clone, Debug, Default)]
pub struct Hooked<B, H> {
    inner: B,
    hook: H,
}

impl<B: Backend, H: Hook<B>> Hooked<B, H> {
    /// `inner` with a fresh hook.
    pub fn new(inner: B) -> Self
    where
        H: Default,
    {
        Hooked { inner, hook: H::default() }
    }

    /// `inner` with `hook`.
    pub fn with_hook(inner: B, hook: H) -> Self {
        Hooked { inner, hook }
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &B {
        &self.inner
    }

    /// The hook.
    pub fn hook(&self) -> &H {
        &self.hook
    }

    /// An op with nothing to check or skip (`Effect::Memory`): the hook sees it (`before`
    /// only), then it runs on the returned backend.
    fn memory(&self, name: &'static str) -> &B {
        let op = Op { name, effect: Effect::Memory, inputs: &Vec::new, shape: &String::new };
        self.hook.before(&self.inner, &op);
        &self.inner
    }

    /// An op that writes into the caller's buffers (`Effect::Writes`): never skipped.
    fn writes(
        &self,
        name: &'static str,
        inputs: &dyn Fn() -> Vec<Operand<B::Storage>>,
        shape: &dyn Fn() -> String,
        run: impl FnOnce(&B),
        outputs: &dyn Fn() -> Vec<Operand<B::Storage>>,
    ) {
        let op = Op { name, effect: Effect::Writes, inputs, shape };
        self.hook.before(&self.inner, &op);
        run(&self.inner);
        self.hook.after(&self.inner, &op, outputs);
    }

    /// An op that returns fresh buffers (`Effect::Computes`): `skipped` assembles its
    /// result from the hook's placeholders ([`Hook::placeholder`], by length) when the hook
    /// says [`Flow::Skip`].
    fn computes<R>(
        &self,
        name: &'static str,
        inputs: &dyn Fn() -> Vec<Operand<B::Storage>>,
        shape: &dyn Fn() -> String,
        run: impl FnOnce(&B) -> R,
        skipped: impl FnOnce(&dyn Fn(usize) -> B::Storage) -> R,
        outputs: impl Fn(&R) -> Vec<Operand<B::Storage>>,
    ) -> R {
        let op = Op { name, effect: Effect::Computes, inputs, shape };
        if self.hook.before(&self.inner, &op) == Flow::Skip {
            return skipped(&|len| self.hook.placeholder(&self.inner, len));
        }
        let result = run(&self.inner);
        self.hook.after(&self.inner, &op, &|| outputs(&result));
        result
    }
}

impl<B, H> std::ops::Deref for Hooked<B, H> {
    type Target = H;

    fn deref(&self) -> &H {
        &self.hook
    }
}
