//! The browser's storage quota: how much is used and allowed, and whether this origin's
//! data survives storage pressure.

use js_sys::Reflect;
use wasm_bindgen::JsValue;

use super::js::{await_promise, describe, storage_manager};
use crate::error::{CkptError, Result};

/// `navigator.storage.estimate()`, in bytes, for this origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StorageEstimate {
    /// Bytes this origin stores.
    pub usage_bytes: u64,
    /// Bytes it may store.
    pub quota_bytes: u64,
}

fn number(value: &JsValue, field: &str) -> u64 {
    Reflect::get(value, &field.into()).ok().and_then(|v| v.as_f64()).unwrap_or(0.0) as u64
}

/// How much storage this origin uses and may use.
pub async fn estimate() -> Result<StorageEstimate> {
    let failed = |e: JsValue| CkptError::Unavailable {
        what: "navigator.storage.estimate()".into(),
        reason: describe(&e),
    };
    let promise = storage_manager()?.estimate().map_err(failed)?;
    let value = await_promise(promise).await.map_err(failed)?;
    Ok(StorageEstimate { usage_bytes: number(&value, "usage"), quota_bytes: number(&value, "quota") })
}

/// Asks the browser to keep this origin's storage under pressure
/// (`navigator.storage.persist()`), returning whether it is persistent. In a worker,
/// where `persist()` does not exist, reports `persisted()`: the page has to ask.
pub async fn request_persistence() -> Result<bool> {
    let failed = |e: JsValue| CkptError::Unavailable {
        what: "navigator.storage.persist()".into(),
        reason: describe(&e),
    };
    let manager = storage_manager()?;
    let has_persist = Reflect::has(&manager, &"persist".into()).unwrap_or(false);
    let promise = if has_persist { manager.persist() } else { manager.persisted() }.map_err(failed)?;
    Ok(await_promise(promise).await.map_err(failed)?.is_truthy())
}
