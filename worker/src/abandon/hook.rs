//! [`Abandonable`]: a backend in [`Hooked`] with the [`SkipWhenAbandoned`] hook: each op
//! either runs on `B` or, once [`Abandon`] has seen a waiting message, returns zeros of its
//! documented output sizes without running (the wrapper's [`Flow::Skip`]).

use std::rc::Rc;

use tinygpt_tensor::{Backend, Effect, Flow, Hook, Hooked, Op};

use super::Abandon;

/// `B` whose ops stop computing while an armed [`Abandon`] has seen a page message (see the
/// module docs of [`super`]). Results are `B`'s, bit for bit, whenever nothing is skipped.
pub type Abandonable<B> = Hooked<B, SkipWhenAbandoned>;

/// The hook of [`Abandonable`]: skips ops that return fresh buffers ([`Effect::Computes`])
/// once the unit is being given up. Memory ops, copies and AdamW always run: they write
/// buffers that outlive the unit (the wrapper never skips them).
#[derive(Clone, Debug)]
pub struct SkipWhenAbandoned(pub Rc<Abandon>);

impl<B: Backend> Hook<B> for SkipWhenAbandoned {
    fn before(&self, _inner: &B, op: &Op<'_, B::Storage>) -> Flow {
        if op.effect == Effect::Computes && self.0.skip_op() {
            Flow::Skip
        } else {
            Flow::Run
        }
    }
}
