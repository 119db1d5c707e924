//! Downloads, as a platform trait so the router's download logic (progress, truncation,
//! HTTP errors, the cache) is tested natively with a fake server: the browser's `fetch`
//! lives in `web/fetch.rs`.
//!
//! The traits are object-safe (boxed futures) so the router holds one without another type
//! parameter; a download is a handful of calls, so the boxing costs nothing that matters.

use std::future::Future;
use std::pin::Pin;

/// A future bound to this thread (browser handles are).
pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// A response whose body is read a chunk at a time, so progress can be reported as it comes.
pub trait Body {
    /// The HTTP status (200 for a successful GET).
    fn status(&self) -> u16;
    /// The body's length in bytes as the server announced it, when it did (and the body is
    /// not compressed on the wire, where the announced length is not the body's).
    fn length(&self) -> Option<u64>;
    /// The next chunk, `None` at the end, or why the connection failed.
    fn chunk(&mut self) -> LocalFuture<'_, Result<Option<Vec<u8>>, String>>;
}

/// Where downloads come from: the browser's `fetch`, or a test's server.
pub trait Fetch {
    /// Starts a GET of `url`: the response once its status and headers are in, or why there
    /// is none (a network error, a refused cross-origin request).
    fn get<'a>(&'a self, url: &'a str) -> LocalFuture<'a, Result<Box<dyn Body>, String>>;
}

/// No network: every download fails (a router built for tests that download nothing).
pub struct NoFetch;

impl Fetch for NoFetch {
    fn get<'a>(&'a self, _url: &'a str) -> LocalFuture<'a, Result<Box<dyn Body>, String>> {
        Box::pin(async { Err("this worker has no network".to_string()) })
    }
}
