//! [`Abandon`] and [`Abandonable`]: whole training steps on the CPU that a page message can
//! still cut short, by giving the step up and taking it again later.
//!
//! Why: a wasm call cannot be interrupted, and the worker must answer `pause` and `stop`
//! within 200 ms. Cutting every step into small row parts (see [`crate::row_parts`]) keeps each
//! call short but makes each op small, and handing small ops to wasm-bindgen-rayon's threads
//! and back costs more than the work (the threads build trained `medium` at 0.6× the
//! single-threaded SIMD build that way). So when the page can tell the worker, *while a wasm
//! call runs*, that a message is waiting, the worker takes whole steps instead:
//!
//! - The page shares a counter in a `SharedArrayBuffer` (`init.pendingMessages`): it adds 1
//!   before posting each message, and `worker.js` subtracts 1 as it begins handling each.
//!   The page's main thread is never blocked by the worker's wasm call, so the counter is
//!   above zero exactly while a message waits ([`Abandon::message_waiting`]).
//! - The session [`Abandon::arm`]s before a unit of work (a step, a validation batch). The
//!   backend, wrapped in [`Abandonable`], looks at the counter before each op; once a
//!   message waits it stops computing: every later op returns a placeholder of the right
//!   size without running its kernel, so the rest of the unit costs next to nothing.
//! - Before anything lasting is written (AdamW, the gradient sums, the validation total)
//!   the trainer asks whether to give the unit up ([`Abandon::settle`], passed as
//!   `give_up` to `Trainer::queue_part` / `Evaluation::next_part_unless`); `settle`
//!   also disarms, so what follows it always runs in full. A unit given up is dropped and
//!   taken again from its start later: the batch comes from the sampler state, which only a
//!   finished step advances, and dropout masks from (seed, step), so the run takes exactly
//!   the steps it would have taken uninterrupted. After [`MAX_GIVE_UPS_IN_A_ROW`] units
//!   given up in a row the next runs in full, so a page posting without pause cannot stall
//!   the run; a pause or stop starts that count afresh ([`Abandon::forget_given_up`]).
//!
//! Ops that write into buffers the caller passes ([`tinygpt_tensor::Backend::copy`],
//! [`tinygpt_tensor::Backend::adamw`]) and memory ops always run, so a skipped op can only
//! ever produce a fresh, meaningless buffer of the unit being given up, never touch
//! parameters, moments or anything else that outlives the unit. Without a counter ([`Abandon::never`]) nothing is ever skipped
//! and the worker falls back to row parts.

mod hook;

use std::cell::Cell;
use std::fmt;

pub use hook::{Abandonable, SkipWhenAbandoned};

/// Whether a page message waits (reads the shared counter); `None`: the page shares none.
type Probe = Box<dyn Fn() -> bool>;

/// Units given up in a row after which the next one is taken in full, messages or not: a
/// page that posted faster than a unit takes would otherwise have every unit given up, and
/// the run would never move. Such a unit answers its message only when it ends (a whole
/// step: 0.1–1.5 s in wasm), which only a page posting that often can cause.
pub const MAX_GIVE_UPS_IN_A_ROW: u32 = 3;

/// The switch between the session (arms it around a unit of work) and [`Abandonable`]
/// (checks it before each op). Single-threaded: ops are called from the worker's thread
/// (rayon's threads only run inside a kernel).
pub struct Abandon {
    probe: Option<Probe>,
    /// Whether a `pause` or `stop` waits (the counter's element 1), if the page counts them.
    command_probe: Option<Probe>,
    armed: Cell<bool>,
    /// A message was seen since [`Abandon::arm`]: ops are being skipped.
    tripped: Cell<bool>,
    /// Units given up since the last one that ran in full (see [`MAX_GIVE_UPS_IN_A_ROW`]).
    given_up_in_a_row: Cell<u32>,
}

impl fmt::Debug for Abandon {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Abandon")
            .field("available", &self.is_available())
            .field("armed", &self.armed.get())
            .field("tripped", &self.tripped.get())
            .finish()
    }
}

impl Abandon {
    /// A switch that asks `message_waiting` (the page's shared counter is above zero).
    pub fn new(message_waiting: impl Fn() -> bool + 'static) -> Self {
        Abandon { probe: Some(Box::new(message_waiting)), ..Abandon::never() }
    }

    /// Also asks `command_waiting` (a `pause` or `stop` waits): such a message cuts short
    /// even the unit taken in full after [`MAX_GIVE_UPS_IN_A_ROW`] given up, which only
    /// other messages can cause, so pause and stop never wait for a whole step.
    pub fn with_commands(self, command_waiting: impl Fn() -> bool + 'static) -> Self {
        Abandon { command_probe: Some(Box::new(command_waiting)), ..self }
    }

    /// No counter (no `SharedArrayBuffer`, or a client that shares none): never abandons.
    pub fn never() -> Self {
        Abandon {
            probe: None,
            command_probe: None,
            armed: Cell::new(false),
            tripped: Cell::new(false),
            given_up_in_a_row: Cell::new(0),
        }
    }

    /// Whether units can be given up, so the worker may take whole steps.
    pub fn is_available(&self) -> bool {
        self.probe.is_some()
    }

