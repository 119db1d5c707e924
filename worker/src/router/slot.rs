//! The engine's slot: a call that needs the session (an [`Engine`]) takes it out for its
//! whole duration ([`Held`], which puts it back when dropped), so the session can be used
//! across awaited device readbacks (a WebGPU `mapAsync` resolves only when the event loop
//! turns) without a `RefCell` borrow living across an `await`.

use std::cell::RefCell;

use crate::engine::Engine;
use crate::error::WorkerError;
use crate::protocol::ErrorCode;

/// The session while no call holds it.
#[derive(Debug)]
pub struct Slot(RefCell<Option<Engine>>);

impl Slot {
    pub fn new(engine: Engine) -> Self {
        Slot(RefCell::new(Some(engine)))
    }

    /// Takes the session for the call running; refused when another call holds it.
    pub fn take(&self) -> Result<Held<'_>, WorkerError> {
        let engine = self.0.borrow_mut().take().ok_or_else(|| {
            WorkerError::new(ErrorCode::Internal, "Internal error: two calls into the worker overlapped.")
        })?;
        Ok(Held { slot: self, engine: Some(engine) })
    }

    /// The training run's lock, read between calls (`None` while a call holds the session).
    pub fn training_lock(&self) -> Option<String> {
        self.0.borrow().as_ref().and_then(Engine::training_lock)
    }
}

/// The session taken out of its [`Slot`] by the call running; dropping it puts it back.
pub struct Held<'a> {
    slot: &'a Slot,
    engine: Option<Engine>,
}

impl std::ops::Deref for Held<'_> {
    type Target = Engine;
    fn deref(&self) -> &Self::Target {
        self.engine.as_ref().expect("held until dropped")
    }
}

impl std::ops::DerefMut for Held<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.engine.as_mut().expect("held until dropped")
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        *self.slot.0.borrow_mut() = self.engine.take();
    }
}
