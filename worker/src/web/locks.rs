//! Web Locks for the router ([`LockManager`]): `www/worker.js` passes `request(name, wait)`
//! over `navigator.locks`, which resolves to a function that lets the lock go once it is
//! granted, or to null when `wait` is false and another context holds it. Which locks are
//! held is kept in Rust alone (`crate::locks::Locks`).

use js_sys::{Function, Promise};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

use crate::locks::LockManager;

/// `navigator.locks` through worker.js's `request`; `None`: no Web Locks, every lock granted.
pub struct WebLocks {
    pub request: Option<Function>,
}

/// A granted Web Lock: dropping it calls its release function.
pub struct WebLock(Option<Function>);

impl Drop for WebLock {
    fn drop(&mut self) {
        if let Some(release) = self.0.take() {
            let _ = release.call0(&JsValue::NULL);
        }
    }
}

impl LockManager for WebLocks {
    type Lock = WebLock;

    async fn request(&self, name: &str, wait: bool) -> Option<WebLock> {
        let Some(request) = &self.request else { return Some(WebLock(None)) };
        let promise = request.call2(&JsValue::NULL, &JsValue::from_str(name), &JsValue::from_bool(wait));
        // A browser whose Web Locks fail cannot coordinate tabs; training still works.
        let Ok(granted) = promise.map(|p| JsFuture::from(Promise::from(p))) else {
            return Some(WebLock(None));
        };
        match granted.await {
            Ok(release) if release.is_null() || release.is_undefined() => None,
            Ok(release) => Some(WebLock(release.dyn_into::<Function>().ok())),
            Err(_) => Some(WebLock(None)),
        }
    }
}
