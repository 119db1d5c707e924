//! A backend that counts the calls it forwards to the CPU backend, by op name, so tests
//! can show how many device calls a piece of training code makes (optimizer calls per
//! step, readbacks per tick): the CPU backend in [`Hooked`] with the [`Counts`] hook, so
//! every op is counted under its own name as the CPU backend receives it (a `copy` of many
//! ranges as one `copy`).
//! Test support: behind the `counting` feature.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tinygpt_tensor::{Flow, Hook, Hooked, Op};

use crate::CpuBackend;

/// The CPU backend, counting every call. Clones share the counts.
pub type Counting = Hooked<CpuBackend, Counts>;

/// The counting hook of [`Counting`].
#[derive(Clone, Debug, Default)]
pub struct Counts {
    calls: Arc<Mutex<BTreeMap<&'static str, usize>>>,
}

impl Counts {
    /// The calls of `op` made since the last `take`, leaving the counts as they are.
    pub fn count_of(&self, op: &str) -> usize {
        self.calls.lock().unwrap().get(op).copied().unwrap_or(0)
    }

    /// The calls made since the last `take`, by op name, and a fresh count.
    pub fn take(&self) -> BTreeMap<&'static str, usize> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

impl Hook<CpuBackend> for Counts {
    fn name(&self, _inner: &CpuBackend) -> String {
        "counting cpu".into()
    }

    fn before(
        &self,
        _inner: &CpuBackend,
        op: &Op<'_, <CpuBackend as tinygpt_tensor::Backend>::Storage>,
    ) -> Flow {
        *self.calls.lock().unwrap().entry(op.name).or_default() += 1;
        Flow::Run
    }
}
