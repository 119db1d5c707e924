//! The JavaScript face of the worker (wasm32 only), a thin shim over [`Router`]:
//! `new WorkerApp(post, env, requestLock, pending)`, then `handle(message)` for each page
//! message and `tick(budgetMs)` while `tick` resolves to true. `www/worker.js` owns the
//! event loop and calls these one at a time (a promise queue).
//!
//! Here: JS values ↔ protocol types, and the browser's side of the router's traits
//! (`postMessage`, `Date.now()`, [`storage`]: OPFS/IndexedDB/memory, [`locks`]: Web Locks,
//! [`fetch`]: downloads).

mod fetch;
mod locks;
mod storage;

use std::rc::Rc;

use js_sys::{Function, Promise};
use serde::Serialize;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use crate::abandon::Abandon;
use crate::clock::SystemClock;
use crate::error::WorkerError;
use crate::incoming::{unreadable, Received};
use crate::protocol::{EngineKind, InMessage, OutMessage};
use crate::router::{BrowserFacts, Environment, Outbox, Platform, Router};
use locks::WebLocks;
use storage::BrowserStorage;

/// This build's CPU kernels: SIMD when compiled with `+simd128`, on threads in the
/// `threads` builds, with relaxed SIMD's multiply-add when compiled with `+relaxed-simd`.
const WASM_BACKEND: EngineKind = if cfg!(all(feature = "threads", target_feature = "relaxed-simd")) {
    EngineKind::WasmRelaxedSimdThreads
} else if cfg!(feature = "threads") {
    EngineKind::WasmSimdThreads
} else if cfg!(target_feature = "relaxed-simd") {
    EngineKind::WasmRelaxedSimd
} else if cfg!(target_feature = "simd128") {
    EngineKind::WasmSimd
} else {
    EngineKind::Wasm
};

#[wasm_bindgen]
pub struct WorkerApp {
    router: Rc<Router<BrowserStorage, WebLocks>>,
}

#[wasm_bindgen]
impl WorkerApp {
    /// `post(message)` delivers a worker → page message; `env` is `{simd, relaxedSimd,
    /// crossOriginIsolated, hardwareThreads, webgpu, webgpuNote}`; `request_lock(name, wait)`
    /// resolves to a Web Lock's release function, or null when `wait` is false and another
    /// context holds it (undefined: no locking; see [`locks`]); `pending` is the page's
    /// message counter from `init.pendingMessages` (an `Int32Array` over a
    /// `SharedArrayBuffer`, above zero while a page message waits; see [`crate::abandon`]),
    /// or undefined: then steps are taken in row parts.
    #[wasm_bindgen(constructor)]
    pub fn new(post: Function, env: JsValue, request_lock: JsValue, pending: JsValue) -> WorkerApp {
        console_error_panic_hook::set_once();
        let browser: BrowserFacts = serde_wasm_bindgen::from_value(env).unwrap_or_default();
        let platform = Platform {
            outbox: Box::new(JsOutbox(post)),
            clock: Box::new(SystemClock::default()),
            storage: BrowserStorage,
            locks: WebLocks { request: request_lock.dyn_into::<Function>().ok() },
            abandon: Rc::new(abandon(pending)),
            fetch: Box::new(fetch::WebFetch),
        };
        let env = Environment { cpu: WASM_BACKEND, threads: threads(), browser };
        WorkerApp { router: Rc::new(Router::new(platform, env)) }
    }

    /// Handles one page message; resolves when its answers are posted. Errors are posted
    /// as `error` messages, never thrown.
    pub fn handle(&self, message: JsValue) -> Promise {
        let router = Rc::clone(&self.router);
        future_to_promise(async move {
            match read_message(message) {
                Ok(m) => router.handle(m).await,
                Err(e) => router.refuse(&e),
            }
            Ok(JsValue::UNDEFINED)
        })
    }

    /// A page message has arrived: the tick waiting for the GPU (if any) stops waiting and
    /// resolves, so the message is handled next instead of after the device finishes.
    /// Call it as the message arrives, before queueing it.
    pub fn interrupt(&self) {
        self.router.interrupt();
    }

    /// Works for about `budget_ms` (training, evaluating or sampling), saving a checkpoint
    /// when one is due; resolves to whether more ticks are needed.
    pub fn tick(&self, budget_ms: f64) -> Promise {
        let router = Rc::clone(&self.router);
        future_to_promise(async move { Ok(JsValue::from_bool(router.tick(budget_ms).await)) })
    }
}

/// `post(message)` from worker.js, with the message as a plain JS object.
struct JsOutbox(Function);

impl Outbox for JsOutbox {
    fn post(&self, message: &OutMessage) {
        let serializer = serde_wasm_bindgen::Serializer::new().serialize_maps_as_objects(true);
        match message.serialize(&serializer) {
            Ok(value) => {
                let _ = self.0.call1(&JsValue::NULL, &value);
            }
            Err(e) => {
                web_sys::console::error_1(&JsValue::from_str(&format!("cannot serialize {message:?}: {e}")))
            }
        }
    }
}

/// Gives up the CPU unit in progress while the page's counter says a message waits
/// (`Atomics.load`: the page's main thread writes it while a call runs); never without one.
fn abandon(pending: JsValue) -> Abandon {
    let Ok(counter) = pending.dyn_into::<js_sys::Int32Array>() else { return Abandon::never() };
    let waiting = |element: u32| {
        let counter = counter.clone();
        move || js_sys::Atomics::load(&counter, element).is_ok_and(|n| n > 0)
    };
    let abandon = Abandon::new(waiting(0));
    // Element 1, where the page has it, counts the waiting `pause` and `stop` alone.
    if counter.length() > 1 {
        abandon.with_commands(waiting(1))
    } else {
        abandon
    }
}

/// Decodes a page message; what cannot be read is answered in the protocol's words.
fn read_message(message: JsValue) -> Result<InMessage, WorkerError> {
    let what = if message.is_null() {
        return Err(unreadable(Received::NotAnObject("null"), ""));
    } else if message.is_undefined() {
        return Err(unreadable(Received::NotAnObject("undefined"), ""));
    } else if js_sys::Array::is_array(&message) {
        return Err(unreadable(Received::NotAnObject("an array"), ""));
    } else if !message.is_object() {
        let kind = message.js_typeof().as_string().unwrap_or_default();
        return Err(unreadable(Received::NotAnObject(&format!("a {kind}")), ""));
    } else {
        match js_sys::Reflect::get(&message, &JsValue::from_str("type")).ok().and_then(|t| t.as_string()) {
            Some(t) => t,
            None => return Err(unreadable(Received::NoType, "")),
        }
    };
    serde_wasm_bindgen::from_value::<InMessage>(message)
        .map_err(|e| unreadable(Received::Type(&what), &e.to_string()))
}

/// The CPU kernels' threads in the threads build; `None` in the single-threaded ones.
fn threads() -> Option<usize> {
    #[cfg(feature = "threads")]
    return Some(rayon::current_num_threads());
    #[cfg(not(feature = "threads"))]
    None
}
