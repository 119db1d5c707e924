//! [`Abandonable`]: a backend in [`Hooked`] with the [`SkipWhenAbandoned`] hook: each op
//! either runs on `B` or, once [`Abandon`] has seen a waiting message, returns placeholders
//! of its documented output sizes without running (the wrapper's [`Flow::Skip`]).

use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;

use tinygpt_tensor::{Backend, Effect, Flow, Hook, Hooked, Op};

use super::Abandon;

/// `B` whose ops stop computing while an armed [`Abandon`] has seen a page message (see the
/// module docs of [`super`]). Results are `B`'s, bit for bit, whenever nothing is skipped.
pub type Abandonable<B> = Hooked<B, SkipWhenAbandoned<<B as Backend>::Storage>>;

/// The hook of [`Abandonable`]: skips ops that return fresh buffers ([`Effect::Computes`])
/// once the unit is being given up. Memory ops, copies and AdamW always run: they write
/// buffers that outlive the unit (the wrapper never skips them).
///
/// Every skipped op of one length gets the same placeholder buffer. The rest of a
/// GPT-2-sized step skipped with fresh zeros for each op zeroed about a gigabyte: 190 ms
/// natively and more in a tab, most of what pause then waited for. Sharing is safe because
/// only skipped ops return placeholders and a unit that skipped any is given up whole; the
/// placeholders go as soon as an op runs again.
#[derive(Clone)]
pub struct SkipWhenAbandoned<S> {
    abandon: Rc<Abandon>,
    /// `(length, buffer)`, at most one per length.
    placeholders: Rc<RefCell<Vec<(usize, S)>>>,
}

impl<S> SkipWhenAbandoned<S> {
    /// The hook for `abandon`'s switch.
    pub fn new(abandon: Rc<Abandon>) -> Self {
        SkipWhenAbandoned { abandon, placeholders: Rc::default() }
    }
}

impl<S> fmt::Debug for SkipWhenAbandoned<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SkipWhenAbandoned")
            .field("abandon", &self.abandon)
            .field("placeholders", &self.placeholders.borrow().len())
            .finish()
    }
}

impl<B: Backend> Hook<B> for SkipWhenAbandoned<B::Storage>
where
    B::Storage: 'static,
{
    fn before(&self, _inner: &B, op: &Op<'_, B::Storage>) -> Flow {
        if op.effect != Effect::Computes {
            return Flow::Run;
        }
        if self.abandon.skip_op() {
            return Flow::Skip;
        }
        self.placeholders.borrow_mut().clear();
        Flow::Run
    }

    fn placeholder(&self, inner: &B, len: usize) -> B::Storage {
        let mut kept = self.placeholders.borrow_mut();
        if let Some((_, buffer)) = kept.iter().find(|(kept_len, _)| *kept_len == len) {
            return buffer.clone();
        }
        let buffer = inner.zeros(len);
        kept.push((len, buffer.clone()));
        buffer
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use tinygpt_kernels_cpu::CpuBackend;
    use tinygpt_tensor::block_on;

    use super::*;

    #[test]
    fn skipped_ops_of_one_length_share_a_placeholder_until_an_op_runs() {
        let waiting = Rc::new(Cell::new(false));
        let abandon = Rc::new(Abandon::new({
            let waiting = Rc::clone(&waiting);
            move || waiting.get()
        }));
        let backend = Abandonable::with_hook(CpuBackend::new(1), SkipWhenAbandoned::new(Rc::clone(&abandon)));
        let x = backend.upload(&[1.0; 6]);
        abandon.arm();
        waiting.set(true);
        let (scaled, added, short) =
            (backend.scale(&x, 2.0, 6), backend.add(&x, &x, 6), backend.sum_rows(&x, 2, 3));
        assert!(scaled.same_buffer(&added), "one placeholder for every skipped op of one length");
        assert!(!scaled.same_buffer(&short) && !scaled.same_buffer(&x));
        assert_eq!(backend.hook().placeholders.borrow().len(), 2);

        assert!(abandon.settle(), "the unit is given up");
        waiting.set(false);
        abandon.arm();
        let ran = backend.scale(&x, 2.0, 6);
        assert!(backend.hook().placeholders.borrow().is_empty(), "dropped once an op runs");
        assert!(!ran.same_buffer(&scaled));
        assert_eq!(block_on(tinygpt_tensor::read_vec(&backend, &ran)).unwrap(), vec![2.0; 6]);
    }
}
