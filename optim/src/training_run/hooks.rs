//! How a caller may cut a unit of work short. The browser must answer `pause` and `stop`
//! within 200 ms, and a wasm call cannot be interrupted: so a unit that a page message
//! overtook is given up and taken again (`give_up`), and a wait for the GPU ends early when
//! a message arrives (`wait_for_device`). Native callers never give up ([`Unhurried`]).

use std::future::Future;

use tinygpt_tensor::Backend;

use crate::error::TrainError;

/// The caller's say over one unit of [`crate::TrainingRun::advance`].
pub trait UnitHooks {
    /// Called after a part's forward (and backward) pass, before it counts: true drops the
    /// part, which the next unit takes again (see [`crate::Trainer::queue_part`]).
    fn give_up(&self) -> bool;

    /// Called once the training part is queued on the device, to wait for it (the browser
    /// does, so a unit's duration is real and a device failure surfaces while nothing is
    /// read). `Ok(false)` when the wait was cut short: the part goes on on the device, and
    /// at mixed precision the step's update waits for the next unit. The default does not
    /// wait: the device runs the part while the caller records the next.
    fn wait_for_device<B: Backend>(&self, backend: &B) -> impl Future<Output = Result<bool, TrainError>> {
        let _ = backend;
        async { Ok(true) }
    }
}

/// Hooks that never give up and wait in full: the CLI's and the tests'.
#[derive(Clone, Copy, Debug, Default)]
pub struct Unhurried;

impl UnitHooks for Unhurried {
    fn give_up(&self) -> bool {
        false
    }
}