    /// Whether a page message is waiting now.
    pub fn message_waiting(&self) -> bool {
        self.probe.as_ref().is_some_and(|waiting| waiting())
    }

    /// Starts watching for messages: from now until [`Abandon::settle`], an op called while
    /// a message waits (and every op after it) is skipped; unless [`MAX_GIVE_UPS_IN_A_ROW`]
    /// units in a row were given up, in which case only a `pause` or `stop` cuts this one
    /// short (where the page counts them, [`Abandon::with_commands`]).
    pub fn arm(&self) {
        let given_up = if self.tripped.replace(false) { self.given_up_in_a_row.get() + 1 } else { 0 };
        self.given_up_in_a_row.set(given_up);
        self.armed.set(self.is_available());
    }

    /// Forgets the units given up so far, so the next one may be given up again: for a run
    /// that pauses or stops. [`MAX_GIVE_UPS_IN_A_ROW`] guards against a page whose messages
    /// never let a unit finish, which a pause is not (it ends the training the units are
    /// for); counted, three pauses and resumes within one step (1.5–2.8 s of `medium` on the
    /// scalar build) made the next stop wait for that whole step.
    pub fn forget_given_up(&self) {
        self.tripped.set(false);
        self.given_up_in_a_row.set(0);
    }

    /// Stops watching (ops run in full again) and says whether ops were skipped since
    /// [`Abandon::arm`], i.e. whether the unit must be given up. Idempotent.
    pub fn settle(&self) -> bool {
        self.armed.set(false);
        self.tripped.get()
    }

    /// Whether a `pause` or `stop` is waiting now (never, where the page does not count them).
    fn command_waiting(&self) -> bool {
        self.command_probe.as_ref().is_some_and(|waiting| waiting())
    }

    /// Whether this unit runs in full unless a `pause` or `stop` waits (see
    /// [`MAX_GIVE_UPS_IN_A_ROW`]).
    fn commands_only(&self) -> bool {
        self.given_up_in_a_row.get() >= MAX_GIVE_UPS_IN_A_ROW
    }

    /// Whether the op about to run should be skipped (see the module docs).
    fn skip_op(&self) -> bool {
        if !self.armed.get() {
            return false;
        }
        if !self.tripped.get() && self.message_waiting() && (!self.commands_only() || self.command_waiting())
        {
            self.tripped.set(true);
        }
        self.tripped.get()
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use super::*;

    #[test]
    fn ops_are_skipped_only_while_armed_from_the_first_waiting_message_on() {
        let waiting = Rc::new(Cell::new(false));
        let abandon = Abandon::new({
            let waiting = Rc::clone(&waiting);
            move || waiting.get()
        });
        assert!(abandon.is_available());
        waiting.set(true);
        assert!(!abandon.skip_op(), "not armed: never skipped");
        waiting.set(false);
        abandon.arm();
        assert!(!abandon.skip_op());
        waiting.set(true);
        assert!(abandon.skip_op());
        waiting.set(false);
        assert!(abandon.skip_op(), "once tripped, the rest of the unit is skipped too");
        assert!(abandon.settle());
        assert!(abandon.settle(), "idempotent");
        assert!(!abandon.skip_op(), "settled: ops run again (AdamW is never skipped)");
        abandon.arm();
        assert!(!abandon.skip_op(), "arming starts afresh");
        assert!(!abandon.settle());
    }

    #[test]
    fn after_units_given_up_in_a_row_the_next_runs_in_full() {
        let abandon = Abandon::new(|| true);
        for _ in 0..MAX_GIVE_UPS_IN_A_ROW {
            abandon.arm();
            assert!(abandon.skip_op());
            assert!(abandon.settle(), "given up");
        }
        abandon.arm();
        assert!(!abandon.skip_op(), "a message always waits, yet this unit runs in full");
        assert!(!abandon.settle(), "and is kept");
        abandon.arm();
        assert!(abandon.skip_op(), "the count starts again after a unit kept");
    }

    #[test]
    fn a_pause_or_stop_cuts_short_even_the_unit_taken_in_full() {
        let command = Rc::new(Cell::new(false));
        let abandon = Abandon::new(|| true).with_commands({
            let command = Rc::clone(&command);
            move || command.get()
        });
        for _ in 0..MAX_GIVE_UPS_IN_A_ROW {
            abandon.arm();
            assert!(abandon.skip_op());
            assert!(abandon.settle());
        }
        abandon.arm();
        assert!(!abandon.skip_op(), "other messages wait for this unit");
        command.set(true);
        assert!(abandon.skip_op(), "a pause does not");
        assert!(abandon.settle(), "given up");
    }

    #[test]
    fn a_unit_after_forgetting_can_be_given_up_again() {
        let abandon = Abandon::new(|| true);
        for _ in 0..2 * MAX_GIVE_UPS_IN_A_ROW {
            abandon.arm();
            assert!(abandon.skip_op());
            assert!(abandon.settle(), "given up");
            abandon.forget_given_up();
        }
    }

    #[test]
    fn without_a_counter_nothing_is_ever_skipped() {
        let abandon = Abandon::never();
        assert!(!abandon.is_available());
        abandon.arm();
        assert!(!abandon.skip_op());
        assert!(!abandon.message_waiting());
        assert!(!abandon.settle());
    }
}
