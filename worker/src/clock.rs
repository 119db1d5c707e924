//! Milliseconds for time-budgeted slices and throughput: `Instant` natively, `Date.now()`
//! in the browser (std's `Instant` panics on wasm32-unknown-unknown).

/// A monotonic-enough millisecond clock.
pub trait Clock {
    fn now_ms(&self) -> f64;
}

/// The platform clock.
#[derive(Clone, Debug)]
#[cfg_attr(target_arch = "wasm32", derive(Default))]
pub struct SystemClock {
    #[cfg(not(target_arch = "wasm32"))]
    start: std::time::Instant,
}

#[cfg(not(target_arch = "wasm32"))]
impl Default for SystemClock {
    fn default() -> Self {
        SystemClock { start: std::time::Instant::now() }
    }
}

impl Clock for SystemClock {
    #[cfg(not(target_arch = "wasm32"))]
    fn now_ms(&self) -> f64 {
        self.start.elapsed().as_secs_f64() * 1e3
    }

    #[cfg(target_arch = "wasm32")]
    fn now_ms(&self) -> f64 {
        js_sys::Date::now()
    }
}
