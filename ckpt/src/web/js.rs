//! Small bridges between browser APIs and ckpt: the global scope, promises and request
//! events as futures, and DOM errors as [`CkptError`]s.

use js_sys::{Function, Promise, Reflect};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    DedicatedWorkerGlobalScope, DomException, IdbFactory, StorageManager, Window, WorkerGlobalScope,
};

use crate::error::CkptError;

/// The `StorageManager` of the page or worker this runs in.
pub(crate) fn storage_manager() -> Result<StorageManager, CkptError> {
    let global = js_sys::global();
    if let Some(window) = global.dyn_ref::<Window>() {
        return Ok(window.navigator().storage());
    }
    if let Some(worker) = global.dyn_ref::<WorkerGlobalScope>() {
        return Ok(worker.navigator().storage());
    }
    Err(unavailable("navigator.storage", "neither a window nor a worker"))
}

/// The `indexedDB` factory of the page or worker this runs in.
pub(crate) fn indexed_db() -> Result<IdbFactory, CkptError> {
    let global = js_sys::global();
    let factory = if let Some(window) = global.dyn_ref::<Window>() {
        window.indexed_db()
    } else if let Some(worker) = global.dyn_ref::<WorkerGlobalScope>() {
        worker.indexed_db()
    } else {
        return Err(unavailable("IndexedDB", "neither a window nor a worker"));
    };
    factory
        .map_err(|e| unavailable("IndexedDB", &describe(&e)))?
        .ok_or_else(|| unavailable("IndexedDB", "disabled"))
}

/// Whether OPFS sync access handles can be used: only in a dedicated worker, and only
/// where the browser has them.
pub(crate) fn sync_access_handles_available() -> bool {
    let global = js_sys::global();
    if global.dyn_ref::<DedicatedWorkerGlobalScope>().is_none() {
        return false;
    }
    let prototype = Reflect::get(&global, &"FileSystemFileHandle".into())
        .and_then(|class| Reflect::get(&class, &"prototype".into()));
    prototype
        .is_ok_and(|p| p.is_object() && Reflect::has(&p, &"createSyncAccessHandle".into()).unwrap_or(false))
}

pub(crate) async fn await_promise(promise: Promise) -> Result<JsValue, JsValue> {
    JsFuture::from(promise).await
}

/// Waits for `target` (an IDB request or transaction) to fire `ok` or one of `errs`,
/// resolving with `value()` or rejecting with `error()` read at that moment. The handlers
/// are removed (and their closures freed) afterwards.
pub(crate) async fn await_event(
    target: &JsValue,
    ok: &str,
    errs: &[&str],
    value: impl Fn() -> JsValue + 'static,
    error: impl Fn() -> JsValue + 'static,
) -> Result<JsValue, JsValue> {
    let mut settle: Option<(Function, Function)> = None;
    let promise = Promise::new(&mut |resolve, reject| settle = Some((resolve, reject)));
    let (resolve, reject) = settle.expect("the Promise executor runs at once");
    let on_ok = Closure::<dyn FnMut()>::new(move || drop(resolve.call1(&JsValue::UNDEFINED, &value())));
    let on_err = Closure::<dyn FnMut()>::new(move || drop(reject.call1(&JsValue::UNDEFINED, &error())));
    Reflect::set(target, &ok.into(), on_ok.as_ref())?;
    for e in errs {
        Reflect::set(target, &(*e).into(), on_err.as_ref())?;
    }
    let out = JsFuture::from(promise).await;
    for name in std::iter::once(&ok).chain(errs) {
        let _ = Reflect::set(target, &(*name).into(), &JsValue::NULL);
    }
    out
}

/// The DOM exception name of `e` (`"NotFoundError"`, `"QuotaExceededError"`, …).
pub(crate) fn error_name(e: &JsValue) -> Option<String> {
    e.dyn_ref::<DomException>()
        .map(DomException::name)
        .or_else(|| Reflect::get(e, &"name".into()).ok().and_then(|n| n.as_string()))
}

pub(crate) fn describe(e: &JsValue) -> String {
    if let Some(dom) = e.dyn_ref::<DomException>() {
        return format!("{}: {}", dom.name(), dom.message());
    }
    if let Some(err) = e.dyn_ref::<js_sys::Error>() {
        return format!("{}: {}", String::from(err.name()), String::from(err.message()));
    }
    e.as_string().unwrap_or_else(|| format!("{e:?}"))
}

/// A failed browser storage call on `file` writing `bytes` bytes, as a [`CkptError`]:
/// `QuotaExceededError` becomes [`CkptError::QuotaExceeded`].
pub(crate) fn storage_error(file: String, e: &JsValue, bytes: u64) -> CkptError {
    if error_name(e).as_deref() == Some("QuotaExceededError") {
        return CkptError::QuotaExceeded { needed_bytes: bytes };
    }
    CkptError::Store { file, reason: describe(e) }
}

pub(crate) fn unavailable(what: &str, reason: &str) -> CkptError {
    CkptError::Unavailable { what: what.to_string(), reason: reason.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_bindgen_test::*;

    wasm_bindgen_test_configure!(run_in_browser);

    #[wasm_bindgen_test]
    fn quota_errors_carry_the_bytes_needed() {
        let e = DomException::new_with_message_and_name("full", "QuotaExceededError").unwrap();
        let err = storage_error("opfs:x/weights.f32".into(), &e, 1234);
        assert!(matches!(err, CkptError::QuotaExceeded { needed_bytes: 1234 }), "{err}");
        let e = DomException::new_with_message_and_name("gone", "NotReadableError").unwrap();
        let err = storage_error("opfs:x/weights.f32".into(), &e, 1).to_string();
        assert!(err.contains("opfs:x/weights.f32") && err.contains("NotReadableError: gone"), "{err}");
    }
}
