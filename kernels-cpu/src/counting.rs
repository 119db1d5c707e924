//! A backend that counts the calls it forwards to the CPU backend, by op name, so tests
//! can show how many device calls a piece of training code makes (optimizer calls per
//! step, readbacks per tick). Every `Backend` method is forwarded and counted under its
//! own name as the CPU backend receives it (`copy_many` as one `copy_many`, not as the
//! `copy`s of its default), except `read_into`, which counts as a `read`: both are one
//! readback. Test support: behind the `counting` feature.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::CpuBackend;

/// The CPU backend, counting every call. Clones share the counts.
#[derive(Clone, Debug, Default)]
pub struct Counting {
    inner: CpuBackend,
    calls: Arc<Mutex<BTreeMap<&'static str, usize>>>,
}

impl Counting {
    /// Counts the calls `inner` receives.
    pub fn new(inner: CpuBackend) -> Self {
        Counting { inner, calls: Arc::default() }
    }

    /// The calls of `op` made since the last `take`, leaving the counts as they are.
    pub fn count_of(&self, op: &str) -> usize {
        self.calls.lock().unwrap().get(op).copied().unwrap_or(0)
    }

    /// The calls made since the last `take`, by op name, and a fresh count.
    pub fn take(&self) -> BTreeMap<&'static str, usize> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }

    fn count(&self, op: &'static str) -> &CpuBackend {
        let op = if op == "read_into" { "read" } else { op };
        *self.calls.lock().unwrap().entry(op).or_default() += 1;
        &self.inner
    }
}

// Every method forwarded, generated from the trait's one list (`forward_backend!`): a
// method left to its default would count as the ops of its default (`copy_many` as one
// `copy` per range), which the real backend never receives.
tinygpt_tensor::forward_backend! {
    impl Backend for Counting {
        inner: CpuBackend,
        name: |this| "counting cpu".into(),
        route: |this, op| this.count(op),
    }
}
