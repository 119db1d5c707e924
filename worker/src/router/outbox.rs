//! Where the worker's answers go: `postMessage` to the page in the browser, a list in a test.

use crate::protocol::OutMessage;

/// Delivers worker → page messages, in order.
pub trait Outbox {
    fn post(&self, message: &OutMessage);
}

/// A closure is an outbox (tests collect messages with one).
impl<F: Fn(&OutMessage)> Outbox for F {
    fn post(&self, message: &OutMessage) {
        self(message)
    }
}
