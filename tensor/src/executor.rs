use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// Drives a readback future to completion on the current thread.
///
/// Meant for synchronous callers (the CLI, tests) on backends whose futures complete by
/// polling: the CPU backend's are ready at once, a native GPU backend waits on its device
/// inside `poll`. In a browser a WebGPU readback completes only when the event loop
/// turns, so async code there must `.await` instead of calling this.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::yield_now();
    }
}
