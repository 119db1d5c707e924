//! [`Interrupt`]: lets a page message cut short a tick that is waiting for the GPU.
//!
//! Why: on WebGPU a unit of training is recorded in microseconds and then waited for
//! (`Backend::flush`) while the device runs it, and on a slow adapter (SwiftShader, a
//! software rasterizer) one step of even `tiny` takes seconds. The worker's message queue
//! runs one call at a time, so a `pause` would wait for the device. Instead `worker.js`
//! raises the interrupt as a message arrives; the tick stops waiting, returns, and the
//! message is handled at once. The unit keeps running on the device; whatever comes next
//! (a read, a checkpoint, the next unit) is queued behind it, so nothing is reordered. On
//! the CPU backend a flush is ready at once and the interrupt changes nothing.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::pin;
use std::task::{Poll, Waker};

/// A flag a message raises and the running tick's awaits watch (single-threaded: the
/// worker's event loop).
#[derive(Debug, Default)]
pub struct Interrupt {
    raised: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl Interrupt {
    /// Asks the running tick to stop waiting; wakes it if it is waiting now.
    pub fn raise(&self) {
        self.raised.set(true);
        if let Some(w) = self.waker.borrow_mut().take() {
            w.wake();
        }
    }

    /// Forgets an earlier request (at the start of a tick: a message that arrived before it
    /// has already been handled, since the queue runs calls in order).
    pub fn clear(&self) {
        self.raised.set(false);
    }

    pub fn is_raised(&self) -> bool {
        self.raised.get()
    }

    /// Awaits `future` unless the interrupt is raised first: `Some(output)`, or `None` when
    /// interrupted (then `future` is dropped; for a flush that only stops the waiting).
    pub async fn race<F: Future>(&self, future: F) -> Option<F::Output> {
        let mut future = pin!(future);
        std::future::poll_fn(|cx| {
            if let Poll::Ready(out) = future.as_mut().poll(cx) {
                return Poll::Ready(Some(out));
            }
            if self.raised.get() {
                return Poll::Ready(None);
            }
            *self.waker.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tinygpt_tensor::block_on;

    #[test]
    fn a_ready_future_wins_and_a_raised_interrupt_ends_a_pending_one() {
        let interrupt = Interrupt::default();
        assert_eq!(block_on(interrupt.race(async { 7 })), Some(7));
        interrupt.raise();
        assert_eq!(block_on(interrupt.race(std::future::pending::<()>())), None);
        interrupt.clear();
        assert!(!interrupt.is_raised());
    }
}
