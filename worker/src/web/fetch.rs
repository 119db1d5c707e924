//! The browser's `fetch` for the router ([`Fetch`]), reached through `js_sys::Reflect` so
//! the worker needs no more web-sys features: the response's status and headers, then its
//! body through a stream reader, a chunk at a time.

use js_sys::{Function, Promise, Reflect, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

use crate::fetch::{Body, Fetch, LocalFuture};

/// `fetch` of the worker's global scope.
pub struct WebFetch;

impl Fetch for WebFetch {
    fn get<'a>(&'a self, url: &'a str) -> LocalFuture<'a, Result<Box<dyn Body>, String>> {
        Box::pin(async move {
            let global = js_sys::global();
            let response = JsFuture::from(call(&global, "fetch", &[url.into()])?.unchecked_into::<Promise>())
                .await
                .map_err(describe)?;
            let status = get(&response, "status")?.as_f64().unwrap_or(0.0) as u16;
            let headers = get(&response, "headers")?;
            let header = |name: &str| call(&headers, "get", &[name.into()]).ok().and_then(|v| v.as_string());
            // A compressed body's announced length is the compressed one, not what the reader gives.
            let encoded = header("content-encoding").is_some_and(|e| e != "identity");
            let length = header("content-length").and_then(|n| n.trim().parse().ok()).filter(|_| !encoded);
            let body = get(&response, "body")?;
            let reader = if body.is_null() || body.is_undefined() {
                None
            } else {
                Some(call(&body, "getReader", &[])?)
            };
            Ok(Box::new(WebBody { status, length, reader }) as Box<dyn Body>)
        })
    }
}

struct WebBody {
    status: u16,
    length: Option<u64>,
    /// The body's `ReadableStreamDefaultReader` (none for an empty body).
    reader: Option<JsValue>,
}

impl Body for WebBody {
    fn status(&self) -> u16 {
        self.status
    }

    fn length(&self) -> Option<u64> {
        self.length
    }

    fn chunk(&mut self) -> LocalFuture<'_, Result<Option<Vec<u8>>, String>> {
        Box::pin(async move {
            let Some(reader) = &self.reader else { return Ok(None) };
            let read = JsFuture::from(call(reader, "read", &[])?.unchecked_into::<Promise>())
                .await
                .map_err(describe)?;
            if get(&read, "done")?.is_truthy() {
                return Ok(None);
            }
            Ok(Some(get(&read, "value")?.unchecked_into::<Uint8Array>().to_vec()))
        })
    }
}

fn get(target: &JsValue, name: &str) -> Result<JsValue, String> {
    Reflect::get(target, &name.into()).map_err(describe)
}

/// `target.name(...args)`.
fn call(target: &JsValue, name: &str, args: &[JsValue]) -> Result<JsValue, String> {
    let method: Function =
        get(target, name)?.dyn_into().map_err(|_| format!("{name} is not a function here"))?;
    let args: js_sys::Array = args.iter().collect();
    method.apply(target, &args).map_err(describe)
}

fn describe(e: JsValue) -> String {
    if let Some(err) = e.dyn_ref::<js_sys::Error>() {
        return format!("{}: {}", String::from(err.name()), String::from(err.message()));
    }
    e.as_string().unwrap_or_else(|| format!("{e:?}"))
}
